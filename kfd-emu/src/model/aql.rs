//! The AQL packet processor: what the model's CP does with a user AQL queue when
//! [`scheduler`](super::scheduler) runs it. The read and write pointers are packet indices
//! (`amd_queue_t`'s `read_dispatch_id` and `write_dispatch_id`, which ROCr passes to
//! CREATE_QUEUE); packets are the HSA's 64-byte AQL packets (`hsa.h`).
//!
//! * BARRIER_AND and BARRIER_OR wait, in order, until all (any) of their non-null dependency
//!   signals hold 0 (`amd_signal_t.value`); a packet whose header is still INVALID is not
//!   published yet.
//! * A packet that can run leaves the queue first: its header is set INVALID and the read
//!   index advanced past it (the HSA packet processor consumes a packet before it completes:
//!   a waiter that sees the completion signal sees the read index past the packet too).
//!   Then its completion signal is decremented; when the signal has an event mailbox
//!   (`event_mailbox_ptr`), the event id is written there and the event interrupt raised
//!   (`kfd_signal_event_interrupt` with 32 valid bits, `SOC15_INTSRC_CP_END_OF_PIPE`), as the
//!   CP's end-of-pipe does.
//! * A vendor-specific packet of AMD's format `AMD_AQL_FORMAT_PM4_IB` (ROCr's
//!   `AqlQueue::ExecutePM4` on gfx9 and later: the cache invalidation it sends whenever a code
//!   object is loaded) runs the PM4 INDIRECT_BUFFER its dwords 1-4 hold, on the CP's PM4
//!   processor ([`pm4::run_aql_ib`]), then completes as a barrier does.
//! * A KERNEL_DISPATCH runs its kernel ([`kernel`]: the descriptor, the waves on the gfx9
//!   interpreter, the queue's scratch), then completes as a barrier does; a dispatch the CP
//!   refuses, or whose waves trap, stops the queue as below, and one whose waves fault is a
//!   VM fault.
//! * An AGENT_DISPATCH, another vendor packet or a packet of a reserved type cannot run: the queue stops at it, as the CP stops at a packet it
//!   cannot process — not consumed (the read index stays at it), its completion signal
//!   untouched — and the error reaches the runtime as the CP reports it: an error code ROCr
//!   decodes (invalid packet format, invalid dimensions, null code object, ..., see
//!   [`queue_error`]) written into the queue's `queue_inactive_signal`, whose event is
//!   raised; ROCr then calls `hsa_queue_create`'s error callback with the status and the
//!   queue.
//! * An access that faults (a dependency or completion signal, a kernel descriptor) is a VM
//!   fault, as for SDMA: the memory events carry the page and the GPU to ROCr's memory-fault
//!   handler.
//!
//! The packet processor follows the AQL protocol (the HSA Platform System Architecture
//! Specification's Architected Queuing Language): it processes packets in order from
//! `read_dispatch_id` towards `write_dispatch_id`, which a producer bumps *before* it writes
//! its packet and may bump past the ring's end while it waits for a free slot (ROCr's
//! `hsa_queue_add_write_index_*`, then a wait on `hsa_queue_load_read_index`): so the slots
//! looked at are those of the ring from the read index on, and a header still INVALID is a
//! packet not written yet — waited for, never skipped. `read_dispatch_id` advances as each
//! packet is consumed. One call runs one turn of the queue (at most `TURN_PACKETS`, see
//! [`scheduler`](super::scheduler)), each packet started through the queue's runner.

use super::driver::Driver;
use super::engine::{TURN_PACKETS, Work, advance, signal_interrupt, stop, vm_fault};
use super::gpu_view::GpuFault;
use super::kernel::{self, Outcome};
use super::pm4::{self, AqlIb};
use super::queue_error;
use super::queues::Stopped;

