//! Waiting for a queue's submission: the one loop [`SdmaQueue::wait`](crate::SdmaQueue::wait)
//! and [`Pm4Queue::wait`](crate::Pm4Queue::wait) share.

use std::time::{Duration, Instant};

use kfd_ioctl::{Event, Kfd, WaitOutcome};

use crate::error::{Error, Result};

/// Waits up to `timeout` until `is_done` says the submission's fence landed, through
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
    let deadline = Instant::now() + timeout;
    loop {
        if is_done()? {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let slice = left.min(Duration::from_millis(20));
        let ms = u32::try_from(slice.as_millis()).unwrap_or(u32::MAX);
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
