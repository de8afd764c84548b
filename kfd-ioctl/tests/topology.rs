//! The topology parser against real sysfs captures (`kfd-emu/fixtures/topology/`), against
//! malformed trees built in a temporary directory, and against this machine's live tree.
//!
//! Every value asserted here was read off the capture files by hand.

use std::fs;
use std::path::{Path, PathBuf};

use kfd_ioctl::GpuId;
use kfd_ioctl::topology::{
    Cache, CacheType, Capability, Capability2, DEFAULT_ROOT, DebugProp, GfxTargetVersion, HeapType,
    IoLink, IoLinkFlags, IoLinkType, MemBank, MemFlags, Node, NodeProperties, SystemProperties,
    Topology, TopologyError,
};

mod topology_support;

use topology_support::{TempTree, fixtures};

fn read_fixture(name: &str) -> Topology {
    let root = fixtures().join(name);
    Topology::read_from(&root).unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
}

fn node(topology: &Topology, id: u32) -> &Node {
    topology
        .node(id)
        .unwrap_or_else(|| panic!("node {id} is missing"))
}

fn ids<'a>(nodes: impl Iterator<Item = &'a Node>) -> Vec<u32> {
    nodes.map(|n| n.id).collect()
}

fn isa(node: &Node) -> Option<String> {
    node.gfx_target_version().map(|v| v.to_string())
}

const MINIMAL_CPU: &str = "cpu_cores_count 4\nsimd_count 0\n";

// ---------------------------------------------------------------------------------------------
// Every capture

/// Where each capture keeps `nodes/`.
const CAPTURES: [(&str, &str); 4] = [
    (
        "mixed-mi300x-mi350x-gfx906-navi",
        "mixed-mi300x-mi350x-gfx906-navi/topology",
    ),
    ("mi210-8gpu-xgmi", "mi210-8gpu-xgmi"),
    ("vega10-old-kernel", "vega10-old-kernel/topology"),
    ("mi100", "mi100"),
];

/// The `properties` and `system_properties` files below `dir`.
fn properties_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .map(|path| match path.file_name().and_then(|n| n.to_str()) {
            _ if path.is_dir() => properties_files(&path),
            Some("properties" | "system_properties") => 1,
            _ => 0,
        })
        .sum()
}

#[test]
fn every_captured_file_prints_back_byte_for_byte_and_every_key_is_known() {
    let mut files = 0;
    for (name, tree) in CAPTURES {
        let topology = read_fixture(name);
        let tree = fixtures().join(tree);
        let same = |relative: String, printed: String| {
            let path = tree.join(&relative);
            let captured = fs::read_to_string(&path).unwrap();
            assert_eq!(printed, captured, "{}", path.display());
        };
        if tree.join("system_properties").exists() {
            same("system_properties".into(), topology.system.to_sysfs_text());
            files += 1;
        }
        for n in &topology.nodes {
            let dir = format!("nodes/{}", n.id);
            same(format!("{dir}/properties"), n.properties.to_sysfs_text());
            for bank in &n.mem_banks {
                same(
                    format!("{dir}/mem_banks/{}/properties", bank.id),
                    bank.to_sysfs_text(),
                );
            }
            for cache in &n.caches {
                same(
                    format!("{dir}/caches/{}/properties", cache.id),
                    cache.to_sysfs_text(),
                );
            }
            for link in &n.io_links {
                same(
                    format!("{dir}/io_links/{}/properties", link.id),
                    link.to_sysfs_text(),
                );
            }
            for link in &n.p2p_links {
                same(
                    format!("{dir}/p2p_links/{}/properties", link.id),
                    link.to_sysfs_text(),
                );
            }
            files += 1 + n.mem_banks.len() + n.caches.len() + n.io_links.len() + n.p2p_links.len();

            let unknown: Vec<_> = n.properties.unknown().collect();
            assert!(unknown.is_empty(), "{name} node {}: {unknown:?}", n.id);
        }
    }
    // Every properties file the captures hold was compared: 16 + 100 + 202 + 1.
    let on_disk: usize = CAPTURES
        .iter()
        .map(|(_, tree)| properties_files(&fixtures().join(tree)))
        .sum();
    assert_eq!((files, on_disk), (319, 319));
}

// ---------------------------------------------------------------------------------------------
// mixed-mi300x-mi350x-gfx906-navi: nodes from several machines, `topology/` prefix

