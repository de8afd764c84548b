//! UMF's provider conformance cases (`shared/ref/anchors.md` §1.1–1.2) against `KfdProvider`,
//! for each memory kind, on the emulated machines and (when present) the hardware; plus what
//! only this provider promises: free by pointer, purges that read back as zero (on the CPU
//! and in the GPU's view), split/merge over one buffer object, IPC within a process, small-BAR
//! VRAM, peers, and forked children.

mod provider_support;

use std::ptr::NonNull;
use std::time::Instant;

use kfd_ioctl::{Errno, Kfd};
use kfd_provider::{
    Error, IPC_HANDLE_SIZE, IpcHandle, KfdPool, KfdProvider, MemoryKind, NativeCode, PoolParams,
    ProviderParams, UmfResult, last_native_error,
};
use kfd_tests::{Target, on_every_target};
use provider_support::*;

/// Runs `body` with a fresh provider of `kind` on every target, and checks it ends empty.
fn with_provider(kind: MemoryKind, body: impl Fn(&Target, &KfdProvider) + Send + Sync) {
    on_every_target(MACHINES, |target| {
        let p = provider(target, kind);
        body(target, &p);
        assert_empty(target, &p);
    });
}

/// Fills the allocation with `byte` and checks the GPU sees it, when the CPU can reach it.
fn touch(target: &Target, p: &KfdProvider, ptr: NonNull<u8>, size: usize, byte: u8) {
    if !p.host_accessible() {
        return;
    }
    fill(ptr.as_ptr(), size, byte);
    if let Some(seen) = gpu_read(target, p.gpu_id(), ptr.as_ptr(), size) {
        assert!(seen.iter().all(|&b| b == byte), "{}", target.name());
    }
}

/// `alloc_page64_align_0`, `_page_div_2`, `_3_pages`, `alloc_3pages_align_3pages`, plus a
/// small divisor and a size below a page: each allocation is aligned as asked, usable from
/// the CPU and the GPU, and freed.
fn alloc_with_umf_alignments(kind: MemoryKind) {
    with_provider(kind, |target, p| {
        let page = page();
        for (size, align) in [
            (page + 64, 0),
            (page + 64, page / 2),
            (page + 64, 3 * page),
            (3 * page, 3 * page),
            (page + 64, 64),
            (100, page),
        ] {
            let ptr = p.alloc(size, align).unwrap();
            assert_eq!(
                ptr.as_ptr() as usize % align.max(page),
                0,
                "{}: size {size} align {align}",
                target.name()
            );
            touch(target, p, ptr, size, 0xFF);
            p.free(ptr.as_ptr(), size).unwrap();
        }
    });
}

/// `alloc_page64_align_page_minus_1_WRONG_ALIGNMENT_1` and `_one_half_pages_WRONG_ALIGNMENT_2`:
/// INVALID_ARGUMENT, and so is a zero size; nothing is allocated.
fn alloc_rejects_wrong_alignments(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        let page = page();
        for align in [page - 1, page + page / 2, 3] {
            assert_umf(p.alloc(page + 64, align), UmfResult::InvalidArgument);
        }
        assert_umf(p.alloc(0, 0), UmfResult::InvalidArgument);
    });
}

/// `alloc_WRONG_SIZE` / `alloc_MAX_SIZE`: MEMORY_PROVIDER_SPECIFIC with ALLOC_FAILED as the
/// native error; and a size KFD cannot back (64 TiB) says `ENOMEM` and which ioctl refused.
fn alloc_of_impossible_sizes_is_provider_specific(kind: MemoryKind) {
    with_provider(kind, |target, p| {
        for size in [usize::MAX, usize::MAX - 64] {
            let e = assert_umf(p.alloc(size, 0), UmfResult::MemoryProviderSpecific);
            let native = e.native().unwrap();
            assert_eq!(native.code, NativeCode::AllocFailed);
            assert_eq!(last_native_error().as_ref(), Some(native));
            assert_eq!(KfdProvider::last_native_error().as_ref(), Some(native));
        }
        let e = assert_umf(p.alloc(1 << 46, 0), UmfResult::MemoryProviderSpecific);
        assert!(e.is_out_of_memory(), "{}: {e}", target.name());
        assert_eq!(last_native_error().unwrap().raw_code(), 2001);
        if kind != MemoryKind::Shared {
            assert!(
                e.to_string().contains("ALLOC_MEMORY_OF_GPU"),
                "{}: {e}",
                target.name()
            );
        }
    });
}

