//! Address-space reservations: an owned, aligned `PROT_NONE` range of this process's address
//! space, and the fixed mappings placed inside it.
//!
//! Every crate that needs memory at an address of its choosing (a mirrored ring, an SVM
//! buffer aligned for huge pages, a GPU VA kept clear of CPU memory) reserves it through
//! [`Reservation`]; the `unsafe` of `MAP_FIXED` lives here once.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};

/// The system page size.
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// An anonymous `PROT_NONE`, `MAP_NORESERVE` range of this process's address space, released
/// (`munmap`) on drop.
///
/// Owning the range is what makes `MAP_FIXED` inside it sound: nothing else in the process
/// can have been given an address inside a live reservation, so a fixed mapping replaces only
/// what this reservation put there.
///
/// ```
/// use kfd_ioctl::mem::{Reservation, page_size};
///
/// let reservation = Reservation::new(4 * page_size(), 2 << 20)?;
/// assert_eq!(reservation.addr().as_ptr() as usize % (2 << 20), 0);
/// // SAFETY: no reference into the fresh reservation exists.
/// unsafe { reservation.map_anonymous(0, page_size(), false)? };
/// // SAFETY: the first page is now private read-write memory of ours.
/// unsafe { reservation.addr().as_ptr().write(7) };
/// # Ok::<(), kfd_ioctl::Errno>(())
/// ```
#[derive(Debug)]
pub struct Reservation {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: the reservation is a plain address range; nothing about it is tied to a thread.
unsafe impl Send for Reservation {}
// SAFETY: shared access only reads `addr`/`len`; remapping needs `unsafe` and its callers'
// exclusivity (see `map_fixed`).
unsafe impl Sync for Reservation {}

impl Reservation {
    /// Reserves `len` bytes (a non-zero multiple of the page size) at an address aligned to
    /// `align`: a power of two (the page size when smaller) or a multiple of the page size
    /// (UMF asks for alignments such as 3 pages).
    ///
    /// The kernel is asked for `len + align - page` bytes and the unaligned head and the tail
    /// are unmapped. When a trim fails (`ENOMEM` past `vm.max_map_count`, as splitting a
    /// mapping adds one) the whole mapping is released and the errno returned: nothing leaks.
    ///
    /// # Errors
    /// `EINVAL` for a zero or unaligned `len`, or an `align` that is neither a power of two
    /// nor a multiple of the page size;
    /// `ENOMEM` when the sizes overflow; otherwise the errno of `mmap` or of a trim.
    pub fn new(len: usize, align: usize) -> Result<Reservation, Errno> {
        let page = page_size();
        if len == 0
            || !len.is_multiple_of(page)
            || !(align.is_power_of_two() || (align != 0 && align.is_multiple_of(page)))
        {
            return Err(Errno::INVAL);
        }
        let align = align.max(page);
        let extra = align - page;
        let total = len.checked_add(extra).ok_or(Errno::NOMEM)?;
        // SAFETY: a fresh anonymous PROT_NONE mapping at an address the kernel chooses
        // aliases nothing in the process.
        let raw = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                total,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }?;
        let start = raw as usize;
        let addr = start.next_multiple_of(align);
        let end = addr + len;
        if addr > start {
            // SAFETY: the head lies inside the mapping made above, which nothing references.
            if let Err(errno) = unsafe { trim(start, addr - start) } {
                // SAFETY: the whole mapping made above, still whole.
                let _ = unsafe { rustix::mm::munmap(raw, total) };
                return Err(errno);
            }
        }
        if start + total > end {
            // SAFETY: the tail lies inside the mapping made above, which nothing references.
            if let Err(errno) = unsafe { trim(end, start + total - end) } {
                // SAFETY: what is left of the mapping made above: from `addr` to its end.
                let _ = unsafe { rustix::mm::munmap(addr as *mut _, start + total - addr) };
                return Err(errno);
            }
        }
        let addr = NonNull::new(addr as *mut u8).ok_or(Errno::NOMEM)?;
        Ok(Reservation { addr, len })
    }

    /// The first reserved byte.
    pub fn addr(&self) -> NonNull<u8> {
        self.addr
    }

