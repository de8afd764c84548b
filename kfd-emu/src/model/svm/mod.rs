//! Shared virtual memory (`kfd_svm.c`, kfd-abi.md §4.13): AMDKFD_IOC_SVM's SET_ATTR and
//! GET_ATTR (the ioctl itself is [`svm_ioctl`](super::svm_ioctl)) over the caller's own
//! memory, the ranges they make, where each page is, which GPUs map it, and what the kernel
//! does around them — munmap, XNACK switches, ALLOC's overlap check, GPU faults and process
//! teardown.
//!
//! * Ranges are kept in an ordered map by start page ([`ranges`]), split on SET and never
//!   merged; every operation costs `O(log n + k)` for `k` ranges touched.
//! * Validation asks for the caller's VMAs ([`vmas`](super::vmas), one `PROCMAP_QUERY` per
//!   VMA): a hole or device memory (a mapping of one of the model's stand-ins) is `EFAULT`.
//! * What the kernel's MMU notifiers do ([`notify`]) happens when the program's munmap,
//!   mremap, MAP_FIXED mmap, brk, madvise, mprotect or fork is notified, before the syscall
//!   runs ([`address_space`](super::addrspace)): unmapped memory leaves its ranges with the
//!   kernel's `UNMAP_FROM_GPU` records before munmap returns, and other invalidations evict
//!   (queues stopped, restored by the restore worker 1 ms later) or unmap from the GPUs
//!   (XNACK on). In attach mode only the attached thread and what it spawns are filtered:
//!   address-space calls of the process's other threads are not seen, so their munmaps leave
//!   the ranges in place; and forks are seen only under `kfd-emu run`.
//! * Migration and mapping ([`migrate`]) and GPU faults ([`fault`]) move bookkeeping: the
//!   bytes always stay in the caller's mapping, so the CPU and the GPU view see the same data.
//! * CPU faults on pages in VRAM ([`cpu`]): under `kfd-emu run` the supervisor makes them
//!   `PROT_NONE` in the program, and a CPU touch runs `svm_migrate_to_ram`. In attach mode
//!   CPU accesses are not seen: nothing migrates back.
//! * CREATE_QUEUE asks [`queue_buffer_get`] whether a compute queue's save area that is no BO
//!   is SVM memory the GPU always maps (`kfd_queue_buffer_svm_get`).

mod cpu;
mod env;
mod fault;
mod migrate;
mod notify;
pub(in crate::model) mod ranges;

use kfd_ioctl::abi::{
    AllocMemFlags, KFD_IOCTL_SVM_ATTR_ACCESS, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE,
    KFD_IOCTL_SVM_ATTR_CLR_FLAGS, KFD_IOCTL_SVM_ATTR_GRANULARITY, KFD_IOCTL_SVM_ATTR_NO_ACCESS,
    KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
    KFD_IOCTL_SVM_ATTR_SET_FLAGS, KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED,
    KFD_IOCTL_SVM_LOCATION_SYSMEM, KFD_IOCTL_SVM_LOCATION_UNDEFINED,
    KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU, kfd_ioctl_svm_attribute,
};
use rustix::io::Errno;

pub(super) use cpu::{
    cpu_access, cpu_fault, cpu_touch, done as cpu_protect_done, hidden as cpu_hidden,
    plan as cpu_protect_plan, program_changed,
};
pub(super) use fault::{gpu_access, gpu_mapped, report_vm_fault};
pub(super) use notify::{Invalidation, invalidate, restore_worker};

use super::device::Device;
use super::driver::Driver;
use super::memory::{Accounts, PAGE_SIZE};
use super::observe::SvmSetAttr;
use super::process::{Process, State};
use env::{Env, bits, with_env};
use ranges::{Attrs, Range};

/// The first minor whose GET_ATTR reports the cleared flags (CLR_FLAGS was `EINVAL` before).
const GET_CLR_FLAGS_SINCE: u32 = 6;
/// The largest granularity (`min(value, 0x3F)`).
const MAX_GRANULARITY: u32 = 0x3F;

/// `svms->bitmap_supported`: the GPUs with the SVM capability.
fn supported(dev: &Device) -> u64 {
    dev.cfg
        .machine
        .gpus()
        .iter()
        .enumerate()
        .filter(|(g, gpu)| gpu.svm_capable && *g < 64)
        .fold(0, |acc, (g, _)| acc | 1 << g)
}