/// `get_min_page_size` ≤ page ≤ `get_recommended_page_size`; `get_name` is the default or
/// the override; the IPC handle size and cache line are fixed.
fn page_sizes_and_name(kind: MemoryKind) {
    on_every_target(MACHINES, |target| {
        let p = provider(target, kind);
        let page = page();
        let min = p.min_page_size(std::ptr::null());
        assert!(min <= page && min > 0);
        assert!(p.recommended_page_size(page + 64) >= min);
        assert_eq!(p.name(), KfdProvider::DEFAULT_NAME);
        assert_eq!(p.cache_line_size(), 64);
        assert_eq!(p.get_ipc_handle_size(), IPC_HANDLE_SIZE);
        let named = sibling(&p, ProviderParams::new(kind).name("kfd-test"));
        assert_eq!(named.name(), "kfd-test");
        assert_eq!(named.kind(), kind);
    });
}

/// `free_NULL` succeeds; `free_size_0_ptr_not_null` and `free_INVALID_POINTER_SIZE_GT_0` are
/// MEMORY_PROVIDER_SPECIFIC with FREE_FAILED (as are an interior pointer and a double free);
/// a wrong size for a real allocation is INVALID_ARGUMENT and frees nothing.
fn free_follows_umf(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        let page = page();
        p.free(std::ptr::null_mut(), 0).unwrap();
        p.free(std::ptr::null_mut(), 10).unwrap();
        for size in [0, 1, page] {
            let e = assert_umf(
                p.free(std::ptr::without_provenance_mut(1), size),
                UmfResult::MemoryProviderSpecific,
            );
            let native = last_native_error().unwrap();
            assert_eq!(e.native(), Some(&native));
            assert_eq!(
                (native.code, native.errno),
                (NativeCode::FreeFailed, Some(Errno::INVAL))
            );
            assert_eq!(native.raw_code(), 2002);
        }
        let size = 2 * page;
        let ptr = p.alloc(size, 0).unwrap().as_ptr();
        assert_umf(
            p.free(ptr.wrapping_add(page), page),
            UmfResult::MemoryProviderSpecific,
        );
        assert_umf(p.free(ptr, size + 1), UmfResult::InvalidArgument);
        assert_umf(p.free(ptr, 0), UmfResult::InvalidArgument);
        assert_eq!(p.stats().allocations, 1);
        p.free(ptr, size).unwrap();
        assert_umf(p.free(ptr, size), UmfResult::MemoryProviderSpecific);
    });
}

/// Free by pointer alone: NULL is a null-pointer error, interior and unknown pointers are
/// INVALID_ARGUMENT, a known one frees exactly that allocation.
fn free_ptr_resolves_by_pointer(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        let page = page();
        let e = assert_umf(p.free_ptr(std::ptr::null_mut()), UmfResult::InvalidArgument);
        assert!(matches!(e, Error::NullPointer(_)), "{e}");
        let a = p.alloc(3 * page, 0).unwrap().as_ptr();
        let b = p.alloc(100, 0).unwrap().as_ptr();
        assert_umf(p.free_ptr(a.wrapping_add(64)), UmfResult::InvalidArgument);
        assert_umf(p.free_ptr(b.wrapping_add(99)), UmfResult::InvalidArgument);
        let mut on_stack = 0u8;
        assert_umf(p.free_ptr(&raw mut on_stack), UmfResult::InvalidArgument);
        p.free_ptr(a).unwrap();
        assert_umf(p.free_ptr(a), UmfResult::InvalidArgument);
        assert_eq!(p.stats().allocations, 1);
        p.free_ptr(b).unwrap();
    });
}

