//! What a failed `alloc` or `free` leaves behind: nothing. Every failure point of `alloc`
//! (the HOST memfd's span, the address reservation, `ALLOC_MEMORY_OF_GPU`,
//! `MAP_MEMORY_TO_GPU`, the SVM registration), for each kind and through the pool, gives back
//! what it took, so the next allocation works; and a free whose `UNMAP_MEMORY_FROM_GPU` fails
//! leaks no buffer object. kfd-emu injects the ioctl failures and reports, when the process's
//! KFD state is torn down, every object left behind.

mod provider_support;

use std::sync::Arc;

use kfd_emu::backend::Backend;
use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Errno;
use kfd_provider::{
    Error, KfdPool, KfdProvider, MemoryKind, NativeCode, PoolParams, ProviderParams, UmfResult,
};
use kfd_tests::{Target, on_every_target};
use provider_support::*;

/// Runs `body` on kfd-emu's `machine` with the ioctl failures `rules` (`IOCTL:ERRNO:COUNT`)
/// injected, then tears the process's KFD state down and fails if kfd-emu's leak check
/// found a buffer object, GPU mapping or SVM range left behind.
fn with_faults(machine: &'static str, rules: &[&str], body: impl FnOnce(&Target) + Send) {
    let model = Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("a preset"),
        fail: rules.iter().map(|r| r.parse().expect("a rule")).collect(),
        check_leaks: true,
        ..ModelConfig::default()
    })
    .expect("a model");
    let target = Target::Emulated {
        machine,
        model: model.clone(),
    };
    kfd_emu::supervisor::run_attached(model.clone(), || body(&target)).expect("attaching");
    let model: Arc<Model> = model;
    model.process_exited(std::process::id() as i32);
    assert!(
        !model.leaks_found(),
        "kfd-emu/{machine} {rules:?}: objects were left behind (listed above)"
    );
}

/// Asserts `result` is a provider-specific error with `code`, and returns its errno.
#[track_caller]
fn native<T: std::fmt::Debug>(result: Result<T, Error>, code: NativeCode) -> Option<Errno> {
    match result {
        Err(Error::ProviderSpecific(n)) if n.code == code => n.errno,
        other => panic!("expected {code:?}, got {other:?}"),
    }
}

/// The audit's case: one HOST allocation too large for the memfd's span (2^57 bytes) fails,
/// and so does one that fits the span but not the address space (2^55 bytes, four times:
/// twice the span) — and none of them uses up the span, so a page still comes after.
#[test]
fn oversized_host_allocations_consume_nothing() {
    on_every_target(&["mi300x"], |target| {
        let p = provider(target, MemoryKind::Host);
        let errno = native(p.alloc(1 << 57, 0), NativeCode::AllocFailed);
        assert_eq!(errno, Some(Errno::NOSPC), "{}", target.name());
        for _ in 0..4 {
            native(p.alloc(1 << 55, 0), NativeCode::AllocFailed);
        }
        let ptr = p.alloc(page(), 0).expect("a page after failed allocations");
        fill(ptr.as_ptr(), page(), 0x5a);
        p.free(ptr.as_ptr(), page()).unwrap();
        assert_empty(target, &p);
    });
}

/// The same through the pool: a failed large allocation leaves the pool as it was, and
/// large and small blocks still come after it.
#[test]
fn oversized_pool_allocations_consume_nothing() {
    on_every_target(&["mi300x"], |target| {
        let pool = KfdPool::new(provider(target, MemoryKind::Host), PoolParams::default())
            .expect("a pool");
        let before = pool.stats();
        for _ in 0..4 {
            native(pool.alloc(1 << 57, 0), NativeCode::AllocFailed);
            native(pool.alloc(1 << 55, 0), NativeCode::AllocFailed);
        }
        assert_eq!(pool.stats(), before, "{}", target.name());
        let large = pool.alloc(4 << 20, 0).expect("a large block");
        let small = pool.alloc(64, 0).expect("a small block");
        pool.free(small.as_ptr()).unwrap();
        pool.free(large.as_ptr()).unwrap();
        pool.trim().unwrap();
        assert_empty(target, pool.provider());
    });
}

