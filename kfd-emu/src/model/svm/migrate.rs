//! Migration, GPU mapping and invalidation of SVM ranges: `kfd_migrate.c`
//! (`svm_migrate_to_vram`, `svm_migrate_vram_to_ram`) and the parts of `kfd_svm.c` they drive
//! (`svm_range_best_prefetch_location`, `svm_range_trigger_migration`,
//! `svm_range_validate_and_map`, `svm_range_evict`, `svm_range_unmap_from_gpus`,
//! `svm_range_restore_work`).
//!
//! A migration moves bookkeeping, not bytes: the bytes stay in the caller's mapping, where both
//! the CPU and the GPU view find them. What changes is each page's location, the GPU page
//! tables (which GPUs map the page, writable or not), the VRAM the pages hold, and the SMI
//! records the kernel would emit, in the kernel's order:
//! * a migration is one `MIGRATE_START`/`MIGRATE_END` pair per VMA piece of the migrated
//!   pages, with the invalidation of those pages between them (`migrate_vma_setup` fires the
//!   MMU notifier);
//! * the invalidation of a range that is mapped on a GPU evicts the process's queues (XNACK
//!   off, or `GPU_ALWAYS_MAPPED`: one `QUEUE_EVICTION` per GPU, then the restore worker remaps
//!   and emits `QUEUE_RESTORE`) or unmaps the pages from the GPUs (XNACK on:
//!   `UNMAP_FROM_GPU`, trigger `MMU_NOTIFY_MIGRATE`);
//! * pages of shared or file-backed VMAs are not collected by `migrate_vma_setup`: the pair of
//!   records is still emitted, the pages stay in system memory.
//!
//! VRAM is charged like a BO: a range that gets pages into VRAM gets a BO of its whole size
//! (`svm_range_vram_node_new`: `prange->npages`), freed when its last VRAM page leaves
//! (`svm_range_vram_node_free`). When the BO does not fit next to KFD's allocations and the
//! other SVM BOs, TTM evicts BOs least recently created first (`ttm_mem_evict_first`): an SVM
//! BO's eviction fence runs `svm_range_evict_svm_bo_worker`, which migrates the whole range
//! back with trigger `TTM_EVICTION` before the new migration's records. TTM skips the BOs of
//! the process whose own call allocates (`amdgpu_ttm_bo_eviction_valuable`:
//! `amdkfd_fence_check_mm(f, current->mm)`), so a prefetch (the process's ioctl) evicts none
//! of its ranges and its migration fails with `ENOMEM` (past the KFD VRAM limit: `ENOSPC`),
//! which `svm_range_trigger_migration` drops: the range stays in system memory and the call
//! succeeds; a GPU fault (the fault worker has no `mm`) evicts them. Approximations: other processes' ranges and KFD BOs are not evicted; the
//! pieces of a split range each have a BO of their own (the kernel's share one).

use kfd_ioctl::abi::{
    KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED, KFD_IOCTL_SVM_FLAG_GPU_RO,
    KFD_IOCTL_SVM_LOCATION_UNDEFINED, KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU,
    KFD_MIGRATE_TRIGGER_PREFETCH, KFD_MIGRATE_TRIGGER_TTM_EVICTION, KFD_QUEUE_EVICTION_TRIGGER_SVM,
    KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE,
};
use rustix::io::Errno;

use super::super::memory::{Charge, PAGE_SIZE};
use super::super::process::Process;
use super::super::smi::Event;
use super::env::{Env, bits};
use super::ranges::{PageState, Range};

/// `svm_range_best_prefetch_location`: where a prefetch puts range `r` — its prefetch
/// location, unless a GPU that needs access to it is outside that GPU's XGMI hive (then system
/// memory).
pub(super) fn best_prefetch_location(env: &Env<'_>, xnack: bool, r: &Range) -> u32 {
    let best = r.attrs.prefetch;
    if best == 0 || best == KFD_IOCTL_SVM_LOCATION_UNDEFINED {
        return best;
    }
    let Some(bo) = env.dev.gpu_index(best) else {
        return 0;
    };
    // An `apu_prefer_gtt` APU has no VRAM to migrate to: system memory.
    if env.dev.cfg.machine.gpus()[bo].apu {
        return 0;
    }
    let needs = if xnack {
        r.attrs.aip
    } else {
        r.attrs.access | r.attrs.aip
    };
    for g in bits(needs) {
        if g != bo && !env.same_hive(g, bo) {
            return 0;
        }
    }
    best
}