/// The access bitmap of a new range: every supported GPU with XNACK on, none with it off.
fn default_access(dev: &Device, xnack: bool) -> u64 {
    if xnack { supported(dev) } else { 0 }
}

/// `max_svm_range_pages`: 1/32 of the smallest VRAM, clamped to 2 MiB…1 GiB, a power of two.
fn max_range_pages(dev: &Device) -> u64 {
    dev.cfg
        .machine
        .gpus()
        .iter()
        .map(|g| {
            let pages = (g.vram_size >> 17).clamp(1 << 9, 1 << 18);
            1 << pages.ilog2()
        })
        .min()
        .unwrap_or(1 << 18)
}

/// `svm_range_check_vm`: the pages `[first, last]` of the first GPU mapping (of a BO, in a VM
/// of a bound GPU) that overlaps `[start, last]`.
fn check_vm(p: &Process, start: u64, last: u64) -> Option<(u64, u64)> {
    let (lo, hi) = (start * PAGE_SIZE, (last + 1) * PAGE_SIZE);
    p.pdds
        .iter()
        .filter(|pdd| pdd.drm.is_some())
        .find_map(|pdd| pdd.vm.first_overlap(lo, hi))
        .map(|(s, e)| (s / PAGE_SIZE, (e - 1) / PAGE_SIZE))
}

/// `svm_range_unmap_from_cpu` and its deferred removal: pages `[s, l]` of range `key` are gone.
fn unmap_from_cpu(env: &mut Env<'_>, p: &mut Process, key: u64, s: u64, l: u64) {
    migrate::unmap_from_gpus(env, p, key, s, l, KFD_SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU);
    p.svm.ranges.split_at(s);
    p.svm.ranges.split_at(l + 1);
    if let Some(gone) = p.svm.ranges.remove(s) {
        release(env.dev, env.acc, env.svm_vram, p.xnack, s, &gone);
    }
}

/// `svm_range_free`: gives back the system-memory reservation (XNACK off) and the VRAM BO of
/// range `r` starting at `start`.
fn release(
    dev: &Device,
    acc: &mut Accounts,
    svm_vram: &mut [u64],
    xnack: bool,
    start: u64,
    r: &Range,
) {
    let npages = r.last - start + 1;
    if !xnack {
        acc.unreserve_system(npages * PAGE_SIZE);
    }
    // Its share of the VRAM BO (`svm_range_vram_node_free`).
    if let Some(g) = dev.gpu_index(r.actual) {
        svm_vram[g] = svm_vram[g].saturating_sub(npages * PAGE_SIZE);
    }
}

/// `svm_range_check_attr`.
fn check_attr(dev: &Device, attrs: &[kfd_ioctl_svm_attribute]) -> Result<(), Errno> {
    let svm_gpus = supported(dev);
    for a in attrs {
        let v = a.value;
        let gpu = match a.r#type {
            KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => (v != KFD_IOCTL_SVM_LOCATION_SYSMEM
                && v != KFD_IOCTL_SVM_LOCATION_UNDEFINED)
                .then_some(v),
            KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => (v != KFD_IOCTL_SVM_LOCATION_SYSMEM).then_some(v),
            KFD_IOCTL_SVM_ATTR_ACCESS
            | KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
            | KFD_IOCTL_SVM_ATTR_NO_ACCESS => Some(v),
            KFD_IOCTL_SVM_ATTR_SET_FLAGS
            | KFD_IOCTL_SVM_ATTR_CLR_FLAGS
            | KFD_IOCTL_SVM_ATTR_GRANULARITY => None,
            _ => return Err(Errno::INVAL),
        };
        if let Some(gpu_id) = gpu {
            let g = dev.gpu_index(gpu_id).ok_or(Errno::INVAL)?;
            if g >= 64 || svm_gpus & (1 << g) == 0 {
                return Err(Errno::INVAL);
            }
        }
    }
    Ok(())
}

