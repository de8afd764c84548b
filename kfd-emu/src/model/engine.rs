//! What the model's GPU engines share (the SDMA engines of [`sdma`](super::sdma) and the AQL
//! packet processor of [`aql`](super::aql)): the queue being run ([`Work`]), the read pointer
//! written back, a queue stopped (an AQL queue's error reported to the runtime through
//! [`queue_error`]), a VM fault taken as the interrupt handler takes it, and the
//! event interrupt of a TRAP or a completion signal. Which queue runs when is
//! [`scheduler`](super::scheduler)'s.
//!
//! Every effect of a queue whose [`Runner`] says it was destroyed is dropped here (a stop, a
//! VM fault), as its accesses are in the GPU view: an access that was blocked when the queue
//! went is discarded when it returns.

use std::cell::Cell;
use std::os::fd::AsFd;
use std::sync::Arc;

use kfd_ioctl::abi::{
    EC_DEVICE_MEMORY_VIOLATION, KFD_IOC_EVENT_DEBUG_EVENT, KFD_IOC_EVENT_MEMORY,
    KFD_IOC_EVENT_SIGNAL, KFD_SIGNAL_EVENT_LIMIT, kfd_ec_mask, kfd_hsa_memory_exception_data,
    kfd_memory_exception_failure,
};
use rustix::io::Errno;
use zerocopy::IntoBytes;

use super::doorbells::Doorbell;
use super::driver::Driver;
use super::events::{SignalPage, UNSIGNALED};
use super::exceptions;
use super::files;
use super::gpu_view::{GpuFault, GpuFaultReason};
use super::process::{EVENT_PAGE_OFFSET, Process, State};
use super::queue_error;
use super::queues::{Engine, Runner, Stopped};

/// The valid bits of a TRAP's `int_context` the interrupt handler passes on (`KFD_CONTEXT_ID`
/// masking in `kfd_int_process_v9.c`).
const TRAP_ID_BITS: u32 = 28;

/// The most packets one turn of a queue runs (see [`scheduler`](super::scheduler)).
pub(super) const TURN_PACKETS: u64 = 64;
/// The most bytes one turn of a queue moves (at least one chunk of a copy always moves).
pub(super) const TURN_BYTES: u64 = 4 << 20;

/// What the engine needs of a queue, copied out of the state.
pub(super) struct Work {
    pub tgid: i32,
    pub id: u32,
    pub gpu: usize,
    pub gpu_id: u32,
    pub ring_va: u64,
    pub ring_size: u64,
    pub rptr_va: u64,
    pub wptr_va: u64,
    pub consumed: u64,
    /// The engine the queue runs on (AQL queues' pointers count packets, not bytes).
    pub engine: Engine,
    /// The queue's doorbell (in the process's `/dev/kfd` memfd, read through its mapping).
    pub doorbell: Doorbell,
    /// The queue's engine side: packets start through it, and stop when it is preempted.
    pub runner: Arc<Runner>,
    /// The bytes this turn may still move: a long copy yields between chunks once it is
    /// spent (and goes on from there next turn).
    pub budget: Cell<u64>,
    /// Where the packet being run starts (the queue position it was read at).
    pub packet_at: Cell<u64>,
    /// A packet cut short at the end of a turn: its position, and how far it got (bytes).
    pub resume: Cell<Option<(u64, u64)>>,
    /// The event interrupt the packet just run asks for (an SDMA TRAP, a PM4 RELEASE_MEM
    /// with `int_sel`), raised by [`raise_interrupt`] once the read pointer is past the
    /// packet.
    pub interrupt: Cell<Option<u32>>,
}

/// Raises the event interrupt the packet just run asked for ([`Work::interrupt`]), after the
/// engine wrote its read pointer past the packet: an engine fetches a packet before the
/// interrupt it raises travels through the IH ring to the kernel, so a waiter the event wakes
/// sees the read pointer past the packet, as on the hardware.
pub(super) fn raise_interrupt(drv: &Driver, w: &Work) {
    if let Some(id) = w.interrupt.take() {
        signal_interrupt(drv, w.tgid, id);
    }
}

/// Records the new read pointer in the queue and writes it to the process's memory; false
/// when the queue went away or the write faulted (the queue is stopped then).
pub(super) fn advance(drv: &Driver, w: &Work, consumed: u64) -> bool {
    {
        let mut st = drv.lock();
        // The queue, not a later one that took its id.
        let Some(q) = st
            .procs
            .get_mut(&w.tgid)
            .and_then(|p| p.queues.by_id.get_mut(&w.id))
            .filter(|q| Arc::ptr_eq(&q.runner, &w.runner))
        else {
            return false;
        };
        q.consumed = consumed;
    }
    if let Err(f) = drv.write_here(w.tgid, w.gpu_id, w.rptr_va, &consumed.to_ne_bytes()) {
        vm_fault(drv, w, &f);
        return false;
    }
    true
}

