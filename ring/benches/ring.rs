//! Mirrored-ring benchmarks, each against its baseline in the same run.
//!
//! * `ring_wrap_copy`: a copy of n bytes that straddles the wrap point of a [`HostMirror`]
//!   (one `copy_from_slice` thanks to the mirror) vs one contiguous `copy_from_slice` of n
//!   bytes into ordinary memory. Target ≤ 1.05×.
//! * `ring_spsc_wrap`: one ~4 KiB record that crosses the end of a 4 KiB ring, produced (copied
//!   in) and consumed (checksummed as one contiguous slice), per iteration — every record
//!   wraps. Baselines: the `rtrb` and `ringbuf` byte rings through their chunk/slice APIs with
//!   a 4-byte length prefix; a record that comes out in two slices is copied into a scratch
//!   buffer so the consumer gets it contiguous, as ours does. Target: ≥ 1.5× their
//!   throughput (time ratio ≤ 0.667). `kfd_ring` reads the record in place through the
//!   `unsafe` `peek_slice`; `kfd_ring_volatile` copies it out with the safe `pop_into` (a
//!   volatile copy) and checksums the copy.
//! * `ring_spsc_stream`: 4 MiB of random 1–4 KiB records between two threads through 64 KiB
//!   rings (some records wrap, most do not), against the same two crates and a bounded
//!   `crossbeam` channel of `Vec<u8>`. Reported, no target.

use std::hint::black_box;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use kfd_ring::{HostMirror, Mirrored, SpscRing};
use ringbuf::traits::{Consumer as _, Observer as _, Producer as _, Split as _};

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

/// What a consumer does with a record: a checksum over its 8-byte words, which the compiler
/// vectorises, so the record's copy and contiguity dominate the cost.
#[inline(always)]
fn checksum(record: &[u8]) -> u64 {
    let words = record.chunks_exact(8);
    let tail = words.remainder().iter().map(|&b| u64::from(b)).sum::<u64>();
    words
        .map(|w| {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            u64::from_le_bytes(word)
        })
        .fold(tail, u64::wrapping_add)
}

fn wrap_copy(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring_wrap_copy");
    group.warm_up_time(Duration::from_millis(500));
    let ring = HostMirror::new(1 << 20).unwrap();
    let cap = ring.capacity();
    // The baseline writes at the same offset from a page boundary as the mirror case (the
    // ring's base is page aligned), so the two differ only in crossing from one view into the
    // next, not in the destination's alignment.
    let mut plain = vec![0u8; 2 * cap + 4096];
    let pad = (4096 - plain.as_ptr() as usize % 4096) % 4096;
    for n in [256usize, 4096, 65536] {
        let src: Vec<u8> = (0..n).map(|i| i as u8).collect();
        group.throughput(Throughput::Bytes(n as u64));
        let at = cap - n / 2;
        // SAFETY: `[base + at, base + at + n)` lies in the base and next views (n ≤ cap), which
        // the ring maps for its whole life, and nothing else touches them during the bench.
        let dst = unsafe { std::slice::from_raw_parts_mut(ring.base().as_ptr().add(at), n) };
        group.bench_function(BenchmarkId::new("mirror_straddling", n), |b| {
            b.iter(|| dst.copy_from_slice(black_box(&src)))
        });
        let volatile = ring.volatile(at as isize, n).unwrap();
        group.bench_function(BenchmarkId::new("mirror_straddling_volatile", n), |b| {
            b.iter(|| volatile.copy_from(black_box(&src)))
        });
        group.bench_function(BenchmarkId::new("copy_from_slice", n), |b| {
            b.iter(|| plain[pad + at..pad + at + n].copy_from_slice(black_box(&src)))
        });
    }
    group.finish();
}

/// The checksum of the oldest record of a kfd-ring, read in place as a plain slice (the
/// `unsafe` fast path), then released.
#[inline(always)]
fn pop_slice_checksum(rx: &mut kfd_ring::Consumer<HostMirror>) -> Option<u64> {
    // SAFETY: the bench's producer and consumer are the ring's only users (no other mapping
    // of its memfd exists) and follow its protocol.
    let sum = unsafe { rx.peek_slice() }.unwrap().map(checksum);
    rx.release();
    sum
}

/// Copies `src` into the two slices of a ring chunk, in order.
#[inline(always)]
fn fill_split(first: &mut [MaybeUninit<u8>], second: &mut [MaybeUninit<u8>], src: &[u8]) {
    let k = first.len().min(src.len());
    first[..k].write_copy_of_slice(&src[..k]);
    second[..src.len() - k].write_copy_of_slice(&src[k..]);
}

/// One record through rtrb: a 4-byte length, then the payload, each through a write chunk.
#[inline(always)]
fn rtrb_push(tx: &mut rtrb::Producer<u8>, payload: &[u8]) -> bool {
    let Ok(mut chunk) = tx.write_chunk_uninit(4 + payload.len()) else {
        return false;
    };
    let (a, b) = chunk.as_mut_slices();
    let len = (payload.len() as u32).to_le_bytes();
    let k = a.len().min(4);
    a[..k].write_copy_of_slice(&len[..k]);
    b[..4 - k].write_copy_of_slice(&len[k..]);
    fill_split(&mut a[k..], &mut b[4 - k..], payload);
    // SAFETY: all 4 + payload.len() slots were written above.
    unsafe { chunk.commit_all() };
    true
}

