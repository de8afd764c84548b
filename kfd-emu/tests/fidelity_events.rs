//! Kernel-derived checks of the event ioctls. Each test names the kernel function it follows
//! (drivers/gpu/drm/amd/amdkfd/kfd_events.c unless said otherwise) and the condition in it;
//! where the answer depends on the KFD version, both sides of the gate are driven.

mod model_support;
mod model_svm_support;

use std::os::fd::AsFd;

use kfd_emu::backend::{Caller, MmapAction};
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::*;
use model_svm_support::{Anon, PAGE};
use rustix::io::Errno;
use rustix::mm::MprotectFlags;
use zerocopy::IntoBytes;

const COMPLETE: u32 = KFD_IOC_WAIT_RESULT_COMPLETE;
const TIMEOUT: u32 = KFD_IOC_WAIT_RESULT_TIMEOUT;
const FAIL: u32 = KFD_IOC_WAIT_RESULT_FAIL;
/// `KFD_FIRST_NONSIGNAL_EVENT_ID` (kfd_events.h): `(INT_MAX >> 1) + 1`.
const FIRST_NONSIGNAL_ID: u32 = 0x4000_0000;

/// The default machine acting as KFD 1.`minor`.
fn emu_at(minor: u32) -> Emu {
    Emu::new(ModelConfig {
        kfd_minor: minor,
        ..ModelConfig::default()
    })
}

/// CREATE_EVENT that may fail: the result and the arguments as written back.
fn try_create(
    emu: &Emu,
    kind: u32,
    page: u64,
) -> (Result<i64, Errno>, kfd_ioctl_create_event_args) {
    let mut a = kfd_ioctl_create_event_args {
        event_page_offset: page,
        event_type: kind,
        ..Default::default()
    };
    let r = emu.ioctl(AMDKFD_IOC_CREATE_EVENT, &mut a);
    (r, a)
}

/// Creates signal events until CREATE_EVENT fails; the ids created and the errno.
fn fill_signal_slots(emu: &Emu) -> (Vec<u32>, Errno) {
    let mut ids = Vec::new();
    loop {
        match try_create(emu, KFD_IOC_EVENT_SIGNAL, 0) {
            (Ok(_), a) => ids.push(a.event_id),
            (Err(e), _) => return (ids, e),
        }
        assert!(ids.len() < 4 * KFD_SIGNAL_EVENT_LIMIT as usize, "no limit");
    }
}

/// Gives the pages of `memory` from byte `offset` on the protection `flags`.
fn protect(memory: &Anon, offset: u64, flags: MprotectFlags) {
    let at = (memory.addr + offset) as *mut std::ffi::c_void;
    // SAFETY: pages of a mapping this test owns, which no Rust reference points into (the model
    // reaches them through process_vm_readv/writev).
    unsafe { rustix::mm::mprotect(at, (memory.len - offset) as usize, flags) }.expect("mprotect");
}

/// A WAIT_EVENTS entry for `id` that last saw age `age`.
fn aged(id: u32, age: u64) -> kfd_event_data {
    let mut entry = data(id);
    entry.set_signal_event_data(kfd_hsa_signal_event_data {
        last_event_age: age,
    });
    entry
}

