//! `KfdPool`: steady-state allocation of 64 B – 2 MiB issues no ioctl (counted by a backend
//! that wraps kfd-emu's model and counts every ioctl it answers: `kfd_emu::counting`), and the pool's blocks are
//! sized, aligned, distinct and freed as promised.

mod provider_support;

use std::sync::Arc;

use kfd_emu::backend::Backend;
use kfd_emu::counting::Counting;
use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use kfd_provider::{
    KfdPool, KfdProvider, MemoryKind, POOL_MAX_CLASS, POOL_MIN_CLASS, PoolParams, ProviderParams,
    UmfResult,
};
use kfd_skip::Rng;
use kfd_tests::on_every_target;
use provider_support::*;

/// kfd-emu's model of `machine`, counting the ioctls it answers.
fn counting(machine: &str) -> Arc<Counting<Model>> {
    let model = Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("a preset"),
        ..ModelConfig::default()
    })
    .expect("a model");
    Counting::new(model)
}

/// `ops` random allocations (sizes log-uniform over 33 B – 2 MiB, at most 48 live) and frees
/// from `seed`, then frees what is left.
fn churn(pool: &KfdPool, seed: u64, ops: usize) {
    let mut rng = Rng(seed);
    let mut live: Vec<*mut u8> = Vec::new();
    for _ in 0..ops {
        let r = rng.next();
        if live.len() < 48 && (live.is_empty() || !r.is_multiple_of(3)) {
            let top = 1usize << (6 + (r >> 8) % 16);
            let size = top / 2 + 1 + (r >> 20) as usize % (top / 2);
            live.push(pool.alloc(size, 0).unwrap().as_ptr());
        } else {
            let i = (r >> 32) as usize % live.len();
            pool.free(live.swap_remove(i)).unwrap();
        }
    }
    for ptr in live {
        pool.free(ptr).unwrap();
    }
}

/// UMF's `simple` benchmark shape: `n` one-page blocks, freed last in first out.
fn lifo_pages(pool: &KfdPool, n: usize) {
    let blocks: Vec<*mut u8> = (0..n)
        .map(|_| pool.alloc(page(), 0).unwrap().as_ptr())
        .collect();
    for ptr in blocks.into_iter().rev() {
        pool.free(ptr).unwrap();
    }
}

/// After a warm-up that reaches the working set, rounds of the same traffic — random sizes of
/// every class, and UMF's LIFO page pattern — issue no ioctl at all; the warm-up's ioctls
/// were exactly the pool's chunk allocations.
fn steady_state_issues_no_ioctl(kind: MemoryKind) {
    for machine in MACHINES {
        let counting = counting(machine);
        let backend: Arc<dyn Backend> = counting.clone();
        kfd_emu::supervisor::run_attached(backend, || {
            let provider =
                KfdProvider::new(Kfd::open().unwrap(), ProviderParams::new(kind)).unwrap();
            let params = PoolParams {
                retained_chunks: 128,
                ..PoolParams::default()
            };
            let pool = KfdPool::new(provider, params).unwrap();
            let seeds = [0x9E37_79B9_7F4A_7C15, 0xD1B5_4A32_D192_ED03, 42];

            let before_warm_up = counting.counts();
            let allocs_before = before_warm_up.kfd(0x16);
            for seed in seeds {
                churn(&pool, seed, 3000);
            }
            lifo_pages(&pool, 1000);
            let warm = pool.stats();
            assert!(
                warm.provider_allocs > 0 && warm.provider_frees == 0,
                "{warm:?}"
            );
            assert!(
                !counting.counts().since(&before_warm_up).is_empty(),
                "the counter saw the warm-up's ioctls"
            );
            if kind != MemoryKind::Shared {
                // One ALLOC_MEMORY_OF_GPU per chunk.
                assert_eq!(
                    counting.counts().kfd(0x16) - allocs_before,
                    warm.provider_allocs,
                    "{machine} {kind:?}"
                );
            }

            eprintln!(
                "kfd-emu/{machine} {kind:?}: warm-up took {} chunks, ioctls {:?}",
                warm.provider_allocs,
                counting.counts().since(&before_warm_up)
            );
            let before = counting.counts();
            for _ in 0..3 {
                for seed in seeds {
                    churn(&pool, seed, 3000);
                }
                lifo_pages(&pool, 1000);
            }
            let steady = counting.counts().since(&before);
            assert!(
                steady.is_empty(),
                "kfd-emu/{machine} {kind:?}: steady-state pool traffic issued ioctls: {steady:?}"
            );
            let after = pool.stats();
            assert_eq!(
                (after.provider_allocs, after.provider_frees),
                (warm.provider_allocs, 0)
            );
            assert_eq!((after.in_use, after.chunks), (0, after.empty_chunks));
        })
        .unwrap();
    }
}

#[test]
fn host_steady_state_issues_no_ioctl() {
    steady_state_issues_no_ioctl(MemoryKind::Host);
}

#[test]
fn device_steady_state_issues_no_ioctl() {
    steady_state_issues_no_ioctl(MemoryKind::Device);
}

#[test]
fn shared_steady_state_issues_no_ioctl() {
    steady_state_issues_no_ioctl(MemoryKind::Shared);
}

