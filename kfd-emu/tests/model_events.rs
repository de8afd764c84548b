//! Events: ids, SET/RESET/DESTROY errnos, WAIT_EVENTS timeouts, wake-ups from other threads,
//! auto-reset, wait-for-all, event ages, and the user-provided event page.

mod model_support;

use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kfd_emu::backend::Backend;
use kfd_ioctl::abi::*;
use model_support::*;
use rustix::io::Errno;

const COMPLETE: u32 = KFD_IOC_WAIT_RESULT_COMPLETE;
const TIMEOUT: u32 = KFD_IOC_WAIT_RESULT_TIMEOUT;
const FAIL: u32 = KFD_IOC_WAIT_RESULT_FAIL;

#[test]
fn event_ids_and_errnos() {
    let emu = Emu::machine("mi300x");
    let s1 = create(&emu, KFD_IOC_EVENT_SIGNAL, true);
    let s2 = create(&emu, KFD_IOC_EVENT_SIGNAL, false);
    let mem = create(&emu, KFD_IOC_EVENT_MEMORY, false);
    assert_eq!(
        (s1.event_id, s1.event_slot_index),
        (1, 1),
        "id 0 is reserved"
    );
    assert_eq!(s2.event_id, 2);
    assert_eq!(s1.event_trigger_data, 1);
    assert_ne!(
        s1.event_page_offset, 0,
        "signal events name the signal page"
    );
    assert_eq!(mem.event_id, 0x4000_0000);
    assert_eq!(mem.event_page_offset, 0);
    assert_eq!(
        set(&emu, mem.event_id),
        Err(Errno::INVAL),
        "only signal events"
    );
    assert_eq!(reset(&emu, mem.event_id), Err(Errno::INVAL));
    assert_eq!(set(&emu, 77), Err(Errno::INVAL));
    assert_eq!(destroy(&emu, 77), Err(Errno::INVAL));
    assert_eq!(destroy(&emu, s1.event_id), Ok(0));
    assert_eq!(
        create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id,
        1,
        "lowest free id"
    );
    // The kernel's own page has 256 slots until it is mapped: 255 signal events.
    for _ in 0..253 {
        create(&emu, KFD_IOC_EVENT_SIGNAL, false);
    }
    let mut one_more = kfd_ioctl_create_event_args::default();
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut one_more),
        Err(Errno::NOSPC)
    );
}

#[test]
fn wait_times_out_and_auto_reset_is_consumed() {
    let emu = Emu::machine("mi300x");
    let auto = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    let manual = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    assert_eq!(wait(&emu, &mut [data(auto)], false, 0), (Ok(0), TIMEOUT));
    let start = Instant::now();
    assert_eq!(wait(&emu, &mut [data(auto)], false, 30), (Ok(0), TIMEOUT));
    assert!(
        start.elapsed() >= Duration::from_millis(30),
        "the timeout is honoured"
    );

    set(&emu, auto).expect("set");
    assert_eq!(wait(&emu, &mut [data(auto)], false, 0), (Ok(0), COMPLETE));
    assert_eq!(
        wait(&emu, &mut [data(auto)], false, 0),
        (Ok(0), TIMEOUT),
        "consumed"
    );

    set(&emu, manual).expect("set");
    assert_eq!(wait(&emu, &mut [data(manual)], false, 0), (Ok(0), COMPLETE));
    assert_eq!(
        wait(&emu, &mut [data(manual)], false, 0),
        (Ok(0), COMPLETE),
        "stays set"
    );
    reset(&emu, manual).expect("reset");
    assert_eq!(wait(&emu, &mut [data(manual)], false, 0), (Ok(0), TIMEOUT));

    // Errors: an unknown event, a bad array pointer, destroyed while in the list.
    assert_eq!(
        wait(&emu, &mut [data(99)], false, 0),
        (Err(Errno::INVAL), FAIL)
    );
    let mut a = kfd_ioctl_wait_events_args {
        events_ptr: 8,
        num_events: 1,
        wait_for_all: 0,
        timeout: 0,
        wait_result: 0,
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_WAIT_EVENTS, &mut a), Err(Errno::FAULT));
    assert_eq!(a.wait_result, FAIL);
    // No events at all: complete at once.
    assert_eq!(wait(&emu, &mut [], false, 0), (Ok(0), COMPLETE));
}

#[test]
fn wait_for_all_needs_every_event() {
    let emu = Emu::machine("mi300x");
    let a = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    let b = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    set(&emu, a).expect("set");
    assert_eq!(
        wait(&emu, &mut [data(a), data(b)], true, 0),
        (Ok(0), TIMEOUT)
    );
    assert_eq!(
        wait(&emu, &mut [data(a), data(b)], false, 0),
        (Ok(0), COMPLETE)
    );
    set(&emu, b).expect("set");
    assert_eq!(
        wait(&emu, &mut [data(a), data(b)], true, 0),
        (Ok(0), COMPLETE)
    );
}

