//! Queue errors of the AQL packet processor, reported to the runtime as the CP reports them:
//! which packets the CP refuses, with which error code, and how the code reaches the
//! runtime through the queue's `queue_inactive_signal`.
//!
//! # Which packets, which code
//!
//! The CP stops an AQL queue at a packet it cannot process and names the reason with an
//! error code whose bits ROCr 5.2.3 decodes in `AqlQueue::DynamicScratchHandler<true>`
//! (`src/core/runtime/amd_aql_queue.cpp`, the handler ROCr registers on
//! `queue_inactive_signal` when the KFD has no exception debugging, as here: libhsakmt
//! 5.2.3's `hsaKmtRuntimeEnable` finds no debug-trap version, so `Load` in `amd_topology.cpp`
//! records `supports_exception_debugging = false`). [`refuse`] picks one code per packet:
//!
//! | code | the handler's comment | `hsa_status_t` | packets here |
//! |---|---|---|---|
//! | 32 | "Invalid format: 32 is generic" | `HSA_STATUS_ERROR_INVALID_PACKET_FORMAT` | AGENT_DISPATCH (the CP does not run agent packets), reserved types 6–255 |
//! | 256 | "256 is vendor specific packets" | `HSA_STATUS_ERROR_INVALID_PACKET_FORMAT` | VENDOR_SPECIFIC of a format the CP does not run (`AMD_AQL_FORMAT_PM4_IB` runs, in `aql`) |
//! | 2 | "Invalid dim" | `HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS` | KERNEL_DISPATCH with 0 dimensions, or a zero work-group or grid size in a used one (`hsa.h`: "Must be greater than 0") |
//! | 64 | "Group is too large" | `HSA_STATUS_ERROR_INVALID_ARGUMENT` | KERNEL_DISPATCH with more than 1024 work-items per group (ROCr's `HSA_AGENT_INFO_WORKGROUP_MAX_SIZE`, `amd_gpu_agent.cpp`) |
//! | 4 | "Invalid group memory" | `HSA_STATUS_ERROR_INVALID_ALLOCATION` | KERNEL_DISPATCH whose `group_segment_size` exceeds the GPU's LDS (`lds_size_in_kb`) |
//! | 8 | "Invalid (or NULL) code" | `HSA_STATUS_ERROR_INVALID_CODE_OBJECT` | KERNEL_DISPATCH with a null `kernel_object` |
//! | 128 | "Out of VGPRs" | `HSA_STATUS_ERROR_INVALID_ISA` | a KERNEL_DISPATCH whose descriptor the interpreter cannot run ([`kernel`](super::kernel): another GPU family, wave32, inconsistent SGPR counts, an entry offset of 0) |
//!
//! The CP reads a dispatch's kernel descriptor (`kernel_object`, an `amd_kernel_code_t` or
//! kernel descriptor, whose registers it programs; gem5's AMD CP model,
//! `GPUCommandProcessor::submitDispatchPkt`, reads it the same way) before it could run it: a
//! descriptor the GPU cannot read is a VM fault, not a queue error. The checks run in the
//! table's order from the dimensions down; the CP's own order is not public, and a packet has
//! one code. Every other KERNEL_DISPATCH runs ([`kernel`](super::kernel)), which raises three
//! more codes through [`report`]: 1 (insufficient scratch: ROCr allocates it and stores 0, the
//! packet runs then) and 512 (single-use scratch to reclaim after the dispatch) are requests,
//! not errors; `1 << 30` and `1 << 31` are what ROCr's own trap handler writes when a wave
//! executes an illegal instruction or `s_trap` (`SIGNAL_CODE_ILLEGAL_INST`, `_LLVM_TRAP` in
//! `amd_gpu_shaders.h`; no trap handler runs here, the model writes them for it). Code 0x400
//! (wave32 scratch) is never raised: gfx9 runs wave64 only. What the CP checks of reserved
//! header bits (fence scopes 3, bits 13–15) is not public: they are not checked.
//!
//! A packet that faults (a dependency signal, a completion signal, the kernel descriptor in
//! unmapped memory) is a VM fault, as for SDMA ([`engine::vm_fault`](super::engine)): the
//! memory events carry `kfd_hsa_memory_exception_data` with the page and the `gpu_id`, which
//! libhsakmt's `hsaKmtWaitOnMultipleEvents` turns into `HsaMemoryAccessFault` and ROCr's
//! `Runtime::VMFaultHandler` (`runtime.cpp`) hands to the handlers of
//! `hsa_amd_register_system_event_handler` as `HSA_AMD_GPU_MEMORY_FAULT_EVENT` (with none, or
//! none returning success, it prints "Memory access fault by GPU node-N" and aborts). Nothing
//! is written to `queue_inactive_signal` then.
//!
//! # How the code reaches the runtime
//!
//! [`report`] does what the CP does once the queue has stopped (the packet not consumed: the
//! read index stays at it, and its completion signal is untouched):
//!
//! 1. It finds `amd_queue_t`. The CP knows only the queue's read pointer
//!    (`cp_hqd_pq_rptr_report_addr`, which `update_mqd` in `kfd_mqd_manager_v9.c` sets from
//!    CREATE_QUEUE's `read_pointer_address`; ROCr passes `&amd_queue_.read_dispatch_id`).
//!    The `u32` after it, `read_dispatch_id_field_base_byte_offset`, is the read pointer's
//!    offset in `amd_queue_t` (ROCr's constructor `AqlQueue::AqlQueue` stores it, 128):
//!    `amd_queue_t` is at the read pointer minus it (gem5's
//!    `GPUCommandProcessor::ReadDispIdOffsetDmaEvent` in `gpu_command_processor.hh` finds it
//!    so; tinygrad's `AMDDevice.create_queue` in `tinygrad/runtime/ops_amd.py`, which drives
//!    the CP without ROCr, lays an `amd_queue_t` around the pointers it passes and sets the
//!    field for the CP). A client whose pointers are not in an `amd_queue_t` (kfd-queue's
//!    `AqlQueue` keeps them in a page of their own) has no such signal: what the CP then
//!    reads is whatever lies there, and an unmapped address is a VM fault.
//! 2. It reads `queue_inactive_signal` (`amd_hsa_queue.h`: at byte 192 of `amd_queue_t`); a
//!    null handle has no one to tell.
//! 3. It writes the code into the signal's `value` (`amd_hsa_signal.h`: `amd_signal_t`'s
//!    byte 8), and, when the signal has an event mailbox (`event_mailbox_ptr`, byte 16: ROCr's
//!    `InterruptSignal`s have one), writes the signal's `event_id` (byte 24) there and raises
//!    the end-of-pipe interrupt with it, as for a completion signal (gem5's
//!    `GPUCommandProcessor::updateHsaSignal`): the caller passes the id on to
//!    `kfd_signal_event_interrupt` ([`engine::signal_interrupt`](super::engine)).
//!
//! ROCr's async-events thread wakes on the event, sees the value non-zero, suspends the queue
//! (`AqlQueue::Suspend`: UPDATE_QUEUE with percentage 0), calls `hsa_queue_create`'s error
//! callback with the status and the queue, and stores -1 in the signal; `hsa_queue_destroy`
//! then destroys the stopped queue.
//!
//! # And as an exception, for a runtime that enabled them
//!
//! A KFD with exception debugging (KFD 1.13 on, `kfd_debug.c`) also takes the CP's
//! report of a bad packet as an interrupt: `SOC15_INTSRC_CP_BAD_OPCODE`, whose context id
//! carries the queue's doorbell id and an exception code `EC_QUEUE_PACKET_*`
//! (`KFD_DEBUG_CP_BAD_OP_ECODE`), which `event_interrupt_wq_v9`/`_v10`/`_v11`
//! (`kfd_int_process_v9.c` ...) hand to `kfd_set_dbg_ev_from_interrupt` when it is a packet
//! code (`KFD_DBG_EC_TYPE_IS_PACKET`): to the debugger if one subscribed, else, when the
//! runtime enabled itself (RUNTIME_ENABLE), to the runtime through the queue's context save
//! area header (`kfd_send_exception_to_runtime`: the mask OR-ed into `ErrorReason`, the
//! error event set; [`exceptions::from_interrupt`](super::exceptions)). [`exception`]
//! names the exception of each code of the table. [`engine::stop`](super::engine) raises it
//! after the signal write above: ROCr 6.2.4 on such a KFD (`hsaKmtRuntimeEnable` succeeded:
//! `supports_exception_debugging`) registers `DynamicQueueEventsHandler<false>` on
//! `queue_inactive_signal`, which handles only the scratch codes and clears any other "so
//! that ExceptionHandler can run" (`amd_aql_queue.cpp`), and `AqlQueue::ExceptionHandler`
//! on its exception signal, which decodes `EC_QUEUE_PACKET_*` to the same statuses and calls
//! the error callback: a CP that reports both ways is what both ROCr generations are
//! written for. ROCr 5.2.3 (libhsakmt 5.2.3 never enables the runtime) sees only the signal.
//!
//! The same holds for the code of a wave's illegal instruction (1 << 30; a trap, 1 << 31,
//! is the trap handler's own, as the kernel module docs say): ROCr 6.2.4's trap handler
//! sends it as `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION` with `MSG_INTERRUPT` (`trap_handler.s`)
//! where 5.2.3's wrote the signal, and the model, which stops the queue at the instruction
//! without running a trap handler for it, raises both.