/// Too large for the address space (or the GPU's aperture) fails for every kind, and the
/// next allocation works.
fn reservation_failures_consume_nothing(kind: MemoryKind) {
    on_every_target(MACHINES, |target| {
        let p = provider(target, kind);
        for _ in 0..4 {
            native(p.alloc(1 << 55, 0), NativeCode::AllocFailed);
        }
        let ptr = p
            .alloc(page(), 0)
            .expect("a page after failed reservations");
        p.free(ptr.as_ptr(), page()).unwrap();
        assert_empty(target, &p);
    });
}

/// `rule` makes the first two calls of an ioctl `alloc` issues fail: a provider's
/// allocation and then a pool's chunk fail with the injected errno, leave no allocation,
/// chunk or VRAM behind, and the next allocations work; the leak check finds nothing.
fn injected_failure_consumes_nothing(kind: MemoryKind, rule: &str, errno: Errno) {
    for machine in MACHINES {
        with_faults(machine, &[rule], |target| {
            let p = provider(target, kind);
            let available = |p: &KfdProvider| p.kfd().available_memory(p.gpu_id()).ok();
            let vram = available(&p);
            let got = native(p.alloc(3 * page(), 0), NativeCode::AllocFailed);
            assert_eq!(got, Some(errno), "{}: {rule}", target.name());
            assert_empty(target, &p);
            assert_eq!(available(&p), vram, "{}: VRAM after {rule}", target.name());
            let pool = KfdPool::new(
                sibling(&p, ProviderParams::new(kind)),
                PoolParams::default(),
            )
            .unwrap();
            let got = native(pool.alloc(64, 0), NativeCode::AllocFailed);
            assert_eq!(got, Some(errno), "{}: pool, {rule}", target.name());
            assert_eq!(pool.stats().chunks, 0, "{}", target.name());
            assert_empty(target, pool.provider());

            let ptr = p
                .alloc(3 * page(), 0)
                .expect("an allocation after the failure");
            if p.host_accessible() {
                fill(ptr.as_ptr(), 3 * page(), 0x3c);
                assert_eq!(read(ptr.as_ptr(), 3 * page()), vec![0x3c; 3 * page()]);
            }
            let block = pool.alloc(64, 0).expect("a pool block after the failure");
            pool.free(block.as_ptr()).unwrap();
            p.free(ptr.as_ptr(), 3 * page()).unwrap();
            assert_empty(target, &p);
            drop(pool);
            assert_eq!(available(&p), vram, "{}: VRAM at the end", target.name());
        });
    }
}

#[test]
fn host_alloc_ioctl_failure_consumes_nothing() {
    injected_failure_consumes_nothing(
        MemoryKind::Host,
        "ALLOC_MEMORY_OF_GPU:ENOMEM:2",
        Errno::NOMEM,
    );
}

#[test]
fn host_map_ioctl_failure_consumes_nothing() {
    injected_failure_consumes_nothing(MemoryKind::Host, "MAP_MEMORY_TO_GPU:EIO:2", Errno::IO);
}

#[test]
fn device_alloc_ioctl_failure_consumes_nothing() {
    injected_failure_consumes_nothing(
        MemoryKind::Device,
        "ALLOC_MEMORY_OF_GPU:ENOMEM:2",
        Errno::NOMEM,
    );
}

#[test]
fn device_map_ioctl_failure_consumes_nothing() {
    injected_failure_consumes_nothing(MemoryKind::Device, "MAP_MEMORY_TO_GPU:EIO:2", Errno::IO);
}

#[test]
fn shared_svm_ioctl_failure_consumes_nothing() {
    injected_failure_consumes_nothing(MemoryKind::Shared, "SVM:ENOMEM:2", Errno::NOMEM);
}