// init_event_waiter runs for every entry before test_event_condition, and it clears an
// auto-reset event's `signaled` (`ev->signaled = ev->signaled && !ev->auto_reset`) whether or
// not the wait completes; free_waiters puts it back only when `ret == -ERESTARTSYS`. So a
// wait-for-all that times out still consumes the auto-reset signals it saw. Manual-reset
// events keep theirs.
#[test]
fn wait_for_all_that_times_out_consumes_auto_reset_signals() {
    let emu = Emu::machine("mi300x");
    let auto = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    let manual = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    let never = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    set(&emu, auto).expect("set");
    set(&emu, manual).expect("set");
    assert_eq!(
        wait(&emu, &mut [data(auto), data(manual), data(never)], true, 0),
        (Ok(0), TIMEOUT)
    );
    assert_eq!(
        wait(&emu, &mut [data(auto)], false, 0),
        (Ok(0), TIMEOUT),
        "the auto-reset signal went to the wait that timed out"
    );
    assert_eq!(
        wait(&emu, &mut [data(manual)], false, 0),
        (Ok(0), COMPLETE),
        "a manual-reset event stays signaled"
    );
    // A wait-for-any that completes on the first entry consumes every signaled auto-reset
    // event in the array, not just the first.
    let second = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    set(&emu, auto).expect("set");
    set(&emu, second).expect("set");
    assert_eq!(
        wait(&emu, &mut [data(auto), data(second)], false, 0),
        (Ok(0), COMPLETE)
    );
    assert_eq!(wait(&emu, &mut [data(second)], false, 0), (Ok(0), TIMEOUT));
}

// kfd_wait_on_events: init_event_waiter fails with -EINVAL for an id lookup_event_by_id does
// not find, after the earlier entries were initialised (and their auto-reset signals
// consumed); `if (ret) *wait_result = KFD_IOC_WAIT_RESULT_FAIL`, and kfd_ioctl copies the
// arguments back even on failure. A copy_from_user failure of a later entry is -EFAULT the
// same way.
#[test]
fn a_bad_entry_fails_the_wait_after_earlier_entries_were_consumed() {
    let emu = Emu::machine("mi300x");
    let auto = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    set(&emu, auto).expect("set");
    assert_eq!(
        wait(&emu, &mut [data(auto), data(0x7777)], false, 0),
        (Err(Errno::INVAL), FAIL)
    );
    assert_eq!(
        wait(&emu, &mut [data(auto)], false, 0),
        (Ok(0), TIMEOUT),
        "consumed by the failed wait"
    );

    // The second entry lies on an inaccessible page.
    set(&emu, auto).expect("set");
    let memory = Anon::new(2 * PAGE);
    let first = memory.addr + PAGE - size_of::<kfd_event_data>() as u64;
    emu.caller
        .write(first, data(auto).as_bytes())
        .expect("write");
    protect(&memory, PAGE, MprotectFlags::empty());
    let mut a = kfd_ioctl_wait_events_args {
        events_ptr: first,
        num_events: 2,
        wait_for_all: 0,
        timeout: 0,
        wait_result: 99,
    };
    assert_eq!(emu.ioctl(AMDKFD_IOC_WAIT_EVENTS, &mut a), Err(Errno::FAULT));
    assert_eq!(a.wait_result, FAIL);
    assert_eq!(
        wait(&emu, &mut [data(auto)], false, 0),
        (Ok(0), TIMEOUT),
        "consumed by the faulting wait"
    );
}

// test_event_condition: `activated_count == num_events` with no events is true, for
// wait-for-all and wait-for-any alike; alloc_event_waiters(0) is kcalloc's ZERO_SIZE_PTR,
// not NULL, and no entry is copied.
#[test]
fn waiting_on_no_events_completes_at_once() {
    let emu = Emu::machine("mi300x");
    for all in [false, true] {
        assert_eq!(
            wait(&emu, &mut [], all, 0xFFFF_FFFF),
            (Ok(0), COMPLETE),
            "all={all}"
        );
    }
}

