use std::sync::Arc;

use kfd_skip::Rng;
use vm_memory::Bytes;

use super::*;
use crate::HostMirror;

fn ring(min: usize) -> (Producer<HostMirror>, Consumer<HostMirror>) {
    SpscRing::new(HostMirror::new(min).unwrap())
        .unwrap()
        .split()
        .unwrap()
}

/// The oldest record, copied out; it stays in the ring.
fn peek<M: Mirrored>(rx: &mut Consumer<M>) -> Option<Vec<u8>> {
    rx.peek().unwrap().map(|record| {
        let mut out = vec![0; record.len()];
        record.copy_to(&mut out);
        out
    })
}

/// The oldest record, copied out and released.
fn pop<M: Mirrored>(rx: &mut Consumer<M>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    rx.pop_into(&mut out).unwrap().then_some(out)
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn records_come_out_in_order_and_whole() {
    let (mut tx, mut rx) = ring(4096);
    assert_eq!(peek(&mut rx), None);
    assert!(!rx.release(), "nothing to release");
    assert!(!tx.commit(), "nothing to commit");
    tx.push(b"one").unwrap();
    tx.push(b"").unwrap();
    tx.push(&[7; 100]).unwrap();
    assert_eq!(peek(&mut rx).as_deref(), Some(&b"one"[..]));
    assert_eq!(
        peek(&mut rx).as_deref(),
        Some(&b"one"[..]),
        "peek does not consume"
    );
    assert!(rx.release());
    assert_eq!(rx.pop_with(|r| r.len()).unwrap(), Some(0));
    assert_eq!(pop(&mut rx), Some(vec![7; 100]));
    assert_eq!(peek(&mut rx), None);
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn nothing_is_visible_before_commit_and_an_abandoned_reservation_vanishes() {
    let (mut tx, mut rx) = ring(4096);
    tx.reserve(10).unwrap().copy_from(&[1; 10]);
    assert_eq!(peek(&mut rx), None, "reserved, not committed");
    tx.reserve(4).unwrap().copy_from(b"last");
    assert!(tx.commit());
    assert_eq!(pop(&mut rx).as_deref(), Some(&b"last"[..]));
    tx.reserve(10).unwrap().copy_from(b"0123456789");
    assert!(tx.commit_len(3));
    assert_eq!(peek(&mut rx).as_deref(), Some(&b"012"[..]));
}

/// Regression: a failed `reserve` kept the previous reservation, and `commit` published it
/// although the docs say a new `reserve` drops it.
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_commit_after_a_failed_reserve_publishes_nothing() {
    let (mut tx, mut rx) = ring(4096);
    tx.reserve(10).unwrap().copy_from(b"abandoned!");
    let too_large = tx.max_record() + 1;
    assert!(matches!(
        tx.reserve(too_large),
        Err(ReserveError::TooLarge { .. })
    ));
    assert!(!tx.commit(), "the failed reserve dropped the earlier one");
    assert_eq!(peek(&mut rx), None);
    // The same after a reserve that fails because the ring is full.
    tx.push(&vec![0; tx.max_record() - 8]).unwrap();
    tx.reserve(0).unwrap();
    assert_eq!(tx.reserve(8).map(|_| ()), Err(ReserveError::Full));
    assert!(!tx.commit());
    assert_eq!(pop(&mut rx).map(|r| r.len()), Some(tx.max_record() - 8));
    assert_eq!(peek(&mut rx), None, "nothing after the big record");
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn the_ring_fills_up_and_refuses_records_that_can_never_fit() {
    let (mut tx, mut rx) = ring(4096);
    let cap = 4096usize.max(crate::sys::page_size());
    assert_eq!(tx.max_record(), cap - RECORD_HEADER);
    assert_eq!(
        tx.reserve(cap - RECORD_HEADER + 1).map(|_| ()),
        Err(ReserveError::TooLarge {
            len: cap - RECORD_HEADER + 1,
            max: cap - RECORD_HEADER
        })
    );
    // 120 + 8 = 128 bytes per record.
    for _ in 0..cap / 128 {
        tx.push(&[1; 120]).unwrap();
    }
    assert_eq!(tx.push(&[]), Err(ReserveError::Full));
    pop(&mut rx).unwrap();
    tx.push(&[2; 120]).unwrap();
    assert_eq!(tx.push(&[]), Err(ReserveError::Full));
    // A whole-capacity record fits an empty ring, wherever the positions are.
    while pop(&mut rx).is_some() {}
    let big: Vec<u8> = (0..tx.max_record()).map(|i| i as u8).collect();
    tx.push(&big).unwrap();
    assert_eq!(peek(&mut rx), Some(big));
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_record_across_the_end_of_the_buffer_is_one_slice() {
    let (mut tx, mut rx) = ring(4096);
    let cap = tx.shared.mirror.capacity();
    // Move both positions to 40 bytes before the end.
    tx.push(&vec![0; cap - 48]).unwrap();
    pop(&mut rx).unwrap();
    let data: Vec<u8> = (0..200).map(|i| (i * 3) as u8).collect();
    let base = tx.shared.mirror.base().as_ptr() as usize;
    let slot = tx.reserve(200).unwrap();
    let start = slot.ptr_guard().as_ptr() as usize - base;
    assert!(
        start < cap && start + 200 > cap,
        "the payload crosses the end"
    );
    slot.copy_from(&data);
    tx.commit();
    // SAFETY: the two sides of this test are the ring's only users and follow its protocol.
    assert_eq!(unsafe { rx.peek_slice() }.unwrap(), Some(&data[..]));
    // The bytes past the end landed at the start of the buffer.
    let mut head = vec![0u8; start + 200 - cap];
    tx.shared.mirror.read(0, &mut head).unwrap();
    assert_eq!(head[..], data[cap - start..]);
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn roles_are_claimed_once_and_released_on_drop() {
    let mirror = HostMirror::new(4096).unwrap();
    let fd = mirror.memfd().try_clone_to_owned().unwrap();
    let tx = SpscRing::new(mirror).unwrap().into_producer().unwrap();
    let other = HostMirror::from_memfd(fd, crate::Granule::Page).unwrap();
    let again = SpscRing::new(other).unwrap();
    let me = std::process::id();
    assert!(matches!(
        SpscRing {
            shared: Arc::clone(&again.shared)
        }
        .into_producer(),
        Err(Error::RoleTaken { role: "producer", holder }) if holder == me
    ));
    drop(tx);
    let mut tx = again.into_producer().unwrap();
    tx.push(b"x").unwrap();
}

/// Regression: a second ring over another mapping of the same memfd gave out a second
/// producer or consumer, two `&mut` to the same bytes. Now each role is claimed once, and
/// refused to every other ring over the same memory.
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_second_ring_on_the_same_memfd_gets_neither_role_twice() {
    let mirror = HostMirror::new(4096).unwrap();
    let fd = mirror.memfd().try_clone_to_owned().unwrap();
    let (tx, rx) = SpscRing::new(mirror).unwrap().split().unwrap();
    let other = || {
        let fd = fd.try_clone().unwrap();
        SpscRing::new(HostMirror::from_memfd(fd, crate::Granule::Page).unwrap()).unwrap()
    };
    assert!(matches!(
        other().into_producer(),
        Err(Error::RoleTaken {
            role: "producer",
            ..
        })
    ));
    assert!(matches!(
        other().into_consumer(),
        Err(Error::RoleTaken {
            role: "consumer",
            ..
        })
    ));
    assert!(matches!(other().split(), Err(Error::RoleTaken { .. })));
    drop((tx, rx));
    assert!(other().split().is_ok(), "both roles are free again");
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_second_mapping_joins_the_ring_and_sees_its_records() {
    let mirror = HostMirror::new(4096).unwrap();
    let fd = mirror.memfd().try_clone_to_owned().unwrap();
    let mut tx = SpscRing::new(mirror).unwrap().into_producer().unwrap();
    tx.push(b"before").unwrap();
    let mut rx = SpscRing::new(HostMirror::from_memfd(fd, crate::Granule::Page).unwrap())
        .unwrap()
        .into_consumer()
        .unwrap();
    tx.push(b"after").unwrap();
    assert_eq!(pop(&mut rx), Some(b"before".to_vec()));
    assert_eq!(pop(&mut rx), Some(b"after".to_vec()));
}

/// Regression: `reserve` handed out `&mut [u8]` to bytes another mapping of the memfd can
/// write through its safe `write`; a release build then read back the stale value. The
/// reservation is a `VolatileSlice` now, and every read of it goes to memory.
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_write_through_another_mapping_is_seen_through_the_reservation() {
    let mirror = HostMirror::new(4096).unwrap();
    let fd = mirror.memfd().try_clone_to_owned().unwrap();
    let other = HostMirror::from_memfd(fd, crate::Granule::Page).unwrap();
    let (mut tx, _rx) = SpscRing::new(mirror).unwrap().split().unwrap();
    let slot = tx.reserve(8).unwrap();
    slot.store(1u64, 0, Ordering::Relaxed).unwrap();
    let first = slot.load::<u64>(0, Ordering::Relaxed).unwrap();
    // The record's payload is at ring offset 8 (after its header), in both mappings.
    other.write(8, &2u64.to_le_bytes()).unwrap();
    let second = slot.load::<u64>(0, Ordering::Relaxed).unwrap();
    assert_eq!((first, second), (1, 2));
}

#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_corrupt_header_is_reported_not_trusted() {
    let (mut tx, mut rx) = ring(4096);
    tx.push(b"fine").unwrap();
    // A peer scribbles over the record header.
    tx.shared.mirror.write(0, &[0xff; 8]).unwrap();
    let err = rx.peek().unwrap_err();
    assert_eq!(err.position, 0);
    // And a producer position that is not whole records.
    let (_tx, mut rx) = ring(4096);
    rx.shared.header().head.0.store(3, Ordering::Release);
    assert!(rx.peek().is_err());
}

/// Regression: the producer trusted the consumer position in the shared header: a tail
/// ahead of the head overflowed `head - tail` (a panic in debug builds, a wrong free length
/// in release builds).
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_peer_tail_ahead_of_the_head_is_a_typed_error_not_a_panic() {
    let (mut tx, rx) = ring(4096);
    let cap = tx.shared.mirror.capacity() as u64;
    tx.push(&vec![1; tx.max_record()]).unwrap(); // full: the next reserve reads the tail
    let tail = &rx.shared.header().tail.0;
    for hostile in [cap + 8, u64::MAX - 7, 1 << 40] {
        tail.store(hostile, Ordering::Release);
        assert!(
            matches!(tx.reserve(8), Err(ReserveError::Corrupt(_))),
            "tail {hostile:#x}"
        );
    }
    // More than a capacity behind the head.
    let (mut tx2, _rx2) = ring(4096);
    tx2.core.head = 4 * cap;
    tx2.core.tail_cache = 4 * cap;
    assert!(tx2.reserve(8).is_ok());
    tx2.core.tail_cache = 0;
    assert!(matches!(tx2.reserve(8), Err(ReserveError::Corrupt(_))));
    // A good tail makes it work again.
    tail.store(cap, Ordering::Release);
    assert!(tx.reserve(8).is_ok());
}

/// Attaching to a header whose positions are not whole records is refused.
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn attaching_to_misaligned_positions_is_refused() {
    let mirror = HostMirror::new(4096).unwrap();
    let ring = SpscRing::new(mirror).unwrap();
    ring.shared.header().head.0.store(12, Ordering::Release);
    ring.shared.header().tail.0.store(12, Ordering::Release);
    let shared = Arc::clone(&ring.shared);
    assert!(matches!(ring.into_producer(), Err(Error::Corrupt(_))));
    assert!(matches!(
        SpscRing { shared }.into_consumer(),
        Err(Error::Corrupt(_))
    ));
}

/// A 64-bit FNV-1a hash of a record, its checksum.
fn checksum(seq: u64, payload: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seq;
    for chunk in payload.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg_attr(miri, ignore = "maps a memfd")]
/// Over 10^8 bytes of random-size records (1 B – 4 KiB payloads) between two threads through
/// a 64 KiB ring, each carrying its sequence number and a checksum the consumer verifies.
#[test]
fn stress_two_threads_move_1e8_bytes_with_per_record_checksums() {
    const TOTAL: u64 = 100_000_000;
    const SEED: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut tx, mut rx) = ring(64 << 10);
    // Payload bytes come from a random pool, at a varying offset.
    let mut rng = Rng(7);
    let pool: Arc<Vec<u8>> = Arc::new((0..(1 << 20)).map(|_| rng.next() as u8).collect());
    let producer_pool = Arc::clone(&pool);
    let producer = std::thread::spawn(move || {
        let mut sizes = Rng(SEED);
        let (mut sent, mut seq) = (0u64, 0u64);
        while sent < TOTAL {
            let r = sizes.next();
            let n = 1 + (r % 4096) as usize;
            let from = ((r >> 20) % (producer_pool.len() - 4096) as u64) as usize;
            let payload = &producer_pool[from..from + n];
            let slot = loop {
                match tx.reserve(16 + n) {
                    Ok(slot) => break slot,
                    Err(ReserveError::Full) => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            };
            slot.write_slice(&seq.to_le_bytes(), 0).unwrap();
            slot.write_slice(payload, 8).unwrap();
            slot.write_slice(&checksum(seq, payload).to_le_bytes(), 8 + n)
                .unwrap();
            tx.commit();
            sent += (16 + n) as u64;
            seq += 1;
        }
        seq
    });
    let mut sizes = Rng(SEED);
    let (mut received, mut seq) = (0u64, 0u64);
    while received < TOTAL {
        // SAFETY: the two threads of this test are the ring's only users and follow its
        // protocol.
        let Some(record) = (unsafe { rx.peek_slice() }).unwrap() else {
            std::thread::yield_now();
            continue;
        };
        let n = 1 + (sizes.next() % 4096) as usize;
        assert_eq!(record.len(), 16 + n, "record {seq} has the size sent");
        let got_seq = u64::from_le_bytes(record[..8].try_into().unwrap());
        assert_eq!(got_seq, seq, "records arrive in order");
        let payload = &record[8..8 + n];
        let sum = u64::from_le_bytes(record[8 + n..].try_into().unwrap());
        assert_eq!(sum, checksum(seq, payload), "record {seq} is intact");
        received += record.len() as u64;
        rx.release();
        seq += 1;
    }
    assert_eq!(producer.join().unwrap(), seq);
    assert!(received >= TOTAL);
    assert_eq!(peek(&mut rx), None);
}

/// The head/tail protocol under shuttle's schedulers: the producer and consumer cores (the
/// code `Producer` and `Consumer` run) on shuttle atomics, over a real mirrored mapping.
mod model {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::super::{ConsumerCore, Counter, ProducerCore};
    use crate::{HostMirror, Mirrored};

    struct ShuttleCounter(shuttle::sync::atomic::AtomicU64);

    impl Counter for ShuttleCounter {
        fn load(&self, order: Ordering) -> u64 {
            self.0.load(order)
        }
        fn store(&self, value: u64, order: Ordering) {
            self.0.store(value, order)
        }
    }

    struct Ring {
        mirror: HostMirror,
        head: ShuttleCounter,
        tail: ShuttleCounter,
    }

    // SAFETY: shuttle runs its threads one at a time; the mirror is reached through raw
    // pointers under the protocol being checked.
    unsafe impl Send for Ring {}
    // SAFETY: as above.
    unsafe impl Sync for Ring {}

    /// Record `i`'s payload: its length and bytes derived from `i`.
    fn payload(i: usize) -> Vec<u8> {
        let len = [1, 700, 1500, 33, 2000, 8][i % 6];
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    }

    const RECORDS: usize = 8;

    /// One execution: the producer sends `RECORDS` records starting 40 bytes before the end
    /// of a one-page ring (so they wrap), writing each payload in two halves with a yield
    /// between; `publish_early` commits before writing (the bug the check must catch).
    fn run(publish_early: bool) {
        let mirror = HostMirror::new(4096).unwrap();
        let cap = mirror.capacity();
        assert_eq!(cap, 4096, "the model runs on a one-page ring");
        let start = (cap - 40) as u64;
        let ring = Arc::new(Ring {
            mirror,
            head: ShuttleCounter(shuttle::sync::atomic::AtomicU64::new(start)),
            tail: ShuttleCounter(shuttle::sync::atomic::AtomicU64::new(start)),
        });
        let producer_ring = Arc::clone(&ring);
        let producer = shuttle::thread::spawn(move || {
            let r = &producer_ring;
            let base = r.mirror.base().as_ptr();
            let mut core = ProducerCore::new(cap, start, start).unwrap();
            for i in 0..RECORDS {
                let data = payload(i);
                let at = loop {
                    // SAFETY: `base` is the ring's live mirror and `tail` its position.
                    match unsafe { core.reserve(&r.tail, base, data.len()) } {
                        Ok(at) => break at,
                        Err(_) => shuttle::thread::yield_now(),
                    }
                };
                let half = data.len() / 2;
                if publish_early {
                    // SAFETY: as above.
                    unsafe { core.commit(&r.head, base, None) };
                }
                // SAFETY: `at` has room for the reserved payload (at most one capacity,
                // contiguous through the mirror).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), at, half) };
                shuttle::thread::yield_now();
                // SAFETY: as above.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr().add(half),
                        at.add(half),
                        data.len() - half,
                    )
                };
                if !publish_early {
                    // SAFETY: as above.
                    unsafe { core.commit(&r.head, base, None) };
                }
            }
        });
        let base = ring.mirror.base().as_ptr();
        let mut core = ConsumerCore::new(cap, start, start).unwrap();
        for i in 0..RECORDS {
            let want = payload(i);
            let (at, n) = loop {
                // SAFETY: `base` is the ring's live mirror and `head` its position.
                match unsafe { core.peek(&ring.head, base) }.expect("headers are intact") {
                    Some(record) => break record,
                    None => shuttle::thread::yield_now(),
                }
            };
            // SAFETY: a committed record of `n` bytes at `at`, contiguous through the mirror.
            let got = unsafe { std::slice::from_raw_parts(at, n) };
            assert!(got == want, "record {i} arrives whole");
            core.release(&ring.tail);
        }
        producer.join().unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn consumer_never_sees_uncommitted_bytes_under_random_and_pct_schedules() {
        shuttle::check_random(|| run(false), 300);
        shuttle::check_pct(|| run(false), 300, 3);
    }

    /// The check has teeth: publishing before writing is caught.
    #[test]
    #[cfg_attr(miri, ignore = "maps a memfd")]
    fn publishing_before_writing_is_caught() {
        let caught = std::panic::catch_unwind(|| shuttle::check_random(|| run(true), 300));
        assert!(
            caught.is_err(),
            "shuttle found no schedule exposing the early publish"
        );
    }
}

/// A zeroed ring header on the heap, as a fresh control area holds.
fn zeroed_header() -> Box<Header> {
    Box::new(Header {
        meta: Line(Meta {
            magic: AtomicU64::new(0),
            capacity: AtomicU64::new(0),
            producer_claimed: AtomicU32::new(0),
            consumer_claimed: AtomicU32::new(0),
        }),
        head: Line(AtomicU64::new(0)),
        tail: Line(AtomicU64::new(0)),
    })
}

#[test]
fn a_header_is_initialised_once_and_checked_when_joined() {
    let header = zeroed_header();
    join_or_initialise(&header, 4096).unwrap();
    assert_eq!(header.meta.0.magic.load(Ordering::Relaxed), MAGIC);
    assert_eq!(header.meta.0.capacity.load(Ordering::Relaxed), 4096);
    header.head.0.store(64, Ordering::Relaxed);
    join_or_initialise(&header, 4096).unwrap();
    assert_eq!(
        header.head.0.load(Ordering::Relaxed),
        64,
        "joining keeps the ring's state"
    );
    assert!(matches!(
        join_or_initialise(&header, 8192),
        Err(Error::NotARing { .. })
    ));
    header.meta.0.magic.store(0x1234, Ordering::Relaxed);
    assert!(matches!(
        join_or_initialise(&header, 4096),
        Err(Error::NotARing { .. })
    ));
    if !cfg!(miri) {
        // An initialiser that died half way: joiners give up after a bounded wait.
        header.meta.0.magic.store(INITIALISING, Ordering::Relaxed);
        assert!(matches!(
            join_or_initialise(&header, 4096),
            Err(Error::NotARing { .. })
        ));
    }
}

#[test]
fn a_claim_is_exclusive_names_its_holder_and_is_given_back() {
    let me = std::process::id();
    let word = AtomicU32::new(0);
    let claim = Claim::take(&word, "producer").unwrap();
    assert_eq!(word.load(Ordering::Relaxed), me);
    assert!(matches!(
        Claim::take(&word, "producer"),
        Err(Error::RoleTaken { role: "producer", holder }) if holder == me
    ));
    drop(claim);
    assert_eq!(word.load(Ordering::Relaxed), 0, "given back on drop");
    // A claim this process does not hold (a peer's) is left alone.
    word.store(me.wrapping_add(1), Ordering::Relaxed);
    Claim::release(&word);
    assert_eq!(word.load(Ordering::Relaxed), me.wrapping_add(1));
}

/// Regression: the largest record was `capacity - 8` bytes even past 4 GiB, but a record
/// header holds a `u32` length, so a longer record was published with a truncated length.
#[test]
fn records_longer_than_a_u32_length_never_fit() {
    let core = ProducerCore::new(1 << 33, 0, 0).unwrap();
    assert_eq!(core.max, u32::MAX as usize);
    assert_eq!(max_payload(4096), 4096 - RECORD_HEADER);
}

/// Positions a peer left misaligned are refused when attaching, on both sides.
#[test]
fn cores_refuse_misaligned_positions() {
    assert!(ProducerCore::new(4096, 12, 0).is_err());
    assert!(ConsumerCore::new(4096, 0, 12).is_err());
    // The other side's position is checked later, at use.
    assert!(ProducerCore::new(4096, 16, 12).is_ok());
    assert!(ConsumerCore::new(4096, 12, 16).is_ok());
}

/// The protocol's cores over heap memory (Miri runs these): `f` gets the producer and
/// consumer of a `cap`-byte ring, their shared positions, and the base of a
/// `[prev][base][next]` buffer (not aliased: enough for the cores, which only need the range
/// to be memory).
pub(super) fn with_heap_cores(
    cap: usize,
    f: impl FnOnce(&mut ProducerCore, &mut ConsumerCore, &AtomicU64, &AtomicU64, *mut u8),
) {
    let mut words = vec![0u64; 3 * cap / 8];
    // SAFETY: one capacity into a buffer of three.
    let base = unsafe { words.as_mut_ptr().cast::<u8>().add(cap) };
    let (head, tail) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut producer = ProducerCore::new(cap, 0, 0).unwrap();
    let mut consumer = ConsumerCore::new(cap, 0, 0).unwrap();
    f(&mut producer, &mut consumer, &head, &tail, base);
}

/// The regressions of the two tests above at the level of the cores, so Miri checks them.
#[test]
fn cores_drop_a_reservation_on_a_failed_reserve_and_refuse_an_impossible_tail() {
    with_heap_cores(256, |tx, rx, head, tail, base| {
        // SAFETY: `base` is the middle of three capacities of memory, `head` and `tail` the
        // ring's positions.
        unsafe {
            tx.reserve(tail, base, 10).unwrap();
            assert!(matches!(
                tx.reserve(tail, base, 1000),
                Err(ReserveError::TooLarge { .. })
            ));
            assert!(!tx.commit(head, base, None), "nothing left to publish");
            assert_eq!(rx.peek(head, base), Ok(None));
            tx.reserve(tail, base, 240).unwrap();
            assert!(tx.commit(head, base, None));
            tx.reserve(tail, base, 0).unwrap();
            assert_eq!(tx.reserve(tail, base, 8), Err(ReserveError::Full));
            assert!(!tx.commit(head, base, None));
            for hostile in [264, u64::MAX - 15, 1 << 40] {
                tail.store(hostile, Ordering::Relaxed);
                assert!(matches!(
                    tx.reserve(tail, base, 8),
                    Err(ReserveError::Corrupt(_))
                ));
            }
            tail.store(0, Ordering::Relaxed);
            assert!(rx.peek(head, base).unwrap().is_some_and(|(_, n)| n == 240));
            assert!(rx.release(tail));
            assert!(tx.reserve(tail, base, 8).is_ok());
        }
    });
}

/// A claim left by a process that died blocks the role until it is reclaimed, explicitly
/// and `unsafe`ly.
#[test]
#[cfg_attr(miri, ignore = "maps a memfd")]
fn a_dead_holders_claim_is_taken_over_only_by_the_unsafe_reclaim() {
    let mirror = HostMirror::new(4096).unwrap();
    let fd = mirror.memfd().try_clone_to_owned().unwrap();
    let ring = SpscRing::new(mirror).unwrap();
    // A peer process that exited while holding both roles.
    let dead = std::process::id().wrapping_add(1);
    let meta = &ring.shared.header().meta.0;
    meta.producer_claimed.store(dead, Ordering::Relaxed);
    meta.consumer_claimed.store(dead, Ordering::Relaxed);
    let join = || {
        SpscRing::new(
            HostMirror::from_memfd(fd.try_clone().unwrap(), crate::Granule::Page).unwrap(),
        )
        .unwrap()
    };
    assert!(matches!(
        join().into_producer(),
        Err(Error::RoleTaken { role: "producer", holder }) if holder == dead
    ));
    assert!(matches!(
        join().into_consumer(),
        Err(Error::RoleTaken { role: "consumer", holder }) if holder == dead
    ));
    // SAFETY: the holder is not alive (no process runs as `dead` for this ring), and no one
    // else attaches during the test.
    let mut tx = unsafe { join().into_producer_reclaimed() }.unwrap();
    // SAFETY: as above.
    let mut rx = unsafe { ring.into_consumer_reclaimed() }.unwrap();
    tx.push(b"again").unwrap();
    assert_eq!(pop(&mut rx), Some(b"again".to_vec()));
    assert!(matches!(
        join().into_producer(),
        Err(Error::RoleTaken {
            role: "producer",
            ..
        })
    ));
}
