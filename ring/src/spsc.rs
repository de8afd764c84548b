//! A single-producer single-consumer byte ring of variable-size records over any
//! [`Mirrored`] mapping.
//!
//! # Protocol
//! Two 64-bit positions count bytes since the ring was made: `head` (written by the producer
//! only) and `tail` (written by the consumer only); `head - tail` bytes are committed and not
//! yet released. Each sits alone on a 128-byte line of the ring header (two lines: the
//! adjacent-line prefetcher pairs 64-byte lines), and each side keeps a private copy of the
//! other's position, reloading it only when the copy says the ring is full (producer) or
//! empty (consumer).
//!
//! A record is an 8-byte header (`len: u32`, `!len: u32`) followed by `len` payload bytes,
//! padded to 8 bytes; it starts at `base + (head mod capacity)` and is written and read as one
//! contiguous run, even when it crosses the end of the buffer: the mirror view after the base
//! makes the bytes past the end the bytes at its start. Records are never split and there are
//! no padding records.
//!
//! Ordering: the producer writes the record, then stores `head` with `Release`; the consumer
//! loads `head` with `Acquire` before reading, so it never sees bytes of an uncommitted
//! record. Symmetrically the consumer's reads happen before its `Release` store of `tail`,
//! which the producer loads with `Acquire` before reusing those bytes.
//!
//! # Across processes
//! When the mapping has a control area ([`HostMirror`](crate::HostMirror) has one, backed by
//! the same memfd), the header lives there, so two processes that map the same memfd share
//! one ring: one calls [`SpscRing::into_producer`], the other [`SpscRing::into_consumer`].
//! Each role can be held once at a time (a claim flag in the header); the consumer checks
//! each record header and reports [`RingCorrupt`] rather than trusting a bad length.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::host::Mirrored;

/// The bytes before each record's payload.
pub const RECORD_HEADER: usize = 8;

/// `"kfdring1"`: the header of an initialised ring.
const MAGIC: u64 = u64::from_le_bytes(*b"kfdring1");
/// The header is being initialised by someone.
const INITIALISING: u64 = 1;

/// The bytes a record of `payload` bytes takes in the ring.
#[inline(always)]
fn record_len(payload: usize) -> usize {
    (RECORD_HEADER + payload + 7) & !7
}

/// A 128-byte line of its own.
#[repr(C, align(128))]
struct Line<T>(T);

/// Identity and role claims of a ring.
#[repr(C)]
struct Meta {
    magic: AtomicU64,
    capacity: AtomicU64,
    producer_claimed: AtomicU32,
    consumer_claimed: AtomicU32,
}

/// The ring header: identity on one line, `head` and `tail` on lines of their own.
#[repr(C)]
struct Header {
    meta: Line<Meta>,
    head: Line<AtomicU64>,
    tail: Line<AtomicU64>,
}

const _: () = assert!(size_of::<Header>() == 384 && align_of::<Header>() == 128);

/// An atomic 64-bit position. The ring's protocol is written against this trait so the
/// model-checking test runs the same code on its own atomics.
pub(crate) trait Counter {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
}

impl Counter for AtomicU64 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    #[inline(always)]
    fn store(&self, value: u64, order: Ordering) {
        AtomicU64::store(self, value, order)
    }
}

/// Why a record could not be reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReserveError {
    /// Not enough free space now; retry after the consumer releases records.
    #[error("the ring is full")]
    Full,
    /// The record can never fit: its payload exceeds [`Producer::max_record`].
    #[error("a record of {len} bytes exceeds the ring's largest record of {max} bytes")]
    TooLarge {
        /// The payload length asked for.
        len: usize,
        /// The largest payload the ring holds.
        max: usize,
    },
}

/// The ring's shared state does not follow the protocol (a peer process wrote garbage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ring corrupt at position {position}: {reason}")]
pub struct RingCorrupt {
    /// The consumer position where it was found.
    pub position: u64,
    /// What was wrong.
    pub reason: &'static str,
}

/// The producer's private state.
#[derive(Debug)]
pub(crate) struct ProducerCore {
    mask: usize,
    max: usize,
    head: u64,
    tail_cache: u64,
    /// Payload bytes of the outstanding reservation, if any.
    reserved: Option<usize>,
}

