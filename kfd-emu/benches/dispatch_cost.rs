//! What the model's AQL packet processor pays per empty kernel dispatch (rocrtst's
//! `AQL_Dispatch_Time_*` and `ENQUEUE_LATENCY` kernels: one work-item, `s_endpgm`), against
//! two baselines in the same run: a BARRIER_AND packet with no dependency (the packet
//! processor's own floor: read, consume, signal) and one ioctl round trip through the model
//! (`GET_VERSION`).
//!
//! Each iteration fills the ring with `BATCH` packets (the queue, signals, descriptor and code
//! in one GTT BO, as `tests/model_support/aql.rs` lays them out), publishes them, kicks the
//! engine (a WAIT_EVENTS with no wait, as a program's next ioctl does) and waits, reading the
//! completion signal in its own mapping, until the engine consumed them all. Numbers:
//! `docs/conformance.md` ("A dispatch's fixed cost").

#[path = "../tests/model_support/mod.rs"]
mod model_support;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kfd_ioctl::abi::*;
use model_support::aql::*;

/// Packets per iteration: all but one slot of the 64-slot ring.
const BATCH: u64 = 63;

/// The ring's producer: the next packet index.
struct Producer {
    q: Queue,
    next: u64,
}

impl Producer {
    /// Runs `BATCH` copies of `packet` and waits until they completed.
    fn batch(&mut self, packet: [u8; 64]) {
        self.q.put_u64(COMPLETION + SIGNAL_VALUE, BATCH);
        for i in 0..BATCH {
            self.q.place(self.next + i, packet);
        }
        self.next += BATCH;
        self.q.put_u64(WPTR, self.next);
        self.q.run_engines_once();
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.q.u64_at(COMPLETION + SIGNAL_VALUE) != 0 {
            assert!(Instant::now() < deadline, "the packets never completed");
            std::thread::yield_now();
        }
        assert_eq!(self.q.u64_at(RPTR), self.next, "every packet consumed");
    }
}

/// A BARRIER_AND with no dependency, completion signal at COMPLETION.
fn barrier() -> [u8; 64] {
    let mut p = [0u8; 64];
    let header = u16::from(BARRIER_AND) | 2 << 9 | 2 << 11;
    p[..2].copy_from_slice(&header.to_le_bytes());
    let signal = model_support::va(2) + COMPLETION as u64;
    p[56..64].copy_from_slice(&signal.to_le_bytes());
    p
}

fn bench(c: &mut Criterion) {
    let Some((text, kd)) = assemble("gfx90a", "s_endpgm") else {
        return;
    };
    let mut q = Queue::create(Setup {
        gpu_threads: 1,
        ..Setup::aql("mi210x8")
    });
    q.load(&text, &kd);
    let mut p = Producer { q, next: 0 };
    let dispatch = Queue::dispatch_packet([1, 1, 1], [1, 1, 1]);
    // The first dispatch maps and decodes; the iterations measure what follows.
    p.batch(dispatch);

    let mut g = c.benchmark_group("dispatch_cost");
    g.measurement_time(Duration::from_secs(10)).sample_size(20);
    g.bench_function("ioctl_get_version", |b| {
        b.iter(|| {
            let mut a = kfd_ioctl_get_version_args::default();
            p.q.emu
                .ioctl(AMDKFD_IOC_GET_VERSION, &mut a)
                .expect("GET_VERSION");
        })
    });
    g.bench_function("barrier_x63", |b| b.iter(|| p.batch(barrier())));
    g.bench_function("empty_dispatch_x63", |b| b.iter(|| p.batch(dispatch)));
    g.finish();
    let per = |bench: &str| ratio::mean_ns("dispatch_cost", bench).map(|ns| ns / 1000.0);
    if let (Some(d), Some(b), Some(i)) = (
        per("empty_dispatch_x63"),
        per("barrier_x63"),
        per("ioctl_get_version"),
    ) {
        let (d, b) = (d / BATCH as f64, b / BATCH as f64);
        println!(
            "dispatch_cost: {d:.2} µs per empty dispatch, {b:.2} µs per barrier packet \
             ({:.2}×), {i:.2} µs per ioctl ({:.2}×)",
            d / b,
            d / i
        );
    }
    ratio::report("dispatch_cost", "empty_dispatch_x63", "barrier_x63", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