/// Blocks of every class are aligned to their class and never overlap: each live block
/// holds its own pattern through random churn; alignments up to 2 MiB are honoured.
#[test]
fn blocks_are_aligned_and_distinct() {
    on_every_target(&["mi300x"], |target| {
        let pool = KfdPool::new(provider(target, MemoryKind::Host), PoolParams::default()).unwrap();
        let mut rng = Rng(7);
        let mut live: Vec<(*mut u8, usize, u8)> = Vec::new();
        for step in 0..4000u32 {
            let r = rng.next();
            if live.len() < 64 && !r.is_multiple_of(3) {
                let class = POOL_MIN_CLASS << ((r >> 8) % 16);
                let size = class / 2 + 1 + (r >> 20) as usize % (class / 2);
                let ptr = pool.alloc(size, 0).unwrap().as_ptr();
                let class = size.next_power_of_two().max(POOL_MIN_CLASS);
                assert_eq!(ptr as usize % class, 0, "size {size}");
                let tag = step as u8;
                fill(ptr, size, tag);
                live.push((ptr, size, tag));
            } else if !live.is_empty() {
                let (ptr, size, tag) = live.swap_remove((r >> 32) as usize % live.len());
                assert!(
                    read(ptr, size).iter().all(|&b| b == tag),
                    "block overwritten"
                );
                pool.free(ptr).unwrap();
            }
        }
        for (ptr, size, tag) in live {
            assert!(
                read(ptr, size).iter().all(|&b| b == tag),
                "block overwritten"
            );
            pool.free(ptr).unwrap();
        }
        for align in [128, 4096, 1 << 20, POOL_MAX_CLASS] {
            let ptr = pool.alloc(100, align).unwrap().as_ptr();
            assert_eq!(ptr as usize % align, 0);
            pool.free(ptr).unwrap();
        }
    });
}

/// The pool's argument rules: NULL, stray, interior and double frees, zero sizes and
/// alignments that are not powers of two are refused without harm; allocations above
/// 2 MiB go to the provider and back; `trim` gives every empty chunk back, and more empty
/// chunks than retained go back on their own.
#[test]
fn frees_sizes_large_allocations_and_retention() {
    on_every_target(MACHINES, |target| {
        let params = PoolParams {
            retained_chunks: 2,
            ..PoolParams::default()
        };
        let pool = KfdPool::new(provider(target, MemoryKind::Host), params).unwrap();
        assert_umf(pool.alloc(0, 0), UmfResult::InvalidArgument);
        assert_umf(pool.alloc(64, 48), UmfResult::InvalidArgument);
        assert_umf(pool.free(std::ptr::null_mut()), UmfResult::InvalidArgument);
        let a = pool.alloc(100, 0).unwrap().as_ptr();
        assert_umf(pool.free(a.wrapping_add(1)), UmfResult::InvalidArgument);
        assert_umf(pool.free(a.wrapping_add(128)), UmfResult::InvalidArgument);
        let mut on_stack = 0u8;
        assert_umf(pool.free(&raw mut on_stack), UmfResult::InvalidArgument);
        pool.free(a).unwrap();
        assert_umf(pool.free(a), UmfResult::InvalidArgument);

        let big = 3 * POOL_MAX_CLASS + 5;
        let large = pool.alloc(big, 0).unwrap().as_ptr();
        assert_eq!(pool.provider().allocation_info(large).unwrap().size, big);
        assert_eq!(pool.stats().large, 1);
        assert_umf(
            pool.free(large.wrapping_add(4096)),
            UmfResult::InvalidArgument,
        );
        pool.free(large).unwrap();
        assert!(pool.provider().allocation_info(large).is_none());

        // Five 2 MiB blocks need five chunks; freed, two stay and three go back.
        let blocks: Vec<*mut u8> = (0..5)
            .map(|_| pool.alloc(POOL_MAX_CLASS, 0).unwrap().as_ptr())
            .collect();
        let chunks = pool.provider().stats().chunks;
        for ptr in blocks {
            pool.free(ptr).unwrap();
        }
        let stats = pool.stats();
        assert_eq!((stats.empty_chunks, stats.in_use), (2, 0), "{stats:?}");
        assert_eq!(pool.provider().stats().chunks, chunks - 3);
        pool.trim().unwrap();
        assert_eq!(pool.stats().chunks, 0);
        assert_empty(target, pool.provider());
    });
}

/// Four threads churn one pool (and its provider, for the chunks) at once: every block keeps
/// its own bytes, and afterwards nothing is in use.
#[test]
fn threads_share_one_pool() {
    on_every_target(&["mi300x"], |target| {
        let pool = KfdPool::new(provider(target, MemoryKind::Host), PoolParams::default()).unwrap();
        std::thread::scope(|scope| {
            for t in 0..4u64 {
                let pool = &pool;
                scope.spawn(move || {
                    let mut rng = Rng(0x1234_5678 + t);
                    let mut live: Vec<(usize, usize, u8)> = Vec::new();
                    for step in 0..3000u32 {
                        let r = rng.next();
                        if live.len() < 32 && !r.is_multiple_of(3) {
                            let size = 1 + (r >> 8) as usize % (256 << 10);
                            let ptr = pool.alloc(size, 0).unwrap().as_ptr();
                            let tag = (step as u8) ^ (t as u8 * 64);
                            fill(ptr, size.min(256), tag);
                            live.push((ptr as usize, size, tag));
                        } else if !live.is_empty() {
                            let (ptr, size, tag) =
                                live.swap_remove((r >> 32) as usize % live.len());
                            let ptr = ptr as *mut u8;
                            assert!(read(ptr, size.min(256)).iter().all(|&b| b == tag));
                            pool.free(ptr).unwrap();
                        }
                    }
                    for (ptr, _, _) in live {
                        pool.free(ptr as *mut u8).unwrap();
                    }
                });
            }
        });
        assert_eq!(pool.stats().in_use, 0);
    });
}
