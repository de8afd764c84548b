//! Why a [`Machine`](super::Machine) could not be built, in a module of its own so the
//! modules that complete a topology need not import the machine they are completing.

use kfd_ioctl::topology::TopologyError;

/// An error building a [`Machine`](super::Machine).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MachineError {
    /// The topology tree could not be read or parsed; or the tree the emulator would write
    /// for the machine would not read back (its paths are relative to that tree's root).
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The tree has no node at all.
    #[error("the topology has no nodes")]
    Empty,
    /// More GPUs than render minors 128–255 can number.
    #[error("{0} GPUs do not fit the 128 render minors")]
    TooManyGpus(usize),
    /// A value of the tree is too large for what the emulator derives from it (a node id
    /// that cannot move up to make room for a CPU node, VRAM banks that add up past 2^64).
    #[error("node {node}: {what} {value} is too large for the emulated machine")]
    TooLarge {
        /// The node id.
        node: u32,
        /// What the value is.
        what: &'static str,
        /// The value.
        value: u64,
    },
}
