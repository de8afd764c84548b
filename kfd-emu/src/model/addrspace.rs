//! A process's address space changing under its SVM ranges and USERPTR BOs: what the kernel's
//! MMU notifiers do when `munmap`, `mremap`, a `MAP_FIXED` `mmap`, `brk`, `madvise`,
//! `mprotect` or `fork` run. The supervisor notifies those calls and the model applies their
//! effect before answering `CONTINUE` ([`Backend::address_space`]), so that, as in the kernel,
//! the `UNMAP_FROM_GPU` records of an munmap are readable before munmap returns.
//!
//! Each call is checked as the kernel checks it first (an unaligned address, a zero length,
//! unknown flags: the call fails and nothing changes), then turned into the invalidations its
//! kernel path makes, with their `mmu_notifier_event`:
//!
//! * `MMU_NOTIFY_UNMAP` — munmap (`do_vmi_munmap`), what a `MAP_FIXED` mmap replaces, the
//!   range mremap moves or cuts off (`move_page_tables`, `do_vmi_munmap`), a brk below the
//!   current break: SVM pages leave their ranges ([`svm::invalidate`]).
//! * `MMU_NOTIFY_CLEAR` (madvise `DONTNEED`, `DONTNEED_LOCKED`, `FREE`, `REMOVE`, on the VMAs
//!   each accepts), `MMU_NOTIFY_PROTECTION_VMA` (mprotect, on the VMAs whose protection
//!   changes), `MMU_NOTIFY_PROTECTION_PAGE` (fork, on private memory: `copy_page_range` of a
//!   copy-on-write VMA): SVM ranges are evicted.
//! * Any of them over a USERPTR BO: `amdgpu_amdkfd_evict_userptr` — the BO is invalid and the
//!   first eviction quiesces the queues (`QUEUE_EVICTION`, trigger USERPTR).
//!
//! An eviction schedules the restore workers 1 ms later, as the kernel does
//! (`AMDGPU_SVM_RANGE_RESTORE_DELAY_MS`, `AMDGPU_USERPTR_RESTORE_DELAY_MS`), on a thread of
//! their own: they see the address space after the call ran.
//!
//! Approximations: the kernel's protection and fork notifiers fire only where page tables are
//! populated (`change_pmd_range`) or the VMA has an `anon_vma` (`copy_page_range`), which the
//! model does not see, so it invalidates every SVM page and USERPTR BO in such a VMA;
//! `MADV_DONTFORK`/`MADV_WIPEONFORK` memory is not told apart either. `MADV_REMOVE`
//! invalidates the caller's mapping only (the kernel's hole punch invalidates every mapping of
//! the file). A `MAP_FIXED` mmap of a file the kernel refuses for its access mode (`EACCES`)
//! still counts as replacing what was there. `shmdt` is not notified: an SVM range or USERPTR
//! BO over System V shared memory that is detached stays. A thread of the supervised process
//! that calls the model's own API (tests do) and unmaps memory while it holds the model's lock
//! cannot be waited for: its change is not applied ([`Driver::lock_for_call`]).
//!
//! [`Backend::address_space`]: crate::backend::Backend::address_space
//! [`svm::invalidate`]: super::svm::invalidate

use std::sync::{Arc, Weak};
use std::time::Duration;

use kfd_ioctl::abi::KFD_QUEUE_EVICTION_TRIGGER_USERPTR;
use rustix::io::Errno;

use super::driver::Driver;
use super::memory::PAGE_SIZE;
use super::objects::Store;
use super::process::State;
use super::smi::Event;
use super::svm::{self, Invalidation};
use super::vmas::Vmas;
use crate::backend::{AddressSpaceChange, CallerId};