/// One record out of rtrb, contiguous (through `scratch` when it comes in two slices).
#[inline(always)]
fn rtrb_pop(rx: &mut rtrb::Consumer<u8>, scratch: &mut Vec<u8>) -> Option<u64> {
    let len = {
        let chunk = rx.read_chunk(4).ok()?;
        let (a, b) = chunk.as_slices();
        let mut len = [0u8; 4];
        len[..a.len().min(4)].copy_from_slice(&a[..a.len().min(4)]);
        len[a.len().min(4)..].copy_from_slice(&b[..4 - a.len().min(4)]);
        u32::from_le_bytes(len) as usize
    };
    let chunk = rx.read_chunk(4 + len).ok()?;
    let (a, b) = chunk.as_slices();
    let sum = if b.is_empty() {
        checksum(&a[4..])
    } else {
        scratch.clear();
        scratch.extend_from_slice(a);
        scratch.extend_from_slice(b);
        checksum(&scratch[4..])
    };
    chunk.commit_all();
    Some(sum)
}

/// One record through ringbuf: the length, then the payload, with `push_slice`.
#[inline(always)]
fn ringbuf_push(tx: &mut ringbuf::HeapProd<u8>, payload: &[u8]) -> bool {
    if tx.vacant_len() < 4 + payload.len() {
        return false;
    }
    tx.push_slice(&(payload.len() as u32).to_le_bytes());
    tx.push_slice(payload);
    true
}

/// One record out of ringbuf, contiguous (through `scratch` when it comes in two slices).
#[inline(always)]
fn ringbuf_pop(rx: &mut ringbuf::HeapCons<u8>, scratch: &mut Vec<u8>) -> Option<u64> {
    if rx.occupied_len() < 4 {
        return None;
    }
    let (a, b) = rx.as_slices();
    let mut len = [0u8; 4];
    let k = a.len().min(4);
    len[..k].copy_from_slice(&a[..k]);
    len[k..].copy_from_slice(&b[..4 - k]);
    let len = u32::from_le_bytes(len) as usize;
    if rx.occupied_len() < 4 + len {
        return None;
    }
    // The length check may have seen more data: take the slices again.
    let (a, b) = rx.as_slices();
    let sum = if a.len() >= 4 + len {
        checksum(&a[4..4 + len])
    } else {
        scratch.clear();
        scratch.extend_from_slice(&a[k..]);
        scratch.extend_from_slice(&b[4 - k..4 + len - a.len()]);
        checksum(scratch)
    };
    rx.skip(4 + len);
    Some(sum)
}

fn spsc_wrap(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring_spsc_wrap");
    group.warm_up_time(Duration::from_millis(500));
    // A 4 KiB ring and a record of nearly 4 KiB: each record starts a few bytes before the
    // previous one did, so (almost) every record crosses the end of the buffer, in every
    // implementation.
    const CAP: usize = 4096;
    const PAYLOAD: usize = 4080;
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 13) as u8).collect();
    group.throughput(Throughput::Bytes(PAYLOAD as u64));

    let (mut tx, mut rx) = SpscRing::new(HostMirror::new(CAP).unwrap())
        .unwrap()
        .split()
        .unwrap();
    assert_eq!(tx.max_record() + kfd_ring::RECORD_HEADER, CAP);
    group.bench_function("kfd_ring", |b| {
        b.iter(|| {
            tx.push(black_box(&payload)).unwrap();
            black_box(pop_slice_checksum(&mut rx))
        })
    });
    let mut scratch = Vec::with_capacity(CAP);
    group.bench_function("kfd_ring_volatile", |b| {
        b.iter(|| {
            tx.push(black_box(&payload)).unwrap();
            assert!(rx.pop_into(&mut scratch).unwrap());
            black_box(checksum(&scratch))
        })
    });

    let (mut tx, mut rx) = rtrb::RingBuffer::<u8>::new(CAP);
    group.bench_function("rtrb_chunks", |b| {
        b.iter(|| {
            assert!(rtrb_push(&mut tx, black_box(&payload)));
            black_box(rtrb_pop(&mut rx, &mut scratch))
        })
    });

    let (mut tx, mut rx) = ringbuf::HeapRb::<u8>::new(CAP).split();
    group.bench_function("ringbuf_slices", |b| {
        b.iter(|| {
            assert!(ringbuf_push(&mut tx, black_box(&payload)));
            black_box(ringbuf_pop(&mut rx, &mut scratch))
        })
    });
    group.finish();
}

/// The record sizes of the stream bench: 1 B – 4 KiB, fixed pseudo-random sequence.
fn stream_sizes(total: usize) -> Vec<usize> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut sizes = Vec::new();
    let mut sum = 0;
    while sum < total {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = 1024 + (x % 3073) as usize;
        sizes.push(n);
        sum += n;
    }
    sizes
}

