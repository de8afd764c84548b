//! Queue errors of the model's AQL packet processor, through the `Backend` trait: a packet the
//! CP refuses stops the queue at it (not consumed, its completion signal untouched), the CP's
//! error code (the bits ROCr 5.2.3's `AqlQueue::DynamicScratchHandler` decodes) lands in the
//! `queue_inactive_signal` of the queue's `amd_queue_t` (found from the read pointer as the
//! CP finds it), and that signal's event is raised; a packet whose memory faults raises the
//! memory event with the faulting page and GPU instead. The queue can be destroyed after.

mod model_support;

use std::os::fd::AsFd;

use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::{CpuMap, Emu, create, data, va, wait};

const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;

/// Generous: the engines run before WAIT_EVENTS waits, so this is only a bound.
const PATIENCE_MS: u32 = 20_000;

/// The queue BO's layout (at `va(2)`): `amd_queue_t` at 0 (`amd_hsa_queue.h`:
/// `write_dispatch_id` at 56, `read_dispatch_id` at 128 followed by
/// `read_dispatch_id_field_base_byte_offset`, `queue_inactive_signal` at 192), the ring, the
/// inactive signal, a completion signal and a kernel descriptor (`amd_signal_t`s of
/// `amd_hsa_signal.h`: `value` at 8, `event_mailbox_ptr` at 16, `event_id` at 24).
const WPTR: usize = 56;
const RPTR: usize = 128;
const RPTR_BASE_OFFSET: usize = 136;
const INACTIVE: usize = 192;
const RING: usize = 0x1000;
const RING_SIZE: usize = 0x1000;
const INACTIVE_SIGNAL: usize = 0x2000;
const COMPLETION: usize = 0x2100;
const DESCRIPTOR: usize = 0x3000;
const BO_SIZE: usize = 0x4000;
const SIGNAL_VALUE: usize = 8;
const SIGNAL_MAILBOX: usize = 16;
const SIGNAL_EVENT_ID: usize = 24;

/// `HSA_PACKET_TYPE_*`.
const VENDOR_SPECIFIC: u8 = 0;
const KERNEL_DISPATCH: u8 = 2;
const BARRIER_AND: u8 = 3;
const AGENT_DISPATCH: u8 = 4;

/// An AQL queue of the model over memory this test reads and writes.
struct Queue {
    emu: Emu,
    bo: CpuMap,
    id: u32,
    /// The event of the queue's inactive signal.
    event: u32,
}

