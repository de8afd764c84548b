//! `kfdtool copy`: SDMA copy throughput by direction and link, with a table.
//!
//! On the first GPU: system memory (GTT) → VRAM, VRAM → system memory, VRAM → VRAM, and when
//! there is a second GPU, its VRAM → the first's over their link (xGMI engines when the GPU
//! has them, else PCIe ones). Each copy is checked: the bytes that arrive are the ones sent.

use std::time::{Duration, Instant};

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::mem::Reservation;
use kfd_ioctl::topology::{IoLinkType, Topology};
use kfd_ioctl::{BufferObject, GpuId, Kfd};
use kfd_queue::{QueueContext, SdmaEngine, SdmaQueue};

/// One measured direction.
struct Row {
    direction: &'static str,
    link: String,
    engine: &'static str,
    bytes: u64,
    per_copy: Duration,
}

/// The link type between two GPU nodes, as the topology names it.
fn link_between(topology: &Topology, from: GpuId, to: GpuId) -> String {
    let node = topology.gpus().find(|n| n.gpu_id() == Some(from));
    let to_node = topology
        .gpus()
        .find(|n| n.gpu_id() == Some(to))
        .map(|n| n.id);
    let link = node.and_then(|n| {
        n.io_links
            .iter()
            .chain(&n.p2p_links)
            .find(|l| Some(l.node_to) == to_node)
    });
    match link.map(|l| l.kind()) {
        Some(IoLinkType::Xgmi) => "xGMI".to_owned(),
        Some(IoLinkType::PciExpress) => "PCIe".to_owned(),
        Some(other) => format!("{other:?}"),
        None => "no direct link".to_owned(),
    }
}

/// Copies `bytes` from `src` to `dst` on `queue` `repeat` times; the time of one copy.
fn time_copies(
    queue: &mut SdmaQueue,
    dst: &BufferObject,
    src: &BufferObject,
    bytes: u64,
    repeat: u32,
) -> Result<Duration, Box<dyn std::error::Error>> {
    // One untimed copy: first touches are not what a transfer costs.
    let warm = queue.copy(dst.va(), src.va(), bytes)?;
    queue.wait(warm, Duration::from_secs(60))?;
    let start = Instant::now();
    let mut last = None;
    for _ in 0..repeat {
        last = Some(queue.copy(dst.va(), src.va(), bytes)?);
    }
    if let Some(last) = last {
        queue.wait(last, Duration::from_secs(600))?;
    }
    Ok(start.elapsed() / repeat.max(1))
}

/// Checks that `dst` holds `pattern` at its start.
fn check(dst: &BufferObject, pattern: &[u8], what: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut back = vec![0u8; pattern.len()];
    dst.map_cpu()?.read_slice(&mut back, 0)?;
    if back != pattern {
        return Err(format!("{what}: the copied bytes differ from the source").into());
    }
    Ok(())
}

