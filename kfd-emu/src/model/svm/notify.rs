//! What the MMU interval notifier of every SVM range does when the process's address space
//! changes (`svm_range_cpu_invalidate_pagetables`): an unmap removes the pages from their
//! ranges (`svm_range_unmap_from_cpu`), any other invalidation evicts them
//! (`svm_range_evict`); and the restore worker that follows an eviction
//! (`svm_range_restore_work`).

use kfd_ioctl::abi::KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY;

use super::super::device::Device;
use super::super::driver::Driver;
use super::super::process::State;
use super::super::vmas::Vmas;
use super::env::with_env;
use super::{migrate, unmap_from_cpu};

/// The `mmu_notifier_event` of an invalidation, as far as SVM tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::model) enum Invalidation {
    /// `MMU_NOTIFY_UNMAP`: munmap, the old range of mremap, what `MAP_FIXED` replaces, a
    /// shrinking brk.
    Unmap,
    /// `MMU_NOTIFY_CLEAR` (madvise dropping pages), `MMU_NOTIFY_PROTECTION_VMA` (mprotect),
    /// `MMU_NOTIFY_PROTECTION_PAGE` (fork making private memory copy-on-write).
    Evict,
}

/// `svm_range_cpu_invalidate_pagetables` on every range of process `tgid` that overlaps pages
/// `[first, last]`. Returns whether the process's queues were quiesced by it (the restore
/// worker is to be scheduled).
pub(in crate::model) fn invalidate(
    dev: &Device,
    st: &mut State,
    tgid: i32,
    vmas: &Vmas<'_>,
    first: u64,
    last: u64,
    event: Invalidation,
) -> bool {
    with_env(dev, st, tgid, vmas, |env, p| {
        let mut quiesced = false;
        for key in p.svm.ranges.overlapping(first, last) {
            let Some(r) = p.svm.ranges.get(key) else {
                continue;
            };
            let (s, l) = (first.max(key), last.min(r.last));
            match event {
                Invalidation::Unmap => unmap_from_cpu(env, p, key, s, l),
                Invalidation::Evict => {
                    quiesced |= migrate::evict(env, p, key, s, l, KFD_SVM_UNMAP_TRIGGER_MMU_NOTIFY);
                }
            }
        }
        quiesced
    })
    .unwrap_or(false)
}

/// `svm_range_restore_work` for process `tgid` (the one of `serial`): remaps the invalid
/// ranges and resumes the queues. Returns whether it must run again (a range could not be
/// mapped: `RESTORE_RESCHEDULED`).
pub(in crate::model) fn restore_worker(m: &Driver, tgid: i32, serial: u64) -> bool {
    let Ok(vmas) = m.vmas(tgid) else {
        return false;
    };
    let mut st = m.lock();
    if st.procs.get(&tgid).is_none_or(|p| p.serial != serial) {
        return false;
    }
    with_env(&m.dev, &mut st, tgid, &vmas, |env, p| {
        migrate::restore(env, p);
        p.svm.evicted
    })
    .unwrap_or(false)
}