/// Stops queue `w` alone (a packet it cannot run). An AQL queue's error is then reported to
/// the runtime as the CP reports it ([`queue_error::report`]): its error code in the queue's
/// `queue_inactive_signal` and that signal's event raised (`kfd_signal_event_interrupt`, as
/// for a completion signal); a fault on the way is a VM fault. A packet error is also the
/// CP's `SOC15_INTSRC_CP_BAD_OPCODE` interrupt with its `EC_QUEUE_PACKET_*` code and the
/// queue's doorbell id (an illegal instruction the `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION` of
/// ROCr 6.2.4's trap handler), which the kernel raises to the debugger or the runtime
/// (`kfd_set_dbg_ev_from_interrupt`; [`queue_error`]'s module docs).
pub(super) fn stop(drv: &Driver, w: &Work, why: Stopped) {
    if w.runner.is_gone() {
        return;
    }
    if drv.dev.cfg.trace {
        crate::own::elog!(
            "[{}] {} gpu {:#x} queue {}: stopped: {why:?}",
            w.tgid,
            match w.engine {
                Engine::Compute { aql: true } => "aql",
                Engine::Compute { aql: false } => "pm4",
                Engine::Sdma { .. } => "sdma",
            },
            w.gpu_id,
            w.id
        );
    }
    // A dispatch on a GPU whose code kfd-gfx9 does not interpret (gfx10, gfx12) stops
    // the queue at once; the program's log says why, as for an unimplemented instruction
    // (`kernel`), since what the program sees next is only its own wait timing out.
    let gfx = drv.dev.cfg.machine.gpus()[w.gpu].target;
    if matches!(why, Stopped::CannotDispatch(_)) && !matches!(gfx.major, 9 | 11) {
        crate::own::elog!(
            "kfd-emu: [{}] gpu {:#x} queue {}: dispatch not run: gfx{}{}{:x} code is not \
             interpreted (kfd-gfx9 runs gfx9 and gfx11 only); the queue stops",
            w.tgid,
            w.gpu_id,
            w.id,
            gfx.major,
            gfx.minor,
            gfx.stepping
        );
    }
    let mut st = drv.lock();
    let Some(q) = st
        .procs
        .get_mut(&w.tgid)
        .and_then(|p| p.queues.by_id.get_mut(&w.id))
    else {
        // Destroyed meanwhile: unmapped from the CP, which reports nothing of it.
        return;
    };
    q.stopped = Some(why);
    let doorbell = exceptions::doorbell_id(q.doorbell);
    drop(st);
    drv.wake.notify_all();
    if let (Engine::Compute { aql: true }, Stopped::QueueError(code)) = (w.engine, why) {
        match queue_error::report(drv, w.tgid, w.gpu_id, w.rptr_va, code) {
            Ok(Some(event)) => signal_interrupt(drv, w.tgid, event),
            Ok(None) => {}
            Err(f) => vm_fault(drv, w, &f),
        }
        if let Some(ec) = queue_error::exception(code) {
            // Taken by the debugger or the runtime, or by no one (a runtime that did not
            // enable itself: the signal above is all it has).
            exceptions::from_interrupt(drv, w.tgid, w.gpu, doorbell, kfd_ec_mask(ec), None);
        }
    }
}

