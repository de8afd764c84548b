//! [`SmiStream`]: typed events from an SMI event fd, with `poll`-based waiting.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use kfd_ioctl::abi::SmiEventMask;
use kfd_ioctl::{Errno, GpuId, Kfd, SmiEvents};
use rustix::event::{PollFd, PollFlags, Timespec};

use crate::SmiEvent;
use crate::error::{Error, Result};

/// A stream of [`SmiEvent`]s from one GPU's SMI event fd.
///
/// The kernel hands out bytes, not records: a read may end in the middle of a record and the
/// next one continues it. The stream yields only whole records; the unfinished tail waits in
/// [`SmiEvents::read_line`] for the rest.
/// A record that does not match its format is reported as [`Error::SmiParse`] and consumed;
/// the stream goes on with the next. An fd whose writer is gone (a pipe or socket passed in
/// with [`SmiStream::new`]; the kernel's own fd never ends) ends the stream with
/// [`kfd_ioctl::Error::SmiEndOfStream`] (see [`Error::is_end_of_stream`]) after its last
/// record, and keeps answering that, without waiting.
///
/// ```no_run
/// use std::time::Duration;
/// use kfd_ioctl::{Kfd, abi::SmiEventMask};
/// use kfd_svm::SmiStream;
///
/// let kfd = Kfd::open()?;
/// # let gpu_id = 0x1a2b;
/// let mut stream = SmiStream::open(
///     &kfd,
///     gpu_id,
///     SmiEventMask::MIGRATE_START | SmiEventMask::MIGRATE_END,
/// )?;
/// while let Some(event) = stream.next_event(Some(Duration::from_secs(1)))? {
///     println!("{event}");
/// }
/// # Ok::<(), kfd_svm::Error>(())
/// ```
#[derive(Debug)]
pub struct SmiStream {
    events: SmiEvents,
}

impl AsFd for SmiStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

impl SmiStream {
    /// Opens an SMI event fd on `gpu_id` (an acquired GPU of this process) and enables `mask`.
    pub fn open(kfd: &Kfd, gpu_id: impl Into<GpuId>, mask: SmiEventMask) -> Result<SmiStream> {
        SmiStream::new(kfd.smi_events(gpu_id)?, mask)
    }

    /// Wraps an open SMI event fd and enables `mask` on it.
    pub fn new(events: SmiEvents, mask: SmiEventMask) -> Result<SmiStream> {
        events.set_mask(mask)?;
        Ok(SmiStream { events })
    }

    /// Replaces the event mask.
    pub fn set_mask(&self, mask: SmiEventMask) -> Result<()> {
        Ok(self.events.set_mask(mask)?)
    }

    /// The GPU whose events these are.
    pub fn gpu_id(&self) -> GpuId {
        self.events.gpu_id()
    }

    /// The SMI event fd (with any unfinished record it buffered).
    pub fn into_inner(self) -> SmiEvents {
        self.events
    }

    /// The next event, waiting up to `timeout` for one (`None`: as long as it takes;
    /// `Some(Duration::ZERO)`: not at all). `Ok(None)` when the time ran out; an error for
    /// which [`Error::is_end_of_stream`] holds when the fd ended and nothing more can come.
    pub fn next_event(&mut self, timeout: Option<Duration>) -> Result<Option<SmiEvent>> {
        let deadline = timeout.map(|t| Instant::now().checked_add(t));
        loop {
            // `read_line` keeps a record split across reads until its newline arrives.
            if let Some(record) = self.events.read_line()? {
                return parse_record(&record).map(Some);
            }
            let wait = match deadline {
                None | Some(None) => None,
                Some(Some(deadline)) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Ok(None),
                },
            };
            self.wait_readable(wait)?;
        }
    }

    /// The events already available, without waiting; the iterator ends when no whole record
    /// is pending, or after an error of the fd itself (end of stream included).
    pub fn pending(&mut self) -> Pending<'_> {
        Pending {
            stream: self,
            done: false,
        }
    }

    /// Waits until the fd is readable or `wait` has passed (`None`: no limit).
    fn wait_readable(&self, wait: Option<Duration>) -> Result<()> {
        // A wait too long for a timespec is no limit at all.
        let timeout = wait.and_then(|w| Timespec::try_from(w).ok());
        let mut fds = [PollFd::new(&self.events, PollFlags::IN)];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(errno) => Err(Error::Poll { errno }),
        }
    }
}

