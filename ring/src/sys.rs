//! The fenced mmap layer: an owned `PROT_NONE` address-space reservation and the fixed
//! mappings placed inside it. Every `unsafe` of the crate that touches the address space is
//! here.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;

use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};

/// The system page size.
pub(crate) fn page_size() -> usize {
    rustix::param::page_size()
}

/// An anonymous `PROT_NONE`, `MAP_NORESERVE` range of this process's address space, released
/// (`munmap`) on drop.
///
/// Owning the range is what makes `MAP_FIXED` inside it sound: nothing else in the process
/// can have been given an address inside a live reservation, so a fixed mapping replaces only
/// what this reservation put there.
#[derive(Debug)]
pub(crate) struct Reservation {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: the reservation is a plain address range; nothing about it is tied to a thread.
unsafe impl Send for Reservation {}
// SAFETY: shared access only reads `addr`/`len`; remapping needs `unsafe` and its callers'
// exclusivity (see `map_fixed`).
unsafe impl Sync for Reservation {}

#[cfg(test)]
thread_local! {
    /// Test-only fault injection: the number of `map_fixed` calls on this thread that succeed
    /// before one fails with `ENOMEM`.
    pub(crate) static FAIL_MAP_AFTER: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

impl Reservation {
    /// Reserves `len` bytes (a multiple of the page size) at an address aligned to `align`
    /// (a power of two, at least the page size).
    pub(crate) fn new(len: usize, align: usize) -> Result<Reservation, Errno> {
        debug_assert!(align.is_power_of_two() && len.is_multiple_of(page_size()));
        let extra = align.saturating_sub(page_size());
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
        // SAFETY: both trims lie inside the mapping made above, which nothing references yet.
        unsafe {
            if addr > start {
                rustix::mm::munmap(raw, addr - start)?;
            }
            if start + total > end {
                rustix::mm::munmap(end as *mut _, start + total - end)?;
            }
        }
        let addr = NonNull::new(addr as *mut u8).ok_or(Errno::NOMEM)?;
        Ok(Reservation { addr, len })
    }

    /// The first reserved byte.
    pub(crate) fn addr(&self) -> NonNull<u8> {
        self.addr
    }

    /// The reserved length.
    pub(crate) fn len(&self) -> usize {
        self.len
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
    /// # Safety
    /// No Rust reference into `[offset, offset + len)` of the reservation may be live: the
    /// bytes behind it change.
    pub(crate) unsafe fn map_fixed(
        &self,
        offset: usize,
        len: usize,
        fd: BorrowedFd<'_>,
        file_offset: u64,
    ) -> Result<(), Errno> {
        let at = self.check(offset, len)?;
        #[cfg(test)]
        if let Some(left) = FAIL_MAP_AFTER.get() {
            if left == 0 {
                return Err(Errno::NOMEM);
            }
            FAIL_MAP_AFTER.set(Some(left - 1));
        }
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

    /// Puts `PROT_NONE` reservation back over `[offset, offset + len)`, dropping whatever was
    /// mapped there but keeping the range reserved.
    ///
    /// # Safety
    /// No Rust reference into the range may be live, and no one may use pointers into it
    /// afterwards.
    pub(crate) unsafe fn unmap_to_reserved(&self, offset: usize, len: usize) -> Result<(), Errno> {
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
