//! `QueueSizes::for_node` computes what the kernel publishes: on the captured nodes whose
//! kernel printed `cwsr_size` and `ctl_stack_size` (gfx942, gfx950, gfx1201), the sizes
//! computed from the CU and wave counts alone (`kfd_queue_ctx_save_restore_size`) are the
//! published ones; nodes without them get computed sizes, and CPUs none.

use kfd_ioctl::QueueSizes;
use kfd_ioctl::topology::Topology;

fn capture() -> Topology {
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../kfd-emu/fixtures/topology/mixed-mi300x-mi350x-gfx906-navi/topology"
    );
    Topology::read_from(root).expect("the mixed capture")
}

#[test]
fn computed_cwsr_sizes_are_the_published_ones() {
    let topology = capture();
    let mut compared = 0;
    for node in topology.gpus() {
        let published = QueueSizes::for_node(node).expect("a GPU has CWSR sizes");
        let (Some(cwsr), Some(ctl)) = (node.properties.cwsr_size, node.properties.ctl_stack_size)
        else {
            continue;
        };
        assert_eq!(u64::from(published.cwsr_size), cwsr);
        assert_eq!(u64::from(published.ctl_stack_size), ctl);
        let mut bare = node.clone();
        bare.properties.cwsr_size = None;
        bare.properties.ctl_stack_size = None;
        let computed = QueueSizes::for_node(&bare).expect("computed");
        assert_eq!(computed, published, "node {}", node.id);
        compared += 1;
    }
    assert_eq!(
        compared, 3,
        "gfx942, gfx950 and gfx1201 publish their sizes"
    );
}

#[test]
fn the_save_area_spans_every_xcc_with_the_debugger_bytes() {
    let topology = capture();
    let mi300x = topology
        .gpus()
        .find(|n| n.properties.gfx_target_version == Some(90402))
        .expect("gfx942");
    let s = QueueSizes::for_node(mi300x).unwrap();
    // 38 CUs per XCC, 40 waves each: 1520 waves of 32 debugger bytes; 8 XCCs.
    assert_eq!(s.debug_memory_size, 1520 * 32);
    assert_eq!(s.num_xcc, 8);
    assert_eq!(s.eop_buffer_size, 4096);
    assert_eq!(
        s.total_ctx_save_size(),
        (u64::from(s.cwsr_size) + 1520 * 32) * 8
    );
    assert!(
        topology
            .nodes
            .iter()
            .filter(|n| !n.is_gpu())
            .all(|n| QueueSizes::for_node(n).is_none())
    );
}