/// `svm_range_trigger_migration`: migrates range `key` to its best prefetch location; returns
/// whether it migrated. A range already at that GPU migrates again ("hmm migrate will pick
/// up right pages": `actual_loc` does not say every page is there; the "already on
/// best_loc" return of older kernels' `svm_migrate_ram_to_vram` is gone), and
/// `migrate_vma_setup` collects only system pages (`MIGRATE_VMA_SELECT_SYSTEM`): the records
/// and the invalidation are there, no page moves ([`ram_to_vram`]).
///
/// A migration to VRAM that fails is not the call's error: since "drm/amdkfd: Add VRAM
/// accounting for SVM migration" (upstream 1e214f7faaf5, Linux 6.7, in 6.6 stable) the
/// function returns 0 after `svm_migrate_to_vram` whatever it returned ("If migrating to VRAM
/// fails, driver can fall back to using system memory seamlessly"): `*migrated` is false, the
/// range stays in system memory and `svm_range_set_attr` maps it there when the call changes
/// a mapping. A failed migration to system memory is still the call's error.
pub(super) fn trigger_migration(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
) -> Result<bool, Errno> {
    let Some(r) = p.svm.ranges.get(key) else {
        return Ok(false);
    };
    let best = best_prefetch_location(env, p.xnack, r);
    let (last, actual) = (r.last, r.actual);
    if best == KFD_IOCTL_SVM_LOCATION_UNDEFINED || (best == 0 && actual == 0) {
        return Ok(false);
    }
    // The prefetch's own setup, before its migrations (timing model).
    env.dev.clock.advance(env.dev.costs.prefetch_ns());
    if best == 0 {
        vram_to_ram(env, p, key, key, last, KFD_MIGRATE_TRIGGER_PREFETCH)?;
        return Ok(true);
    }
    // ENOSPC (the KFD VRAM limit), ENOMEM (no room next to the other BOs): the range stays.
    Ok(to_vram(env, p, key, best, key, last, KFD_MIGRATE_TRIGGER_PREFETCH).is_ok())
}

/// `svm_migrate_to_vram`: pages `[s, l]` of range `key` to the VRAM of `best` (through system
/// memory when they are in another GPU's VRAM).
pub(super) fn to_vram(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
    best: u32,
    s: u64,
    l: u64,
    trigger: u32,
) -> Result<(), Errno> {
    let Some(r) = p.svm.ranges.get(key) else {
        return Err(Errno::FAULT);
    };
    let (last, actual) = (r.last, r.actual);
    if actual != 0 && actual != best {
        // svm_migrate_vram_to_vram: everything to system memory first.
        vram_to_ram(env, p, key, key, last, trigger)?;
        if p.svm.ranges.get(key).is_some_and(|r| r.actual != 0) {
            return Err(Errno::DEADLK);
        }
    }
    ram_to_vram(env, p, key, best, s, l, trigger)
}

