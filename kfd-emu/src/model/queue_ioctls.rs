//! The queue ioctls (`kfd_chardev.c` over `kfd_process_queue_manager.c` and `kfd_queue.c`):
//! CREATE_QUEUE, DESTROY_QUEUE, UPDATE_QUEUE, SET_CU_MASK, GET_QUEUE_WAVE_STATE and
//! ALLOC_QUEUE_GWS over the process's [`Queues`](super::queues::Queues).
//!
//! SDMA queues run on the copy engines of [`sdma`](super::sdma), AQL queues on the packet
//! processor of [`aql`](super::aql) (barriers and signals; no kernel dispatch), PM4 compute
//! queues on the CP of [`pm4`](super::pm4) (no dispatch either), each on an engine thread of
//! its own started here (see [`scheduler`](super::scheduler)). DESTROY_QUEUE and
//! UPDATE_QUEUE preempt a queue through its runner, never waiting on another queue's engine.

use std::os::fd::AsFd;
use std::sync::Arc;

use kfd_ioctl::QueueSizes;
use kfd_ioctl::abi::{
    EC_QUEUE_NEW, KFD_IOC_QUEUE_TYPE_COMPUTE, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
    KFD_IOC_QUEUE_TYPE_SDMA, KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID, KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
    KFD_MAX_QUEUE_PERCENTAGE, KFD_MAX_QUEUE_PRIORITY, KFD_MIN_QUEUE_RING_SIZE, kfd_ec_mask,
    kfd_ioctl_alloc_queue_gws_args, kfd_ioctl_create_queue_args, kfd_ioctl_destroy_queue_args,
    kfd_ioctl_get_queue_wave_state_args, kfd_ioctl_set_cu_mask_args, kfd_ioctl_update_queue_args,
};
use rustix::io::Errno;

use super::chardev::{Ctx, get, put};
use super::doorbells::DoorbellMap;
use super::exceptions;
use super::files;
use super::memory::PAGE_SIZE;
use super::offsets::{KFD_MMAP_TYPE_DOORBELL, kfd_mmap_gpu_id};
use super::process::{Pdd, Process, State, doorbell_slice};
use super::queues::{
    DOORBELL_MIRROR_OFFSET, Engine, MAX_QUEUES_PER_DEVICE, Queue, Runner, Stopped,
    max_queues_per_pdd,
};
use super::scheduler;
use crate::machine::{ApertureLayout, Gpu};

/// `TASK_SIZE` of x86_64 with 4-level page tables: `access_ok` refuses anything above.
const TASK_SIZE: u64 = (1 << 47) - 4096;
/// `ENOTSUPP`, the kernel-internal errno `set_queue_properties_from_user` leaks.
const ENOTSUPP: Errno = Errno::from_raw_os_error(524);
/// The KFD minor from which CREATE_QUEUE checks that the ring, pointers, EOP buffer and CWSR
/// area are GPU mappings of the expected size (`kfd_queue_acquire_buffers`, Linux 6.12,
/// whose header says 1.16; approximate, see kfd-abi.md's kernel mapping).
pub(super) const BUFFER_CHECKS_SINCE_MINOR: u32 = 16;
/// The KFD minor from which a ring smaller than `KFD_MIN_QUEUE_RING_SIZE` is raised to it.
const RING_CLAMP_SINCE_MINOR: u32 = 18;
/// The first doorbell of SDMA engine 0 and the distance between engines, in doorbells
/// (`AMDGPU_VEGA20_DOORBELL_sDMA_ENGINE0` = 0x100, `..._ENGINE1` = 0x10A: the layout of
/// `vega20_doorbell_index_init`, which the model uses for every SOC15 GPU).
const SDMA_DOORBELL_BASE: u32 = 0x100;
const SDMA_DOORBELL_STEP: u32 = 0xA;

impl State {
    /// Queues on GPU index `gpu` across every process (`dqm->total_queue_count`).
    pub(super) fn queues_on_device(&self, gpu: usize) -> usize {
        self.procs.values().map(|p| p.queues.on_gpu(gpu)).sum()
    }

    /// Whether SDMA queue `queue` of engine `engine` on GPU `gpu` is taken (the device's SDMA
    /// bitmaps are shared by every process).
    pub(super) fn sdma_taken(&self, gpu: usize, engine: u32, queue: u32) -> bool {
        self.procs.values().any(|p| {
            p.queues
                .by_id
                .values()
                .any(|q| q.gpu == gpu && q.engine == Engine::Sdma { engine, queue })
        })
    }
}

