//! TTM's VRAM placement and the eviction of KFD BOs under VRAM pressure, with KFD's process
//! eviction and restore (`amdgpu_amdkfd_gpuvm.c`, `amdgpu_amdkfd_fence.c`, `kfd_process.c`,
//! `amdgpu_ttm.c`).
//!
//! Every VRAM object of a GPU (a KFD VRAM BO, a GEM object whose preferred domain is VRAM)
//! is either in VRAM or evicted to GTT ([`Placed`](super::objects::Placed)); the GPU's VRAM
//! manager holds the whole `vram_size`, shared by those objects and the SVM pages in VRAM
//! (the page tables and firmware reservations, which take some of it on a real GPU, hold
//! nothing in the model; KFD's own limit keeps `ESTIMATE_PT_SIZE` back for the page tables,
//! so KFD's allocations alone never make TTM evict). The bytes never
//! move: a BO's memfd is its memory wherever TTM has it, so the data survives every
//! eviction. What moves is the bookkeeping and what the kernel does about it:
//!
//! * **Placement** ([`make_room`]): an object that must be in VRAM (a KFD ALLOC, a GEM_CREATE
//!   or a CS validation of a VRAM-only object, a KFD restore) takes free room first, else TTM
//!   evicts from the head of the VRAM manager's LRU (`ttm_mem_evict_first`): the object
//!   validated longest ago. Which may go is `amdgpu_ttm_bo_eviction_valuable`'s rule: a KFD
//!   BO of the process whose call allocates is never taken ("any KFD process needs all its
//!   BOs to be resident to run successfully": `amdkfd_fence_check_mm(f, current->mm)`);
//!   anything else on the GPU may be (GEM objects of any process, other processes' KFD
//!   BOs), except the object being placed. SVM pages in VRAM count as taken; their own
//!   eviction is `svm`'s (SVM BOs are not picked here, and `svm`'s own placement does not
//!   see GEM objects). When nothing more can go, the placement fails (`ENOMEM`).
//! * **Eviction of a KFD BO**: its eviction fence (`amdgpu_amdkfd_fence`) is that of every
//!   KFD process holding a handle on it (the allocating process, and importers, whose
//!   fences sit on the shared reservation object). Signalling it quiesces the process
//!   (`amdkfd_fence_enable_signaling` → `kgd2kfd_schedule_evict_and_restore_process` →
//!   `evict_process_worker` → `kfd_process_evict_queues` with trigger
//!   `KFD_QUEUE_EVICTION_TRIGGER_TTM`: a `QUEUE_EVICTION` record per GPU of the process, its
//!   queues stopped) and schedules the restore worker [`PROCESS_RESTORE_TIME`] later. A
//!   process already evicted is not evicted again (its fence has signalled).
//! * **Restore** (`restore_process_worker` → `amdgpu_amdkfd_gpuvm_restore_process_bos`,
//!   then `kfd_process_restore_queues`): every evicted KFD VRAM BO of the process is
//!   validated back into VRAM (which may evict other processes' BOs and GEM objects in
//!   turn); if one does not fit, the worker runs again [`PROCESS_BACK_OFF_TIME`] later and
//!   the queues stay evicted; when all are in, the queues resume and a `QUEUE_RESTORE`
//!   record is emitted per GPU.
//!
//! Where it differs: the kernel's restore worker has no `mm`, so `eviction_valuable` does
//! not protect the restoring process's own BOs; they are reserved by the restore's
//! `drm_exec` transaction, which TTM skips, and the model leaves them alone likewise.
//! Objects are not split across domains, contiguity and the BAR's visible window are not
//! modelled, the CS move budget (`amdgpu_cs_get_threshold_for_moves`) is unlimited, and a
//! kernel dispatch already running when its queue is evicted runs to its end (the CP would
//! save its waves, CWSR, and resume them at the restore).

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use kfd_ioctl::abi::KFD_QUEUE_EVICTION_TRIGGER_TTM;
use rustix::io::Errno;

use super::device::Device;
use super::driver::Driver;
use super::objects::Domain;
use super::process::State;
use super::smi::Event;

/// `PROCESS_RESTORE_TIME_MS` (`kfd_process.c`): the restore worker runs this long after an
/// eviction.
pub(super) const PROCESS_RESTORE_TIME: Duration = Duration::from_millis(100);
/// `PROCESS_BACK_OFF_TIME_MS`: and again this long after a restore that failed.
pub(super) const PROCESS_BACK_OFF_TIME: Duration = Duration::from_millis(100);

