//! AQL queues: HSA's 64-byte packets on a compute queue, barrier-AND and barrier-OR packets
//! with dependencies, completion signals in `amd_signal_t`'s layout wired to KFD events
//! through their event mailbox, and kernel-dispatch encoding for runtimes that bring their
//! own code objects.
//!
//! Layouts: `hsa_barrier_and_packet_t`, `hsa_barrier_or_packet_t` and
//! `hsa_kernel_dispatch_packet_t` of HSA's `hsa.h`; `amd_signal_t` and `amd_queue_t`'s
//! dispatch ids of ROCr's `amd_hsa_signal.h` and `amd_hsa_queue.h`.

use std::sync::Arc;
use std::time::Duration;

use kfd_ioctl::{
    BufferObject, ComputeBuffers, Doorbells, Event, EventKind, OwnedCpuMapping, Queue, QueueBuffer,
    QueueSpec, QueueType, WaitOutcome,
};
use vm_memory::Bytes;

use kfd_ioctl::GpuId;

use crate::error::{Error, Result};
use crate::sdma::QueueContext;

/// `HSA_PACKET_TYPE_INVALID`.
pub const PACKET_INVALID: u16 = 1;
/// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
pub const PACKET_KERNEL_DISPATCH: u16 = 2;
/// `HSA_PACKET_TYPE_BARRIER_AND`.
pub const PACKET_BARRIER_AND: u16 = 3;
/// `HSA_PACKET_TYPE_BARRIER_OR`.
pub const PACKET_BARRIER_OR: u16 = 5;
/// `HSA_PACKET_HEADER_BARRIER`: the packet starts after the previous one completed.
const HEADER_BARRIER: u16 = 1 << 8;
/// System-scope acquire and release fences (`HSA_FENCE_SCOPE_SYSTEM` in bits 9-10, 11-12).
const HEADER_SYSTEM_FENCES: u16 = 2 << 9 | 2 << 11;
/// An AQL packet's size.
pub const PACKET_SIZE: usize = 64;

/// The header of a packet of `kind` with the barrier bit and system-scope fences.
fn header(kind: u16) -> u16 {
    kind | HEADER_BARRIER | HEADER_SYSTEM_FENCES
}

/// A barrier-AND (`kind` 3) or barrier-OR (5) packet: up to five dependency signals and a
/// completion signal, by address (0: none). `None` for more than five dependencies.
pub fn barrier(kind: u16, deps: &[u64], completion: u64) -> Option<[u8; PACKET_SIZE]> {
    if deps.len() > 5 || !matches!(kind, PACKET_BARRIER_AND | PACKET_BARRIER_OR) {
        return None;
    }
    let mut p = [0u8; PACKET_SIZE];
    p[0..2].copy_from_slice(&header(kind).to_le_bytes());
    for (i, d) in deps.iter().enumerate() {
        p[8 + 8 * i..16 + 8 * i].copy_from_slice(&d.to_le_bytes());
    }
    p[56..64].copy_from_slice(&completion.to_le_bytes());
    Some(p)
}

/// What a kernel dispatch runs (`hsa_kernel_dispatch_packet_t`'s fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDispatch {
    /// Work-group size in x, y, z.
    pub workgroup_size: [u16; 3],
    /// Grid size in x, y, z (work-items).
    pub grid_size: [u32; 3],
    /// Private (scratch) bytes per work-item.
    pub private_segment_size: u32,
    /// Group (LDS) bytes per work-group.
    pub group_segment_size: u32,
    /// The code object's kernel descriptor address.
    pub kernel_object: u64,
    /// The kernel arguments' address.
    pub kernarg_address: u64,
    /// The completion signal's address (0: none).
    pub completion_signal: u64,
}

impl KernelDispatch {
    /// The packet: dimensions from the highest grid size above 1.
    pub fn encode(&self) -> [u8; PACKET_SIZE] {
        let dims: u16 = if self.grid_size[2] > 1 {
            3
        } else if self.grid_size[1] > 1 {
            2
        } else {
            1
        };
        let mut p = [0u8; PACKET_SIZE];
        p[0..2].copy_from_slice(&header(PACKET_KERNEL_DISPATCH).to_le_bytes());
        p[2..4].copy_from_slice(&dims.to_le_bytes());
        for (i, w) in self.workgroup_size.iter().enumerate() {
            p[4 + 2 * i..6 + 2 * i].copy_from_slice(&w.to_le_bytes());
        }
        for (i, g) in self.grid_size.iter().enumerate() {
            p[12 + 4 * i..16 + 4 * i].copy_from_slice(&g.to_le_bytes());
        }
        p[24..28].copy_from_slice(&self.private_segment_size.to_le_bytes());
        p[28..32].copy_from_slice(&self.group_segment_size.to_le_bytes());
        p[32..40].copy_from_slice(&self.kernel_object.to_le_bytes());
        p[40..48].copy_from_slice(&self.kernarg_address.to_le_bytes());
        p[56..64].copy_from_slice(&self.completion_signal.to_le_bytes());
        p
    }
}

