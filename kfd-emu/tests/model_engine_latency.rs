//! How soon an idle engine sees new work: the model cannot see a doorbell write (a store to
//! the process's doorbell page), so an idle queue's engine polls, backing off to its slowest
//! poll; an ioctl of the queue's process (any: the runtime's next call after ringing a
//! doorbell) wakes its engines at once (`scheduler`).
//!
//! What is proved: work written to an SDMA queue that has idled long enough for its engine's
//! polling to back off, followed by an ioctl of its process (GET_VERSION), has run (its fence
//! written) within 1 ms in at least half of the tries. Without the wake-up the fence waits for
//! the engine's next poll, up to its slowest (5 ms): about one try in five lands within 1 ms.
//! The times are printed (`--nocapture`) for the record.

mod model_support;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::{CpuMap, Emu, va};

/// How long the test waits for a fence before it fails.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long the queue idles before each try: long enough for the engine's polling to reach its
/// slowest (20 µs doubling to 5 ms takes about 10 ms); each try idles [`STEP`] longer than the
/// one before, so that the tries' submissions fall at every phase of the engine's 5 ms poll
/// (a fixed idle, a multiple of the poll, would land every try at the same point of it).
const IDLE: Duration = Duration::from_millis(40);
const STEP: Duration = Duration::from_micros(370);
/// What "promptly" means here: well under the slowest poll (5 ms), far above a thread
/// wake-up on an idle host.
const PROMPT: Duration = Duration::from_millis(1);
const TRIES: u32 = 21;
const GTT_RW: u32 = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
/// `SDMA_OP_FENCE` (`vega10_sdma_pkt_open.h`).
const SDMA_FENCE: u64 = 5;

/// A GTT BO of `size` bytes at `va`, mapped on the first GPU, and the CPU's view of it.
fn mapped(emu: &Emu, va: u64, size: usize) -> CpuMap {
    let (h, offset) = emu
        .alloc(emu.gpu(), va, size as u64, GTT_RW)
        .expect("alloc");
    assert_eq!(emu.map(h, &[emu.gpu()]).0, Ok(0));
    emu.cpu_map(emu.renders[0].as_fd(), offset, size)
        .expect("CPU mapping")
}

/// The 64-bit word at byte `at` of `map`, as an atomic shared with the engines.
fn word(map: &CpuMap, at: usize) -> &AtomicU64 {
    assert!(at + 8 <= map.len && at.is_multiple_of(8));
    // SAFETY: `at` is in bounds and 8-aligned in a page-aligned shared mapping that lives as
    // long as `map`; the model's engines access it only through the memfd, never through a
    // Rust reference.
    unsafe { &*map.ptr.add(at).cast::<AtomicU64>() }
}

#[test]
fn work_followed_by_an_ioctl_of_its_process_runs_promptly() {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset("mi100").expect("preset"),
        ..ModelConfig::default()
    });
    emu.acquire_all();
    let (ring_va, pointers_va, flag_va) = (va(1), va(2), va(3));
    let ring = mapped(&emu, ring_va, 4096);
    let pointers = mapped(&emu, pointers_va, 4096);
    let flag = mapped(&emu, flag_va, 4096);
    let mut a = kfd_ioctl_create_queue_args {
        ring_base_address: ring_va,
        write_pointer_address: pointers_va + 8,
        read_pointer_address: pointers_va,
        ring_size: 4096,
        gpu_id: emu.gpu(),
        queue_type: KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    };
    emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
        .expect("CREATE_QUEUE");
    let mut waits = Vec::new();
    for i in 1..=u64::from(TRIES) {
        std::thread::sleep(IDLE + STEP * i as u32);
        // FENCE (16 bytes: header, address lo/hi, value) at the write pointer, as a program
        // writes it: the packet, then the write pointer, then its next call.
        let at = ((i - 1) * 16) as usize;
        word(&ring, at).store(SDMA_FENCE | flag_va << 32, Ordering::Relaxed);
        word(&ring, at + 8).store(flag_va >> 32 | i << 32, Ordering::Relaxed);
        let start = Instant::now();
        word(&pointers, 8).store(i * 16, Ordering::Release);
        let mut version = kfd_ioctl_get_version_args::default();
        emu.ioctl(AMDKFD_IOC_GET_VERSION, &mut version)
            .expect("GET_VERSION");
        while word(&flag, 0).load(Ordering::Acquire) != i {
            assert!(start.elapsed() < PATIENCE, "fence {i} never landed");
            std::thread::yield_now();
        }
        waits.push(start.elapsed());
    }
    let prompt = waits.iter().filter(|&&w| w <= PROMPT).count();
    let mut sorted = waits.clone();
    sorted.sort();
    eprintln!(
        "idle queue to fence after an ioctl: median {:?}, slowest {:?}, {prompt} of {TRIES} within {PROMPT:?}",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
    );
    assert!(
        prompt * 2 >= TRIES as usize,
        "only {prompt} of {TRIES} fences within {PROMPT:?} of the ioctl: {waits:?}"
    );
}