/// `svm_range_is_same_attrs`: whether applying `attrs` would change nothing (a prefetch always
/// changes something).
fn same_attrs(dev: &Device, r: &Range, attrs: &[kfd_ioctl_svm_attribute]) -> bool {
    attrs.iter().all(|a| {
        let bit = dev.gpu_index(a.value).map_or(0, |g| 1u64 << g);
        match a.r#type {
            KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => r.attrs.preferred == a.value,
            KFD_IOCTL_SVM_ATTR_ACCESS => r.attrs.access & bit != 0,
            KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => r.attrs.aip & bit != 0,
            KFD_IOCTL_SVM_ATTR_NO_ACCESS => (r.attrs.access | r.attrs.aip) & bit == 0,
            KFD_IOCTL_SVM_ATTR_SET_FLAGS => r.attrs.flags & a.value == a.value,
            KFD_IOCTL_SVM_ATTR_CLR_FLAGS => r.attrs.flags & a.value == 0,
            KFD_IOCTL_SVM_ATTR_GRANULARITY => u32::from(r.attrs.granularity) == a.value,
            _ => false,
        }
    })
}

/// `svm_range_apply_attrs`, in array order; `update_mapping` is set when the attributes force
/// a mapping update.
fn apply_attrs(
    dev: &Device,
    xnack: bool,
    attrs: &mut Attrs,
    list: &[kfd_ioctl_svm_attribute],
    update_mapping: &mut bool,
) {
    for a in list {
        let bit = dev.gpu_index(a.value).map_or(0, |g| 1u64 << g);
        match a.r#type {
            KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => attrs.preferred = a.value,
            KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => attrs.prefetch = a.value,
            KFD_IOCTL_SVM_ATTR_ACCESS
            | KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
            | KFD_IOCTL_SVM_ATTR_NO_ACCESS => {
                if !xnack {
                    *update_mapping = true;
                }
                attrs.access &= !bit;
                attrs.aip &= !bit;
                match a.r#type {
                    KFD_IOCTL_SVM_ATTR_ACCESS => attrs.access |= bit,
                    KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => attrs.aip |= bit,
                    _ => {}
                }
            }
            KFD_IOCTL_SVM_ATTR_SET_FLAGS => {
                *update_mapping = true;
                attrs.flags |= a.value;
            }
            KFD_IOCTL_SVM_ATTR_CLR_FLAGS => {
                *update_mapping = true;
                attrs.flags &= !a.value;
            }
            KFD_IOCTL_SVM_ATTR_GRANULARITY => {
                attrs.granularity = a.value.min(MAX_GRANULARITY) as u8;
            }
            _ => {}
        }
    }
}

/// The ranges `svm_range_add` lined up, in the order of the kernel's lists (built by
/// `list_add`, so newest first).
struct Plan {
    /// Ranges whose attributes change.
    update: Vec<u64>,
    /// Pieces split off at a point not aligned to their granularity, to be remapped.
    remap: Vec<u64>,
}

/// How many pages of `[start, last]` no SVM range of `p` holds.
fn new_pages(p: &Process, start: u64, last: u64) -> u64 {
    let mut new_pages = 0;
    let mut cur = start;
    for key in p.svm.ranges.overlapping(start, last) {
        if key > cur {
            new_pages += key - cur;
        }
        cur = p.svm.ranges.get(key).map_or(cur, |r| r.last.min(last) + 1);
    }
    if cur <= last {
        new_pages += last - cur + 1;
    }
    new_pages
}