/// The bytes GPU `gpu`'s VRAM manager holds: its VRAM.
pub(super) fn capacity(dev: &Device, gpu: usize) -> u64 {
    dev.cfg.machine.gpus()[gpu].vram_size
}

/// The bytes of GPU `gpu`'s VRAM objects in VRAM now, and its SVM pages there.
pub(super) fn occupied(st: &State, gpu: usize) -> u64 {
    let objects: u64 = st
        .backings
        .values()
        .filter(|b| b.gpu == gpu && b.domain == Domain::Vram && !b.placed.evicted)
        .map(|b| b.size)
        .sum();
    objects.saturating_add(st.svm_vram.get(gpu).copied().unwrap_or(0))
}

/// The bytes in GTT that KFD's charges do not count: GEM objects placed there and VRAM
/// objects evicted there (device-wide, as amdgpu's one GTT manager).
pub(super) fn in_gtt(st: &State) -> u64 {
    st.backings
        .values()
        .filter(|b| match b.domain {
            Domain::Vram => b.placed.evicted,
            Domain::Gtt => b.gem.domains != 0,
        })
        .map(|b| b.size)
        .sum()
}

/// For every backing a KFD process holds a handle on, those processes (whose eviction
/// fences it carries), in one pass over the processes' BOs.
fn fences(st: &State) -> HashMap<u64, Vec<i32>> {
    let mut out: HashMap<u64, Vec<i32>> = HashMap::new();
    for p in st.procs.values() {
        for pdd in &p.pdds {
            for bo in pdd.bos.values() {
                let tgids = out.entry(bo.backing).or_default();
                if !tgids.contains(&p.tgid) {
                    tgids.push(p.tgid);
                }
            }
        }
    }
    out
}

/// Gives backing `id` the next LRU stamp (`ttm_bo_move_to_lru_tail`).
pub(super) fn touch(st: &mut State, id: u64) {
    let stamp = st.lru;
    st.lru += 1;
    if let Some(b) = st.backings.get_mut(&id) {
        b.placed.lru = stamp;
    }
}

/// Makes `size` bytes of room in GPU `gpu`'s VRAM for a placement by process `current`
/// (`None`: a worker without an `mm`) of object `placing` (`None`: one not created yet),
/// evicting from the LRU's head when `may_evict` (see the [module docs](self)). Returns the
/// processes this evicted (their restore workers are to be scheduled, [`schedule_restore`]),
/// or `ENOMEM` when the room cannot be made; then nothing was evicted.
pub(super) fn make_room(
    dev: &Device,
    st: &mut State,
    gpu: usize,
    size: u64,
    current: Option<i32>,
    placing: Option<u64>,
    may_evict: bool,
) -> Result<Vec<i32>, Errno> {
    let cap = capacity(dev, gpu);
    // amdgpu_bo_validate_size: an object as large as the whole heap never fits.
    if size >= cap {
        return Err(Errno::NOMEM);
    }
    let used = occupied(st, gpu);
    let free = cap.saturating_sub(used);
    if free >= size {
        return Ok(Vec::new());
    }
    if !may_evict {
        return Err(Errno::NOMEM);
    }
    // The victims, LRU head first, as far as they make the room.
    let mut candidates: Vec<(u64, u64, u64)> = st
        .backings
        .iter()
        .filter(|(id, b)| {
            b.gpu == gpu && b.domain == Domain::Vram && !b.placed.evicted && Some(**id) != placing
        })
        .map(|(&id, b)| (b.placed.lru, id, b.size))
        .collect();
    candidates.sort_unstable();
    let mut fenced_by = fences(st);
    let mut victims = Vec::new();
    let mut gained = free;
    for (_, id, bytes) in candidates {
        if gained >= size {
            break;
        }
        let fenced = fenced_by.remove(&id).unwrap_or_default();
        // amdgpu_ttm_bo_eviction_valuable: not a KFD BO of the allocating process.
        if current.is_some_and(|tgid| fenced.contains(&tgid)) {
            continue;
        }
        victims.push((id, fenced));
        gained = gained.saturating_add(bytes);
    }
    if gained < size {
        return Err(Errno::NOMEM);
    }
    let mut evicted = Vec::new();
    for (id, fenced) in victims {
        if let Some(b) = st.backings.get_mut(&id) {
            b.placed.evicted = true;
        }
        for tgid in fenced {
            if quiesce(dev, st, tgid) {
                evicted.push(tgid);
            }
        }
    }
    Ok(evicted)
}

