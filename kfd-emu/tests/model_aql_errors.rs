//! Queue errors of the model's AQL packet processor, through the `Backend` trait: a packet the
//! CP refuses stops the queue at it (not consumed, its completion signal untouched), the CP's
//! error code (the bits ROCr 5.2.3's `AqlQueue::DynamicScratchHandler` decodes) lands in the
//! `queue_inactive_signal` of the queue's `amd_queue_t` (found from the read pointer as the
//! CP finds it), and that signal's event is raised; a packet whose memory faults raises the
//! memory event with the faulting page and GPU instead. The queue can be destroyed after. For
//! a runtime that enabled exceptions (ROCr 6.2.4), the refused packet is also raised as its
//! `EC_QUEUE_PACKET_*` exception into the error payload its context save area names.

mod model_support;

use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::aql::*;
use model_support::{create, data, va, wait};

/// An AQL queue on `machine`'s first GPU (see `model_support::aql`), with an inactive signal
/// when `with_signal`.
fn queue(machine: &str, with_signal: bool) -> Queue {
    Queue::create(Setup {
        inactive_signal: with_signal,
        gpu_threads: ModelConfig::default().gpu_threads,
        ..Setup::aql(machine)
    })
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
            let mut q = queue(machine, true);
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
    let mut q = queue("mi100", false);
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
            let mut q = queue(machine, true);
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

/// A KFD with exception debugging also takes a refused packet as the CP's
/// `SOC15_INTSRC_CP_BAD_OPCODE` interrupt with its `EC_QUEUE_PACKET_*` code
/// (`event_interrupt_wq_v9`/`_v11` → `kfd_set_dbg_ev_from_interrupt`): with no debugger and
/// the runtime enabled, the exception's mask is OR-ed into the runtime's error payload and
/// its error event is set (`kfd_send_exception_to_runtime`), which is how ROCr 6.2.4's
/// `AqlQueue::ExceptionHandler` learns of it (its `queue_inactive_signal` handler ignores
/// packet errors when the KFD has exception debugging). The inactive signal still gets the
/// code, for a ROCr that does not enable the runtime (5.2.3); such a process's payload is
/// left alone.
#[test]
fn a_refused_packet_is_raised_to_a_runtime_that_enabled_exceptions() {
    let code = va(2) + DESCRIPTOR as u64;
    // (what, packet, the code of the inactive signal, the exception ROCr 6.2.4 decodes)
    let cases: [(&str, [u8; 64], u64, u32); 6] = [
        (
            "a reserved packet type",
            packet(7),
            32,
            EC_QUEUE_PACKET_UNSUPPORTED,
        ),
        (
            "a vendor-specific packet",
            packet(VENDOR_SPECIFIC),
            256,
            EC_QUEUE_PACKET_VENDOR_UNSUPPORTED,
        ),
        (
            "a dispatch of 0 dimensions",
            with(dispatch(code), 2, &0u16.to_le_bytes()),
            2,
            EC_QUEUE_PACKET_DISPATCH_DIM_INVALID,
        ),
        (
            "a dispatch of 2048 work-items per group",
            with(dispatch(code), 6, &32u16.to_le_bytes()),
            64,
            EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID,
        ),
        (
            "a dispatch with more group memory than the LDS",
            with(dispatch(code), 28, &(65u32 << 10).to_le_bytes()),
            4,
            EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID,
        ),
        (
            "a dispatch of a null kernel object",
            dispatch(0),
            8,
            EC_QUEUE_PACKET_DISPATCH_CODE_INVALID,
        ),
    ];
    let payload = DATA + 0x100;
    for machine in ["mi300x", "rx7900xtx", "mi210x8"] {
        for (what, p, want, ec) in cases {
            let mut q = queue(machine, true);
            // The runtime enables itself before its first queue (`kfd_runtime_enable`:
            // EEXIST with queues).
            q.destroy();
            assert_eq!(
                q.emu.ioctl(AMDKFD_IOC_RUNTIME_ENABLE, &mut runtime_on()),
                Ok(0)
            );
            let error = create(&q.emu, KFD_IOC_EVENT_SIGNAL, false);
            q.recreate_with_error_reason(payload, error.event_id);
            q.submit(0, p);
            let mut events = [data(error.event_id)];
            let (r, result) = wait(&q.emu, &mut events, true, PATIENCE_MS);
            assert_eq!(
                (r, result),
                (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE),
                "{machine}: {what}: the runtime's error event was not set"
            );
            assert_eq!(
                q.u64_at(payload),
                kfd_ec_mask(ec),
                "{machine}: {what}: the exception in the payload"
            );
            assert!(q.wait_for_error(), "{machine}: {what}: the inactive signal");
            assert_eq!(
                q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
                want,
                "{machine}: {what}"
            );
            assert_eq!(q.u64_at(RPTR), 0, "{machine}: {what}: read index");
            q.destroy();
        }
    }
    // Without RUNTIME_ENABLE: the inactive signal only.
    let mut q = queue("mi300x", true);
    q.destroy();
    let error = create(&q.emu, KFD_IOC_EVENT_SIGNAL, false);
    q.recreate_with_error_reason(payload, error.event_id);
    q.submit(0, dispatch(0));
    assert!(q.wait_for_error(), "the inactive signal");
    assert_eq!(q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE), 8);
    let mut events = [data(error.event_id)];
    let (r, result) = wait(&q.emu, &mut events, true, 0);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_TIMEOUT));
    assert_eq!(q.u64_at(payload), 0, "no runtime to tell");
    q.destroy();
}