#[test]
fn mixed_capture_nodes_isas_and_compute_units() {
    let t = read_fixture("mixed-mi300x-mi350x-gfx906-navi");
    assert_eq!(ids(t.nodes.iter()), [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(ids(t.gpus()), [1, 2, 3, 4, 5, 6]);
    assert_eq!(t.generation_id, None, "the capture has no generation_id");
    assert_eq!(
        t.system,
        Default::default(),
        "the capture has no system_properties"
    );

    let cpu = node(&t, 0);
    assert!(cpu.is_cpu() && !cpu.is_gpu());
    assert_eq!(cpu.properties.cpu_cores_count, 24);
    assert_eq!(
        cpu.gfx_target_version(),
        None,
        "CPU nodes print gfx_target_version 0"
    );
    assert_eq!(cpu.cu_count(), None);
    assert_eq!(cpu.properties.max_engine_clk_ccompute, 4000);
    assert_eq!(
        cpu.properties.capability, None,
        "CPU nodes print no capability"
    );

    let expected = [
        (1, "gfx906", 90006, 60, 64),
        (2, "gfx1102", 110002, 28, 32),
        (3, "gfx1032", 100302, 32, 32),
        (4, "gfx942", 90402, 304, 64),
        (5, "gfx950", 90500, 256, 64),
        (6, "gfx1201", 120001, 64, 32),
    ];
    for (id, name, raw, cus, wave) in expected {
        let gpu = node(&t, id);
        assert_eq!(isa(gpu).as_deref(), Some(name), "node {id}");
        assert_eq!(
            gpu.gfx_target_version().unwrap().raw(),
            Some(raw),
            "node {id}"
        );
        assert_eq!(gpu.cu_count(), Some(cus), "node {id}");
        assert_eq!(gpu.properties.wave_front_size, wave, "node {id}");
        assert_eq!(gpu.properties.vendor_id, 0x1002, "node {id}");
        assert_eq!(
            gpu.gpu_id, None,
            "node {id}: the capture has no gpu_id files"
        );
        // The capture scrubbed the render minors to 0.
        assert_eq!(gpu.render_node_path(), None, "node {id}");
    }
    assert_eq!(node(&t, 1).name.as_deref(), Some("vega20"));
    assert_eq!(node(&t, 3).name.as_deref(), Some("dimgrey_cavefish"));
    assert_eq!(node(&t, 2).name, None);

    let mi300x = node(&t, 4);
    assert_eq!(mi300x.properties.num_xcc, Some(8));
    assert_eq!(mi300x.properties.device_id, 0x74a1);
    assert_eq!(mi300x.properties.array_count, 32);
    assert_eq!(mi300x.properties.num_sdma_xgmi_engines, Some(14));
    assert_eq!(mi300x.properties.unique_id, Some(5593906200782126851));
}

#[test]
fn mixed_capture_optional_keys_tell_absent_from_zero() {
    let t = read_fixture("mixed-mi300x-mi350x-gfx906-navi");
    // cwsr_size/ctl_stack_size come from a newer kernel than the gfx906 node's.
    assert_eq!(node(&t, 4).properties.cwsr_size, Some(23203840));
    assert_eq!(node(&t, 4).properties.ctl_stack_size, Some(12288));
    assert_eq!(node(&t, 1).properties.cwsr_size, None);
    assert_eq!(node(&t, 1).properties.get("cwsr_size"), None);
    // local_mem_size is printed, as 0, for GPUs; not at all for CPUs.
    assert_eq!(node(&t, 1).properties.local_mem_size, Some(0));
    assert_eq!(node(&t, 0).properties.local_mem_size, None);
    assert_eq!(node(&t, 2).properties.unique_id, Some(0));
    assert_eq!(
        node(&t, 4).properties.get("hive_id"),
        Some(7773567030725891371)
    );
}

#[test]
fn mixed_capture_vram_comes_from_the_frame_buffer_banks() {
    let t = read_fixture("mixed-mi300x-mi350x-gfx906-navi");
    // MI300X: 192 GB of HBM3 less what the driver reserves.
    assert_eq!(node(&t, 4).vram_size(), 206_141_652_992);
    assert_eq!(node(&t, 5).vram_size(), 309_220_868_096);
    assert_eq!(node(&t, 1).vram_size(), 17_163_091_968);
    assert_eq!(node(&t, 2).vram_size(), 8_573_157_376);
    assert_eq!(node(&t, 6).vram_size(), 17_095_983_104);
    // The CPU's bank is system memory, not VRAM.
    let cpu = node(&t, 0);
    assert_eq!(cpu.vram_size(), 0);
    assert_eq!(cpu.mem_banks[0].heap(), HeapType::System);
    assert_eq!(cpu.mem_banks[0].size_in_bytes, 33_453_576_192);
    assert_eq!(cpu.mem_banks[0].width, 72);
    assert_eq!(cpu.mem_banks[0].used_memory, None);

    let bank = &node(&t, 4).mem_banks[0];
    assert_eq!(bank.heap(), HeapType::FrameBufferPublic);
    assert_eq!((bank.width, bank.mem_clk_max), (8192, 1300));
    assert_eq!(bank.used_memory, Some(1_043_775_488));
    assert_eq!(node(&t, 1).mem_banks[0].used_memory, Some(10_874_880));
}

#[test]
fn mixed_capture_capability_bits() {
    let t = read_fixture("mixed-mi300x-mi350x-gfx906-navi");
    // MI300X: 2893521536 = 0xac77a280.
    let mi300x = node(&t, 4).capability();
    assert_eq!(mi300x.bits(), 0xac77_a280);
    assert!(mi300x.svm_api_supported());
    assert!(
        !mi300x.coherent_host_access(),
        "only the MI300A has coherent host access"
    );
    assert!(mi300x.debug_trap_supported());
    assert_eq!(mi300x.doorbell_type(), 2);
    assert_eq!(mi300x.asic_revision(), 1);
    assert_eq!(mi300x.watch_points_total_bits(), 2);
    assert!(mi300x.contains(
        Capability::WATCH_POINTS_SUPPORTED
            | Capability::MEM_EDC_SUPPORTED
            | Capability::RAS_EVENT_NOTIFY
            | Capability::SRAM_EDC_SUPPORTED
            | Capability::TRAP_DEBUG_FIRMWARE_SUPPORTED
            | Capability::PER_QUEUE_RESET_SUPPORTED
    ));
    assert!(!mi300x.contains(Capability::RESERVED_WAS_SRAM_EDC_SUPPORTED));
    assert_eq!(
        node(&t, 4).capability2(),
        Capability2::PER_SDMA_QUEUE_RESET_SUPPORTED
    );
    // debug_prop 1511 = 0x5e7.
    let debug = node(&t, 4).debug_prop();
    assert_eq!(debug.watch_addr_mask_lo_bit(), 7);
    assert_eq!(debug.watch_addr_mask_hi_bit(), 30);
    assert!(debug.contains(DebugProp::DISPATCH_INFO_ALWAYS_VALID));
    assert!(!debug.contains(DebugProp::WATCHPOINTS_EXCLUSIVE));

    // MI350X: 0xac37a280, the same bits as the MI300X but ASIC revision 0.
    let mi350x = node(&t, 5).capability();
    assert!(mi350x.svm_api_supported());
    assert_eq!(mi350x.asic_revision(), 0);
    // Navi48 (gfx1201): precise ALU operations for the debugger, no memory EDC.
    let navi48 = node(&t, 6).capability();
    assert!(navi48.contains(Capability::TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED));
    assert!(!navi48.contains(Capability::MEM_EDC_SUPPORTED));
    assert!(navi48.svm_api_supported());
    // Navi33 (gfx1102) has no capability2 bits.
    assert_eq!(node(&t, 2).capability2(), Capability2::empty());
    assert_eq!(node(&t, 2).properties.capability2, Some(0));
}

#[test]
fn mixed_capture_links_and_hives() {
    let t = read_fixture("mixed-mi300x-mi350x-gfx906-navi");
    // The node says io_links_count 3, but the capture kept only one of them.
    let cpu = node(&t, 0);
    assert_eq!(cpu.properties.io_links_count, 3);
    assert_eq!(cpu.io_links.len(), 1);
    let link = &cpu.io_links[0];
    assert_eq!(link.kind(), IoLinkType::PciExpress);
    assert_eq!((link.node_from, link.node_to, link.weight), (0, 1, 20));
    assert_eq!(link.max_bandwidth, 32000);
    assert_eq!(link.recommended_sdma_engine_id_mask, Some(3));
    assert_eq!(
        link.link_flags(),
        IoLinkFlags::ENABLED | IoLinkFlags::NON_COHERENT
    );

    let p2p = &node(&t, 1).p2p_links;
    assert_eq!(p2p.len(), 1);
    assert_eq!((p2p[0].node_to, p2p[0].weight), (2, 40));
    assert!(node(&t, 1).io_links.is_empty());

    // Only the MI300X carries a hive id, and no peer of it is in this tree.
    assert_eq!(node(&t, 4).hive_id(), Some(7773567030725891371));
    assert_eq!(t.xgmi_hives(), vec![vec![4]]);
}

// ---------------------------------------------------------------------------------------------
// mi210-8gpu-xgmi: 2 CPUs, 8 GPUs in two hives, no `topology/` prefix, no gpu_id/name files

#[test]
fn mi210_capture_nodes() {
    let t = read_fixture("mi210-8gpu-xgmi");
    assert_eq!(ids(t.nodes.iter()), (0..10).collect::<Vec<_>>());
    assert_eq!(ids(t.gpus()), [2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(node(&t, 0).properties.cpu_cores_count, 64);
    assert_eq!(node(&t, 1).properties.cpu_core_id_base, 64);

    for (gpu, minor) in t.gpus().zip(128..) {
        assert_eq!(isa(gpu).as_deref(), Some("gfx90a"), "node {}", gpu.id);
        assert_eq!(gpu.properties.gfx_target_version, Some(90010));
        assert_eq!(gpu.cu_count(), Some(104));
        assert_eq!(gpu.properties.device_id, 0x740f);
        assert_eq!(
            gpu.render_node_path(),
            Some(PathBuf::from(format!("/dev/dri/renderD{minor}")))
        );
        assert_eq!(
            (gpu.gpu_id, gpu.gpu_id(), gpu.name.as_ref()),
            (None, None, None)
        );
        assert_eq!(gpu.properties.caches_count, 217);
        assert!(gpu.caches.is_empty(), "the capture has no caches/");
        // mem_banks_count 1 but no mem_banks/, and local_mem_size 0: the size is unknown.
        assert_eq!(gpu.properties.mem_banks_count, 1);
        assert_eq!(gpu.vram_size(), 0);
        // An older kernel than the mixed capture's: capability2 is not printed at all.
        assert_eq!(gpu.properties.capability2, None);
        assert_eq!(gpu.properties.debug_prop, Some(470));
    }
    assert_eq!(t.node_by_gpu_id(0), None);
}

#[test]
fn mi210_capture_capability_bits() {
    let t = read_fixture("mi210-8gpu-xgmi");
    // 746037888 = 0x2c77a280.
    let cap = node(&t, 2).capability();
    assert_eq!(cap.bits(), 0x2c77_a280);
    assert!(cap.svm_api_supported());
    assert!(!cap.coherent_host_access());
    assert!(cap.debug_trap_supported());
    assert!(cap.contains(Capability::MEM_EDC_SUPPORTED));
    assert!(!cap.contains(Capability::PER_QUEUE_RESET_SUPPORTED));
    assert_eq!(cap.doorbell_type(), 2);
    assert_eq!(cap.asic_revision(), 1);
    // debug_prop 470 = 0x1d6: no DISPATCH_INFO_ALWAYS_VALID.
    let debug = node(&t, 2).debug_prop();
    assert_eq!(
        (
            debug.watch_addr_mask_lo_bit(),
            debug.watch_addr_mask_hi_bit()
        ),
        (6, 29)
    );
    assert!(!debug.contains(DebugProp::DISPATCH_INFO_ALWAYS_VALID));
}

#[test]
fn mi210_capture_two_xgmi_hives_of_four() {
    let t = read_fixture("mi210-8gpu-xgmi");
    assert_eq!(t.xgmi_hives(), vec![vec![2, 3, 4, 5], vec![6, 7, 8, 9]]);
    for id in 2..=5 {
        assert_eq!(node(&t, id).hive_id(), Some(12609507387757274807));
    }
    for id in 6..=9 {
        assert_eq!(node(&t, id).hive_id(), Some(18091350218769748594));
    }
    // unique_id is above i64::MAX on some GPUs: the full u64 range is read.
    assert_eq!(node(&t, 9).properties.unique_id, Some(14073402507705256557));
}

#[test]
fn mi210_capture_io_and_p2p_links() {
    let t = read_fixture("mi210-8gpu-xgmi");
    // CPU 0: HyperTransport to the other socket, PCIe to GPUs 2..=5; P2P to GPUs 6..=9.
    let cpu = node(&t, 0);
    assert_eq!(cpu.io_links.len(), 5);
    assert_eq!(cpu.io_links[0].kind(), IoLinkType::HyperTransport);
    assert_eq!((cpu.io_links[0].node_to, cpu.io_links[0].weight), (1, 32));
    assert_eq!(cpu.io_links[0].link_flags(), IoLinkFlags::empty());
    let to: Vec<u32> = cpu.io_links[1..].iter().map(|l| l.node_to).collect();
    assert_eq!(to, [2, 3, 4, 5]);
    assert!(
        cpu.io_links[1..]
            .iter()
            .all(|l| l.kind() == IoLinkType::PciExpress)
    );
    let to: Vec<u32> = cpu.p2p_links.iter().map(|l| l.node_to).collect();
    assert_eq!(to, [6, 7, 8, 9]);
    assert!(cpu.p2p_links.iter().all(|l| l.weight == 52));

    for gpu in t.gpus() {
        let socket = if gpu.id <= 5 { 0 } else { 1 };
        let hive: Vec<u32> = if gpu.id <= 5 {
            (2..=5).collect()
        } else {
            (6..=9).collect()
        };
        assert_eq!(gpu.io_links.len(), 4, "node {}", gpu.id);
        assert!(gpu.io_links.iter().all(|l| l.node_from == gpu.id));

        let pcie = &gpu.io_links[0];
        assert_eq!(pcie.kind(), IoLinkType::PciExpress);
        assert_eq!((pcie.node_to, pcie.weight), (socket, 20));
        assert_eq!((pcie.min_bandwidth, pcie.max_bandwidth), (312, 32000));

        let peers: Vec<u32> = gpu.io_links[1..].iter().map(|l| l.node_to).collect();
        let expected: Vec<u32> = hive.iter().copied().filter(|&p| p != gpu.id).collect();
        assert_eq!(peers, expected, "node {}", gpu.id);
        for xgmi in &gpu.io_links[1..] {
            assert!(xgmi.is_xgmi());
            assert_eq!(xgmi.link_type, 11);
            assert_eq!(xgmi.weight, 15);
            assert_eq!((xgmi.min_bandwidth, xgmi.max_bandwidth), (50000, 50000));
            assert_eq!(xgmi.recommended_sdma_engine_id_mask, Some(28));
            assert_eq!(xgmi.link_flags(), IoLinkFlags::ENABLED);
        }

        // P2P: the other socket (weight 52), then the other hive's GPUs over PCIe (72).
        assert_eq!(gpu.p2p_links.len(), 5);
        assert_eq!(
            (gpu.p2p_links[0].node_to, gpu.p2p_links[0].weight),
            (1 - socket, 52)
        );
        let others: Vec<u32> = gpu.p2p_links[1..].iter().map(|l| l.node_to).collect();
        let expected: Vec<u32> = (2..=9).filter(|p| !hive.contains(p)).collect();
        assert_eq!(others, expected, "node {}", gpu.id);
        assert!(
            gpu.p2p_links
                .iter()
                .all(|l| l.kind() == IoLinkType::PciExpress)
        );
        assert!(gpu.p2p_links[1..].iter().all(|l| l.weight == 72));
    }
}

// ---------------------------------------------------------------------------------------------
// vega10-old-kernel: full tree from an old kernel; node 2 is a hand-made copy of node 1

#[test]
fn vega10_capture_system_properties_and_generation() {
    let t = read_fixture("vega10-old-kernel");
    assert_eq!(t.generation_id, Some(2));
    assert_eq!(t.system.platform_oem, 4777524452235890003);
    assert_eq!(t.system.platform_id, 85015745549651);
    assert_eq!(t.system.platform_rev, 2);
}

#[test]
fn vega10_capture_nodes_from_an_old_kernel() {
    let t = read_fixture("vega10-old-kernel");
    assert_eq!(ids(t.nodes.iter()), [0, 1, 2]);
    assert_eq!(ids(t.gpus()), [1, 2]);
    assert_eq!(node(&t, 0).gpu_id, Some(0));
    assert_eq!(node(&t, 0).gpu_id(), None, "gpu_id 0 means a CPU");
    assert_eq!(node(&t, 1).gpu_id(), Some(GpuId(13261)));
    // The copy kept node 1's gpu_id: the first node wins.
    assert_eq!(node(&t, 2).gpu_id(), Some(GpuId(13261)));
    assert_eq!(t.node_by_gpu_id(13261).map(|n| n.id), Some(1));
    assert_eq!(t.node_by_gpu_id(1), None);
    for n in &t.nodes {
        assert_eq!(
            n.name.as_deref(),
            Some(""),
            "node {}: the name file is empty",
            n.id
        );
    }
    assert_eq!(node(&t, 0).properties.cpu_cores_count, 20);

    let gpu = node(&t, 1);
    // This kernel predates gfx_target_version: nothing is derived from the device id.
    assert_eq!(gpu.properties.gfx_target_version, None);
    assert_eq!(gpu.gfx_target_version(), None);
    assert_eq!(gpu.properties.device_id, 0x6860);
    assert_eq!(gpu.cu_count(), Some(64));
    for key in [
        "p2p_links_count",
        "num_gws",
        "domain",
        "hive_id",
        "num_xcc",
        "debug_prop",
    ] {
        assert_eq!(gpu.properties.get(key), None, "{key}");
    }
    assert_eq!(gpu.properties.hive_id, None);
    assert_eq!(gpu.properties.num_cp_queues, None);
    assert_eq!(
        gpu.render_node_path(),
        Some(PathBuf::from("/dev/dri/renderD128"))
    );
    assert_eq!(
        node(&t, 2).render_node_path(),
        Some(PathBuf::from("/dev/dri/renderD129"))
    );
    assert!(t.xgmi_hives().is_empty());

    // 8832 = 0x2280: doorbell type 2 and 4 watch points, but no SVM and no debug trap.
    let cap = gpu.capability();
    assert_eq!(cap.bits(), 0x2280);
    assert!(!cap.svm_api_supported());
    assert!(!cap.debug_trap_supported());
    assert_eq!(cap.doorbell_type(), 2);
    assert!(cap.contains(Capability::WATCH_POINTS_SUPPORTED));
    assert_eq!(cap.watch_points_total_bits(), 2);
    assert_eq!(gpu.capability2(), Capability2::empty());
}

#[test]
fn vega10_capture_memory_banks() {
    let t = read_fixture("vega10-old-kernel");
    let gpu = node(&t, 1);
    // This kernel still printed local_mem_size; it agrees with the bank.
    assert_eq!(gpu.properties.local_mem_size, Some(17_163_091_968));
    assert_eq!(gpu.vram_size(), 17_163_091_968);
    let bank = &gpu.mem_banks[0];
    assert_eq!(bank.heap(), HeapType::FrameBufferPublic);
    assert_eq!((bank.width, bank.mem_clk_max), (2048, 945));
    assert_eq!(bank.used_memory, Some(14_102_528));
    assert_eq!(bank.mem_flags(), MemFlags::empty());

    let system = &node(&t, 0).mem_banks[0];
    assert_eq!(system.heap(), HeapType::System);
    assert_eq!(system.size_in_bytes, 67_155_521_536);
    assert_eq!((system.width, system.mem_clk_max), (64, 2666));
}

#[test]
fn vega10_capture_caches() {
    let t = read_fixture("vega10-old-kernel");
    assert!(node(&t, 0).caches.is_empty(), "the CPU node has no caches/");
    let caches = &node(&t, 1).caches;
    assert_eq!(caches.len(), 96);
    assert_eq!(node(&t, 1).properties.caches_count, 96);
    // Directory names sort numerically: 0, 1, 2, …, 10, …, 95.
    let order: Vec<u32> = caches.iter().map(|c| c.id).collect();
    assert_eq!(order, (0..96).collect::<Vec<_>>());

    // 64 per-CU vector L1 caches of 16 KiB (data), 16 instruction caches of 8 KiB and
    // 16 scalar caches of 4 KiB, each of the last two shared by 4 CUs.
    assert!(caches.iter().all(|c| c.level == 1));
    let count = |size, kind| {
        caches
            .iter()
            .filter(|c| c.size == size && c.kind() == kind)
            .count()
    };
    assert_eq!(count(16, CacheType::DATA | CacheType::HSACU), 64);
    assert_eq!(count(8, CacheType::INSTRUCTION | CacheType::HSACU), 16);
    assert_eq!(count(4, CacheType::DATA | CacheType::HSACU), 16);

    let first = &caches[0];
    assert_eq!(first.processor_id_low, 2147487744);
    assert_eq!(first.cache_type, 9);
    assert_eq!(first.sibling_map.len(), 256);
    assert_eq!(first.siblings().collect::<Vec<_>>(), [0]);
    assert_eq!(caches[63].processor_id_low, 2147487807);

    let instruction = &caches[64];
    assert_eq!((instruction.size, instruction.cache_type), (8, 10));
    assert_eq!(instruction.siblings().collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(caches[95].processor_id_low, 2147487804);
    assert_eq!(caches[95].siblings().collect::<Vec<_>>(), [0, 1, 2, 3]);
}

#[test]
fn vega10_capture_links() {
    let t = read_fixture("vega10-old-kernel");
    let link = &node(&t, 1).io_links[0];
    assert_eq!(link.kind(), IoLinkType::PciExpress);
    assert_eq!((link.node_from, link.node_to, link.weight), (1, 0, 20));
    assert_eq!(
        link.recommended_sdma_engine_id_mask, None,
        "an older kernel"
    );
    assert_eq!(link.link_flags(), IoLinkFlags::empty());
    assert_eq!(node(&t, 0).io_links[0].node_to, 1);
    // The hand-made node 2 copied node 1's link, node_from included: read as captured.
    assert_eq!(node(&t, 2).io_links[0].node_from, 1);
    assert!(node(&t, 1).p2p_links.is_empty());
}

// ---------------------------------------------------------------------------------------------
// mi100: node 0 only, files without trailing newlines

#[test]
fn mi100_capture() {
    let t = read_fixture("mi100");
    assert_eq!(ids(t.nodes.iter()), [0]);
    let gpu = node(&t, 0);
    assert!(gpu.is_gpu() && !gpu.is_cpu());
    assert_eq!(gpu.gpu_id(), Some(GpuId(42700)));
    assert_eq!(t.node_by_gpu_id(42700).map(|n| n.id), Some(0));
    assert_eq!(gpu.name.as_deref(), Some("arcturus"));
    assert_eq!(isa(gpu).as_deref(), Some("gfx908"));
    assert_eq!(gpu.properties.gfx_target_version, Some(90008));
    assert_eq!(gpu.cu_count(), Some(120));
    assert_eq!(
        gpu.render_node_path(),
        Some(PathBuf::from("/dev/dri/renderD128"))
    );
    assert_eq!(gpu.properties.num_sdma_xgmi_engines, Some(6));
    assert_eq!(gpu.properties.p2p_links_count, Some(3));
    assert_eq!(gpu.hive_id(), None, "hive_id 0 is no hive");
    assert!(t.xgmi_hives().is_empty());
    // 749970048 = 0x2cb3a280: ASIC revision 2, SVM, memory EDC, no precise memory operations.
    let cap = gpu.capability();
    assert_eq!(cap.bits(), 0x2cb3_a280);
    assert!(cap.svm_api_supported());
    assert_eq!(cap.asic_revision(), 2);
    assert!(cap.contains(Capability::MEM_EDC_SUPPORTED));
    assert!(!cap.contains(Capability::TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED));
}

// ---------------------------------------------------------------------------------------------
// rx7900xtx-template: one properties text with a `{drm_render_minor}` placeholder

fn rx7900xtx_template() -> String {
    fs::read_to_string(fixtures().join("rx7900xtx-template/properties.template")).unwrap()
}

#[test]
fn rx7900xtx_template_is_rejected_until_the_placeholder_is_filled() {
    let tree = TempTree::new("rx7900xtx-raw");
    let path = tree.write("nodes/0/properties", rx7900xtx_template());
    match Topology::read_from(&tree.0) {
        Err(TopologyError::Parse {
            path: p,
            line,
            text,
        }) => {
            assert_eq!(p, path);
            assert_eq!(line, 24);
            assert_eq!(text, "drm_render_minor {drm_render_minor}");
        }
        other => panic!("expected a parse error at line 24, got {other:?}"),
    }
}

#[test]
fn rx7900xtx_template_with_a_render_minor() {
    let text = rx7900xtx_template().replace("{drm_render_minor}", "130");
    let properties = NodeProperties::parse(&text, Path::new("rx7900xtx")).unwrap();
    assert_eq!(properties.to_sysfs_text(), text);

    let tree = TempTree::new("rx7900xtx");
    tree.write("topology/nodes/0/properties", &text);
    let t = Topology::read_from(&tree.0).unwrap();
    let gpu = node(&t, 0);
    assert_eq!(gpu.properties, properties);
    assert_eq!(isa(gpu).as_deref(), Some("gfx1100"));
    assert_eq!(gpu.properties.gfx_target_version, Some(110000));
    assert_eq!(gpu.cu_count(), Some(96));
    assert_eq!(gpu.properties.wave_front_size, 32);
    assert_eq!(gpu.properties.device_id, 0x744c);
    assert_eq!(
        gpu.render_node_path(),
        Some(PathBuf::from("/dev/dri/renderD130"))
    );
    // 671588992 = 0x2807a280: SVM, precise memory operations, no memory EDC.
    let cap = gpu.capability();
    assert!(cap.svm_api_supported());
    assert!(cap.contains(Capability::TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED));
    assert!(!cap.contains(Capability::MEM_EDC_SUPPORTED));
    assert_eq!(gpu.properties.capability2, None);
}

// ---------------------------------------------------------------------------------------------
// Malformed trees, roots, ordering

#[test]
fn a_malformed_line_names_its_file_and_line() {
    let tree = TempTree::new("malformed");
    tree.write("nodes/0/properties", MINIMAL_CPU);
    let bad = tree.write(
        "nodes/1/io_links/0/properties",
        "type 2\nnode_from 1\n\nnode_to 0x0\n",
    );
    tree.write("nodes/1/properties", "cpu_cores_count 0\nsimd_count 8\n");
    match Topology::read_from(&tree.0) {
        Err(e @ TopologyError::Parse { .. }) => {
            let TopologyError::Parse { path, line, text } = &e else {
                unreachable!()
            };
            assert_eq!((path, *line, text.as_str()), (&bad, 4, "node_to 0x0"));
            let message = e.to_string();
            assert!(message.contains("line 4 of"), "{message}");
            assert!(message.contains("io_links/0/properties"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn lines_that_are_not_key_and_integer_are_parse_errors() {
    let path = Path::new("properties");
    for (text, line) in [
        ("cpu_cores_count 1\nsimd_count\n", 2),
        ("cpu_cores_count 1 2\nsimd_count 0\n", 1),
        ("cpu_cores_count -1\nsimd_count 0\n", 1),
        ("cpu_cores_count +1\nsimd_count 0\n", 1),
        ("simd_count 0\ncpu_cores_count 18446744073709551616\n", 2),
    ] {
        match NodeProperties::parse(text, path) {
            Err(TopologyError::Parse { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
            other => panic!("{text:?}: expected a parse error, got {other:?}"),
        }
    }
}

#[test]
fn blank_lines_and_trailing_whitespace_are_tolerated() {
    let text = "\ncpu_cores_count 2  \n\n  simd_count 0\t\r\nhive_id 18446744073709551615\n\n";
    let p = NodeProperties::parse(text, Path::new("properties")).unwrap();
    assert_eq!((p.cpu_cores_count, p.simd_count), (2, 0));
    assert_eq!(p.hive_id, Some(u64::MAX), "hive_id is a 64-bit field");
    assert_eq!(p.entries.len(), 3);
}

#[test]
fn a_32_bit_field_above_u32_max_is_out_of_range() {
    let text = "cpu_cores_count 0\nsimd_count 4\ncapability 4294967296\n";
    match NodeProperties::parse(text, Path::new("p")) {
        Err(TopologyError::OutOfRange {
            line,
            key,
            value,
            bits,
            ..
        }) => {
            assert_eq!(
                (line, key.as_str(), value, bits),
                (3, "capability", 1 << 32, 32)
            );
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }
}

#[test]
fn a_file_without_a_key_every_kernel_writes_is_missing_key() {
    let tree = TempTree::new("missing");
    let path = tree.write("nodes/0/properties", "cpu_cores_count 4\n");
    match Topology::read_from(&tree.0) {
        Err(TopologyError::MissingKey { path: p, key }) => {
            assert_eq!((p, key), (path, "simd_count"));
        }
        other => panic!("expected MissingKey, got {other:?}"),
    }
    let tree = TempTree::new("missing-bank");
    tree.write("nodes/0/properties", MINIMAL_CPU);
    tree.write("nodes/0/mem_banks/0/properties", "heap_type 0\nwidth 64\n");
    assert!(matches!(
        Topology::read_from(&tree.0),
        Err(TopologyError::MissingKey {
            key: "size_in_bytes",
            ..
        })
    ));
}

#[test]
fn unknown_keys_are_kept_in_order_and_printed_back() {
    let text = "cpu_cores_count 0\nsimd_count 8\nfuture_key 7\ngfx_target_version 90402\n";
    let mut p = NodeProperties::parse(text, Path::new("p")).unwrap();
    assert_eq!(p.unknown().collect::<Vec<_>>(), [("future_key", 7)]);
    assert_eq!(p.get("future_key"), Some(7));
    assert_eq!(p.to_sysfs_text(), text);

    p.set("drm_render_minor", 131);
    p.set("gfx_target_version", 90010);
    assert_eq!(
        (p.drm_render_minor, p.gfx_target_version),
        (131, Some(90010))
    );
    assert_eq!(
        p.to_sysfs_text(),
        "cpu_cores_count 0\nsimd_count 8\nfuture_key 7\ngfx_target_version 90010\n\
         drm_render_minor 131\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Parsing from strings: no reader, so these also run under Miri (see the crate's Cargo.toml)

/// Every file below `dir`, depth first, through `std::fs` only.
fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_below(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_captured_file_parses_from_a_string_and_prints_back() {
    // Under Miri, which interprets every step, one file of each kind per capture.
    let mut seen = std::collections::BTreeSet::new();
    let mut parsed = 0;
    for (capture, tree) in CAPTURES {
        let mut files = Vec::new();
        files_below(&fixtures().join(tree), &mut files);
        for path in files {
            let parts: Vec<&str> = path.iter().filter_map(|p| p.to_str()).collect();
            let kind = match parts.as_slice() {
                [.., "system_properties"] => "system",
                [.., "mem_banks", _, "properties"] => "bank",
                [.., "caches", _, "properties"] => "cache",
                [.., "io_links" | "p2p_links", _, "properties"] => "link",
                [.., "nodes", _, "properties"] => "node",
                _ => continue,
            };
            if !seen.insert((capture, kind)) && cfg!(miri) {
                continue;
            }
            let text = fs::read_to_string(&path).unwrap();
            let printed = match kind {
                "system" => SystemProperties::parse(&text, &path).map(|p| p.to_sysfs_text()),
                "bank" => MemBank::parse(0, &text, &path).map(|b| b.to_sysfs_text()),
                "cache" => Cache::parse(0, &text, &path).map(|c| c.to_sysfs_text()),
                "link" => IoLink::parse(0, &text, &path).map(|l| l.to_sysfs_text()),
                _ => NodeProperties::parse(&text, &path).map(|p| p.to_sysfs_text()),
            };
            assert_eq!(printed.unwrap(), text, "{}", path.display());
            parsed += 1;
        }
    }
    let kinds: std::collections::BTreeSet<&str> = seen.iter().map(|&(_, kind)| kind).collect();
    assert_eq!(kinds.len(), 5, "every parser ran: {kinds:?}");
    if !cfg!(miri) {
        assert_eq!(parsed, 319, "as many as the reader compares");
    }
}

#[test]
fn hostile_values_parse_from_a_string_to_values_or_typed_errors() {
    let p = Path::new("p");
    let node = |extra: &str| {
        NodeProperties::parse(&format!("cpu_cores_count 1\nsimd_count 0\n{extra}"), p)
    };
    assert_eq!(
        node("hive_id 18446744073709551615\n").unwrap().hive_id,
        Some(u64::MAX)
    );
    assert!(matches!(
        node("capability 4294967296\n"),
        Err(TopologyError::OutOfRange { .. })
    ));
    assert!(matches!(
        node("cpu_cores_count 65537\n"),
        Err(TopologyError::AboveLimit { .. })
    ));
    let digits = "9".repeat(40);
    assert!(matches!(
        node(&format!("hive_id {digits}\n")),
        Err(TopologyError::Parse { line: 3, .. })
    ));
    let long_key = "k".repeat(60_000);
    assert_eq!(
        node(&format!("{long_key} 1\n")).unwrap().get(&long_key),
        Some(1)
    );
    assert!(node("\u{0} 1\n\u{fffd} 2\n").is_ok());

    let bank = MemBank::parse(0, "heap_type 1\nsize_in_bytes 18446744073709551615\n", p).unwrap();
    assert_eq!(bank.size_in_bytes, u64::MAX);
    assert!(matches!(
        MemBank::parse(0, "heap_type 4294967296\nsize_in_bytes 0\n", p),
        Err(TopologyError::OutOfRange { .. })
    ));

    let cache = |map: &str| {
        Cache::parse(
            0,
            &format!("level 1\nsize 1\ntype 1\nsibling_map {map}\n"),
            p,
        )
    };
    assert_eq!(
        cache(&vec!["1"; 30_000].join(","))
            .unwrap()
            .sibling_map
            .len(),
        30_000
    );
    for bad in ["1,0,2", "1,,0", ",", "-1", "1,0,"] {
        assert!(
            matches!(cache(bad), Err(TopologyError::Parse { line: 4, .. })),
            "{bad}"
        );
    }

    let link = IoLink::parse(0, "type 11\nnode_from 4294967295\nnode_to 4294967295\n", p).unwrap();
    assert_eq!((link.node_from, link.node_to), (u32::MAX, u32::MAX));
    assert_eq!(GfxTargetVersion::from_raw(u32::MAX).raw(), Some(u32::MAX));
}

#[test]
fn nodes_sort_numerically_and_other_names_are_ignored() {
    let tree = TempTree::new("order");
    for id in ["10", "9", "2", "0", "1"] {
        tree.write(&format!("nodes/{id}/properties"), MINIMAL_CPU);
    }
    tree.write("nodes/README/properties", "not a node\n");
    let t = Topology::read_from(&tree.0).unwrap();
    assert_eq!(ids(t.nodes.iter()), [0, 1, 2, 9, 10]);
    assert!(t.gpus().next().is_none());
}

#[test]
fn roots_without_nodes_are_typed_errors() {
    let missing =
        std::env::temp_dir().join(format!("kfd-ioctl-topology-{}-none", std::process::id()));
    match Topology::read_from(&missing) {
        Err(TopologyError::Io { path, source }) => {
            assert_eq!(path, missing);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected Io(NotFound), got {other:?}"),
    }

    let tree = TempTree::new("empty");
    tree.write("generation_id", "1\n");
    assert!(
        matches!(Topology::read_from(&tree.0), Err(TopologyError::NoNodes { root }) if root == tree.0)
    );

    fs::create_dir_all(tree.0.join("nodes")).unwrap();
    assert!(matches!(
        Topology::read_from(&tree.0),
        Err(TopologyError::NoNodes { .. })
    ));
}

#[test]
fn a_bad_generation_id_is_a_parse_error() {
    let tree = TempTree::new("generation");
    tree.write("nodes/0/properties", MINIMAL_CPU);
    let path = tree.write("generation_id", "two\n");
    assert!(matches!(
        Topology::read_from(&tree.0),
        Err(TopologyError::Parse { path: p, line: 1, .. }) if p == path
    ));
    tree.write("generation_id", "7\n");
    assert_eq!(Topology::read_from(&tree.0).unwrap().generation_id, Some(7));
}

// ---------------------------------------------------------------------------------------------
// The live tree

#[test]
fn the_live_tree_reads_or_fails_with_a_typed_error() {
    let present = Path::new(DEFAULT_ROOT).join("nodes").is_dir();
    match Topology::read() {
        Ok(t) => {
            assert!(present, "read succeeded without {DEFAULT_ROOT}/nodes");
            assert!(!t.nodes.is_empty());
        }
        Err(TopologyError::Io { path, source }) => {
            assert!(
                !present,
                "{DEFAULT_ROOT} is there but reading failed: {source}"
            );
            assert_eq!(path, Path::new(DEFAULT_ROOT));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            eprintln!(
                "no KFD on this machine: {}",
                TopologyError::Io { path, source }
            );
        }
        Err(e @ TopologyError::NoNodes { .. }) => assert!(!present, "{e}"),
        Err(e) => panic!("unexpected error from the live tree: {e}"),
    }
}
