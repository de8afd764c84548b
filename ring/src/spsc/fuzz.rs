//! The SPSC ring against a hostile peer: between the producer's and the consumer's
//! operations, a "peer" writes random values into the shared positions and record headers.
//! Whatever it writes, every operation returns `Ok` or a typed error — never a panic — and
//! every record handed out lies inside `[base, base + 2 × capacity)`.
//!
//! Fixed seeds, a quick run by default (CI); `KFD_FUZZ_ITERS=<n>` runs `n` operations per
//! seed instead. [`cores_under_a_hostile_peer`] runs the protocol's cores over heap memory,
//! so Miri checks every access they make:
//! `cargo +nightly miri test -p kfd-ring --lib fuzz::cores`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use kfd_skip::Rng;
use vm_memory::Bytes;

use super::tests::with_heap_cores;
use super::*;
use crate::HostMirror;

/// The seeds every run covers.
const SEEDS: [u64; 4] = [1, 0x9e37_79b9_7f4a_7c15, 0xdead_beef, 42];

/// Operations per seed: `KFD_FUZZ_ITERS`, else `default` (smaller under Miri).
fn iterations(default: u64) -> u64 {
    let default = if cfg!(miri) { 300 } else { default };
    std::env::var("KFD_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a hostile peer writes, drawn from the shared generator.
trait Hostile {
    /// A hostile 64-bit position near `around`: anything, a few records off, a capacity or
    /// more off, misaligned, or at the ends of the range.
    fn position(&mut self, around: u64, cap: u64) -> u64;

    /// A hostile record header word: garbage, or a well-formed header of any length.
    fn record_word(&mut self, cap: u64) -> u64;
}

impl Hostile for Rng {
    fn position(&mut self, around: u64, cap: u64) -> u64 {
        match self.below(6) {
            0 => self.next(),
            1 => {
                around
                    .wrapping_add(self.below(4 * cap))
                    .wrapping_sub(2 * cap)
                    & !7
            }
            2 => around.wrapping_add(cap + 8 * self.below(4)),
            3 => around.wrapping_add(1 + self.below(7)),
            4 => [0, u64::MAX, u64::MAX - 7, 1 << 63][self.below(4) as usize],
            _ => around,
        }
    }

    fn record_word(&mut self, cap: u64) -> u64 {
        let n = match self.below(3) {
            0 => self.next() as u32,
            1 => self.below(2 * cap) as u32,
            _ => u32::MAX - self.below(16) as u32,
        };
        if self.below(4) == 0 {
            self.next()
        } else {
            u64::from(n) | (u64::from(!n) << 32)
        }
    }
}

/// Prints the rate of a fuzz run (shown with `--nocapture`).
fn report(what: &str, ops: u64, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "{what}: {ops} operations in {secs:.3} s ({:.0} per second)",
        ops as f64 / secs.max(1e-9)
    );
}

/// Checks that `[at, at + n)` lies in `[base, base + 2 × cap)`.
fn assert_inside(at: usize, n: usize, base: usize, cap: usize, what: &str) {
    assert!(
        at >= base && at.checked_add(n).is_some_and(|end| end <= base + 2 * cap),
        "{what}: {n} bytes at base{:+} outside [base, base + 2 × {cap})",
        at as isize - base as isize
    );
}

#[test]
fn cores_under_a_hostile_peer() {
    const CAP: usize = 256;
    let iters = iterations(200_000);
    let started = Instant::now();
    for seed in SEEDS {
        let mut rng = Rng(seed);
        // Miri flags any access the cores make outside the heap buffer.
        with_heap_cores(CAP, |producer, consumer, head, tail, base| {
            for op in 0..iters {
                let what = format!("seed {seed:#x} op {op}");
                match rng.below(10) {
                    0..=2 => {
                        let n = rng.below(CAP as u64 + 16) as usize;
                        // SAFETY: `base` is the middle of three capacities of memory; `tail` is
                        // the ring's consumer position.
                        match unsafe { producer.reserve(tail, base, n) } {
                            Ok(at) => {
                                assert_inside(at as usize, n, base as usize, CAP, &what);
                                // SAFETY: inside the buffer (checked above).
                                unsafe { at.write_bytes(op as u8, n) };
                            }
                            Err(ReserveError::Full | ReserveError::Corrupt(_)) => {}
                            Err(ReserveError::TooLarge { len, max }) => {
                                assert!(len > max && max == CAP - RECORD_HEADER, "{what}")
                            }
                        }
                    }
                    3 => {
                        let len = (rng.below(2) == 0).then(|| rng.below(CAP as u64) as usize);
                        // SAFETY: as above, with `head` the producer position.
                        unsafe { producer.commit(head, base, len) };
                    }
                    4..=6 => {
                        // SAFETY: as above.
                        if let Ok(Some((at, n))) = unsafe { consumer.peek(head, base) } {
                            assert_inside(at as usize, n, base as usize, CAP, &what);
                            // SAFETY: inside the buffer (checked above).
                            let bytes = unsafe { std::slice::from_raw_parts(at, n) };
                            std::hint::black_box(bytes.iter().map(|&b| u64::from(b)).sum::<u64>());
                        }
                    }
                    7 => {
                        consumer.release(tail);
                    }
                    8 => {
                        let (counter, own) = if rng.below(2) == 0 {
                            (head, producer.head)
                        } else {
                            (tail, consumer.tail)
                        };
                        counter.store(rng.position(own, CAP as u64), Ordering::Relaxed);
                    }
                    _ => {
                        let at = rng.below(CAP as u64 / 8) as usize;
                        let word = rng.record_word(CAP as u64).to_le();
                        // SAFETY: an aligned word of the base view, inside the buffer.
                        unsafe { base.cast::<u64>().add(at).write(word) };
                    }
                }
            }
        });
    }
    report(
        "cores under a hostile peer",
        iters * SEEDS.len() as u64,
        started,
    );
}

/// The public API over a real mirror, with the peer writing through a second mapping of the
/// same memfd (as another process would).
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn rings_under_a_hostile_peer_mapping() {
    let iters = iterations(50_000);
    let started = Instant::now();
    for seed in SEEDS {
        let mut rng = Rng(seed);
        let mirror = HostMirror::new(4096).unwrap();
        let cap = mirror.capacity();
        let base = mirror.base().as_ptr() as usize;
        let fd = mirror.memfd().try_clone_to_owned().unwrap();
        let peer = HostMirror::from_memfd(fd, crate::Granule::Page).unwrap();
        let (peer_control, _) = peer.control().unwrap();
        // SAFETY: the control area is mapped, 128-byte aligned and at least a header long
        // while `peer` lives; it holds only atomics.
        let peer_header = unsafe { peer_control.cast::<Header>().as_ref() };
        let (mut tx, mut rx) = SpscRing::new(mirror).unwrap().split().unwrap();
        let mut out = Vec::<u8>::new();
        for op in 0..iters {
            let what = format!("seed {seed:#x} op {op}");
            match rng.below(10) {
                0..=2 => {
                    let n = rng.below(cap as u64 + 16) as usize;
                    match tx.reserve(n) {
                        Ok(slot) => {
                            assert_eq!(slot.len(), n, "{what}");
                            let at = slot.ptr_guard().as_ptr() as usize;
                            assert_inside(at, n, base, cap, &what);
                            slot.write_slice(&vec![op as u8; n], 0).unwrap();
                        }
                        Err(ReserveError::Full | ReserveError::Corrupt(_)) => {}
                        Err(e @ ReserveError::TooLarge { .. }) => {
                            assert!(n > tx.max_record(), "{what}: {e}")
                        }
                    }
                }
                3 => {
                    tx.commit();
                }
                4..=6 => {
                    // `Ok(None)` and a `RingCorrupt` are both fine answers.
                    if let Ok(Some(record)) = rx.peek() {
                        let at = record.ptr_guard().as_ptr() as usize;
                        assert_inside(at, record.len(), base, cap, &what);
                        out.resize(record.len(), 0);
                        assert_eq!(record.copy_to(&mut out), record.len(), "{what}");
                    }
                }
                7 => {
                    rx.release();
                }
                8 => {
                    let (counter, own) = if rng.below(2) == 0 {
                        (&peer_header.head.0, tx.core.head)
                    } else {
                        (&peer_header.tail.0, rx.core.tail)
                    };
                    counter.store(rng.position(own, cap as u64), Ordering::Relaxed);
                }
                _ => {
                    let at = 8 * rng.below(cap as u64 / 8) as isize;
                    let word = rng.record_word(cap as u64);
                    peer.write(at, &word.to_le_bytes()).unwrap();
                }
            }
        }
    }
    report(
        "rings under a hostile peer mapping",
        iters * SEEDS.len() as u64,
        started,
    );
}
