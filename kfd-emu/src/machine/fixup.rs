//! Completing a captured topology so that libhsakmt and ROCr accept it (see the module docs of
//! [`machine`](super)).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use kfd_ioctl::topology::{
    Cache, CacheType, GfxTargetVersion, IoLink, MemBank, Node, NodeProperties, Topology,
    TopologyError,
};

use super::error::MachineError;

/// What the fixups assume about a GPU part the capture does not describe.
struct Part {
    /// The node `name` the kernel prints.
    name: &'static str,
    /// VRAM bytes.
    vram: u64,
    /// Memory bus width, bits.
    width: u32,
    /// Memory clock, MHz.
    mem_clk: u32,
    /// L1 vector cache per CU, KiB.
    l1: u32,
    /// L2, KiB.
    l2: u32,
    /// Last-level (Infinity) cache, KiB; 0 when the part has none.
    l3: u32,
}

/// Bytes of RAM Linux sees on one MI300A socket: 128 GiB of HBM3 less the GPU's 512 MiB
/// carve-out (the BIOS default).
pub(super) const MI300A_RAM: u64 = (128 << 30) - (512 << 20);

/// Known parts by PCI device id and `gfx_target_version`; the real values of the boards the
/// presets describe.
fn part(node: &Node) -> Part {
    // MI300A (0x74a0), an apu_prefer_gtt APU: amdgpu_amdkfd_get_local_mem_info reports all of
    // KFD's memory public, KFD_XCP_MEMORY_SIZE making it the TTM limit (ttm_tt_pages_limit:
    // half of the socket's RAM).
    if node.properties.device_id == 0x74a0 {
        return Part {
            name: "ip discovery",
            vram: MI300A_RAM / 2,
            width: 8192,
            mem_clk: 1300,
            l1: 32,
            l2: 4096,
            l3: 262_144,
        };
    }
    match node.gfx_target_version().and_then(GfxTargetVersion::raw) {
        // Radeon VII / MI50: 16 GiB HBM2.
        Some(90006) => Part {
            name: "vega20",
            vram: 17_163_091_968,
            width: 4096,
            mem_clk: 1000,
            l1: 16,
            l2: 4096,
            l3: 0,
        },
        // MI100: 32 GiB HBM2.
        Some(90008) => Part {
            name: "arcturus",
            vram: 34_342_961_152,
            width: 4096,
            mem_clk: 1200,
            l1: 16,
            l2: 8192,
            l3: 0,
        },
        // MI210: 64 GiB HBM2e.
        Some(90010) => Part {
            name: "aldebaran",
            vram: 68_702_699_520,
            width: 4096,
            mem_clk: 1600,
            l1: 16,
            l2: 8192,
            l3: 0,
        },
        // MI300X: 192 GiB HBM3, 256 MiB Infinity Cache.
        Some(90402) => Part {
            name: "ip discovery",
            vram: 206_141_652_992,
            width: 8192,
            mem_clk: 1300,
            l1: 32,
            l2: 4096,
            l3: 262_144,
        },
        // RX 7900 XTX: 24 GiB GDDR6, 96 MiB Infinity Cache.
        Some(110000) => Part {
            name: "ip discovery",
            vram: 25_753_026_560,
            width: 384,
            mem_clk: 1249,
            l1: 32,
            l2: 6144,
            l3: 98_304,
        },
        // RX 9070 XT: 16 GiB GDDR6, 64 MiB Infinity Cache.
        Some(120001) => Part {
            name: "ip discovery",
            vram: 17_095_983_104,
            width: 256,
            mem_clk: 1258,
            l1: 32,
            l2: 8192,
            l3: 65_536,
        },
        _ => Part {
            name: "ip discovery",
            vram: 16 << 30,
            width: 4096,
            mem_clk: 1000,
            l1: 16,
            l2: 4096,
            l3: 0,
        },
    }
}

/// Where generated files say they come from, in parse errors (which cannot happen for text
/// built here).
const GENERATED: &str = "<kfd-emu generated>";

/// Completes `topology` in place.
pub(super) fn complete(topology: &mut Topology) -> Result<(), MachineError> {
    // Before anything sized by the GPU count: gpu_id hashing has 65535 values to give.
    let gpus = topology.gpus().count();
    if gpus > 128 {
        return Err(MachineError::TooManyGpus(gpus));
    }
    if topology.generation_id.is_none() {
        topology.generation_id = Some(1);
    }
    if topology.system.entries.is_empty() {
        topology.system = kfd_ioctl::topology::SystemProperties::parse(
            "platform_oem 0\nplatform_id 0\nplatform_rev 0\n",
            Path::new(GENERATED),
        )?;
    }
    ensure_cpu(topology)?;
    assign_gpu_ids(topology);
    assign_render_minors(topology)?;
    let first_cpu = topology.nodes.iter().find(|n| !n.is_gpu()).map(|n| n.id);
    for node in &mut topology.nodes {
        if node.is_gpu() {
            complete_gpu(node)?;
        } else {
            complete_cpu(node)?;
        }
    }
    complete_links(topology, first_cpu)?;
    Ok(())
}