/// Runs `produce` and `consume` on two threads, `iters` times, and returns the total time.
fn two_threads(
    iters: u64,
    mut produce: impl FnMut() + Send,
    mut consume: impl FnMut() + Send,
) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        std::thread::scope(|s| {
            s.spawn(&mut produce);
            consume();
        });
    }
    start.elapsed()
}

/// Streams records of `sizes` bytes, cut from `source`, through a ring on two threads, `iters`
/// times, and returns the total time: `push` offers one record (false: full, retried) and
/// `pop` takes one and returns its checksum (`None`: empty, retried).
fn stream(
    iters: u64,
    sizes: &[usize],
    source: &[u8],
    mut push: impl FnMut(&[u8]) -> bool + Send,
    mut pop: impl FnMut() -> Option<u64> + Send,
) -> Duration {
    two_threads(
        iters,
        || {
            for (i, &n) in sizes.iter().enumerate() {
                let from = i % 64;
                while !push(&source[from..from + n]) {
                    std::thread::yield_now();
                }
            }
        },
        || {
            let mut sum = 0u64;
            for _ in sizes {
                loop {
                    if let Some(s) = pop() {
                        sum = sum.wrapping_add(s);
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            black_box(sum);
        },
    )
}

fn spsc_stream(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring_spsc_stream");
    group.warm_up_time(Duration::from_millis(500));
    group.sample_size(20);
    const CAP: usize = 64 << 10;
    let sizes = stream_sizes(4 << 20);
    let total: usize = sizes.iter().sum();
    let source: Vec<u8> = (0..4096 + 64).map(|i| (i * 7) as u8).collect();
    group.throughput(Throughput::Bytes(total as u64));

    let (mut tx, mut rx) = SpscRing::new(HostMirror::new(CAP).unwrap())
        .unwrap()
        .split()
        .unwrap();
    group.bench_function("kfd_ring", |b| {
        b.iter_custom(|iters| {
            stream(
                iters,
                &sizes,
                &source,
                |p| tx.push(p).is_ok(),
                || pop_slice_checksum(&mut rx),
            )
        })
    });

    let (mut tx, mut rx) = rtrb::RingBuffer::<u8>::new(CAP);
    let mut scratch = Vec::with_capacity(8192);
    group.bench_function("rtrb_chunks", |b| {
        b.iter_custom(|iters| {
            stream(
                iters,
                &sizes,
                &source,
                |p| rtrb_push(&mut tx, p),
                || rtrb_pop(&mut rx, &mut scratch),
            )
        })
    });

    let (mut tx, mut rx) = ringbuf::HeapRb::<u8>::new(CAP).split();
    group.bench_function("ringbuf_slices", |b| {
        b.iter_custom(|iters| {
            stream(
                iters,
                &sizes,
                &source,
                |p| ringbuf_push(&mut tx, p),
                || ringbuf_pop(&mut rx, &mut scratch),
            )
        })
    });

    // About as many records in flight as fit the 64 KiB rings.
    let (ctx, crx) = crossbeam_channel::bounded::<Vec<u8>>(CAP / 2560);
    group.bench_function("crossbeam_vec", |b| {
        b.iter_custom(|iters| {
            two_threads(
                iters,
                || {
                    for (i, &n) in sizes.iter().enumerate() {
                        let from = i % 64;
                        ctx.send(source[from..from + n].to_vec()).unwrap();
                    }
                },
                || {
                    let mut sum = 0u64;
                    for _ in &sizes {
                        sum = sum.wrapping_add(checksum(&crx.recv().unwrap()));
                    }
                    black_box(sum);
                },
            )
        })
    });
    group.finish();
}

criterion_group!(benches, wrap_copy, spsc_wrap, spsc_stream);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    for n in [256, 4096, 65536] {
        ratio::report(
            "ring_wrap_copy",
            &format!("mirror_straddling/{n}"),
            &format!("copy_from_slice/{n}"),
            Some(1.05),
        );
        ratio::report(
            "ring_wrap_copy",
            &format!("mirror_straddling_volatile/{n}"),
            &format!("copy_from_slice/{n}"),
            None,
        );
    }
    // ≥ 1.5× the throughput is ≤ 1/1.5 of the time.
    for baseline in ["rtrb_chunks", "ringbuf_slices"] {
        ratio::report("ring_spsc_wrap", "kfd_ring", baseline, Some(1.0 / 1.5));
        ratio::report("ring_spsc_wrap", "kfd_ring_volatile", baseline, None);
    }
    // What the safe (volatile, copied-out) consumer costs over the in-place one.
    ratio::report("ring_spsc_wrap", "kfd_ring_volatile", "kfd_ring", None);
    for baseline in ["rtrb_chunks", "ringbuf_slices", "crossbeam_vec"] {
        ratio::report("ring_spsc_stream", "kfd_ring", baseline, None);
    }
}