/// `svm_migrate_ram_to_vram`.
fn ram_to_vram(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
    best_id: u32,
    s: u64,
    l: u64,
    trigger: u32,
) -> Result<(), Errno> {
    let Some(r) = p.svm.ranges.get(key) else {
        return Err(Errno::FAULT);
    };
    if s < key || l > r.last {
        return Err(Errno::FAULT);
    }
    let best = env.dev.gpu_index(best_id).ok_or(Errno::NODEV)?;
    let npages = r.last - key + 1;
    let has_bo = r.actual != 0;
    let (prefetch, preferred) = (r.attrs.prefetch, r.attrs.preferred);
    let vram_size = env.dev.cfg.machine.gpus()[best].vram_size;
    let bytes = npages * PAGE_SIZE;
    // The VRAM BO of the whole range is created unless the range has one: does it fit next to
    // KFD's allocations and the SVM BOs already there?
    let kfd_used = env.acc.vram[best].0;
    let room = |env: &Env<'_>| {
        vram_size
            .saturating_sub(env.dev.limits.pt_reserve)
            .saturating_sub(kfd_used)
            .saturating_sub(env.svm_vram[best])
    };
    // The KFD VRAM limit is reserved for the range for the duration of the migration only.
    let charge = Charge {
        system: 0,
        ttm: 0,
        vram: bytes,
    };
    if env
        .acc
        .reserve(&env.dev.limits, best, vram_size, charge)
        .is_err()
    {
        return Err(Errno::NOSPC);
    }
    if !has_bo && bytes > room(env) && trigger == KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU {
        // TTM makes room by evicting BOs, least recently created first; in the fault
        // worker (no `current->mm`) the process's own SVM BOs are fair game.
        while bytes > room(env) {
            let victim = p
                .svm
                .ranges
                .iter()
                .filter(|&(k, r)| k != key && r.actual == best_id)
                .min_by_key(|(_, r)| r.bo_seq)
                .map(|(k, r)| (k, r.last));
            let Some((victim, last)) = victim else {
                break;
            };
            if evict_svm_bo(env, p, victim, last).is_err() {
                break;
            }
        }
    }
    if !has_bo && bytes > room(env) {
        env.acc.unreserve(best, charge);
        return Err(Errno::NOMEM);
    }
    let pid = p.tgid;
    let mut moved = 0;
    for (vma, a, b) in env.vmas.pieces(s, l) {
        env.emit(
            best,
            Event::MigrateStart {
                pid,
                start: a,
                npages: b - a + 1,
                from: 0,
                to: best_id,
                prefetch,
                preferred,
                trigger,
            },
        );
        invalidate_migrate(env, p, key, a, b);
        let mut piece = 0;
        if vma.migratable()
            && let Some(r) = p.svm.ranges.get_mut(key)
        {
            piece = r.pages.count(a - key, b - key, |st| st.loc == 0);
            r.pages.update(a - key, b - key, |st| {
                if st.loc == 0 {
                    *st = PageState {
                        loc: best_id,
                        ..PageState::default()
                    };
                }
            });
        }
        moved += piece;
        // The copy of the pages that moved, over the GPU's link (timing model).
        env.dev
            .clock
            .advance(env.dev.costs.migration_ns(best, piece * PAGE_SIZE));
        env.emit(
            best,
            Event::MigrateEnd {
                pid,
                start: a,
                npages: b - a + 1,
                from: 0,
                to: best_id,
                trigger,
                error: 0,
            },
        );
    }
    if moved > 0
        && let Some(r) = p.svm.ranges.get_mut(key)
    {
        if !has_bo {
            // The new BO stays (`svm_range_vram_node_new`); with nothing moved it is freed.
            p.svm.bo_clock += 1;
            r.bo_seq = p.svm.bo_clock;
            env.svm_vram[best] += bytes;
        }
        r.actual = best_id;
        p.svm.cpu_dirty = true;
    }
    env.acc.unreserve(best, charge);
    Ok(())
}

/// `svm_migrate_vram_to_ram`: the VRAM pages of `[s, l]` of range `key` back to system memory.
pub(super) fn vram_to_ram(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
    s: u64,
    l: u64,
    trigger: u32,
) -> Result<(), Errno> {
    let Some(r) = p.svm.ranges.get(key) else {
        return Err(Errno::FAULT);
    };
    if r.actual == 0 {
        return Ok(());
    }
    if s < key || l > r.last {
        return Err(Errno::FAULT);
    }
    let from_id = r.actual;
    let node = env.dev.gpu_index(from_id).ok_or(Errno::NODEV)?;
    let (prefetch, preferred) = (r.attrs.prefetch, r.attrs.preferred);
    let pid = p.tgid;
    let pieces = env.vmas.pieces(s, l);
    let covered = pieces.last().map_or(s, |&(_, _, b)| b + 1);
    for (_, a, b) in pieces {
        env.emit(
            node,
            Event::MigrateStart {
                pid,
                start: a,
                npages: b - a + 1,
                from: from_id,
                to: 0,
                prefetch,
                preferred,
                trigger,
            },
        );
        invalidate_migrate(env, p, key, a, b);
        if let Some(r) = p.svm.ranges.get_mut(key) {
            let n = r.pages.count(a - key, b - key, |st| st.loc == from_id);
            r.pages.update(a - key, b - key, |st| {
                if st.loc == from_id {
                    *st = PageState::default();
                }
            });
            if n > 0 {
                p.svm.cpu_dirty = true;
            }
            env.dev
                .clock
                .advance(env.dev.costs.migration_ns(node, n * PAGE_SIZE));
        }
        env.emit(
            node,
            Event::MigrateEnd {
                pid,
                start: a,
                npages: b - a + 1,
                from: from_id,
                to: 0,
                trigger,
                error: 0,
            },
        );
    }
    if covered <= l {
        // A page without a VMA ends the walk.
        return Err(Errno::FAULT);
    }
    if let Some(r) = p.svm.ranges.get_mut(key)
        && r.pages.count(0, r.last - key, |st| st.loc != 0) == 0
    {
        // No VRAM page left: the BO goes (`svm_range_vram_node_free`).
        r.actual = 0;
        env.svm_vram[node] = env.svm_vram[node].saturating_sub((r.last - key + 1) * PAGE_SIZE);
    }
    Ok(())
}

