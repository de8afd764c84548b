//! SVM SET_ATTR + GET_ATTR against 1, 1 000 and 100 000 existing ranges: the model keeps its
//! ranges in an ordered map, so the cost per call must not grow with their number (the target:
//! at 100 000 ranges within 3× of the cost at 1 000, and one SET + GET within 20 µs).
//!
//! The calls go straight to the model's `Backend::ioctl` with this process as the caller,
//! which isolates the model from the seccomp round trip. Each range is one page of one
//! anonymous mapping, with a granularity of its own (so no two neighbours are alike). Each
//! iteration sets the granularity of one range, picked by a stride that visits them all out of
//! order, and reads it back. Both calls ask the kernel for the caller's VMAs over the range
//! (`PROCMAP_QUERY`, one ioctl per VMA), a cost that does not depend on the ranges either.
//!
//! The baseline in the same run is one real ioctl system call (`FIONREAD` on a pipe): the
//! ratio says how many plain syscalls one emulated SET + GET costs.

#[path = "../tests/model_support/mod.rs"]
mod model_support;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::abi::{
    KFD_IOCTL_SVM_ATTR_GRANULARITY, KFD_IOCTL_SVM_OP_GET_ATTR, KFD_IOCTL_SVM_OP_SET_ATTR,
    amdkfd_ioc_svm,
};
use model_support::Emu;

const PAGE: u64 = 4096;
const COUNTS: [u64; 3] = [1, 1_000, 100_000];

/// A process with `n` one-page SVM ranges over a mapping of its own.
struct Ranges {
    emu: Emu,
    base: u64,
    n: u64,
    /// The next range to touch, and the stride between touches (coprime with `n`).
    at: u64,
    stride: u64,
}

impl Ranges {
    fn new(n: u64) -> Ranges {
        let emu = Emu::machine("mi300x");
        // SAFETY: a fresh private anonymous mapping nothing else uses; it is never unmapped
        // (the bench process ends with it).
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                (n * PAGE) as usize,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
            )
        }
        .expect("mmap") as u64;
        let ranges = Ranges {
            emu,
            base,
            n,
            at: 0,
            stride: 7919 % n.max(2),
        };
        for i in 0..n {
            ranges.set(i, (i % 60) as u32);
        }
        assert_eq!(
            ranges.emu.model.svm_ranges(std::process::id() as i32).len() as u64,
            n,
            "one range per page"
        );
        ranges
    }

    /// SET_ATTR (`op` 0) or GET_ATTR (1) of the granularity of range `i`; the value.
    fn call(&self, i: u64, op: u32, granularity: u32) -> u32 {
        let mut args = [0u64; 4];
        args[0] = self.base + i * PAGE;
        args[1] = PAGE;
        args[2] = u64::from(op) | 1 << 32;
        args[3] = u64::from(KFD_IOCTL_SVM_ATTR_GRANULARITY) | u64::from(granularity) << 32;
        self.emu
            .ioctl_raw(amdkfd_ioc_svm(1), args.as_mut_ptr() as u64)
            .expect("SVM");
        (args[3] >> 32) as u32
    }

    fn set(&self, i: u64, granularity: u32) {
        self.call(i, KFD_IOCTL_SVM_OP_SET_ATTR, granularity);
    }

    /// `iters` times: SET_ATTR on the next range, GET_ATTR of it.
    fn time(&mut self, iters: u64) -> Duration {
        let start = Instant::now();
        for k in 0..iters {
            let i = self.at;
            self.at = (self.at + self.stride) % self.n;
            let g = (k % 60) as u32;
            self.set(i, g);
            let got = self.call(i, KFD_IOCTL_SVM_OP_GET_ATTR, 0);
            debug_assert_eq!(got, g);
            black_box(got);
        }
        start.elapsed()
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("svm_ranges");
    let (pipe, _writer) = rustix::pipe::pipe().expect("pipe");
    group.bench_function("raw_ioctl", |b| {
        b.iter(|| black_box(rustix::io::ioctl_fionread(&pipe).expect("FIONREAD")))
    });
    for n in COUNTS {
        let mut ranges = Ranges::new(n);
        group.bench_function(format!("set_get_{n}"), |b| {
            b.iter_custom(|iters| ranges.time(iters))
        });
    }
    group.finish();
    ratio::report("svm_ranges", "set_get_1000", "set_get_1", None);
    ratio::report("svm_ranges", "set_get_100000", "set_get_1000", Some(3.0));
    ratio::report("svm_ranges", "set_get_100000", "raw_ioctl", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
