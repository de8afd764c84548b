//! The cost of the typed wrapper over a raw `libc::ioctl` on the same fd.
//!
//! Both issue `GET_VERSION` and `AVAILABLE_MEMORY` on `/dev/null`, where the kernel fails fast
//! with `ENOTTY`, so the difference is what the wrapper adds: the version gate, the argument
//! struct, the syscall path and building the typed error. Target: ≤ 1.03×.

use std::fs::File;
use std::hint::black_box;
use std::os::fd::{AsRawFd, OwnedFd};

use criterion::{Criterion, criterion_group};
use kfd_ioctl::{Kfd, Version, abi};

#[path = "ratio.rs"]
mod ratio;

fn dev_null() -> OwnedFd {
    OwnedFd::from(
        File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .expect("/dev/null"),
    )
}

fn bench(c: &mut Criterion) {
    let kfd = Kfd::from_fd_assume_version(
        dev_null(),
        Version {
            major: 1,
            minor: 23,
        },
    );
    let raw_fd = dev_null();

    let mut group = c.benchmark_group("ioctl_overhead");
    group.bench_function("typed_get_version", |b| {
        b.iter(|| black_box(kfd.get_version().is_err()))
    });
    group.bench_function("raw_get_version", |b| {
        b.iter(|| {
            let mut args = abi::kfd_ioctl_get_version_args::default();
            // SAFETY: a valid fd and a live argument struct of the size the opcode encodes.
            let r = unsafe {
                libc::ioctl(
                    raw_fd.as_raw_fd(),
                    abi::AMDKFD_IOC_GET_VERSION as libc::c_ulong,
                    &raw mut args,
                )
            };
            black_box((r, args))
        })
    });
    group.bench_function("typed_available_memory", |b| {
        b.iter(|| black_box(kfd.available_memory(black_box(0x1a2b)).is_err()))
    });
    group.bench_function("raw_available_memory", |b| {
        b.iter(|| {
            let mut args = abi::kfd_ioctl_get_available_memory_args {
                gpu_id: black_box(0x1a2b),
                ..Default::default()
            };
            // SAFETY: a valid fd and a live argument struct of the size the opcode encodes.
            let r = unsafe {
                libc::ioctl(
                    raw_fd.as_raw_fd(),
                    abi::AMDKFD_IOC_AVAILABLE_MEMORY as libc::c_ulong,
                    &raw mut args,
                )
            };
            black_box((r, args))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratio::report(
        "ioctl_overhead",
        "typed_get_version",
        "raw_get_version",
        Some(1.03),
    );
    ratio::report(
        "ioctl_overhead",
        "typed_available_memory",
        "raw_available_memory",
        Some(1.03),
    );
}
