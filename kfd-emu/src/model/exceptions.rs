//! Exceptions of queues, devices and the process as the kernel raises them to the debugger
//! and to the runtime: `kfd_dbg_ev_raise`, `kfd_set_dbg_ev_from_interrupt` and
//! `kfd_dbg_send_exception_to_runtime` (`kfd_debug.c`), `kfd_send_exception_to_runtime`
//! (`kfd_process.c`).
//!
//! - **Raise** ([`ev_raise`], `kfd_dbg_ev_raise`): nothing unless a debugger attached
//!   (`debug_trap_enabled`). A device exception sets its bits on the GPU's pdd (a memory
//!   violation keeps its `kfd_hsa_memory_exception_data` unless one is kept already); a
//!   process exception on the process; a queue exception on the queue of that GPU whose
//!   doorbell id is the source (its queue id for `EC_QUEUE_NEW`). When the debugger enabled
//!   any of the bits, one byte `'.'` goes to its event file and the raise counts as
//!   delivered.
//! - **From an interrupt** ([`from_interrupt`], `kfd_set_dbg_ev_from_interrupt`; raised by a
//!   trap handler's SQ interrupt, a VM fault, and the CP's `SOC15_INTSRC_CP_BAD_OPCODE` for a
//!   refused AQL packet, [`queue_error`](super::queue_error)): a raise the
//!   debugger did not take goes to the runtime instead: a queue exception, when the runtime
//!   is enabled, through [`to_runtime`]; a device memory violation is the caller's to turn
//!   into the queues' eviction and the memory event (`kfd_dqm_evict_pasid`,
//!   `kfd_signal_vm_fault_event`: [`engine::vm_fault`](super::engine::vm_fault)).
//! - **To the runtime** ([`to_runtime`], `send_exception_work_handler`): the queue's context
//!   save area begins with `kfd_context_save_area_header`, whose `err_payload_addr` (the
//!   runtime's 64-bit error word: ROCr gives its exception signal's value) gets the bits
//!   OR-ed in and whose `err_event_id` is set (`kfd_set_event`). The kernel reaches the
//!   header through the process's mm; here through the GPU view, as the header is the
//!   queue's context save BO, which CREATE_QUEUE requires mapped on the GPU
//!   (`kfd_queue_acquire_buffers`).

use kfd_ioctl::abi::{
    EC_DEVICE_MEMORY_VIOLATION, EC_QUEUE_NEW, KFD_EC_MASK_DEVICE, KFD_EC_MASK_PROCESS,
    KFD_EC_MASK_QUEUE, kfd_ec_mask,
};
use std::os::fd::AsFd;

use super::driver::Driver;
use super::process::{DebugState, Process};

/// `err_payload_addr`'s and `err_event_id`'s offsets in `kfd_context_save_area_header`.
const ERR_PAYLOAD_ADDR: u64 = 24;
const ERR_EVENT_ID: u64 = 32;

/// Writes the byte the kernel writes to the debug event file (`kernel_write` of `'.'`).
pub(super) fn notify(d: &DebugState) {
    if let Some(file) = &d.ev_file {
        // A full pipe or a closed reader loses the byte, as the kernel's write does.
        let _ = rustix::io::write(file.as_fd(), b".");
    }
}

/// The doorbell id of a queue whose doorbell is `doorbell` bytes into the process's slice
/// (64-bit doorbells on SOC15: `q->doorbell_id`).
pub(super) fn doorbell_id(doorbell: u64) -> u32 {
    (doorbell / 8) as u32
}