impl ProducerCore {
    pub(crate) fn new(capacity: usize, head: u64, tail: u64) -> ProducerCore {
        ProducerCore {
            mask: capacity - 1,
            max: capacity - RECORD_HEADER,
            head,
            tail_cache: tail,
            reserved: None,
        }
    }

    /// Reserves a record of `n` payload bytes; returns where the payload goes.
    ///
    /// # Safety
    /// `base` is the base of a live mirrored mapping of `mask + 1` bytes and `tail` is the
    /// consumer position of the same ring.
    #[inline(always)]
    pub(crate) unsafe fn reserve<C: Counter>(
        &mut self,
        tail: &C,
        base: *mut u8,
        n: usize,
    ) -> Result<*mut u8, ReserveError> {
        if n > self.max {
            return Err(ReserveError::TooLarge {
                len: n,
                max: self.max,
            });
        }
        let need = record_len(n) as u64;
        let capacity = self.mask as u64 + 1;
        if self.head - self.tail_cache + need > capacity {
            self.tail_cache = tail.load(Ordering::Acquire);
            if self.head - self.tail_cache + need > capacity {
                return Err(ReserveError::Full);
            }
        }
        self.reserved = Some(n);
        let at = self.head as usize & self.mask;
        // SAFETY: `at + RECORD_HEADER < capacity`, inside the base view (caller).
        Ok(unsafe { base.add(at + RECORD_HEADER) })
    }

    /// Publishes the outstanding reservation with `len` payload bytes (at most what was
    /// reserved); returns whether there was one.
    ///
    /// # Safety
    /// As for [`reserve`](Self::reserve), with `head` the producer position of the ring.
    #[inline(always)]
    pub(crate) unsafe fn commit<C: Counter>(
        &mut self,
        head: &C,
        base: *mut u8,
        len: Option<usize>,
    ) -> bool {
        let Some(reserved) = self.reserved.take() else {
            return false;
        };
        let n = len.map_or(reserved, |len| len.min(reserved));
        let at = self.head as usize & self.mask;
        // The header is 8-byte aligned (positions advance in multiples of 8) and inside the
        // base view.
        let word = u64::from(n as u32) | (u64::from(!(n as u32)) << 32);
        // SAFETY: `base + at` is 8-byte aligned and inside the base view (caller).
        unsafe { base.add(at).cast::<u64>().write(word.to_le()) };
        self.head += record_len(n) as u64;
        head.store(self.head, Ordering::Release);
        true
    }
}

/// The consumer's private state.
#[derive(Debug)]
pub(crate) struct ConsumerCore {
    mask: usize,
    tail: u64,
    head_cache: u64,
    /// Ring bytes of the record being looked at, if any.
    peeked: Option<usize>,
}

impl ConsumerCore {
    pub(crate) fn new(capacity: usize, head: u64, tail: u64) -> ConsumerCore {
        ConsumerCore {
            mask: capacity - 1,
            tail,
            head_cache: head,
            peeked: None,
        }
    }

    /// The oldest committed record: its payload's address and length.
    ///
    /// # Safety
    /// `base` is the base of a live mirrored mapping of `mask + 1` bytes and `head` is the
    /// producer position of the same ring.
    #[inline(always)]
    pub(crate) unsafe fn peek<C: Counter>(
        &mut self,
        head: &C,
        base: *const u8,
    ) -> Result<Option<(*const u8, usize)>, RingCorrupt> {
        if self.head_cache == self.tail {
            self.head_cache = head.load(Ordering::Acquire);
            if self.head_cache == self.tail {
                return Ok(None);
            }
        }
        let corrupt = |reason| RingCorrupt {
            position: self.tail,
            reason,
        };
        let available = self.head_cache.wrapping_sub(self.tail);
        if available > self.mask as u64 + 1 || !available.is_multiple_of(8) {
            return Err(corrupt(
                "the producer position is not ahead by a whole record",
            ));
        }
        let at = self.tail as usize & self.mask;
        // SAFETY: the header is 8-byte aligned inside the base view (caller), and committed:
        // the `Acquire` load of `head` ordered the producer's writes before this read.
        let word = u64::from_le(unsafe { base.add(at).cast::<u64>().read() });
        let (n, check) = (word as u32, (word >> 32) as u32);
        if check != !n {
            return Err(corrupt("a record header fails its check"));
        }
        let len = record_len(n as usize);
        if len as u64 > available {
            return Err(corrupt("a record runs past the producer position"));
        }
        self.peeked = Some(len);
        // SAFETY: the payload starts inside the base view and, being at most one capacity
        // long, ends inside the next view (caller).
        Ok(Some((unsafe { base.add(at + RECORD_HEADER) }, n as usize)))
    }