/// `svm_range_add`: splits the ranges sticking out of `[start, last]` and fills the gaps with
/// new ranges cut at `max_svm_range_pages` boundaries. Nothing changes when the new ranges'
/// system-memory reservation (XNACK off) fails.
fn add(
    env: &mut Env<'_>,
    p: &mut Process,
    start: u64,
    last: u64,
    attrs: &[kfd_ioctl_svm_attribute],
) -> Result<Plan, Errno> {
    let keys = p.svm.ranges.overlapping(start, last);
    let new_pages = new_pages(p, start, last);
    if !p.xnack && new_pages > 0 {
        env.acc
            .reserve_system(&env.dev.limits, new_pages * PAGE_SIZE)?;
    }

    let max_pages = max_range_pages(env.dev);
    let access = default_access(env.dev, p.xnack);
    let mut added = Vec::new();
    let mut remap = Vec::new();
    let new_ranges = |p: &mut Process, first: u64, last: u64, added: &mut Vec<u64>| {
        let mut at = first;
        while at <= last {
            let end = last.min((at + max_pages) / max_pages * max_pages - 1);
            p.svm
                .ranges
                .insert(at, end, Range::new(end - at + 1, Attrs::defaults(access)));
            added.push(at);
            at = end + 1;
        }
    };
    let mut cur = start;
    for key in keys {
        let Some(r) = p.svm.ranges.get(key) else {
            continue;
        };
        let (r_last, granularity) = (r.last, r.attrs.granularity);
        let next = r_last.min(last) + 1;
        if same_attrs(env.dev, r, attrs) && r.mapped_to_gpu {
            // Already so, and mapped: left alone.
        } else if key < start || r_last > last {
            let aligned = |page: u64| page & ((1u64 << granularity) - 1) == 0;
            let mut inner = key;
            if key < start {
                p.svm.ranges.split_at(start);
                inner = start;
                if !aligned(start) {
                    remap.push(key);
                }
            }
            if r_last > last {
                p.svm.ranges.split_at(last + 1);
                if !aligned(last + 1) {
                    remap.push(last + 1);
                }
            }
            added.push(inner);
        } else {
            added.push(key);
        }
        if key > cur {
            new_ranges(p, cur, key - 1, &mut added);
        }
        cur = next;
    }
    if cur <= last {
        new_ranges(p, cur, last, &mut added);
    }
    added.reverse();
    remap.reverse();
    Ok(Plan {
        update: added,
        remap,
    })
}

/// `svm_range_set_attr`.
pub(super) fn set_attr(
    m: &Driver,
    tgid: i32,
    start: u64,
    npages: u64,
    attrs: &[kfd_ioctl_svm_attribute],
) -> Result<(), Errno> {
    let dev = &m.dev;
    check_attr(dev, attrs)?;
    on_checked_range(m, tgid, start, npages, |env, p, last| {
        let registers = new_pages(p, start, last) > 0;
        let plan = add(env, p, start, last, attrs)?;
        let mut update_mapping = false;
        for &key in &plan.update {
            if let Some(r) = p.svm.ranges.get_mut(key) {
                apply_attrs(dev, p.xnack, &mut r.attrs, attrs, &mut update_mapping);
            }
        }
        let mut ret = Ok(());
        for &key in &plan.update {
            let migrated = match migrate::trigger_migration(env, p, key) {
                Ok(migrated) => migrated,
                Err(e) => {
                    ret = Err(e);
                    continue;
                }
            };
            let Some(r) = p.svm.ranges.get(key) else {
                continue;
            };
            let always = r.attrs.flags & KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED != 0;
            if migrated && (!p.xnack || always) && r.mapped_to_gpu {
                // The restore worker remaps it.
                continue;
            }
            if !migrated && !update_mapping {
                continue;
            }
            let r_last = r.last;
            if let Err(e) = migrate::validate_and_map(env, p, key, key, r_last, None) {
                ret = Err(e);
            }
        }
        for &key in &plan.remap {
            let Some(r_last) = p.svm.ranges.get(key).map(|r| r.last) else {
                continue;
            };
            if let Err(e) = migrate::validate_and_map(env, p, key, key, r_last, None) {
                ret = Err(e);
            }
        }
        migrate::restore(env, p);
        if ret.is_ok()
            && let Some(observer) = m.observer.get()
        {
            observer.0.set_attr(&SvmSetAttr {
                tgid,
                time_ns: m.dev.clock.now_ns(),
                start: start * PAGE_SIZE,
                size: npages * PAGE_SIZE,
                registers,
                attrs: attrs.to_vec(),
                xnack: p.xnack,
            });
        }
        ret
    })
}

/// What GET_ATTR reports over a set of ranges.
struct Summary {
    preferred: u32,
    prefetch: u32,
    access: u64,
    aip: u64,
    flags_and: u32,
    flags_or: u32,
    granularity: u8,
}