/// `access_ok(addr, size)`.
fn access_ok(addr: u64, size: u64) -> bool {
    addr.checked_add(size).is_some_and(|end| end <= TASK_SIZE)
}

/// The machine's description of GPU index `gpu`.
fn gpu<'a>(ctx: &'a Ctx<'_>, index: usize) -> &'a Gpu {
    &ctx.m.dev.cfg.machine.gpus()[index]
}

/// The SDMA engines of a GPU: (PCIe engines, xGMI engines, queues per engine), from its
/// topology node (`kfd_get_num_sdma_engines`, `kfd_get_num_xgmi_sdma_engines`); the GFX9
/// defaults of `kfd_device_info` when the capture does not say.
fn sdma_engines(ctx: &Ctx<'_>, index: usize) -> (u32, u32, u32) {
    let machine = &ctx.m.dev.cfg.machine;
    let node = machine.node_of(&machine.gpus()[index]);
    let prop = |f: fn(&kfd_ioctl::topology::NodeProperties) -> Option<u64>, default: u32| {
        node.and_then(|n| f(&n.properties))
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(default)
    };
    (
        prop(|p| p.num_sdma_engines, 2),
        prop(|p| p.num_sdma_xgmi_engines, 0),
        prop(|p| p.num_sdma_queues_per_engine, 2).max(1),
    )
}

/// The checks CREATE_QUEUE and UPDATE_QUEUE share (`set_queue_properties_from_user`,
/// `kfd_ioctl_update_queue`): percentage (low byte; the next is the PM4 target XCC) and
/// priority, the ring's address and power-of-two size, and newer kernels' raise of a small
/// ring to `KFD_MIN_QUEUE_RING_SIZE`.
fn check_ring(
    ctx: &Ctx<'_>,
    percentage: u32,
    priority: u32,
    ring: u64,
    ring_size: &mut u32,
) -> Result<(), Errno> {
    if percentage & 0xFF > KFD_MAX_QUEUE_PERCENTAGE || priority > KFD_MAX_QUEUE_PRIORITY {
        return Err(Errno::INVAL);
    }
    if ring != 0 && !access_ok(ring, 8) {
        return Err(Errno::FAULT);
    }
    if *ring_size != 0 && !ring_size.is_power_of_two() {
        return Err(Errno::INVAL);
    }
    if ctx.m.dev.cfg.kfd_minor >= RING_CLAMP_SINCE_MINOR && *ring_size < KFD_MIN_QUEUE_RING_SIZE {
        *ring_size = KFD_MIN_QUEUE_RING_SIZE;
    }
    Ok(())
}

/// `set_queue_properties_from_user`: the checks of the arguments alone.
fn check_properties(ctx: &Ctx<'_>, a: &mut kfd_ioctl_create_queue_args) -> Result<(), Errno> {
    check_ring(
        ctx,
        a.queue_percentage,
        a.queue_priority,
        a.ring_base_address,
        &mut a.ring_size,
    )?;
    if !access_ok(a.read_pointer_address, 4)
        || !access_ok(a.write_pointer_address, 4)
        || (a.eop_buffer_address != 0 && !access_ok(a.eop_buffer_address, 4))
        || (a.ctx_save_restore_address != 0 && !access_ok(a.ctx_save_restore_address, 4))
    {
        return Err(Errno::FAULT);
    }
    let max_type = if ctx.m.dev.cfg.kfd_minor >= 17 {
        KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID
    } else {
        KFD_IOC_QUEUE_TYPE_SDMA_XGMI
    };
    if a.queue_type > max_type {
        return Err(ENOTSUPP);
    }
    Ok(())
}

/// `kfd_queue_buffer_get`: a GPU mapping must start at the page of `addr` and, for a
/// non-zero `expected`, end exactly `expected` bytes (page aligned) later; else `EINVAL`.
/// The handle of the BO mapped there.
fn buffer_get(pdd: &Pdd, addr: u64, expected: u64) -> Result<u64, Errno> {
    let page = addr & !(PAGE_SIZE - 1);
    let (start, m) = pdd.vm.lookup(page).ok_or(Errno::INVAL)?;
    let expected = expected.next_multiple_of(PAGE_SIZE);
    if start != page || (expected != 0 && m.end != page + expected) {
        return Err(Errno::INVAL);
    }
    Ok(m.handle)
}

