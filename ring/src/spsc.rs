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
//! Each role can be held once at a time: a claim word in the header, taken with a
//! compare-exchange (holding the claimer's process id) and given back on drop, so a second
//! producer or consumer — in this process or another — is refused with
//! [`Error::RoleTaken`].
//!
//! # A hostile peer
//! The header and the record headers are written by the other side, possibly another
//! process: they are untrusted input. Positions are compared with wrapping arithmetic and
//! checked against the capacity, record lengths against the committed bytes; what does not
//! add up is a [`RingCorrupt`] (or [`ReserveError::Corrupt`]), never a panic or an access
//! outside `[base, base + 2 × capacity)`. Record bytes are handed out as [`VolatileSlice`]s,
//! since a peer may write them at any time; plain slices only through the `unsafe`
//! [`Producer::reserve_slice`] and [`Consumer::peek_slice`].

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use vm_memory::VolatileSlice;

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
    /// The consumer position in the shared header is impossible (behind the producer by
    /// more than a capacity, or ahead of it): the peer broke the protocol.
    #[error(transparent)]
    Corrupt(#[from] RingCorrupt),
}

/// The ring's shared state does not follow the protocol (a peer process wrote garbage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ring corrupt at position {position}: {reason}")]
pub struct RingCorrupt {
    /// The position (the consumer's, or the producer's for a producer-side check) where it
    /// was found.
    pub position: u64,
    /// What was wrong.
    pub reason: &'static str,
}

/// The largest payload of a ring of `capacity` bytes: the capacity less the record header,
/// and no more than a record header's `u32` length holds.
#[inline(always)]
fn max_payload(capacity: usize) -> usize {
    (capacity - RECORD_HEADER).min(u32::MAX as usize)
}

/// Checks that a position read from the shared header at attach time is whole records
/// (a multiple of 8), so the record headers it leads to are aligned.
fn check_aligned(position: u64, reason: &'static str) -> Result<u64, RingCorrupt> {
    if position.is_multiple_of(RECORD_HEADER as u64) {
        Ok(position)
    } else {
        Err(RingCorrupt { position, reason })
    }
}

/// The producer's private state.
///
/// Everything read from the shared header is untrusted: the positions wrap (`wrapping_*`),
/// and the consumer position is checked to be at most one capacity behind `head` before its
/// free space is believed, so no input makes it panic or reach outside
/// `[base, base + 2 × capacity)`.
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
    /// The producer of a ring of `capacity` bytes (a power of two of at least 16) whose
    /// shared header says `head` and `tail`.
    pub(crate) fn new(capacity: usize, head: u64, tail: u64) -> Result<ProducerCore, RingCorrupt> {
        debug_assert!(capacity.is_power_of_two() && capacity >= 2 * RECORD_HEADER);
        Ok(ProducerCore {
            mask: capacity - 1,
            max: max_payload(capacity),
            head: check_aligned(
                head,
                "the producer position is not a whole number of records",
            )?,
            tail_cache: tail,
            reserved: None,
        })
    }

    /// Reserves a record of `n` payload bytes; returns where the payload goes. Any earlier
    /// reservation is dropped, whether this one succeeds or not.
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
        self.reserved = None;
        if n > self.max {
            return Err(ReserveError::TooLarge {
                len: n,
                max: self.max,
            });
        }
        // `n ≤ max` makes `need ≤ capacity`: no subtraction below wraps.
        let need = record_len(n) as u64;
        let capacity = self.mask as u64 + 1;
        if self.head.wrapping_sub(self.tail_cache) > capacity - need {
            let tail = tail.load(Ordering::Acquire);
            let used = self.head.wrapping_sub(tail);
            if used > capacity {
                return Err(ReserveError::Corrupt(RingCorrupt {
                    position: self.head,
                    reason: "the consumer position is ahead of the producer's or more than a capacity behind",
                }));
            }
            self.tail_cache = tail;
            if used > capacity - need {
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
        // `n ≤ reserved ≤ max ≤ u32::MAX`.
        let n = len.map_or(reserved, |len| len.min(reserved));
        let at = self.head as usize & self.mask;
        let word = u64::from(n as u32) | (u64::from(!(n as u32)) << 32);
        // SAFETY: `base + at` is inside the base view (caller) and 8-byte aligned: `head` was
        // checked to be a multiple of 8 and advances in multiples of 8. Volatile: the peer
        // reads it concurrently once `head` is published.
        unsafe { base.add(at).cast::<u64>().write_volatile(word.to_le()) };
        self.head = self.head.wrapping_add(record_len(n) as u64);
        head.store(self.head, Ordering::Release);
        true
    }
}

