//! Machine presets and captured trees: what ROCr 5.2.3 and libhsakmt need of the topology.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kfd_emu::machine::Machine;
use kfd_ioctl::topology::{CacheType, HeapType, Topology};

/// A fresh private directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kfd-emu-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Checks what libhsakmt and ROCr 5.2.3 require of a tree (anchors §4.3).
fn assert_rocr_ready(topology: &Topology, what: &str) {
    let mut minors = BTreeSet::new();
    let mut gpu_ids = BTreeSet::new();
    assert!(
        topology.nodes.iter().any(|n| !n.is_gpu()),
        "{what}: a CPU node"
    );
    for node in &topology.nodes {
        let p = &node.properties;
        assert_eq!(
            p.mem_banks_count as usize,
            node.mem_banks.len(),
            "{what} node {}",
            node.id
        );
        assert_eq!(
            p.caches_count as usize,
            node.caches.len(),
            "{what} node {}",
            node.id
        );
        assert_eq!(
            p.io_links_count as usize,
            node.io_links.len(),
            "{what} node {}",
            node.id
        );
        assert_eq!(
            p.p2p_links_count.unwrap_or(0) as usize,
            node.p2p_links.len(),
            "{what} node {}",
            node.id
        );
        for link in node.io_links.iter().chain(&node.p2p_links) {
            assert_eq!(
                link.node_from, node.id,
                "{what}: node_from of a link of {}",
                node.id
            );
            assert!(
                topology.node(link.node_to).is_some(),
                "{what}: dangling link"
            );
        }
        assert!(
            !node.mem_banks.is_empty(),
            "{what} node {}: memory banks",
            node.id
        );
        if node.is_gpu() {
            let id = node.gpu_id().expect("GPU has a gpu_id");
            assert!(gpu_ids.insert(id), "{what}: gpu_id {id} is unique");
            assert!(id.get() <= 0xFFFF, "{what}: gpu_id is 16 bits");
            let minor = p.drm_render_minor;
            assert!((128..=255).contains(&minor), "{what}: render minor {minor}");
            assert!(minors.insert(minor), "{what}: render minor {minor} unique");
            assert!(p.simd_per_cu > 0, "{what}: simd_per_cu");
            assert!(
                node.caches
                    .iter()
                    .any(|c| c.kind().contains(CacheType::HSACU)
                        && c.kind().contains(CacheType::DATA)
                        && !c.kind().contains(CacheType::INSTRUCTION)),
                "{what}: a data cache of type HSACU"
            );
            assert!(
                node.mem_banks
                    .iter()
                    .any(|b| b.heap().is_vram() && b.size_in_bytes > 0),
                "{what}: a VRAM bank"
            );
            assert!(
                node.io_links
                    .iter()
                    .any(|l| topology.node(l.node_to).is_some_and(|n| !n.is_gpu())),
                "{what}: a link to a CPU"
            );
        } else {
            assert_eq!(node.gpu_id, Some(0), "{what}: CPU gpu_id file says 0");
            assert!(
                p.caches_count > 0,
                "{what}: CPU caches so libhsakmt skips the host's"
            );
            assert!(node.mem_banks.iter().all(|b| b.heap() == HeapType::System));
        }
    }
}

#[test]
fn every_preset_satisfies_rocr_and_survives_a_sysfs_round_trip() {
    assert_eq!(Machine::presets()[0].0, "mi300x", "mi300x is the default");
    for &(name, description) in Machine::presets() {
        assert!(!description.is_empty());
        let machine = Machine::preset(name).unwrap_or_else(|| panic!("preset {name}"));
        assert_eq!(machine.name(), name);
        assert_rocr_ready(machine.topology(), name);

        let dir = TempDir::new(name);
        machine.write_sysfs(&dir.0).expect("write sysfs");
        let reread = Topology::read_from(&dir.0).expect("the written tree parses");
        assert_eq!(
            &reread,
            machine.topology(),
            "{name}: the tree reads back the same"
        );
    }
    assert!(Machine::preset("no-such-machine").is_none());
}

