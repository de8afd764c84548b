//! The kernel's argument checks of ALLOC_MEMORY_OF_GPU and MAP_MEMORY_TO_GPU, made before the
//! call so that a bad argument fails early, typed, with the errno the kernel gives and the
//! reason it has.
//!
//! What the kernel checks, and where (Linux `drivers/gpu/drm/amd/`):
//! * `kfd_ioctl_alloc_memory_of_gpu` (`amdkfd/kfd_chardev.c`): `size == 0` is `EINVAL`; a
//!   DOORBELL BO must be the process's doorbell slice and an MMIO_REMAP BO one page, else
//!   `EINVAL`. The GPU address is *not* checked there: it is recorded (`kgd_mem::va`) and
//!   used at every MAP.
//! * `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu` (`amdgpu/amdgpu_amdkfd_gpuvm.c`): a USERPTR BO
//!   needs a CPU address (`!*offset` is `EINVAL`); the size is rounded up to pages
//!   (`aligned_size = PAGE_ALIGN(size)`, after halving it for `AQL_QUEUE_MEM`), and that is
//!   the BO's size from then on (`amdgpu_bo_size`).
//! * `kfd_mem_attach` (same file), at MAP: a BO at GPU address 0 is `EINVAL` ("Invalid VA when
//!   adding BO to VM"); an AQL BO is attached twice, at `va` and at `va + bo_size`.
//! * `amdgpu_vm_verify_parameters`, called by `amdgpu_vm_bo_map` (`amdgpu/amdgpu_vm.c`): the
//!   address must be GPU-page (4 KiB) aligned, `saddr + size` must not overflow and its last
//!   page must lie below the VM's `max_pfn`, else `EINVAL`; an overlap with a mapping already
//!   in the VM is `EINVAL` too (`amdgpu_vm_it_iter_first`).
//!
//! The kernel therefore *accepts* an unaligned GPU address at ALLOC and refuses it at every
//! MAP: such a BO can never be used. This crate refuses it at ALLOC, with the same errno and
//! the reason, so the mistake shows where it is made. Address 0 stays accepted at ALLOC (the
//! kernel's "VRAM without VA" case: a BO only exported or CPU-mapped) and is refused at MAP,
//! before the call. kfd-emu answers the raw ioctls exactly as the kernel does.

use crate::abi::AllocMemFlags;
use crate::error::{Error, IoctlContext, Result};

/// The GPU page size: `AMDGPU_GPU_PAGE_SIZE` (`amdgpu/amdgpu_vm.h`), what MAP's address
/// must be aligned to.
pub const GPU_PAGE_SIZE: u64 = 4096;

/// The size the kernel gives a BO of `size` bytes with `flags`: the request rounded up to
/// CPU pages (`PAGE_ALIGN`), for an `AQL_QUEUE_MEM` BO twice the rounded half (it is
/// allocated at half the size and mapped twice). `None` when rounding overflows.
pub fn bo_size(size: u64, flags: AllocMemFlags, page: u64) -> Option<u64> {
    let round = |n: u64| n.checked_next_multiple_of(page);
    if flags.contains(AllocMemFlags::AQL_QUEUE_MEM) {
        round(size >> 1)?.checked_mul(2)
    } else {
        round(size)
    }
}

/// The checks of ALLOC_MEMORY_OF_GPU this crate makes before the call (module docs), for
/// a BO of `size` bytes at GPU address `va` with `flags` (and `cpu_addr` for USERPTR).
/// Returns the BO's size as the kernel makes it.
pub(crate) fn alloc(
    context: IoctlContext,
    va: u64,
    size: u64,
    flags: AllocMemFlags,
    cpu_addr: u64,
    page: u64,
) -> Result<u64> {
    let refuse = |reason| Error::Rejected {
        ioctl: "ALLOC_MEMORY_OF_GPU",
        context,
        errno: crate::Errno::INVAL,
        reason,
    };
    if size == 0 {
        return Err(refuse("the size is 0 (kfd_ioctl_alloc_memory_of_gpu)"));
    }
    if flags.contains(AllocMemFlags::MMIO_REMAP)
        && !flags.intersects(AllocMemFlags::DOORBELL)
        && size != page
    {
        return Err(refuse(
            "an MMIO_REMAP BO is exactly one page (kfd_ioctl_alloc_memory_of_gpu)",
        ));
    }
    let domain = AllocMemFlags::VRAM | AllocMemFlags::GTT;
    if flags.contains(AllocMemFlags::USERPTR) && !flags.intersects(domain) && cpu_addr == 0 {
        return Err(refuse(
            "a USERPTR BO needs its CPU address (amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu)",
        ));
    }
    if !va.is_multiple_of(GPU_PAGE_SIZE) {
        return Err(refuse(
            "the GPU address is not 4 KiB aligned: the kernel records it, and every \
             MAP_MEMORY_TO_GPU refuses it (amdgpu_vm_verify_parameters)",
        ));
    }
    let Some(bo) = bo_size(size, flags, page) else {
        return Err(refuse("the size rounded up to pages overflows"));
    };
    if va.checked_add(bo).is_none() {
        return Err(refuse(
            "the GPU range wraps past the end of the address space: every \
             MAP_MEMORY_TO_GPU refuses it (amdgpu_vm_verify_parameters)",
        ));
    }
    Ok(bo)
}