/// The consumer's private state. As for the producer, the producer position and the record
/// headers are untrusted: a bad one is a [`RingCorrupt`], never a panic or an access outside
/// `[base, base + 2 × capacity)`.
#[derive(Debug)]
pub(crate) struct ConsumerCore {
    mask: usize,
    tail: u64,
    head_cache: u64,
    /// Ring bytes of the record being looked at, if any.
    peeked: Option<u64>,
}

impl ConsumerCore {
    /// The consumer of a ring of `capacity` bytes (a power of two of at least 16) whose
    /// shared header says `head` and `tail`.
    pub(crate) fn new(capacity: usize, head: u64, tail: u64) -> Result<ConsumerCore, RingCorrupt> {
        debug_assert!(capacity.is_power_of_two() && capacity >= 2 * RECORD_HEADER);
        Ok(ConsumerCore {
            mask: capacity - 1,
            tail: check_aligned(
                tail,
                "the consumer position is not a whole number of records",
            )?,
            head_cache: head,
            peeked: None,
        })
    }

    /// The oldest committed record: its payload's address and length. A failed peek forgets
    /// the record peeked before.
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
        self.peeked = None;
        if self.head_cache == self.tail {
            self.head_cache = head.load(Ordering::Acquire);
            if self.head_cache == self.tail {
                return Ok(None);
            }
        }
        let available = self.head_cache.wrapping_sub(self.tail);
        if available > self.mask as u64 + 1 || !available.is_multiple_of(RECORD_HEADER as u64) {
            return Err(self.corrupt("the producer position is not ahead by whole records"));
        }
        let at = self.tail as usize & self.mask;
        // SAFETY: the header is inside the base view (caller) and 8-byte aligned (`tail` was
        // checked to be a multiple of 8 and advances in multiples of 8), and committed: the
        // `Acquire` load of `head` ordered the producer's writes before this read. Volatile:
        // a hostile peer may write it at any time.
        let word = u64::from_le(unsafe { base.add(at).cast::<u64>().read_volatile() });
        let (n, check) = (word as u32, (word >> 32) as u32);
        if check != !n {
            return Err(self.corrupt("a record header fails its check"));
        }
        let len = (RECORD_HEADER as u64 + u64::from(n) + 7) & !7;
        if len > available {
            return Err(self.corrupt("a record runs past the producer position"));
        }
        self.peeked = Some(len);
        // SAFETY: the payload starts inside the base view and ends at most `available ≤
        // capacity` bytes after the record's start, so inside the next view (caller).
        Ok(Some((unsafe { base.add(at + RECORD_HEADER) }, n as usize)))
    }

    /// The error for what `peek` found at the current position; the cached producer position
    /// is dropped so the next peek reads it again.
    #[cold]
    fn corrupt(&mut self, reason: &'static str) -> RingCorrupt {
        self.head_cache = self.tail;
        RingCorrupt {
            position: self.tail,
            reason,
        }
    }

    /// Releases the record last peeked; returns whether there was one.
    #[inline(always)]
    pub(crate) fn release<C: Counter>(&mut self, tail: &C) -> bool {
        let Some(len) = self.peeked.take() else {
            return false;
        };
        self.tail = self.tail.wrapping_add(len);
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
/// // The record is shared memory: filled with a volatile copy...
/// tx.reserve(5)?.copy_from(b"hello");
/// tx.commit();
/// // ...and read with one.
/// let mut got = [0u8; 5];
/// assert_eq!(rx.peek()?.map(|record| record.copy_to(&mut got)), Some(5));
/// assert_eq!(&got, b"hello");
/// rx.release();
/// assert!(rx.peek()?.is_none());
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

    /// The producer side, taking the role over from a holder that is gone: for a ring whose
    /// producer process died without giving its claim back ([`Error::RoleTaken`] names it).
    ///
    /// # Safety
    /// No other producer of this ring is alive or attaching, in any process: the callers of
    /// [`Producer::reserve_slice`] and [`Consumer::peek_slice`] rely on one producer.
    pub unsafe fn into_producer_reclaimed(self) -> Result<Producer<M>> {
        let word = &self.shared.header().meta.0.producer_claimed;
        word.store(0, Ordering::Release);
        Producer::claim(self.shared)
    }

    /// The consumer side, taking the role over from a holder that is gone (see
    /// [`into_producer_reclaimed`](Self::into_producer_reclaimed)).
    ///
    /// # Safety
    /// No other consumer of this ring is alive or attaching, in any process.
    pub unsafe fn into_consumer_reclaimed(self) -> Result<Consumer<M>> {
        let word = &self.shared.header().meta.0.consumer_claimed;
        word.store(0, Ordering::Release);
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
///
/// One producer per ring: it holds the ring's producer claim (in the shared header, so
/// across processes too) until dropped.
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
        let claim = Claim::take(&header.meta.0.producer_claimed, "producer")?;
        let capacity = shared.mirror.capacity();
        let head = header.head.0.load(Ordering::Acquire);
        let tail = header.tail.0.load(Ordering::Acquire);
        let core = ProducerCore::new(capacity, head, tail)?;
        std::mem::forget(claim);
        Ok(Producer { shared, core })
    }

    /// The largest payload a record can carry: the capacity less the record header (and at
    /// most `u32::MAX`).
    pub fn max_record(&self) -> usize {
        self.core.max
    }

    #[inline(always)]
    fn reserve_raw(&mut self, n: usize) -> Result<*mut u8, ReserveError> {
        let base = self.shared.mirror.base().as_ptr();
        let tail = &self.shared.header().tail.0;
        // SAFETY: `base` is the live mirrored mapping of this ring and `tail` its consumer
        // position.
        unsafe { self.core.reserve(tail, base, n) }
    }

    /// Reserves a record of `n` payload bytes and returns them to fill, contiguous even when
    /// the record crosses the end of the buffer. Nothing is visible to the consumer until
    /// [`commit`](Self::commit); a new `reserve` drops the previous reservation, also when
    /// it fails (a `commit` after a failed `reserve` publishes nothing).
    ///
    /// The bytes are shared memory (a peer process or a GPU may map them), so they come as a
    /// [`VolatileSlice`]: fill it with [`VolatileSlice::copy_from`] or the
    /// [`Bytes`](vm_memory::Bytes) methods. [`reserve_slice`](Self::reserve_slice) gives a
    /// plain slice to callers that can promise more; safe code cannot get one:
    ///
    /// ```compile_fail
    /// # use kfd_ring::{HostMirror, SpscRing};
    /// let (mut tx, _rx) = SpscRing::new(HostMirror::new(4096).unwrap()).unwrap().split().unwrap();
    /// let slot: &mut [u8] = tx.reserve(8).unwrap();
    /// ```
    #[inline]
    pub fn reserve(&mut self, n: usize) -> Result<VolatileSlice<'_>, ReserveError> {
        let at = self.reserve_raw(n)?;
        // SAFETY: the `n` bytes at `at` are mapped (mirror; `n ≤ capacity`) while the borrow
        // of `self` keeps the ring alive; all safe access to them is volatile.
        Ok(unsafe { VolatileSlice::new(at, n) })
    }

    /// [`reserve`](Self::reserve), as a plain slice.
    ///
    /// # Safety
    /// No one else reads or writes the reserved bytes while the slice lives: every agent that
    /// maps the ring (the consumer, in this or another process, any other mapping of the same
    /// memfd or buffer object, a GPU) follows the ring's protocol and leaves the free part of
    /// the ring alone.
    #[inline]
    pub unsafe fn reserve_slice(&mut self, n: usize) -> Result<&mut [u8], ReserveError> {
        let at = self.reserve_raw(n)?;
        // SAFETY: the `n` bytes at `at` lie in the free part of the ring, mapped (mirror) and
        // at most one capacity long, so no byte is reachable twice through the slice; no one
        // else touches them (caller). The borrow of `self` keeps the mapping alive and stops
        // a second reservation while the slice lives.
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
        self.reserve(data.len())?.copy_from(data);
        self.commit();
        Ok(())
    }
}