#[test]
fn presets_describe_the_captured_parts() {
    let cases = [
        ("mi300x", 1, "gfx942", 206_141_652_992u64),
        ("mi210x8", 8, "gfx90a", 68_702_699_520),
        ("mi100", 1, "gfx908", 34_342_961_152),
        ("radeon-vii", 1, "gfx906", 17_163_091_968),
        ("rx7900xtx", 1, "gfx1100", 25_753_026_560),
    ];
    for (name, count, target, vram) in cases {
        let machine = Machine::preset(name).expect("preset");
        assert_eq!(machine.gpus().len(), count, "{name}");
        for gpu in machine.gpus() {
            assert_eq!(gpu.target.to_string(), target, "{name}");
            assert_eq!(gpu.vram_size, vram, "{name}");
            assert!(gpu.large_bar, "{name}: FB_PUBLIC bank");
            assert_eq!(machine.gpu(gpu.gpu_id), Some(gpu));
        }
    }
    // The MI100 capture has its own gpu_id file: it is kept.
    assert_eq!(
        Machine::preset("mi100").expect("preset").gpus()[0].gpu_id,
        42700
    );
    // XNACK per process: MI210 and MI300X yes, the others no.
    let xnack = |name| Machine::preset(name).expect("preset").gpus()[0].xnack_capable;
    assert!(xnack("mi300x") && xnack("mi210x8"));
    assert!(!xnack("mi100") && !xnack("radeon-vii") && !xnack("rx7900xtx"));
}

#[test]
fn mi210x8_keeps_its_two_hives_and_captured_minors() {
    let machine = Machine::preset("mi210x8").expect("preset");
    assert_eq!(
        machine.topology().xgmi_hives(),
        vec![vec![2, 3, 4, 5], vec![6, 7, 8, 9]]
    );
    let minors: Vec<u32> = machine.gpus().iter().map(|g| g.render_minor).collect();
    assert_eq!(minors, (128..136).collect::<Vec<_>>());
    let hives: BTreeSet<Option<u64>> = machine.gpus().iter().map(|g| g.hive_id).collect();
    assert_eq!(hives.len(), 2);
}

#[test]
fn apertures_follow_the_gfx9_layout() {
    let machine = Machine::preset("mi300x").expect("preset");
    let a = machine.gpus()[0].apertures();
    assert_eq!(a.lds_base, 1 << 48);
    assert_eq!(a.lds_limit, (1 << 48) | 0xFFFF_FFFF);
    assert_eq!(a.scratch_base, 2 << 48);
    assert_eq!(a.scratch_limit, (2 << 48) | 0xFFFF_FFFF);
    assert_eq!(a.gpuvm_base, 0x1_0000);
    assert_eq!(a.gpuvm_limit, (1 << 47) - 1);
}

#[test]
fn a_captured_tree_loads_with_or_without_the_topology_folder() {
    let capture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/topology/mi210-8gpu-xgmi"
    );
    let direct = Machine::from_topology_dir(capture).expect("load capture");
    assert_rocr_ready(direct.topology(), "mi210 capture");
    assert_eq!(direct.gpus().len(), 8);

    // A preset written as `<dir>/topology/…` loads from `<dir>` and is unchanged by a second
    // round of fixups.
    let machine = Machine::preset("radeon-vii").expect("preset");
    let dir = TempDir::new("nested");
    let root = dir.0.join("topology");
    std::fs::create_dir_all(&root).expect("mkdir");
    machine.write_sysfs(&root).expect("write");
    let loaded = Machine::from_topology_dir(&dir.0).expect("load nested");
    assert_eq!(loaded.topology(), machine.topology());
    assert_eq!(loaded.gpus(), machine.gpus());
}

#[test]
fn duplicate_gpu_ids_and_minors_are_made_unique() {
    // vega10-old-kernel's node 2 is a hand-made copy of node 1: same gpu_id and minor.
    let machine = Machine::preset("mi100").expect("preset");
    let mut topology = machine.topology().clone();
    let mut copy = topology.nodes[1].clone();
    copy.id = 2;
    topology.nodes.push(copy);
    let machine = Machine::from_topology("copy", topology).expect("machine");
    assert_rocr_ready(machine.topology(), "copy");
    assert_eq!(machine.gpus()[0].gpu_id, 42700, "the first keeps its id");
    assert_ne!(machine.gpus()[1].gpu_id, 42700);
}

#[test]
fn a_tree_of_gpus_only_gets_a_cpu_node_first() {
    // The MI100 capture is one GPU node, numbered 0.
    let capture = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/topology/mi100");
    let machine = Machine::from_topology_dir(capture).expect("load capture");
    assert_rocr_ready(machine.topology(), "mi100 capture");
    let nodes = &machine.topology().nodes;
    assert_eq!(nodes.len(), 2);
    assert!(!nodes[0].is_gpu() && nodes[0].id == 0, "the CPU is node 0");
    assert_eq!(machine.gpus()[0].node_id, 1);
    assert_eq!(machine.gpus()[0].gpu_id, 42700);
}