/// `kfd_queue_acquire_buffers` (newer kernels): the write and read pointers are each in a
/// one-page mapping, the ring in a mapping of its size; compute queues also need the GPU's
/// EOP size and CWSR sizes and mappings of them — the save area a BO mapping or, failing
/// that, SVM memory always mapped on the GPU (`kfd_queue_buffer_svm_get`, see
/// [`svm::queue_buffer_get`](super::svm::queue_buffer_get)). The handles of the BOs whose
/// mappings the queue then holds.
fn acquire_buffers(
    ctx: &Ctx<'_>,
    process: &mut Process,
    a: &kfd_ioctl_create_queue_args,
    compute: bool,
) -> Result<Vec<u64>, Errno> {
    let pdd: &Pdd = process.pdd(a.gpu_id)?;
    let mut held = vec![
        buffer_get(pdd, a.write_pointer_address, PAGE_SIZE)?,
        buffer_get(pdd, a.read_pointer_address, PAGE_SIZE)?,
    ];
    let ring = u64::from(a.ring_size);
    let ring = if ctx.m.dev.cfg.kfd_minor >= 22 {
        ring + u64::from(a.metadata_ring_size)
    } else {
        ring
    };
    held.push(buffer_get(pdd, a.ring_base_address, ring)?);
    if !compute {
        return Ok(held);
    }
    let machine = &ctx.m.dev.cfg.machine;
    let sizes = machine
        .node_of(&machine.gpus()[pdd.gpu])
        .and_then(QueueSizes::for_node)
        .ok_or(Errno::INVAL)?;
    if a.eop_buffer_address != 0 {
        if a.eop_buffer_size != sizes.eop_buffer_size {
            return Err(Errno::INVAL);
        }
        held.push(buffer_get(pdd, a.eop_buffer_address, a.eop_buffer_size)?);
    }
    // The control stack must be the node's; the save area at least the node's `cwsr_size`,
    // and mapped over its own size (with the debugger's bytes) per XCC. The kernel compared
    // the save area for equality until "drm/amdkfd: relax checks for over allocation of save
    // area" (mainline 15bd4958fe38, in 6.12 stable as d15deafab5d7): `<` now, so a runtime
    // that sizes it larger than the kernel computes (libhsakmt 5.2.3 on GPUs it predates)
    // still gets its queue.
    if a.ctl_stack_size != sizes.ctl_stack_size || a.ctx_save_restore_size < sizes.cwsr_size {
        return Err(Errno::INVAL);
    }
    let asked = QueueSizes {
        cwsr_size: a.ctx_save_restore_size,
        ..sizes
    };
    // A BO mapping of the save area, else SVM memory (`kfd_queue_buffer_svm_get`), which holds
    // no BO.
    let bo = buffer_get(pdd, a.ctx_save_restore_address, asked.total_ctx_save_size());
    let gpu = pdd.gpu;
    match bo {
        Ok(handle) => held.push(handle),
        Err(_) => super::svm::queue_buffer_get(
            process,
            gpu,
            a.ctx_save_restore_address,
            asked.total_ctx_save_size(),
        )?,
    }
    Ok(held)
}

