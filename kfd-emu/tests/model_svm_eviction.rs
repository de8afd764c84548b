//! VRAM oversubscription by SVM ranges (`kfd_migrate.c`, `svm_migrate_ram_to_vram`;
//! `kfd_svm.c`, `svm_range_vram_node_new`, `svm_range_evict_svm_bo_worker`;
//! `amdgpu_ttm.c`, `amdgpu_ttm_bo_eviction_valuable`): each range in VRAM holds a BO of its
//! whole size; a migration whose BO does not fit makes TTM evict BOs, least recently created
//! first, each range going back to system memory with trigger `TTM_EVICTION` — from the GPU
//! fault worker, which may evict the process's own BOs, but not from a prefetch in the
//! process's own ioctl, whose migration fails with `ENOMEM` instead (the call succeeds, the
//! range staying in system memory: `svm_range_trigger_migration`). On a machine given a small VRAM
//! (`Machine::with_vram`, `kfd-emu run --vram`).

mod model_support;
mod model_svm_support;

use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::SmiEvents;
use kfd_ioctl::abi::*;
use model_svm_support::*;

/// The granule and the largest range on a small-VRAM machine (`max_svm_range_pages`'s 2 MiB
/// floor): each 2 MiB block is a range of its own.
const BLOCK: u64 = 2 * MIB;

/// An mi300x with 64 MiB of VRAM.
fn small() -> Arc<Model> {
    let machine = Machine::preset("mi300x")
        .expect("preset")
        .with_vram(64 * MIB)
        .expect("with_vram");
    assert_eq!(machine.gpus()[0].vram_size, 64 * MIB);
    Model::new(ModelConfig {
        machine,
        ..ModelConfig::default()
    })
    .expect("model")
}

fn smi(kfd: &kfd_ioctl::Kfd, gpu: u32) -> SmiEvents {
    let smi = kfd.smi_events(gpu).expect("SMI_EVENTS");
    smi.set_mask(
        SmiEventMask::MIGRATE_START
            | SmiEventMask::MIGRATE_END
            | SmiEventMask::PAGE_FAULT_START
            | SmiEventMask::PAGE_FAULT_END
            | SmiEventMask::QUEUE_EVICTION
            | SmiEventMask::QUEUE_RESTORE
            | SmiEventMask::UNMAP_FROM_GPU,
    )
    .expect("mask");
    smi
}

/// `len` bytes of private anonymous memory starting on a 2 MiB boundary, and that start.
fn aligned(len: u64) -> (Anon, u64) {
    let mem = Anon::new(len + BLOCK);
    let start = mem.addr.next_multiple_of(BLOCK);
    (mem, start)
}

/// With XNACK on, the GPU streams through twice as many 2 MiB ranges as fit in its VRAM: every
/// fault past the first `fits` evicts the oldest range (its MIGRATE pair with trigger
/// TTM_EVICTION and its GPU mapping invalidated, before the faulting range's own migration),
/// VRAM never holds more than fits, and every byte the GPU wrote is there afterwards, seen
/// from the CPU and from the GPU (which faults the evicted ranges back in).
#[test]
fn a_working_set_of_twice_the_vram_streams_through_with_ttm_evictions() {
    let model = small();
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let g = g[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let room = kfd.available_memory(g).expect("available");
        let fits = room / BLOCK;
        assert!(fits >= 2, "64 MiB leaves {room} bytes");
        let n = 2 * fits;
        let (mem, start) = aligned(n * BLOCK);
        svm_set(&kfd, start, n * BLOCK, &[access(g)]).expect("register");
        assert_eq!(view.svm_ranges(pid()).len() as u64, n);
        let mut on = smi(&kfd, g);
        let pid = pid();
        for i in 0..n {
            let at = start + i * BLOCK;
            view.gpu_write(pid, g, at + 8, &(i + 1).to_le_bytes())
                .expect("GPU write");
            let (page, p) = (at / PAGE, at / PAGE);
            let mut want = vec![format!("7 T -{pid} @{page:x}({g:x}) W")];
            if i >= fits {
                // The oldest BO goes first.
                let v = (start + (i - fits) * BLOCK) / PAGE;
                want.extend([
                    format!("5 T -{pid} @{v:x}(200) {g:x}->0 ffffffff:ffffffff 3"),
                    format!("b T -{pid} @{v:x}(200) {g:x} 1"),
                    format!("6 T -{pid} @{v:x}(200) {g:x}->0 3 0"),
                ]);
            }
            want.extend([
                format!("5 T -{pid} @{p:x}(200) 0->{g:x} ffffffff:ffffffff 1"),
                format!("6 T -{pid} @{p:x}(200) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{page:x}({g:x}) M"),
            ]);
            assert_eq!(drain(&mut on), want, "block {i} of {n}, {fits} fit");
            assert_eq!(view.svm_vram_usage(g), (i + 1).min(fits) * BLOCK);
        }
        let in_vram = view
            .svm_ranges(pid)
            .iter()
            .filter(|r| r.actual_loc == g)
            .map(|r| r.start)
            .collect::<Vec<_>>();
        let newest: Vec<u64> = (n - fits..n).map(|i| start + i * BLOCK).collect();
        assert_eq!(in_vram, newest, "the newest ranges stay");
        for i in 0..n {
            let mut cpu = [0u8; 8];
            mem.read(start + i * BLOCK + 8 - mem.addr, &mut cpu);
            assert_eq!(u64::from_le_bytes(cpu), i + 1, "block {i} seen by the CPU");
            let mut gpu = [0u8; 8];
            view.gpu_read(pid, g, start + i * BLOCK + 8, &mut gpu)
                .expect("GPU read");
            assert_eq!(u64::from_le_bytes(gpu), i + 1, "block {i} seen by the GPU");
        }
        assert!(view.svm_vram_usage(g) <= fits * BLOCK);
    })
    .expect("attach");
}