impl Queue {
    /// An AQL queue on `machine`'s first GPU whose `amd_queue_t` is laid out as ROCr lays it
    /// out, with a `queue_inactive_signal` (when `with_signal`) whose event mailbox is a slot
    /// of a signal event's page, and a completion signal holding 1.
    fn new(machine: &str, with_signal: bool) -> Queue {
        // KFD 1.15: no queue-buffer checks (no EOP or CWSR area needed).
        let mut emu = Emu::new(ModelConfig {
            machine: Machine::preset(machine).expect("preset"),
            kfd_minor: 15,
            ..ModelConfig::default()
        });
        let (page, _, event) = emu.signal_event_on_a_bo();
        let gpu = emu.gpu();
        assert_eq!(emu.map(page, &[gpu]).0, Ok(0));
        let (handle, offset) = emu
            .alloc(gpu, va(2), BO_SIZE as u64, GTT_RW)
            .expect("alloc");
        assert_eq!(emu.map(handle, &[gpu]).0, Ok(0));
        let bo = emu
            .cpu_map(emu.renders[0].as_fd(), offset, BO_SIZE)
            .expect("map the queue BO");
        let mut q = Queue {
            emu,
            bo,
            id: 0,
            event: event.event_id,
        };
        let base = va(2);
        q.put_u32(RPTR_BASE_OFFSET, RPTR as u32);
        if with_signal {
            q.put_u64(INACTIVE, base + INACTIVE_SIGNAL as u64);
        }
        q.put_u64(
            INACTIVE_SIGNAL + SIGNAL_MAILBOX,
            va(1) + 8 * u64::from(event.event_slot_index),
        );
        q.put_u32(INACTIVE_SIGNAL + SIGNAL_EVENT_ID, event.event_id);
        q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
        // Every slot INVALID, as ROCr leaves a new ring.
        for slot in 0..RING_SIZE / 64 {
            q.put_u16(RING + slot * 64, 1);
        }
        let mut a = kfd_ioctl_create_queue_args {
            ring_base_address: base + RING as u64,
            ring_size: RING_SIZE as u32,
            read_pointer_address: base + RPTR as u64,
            write_pointer_address: base + WPTR as u64,
            gpu_id: gpu,
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        q.emu
            .ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
            .expect("create the AQL queue");
        q.id = a.queue_id;
        q
    }

    fn put_u16(&mut self, at: usize, v: u16) {
        self.bo.bytes()[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put_u32(&mut self, at: usize, v: u32) {
        self.bo.bytes()[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, at: usize, v: u64) {
        self.bo.bytes()[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    fn u64_at(&mut self, at: usize) -> u64 {
        u64::from_le_bytes(self.bo.bytes()[at..at + 8].try_into().unwrap())
    }

    /// Writes `packet` (its header last) into slot `index` and publishes it.
    fn submit(&mut self, index: u64, packet: [u8; 64]) {
        let at = RING + (index as usize % (RING_SIZE / 64)) * 64;
        self.bo.bytes()[at + 2..at + 64].copy_from_slice(&packet[2..]);
        self.put_u16(at, u16::from_le_bytes([packet[0], packet[1]]));
        self.put_u64(WPTR, index + 1);
    }

    fn header(&mut self, index: usize) -> u16 {
        let at = RING + index * 64;
        u16::from_le_bytes([self.bo.bytes()[at], self.bo.bytes()[at + 1]])
    }

    /// WAIT_EVENTS on the inactive signal's event: whether it was raised within the bound.
    fn wait_for_error(&self) -> bool {
        let mut events = [data(self.event)];
        let (r, result) = wait(&self.emu, &mut events, true, PATIENCE_MS);
        assert_eq!(r, Ok(0));
        result == KFD_IOC_WAIT_RESULT_COMPLETE
    }

    /// One pass of the engines (WAIT_EVENTS runs them before it waits), on a fresh event.
    fn run_engines_once(&self) {
        let other = create(&self.emu, KFD_IOC_EVENT_SIGNAL, true);
        let mut events = [data(other.event_id)];
        let _ = wait(&self.emu, &mut events, true, 0);
    }

    fn destroy(&self) {
        let mut a = kfd_ioctl_destroy_queue_args {
            queue_id: self.id,
            pad: 0,
        };
        assert_eq!(self.emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut a), Ok(0));
    }
}

/// A packet of `kind` with the barrier bit and system-scope fences, completion signal at
/// `COMPLETION`.
fn packet(kind: u8) -> [u8; 64] {
    let mut p = [0u8; 64];
    let header = u16::from(kind) | 1 << 8 | 2 << 9 | 2 << 11;
    p[..2].copy_from_slice(&header.to_le_bytes());
    p[56..].copy_from_slice(&(va(2) + COMPLETION as u64).to_le_bytes());
    p
}

/// A 1-D KERNEL_DISPATCH of 64 work-items in groups of 64 running the kernel object at `code`.
fn dispatch(code: u64) -> [u8; 64] {
    let mut p = packet(KERNEL_DISPATCH);
    p[2..4].copy_from_slice(&1u16.to_le_bytes());
    for (at, v) in [(4, 64u16), (6, 1), (8, 1)] {
        p[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    for (at, v) in [(12, 64u32), (16, 1), (20, 1)] {
        p[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    p[32..40].copy_from_slice(&code.to_le_bytes());
    p
}

fn with(mut p: [u8; 64], at: usize, bytes: &[u8]) -> [u8; 64] {
    p[at..at + bytes.len()].copy_from_slice(bytes);
    p
}

#[test]
fn a_refused_packet_writes_the_cps_error_code_and_raises_the_inactive_signals_event() {
    let code = va(2) + DESCRIPTOR as u64;
    // (what, packet, the code ROCr decodes, the status it maps it to)
    let cases: [(&str, [u8; 64], u64, &str); 9] = [
        (
            "a reserved packet type",
            packet(7),
            32,
            "INVALID_PACKET_FORMAT",
        ),
        (
            "an AGENT_DISPATCH",
            packet(AGENT_DISPATCH),
            32,
            "INVALID_PACKET_FORMAT",
        ),
        (
            "a vendor-specific packet",
            packet(VENDOR_SPECIFIC),
            256,
            "INVALID_PACKET_FORMAT",
        ),
        (
            "a dispatch of 0 dimensions",
            with(dispatch(code), 2, &0u16.to_le_bytes()),
            2,
            "INCOMPATIBLE_ARGUMENTS",
        ),
        (
            "a dispatch with a zero grid size",
            with(dispatch(code), 12, &0u32.to_le_bytes()),
            2,
            "INCOMPATIBLE_ARGUMENTS",
        ),
        (
            "a dispatch of 2048 work-items per group",
            with(dispatch(code), 6, &32u16.to_le_bytes()),
            64,
            "INVALID_ARGUMENT",
        ),
        (
            "a dispatch with more group memory than the LDS",
            with(dispatch(code), 28, &(65u32 << 10).to_le_bytes()),
            4,
            "INVALID_ALLOCATION",
        ),
        (
            "a dispatch of a null kernel object",
            dispatch(0),
            8,
            "INVALID_CODE_OBJECT",
        ),
        (
            "a dispatch of a kernel the model cannot run",
            dispatch(code),
            128,
            "INVALID_ISA",
        ),
    ];
    for machine in ["radeon-vii", "mi100", "mi210x8"] {
        for (what, p, want, status) in cases {
            let mut q = Queue::new(machine, true);
            q.submit(0, p);
            assert!(
                q.wait_for_error(),
                "{machine}: {what}: the inactive signal's event was not raised"
            );
            assert_eq!(
                q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
                want,
                "{machine}: {what}: the error code (ROCr: HSA_STATUS_ERROR_{status})"
            );
            // Not consumed, not completed.
            assert_eq!(q.u64_at(RPTR), 0, "{machine}: {what}: read index");
            assert_eq!(
                q.header(0),
                u16::from_le_bytes([p[0], p[1]]),
                "{machine}: {what}"
            );
            assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1, "{machine}: {what}");
            // The queue stays stopped: a barrier behind it does not run.
            q.submit(1, packet(BARRIER_AND));
            q.run_engines_once();
            assert_eq!(q.u64_at(RPTR), 0, "{machine}: {what}: ran past the error");
            assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1, "{machine}: {what}");
            q.destroy();
        }
    }
}

#[test]
fn a_queue_without_an_inactive_signal_just_stops() {
    let mut q = Queue::new("mi100", false);
    q.submit(0, packet(AGENT_DISPATCH));
    q.run_engines_once();
    q.submit(1, packet(BARRIER_AND));
    q.run_engines_once();
    assert_eq!(q.u64_at(RPTR), 0);
    assert_eq!(q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE), 0);
    assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1);
    // No VM fault either: a memory event stays unset.
    let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
    let mut events = [data(memory.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, 0);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_TIMEOUT));
    q.destroy();
}

#[test]
fn a_packet_that_faults_raises_the_memory_event_with_the_page_and_gpu() {
    let unmapped = va(9) + 0x1230;
    let cases = [
        (
            "a barrier whose dependency signal is unmapped",
            with(packet(BARRIER_AND), 8, &unmapped.to_le_bytes()),
        ),
        (
            "a dispatch of an unmapped kernel object",
            dispatch(unmapped),
        ),
    ];
    for machine in ["radeon-vii", "mi100", "mi210x8"] {
        for (what, p) in cases {
            let mut q = Queue::new(machine, true);
            let memory = create(&q.emu, KFD_IOC_EVENT_MEMORY, false);
            q.submit(0, p);
            let mut events = [data(memory.event_id)];
            let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
            assert_eq!(
                (r, result),
                (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE),
                "{machine}: {what}"
            );
            let fault = events[0].memory_exception_data();
            assert_eq!(fault.va, va(9) + 0x1000, "{machine}: {what}: the page");
            assert_eq!(fault.gpu_id, q.emu.gpu(), "{machine}: {what}");
            assert_eq!(fault.failure.NotPresent, 1, "{machine}: {what}");
            // No queue error: the inactive signal holds 0; the packet is not completed.
            assert_eq!(
                q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
                0,
                "{machine}: {what}"
            );
            assert_eq!(q.u64_at(RPTR), 0, "{machine}: {what}");
            assert_eq!(q.u64_at(COMPLETION + SIGNAL_VALUE), 1, "{machine}: {what}");
            q.destroy();
        }
    }
}
