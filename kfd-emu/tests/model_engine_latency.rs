//! How soon an idle engine sees new work. On the hardware a doorbell write reaches its engine
//! at once; in the model it is a store to the process's doorbell page, which an idle queue's
//! engine polls (backing off to its slowest poll), which an ioctl of the queue's process wakes
//! at once (any: the runtime's next call after ringing a doorbell, `scheduler`), and which the
//! model's doorbell watcher (`model/doorbells.rs`) reads through mappings, with no system call,
//! kicking the engine of each queue whose doorbell (or AQL write index) changed.
//!
//! What is proved:
//! * work written to an SDMA queue that has idled long enough for its engine's polling to back
//!   off, followed by an ioctl of its process (GET_VERSION), has run (its fence written)
//!   within 1 ms in at least half of the tries. Without the wake-up the fence waits for the
//!   engine's next poll, up to its slowest (5 ms): about one try in five lands within 1 ms;
//! * the same queue rung with its doorbell only (the write pointer in memory left as it was,
//!   so the doorbell is what the engine must see) and then only spun on (ROCr's active signal
//!   waits; rocrtst's `Memory_Async_Copy` small copies after an idle spell) runs its FENCE
//!   within a median under 1 ms over 21 tries; an AQL queue the same with a BARRIER_AND (write
//!   index, packet, then the doorbell with the packet's index, as ROCr submits: the first rings
//!   0, the value the doorbell already holds) — or, on a host too loaded for that, within at
//!   most half the median of the same queue in a model without the watcher, rung in turn
//!   with it in the same run (its engine's polling alone: a median of about 2.5 ms on a quiet
//!   host). Without the watcher both are the same and the test fails. On a real GPU the
//!   engine sees the doorbell at once;
//! * the watcher's cost, counted (not timed): while queues idle it wakes at most once per
//!   200 µs (its slowest look), also with a queue stuck on a slot it cannot run (told once,
//!   not at every look), and not at all once no queue is left to watch.
//!
//! The tests run one at a time (`one_at_a_time`): each one's engines would stretch the
//! others' latencies on a 2-core host. The spins yield the CPU (`sched_yield`, which the model does not see: only an ioctl would
//! tell it anything), so that on a loaded 2-core host the spinning thread leaves the cores to
//! the engines. The times are printed (`--nocapture`) for the record.

mod model_support;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::aql::{self, BARRIER_AND, COMPLETION, RING_SIZE, SIGNAL_VALUE, WPTR};
use model_support::{CpuMap, Emu, va};

/// How long a test waits for completion before it fails.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long the queue idles before each try: long enough for the engine's polling to reach its
/// slowest (20 µs doubling to 5 ms takes about 10 ms); each try idles [`STEP`] longer than the
/// one before, so that the tries' submissions fall at every phase of the engine's slowest poll
/// (a fixed idle, a multiple of the poll, would land every try at the same point of it).
const IDLE: Duration = Duration::from_millis(40);
const STEP: Duration = Duration::from_micros(370);
/// What "promptly" means here: well under the slowest poll (5 ms), generous for a loaded
/// 2-core VM (a thread wake-up there takes tens to hundreds of µs).
const PROMPT: Duration = Duration::from_millis(1);
const TRIES: u64 = 21;
/// The doorbell slice of a SOC15 GPU (1024 doorbells of 8 bytes).
const SLICE: u64 = 8192;
/// The watcher's slowest look (`doorbells::LOOK_IDLE`).
const LOOK_IDLE: Duration = Duration::from_micros(200);
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
    // long as `map`; the model reaches it only through its own mappings and the memfd, never
    // through a Rust reference.
    unsafe { &*map.ptr.add(at).cast::<AtomicU64>() }
}

/// The doorbell slice of the queue whose CREATE_QUEUE answered `doorbell_offset`, mapped as
/// a program maps it, and its slot's byte in it.
fn doorbell(emu: &Emu, doorbell_offset: u64) -> (CpuMap, usize) {
    let map = emu
        .cpu_map(
            emu.kfd.as_fd(),
            doorbell_offset & !(SLICE - 1),
            SLICE as usize,
        )
        .expect("doorbell mapping");
    (map, (doorbell_offset & (SLICE - 1)) as usize)
}

/// The median of `waits`, after printing it with the slowest and how many were prompt.
fn median(what: &str, waits: &[Duration]) -> Duration {
    let mut sorted = waits.to_vec();
    sorted.sort();
    let prompt = sorted.iter().filter(|&&w| w <= PROMPT).count();
    eprintln!(
        "{what}: median {:?}, slowest {:?}, {prompt} of {} within {PROMPT:?}",
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
        sorted.len()
    );
    sorted[sorted.len() / 2]
}

