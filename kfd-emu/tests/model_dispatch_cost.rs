//! A kernel dispatch's fixed cost, in host system calls (`kfd_emu::model::host_calls`), which
//! do not depend on the host's speed: once a queue ran its first dispatch, a batch of empty
//! dispatches whose packet, queue, signals, descriptor and code lie in GTT BOs (as ROCr's
//! do on a dGPU when they are device or GTT memory) makes no mapping and unmaps none (the BO
//! windows are the state's long-lived ones), and no `pread`/`pwrite` or
//! `process_vm_readv`/`writev` either: every access goes through those mappings, and the
//! completion signal's event (its mailbox on a BO signal page, as ROCr's interrupt signals
//! are) is raised through them too. The counts are the process's, so this binary holds one
//! test at a time, and the test waits by reading the signal in its own mapping, with no
//! ioctl (whose handlers read signal pages) while it counts.

mod model_support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use kfd_emu::model::host_calls;
use model_support::aql::*;
use model_support::va;

/// One test at a time (the counts are the process's).
static SERIAL: Mutex<()> = Mutex::new(());

/// Dispatches in the counted batch.
const BATCH: u64 = 32;

/// An AQL queue on mi210x8 (gfx90a) with an empty kernel loaded, one dispatch thread.
fn queue() -> Option<Queue> {
    let (text, kd) = assemble("gfx90a", "s_endpgm")?;
    let mut q = Queue::create(Setup {
        gpu_threads: 1,
        ..Setup::aql("mi210x8")
    });
    q.load(&text, &kd);
    Some(q)
}

/// Waits (reading the completion signal in the test's own mapping, no ioctl) until it is 0.
fn wait_done(q: &mut Queue) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while q.u64_at(COMPLETION + SIGNAL_VALUE) != 0 {
        assert!(
            Instant::now() < deadline,
            "the dispatches did not complete within 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs one dispatch, then counts the host calls of `BATCH` more, submitted at once.
fn count_batch(q: &mut Queue) -> kfd_emu::model::HostCalls {
    q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
    q.submit(0, Queue::dispatch_packet([1, 1, 1], [1, 1, 1]));
    wait_done(q);
    assert_eq!(q.u64_at(RPTR), 1);
    let before = host_calls();
    q.put_u64(COMPLETION + SIGNAL_VALUE, BATCH);
    for i in 1..=BATCH {
        q.place(i, Queue::dispatch_packet([1, 1, 1], [1, 1, 1]));
    }
    q.put_u64(WPTR, BATCH + 1);
    wait_done(q);
    let calls = host_calls() - before;
    assert_eq!(q.u64_at(RPTR), BATCH + 1, "every packet consumed");
    calls
}

#[test]
fn dispatches_of_a_queue_in_bos_make_no_host_call_after_the_first() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut q) = queue() else { return };
    let calls = count_batch(&mut q);
    assert_eq!(
        calls.maps, 0,
        "mappings made for {BATCH} dispatches: {calls:?}"
    );
    assert_eq!(calls.unmaps, 0, "mappings unmapped: {calls:?}");
    assert_eq!(calls.memfd_io, 0, "pread/pwrite calls: {calls:?}");
    assert_eq!(calls.process_vm, 0, "process_vm_* calls: {calls:?}");
    q.destroy();
}

/// The completion signal with an event mailbox on the signal page (a BO): each completion
/// raises the event (mailbox written, the event's slot read and acknowledged), still with no
/// host call.
#[test]
fn completions_that_raise_an_event_make_no_host_call_either() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut q) = queue() else { return };
    // The event the inactive signal uses (a signal event whose slot is on the BO page at
    // va(1)): its mailbox and id, as ROCr's interrupt signals carry them.
    let mailbox = q.u64_at(INACTIVE_SIGNAL + SIGNAL_MAILBOX);
    let id = q.u32_at(INACTIVE_SIGNAL + SIGNAL_EVENT_ID);
    assert!(mailbox >= va(1) && mailbox < va(1) + 32 * 1024);
    q.put_u64(COMPLETION + SIGNAL_MAILBOX, mailbox);
    q.put_u32(COMPLETION + SIGNAL_EVENT_ID, id);
    let calls = count_batch(&mut q);
    assert!(q.wait_for_error(), "the completions raised the event");
    assert_eq!(
        (calls.maps, calls.unmaps, calls.memfd_io, calls.process_vm),
        (0, 0, 0, 0),
        "{BATCH} dispatches raising an event: {calls:?}"
    );
    q.destroy();
}