// set_event: `ev->signaled = !ev->auto_reset || !waitqueue_active(&ev->wq)` is a flag, not a
// count, and `++ev->event_age` counts every set. kfd_event_create starts the age at 1.
// init_event_waiter (KFD 1.14, "event age"): a signal event whose `last_event_age` is
// non-zero and differs from the event's is activated at once, and copy_signaled_event_data
// writes the age back; 0 keeps the old behaviour. Before 1.14 the field did not exist and
// the kernel ignored it.
#[test]
fn sets_latch_one_signal_and_ages_count_each_set_since_1_14() {
    for minor in [13, 14, KFD_IOCTL_MINOR_VERSION] {
        let emu = emu_at(minor);
        let id = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
        set(&emu, id).expect("set");
        set(&emu, id).expect("set");
        assert_eq!(wait(&emu, &mut [data(id)], false, 0), (Ok(0), COMPLETE));
        assert_eq!(
            wait(&emu, &mut [data(id)], false, 0),
            (Ok(0), TIMEOUT),
            "two sets, one signal (1.{minor})"
        );
        // The event is unsignaled at age 3; a waiter that last saw age 1 missed two sets.
        let mut entry = [aged(id, 1)];
        let (r, result) = wait(&emu, &mut entry, false, 0);
        let age = entry[0].signal_event_data().last_event_age;
        if minor >= 14 {
            assert_eq!((r, result, age), (Ok(0), COMPLETE, 3), "1.{minor}");
        } else {
            assert_eq!(
                (r, result, age),
                (Ok(0), TIMEOUT, 1),
                "1.{minor} ignores ages"
            );
        }
        // Age 0 is "no age" on every version; an up-to-date age waits.
        let mut zero = [aged(id, 0)];
        assert_eq!(wait(&emu, &mut zero, false, 0), (Ok(0), TIMEOUT));
        assert_eq!(zero[0].signal_event_data().last_event_age, 0);
        if minor >= 14 {
            let mut current = [aged(id, 3)];
            assert_eq!(wait(&emu, &mut current, false, 0), (Ok(0), TIMEOUT));
        }
    }
}

// init_event_waiter: ages are tracked only for `KFD_EVENT_TYPE_SIGNAL`; copy_signaled_event_data
// writes nothing for an activated signal event without an age. A signaled event whose age
// matches is still activated by `ev->signaled`.
#[test]
fn ages_only_matter_for_signal_events() {
    let emu = emu_at(KFD_IOCTL_MINOR_VERSION);
    let debug = create(&emu, KFD_IOC_EVENT_DEBUG_EVENT, false).event_id;
    let mut entry = [aged(debug, 5)];
    assert_eq!(wait(&emu, &mut entry, false, 0), (Ok(0), TIMEOUT));
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    set(&emu, id).expect("set"); // age 2
    let mut current = [aged(id, 2)];
    assert_eq!(wait(&emu, &mut current, false, 0), (Ok(0), COMPLETE));
    assert_eq!(current[0].signal_event_data().last_event_age, 2);
    let mut plain = [data(id)];
    let before = plain[0].as_bytes().to_vec();
    assert_eq!(wait(&emu, &mut plain, false, 0), (Ok(0), COMPLETE));
    assert_eq!(
        plain[0].as_bytes(),
        &before[..],
        "nothing written without an age"
    );
}

// kfd_event_create: SIGNAL and DEBUG events both go through create_signal_event (a slot id,
// `*event_page_offset = KFD_MMAP_TYPE_EVENTS`, `*event_slot_index = id`, counted in
// signal_event_count); every other type, known or not, through create_other_event (ids from
// KFD_FIRST_NONSIGNAL_EVENT_ID, page offset 0). kfd_set_event / kfd_reset_event:
// event_can_be_cpu_signaled is `type == KFD_EVENT_TYPE_SIGNAL` only, else -EINVAL.
// destroy_event gives a DEBUG event's slot back (`signal_event_count--`).
#[test]
fn debug_events_take_signal_slots_but_the_cpu_cannot_set_them() {
    let emu = Emu::machine("mi300x");
    let signal = create(&emu, KFD_IOC_EVENT_SIGNAL, false);
    let debug = create(&emu, KFD_IOC_EVENT_DEBUG_EVENT, false);
    assert_eq!(debug.event_id, signal.event_id + 1);
    assert_eq!(debug.event_slot_index, debug.event_id);
    assert_eq!(debug.event_page_offset, signal.event_page_offset);
    assert_ne!(debug.event_page_offset, 0);
    assert_eq!(set(&emu, debug.event_id), Err(Errno::INVAL));
    assert_eq!(reset(&emu, debug.event_id), Err(Errno::INVAL));
    for (kind, n) in [
        (KFD_IOC_EVENT_HW_EXCEPTION, 0),
        (KFD_IOC_EVENT_NODECHANGE, 1),
        (0x77, 2),
    ] {
        let other = create(&emu, kind, false);
        assert_eq!(other.event_id, FIRST_NONSIGNAL_ID + n, "type {kind}");
        assert_eq!(other.event_page_offset, 0, "type {kind}");
        assert_eq!(set(&emu, other.event_id), Err(Errno::INVAL), "type {kind}");
    }
    // 256 slots before the page is mapped, id 0 reserved: 2 used, 253 left.
    let (ids, errno) = fill_signal_slots(&emu);
    assert_eq!((ids.len(), errno), (253, Errno::NOSPC));
    // Non-signal events do not use slots.
    create(&emu, KFD_IOC_EVENT_MEMORY, false);
    destroy(&emu, debug.event_id).expect("destroy");
    let (r, again) = try_create(&emu, KFD_IOC_EVENT_SIGNAL, 0);
    assert_eq!(
        (r, again.event_id),
        (Ok(0), debug.event_id),
        "the debug event's slot"
    );
}

