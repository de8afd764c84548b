//! The built-in machines, made from the real sysfs captures in the repository's
//! `kfd-emu/fixtures/topology/` (see the README there for where each was published).
//!
//! What each preset takes from its capture, and what [`fixup`](super::fixup) adds:
//! * `mi300x`: CPU node 0 and MI300X node 4 (as node 1) of the mixed capture. Added: gpu_id,
//!   render minor 128, L1/L2/L3 caches, CPU caches, the GPU→CPU link.
//! * `mi210x8`: the whole 8×MI210 capture. Added: gpu_ids, VRAM banks (64 GiB), CPU memory
//!   banks, GPU and CPU caches (the capture says 217 caches but has none).
//! * `mi100`: CPU node 0 of the mixed capture and the MI100 node (as node 1). Added: VRAM bank
//!   (32 GiB), caches, links.
//! * `radeon-vii`: CPU node 0 and Radeon VII node 1 of the mixed capture. Added: gpu_id,
//!   render minor, caches, GPU→CPU link; its P2P link to a GPU not in the preset is dropped.
//! * `rx7900xtx`: CPU node 0 of the mixed capture and the RX 7900 XTX template with its
//!   `{drm_render_minor}` placeholder filled (128). Added: VRAM bank (24 GiB), caches, links.
//! * `mi300a`: CPU node 0 and APU node 4 of the 4×MI300A capture (one socket: its 48 CPU
//!   threads and its GPU, as nodes 0 and 1). Derived, as the kernel reports them: the CPU's
//!   memory bank (the socket's RAM, 128 GiB less a 512 MiB carve-out) and the xGMI links
//!   between the two (`kcd_fill_gpu_direct_io_link_to_cpu` on a GC 9.4.3 APU package). Added:
//!   gpu_id, caches, and the APU's memory bank (`FB_PUBLIC`, the TTM limit: half that RAM).
//! * `rx9070xt-small-bar`: CPU node 0 and the RX 9070 XT node 6 of the mixed capture, its VRAM
//!   bank reported as a card without Resizable BAR reports it (`kfd_create_vcrat_image_gpu`:
//!   private VRAM → one `FB_PRIVATE` bank of the whole VRAM size). Added: gpu_id, render
//!   minor, caches, links.

use std::collections::BTreeMap;
use std::path::Path;

use kfd_ioctl::topology::{
    Cache, IoLink, MemBank, Node, NodeProperties, SystemProperties, Topology, TopologyError,
};

use super::fixup::MI300A_RAM;

/// `(name, description)` of every preset; the first is the default.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "mi300x",
        "1x AMD Instinct MI300X (gfx942, SPX: 304 CUs, 192 GiB HBM3) and a 24-core CPU (default)",
    ),
    (
        "mi210x8",
        "8x AMD Instinct MI210 (gfx90a, 104 CUs, 64 GiB) in two xGMI hives of 4, two CPUs",
    ),
    (
        "mi100",
        "1x AMD Instinct MI100 (gfx908, 120 CUs, 32 GiB) and a 24-core CPU",
    ),
    (
        "radeon-vii",
        "1x AMD Radeon VII (gfx906, 60 CUs, 16 GiB) and a 24-core CPU",
    ),
    (
        "rx7900xtx",
        "1x AMD Radeon RX 7900 XTX (gfx1100, 96 CUs, 24 GiB) and a 24-core CPU",
    ),
    (
        "mi300a",
        "1x AMD Instinct MI300A APU (gfx942, 228 CUs; GPU memory is the socket's 128 GiB of \
         system RAM) and its 24-core CPU (48 threads)",
    ),
    (
        "rx9070xt-small-bar",
        "1x AMD Radeon RX 9070 XT (gfx1201, 64 CUs, 16 GiB) behind a 256 MiB BAR (VRAM not \
         CPU-visible: FB_PRIVATE) and a 24-core CPU",
    ),
];