/// AMDKFD_IOC_CREATE_QUEUE (`kfd_ioctl_create_queue`, then `pqm_create_queue` and the device
/// queue manager's `create_queue_cpsch`, `allocate_sdma_queue` and `allocate_doorbell`).
pub(super) fn create_queue(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_create_queue_args = get(buf);
    check_properties(ctx, &mut a)?;
    let mut guard = ctx.m.lock();
    let st = &mut *guard;
    let minor = ctx.m.dev.cfg.kfd_minor;
    let (index, queues_here, evicted) = {
        let process = st.process(ctx.tgid, ctx.serial)?;
        let pdd = process.pdd(a.gpu_id)?;
        pdd.bound().map_err(|_| Errno::SRCH)?;
        let (index, evicted) = (pdd.gpu, pdd.fault_evicted);
        (index, process.queues.on_gpu(index), evicted)
    };
    let (pcie, xgmi, per_engine) = sdma_engines(ctx, index);
    if a.queue_type == KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID && a.sdma_engine_id >= pcie + xgmi {
        return Err(Errno::INVAL);
    }
    let compute = matches!(
        a.queue_type,
        KFD_IOC_QUEUE_TYPE_COMPUTE | KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
    );
    let held = if minor >= BUFFER_CHECKS_SINCE_MINOR {
        let process = st.process(ctx.tgid, ctx.serial)?;
        acquire_buffers(ctx, process, &a, compute)?
    } else {
        Vec::new()
    };
    // pqm_create_queue: the HWS limit of a process's queues on a device (none on GC 9.4.3).
    if queues_here >= max_queues_per_pdd(gpu(ctx, index).target) {
        return Err(Errno::NOSPC);
    }
    let id = st
        .process(ctx.tgid, ctx.serial)?
        .queues
        .free_id()
        .ok_or(Errno::NOMEM)?;
    // create_queue_cpsch: the device-wide limit.
    if st.queues_on_device(index) >= MAX_QUEUES_PER_DEVICE {
        return Err(Errno::PERM);
    }
    let engine = if compute {
        Engine::Compute {
            aql: a.queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        }
    } else {
        // allocate_sdma_queue: the lowest free queue of the engines of the type (PCIe
        // engines, xGMI engines after them, or the one asked for); ENOMEM when none is free.
        let engines: Vec<u32> = match a.queue_type {
            KFD_IOC_QUEUE_TYPE_SDMA => (0..pcie).collect(),
            KFD_IOC_QUEUE_TYPE_SDMA_XGMI => (pcie..pcie + xgmi).collect(),
            _ => vec![a.sdma_engine_id],
        };
        let n = engines.len() as u32;
        (0..n * per_engine)
            .map(|slot| Engine::Sdma {
                engine: engines[(slot % n) as usize],
                queue: slot / n,
            })
            .find(|e| match *e {
                Engine::Sdma { engine, queue } => !st.sdma_taken(index, engine, queue),
                Engine::Compute { .. } => false,
            })
            .ok_or(Errno::NOMEM)?
    };
    let layout = gpu(ctx, index).layout;
    let soc15 = layout != ApertureLayout::Vi;
    let process = st.process(ctx.tgid, ctx.serial)?;
    // allocate_doorbell: pre-SOC15 the queue id; SOC15 SDMA queues a static index per
    // engine and queue; SOC15 CP queues the lowest index not reserved for SDMA (the
    // `doorbell_bitmap` of `init_doorbell_bitmap`) nor taken.
    let doorbell_id = match engine {
        _ if !soc15 => id,
        Engine::Sdma { engine, queue } => {
            SDMA_DOORBELL_BASE
                + engine * SDMA_DOORBELL_STEP
                + (queue & 1) * DOORBELL_MIRROR_OFFSET
                + (queue >> 1)
        }
        Engine::Compute { .. } => {
            let taken: Vec<u64> = process
                .queues
                .by_id
                .values()
                .filter(|q| q.gpu == index)
                .map(|q| q.doorbell / 8)
                .collect();
            (0..SDMA_DOORBELL_BASE)
                .find(|&i| !taken.contains(&u64::from(i)))
                .ok_or(Errno::BUSY)?
        }
    };
    let size = if soc15 { 8 } else { 4 };
    let doorbell = (u64::from(doorbell_id) * size) & (doorbell_slice(layout) - 1);
    let mut queue = Queue {
        gpu: index,
        engine,
        ring_va: a.ring_base_address,
        ring_size: u64::from(a.ring_size),
        rptr_va: a.read_pointer_address,
        wptr_va: a.write_pointer_address,
        percentage: a.queue_percentage & 0xFF,
        priority: a.queue_priority,
        doorbell,
        cu_mask: Vec::new(),
        gws: 0,
        held,
        consumed: 0,
        stopped: None,
        ctx_save: (a.ctx_save_restore_address, a.ctx_save_restore_size),
        user_type: match engine {
            Engine::Compute { aql: true } => KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            Engine::Compute { aql: false } => KFD_IOC_QUEUE_TYPE_COMPUTE,
            Engine::Sdma { engine, .. } if engine < pcie => KFD_IOC_QUEUE_TYPE_SDMA,
            Engine::Sdma { .. } => KFD_IOC_QUEUE_TYPE_SDMA_XGMI,
        },
        exception_status: 0,
        suspended: false,
        pm4: Default::default(),
        runner: Runner::new(false),
    };
    // The new queue's write pointer is 0 whatever was last rung on its doorbell: the kernel
    // zeroes the MQD it maps (`init_mqd` / `init_mqd_sdma` of `kfd_mqd_manager_v9.c` clear
    // it, so `cp_hqd_pq_wptr` and the SDMA RLC's `rb_wptr` are 0), and a doorbell is a write
    // to the engine's write-pointer register, not memory that keeps a destroyed queue's
    // last value. The model keeps doorbells in the process's memfd, so the slot is cleared.
    files::write_at(
        process.memfd.as_fd(),
        Process::doorbell_offset(index) + doorbell,
        &[0u8; 8][..size as usize],
    )?;
    // The process's doorbell slices, mapped once for the engines and the doorbell watcher
    // (`doorbells`): read with no system call from now on.
    if process.doorbells.is_none() {
        let start = Process::doorbell_offset(0);
        let len = Process::doorbell_offset(process.pdds.len()) - start;
        process.doorbells = DoorbellMap::map(Arc::clone(&process.memfd), start, len).map(Arc::new);
    }
    // A queue created with no ring or no share of the GPU is created inactive; so is one of a
    // process whose queues on the GPU a VM fault evicted: `create_queue_cpsch` sets
    // `is_evicted = !!qpd->evicted`, `QUEUE_IS_ACTIVE` is false, and nothing restores it.
    if evicted {
        queue.stopped = Some(Stopped::Evicted);
    }
    queue.runner = Runner::new(queue.is_active() && !evicted);
    // A process TTM evicted (`evict`): the queue is created evicted too, and resumes with
    // the others at the restore.
    if process.ttm_evicted {
        queue.runner.set_evicted(true);
    }
    let runner = queue.runner.clone();
    process.queues.by_id.insert(id, queue);
    // kfd_ioctl_create_queue: `kfd_dbg_ev_raise(KFD_EC_MASK(EC_QUEUE_NEW), p, dev, queue_id,
    // ...)` (the debugger learns of the queue).
    exceptions::ev_raise(process, kfd_ec_mask(EC_QUEUE_NEW), index, id, None);
    drop(guard);
    scheduler::start_queue(ctx.m, ctx.tgid, id, runner);
    a.queue_id = id;
    // Return gpu_id as doorbell offset for mmap; on SOC15 with the doorbell's offset in the
    // process's doorbell frame.
    a.doorbell_offset = KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(a.gpu_id);
    if soc15 {
        a.doorbell_offset |= doorbell;
    }
    put(buf, &a);
    Ok(())
}

