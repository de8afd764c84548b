//! [`Topology`]: the snapshot type and what it answers, apart from reading it (`read`), which
//! builds one from the node and part types.

use std::collections::BTreeMap;

use super::node::Node;
use super::parts::SystemProperties;
use crate::GpuId;

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
    /// The node with directory number `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The GPU nodes (`simd_count > 0`), in id order.
    pub fn gpus(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter(|node| node.is_gpu())
    }

    /// The node whose `gpu_id` file says `gpu_id` (never a CPU node: 0 matches nothing).
    pub fn node_by_gpu_id(&self, gpu_id: impl Into<GpuId>) -> Option<&Node> {
        let gpu_id = gpu_id.into();
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