use kfd_ioctl::abi::{
    EC_QUEUE_PACKET_DISPATCH_CODE_INVALID, EC_QUEUE_PACKET_DISPATCH_DIM_INVALID,
    EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID, EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID,
    EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID, EC_QUEUE_PACKET_UNSUPPORTED,
    EC_QUEUE_PACKET_VENDOR_UNSUPPORTED, EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION, EC_QUEUE_WAVE_TRAP,
};

use super::driver::Driver;
use super::gpu_view::GpuFault;

/// `HSA_PACKET_TYPE_VENDOR_SPECIFIC`.
const PACKET_VENDOR_SPECIFIC: u8 = 0;
/// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
const PACKET_KERNEL_DISPATCH: u8 = 2;

/// The CP's error codes, as `AqlQueue::DynamicScratchHandler<true>` decodes them (see the
/// module docs): "Invalid dim" → `HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS`.
pub(super) const DISPATCH_DIM_INVALID: u32 = 2;
/// "Invalid group memory" → `HSA_STATUS_ERROR_INVALID_ALLOCATION`.
pub(super) const GROUP_SEGMENT_INVALID: u32 = 4;
/// "Invalid (or NULL) code" → `HSA_STATUS_ERROR_INVALID_CODE_OBJECT`.
pub(super) const CODE_INVALID: u32 = 8;
/// "Invalid format: 32 is generic" → `HSA_STATUS_ERROR_INVALID_PACKET_FORMAT`.
pub(super) const PACKET_UNSUPPORTED: u32 = 32;
/// "Group is too large" → `HSA_STATUS_ERROR_INVALID_ARGUMENT`.
pub(super) const WORKGROUP_SIZE_INVALID: u32 = 64;
/// "Out of VGPRs" → `HSA_STATUS_ERROR_INVALID_ISA`.
pub(super) const REGISTER_SIZE_INVALID: u32 = 128;
/// "256 is vendor specific packets" → `HSA_STATUS_ERROR_INVALID_PACKET_FORMAT`.
pub(super) const VENDOR_UNSUPPORTED: u32 = 256;