/// AMDKFD_IOC_DESTROY_QUEUE (`pqm_destroy_queue`): `EINVAL` for an id no queue has.
///
/// `destroy_queue_cpsch` unmaps the queue from the HWS (a preemption) before it frees it: the
/// queue's engine starts no packet after, and the call waits for the one in flight only as
/// long as a preemption may take (`PREEMPT_TIMEOUT`); an engine blocked in an access (a page
/// nobody serves) does not hold it up, and what that access brings back is discarded.
pub(super) fn destroy_queue(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_destroy_queue_args = get(buf);
    let q = {
        let mut st = ctx.m.lock();
        let process = st.process(ctx.tgid, ctx.serial)?;
        let q = process
            .queues
            .by_id
            .remove(&a.queue_id)
            .ok_or(Errno::INVAL)?;
        // pqm_clean_queue_resource: a queue with GWS gives them back to its process.
        if q.gws != 0
            && let Some(pdd) = process.pdds.iter_mut().find(|p| p.gpu == q.gpu)
        {
            pdd.num_gws = 0;
        }
        q
    };
    // Without the model's lock, which the engine may need to reach its packet's end.
    q.runner.destroy(true);
    Ok(())
}

/// AMDKFD_IOC_UPDATE_QUEUE (`kfd_ioctl_update_queue`, `pqm_update_queue_properties`): the
/// argument checks, then `EFAULT` for an unknown queue; newer kernels check the new ring is
/// a mapping of its size (`EINVAL`).
///
/// The device queue manager's `update_queue` then unmaps the queues from the HWS (a
/// preemption at a packet boundary, as DESTROY_QUEUE's), has the MQD manager's `update_mqd`
/// recompute `is_active` as `QUEUE_IS_ACTIVE` (`kfd_priv.h`: a ring size and address, a
/// percentage above 0, not evicted or suspended) and maps the active ones again. So a queue
/// updated to 0 percent runs nothing, even work written meanwhile, until an update makes it
/// active again.
pub(super) fn update_queue(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_update_queue_args = get(buf);
    check_ring(
        ctx,
        a.queue_percentage,
        a.queue_priority,
        a.ring_base_address,
        &mut a.ring_size,
    )?;
    let mut st = ctx.m.lock();
    let process = st.process(ctx.tgid, ctx.serial)?;
    let gpu = process.queues.get_mut(a.queue_id, Errno::FAULT)?.gpu;
    if ctx.m.dev.cfg.kfd_minor >= BUFFER_CHECKS_SINCE_MINOR
        && a.ring_base_address != 0
        && a.ring_size != 0
    {
        let pdd = process.pdds.get(gpu).ok_or(Errno::FAULT)?;
        buffer_get(pdd, a.ring_base_address, u64::from(a.ring_size))?;
    }
    let q = process.queues.get_mut(a.queue_id, Errno::FAULT)?;
    q.ring_va = a.ring_base_address;
    q.ring_size = u64::from(a.ring_size);
    q.percentage = a.queue_percentage & 0xFF;
    q.priority = a.queue_priority;
    let (runner, active) = (q.runner.clone(), q.is_active());
    drop(st);
    // Without the model's lock, which the engine may need to reach its packet's end.
    runner.set_active(active);
    Ok(())
}

