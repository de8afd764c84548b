//! [`SvmBuffer`]: anonymous memory this crate maps, registers as an SVM range and unmaps.
//!
//! Unsafe here: the placement of the buffer's memory in its own reservation (kfd-ioctl's
//! [`Reservation`]), the volatile view of it, and the SET_ATTR calls on it, all sound because
//! the buffer owns the mapping.

use std::fmt;

use kfd_ioctl::mem::{Reservation, page_size};
use kfd_ioctl::{Errno, GpuId, Kfd};
use vm_memory::{Bytes, VolatileSlice};

use crate::attrs::{SvmAttrs, SvmRangeInfo, get_attrs};
use crate::error::{Error, RangeProblem, Result};
use crate::location::Location;

/// 2 MiB: the default SVM granule (2^9 pages) and the x86-64 huge page size.
pub const HUGE_ALIGN: usize = 2 << 20;

/// How an [`SvmBuffer`] maps its memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapOptions {
    /// `MAP_SHARED` instead of `MAP_PRIVATE`. HMM cannot migrate shared pages to VRAM, so they
    /// stay in system memory whatever the attributes say (the GPU still reaches them there).
    pub shared: bool,
    /// Align the start to [`HUGE_ALIGN`], so the kernel's default granule and transparent huge
    /// pages line up with the buffer.
    pub huge_aligned: bool,
}

/// Anonymous memory that is also an SVM range: one pointer valid on the CPU and, as its
/// attributes allow, on every GPU of the process.
///
/// The buffer owns the mapping, so registering it and changing its attributes are safe. Its
/// bytes are memory a GPU (and, for a shared mapping, a forked child) may write at any time, so
/// the safe way in and out is volatile: [`SvmBuffer::as_volatile_slice`] (with
/// [`vm_memory::Bytes`]), [`SvmBuffer::copy_in`] and [`SvmBuffer::copy_out`]. Holding a Rust
/// reference into it is unsafe: [`SvmBuffer::as_slice`] and [`SvmBuffer::as_mut_slice`] say
/// what the caller rules out.
///
/// Dropping the buffer unmaps it. There is no "unregister" ioctl: the kernel's MMU notifier
/// sees the unmap, unmaps the pages from every GPU, frees any VRAM copy and removes the SVM
/// range (the removal is deferred to the next SVM ioctl or allocation, which flushes it). So
/// the unmap is the whole teardown, and it happens before the buffer's [`Kfd`] handle is
/// released.
///
/// ```no_run
/// use kfd_ioctl::Kfd;
/// use kfd_svm::{Access, Location, SvmAttrs, SvmBuffer};
///
/// let kfd = Kfd::open()?;
/// # let gpu = kfd_svm::GpuId(0x1a2b);
/// let attrs = SvmAttrs::new()
///     .preferred_location(Location::Gpu(gpu))
///     .access(gpu, Access::Access);
/// let mut buf = SvmBuffer::new(&kfd, 64 << 20, &attrs)?;
/// buf.copy_in(0, b"hello, GPU")?;
/// // Or any volatile access through vm-memory's `Bytes`.
/// use vm_memory::Bytes;
/// buf.as_volatile_slice().write_obj(7u64, 64)?;
/// buf.prefetch(Location::Gpu(gpu))?;
/// assert_eq!(buf.attrs(&[gpu])?.preferred_location, Location::Gpu(gpu));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SvmBuffer {
    /// First, so it is unmapped (which is also how the kernel learns to drop the SVM range)
    /// before the last `Kfd` clone may close `/dev/kfd`.
    memory: Reservation,
    kfd: Kfd,
    len: usize,
    requested: SvmAttrs,
}

impl fmt::Debug for SvmBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SvmBuffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("requested", &self.requested)
            .finish()
    }
}