/// `HSA_PACKET_TYPE_INVALID`.
const PACKET_INVALID: u16 = 1;
/// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
const PACKET_KERNEL_DISPATCH: u16 = 2;
/// `HSA_PACKET_TYPE_BARRIER_AND`.
const PACKET_BARRIER_AND: u16 = 3;
/// `HSA_PACKET_TYPE_VENDOR_SPECIFIC`, and the AMD vendor format of one whose dwords 1-4 are a
/// PM4 INDIRECT_BUFFER command (`AMD_AQL_FORMAT_PM4_IB` in ROCr 5.2.3's
/// `AqlQueue::ExecutePM4`, its `ven_hdr` field at bytes 2-3).
const PACKET_VENDOR_SPECIFIC: u16 = 0;
const AMD_AQL_FORMAT_PM4_IB: u16 = 1;
/// `HSA_PACKET_TYPE_BARRIER_OR`.
const PACKET_BARRIER_OR: u16 = 5;
/// An AQL packet's size.
const PACKET_SIZE: u64 = 64;
/// `amd_signal_t`'s `value` (i64).
const SIGNAL_VALUE: u64 = 8;

/// What a packet did.
enum Step {
    /// Consumed; its completion signal (0 for none) is to be signalled.
    Done(u64),
    Wait,
    Stop(Stopped),
    /// An access faulted and the VM fault was taken.
    Faulted,
}

/// Runs one turn of AQL queue `w`: its packets from its read index towards its write index.
pub(super) fn run_queue(drv: &Driver, w: &Work) -> bool {
    let packets = w.ring_size / PACKET_SIZE;
    if packets == 0 {
        return false;
    }
    let mut wptr = [0u8; 8];
    if let Err(f) = drv.read_here(w.tgid, w.gpu_id, w.wptr_va, &mut wptr) {
        vm_fault(drv, w, &f);
        return true;
    }
    let end = u64::from_le_bytes(wptr);
    let mut consumed = w.consumed;
    // Packets reserved: at most a ring of them can be in it (a producer that reserved more
    // waits for the read index to leave it a slot). A write index behind the read index is
    // nothing to run (`i64` distance, as indices are compared in ROCr).
    let pending = end.wrapping_sub(consumed);
    if pending == 0 || (pending as i64) < 0 {
        return false;
    }
    let mut ran = false;
    for _ in 0..pending.min(packets).min(TURN_PACKETS) {
        // Preempted (destroyed, made inactive): no packet starts.
        let Some(_packet) = w.runner.begin() else {
            break;
        };
        w.packet_at.set(consumed);
        let at = w.ring_va + (consumed % packets) * PACKET_SIZE;
        match execute(drv, w, at) {
            Ok(Step::Done(signal)) => {
                consumed += 1;
                ran = true;
                if !advance(drv, w, consumed) {
                    return true;
                }
                if let Err(f) = complete(drv, w, signal) {
                    vm_fault(drv, w, &f);
                    return true;
                }
            }
            Ok(Step::Wait) => break,
            Ok(Step::Stop(why)) => {
                stop(drv, w, why);
                return true;
            }
            Ok(Step::Faulted) => return true,
            Err(f) => {
                vm_fault(drv, w, &f);
                return true;
            }
        }
    }
    ran
}