    /// Releases the record last peeked; returns whether there was one.
    #[inline(always)]
    pub(crate) fn release<C: Counter>(&mut self, tail: &C) -> bool {
        let Some(len) = self.peeked.take() else {
            return false;
        };
        self.tail += len as u64;
        tail.store(self.tail, Ordering::Release);
        true
    }
}

/// Where the header lives.
enum HeaderStore {
    /// In the mapping's control area (shared with other processes).
    Control(NonNull<Header>),
    /// In this process's heap.
    Heap(Box<Header>),
}

/// The ring shared by the producer and the consumer of this process.
struct Shared<M> {
    header: HeaderStore,
    mirror: M,
}

// SAFETY: the header is atomics only; the mirror is shared memory reached through raw
// pointers under the protocol; `M: Send + Sync` covers the owner of the mapping.
unsafe impl<M: Send + Sync> Send for Shared<M> {}
// SAFETY: as above.
unsafe impl<M: Send + Sync> Sync for Shared<M> {}

impl<M> Shared<M> {
    fn header(&self) -> &Header {
        match &self.header {
            // SAFETY: the control area is mapped, aligned and at least a header long
            // (checked at `SpscRing::new`) while `mirror` lives, which is as long as `self`.
            HeaderStore::Control(ptr) => unsafe { ptr.as_ref() },
            HeaderStore::Heap(header) => header,
        }
    }
}

/// An SPSC ring of variable-size records over a mirrored mapping, before it is split into
/// its [`Producer`] and [`Consumer`].
///
/// ```
/// use kfd_ring::{HostMirror, SpscRing};
///
/// let (mut tx, mut rx) = SpscRing::new(HostMirror::new(4096)?)?.split()?;
/// let buf = tx.reserve(5).expect("room");
/// buf.copy_from_slice(b"hello");
/// tx.commit();
/// assert_eq!(rx.peek()?, Some(&b"hello"[..]));
/// rx.release();
/// assert_eq!(rx.peek()?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SpscRing<M: Mirrored> {
    shared: Arc<Shared<M>>,
}

impl<M: Mirrored> fmt::Debug for SpscRing<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = self.shared.header();
        f.debug_struct("SpscRing")
            .field("capacity", &self.shared.mirror.capacity())
            .field("head", &h.head.0.load(Ordering::Relaxed))
            .field("tail", &h.tail.0.load(Ordering::Relaxed))
            .finish()
    }
}

impl<M: Mirrored> SpscRing<M> {
    /// Puts a ring on `mirror`: in its control area when it has one (initialising it the
    /// first time, joining it when another mapping of the same memory already did), else
    /// with a header in this process's memory.
    pub fn new(mirror: M) -> Result<SpscRing<M>> {
        let capacity = mirror.capacity();
        let header = match mirror.control() {
            Some((ptr, len))
                if len >= size_of::<Header>()
                    && (ptr.as_ptr() as usize).is_multiple_of(align_of::<Header>()) =>
            {
                let ptr = ptr.cast::<Header>();
                // SAFETY: the control area is mapped, aligned and large enough (checked),
                // zero-initialised at creation, and holds only atomics.
                let header = unsafe { ptr.as_ref() };
                join_or_initialise(header, capacity)?;
                HeaderStore::Control(ptr)
            }
            Some(_) => {
                return Err(Error::NotARing {
                    reason: "the control area is too small or misaligned for a ring header",
                });
            }
            None => {
                let header = Box::new(Header {
                    meta: Line(Meta {
                        magic: AtomicU64::new(MAGIC),
                        capacity: AtomicU64::new(capacity as u64),
                        producer_claimed: AtomicU32::new(0),
                        consumer_claimed: AtomicU32::new(0),
                    }),
                    head: Line(AtomicU64::new(0)),
                    tail: Line(AtomicU64::new(0)),
                });
                HeaderStore::Heap(header)
            }
        };
        Ok(SpscRing {
            shared: Arc::new(Shared { header, mirror }),
        })
    }