/// `kfdtool copy --size <bytes> --repeat <n>`.
pub fn copy_cmd(
    size: u64,
    repeat: u32,
    emulated: Option<&str>,
) -> Result<(), Box<dyn std::error::Error>> {
    let kfd = Kfd::open()?;
    let topology = Topology::read()?;
    let gpus: Vec<GpuId> = topology.gpus().filter_map(|n| n.gpu_id()).collect();
    let &first = gpus.first().ok_or("this machine has no GPU")?;
    for node in topology.gpus() {
        if let Some(gpu_id) = node.gpu_id() {
            kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)?;
        }
    }
    let context = QueueContext::new(&kfd, &topology)?;
    let len = usize::try_from(size)?;
    let space = Reservation::new(len.checked_mul(4).ok_or("--size too large")?, 2 << 20)
        .map_err(|e| format!("reserving GPU addresses: {e}"))?;
    let base = space.addr().as_ptr() as u64;
    let alloc = |gpu: GpuId, at: u64, flags: AllocMemFlags, on: &[GpuId]| {
        let bo = kfd.alloc_memory_of_gpu(gpu, base + at * size, size, flags)?;
        kfd.map_memory_to_gpu(&bo, on)?;
        Ok::<_, kfd_ioctl::Error>(bo)
    };
    let rw = AllocMemFlags::WRITABLE;
    let vram = AllocMemFlags::VRAM | AllocMemFlags::PUBLIC | rw;
    let peer = gpus.get(1).copied();
    let system = alloc(first, 0, AllocMemFlags::GTT | rw, &[first])?;
    let local = alloc(first, 1, vram, &[first])?;
    let local2 = alloc(first, 2, vram, &[first])?;
    let pattern: Vec<u8> = (0..len.min(1 << 20)).map(|i| (i % 251) as u8).collect();
    system.map_cpu()?.write_slice(&pattern, 0)?;

    let mut rows = Vec::new();
    let mut pcie = SdmaQueue::new(&context, first, SdmaEngine::Pcie, 64 << 10)?;
    let mut measure = |queue: &mut SdmaQueue,
                       direction,
                       link: String,
                       engine,
                       dst: &BufferObject,
                       src: &BufferObject|
     -> Result<(), Box<dyn std::error::Error>> {
        let per_copy = time_copies(queue, dst, src, size, repeat)?;
        check(dst, &pattern, direction)?;
        rows.push(Row {
            direction,
            link,
            engine,
            bytes: size,
            per_copy,
        });
        Ok(())
    };
    measure(
        &mut pcie,
        "system → VRAM",
        "PCIe".into(),
        "pcie",
        &local,
        &system,
    )?;
    measure(
        &mut pcie,
        "VRAM → VRAM",
        "local".into(),
        "pcie",
        &local2,
        &local,
    )?;
    system
        .map_cpu()?
        .write_slice(&vec![0u8; pattern.len()], 0)?;
    measure(
        &mut pcie,
        "VRAM → system",
        "PCIe".into(),
        "pcie",
        &system,
        &local2,
    )?;
    let mut _peer_bo = None;
    if let Some(peer) = peer {
        let remote = alloc(peer, 3, vram, &[peer, first])?;
        remote.map_cpu()?.write_slice(&pattern, 0)?;
        let link = link_between(&topology, first, peer);
        let xgmi = topology
            .gpus()
            .find(|n| n.gpu_id() == Some(first))
            .and_then(|n| n.properties.num_sdma_xgmi_engines)
            .unwrap_or(0)
            > 0
            && link == "xGMI";
        let (engine, name) = if xgmi {
            (SdmaEngine::Xgmi, "xgmi")
        } else {
            (SdmaEngine::Pcie, "pcie")
        };
        let mut queue = SdmaQueue::new(&context, first, engine, 64 << 10)?;
        measure(&mut queue, "peer VRAM → VRAM", link, name, &local, &remote)?;
        _peer_bo = Some(remote);
    }

    let origin = match emulated {
        Some(machine) => format!(
            "emulated by kfd-emu (machine {machine}): these are the emulator's own speeds, \
             not a GPU's"
        ),
        None => "/dev/kfd".to_owned(),
    };
    println!("SDMA copies on gpu {first}, {repeat} × {size} bytes each ({origin})");
    println!(
        "{:<18} {:<15} {:<6} {:>12} {:>12} {:>10}",
        "direction", "link", "engine", "bytes", "per copy", "GB/s"
    );
    for r in &rows {
        let secs = r.per_copy.as_secs_f64();
        let rate = if secs > 0.0 {
            r.bytes as f64 / secs / 1e9
        } else {
            f64::INFINITY
        };
        println!(
            "{:<18} {:<15} {:<6} {:>12} {:>10.1}µs {:>10.2}",
            r.direction,
            r.link,
            r.engine,
            r.bytes,
            secs * 1e6,
            rate
        );
    }
    if peer.is_none() {
        println!("(one GPU: no peer copy)");
    }
    Ok(())
}