/// `svm_range_get_attr`'s aggregation over the ranges overlapping `[start, last]` (the gaps
/// between them do not count), or the defaults when there are none.
fn summarize(dev: &Device, p: &Process, start: u64, last: u64) -> Summary {
    let keys = p.svm.ranges.overlapping(start, last);
    if keys.is_empty() {
        return Summary {
            preferred: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            prefetch: KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            access: default_access(dev, p.xnack),
            aip: 0,
            flags_and: ranges::DEFAULT_FLAGS,
            flags_or: ranges::DEFAULT_FLAGS,
            granularity: ranges::DEFAULT_GRANULARITY,
        };
    }
    // A location is the common one until a range has none or another one; then UNDEFINED.
    let common = |loc: &mut Option<u32>, value: u32| {
        *loc = match *loc {
            Some(KFD_IOCTL_SVM_LOCATION_UNDEFINED) => *loc,
            _ if value == KFD_IOCTL_SVM_LOCATION_UNDEFINED => {
                Some(KFD_IOCTL_SVM_LOCATION_UNDEFINED)
            }
            Some(seen) if seen != value => Some(KFD_IOCTL_SVM_LOCATION_UNDEFINED),
            _ => Some(value),
        }
    };
    let all = supported(dev);
    let mut s = Summary {
        preferred: 0,
        prefetch: 0,
        access: all,
        aip: all,
        flags_and: u32::MAX,
        flags_or: 0,
        granularity: u8::MAX,
    };
    let (mut preferred, mut prefetch) = (None, None);
    for key in keys {
        let Some(r) = p.svm.ranges.get(key) else {
            continue;
        };
        common(&mut preferred, r.attrs.preferred);
        common(&mut prefetch, r.attrs.prefetch);
        s.access &= r.attrs.access;
        s.aip &= r.attrs.aip;
        s.flags_and &= r.attrs.flags;
        s.flags_or |= r.attrs.flags;
        s.granularity = s.granularity.min(r.attrs.granularity);
    }
    s.preferred = preferred.unwrap_or(KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    s.prefetch = prefetch.unwrap_or(KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    s
}

/// What SET_ATTR and GET_ATTR do first, in the kernel's order: check the caller's VMAs over
/// the range (`EFAULT`) and that no buffer object is mapped there (`EADDRINUSE`); then run `f` on the
/// process with the range's last page. A caller without a KFD process gets `EBADF`.
fn on_checked_range<R>(
    m: &Driver,
    tgid: i32,
    start: u64,
    npages: u64,
    f: impl FnOnce(&mut Env<'_>, &mut Process, u64) -> Result<R, Errno>,
) -> Result<R, Errno> {
    let last = start.checked_add(npages - 1).ok_or(Errno::FAULT)?;
    let vmas = m.vmas(tgid).map_err(|_| Errno::FAULT)?;
    let mut guard = m.lock();
    with_env(&m.dev, &mut guard, tgid, &vmas, |env, p| {
        let end = last
            .checked_add(1)
            .and_then(|e| e.checked_mul(PAGE_SIZE))
            .ok_or(Errno::FAULT)?;
        env.vmas.check(start * PAGE_SIZE, end)?;
        if check_vm(p, start, last).is_some() {
            return Err(Errno::ADDRINUSE);
        }
        let r = f(env, p, last);
        if std::mem::take(&mut p.svm.cpu_dirty) {
            m.cpu.wake(tgid);
        }
        r
    })
    .unwrap_or(Err(Errno::BADF))
}

/// `svm_range_get_attr`: fills `attrs` in place.
pub(super) fn get_attr(
    m: &Driver,
    tgid: i32,
    start: u64,
    npages: u64,
    attrs: &mut [kfd_ioctl_svm_attribute],
) -> Result<(), Errno> {
    let dev = &m.dev;
    on_checked_range(m, tgid, start, npages, |_env, p, last| {
        for a in attrs.iter() {
            match a.r#type {
                KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
                | KFD_IOCTL_SVM_ATTR_PREFETCH_LOC
                | KFD_IOCTL_SVM_ATTR_ACCESS
                | KFD_IOCTL_SVM_ATTR_SET_FLAGS
                | KFD_IOCTL_SVM_ATTR_GRANULARITY => {}
                KFD_IOCTL_SVM_ATTR_CLR_FLAGS if dev.cfg.kfd_minor >= GET_CLR_FLAGS_SINCE => {}
                _ => return Err(Errno::INVAL),
            }
        }
        let s = summarize(dev, p, start, last);
        for a in attrs.iter_mut() {
            match a.r#type {
                KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => a.value = s.preferred,
                KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => a.value = s.prefetch,
                KFD_IOCTL_SVM_ATTR_ACCESS => {
                    let g = dev.gpu_index(a.value).ok_or(Errno::INVAL)?;
                    let bit = 1u64 << g;
                    a.r#type = if s.access & bit != 0 {
                        KFD_IOCTL_SVM_ATTR_ACCESS
                    } else if s.aip & bit != 0 {
                        KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
                    } else {
                        KFD_IOCTL_SVM_ATTR_NO_ACCESS
                    };
                }
                KFD_IOCTL_SVM_ATTR_SET_FLAGS => a.value = s.flags_and,
                KFD_IOCTL_SVM_ATTR_CLR_FLAGS => a.value = !s.flags_or,
                KFD_IOCTL_SVM_ATTR_GRANULARITY => a.value = u32::from(s.granularity),
                _ => {}
            }
        }
        Ok(())
    })
}