// kfd_event_mmap: the mapping must not be larger than the page (`get_order(KFD_SIGNAL_EVENT_LIMIT
// * 8) < get_order(len)` is -EINVAL), needs a signal page (-EINVAL before the first signal
// event), and `p->signal_mapped_size = vma->vm_end - vma->vm_start`: create_signal_event then
// allows `signal_mapped_size / 8` slots instead of allocate_event_notification_slot's 256.
#[test]
fn mapping_the_event_page_sets_the_slot_limit() {
    let emu = Emu::machine("mi300x");
    let offset = |emu: &Emu, len: u64| emu.mmap_action(emu.kfd.as_fd(), KFD_MMAP_EVENTS, len);
    assert!(
        matches!(offset(&emu, 8192), MmapAction::Fail(Errno::INVAL)),
        "no signal page yet"
    );
    let first = create(&emu, KFD_IOC_EVENT_SIGNAL, false);
    assert_eq!(first.event_page_offset, KFD_MMAP_EVENTS);
    assert!(
        matches!(offset(&emu, 64 * 1024), MmapAction::Fail(Errno::INVAL)),
        "too large"
    );
    assert!(matches!(offset(&emu, 8192), MmapAction::Redirect { .. }));
    // 8 KiB: 1024 slots, id 0 reserved, one used.
    let (ids, errno) = fill_signal_slots(&emu);
    assert_eq!((ids.len(), errno), (1022, Errno::NOSPC));
    assert_eq!(ids.last(), Some(&1023));

    // The whole page: every slot.
    let full = Emu::machine("mi300x");
    create(&full, KFD_IOC_EVENT_SIGNAL, false);
    let len = u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8;
    assert!(matches!(offset(&full, len), MmapAction::Redirect { .. }));
    let (ids, errno) = fill_signal_slots(&full);
    assert_eq!(
        (ids.len(), errno),
        (KFD_SIGNAL_EVENT_LIMIT as usize - 2, Errno::NOSPC)
    );
}

/// `KFD_MMAP_TYPE_EVENTS`, what CREATE_EVENT returns for a signal event.
const KFD_MMAP_EVENTS: u64 = 0x2 << 62;