    /// The reserved length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the reservation is empty (never: construction refuses a zero length).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, offset: usize, len: usize) -> Result<*mut std::ffi::c_void, Errno> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr.as_ptr().wrapping_add(offset).cast()),
            _ => Err(Errno::INVAL),
        }
    }

    /// Maps `len` bytes of `fd` from `file_offset` read-write and shared at `offset` inside the
    /// reservation (`MAP_SHARED | MAP_FIXED`), replacing what was there.
    ///
    /// # Errors
    /// `EINVAL` when the range leaves the reservation; otherwise `mmap`'s errno.
    ///
    /// # Safety
    /// No Rust reference into `[offset, offset + len)` of the reservation may be live: the
    /// bytes behind it change.
    pub unsafe fn map_fixed(
        &self,
        offset: usize,
        len: usize,
        fd: BorrowedFd<'_>,
        file_offset: u64,
    ) -> Result<(), Errno> {
        let at = self.check(offset, len)?;
        testing::injected_failure(testing::Point::Map)?;
        // SAFETY: the range lies inside our reservation (checked), which no one else maps
        // into; the caller guarantees no reference into it is live.
        unsafe {
            rustix::mm::mmap(
                at,
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                file_offset,
            )
        }?;
        Ok(())
    }

    /// Maps `len` bytes of fresh zeroed anonymous memory read-write at `offset` inside the
    /// reservation (`MAP_FIXED`; `MAP_SHARED` when `shared`, else `MAP_PRIVATE`), replacing
    /// what was there.
    ///
    /// # Errors
    /// `EINVAL` when the range leaves the reservation; otherwise `mmap`'s errno.
    ///
    /// # Safety
    /// No Rust reference into `[offset, offset + len)` of the reservation may be live: the
    /// bytes behind it change.
    pub unsafe fn map_anonymous(
        &self,
        offset: usize,
        len: usize,
        shared: bool,
    ) -> Result<(), Errno> {
        let at = self.check(offset, len)?;
        testing::injected_failure(testing::Point::Map)?;
        let sharing = if shared {
            MapFlags::SHARED
        } else {
            MapFlags::PRIVATE
        };
        // SAFETY: the range lies inside our reservation (checked), which no one else maps
        // into; the caller guarantees no reference into it is live.
        unsafe {
            rustix::mm::mmap_anonymous(
                at,
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                sharing | MapFlags::FIXED,
            )
        }?;
        Ok(())
    }

    /// Marks `[offset, offset + len)` `MADV_DONTFORK`: a forked child gets no copy of what
    /// is mapped there (the kernel's own advice for device mappings of buffer objects).
    ///
    /// # Errors
    /// `EINVAL` when the range leaves the reservation; otherwise `madvise`'s errno.
    pub fn dont_fork(&self, offset: usize, len: usize) -> Result<(), Errno> {
        let at = self.check(offset, len)?;
        // SAFETY: inside our reservation (checked); MADV_DONTFORK changes only what a future
        // child inherits, never the bytes or the mappings of this process.
        unsafe { rustix::mm::madvise(at, len, rustix::mm::Advice::LinuxDontFork) }
    }

    /// Puts `PROT_NONE` reservation back over `[offset, offset + len)`, dropping whatever was
    /// mapped there but keeping the range reserved.
    ///
    /// # Errors
    /// `EINVAL` when the range leaves the reservation; otherwise `mmap`'s errno.
    ///
    /// # Safety
    /// No Rust reference into the range may be live, and no one may use pointers into it
    /// afterwards.
    pub unsafe fn unmap_to_reserved(&self, offset: usize, len: usize) -> Result<(), Errno> {
        let at = self.check(offset, len)?;
        // SAFETY: inside our reservation (checked); the caller guarantees nothing uses it.
        unsafe {
            rustix::mm::mmap_anonymous(
                at,
                len,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED,
            )
        }?;
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: the range is exactly our reservation; its owners gave up every pointer into
        // it before dropping us. An error cannot be reported from drop, and munmap of a range
        // we own only fails for invalid arguments.
        let _ = unsafe { rustix::mm::munmap(self.addr.as_ptr().cast(), self.len) };
    }
}

/// Unmaps one trim of a fresh reservation, unless a test injected its failure.
///
/// # Safety
/// `[start, start + len)` is part of a mapping the caller made and nothing references.
unsafe fn trim(start: usize, len: usize) -> Result<(), Errno> {
    testing::injected_failure(testing::Point::Trim)?;
    // SAFETY: guaranteed by the caller.
    unsafe { rustix::mm::munmap(start as *mut _, len) }
}

/// Fault injection for tests of the code around reservations: a countdown per thread after
/// which a placement (`map_fixed`, `map_anonymous`) or a trim fails with `ENOMEM`. Only with
/// the `testing` feature (a dev-dependency feature) or in this crate's own tests.
#[doc(hidden)]
pub mod testing {
    use rustix::io::Errno;

    #[cfg(any(test, feature = "testing"))]
    thread_local! {
        static MAP_FAILS_AFTER: std::cell::Cell<Option<usize>> =
            const { std::cell::Cell::new(None) };
        static TRIM_FAILS_AFTER: std::cell::Cell<Option<usize>> =
            const { std::cell::Cell::new(None) };
    }

    /// After `n` more placements on this thread succeed, the next fails (`None`: never).
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_map_after(n: Option<usize>) {
        MAP_FAILS_AFTER.set(n);
    }

    /// After `n` more trims on this thread succeed, the next fails (`None`: never).
    #[cfg(any(test, feature = "testing"))]
    pub fn fail_trim_after(n: Option<usize>) {
        TRIM_FAILS_AFTER.set(n);
    }

    #[cfg(any(test, feature = "testing"))]
    fn countdown(cell: &'static std::thread::LocalKey<std::cell::Cell<Option<usize>>>) -> bool {
        match cell.get() {
            Some(0) => true,
            Some(left) => {
                cell.set(Some(left - 1));
                false
            }
            None => false,
        }
    }

    /// Where a failure can be injected.
    #[derive(Debug, Clone, Copy)]
    pub(super) enum Point {
        /// A placement inside a reservation.
        Map,
        /// A trim of a fresh reservation.
        Trim,
    }

    /// `ENOMEM` when a test armed `point` and its countdown ran out.
    #[inline]
    pub(super) fn injected_failure(point: Point) -> Result<(), Errno> {
        #[cfg(any(test, feature = "testing"))]
        {
            let armed = match point {
                Point::Map => &MAP_FAILS_AFTER,
                Point::Trim => &TRIM_FAILS_AFTER,
            };
            if countdown(armed) {
                return Err(Errno::NOMEM);
            }
        }
        #[cfg(not(any(test, feature = "testing")))]
        let _ = point;
        Ok(())
    }
}