/// The eviction fence of process `tgid` signals: `kfd_process_evict_queues` with trigger TTM
/// (a `QUEUE_EVICTION` per GPU, every queue stopped). Returns whether it was not evicted
/// already (its restore worker is to be scheduled).
fn quiesce(dev: &Device, st: &mut State, tgid: i32) -> bool {
    let State { procs, smi, .. } = st;
    let Some(p) = procs.get_mut(&tgid) else {
        return false;
    };
    if p.ttm_evicted {
        return false;
    }
    p.ttm_evicted = true;
    for pdd in &p.pdds {
        let event = Event::QueueEviction {
            pid: tgid,
            gpu_id: pdd.gpu_id,
            trigger: KFD_QUEUE_EVICTION_TRIGGER_TTM,
        };
        smi.emit(dev.cfg.kfd_minor, pdd.gpu, &event);
    }
    for q in p.queues.by_id.values() {
        q.runner.set_evicted(true);
    }
    true
}

/// One run of process `(tgid, serial)`'s restore worker (see the [module docs](self)): the
/// processes it evicted in turn, or `None` when a BO did not fit (run again later).
fn restore(dev: &Device, st: &mut State, tgid: i32, serial: u64) -> Option<Vec<i32>> {
    let mine: Vec<(u64, usize, u64)> = match st.procs.get(&tgid) {
        Some(p) if p.serial == serial && p.ttm_evicted => {
            let mut ids: Vec<u64> = p
                .pdds
                .iter()
                .flat_map(|pdd| pdd.bos.values().map(|bo| bo.backing))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            ids.into_iter()
                .filter_map(|id| st.backings.get(&id).map(|b| (id, b)))
                .filter(|(_, b)| b.domain == Domain::Vram && b.placed.evicted)
                .map(|(id, b)| (id, b.gpu, b.size))
                .collect()
        }
        // Gone, or restored already.
        _ => return Some(Vec::new()),
    };
    // Every BO of a GPU validated in one go: the room for all of them at once (TTM takes
    // the same victims, LRU head first, as it would for each in turn).
    let mut evicted = Vec::new();
    let mut gpus: Vec<usize> = mine.iter().map(|&(_, gpu, _)| gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    for gpu in gpus {
        let total = mine
            .iter()
            .filter(|&&(_, g, _)| g == gpu)
            .fold(0u64, |sum, &(_, _, size)| sum.saturating_add(size));
        evicted.extend(make_room(dev, st, gpu, total, Some(tgid), None, true).ok()?);
    }
    for &(id, _, _) in &mine {
        if let Some(b) = st.backings.get_mut(&id) {
            b.placed.evicted = false;
        }
        touch(st, id);
    }
    let State { procs, smi, .. } = st;
    if let Some(p) = procs.get_mut(&tgid) {
        p.ttm_evicted = false;
        for pdd in &p.pdds {
            let event = Event::QueueRestore {
                pid: tgid,
                gpu_id: pdd.gpu_id,
                rescheduled: false,
            };
            smi.emit(dev.cfg.kfd_minor, pdd.gpu, &event);
        }
        // A queue the debugger suspended stays off (`QUEUE_IS_ACTIVE` needs
        // `!is_suspended`).
        for q in p.queues.by_id.values() {
            q.runner.set_evicted(q.suspended);
        }
    }
    Some(evicted)
}

/// Schedules the restore worker of each process in `tgids` [`PROCESS_RESTORE_TIME`] from
/// now, on a thread of its own that runs it again every [`PROCESS_BACK_OFF_TIME`] until it
/// succeeds or the process is gone. Call without the model's lock.
pub(super) fn schedule_restore(m: &Driver, tgids: Vec<i32>) {
    for tgid in tgids {
        let Some(serial) = m.lock().procs.get(&tgid).map(|p| p.serial) else {
            continue;
        };
        let Some(weak) = m.this.get().cloned() else {
            continue;
        };
        spawn_restore(weak, tgid, serial);
    }
}

fn spawn_restore(m: Weak<Driver>, tgid: i32, serial: u64) {
    let work = move || {
        let mut delay = PROCESS_RESTORE_TIME;
        loop {
            std::thread::sleep(delay);
            delay = PROCESS_BACK_OFF_TIME;
            let Some(m) = m.upgrade() else {
                return;
            };
            let mut st = m.lock();
            let Some(evicted) = restore(&m.dev, &mut st, tgid, serial) else {
                continue;
            };
            drop(st);
            schedule_restore(&m, evicted);
            return;
        }
    };
    // Started by the helper: this runs while an ioctl is served (see `crate::own`).
    crate::own::spawn_later("kfd-emu-ttm-restore", work);
}