/// `purge_lazy` / `purge_force` of a `page + 64` allocation over its whole size succeed (the
/// partial last page is the allocation's own); DEVICE memory without a CPU mapping says
/// NOT_SUPPORTED for the forced purge.
fn purges_of_whole_allocations(kind: MemoryKind) {
    with_provider(kind, |target, p| {
        let size = page() + 64;
        let ptr = p.alloc(size, 0).unwrap();
        touch(target, p, ptr, size, 0x5A);
        p.purge_lazy(ptr.as_ptr(), size).unwrap();
        if p.host_accessible() {
            p.purge_force(ptr.as_ptr(), size).unwrap();
        } else {
            assert_umf(p.purge_force(ptr.as_ptr(), size), UmfResult::NotSupported);
        }
        p.free(ptr.as_ptr(), size).unwrap();
    });
}

/// After `purge_force` the purged pages read back as zero — from the CPU and in the GPU's
/// view — while the pages around them keep their bytes, and the memory stays usable.
fn purge_force_reads_back_zero(kind: MemoryKind) {
    with_provider(kind, |target, p| {
        let page = page();
        let size = 4 * page;
        let ptr = p.alloc(size, 0).unwrap().as_ptr();
        fill(ptr, size, 0xAB);
        p.purge_force(ptr.wrapping_add(page), 2 * page).unwrap();
        let cpu = read(ptr, size);
        assert!(cpu[..page].iter().all(|&b| b == 0xAB), "{}", target.name());
        assert!(
            cpu[page..3 * page].iter().all(|&b| b == 0),
            "{}",
            target.name()
        );
        assert!(
            cpu[3 * page..].iter().all(|&b| b == 0xAB),
            "{}",
            target.name()
        );
        if let Some(gpu) = gpu_read(target, p.gpu_id(), ptr, size) {
            assert_eq!(gpu, cpu, "{}: the GPU sees the purge", target.name());
        }
        // Still usable, and the lazy purge of the rest leaves it usable too.
        fill(ptr.wrapping_add(page), page, 0x11);
        assert_eq!(read(ptr.wrapping_add(page), 1), [0x11]);
        p.purge_lazy(ptr, size).unwrap();
        fill(ptr, size, 0x22);
        assert_eq!(read(ptr.wrapping_add(size - 1), 1), [0x22]);
        p.free(ptr, size).unwrap();
    });
}

/// `purge_*_INVALID_POINTER` (0x1, 1) and other misalignments are INVALID_ALIGNMENT; NULL and
/// a zero size are INVALID_ARGUMENT, and so is memory that is not the provider's.
fn purges_reject_bad_ranges(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        let page = page();
        assert_umf(
            p.purge_lazy(std::ptr::without_provenance_mut(1), 1),
            UmfResult::InvalidAlignment,
        );
        assert_umf(
            p.purge_force(std::ptr::without_provenance_mut(1), 1),
            UmfResult::InvalidAlignment,
        );
        let ptr = p.alloc(2 * page, 0).unwrap().as_ptr();
        assert_umf(
            p.purge_force(ptr.wrapping_add(64), page),
            UmfResult::InvalidAlignment,
        );
        assert_umf(p.purge_lazy(ptr, 100), UmfResult::InvalidAlignment);
        assert_umf(p.purge_force(ptr, page + 1), UmfResult::InvalidAlignment);
        assert_umf(p.purge_force(ptr, 3 * page), UmfResult::InvalidArgument);
        assert_umf(p.purge_lazy(ptr, 0), UmfResult::InvalidArgument);
        let e = assert_umf(
            p.purge_lazy(std::ptr::null_mut(), page),
            UmfResult::InvalidArgument,
        );
        assert!(matches!(e, Error::NullPointer(_)));
        let elsewhere = vec![0u8; 4 * page];
        let aligned = elsewhere
            .as_ptr()
            .wrapping_add(page)
            .map_addr(|a| a & !(page - 1));
        assert_umf(
            p.purge_force(aligned.cast_mut(), page),
            UmfResult::InvalidArgument,
        );
        p.free(ptr, 2 * page).unwrap();
    });
}

