//! GPU accesses to SVM memory through the model's GPU view: the page-table check, and with
//! XNACK on the retry-fault handler `svm_range_restore_pages`, which creates ranges for memory
//! nobody registered, migrates toward the best location and maps the faulting GPU.
//!
//! Retry faults are filtered before they make SMI records, as the kernel filters them:
//! - `svm_range_restore_pages` drops a fault on a range that `svm_range_validate_and_map`
//!   mapped less than `AMDGPU_SVM_RANGE_RETRY_FAULT_PENDING` (2 ms, `kfd_svm.c`) before the
//!   handler runs (`ktime_before(timestamp, validate_timestamp + 2 ms)`: "skip duplicate vm
//!   fault on different pages of same range"), before any record; the GPU retries the
//!   access, and `amdgpu_gmc_filter_faults` (`amdgpu_gmc.c`) drops the retries of the same
//!   address while one is in its fault ring, so the fault is handled, with its
//!   `PAGE_FAULT_START`/`END`, by the first retry after the window. The GPU view's access
//!   waits until the window has passed ([`Clock::wait_until`](super::super::timing::Clock):
//!   modeled time on the model and program clocks) and handles the fault then: one pair of
//!   records, stamped at the window's end, and none for the dropped tries. (The kernel's
//!   first retry after the window comes up to the fault ring's timeout later.) On the wall
//!   clock the fault is handled at once: waiting would mean sleeping with the driver's state
//!   held, which stalls every other program's calls.
//! - a fault the same address makes again while the first is handled is one fault
//!   (`amdgpu_gmc_filter_faults`): the GPU view handles an access's fault before the access
//!   goes on, so there is no second one.
//! - `svm_range_skip_recover` (a range whose deferred work, an unmap or an add, is pending)
//!   never applies: the model runs that work at once.

use kfd_ioctl::abi::{
    KFD_IOCTL_SVM_LOCATION_SYSMEM, KFD_IOCTL_SVM_LOCATION_UNDEFINED,
    KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU,
};
use rustix::io::Errno;

use super::super::device::Device;
use super::super::driver::Driver;
use super::super::gpu_view::GpuFaultReason;
use super::super::memory::PAGE_SIZE;
use super::super::objects::Store;
use super::super::process::{Process, State};
use super::super::smi::Event;
use super::super::vmas::Vmas;
use super::env::{Env, with_env};
use super::migrate::{restore, to_vram, validate_and_map, vram_to_ram};
use super::ranges::{Attrs, Range};
use super::{check_vm, supported};

/// The 2 MiB block (in pages) an unregistered range is created around.
const UNREGISTERED_BLOCK: u64 = 512;

/// `AMDGPU_SVM_RANGE_RETRY_FAULT_PENDING` (`kfd_svm.c`): how long after a range's
/// validation the retry-fault handler skips faults on it, ns.
const RETRY_FAULT_PENDING_NS: u64 = 2_000_000;

/// Makes the page at `va` accessible to GPU `gpu` of process `tgid` for a read or a write, as
/// the hardware and the fault handler would; `Ok` when the access may go ahead in the caller's
/// memory. `vmas` keeps the caller's VMAs for the rest of the access.
pub(in crate::model) fn gpu_access<'a>(
    m: &'a Driver,
    st: &mut State,
    tgid: i32,
    gpu: usize,
    va: u64,
    write: bool,
    vmas: &mut Option<Vmas<'a>>,
) -> Result<(), GpuFaultReason> {
    let p = st.procs.get(&tgid).ok_or(GpuFaultReason::NoProcess)?;
    if (p.svm.ranges.is_empty() && !p.xnack) || p.pdds[gpu].drm.is_none() {
        return Err(GpuFaultReason::NotMapped);
    }
    if vmas.is_none() {
        *vmas = Some(m.vmas(tgid).map_err(|_| GpuFaultReason::NotMapped)?);
    }
    let Some(vmas) = vmas.as_ref() else {
        return Err(GpuFaultReason::NotMapped);
    };
    with_env(&m.dev, st, tgid, vmas, |env, p| {
        let page = va / PAGE_SIZE;
        let bit = 1u64 << gpu;
        for attempt in 0..2 {
            if let Some(key) = p.svm.ranges.containing(page)
                && let Some(r) = p.svm.ranges.get(key)
            {
                let state = r.pages.get(page - key);
                if state.mapped & bit != 0 {
                    return if write && state.writable & bit == 0 {
                        Err(GpuFaultReason::ReadOnly)
                    } else {
                        Ok(())
                    };
                }
            }
            if !p.xnack || attempt == 1 {
                break;
            }
            let restored = restore_pages(env, p, gpu, page, write);
            if std::mem::take(&mut p.svm.cpu_dirty) {
                m.cpu.wake(tgid);
            }
            restored.map_err(|e| match e {
                Errno::PERM => GpuFaultReason::ReadOnly,
                Errno::ACCESS => GpuFaultReason::NoAccess,
                _ => GpuFaultReason::NotMapped,
            })?;
        }
        Err(GpuFaultReason::NotMapped)
    })
    .unwrap_or(Err(GpuFaultReason::NoProcess))
}

