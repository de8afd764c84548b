//! How soon an AQL queue's error reaches a runtime that is already waiting for it, when the
//! program rang the doorbell and then makes no system call (rocrtst's
//! `Queue_Validation_InvalidWorkGroupSize`: create a queue, load a code object, submit one
//! packet with an invalid work-group size, spin on its completion signal for 0xffffff ticks
//! (16.8 ms) with `HSA_WAIT_STATE_ACTIVE`, destroy the queue; ROCr's async-events thread sits
//! in `WAIT_EVENTS` on the queue's inactive signal meanwhile and must run the error callback
//! within that window, `queue_validation.cc:520–586` of rocrtst at `752cfd5`).
//!
//! On the hardware the CP sees the doorbell within microseconds and the kernel wakes the
//! waiter on the end-of-pipe interrupt at once (`kfd_signal_event_interrupt`). The model
//! cannot see a doorbell write; its engines poll (`scheduler`). What is proved: on mi210x8,
//! with 8 idle AQL queues on every GPU besides, a queue created for the try and rung after
//! the waiter has been waiting long enough for an idle engine's polling to back off to its
//! slowest (5 ms), gets its error (code 64, "Group is too large") to the waiter within
//! [`PROMPT`] in at least half of the tries. With polling that backs off to 5 ms regardless
//! (before `scheduler`'s hot window), about one try in five makes it. The times are printed
//! (`--nocapture`) for the record.
//!
//! Also proved: idle queues (none rung for longer than the hot window) cost the model little
//! CPU — its polling backs off — measured as the test process's CPU time over a second.

mod model_support;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::aql::{
    GTT_RW, INACTIVE, INACTIVE_SIGNAL, RING, RING_SIZE, RPTR, RPTR_BASE_OFFSET, SIGNAL_EVENT_ID,
    SIGNAL_MAILBOX, SIGNAL_VALUE, WPTR,
};
use model_support::{CpuMap, Emu, data, va, wait};

/// Idle AQL queues on each GPU besides the one each try rings.
const IDLE_PER_GPU: usize = 8;
/// Each queue's BO: `amd_queue_t` at 0, the ring at `RING`, the inactive signal at
/// `INACTIVE_SIGNAL` (`model_support::aql`'s layout).
const QUEUE_BO: usize = 0x4000;
/// The process's doorbell slice per GPU on SOC15 (`kfd_doorbell_process_slice`: 1024 × 8).
const DOORBELL_SLICE: u64 = 8192;
const TRIES: u32 = 15;
/// How long the waiter waits before the doorbell: long enough for an idle engine's polling
/// to reach its slowest (20 µs doubling to 5 ms takes about 10 ms, 500 µs after a kick
/// about 8 ms); each try waits [`STEP`] longer, so that the doorbells fall at every phase of
/// a 5 ms poll.
const IDLE: Duration = Duration::from_millis(25);
const STEP: Duration = Duration::from_micros(370);
/// What "promptly" means: well under the old slowest poll (5 ms) and under a third of
/// rocrtst's 16.8 ms window, far above a thread wake-up on an idle host.
const PROMPT: Duration = Duration::from_millis(1);
/// How long the idle queues idle before they are measured or the tries start: past the
/// window in which the model watches a new queue's doorbell closely (`scheduler`: 1 s).
const IDLE_FOR: Duration = Duration::from_secs(2);
/// The share of a core the idle queues may cost (debug build, loaded 2-core VM: 11–33 % for
/// 64 queues each polled every 5 ms; a queue polled every 250 µs, as a hot one, would cost
/// about 20 times that).
const IDLE_SHARE: f64 = 0.5;
/// The waiter's bound (`WAIT_EVENTS` timeout, ms): only a bound.
const PATIENCE_MS: u32 = 20_000;

/// One AQL queue over its own GTT BO (mapped on every GPU), laid out as ROCr lays out its
/// queues, with an inactive signal whose mailbox is slot `slot` of the signal page at
/// `va(1)` and whose event is `event`.
struct AqlQueue {
    bo: CpuMap,
    /// The process's doorbell slice on the queue's GPU, and the queue's slot in it.
    doorbells: CpuMap,
    slot: usize,
    id: u32,
}