/// A VM fault of queue `w`, as the interrupt handler takes it (`event_interrupt_wq_v9`, then
/// `kfd_set_dbg_ev_from_interrupt`): the SMI record (emitted by the GPU view's walk); with a
/// debugger that enabled `EC_DEVICE_MEMORY_VIOLATION`, the exception raised on the GPU for
/// it with the fault's data and only the faulting queue stopped; otherwise the process's
/// queues on the GPU evicted (`kfd_dqm_evict_pasid`: they all
/// stop, the faulting one at its packet), then `kfd_signal_vm_fault_event`: every memory
/// event of the process set with the fault.
///
/// The eviction is the GPU's pdd's (`kfd_dqm_evict_pasid` looks up the process's device data
/// of the faulting device and calls `evict_process_queues_cpsch` on its `qpd`), and it lasts:
/// `qpd->evicted` stays raised, as no restore pairs with it, so queues the process creates
/// on the GPU afterwards are created evicted ([`Pdd::fault_evicted`](super::process::Pdd)).
/// The process's queues on other GPUs, and other processes, run on.
///
/// A process whose address space is gone (`ESRCH` reaching its memory: it is exiting) takes
/// no fault: the kernel dequeues every queue of an exiting process at its mm's release
/// (`kfd_process_notifier_release_internal` → `kfd_process_dequeue_from_all_devices`) before
/// the memory goes, so its queues just stop here until teardown destroys them.
pub(super) fn vm_fault(drv: &Driver, w: &Work, f: &GpuFault) {
    // A queue destroyed meanwhile: its engine's accesses are discarded, not faults.
    if w.runner.is_gone() {
        return;
    }
    let tgid = w.tgid;
    if f.reason == GpuFaultReason::Backing(Errno::SRCH) {
        let mut st = drv.lock();
        if let Some(p) = st.procs.get_mut(&tgid) {
            for q in p.queues.by_id.values_mut() {
                q.stopped.get_or_insert(Stopped::Evicted);
            }
        }
        drop(st);
        drv.wake.notify_all();
        return;
    }
    let data = kfd_hsa_memory_exception_data {
        failure: kfd_memory_exception_failure {
            NotPresent: u32::from(f.reason != GpuFaultReason::ReadOnly),
            ReadOnly: u32::from(f.reason == GpuFaultReason::ReadOnly),
            NoExecute: 0,
            imprecise: 0,
        },
        va: f.va & !(super::memory::PAGE_SIZE - 1),
        gpu_id: f.gpu_id,
        ErrorType: 0,
    };
    // kfd_set_dbg_ev_from_interrupt(dev, pasid, -1, EC_DEVICE_MEMORY_VIOLATION, data): a
    // debugger that enabled it is told instead; the wave is then halted in the first-level
    // trap handler (`cwsr_trap_handler_gfx9.asm`, L_HALT_WAVE on TRAPSTS.MEM_VIOL), so the
    // faulting queue makes no progress while the others run on.
    let raw = data.as_bytes();
    if exceptions::from_interrupt(
        drv,
        tgid,
        w.gpu,
        u32::MAX,
        kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION),
        Some(raw),
    ) {
        if drv.dev.cfg.trace {
            crate::own::elog!(
                "[{tgid}] gpu {:#x} queue {}: {f}; raised to the debugger",
                w.gpu_id,
                w.id
            );
        }
        let mut st = drv.lock();
        if let Some(q) = st
            .procs
            .get_mut(&tgid)
            .and_then(|p| p.queues.by_id.get_mut(&w.id))
        {
            q.stopped.get_or_insert(Stopped::VmFault(f.va));
        }
        drop(st);
        drv.wake.notify_all();
        return;
    }
    if drv.dev.cfg.trace {
        crate::own::elog!(
            "[{tgid}] sdma gpu {:#x} queue {}: {f}; the process's queues on the GPU stop",
            w.gpu_id,
            w.id
        );
    }
    evict_for_fault(drv, tgid, w.gpu, Some((w.id, f.va)), raw);
}

/// `kfd_dqm_evict_pasid` then `kfd_signal_vm_fault_event` for a VM fault on GPU `gpu` of
/// process `tgid` (see [`vm_fault`]): the process's queues on the GPU stop (`faulting`, the
/// queue and address of the fault, at its packet), every memory event is set with `data`
/// (a `kfd_hsa_memory_exception_data`). Also what a debugger's SEND_RUNTIME_EVENT of
/// `EC_DEVICE_MEMORY_VIOLATION` does (`kfd_dbg_send_exception_to_runtime`).
pub(super) fn evict_for_fault(
    drv: &Driver,
    tgid: i32,
    gpu: usize,
    faulting: Option<(u32, u64)>,
    data: &[u8],
) {
    let mut st = drv.lock();
    if let Some(p) = st.procs.get_mut(&tgid) {
        if let Some(pdd) = p.pdds.iter_mut().find(|d| d.gpu == gpu) {
            pdd.fault_evicted = true;
        }
        for (&id, q) in p.queues.by_id.iter_mut().filter(|(_, q)| q.gpu == gpu) {
            if q.stopped.is_none() {
                q.stopped = Some(match faulting {
                    Some((queue, va)) if queue == id => Stopped::VmFault(va),
                    _ => Stopped::Evicted,
                });
            }
        }
        let ids: Vec<u32> = p
            .events
            .events
            .iter()
            .filter(|(_, e)| e.kind == KFD_IOC_EVENT_MEMORY)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(e) = p.events.events.get_mut(&id) {
                let n = e.memory_exception.len().min(data.len());
                e.memory_exception[..n].copy_from_slice(&data[..n]);
            }
            p.events.set(id);
        }
    }
    drop(st);
    drv.wake.notify_all();
}