// SAFETY: the buffer is plain process memory owned by this value; nothing about it is tied to
// the thread that created it.
unsafe impl Send for SvmBuffer {}
// SAFETY: safe access to the memory from `&self` is volatile (`VolatileSlice`), which tolerates
// concurrent writers (other threads, the GPU) as it must anyway; the slice accessors are unsafe
// and make their caller rule out other writers; the ioctls take no Rust reference into it.
unsafe impl Sync for SvmBuffer {}

impl SvmBuffer {
    /// Maps `len` bytes (rounded up to whole pages) of private anonymous memory and registers
    /// them with `attrs` in one SET_ATTR.
    pub fn new(kfd: &Kfd, len: usize, attrs: &SvmAttrs) -> Result<SvmBuffer> {
        SvmBuffer::with_options(kfd, len, attrs, MapOptions::default())
    }

    /// [`SvmBuffer::new`] with a choice of mapping.
    pub fn with_options(
        kfd: &Kfd,
        len: usize,
        attrs: &SvmAttrs,
        options: MapOptions,
    ) -> Result<SvmBuffer> {
        if len == 0 {
            return Err(Error::Range {
                start: 0,
                size: 0,
                problem: RangeProblem::ZeroSize,
            });
        }
        let page = page_size();
        let len = len.checked_next_multiple_of(page).ok_or(Error::Mmap {
            len,
            errno: Errno::NOMEM,
        })?;
        let memory = map_anonymous(len, options)?;
        let buffer = SvmBuffer {
            memory,
            kfd: kfd.clone(),
            len,
            requested: attrs.clone(),
        };
        // SAFETY: the range is the mapping made above, owned by `buffer` and referenced by
        // nothing else; it stays mapped until `buffer` drops, and every way of reaching its
        // bytes through `buffer` is either a copy or an unsafe fn that states the GPU rule.
        unsafe { attrs.apply(kfd, buffer.addr(), buffer.len as u64) }?;
        Ok(buffer)
    }

    /// The start of the buffer, as a pointer.
    pub fn as_ptr(&self) -> *mut u8 {
        self.memory.addr().as_ptr()
    }

    /// The start of the buffer, as the address SVM calls take.
    pub fn addr(&self) -> u64 {
        self.memory.addr().as_ptr() as u64
    }

