//! The GPU engines' scheduling: every user queue has an engine thread of its own that runs it
//! in bounded turns — SDMA queues on the copy engines ([`sdma`](super::sdma)), AQL queues on
//! the packet processor ([`aql`](super::aql)), PM4 compute queues on the CP
//! ([`pm4`](super::pm4)) — polling with a backoff, woken by its queue's
//! kick (the queue made active or destroyed; the doorbell watcher, which saw the queue's
//! doorbell or write pointer change: [`doorbells`](super::doorbells); a WAIT_EVENTS of its
//! process that wants to see completions soon: [`kick_process`]; any other ioctl of its
//! process, at most every [`IOCTL_KICK_EVERY`](super::queues::IOCTL_KICK_EVERY), since a
//! program's next call after ringing a doorbell comes soon after it: `dispatch`). A kick
//! makes the engine look at once and restarts the backoff from 500 µs. An engine that finds
//! nothing to run hands its queue to the watcher with what it read before the turn (the
//! doorbell through the process's doorbell mapping, the write pointer through a BO's
//! mapping: no system call), and takes it back when it runs, cannot run, or goes.
//!
//! Nothing an engine holds while it touches a process's memory is shared with another queue
//! or process: the model's lock is taken only to translate an address or move the model's own
//! bytes (`gpu_view`), never across an access to a process's memory, and the only lock shared
//! with the ioctls is the queue's own [`Runner`] state, never held across any access. So an
//! access that blocks (a page behind a userfaultfd nobody serves, a hung FUSE mapping, a
//! stopped process) holds up only its queue's thread:
//! * WAIT_EVENTS runs no engine: it kicks its process's engines and waits on the event
//!   condition with its timeout (`event_ioctls`);
//! * DESTROY_QUEUE and a deactivating UPDATE_QUEUE preempt the queue as the HWS unmaps it
//!   (`destroy_queue_cpsch`, `update_queue` in `kfd_device_queue_manager.c`): no packet
//!   starts after, and they wait at most [`PREEMPT_TIMEOUT`](super::queues::PREEMPT_TIMEOUT)
//!   for the one in flight; a blocked access of a destroyed queue is discarded when it
//!   returns (the GPU view refuses every later access of its thread, and the engine drops the
//!   fault), and the thread ends;
//! * a process's teardown marks its queues destroyed without waiting.
//!
//! A turn is bounded (`TURN_PACKETS` packets, [`TURN_BYTES`] bytes: a long COPY_LINEAR
//! yields between chunks and resumes mid-packet, keeping what it consumed), after which the
//! thread yields the CPU, so queues — and the processes that own them — share the host's
//! cores round robin under its scheduler as the HWS shares the GPU between queues (per
//! queue: a process with more busy queues gets more turns, as on the hardware).
//!
//! Where it differs: an engine thread the host refuses to start (`EAGAIN` at the thread
//! limit) leaves its queue never run (`--trace` says so); and a doorbell write, which the
//! hardware's engine sees at once, reaches an idle engine through the doorbell watcher's next
//! look (every 25 µs while doorbells change, backing off to every 200 µs) or the engine's own
//! poll (from every 20 µs after work, or 500 µs after a kick, to every 5 ms when idle; every
//! 50 ms for a queue the watcher watches with nothing pending, whose next submission it will
//! see), so work a program rings and then only spins on (no ioctl) waits up to a look, plus
//! the host's wake-ups. Measured (debug build, loaded 2-core VM, 21 tries per run):
//! * `tests/model_engine_latency.rs`: an idle SDMA queue's fence after the program's next
//!   ioctl landed in a median 5.5–6.4 ms (5–7 tries within 1 ms) before ioctls woke the
//!   engines, 144–162 µs (all 21 within 1 ms, the slowest 236 µs) after;
//! * `tests/model_engine_latency.rs`: an idle SDMA queue rung (doorbell only) and an idle
//!   AQL queue rung as ROCr rings, with no ioctl after: a median of 244–330 µs with the
//!   watcher, 2.7–3.2 ms without it (the engines' polling alone).
//!
//! The slowest idle poll was chosen with `benches/queue_error_latency.rs` (release build,
//! mi210x8 with 65 idle AQL queues, three runs on a VM at load 4–10; `docs/conformance.md`):
//! the process's CPU time per 100 ms of idle was 8.1–12.9 ms with the watcher (engines at
//! 50 ms, the watcher at 200 µs) against 12.0–16.3 ms without it (engines at 5 ms), 0.68–0.92×
//! in each run, while the doorbell of an invalid dispatch reached a waiting WAIT_EVENTS in
//! 211–389 µs against 2.83–3.86 ms.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::bo_maps::BoMap;
use super::doorbells::{self, Bell, Doorbell};
use super::driver::Driver;
use super::engine::{TURN_BYTES, Work};
use super::process::Process;
use super::queues::{self, Engine, Runner};
use super::{aql, pm4, sdma};
use crate::machine::ApertureLayout;