/// A prefetch is the process's own ioctl: TTM does not evict the process's own BOs for it
/// (`amdgpu_ttm_bo_eviction_valuable`), so the migration of a prefetch that does not fit next
/// to them fails with ENOMEM, makes no record and moves nothing; the call still succeeds, the
/// range staying in system memory (`svm_range_trigger_migration` returns 0 since upstream
/// 1e214f7faaf5), while one that fits exactly migrates; a GPU fault then evicts the oldest
/// BO: the prefetch's last range, as SET_ATTR migrates the ranges of its update list newest
/// first (`list_add`), so from the highest address down.
#[test]
fn a_prefetch_that_does_not_fit_stays_in_system_memory_without_evicting_the_processs_own_ranges() {
    let model = small();
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let g = g[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let room = kfd.available_memory(g).expect("available");
        let fits = room / BLOCK;
        let (_mem, start) = aligned((fits + 1) * BLOCK);
        let mut on = smi(&kfd, g);
        // Exactly fits: every range but the last.
        svm_set(&kfd, start, fits * BLOCK, &[prefetch(g)]).expect("prefetch what fits");
        assert_eq!(view.svm_vram_usage(g), fits * BLOCK);
        assert_eq!(
            drain(&mut on).len() as u64,
            2 * fits,
            "a MIGRATE pair per range"
        );
        let last = start + fits * BLOCK;
        assert_eq!(
            svm_set(&kfd, last, BLOCK, &[prefetch(g)]),
            Ok(()),
            "{room} bytes of room: the range stays in system memory"
        );
        assert_eq!(drain(&mut on), Vec::<String>::new());
        assert_eq!(view.svm_vram_usage(g), fits * BLOCK);
        let r = view.svm_ranges(pid());
        assert!(
            r.iter()
                .filter(|r| r.start < last)
                .all(|r| r.actual_loc == g)
        );
        assert_eq!(
            r.iter().find(|r| r.start == last).map(|r| r.actual_loc),
            Some(0)
        );
        // The GPU's fault on it evicts the oldest BO instead.
        view.gpu_read(pid(), g, last, &mut [0u8; 4])
            .expect("GPU read");
        let pid = pid();
        let (v, p) = ((last - BLOCK) / PAGE, last / PAGE);
        assert_eq!(
            drain(&mut on),
            [
                format!("7 T -{pid} @{p:x}({g:x}) R"),
                format!("5 T -{pid} @{v:x}(200) {g:x}->0 {g:x}:ffffffff 3"),
                format!("b T -{pid} @{v:x}(200) {g:x} 1"),
                format!("6 T -{pid} @{v:x}(200) {g:x}->0 3 0"),
                format!("5 T -{pid} @{p:x}(200) 0->{g:x} {g:x}:ffffffff 1"),
                format!("6 T -{pid} @{p:x}(200) 0->{g:x} 1 0"),
                format!("8 T -{pid} @{p:x}({g:x}) M"),
            ]
        );
        assert_eq!(view.svm_vram_usage(g), fits * BLOCK);
    })
    .expect("attach");
}

