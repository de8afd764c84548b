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

use rustix::io::Errno;
use rustix::mm::{Advice, MapFlags, ProtFlags};

/// The system page size.
pub(crate) fn page_size() -> usize {
    rustix::param::page_size()
}

/// An owned range of this process's address space, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Region {
    addr: NonNull<u8>,
    len: usize,
    /// Set once the whole range is `MADV_DONTFORK`: a forked child has nothing there.
    not_in_children: AtomicBool,
}

// SAFETY: a region is an address range; nothing about it is tied to the creating thread.
unsafe impl Send for Region {}
// SAFETY: `&self` methods only read `addr`/`len` or issue system calls on the range whose
// effect on its contents is the provider's documented contract (purges, fills).
unsafe impl Sync for Region {}

impl Region {
    /// Reserves `len` bytes (a multiple of the page size) of address space, `PROT_NONE` and
    /// `MAP_NORESERVE`, at an address that is a multiple of `align` (a multiple of the page
    /// size, not necessarily a power of two).
    pub(crate) fn reserve(len: usize, align: usize) -> Result<Region, Errno> {
        let page = page_size();
        debug_assert!(len > 0 && len.is_multiple_of(page) && align.is_multiple_of(page));
        let slack = align.max(page) - page;
        let total = len.checked_add(slack).ok_or(Errno::NOMEM)?;
        // SAFETY: a fresh anonymous PROT_NONE mapping at an address the kernel chooses aliases
        // nothing in the process.
        let raw = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                total,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }? as usize;
        let start = raw.next_multiple_of(align.max(page));
        let end = start + len;
        // SAFETY: both trims lie inside the mapping made above, which nothing references.
        unsafe {
            if start > raw {
                let _ = rustix::mm::munmap(raw as *mut _, start - raw);
            }
            if raw + total > end {
                let _ = rustix::mm::munmap(end as *mut _, raw + total - end);
            }
        }
        let addr = NonNull::new(start as *mut u8).ok_or(Errno::NOMEM)?;
        Ok(Region {
            addr,
            len,
            not_in_children: AtomicBool::new(false),
        })
    }

    /// Reserves an aligned region and fills it with private anonymous read-write memory.
    pub(crate) fn anonymous(len: usize, align: usize) -> Result<Region, Errno> {
        let region = Region::reserve(len, align)?;
        // SAFETY: the fixed range is exactly the reservation just made, owned by `region` and
        // referenced by nothing.
        unsafe {
            rustix::mm::mmap_anonymous(
                region.addr.as_ptr().cast(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::FIXED,
            )
        }?;
        Ok(region)
    }

    /// Replaces the whole region with a shared read-write mapping of `fd` from `file_offset`
    /// (`MAP_SHARED | MAP_FIXED`).
    pub(crate) fn map_file(&self, fd: BorrowedFd<'_>, file_offset: u64) -> Result<(), Errno> {
        // SAFETY: the range is this region's own, which no other mapping or Rust object
        // occupies; what was there (the reservation or an earlier mapping of ours) is replaced.
        unsafe {
            rustix::mm::mmap(
                self.addr.as_ptr().cast(),
                self.len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                file_offset,
            )
        }?;
        Ok(())
    }

    /// The first byte.
    pub(crate) fn addr(&self) -> usize {
        self.addr.as_ptr() as usize
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The region's address as a pointer, `offset` bytes in.
    pub(crate) fn ptr_at(&self, offset: usize) -> NonNull<u8> {
        debug_assert!(offset < self.len);
        // SAFETY: `offset` is inside the region (callers pass offsets of tracked pieces), so
        // the result is a non-null address inside the same mapping.
        unsafe { self.addr.add(offset) }
    }

    fn range(&self, offset: usize, len: usize) -> Result<*mut std::ffi::c_void, Errno> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr.as_ptr().wrapping_add(offset).cast()),
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
        if advice == Advice::LinuxDontFork && offset == 0 && len == self.len {
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

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the range is exactly this region, which nothing of ours references past
        // `self`. An error could only come from bad arguments, which ownership rules out.
        let _ = unsafe { rustix::mm::munmap(self.addr.as_ptr().cast(), self.len) };
    }
}

/// `ALLOC_MEMORY_OF_GPU` with `USERPTR` over the whole of `region` (GPU VA = the region's
/// address), on `gpu_id`.
///
/// The returned buffer object must be freed before `region` is unmapped: the provider's chunks
/// declare the BO before the region, so it drops first.
pub(crate) fn userptr_over(
    kfd: &kfd_ioctl::Kfd,
    gpu_id: u32,
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