/// The topology of preset `name`, before its fixups.
pub(super) fn topology(name: &str) -> Option<Topology> {
    let topology = match name {
        "mi300x" => single_gpu(mixed_node(4)?),
        "mi210x8" => capture(MI210).ok(),
        "mi100" => single_gpu(capture(MI100).ok()?.nodes.into_iter().next()?),
        "radeon-vii" => single_gpu(mixed_node(1)?),
        "rx7900xtx" => {
            let text = RX7900XTX.replace("{drm_render_minor}", "128");
            let properties = NodeProperties::parse(&text, Path::new(RX7900XTX_PATH)).ok()?;
            single_gpu(Node {
                properties,
                ..Node::default()
            })
        }
        "mi300a" => mi300a(),
        "rx9070xt-small-bar" => {
            let mut gpu = mixed_node(6)?;
            // kfd_create_vcrat_image_gpu: with private (CPU-invisible) VRAM the kernel reports
            // one FB_PRIVATE bank of public + private, the whole VRAM.
            let size = gpu.mem_banks.first()?.size_in_bytes;
            gpu.mem_banks = vec![bank(2, size, 256, 1258)?];
            single_gpu(gpu)
        }
        _ => return None,
    }?;
    Some(topology)
}

/// Where derived files say they come from, in parse errors (which cannot happen for text built
/// here).
const DERIVED: &str = "<preset derived>";

/// A memory bank of `heap_type`, `size` bytes, `width` bits at `mem_clk` MHz, with nothing used.
fn bank(heap_type: u32, size: u64, width: u32, mem_clk: u32) -> Option<MemBank> {
    let text = format!(
        "heap_type {heap_type}\nsize_in_bytes {size}\nflags 0\nwidth {width}\nmem_clk_max {mem_clk}\n"
    );
    let mut bank = MemBank::parse(0, &text, Path::new(DERIVED)).ok()?;
    bank.used_memory = Some(0);
    Some(bank)
}

/// An enabled xGMI io_link from `from` to `to` (CRAT_IOLINK_TYPE_XGMI = 11, weight 13: what
/// `kcd_fill_gpu_direct_io_link_to_cpu` gives a GC 9.4.3 APU's GPU–CPU link).
fn xgmi_link(from: u32, to: u32) -> Option<IoLink> {
    let text = format!(
        "type 11\nversion_major 0\nversion_minor 0\nnode_from {from}\nnode_to {to}\n\
         weight 13\nmin_latency 0\nmax_latency 0\nmin_bandwidth 0\nmax_bandwidth 0\n\
         recommended_transfer_size 0\nrecommended_sdma_engine_id_mask 0\nflags 1\n"
    );
    IoLink::parse(0, &text, Path::new(DERIVED)).ok()
}

/// The `mi300a` preset: one socket of the 4×MI300A capture (CPU node 0, APU node 4).
fn mi300a() -> Option<Topology> {
    let nodes = capture(MI300A).ok()?.nodes;
    let mut cpu = nodes.iter().find(|n| n.id == 0)?.clone();
    let mut gpu = nodes.into_iter().find(|n| n.id == 4)?;
    // The socket's RAM; the APU's bank (the TTM limit of it, FB_PUBLIC) is the fixups' MI300A.
    cpu.mem_banks = vec![bank(0, MI300A_RAM, 64, 5200)?];
    cpu.io_links = vec![xgmi_link(0, 1)?];
    gpu.io_links = vec![xgmi_link(1, 0)?];
    cpu.p2p_links.clear();
    gpu.p2p_links.clear();
    gpu.id = 1;
    Some(Topology {
        generation_id: None,
        system: SystemProperties::default(),
        nodes: vec![cpu, gpu],
    })
}

/// Node `id` of the mixed capture.
fn mixed_node(id: u32) -> Option<Node> {
    capture(MIXED)
        .ok()?
        .nodes
        .into_iter()
        .find(|node| node.id == id)
}

/// The mixed capture's CPU node 0 and `gpu` as node 1; the CPU keeps its captured PCIe link,
/// pointed at the GPU.
fn single_gpu(mut gpu: Node) -> Option<Topology> {
    let mut cpu = mixed_node(0)?;
    cpu.io_links.truncate(1);
    cpu.io_links = cpu
        .io_links
        .iter()
        .map(|link| with_node_to(link, 1))
        .collect::<Result<_, _>>()
        .ok()?;
    gpu.id = 1;
    Some(Topology {
        generation_id: None,
        system: SystemProperties::default(),
        nodes: vec![cpu, gpu],
    })
}

/// `link` leading to node `to`.
fn with_node_to(link: &IoLink, to: u32) -> Result<IoLink, TopologyError> {
    let text: String = link
        .properties
        .iter()
        .map(|(key, value)| {
            let value = if key == "node_to" {
                u64::from(to)
            } else {
                *value
            };
            format!("{key} {value}\n")
        })
        .collect();
    IoLink::parse(link.id, &text, Path::new("<preset link>"))
}

