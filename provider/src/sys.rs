//! The fenced unsafe layer of the provider: owned address-space regions and the mappings and
//! advice placed in them, and fork detection. Every `unsafe` of the provider is here.
//!
//! Soundness rests on ownership: a [`Region`] is a range this process's kernel handed to us
//! (`mmap` without `MAP_FIXED`), so a `MAP_FIXED` mapping or an `madvise` inside it can only
//! replace or discard what the region itself put there, never memory Rust owns elsewhere. The
//! provider hands the range out as raw pointers; what callers build from them is theirs.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kfd_ioctl::GpuId;
use kfd_ioctl::mem::Reservation;
use rustix::io::Errno;
use rustix::mm::Advice;

pub(crate) use kfd_ioctl::mem::page_size;

/// An owned range of this process's address space (a [`Reservation`]), unmapped on drop.
#[derive(Debug)]
pub(crate) struct Region {
    reservation: Reservation,
    /// Set once the whole range is `MADV_DONTFORK`: a forked child has nothing there.
    not_in_children: AtomicBool,
}

impl Region {
    /// Reserves `len` bytes (a multiple of the page size) of address space, `PROT_NONE` and
    /// `MAP_NORESERVE`, at an address that is a multiple of `align` (a power of two or a
    /// multiple of the page size).
    pub(crate) fn reserve(len: usize, align: usize) -> Result<Region, Errno> {
        Ok(Region {
            reservation: Reservation::new(len, align)?,
            not_in_children: AtomicBool::new(false),
        })
    }

    /// Reserves an aligned region and fills it with private anonymous read-write memory.
    pub(crate) fn anonymous(len: usize, align: usize) -> Result<Region, Errno> {
        let region = Region::reserve(len, align)?;
        // SAFETY: the range is exactly the reservation just made, owned by `region` and
        // referenced by nothing.
        unsafe { region.reservation.map_anonymous(0, len, false) }?;
        Ok(region)
    }

    /// Replaces the whole region with a shared read-write mapping of `fd` from `file_offset`
    /// (`MAP_SHARED | MAP_FIXED`).
    pub(crate) fn map_file(&self, fd: BorrowedFd<'_>, file_offset: u64) -> Result<(), Errno> {
        // SAFETY: the range is this region's own; no Rust reference of ours points into it
        // (callers get raw pointers whose contract says the bytes may change), and what was
        // there (the reservation or an earlier mapping of ours) is replaced.
        unsafe { self.reservation.map_fixed(0, self.len(), fd, file_offset) }
    }

    /// The first byte.
    pub(crate) fn addr(&self) -> usize {
        self.reservation.addr().as_ptr() as usize
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.reservation.len()
    }

    /// The region's address as a pointer, `offset` bytes in.
    pub(crate) fn ptr_at(&self, offset: usize) -> NonNull<u8> {
        debug_assert!(offset < self.len());
        // SAFETY: `offset` is inside the region (callers pass offsets of tracked pieces), so
        // the result is a non-null address inside the same mapping.
        unsafe { self.reservation.addr().add(offset) }
    }

    fn range(&self, offset: usize, len: usize) -> Result<*mut std::ffi::c_void, Errno> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => {
                Ok(self.reservation.addr().as_ptr().wrapping_add(offset).cast())
            }
            _ => Err(Errno::INVAL),
        }
    }

    /// `madvise(advice)` on `[offset, offset + len)` of the region (page-aligned offset).
    pub(crate) fn advise(&self, offset: usize, len: usize, advice: Advice) -> Result<(), Errno> {
        let at = self.range(offset, len)?;
        // SAFETY: the range is inside this region. The advice either only changes how the
        // kernel treats the pages (DONTFORK) or discards their contents (FREE, DONTNEED,
        // REMOVE), which is what the provider's purge contract promises callers; no Rust
        // object of ours lives in the region.
        unsafe { rustix::mm::madvise(at, len, advice) }?;
        if advice == Advice::LinuxDontFork && offset == 0 && len == self.len() {
            self.not_in_children.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Lets go of the region in a forked child: unmapped like any region, unless the whole
    /// range is `MADV_DONTFORK`, in which case the child never had it, and the range may
    /// hold the child's own mappings by now.
    pub(crate) fn release_in_forked_child(self) {
        if self.not_in_children.load(Ordering::Relaxed) {
            std::mem::forget(self);
        }
    }

    /// Writes zeros over `[offset, offset + len)` of the region, which must be mapped
    /// read-write.
    pub(crate) fn fill_zero(&self, offset: usize, len: usize) -> Result<(), Errno> {
        let at = self.range(offset, len)?;
        // SAFETY: the range is inside this region and mapped writable (the caller maps it so
        // before asking); no Rust reference of ours points into it.
        unsafe { std::ptr::write_bytes(at.cast::<u8>(), 0, len) };
        Ok(())
    }
}

/// `ALLOC_MEMORY_OF_GPU` with `USERPTR` over the whole of `region` (GPU VA = the region's
/// address), on `gpu_id`.
///
/// The returned buffer object must be freed before `region` is unmapped: the provider's chunks
/// declare the BO before the region, so it drops first.
pub(crate) fn userptr_over(
    kfd: &kfd_ioctl::Kfd,
    gpu_id: GpuId,
    region: &Region,
    flags: kfd_ioctl::abi::AllocMemFlags,
) -> kfd_ioctl::Result<kfd_ioctl::BufferObject> {
    let addr = region.addr() as u64;
    // SAFETY: the region is process memory the provider owns and keeps mapped until the BO
    // is freed (the BO is dropped before the region); no Rust reference of ours points into
    // it, and callers get it as raw pointers whose contract says the GPU writes it.
    unsafe { kfd.alloc_userptr(gpu_id, addr, addr, region.len() as u64, flags) }
}

/// Registers the whole of `region` as an SVM range with `attrs`.
///
/// The registration lasts until the region is unmapped (dropped), which is also how the
/// kernel learns to remove the range.
pub(crate) fn register_svm(
    kfd: &kfd_ioctl::Kfd,
    region: &Region,
    attrs: &kfd_svm::SvmAttrs,
) -> kfd_svm::Result<()> {
    // SAFETY: the region is process memory the provider owns for as long as it stays
    // registered (until it is unmapped); no Rust reference of ours points into it.
    unsafe { attrs.apply(kfd, region.addr() as u64, region.len() as u64) }
}

/// Incremented in every child `fork` creates (a `pthread_atfork` child handler), so a
/// provider can tell in one atomic load that it runs in a forked child.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static FORK_HANDLER: Once = Once::new();

extern "C" fn forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The number of `fork`s between the first process that asked and this one (0 there).
///
/// The handler is installed on the first call; a provider asks when it is created, so every
/// later fork is seen. (`clone`/`vfork` without `fork`'s handlers are not.)
pub(crate) fn fork_generation() -> u64 {
    FORK_HANDLER.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic, which is
        // async-signal-safe, as a child handler must be.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
    FORK_GENERATION.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_honour_alignments_that_are_not_powers_of_two() {
        let page = page_size();
        for align in [page, 3 * page, 2 << 20] {
            let region = Region::anonymous(5 * page, align).unwrap();
            assert_eq!(region.addr() % align, 0, "align {align}");
            assert_eq!(region.len(), 5 * page);
            region.fill_zero(0, 5 * page).unwrap();
            assert_eq!(region.fill_zero(page, 5 * page), Err(Errno::INVAL));
            region.advise(page, page, Advice::LinuxDontNeed).unwrap();
        }
    }
}