/// Slowest idle polling.
const MAX_IDLE: Duration = Duration::from_millis(5);
/// Slowest idle polling of a queue the doorbell watcher watches with nothing pending (its
/// write pointer in a BO's mapping, and it or an SDMA or PM4 queue's doorbell equal to what
/// it consumed: `Bell::empty`): its next submission, a doorbell or a write pointer, is the
/// watcher's to see. A queue whose write pointer lies elsewhere (a USERPTR, SVM memory), or
/// that waits on a condition, keeps [`MAX_IDLE`].
const WATCHED_IDLE: Duration = Duration::from_millis(50);
/// Fastest polling after work.
const MIN_IDLE: Duration = Duration::from_micros(20);
/// The polling after a kick: each kick costs an idle engine one look at once and a few more
/// over the next 5 ms (500 µs doubling), so a process's ioctls, which kick at most every
/// [`IOCTL_KICK_EVERY`](super::queues::IOCTL_KICK_EVERY), wake each of its idle engines at
/// most about 2000 times a second.
const KICKED_IDLE: Duration = Duration::from_micros(500);
/// How long a queue that cannot run (inactive, stopped) sleeps unless kicked.
const PARKED_IDLE: Duration = Duration::from_millis(100);

/// What one turn of a queue found.
enum Turn {
    /// It ran packets.
    Ran,
    /// It found nothing to run; what the doorbell watcher needs to watch it, if it can.
    Idle(Option<Bell>),
    /// The queue cannot run now (inactive or stopped).
    Parked,
    /// The queue is gone.
    Gone,
}

/// Makes the driver reachable to the engine threads that queues start; each ends once its
/// queue or the driver goes.
pub(super) fn start(drv: &Arc<Driver>) {
    let _ = drv.this.set(Arc::downgrade(drv));
}

/// Starts the engine thread of queue `id` of process `tgid`, run through `runner`: through
/// [`own::spawn_later`](crate::own::spawn_later), since CREATE_QUEUE runs on a supervisor
/// thread, which must not wait for `pthread_create` (it needs glibc's allocator and stack
/// cache, which a served thread may hold). A thread the host refuses leaves the queue never
/// run, and says so.
pub(super) fn start_queue(drv: &Driver, tgid: i32, id: u32, runner: Arc<Runner>) {
    let Some(weak) = drv.this.get().cloned() else {
        return;
    };
    crate::own::spawn_later("kfd-emu-queue", move || engine(&weak, tgid, id, &runner));
}

/// Wakes the engines of process `tgid`'s queues.
pub(super) fn kick_process(drv: &Driver, tgid: i32) {
    let runners: Vec<Arc<Runner>> = drv
        .lock()
        .procs
        .get(&tgid)
        .map(|p| p.queues.by_id.values().map(|q| q.runner.clone()).collect())
        .unwrap_or_default();
    for runner in runners {
        runner.kick.kick();
    }
}

fn engine(weak: &Weak<Driver>, tgid: i32, id: u32, runner: &Arc<Runner>) {
    let kick = &runner.kick;
    // The polling sleeps are as short as asked (not stretched by the default 50 µs slack).
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    let mut idle = MIN_IDLE;
    let mut resume = None;
    // Where the queue's write pointer lies in a BO's mapping, once found (for the watcher).
    let mut wptr = None;
    let mut armed = false;
    loop {
        // A kick that comes while the engine runs makes it look again at once.
        let seen = kick.count();
        let Some(drv) = weak.upgrade() else { return };
        let turn = turn(&drv, tgid, id, runner, &mut resume, &mut wptr);
        // The watcher watches the queue only while it is idle and can run.
        if armed && !matches!(turn, Turn::Idle(_)) {
            armed = false;
            drv.doorbells.disarm(runner);
        }
        let sleep = match turn {
            Turn::Ran => {
                drop(drv);
                // Another queue's turn, if the host has one waiting for the CPU.
                std::thread::yield_now();
                idle = MIN_IDLE;
                continue;
            }
            Turn::Idle(bell) => {
                let cap = match bell {
                    Some(bell) => {
                        let cap = if bell.empty() && drv.doorbells.alive() {
                            WATCHED_IDLE
                        } else {
                            MAX_IDLE
                        };
                        drv.doorbells.arm(runner, bell);
                        armed = true;
                        cap
                    }
                    None => MAX_IDLE,
                };
                let sleep = idle.min(cap);
                idle = (idle * 2).min(cap);
                sleep
            }
            Turn::Parked => PARKED_IDLE,
            Turn::Gone => return,
        };
        // The driver is not kept alive while the engine sleeps.
        drop(drv);
        // A kick says work may come soon (an ioctl of the process, which may have just
        // written a doorbell, or the doorbell watcher, which saw one change): the engine looks
        // at once, and its polling starts over from KICKED_IDLE (not MIN_IDLE: a process
        // making an ioctl every millisecond would keep each of its engines waking every few
        // tens of µs).
        if kick.wait(seen, sleep) {
            idle = KICKED_IDLE;
        }
    }
}

