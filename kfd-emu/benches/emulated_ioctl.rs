//! One emulated ioctl round trip against a raw ioctl that fails fast.
//!
//! `emulated_get_version`: GET_VERSION on `/dev/kfd` from a thread attached to the model
//! (seccomp user notification → supervisor thread → model → answer). `raw_enotty`: the same
//! ioctl on `/dev/null`, which the kernel refuses at once with ENOTTY — the cost of the
//! syscall alone. After criterion's runs the bench times both sides alternately over many
//! rounds and prints the medians (µs per call) and the median ratio, against the target of
//! ≤ 20 µs per emulated ioctl.

#[path = "support/attached.rs"]
mod attached;

use std::fs::File;
use std::hint::black_box;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use attached::Attached;
use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::abi::{AMDKFD_IOC_GET_VERSION, kfd_ioctl_get_version_args};

/// Issues GET_VERSION on `fd`; the ioctl's return value.
fn get_version(fd: &File) -> i32 {
    let mut args = kfd_ioctl_get_version_args::default();
    // SAFETY: `fd` is open and `args` is a live struct of the size the command word encodes.
    let r = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            AMDKFD_IOC_GET_VERSION as libc::c_ulong,
            &raw mut args,
        )
    };
    black_box(args);
    r
}

fn raw_time(null: &File, n: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        get_version(null);
    }
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    assert_eq!(get_version(&null), -1, "/dev/null refuses the ioctl");
    // A thread attached to the model that times `n` GET_VERSION calls on request.
    let attached = Attached::start(|| {
        let kfd = File::options()
            .read(true)
            .write(true)
            .open("/dev/kfd")
            .expect("the emulated /dev/kfd");
        assert_eq!(get_version(&kfd), 0, "emulated GET_VERSION succeeds");
        move |n| {
            let start = Instant::now();
            for _ in 0..n {
                get_version(&kfd);
            }
            start.elapsed()
        }
    });

    let mut group = c.benchmark_group("get_version");
    group.bench_function("raw_enotty", |b| b.iter_custom(|n| raw_time(&null, n)));
    group.bench_function("emulated_get_version", |b| {
        b.iter_custom(|n| attached.time(n))
    });
    group.finish();

    // The ratio: both sides timed the same way, alternately, over many rounds (so that load
    // from elsewhere hits both alike); the medians are printed.
    const ROUNDS: usize = 31;
    const EMULATED_CALLS: u64 = 2_000;
    const RAW_CALLS: u64 = 50_000;
    attached.time(EMULATED_CALLS);
    raw_time(&null, RAW_CALLS);
    let mut emulated = Vec::with_capacity(ROUNDS);
    let mut raw = Vec::with_capacity(ROUNDS);
    let mut ratio = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let e = attached.time(EMULATED_CALLS).as_secs_f64() / EMULATED_CALLS as f64;
        let r = raw_time(&null, RAW_CALLS).as_secs_f64() / RAW_CALLS as f64;
        emulated.push(e);
        raw.push(r);
        ratio.push(e / r);
    }
    let (emulated, raw, ratio) = (median(emulated), median(raw), median(ratio));
    println!(
        "emulated GET_VERSION: {:.2} µs/call; raw ioctl (ENOTTY): {:.3} µs/call; \
         median ratio over {ROUNDS} alternating rounds {:.1}x; target <= 20 µs/call: {}",
        emulated * 1e6,
        raw * 1e6,
        ratio,
        if emulated * 1e6 <= 20.0 {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// The median of `values` (not empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

criterion_group!(benches, bench);
criterion_main!(benches);