/// Whether GPU index `gpu` of process `p` maps SVM page `va` now (its PTE is valid: the access
/// [`gpu_access`] would allow without a retry fault), and if so whether writable. Translates
/// only; used by a dispatch's translation cache (`kernel`), which asks again after every
/// invalidation ([`Device::translations`](crate::model::device::Device)).
pub(in crate::model) fn gpu_mapped(p: &Process, gpu: usize, va: u64) -> Option<bool> {
    p.pdds.get(gpu)?.drm.as_ref()?;
    let page = va / PAGE_SIZE;
    let bit = 1u64 << gpu;
    let key = p.svm.ranges.containing(page)?;
    let state = p.svm.ranges.get(key)?.pages.get(page - key);
    (state.mapped & bit != 0).then_some(state.writable & bit != 0)
}

/// `svm_range_restore_pages`: handles a retry fault of GPU `gpu` on `page`.
fn restore_pages(
    env: &mut Env<'_>,
    p: &mut Process,
    gpu: usize,
    page: u64,
    write: bool,
) -> Result<(), Errno> {
    let key = match p.svm.ranges.containing(page) {
        Some(key) => key,
        None => create_unregistered(env, p, page).ok_or(Errno::FAULT)?,
    };
    // A range validated less than 2 ms ago: this try is dropped, and the GPU's retry that
    // gets through comes once the window has passed (see the module docs).
    if let Some(r) = p.svm.ranges.get(key)
        && r.validated_ns != 0
    {
        env.dev
            .clock
            .wait_until(r.validated_ns.saturating_add(RETRY_FAULT_PENDING_NS));
    }
    let ts = env.dev.clock.now_ns();
    let Some(vma) = env.vmas.lookup(page * PAGE_SIZE) else {
        // A stale fault on memory munmap removed.
        return Ok(());
    };
    // svm_fault_allowed
    if !vma.read || (write && !vma.write) {
        return Err(Errno::PERM);
    }
    let Some(r) = p.svm.ranges.get(key) else {
        return Err(Errno::FAULT);
    };
    let best = best_restore_location(env, r, gpu).ok_or(Errno::ACCESS)?;
    let gpu_id = env.gpu_id(gpu);
    let pid = p.tgid;
    env.emit(
        gpu,
        Event::PageFaultStart {
            ns: ts,
            pid,
            page,
            gpu_id,
            write,
        },
    );
    // The fault's service (interrupt, restore worker, page-table update) before its migration.
    env.dev.clock.advance(env.dev.costs.fault_ns());
    // The migration block: the granularity-aligned block around the fault, within the range.
    let size = 1u64 << r.attrs.granularity;
    let s = (page & !(size - 1)).max(key);
    let l = page
        .checked_add(1)
        .and_then(|p1| p1.checked_next_multiple_of(size))
        .map_or(r.last, |end| (end - 1).min(r.last));
    let migration = r.actual != 0 || best != 0;
    if migration {
        let result = if best != 0 {
            match to_vram(env, p, key, best, s, l, KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU) {
                Ok(()) => Ok(()),
                Err(_) => {
                    // Fall back to system memory.
                    let actual = p.svm.ranges.get(key).map_or(0, |r| r.actual);
                    if actual != 0 && actual != best {
                        vram_to_ram(env, p, key, s, l, KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU)
                    } else {
                        Ok(())
                    }
                }
            }
        } else {
            vram_to_ram(env, p, key, s, l, KFD_MIGRATE_TRIGGER_PAGEFAULT_GPU)
        };
        result?;
    }
    // A mapping failure leaves the page unmapped: the access faults again.
    let _ = validate_and_map(env, p, key, s, l, Some(gpu));
    env.emit(
        gpu,
        Event::PageFaultEnd {
            pid,
            page,
            gpu_id,
            migrated: migration,
        },
    );
    restore(env, p);
    Ok(())
}