fn complete_gpu(node: &mut Node) -> Result<(), MachineError> {
    let part = part(node);
    if node.name.is_none() {
        node.name = Some(part.name.to_owned());
    }
    if node.properties.simd_per_cu == 0 {
        let per_cu = if node.properties.wave_front_size == 32 {
            2
        } else {
            4
        };
        node.properties.set("simd_per_cu", per_cu);
    }
    if node.mem_banks.is_empty() {
        let vram = match node.properties.local_mem_size {
            Some(size) if size > 0 => size,
            _ => part.vram,
        };
        let mut bank = MemBank::parse(
            0,
            &format!(
                "heap_type 1\nsize_in_bytes {vram}\nflags 0\nwidth {}\nmem_clk_max {}\n",
                part.width, part.mem_clk
            ),
            Path::new(GENERATED),
        )?;
        bank.used_memory = Some(0);
        node.mem_banks.push(bank);
    }
    let has_data_cache = node
        .caches
        .iter()
        .any(|c| c.kind().contains(CacheType::HSACU) && !c.kind().contains(CacheType::INSTRUCTION));
    if !has_data_cache {
        let cus = sibling_count(node.cu_count().unwrap_or(1));
        let base = node.properties.simd_id_base;
        let mut caches = vec![
            (1, part.l1, 9, one_of(cus)),
            (1, 32, 10, one_of(cus)),
            (2, part.l2, 9, all_of(cus)),
        ];
        if part.l3 > 0 {
            caches.push((3, part.l3, 9, all_of(cus)));
        }
        append_caches(node, base, 64, &caches)?;
    }
    set_counts(node);
    Ok(())
}

/// The id after the largest of `ids` (0 when there are none).
fn next_id(
    ids: impl Iterator<Item = u32>,
    node: u32,
    what: &'static str,
) -> Result<u32, MachineError> {
    match ids.max() {
        None => Ok(0),
        Some(max) => max.checked_add(1).ok_or(MachineError::TooLarge {
            node,
            what,
            value: u64::from(max),
        }),
    }
}

fn complete_cpu(node: &mut Node) -> Result<(), MachineError> {
    if node.gpu_id.is_none() {
        node.gpu_id = Some(0);
    }
    if node.name.is_none() {
        node.name = Some(String::new());
    }
    if node.mem_banks.is_empty() {
        node.mem_banks.push(MemBank::parse(
            0,
            "heap_type 0\nsize_in_bytes 274877906944\nflags 0\nwidth 72\nmem_clk_max 3200\n",
            Path::new(GENERATED),
        )?);
    }
    if node.caches.is_empty() {
        let cores = sibling_count(node.properties.cpu_cores_count);
        let base = node.properties.cpu_core_id_base;
        // HSA cache types: DATA|CPU = 5, INSTRUCTION|CPU = 6, unified = 7.
        let caches = [
            (1, 32, 5, one_of(cores)),
            (1, 32, 6, one_of(cores)),
            (2, 1024, 7, one_of(cores)),
            (3, 32_768, 7, all_of(cores)),
        ];
        append_caches(node, base, 64, &caches)?;
    }
    set_counts(node);
    Ok(())
}

/// The longest sibling map the emulator writes. The kernel keeps a cache's sibling map in a
/// fixed-size array, so a map stays short whatever the core or CU count says.
const MAX_SIBLINGS: u64 = 1024;

/// The length of a sibling map over `processors`: at least 1, at most [`MAX_SIBLINGS`].
fn sibling_count(processors: u64) -> usize {
    // At most 1024: fits any usize.
    processors.clamp(1, MAX_SIBLINGS) as usize
}

/// A sibling map with only the first processor.
fn one_of(n: usize) -> Vec<bool> {
    let mut map = vec![false; n];
    map[0] = true;
    map
}

/// A sibling map with every processor.
fn all_of(n: usize) -> Vec<bool> {
    vec![true; n]
}