/// `FixedProviderTest.split`: a two-page allocation split at one page; the halves are freed
/// separately, and the buffer object lives until the second is gone (the first half keeps
/// working after the second is freed).
fn split_halves_are_freed_separately(kind: MemoryKind) {
    with_provider(kind, |target, p| {
        let page = page();
        let ptr = p.alloc(2 * page, 0).unwrap();
        p.allocation_split(ptr.as_ptr(), 2 * page, page).unwrap();
        let stats = p.stats();
        assert_eq!((stats.allocations, stats.chunks), (2, 1));
        let high = ptr.as_ptr().wrapping_add(page);
        assert_eq!(p.allocation_info(high).unwrap().size, page);
        p.free(high, page).unwrap();
        assert_eq!(p.stats().chunks, 1, "{}", target.name());
        touch(target, p, ptr, page, 0x3C);
        p.free(ptr.as_ptr(), page).unwrap();
    });
}

/// `FixedProviderTest.merge`: two consecutive pieces merge into one that is freed as one.
fn merged_pieces_are_freed_as_one(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        let page = page();
        let ptr = p.alloc(2 * page, 0).unwrap().as_ptr();
        p.allocation_split(ptr, 2 * page, page).unwrap();
        p.allocation_merge(ptr, ptr.wrapping_add(page), 2 * page)
            .unwrap();
        assert_eq!(p.stats().allocations, 1);
        assert_umf(p.free(ptr, page), UmfResult::InvalidArgument);
        p.free(ptr, 2 * page).unwrap();
    });
}

/// UMF's API-layer and tracking-layer rules for split and merge, including the test's
/// merge(low, low + 2 pages, total = 1 page) example.
fn split_and_merge_follow_umf_rules(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        let page = page();
        let low = p.alloc(4 * page, 0).unwrap().as_ptr();
        for (ptr, total, first) in [
            (low, 4 * page, 0),
            (low, 0, page),
            (low, 4 * page, 4 * page),
            (low, 4 * page, 5 * page),
            (low, 3 * page, page),
            (low.wrapping_add(page), 3 * page, page),
        ] {
            assert_umf(
                p.allocation_split(ptr, total, first),
                UmfResult::InvalidArgument,
            );
        }
        assert_umf(
            p.allocation_split(std::ptr::null_mut(), 4 * page, page),
            UmfResult::InvalidArgument,
        );
        p.allocation_split(low, 4 * page, page).unwrap();
        p.allocation_split(low.wrapping_add(page), 3 * page, page)
            .unwrap();
        // Pieces: [low: 1 page] [low + 1: 1 page] [low + 2: 2 pages].
        let at = |pages: usize| low.wrapping_add(pages * page);
        for (l, h, total) in [
            (low, at(2), page),
            (low, at(1), 0),
            (at(1), low, 2 * page),
            (low, low, page),
            (low, at(1), 3 * page),
            (low, at(2), 3 * page),
        ] {
            assert_umf(p.allocation_merge(l, h, total), UmfResult::InvalidArgument);
        }
        assert_umf(
            p.allocation_merge(std::ptr::null_mut(), at(1), 2 * page),
            UmfResult::InvalidArgument,
        );
        p.allocation_merge(at(1), at(2), 3 * page).unwrap();
        p.allocation_merge(low, at(1), 4 * page).unwrap();
        p.free(low, 4 * page).unwrap();
    });
}