/// SET_XNACK_MODE's `svm_range_switch_xnack_reserve_mem`: with XNACK off every range counts
/// against the system-memory limit, so turning it off reserves them all (`ENOMEM` when they do
/// not fit, and nothing changes) and turning it on gives the reservation back.
pub(super) fn switch_xnack(m: &Driver, st: &mut State, tgid: i32, on: bool) -> Result<(), Errno> {
    let State { procs, acc, .. } = st;
    let p = procs.get_mut(&tgid).ok_or(Errno::BADF)?;
    let bytes = p.svm.bytes();
    if on {
        acc.unreserve_system(bytes);
    } else {
        acc.reserve_system(&m.dev.limits, bytes)?;
    }
    p.xnack = on;
    Ok(())
}

/// ALLOC_MEMORY_OF_GPU's SVM check (kfd-abi.md §4.6 step 3): `[va, va + size)` overlapping a
/// range is `EADDRINUSE` (unless it is VRAM without a VA), and so is a USERPTR's CPU range
/// `[cpu, cpu + size)`.
pub(super) fn alloc_overlap(
    tgid: i32,
    serial: u64,
    st: &mut State,
    va: u64,
    size: u64,
    flags: AllocMemFlags,
    cpu: u64,
) -> Result<(), Errno> {
    let p = st.process(tgid, serial)?;
    if p.svm.ranges.is_empty() {
        return Ok(());
    }
    // The kernel's page arithmetic, wrapping as u64 does.
    let pages = |at: u64| {
        (
            at / PAGE_SIZE,
            at.wrapping_add(size).wrapping_sub(1) / PAGE_SIZE,
        )
    };
    let hits = |(first, last): (u64, u64)| first <= last && p.svm.ranges.overlaps(first, last);
    if !(va == 0 && flags.intersects(AllocMemFlags::VRAM)) && hits(pages(va)) {
        return Err(Errno::ADDRINUSE);
    }
    if flags.intersects(AllocMemFlags::USERPTR) && hits(pages(cpu)) {
        return Err(Errno::ADDRINUSE);
    }
    Ok(())
}

/// `kfd_queue_buffer_svm_get` (`kfd_queue.c`, "drm/amdkfd: Validate user queue svm memory
/// residency", de165b53c93f): a compute queue's CWSR area that is no BO mapping may be SVM
/// memory — libhsakmt from ROCm 6.0 puts it there whenever the SVM API is supported
/// (`queues.c`, `register_svm_range` with `GPU_ALWAYS_MAPPED`). Every page of `[addr, addr +
/// size)` must be in ranges that are mapped to a GPU, that GPU `gpu` may access (or access in
/// place), and that carry `GPU_ALWAYS_MAPPED`; else `EINVAL`. (The kernel also counts the
/// queue in each range's `queue_refcount`, only to warn when such a range is unmapped while
/// the queue lives; the model keeps no count.)
pub(super) fn queue_buffer_get(p: &Process, gpu: usize, addr: u64, size: u64) -> Result<(), Errno> {
    let bit = if gpu < 64 { 1u64 << gpu } else { 0 };
    let mut page = addr / PAGE_SIZE;
    let mut left = size / PAGE_SIZE;
    while left > 0 {
        let start = p.svm.ranges.containing(page).ok_or(Errno::INVAL)?;
        let r = p.svm.ranges.get(start).ok_or(Errno::INVAL)?;
        if !r.mapped_to_gpu
            || (r.attrs.access | r.attrs.aip) & bit == 0
            || r.attrs.flags & KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED == 0
        {
            return Err(Errno::INVAL);
        }
        // The kernel walks from the range holding `addr`, counting each range's whole length.
        let length = r.last - start + 1;
        if length >= left {
            break;
        }
        left -= length;
        page = r.last + 1;
    }
    Ok(())
}