/// `amd_signal_t` offsets: `kind`, `value`, `event_mailbox_ptr`, `event_id`.
const SIGNAL_KIND: usize = 0;
const SIGNAL_VALUE: usize = 8;
const SIGNAL_MAILBOX: usize = 16;
const SIGNAL_EVENT_ID: usize = 24;
/// `AMD_SIGNAL_KIND_USER`.
const SIGNAL_KIND_USER: i64 = 1;

/// A completion signal in `amd_signal_t`'s layout, in GPU-visible memory, whose event
/// mailbox is the slot of a KFD signal event: the GPU decrements its value, writes the
/// mailbox and raises the event, which [`Signal::wait_zero`] waits for through WAIT_EVENTS.
#[derive(Debug)]
pub struct Signal {
    memory: OwnedCpuMapping,
    event: Event,
    fault: Event,
    context: Arc<QueueContext>,
}

impl Signal {
    /// A signal on `gpu_id` holding `value`.
    ///
    /// # Errors
    /// The errors of the allocation, the mapping and CREATE_EVENT.
    pub fn new(
        context: &Arc<QueueContext>,
        gpu_id: impl Into<GpuId>,
        value: i64,
    ) -> Result<Signal> {
        let gpu_id: GpuId = gpu_id.into();
        let memory = BufferObject::map_cpu_owned(context.gtt(gpu_id, 4096)?)?;
        let (event, slot) = context.signal_event(gpu_id)?;
        let fault = context.kfd().create_event(EventKind::Memory, false)?;
        let m = memory.as_volatile_slice()?;
        m.write_obj(SIGNAL_KIND_USER, SIGNAL_KIND)?;
        m.write_obj(value, SIGNAL_VALUE)?;
        m.write_obj(slot, SIGNAL_MAILBOX)?;
        m.write_obj(event.id(), SIGNAL_EVENT_ID)?;
        Ok(Signal {
            memory,
            event,
            fault,
            context: context.clone(),
        })
    }

    /// The signal's address: what packets name it by.
    pub fn va(&self) -> u64 {
        self.memory.buffer_object().va()
    }

    /// The value.
    pub fn value(&self) -> Result<i64> {
        Ok(self.memory.as_volatile_slice()?.read_obj(SIGNAL_VALUE)?)
    }

    /// Stores `value` from the CPU (what a host-side `hsa_signal_store` does).
    pub fn store(&self, value: i64) -> Result<()> {
        Ok(self
            .memory
            .as_volatile_slice()?
            .write_obj(value, SIGNAL_VALUE)?)
    }

    /// Waits up to `timeout` (forever for `Duration::MAX`) for the value to reach 0, through WAIT_EVENTS on the signal's
    /// event (and the process's VM faults).
    ///
    /// # Errors
    /// [`Error::Timeout`]; [`Error::VmFault`] when the GPU faulted meanwhile; [`Error::Kfd`].
    pub fn wait_zero(&self, timeout: Duration) -> Result<()> {
        let deadline = crate::fence_wait::Deadline::after(timeout);
        loop {
            if self.value()? == 0 {
                return Ok(());
            }
            let left = deadline.left();
            let ms = deadline.slice_ms(Duration::from_millis(20));
            let events = [&self.event, &self.fault];
            if let WaitOutcome::Complete(faults) =
                self.context.kfd().wait_events(&events, false, ms)?
                && let Some(Some(fault)) = faults.get(1)
                && self.value()? != 0
            {
                return Err(Error::VmFault(*fault));
            }
            if left.is_zero() {
                return if self.value()? == 0 {
                    Ok(())
                } else {
                    Err(Error::Timeout(timeout))
                };
            }
        }
    }
}