/// `ctl_stats`: allocated and peak memory start at 0 and track alloc and free.
fn stats_track_allocated_and_peak(kind: MemoryKind) {
    with_provider(kind, |_, p| {
        assert_eq!((p.stats().allocated, p.stats().peak), (0, 0));
        let a = p.alloc(1000, 0).unwrap().as_ptr();
        let b = p.alloc(5000, 0).unwrap().as_ptr();
        assert_eq!((p.stats().allocated, p.stats().peak), (6000, 6000));
        p.free(a, 1000).unwrap();
        assert_eq!((p.stats().allocated, p.stats().peak), (5000, 6000));
        let info = p.allocation_info(b.wrapping_add(4999)).unwrap();
        assert_eq!((info.base.as_ptr(), info.size, info.kind), (b, 5000, kind));
        assert_eq!(info.gpu_id, p.gpu_id());
        assert!(p.allocation_info(b.wrapping_add(5000)).is_none());
        p.free(b, 5000).unwrap();
        assert_eq!((p.stats().allocated, p.stats().peak), (0, 6000));
    });
}

/// IPC within one process, between two providers: the opened pointer aliases the original
/// (both ways, and in the GPU's view); only the producer may put the handle, even after the
/// allocation was freed; closing twice is INVALID_ARGUMENT. SHARED memory says NOT_SUPPORTED.
fn ipc_between_two_providers(kind: MemoryKind) {
    with_provider(kind, |target, a| {
        let page = page();
        let b = sibling(a, ProviderParams::new(kind));
        if kind == MemoryKind::Shared {
            let ptr = a.alloc(page, 0).unwrap().as_ptr();
            assert_umf(a.get_ipc_handle(ptr, page), UmfResult::NotSupported);
            let foreign = IpcHandle::from_bytes(&[0; IPC_HANDLE_SIZE]).unwrap();
            assert_umf(b.open_ipc_handle(&foreign), UmfResult::NotSupported);
            a.free(ptr, page).unwrap();
            return;
        }
        let size = 3 * page;
        let ptr = a.alloc(size, 0).unwrap().as_ptr();
        let shared = ptr.wrapping_add(page);
        let len = 2 * page - 8;
        let handle = a.get_ipc_handle(shared, len).unwrap();
        assert_eq!(handle.kind(), Some(kind));
        assert_eq!(handle.size(), Some(len));
        // A handle for the same allocation again reuses the export.
        assert_eq!(a.get_ipc_handle(shared, len).unwrap(), handle);
        let opened = b.open_ipc_handle(&handle).unwrap().as_ptr();
        assert_eq!(b.stats().opened_ipc, 1);
        if a.host_accessible() {
            let original = pattern(len, 7);
            write(shared, &original);
            assert_eq!(read(opened, len), original);
            let reply = pattern(page, 99);
            write(opened, &reply);
            assert_eq!(read(shared, page), reply);
            if let Some(seen) = gpu_read(target, b.gpu_id(), opened, page) {
                assert_eq!(seen, reply, "{}", target.name());
            }
        } else if gpu_write(target, a.gpu_id(), shared, &pattern(page, 3)) {
            let seen = gpu_read(target, b.gpu_id(), opened, page).unwrap();
            assert_eq!(seen, pattern(page, 3), "{}", target.name());
        }
        assert_umf(b.put_ipc_handle(&handle), UmfResult::InvalidArgument);
        assert_umf(
            b.close_ipc_handle(opened, len + 1),
            UmfResult::InvalidArgument,
        );
        b.close_ipc_handle(opened, len).unwrap();
        assert_umf(b.close_ipc_handle(opened, len), UmfResult::InvalidArgument);
        a.free(ptr, size).unwrap();
        a.put_ipc_handle(&handle).unwrap();
        assert_empty(target, &b);
    });
}

