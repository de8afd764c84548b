//! Machines from hostile trees: every value at the edge of its type is a typed
//! [`MachineError`] or a machine whose generated parts stay small, never a panic, a wrap, an
//! allocation sized by a number in the tree, or a loop without end.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use kfd_emu::machine::{Machine, MachineError};
use kfd_ioctl::topology::{MemBank, Node, NodeProperties, Topology, TopologyError, limits};

const GPU: &str = "cpu_cores_count 0\nsimd_count 8\nsimd_per_cu 4\n";
const CPU: &str = "cpu_cores_count 4\nsimd_count 0\n";

fn node(id: u32, properties: &str) -> Node {
    Node {
        id,
        properties: NodeProperties::parse(properties, Path::new("properties")).unwrap(),
        ..Node::default()
    }
}

fn topology(nodes: Vec<Node>) -> Topology {
    Topology {
        nodes,
        ..Topology::default()
    }
}

/// Builds the machine on a thread; a build that has not returned after `limit` fails the test
/// instead of hanging it.
fn build_within(limit: Duration, topology: Topology) -> Result<Machine, MachineError> {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(Machine::from_topology("hostile", topology));
    });
    result
        .recv_timeout(limit)
        .unwrap_or_else(|e| panic!("the machine build did not return: {e}"))
}

/// A fresh private directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kfd-emu-machine-malformed-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_gpu_only_tree_with_node_id_u32_max_is_too_large_not_a_panic() {
    // A tree of GPUs only gets a CPU node 0 and every node moves up by one: u32::MAX cannot.
    let result = Machine::from_topology("hostile", topology(vec![node(u32::MAX, GPU)]));
    match result {
        Err(e @ MachineError::TooLarge { .. }) => {
            let MachineError::TooLarge { node, what, value } = &e else {
                unreachable!()
            };
            assert_eq!(
                (*node, *what, *value),
                (u32::MAX, "node id", u64::from(u32::MAX))
            );
            assert!(e.to_string().contains("4294967295"), "{e}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[test]
fn a_gpu_only_tree_linking_to_node_u32_max_drops_the_link() {
    // The parser accepts any 32-bit `node_to`; moving it up by one overflowed.
    let tree = TempDir::new("link-max");
    tree.write("nodes/0/properties", GPU);
    tree.write(
        "nodes/0/io_links/0/properties",
        "type 11\nnode_from 0\nnode_to 4294967295\n",
    );
    let machine = Machine::from_topology_dir(&tree.0).expect("the dangling link is dropped");
    let gpu = machine.topology().node(1).expect("the GPU moved to node 1");
    let targets: Vec<u32> = gpu.io_links.iter().map(|l| l.node_to).collect();
    assert_eq!(targets, [0], "only the generated link to the CPU");
}

#[test]
fn vram_banks_past_u64_max_are_too_large_not_a_panic() {
    let bank = MemBank::parse(
        0,
        "heap_type 1\nsize_in_bytes 18446744073709551615\n",
        Path::new("bank"),
    )
    .unwrap();
    let mut gpu = node(1, GPU);
    gpu.mem_banks = vec![bank.clone(), MemBank { id: 1, ..bank }];
    let result = Machine::from_topology("hostile", topology(vec![node(0, CPU), gpu]));
    assert!(
        matches!(
            result,
            Err(MachineError::TooLarge {
                node: 1,
                what: "VRAM bank size",
                value: u64::MAX
            })
        ),
        "{result:?}"
    );
}

/// A CPU node 0 with `cores` cores and a GPU node 1 with `cus` compute units (one SIMD each).
fn wide_machine(cores: u64, cus: u64) -> Topology {
    let mut cpu = node(0, CPU);
    cpu.properties.set("cpu_cores_count", cores);
    let mut gpu = node(1, GPU);
    gpu.properties.set("simd_count", cus);
    gpu.properties.set("simd_per_cu", 1);
    topology(vec![cpu, gpu])
}

#[test]
fn cpu_and_cu_counts_of_u32_max_are_refused_before_caches_are_sized_by_them() {
    // The sibling maps of generated caches were sized by these counts: 4 GiB each, then an
    // 8 GiB text.
    let max = u64::from(u32::MAX);
    let result = build_within(Duration::from_secs(60), wide_machine(max, max));
    match result {
        Err(MachineError::Topology(TopologyError::AboveLimit {
            path, what, value, ..
        })) => {
            assert_eq!(path, Path::new("nodes/0/properties"));
            assert_eq!((what.as_str(), value), ("cpu_cores_count", max));
        }
        Ok(machine) => panic!("built {}", machine.name()),
        Err(e) => panic!("expected AboveLimit, got {e:?}"),
    }
}

#[test]
fn counts_at_the_limit_give_caches_of_bounded_size() {
    let max = limits::MAX_PROCESSORS;
    let machine = build_within(Duration::from_secs(60), wide_machine(max, max))
        .expect("counts at the limit build");
    for node in &machine.topology().nodes {
        assert!(!node.caches.is_empty(), "node {} has caches", node.id);
        for cache in &node.caches {
            let len = cache.sibling_map.len();
            assert!((1..=1024).contains(&len), "node {}: {len}", node.id);
        }
    }
}

#[test]
fn more_gpus_than_gpu_ids_fail_fast_instead_of_searching_forever() {
    // gpu_id hashing has 65535 values: the 65536th GPU without an id searched for ever.
    let gpus: Vec<Node> = (0..70_000).map(|id| node(id, GPU)).collect();
    let result = build_within(Duration::from_secs(60), topology(gpus));
    assert!(
        matches!(result, Err(MachineError::TooManyGpus(70_000))),
        "{result:?}"
    );
}

#[test]
fn a_machine_whose_tree_would_not_read_back_is_refused() {
    // Found by the fuzz test: a GPU-only capture numbered up to the node limit moves up by one
    // for the CPU node, past the limit; the machine wrote a tree the parser refuses.
    let tree = TempDir::new("node-at-limit");
    let last = limits::MAX_NODES - 1;
    tree.write(&format!("nodes/{last}/properties"), GPU);
    match Machine::from_topology_dir(&tree.0) {
        Err(MachineError::Topology(TopologyError::AboveLimit { path, value, .. })) => {
            assert_eq!(path, Path::new("nodes").join(limits::MAX_NODES.to_string()));
            assert_eq!(value, limits::MAX_NODES);
        }
        Ok(machine) => {
            let out = TempDir::new("node-at-limit-sysfs");
            machine.write_sysfs(&out.0).unwrap();
            panic!("built; reading its tree: {:?}", Topology::read_from(&out.0));
        }
        Err(e) => panic!("expected AboveLimit, got {e:?}"),
    }
}
