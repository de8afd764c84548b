//! What `kfdtool info` prints: the topology as a table for people and as JSON for machines.

use std::fmt::Write as _;

use kfd_ioctl::topology::{IoLinkType, Node, Topology};

/// A byte count for people: `192 GiB`, `2 MiB`, `1.5 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            let whole = bytes / scale;
            let tenths = (bytes % scale) * 10 / scale;
            return if tenths == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenths} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

/// One table row: the columns padded to the header's widths.
fn row(out: &mut String, cols: [&str; 12]) {
    let [
        node,
        kind,
        gpu_id,
        name,
        gfx,
        cus,
        simds,
        vram,
        render,
        svm,
        xnack,
        hive,
    ] = cols;
    let _ = writeln!(
        out,
        "{node:<4} {kind:<4} {gpu_id:<8} {name:<16} {gfx:<8} {cus:>5} {simds:>6} {vram:>10} \
         {render:<18} {svm:<4} {xnack:<5} {hive}"
    );
}

/// Whether a GPU can run with XNACK (retry on GPU page faults) on, which SVM migration on
/// GPU faults needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XnackSupport {
    /// Per process, with `SET_XNACK_MODE` (GC 9.4.2, 9.4.3, 9.4.4, 9.5.0, 12.1.0).
    PerProcess,
    /// Only when the whole driver runs with retry faults (`amdgpu.noretry=0`): other GFX9.
    DriverWide,
    /// Never (GC 10.1.1 up to 12.1.0, older than GFX9, or not a GPU).
    No,
}

impl XnackSupport {
    /// What the kernel allows for `node` (kfd-abi.md §4.11; `kfd_process_xnack_mode`).
    pub fn of(node: &Node) -> XnackSupport {
        let Some(v) = node.gfx_target_version() else {
            return XnackSupport::No;
        };
        match (v.major, v.minor, v.stepping) {
            (9, 4, 2..=4) | (9, 5, 0) | (12, 1, 0) => XnackSupport::PerProcess,
            (9, _, _) => XnackSupport::DriverWide,
            _ => XnackSupport::No,
        }
    }

    /// A short word for tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            XnackSupport::PerProcess => "yes",
            XnackSupport::DriverWide => "boot",
            XnackSupport::No => "no",
        }
    }
}

/// The name of an IO link type for people and JSON.
fn link_type_name(kind: IoLinkType) -> String {
    match kind {
        IoLinkType::PciExpress => "pcie".to_owned(),
        IoLinkType::Xgmi => "xgmi".to_owned(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The topology as the JSON object `kfdtool info --json` prints: `kfd_version`, `emulated`
/// and `nodes`, each node with its identity, compute and memory sizes, capabilities and links.
pub fn topology_json(topo: &Topology, kfd_version: &str, emulated: bool) -> serde_json::Value {
    let nodes: Vec<serde_json::Value> = topo
        .nodes
        .iter()
        .map(|node| {
            let links: Vec<serde_json::Value> = node
                .io_links
                .iter()
                .chain(&node.p2p_links)
                .map(|link| {
                    serde_json::json!({
                        "to": link.node_to,
                        "type": link_type_name(link.kind()),
                        "weight": link.weight,
                    })
                })
                .collect();
            let gpu = node.is_gpu();
            serde_json::json!({
                "node": node.id,
                "kind": if gpu { "gpu" } else { "cpu" },
                "gpu_id": node.gpu_id().map(kfd_ioctl::GpuId::get),
                "name": node.name.clone().filter(|n| !n.is_empty()),
                "gfx_target_version": node.gfx_target_version().map(|v| v.to_string()),
                "simd_count": node.properties.simd_count,
                "cu_count": node.cu_count(),
                "cpu_cores": node.properties.cpu_cores_count,
                "vram_bytes": if gpu { Some(node.vram_size()) } else { None },
                "drm_render_minor": gpu.then_some(node.properties.drm_render_minor),
                "hive_id": node.hive_id(),
                "svm_supported": gpu && node.capability().svm_api_supported(),
                "xnack": if gpu { Some(XnackSupport::of(node).as_str()) } else { None },
                "links": links,
            })
        })
        .collect();
    serde_json::json!({
        "kfd_version": kfd_version,
        "emulated": emulated,
        "nodes": nodes,
    })
}

/// The topology as a text table: one row per node, then the links.
pub fn topology_table(topo: &Topology) -> String {
    let mut out = String::new();
    row(
        &mut out,
        [
            "node",
            "kind",
            "gpu_id",
            "name",
            "gfx",
            "CUs",
            "SIMDs",
            "VRAM",
            "render node",
            "SVM",
            "XNACK",
            "hive",
        ],
    );
    for node in &topo.nodes {
        let kind = if node.is_gpu() { "gpu" } else { "cpu" };
        let gpu_id = node.gpu_id().map_or("-".to_owned(), |id| id.to_string());
        let name = match node.name.clone().filter(|n| !n.is_empty()) {
            Some(name) => name,
            None if node.is_cpu() => format!("{} CPU cores", node.properties.cpu_cores_count),
            None => "-".into(),
        };
        let gfx = node
            .gfx_target_version()
            .map_or("-".to_owned(), |v| v.to_string());
        let cus = node.cu_count().map_or("-".to_owned(), |c| c.to_string());
        let vram = if node.is_gpu() {
            human_bytes(node.vram_size())
        } else {
            "-".into()
        };
        let render = node
            .render_node_path()
            .map_or("-".to_owned(), |p| p.display().to_string());
        let svm = if !node.is_gpu() {
            "-"
        } else if node.capability().svm_api_supported() {
            "yes"
        } else {
            "no"
        };
        let hive = node.hive_id().map_or("-".to_owned(), |h| format!("{h:#x}"));
        row(
            &mut out,
            [
                &node.id.to_string(),
                kind,
                &gpu_id,
                &name,
                &gfx,
                &cus,
                &node.properties.simd_count.to_string(),
                &vram,
                &render,
                svm,
                if node.is_gpu() {
                    XnackSupport::of(node).as_str()
                } else {
                    "-"
                },
                &hive,
            ],
        );
    }
    for node in &topo.nodes {
        for link in node.io_links.iter().chain(&node.p2p_links) {
            let kind = link_type_name(link.kind());
            let _ = writeln!(
                out,
                "link {} -> {}: {kind}, weight {}",
                link.node_from, link.node_to, link.weight
            );
        }
    }
    out
}