impl AqlQueue {
    fn create(emu: &Emu, gpu: usize, at: u64, event: &kfd_ioctl_create_event_args) -> AqlQueue {
        let ids = emu.gpu_ids();
        let (handle, offset) = emu
            .alloc(ids[gpu], at, QUEUE_BO as u64, GTT_RW)
            .expect("alloc");
        assert_eq!(emu.map(handle, &[ids[gpu]]).0, Ok(0));
        let mut bo = emu
            .cpu_map(emu.renders[gpu].as_fd(), offset, QUEUE_BO)
            .expect("map the queue BO");
        let b = bo.bytes();
        let put = |b: &mut [u8], at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(b, RPTR_BASE_OFFSET, &(RPTR as u32).to_le_bytes());
        put(b, INACTIVE, &(at + INACTIVE_SIGNAL as u64).to_le_bytes());
        let mailbox = va(1) + 8 * u64::from(event.event_slot_index);
        put(b, INACTIVE_SIGNAL + SIGNAL_MAILBOX, &mailbox.to_le_bytes());
        put(
            b,
            INACTIVE_SIGNAL + SIGNAL_EVENT_ID,
            &event.event_id.to_le_bytes(),
        );
        // Every slot INVALID, as ROCr leaves a new ring.
        for slot in 0..RING_SIZE / 64 {
            put(b, RING + slot * 64, &1u16.to_le_bytes());
        }
        let mut a = kfd_ioctl_create_queue_args {
            ring_base_address: at + RING as u64,
            ring_size: RING_SIZE as u32,
            read_pointer_address: at + RPTR as u64,
            write_pointer_address: at + WPTR as u64,
            gpu_id: ids[gpu],
            queue_type: KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: 100,
            queue_priority: 7,
            ..Default::default()
        };
        emu.ioctl(AMDKFD_IOC_CREATE_QUEUE, &mut a)
            .expect("create the queue");
        let doorbells = emu
            .cpu_map(
                emu.kfd.as_fd(),
                a.doorbell_offset & !(DOORBELL_SLICE - 1),
                DOORBELL_SLICE as usize,
            )
            .expect("doorbell mapping");
        AqlQueue {
            bo,
            doorbells,
            slot: (a.doorbell_offset & (DOORBELL_SLICE - 1)) as usize,
            id: a.queue_id,
        }
    }

