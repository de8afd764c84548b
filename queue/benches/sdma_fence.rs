//! Submit-to-completion latency of an SDMA fence and of an AQL barrier against the emulator's
//! raw ioctl round trip.
//!
//! `emulated_ioctl`: GET_VERSION on the emulated `/dev/kfd` (seccomp notification →
//! supervisor → model → answer), the baseline. `sdma_fence`: one submission of an empty
//! command list on an SDMA queue (its fence, the mailbox fence and the TRAP), the doorbell
//! rung, and `SdmaQueue::wait` until the fence landed — WAIT_EVENTS runs the engines before
//! it waits. `aql_barrier`: a barrier-AND without dependencies on an AQL queue and
//! `Signal::wait_zero` on its completion signal. All run on the same attached thread (an
//! emulated MI100); the ratios are printed at the end.

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use kfd_ioctl::topology::Topology;
use kfd_queue::{AqlQueue, QueueContext, SdmaEngine, SdmaQueue, Signal};

#[derive(Clone, Copy)]
enum Op {
    Ioctl,
    Fence,
    Barrier,
}

/// A thread attached to the model that times `n` operations on request.
struct Attached {
    requests: Option<mpsc::Sender<(Op, u64)>>,
    results: mpsc::Receiver<Duration>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Attached {
    fn start() -> Attached {
        let (requests, rx) = mpsc::channel::<(Op, u64)>();
        let (tx, results) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let model = Model::new(ModelConfig {
                machine: kfd_emu::machine::Machine::preset("mi100").expect("preset"),
                ..ModelConfig::default()
            })
            .expect("model");
            kfd_emu::supervisor::run_attached(model, move || {
                let kfd = Kfd::open().expect("the emulated /dev/kfd");
                let topology = Topology::read().expect("topology");
                let gpu = topology.gpus().next().expect("a GPU").clone();
                let gpu_id = gpu.gpu_id().expect("gpu_id");
                kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)
                    .expect("acquire_vm");
                let context = QueueContext::new(&kfd, &topology).expect("context");
                let mut queue =
                    SdmaQueue::new(&context, gpu_id, SdmaEngine::Pcie, 64 << 10).expect("queue");
                let mut aql = AqlQueue::new(&context, gpu_id, 256).expect("AQL queue");
                let done = Signal::new(&context, gpu_id, 0).expect("signal");
                for (op, n) in rx {
                    let start = Instant::now();
                    for _ in 0..n {
                        match op {
                            Op::Ioctl => {
                                black_box(kfd.get_version().expect("GET_VERSION"));
                            }
                            Op::Fence => {
                                let done = queue.submit(&[]).expect("submit");
                                queue
                                    .wait(done, Duration::from_secs(10))
                                    .expect("completion");
                            }
                            Op::Barrier => {
                                done.store(1).expect("store");
                                aql.barrier_and(&[], Some(&done)).expect("submit");
                                done.wait_zero(Duration::from_secs(10)).expect("completion");
                            }
                        }
                    }
                    if tx.send(start.elapsed()).is_err() {
                        break;
                    }
                }
            })
            .expect("attach");
        });
        Attached {
            requests: Some(requests),
            results,
            thread: Some(thread),
        }
    }

    fn time(&self, op: Op, n: u64) -> Duration {
        let requests = self.requests.as_ref().expect("running");
        requests.send((op, n)).expect("attached thread alive");
        self.results.recv().expect("attached thread answers")
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn bench(c: &mut Criterion) {
    let attached = Attached::start();
    let mut group = c.benchmark_group("submit_to_completion");
    group.bench_function("emulated_ioctl", |b| {
        b.iter_custom(|n| attached.time(Op::Ioctl, n))
    });
    group.bench_function("sdma_fence", |b| {
        b.iter_custom(|n| attached.time(Op::Fence, n))
    });
    group.bench_function("aql_barrier", |b| {
        b.iter_custom(|n| attached.time(Op::Barrier, n))
    });
    group.finish();
    drop(attached);
    ratio::report("submit_to_completion", "sdma_fence", "emulated_ioctl", None);
    ratio::report(
        "submit_to_completion",
        "aql_barrier",
        "emulated_ioctl",
        None,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
