//! Events (`kfd_events.c`): a process's event table, its signal page and its waiters; the
//! ioctls over them are in [`event_ioctls`](super::event_ioctls).
//!
//! Signal events take ids from 1 (0 is reserved) up to the slots of the signal page, which is
//! either the kernel's (in the process's `/dev/kfd` memfd) or a BO the process passes in
//! `event_page_offset` on its first CREATE_EVENT (what libhsakmt does on dGPUs); other events
//! take ids from `0x4000_0000`. A waiter is activated by SET_EVENT while it waits, and an
//! auto-reset event is consumed by the waiter that sees it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use kfd_ioctl::abi::{
    KFD_IOC_EVENT_DEBUG_EVENT, KFD_IOC_EVENT_SIGNAL, KFD_IOC_WAIT_RESULT_COMPLETE,
    KFD_IOC_WAIT_RESULT_FAIL, KFD_IOC_WAIT_RESULT_TIMEOUT,
};

use super::trace;

/// The first id of a non-signal event (`KFD_FIRST_NONSIGNAL_EVENT_ID`).
pub(super) const FIRST_NONSIGNAL_ID: u32 = 0x4000_0000;
/// The signal slots of the kernel's own page until user space maps it (`256 * 8` bytes).
pub(super) const KERNEL_PAGE_MAPPED_SIZE: u64 = 256 * 8;
/// An unsignaled slot.
pub(super) const UNSIGNALED: u64 = u64::MAX;
/// `KFD_EVENT_TIMEOUT_INFINITE`.
pub(super) const TIMEOUT_INFINITE: u32 = 0xFFFF_FFFF;
/// The kernel's `struct kfd_event_waiter` (a wait-queue entry, an event pointer, two flags).
pub(super) const WAITER_SIZE: u64 = 56;
/// How often a blocked wait checks that its caller is still there.
pub(super) const LIVENESS_PERIOD: Duration = Duration::from_millis(50);

/// Where a process's signal slots are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SignalPage {
    /// The kernel's page, in the process's `/dev/kfd` memfd.
    Kernel,
    /// A BO the process handed in (its backing).
    Bo { backing: u64 },
}

/// One event.
#[derive(Debug)]
pub(super) struct Event {
    pub(super) kind: u32,
    pub(super) auto_reset: bool,
    pub(super) signaled: bool,
    /// `event_age`, starting at 1; 0 is reserved.
    pub(super) age: u64,
    /// Waiters waiting on it: (waiter, index in its list).
    pub(super) waiting: Vec<(u64, usize)>,
    /// `kfd_hsa_memory_exception_data` of a memory event.
    pub(super) memory_exception: [u8; 32],
}

/// One slot of a waiter (one entry of a WAIT_EVENTS array).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    /// `None` once the event was destroyed.
    pub(super) event: Option<u32>,
    pub(super) activated: bool,
    pub(super) age_enabled: bool,
}

/// A process's events and the waits in progress.
#[derive(Debug, Default)]
pub(super) struct EventTable {
    pub(super) events: BTreeMap<u32, Event>,
    /// Signal (and debug) events, plus the reserved id 0.
    pub(super) signal_count: u64,
    /// Bytes of signal slots (0 until a page exists).
    pub(super) mapped_size: u64,
    pub(super) page: Option<SignalPage>,
    pub(super) waiters: HashMap<u64, Vec<Slot>>,
    pub(super) next_waiter: u64,
}

impl EventTable {
    /// The signal page, once the first signal event made or took one.
    pub(super) fn signal_page(&self) -> Option<SignalPage> {
        self.page
    }
}

/// A live event, for the leak report.
pub(super) struct LiveEvent<'a>(u32, &'a Event);

impl fmt::Display for LiveEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event id={:#x} type={}{}",
            self.0,
            trace::event_type(self.1.kind),
            if self.1.auto_reset { " auto-reset" } else { "" }
        )
    }
}

impl EventTable {
    /// An empty table: id 0 is reserved, so the signal count starts at 1.
    pub(super) fn new() -> EventTable {
        EventTable {
            signal_count: 1,
            ..EventTable::default()
        }
    }

    /// The live events.
    pub(super) fn live(&self) -> impl Iterator<Item = LiveEvent<'_>> + '_ {
        self.events.iter().map(|(&id, ev)| LiveEvent(id, ev))
    }

    pub(super) fn is_signal(kind: u32) -> bool {
        kind == KFD_IOC_EVENT_SIGNAL || kind == KFD_IOC_EVENT_DEBUG_EVENT
    }

    /// The lowest free id in `[from, to)`.
    pub(super) fn free_id(&self, from: u32, to: u32) -> Option<u32> {
        let mut candidate = from;
        for &id in self.events.range(from..to).map(|(id, _)| id) {
            if id != candidate {
                break;
            }
            candidate = candidate.checked_add(1)?;
        }
        (candidate < to).then_some(candidate)
    }

    /// `set_event`: wakes the waiters (an auto-reset event is consumed by them).
    pub(super) fn set(&mut self, id: u32) {
        let Some(ev) = self.events.get_mut(&id) else {
            return;
        };
        ev.signaled = !ev.auto_reset || ev.waiting.is_empty();
        ev.age = ev.age.wrapping_add(1);
        if ev.age == 0 {
            // Never wrap back to the reserved ages 0 and 1.
            ev.age = 2;
        }
        for &(waiter, index) in &ev.waiting {
            if let Some(slot) = self.waiters.get_mut(&waiter).and_then(|s| s.get_mut(index)) {
                slot.activated = true;
            }
        }
    }

    /// Removes a waiter's registrations.
    pub(super) fn unregister(&mut self, waiter: u64) {
        if let Some(slots) = self.waiters.remove(&waiter) {
            for slot in slots {
                if let Some(ev) = slot.event.and_then(|id| self.events.get_mut(&id)) {
                    ev.waiting.retain(|&(w, _)| w != waiter);
                }
            }
        }
    }

    /// `test_event_condition`.
    pub(super) fn condition(&self, waiter: u64, all: bool) -> u32 {
        let Some(slots) = self.waiters.get(&waiter) else {
            return KFD_IOC_WAIT_RESULT_FAIL;
        };
        let mut activated = 0;
        for slot in slots {
            if slot.event.is_none() {
                return KFD_IOC_WAIT_RESULT_FAIL;
            }
            if slot.activated {
                if !all {
                    return KFD_IOC_WAIT_RESULT_COMPLETE;
                }
                activated += 1;
            }
        }
        if activated == slots.len() {
            KFD_IOC_WAIT_RESULT_COMPLETE
        } else {
            KFD_IOC_WAIT_RESULT_TIMEOUT
        }
    }
}
