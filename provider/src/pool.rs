//! [`KfdPool`]: size classes over coarse provider chunks, so that steady-state allocation
//! issues no ioctl.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::KfdProvider;
use super::error::{Error, Result, recorded};

// The C ABI hands providers and pools to UMF, which calls them from any thread.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    check::<KfdProvider>();
    check::<KfdPool>();
};

/// The smallest size class: every block is at least this big and this aligned.
pub const POOL_MIN_CLASS: usize = 64;
/// The largest size class; bigger allocations go to the provider directly.
pub const POOL_MAX_CLASS: usize = 2 << 20;
/// The classes are the powers of two from [`POOL_MIN_CLASS`] to [`POOL_MAX_CLASS`].
const CLASSES: usize = (POOL_MAX_CLASS / POOL_MIN_CLASS).trailing_zeros() as usize + 1;
/// A slab that serves no class (an empty chunk waiting for reuse).
const NO_CLASS: u8 = u8::MAX;
/// A slab that is in no class's list of slabs with free blocks.
const NOT_PARTIAL: u32 = u32::MAX;

/// How a [`KfdPool`] carves and keeps its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolParams {
    /// The size (and alignment) of the chunks the pool takes from the provider: a power of two
    /// of at least [`POOL_MAX_CLASS`]. Default 2 MiB.
    pub chunk_size: usize,
    /// How many empty chunks the pool keeps for reuse (by any size class) before it gives one
    /// back to the provider. Default 16 (32 MiB of 2 MiB chunks).
    pub retained_chunks: usize,
}

impl Default for PoolParams {
    fn default() -> Self {
        PoolParams {
            chunk_size: 2 << 20,
            retained_chunks: 16,
        }
    }
}

/// What a [`KfdPool`] holds and how often it went to the provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Chunks held from the provider for size classes (in use or empty).
    pub chunks: usize,
    /// Of those, the empty ones kept for reuse.
    pub empty_chunks: usize,
    /// Allocations bigger than the largest class, passed to the provider.
    pub large: usize,
    /// Bytes handed out (block sizes of the classes, plus large allocations).
    pub in_use: usize,
    /// Provider `alloc` calls made so far.
    pub provider_allocs: u64,
    /// Provider `free` calls made so far.
    pub provider_frees: u64,
}

/// Hashes a chunk number (an address divided by the chunk size) with one multiplication.
#[derive(Default)]
struct ChunkHasher(u64);

impl Hasher for ChunkHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// What a chunk number belongs to.
#[derive(Debug, Clone, Copy)]
enum Entry {
    /// A pooled chunk, by slab id.
    Slab(u32),
    /// A large allocation of this many bytes starting at this chunk number.
    Large(usize),
}

/// One pooled chunk, carved into blocks of one class (or of none while empty).
#[derive(Debug)]
struct Slab {
    base: usize,
    class: u8,
    /// Blocks in use.
    used: u32,
    /// Blocks of the class that fit the chunk.
    capacity: u32,
    /// Blocks ever handed out since the slab got its class; those at and above are untouched.
    bump: u32,
    /// Freed block indices below `bump`, reused last-in first-out.
    free: Vec<u32>,
    /// One bit per block: handed out (catches double and stray frees).
    live: Vec<u64>,
    /// Where the slab sits in its class's partial list.
    partial_pos: u32,
}

#[derive(Debug)]
struct PoolState {
    slabs: Vec<Slab>,
    spare_ids: Vec<u32>,
    /// Per class, the slabs that have free blocks.
    partial: [Vec<u32>; CLASSES],
    /// Slab ids of empty chunks.
    empty: Vec<u32>,
    index: HashMap<usize, Entry, BuildHasherDefault<ChunkHasher>>,
    stats: PoolStats,
}

/// A pool of size classes (64 B to 2 MiB, powers of two) over coarse chunks of a
/// [`KfdProvider`].
///
/// A chunk (2 MiB by default, aligned to its size) is taken from the provider when a class
/// has no free block and no empty chunk is kept, and carved into blocks of that class. Freed
/// blocks are reused first; a chunk whose blocks are all free becomes empty and can serve any
/// class next; empty chunks beyond [`PoolParams::retained_chunks`] go back to the provider.
/// So once the working set has been reached, allocating and freeing 64 B – 2 MiB issues no
/// ioctl and no `mmap`: a lock, a hash lookup and a stack push or pop. Allocations above
/// 2 MiB pass through to the provider.
///
/// Blocks are aligned to their class size; the pool never touches the memory (it may be VRAM
/// without a CPU mapping), so its bookkeeping lives on the heap.
pub struct KfdPool {
    provider: KfdProvider,
    params: PoolParams,
    state: Mutex<PoolState>,
}

impl fmt::Debug for KfdPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KfdPool")
            .field("provider", &self.provider)
            .field("params", &self.params)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The class index of a block of `class` bytes (a power of two in range).
fn class_index(class: usize) -> usize {
    (class.trailing_zeros() - POOL_MIN_CLASS.trailing_zeros()) as usize
}

