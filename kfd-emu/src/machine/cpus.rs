//! The CPUs and NUMA nodes of a machine, derived from its KFD topology, so that what a program
//! reads of them elsewhere (`/proc/cpuinfo`, `/sys/devices/system/cpu`,
//! `/sys/devices/system/node`, a PCI device's `numa_node` and `local_cpus`) tells the story the
//! topology tells.
//!
//! How the kernel ties them together, and so what is derived here:
//! * KFD makes one CPU node per online NUMA node, in NUMA order, before the GPUs
//!   (`kfd_create_vcrat_image_cpu`, `kfd_crat.c`); a CPU node's `cpu_cores_count` is the number
//!   of CPUs in that NUMA node (`kfd_fill_cu_for_cpu`: `cpumask_weight(cpumask_of_node(..))`)
//!   and its `cpu_core_id_base` the APIC id of the node's first CPU
//!   (`kfd_numa_node_to_apic_id` → `cpu_data(first_cpu).apicid`). A node with CPU cores is
//!   NUMA node *k* when it is the *k*-th such node.
//! * libhsakmt names a CPU node by finding its `cpu_core_id_base` among `/proc/cpuinfo`'s
//!   `apicid` lines (`topology_get_cpu_model_name`, `topology.c`), after sizing its table with
//!   `get_nprocs()`, which glibc answers from `/sys/devices/system/cpu/online`: both must count
//!   every CPU the topology has, or the names come back empty.
//! * The CPUs are numbered from 0, node after node; CPU *i* of a node has APIC id
//!   `cpu_core_id_base + i`, core id *i* and no SMT sibling (a topology does not say which of
//!   its cores are threads of one core), and its socket (`physical id`) is its NUMA node.
//! * A NUMA node's memory is its CPU node's system-memory banks (`kfd_fill_mem_info_for_cpu`:
//!   the node's managed pages). The distance between two NUMA nodes is the weight of the CPU
//!   node's io_link to the other (what the BIOS's CRAT gives, the SLIT distance on AMD
//!   platforms: 32 between the two sockets of the mi210x8 capture), 10 to itself (the SLIT's
//!   `LOCAL_DISTANCE`) and 20 (`REMOTE_DISTANCE`) when no link says.
//! * A GPU belongs to the NUMA node of the CPU node its first PCIe (or, on an APU, xGMI) link
//!   leads to; its PCI device's `numa_node` and `local_cpus` say so.
//!
//! At most [`MAX_CPUS`] CPUs are described (the kernel's `NR_CPUS` in Debian's configuration);
//! a topology with more cores lists only the first ones.

use std::fmt::Write as _;

use kfd_ioctl::topology::{HeapType, IoLinkType, Node};

use super::{Gpu, Machine};

/// The most CPUs described (`CONFIG_NR_CPUS=8192` in Debian's kernels).
pub const MAX_CPUS: u32 = 8192;

/// One logical CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// Its number (`processor` in `/proc/cpuinfo`, `cpu<N>` in sysfs).
    pub index: u32,
    /// Its NUMA node (and socket).
    pub numa_node: u32,
    /// Its APIC id (`apicid`, `initial apicid`).
    pub apicid: u64,
    /// Its core within the node (`core id`, `topology/core_id`).
    pub core_id: u32,
}

/// One NUMA node: a topology node with CPU cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// The NUMA node number (`node<N>`).
    pub id: u32,
    /// The KFD topology node it is.
    pub kfd_node: u32,
    /// Its first CPU.
    pub first_cpu: u32,
    /// How many CPUs it has.
    pub cpu_count: u32,
    /// Bytes of system memory (its CPU node's system banks).
    pub mem_bytes: u64,
    /// The distance to every NUMA node, in node order (`node<N>/distance`).
    pub distances: Vec<u32>,
}

impl NumaNode {
    /// Its CPUs as a list (`0-23`), as `cpulist` prints it; empty without CPUs.
    pub fn cpulist(&self) -> String {
        cpu_range_list(self.first_cpu, self.cpu_count)
    }
}

/// `first..first + count` as the kernel prints a CPU list (`%*pbl`): `a-b`, `a`, or nothing.
pub fn cpu_range_list(first: u32, count: u32) -> String {
    match count {
        0 => String::new(),
        1 => first.to_string(),
        n => format!("{first}-{}", first + n - 1),
    }
}