    /// Writes rocrtst's invalid packet (a 1-D dispatch of 65535-item groups, its header
    /// last) into slot 0 and then the write index, as a program rings a queue: no system
    /// call.
    fn ring_invalid_dispatch(&mut self) {
        let b = self.bo.bytes();
        let mut p = [0u8; 64];
        p[2..4].copy_from_slice(&1u16.to_le_bytes());
        for (at, v) in [(4, u16::MAX), (6, 1), (8, 1)] {
            p[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
        for (at, v) in [(12, 65535u32), (16, 1), (20, 1)] {
            p[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        p[32..40].copy_from_slice(&0x1000u64.to_le_bytes());
        b[RING + 2..RING + 64].copy_from_slice(&p[2..]);
        // KERNEL_DISPATCH, barrier, system-scope fences.
        let header: u16 = 2 | 1 << 8 | 2 << 9 | 2 << 11;
        // SAFETY: RING and WPTR are 8-aligned in a page-aligned shared mapping of QUEUE_BO
        // bytes that outlives these borrows; the model's engines read it through the memfd
        // only, never through a Rust reference.
        let (slot, wptr) = unsafe {
            (
                &*b.as_mut_ptr().add(RING).cast::<AtomicU16>(),
                &*b.as_mut_ptr().add(WPTR).cast::<AtomicU64>(),
            )
        };
        slot.store(header, Ordering::Release);
        wptr.store(1, Ordering::Release);
        // The doorbell, with the packet's index (`hsa_signal_store_relaxed(doorbell, index)`;
        // ROCr's AqlQueue::StoreRelaxed stores it as 64 bits on gfx9).
        // SAFETY: the slot is 8-aligned in the page-aligned doorbell mapping, which outlives
        // this borrow; the model reads it through its memfd only.
        let bell = unsafe { &*self.doorbells.ptr.add(self.slot).cast::<AtomicU64>() };
        bell.store(0, Ordering::Release);
    }

    fn u64_at(&mut self, at: usize) -> u64 {
        u64::from_le_bytes(self.bo.bytes()[at..at + 8].try_into().unwrap())
    }

    fn destroy(self, emu: &Emu) {
        let mut a = kfd_ioctl_destroy_queue_args {
            queue_id: self.id,
            pad: 0,
        };
        assert_eq!(emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut a), Ok(0));
    }
}

/// The model on mi210x8 (KFD 1.15: no queue-buffer checks), every GPU acquired, a signal
/// page BO at `va(1)` mapped on every GPU and one auto-reset signal event in it.
fn machine() -> (Emu, kfd_ioctl_create_event_args) {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset("mi210x8").expect("preset"),
        kfd_minor: 15,
        ..ModelConfig::default()
    });
    let (page, _, event) = emu.signal_event_on_a_bo();
    let gpus = emu.gpu_ids();
    assert_eq!(emu.map(page, &gpus).0, Ok(0));
    (emu, event)
}

/// `IDLE_PER_GPU` idle queues on every GPU, their BOs from `va(16)` on.
fn idle_queues(emu: &Emu, event: &kfd_ioctl_create_event_args) -> Vec<AqlQueue> {
    let gpus = emu.gpu_ids().len();
    (0..gpus * IDLE_PER_GPU)
        .map(|n| AqlQueue::create(emu, n % gpus, va(16 + n as u64), event))
        .collect()
}

#[test]
fn an_invalid_packet_rung_without_a_system_call_reaches_a_waiting_runtime_promptly() {
    let (emu, event) = machine();
    let idle = idle_queues(&emu, &event);
    // Idle for long: past the window in which a new queue's doorbell is watched closely.
    std::thread::sleep(IDLE_FOR);
    let gpus = emu.gpu_ids().len();
    let mut waits = Vec::new();
    for i in 0..TRIES {
        let mut q = AqlQueue::create(&emu, i as usize % gpus, va(2 + u64::from(i)), &event);
        let (landed, result) = std::thread::scope(|s| {
            // ROCr's async-events thread: already waiting when the program rings.
            let waiter = s.spawn(|| {
                let mut events = [data(event.event_id)];
                let (r, result) = wait(&emu, &mut events, false, PATIENCE_MS);
                assert_eq!(r, Ok(0), "WAIT_EVENTS");
                (Instant::now(), result)
            });
            std::thread::sleep(IDLE + STEP * i);
            let start = Instant::now();
            q.ring_invalid_dispatch();
            let (at, result) = waiter.join().expect("the waiter");
            (at.saturating_duration_since(start), result)
        });
        assert_eq!(
            result, KFD_IOC_WAIT_RESULT_COMPLETE,
            "try {i}: the inactive signal's event was not raised"
        );
        assert_eq!(
            q.u64_at(INACTIVE_SIGNAL + SIGNAL_VALUE),
            64,
            "try {i}: the CP's code for a group too large"
        );
        waits.push(landed);
        q.destroy(&emu);
    }
    let prompt = waits.iter().filter(|&&w| w <= PROMPT).count();
    let mut sorted = waits.clone();
    sorted.sort();
    eprintln!(
        "doorbell to the waiter's wake-up, mi210x8, {} idle queues: median {:?}, slowest {:?}, \
         {prompt} of {TRIES} within {PROMPT:?}",
        idle.len(),
        sorted[sorted.len() / 2],
        sorted[sorted.len() - 1],
    );
    assert!(
        prompt * 2 >= TRIES as usize,
        "only {prompt} of {TRIES} errors within {PROMPT:?} of the doorbell: {waits:?}"
    );
    for q in idle {
        q.destroy(&emu);
    }
}

/// The CPU time this process has used (every thread: the model's engines run in it).
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` to the pointer, which points at one.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(r, 0, "getrusage");
    // SAFETY: zero-initialised and filled by a successful getrusage.
    let usage = unsafe { usage.assume_init() };
    let t = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    t(usage.ru_utime) + t(usage.ru_stime)
}

#[test]
fn idle_queues_cost_little_cpu() {
    let (emu, event) = machine();
    let idle = idle_queues(&emu, &event);
    std::thread::sleep(IDLE_FOR);
    let (cpu, wall) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let (cpu, wall) = (cpu_time() - cpu, wall.elapsed());
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    eprintln!(
        "{} idle queues on mi210x8: {cpu:?} of CPU in {wall:?} ({:.1} % of a core)",
        idle.len(),
        share * 100.0
    );
    assert!(
        share < IDLE_SHARE,
        "{} idle queues used {:.1} % of a core",
        idle.len(),
        share * 100.0
    );
    for q in idle {
        q.destroy(&emu);
    }
}