#[test]
fn set_event_wakes_a_waiter_on_another_thread() {
    let emu = Emu::machine("mi300x");
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Infinite timeout: only the SET_EVENT below can end this wait.
            let r = wait(&emu, &mut [data(id)], false, 0xFFFF_FFFF);
            tx.send(r).expect("send");
        });
        set(&emu, id).expect("set");
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the waiter returns");
        assert_eq!(r, (Ok(0), COMPLETE));
    });
    // Whether the waiter was already parked or not, the one signal was consumed once.
    assert_eq!(wait(&emu, &mut [data(id)], false, 0), (Ok(0), TIMEOUT));
}

#[test]
fn destroying_an_event_fails_its_waiter() {
    let emu = Emu::machine("mi300x");
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    let keep = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    let (tx, rx) = mpsc::channel();
    let (started_tx, started_rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            started_tx.send(()).expect("send");
            tx.send(wait(&emu, &mut [data(keep), data(id)], true, 0xFFFF_FFFF))
                .expect("send");
        });
        started_rx.recv().expect("started");
        // Either the waiter was parked (woken with FAIL) or it starts after the destroy
        // (EINVAL for the unknown event): both end the wait, neither is success.
        destroy(&emu, id).expect("destroy");
        let (r, result) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the waiter returns");
        assert!(
            (r, result) == (Err(Errno::IO), FAIL) || (r, result) == (Err(Errno::INVAL), FAIL),
            "{r:?} {result}"
        );
    });
}

#[test]
fn process_exit_ends_its_waits() {
    let emu = Emu::machine("mi300x");
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            tx.send(wait(&emu, &mut [data(id)], false, 0xFFFF_FFFF))
                .expect("send");
        });
        emu.model.process_exited(emu.caller.tgid);
        let (r, result) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the waiter returns");
        // Parked: woken with FAIL. Not yet started: the dispatcher refuses the dead
        // process's fd (EBADF, nothing copied back). Gone after the dispatcher's check but
        // before the wait found the process: the wait fails with EBADF and, as every failed
        // wait, copies FAIL back. (The kernel cannot get here: a process cannot exit while
        // one of its threads is inside an ioctl; only the emulator's `process_exited` can.)
        assert!(
            (r, result) == (Err(Errno::IO), FAIL)
                || (r, result) == (Err(Errno::BADF), 99)
                || (r, result) == (Err(Errno::BADF), FAIL),
            "{r:?} {result}"
        );
    });
}

#[test]
fn event_age_reports_missed_signals() {
    let emu = Emu::machine("mi300x");
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    set(&emu, id).expect("set"); // age 1 -> 2
    reset(&emu, id).expect("reset");
    // A waiter that last saw age 1 is activated at once and told the age is 2.
    let mut entry = data(id);
    entry.set_signal_event_data(kfd_hsa_signal_event_data { last_event_age: 1 });
    assert_eq!(
        wait(&emu, std::slice::from_mut(&mut entry), false, 0),
        (Ok(0), COMPLETE)
    );
    assert_eq!(entry.signal_event_data().last_event_age, 2);
    // Up to date: it waits.
    assert_eq!(
        wait(&emu, std::slice::from_mut(&mut entry), false, 0),
        (Ok(0), TIMEOUT)
    );
}

#[test]
fn a_bo_can_be_the_signal_page() {
    let mut emu = Emu::machine("mi300x");
    let (page, offset, mut a) = emu.signal_event_on_a_bo();
    let mut cpu = emu
        .cpu_map(emu.renders[0].as_fd(), offset, 32 * 1024)
        .expect("map the page through the render node");
    assert!(
        cpu.bytes().iter().all(|&b| b == 0xFF),
        "every slot unsignaled"
    );
    assert_eq!(
        emu.free(page),
        Err(Errno::PERM),
        "the signal page cannot be freed"
    );
    // Only once: a second page is refused, and so is a handle that does not exist.
    a.event_page_offset = page;
    assert_eq!(
        emu.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut a),
        Err(Errno::INVAL)
    );

    let other = Emu::machine("mi300x");
    let mut b = kfd_ioctl_create_event_args {
        event_page_offset: (u64::from(other.gpu()) << 32) | 5,
        ..Default::default()
    };
    assert_eq!(
        other.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut b),
        Err(Errno::NODEV),
        "not bound"
    );
}
