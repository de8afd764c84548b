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
    /// The root exists but holds no `nodes/<N>` directories (nor `topology/nodes/<N>`).
    #[error("{} holds no KFD topology nodes", .root.display())]
    NoNodes {
        /// The root that was given.
        root: PathBuf,
    },
}