/// `kfd_signal_event_interrupt(pasid, partial_id, 28)` for an SDMA TRAP (32 valid bits for
/// the CP's end of pipe: the same lookup, both being wider than `KFD_SIGNAL_EVENT_LIMIT`'s
/// ids): the event whose id the interrupt names, if its slot was written; else every event
/// whose slot was written. Setting one acknowledges its slot (`acknowledge_signal` writes it
/// back to unsignaled).
pub(super) fn signal_interrupt(drv: &Driver, tgid: i32, partial_id: u32) {
    let mut st = drv.lock();
    let Some(p) = st.procs.get(&tgid) else { return };
    let can = |p: &Process, id: u32| {
        p.events
            .events
            .get(&id)
            .is_some_and(|e| e.kind == KFD_IOC_EVENT_SIGNAL || e.kind == KFD_IOC_EVENT_DEBUG_EVENT)
    };
    let written = |id: u32| st.signal_slot(tgid, id).is_ok_and(|v| v != UNSIGNALED);
    // (1 << 28) >= KFD_SIGNAL_EVENT_LIMIT: the id is looked up whole.
    debug_assert!(1u64 << TRAP_ID_BITS >= u64::from(KFD_SIGNAL_EVENT_LIMIT));
    let ids: Vec<u32> = if can(p, partial_id) && written(partial_id) {
        vec![partial_id]
    } else {
        p.events
            .events
            .keys()
            .copied()
            .filter(|&id| id < KFD_SIGNAL_EVENT_LIMIT && can(p, id) && written(id))
            .collect()
    };
    for id in ids {
        let _ = st.set_signal_slot(tgid, id, UNSIGNALED);
        if let Some(p) = st.procs.get_mut(&tgid) {
            p.events.set(id);
        }
    }
    drop(st);
    drv.wake.notify_all();
}

impl Work {
    /// What the producer last rang the queue's doorbell with (through the process's doorbell
    /// mapping: no system call, [`Doorbell::read`]).
    pub(super) fn rung(&self) -> Option<u64> {
        self.doorbell.read()
    }
}

impl State {
    /// Reads signal slot `id` of process `tgid`'s signal page (a BO page through its
    /// long-lived mapping when the GPU made one, [`bo_maps`](super::bo_maps): no system call).
    pub(super) fn signal_slot(&self, tgid: i32, id: u32) -> Result<u64, Errno> {
        let process = self.procs.get(&tgid).ok_or(Errno::BADF)?;
        let offset = u64::from(id) * 8;
        let mut value = [0u8; 8];
        match process.events.signal_page() {
            Some(SignalPage::Kernel) | None => files::read_at(
                process.memfd.as_fd(),
                EVENT_PAGE_OFFSET + offset,
                &mut value,
            )?,
            Some(SignalPage::Bo { backing }) => match self.bo_maps.get(&backing) {
                Some(map) if map.read_at(slot_at(offset)?, &mut value).is_ok() => {}
                _ => self.backing_read(backing, offset, &mut value)?,
            },
        }
        Ok(u64::from_ne_bytes(value))
    }

    /// Writes `value` to signal slot `id` of process `tgid`'s signal page.
    pub(super) fn set_signal_slot(&self, tgid: i32, id: u32, value: u64) -> Result<(), Errno> {
        let process = self.procs.get(&tgid).ok_or(Errno::BADF)?;
        let offset = u64::from(id) * 8;
        match process.events.signal_page() {
            Some(SignalPage::Kernel) | None => files::write_at(
                process.memfd.as_fd(),
                EVENT_PAGE_OFFSET + offset,
                &value.to_ne_bytes(),
            ),
            Some(SignalPage::Bo { backing }) => match self.bo_maps.get(&backing) {
                Some(map) if map.write(slot_at(offset)?, &value.to_ne_bytes()).is_ok() => Ok(()),
                _ => self.backing_write(backing, offset, &value.to_ne_bytes()),
            },
        }
    }
}

/// A signal slot's offset in its page as a mapping offset.
fn slot_at(offset: u64) -> Result<usize, Errno> {
    usize::try_from(offset).map_err(|_| Errno::FAULT)
}