/// IPC argument errors: NULL, zero size, memory that is not the provider's or runs past the
/// allocation, a stack address to close, malformed or foreign-kind handles. For SHARED
/// memory every IPC call is NOT_SUPPORTED, whatever the arguments.
fn ipc_rejects_bad_arguments(kind: MemoryKind) {
    if kind == MemoryKind::Shared {
        return with_provider(kind, |_, p| {
            let ptr = p.alloc(page(), 0).unwrap().as_ptr();
            let garbage = IpcHandle::from_bytes(&[0x5A; IPC_HANDLE_SIZE]).unwrap();
            assert_umf(
                p.get_ipc_handle(std::ptr::null_mut(), 0),
                UmfResult::NotSupported,
            );
            assert_umf(p.put_ipc_handle(&garbage), UmfResult::NotSupported);
            assert_umf(p.open_ipc_handle(&garbage), UmfResult::NotSupported);
            assert_umf(p.close_ipc_handle(ptr, page()), UmfResult::NotSupported);
            p.free(ptr, page()).unwrap();
        });
    }
    with_provider(kind, |_, p| {
        let page = page();
        let ptr = p.alloc(page, 0).unwrap().as_ptr();
        assert_umf(
            p.get_ipc_handle(std::ptr::null_mut(), page),
            UmfResult::InvalidArgument,
        );
        assert_umf(p.get_ipc_handle(ptr, 0), UmfResult::InvalidArgument);
        assert_umf(p.get_ipc_handle(ptr, page + 1), UmfResult::InvalidArgument);
        let mut on_stack = [0u8; 16];
        let stack = on_stack.as_mut_ptr();
        assert_umf(p.get_ipc_handle(stack, 16), UmfResult::InvalidArgument);
        assert_umf(p.close_ipc_handle(stack, 16), UmfResult::InvalidArgument);
        let garbage = IpcHandle::from_bytes(&[0x5A; IPC_HANDLE_SIZE]).unwrap();
        assert_umf(p.open_ipc_handle(&garbage), UmfResult::InvalidArgument);
        assert_umf(p.put_ipc_handle(&garbage), UmfResult::InvalidArgument);
        let other_kind = match kind {
            MemoryKind::Host => MemoryKind::Device,
            _ => MemoryKind::Host,
        };
        let other = sibling(p, ProviderParams::new(other_kind));
        let foreign = other.alloc(page, 0).unwrap().as_ptr();
        let handle = other.get_ipc_handle(foreign, page).unwrap();
        assert_umf(p.open_ipc_handle(&handle), UmfResult::InvalidArgument);
        other.free(foreign, page).unwrap();
        p.free(ptr, page).unwrap();
    });
}

/// A forked child is a new KFD process: the provider and pool it inherited refuse to act,
/// while a provider the child creates on a fresh `/dev/kfd` works; the parent's memory and
/// pool keep working. HOST memory is shared with the child.
fn forked_child_is_a_new_kfd_process(kind: MemoryKind) {
    with_provider(kind, |target, p| {
        let page = page();
        let ptr = p.alloc(page, 0).unwrap().as_ptr();
        if p.host_accessible() {
            fill(ptr, page, 0x77);
        }
        let pool =
            KfdPool::new(sibling(p, ProviderParams::new(kind)), PoolParams::default()).unwrap();
        // kfd-emu's in-process attach cannot map a BO into a forked child (a different address
        // space than the supervisor's: such mappings fail with ENODEV; `kfd-emu run` can), so
        // there the child's own DEVICE allocation, which the provider maps for the CPU, is not
        // made. On hardware it is.
        let own_device_maps = kind != MemoryKind::Device || matches!(target, Target::Hardware);
        if !own_device_maps {
            kfd_skip::skip_part(
                "a forked child's own DEVICE allocation",
                "kfd-emu's in-process attach cannot map BOs into a forked child (kfd-emu run can)",
            );
        }
        assert!(
            in_forked_child(|| child_checks(kind, p, &pool, ptr, own_device_maps)),
            "{}: the forked child failed (see its line above)",
            target.name()
        );
        // CPU access only: the supervisor may still be tearing the child down, and a GPU view
        // taken from this (filtered) thread meanwhile can deadlock in kfd-emu's SVM model.
        if p.host_accessible() {
            fill(ptr, page, 0x78);
            assert_eq!(read(ptr, page), vec![0x78; page], "{}", target.name());
        }
        let block = pool.alloc(64, 0).unwrap();
        pool.free(block.as_ptr()).unwrap();
        p.free(ptr, page).unwrap();
    });
}