    /// The ring's capacity in bytes (headers and padding included).
    pub fn capacity(&self) -> usize {
        self.shared.mirror.capacity()
    }

    /// The producer and the consumer of the ring, for two threads of this process.
    pub fn split(self) -> Result<(Producer<M>, Consumer<M>)> {
        let consumer = Consumer::claim(Arc::clone(&self.shared))?;
        let producer = Producer::claim(self.shared)?;
        Ok((producer, consumer))
    }

    /// The producer side only (the consumer is in another process, or comes later).
    pub fn into_producer(self) -> Result<Producer<M>> {
        Producer::claim(self.shared)
    }

    /// The consumer side only.
    pub fn into_consumer(self) -> Result<Consumer<M>> {
        Consumer::claim(self.shared)
    }
}

/// Joins the ring whose header is at `header`, initialising it if no one has.
fn join_or_initialise(header: &Header, capacity: usize) -> Result<()> {
    let meta = &header.meta.0;
    match meta
        .magic
        .compare_exchange(0, INITIALISING, Ordering::Acquire, Ordering::Acquire)
    {
        Ok(_) => {
            meta.capacity.store(capacity as u64, Ordering::Relaxed);
            header.head.0.store(0, Ordering::Relaxed);
            header.tail.0.store(0, Ordering::Relaxed);
            meta.magic.store(MAGIC, Ordering::Release);
        }
        Err(_) => {
            // Another mapping initialises it: wait (briefly: a few stores) for it to finish.
            let mut spins = 0u32;
            loop {
                match meta.magic.load(Ordering::Acquire) {
                    MAGIC => break,
                    INITIALISING if spins < 1_000_000 => {
                        spins += 1;
                        std::hint::spin_loop();
                    }
                    _ => {
                        return Err(Error::NotARing {
                            reason: "the control area does not hold a ring header",
                        });
                    }
                }
            }
        }
    }
    if meta.capacity.load(Ordering::Relaxed) != capacity as u64 {
        return Err(Error::NotARing {
            reason: "the ring header's capacity differs from the mapping's",
        });
    }
    Ok(())
}

/// The producing side: reserve a record, fill it, commit it.
pub struct Producer<M: Mirrored> {
    shared: Arc<Shared<M>>,
    core: ProducerCore,
}

impl<M: Mirrored> fmt::Debug for Producer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("core", &self.core)
            .finish()
    }
}

impl<M: Mirrored> Producer<M> {
    fn claim(shared: Arc<Shared<M>>) -> Result<Producer<M>> {
        let header = shared.header();
        claim(&header.meta.0.producer_claimed, "producer")?;
        let capacity = shared.mirror.capacity();
        let head = header.head.0.load(Ordering::Acquire);
        let tail = header.tail.0.load(Ordering::Acquire);
        let core = ProducerCore::new(capacity, head, tail);
        Ok(Producer { shared, core })
    }

    /// The largest payload a record can carry: the capacity less the record header.
    pub fn max_record(&self) -> usize {
        self.shared.mirror.capacity() - RECORD_HEADER
    }

    /// Reserves a record of `n` payload bytes and returns them to fill, contiguous even when
    /// the record crosses the end of the buffer. Nothing is visible to the consumer until
    /// [`commit`](Self::commit); a new `reserve` without a commit drops the previous
    /// reservation.
    #[inline]
    pub fn reserve(&mut self, n: usize) -> Result<&mut [u8], ReserveError> {
        let base = self.shared.mirror.base().as_ptr();
        let tail = &self.shared.header().tail.0;
        // SAFETY: `base` is the live mirrored mapping of this ring and `tail` its consumer
        // position.
        let at = unsafe { self.core.reserve(tail, base, n) }?;
        // SAFETY: the `n` bytes at `at` lie in the free part of the ring (the reservation
        // checked `head + record ≤ tail + capacity`), which only this producer touches until
        // it commits; they are mapped (mirror) and `n ≤ capacity`, so no byte is reachable
        // twice through the slice. The borrow of `self` keeps the mapping alive and stops a
        // second reservation while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(at, n) })
    }

