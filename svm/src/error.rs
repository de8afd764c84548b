//! The error type of this crate.

use std::fmt;

use kfd_ioctl::{Errno, ErrnoName};

use crate::SmiParseError;

/// Why a range was refused before any ioctl: the kernel would answer `EINVAL` for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeProblem {
    /// `size` is 0.
    ZeroSize,
    /// `start` is 0 (the kernel refuses it like a zero size).
    ZeroStart,
    /// `start` is not a multiple of the page size.
    StartUnaligned,
    /// `size` is not a multiple of the page size.
    SizeUnaligned,
}

impl fmt::Display for RangeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RangeProblem::ZeroSize => "the size is zero",
            RangeProblem::ZeroStart => "the start address is zero",
            RangeProblem::StartUnaligned => "the start is not page aligned",
            RangeProblem::SizeUnaligned => "the size is not a whole number of pages",
        })
    }
}

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An ioctl or SMI fd operation failed (the kernel's errno, the ioctl, the range).
    #[error(transparent)]
    Kfd(#[from] kfd_ioctl::Error),
    /// A range the kernel would refuse with `EINVAL`, caught before the ioctl.
    #[error("SVM range of {size:#x} bytes at {start:#x}: {problem}")]
    Range {
        /// The start address in bytes.
        start: u64,
        /// The size in bytes.
        size: u64,
        /// What is wrong with it.
        problem: RangeProblem,
    },
    /// Mapping the memory of an [`SvmBuffer`](crate::SvmBuffer) failed.
    #[error("mmap of {len} bytes for an SVM buffer failed: {}", ErrnoName(*.errno))]
    Mmap {
        /// The length asked for (page rounded, plus the alignment slack).
        len: usize,
        /// What the kernel said.
        errno: Errno,
    },
    /// A GET_ATTR answer carried an attribute type that is not a possible answer.
    #[error("GET_ATTR answered attribute type {attr_type} (value {value:#x}) to {query}")]
    UnexpectedAttr {
        /// The type the kernel wrote back.
        attr_type: u32,
        /// The value the kernel wrote back.
        value: u32,
        /// What was asked.
        query: &'static str,
    },
    /// A copy into or out of an [`SvmBuffer`](crate::SvmBuffer) would leave the buffer.
    #[error("{len} bytes at offset {offset} do not fit the {buffer_len}-byte SVM buffer")]
    OutOfBounds {
        /// The offset of the copy.
        offset: usize,
        /// The length of the copy.
        len: usize,
        /// The length of the buffer.
        buffer_len: usize,
    },
    /// An SMI record did not match the kernel's format for its event id.
    #[error("SMI record {line:?}: {source}")]
    SmiParse {
        /// The record, without its newline (non-UTF-8 bytes replaced).
        line: String,
        /// What did not match.
        #[source]
        source: SmiParseError,
    },
    /// Polling the SMI event fd failed.
    #[error("poll on the SMI event fd failed: {}", ErrnoName(*.errno))]
    Poll {
        /// What the kernel said.
        errno: Errno,
    },
}

impl Error {
    /// The errno the kernel returned, or, for [`Error::Range`], the `EINVAL` it would return.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Kfd(e) => e.errno(),
            Error::Range { .. } => Some(Errno::INVAL),
            Error::Mmap { errno, .. } | Error::Poll { errno } => Some(*errno),
            _ => None,
        }
    }
}

impl Error {
    /// Whether an SMI stream ended: its fd's writer is gone and no more records can come.
    pub fn is_end_of_stream(&self) -> bool {
        matches!(self, Error::Kfd(kfd_ioctl::Error::SmiEndOfStream { .. }))
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_errors_read_like_the_kernel_refusal() {
        let e = Error::Range {
            start: 0x7f00_0000_1000,
            size: 0x800,
            problem: RangeProblem::SizeUnaligned,
        };
        assert_eq!(
            e.to_string(),
            "SVM range of 0x800 bytes at 0x7f0000001000: the size is not a whole number of pages"
        );
        assert_eq!(e.errno(), Some(Errno::INVAL));
    }
}