/// A range in VRAM holds a BO of its whole size (`svm_range_vram_node_new`: `prange->npages`),
/// not only of the pages that moved: one 4 KiB GPU fault with granularity 0 in a 2 MiB range
/// charges 2 MiB, and the BO goes when its last VRAM page leaves.
#[test]
fn svm_vram_is_charged_by_the_whole_ranges_bo() {
    let model = small();
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let g = g[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let (_mem, start) = aligned(BLOCK);
        svm_set(&kfd, start, BLOCK, &[access(g), granularity(0)]).expect("register");
        view.gpu_read(pid(), g, start + PAGE, &mut [0u8; 4])
            .expect("GPU read");
        let page = view.svm_page(pid(), start + PAGE).expect("registered");
        assert_eq!(page.location, g);
        assert_eq!(view.svm_page(pid(), start).expect("registered").location, 0);
        assert_eq!(view.svm_vram_usage(g), BLOCK);
        svm_set(&kfd, start, BLOCK, &[prefetch(0)]).expect("back");
        assert_eq!(view.svm_vram_usage(g), 0);
    })
    .expect("attach");
}

/// A fault whose BO needs the room of two smaller ones evicts both, oldest first, before its
/// own migration: VRAM full of 1 MiB ranges, a 2 MiB range's fault evicts two.
#[test]
fn a_larger_range_evicts_as_many_smaller_ones_as_it_needs() {
    let model = small();
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let g = g[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let room = kfd.available_memory(g).expect("available");
        let small_ranges = room / MIB;
        // Every 1 MiB range in its own 2 MiB block: no two in one range.
        let (_mem, start) = aligned((small_ranges + 1) * BLOCK);
        for i in 0..small_ranges {
            let at = start + i * BLOCK;
            svm_set(&kfd, at, MIB, &[access(g)]).expect("register");
            view.gpu_read(pid(), g, at, &mut [0u8; 4])
                .expect("GPU read");
        }
        assert_eq!(view.svm_vram_usage(g), small_ranges * MIB);
        let big = start + small_ranges * BLOCK;
        svm_set(&kfd, big, BLOCK, &[access(g)]).expect("register");
        let mut on = smi(&kfd, g);
        view.gpu_read(pid(), g, big, &mut [0u8; 4])
            .expect("GPU read");
        let records = drain(&mut on);
        let evicted: Vec<&String> = records.iter().filter(|r| r.ends_with(" 3 0")).collect();
        let pid = pid();
        let (v0, v1) = (start / PAGE, (start + BLOCK) / PAGE);
        assert_eq!(
            evicted,
            [
                &format!("6 T -{pid} @{v0:x}(100) {g:x}->0 3 0"),
                &format!("6 T -{pid} @{v1:x}(100) {g:x}->0 3 0"),
            ],
            "{records:?}"
        );
        let r = view.svm_ranges(pid);
        assert_eq!(
            r.iter().find(|r| r.start == big).map(|r| r.actual_loc),
            Some(g)
        );
        assert_eq!(view.svm_vram_usage(g), (small_ranges - 2) * MIB + BLOCK);
    })
    .expect("attach");
}

/// TTM evicts until the new BO fits and no further (`ttm_bo_mem_space` tries the placement
/// again after each `ttm_mem_evict_first`): with the VRAM room an exact multiple of the 2 MiB
/// ranges (a KFD BO takes the rest), the fault on the range past those that fit evicts
/// exactly one of them, and VRAM ends exactly full.
#[test]
fn eviction_stops_as_soon_as_the_new_bo_fits() {
    let model = small();
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, g) = open_all(&view);
        let g = g[0];
        kfd.set_xnack_mode(true).expect("XNACK on");
        let room = kfd.available_memory(g).expect("available");
        let (fits, rest) = (room / BLOCK, room % BLOCK);
        let flags = AllocMemFlags::VRAM
            .union(AllocMemFlags::WRITABLE)
            .union(AllocMemFlags::PUBLIC);
        let _filler = (rest != 0).then(|| {
            kfd.alloc_memory_of_gpu(g, 0x6000_0000_0000, rest, flags)
                .expect("the rest of the room")
        });
        let (_mem, start) = aligned((fits + 1) * BLOCK);
        svm_set(&kfd, start, (fits + 1) * BLOCK, &[access(g)]).expect("register");
        let mut on = smi(&kfd, g);
        let pid = pid();
        for i in 0..fits {
            view.gpu_write(pid, g, start + i * BLOCK, &[1])
                .expect("GPU write");
        }
        assert!(
            drain(&mut on).iter().all(|r| !r.ends_with(" 3")),
            "no eviction while they fit"
        );
        assert_eq!(view.svm_vram_usage(g), fits * BLOCK);
        view.gpu_write(pid, g, start + fits * BLOCK, &[1])
            .expect("GPU write");
        let evictions = drain(&mut on)
            .into_iter()
            .filter(|r| r.starts_with('5') && r.ends_with(" 3"))
            .count();
        assert_eq!(evictions, 1, "{fits} ranges of {room} bytes of room");
        assert_eq!(view.svm_vram_usage(g), fits * BLOCK);
    })
    .expect("attach");
}