/// AMDKFD_IOC_SET_CU_MASK: the argument checks and the mask copy, then `pqm_update_mqd`
/// (`EFAULT` for an unknown queue).
pub(super) fn set_cu_mask(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_set_cu_mask_args = get(buf);
    if !a.num_cu_mask.is_multiple_of(32) || a.num_cu_mask == 0 {
        return Err(Errno::INVAL);
    }
    let bits = a.num_cu_mask.min(1024);
    let mut mask = vec![0u8; (bits / 8) as usize];
    ctx.caller
        .read(a.cu_mask_ptr, &mut mask)
        .map_err(|_| Errno::FAULT)?;
    let mut st = ctx.m.lock();
    let process = st.process(ctx.tgid, ctx.serial)?;
    let q = process.queues.get_mut(a.queue_id, Errno::FAULT)?;
    q.cu_mask = mask
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    Ok(())
}

/// AMDKFD_IOC_GET_QUEUE_WAVE_STATE (`pqm_get_wave_state`, then the device queue manager's
/// `get_wave_state`): `EFAULT` for an unknown queue; `EINVAL` for one that is not a compute
/// queue or is active (the model's queues never are preempted with saved waves).
pub(super) fn get_queue_wave_state(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let a: kfd_ioctl_get_queue_wave_state_args = get(buf);
    let mut st = ctx.m.lock();
    let process = st.process(ctx.tgid, ctx.serial)?;
    process.queues.get_mut(a.queue_id, Errno::FAULT)?;
    Err(Errno::INVAL)
}

/// AMDKFD_IOC_ALLOC_QUEUE_GWS (`kfd_ioctl_alloc_queue_gws`, `pqm_set_gws`): `EINVAL` for an
/// unknown queue; `ENODEV` on a GPU without GWS (the node's `num_gws` is 0: `dev->gws` was
/// never allocated); `EINVAL` for a queue that is not a compute queue; then, per process and
/// GPU (`qpd->num_gws`: "Only allow one queue per process can have GWS assigned"), `EBUSY` to
/// give GWS while a queue there has them and `EINVAL` to take them back when none has. A
/// `num_gws` above 0 gives the queue the device's whole GWS (`dev->adev->gds.gws_size`
/// entries, whatever number was asked) and its dispatches reach them
/// ([`Device::gws`](super::device::Device)); 0 takes them away. `first_gws` is always 0.
pub(super) fn alloc_queue_gws(ctx: &Ctx<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut a: kfd_ioctl_alloc_queue_gws_args = get(buf);
    let mut st = ctx.m.lock();
    let process = st.process(ctx.tgid, ctx.serial)?;
    let q = process.queues.get_mut(a.queue_id, Errno::INVAL)?;
    let gpu = q.gpu;
    let machine = &ctx.m.dev.cfg.machine;
    let gws_size = machine
        .node_of(&machine.gpus()[gpu])
        .and_then(|n| n.properties.num_gws)
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX));
    if gws_size == 0 {
        return Err(Errno::NODEV);
    }
    if !matches!(q.engine, Engine::Compute { .. }) {
        return Err(Errno::INVAL);
    }
    let pdd = process
        .pdds
        .iter()
        .position(|p| p.gpu == gpu)
        .ok_or(Errno::INVAL)?;
    let give = a.num_gws != 0;
    let held = process.pdds[pdd].num_gws;
    if give && held != 0 {
        return Err(Errno::BUSY);
    }
    if !give && held == 0 {
        return Err(Errno::INVAL);
    }
    process.pdds[pdd].num_gws = if give { gws_size } else { 0 };
    if let Some(q) = process.queues.by_id.get_mut(&a.queue_id) {
        q.gws = if give { gws_size } else { 0 };
    }
    a.first_gws = 0;
    put(buf, &a);
    Ok(())
}