/// Appends caches `(level, size KiB, type, sibling map)` in the kernel's print order.
fn append_caches(
    node: &mut Node,
    processor_id_low: u64,
    line: u32,
    caches: &[(u32, u32, u32, Vec<bool>)],
) -> Result<(), MachineError> {
    for (level, size, kind, siblings) in caches {
        let mut text = format!(
            "processor_id_low {processor_id_low}\nlevel {level}\nsize {size}\n\
             cache_line_size {line}\ncache_lines_per_tag 1\nassociation 16\nlatency 0\n\
             type {kind}\nsibling_map "
        );
        for (i, &shared) in siblings.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            // Writing to a String cannot fail.
            let _ = write!(text, "{sep}{}", u8::from(shared));
        }
        text.push('\n');
        let id = next_id(node.caches.iter().map(|c| c.id), node.id, "cache id")?;
        node.caches
            .push(Cache::parse(id, &text, Path::new(GENERATED))?);
    }
    Ok(())
}

/// Makes every `*_count` key say how many directories there are.
fn set_counts(node: &mut Node) {
    let counts = [
        ("mem_banks_count", node.mem_banks.len()),
        ("caches_count", node.caches.len()),
        ("io_links_count", node.io_links.len()),
    ];
    for (key, count) in counts {
        if node.properties.get(key) != Some(count as u64) {
            node.properties.set(key, count as u64);
        }
    }
    let p2p = node.p2p_links.len() as u64;
    if node
        .properties
        .get("p2p_links_count")
        .is_some_and(|v| v != p2p)
        || (node.properties.get("p2p_links_count").is_none() && p2p > 0)
    {
        node.properties.set("p2p_links_count", p2p);
    }
}

/// A CRC-16/CCITT-FALSE, as a stand-in for the kernel's hash of the PCI and engine ids.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Gives every GPU a nonzero, unique `gpu_id`: its own when the capture has one that is not
/// taken, else one hashed from its PCI location, ids and VRAM (re-hashed on collision, as the
/// kernel does).
fn assign_gpu_ids(topology: &mut Topology) {
    let mut used = BTreeSet::new();
    let mut missing = Vec::new();
    for (index, node) in topology.nodes.iter().enumerate() {
        if !node.is_gpu() {
            continue;
        }
        match node.gpu_id().map(kfd_ioctl::GpuId::get) {
            Some(id) if used.insert(id) => {}
            _ => missing.push(index),
        }
    }
    for index in missing {
        let node = &topology.nodes[index];
        let p = &node.properties;
        let seed = format!(
            "{}:{}:{}:{}:{}:{}",
            p.domain.unwrap_or(0),
            p.location_id,
            p.device_id,
            p.unique_id.unwrap_or(0),
            node.vram_size(),
            node.id
        );
        // At most 128 GPUs take at most 128 of the 65535 hashes: a free one comes within a
        // few salts. The bound and the fallback only keep the loop finite by construction.
        let hashed = (0..=u16::MAX)
            .map(|salt| u32::from(crc16(format!("{seed}:{salt}").as_bytes())))
            .find(|id| *id != 0 && !used.contains(id));
        let id = hashed
            .or_else(|| (1..=u32::MAX).find(|id| !used.contains(id)))
            .unwrap_or(u32::MAX);
        used.insert(id);
        topology.nodes[index].gpu_id = Some(id);
    }
}

/// Gives every GPU a unique `drm_render_minor` in 128–255.
fn assign_render_minors(topology: &mut Topology) -> Result<(), MachineError> {
    let gpus = topology.nodes.iter().filter(|n| n.is_gpu()).count();
    let mut used = BTreeSet::new();
    let mut missing = Vec::new();
    for (index, node) in topology.nodes.iter().enumerate() {
        if !node.is_gpu() {
            continue;
        }
        let minor = node.properties.drm_render_minor;
        if (128..=255).contains(&minor) && used.insert(minor) {
            continue;
        }
        missing.push(index);
    }
    let mut free = (128u64..=255).filter(|m| !used.contains(m));
    for index in missing {
        // 128 minors and at most 128 GPUs: there is always one left.
        let minor = free.next().ok_or(MachineError::TooManyGpus(gpus))?;
        topology.nodes[index]
            .properties
            .set("drm_render_minor", minor);
    }
    Ok(())
}

/// The properties of a generated PCIe link.
fn pcie_link(from: u32, to: u32, flags: u32) -> Result<IoLink, TopologyError> {
    IoLink::parse(
        0,
        &format!(
            "type 2\nversion_major 0\nversion_minor 0\nnode_from {from}\nnode_to {to}\n\
             weight 20\nmin_latency 0\nmax_latency 0\nmin_bandwidth 312\nmax_bandwidth 32000\n\
             recommended_transfer_size 0\nrecommended_sdma_engine_id_mask 3\nflags {flags}\n"
        ),
        Path::new(GENERATED),
    )
}