/// `svm_range_best_restore_location`: where a fault of `gpu` puts the range: the preferred
/// location when the GPU can reach it, the GPU itself with ACCESS, the current location with
/// ACCESS_IN_PLACE (system memory across hives); `None` when the GPU has no access.
fn best_restore_location(env: &Env<'_>, r: &Range, gpu: usize) -> Option<u32> {
    let gpu_id = env.gpu_id(gpu);
    // An `apu_prefer_gtt` APU restores the range in system memory.
    if env.dev.cfg.machine.gpus()[gpu].apu {
        return Some(0);
    }
    let preferred = r.attrs.preferred;
    if preferred == gpu_id || preferred == KFD_IOCTL_SVM_LOCATION_SYSMEM {
        return Some(preferred);
    }
    if preferred != KFD_IOCTL_SVM_LOCATION_UNDEFINED
        && let Some(p) = env.dev.gpu_index(preferred)
        && env.same_hive(gpu, p)
    {
        return Some(preferred);
    }
    if r.attrs.access & (1 << gpu) != 0 {
        return Some(gpu_id);
    }
    if r.attrs.aip & (1 << gpu) != 0 {
        return match env.dev.gpu_index(r.actual) {
            Some(bo) if env.same_hive(gpu, bo) => Some(r.actual),
            _ => Some(0),
        };
    }
    None
}

/// `svm_range_create_unregistered_range`: a range for memory that was never registered,
/// around a fault on `page` (XNACK on: the GPU may touch any of the process's memory).
fn create_unregistered(env: &mut Env<'_>, p: &mut Process, page: u64) -> Option<u64> {
    let vma = env.vmas.lookup(page * PAGE_SIZE)?;
    let mut first = (vma.start / PAGE_SIZE).max(page & !(UNREGISTERED_BLOCK - 1));
    let mut end = (vma.end / PAGE_SIZE).min((page + 1).next_multiple_of(UNREGISTERED_BLOCK));
    if let Some(next) = p.svm.ranges.next_after(page) {
        end = end.min(next);
    }
    if let Some(prev_last) = p.svm.ranges.last_of_previous(page) {
        if prev_last >= page {
            return None;
        }
        first = first.max(prev_last + 1);
    }
    let mut last = end - 1;
    let used = check_vm(p, first, last).or_else(|| check_vm_userptr(env, p, first, last));
    if let Some((bo_first, bo_last)) = used {
        if (bo_first..=bo_last).contains(&page) {
            return None;
        }
        // A block that collides with a buffer object: one page only.
        first = page;
        last = page;
    }
    let mut attrs = Attrs::defaults(supported(env.dev));
    if vma.heap_stack {
        attrs.preferred = KFD_IOCTL_SVM_LOCATION_SYSMEM;
    }
    p.svm
        .ranges
        .insert(first, last, Range::new(last - first + 1, attrs));
    Some(first)
}

/// `svm_range_check_vm_userptr`: the CPU pages `[first, last]` of a USERPTR BO mapped in one
/// of the process's VMs that overlaps `[start, last]`.
fn check_vm_userptr(env: &Env<'_>, p: &Process, start: u64, last: u64) -> Option<(u64, u64)> {
    for pdd in p.pdds.iter().filter(|pdd| pdd.drm.is_some()) {
        for (_, mapping) in pdd.vm.iter() {
            let Some(b) = env.backings.get(&mapping.backing) else {
                continue;
            };
            let Store::UserPtr { addr, .. } = b.store else {
                continue;
            };
            if addr > last * PAGE_SIZE || addr + b.size <= start * PAGE_SIZE {
                continue;
            }
            let first = addr / PAGE_SIZE;
            return Some((first, first + b.size / PAGE_SIZE - 1));
        }
    }
    None
}

/// `kfd_smi_event_update_vmfault`: GPU `gpu` of process `tgid` took a VM fault; every client of
/// that GPU may see it (pid 0), named after the thread that set the VM up.
pub(in crate::model) fn report_vm_fault(dev: &Device, st: &mut State, tgid: i32, gpu: usize) {
    let Some(task) = st
        .procs
        .get(&tgid)
        .and_then(|p| p.pdds.get(gpu))
        .and_then(|pdd| pdd.task.clone())
    else {
        return;
    };
    st.smi.emit(
        dev.cfg.kfd_minor,
        gpu,
        &Event::VmFault {
            task_pid: task.0,
            comm: &task.1,
        },
    );
}