/// `kfd_dbg_ev_raise(mask, p, gpu, source_id, ..., data)` (module docs): whether the
/// debugger is told.
pub(super) fn ev_raise(
    p: &mut Process,
    mask: u64,
    gpu: usize,
    source_id: u32,
    data: Option<&[u8]>,
) -> bool {
    if !p.debug.enabled {
        return false;
    }
    if mask & KFD_EC_MASK_DEVICE != 0 {
        if let Some(pdd) = p.pdds.iter_mut().find(|d| d.gpu == gpu) {
            pdd.exception_status |= mask & KFD_EC_MASK_DEVICE;
            if mask & kfd_ec_mask(EC_DEVICE_MEMORY_VIOLATION) != 0
                && pdd.vm_fault_exc_data.is_none()
            {
                pdd.vm_fault_exc_data = data.map(<[u8]>::to_vec);
            }
        }
    } else if mask & KFD_EC_MASK_PROCESS != 0 {
        p.debug.exception_status |= mask & KFD_EC_MASK_PROCESS;
    } else {
        let by_id = mask & kfd_ec_mask(EC_QUEUE_NEW) != 0;
        if let Some(q) = p.queues.by_id.iter_mut().find_map(|(&id, q)| {
            let target = if by_id { id } else { doorbell_id(q.doorbell) };
            (q.gpu == gpu && target == source_id).then_some(q)
        }) {
            q.exception_status |= mask;
        }
    }
    if p.debug.exception_enable_mask & mask == 0 {
        return false;
    }
    notify(&p.debug);
    true
}

/// `kfd_set_dbg_ev_from_interrupt` for process `tgid` on GPU `gpu` (module docs): whether
/// the debugger or the runtime was told. A memory violation the debugger did not take
/// answers `false`: the caller evicts and signals.
pub(super) fn from_interrupt(
    drv: &Driver,
    tgid: i32,
    gpu: usize,
    doorbell: u32,
    mask: u64,
    data: Option<&[u8]>,
) -> bool {
    let mut st = drv.lock();
    let Some(p) = st.procs.get_mut(&tgid) else {
        return false;
    };
    if ev_raise(p, mask, gpu, doorbell, data) {
        return true;
    }
    if mask & KFD_EC_MASK_QUEUE == 0 || !p.runtime_enabled {
        return false;
    }
    let Some(csa) = p
        .queues
        .by_id
        .values()
        .find(|q| q.gpu == gpu && doorbell_id(q.doorbell) == doorbell)
        .map(|q| q.ctx_save.0)
    else {
        return false;
    };
    let gpu_id = p.pdds.iter().find(|d| d.gpu == gpu).map(|d| d.gpu_id);
    drop(st);
    if let Some(gpu_id) = gpu_id {
        to_runtime(drv, tgid, gpu_id, csa, mask);
    }
    true
}

/// `kfd_send_exception_to_runtime` of the queue whose context save area is at `csa` (GPU
/// `gpu_id` of process `tgid`): `reason` OR-ed into the runtime's error payload, its error
/// event set (module docs). A header the GPU cannot read, or a payload it cannot reach,
/// loses the report, as the kernel's `get_user`/`put_user` failures do.
pub(super) fn to_runtime(drv: &Driver, tgid: i32, gpu_id: u32, csa: u64, reason: u64) {
    // (A queue without a context save area, an SDMA queue's, has no header: nothing to do.
    // The reads report no fault, as the kernel's `get_user` makes none.)
    let mut payload = [0u8; 8];
    let mut event = [0u8; 4];
    if csa == 0
        || drv
            .peek_here(tgid, gpu_id, csa + ERR_PAYLOAD_ADDR, &mut payload)
            .is_err()
        || drv
            .peek_here(tgid, gpu_id, csa + ERR_EVENT_ID, &mut event)
            .is_err()
    {
        return;
    }
    let at = u64::from_le_bytes(payload);
    let mut cur = [0u8; 8];
    if at != 0 && drv.peek_here(tgid, gpu_id, at, &mut cur).is_ok() {
        let value = u64::from_le_bytes(cur) | reason;
        let _ = drv.write_here(tgid, gpu_id, at, &value.to_le_bytes());
    }
    let mut st = drv.lock();
    if let Some(p) = st.procs.get_mut(&tgid) {
        p.events.set(u32::from_le_bytes(event));
    }
    drop(st);
    drv.wake.notify_all();
}