/// A user-mode AQL queue: its packet ring, `amd_queue_t`'s read and write dispatch ids, the
/// doorbell, and the EOP buffer and CWSR area the GPU's sizes ask for. Destroyed on drop.
#[derive(Debug)]
pub struct AqlQueue {
    queue: Queue,
    ring: OwnedCpuMapping,
    pointers: OwnedCpuMapping,
    doorbells: Arc<Doorbells>,
    doorbell_at: usize,
    packets: u64,
    /// The next packet index.
    write_index: u64,
}

/// `amd_queue_t`'s `read_dispatch_id` and `write_dispatch_id`, in the pointers page.
const READ_DISPATCH_ID: usize = 0;
const WRITE_DISPATCH_ID: usize = 8;

impl AqlQueue {
    /// An AQL queue on `gpu_id` of `packets` packets (a power of two, 64 or more).
    ///
    /// # Errors
    /// [`Error::Command`] for a packet count that is not a power of two of at least 64;
    /// [`Error::UnknownGpu`] for a GPU not in the context's topology;
    /// [`Error::NoQueueSizes`] for one without CWSR sizes; the errors of the allocations and
    /// of CREATE_QUEUE.
    pub fn new(
        context: &Arc<QueueContext>,
        gpu_id: impl Into<GpuId>,
        packets: u32,
    ) -> Result<AqlQueue> {
        let gpu_id: GpuId = gpu_id.into();
        if packets < 64 || !packets.is_power_of_two() {
            return Err(Error::Command(
                "an AQL ring holds a power of two of 64+ packets",
            ));
        }
        context.check_gpu(gpu_id)?;
        let sizes = context
            .queue_sizes(gpu_id)
            .ok_or(Error::NoQueueSizes(gpu_id))?;
        let gfx_major = context
            .gfx_major(gpu_id)
            .ok_or(Error::NoQueueSizes(gpu_id))?;
        let ring_size = packets * PACKET_SIZE as u32;
        let ring = context.gtt(gpu_id, u64::from(ring_size))?;
        let pointers = context.gtt(gpu_id, 4096)?;
        let eop = context.gtt(gpu_id, sizes.eop_buffer_size)?;
        let ctx_save = context.gtt(gpu_id, sizes.total_ctx_save_size())?;
        // Every slot starts INVALID: nothing is published yet.
        let ring = BufferObject::map_cpu_owned(ring)?;
        let slots = ring.as_volatile_slice()?;
        for i in 0..packets as usize {
            slots.write_obj(PACKET_INVALID, i * PACKET_SIZE)?;
        }
        let spec = QueueSpec {
            gpu_id,
            queue_type: QueueType::ComputeAql,
            percentage: 100,
            priority: 7,
            ring: QueueBuffer::start_of(ring.buffer_object().clone()),
            ring_size,
            read_pointer: QueueBuffer::start_of(pointers.clone()),
            write_pointer: QueueBuffer {
                bo: pointers.clone(),
                offset: WRITE_DISPATCH_ID as u64,
            },
            compute: Some(ComputeBuffers {
                eop: QueueBuffer::start_of(eop),
                ctx_save: QueueBuffer::start_of(ctx_save),
                sizes,
            }),
        };
        let queue = context.kfd().create_queue(&spec)?;
        let doorbells = context.doorbells(gpu_id, gfx_major)?;
        let doorbell_at = queue.doorbell_in_page(&doorbells);
        Ok(AqlQueue {
            queue,
            ring,
            pointers: BufferObject::map_cpu_owned(pointers)?,
            doorbells,
            doorbell_at,
            packets: u64::from(packets),
            write_index: 0,
        })
    }

    /// The KFD queue.
    pub fn queue(&self) -> &Queue {
        &self.queue
    }

    /// `read_dispatch_id`: packets the packet processor consumed.
    pub fn read_index(&self) -> Result<u64> {
        Ok(self
            .pointers
            .as_volatile_slice()?
            .read_obj(READ_DISPATCH_ID)?)
    }

    /// `write_dispatch_id`: packets submitted.
    pub fn write_index(&self) -> u64 {
        self.write_index
    }