/// The code of a wave's illegal instruction and trap as ROCr 5.2.3's trap handler writes it
/// into `queue_inactive_signal` (`SIGNAL_CODE_ILLEGAL_INST`, `SIGNAL_CODE_LLVM_TRAP` in
/// `amd_gpu_shaders.h`), which [`kernel`](super::kernel) stops the queue with.
pub(super) const ILLEGAL_INSTRUCTION: u32 = 1 << 30;
pub(super) const TRAP: u32 = 1 << 31;

/// The exception (`enum kfd_dbg_trap_exception_code`, `kfd_ioctl.h`) the kernel raises for
/// error `code` (module docs), the status ROCr 6.2.4's `AqlQueue::ExceptionHandler` maps it
/// to being the one `DynamicQueueEventsHandler<true>` maps the code to: for a code of the
/// table, the CP's `SOC15_INTSRC_CP_BAD_OPCODE` exception; for a wave's illegal instruction
/// or trap, the one ROCr 6.2.4's own trap handler sends with `MSG_INTERRUPT` in place of
/// 5.2.3's signal write (`EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION_M0`, else
/// `EC_QUEUE_WAVE_TRAP_M0`: `trap_handler.s`, `.send_interrupt`). `None` for the scratch
/// requests (1, 512, 0x400), which are no errors.
pub(super) fn exception(code: u32) -> Option<u32> {
    Some(match code {
        DISPATCH_DIM_INVALID => EC_QUEUE_PACKET_DISPATCH_DIM_INVALID,
        GROUP_SEGMENT_INVALID => EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID,
        CODE_INVALID => EC_QUEUE_PACKET_DISPATCH_CODE_INVALID,
        PACKET_UNSUPPORTED => EC_QUEUE_PACKET_UNSUPPORTED,
        WORKGROUP_SIZE_INVALID => EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID,
        REGISTER_SIZE_INVALID => EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID,
        VENDOR_UNSUPPORTED => EC_QUEUE_PACKET_VENDOR_UNSUPPORTED,
        ILLEGAL_INSTRUCTION => EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION,
        TRAP => EC_QUEUE_WAVE_TRAP,
        _ => return None,
    })
}