impl<M: Mirrored> Drop for Producer<M> {
    fn drop(&mut self) {
        Claim::release(&self.shared.header().meta.0.producer_claimed);
    }
}

/// The consuming side: peek at the oldest record, then release it.
///
/// One consumer per ring: it holds the ring's consumer claim until dropped.
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
        let claim = Claim::take(&header.meta.0.consumer_claimed, "consumer")?;
        let capacity = shared.mirror.capacity();
        let head = header.head.0.load(Ordering::Acquire);
        let tail = header.tail.0.load(Ordering::Acquire);
        let core = ConsumerCore::new(capacity, head, tail)?;
        std::mem::forget(claim);
        Ok(Consumer { shared, core })
    }

    #[inline(always)]
    fn peek_raw(&mut self) -> Result<Option<(*const u8, usize)>, RingCorrupt> {
        let base = self.shared.mirror.base().as_ptr();
        let head = &self.shared.header().head.0;
        // SAFETY: `base` is the live mirrored mapping of this ring and `head` its producer
        // position.
        unsafe { self.core.peek(head, base) }
    }

    /// The oldest committed record's payload, contiguous even when it crosses the end of the
    /// buffer; `None` when the ring is empty. The record stays until
    /// [`release`](Self::release).
    ///
    /// A [`VolatileSlice`], as the memory is shared (see [`Producer::reserve`]);
    /// [`peek_slice`](Self::peek_slice) gives a plain slice under a stronger promise.
    #[inline]
    pub fn peek(&mut self) -> Result<Option<VolatileSlice<'_>>, RingCorrupt> {
        Ok(self.peek_raw()?.map(|(at, n)| {
            // SAFETY: the record is mapped (at most one capacity long, inside the mirror)
            // while the borrow of `self` keeps the ring alive; all safe access to it is
            // volatile.
            unsafe { VolatileSlice::new(at.cast_mut(), n) }
        }))
    }

    /// [`peek`](Self::peek), as a plain slice.
    ///
    /// # Safety
    /// No one writes the record's bytes while the slice lives: every agent that maps the
    /// ring (the producer, in this or another process, any other mapping of the same memory,
    /// a GPU) follows the ring's protocol and leaves committed records alone until they are
    /// released.
    #[inline]
    pub unsafe fn peek_slice(&mut self) -> Result<Option<&[u8]>, RingCorrupt> {
        Ok(self.peek_raw()?.map(|(at, n)| {
            // SAFETY: the record is committed (the `Acquire` load of `head` ordered its
            // writes before us), no one writes it until we release it (caller), and it is
            // mapped and at most one capacity long. The borrow of `self` ends before
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
    pub fn pop_with<R>(
        &mut self,
        f: impl FnOnce(VolatileSlice<'_>) -> R,
    ) -> Result<Option<R>, RingCorrupt> {
        let out = self.peek()?.map(f);
        self.release();
        Ok(out)
    }

    /// Copies the oldest record into `out` (replacing its contents) and releases it; returns
    /// whether there was one.
    #[inline]
    pub fn pop_into(&mut self, out: &mut Vec<u8>) -> Result<bool, RingCorrupt> {
        self.pop_with(|record| {
            out.resize(record.len(), 0);
            record.copy_to(out.as_mut_slice());
        })
        .map(|popped| popped.is_some())
    }
}

impl<M: Mirrored> Drop for Consumer<M> {
    fn drop(&mut self) {
        Claim::release(&self.shared.header().meta.0.consumer_claimed);
    }
}

/// A role's claim word in the shared header: 0 when free, else the id of the process holding
/// the role.
///
/// Taken with a compare-exchange, so of two processes (or two rings of one process) that map
/// the same memory only one gets each role. A claim left by a process that died stays until
/// someone who knows the holder is gone takes it over (the `unsafe`
/// [`SpscRing::into_producer_reclaimed`] and [`SpscRing::into_consumer_reclaimed`]). A claim
/// taken while the rest of attaching fails is given back when the `Claim` drops.
struct Claim<'a>(&'a AtomicU32);

impl<'a> Claim<'a> {
    fn take(word: &'a AtomicU32, role: &'static str) -> Result<Claim<'a>> {
        word.compare_exchange(0, std::process::id(), Ordering::Acquire, Ordering::Relaxed)
            .map(|_| Claim(word))
            .map_err(|holder| Error::RoleTaken { role, holder })
    }

    /// Gives back `word` if this process holds it (a peer that overwrote it keeps it).
    fn release(word: &AtomicU32) {
        let _ = word.compare_exchange(std::process::id(), 0, Ordering::Release, Ordering::Relaxed);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        Claim::release(self.0);
    }
}

// Each side may move to its own thread (the ring they share is `Send + Sync` for such `M`).
const _: fn() = || {
    fn check<T: Send>() {}
    check::<Producer<crate::HostMirror>>();
    check::<Consumer<crate::HostMirror>>();
};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
