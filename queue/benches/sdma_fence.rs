//! The emulated engines against their baselines, all on one attached thread (an emulated
//! MI100), the ratios printed at the end.
//!
//! `submit_to_completion`: latency of one submission until its completion is seen.
//! `emulated_ioctl`: GET_VERSION on the emulated `/dev/kfd` (seccomp notification →
//! supervisor → model → answer), the baseline. `sdma_fence`: one submission of an empty
//! command list on an SDMA queue (its fence, the mailbox fence and the TRAP), the doorbell
//! rung, and `SdmaQueue::wait` until the fence landed (WAIT_EVENTS kicks the queue's engine
//! thread and waits on the trap event). `aql_barrier`: a barrier-AND without dependencies on
//! an AQL queue and `Signal::wait_zero` on its completion signal. `pm4_release_mem`: one
//! submission of an empty command list on a PM4 compute queue (its RELEASE_MEM of the
//! sequence number and the one that raises the queue's event) and `Pm4Queue::wait` until
//! the sequence number landed.
//!
//! `copy_linear`: throughput of the emulated copy engine. `emulated_64MiB`: one
//! `Command::Copy` of 64 MiB between two GTT BOs (COPY_LINEAR packets of at most 4 MiB) and
//! its completion; `memcpy_64MiB`: a CPU copy of the same number of bytes between two
//! buffers of this process. The ratio says what fraction of memcpy speed the engine reaches.

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_queue::{AqlQueue, Command, Pm4Queue, QueueContext, SdmaEngine, SdmaQueue, Signal};

#[derive(Clone, Copy)]
enum Op {
    Ioctl,
    Fence,
    Barrier,
    Release,
    /// [`COPY_BYTES`] through the SDMA engine.
    Copy,
    /// [`COPY_BYTES`] by the CPU.
    Memcpy,
}

/// The bytes of one timed copy.
const COPY_BYTES: u64 = 64 << 20;

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
                let mut pm4 = Pm4Queue::new(&context, gpu_id, 64 << 10).expect("PM4 queue");
                // Two GTT BOs for the copies, at addresses reserved in this process.
                let reserved = reserve(2 * COPY_BYTES);
                let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
                let bos: Vec<_> = (0..2)
                    .map(|i| {
                        let va = reserved + i * COPY_BYTES;
                        let bo = kfd
                            .alloc_memory_of_gpu(gpu_id, va, COPY_BYTES, flags)
                            .expect("GTT BO");
                        kfd.map_memory_to_gpu(&bo, &[gpu_id]).expect("map");
                        bo
                    })
                    .collect();
                let (src, dst) = (bos[0].va(), bos[1].va());
                let cpu_src = vec![0x5Au8; COPY_BYTES as usize];
                let mut cpu_dst = vec![0u8; COPY_BYTES as usize];
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
                            Op::Release => {
                                let done = pm4.submit(&[]).expect("submit");
                                pm4.wait(done, Duration::from_secs(10)).expect("completion");
                            }
                            Op::Copy => {
                                let copy = Command::Copy {
                                    dst,
                                    src,
                                    bytes: COPY_BYTES,
                                };
                                let c = queue.submit(&[copy]).expect("submit");
                                queue.wait(c, Duration::from_secs(60)).expect("completion");
                            }
                            Op::Memcpy => {
                                cpu_dst.copy_from_slice(black_box(&cpu_src));
                                black_box(&mut cpu_dst);
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

/// `len` bytes of this process's address space, reserved (no access) for GPU addresses that
/// nothing else takes; never released (the bench's process ends with it).
fn reserve(len: u64) -> u64 {
    // SAFETY: a fresh private anonymous mapping with no access: it aliases nothing.
    let at = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len as usize,
            rustix::mm::ProtFlags::empty(),
            rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
        )
    }
    .expect("reserve addresses");
    at as u64
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
    group.bench_function("pm4_release_mem", |b| {
        b.iter_custom(|n| attached.time(Op::Release, n))
    });
    group.finish();
    let mut group = c.benchmark_group("copy_linear");
    group.throughput(criterion::Throughput::Bytes(COPY_BYTES));
    group.sample_size(10);
    group.bench_function("emulated_64MiB", |b| {
        b.iter_custom(|n| attached.time(Op::Copy, n))
    });
    group.bench_function("memcpy_64MiB", |b| {
        b.iter_custom(|n| attached.time(Op::Memcpy, n))
    });
    group.finish();
    drop(attached);
    ratio::report("copy_linear", "emulated_64MiB", "memcpy_64MiB", None);
    ratio::report("submit_to_completion", "sdma_fence", "emulated_ioctl", None);
    ratio::report(
        "submit_to_completion",
        "aql_barrier",
        "emulated_ioctl",
        None,
    );
    ratio::report(
        "submit_to_completion",
        "pm4_release_mem",
        "emulated_ioctl",
        None,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