/// The tests of this file run one at a time (see the module docs).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The doorbell watcher's medians: under [`PROMPT`], or at most half of the unwatched model's
/// median in the same run (a host too loaded for the absolute bound stretches both alike).
fn assert_watched_prompt(what: &str, watched: Duration, unwatched: Duration) {
    assert!(
        watched <= PROMPT || watched * 2 <= unwatched,
        "{what}: median {watched:?} with the watcher, {unwatched:?} without it"
    );
}

/// An SDMA queue on mi100's first GPU: its ring, its read/write pointers (the write pointer
/// at byte 8), the fence word's page and its VA, and its doorbell offset.
struct SdmaQueue {
    emu: Emu,
    ring: CpuMap,
    pointers: CpuMap,
    flag: CpuMap,
    flag_va: u64,
    doorbell_offset: u64,
}

impl SdmaQueue {
    /// The queue, in a model with the doorbell watcher or without it.
    fn create(doorbell_watch: bool) -> SdmaQueue {
        let mut emu = Emu::new(ModelConfig {
            machine: Machine::preset("mi100").expect("preset"),
            doorbell_watch,
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
        SdmaQueue {
            emu,
            ring,
            pointers,
            flag,
            flag_va,
            doorbell_offset: a.doorbell_offset,
        }
    }

    /// Writes try `i`'s FENCE (16 bytes: header, address lo/hi, value `i`) at ring slot
    /// `i - 1`, as a program writes a packet before it submits it.
    fn write_fence(&self, i: u64) {
        let at = ((i - 1) * 16) as usize;
        word(&self.ring, at).store(SDMA_FENCE | self.flag_va << 32, Ordering::Relaxed);
        word(&self.ring, at + 8).store(self.flag_va >> 32 | i << 32, Ordering::Relaxed);
    }

    /// Spins (yielding) until try `i`'s fence has landed, and says how long since `start`.
    fn wait_fence(&self, i: u64, start: Instant) -> Duration {
        while word(&self.flag, 0).load(Ordering::Acquire) != i {
            assert!(start.elapsed() < PATIENCE, "fence {i} never landed");
            std::thread::yield_now();
        }
        start.elapsed()
    }
}

#[test]
fn work_followed_by_an_ioctl_of_its_process_runs_promptly() {
    let _one = one_at_a_time();
    // Without the watcher, which would see the write pointer (it lies in a BO): the ioctl's
    // kick alone.
    let q = SdmaQueue::create(false);
    let mut waits = Vec::new();
    for i in 1..=TRIES {
        std::thread::sleep(IDLE + STEP * i as u32);
        // The packet, then the write pointer, then the program's next call.
        q.write_fence(i);
        let start = Instant::now();
        word(&q.pointers, 8).store(i * 16, Ordering::Release);
        let mut version = kfd_ioctl_get_version_args::default();
        q.emu
            .ioctl(AMDKFD_IOC_GET_VERSION, &mut version)
            .expect("GET_VERSION");
        waits.push(q.wait_fence(i, start));
    }
    median("idle queue to fence after an ioctl", &waits);
    let prompt = waits.iter().filter(|&&w| w <= PROMPT).count();
    assert!(
        prompt * 2 >= TRIES as usize,
        "only {prompt} of {TRIES} fences within {PROMPT:?} of the ioctl: {waits:?}"
    );
}

#[test]
fn an_idle_sdma_queue_rung_with_no_system_call_runs_promptly() {
    let _one = one_at_a_time();
    // With the watcher, and without it, rung in turn.
    let queues = [SdmaQueue::create(true), SdmaQueue::create(false)];
    let bells = queues
        .each_ref()
        .map(|q| doorbell(&q.emu, q.doorbell_offset));
    let mut waits = [Vec::new(), Vec::new()];
    for i in 1..=TRIES {
        std::thread::sleep(IDLE + STEP * i as u32);
        for ((q, (bells, slot)), waits) in queues.iter().zip(&bells).zip(&mut waits) {
            // The packet, then the doorbell with the new write pointer, then only a spin.
            q.write_fence(i);
            let start = Instant::now();
            word(bells, *slot).store(i * 16, Ordering::Release);
            waits.push(q.wait_fence(i, start));
        }
    }
    let watched = median("idle SDMA queue, doorbell to fence", &waits[0]);
    let unwatched = median("the same without the watcher", &waits[1]);
    assert_watched_prompt("idle SDMA queue, doorbell to fence", watched, unwatched);
}

#[test]
fn an_idle_aql_queue_rung_with_no_system_call_runs_promptly() {
    let _one = one_at_a_time();
    // With the watcher, and without it, rung in turn.
    let mut queues = [true, false].map(|doorbell_watch| {
        aql::Queue::create(aql::Setup {
            doorbell_watch,
            ..aql::Setup::aql("mi210x8")
        })
    });
    let bells = queues
        .each_ref()
        .map(|q| doorbell(&q.emu, q.doorbell_offset));
    let mut waits = [Vec::new(), Vec::new()];
    for i in 0..TRIES {
        std::thread::sleep(IDLE + STEP * i as u32);
        for ((q, (bells, slot)), waits) in queues.iter_mut().zip(&bells).zip(&mut waits) {
            q.put_u64(COMPLETION + SIGNAL_VALUE, 1);
            // A BARRIER_AND with no dependency, completing the completion signal (to 0).
            let mut packet = [0u8; 64];
            let header = u16::from(BARRIER_AND) | 1 << 8 | 2 << 9 | 2 << 11;
            packet[..2].copy_from_slice(&header.to_le_bytes());
            packet[56..].copy_from_slice(&(va(2) + COMPLETION as u64).to_le_bytes());
            // As ROCr: the write index first, the packet (its header last), then the doorbell
            // with the packet's index.
            assert!(i < (RING_SIZE / 64) as u64);
            word(&q.bo, WPTR).store(i + 1, Ordering::Release);
            q.place(i, packet);
            let start = Instant::now();
            word(bells, *slot).store(i, Ordering::Release);
            while word(&q.bo, COMPLETION + SIGNAL_VALUE).load(Ordering::Acquire) != 0 {
                assert!(start.elapsed() < PATIENCE, "barrier {i} never completed");
                std::thread::yield_now();
            }
            waits.push(start.elapsed());
        }
    }
    let watched = median("idle AQL queue, doorbell to completion", &waits[0]);
    let unwatched = median("the same without the watcher", &waits[1]);
    assert_watched_prompt("idle AQL queue, doorbell to completion", watched, unwatched);
    for q in queues {
        q.destroy();
    }
}

/// The watcher's wake-ups between two readings at least `span` apart.
fn passes_over(emu: &Emu, span: Duration) -> (u64, Duration) {
    let start = Instant::now();
    let before = emu.model.doorbell_watch_passes();
    std::thread::sleep(span);
    let passes = emu.model.doorbell_watch_passes() - before;
    (passes, start.elapsed())
}

#[test]
fn the_watcher_wakes_at_most_every_200_us_while_queues_idle_and_never_without_them() {
    let _one = one_at_a_time();
    let mut q = aql::Queue::create(aql::Setup::aql("mi210x8"));
    // The queue's engine has found nothing and put it under watch.
    let deadline = Instant::now() + PATIENCE;
    while q.emu.model.doorbell_watch_passes() < 10 {
        assert!(Instant::now() < deadline, "the watcher never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Idle: at most one wake-up per 200 µs (plus the one in flight at each end), however
    // slow the host (a slow host only stretches the watcher's sleeps).
    let (passes, elapsed) = passes_over(&q.emu, Duration::from_millis(300));
    let bound = (elapsed.as_micros() / LOOK_IDLE.as_micros()) as u64 + 2;
    eprintln!("watcher wake-ups over {elapsed:?} of idle: {passes} (bound {bound})");
    assert!(
        passes <= bound,
        "{passes} wake-ups in {elapsed:?} (at most {bound})"
    );
    // A queue whose write index moved past a packet slot still INVALID (a producer between
    // reserving a slot and writing it, or one that never does) cannot run: the watcher tells
    // its engine of the change once, not at every look (each told change brings its looks
    // back to every 25 µs, which would break the bound).
    q.put_u64(WPTR, 1);
    let (passes, elapsed) = passes_over(&q.emu, Duration::from_millis(300));
    let bound = (elapsed.as_micros() / LOOK_IDLE.as_micros()) as u64 + 8;
    eprintln!("watcher wake-ups over {elapsed:?} with a stuck queue: {passes} (bound {bound})");
    assert!(
        passes <= bound,
        "{passes} wake-ups in {elapsed:?} with a stuck queue (at most {bound})"
    );
    assert_eq!(q.u64_at(aql::RPTR), 0, "the INVALID slot did not run");
    // The queue gone, nothing is watched: the watcher waits with no wake-up at all.
    q.destroy();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (passes, _) = passes_over(&q.emu, Duration::from_millis(20));
        if passes == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the watcher goes on without queues"
        );
    }
    let (passes, elapsed) = passes_over(&q.emu, Duration::from_millis(200));
    assert_eq!(passes, 0, "wake-ups over {elapsed:?} with no queue");
}