/// Parses a capture embedded as `(path below the root, text)` pairs.
fn capture(files: &[(&str, &str)]) -> Result<Topology, TopologyError> {
    let mut topology = Topology::default();
    let mut nodes: BTreeMap<u32, Node> = BTreeMap::new();
    for &(path, text) in files {
        let parts: Vec<&str> = path.split('/').collect();
        let p = Path::new(path);
        match parts.as_slice() {
            ["generation_id"] => topology.generation_id = text.trim().parse().ok(),
            ["system_properties"] => topology.system = SystemProperties::parse(text, p)?,
            ["nodes", n, rest @ ..] => {
                let Ok(id) = n.parse::<u32>() else { continue };
                let node = nodes.entry(id).or_insert_with(|| Node {
                    id,
                    ..Node::default()
                });
                node_file(node, rest, text, p)?;
            }
            _ => {}
        }
    }
    topology.nodes = nodes.into_values().collect();
    for node in &mut topology.nodes {
        node.mem_banks.sort_by_key(|b| b.id);
        node.caches.sort_by_key(|c| c.id);
        node.io_links.sort_by_key(|l| l.id);
        node.p2p_links.sort_by_key(|l| l.id);
    }
    Ok(topology)
}

/// Files one file of a node's directory into `node`.
fn node_file(node: &mut Node, rest: &[&str], text: &str, p: &Path) -> Result<(), TopologyError> {
    let number = |s: &str| s.parse::<u32>().ok();
    match rest {
        ["properties"] => node.properties = NodeProperties::parse(text, p)?,
        ["gpu_id"] => node.gpu_id = text.trim().parse().ok(),
        ["name"] => node.name = Some(text.trim().to_owned()),
        ["mem_banks", m, "properties"] => {
            if let Some(m) = number(m) {
                let used = node
                    .mem_banks
                    .iter()
                    .find(|b| b.id == m)
                    .and_then(|b| b.used_memory);
                node.mem_banks.retain(|b| b.id != m);
                let mut bank = MemBank::parse(m, text, p)?;
                bank.used_memory = used;
                node.mem_banks.push(bank);
            }
        }
        ["mem_banks", m, "used_memory"] => {
            if let Some(m) = number(m) {
                let used = text.trim().parse().ok();
                match node.mem_banks.iter_mut().find(|b| b.id == m) {
                    Some(bank) => bank.used_memory = used,
                    None => node.mem_banks.push(MemBank {
                        id: m,
                        used_memory: used,
                        ..MemBank::default()
                    }),
                }
            }
        }
        ["caches", c, "properties"] => {
            if let Some(c) = number(c) {
                node.caches.push(Cache::parse(c, text, p)?);
            }
        }
        ["io_links", l, "properties"] => {
            if let Some(l) = number(l) {
                node.io_links.push(IoLink::parse(l, text, p)?);
            }
        }
        ["p2p_links", l, "properties"] => {
            if let Some(l) = number(l) {
                node.p2p_links.push(IoLink::parse(l, text, p)?);
            }
        }
        _ => {}
    }
    Ok(())
}

const RX7900XTX_PATH: &str = "rx7900xtx/properties.template";
const RX7900XTX: &str =
    include_str!("../../fixtures/topology/rx7900xtx-template/properties.template");

// The capture's files (`find kfd-emu/fixtures/topology/<capture> -type f | sort -V`), as paths
// relative to the capture's root.
const MIXED: &[(&str, &str)] = &[
    (
        "nodes/0/io_links/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/0/io_links/0/properties"
        ),
    ),
    (
        "nodes/0/mem_banks/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/0/mem_banks/0/properties"
        ),
    ),
    (
        "nodes/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/0/properties"
        ),
    ),
    (
        "nodes/1/mem_banks/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/1/mem_banks/0/properties"
        ),
    ),
    (
        "nodes/1/mem_banks/0/used_memory",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/1/mem_banks/0/used_memory"
        ),
    ),
    (
        "nodes/1/name",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/1/name"
        ),
    ),
    (
        "nodes/1/p2p_links/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/1/p2p_links/0/properties"
        ),
    ),
    (
        "nodes/1/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/1/properties"
        ),
    ),
    (
        "nodes/4/mem_banks/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/4/mem_banks/0/properties"
        ),
    ),
    (
        "nodes/4/mem_banks/0/used_memory",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/4/mem_banks/0/used_memory"
        ),
    ),
    (
        "nodes/4/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/4/properties"
        ),
    ),
    (
        "nodes/6/mem_banks/0/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/6/mem_banks/0/properties"
        ),
    ),
    (
        "nodes/6/mem_banks/0/used_memory",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/6/mem_banks/0/used_memory"
        ),
    ),
    (
        "nodes/6/properties",
        include_str!(
            "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/6/properties"
        ),
    ),
];

