//! What can go wrong reading a topology tree.

use std::io;
use std::path::PathBuf;

/// An error reading or parsing the KFD sysfs topology tree; each variant names the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A file or directory of the tree could not be read.
    #[error("could not read {}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A line is not `key value` with a decimal integer value.
    #[error(
        "line {line} of {} is not `key value` with a decimal integer value: {text:?}",
        .path.display()
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The offending line, without its line ending.
        text: String,
    },
    /// A value does not fit the field the kernel prints it from.
    #[error(
        "line {line} of {} sets {key} to {value}, which does not fit the kernel's {bits}-bit field",
        .path.display()
    )]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// The key.
        key: String,
        /// The value read.
        value: u64,
        /// The width of the kernel's field.
        bits: u32,
    },
    /// A key that every kernel writes is missing from a file.
    #[error("{} has no `{key}` line, which every kernel writes", .path.display())]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
    },
    /// `generation_id` changed while the tree was being read, on every attempt.
    #[error("the topology changed while it was being read, {attempts} times in a row")]
    Unstable {
        /// How many snapshots were tried.
        attempts: u32,
    },
    /// A file of the tree is not a regular file (a FIFO, socket, device or directory), so it
    /// was not read: such a read could block forever or never end.
    #[error("{} is a {kind}, not a regular file", .path.display())]
    NotAFile {
        /// The path, as the tree names it (a symbolic link is followed).
        path: PathBuf,
        /// What it is: `FIFO`, `socket`, `character device`, `block device`, `directory`.
        kind: &'static str,
    },
    /// A file is longer than any file the kernel writes ([`limits::MAX_FILE_BYTES`]).
    ///
    /// [`limits::MAX_FILE_BYTES`]: super::limits::MAX_FILE_BYTES
    #[error("{} is larger than the {limit}-byte limit for a topology file", .path.display())]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// The limit, bytes.
        limit: u64,
    },
    /// The files read so far add up to more than [`limits::MAX_TREE_BYTES`].
    ///
    /// [`limits::MAX_TREE_BYTES`]: super::limits::MAX_TREE_BYTES
    #[error("the tree passes its {limit}-byte limit at {}", .path.display())]
    TreeTooLarge {
        /// The file whose bytes passed the limit.
        path: PathBuf,
        /// The limit, bytes.
        limit: u64,
    },
    /// A directory holds more entries than its limit (see [`limits`](super::limits)).
    #[error("{} holds more than {limit} entries", .path.display())]
    TooManyEntries {
        /// The directory.
        path: PathBuf,
        /// How many it may hold.
        limit: u64,
    },
    /// A count or number is above its sanity limit (see [`limits`](super::limits)).
    #[error("{} has {what} {value}, above the limit of {limit}", .path.display())]
    AboveLimit {
        /// The file, or the numbered directory.
        path: PathBuf,
        /// The key (`cpu_cores_count`), or `number` for a directory's number.
        what: String,
        /// The value read; `u64::MAX` for a number wider than 64 bits.
        value: u64,
        /// The largest value accepted.
        limit: u64,
    },
    /// A value makes a total that the tree describes pass `u64::MAX`.
    #[error("{} has {what} {value}, which makes {total} pass 2^64", .path.display())]
    Overflow {
        /// The file.
        path: PathBuf,
        /// The key.
        what: &'static str,
        /// The value read.
        value: u64,
        /// The total it is part of.
        total: &'static str,
    },
    /// The root exists but holds no `nodes/<N>` directories (nor `topology/nodes/<N>`).
    #[error("{} holds no KFD topology nodes", .root.display())]
    NoNodes {
        /// The root that was given.
        root: PathBuf,
    },
}