/// `first..first + count` of `total` CPUs as the kernel prints a CPU mask (`%*pb`): 32-bit
/// words in hex, most significant first, separated by commas.
pub fn cpu_mask(first: u32, count: u32, total: u32) -> String {
    let words = total.div_ceil(32).max(1);
    let mut out = String::new();
    for word in (0..words).rev() {
        let mut bits = 0u32;
        for bit in 0..32 {
            let cpu = word * 32 + bit;
            if cpu >= first && cpu < first.saturating_add(count) {
                bits |= 1 << bit;
            }
        }
        if !out.is_empty() {
            out.push(',');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{bits:08x}");
    }
    out
}

/// The CPU count of a CPU node, bounded so the machine's total stays within [`MAX_CPUS`].
fn node_cpus(node: &Node, before: u32) -> u32 {
    let cores = u32::try_from(node.properties.cpu_cores_count).unwrap_or(MAX_CPUS);
    cores.min(MAX_CPUS.saturating_sub(before))
}

/// The link weight from CPU node `from` to CPU node `to`, when a link says.
fn weight(from: &Node, to: u32) -> Option<u32> {
    from.io_links
        .iter()
        .find(|l| l.node_to == to && l.weight != 0)
        .map(|l| l.weight)
}

impl Machine {
    /// The machine's RAM: the system-memory banks of its NUMA nodes together (what the
    /// kernel's `si_meminfo` counts); 0 when its CPU nodes give none.
    pub fn system_memory(&self) -> u64 {
        self.numa_nodes()
            .iter()
            .fold(0u64, |sum, n| sum.saturating_add(n.mem_bytes))
    }

    /// The NUMA nodes: one per topology node with CPU cores, in node order.
    pub fn numa_nodes(&self) -> Vec<NumaNode> {
        let cpu_nodes: Vec<&Node> = self.topology.nodes.iter().filter(|n| n.is_cpu()).collect();
        let mut first = 0u32;
        let mut out = Vec::with_capacity(cpu_nodes.len());
        for (id, node) in cpu_nodes.iter().enumerate() {
            let count = node_cpus(node, first);
            let distances = cpu_nodes
                .iter()
                .map(|other| {
                    if other.id == node.id {
                        10
                    } else {
                        weight(node, other.id).unwrap_or(20)
                    }
                })
                .collect();
            out.push(NumaNode {
                id: u32::try_from(id).unwrap_or(u32::MAX),
                kfd_node: node.id,
                first_cpu: first,
                cpu_count: count,
                mem_bytes: node
                    .mem_banks
                    .iter()
                    .filter(|b| b.heap() == HeapType::System)
                    .fold(0u64, |sum, b| sum.saturating_add(b.size_in_bytes)),
                distances,
            });
            first += count;
        }
        out
    }

    /// Every CPU, in number order (see the [module docs](self) for the numbering).
    pub fn cpus(&self) -> Vec<Cpu> {
        let mut out = Vec::new();
        for numa in self.numa_nodes() {
            let base = self
                .topology
                .node(numa.kfd_node)
                .map_or(0, |n| n.properties.cpu_core_id_base);
            for i in 0..numa.cpu_count {
                out.push(Cpu {
                    index: numa.first_cpu + i,
                    numa_node: numa.id,
                    apicid: base.saturating_add(u64::from(i)),
                    core_id: i,
                });
            }
        }
        out
    }

    /// The NUMA node GPU `gpu` belongs to: that of the CPU node its first PCIe or xGMI link to
    /// a CPU leads to, or, for a GPU node with CPU cores of its own (a CRAT APU), its own; 0
    /// when neither says.
    pub fn numa_node_of(&self, gpu: &Gpu) -> u32 {
        let numa = self.numa_nodes();
        let of_kfd = |kfd: u32| numa.iter().find(|n| n.kfd_node == kfd).map(|n| n.id);
        if let Some(own) = of_kfd(gpu.node_id) {
            return own;
        }
        self.topology
            .node(gpu.node_id)
            .and_then(|node| {
                node.io_links
                    .iter()
                    .filter(|l| matches!(l.kind(), IoLinkType::PciExpress | IoLinkType::Xgmi))
                    .find_map(|l| of_kfd(l.node_to))
            })
            .unwrap_or(0)
    }
}

/// `/proc/cpuinfo` for `machine`'s CPUs: each CPU's block is the host's first processor's
/// (`host`, the host's `/proc/cpuinfo`: its vendor, model name, flags — what the code a
/// program runs really executes on) with the fields that place a CPU rewritten as the
/// topology says: `processor`, `physical id`, `siblings`, `core id`, `cpu cores`, `apicid`,
/// `initial apicid`. A host without x86 fields (or an unreadable one) gets a minimal
/// `AuthenticAMD` block.
pub fn cpuinfo(machine: &Machine, host: &str) -> String {
    const MINIMAL: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\n\
                           model name\t: AMD EPYC Processor\nphysical id\t: 0\n\
                           siblings\t: 1\ncore id\t\t: 0\ncpu cores\t: 1\n\
                           apicid\t\t: 0\ninitial apicid\t: 0\n";
    let block = |text: &'static str| text.lines().take_while(|l| !l.trim().is_empty());
    let host_block: Vec<&str> = host.lines().take_while(|l| !l.trim().is_empty()).collect();
    let template: Vec<&str> = if host_block.iter().any(|l| l.starts_with("vendor_id")) {
        host_block
    } else {
        block(MINIMAL).collect()
    };
    let numa = machine.numa_nodes();
    let mut out = String::new();
    for cpu in machine.cpus() {
        let count = numa
            .iter()
            .find(|n| n.id == cpu.numa_node)
            .map_or(1, |n| n.cpu_count);
        for line in &template {
            // The kernel pads each key with tabs to a column; the padding is kept.
            let Some((key, _)) = line.split_once(':') else {
                out.push_str(line);
                out.push('\n');
                continue;
            };
            let value = match key.trim_end() {
                "processor" => cpu.index.to_string(),
                "physical id" => cpu.numa_node.to_string(),
                "siblings" | "cpu cores" => count.to_string(),
                "core id" => cpu.core_id.to_string(),
                "apicid" | "initial apicid" => cpu.apicid.to_string(),
                _ => {
                    out.push_str(line);
                    out.push('\n');
                    continue;
                }
            };
            // Writing to a String cannot fail.
            let _ = writeln!(out, "{key}: {value}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_lists_are_the_kernels_formats() {
        assert_eq!(cpu_range_list(0, 24), "0-23");
        assert_eq!(cpu_range_list(5, 1), "5");
        assert_eq!(cpu_range_list(0, 0), "");
        assert_eq!(cpu_mask(0, 24, 24), "00ffffff");
        assert_eq!(cpu_mask(64, 64, 128), "ffffffff,ffffffff,00000000,00000000");
        assert_eq!(cpu_mask(0, 2, 40), "00000000,00000003");
    }

    #[test]
    fn mi210x8_has_two_numa_nodes_of_64_cpus_named_by_apicid() {
        let m = Machine::preset("mi210x8").unwrap();
        let numa = m.numa_nodes();
        assert_eq!(numa.len(), 2);
        assert_eq!((numa[0].first_cpu, numa[0].cpu_count), (0, 64));
        assert_eq!((numa[1].first_cpu, numa[1].cpu_count), (64, 64));
        assert_eq!(numa[0].distances, vec![10, 32]);
        let cpus = m.cpus();
        assert_eq!(cpus.len(), 128);
        assert_eq!(cpus[64].apicid, 64);
        assert_eq!(cpus[64].numa_node, 1);
        for gpu in m.gpus() {
            assert!(m.numa_node_of(gpu) < 2);
        }
    }

    #[test]
    fn cpuinfo_rewrites_the_placing_fields_of_the_hosts_block() {
        let m = Machine::preset("mi210x8").unwrap();
        let host = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: Host CPU\n\
                    physical id\t: 0\nsiblings\t: 2\ncore id\t\t: 0\ncpu cores\t: 2\n\
                    apicid\t\t: 0\ninitial apicid\t: 0\nflags\t\t: fpu sse2\n\n\
                    processor\t: 1\n";
        let text = cpuinfo(&m, host);
        let blocks: Vec<&str> = text.split("\n\n").filter(|b| !b.is_empty()).collect();
        assert_eq!(blocks.len(), 128);
        let b = blocks[64];
        assert!(b.contains("processor\t: 64\n"), "{b}");
        assert!(b.contains("apicid\t\t: 64\n"), "{b}");
        assert!(b.contains("physical id\t: 1\n"), "{b}");
        assert!(b.contains("siblings\t: 64\n"), "{b}");
        assert!(b.contains("model name\t: Host CPU\n"), "{b}");
        assert!(b.contains("flags\t\t: fpu sse2"), "{b}");
    }
}