const MREMAP_MAYMOVE: u32 = 1;
const MREMAP_FIXED: u32 = 2;
const MREMAP_DONTUNMAP: u32 = 4;
/// The `PROT_*` bits `mprotect` takes (`arch_validate_prot`, after `PROT_GROWSDOWN/UP`).
const PROT_KNOWN: u32 = (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u32 | PROT_SEM;
/// `PROT_SEM` (x86: accepted, meaningless).
const PROT_SEM: u32 = 0x8;
const PROT_GROWS: u32 = (libc::PROT_GROWSDOWN | libc::PROT_GROWSUP) as u32;
/// The delay of both restore workers.
const RESTORE_DELAY: Duration = Duration::from_millis(1);
/// How many times the restore worker runs again while a range cannot be mapped (the kernel
/// retries every millisecond for as long as it fails).
const RESTORE_ATTEMPTS: u32 = 1000;

/// `[start, start + PAGE_ALIGN(len))` in bytes when `start` is page-aligned and the length is
/// neither zero nor wraps: the checks munmap, mmap, madvise and mprotect make first.
fn page_range(start: u64, len: u64) -> Option<(u64, u64)> {
    if !start.is_multiple_of(PAGE_SIZE) || len == 0 {
        return None;
    }
    let end = start.checked_add(len.checked_next_multiple_of(PAGE_SIZE)?)?;
    Some((start, end))
}

/// The invalidations `change` makes, as `[start, end)` byte ranges with their event, in the
/// kernel's order; none when the kernel refuses the call before changing anything.
fn invalidations(change: AddressSpaceChange, vmas: &Vmas<'_>) -> Vec<(u64, u64, Invalidation)> {
    use Invalidation::{Evict, Unmap};
    let unmap = |range: Option<(u64, u64)>| range.map(|(s, e)| (s, e, Unmap)).into_iter().collect();
    match change {
        // __vm_munmap / do_vmi_munmap; do_mmap + mmap_region for MAP_FIXED.
        AddressSpaceChange::Unmap { start, len } | AddressSpaceChange::MapFixed { start, len } => {
            unmap(page_range(start, len))
        }
        AddressSpaceChange::Remap {
            old,
            old_len,
            new_len,
            flags,
            new_addr,
        } => remap(vmas, old, old_len, new_len, flags, new_addr),
        AddressSpaceChange::Advise { start, len, advice } => {
            let Some((start, end)) = page_range(start, len) else {
                return Vec::new();
            };
            // madvise_walk_vmas: holes are skipped (ENOMEM at the end), a VMA the advice
            // refuses (EINVAL) ends the walk.
            let mut out = Vec::new();
            for (v, s, e) in vmas.overlapping(start, end) {
                let accepted = match advice {
                    // madvise_dontneed_free_valid_vma: not VM_PFNMAP.
                    libc::MADV_DONTNEED | MADV_DONTNEED_LOCKED => !v.device,
                    // madvise_free_single_vma: anonymous memory only.
                    libc::MADV_FREE => v.anonymous && !v.shared && !v.device,
                    // madvise_remove: a shared file mapping (its hole punch).
                    libc::MADV_REMOVE => !v.anonymous && v.shared && !v.device,
                    _ => false,
                };
                if !accepted {
                    break;
                }
                out.push((s, e, Evict));
            }
            out
        }
        AddressSpaceChange::Protect { start, len, prot } => {
            let bits = prot & !PROT_GROWS;
            if bits & !PROT_KNOWN != 0 || prot & PROT_GROWS == PROT_GROWS {
                return Vec::new();
            }
            let Some((start, end)) = page_range(start, len) else {
                return Vec::new();
            };
            let want = |b: i32| bits & b as u32 != 0;
            let (read, write, exec) = (
                want(libc::PROT_READ),
                want(libc::PROT_WRITE),
                want(libc::PROT_EXEC),
            );
            // do_mprotect_pkey: the VMAs from `start` on, ending at the first hole (ENOMEM);
            // mprotect_fixup leaves a VMA whose flags do not change alone.
            let mut out = Vec::new();
            let mut at = start;
            for (v, s, e) in vmas.overlapping(start, end) {
                if s != at {
                    break;
                }
                if (v.read, v.write, v.exec) != (read, write, exec) {
                    out.push((s, e, Evict));
                }
                at = e;
            }
            out
        }
        AddressSpaceChange::Brk { addr } => {
            // brk: a break below the current one unmaps [PAGE_ALIGN(brk), PAGE_ALIGN(mm->brk)),
            // the rest of the [heap] VMA; one below start_brk changes nothing.
            let Some(new) = addr.checked_next_multiple_of(PAGE_SIZE) else {
                return Vec::new();
            };
            match vmas.covering_or_next(new) {
                Some(heap) if heap.heap && heap.start <= new && new < heap.end => {
                    vec![(new, heap.end, Unmap)]
                }
                _ => Vec::new(),
            }
        }
        // The fork's COW VMAs are found where the model has something (see `fork_spans`).
        AddressSpaceChange::Fork => Vec::new(),
    }
}

/// `MADV_DONTNEED_LOCKED` (Linux 5.18; not in every libc).
const MADV_DONTNEED_LOCKED: i32 = 24;

/// mremap's invalidations (`SYSCALL_DEFINE5(mremap)`, `mremap_to`, `move_vma`).
fn remap(
    vmas: &Vmas<'_>,
    old: u64,
    old_len: u64,
    new_len: u64,
    flags: u32,
    new_addr: u64,
) -> Vec<(u64, u64, Invalidation)> {
    let unmap = |s: u64, e: u64| (s, e, Invalidation::Unmap);
    let may_move = flags & MREMAP_MAYMOVE != 0;
    if flags & !(MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP) != 0
        || (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP) != 0 && !may_move)
        || !old.is_multiple_of(PAGE_SIZE)
    {
        return Vec::new();
    }
    let (Some(old_len), Some(new_len)) = (
        old_len.checked_next_multiple_of(PAGE_SIZE),
        new_len.checked_next_multiple_of(PAGE_SIZE),
    ) else {
        return Vec::new();
    };
    let Some(old_end) = old.checked_add(old_len) else {
        return Vec::new();
    };
    if new_len == 0 {
        return Vec::new();
    }
    // The old range must lie in one VMA (EFAULT).
    let Some(vma) = vmas.lookup(old) else {
        return Vec::new();
    };
    if old_end > vma.end {
        return Vec::new();
    }
    if flags & MREMAP_FIXED != 0 {
        let Some(new_end) = new_addr.checked_add(new_len) else {
            return Vec::new();
        };
        if !new_addr.is_multiple_of(PAGE_SIZE) || (new_addr < old_end && old < new_end) {
            return Vec::new();
        }
        // What is at the new place goes first, then the old range moves (or its tail is cut
        // off and the rest moves).
        let mut out = vec![unmap(new_addr, new_end)];
        if old_len > 0 {
            out.push(unmap(old, old_end));
        }
        return out;
    }
    if old_len >= new_len {
        // Shrinking in place: the tail is unmapped.
        return if old_len > new_len {
            vec![unmap(old + new_len, old_end)]
        } else {
            Vec::new()
        };
    }
    // Growing: in place when the VMA ends there and nothing is mapped up to the new end
    // (vma_expandable), else moved when allowed (ENOMEM otherwise).
    let Some(new_end) = old.checked_add(new_len) else {
        return Vec::new();
    };
    let room = vma.end == old_end
        && vmas
            .covering_or_next(old_end)
            .is_none_or(|next| next.start >= new_end);
    if room || !may_move || old_len == 0 {
        Vec::new()
    } else {
        vec![unmap(old, old_end)]
    }
}

