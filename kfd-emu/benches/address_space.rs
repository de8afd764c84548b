//! What the address-space notifications cost a program: one `munmap` (of a fresh anonymous
//! page, mapped in the same iteration) on a thread attached to the model whose process has
//! `/dev/kfd` open and an SVM range elsewhere (seccomp user notification → supervisor worker
//! → the model's MMU-notifier work → `CONTINUE`), against the same `mmap` + `munmap` on a
//! thread that is not filtered, in the same run. The anonymous `mmap` itself is not notified,
//! so the difference is the munmap's round trip.

#[path = "support/attached.rs"]
mod attached;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::time::{Duration, Instant};

use attached::Attached;
use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::Kfd;
use kfd_ioctl::abi::{KFD_IOCTL_SVM_ATTR_GRANULARITY, kfd_ioctl_svm_attribute};
use rustix::mm::{MapFlags, ProtFlags};

const PAGE: usize = 4096;

/// `n` times: maps a private anonymous page and unmaps it.
fn map_unmap(n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        // SAFETY: a fresh anonymous page that nothing else uses, unmapped right away.
        unsafe {
            let page = rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
            .expect("mmap");
            rustix::mm::munmap(black_box(page), PAGE).expect("munmap");
        }
    }
    start.elapsed()
}

/// Attached: `/dev/kfd` open and one SVM range, then [`map_unmap`] timed on request.
fn attached() -> Attached {
    Attached::start(|| {
        let kfd = Kfd::open().expect("the emulated /dev/kfd");
        // SAFETY: a fresh private mapping of 16 pages that stays mapped, untouched by Rust
        // code, until the process ends; it is registered as SVM memory.
        let mem = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                16 * PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .expect("mmap") as u64;
        let attrs = [kfd_ioctl_svm_attribute {
            r#type: KFD_IOCTL_SVM_ATTR_GRANULARITY,
            value: 0,
        }];
        // SAFETY: the range is the mapping above, which lives as long as the process.
        unsafe { kfd.svm_set_attr(mem, 16 * PAGE as u64, &attrs) }.expect("SVM range");
        move |n| {
            let _open = &kfd;
            map_unmap(n)
        }
    })
}

fn bench(c: &mut Criterion) {
    let attached = attached();
    let mut group = c.benchmark_group("address_space");
    group.bench_function("mmap_munmap_native", |b| b.iter_custom(map_unmap));
    group.bench_function("mmap_munmap_notified", |b| {
        b.iter_custom(|n| attached.time(n))
    });
    group.finish();
    ratio::report(
        "address_space",
        "mmap_munmap_notified",
        "mmap_munmap_native",
        None,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