/// One turn of queue `id` of process `tgid`: a bounded slice of its packets. A turn that
/// finds nothing to run hands back what the doorbell watcher needs ([`Bell`]: the doorbell
/// and write pointer as they were before the turn, so a write during it is a change), when
/// the process's doorbells are mapped; `wptr` keeps where the write pointer lies in a BO's
/// mapping once found.
fn turn(
    drv: &Driver,
    tgid: i32,
    id: u32,
    runner: &Arc<Runner>,
    resume: &mut Option<(u64, u64)>,
    wptr: &mut Option<(Arc<BoMap>, usize)>,
) -> Turn {
    if runner.is_gone() {
        return Turn::Gone;
    }
    let w = match work(drv, tgid, id, runner) {
        Ok(Some(w)) => w,
        Ok(None) => return Turn::Parked,
        Err(()) => return Turn::Gone,
    };
    // Read before the queue runs, through the mappings only (no system call).
    let rung = w
        .doorbell
        .map
        .as_ref()
        .and_then(|m| m.read(w.doorbell.at, w.doorbell.size));
    let wptr_seen = wptr
        .as_ref()
        .and_then(|(map, off)| doorbells::read_wptr(map, *off));
    w.resume.set(*resume);
    let ran = queues::run_as(runner, || match w.engine {
        Engine::Sdma { .. } => sdma::run_queue(drv, &w),
        Engine::Compute { aql: true } => aql::run_queue(drv, &w),
        Engine::Compute { aql: false } => pm4::run_queue(drv, &w),
    });
    *resume = w.resume.get();
    if ran {
        return Turn::Ran;
    }
    let (Some(rung), Some(map), true) = (rung, w.doorbell.map.clone(), drv.dev.cfg.doorbell_watch)
    else {
        return Turn::Idle(None);
    };
    if wptr.is_none() {
        *wptr = drv.wptr_window(tgid, w.gpu_id, w.wptr_va);
    }
    // Nothing ran: what the queue consumed is what the turn started from.
    Turn::Idle(Some(Bell {
        doorbell: (map, w.doorbell.at, w.doorbell.size),
        rung: Some(rung),
        wptr: wptr.clone(),
        wptr_seen: wptr_seen.unwrap_or(w.consumed),
        consumed: w.consumed,
        aql: w.engine == Engine::Compute { aql: true },
    }))
}

/// What the engine needs of queue `id` of process `tgid`, copied out of the state: `Ok(None)`
/// when the queue cannot run now, `Err` when it is gone (or its id is another queue's now).
fn work(drv: &Driver, tgid: i32, id: u32, runner: &Arc<Runner>) -> Result<Option<Work>, ()> {
    let st = drv.lock();
    let p = st.procs.get(&tgid).ok_or(())?;
    let q = p
        .queues
        .by_id
        .get(&id)
        .filter(|q| Arc::ptr_eq(&q.runner, runner))
        .ok_or(())?;
    if q.stopped.is_some() || !q.is_active() || !runner.runnable() {
        return Ok(None);
    }
    let gpu = &drv.dev.cfg.machine.gpus()[q.gpu];
    let doorbell_size = if gpu.layout == ApertureLayout::Vi {
        4
    } else {
        8
    };
    Ok(Some(Work {
        tgid,
        id,
        gpu: q.gpu,
        gpu_id: gpu.gpu_id,
        ring_va: q.ring_va,
        ring_size: q.ring_size,
        rptr_va: q.rptr_va,
        wptr_va: q.wptr_va,
        consumed: q.consumed,
        engine: q.engine,
        doorbell: Doorbell {
            map: p.doorbells.clone(),
            memfd: p.memfd.clone(),
            at: Process::doorbell_offset(q.gpu) + q.doorbell,
            size: doorbell_size,
        },
        runner: Arc::clone(runner),
        budget: std::cell::Cell::new(TURN_BYTES),
        packet_at: std::cell::Cell::new(q.consumed),
        resume: std::cell::Cell::new(None),
        interrupt: std::cell::Cell::new(None),
    }))
}
