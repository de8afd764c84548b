//! Waiting for a queue's submission: the one loop [`SdmaQueue::wait`](crate::SdmaQueue::wait)
//! and [`Pm4Queue::wait`](crate::Pm4Queue::wait) share.

use std::time::{Duration, Instant};

use std::sync::{Mutex, PoisonError};

use kfd_ioctl::{Event, Kfd, MemoryFault, WaitOutcome};

use crate::error::{Error, Result};

/// When a wait of `timeout` ends: `Instant::now() + timeout`, or never when that does not
/// fit in an `Instant` (`Duration::MAX` means wait forever, everywhere in this crate).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    /// A deadline `timeout` from now; never, when that overflows `Instant`.
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Deadline(Instant::now().checked_add(timeout))
    }

    /// The time left (`Duration::MAX` for a wait without end).
    pub(crate) fn left(&self) -> Duration {
        self.0.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }

    /// The time left, at most `slice`, in whole milliseconds for WAIT_EVENTS.
    pub(crate) fn slice_ms(&self, slice: Duration) -> u32 {
        u32::try_from(self.left().min(slice).as_millis()).unwrap_or(u32::MAX)
    }
}

/// The VM fault a queue stopped at, once a wait saw it: from then on the queue is dead
/// ([`Error::QueueDead`]): the kernel never restores a process's queues after a VM fault.
#[derive(Debug, Default)]
pub(crate) struct Dead(Mutex<Option<MemoryFault>>);

impl Dead {
    /// A new queue's state: dead from the start when a queue of the process on its GPU
    /// already reported a VM fault (`fault`): the kernel creates it evicted
    /// (`create_queue_cpsch` sets `is_evicted = !!qpd->evicted`, which `kfd_dqm_evict_pasid`
    /// raised for good), so it would never run what is submitted.
    pub(crate) fn new(fault: Option<MemoryFault>) -> Dead {
        Dead(Mutex::new(fault))
    }

    /// The fault, once seen.
    pub(crate) fn fault(&self) -> Option<MemoryFault> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails with [`Error::QueueDead`] once the queue stopped at a fault.
    pub(crate) fn check(&self) -> Result<()> {
        match self.fault() {
            Some(fault) => Err(Error::QueueDead(fault)),
            None => Ok(()),
        }
    }

    /// A queue's wait: done already is done (even on a dead queue: the fence landed
    /// before the fault); a dead queue says so; else [`wait_for_fence`], remembering a VM
    /// fault it reports.
    pub(crate) fn wait(
        &self,
        kfd: &Kfd,
        done_event: &Event,
        fault: &Event,
        timeout: Duration,
        is_done: impl Fn() -> Result<bool>,
    ) -> Result<()> {
        if is_done()? {
            return Ok(());
        }
        self.check()?;
        let result = wait_for_fence(kfd, done_event, fault, timeout, is_done);
        if let Err(Error::VmFault(f)) = &result {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(*f);
        }
        result
    }
}

/// Waits up to `timeout` (forever for `Duration::MAX`) until `is_done` says the submission's fence landed, through
/// WAIT_EVENTS on the queue's completion event (`done_event`, a TRAP's or a RELEASE_MEM's)
/// and its memory-fault event (`fault`), in slices of at most 20 ms, so that a completion
/// event another waiter consumed costs at most one slice.
///
/// # Errors
/// [`Error::VmFault`] when the GPU took a VM fault before the fence landed (the queue has
/// stopped); [`Error::Timeout`]; [`Error::Kfd`] when WAIT_EVENTS fails; what `is_done` fails
/// with.
pub(crate) fn wait_for_fence(
    kfd: &Kfd,
    done_event: &Event,
    fault: &Event,
    timeout: Duration,
    is_done: impl Fn() -> Result<bool>,
) -> Result<()> {
    let deadline = Deadline::after(timeout);
    loop {
        if is_done()? {
            return Ok(());
        }
        let left = deadline.left();
        let ms = deadline.slice_ms(Duration::from_millis(20));
        if let WaitOutcome::Complete(faults) = kfd.wait_events(&[done_event, fault], false, ms)?
            && let Some(Some(memory_fault)) = faults.get(1)
        {
            if is_done()? {
                return Ok(());
            }
            return Err(Error::VmFault(*memory_fault));
        }
        if left.is_zero() {
            return if is_done()? {
                Ok(())
            } else {
                Err(Error::Timeout(timeout))
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Instant + Duration::MAX` overflows (and panics); the deadline is then "never".
    #[test]
    fn duration_max_is_a_deadline_that_never_comes() {
        let forever = Deadline::after(Duration::MAX);
        assert_eq!(forever.left(), Duration::MAX);
        assert_eq!(forever.slice_ms(Duration::from_millis(20)), 20);
        let soon = Deadline::after(Duration::from_millis(0));
        assert_eq!(soon.left(), Duration::ZERO);
        assert_eq!(soon.slice_ms(Duration::from_millis(20)), 0);
    }
}
