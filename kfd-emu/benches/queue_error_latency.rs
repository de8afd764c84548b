//! How long an AQL queue error takes from the doorbell to a runtime already waiting for it
//! (rocrtst's `Queue_Validation_*`: ROCr's async-events thread in `WAIT_EVENTS`, the program
//! spinning without a system call), against a baseline in the same run: one thread waking
//! another through an eventfd (the host's floor for any wake-up the model's path needs).
//!
//! Each iteration creates an AQL queue on mi210x8 (8 idle queues on each GPU besides), starts
//! the waiter, lets the queue's engine idle [`IDLE`] (its polling backs off meanwhile), then
//! writes an invalid dispatch, the write index and the doorbell (with index 0, the value the
//! doorbell already holds, as ROCr rings a new queue's first packet), and times until the
//! waiter returns; the queue is destroyed after. Only the span from the doorbell to the
//! waiter's return is measured: the doorbell watcher (`model/doorbells.rs`) sees the write
//! index move and kicks the engine, which stops the queue and raises the error's event.
//! Also measured, per model: what its idle queues cost the host, as the process's CPU time
//! over 100 ms of idle (`idle_cpu_per_100ms`: the engines' polling and the watcher's looks).
//! The same is measured on a model without the watcher (`ModelConfig::doorbell_watch` off:
//! the engine finds the packet at its next poll), in the same run. Numbers:
//! `docs/conformance.md` ("A doorbell the emulator sees without a system call").

#[path = "../tests/model_support/mod.rs"]
mod model_support;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use kfd_emu::machine::Machine;
use kfd_emu::model::ModelConfig;
use kfd_ioctl::abi::*;
use model_support::aql::{
    GTT_RW, INACTIVE, INACTIVE_SIGNAL, RING, RING_SIZE, RPTR, RPTR_BASE_OFFSET, SIGNAL_EVENT_ID,
    SIGNAL_MAILBOX, WPTR,
};
use model_support::{CpuMap, Emu, data, va, wait};

const IDLE_PER_GPU: usize = 8;
const QUEUE_BO: usize = 0x4000;
/// `kfd_doorbell_process_slice` on SOC15.
const DOORBELL_SLICE: u64 = 8192;
/// How long each new queue idles before its doorbell (its engine's polling backs off to 5 ms
/// within about 10 ms, further once the watcher watches it).
const IDLE: Duration = Duration::from_millis(30);

/// One AQL queue over its own GTT BO with the inactive signal's mailbox in the event page.
struct AqlQueue {
    bo: CpuMap,
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

    /// A 1-D dispatch of 65535-item groups (CP error 64), its header last, then the write
    /// index and the doorbell (index 0), as ROCr rings.
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
        b[RING + 2..RING + 64].copy_from_slice(&p[2..]);
        let header: u16 = 2 | 1 << 8 | 2 << 9 | 2 << 11;
        // SAFETY: RING and WPTR are 8-aligned in a page-aligned shared mapping of QUEUE_BO
        // bytes that outlives these borrows; the model reads it through its memfd only.
        let (slot, wptr) = unsafe {
            (
                &*b.as_mut_ptr().add(RING).cast::<AtomicU16>(),
                &*b.as_mut_ptr().add(WPTR).cast::<AtomicU64>(),
            )
        };
        slot.store(header, Ordering::Release);
        wptr.store(1, Ordering::Release);
        // SAFETY: the slot is 8-aligned in the page-aligned doorbell mapping, which outlives
        // this borrow; the model reads it through its memfd only.
        let bell = unsafe { &*self.doorbells.ptr.add(self.slot).cast::<AtomicU64>() };
        bell.store(0, Ordering::Release);
    }

    fn destroy(self, emu: &Emu) {
        let mut a = kfd_ioctl_destroy_queue_args {
            queue_id: self.id,
            pad: 0,
        };
        assert_eq!(emu.ioctl(AMDKFD_IOC_DESTROY_QUEUE, &mut a), Ok(0));
    }
}

