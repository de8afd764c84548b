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
//! let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/topology/mi210-8gpu-xgmi");
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
mod text;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

pub use error::TopologyError;
pub use flags::{
    CacheType, Capability, Capability2, DebugProp, HeapType, IoLinkFlags, IoLinkType, MemFlags,
};
pub use node::{GfxTargetVersion, Node, NodeProperties};
pub use parts::{Cache, IoLink, MemBank, SystemProperties};

/// Where the kernel publishes the topology.
pub const DEFAULT_ROOT: &str = "/sys/devices/virtual/kfd/kfd/topology";

/// The same tree, through its `/sys/class` link.
pub const CLASS_ROOT: &str = "/sys/class/kfd/kfd/topology";

/// A snapshot of the KFD topology: the system properties and every node, sorted by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// The `generation_id` the snapshot was taken at; `None` when the tree has no such file
    /// (partial captures).
    pub generation_id: Option<u64>,
    /// The `system_properties` file; all 0 when the tree has none.
    pub system: SystemProperties,
    /// The nodes, in numeric order of their directory. A node the device cgroup hides from
    /// this process (its files answer EPERM) is left out, so ids can have gaps.
    pub nodes: Vec<Node>,
}

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

    /// The node with directory number `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The GPU nodes (`simd_count > 0`), in id order.
    pub fn gpus(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter(|node| node.is_gpu())
    }

    /// The node whose `gpu_id` file says `gpu_id` (never a CPU node: 0 matches nothing).
    pub fn node_by_gpu_id(&self, gpu_id: u32) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|node| node.gpu_id().is_some_and(|id| id == gpu_id))
    }

    /// The xGMI hives as lists of GPU node ids, each sorted, hives ordered by their first node.
    ///
    /// GPUs are in one hive when they share a nonzero `hive_id` or are joined by xGMI links
    /// (IO or P2P); a GPU with neither is in no hive. A GPU with a `hive_id` but no peer in
    /// this tree forms a hive of one.
    pub fn xgmi_hives(&self) -> Vec<Vec<u32>> {
        let gpus: Vec<&Node> = self.gpus().collect();
        // A map, not a search per link: a tree may hold millions of links. The first node of
        // an id wins, as in `node`.
        let mut indices: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, gpu) in gpus.iter().enumerate() {
            indices.entry(gpu.id).or_insert(i);
        }
        let index_of = |id: u32| indices.get(&id).copied();
        let mut parent: Vec<usize> = (0..gpus.len()).collect();
        let mut in_hive = vec![false; gpus.len()];

        let mut by_hive_id: BTreeMap<u64, usize> = BTreeMap::new();
        for (i, gpu) in gpus.iter().enumerate() {
            if let Some(hive_id) = gpu.hive_id() {
                in_hive[i] = true;
                let first = *by_hive_id.entry(hive_id).or_insert(i);
                union(&mut parent, first, i);
            }
            for link in gpu.io_links.iter().chain(&gpu.p2p_links) {
                if let (true, Some(j)) = (link.is_xgmi(), index_of(link.node_to)) {
                    in_hive[i] = true;
                    in_hive[j] = true;
                    union(&mut parent, i, j);
                }
            }
        }

        let mut hives: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
        for (i, gpu) in gpus.iter().enumerate() {
            if in_hive[i] {
                hives.entry(find(&mut parent, i)).or_default().push(gpu.id);
            }
        }
        let mut hives: Vec<Vec<u32>> = hives.into_values().collect();
        for hive in &mut hives {
            hive.sort_unstable();
        }
        hives.sort();
        hives
    }
}

/// Union-find over GPU indices, for [`Topology::xgmi_hives`].
fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}
