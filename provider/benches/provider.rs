//! Pooled allocation of HOST memory against `malloc`: a batch of 64 blocks of one size
//! (4 KiB – 2 MiB) allocated and then freed last in first out (UMF's `ubench` `simple`
//! shape), through `KfdPool` and through glibc, in the same run; the ratio of the means is
//! printed per size. The unpooled provider (an `mmap` and two ioctls per allocation, like UMF's
//! OS provider's `mmap`) is measured at the ends of the range to show what the pool saves.
//!
//! Without `/dev/kfd` the bench runs under kfd-emu; only the pool's warm-up and the unpooled
//! provider issue ioctls, so the emulator does not weigh on the pooled numbers.
//!
//! UMF's OS memory provider (the "≥ 5× the OS provider" target) is measured by the C
//! ABI harness, which links real UMF: it adds `umf_os_provider/<size>` to this group in
//! [`umf_os_provider_hook`], and the report below then prints that ratio too.

use std::hint::black_box;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, measurement::WallTime};
use kfd_ioctl::Kfd;
use kfd_provider::{KfdPool, KfdProvider, MemoryKind, PoolParams, ProviderParams};

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

const GROUP: &str = "provider_pool";
const SIZES: [usize; 5] = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20];
const BATCH: usize = 64;

fn pooled(group: &mut BenchmarkGroup<'_, WallTime>, pool: &KfdPool, size: usize) {
    let mut blocks = Vec::with_capacity(BATCH);
    group.bench_function(BenchmarkId::new("kfd_pool", size), |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                blocks.push(pool.alloc(black_box(size), 0).expect("pool alloc"));
            }
            while let Some(ptr) = blocks.pop() {
                pool.free(ptr.as_ptr()).expect("pool free");
            }
        })
    });
}

fn malloc(group: &mut BenchmarkGroup<'_, WallTime>, size: usize) {
    let mut blocks = Vec::with_capacity(BATCH);
    group.bench_function(BenchmarkId::new("malloc", size), |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                // SAFETY: plain malloc; the result is only passed back to free.
                blocks.push(unsafe { libc::malloc(black_box(size)) });
            }
            while let Some(ptr) = blocks.pop() {
                // SAFETY: each pointer came from malloc above and is freed once.
                unsafe { libc::free(ptr) };
            }
        })
    });
}

fn unpooled(group: &mut BenchmarkGroup<'_, WallTime>, provider: &KfdProvider, size: usize) {
    let mut blocks = Vec::with_capacity(BATCH);
    group.bench_function(BenchmarkId::new("kfd_provider_unpooled", size), |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                blocks.push(provider.alloc(black_box(size), 0).expect("provider alloc"));
            }
            while let Some(ptr) = blocks.pop() {
                provider.free(ptr.as_ptr(), size).expect("provider free");
            }
        })
    });
}

/// Where the C ABI harness adds `umf_os_provider/<size>` (UMF's OS provider through the
/// same batch), so that the report compares the pool with it.
fn umf_os_provider_hook(_group: &mut BenchmarkGroup<'_, WallTime>, _size: usize) {}

fn bench(c: &mut Criterion) {
    let kfd = Kfd::open().expect("/dev/kfd (or kfd-emu)");
    let provider =
        KfdProvider::new(kfd.clone(), ProviderParams::new(MemoryKind::Host)).expect("provider");
    let params = PoolParams {
        retained_chunks: BATCH + 16,
        ..PoolParams::default()
    };
    let pool = KfdPool::new(
        KfdProvider::new(kfd, ProviderParams::new(MemoryKind::Host)).expect("provider"),
        params,
    )
    .expect("pool");
    let mut group = c.benchmark_group(GROUP);
    group.throughput(Throughput::Elements(BATCH as u64));
    for size in SIZES {
        pooled(&mut group, &pool, size);
        malloc(&mut group, size);
        umf_os_provider_hook(&mut group, size);
    }
    group.sample_size(10);
    for size in [SIZES[0], SIZES[SIZES.len() - 1]] {
        unpooled(&mut group, &provider, size);
    }
    group.finish();
    assert_eq!(pool.stats().in_use, 0);
}

fn main() {
    let run = || {
        let mut c = Criterion::default().configure_from_args();
        bench(&mut c);
        c.final_summary();
    };
    kfd_emu::on_kfd_or_emulated(run);
    for size in SIZES {
        let candidate = format!("kfd_pool/{size}");
        ratio::report(GROUP, &candidate, &format!("malloc/{size}"), None);
        if ratio::mean_ns(GROUP, &format!("umf_os_provider/{size}")).is_some() {
            // ≥ 5× the OS provider's throughput is ≤ 1/5 of its time.
            ratio::report(
                GROUP,
                &candidate,
                &format!("umf_os_provider/{size}"),
                Some(0.2),
            );
        }
    }
    for size in [SIZES[0], SIZES[SIZES.len() - 1]] {
        ratio::report(
            GROUP,
            &format!("kfd_pool/{size}"),
            &format!("kfd_provider_unpooled/{size}"),
            None,
        );
    }
}