fn child_checks(
    kind: MemoryKind,
    inherited: &KfdProvider,
    pool: &KfdPool,
    ptr: *mut u8,
    own_allocation: bool,
) -> Result<(), String> {
    let page = page();
    let wrong = |r: Result<(), Error>, what: &str| match r {
        Err(Error::ProviderSpecific(n)) if n.code == NativeCode::WrongProcess => Ok(()),
        other => Err(format!("{what} in the child gave {other:?}")),
    };
    wrong(inherited.alloc(page, 0).map(drop), "alloc")?;
    wrong(inherited.free(ptr, page), "free")?;
    wrong(pool.alloc(64, 0).map(drop), "pool alloc")?;
    if kind == MemoryKind::Host && read(ptr, 1) != [0x77] {
        return Err("HOST memory is not shared with the child".into());
    }
    let kfd = Kfd::open().map_err(|e| e.to_string())?;
    let own = KfdProvider::new(kfd, ProviderParams::new(kind)).map_err(|e| e.to_string())?;
    if !own_allocation {
        return Ok(());
    }
    let mine = own.alloc(3 * page, 0).map_err(|e| e.to_string())?;
    if own.host_accessible() {
        fill(mine.as_ptr(), 3 * page, 0x42);
        if read(mine.as_ptr(), 3 * page).iter().any(|&b| b != 0x42) {
            return Err("the child's own memory does not hold its bytes".into());
        }
    }
    own.free(mine.as_ptr(), 3 * page).map_err(|e| e.to_string())
}

