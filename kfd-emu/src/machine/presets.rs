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

use std::collections::BTreeMap;
use std::path::Path;

use kfd_ioctl::topology::{
    Cache, IoLink, MemBank, Node, NodeProperties, SystemProperties, Topology, TopologyError,
};

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
        _ => return None,
    }?;
    Some(topology)
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