    /// Publishes `packet`: the body, then the header (one 16-bit store), then the write
    /// dispatch id and the doorbell with the packet's index. Returns the index.
    ///
    /// # Errors
    /// [`Error::RingFull`] when the ring has no free slot; [`Error::Kfd`] when ringing fails.
    pub fn submit(&mut self, packet: &[u8; PACKET_SIZE]) -> Result<u64> {
        let in_flight = self.write_index - self.read_index()?;
        if in_flight >= self.packets {
            return Err(Error::RingFull {
                needed: PACKET_SIZE as u64,
                free: 0,
                ring: self.packets * PACKET_SIZE as u64,
            });
        }
        let index = self.write_index;
        let at = (index % self.packets) as usize * PACKET_SIZE;
        let slots = self.ring.as_volatile_slice()?;
        slots.write_slice(&packet[2..], at + 2)?;
        slots.write_obj(u16::from_le_bytes([packet[0], packet[1]]), at)?;
        self.write_index += 1;
        self.pointers
            .as_volatile_slice()?
            .write_obj(self.write_index, WRITE_DISPATCH_ID)?;
        self.doorbells.ring(self.doorbell_at, index)?;
        Ok(index)
    }

    /// A barrier-AND: starts once every signal of `deps` (at most five) is 0, then
    /// decrements `completion`.
    ///
    /// # Errors
    /// [`Error::Command`] for more than five dependencies; as [`AqlQueue::submit`].
    pub fn barrier_and(&mut self, deps: &[&Signal], completion: Option<&Signal>) -> Result<u64> {
        self.barrier(PACKET_BARRIER_AND, deps, completion)
    }

    /// A barrier-OR: starts once any signal of `deps` (at most five) is 0.
    ///
    /// # Errors
    /// As [`AqlQueue::barrier_and`].
    pub fn barrier_or(&mut self, deps: &[&Signal], completion: Option<&Signal>) -> Result<u64> {
        self.barrier(PACKET_BARRIER_OR, deps, completion)
    }

    fn barrier(&mut self, kind: u16, deps: &[&Signal], completion: Option<&Signal>) -> Result<u64> {
        let deps: Vec<u64> = deps.iter().map(|s| s.va()).collect();
        let packet = barrier(kind, &deps, completion.map_or(0, Signal::va))
            .ok_or(Error::Command("a barrier has at most five dependencies"))?;
        self.submit(&packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `hsa_kernel_dispatch_packet_t` and `hsa_barrier_and_packet_t` offsets, spelled out.
    #[test]
    fn packets_put_their_fields_where_hsa_h_says() {
        let d = KernelDispatch {
            workgroup_size: [64, 2, 1],
            grid_size: [1024, 8, 1],
            private_segment_size: 16,
            group_segment_size: 4096,
            kernel_object: 0x1122_3344_5566_7788,
            kernarg_address: 0x99AA_BBCC_DDEE_FF00,
            completion_signal: 0x7000_0000_1000,
        }
        .encode();
        let u16_at = |p: &[u8], i: usize| u16::from_le_bytes([p[i], p[i + 1]]);
        let u32_at = |p: &[u8], i: usize| u32::from_le_bytes(p[i..i + 4].try_into().unwrap());
        let u64_at = |p: &[u8], i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap());
        assert_eq!(u16_at(&d, 0), 2 | 1 << 8 | 2 << 9 | 2 << 11);
        assert_eq!(u16_at(&d, 2), 2, "two dimensions");
        assert_eq!([u16_at(&d, 4), u16_at(&d, 6), u16_at(&d, 8)], [64, 2, 1]);
        assert_eq!(
            [u32_at(&d, 12), u32_at(&d, 16), u32_at(&d, 20)],
            [1024, 8, 1]
        );
        assert_eq!((u32_at(&d, 24), u32_at(&d, 28)), (16, 4096));
        assert_eq!(u64_at(&d, 32), 0x1122_3344_5566_7788);
        assert_eq!(u64_at(&d, 40), 0x99AA_BBCC_DDEE_FF00);
        assert_eq!(u64_at(&d, 56), 0x7000_0000_1000);
        let b = barrier(PACKET_BARRIER_OR, &[0x10, 0x20], 0x30).unwrap();
        assert_eq!(u16_at(&b, 0) & 0xFF, 5);
        assert_eq!(
            (u64_at(&b, 8), u64_at(&b, 16), u64_at(&b, 24)),
            (0x10, 0x20, 0)
        );
        assert_eq!(u64_at(&b, 56), 0x30);
        assert!(barrier(PACKET_BARRIER_AND, &[1; 6], 0).is_none());
        assert!(barrier(PACKET_KERNEL_DISPATCH, &[], 0).is_none());
    }
}
