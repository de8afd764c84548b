//! The GPU engines' scheduling: one thread per GPU that runs the GPU's user queues — SDMA
//! queues on its copy engines ([`sdma`](super::sdma)), AQL queues on its packet processor
//! ([`aql`](super::aql)) — polling with a backoff, woken by a new queue (the kick), and run
//! first by every WAIT_EVENTS so that a waiter sees what they can finish.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::driver::Driver;
use super::engine::Work;
use super::process::Process;
use super::queues::{Engine, Kick};
use super::{aql, sdma};
use crate::machine::ApertureLayout;

/// Slowest idle polling.
const MAX_IDLE: Duration = Duration::from_millis(5);
/// Fastest polling after work.
const MIN_IDLE: Duration = Duration::from_micros(20);
/// How long an engine with no queue sleeps unless kicked (it still notices the model going).
const NO_QUEUES_IDLE: Duration = Duration::from_millis(100);

/// What one round of an engine found.
enum Round {
    /// It ran packets.
    Ran,
    /// It has queues, but found nothing to run.
    Idle,
    /// The GPU has no running SDMA queue.
    NoQueues,
}

/// Starts one engine thread per GPU of the machine; each ends once the driver is dropped.
pub(super) fn start(drv: &Arc<Driver>) {
    for gpu in 0..drv.dev.cfg.machine.gpus().len() {
        let weak: Weak<Driver> = Arc::downgrade(drv);
        let kick = drv.sdma_kick.clone();
        let _ = std::thread::Builder::new()
            .name(format!("kfd-emu-sdma{gpu}"))
            .spawn(move || {
                crate::own::mark();
                engine(weak, &kick, gpu);
            });
    }
}

fn engine(weak: Weak<Driver>, kick: &Kick, gpu: usize) {
    let mut idle = MIN_IDLE;
    loop {
        // A kick that comes while the engine runs makes it look again at once.
        let seen = kick.count();
        let Some(drv) = weak.upgrade() else { return };
        let round = {
            let _pass = drv.sdma_kick.hold_engines();
            run_gpu(&drv, gpu)
        };
        idle = match round {
            Round::Ran => MIN_IDLE,
            Round::Idle => (idle * 2).min(MAX_IDLE),
            // No queue to watch: a new one kicks the engine.
            Round::NoQueues => NO_QUEUES_IDLE,
        };
        // The driver is not kept alive while the engine sleeps.
        drop(drv);
        kick.wait(seen, idle);
    }
}

/// Runs every GPU's engine once on the calling thread (what a waiter does before it waits).
pub(super) fn run_pass(drv: &Driver) {
    let _pass = drv.sdma_kick.hold_engines();
    for gpu in 0..drv.dev.cfg.machine.gpus().len() {
        run_gpu(drv, gpu);
    }
}

/// One round over GPU `gpu`'s user queues.
fn run_gpu(drv: &Driver, gpu: usize) -> Round {
    let gpu_id = drv.dev.cfg.machine.gpus()[gpu].gpu_id;
    let doorbell_size = if drv.dev.cfg.machine.gpus()[gpu].layout == ApertureLayout::Vi {
        4
    } else {
        8
    };
    let work: Vec<Work> = {
        let st = drv.lock();
        st.procs
            .values()
            .flat_map(|p| {
                p.queues.by_id.iter().filter_map(move |(&id, q)| {
                    let runs = matches!(
                        q.engine,
                        Engine::Sdma { .. } | Engine::Compute { aql: true }
                    );
                    (runs && q.gpu == gpu && q.stopped.is_none() && q.ring_size > 0).then_some(
                        Work {
                            tgid: p.tgid,
                            id,
                            gpu,
                            gpu_id,
                            ring_va: q.ring_va,
                            ring_size: q.ring_size,
                            rptr_va: q.rptr_va,
                            wptr_va: q.wptr_va,
                            consumed: q.consumed,
                            aql: matches!(q.engine, Engine::Compute { .. }),
                            doorbell: (
                                p.memfd.clone(),
                                Process::doorbell_offset(gpu) + q.doorbell,
                                doorbell_size,
                            ),
                        },
                    )
                })
            })
            .collect()
    };
    if work.is_empty() {
        return Round::NoQueues;
    }
    let mut ran = false;
    for w in work {
        ran |= if w.aql {
            aql::run_queue(drv, &w)
        } else {
            sdma::run_queue(drv, &w)
        };
    }
    if ran { Round::Ran } else { Round::Idle }
}