// kfd_kmap_event_page: -EINVAL when `p->signal_page` is already set (here: the kernel's own,
// made by an earlier signal event), -EINVAL for a GPU id the process does not know, then the
// bind, then -EINVAL for an idr id with no BO. kfd_event_page_set: -EINVAL when the BO is
// smaller than `KFD_SIGNAL_EVENT_LIMIT * 8`, leaving no page set; otherwise
// `signal_mapped_size = size`, so every slot can be used.
#[test]
fn a_user_event_page_must_hold_every_slot() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let page_size = u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8;
    let (small, _) = emu.alloc(gpu, va(1), page_size / 2, flags).expect("alloc");
    let (page, _) = emu.alloc(gpu, va(2), page_size, flags).expect("alloc");
    let unknown_gpu = (u64::from(gpu ^ 0x8000) << 32) | (page & 0xFFFF_FFFF);
    for (what, handle, errno) in [
        ("unknown gpu", unknown_gpu, Errno::INVAL),
        ("unknown id", page + 100, Errno::INVAL),
        ("too small", small, Errno::INVAL),
    ] {
        assert_eq!(
            try_create(&emu, KFD_IOC_EVENT_SIGNAL, handle).0,
            Err(errno),
            "{what}"
        );
    }
    assert_eq!(
        try_create(&emu, KFD_IOC_EVENT_SIGNAL, page).0,
        Ok(0),
        "no page was set"
    );
    let (ids, errno) = fill_signal_slots(&emu);
    assert_eq!(
        (ids.len(), errno),
        (KFD_SIGNAL_EVENT_LIMIT as usize - 2, Errno::NOSPC)
    );

    // The kernel's page, made by the first signal event, cannot be replaced.
    let mut other = Emu::machine("mi300x");
    other.acquire_all();
    let (page, _) = other.alloc(gpu, va(2), page_size, flags).expect("alloc");
    create(&other, KFD_IOC_EVENT_SIGNAL, false);
    assert_eq!(
        try_create(&other, KFD_IOC_EVENT_SIGNAL, page).0,
        Err(Errno::INVAL)
    );
}

// kfd_wait_on_events: alloc_event_waiters (kcalloc of `num_events` waiters) comes before any
// entry is copied, so an array too large for kmalloc is -ENOMEM even at a bad address; a
// reasonable count at a bad address is copy_from_user's -EFAULT. Both report
// KFD_IOC_WAIT_RESULT_FAIL.
#[test]
fn the_waiter_allocation_comes_before_the_copy() {
    let emu = Emu::machine("mi300x");
    for (n, errno) in [(1 << 24, Errno::NOMEM), (16, Errno::FAULT)] {
        let mut a = kfd_ioctl_wait_events_args {
            events_ptr: 8,
            num_events: n,
            wait_for_all: 1,
            timeout: 0,
            wait_result: 99,
        };
        assert_eq!(emu.ioctl(AMDKFD_IOC_WAIT_EVENTS, &mut a), Err(errno), "{n}");
        assert_eq!(a.wait_result, FAIL);
    }
}

// kfd_event_init_process: id 0 is allocated with a NULL pointer ("a fast path to ignore bogus
// events"), so lookup_event_by_id(p, 0) finds nothing: SET, RESET, DESTROY and WAIT of id 0
// are -EINVAL, and signal ids start at 1. DESTROY of a destroyed id is -EINVAL too.
#[test]
fn event_id_0_is_reserved_and_unusable() {
    let emu = Emu::machine("mi300x");
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, false).event_id;
    assert_eq!(id, 1);
    assert_eq!(set(&emu, 0), Err(Errno::INVAL));
    assert_eq!(reset(&emu, 0), Err(Errno::INVAL));
    assert_eq!(destroy(&emu, 0), Err(Errno::INVAL));
    assert_eq!(
        wait(&emu, &mut [data(0)], false, 0),
        (Err(Errno::INVAL), FAIL)
    );
    assert_eq!(destroy(&emu, id), Ok(0));
    assert_eq!(destroy(&emu, id), Err(Errno::INVAL));
}

