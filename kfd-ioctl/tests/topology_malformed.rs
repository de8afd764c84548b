//! Hostile trees: values at the edges of their types, files that are not regular files,
//! files and directories larger than any kernel writes. Each is a typed error naming the path
//! and the value; none panics, wraps, blocks or allocates in proportion to a number it read.

use std::path::Path;
use std::time::Duration;

use kfd_ioctl::topology::{
    GfxTargetVersion, MemBank, Node, NodeProperties, Topology, TopologyError, limits,
};

mod topology_support;

use topology_support::{TempTree, within};

const CPU: &str = "cpu_cores_count 4\nsimd_count 0\n";
const GPU: &str = "cpu_cores_count 0\nsimd_count 8\nsimd_per_cu 4\n";

/// Long enough for any honest read of a small tree on a loaded machine; a blocked read never
/// returns.
const DEADLINE: Duration = Duration::from_secs(20);

/// Reads `tree` on a thread, failing the test if the read blocks.
fn read_within_deadline(tree: &TempTree, what: &str) -> Result<Topology, TopologyError> {
    let root = tree.0.clone();
    within(DEADLINE, what, move || Topology::read_from(root))
}

#[test]
fn two_vram_banks_of_u64_max_are_an_overflow_naming_the_second_bank() {
    let tree = TempTree::new("vram-overflow");
    tree.write("nodes/0/properties", CPU);
    tree.write("nodes/1/properties", GPU);
    let bank = format!("heap_type 1\nsize_in_bytes {}\n", u64::MAX);
    tree.write("nodes/1/mem_banks/0/properties", &bank);
    let second = tree.write("nodes/1/mem_banks/1/properties", &bank);
    match Topology::read_from(&tree.0) {
        Err(e @ TopologyError::Overflow { .. }) => {
            let TopologyError::Overflow { path, value, .. } = &e else {
                unreachable!()
            };
            assert_eq!((path, *value), (&second, u64::MAX));
            assert!(e.to_string().contains("18446744073709551615"), "{e}");
        }
        // Before the check the tree parsed, and `vram_size` overflowed (a panic in debug).
        Ok(t) => panic!("parsed; vram_size() = {}", t.nodes[1].vram_size()),
        Err(e) => panic!("expected an overflow error, got {e:?}"),
    }
}

#[test]
fn a_hand_built_node_with_vram_past_u64_saturates_instead_of_panicking() {
    let bank = MemBank::parse(
        0,
        "heap_type 1\nsize_in_bytes 18446744073709551615\n",
        Path::new("b"),
    )
    .unwrap();
    let node = Node {
        properties: NodeProperties::parse(GPU, Path::new("p")).unwrap(),
        mem_banks: vec![bank.clone(), MemBank { id: 1, ..bank }],
        ..Node::default()
    };
    assert_eq!(node.vram_size(), u64::MAX);
}

#[test]
fn a_node_numbered_4294967295_is_above_the_node_limit() {
    let tree = TempTree::new("node-id-max");
    tree.write("nodes/0/properties", GPU);
    tree.write("nodes/4294967295/properties", GPU);
    match Topology::read_from(&tree.0) {
        Err(TopologyError::AboveLimit {
            path, value, limit, ..
        }) => {
            assert_eq!(path, tree.0.join("nodes/4294967295"));
            assert_eq!((value, limit), (4_294_967_295, limits::MAX_NODES - 1));
        }
        other => panic!("expected the node number to be refused, got {other:?}"),
    }
}

#[test]
fn a_node_number_wider_than_32_bits_is_refused_not_ignored() {
    let tree = TempTree::new("node-id-wide");
    tree.write("nodes/0/properties", CPU);
    tree.write("nodes/99999999999999999999999/properties", GPU);
    assert!(
        matches!(
            Topology::read_from(&tree.0),
            Err(TopologyError::AboveLimit {
                value: u64::MAX,
                ..
            })
        ),
        "a number that does not fit u64 is reported as u64::MAX"
    );
}

#[test]
fn cpu_cores_count_4294967295_is_above_the_core_limit() {
    let path = Path::new("nodes/0/properties");
    for (key, limit) in [
        ("cpu_cores_count", limits::MAX_PROCESSORS),
        ("simd_count", limits::MAX_PROCESSORS),
        ("mem_banks_count", limits::MAX_MEM_BANKS),
        ("caches_count", limits::MAX_CACHES),
        ("io_links_count", limits::MAX_NODES),
        ("p2p_links_count", limits::MAX_NODES),
    ] {
        let text = format!("cpu_cores_count 1\nsimd_count 0\n{key} 4294967295\n");
        match NodeProperties::parse(&text, path) {
            Err(e @ TopologyError::AboveLimit { .. }) => {
                let TopologyError::AboveLimit {
                    path: p,
                    what,
                    value,
                    limit: l,
                } = &e
                else {
                    unreachable!()
                };
                assert_eq!((p.as_path(), what.as_str()), (path, key));
                assert_eq!((*value, *l), (4_294_967_295, limit));
                assert!(e.to_string().contains(key), "{e}");
            }
            other => panic!("{key}: expected AboveLimit, got {other:?}"),
        }
        let at_limit = format!("cpu_cores_count 1\nsimd_count 0\n{key} {limit}\n");
        assert!(
            NodeProperties::parse(&at_limit, path).is_ok(),
            "{key} {limit}"
        );
    }
}