    /// The length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty (never: construction refuses a zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer's bytes as memory another agent may write at any time: volatile reads,
    /// writes and copies through [`vm_memory::Bytes`] and [`VolatileSlice`]'s methods. Bytes a
    /// GPU writes meanwhile may be seen old or new; wherever the pages are, a CPU access
    /// faults them back to system memory.
    pub fn as_volatile_slice(&self) -> VolatileSlice<'_> {
        // SAFETY: `ptr..ptr + len` is the mapping this value owns, valid for the slice's
        // lifetime (it borrows `self`, whose drop unmaps). Safe code reaches the bytes only
        // through volatile accesses; the slice accessors are unsafe and make their caller rule
        // out every other writer.
        unsafe { VolatileSlice::new(self.memory.addr().as_ptr(), self.len) }
    }

    /// The buffer's bytes as a slice.
    ///
    /// # Safety
    /// Nothing may write the buffer while the slice is alive: no GPU (a GPU write would change
    /// memory behind a shared reference), no other thread (through [`SvmBuffer::copy_in`] or
    /// [`SvmBuffer::as_volatile_slice`] on a shared `&SvmBuffer`), and, for a shared mapping, no
    /// process that shares it. Reading from the CPU is otherwise fine wherever the pages are:
    /// a page in VRAM migrates back on the CPU fault.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes owned by `self`; the caller rules out
        // every writer for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.memory.addr().as_ptr(), self.len) }
    }

    /// The buffer's bytes as a mutable slice.
    ///
    /// # Safety
    /// Nothing else may read or write the buffer while the slice is alive: no GPU and, for a
    /// shared mapping, no process that shares it.
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` writable bytes owned by `self`, borrowed mutably; the
        // caller rules out GPU access for the slice's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.memory.addr().as_ptr(), self.len) }
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.out_of_bounds(offset, len)),
        }
    }

    /// Copies `data` into the buffer at `offset` (volatile writes).
    pub fn copy_in(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        self.as_volatile_slice()
            .write_slice(data, offset)
            .map_err(|_| self.out_of_bounds(offset, data.len()))
    }

    /// Copies `out.len()` bytes at `offset` out of the buffer (volatile reads). Bytes a GPU
    /// writes during the copy may be seen old or new.
    pub fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        self.as_volatile_slice()
            .read_slice(out, offset)
            .map_err(|_| self.out_of_bounds(offset, out.len()))
    }

    fn out_of_bounds(&self, offset: usize, len: usize) -> Error {
        Error::OutOfBounds {
            offset,
            len,
            buffer_len: self.len,
        }
    }

    /// Applies `attrs` to the whole buffer in one SET_ATTR.
    pub fn set_attrs(&mut self, attrs: &SvmAttrs) -> Result<()> {
        // SAFETY: the buffer owns the range for as long as it is registered, and `&mut self`
        // rules out a live slice into it.
        unsafe { attrs.apply(&self.kfd, self.addr(), self.len as u64) }?;
        self.requested = std::mem::take(&mut self.requested).merge(attrs);
        Ok(())
    }

    /// Migrates the whole buffer to `to` now (a SET_ATTR of `PREFETCH_LOC`).
    pub fn prefetch(&mut self, to: Location) -> Result<()> {
        self.set_attrs(&SvmAttrs::new().prefetch_location(to))
    }

    /// GET_ATTR over the whole buffer, with an access query for each GPU of `gpus`.
    pub fn attrs(&self, gpus: &[impl Into<GpuId> + Copy]) -> Result<SvmRangeInfo> {
        get_attrs(&self.kfd, self.addr(), self.len as u64, gpus)
    }

    /// Every attribute this buffer was given (at creation, then by [`SvmBuffer::set_attrs`]
    /// and [`SvmBuffer::prefetch`]), later ones winning: the user-side mirror of what was set.
    /// The kernel may report more (defaults for what was never set, GET's intersection rules).
    pub fn requested(&self) -> &SvmAttrs {
        &self.requested
    }

    /// The [`Kfd`] handle the buffer is registered through.
    pub fn kfd(&self) -> &Kfd {
        &self.kfd
    }
}

/// Maps `len` bytes (a multiple of the page size) of anonymous read-write memory, aligned as
/// `options` ask, inside a reservation of its own (unmapped when it drops).
fn map_anonymous(len: usize, options: MapOptions) -> Result<Reservation> {
    let align = if options.huge_aligned {
        HUGE_ALIGN
    } else {
        page_size()
    };
    let memory = Reservation::new(len, align).map_err(|errno| Error::Mmap { len, errno })?;
    // SAFETY: the whole fresh reservation, which nothing references yet.
    unsafe { memory.map_anonymous(0, len, options.shared) }
        .map_err(|errno| Error::Mmap { len, errno })?;
    Ok(memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri maps only private anonymous memory")]
    fn mappings_are_aligned_as_asked_and_usable_end_to_end() {
        for options in [
            MapOptions::default(),
            MapOptions {
                shared: true,
                huge_aligned: true,
            },
            MapOptions {
                shared: false,
                huge_aligned: true,
            },
        ] {
            let page = page_size();
            let len = 3 * page;
            let memory = map_anonymous(len, options).unwrap();
            let ptr = memory.addr();
            let addr = ptr.as_ptr() as usize;
            let align = if options.huge_aligned {
                HUGE_ALIGN
            } else {
                page
            };
            assert_eq!(addr % align, 0, "{options:?}");
            // SAFETY: the test's own fresh mapping of `len` bytes, used here only.
            unsafe {
                ptr.as_ptr().write(1);
                ptr.as_ptr().add(len - 1).write(7);
                assert_eq!(ptr.as_ptr().add(len - 1).read(), 7);
            }
        }
    }
}