/// Fixes `node_from`, drops links to nodes that do not exist, links each GPU with the first
/// CPU both ways when it has no link to any CPU, renumbers the links and updates the counts.
fn complete_links(topology: &mut Topology, first_cpu: Option<u32>) -> Result<(), MachineError> {
    let ids: BTreeSet<u32> = topology.nodes.iter().map(|n| n.id).collect();
    let cpus: BTreeSet<u32> = topology
        .nodes
        .iter()
        .filter(|n| !n.is_gpu())
        .map(|n| n.id)
        .collect();
    for node in &mut topology.nodes {
        let id = node.id;
        for links in [&mut node.io_links, &mut node.p2p_links] {
            links.retain(|l| ids.contains(&l.node_to) && l.node_to != id);
            for link in links.iter_mut() {
                if link.node_from != id {
                    *link = relink(link, id)?;
                }
            }
        }
    }
    if let Some(cpu) = first_cpu {
        let gpu_ids: Vec<u32> = topology.gpus().map(|n| n.id).collect();
        for gpu in gpu_ids {
            let Some(gpu_index) = topology.nodes.iter().position(|n| n.id == gpu) else {
                continue;
            };
            let linked = topology.nodes[gpu_index]
                .io_links
                .iter()
                .any(|l| cpus.contains(&l.node_to));
            if !linked {
                let link = pcie_link(gpu, cpu, 1)?;
                topology.nodes[gpu_index].io_links.insert(0, link);
            }
            let Some(cpu_index) = topology.nodes.iter().position(|n| n.id == cpu) else {
                continue;
            };
            let back = topology.nodes[cpu_index]
                .io_links
                .iter()
                .any(|l| l.node_to == gpu);
            if !back && !linked {
                let link = pcie_link(cpu, gpu, 3)?;
                topology.nodes[cpu_index].io_links.push(link);
            }
        }
    }
    for node in &mut topology.nodes {
        for (id, link) in (0u32..).zip(node.io_links.iter_mut()) {
            link.id = id;
        }
        for (id, link) in (0u32..).zip(node.p2p_links.iter_mut()) {
            link.id = id;
        }
        set_counts(node);
    }
    Ok(())
}

/// The CPU node a tree without one gets: the 24-core CPU of a real capture.
const CPU_TEMPLATE: &str = include_str!(
    "../../fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology/nodes/0/properties"
);

/// A tree without a CPU node (a capture of GPU nodes only) gets one, as node 0 — the kernel
/// numbers CPUs first — and every other node moves up by one.
fn ensure_cpu(topology: &mut Topology) -> Result<(), MachineError> {
    if topology.nodes.iter().any(|n| !n.is_gpu()) {
        return Ok(());
    }
    let ids: BTreeSet<u32> = topology.nodes.iter().map(|n| n.id).collect();
    let up = |id: u32| {
        id.checked_add(1).ok_or(MachineError::TooLarge {
            node: id,
            what: "node id",
            value: u64::from(id),
        })
    };
    for node in &mut topology.nodes {
        let from = up(node.id)?;
        node.id = from;
        for links in [&mut node.io_links, &mut node.p2p_links] {
            // A link to no node is dropped later anyway; its target cannot move.
            links.retain(|l| ids.contains(&l.node_to));
            for link in links.iter_mut() {
                *link = remap(link, from, up(link.node_to)?)?;
            }
        }
    }
    let properties = NodeProperties::parse(CPU_TEMPLATE, Path::new(GENERATED))?;
    topology.nodes.insert(
        0,
        Node {
            id: 0,
            gpu_id: Some(0),
            name: Some(String::new()),
            properties,
            ..Node::default()
        },
    );
    Ok(())
}

/// `link` with `node_from` set to `from`.
fn relink(link: &IoLink, from: u32) -> Result<IoLink, TopologyError> {
    remap(link, from, link.node_to)
}

/// `link` from `from` to `to`.
fn remap(link: &IoLink, from: u32, to: u32) -> Result<IoLink, TopologyError> {
    let mut text = String::new();
    for (key, value) in &link.properties {
        let value = match key.as_str() {
            "node_from" => u64::from(from),
            "node_to" => u64::from(to),
            _ => *value,
        };
        // Writing to a String cannot fail.
        let _ = writeln!(text, "{key} {value}");
    }
    IoLink::parse(link.id, &text, Path::new(GENERATED))
}

#[cfg(test)]
mod tests {
    use super::crc16;

    #[test]
    fn crc16_is_the_ccitt_false_variant() {
        // The standard check value of CRC-16/CCITT-FALSE.
        assert_eq!(crc16(b"123456789"), 0x29B1);
    }
}