/// One try: a new queue, the waiter, [`IDLE`], the doorbell; the time from the doorbell to
/// the waiter's return.
fn queue_error(emu: &Emu, event: &kfd_ioctl_create_event_args, n: u64) -> Duration {
    let gpus = emu.gpu_ids().len();
    let mut q = AqlQueue::create(emu, n as usize % gpus, va(200 + n), event);
    let took = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut events = [data(event.event_id)];
            let (r, result) = wait(emu, &mut events, false, 20_000);
            assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_COMPLETE));
            Instant::now()
        });
        std::thread::sleep(IDLE);
        let start = Instant::now();
        q.ring_invalid_dispatch();
        waiter
            .join()
            .expect("the waiter")
            .saturating_duration_since(start)
    });
    q.destroy(emu);
    took
}

/// The idle span whose CPU time [`idle_cpu`] measures.
const IDLE_SPAN: Duration = Duration::from_millis(100);

/// The CPU time (user and system, every thread of this process: the model's engines and its
/// watcher) spent while this thread sleeps `span`.
fn idle_cpu(span: Duration) -> Duration {
    let cpu = || {
        let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `getrusage` writes one `rusage` into the buffer it is given.
        let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) };
        assert_eq!(r, 0, "getrusage");
        // SAFETY: initialised by the successful call (and zeroed before).
        let u = unsafe { u.assume_init() };
        let t = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        t(u.ru_utime) + t(u.ru_stime)
    };
    let before = cpu();
    std::thread::sleep(span);
    cpu().saturating_sub(before)
}

/// The baseline: a thread blocked in `read` on an eventfd, woken by a write; the time from
/// the write to its return.
fn eventfd_wake() -> Duration {
    let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).expect("eventfd");
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut b = [0u8; 8];
            rustix::io::read(&fd, &mut b).expect("read");
            Instant::now()
        });
        std::thread::sleep(Duration::from_millis(1));
        let start = Instant::now();
        rustix::io::write(&fd, &1u64.to_ne_bytes()).expect("write");
        waiter
            .join()
            .expect("the waiter")
            .saturating_duration_since(start)
    })
}

/// The model on mi210x8 (KFD 1.15: no queue-buffer checks), with or without the doorbell
/// watcher, its runtime's error event, and the idle queues.
fn model(watch: bool) -> (Emu, kfd_ioctl_create_event_args, Vec<AqlQueue>) {
    let mut emu = Emu::new(ModelConfig {
        machine: Machine::preset("mi210x8").expect("preset"),
        kfd_minor: 15,
        doorbell_watch: watch,
        ..ModelConfig::default()
    });
    let (page, _, event) = emu.signal_event_on_a_bo();
    let gpus = emu.gpu_ids();
    assert_eq!(emu.map(page, &gpus).0, Ok(0));
    let idle: Vec<AqlQueue> = (0..gpus.len() * IDLE_PER_GPU)
        .map(|n| AqlQueue::create(&emu, n % gpus.len(), va(16 + n as u64), &event))
        .collect();
    // The idle queues' engines back off (and the watcher watches them).
    std::thread::sleep(Duration::from_millis(500));
    (emu, event, idle)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("queue_error_latency");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .measurement_time(Duration::from_secs(4));
    g.bench_function("eventfd_wake", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| eventfd_wake()).sum())
    });
    for (name, idle_name, watch) in [
        ("doorbell_to_waiter", "idle_cpu_per_100ms", true),
        (
            "doorbell_to_waiter_unwatched",
            "idle_cpu_per_100ms_unwatched",
            false,
        ),
    ] {
        let (emu, event, idle) = model(watch);
        // What the idle queues cost the host: the process's CPU time per 100 ms of idle.
        g.bench_function(idle_name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| idle_cpu(IDLE_SPAN)).sum())
        });
        let mut n = 0;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        n += 1;
                        queue_error(&emu, &event, n)
                    })
                    .sum()
            })
        });
        for q in idle {
            q.destroy(&emu);
        }
    }
    g.finish();
    ratio::report(
        "queue_error_latency",
        "doorbell_to_waiter",
        "eventfd_wake",
        None,
    );
    ratio::report(
        "queue_error_latency",
        "doorbell_to_waiter_unwatched",
        "eventfd_wake",
        None,
    );
    ratio::report(
        "queue_error_latency",
        "doorbell_to_waiter",
        "doorbell_to_waiter_unwatched",
        None,
    );
    ratio::report(
        "queue_error_latency",
        "idle_cpu_per_100ms",
        "idle_cpu_per_100ms_unwatched",
        None,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
