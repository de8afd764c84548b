//! The KFD sysfs topology tree (`/sys/devices/virtual/kfd/kfd/topology`), parsed and typed.
//!
//! The kernel describes every CPU and GPU (or GPU partition) as a numbered node with a
//! `properties` file of `key value` lines, plus memory banks, caches, and IO/P2P links below
//! it. [`Topology::read`] takes a consistent snapshot of the live tree (it re-reads while
//! `generation_id` changes underneath), and [`Topology::read_from`] reads a capture of one.
//!
//! ```
//! use kfd_ioctl::topology::{IoLinkType, Topology};
//!
//! // A capture of an 8×MI210 machine: two CPUs, then two xGMI hives of four GPUs.
//! let root = concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../kfd-emu/fixtures/topology/mi210-8gpu-xgmi"
//! );
//! let topology = Topology::read_from(root)?;
//! assert_eq!(topology.gpus().count(), 8);
//!
//! let gpu = topology.node(2).expect("node 2 is a GPU");
//! assert_eq!(gpu.gfx_target_version().map(|v| v.to_string()), Some("gfx90a".into()));
//! assert_eq!(gpu.cu_count(), Some(104));
//! assert!(gpu.capability().svm_api_supported());
//! assert_eq!(gpu.render_node_path(), Some("/dev/dri/renderD128".into()));
//! assert_eq!(gpu.io_links[1].kind(), IoLinkType::Xgmi);
//!
//! assert_eq!(topology.xgmi_hives(), vec![vec![2, 3, 4, 5], vec![6, 7, 8, 9]]);
//! # Ok::<(), kfd_ioctl::topology::TopologyError>(())
//! ```
//!
//! Every file keeps its lines as read (`entries`/`properties`), so the emulator can print a
//! captured tree again exactly ([`NodeProperties::to_sysfs_text`] and friends).
//!
//! A tree is untrusted input (a capture from anywhere, a path a user typed), so reading it is
//! bounded: only regular files are opened, and without blocking (a FIFO, socket, device or
//! directory where a file should be is [`TopologyError::NotAFile`]); each file, the whole
//! tree, directory numbers and the counts programs size arrays from stay within
//! [`limits`]; sums that could pass 64 bits are checked ([`TopologyError::Overflow`]).
//! Every error names the path and the value.

mod error;
mod flags;
pub mod limits;
mod node;
mod parts;
mod read;
mod snapshot;
mod text;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use error::TopologyError;
pub use flags::{
    CacheType, Capability, Capability2, DebugProp, HeapType, IoLinkFlags, IoLinkType, MemFlags,
};
pub use node::{GfxTargetVersion, Node, NodeProperties};
pub use parts::{Cache, IoLink, MemBank, SystemProperties};
pub use read::read_regular_file;
pub use snapshot::Topology;

/// Where the kernel publishes the topology.
pub const DEFAULT_ROOT: &str = "/sys/devices/virtual/kfd/kfd/topology";

/// The same tree, through its `/sys/class` link.
pub const CLASS_ROOT: &str = "/sys/class/kfd/kfd/topology";

impl Topology {
    /// Reads the live tree at [`DEFAULT_ROOT`].
    ///
    /// On a machine without KFD this fails with [`TopologyError::Io`] (not found).
    pub fn read() -> Result<Self, TopologyError> {
        Self::read_from(DEFAULT_ROOT)
    }

    /// Reads the tree at `root`: a directory that holds `nodes/`, or one that holds
    /// `topology/nodes/`.
    ///
    /// `generation_id` is read before and after the nodes, and the read is repeated while it
    /// changes, up to 8 times ([`TopologyError::Unstable`]). A file that is not a regular
    /// file, or any value past the [`limits`], is an error naming it (see the
    /// [module docs](self)). `generation_id`,
    /// `system_properties`, `gpu_id`, `name`, `used_memory` and the bank/cache/link
    /// directories may be absent, as in partial captures.
    pub fn read_from(root: impl AsRef<Path>) -> Result<Self, TopologyError> {
        read::topology(root.as_ref(), &mut read::Fs)
    }
}
