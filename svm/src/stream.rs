//! [`SmiStream`]: typed events from an SMI event fd, with `poll`-based waiting.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use kfd_ioctl::abi::SmiEventMask;
use kfd_ioctl::{Errno, Kfd, SmiEvents};
use rustix::event::{PollFd, PollFlags, Timespec};

use crate::error::{Error, Result};
use crate::smi::SmiEvent;

/// How much one read takes from the kernel (its FIFO holds 8 KiB at most; older kernels 1 KiB).
const READ_CHUNK: usize = 4096;

/// A stream of [`SmiEvent`]s from one GPU's SMI event fd.
///
/// The kernel hands out bytes, not records: a read may end in the middle of a record and the
/// next one continues it. The stream keeps the unfinished tail and yields only whole records.
/// A record that does not match its format is reported as [`Error::SmiParse`] and consumed;
/// the stream goes on with the next.
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
    records: Records,
}

impl AsFd for SmiStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

impl SmiStream {
    /// Opens an SMI event fd on `gpu_id` (an acquired GPU of this process) and enables `mask`.
    pub fn open(kfd: &Kfd, gpu_id: u32, mask: SmiEventMask) -> Result<SmiStream> {
        SmiStream::new(kfd.smi_events(gpu_id)?, mask)
    }

    /// Wraps an open SMI event fd and enables `mask` on it.
    pub fn new(events: SmiEvents, mask: SmiEventMask) -> Result<SmiStream> {
        events.set_mask(mask)?;
        Ok(SmiStream {
            events,
            records: Records::default(),
        })
    }

    /// Replaces the event mask.
    pub fn set_mask(&self, mask: SmiEventMask) -> Result<()> {
        Ok(self.events.set_mask(mask)?)
    }

    /// The GPU whose events these are.
    pub fn gpu_id(&self) -> u32 {
        self.events.gpu_id()
    }

    /// The fd, and any bytes read from it that did not yet form a whole record.
    pub fn into_inner(self) -> (SmiEvents, Vec<u8>) {
        (self.events, self.records.unread)
    }

    /// The next event, waiting up to `timeout` for one (`None`: as long as it takes;
    /// `Some(Duration::ZERO)`: not at all). `Ok(None)` when the time ran out.
    pub fn next_event(&mut self, timeout: Option<Duration>) -> Result<Option<SmiEvent>> {
        let deadline = timeout.map(|t| Instant::now().checked_add(t));
        loop {
            if let Some(record) = self.records.take() {
                return parse_record(&record).map(Some);
            }
            if self.fill()? > 0 {
                continue;
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
    /// is pending, or after an error of the fd itself.
    pub fn pending(&mut self) -> Pending<'_> {
        Pending {
            stream: self,
            done: false,
        }
    }

    /// Reads what the kernel has (never blocks); the number of bytes read.
    fn fill(&mut self) -> Result<usize> {
        let mut chunk = [0u8; READ_CHUNK];
        let n = self.events.read(&mut chunk)?;
        self.records.push(&chunk[..n]);
        Ok(n)
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

/// Bytes read from an SMI fd, cut into records at each newline.
#[derive(Debug, Default)]
struct Records {
    /// Bytes read but not yet returned as records (whole records, then at most one unfinished
    /// one).
    unread: Vec<u8>,
}

impl Records {
    fn push(&mut self, bytes: &[u8]) {
        self.unread.extend_from_slice(bytes);
    }

    /// Removes the first whole record and returns it without its newline.
    fn take(&mut self) -> Option<Vec<u8>> {
        let end = self.unread.iter().position(|&b| b == b'\n')?;
        let mut record: Vec<u8> = self.unread.drain(..=end).collect();
        record.pop();
        Some(record)
    }
}

/// Decodes one record read from the fd.
fn parse_record(record: &[u8]) -> Result<SmiEvent> {
    let line = String::from_utf8_lossy(record);
    SmiEvent::parse(&line).map_err(|source| Error::SmiParse {
        line: line.into_owned(),
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

    const RECORDS: &[&str] = &[
        "5 1000 -42 @7f0000(200) 0->1a2b 1a2b:ffffffff 0\n",
        "6 2000 -42 @7f0000(200) 0->1a2b 0 0\n",
        "a 3000 -42 1a2b \0\n",
        "1 2a:my task\n",
        "7 4000 -42 @7f0001(1a2b) W\n",
    ];

    #[test]
    fn records_split_across_reads_are_reassembled() {
        let all: Vec<u8> = RECORDS.concat().into_bytes();
        // Every way of cutting the byte stream in two, and byte-by-byte delivery.
        for cut in 0..=all.len() {
            let mut records = Records::default();
            let mut out = Vec::new();
            for piece in [&all[..cut], &all[cut..]] {
                records.push(piece);
                while let Some(r) = records.take() {
                    out.push(parse_record(&r).unwrap());
                }
            }
            assert_eq!(out.len(), RECORDS.len(), "cut at {cut}");
            for (event, line) in out.iter().zip(RECORDS) {
                assert_eq!(format!("{event}\n"), *line);
            }
            assert!(records.unread.is_empty());
        }
        let mut records = Records::default();
        let mut n = 0;
        for b in &all {
            records.push(std::slice::from_ref(b));
            n += usize::from(records.take().is_some());
        }
        assert_eq!(n, RECORDS.len());
    }

    #[test]
    fn an_unfinished_record_waits_for_its_newline() {
        let mut records = Records::default();
        records.push(b"6 2000 -42 @7f0000(200) 0->1a");
        assert_eq!(records.take(), None);
        records.push(b"2b 0 0\n5 1");
        assert_eq!(
            records.take().as_deref(),
            Some(&b"6 2000 -42 @7f0000(200) 0->1a2b 0 0"[..])
        );
        assert_eq!(records.take(), None);
        assert_eq!(records.unread, b"5 1");
    }

    #[test]
    fn a_bad_record_is_an_error_naming_it() {
        match parse_record(b"7 1 -2 @10(1a2b) X\xff") {
            Err(Error::SmiParse { line, source }) => {
                assert_eq!(line, "7 1 -2 @10(1a2b) X\u{fffd}");
                assert_eq!(source.offset, 17);
            }
            other => panic!("{other:?}"),
        }
    }
}