/// Decodes one record read from the fd.
fn parse_record(line: &str) -> Result<SmiEvent> {
    SmiEvent::parse(line).map_err(|source| Error::SmiParse {
        line: line.to_owned(),
        source,
    })
}

/// The events an [`SmiStream`] has available now; see [`SmiStream::pending`].
#[derive(Debug)]
pub struct Pending<'a> {
    stream: &'a mut SmiStream,
    done: bool,
}

impl Iterator for Pending<'_> {
    type Item = Result<SmiEvent>;

    fn next(&mut self) -> Option<Result<SmiEvent>> {
        if self.done {
            return None;
        }
        match self.stream.next_event(Some(Duration::ZERO)) {
            Ok(event) => {
                self.done = event.is_none();
                event.map(Ok)
            }
            Err(e @ Error::SmiParse { .. }) => Some(Err(e)),
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_record_is_an_error_naming_it() {
        match parse_record("7 1 -2 @10(1a2b) X") {
            Err(Error::SmiParse { line, source }) => {
                assert_eq!(line, "7 1 -2 @10(1a2b) X");
                assert_eq!(source.offset, 17);
            }
            other => panic!("{other:?}"),
        }
        // A QUEUE_RESTORE record with the NUL byte some kernels write decodes.
        assert!(parse_record("a 3000 -42 1a2b \0").is_ok());
    }

    /// A stream over a pipe whose writer wrote `data` and closed.
    fn closed_pipe_stream(data: &[u8]) -> SmiStream {
        let (reader, writer) = rustix::pipe::pipe().expect("pipe");
        assert_eq!(rustix::io::write(&writer, data).expect("write"), data.len());
        drop(writer);
        SmiStream {
            events: SmiEvents::from_fd(reader, 0x1a2b),
        }
    }

    /// Before, end of file read as "nothing yet": `poll` said readable at once, forever, and
    /// `next_event` spun at 100 % CPU until the timeout (or for ever without one).
    #[test]
    #[cfg_attr(miri, ignore = "pipes are system calls")]
    fn a_stream_whose_writer_closed_ends_at_once_after_its_records() {
        let mut stream = closed_pipe_stream(b"3 1\n4 2\n");
        let limit = Duration::from_secs(10);
        assert!(matches!(
            stream.next_event(Some(limit)),
            Ok(Some(SmiEvent::GpuPreReset { seq: 1, .. }))
        ));
        assert!(matches!(
            stream.next_event(Some(limit)),
            Ok(Some(SmiEvent::GpuPostReset { seq: 2, .. }))
        ));
        let started = Instant::now();
        for _ in 0..3 {
            let end = stream.next_event(Some(limit)).unwrap_err();
            assert!(end.is_end_of_stream(), "{end}");
            let end = stream.next_event(None).unwrap_err();
            assert!(end.is_end_of_stream(), "{end}");
        }
        assert!(started.elapsed() < limit, "waited {:?}", started.elapsed());
        // `pending` ends too, with the same error, once.
        let rest: Vec<_> = stream.pending().collect();
        assert_eq!(rest.len(), 1);
        assert!(matches!(&rest[0], Err(e) if e.is_end_of_stream()));
    }

    #[test]
    #[cfg_attr(miri, ignore = "pipes are system calls")]
    fn an_unfinished_last_record_is_reported_with_the_end() {
        let mut stream = closed_pipe_stream(b"3 1\n4 ");
        assert!(stream.next_event(Some(Duration::ZERO)).unwrap().is_some());
        match stream.next_event(Some(Duration::from_secs(10))) {
            Err(Error::Kfd(kfd_ioctl::Error::SmiEndOfStream {
                gpu_id: kfd_ioctl::GpuId(0x1a2b),
                unfinished: 2,
            })) => {}
            other => panic!("{other:?}"),
        }
    }
}