// kfd_wait_on_events: with entries not all activated the caller sleeps
// (schedule_timeout) and re-tests the condition on each wake-up; set_event marks the waiter
// activated (`WRITE_ONCE(waiter->activated, true)`) and, since a waiter is queued on the
// auto-reset event, leaves it unsignaled (`!waitqueue_active`). A finite timeout ends the
// wait with KFD_IOC_WAIT_RESULT_TIMEOUT and ret 0, not before it has passed.
#[test]
fn wait_for_all_completes_when_the_last_event_is_set_and_times_out_otherwise() {
    let emu = Emu::machine("mi300x");
    let first = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    let last = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    set(&emu, first).expect("set");
    let start = std::time::Instant::now();
    assert_eq!(
        wait(&emu, &mut [data(first), data(last)], true, 50),
        (Ok(0), TIMEOUT)
    );
    assert!(start.elapsed() >= std::time::Duration::from_millis(50));
    set(&emu, first).expect("set");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Infinite: only the SET below can end it, whether it comes before or during it.
            tx.send(wait(
                &emu,
                &mut [data(first), data(last)],
                true,
                0xFFFF_FFFF,
            ))
            .expect("send");
        });
        set(&emu, last).expect("set");
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the waiter returns");
        assert_eq!(r, (Ok(0), COMPLETE));
    });
    // Both signals went to that wait.
    for id in [first, last] {
        assert_eq!(wait(&emu, &mut [data(id)], false, 0), (Ok(0), TIMEOUT));
    }
}

// kfd_event_page_set: `p->signal_mapped_size = size`, the whole BO, and
// allocate_event_notification_slot allocates ids below `signal_mapped_size / 8` with no cap
// at KFD_SIGNAL_EVENT_LIMIT: a 64 KiB user page gives 8192 slots (id 0 reserved), though only
// the first KFD_SIGNAL_EVENT_LIMIT can be found by an interrupt.
#[test]
fn a_larger_user_event_page_gives_more_slots() {
    let mut emu = Emu::machine("mi300x");
    emu.acquire_all();
    let gpu = emu.gpu();
    let flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let size = 2 * u64::from(KFD_SIGNAL_EVENT_LIMIT) * 8;
    let (page, _) = emu.alloc(gpu, va(1), size, flags).expect("alloc");
    assert_eq!(try_create(&emu, KFD_IOC_EVENT_SIGNAL, page).0, Ok(0));
    let (ids, errno) = fill_signal_slots(&emu);
    assert_eq!(errno, Errno::NOSPC);
    assert_eq!(ids.len(), 2 * KFD_SIGNAL_EVENT_LIMIT as usize - 2);
    assert_eq!(ids.last(), Some(&(2 * KFD_SIGNAL_EVENT_LIMIT - 1)));
    // The slots past the first page are CPU-settable signal events like the others.
    let high = 2 * KFD_SIGNAL_EVENT_LIMIT - 1;
    set(&emu, high).expect("set");
    assert_eq!(wait(&emu, &mut [data(high)], false, 0), (Ok(0), COMPLETE));
}

// copy_signaled_event_data writes back only what it has to (ages of age-tracked signal
// events, memory exception data): a read-only array is fine for a plain wait, while an age it
// cannot write is -EFAULT with KFD_IOC_WAIT_RESULT_FAIL, after the signal was consumed.
#[test]
fn only_a_needed_write_back_can_fault() {
    let emu = emu_at(KFD_IOCTL_MINOR_VERSION);
    let id = create(&emu, KFD_IOC_EVENT_SIGNAL, true).event_id;
    let memory = Anon::new(PAGE);
    let mut waits = Vec::new();
    for entry in [data(id), aged(id, 1)] {
        protect(&memory, 0, MprotectFlags::READ | MprotectFlags::WRITE);
        emu.caller
            .write(memory.addr, entry.as_bytes())
            .expect("write");
        protect(&memory, 0, MprotectFlags::READ);
        set(&emu, id).expect("set");
        let mut a = kfd_ioctl_wait_events_args {
            events_ptr: memory.addr,
            num_events: 1,
            wait_for_all: 0,
            timeout: 0,
            wait_result: 99,
        };
        waits.push((emu.ioctl(AMDKFD_IOC_WAIT_EVENTS, &mut a), a.wait_result));
    }
    assert_eq!(waits, [(Ok(0), COMPLETE), (Err(Errno::FAULT), FAIL)]);
    assert_eq!(
        wait(&emu, &mut [data(id)], false, 0),
        (Ok(0), TIMEOUT),
        "the faulting wait consumed the signal"
    );
}
