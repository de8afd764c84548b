//! [`SmiEvents`], the owner of an SMI event fd.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use crate::GpuId;
use crate::abi::SmiEventMask;
use crate::error::{Errno, Error, Result};

/// An SMI event file: set an event mask, read the kernel's text records.
///
/// Reads never block (the kernel's fd is non-blocking by nature); poll [`AsFd`] for
/// readiness. Records are lines; [`SmiEvents::read_line`] reassembles records split across
/// reads.
#[derive(Debug)]
pub struct SmiEvents {
    fd: OwnedFd,
    gpu_id: u32,
    pending: Vec<u8>,
}

impl AsFd for SmiEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl SmiEvents {
    /// Wraps an SMI event fd obtained elsewhere (passed over a socket, or a pipe in tests).
    pub fn from_fd(fd: OwnedFd, gpu_id: impl Into<GpuId>) -> SmiEvents {
        SmiEvents {
            fd,
            gpu_id: gpu_id.into().get(),
            pending: Vec::new(),
        }
    }

    /// The GPU whose events this fd carries.
    pub fn gpu_id(&self) -> GpuId {
        GpuId(self.gpu_id)
    }

    /// Replaces the event mask (bit `i - 1` enables event `i`; 0 disables everything).
    pub fn set_mask(&self, mask: SmiEventMask) -> Result<()> {
        let bytes = mask.bits().to_ne_bytes();
        match rustix::io::write(&self.fd, &bytes) {
            Ok(8) => Ok(()),
            Ok(_) => Err(Error::SmiIo {
                op: "write",
                errno: Errno::IO,
            }),
            Err(errno) => Err(Error::SmiIo { op: "write", errno }),
        }
    }

    /// Reads what the kernel has, up to `buf.len()` bytes (at least one, for a non-empty
    /// `buf`); 0 when nothing is pending (the kernel's `EAGAIN`).
    ///
    /// End of file — the writer of a pipe or socket gone; the kernel's own fd never ends — is
    /// [`Error::SmiEndOfStream`], not 0: a caller that polls and reads again would spin.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match rustix::io::read(&self.fd, buf) {
            Ok(0) => Err(Error::SmiEndOfStream {
                gpu_id: crate::GpuId(self.gpu_id),
                unfinished: self.pending.len(),
            }),
            Ok(n) => Ok(n),
            Err(Errno::AGAIN) | Err(Errno::INTR) => Ok(0),
            Err(errno) => Err(Error::SmiIo { op: "read", errno }),
        }
    }

    /// The next complete record (without its newline), or `None` when none is pending yet;
    /// [`Error::SmiEndOfStream`] after the last record when the fd reached end of file.
    pub fn read_line(&mut self) -> Result<Option<String>> {
        loop {
            if let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                return Ok(Some(
                    String::from_utf8_lossy(&line[..line.len() - 1]).into_owned(),
                ));
            }
            let mut buf = [0u8; 1024];
            let n = match self.read(&mut buf) {
                Err(e @ Error::SmiEndOfStream { .. }) => {
                    // What never got its newline never will: report it once, then forget it.
                    self.pending.clear();
                    return Err(e);
                }
                other => other?,
            };
            if n == 0 {
                return Ok(None);
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }
}