/// The private memory a fork makes copy-on-write under what the process has: the parts of
/// its SVM ranges and USERPTR BOs in private, non-device VMAs.
fn fork_spans(st: &State, tgid: i32, vmas: &Vmas<'_>) -> Vec<(u64, u64, Invalidation)> {
    let Some(p) = st.procs.get(&tgid) else {
        return Vec::new();
    };
    let mut spans = p.svm.spans();
    for (addr, size) in userptrs(st, tgid) {
        spans.push((addr, addr.saturating_add(size)));
    }
    spans
        .into_iter()
        .flat_map(|(s, e)| vmas.overlapping(s, e))
        .filter(|(v, _, _)| !v.shared && !v.device)
        .map(|(_, s, e)| (s, e, Invalidation::Evict))
        .collect()
}

/// The CPU ranges `(addr, size)` of process `tgid`'s USERPTR BOs.
fn userptrs(st: &State, tgid: i32) -> Vec<(u64, u64)> {
    userptr_backings(st, tgid)
        .into_iter()
        .map(|(_, addr, size)| (addr, size))
        .collect()
}

/// `(backing id, addr, size)` of every USERPTR BO of process `tgid`.
fn userptr_backings(st: &State, tgid: i32) -> Vec<(u64, u64, u64)> {
    let Some(p) = st.procs.get(&tgid) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64, u64)> = p
        .pdds
        .iter()
        .flat_map(|pdd| pdd.bos.values())
        .filter_map(|bo| {
            let b = st.backings.get(&bo.backing)?;
            match b.store {
                Store::UserPtr { tgid: owner, addr } if owner == tgid => {
                    Some((bo.backing, addr, b.size))
                }
                _ => None,
            }
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// `amdgpu_hmm_invalidate_hsa` → `amdgpu_amdkfd_evict_userptr` for every USERPTR BO of
/// process `tgid` overlapping `[start, end)`: the BO is invalid, and the first eviction
/// quiesces the queues on every GPU (`QUEUE_EVICTION`, trigger USERPTR). Returns whether it
/// did (the restore worker is to be scheduled).
fn evict_userptrs(m: &Driver, st: &mut State, tgid: i32, start: u64, end: u64) -> bool {
    let hit: Vec<u64> = userptr_backings(st, tgid)
        .into_iter()
        .filter(|&(_, addr, size)| addr < end && start < addr.saturating_add(size))
        .map(|(id, _, _)| id)
        .collect();
    let State { procs, smi, .. } = st;
    let Some(p) = procs.get_mut(&tgid) else {
        return false;
    };
    if hit.is_empty() {
        return false;
    }
    p.userptrs.invalid.extend(hit);
    if p.userptrs.evicted {
        return false;
    }
    p.userptrs.evicted = true;
    // kgd2kfd_quiesce_mm → kfd_process_evict_queues: one record per GPU of the process.
    for pdd in &p.pdds {
        let event = Event::QueueEviction {
            pid: tgid,
            gpu_id: pdd.gpu_id,
            trigger: KFD_QUEUE_EVICTION_TRIGGER_USERPTR,
        };
        smi.emit(m.dev.cfg.kfd_minor, pdd.gpu, &event);
    }
    true
}

/// `amdgpu_amdkfd_restore_userptr_worker`: gets the pages of the invalid USERPTR BOs again
/// (`update_invalid_user_pages` → `amdgpu_ttm_tt_get_user_pages`, walked as at ALLOC,
/// [`Vmas::fault_in`](super::vmas::Vmas::fault_in)) and resumes the queues (`QUEUE_RESTORE`
/// per GPU). A BO whose memory is gone, or is now device memory (a BO's CPU mapping put in its
/// place), keeps none: that `EFAULT` counts as success ("it will fail later with a VM fault if
/// the GPU tries to access it"). Not modelled: the kernel's `EPERM` for memory made read-only,
/// on which the worker fails and is rescheduled every 1 ms with the queues left evicted; here
/// such a BO keeps its pages.
fn restore_userptrs(m: &Driver, tgid: i32, serial: u64) {
    let Ok(vmas) = m.vmas(tgid) else {
        return;
    };
    let mut st = m.lock();
    let ranges: Vec<(u64, u64, u64)> = userptr_backings(&st, tgid);
    let State { procs, smi, .. } = &mut *st;
    let Some(p) = procs.get_mut(&tgid).filter(|p| p.serial == serial) else {
        return;
    };
    if !p.userptrs.evicted {
        return;
    }
    for id in std::mem::take(&mut p.userptrs.invalid) {
        let present = ranges
            .iter()
            .find(|r| r.0 == id)
            .is_some_and(|&(_, addr, size)| {
                addr.checked_add(size)
                    .is_some_and(|end| vmas.fault_in(addr, end, true) != Err(Errno::FAULT))
            });
        if present {
            p.userptrs.no_pages.remove(&id);
        } else {
            p.userptrs.no_pages.insert(id);
        }
    }
    p.userptrs.evicted = false;
    for pdd in &p.pdds {
        let event = Event::QueueRestore {
            pid: tgid,
            gpu_id: pdd.gpu_id,
            rescheduled: false,
        };
        smi.emit(m.dev.cfg.kfd_minor, pdd.gpu, &event);
    }
}

/// Applies `change` of process `tgid`'s address space (see the [module docs](self)) and
/// schedules the restore workers when it evicted something.
pub(super) fn changed(m: &Arc<Driver>, caller: CallerId, change: AddressSpaceChange) {
    let tgid = caller.tgid;
    let serial = {
        let Some(st) = m.lock_for_call(caller.tid) else {
            return;
        };
        match st.procs.get(&tgid) {
            Some(p) if !p.svm.is_empty() || !userptr_backings(&st, tgid).is_empty() => p.serial,
            // Nothing the notifiers watch.
            _ => return,
        }
    };
    let Ok(vmas) = m.vmas(tgid) else {
        return;
    };
    let Some(mut st) = m.lock_for_call(caller.tid) else {
        return;
    };
    let list = match change {
        AddressSpaceChange::Fork => fork_spans(&st, tgid, &vmas),
        _ => invalidations(change, &vmas),
    };
    let mut quiesced = false;
    for (start, end, event) in list {
        let (first, last) = (start / PAGE_SIZE, (end - 1) / PAGE_SIZE);
        quiesced |= svm::invalidate(&m.dev, &mut st, tgid, &vmas, first, last, event);
        quiesced |= evict_userptrs(m, &mut st, tgid, start, end);
    }
    // Every notifier event: running dispatches translate process memory again (a USERPTR
    // page unmapped or replaced is not reached through a stale translation).
    m.dev.invalidate_translations();
    drop(st);
    if quiesced {
        schedule_restore(Arc::downgrade(m), tgid, serial);
    }
}

/// Runs the restore workers of process `tgid` [`RESTORE_DELAY`] from now, on a thread, again
/// every [`RESTORE_DELAY`] while SVM ranges cannot be mapped (at most [`RESTORE_ATTEMPTS`]
/// times).
fn schedule_restore(m: Weak<Driver>, tgid: i32, serial: u64) {
    let work = move || {
        for _ in 0..RESTORE_ATTEMPTS {
            std::thread::sleep(RESTORE_DELAY);
            let Some(m) = m.upgrade() else {
                return;
            };
            restore_userptrs(&m, tgid, serial);
            if !svm::restore_worker(&m, tgid, serial) {
                return;
            }
        }
    };
    // Started by the helper: this runs while an address-space call is served (see
    // `crate::own`).
    crate::own::spawn_later("kfd-emu-restore", work);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps() -> Vmas<'static> {
        Vmas::parse(
            "\
01000000-01021000 rw-p 00000000 00:00 0           [heap]
7f0000000000-7f0000004000 rw-p 00000000 00:00 0
7f0000004000-7f0000008000 r--p 00000000 00:00 0
7f0000010000-7f0000012000 rw-s 00000000 00:01 4243        /dev/zero (deleted)
",
            &|_: u64, _: u64| false,
        )
    }

    const BASE: u64 = 0x7f00_0000_0000;

    #[test]
    fn calls_the_kernel_refuses_change_nothing() {
        let v = maps();
        let none = |change| invalidations(change, &v).is_empty();
        assert!(none(AddressSpaceChange::Unmap {
            start: BASE + 1,
            len: 4096
        }));
        assert!(none(AddressSpaceChange::Unmap {
            start: BASE,
            len: 0
        }));
        assert!(none(AddressSpaceChange::Unmap {
            start: BASE,
            len: u64::MAX
        }));
        assert!(none(AddressSpaceChange::Protect {
            start: BASE,
            len: 4096,
            prot: 0x100
        }));
        assert!(none(AddressSpaceChange::Protect {
            start: BASE + 8,
            len: 4096,
            prot: 0
        }));
        assert!(none(AddressSpaceChange::Advise {
            start: BASE,
            len: 0,
            advice: libc::MADV_DONTNEED
        }));
        let remap = |flags| AddressSpaceChange::Remap {
            old: BASE,
            old_len: 4096,
            new_len: 8192,
            flags,
            new_addr: 0,
        };
        assert!(none(remap(MREMAP_FIXED)), "FIXED without MAYMOVE");
        assert!(none(remap(0x80)), "unknown flag");
        assert!(none(remap(0)), "no room to grow, may not move: ENOMEM");
    }

    #[test]
    fn each_call_invalidates_what_its_kernel_path_does() {
        use Invalidation::{Evict, Unmap};
        let v = maps();
        let got = |change| invalidations(change, &v);
        assert_eq!(
            got(AddressSpaceChange::Unmap {
                start: BASE,
                len: 1
            }),
            [(BASE, BASE + 4096, Unmap)]
        );
        // mprotect to read-only: only the VMA whose protection changes, up to the hole.
        let prot = libc::PROT_READ as u32;
        assert_eq!(
            got(AddressSpaceChange::Protect {
                start: BASE,
                len: 0x20000,
                prot
            }),
            [(BASE, BASE + 0x4000, Evict)]
        );
        // DONTNEED skips the hole and goes on; FREE stops at the shared mapping.
        let advise = |advice| AddressSpaceChange::Advise {
            start: BASE + 0x6000,
            len: 0xc000,
            advice,
        };
        assert_eq!(
            got(advise(libc::MADV_DONTNEED)),
            [
                (BASE + 0x6000, BASE + 0x8000, Evict),
                (BASE + 0x1_0000, BASE + 0x1_2000, Evict)
            ]
        );
        assert_eq!(
            got(advise(libc::MADV_FREE)),
            [(BASE + 0x6000, BASE + 0x8000, Evict)]
        );
        assert_eq!(
            got(advise(libc::MADV_REMOVE)),
            [],
            "private anonymous: EINVAL"
        );
        // mremap: growing into the next VMA moves; shrinking cuts the tail; FIXED unmaps the
        // target first.
        let remap = |old_len, new_len, flags, new_addr| AddressSpaceChange::Remap {
            old: BASE,
            old_len,
            new_len,
            flags,
            new_addr,
        };
        assert_eq!(
            got(remap(0x4000, 0x8000, MREMAP_MAYMOVE, 0)),
            [(BASE, BASE + 0x4000, Unmap)]
        );
        assert_eq!(
            got(remap(0x4000, 0x1000, 0, 0)),
            [(BASE + 0x1000, BASE + 0x4000, Unmap)]
        );
        let to = BASE + 0x10_0000;
        assert_eq!(
            got(remap(0x2000, 0x2000, MREMAP_MAYMOVE | MREMAP_FIXED, to)),
            [(to, to + 0x2000, Unmap), (BASE, BASE + 0x2000, Unmap)]
        );
        assert_eq!(
            got(remap(0x8000, 0x9000, MREMAP_MAYMOVE, 0)),
            [],
            "EFAULT: two VMAs"
        );
        // brk: below the break unmaps the rest of the heap, above it nothing.
        assert_eq!(
            got(AddressSpaceChange::Brk { addr: 0x0100_0801 }),
            [(0x0100_1000, 0x0102_1000, Unmap)]
        );
        assert_eq!(got(AddressSpaceChange::Brk { addr: 0x0200_0000 }), []);
        assert_eq!(got(AddressSpaceChange::Brk { addr: 0 }), []);
    }
}