#[test]
fn a_fifo_in_place_of_any_file_is_an_error_not_a_hang() {
    let files = [
        "generation_id",
        "system_properties",
        "nodes/1/gpu_id",
        "nodes/1/properties",
        "nodes/1/name",
        "nodes/1/mem_banks/0/properties",
        "nodes/1/mem_banks/0/used_memory",
        "nodes/1/caches/0/properties",
        "nodes/1/io_links/0/properties",
        "nodes/1/p2p_links/0/properties",
    ];
    for file in files {
        let tree = TempTree::new("fifo");
        tree.write("generation_id", "1\n");
        tree.write("system_properties", "platform_oem 0\n");
        tree.write("nodes/0/properties", CPU);
        tree.write("nodes/1/gpu_id", "1234\n");
        tree.write("nodes/1/properties", GPU);
        tree.write("nodes/1/name", "gpu\n");
        tree.write(
            "nodes/1/mem_banks/0/properties",
            "heap_type 1\nsize_in_bytes 4096\n",
        );
        tree.write("nodes/1/mem_banks/0/used_memory", "0\n");
        tree.write(
            "nodes/1/caches/0/properties",
            "level 1\nsize 16\ntype 1\nsibling_map 1,0\n",
        );
        let link = "type 2\nnode_from 1\nnode_to 0\n";
        tree.write("nodes/1/io_links/0/properties", link);
        tree.write("nodes/1/p2p_links/0/properties", link);
        assert!(Topology::read_from(&tree.0).is_ok(), "the tree is sound");

        let fifo = tree.fifo(file);
        match read_within_deadline(&tree, file) {
            Err(e @ TopologyError::NotAFile { .. }) => {
                let TopologyError::NotAFile { path, kind } = &e else {
                    unreachable!()
                };
                assert_eq!((path, *kind), (&fifo, "FIFO"));
                assert!(e.to_string().contains(file), "{e}");
            }
            other => panic!("{file} as a FIFO: expected NotAFile, got {other:?}"),
        }
    }
}

#[test]
fn a_link_to_a_device_is_refused_before_it_is_read() {
    // Reading /dev/zero never ends: before the file-type check the reader grew its buffer
    // until memory ran out.
    let tree = TempTree::new("device");
    tree.write("nodes/0/properties", CPU);
    let link = tree.symlink("nodes/0/name", "/dev/zero");
    match read_within_deadline(&tree, "/dev/zero as name") {
        Err(TopologyError::NotAFile { path, kind }) => {
            assert_eq!((path, kind), (link, "character device"));
        }
        other => panic!("expected NotAFile, got {other:?}"),
    }
}

#[test]
fn a_directory_in_place_of_a_properties_file_is_not_a_file() {
    let tree = TempTree::new("dir-as-file");
    tree.write("nodes/0/properties/inner", "x");
    assert!(matches!(
        Topology::read_from(&tree.0),
        Err(TopologyError::NotAFile {
            kind: "directory",
            ..
        })
    ));
}

#[test]
fn a_file_over_the_size_limit_is_refused_by_path() {
    let tree = TempTree::new("big-file");
    tree.write("nodes/0/properties", CPU);
    let limit = limits::MAX_FILE_BYTES;
    let name = tree.write("nodes/0/name", vec![b'a'; limit as usize]);
    assert_eq!(
        Topology::read_from(&tree.0).unwrap().nodes[0]
            .name
            .as_ref()
            .map(String::len),
        Some(limit as usize),
        "a file of exactly the limit is read"
    );
    tree.write("nodes/0/name", vec![b'a'; limit as usize + 1]);
    match Topology::read_from(&tree.0) {
        Err(e @ TopologyError::FileTooLarge { .. }) => {
            let TopologyError::FileTooLarge { path, limit: l } = &e else {
                unreachable!()
            };
            assert_eq!((path, *l), (&name, limit));
        }
        other => panic!("expected FileTooLarge, got {other:?}"),
    }
}

#[test]
fn numbered_entries_are_below_their_limit_and_spelled_as_the_kernel_does() {
    let tree = TempTree::new("many-banks");
    tree.write("nodes/0/properties", CPU);
    let bank = "heap_type 0\nsize_in_bytes 4096\n";
    let last = limits::MAX_MEM_BANKS - 1;
    tree.write(&format!("nodes/0/mem_banks/{last}/properties"), bank);
    // Not the kernel's spelling of 1: ignored, like any other name.
    tree.write("nodes/0/mem_banks/01/properties", bank);
    let t = Topology::read_from(&tree.0).expect("the last number is accepted");
    let ids: Vec<u32> = t.nodes[0].mem_banks.iter().map(|b| b.id).collect();
    assert_eq!(ids, [last as u32]);

    let over = tree.write(
        &format!("nodes/0/mem_banks/{}/properties", limits::MAX_MEM_BANKS),
        bank,
    );
    match Topology::read_from(&tree.0) {
        Err(TopologyError::AboveLimit {
            path, value, limit, ..
        }) => {
            assert_eq!(path, over.parent().unwrap());
            assert_eq!((value, limit), (limits::MAX_MEM_BANKS, last));
        }
        other => panic!("expected AboveLimit, got {other:?}"),
    }
}

#[test]
fn a_hand_built_gfx_version_that_does_not_fit_the_encoding_has_no_raw_value() {
    let wide = GfxTargetVersion {
        major: u32::MAX,
        minor: 0,
        stepping: 0,
    };
    assert_eq!(wide.raw(), None);
    let minor_too_big = GfxTargetVersion {
        major: 9,
        minor: 100,
        stepping: 0,
    };
    assert_eq!(minor_too_big.raw(), None);
    for raw in [0, 90402, 120100, u32::MAX] {
        assert_eq!(GfxTargetVersion::from_raw(raw).raw(), Some(raw));
    }
}