const MI210: &[(&str, &str)] = &[
    (
        "nodes/0/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/io_links/0/properties"),
    ),
    (
        "nodes/0/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/io_links/1/properties"),
    ),
    (
        "nodes/0/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/io_links/2/properties"),
    ),
    (
        "nodes/0/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/io_links/3/properties"),
    ),
    (
        "nodes/0/io_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/io_links/4/properties"),
    ),
    (
        "nodes/0/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/p2p_links/0/properties"),
    ),
    (
        "nodes/0/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/p2p_links/1/properties"),
    ),
    (
        "nodes/0/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/p2p_links/2/properties"),
    ),
    (
        "nodes/0/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/p2p_links/3/properties"),
    ),
    (
        "nodes/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/0/properties"),
    ),
    (
        "nodes/1/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/io_links/0/properties"),
    ),
    (
        "nodes/1/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/io_links/1/properties"),
    ),
    (
        "nodes/1/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/io_links/2/properties"),
    ),
    (
        "nodes/1/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/io_links/3/properties"),
    ),
    (
        "nodes/1/io_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/io_links/4/properties"),
    ),
    (
        "nodes/1/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/p2p_links/0/properties"),
    ),
    (
        "nodes/1/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/p2p_links/1/properties"),
    ),
    (
        "nodes/1/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/p2p_links/2/properties"),
    ),
    (
        "nodes/1/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/p2p_links/3/properties"),
    ),
    (
        "nodes/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/1/properties"),
    ),
    (
        "nodes/2/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/io_links/0/properties"),
    ),
    (
        "nodes/2/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/io_links/1/properties"),
    ),
    (
        "nodes/2/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/io_links/2/properties"),
    ),
    (
        "nodes/2/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/io_links/3/properties"),
    ),
    (
        "nodes/2/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/p2p_links/0/properties"),
    ),
    (
        "nodes/2/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/p2p_links/1/properties"),
    ),
    (
        "nodes/2/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/p2p_links/2/properties"),
    ),
    (
        "nodes/2/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/p2p_links/3/properties"),
    ),
    (
        "nodes/2/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/p2p_links/4/properties"),
    ),
    (
        "nodes/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/2/properties"),
    ),
    (
        "nodes/3/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/io_links/0/properties"),
    ),
    (
        "nodes/3/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/io_links/1/properties"),
    ),
    (
        "nodes/3/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/io_links/2/properties"),
    ),
    (
        "nodes/3/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/io_links/3/properties"),
    ),
    (
        "nodes/3/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/p2p_links/0/properties"),
    ),
    (
        "nodes/3/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/p2p_links/1/properties"),
    ),
    (
        "nodes/3/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/p2p_links/2/properties"),
    ),
    (
        "nodes/3/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/p2p_links/3/properties"),
    ),
    (
        "nodes/3/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/p2p_links/4/properties"),
    ),
    (
        "nodes/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/3/properties"),
    ),
    (
        "nodes/4/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/io_links/0/properties"),
    ),
    (
        "nodes/4/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/io_links/1/properties"),
    ),
    (
        "nodes/4/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/io_links/2/properties"),
    ),
    (
        "nodes/4/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/io_links/3/properties"),
    ),
    (
        "nodes/4/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/p2p_links/0/properties"),
    ),
    (
        "nodes/4/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/p2p_links/1/properties"),
    ),
    (
        "nodes/4/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/p2p_links/2/properties"),
    ),
    (
        "nodes/4/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/p2p_links/3/properties"),
    ),
    (
        "nodes/4/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/p2p_links/4/properties"),
    ),
    (
        "nodes/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/4/properties"),
    ),
    (
        "nodes/5/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/io_links/0/properties"),
    ),
    (
        "nodes/5/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/io_links/1/properties"),
    ),
    (
        "nodes/5/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/io_links/2/properties"),
    ),
    (
        "nodes/5/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/io_links/3/properties"),
    ),
    (
        "nodes/5/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/p2p_links/0/properties"),
    ),
    (
        "nodes/5/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/p2p_links/1/properties"),
    ),
    (
        "nodes/5/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/p2p_links/2/properties"),
    ),
    (
        "nodes/5/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/p2p_links/3/properties"),
    ),
    (
        "nodes/5/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/p2p_links/4/properties"),
    ),
    (
        "nodes/5/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/5/properties"),
    ),
    (
        "nodes/6/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/io_links/0/properties"),
    ),
    (
        "nodes/6/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/io_links/1/properties"),
    ),
    (
        "nodes/6/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/io_links/2/properties"),
    ),
    (
        "nodes/6/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/io_links/3/properties"),
    ),
    (
        "nodes/6/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/p2p_links/0/properties"),
    ),
    (
        "nodes/6/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/p2p_links/1/properties"),
    ),
    (
        "nodes/6/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/p2p_links/2/properties"),
    ),
    (
        "nodes/6/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/p2p_links/3/properties"),
    ),
    (
        "nodes/6/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/p2p_links/4/properties"),
    ),
    (
        "nodes/6/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/6/properties"),
    ),
    (
        "nodes/7/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/io_links/0/properties"),
    ),
    (
        "nodes/7/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/io_links/1/properties"),
    ),
    (
        "nodes/7/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/io_links/2/properties"),
    ),
    (
        "nodes/7/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/io_links/3/properties"),
    ),
    (
        "nodes/7/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/p2p_links/0/properties"),
    ),
    (
        "nodes/7/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/p2p_links/1/properties"),
    ),
    (
        "nodes/7/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/p2p_links/2/properties"),
    ),
    (
        "nodes/7/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/p2p_links/3/properties"),
    ),
    (
        "nodes/7/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/p2p_links/4/properties"),
    ),
    (
        "nodes/7/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/7/properties"),
    ),
    (
        "nodes/8/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/io_links/0/properties"),
    ),
    (
        "nodes/8/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/io_links/1/properties"),
    ),
    (
        "nodes/8/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/io_links/2/properties"),
    ),
    (
        "nodes/8/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/io_links/3/properties"),
    ),
    (
        "nodes/8/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/p2p_links/0/properties"),
    ),
    (
        "nodes/8/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/p2p_links/1/properties"),
    ),
    (
        "nodes/8/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/p2p_links/2/properties"),
    ),
    (
        "nodes/8/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/p2p_links/3/properties"),
    ),
    (
        "nodes/8/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/p2p_links/4/properties"),
    ),
    (
        "nodes/8/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/8/properties"),
    ),
    (
        "nodes/9/io_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/io_links/0/properties"),
    ),
    (
        "nodes/9/io_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/io_links/1/properties"),
    ),
    (
        "nodes/9/io_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/io_links/2/properties"),
    ),
    (
        "nodes/9/io_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/io_links/3/properties"),
    ),
    (
        "nodes/9/p2p_links/0/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/p2p_links/0/properties"),
    ),
    (
        "nodes/9/p2p_links/1/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/p2p_links/1/properties"),
    ),
    (
        "nodes/9/p2p_links/2/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/p2p_links/2/properties"),
    ),
    (
        "nodes/9/p2p_links/3/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/p2p_links/3/properties"),
    ),
    (
        "nodes/9/p2p_links/4/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/p2p_links/4/properties"),
    ),
    (
        "nodes/9/properties",
        include_str!("../../fixtures/topology/mi210-8gpu-xgmi/nodes/9/properties"),
    ),
];

const MI100: &[(&str, &str)] = &[
    (
        "nodes/0/gpu_id",
        include_str!("../../fixtures/topology/mi100/nodes/0/gpu_id"),
    ),
    (
        "nodes/0/name",
        include_str!("../../fixtures/topology/mi100/nodes/0/name"),
    ),
    (
        "nodes/0/properties",
        include_str!("../../fixtures/topology/mi100/nodes/0/properties"),
    ),
];

const MI300A: &[(&str, &str)] = &[
    (
        "nodes/0/properties",
        include_str!("../../fixtures/topology/mi300a-4apu/nodes/0/properties"),
    ),
    (
        "nodes/4/properties",
        include_str!("../../fixtures/topology/mi300a-4apu/nodes/4/properties"),
    ),
];

#[cfg(test)]
mod tests {
    use super::{PRESETS, topology};
    use crate::machine::Machine;

    #[test]
    fn every_preset_topology_completes() {
        for &(name, _) in PRESETS {
            let t = topology(name).unwrap_or_else(|| panic!("{name}: no topology"));
            if let Err(e) = Machine::from_topology(name, t) {
                panic!("{name}: {e}");
            }
        }
    }
}