macro_rules! per_kind {
    ($($case:ident),* $(,)?) => {
        mod host {
            $( #[test] fn $case() { super::$case(super::MemoryKind::Host) } )*
        }
        mod device {
            $( #[test] fn $case() { super::$case(super::MemoryKind::Device) } )*
        }
        mod shared {
            $( #[test] fn $case() { super::$case(super::MemoryKind::Shared) } )*
        }
    };
}

per_kind!(
    alloc_rejects_wrong_alignments,
    alloc_of_impossible_sizes_is_provider_specific,
    page_sizes_and_name,
    free_follows_umf,
    free_ptr_resolves_by_pointer,
    purges_reject_bad_ranges,
    merged_pieces_are_freed_as_one,
    split_and_merge_follow_umf_rules,
    stats_track_allocated_and_peak,
    ipc_rejects_bad_arguments,
    alloc_with_umf_alignments,
    purges_of_whole_allocations,
    purge_force_reads_back_zero,
    split_halves_are_freed_separately,
    ipc_between_two_providers,
    forked_child_is_a_new_kfd_process,
);

/// Free by pointer among 100 000 live allocations (pieces of one allocation split 99 999
/// times) in a scattered order: each lookup is a B-tree search, so all of them take a small
/// fraction of the time a scan per free would (about 5·10⁹ comparisons), and the buffer
/// object goes with the last piece.
#[test]
fn free_ptr_among_a_hundred_thousand_allocations() {
    const N: usize = 100_000;
    on_every_target(&["mi300x"], |target| {
        let p = provider(target, MemoryKind::Host);
        let page = page();
        let base = p.alloc(N * page, 0).unwrap().as_ptr();
        for i in 0..N - 1 {
            p.allocation_split(base.wrapping_add(i * page), (N - i) * page, page)
                .unwrap();
        }
        assert_eq!(p.stats().allocations, N);
        let start = Instant::now();
        for i in 0..N {
            let k = (i * 7919) % N;
            let piece = base.wrapping_add(k * page);
            assert_umf(
                p.free_ptr(piece.wrapping_add(1)),
                UmfResult::InvalidArgument,
            );
            p.free_ptr(piece).unwrap();
        }
        let elapsed = start.elapsed();
        assert!(
            elapsed.as_secs_f64() < 3.0,
            "{}: 200 000 lookups took {elapsed:?}",
            target.name()
        );
        assert_empty(target, &p);
    });
}

/// HOST memory mapped on every GPU of a two-hive machine, and DEVICE memory on its hive
/// peers, is seen by each of them.
#[test]
fn peers_see_the_memory() {
    on_every_target(&["mi210x8"], |target| {
        let kfd = Kfd::open().unwrap();
        let topology = kfd_ioctl::topology::Topology::read().unwrap();
        let gpus: Vec<kfd_ioctl::GpuId> = topology.gpus().filter_map(|n| n.gpu_id()).collect();
        let hives = topology.xgmi_hives();
        let hive_mates: Vec<kfd_ioctl::GpuId> = hives
            .iter()
            .find(|h| h.len() > 1)
            .expect("mi210x8 has hives")
            .iter()
            .filter_map(|&node| topology.node(node)?.gpu_id())
            .collect();
        for (kind, owner, peers) in [
            (MemoryKind::Host, gpus[0], &gpus[1..]),
            (MemoryKind::Device, hive_mates[0], &hive_mates[1..]),
        ] {
            let params = peers
                .iter()
                .fold(ProviderParams::new(kind).gpu(owner), |p, &g| p.peer(g));
            let p = KfdProvider::new(kfd.clone(), params).unwrap();
            assert_eq!(p.gpus().len(), peers.len() + 1);
            let size = 2 * page();
            let ptr = p.alloc(size, 0).unwrap().as_ptr();
            let data = pattern(size, 5);
            write(ptr, &data);
            for &gpu in p.gpus() {
                if let Some(seen) = gpu_read(target, gpu, ptr, size) {
                    assert_eq!(seen, data, "{}: {kind:?} on gpu {gpu:#x}", target.name());
                }
            }
            p.free(ptr, size).unwrap();
        }
    });
}

/// VRAM behind a small BAR (the MI300X's frame buffer made private): the pointer is the GPU
/// address with no CPU mapping; the GPU reads and writes it, and an IPC import aliases it;
/// a forced purge is NOT_SUPPORTED and says why, a lazy one is accepted.
#[test]
fn small_bar_vram_has_no_cpu_pointer_but_a_gpu_address() {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{Model, ModelConfig};
    use kfd_ioctl::topology::HeapType;

    let mut topology = Machine::preset("mi300x").unwrap().topology().clone();
    for node in topology.nodes.iter_mut().filter(|n| n.is_gpu()) {
        for bank in &mut node.mem_banks {
            if bank.heap() == HeapType::FrameBufferPublic {
                let private = HeapType::FrameBufferPrivate.raw();
                bank.heap_type = private;
                for (key, value) in &mut bank.properties {
                    if key == "heap_type" {
                        *value = u64::from(private);
                    }
                }
            }
        }
    }
    let machine = Machine::from_topology("mi300x-small-bar", topology).unwrap();
    assert!(machine.gpus().iter().all(|g| !g.large_bar));
    let model = Model::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    })
    .unwrap();
    let target = Target::Emulated {
        machine: "mi300x-small-bar",
        model: model.clone(),
    };
    kfd_emu::supervisor::run_attached(model, || {
        let p = provider(&target, MemoryKind::Device);
        assert!(!p.host_accessible());
        let page = page();
        let size = 4 * page;
        let ptr = p.alloc(size, 0).unwrap().as_ptr();
        let data = pattern(size, 9);
        assert!(gpu_write(&target, p.gpu_id(), ptr, &data));
        assert_eq!(gpu_read(&target, p.gpu_id(), ptr, size).unwrap(), data);
        let e = assert_umf(p.purge_force(ptr, size), UmfResult::NotSupported);
        assert!(e.to_string().contains("small BAR"), "{e}");
        p.purge_lazy(ptr, size).unwrap();
        let consumer = sibling(&p, ProviderParams::new(MemoryKind::Device));
        let handle = p.get_ipc_handle(ptr.wrapping_add(page), page).unwrap();
        let opened = consumer.open_ipc_handle(&handle).unwrap().as_ptr();
        assert_eq!(
            gpu_read(&target, consumer.gpu_id(), opened, page).unwrap(),
            data[page..2 * page]
        );
        consumer.close_ipc_handle(opened, page).unwrap();
        p.free(ptr, size).unwrap();
        assert_empty(&target, &p);
    })
    .unwrap();
}