/// `svm_range_list_fini` at process teardown: every range goes, with what it held.
pub(super) fn teardown(dev: &Device, st: &mut State, p: &mut Process) {
    let svm = std::mem::take(&mut p.svm);
    for (start, r) in svm.ranges.iter() {
        release(dev, &mut st.acc, &mut st.svm_vram, p.xnack, start, r);
    }
}

/// An SVM range as the model keeps it (see [`Model::svm_ranges`](super::Model::svm_ranges)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SvmRange {
    /// First byte.
    pub start: u64,
    /// Bytes.
    pub size: u64,
    /// `KFD_IOCTL_SVM_ATTR_PREFERRED_LOC` (gpu_id, 0 = system, `0xFFFF_FFFF` = undefined).
    pub preferred_loc: u32,
    /// `KFD_IOCTL_SVM_ATTR_PREFETCH_LOC`.
    pub prefetch_loc: u32,
    /// `KFD_IOCTL_SVM_FLAG_*`.
    pub flags: u32,
    /// log2 of the migration granule in pages.
    pub granularity: u8,
    /// gpu_ids with ACCESS.
    pub access: Vec<u32>,
    /// gpu_ids with ACCESS_IN_PLACE.
    pub access_in_place: Vec<u32>,
    /// The gpu_id whose VRAM holds pages of it, 0 when it is all in system memory.
    pub actual_loc: u32,
    /// Whether it was mapped to a GPU (`mapped_to_gpu`).
    pub mapped_to_gpu: bool,
}

/// One page of SVM memory (see [`Model::svm_page`](super::Model::svm_page)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SvmPage {
    /// 0 for system memory, else the gpu_id whose VRAM holds it.
    pub location: u32,
    /// The gpu_ids whose page tables map it.
    pub mapped_on: Vec<u32>,
    /// The gpu_ids whose mapping of it is writable.
    pub writable_on: Vec<u32>,
}

impl Driver {
    fn gpu_ids(&self, mask: u64) -> Vec<u32> {
        bits(mask)
            .filter_map(|g| self.dev.cfg.machine.gpus().get(g).map(|gpu| gpu.gpu_id))
            .collect()
    }

    /// [`Model::svm_ranges`](super::Model::svm_ranges).
    pub(in crate::model) fn svm_ranges(&self, tgid: i32) -> Vec<SvmRange> {
        let st = self.lock();
        let Some(p) = st.procs.get(&tgid) else {
            return Vec::new();
        };
        p.svm
            .ranges
            .iter()
            .map(|(start, r)| SvmRange {
                start: start * PAGE_SIZE,
                size: (r.last - start + 1) * PAGE_SIZE,
                preferred_loc: r.attrs.preferred,
                prefetch_loc: r.attrs.prefetch,
                flags: r.attrs.flags,
                granularity: r.attrs.granularity,
                access: self.gpu_ids(r.attrs.access),
                access_in_place: self.gpu_ids(r.attrs.aip),
                actual_loc: r.actual,
                mapped_to_gpu: r.mapped_to_gpu,
            })
            .collect()
    }

    /// [`Model::svm_page`](super::Model::svm_page).
    pub(in crate::model) fn svm_page(&self, tgid: i32, va: u64) -> Option<SvmPage> {
        let st = self.lock();
        let p = st.procs.get(&tgid)?;
        let page = va / PAGE_SIZE;
        let key = p.svm.ranges.containing(page)?;
        let state = p.svm.ranges.get(key)?.pages.get(page - key);
        Some(SvmPage {
            location: state.loc,
            mapped_on: self.gpu_ids(state.mapped),
            writable_on: self.gpu_ids(state.writable),
        })
    }

    /// [`Model::svm_vram_usage`](super::Model::svm_vram_usage).
    pub(in crate::model) fn svm_vram_usage(&self, gpu_id: u32) -> u64 {
        let st = self.lock();
        self.dev
            .gpu_index(gpu_id)
            .and_then(|g| st.svm_vram.get(g).copied())
            .unwrap_or(0)
    }
}