/// The checks of MAP_MEMORY_TO_GPU this crate makes before the call (module docs), for a BO
/// at `va` whose mapped footprint is `size` bytes.
pub(crate) fn map(context: IoctlContext, va: u64, size: u64) -> Result<()> {
    let refuse = |reason| Error::Rejected {
        ioctl: "MAP_MEMORY_TO_GPU",
        context,
        errno: crate::Errno::INVAL,
        reason,
    };
    if va == 0 {
        return Err(refuse(
            "the buffer object has no GPU address (allocated at va 0); allocate it at an \
             address to map it (kfd_mem_attach)",
        ));
    }
    if !va.is_multiple_of(GPU_PAGE_SIZE) || va.checked_add(size).is_none() {
        return Err(refuse(
            "the GPU range is not 4 KiB aligned or wraps (amdgpu_vm_verify_parameters)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;
    const VRAM: AllocMemFlags = AllocMemFlags::VRAM.union(AllocMemFlags::WRITABLE);

    fn errno_and_reason(e: Error) -> (crate::Errno, &'static str) {
        match e {
            Error::Rejected { errno, reason, .. } => (errno, reason),
            other => panic!("not a rejection: {other}"),
        }
    }

    /// amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: `aligned_size = PAGE_ALIGN(size)`.
    #[test]
    fn odd_sizes_become_whole_pages_as_the_kernel_rounds_them() {
        let ctx = IoctlContext::default();
        assert_eq!(alloc(ctx, 1 << 40, 4097, VRAM, 0, PAGE).unwrap(), 8192);
        assert_eq!(alloc(ctx, 1 << 40, 1, VRAM, 0, PAGE).unwrap(), 4096);
        assert_eq!(alloc(ctx, 1 << 40, 8192, VRAM, 0, PAGE).unwrap(), 8192);
        // AQL: half the size, page aligned, mapped twice.
        let aql = VRAM | AllocMemFlags::AQL_QUEUE_MEM;
        assert_eq!(alloc(ctx, 1 << 40, 8194, aql, 0, PAGE).unwrap(), 16384);
    }

    /// kfd_ioctl_alloc_memory_of_gpu: `if (args->size == 0) return -EINVAL;`.
    #[test]
    fn size_zero_is_einval() {
        let (errno, reason) = errno_and_reason(
            alloc(IoctlContext::default(), 1 << 40, 0, VRAM, 0, PAGE).unwrap_err(),
        );
        assert_eq!(errno, crate::Errno::INVAL);
        assert!(reason.contains("size is 0"), "{reason}");
    }

    /// amdgpu_vm_verify_parameters: `saddr & AMDGPU_GPU_PAGE_MASK` is EINVAL at every MAP.
    #[test]
    fn an_unaligned_gpu_address_is_refused_at_alloc() {
        let e = alloc(
            IoctlContext::default(),
            (1 << 40) + 123,
            4096,
            VRAM,
            0,
            PAGE,
        );
        let (errno, reason) = errno_and_reason(e.unwrap_err());
        assert_eq!(errno, crate::Errno::INVAL);
        assert!(reason.contains("not 4 KiB aligned"), "{reason}");
    }

    /// The kernel's "VRAM without VA" case (kfd_ioctl_alloc_memory_of_gpu skips the SVM
    /// check for it): accepted at ALLOC, refused at MAP by kfd_mem_attach.
    #[test]
    fn address_zero_is_accepted_at_alloc_and_refused_at_map() {
        let ctx = IoctlContext::default();
        assert_eq!(alloc(ctx, 0, 4096, VRAM, 0, PAGE).unwrap(), 4096);
        let (errno, reason) = errno_and_reason(map(ctx, 0, 4096).unwrap_err());
        assert_eq!(errno, crate::Errno::INVAL);
        assert!(reason.contains("no GPU address"), "{reason}");
        assert!(map(ctx, 1 << 40, 4096).is_ok());
    }

    #[test]
    fn wrapping_ranges_and_bad_special_sizes_are_einval() {
        let ctx = IoctlContext::default();
        let top = !(PAGE - 1);
        assert!(alloc(ctx, top, 8192, VRAM, 0, PAGE).is_err());
        assert!(alloc(ctx, 1 << 40, u64::MAX, VRAM, 0, PAGE).is_err());
        let mmio = AllocMemFlags::MMIO_REMAP | AllocMemFlags::WRITABLE;
        assert!(alloc(ctx, 1 << 40, 8192, mmio, 0, PAGE).is_err());
        assert_eq!(alloc(ctx, 1 << 40, 4096, mmio, 0, PAGE).unwrap(), 4096);
        assert!(alloc(ctx, 1 << 40, 4096, AllocMemFlags::USERPTR, 0, PAGE).is_err());
        assert!(map(ctx, top, 8192).is_err());
        assert!(map(ctx, (1 << 40) + 123, 4096).is_err());
    }
}