/// `svm_range_evict_svm_bo_worker`: TTM evicts the VRAM BO of range `key` (last page `last`),
/// and every page of it goes back to system memory (`svm_migrate_vram_to_ram` over the whole
/// range, trigger `TTM_EVICTION`, up to 3 tries while pages stay). The kernel's pieces of a
/// split range share one BO and go together; the model gives each piece its own.
fn evict_svm_bo(env: &mut Env<'_>, p: &mut Process, key: u64, last: u64) -> Result<(), Errno> {
    if p.svm.ranges.get(key).is_none_or(|r| r.actual == 0) {
        // No BO: nothing to make room with.
        return Err(Errno::NOENT);
    }
    for _ in 0..3 {
        vram_to_ram(env, p, key, key, last, KFD_MIGRATE_TRIGGER_TTM_EVICTION)?;
        if p.svm.ranges.get(key).is_none_or(|r| r.actual == 0) {
            return Ok(());
        }
    }
    Err(Errno::BUSY)
}

/// `svm_range_evict` for an `MMU_NOTIFY_MIGRATE` invalidation of pages `[s, l]` of range `key`.
pub(super) fn invalidate_migrate(env: &mut Env<'_>, p: &mut Process, key: u64, s: u64, l: u64) {
    evict(env, p, key, s, l, KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY_MIGRATE);
}

/// `svm_range_evict`: an invalidation of pages `[s, l]` of range `key` other than an unmap.
/// With XNACK off (or `GPU_ALWAYS_MAPPED`) a range mapped on a GPU is marked invalid and the
/// first eviction quiesces the process's queues (`QUEUE_EVICTION`, trigger SVM); the restore
/// worker remaps it ([`restore`]). With XNACK on the pages are unmapped from the GPUs
/// (`UNMAP_FROM_GPU` with `trigger`: `MMU_NOTIFY_MIGRATE` for a migration, else
/// `MMU_NOTIFY`). Returns whether this eviction quiesced the queues (the restore worker is
/// to be scheduled).
pub(super) fn evict(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
    s: u64,
    l: u64,
    trigger: u32,
) -> bool {
    let xnack = p.xnack;
    let Some(r) = p.svm.ranges.get_mut(key) else {
        return false;
    };
    if !xnack || r.attrs.flags & KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED != 0 {
        if !r.mapped_to_gpu {
            return false;
        }
        r.invalid = true;
        if p.svm.evicted {
            return false;
        }
        // The first eviction quiesces the process: its queues on every GPU.
        p.svm.evicted = true;
        for g in 0..p.pdds.len() {
            let gpu_id = p.pdds[g].gpu_id;
            env.emit(
                g,
                Event::QueueEviction {
                    pid: p.tgid,
                    gpu_id,
                    trigger: KFD_QUEUE_EVICTION_TRIGGER_SVM,
                },
            );
        }
        true
    } else {
        unmap_from_gpus(env, p, key, s, l, trigger);
        false
    }
}

/// `svm_range_unmap_from_gpus`: clears the PTEs of pages `[s, l]` of range `key` on the GPUs
/// with access, one `UNMAP_FROM_GPU` each.
pub(super) fn unmap_from_gpus(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
    s: u64,
    l: u64,
    trigger: u32,
) {
    let Some(r) = p.svm.ranges.get_mut(key) else {
        return;
    };
    if !r.mapped_to_gpu {
        return;
    }
    if key == s && r.last == l {
        r.mapped_to_gpu = false;
    }
    let gpus = r.attrs.access | r.attrs.aip;
    r.pages.update(s - key, l - key, |st| {
        st.mapped &= !gpus;
        st.writable &= !gpus;
    });
    // Running dispatches translate again (their caches of GPU translations are stale).
    env.dev.invalidate_translations();
    for g in bits(gpus) {
        let gpu_id = env.gpu_id(g);
        env.emit(
            g,
            Event::UnmapFromGpu {
                pid: p.tgid,
                start: s,
                npages: l - s + 1,
                gpu_id,
                trigger,
            },
        );
    }
}