/// ROCr's `HSA_AGENT_INFO_WORKGROUP_MAX_SIZE` on every GPU (`amd_gpu_agent.cpp`).
const WORKGROUP_MAX_SIZE: u64 = 1024;
/// The kernel descriptor's size (`amd_kernel_code_t`'s is 256; the part the CP reads first,
/// the kernel descriptor of code object v3+, 64).
const KERNEL_DESCRIPTOR: usize = 64;

/// `amd_queue_t` (`amd_hsa_queue.h`): `read_dispatch_id_field_base_byte_offset` is the `u32`
/// right after `read_dispatch_id`, the read pointer.
const RPTR_TO_BASE_OFFSET_FIELD: u64 = 8;
/// `amd_queue_t.queue_inactive_signal`'s offset: `hsa_queue_t` (40 bytes), `reserved1[4]`,
/// `write_dispatch_id` at 56, ..., `read_dispatch_id` at 128, ..., `reserved3[2]` up to 192.
pub(super) const QUEUE_INACTIVE_SIGNAL: u64 = 192;
/// `amd_signal_t` (`amd_hsa_signal.h`): `value`, `event_mailbox_ptr` and `event_id`.
pub(super) const SIGNAL_VALUE: u64 = 8;
const SIGNAL_MAILBOX: u64 = 16;
const SIGNAL_EVENT_ID: u64 = 24;

/// The error code of an AQL `packet` the packet processor cannot run (any but INVALID, the
/// barriers, the PM4-IB vendor packet and a kernel dispatch [`kernel`](super::kernel) runs),
/// as the module docs say; a fault reading its kernel descriptor is the caller's VM fault.
/// `gpu` is the GPU's index (for its LDS size).
pub(super) fn refuse(
    drv: &Driver,
    tgid: i32,
    gpu: usize,
    packet: &[u8; 64],
) -> Result<u32, GpuFault> {
    match packet[0] {
        PACKET_VENDOR_SPECIFIC => return Ok(VENDOR_UNSUPPORTED),
        PACKET_KERNEL_DISPATCH => {}
        _ => return Ok(PACKET_UNSUPPORTED),
    }
    if let Some(code) = check_dispatch(drv, gpu, packet) {
        return Ok(code);
    }
    let mut descriptor = [0u8; KERNEL_DESCRIPTOR];
    let machine = &drv.dev.cfg.machine;
    let gpu_id = machine.gpus().get(gpu).map_or(0, |g| g.gpu_id);
    drv.read_here(tgid, gpu_id, kernel_object(packet), &mut descriptor)?;
    Ok(REGISTER_SIZE_INVALID)
}

/// A KERNEL_DISPATCH's `kernel_object` (bytes 32-39).
pub(super) fn kernel_object(packet: &[u8; 64]) -> u64 {
    u64::from_le_bytes(packet[32..40].try_into().unwrap_or_default())
}

