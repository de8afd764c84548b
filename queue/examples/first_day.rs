//! A runtime author's first program, in safe code: open KFD, pick the GPUs, allocate VRAM
//! and host memory at one address for the CPU and the GPU, set up shared virtual memory
//! that prefers the GPU, create an SDMA queue, copy host → VRAM → SVM and VRAM → host (and
//! GPU 0 → GPU 1 where there are two), wait with a timeout, check the bytes, tear down.
//!
//! Which layer to start from: `kfd_ioctl::Kfd::alloc_memory` (memory at one address,
//! mapped where it must be), `kfd_svm::SvmBuffer` (SVM memory the library owns) and
//! `kfd_queue::SdmaQueue` (copies) are the runtime's layer; `Kfd::alloc_memory_of_gpu` and
//! the raw queue and SVM calls are there for runtimes that place everything themselves; the
//! `kfd-provider` crate is a UMF-style pool on top, for allocators.
//!
//! Run it on a machine with an AMD GPU:
//!
//! ```sh
//! cargo run -p kfd-queue --example first_day
//! ```
//!
//! or anywhere under the emulator: build it, then
//! `cargo run -p kfd-emu -- run --machine mi210x8 -- target/debug/examples/first_day`.
//! `queue/tests/first_day.rs` runs this very code under kfd-emu's MI300X and 8× MI210.

use std::error::Error;
use std::time::Duration;

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::vm_memory::Bytes;
use kfd_ioctl::{Kfd, MemoryPolicy};
use kfd_queue::{QueueContext, SdmaEngine, SdmaQueue};
use kfd_svm::{Access, Location, SvmAttrs, SvmBuffer};

const MIB: u64 = 1 << 20;
/// How much each copy moves (the allocations are 64 MiB).
const COPY: u64 = 4 * MIB;
const TIMEOUT: Duration = Duration::from_secs(30);

/// A pattern that tells offsets apart.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ (i >> 12) as u8)
        .collect()
}

/// The program. Returns what it checked, for the test that runs it.
pub fn run() -> Result<Vec<&'static str>, Box<dyn Error + Send + Sync>> {
    let mut checked = Vec::new();

    // Open KFD and make every GPU's VM this process's compute VM.
    let kfd = Kfd::open()?;
    let topology = Topology::read()?;
    let mut gpus = Vec::new();
    for node in topology.gpus() {
        let (Some(gpu_id), Some(minor)) = (node.gpu_id(), node.render_minor()) else {
            continue;
        };
        kfd.acquire_vm(gpu_id, minor)?;
        kfd.set_memory_policy(gpu_id, &MemoryPolicy::default())?;
        gpus.push(gpu_id);
    }
    let gpu0 = *gpus.first().ok_or("no GPU")?;

    // 64 MiB of VRAM and of host memory, each at one address for the CPU and the GPUs,
    // mapped on every GPU (a peer reaches it over xGMI or a large BAR).
    let vram_flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE;
    let host_flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
    let vram = kfd.alloc_memory(gpu0, 64 * MIB, vram_flags, &gpus)?;
    let host = kfd.alloc_memory(gpu0, 64 * MIB, host_flags, &gpus)?;
    let host_cpu = host.as_volatile_slice()?;

    // Shared virtual memory that prefers GPU 0's VRAM, prefetched there. The library owns
    // the memory (no unsafe): it maps it, registers it, and unmaps it on drop.
    let svm_attrs = SvmAttrs::new()
        .preferred_location(Location::Gpu(gpu0))
        .access(gpu0, Access::Access);
    let mut svm = SvmBuffer::new(&kfd, COPY as usize, &svm_attrs)?;
    svm.prefetch(Location::Gpu(gpu0))?;

    // An SDMA queue on GPU 0.
    let context = QueueContext::new(&kfd, &topology)?;
    let mut queue = SdmaQueue::new(&context, gpu0, SdmaEngine::Pcie, 64 << 10)?;

    // host → VRAM → SVM, and VRAM → host (second half): the bytes make the round trip.
    let data = pattern(COPY as usize, 0x5a);
    host_cpu.write_slice(&data, 0)?;
    let back = 32 * MIB;
    let to_vram = queue.copy(vram.va(), host.va(), COPY)?;
    let to_svm = queue.copy(svm.addr(), vram.va(), COPY)?;
    let to_host = queue.copy(host.va() + back, vram.va(), COPY)?;
    // The engine runs a queue's submissions in order, so the last completion covers the
    // others; waiting for each costs nothing more.
    for done in [to_vram, to_svm, to_host] {
        queue.wait(done, TIMEOUT)?;
    }
    let mut seen = vec![0u8; COPY as usize];
    host_cpu.read_slice(&mut seen, back as usize)?;
    if seen != data {
        return Err("host → VRAM → host: the bytes differ".into());
    }
    checked.push("host → VRAM → host");
    svm.copy_out(0, &mut seen)?;
    if seen != data {
        return Err("VRAM → SVM: the bytes differ".into());
    }
    checked.push("VRAM → SVM");

    // GPU 0 → GPU 1 with GPU 0's copy engine, then back to host memory with GPU 1's.
    if let Some(&gpu1) = gpus.get(1) {
        let peer = kfd.alloc_memory(gpu1, 64 * MIB, vram_flags, &gpus)?;
        let done = queue.copy(peer.va(), vram.va(), COPY)?;
        queue.wait(done, TIMEOUT)?;
        let mut queue1 = SdmaQueue::new(&context, gpu1, SdmaEngine::Pcie, 64 << 10)?;
        let landing = 16 * MIB;
        let done = queue1.copy(host.va() + landing, peer.va(), COPY)?;
        queue1.wait(done, TIMEOUT)?;
        host_cpu.read_slice(&mut seen, landing as usize)?;
        if seen != data {
            return Err("GPU 0 → GPU 1 → host: the bytes differ".into());
        }
        checked.push("GPU 0 → GPU 1");
        // Tear down in order: the queue before the memory it reaches.
        drop(queue1);
        drop(peer);
    }

    // Teardown: queues first, then memory (each drop unmaps and frees), then KFD.
    drop(queue);
    drop(context);
    drop(svm);
    drop((vram, host));
    drop(kfd);
    Ok(checked)
}

#[allow(dead_code)] // The test includes this file for `run`.
fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    if !std::path::Path::new(kfd_ioctl::KFD_DEVICE_PATH).exists() {
        eprintln!(
            "this machine has no {}: run this program under kfd-emu \
             (cargo run -p kfd-emu -- run --machine mi300x -- target/debug/examples/first_day)",
            kfd_ioctl::KFD_DEVICE_PATH
        );
        std::process::exit(2);
    }
    for what in run()? {
        println!("checked: {what}");
    }
    Ok(())
}