/// `svm_range_validate_and_map`: maps pages `[s, l]` of range `key` on `gpu`, or (`None`) on
/// the GPUs the range's attributes and the XNACK mode call for.
pub(super) fn validate_and_map(
    env: &mut Env<'_>,
    p: &mut Process,
    key: u64,
    s: u64,
    l: u64,
    gpu: Option<usize>,
) -> Result<(), Errno> {
    let Some(r) = p.svm.ranges.get(key) else {
        return Ok(());
    };
    let bitmap = match gpu {
        Some(g) => 1 << g,
        None if p.xnack => {
            let mut b = r.attrs.aip;
            // Prefetched or faulted to a GPU with ACCESS: map it there.
            if let Some(g) = env.dev.gpu_index(r.actual)
                && r.attrs.access & (1 << g) != 0
            {
                b |= 1 << g;
            }
            if b == 0
                && (r.mapped_to_gpu || r.attrs.flags & KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED != 0)
            {
                b = r.attrs.access;
            }
            b
        }
        None => r.attrs.access | r.attrs.aip,
    };
    if bitmap == 0 {
        return Ok(());
    }
    let bo = env.dev.gpu_index(r.actual);
    let gpu_ro = r.attrs.flags & KFD_IOCTL_SVM_FLAG_GPU_RO != 0;
    let pieces = env.vmas.pieces(s, l);
    let mut covered = s;
    for (vma, a, b) in pieces {
        // hmm_range_fault cannot read a VMA without VM_READ: the kernel skips it, meaning to
        // unmap it from the GPUs first, but its bounds mix bytes and pages
        // (`max(start, prange->start)` with `start` in bytes) and nothing is unmapped, so
        // the piece keeps whatever PTEs it had. The walk goes on.
        if !vma.read {
            covered = b + 1;
            continue;
        }
        let writable = vma.write && !gpu_ro;
        for g in bits(bitmap) {
            // The GPU must be bound (ACQUIRE_VM) to have page tables.
            if p.pdds[g].drm.is_none() {
                return Err(Errno::INVAL);
            }
            // VRAM of one GPU is mapped only on GPUs of its XGMI hive.
            if let Some(bo) = bo
                && g != bo
                && !env.same_hive(g, bo)
            {
                continue;
            }
            if let Some(r) = p.svm.ranges.get_mut(key) {
                let bit = 1u64 << g;
                r.pages.update(a - key, b - key, |st| {
                    st.mapped |= bit;
                    if writable {
                        st.writable |= bit;
                    } else {
                        st.writable &= !bit;
                    }
                });
            }
        }
        covered = b + 1;
        if b == l
            && let Some(r) = p.svm.ranges.get_mut(key)
        {
            r.mapped_to_gpu = true;
        }
    }
    if covered <= l {
        return Err(Errno::FAULT);
    }
    // Mapped: the retry-fault handler skips faults on the range for a while
    // (`prange->validate_timestamp`, set when the mapping succeeds).
    if let Some(r) = p.svm.ranges.get_mut(key) {
        r.validated_ns = env.dev.clock.now_ns();
    }
    Ok(())
}

/// `svm_range_restore_work`: after an eviction, remaps the invalidated ranges and resumes the
/// queues (`QUEUE_RESTORE` per GPU). The kernel runs it 1 ms after the eviction; the model runs
/// it when the operation that evicted is done.
pub(super) fn restore(env: &mut Env<'_>, p: &mut Process) {
    if !p.svm.evicted {
        return;
    }
    let invalid: Vec<u64> = p
        .svm
        .ranges
        .iter()
        .filter(|(_, r)| r.invalid)
        .map(|(s, _)| s)
        .collect();
    let mut rescheduled = false;
    for &key in &invalid {
        let last = p.svm.ranges.get(key).map_or(key, |r| r.last);
        if validate_and_map(env, p, key, key, last, None).is_err() {
            rescheduled = true;
            break;
        }
        if let Some(r) = p.svm.ranges.get_mut(key) {
            r.invalid = false;
        }
    }
    if !rescheduled {
        p.svm.evicted = false;
    }
    for g in 0..p.pdds.len() {
        let gpu_id = p.pdds[g].gpu_id;
        env.emit(
            g,
            Event::QueueRestore {
                pid: p.tgid,
                gpu_id,
                rescheduled,
            },
        );
    }
}