/// The error code of a KERNEL_DISPATCH `packet` whose sizes or kernel object the CP refuses
/// before it reads the kernel descriptor (the table's codes 2, 64, 4 and 8, in that order),
/// or `None`. `gpu` is the GPU's index (for its LDS size).
pub(super) fn check_dispatch(drv: &Driver, gpu: usize, packet: &[u8; 64]) -> Option<u32> {
    let u16_at = |i: usize| u16::from_le_bytes([packet[i], packet[i + 1]]);
    let u32_at =
        |i: usize| u32::from_le_bytes([packet[i], packet[i + 1], packet[i + 2], packet[i + 3]]);
    // hsa_kernel_dispatch_packet_t: setup (dimensions in bits 0-1) at 2, workgroup_size_x/y/z
    // at 4/6/8, grid_size_x/y/z at 12/16/20, group_segment_size at 28, kernel_object at 32.
    let dimensions = usize::from(u16_at(2) & 3);
    let group = [u16_at(4), u16_at(6), u16_at(8)];
    let grid = [u32_at(12), u32_at(16), u32_at(20)];
    if dimensions == 0 || (0..dimensions).any(|d| group[d] == 0 || grid[d] == 0) {
        return Some(DISPATCH_DIM_INVALID);
    }
    let items: u64 = group.iter().map(|&g| u64::from(g.max(1))).product();
    if items > WORKGROUP_MAX_SIZE {
        return Some(WORKGROUP_SIZE_INVALID);
    }
    let machine = &drv.dev.cfg.machine;
    let lds_bytes = machine
        .gpus()
        .get(gpu)
        .and_then(|g| machine.node_of(g))
        .map_or(0, |n| n.properties.lds_size_in_kb.saturating_mul(1024));
    if u64::from(u32_at(28)) > lds_bytes {
        return Some(GROUP_SEGMENT_INVALID);
    }
    if kernel_object(packet) == 0 {
        return Some(CODE_INVALID);
    }
    None
}

/// Where `amd_queue_t` is for the AQL queue whose read pointer is at `rptr_va` (module docs,
/// step 1).
pub(super) fn amd_queue(
    drv: &Driver,
    tgid: i32,
    gpu_id: u32,
    rptr_va: u64,
) -> Result<u64, GpuFault> {
    let mut offset = [0u8; 4];
    drv.read_here(
        tgid,
        gpu_id,
        rptr_va.wrapping_add(RPTR_TO_BASE_OFFSET_FIELD),
        &mut offset,
    )?;
    Ok(rptr_va.wrapping_sub(u64::from(u32::from_le_bytes(offset))))
}

/// Reports error `code` of the stopped AQL queue whose read pointer is at `rptr_va`, as the
/// CP does (module docs): the code in its `queue_inactive_signal`'s value; the signal's
/// event id when the signal has a mailbox (written there: the caller raises the interrupt),
/// `None` when there is no signal or no mailbox. A fault on the way is a VM fault.
pub(super) fn report(
    drv: &Driver,
    tgid: i32,
    gpu_id: u32,
    rptr_va: u64,
    code: u32,
) -> Result<Option<u32>, GpuFault> {
    let read_u64 = |va: u64| -> Result<u64, GpuFault> {
        let mut b = [0u8; 8];
        drv.read_here(tgid, gpu_id, va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    };
    let queue = amd_queue(drv, tgid, gpu_id, rptr_va)?;
    let signal = read_u64(queue.wrapping_add(QUEUE_INACTIVE_SIGNAL))?;
    if signal == 0 {
        return Ok(None);
    }
    drv.write_here(
        tgid,
        gpu_id,
        signal.wrapping_add(SIGNAL_VALUE),
        &u64::from(code).to_le_bytes(),
    )?;
    mailbox(drv, tgid, gpu_id, signal)
}

/// The end-of-pipe write of signal `signal`'s event: when it has a mailbox, its event id
/// written there and returned (for `kfd_signal_event_interrupt`); else `None`.
pub(super) fn mailbox(
    drv: &Driver,
    tgid: i32,
    gpu_id: u32,
    signal: u64,
) -> Result<Option<u32>, GpuFault> {
    let mut mailbox = [0u8; 8];
    drv.read_here(
        tgid,
        gpu_id,
        signal.wrapping_add(SIGNAL_MAILBOX),
        &mut mailbox,
    )?;
    let mailbox = u64::from_le_bytes(mailbox);
    if mailbox == 0 {
        return Ok(None);
    }
    let mut id = [0u8; 4];
    drv.read_here(tgid, gpu_id, signal.wrapping_add(SIGNAL_EVENT_ID), &mut id)?;
    let id = u32::from_le_bytes(id);
    drv.write_here(tgid, gpu_id, mailbox, &u64::from(id).to_le_bytes())?;
    Ok(Some(id))
}