    /// Publishes the outstanding reservation; returns whether there was one.
    #[inline]
    pub fn commit(&mut self) -> bool {
        self.commit_inner(None)
    }

    /// Publishes the outstanding reservation shortened to its first `len` bytes.
    #[inline]
    pub fn commit_len(&mut self, len: usize) -> bool {
        self.commit_inner(Some(len))
    }

    #[inline(always)]
    fn commit_inner(&mut self, len: Option<usize>) -> bool {
        let base = self.shared.mirror.base().as_ptr();
        let head = &self.shared.header().head.0;
        // SAFETY: `base` and `head` belong to this ring.
        unsafe { self.core.commit(head, base, len) }
    }

    /// Copies `data` into a new record and commits it.
    #[inline]
    pub fn push(&mut self, data: &[u8]) -> Result<(), ReserveError> {
        self.reserve(data.len())?.copy_from_slice(data);
        self.commit();
        Ok(())
    }
}

impl<M: Mirrored> Drop for Producer<M> {
    fn drop(&mut self) {
        self.shared
            .header()
            .meta
            .0
            .producer_claimed
            .store(0, Ordering::Release);
    }
}

/// The consuming side: peek at the oldest record, then release it.
pub struct Consumer<M: Mirrored> {
    shared: Arc<Shared<M>>,
    core: ConsumerCore,
}

impl<M: Mirrored> fmt::Debug for Consumer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("core", &self.core)
            .finish()
    }
}

impl<M: Mirrored> Consumer<M> {
    fn claim(shared: Arc<Shared<M>>) -> Result<Consumer<M>> {
        let header = shared.header();
        claim(&header.meta.0.consumer_claimed, "consumer")?;
        let capacity = shared.mirror.capacity();
        let head = header.head.0.load(Ordering::Acquire);
        let tail = header.tail.0.load(Ordering::Acquire);
        let core = ConsumerCore::new(capacity, head, tail);
        Ok(Consumer { shared, core })
    }

    /// The oldest committed record's payload, contiguous even when it crosses the end of the
    /// buffer; `None` when the ring is empty. The record stays until
    /// [`release`](Self::release).
    #[inline]
    pub fn peek(&mut self) -> Result<Option<&[u8]>, RingCorrupt> {
        let base = self.shared.mirror.base().as_ptr();
        let head = &self.shared.header().head.0;
        // SAFETY: `base` is the live mirrored mapping of this ring and `head` its producer
        // position.
        let record = unsafe { self.core.peek(head, base) }?;
        Ok(record.map(|(at, n)| {
            // SAFETY: the record is committed (the `Acquire` load of `head` ordered its
            // writes before us), the producer does not touch it until we release it, and it
            // is mapped and at most one capacity long. The borrow of `self` ends before
            // `release`.
            unsafe { std::slice::from_raw_parts(at, n) }
        }))
    }

    /// Releases the record last peeked, giving its bytes back to the producer; returns
    /// whether there was one.
    #[inline]
    pub fn release(&mut self) -> bool {
        let tail = &self.shared.header().tail.0;
        self.core.release(tail)
    }

    /// Runs `f` on the oldest record and releases it; `None` when the ring is empty.
    #[inline]
    pub fn pop_with<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, RingCorrupt> {
        let out = self.peek()?.map(f);
        self.release();
        Ok(out)
    }
}

impl<M: Mirrored> Drop for Consumer<M> {
    fn drop(&mut self) {
        self.shared
            .header()
            .meta
            .0
            .consumer_claimed
            .store(0, Ordering::Release);
    }
}

/// Takes a role's claim flag.
fn claim(flag: &AtomicU32, role: &'static str) -> Result<()> {
    flag.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .map(drop)
        .map_err(|_| Error::RoleTaken { role })
}

// Each side may move to its own thread (the ring they share is `Send + Sync` for such `M`).
const _: fn() = || {
    fn check<T: Send>() {}
    check::<Producer<crate::HostMirror>>();
    check::<Consumer<crate::HostMirror>>();
};

#[cfg(test)]
mod tests;