#[test]
fn host_reservation_failures_consume_nothing() {
    reservation_failures_consume_nothing(MemoryKind::Host);
}

#[test]
fn device_reservation_failures_consume_nothing() {
    reservation_failures_consume_nothing(MemoryKind::Device);
}

#[test]
fn shared_reservation_failures_consume_nothing() {
    reservation_failures_consume_nothing(MemoryKind::Shared);
}

/// A free whose first `UNMAP_MEMORY_FROM_GPU` fails (once, transiently) still succeeds,
/// and no buffer object is left: through `free`, through the provider's drop, and through
/// closing an opened IPC handle.
fn transient_unmap_failure_leaks_nothing(kind: MemoryKind) {
    let rule = "UNMAP_MEMORY_FROM_GPU:EIO:1";
    for machine in MACHINES {
        with_faults(machine, &[rule], |target| {
            let p = provider(target, kind);
            let ptr = p.alloc(2 * page(), 0).unwrap();
            p.free(ptr.as_ptr(), 2 * page())
                .unwrap_or_else(|e| panic!("{}: free after {rule}: {e}", target.name()));
            assert_empty(target, &p);
        });
        with_faults(machine, &[rule], |target| {
            let p = provider(target, kind);
            p.alloc(2 * page(), 0).unwrap();
            drop(p);
        });
        with_faults(machine, &[rule], |target| {
            let p = provider(target, kind);
            let consumer = sibling(&p, ProviderParams::new(kind));
            let ptr = p.alloc(2 * page(), 0).unwrap();
            // The producer's free uses up the injected failure only after the close.
            let handle = p.get_ipc_handle(ptr.as_ptr(), 2 * page()).unwrap();
            let opened = consumer.open_ipc_handle(&handle).unwrap();
            consumer
                .close_ipc_handle(opened.as_ptr(), 2 * page())
                .unwrap_or_else(|e| panic!("{}: close after {rule}: {e}", target.name()));
            p.free(ptr.as_ptr(), 2 * page()).unwrap();
            assert_empty(target, &consumer);
            assert_empty(target, &p);
        });
    }
}

#[test]
fn host_transient_unmap_failure_leaks_nothing() {
    transient_unmap_failure_leaks_nothing(MemoryKind::Host);
}

#[test]
fn device_transient_unmap_failure_leaks_nothing() {
    transient_unmap_failure_leaks_nothing(MemoryKind::Device);
}

/// An unmap that keeps failing (three times: every attempt of one free) makes that free
/// fail, with the allocation gone and its chunk kept pending; the next free releases it,
/// and nothing is leaked.
fn persistent_unmap_failure_is_retried_later(kind: MemoryKind) {
    for machine in MACHINES {
        with_faults(machine, &["UNMAP_MEMORY_FROM_GPU:EIO:3"], |target| {
            let p = provider(target, kind);
            let first = p.alloc(page(), 0).unwrap();
            let second = p.alloc(page(), 0).unwrap();
            let errno = native(p.free(first.as_ptr(), page()), NativeCode::FreeFailed);
            assert_eq!(errno, Some(Errno::IO), "{}", target.name());
            let stats = p.stats();
            assert_eq!(
                (stats.allocations, stats.pending_release),
                (1, 1),
                "{}: {stats:?}",
                target.name()
            );
            assert_umf(
                p.free(first.as_ptr(), page()),
                UmfResult::MemoryProviderSpecific,
            );
            p.free(second.as_ptr(), page()).unwrap();
            assert_empty(target, &p);
        });
    }
}

#[test]
fn host_persistent_unmap_failure_is_retried_later() {
    persistent_unmap_failure_is_retried_later(MemoryKind::Host);
}

#[test]
fn device_persistent_unmap_failure_is_retried_later() {
    persistent_unmap_failure_is_retried_later(MemoryKind::Device);
}