impl KfdPool {
    /// A pool over `provider`'s memory. The chunk size must be a power of two of at least
    /// [`POOL_MAX_CLASS`].
    pub fn new(provider: KfdProvider, params: PoolParams) -> Result<KfdPool> {
        if !params.chunk_size.is_power_of_two() || params.chunk_size < POOL_MAX_CLASS {
            return Err(Error::invalid(format!(
                "pool: the chunk size {} is not a power of two of at least {POOL_MAX_CLASS}",
                params.chunk_size
            )));
        }
        Ok(KfdPool {
            provider,
            params,
            state: Mutex::new(PoolState {
                slabs: Vec::new(),
                spare_ids: Vec::new(),
                partial: Default::default(),
                empty: Vec::new(),
                index: HashMap::default(),
                stats: PoolStats::default(),
            }),
        })
    }

    /// The provider the chunks come from.
    pub fn provider(&self) -> &KfdProvider {
        &self.provider
    }

    /// The parameters the pool was made with.
    pub fn params(&self) -> PoolParams {
        self.params
    }

    /// What the pool holds now.
    pub fn stats(&self) -> PoolStats {
        let st = self.lock();
        PoolStats {
            empty_chunks: st.empty.len(),
            ..st.stats
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `size` bytes aligned to `alignment` (0 or a power of two). A zero size or another
    /// alignment is [`Error::InvalidArgument`]; the provider's errors pass through when a
    /// chunk (or a large allocation) has to be taken.
    pub fn alloc(&self, size: usize, alignment: usize) -> Result<NonNull<u8>> {
        recorded(|| {
            self.provider.check_process()?;
            if size == 0 {
                return Err(Error::invalid("pool alloc: the size must not be zero"));
            }
            if alignment != 0 && !alignment.is_power_of_two() {
                return Err(Error::invalid(format!(
                    "pool alloc: alignment {alignment} is not a power of two"
                )));
            }
            let class = size
                .max(alignment)
                .max(POOL_MIN_CLASS)
                .checked_next_power_of_two()
                .unwrap_or(usize::MAX);
            if class > POOL_MAX_CLASS {
                return self.alloc_large(size, alignment);
            }
            let ci = class_index(class);
            let mut st = self.lock();
            if let Some(ptr) = st.take_block(ci, class) {
                return Ok(ptr);
            }
            let sid = match st.empty.pop() {
                Some(sid) => sid,
                None => {
                    drop(st);
                    let chunk = self
                        .provider
                        .alloc(self.params.chunk_size, self.params.chunk_size)?;
                    st = self.lock();
                    st.stats.provider_allocs += 1;
                    st.add_slab(chunk.as_ptr() as usize, self.params.chunk_size)
                }
            };
            st.assign(sid, ci, class, self.params.chunk_size)?;
            st.take_block(ci, class)
                .ok_or_else(|| Error::invalid("pool: a fresh slab had no block"))
        })
    }

    fn alloc_large(&self, size: usize, alignment: usize) -> Result<NonNull<u8>> {
        let align = alignment.max(self.params.chunk_size);
        let ptr = self.provider.alloc(size, align)?;
        let mut st = self.lock();
        st.index.insert(
            ptr.as_ptr() as usize / self.params.chunk_size,
            Entry::Large(size),
        );
        st.stats.provider_allocs += 1;
        st.stats.large += 1;
        st.stats.in_use += size;
        Ok(ptr)
    }

    /// Frees a block by its pointer. NULL is [`Error::NullPointer`]; a pointer that is not a
    /// live block of this pool (unknown, interior, or already freed) is
    /// [`Error::InvalidArgument`].
    pub fn free(&self, ptr: *mut u8) -> Result<()> {
        recorded(|| {
            if ptr.is_null() {
                return Err(Error::NullPointer("pool free: the pointer is NULL"));
            }
            self.provider.check_process()?;
            let addr = ptr as usize;
            let chunk_size = self.params.chunk_size;
            let key = addr / chunk_size;
            let mut st = self.lock();
            let stray = || {
                Error::invalid(format!(
                    "pool free: {addr:#x} is not a live block of this pool"
                ))
            };
            let release = match st.index.get(&key).copied() {
                None => return Err(stray()),
                Some(Entry::Large(size)) => {
                    if !addr.is_multiple_of(chunk_size) {
                        return Err(stray());
                    }
                    st.index.remove(&key);
                    st.stats.large -= 1;
                    st.stats.in_use -= size;
                    st.stats.provider_frees += 1;
                    drop(st);
                    return self.provider.free(ptr, size);
                }
                Some(Entry::Slab(sid)) => {
                    if !st.free_block(sid, addr) {
                        return Err(stray());
                    }
                    let slab = &st.slabs[sid as usize];
                    if slab.used > 0 {
                        return Ok(());
                    }
                    st.retire(sid);
                    if st.empty.len() <= self.params.retained_chunks {
                        return Ok(());
                    }
                    st.empty.pop().map(|sid| st.drop_slab(sid, chunk_size))
                }
            };
            drop(st);
            match release {
                Some(base) => self.provider.free(base as *mut u8, chunk_size),
                None => Ok(()),
            }
        })
    }

    /// Gives every empty chunk back to the provider.
    pub fn trim(&self) -> Result<()> {
        let chunk_size = self.params.chunk_size;
        let bases: Vec<usize> = {
            let mut st = self.lock();
            let ids = std::mem::take(&mut st.empty);
            ids.into_iter()
                .map(|sid| st.drop_slab(sid, chunk_size))
                .collect()
        };
        bases
            .into_iter()
            .try_for_each(|base| self.provider.free(base as *mut u8, chunk_size))
    }
}

impl PoolState {
    /// A block of class `ci` from a slab with free blocks, if there is one.
    fn take_block(&mut self, ci: usize, class: usize) -> Option<NonNull<u8>> {
        let &sid = self.partial[ci].last()?;
        let slab = &mut self.slabs[sid as usize];
        let block = match slab.free.pop() {
            Some(block) => block,
            None => {
                slab.bump += 1;
                slab.bump - 1
            }
        };
        slab.live[block as usize / 64] |= 1 << (block % 64);
        slab.used += 1;
        let full = slab.used == slab.capacity;
        let ptr = slab.base + block as usize * class;
        if full {
            slab.partial_pos = NOT_PARTIAL;
            self.partial[ci].pop();
        }
        self.stats.in_use += class;
        NonNull::new(ptr as *mut u8)
    }

    /// Frees the block at `addr` of slab `sid`; false when it is not a live block.
    fn free_block(&mut self, sid: u32, addr: usize) -> bool {
        let slab = &mut self.slabs[sid as usize];
        if slab.class == NO_CLASS {
            return false;
        }
        let class = POOL_MIN_CLASS << slab.class;
        let offset = addr - slab.base;
        let block = offset / class;
        if !offset.is_multiple_of(class) || block >= slab.bump as usize {
            return false;
        }
        let (word, bit) = (block / 64, 1u64 << (block % 64));
        if slab.live[word] & bit == 0 {
            return false;
        }
        slab.live[word] &= !bit;
        slab.free.push(block as u32);
        slab.used -= 1;
        self.stats.in_use -= class;
        if slab.partial_pos == NOT_PARTIAL {
            let ci = slab.class as usize;
            slab.partial_pos = self.partial[ci].len() as u32;
            self.partial[ci].push(sid);
        }
        true
    }

    /// Registers a fresh chunk at `base` as an empty slab; returns its id.
    fn add_slab(&mut self, base: usize, chunk_size: usize) -> u32 {
        let slab = Slab {
            base,
            class: NO_CLASS,
            used: 0,
            capacity: 0,
            bump: 0,
            free: Vec::new(),
            live: Vec::new(),
            partial_pos: NOT_PARTIAL,
        };
        let sid = match self.spare_ids.pop() {
            Some(sid) => {
                self.slabs[sid as usize] = slab;
                sid
            }
            None => {
                self.slabs.push(slab);
                self.slabs.len() as u32 - 1
            }
        };
        self.index.insert(base / chunk_size, Entry::Slab(sid));
        self.stats.chunks += 1;
        sid
    }

    /// Gives empty slab `sid` class `ci` and lists it as having free blocks. The slab's
    /// bookkeeping is reserved in full here, so its blocks' allocations and frees never touch
    /// the heap; when that reservation fails the slab goes back to the empty list.
    fn assign(&mut self, sid: u32, ci: usize, class: usize, chunk_size: usize) -> Result<()> {
        let blocks = chunk_size / class;
        let words = blocks.div_ceil(64);
        let slab = &mut self.slabs[sid as usize];
        slab.free.clear();
        slab.live.clear();
        let reserved = slab
            .free
            .try_reserve(blocks)
            .and_then(|()| slab.live.try_reserve(words))
            .and_then(|()| self.partial[ci].try_reserve(1));
        if reserved.is_err() {
            self.empty.push(sid);
            return Err(Error::OutOfHostMemory(
                format!("pool: the bookkeeping of a slab of {blocks} blocks").into(),
            ));
        }
        let slab = &mut self.slabs[sid as usize];
        slab.class = ci as u8;
        slab.used = 0;
        slab.bump = 0;
        slab.capacity = blocks as u32;
        slab.live.resize(words, 0);
        slab.partial_pos = self.partial[ci].len() as u32;
        self.partial[ci].push(sid);
        Ok(())
    }

    /// Takes slab `sid` (all blocks free) off its class and onto the empty list.
    fn retire(&mut self, sid: u32) {
        let slab = &mut self.slabs[sid as usize];
        let ci = slab.class as usize;
        let pos = slab.partial_pos as usize;
        slab.class = NO_CLASS;
        slab.partial_pos = NOT_PARTIAL;
        let list = &mut self.partial[ci];
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            self.slabs[moved as usize].partial_pos = pos as u32;
        }
        self.empty.push(sid);
    }

    /// Forgets empty slab `sid`; returns its chunk's base for the provider to free.
    fn drop_slab(&mut self, sid: u32, chunk_size: usize) -> usize {
        let base = self.slabs[sid as usize].base;
        self.index.remove(&(base / chunk_size));
        self.spare_ids.push(sid);
        self.stats.chunks -= 1;
        self.stats.provider_frees += 1;
        base
    }
}