fn read_u64(drv: &Driver, w: &Work, va: u64) -> Result<u64, GpuFault> {
    let mut b = [0u8; 8];
    drv.read_here(w.tgid, w.gpu_id, va, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Runs the packet at `at`.
fn execute(drv: &Driver, w: &Work, at: u64) -> Result<Step, GpuFault> {
    let mut p = [0u8; PACKET_SIZE as usize];
    drv.read_here(w.tgid, w.gpu_id, at, &mut p)?;
    let header = u16::from_le_bytes([p[0], p[1]]);
    let kind = header & 0xFF;
    let word = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap_or_default());
    let trace = |what: &dyn Fn() -> String| {
        if drv.dev.cfg.trace {
            crate::own::elog!(
                "[{}] aql gpu {:#x} queue {}: {}",
                w.tgid,
                w.gpu_id,
                w.id,
                what()
            );
        }
    };
    match kind {
        PACKET_INVALID => return Ok(Step::Wait),
        PACKET_BARRIER_AND | PACKET_BARRIER_OR => {
            let deps: Vec<u64> = (0..5)
                .map(|k| word(8 + 8 * k))
                .filter(|&d| d != 0)
                .collect();
            let mut zero = 0;
            for &dep in &deps {
                if read_u64(drv, w, dep + SIGNAL_VALUE)? == 0 {
                    zero += 1;
                }
            }
            let name = if kind == PACKET_BARRIER_AND {
                "AND"
            } else {
                "OR"
            };
            let holds = if kind == PACKET_BARRIER_AND {
                zero == deps.len()
            } else {
                deps.is_empty() || zero > 0
            };
            trace(&|| {
                format!(
                    "BARRIER_{name} deps={deps:#x?} completion={:#x}: {}",
                    word(56),
                    if holds { "done" } else { "waits" }
                )
            });
            if !holds {
                return Ok(Step::Wait);
            }
        }
        PACKET_KERNEL_DISPATCH => match kernel::run(drv, w, at, &p)? {
            Outcome::Done => {}
            Outcome::Wait => return Ok(Step::Wait),
            Outcome::Stop(why) => {
                trace(&|| format!("KERNEL_DISPATCH stops the queue: {why:?}"));
                return Ok(Step::Stop(why));
            }
            Outcome::Faulted => return Ok(Step::Faulted),
        },
        PACKET_VENDOR_SPECIFIC if u16::from_le_bytes([p[2], p[3]]) == AMD_AQL_FORMAT_PM4_IB => {
            let jump: [u32; 4] = std::array::from_fn(|i| {
                u32::from_le_bytes(p[4 + 4 * i..8 + 4 * i].try_into().unwrap_or_default())
            });
            trace(&|| format!("PM4_IB {jump:#010x?} completion={:#x}", word(56)));
            match pm4::run_aql_ib(drv, w, &jump) {
                AqlIb::Done => {}
                AqlIb::Wait => return Ok(Step::Wait),
                AqlIb::Stop(why) => return Ok(Step::Stop(why)),
                AqlIb::Faulted => return Ok(Step::Faulted),
            }
        }
        _ => {
            let code = queue_error::refuse(drv, w.tgid, w.gpu, &p)?;
            trace(&|| {
                format!(
                    "packet type {kind} (header {header:#06x}) cannot run: the queue stops, error {code}"
                )
            });
            return Ok(Step::Stop(Stopped::QueueError(code)));
        }
    }
    // The slot is free again: INVALID, as the packet processor leaves it.
    drv.write_here(w.tgid, w.gpu_id, at, &PACKET_INVALID.to_le_bytes())?;
    Ok(Step::Done(word(56)))
}

/// The end of a packet: its completion signal decremented, and its event raised when the
/// signal has a mailbox (the event id written there, as [`queue_error::mailbox`] does).
/// `amd_signal_t`'s `value`, `event_mailbox_ptr` and `event_id` (at 8, 16 and 24) are read in
/// one access: a signal in process memory (ROCr's are USERPTR memory on a dGPU) costs one
/// `process_vm_readv` for the three rather than one each.
fn complete(drv: &Driver, w: &Work, signal: u64) -> Result<(), GpuFault> {
    if signal == 0 {
        return Ok(());
    }
    let mut fields = [0u8; 20];
    drv.read_here(w.tgid, w.gpu_id, signal + SIGNAL_VALUE, &mut fields)?;
    let word = |i: usize| u64::from_le_bytes(fields[i..i + 8].try_into().unwrap_or_default());
    let (value, mailbox) = (word(0), word(8));
    let id = u32::from_le_bytes(fields[16..20].try_into().unwrap_or_default());
    drv.write_here(
        w.tgid,
        w.gpu_id,
        signal + SIGNAL_VALUE,
        &value.wrapping_sub(1).to_le_bytes(),
    )?;
    if mailbox != 0 {
        drv.write_here(w.tgid, w.gpu_id, mailbox, &u64::from(id).to_le_bytes())?;
        signal_interrupt(drv, w.tgid, id);
    }
    Ok(())
}
