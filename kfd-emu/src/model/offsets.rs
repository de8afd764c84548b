//! The kernel's mmap offsets, as numbers: `KFD_MMAP_*` (`kfd_priv.h`, kernel-internal, not
//! uapi) for `/dev/kfd`, and a DRM vma-manager-like allocator (`drm_vma_manager.h`, `drm_mm`)
//! for buffer objects. A leaf: [`mmap`](super::mmap) decides mappings with these.

use std::collections::BTreeMap;

use super::memory::{PAGE_SIZE, Slices};

/// `KFD_MMAP_TYPE_MASK`: the top two bits of a `/dev/kfd` offset.
pub(super) const KFD_MMAP_TYPE_MASK: u64 = 0x3 << 62;
/// `KFD_MMAP_TYPE_DOORBELL`.
pub(super) const KFD_MMAP_TYPE_DOORBELL: u64 = 0x3 << 62;
/// `KFD_MMAP_TYPE_EVENTS`: what CREATE_EVENT returns as `event_page_offset`.
pub(super) const KFD_MMAP_TYPE_EVENTS: u64 = 0x2 << 62;
/// `KFD_MMAP_TYPE_RESERVED_MEM` (the CWSR pages of APUs).
pub(super) const KFD_MMAP_TYPE_RESERVED_MEM: u64 = 0x1 << 62;
/// `KFD_MMAP_TYPE_MMIO`.
pub(super) const KFD_MMAP_TYPE_MMIO: u64 = 0;
/// `KFD_MMAP_GPU_ID_SHIFT`.
pub(super) const KFD_MMAP_GPU_ID_SHIFT: u32 = 46;
/// `KFD_MMAP_GPU_ID_MASK`: `KFD_GPU_ID_HASH_WIDTH` (16) bits from the shift.
pub(super) const KFD_MMAP_GPU_ID_MASK: u64 = ((1 << 16) - 1) << KFD_MMAP_GPU_ID_SHIFT;
/// `KFD_CWSR_TBA_TMA_SIZE`: what a `RESERVED_MEM` mapping must be.
pub(super) const KFD_CWSR_TBA_TMA_SIZE: u64 = 2 * PAGE_SIZE;

/// `DRM_FILE_PAGE_OFFSET_START`, in pages: the first vma-manager offset is 4 GiB.
pub(super) const DRM_FILE_PAGE_OFFSET_START: u64 = (0xFFFF_FFFF >> 12) + 1;
/// `DRM_FILE_PAGE_OFFSET_SIZE`, in pages.
pub(super) const DRM_FILE_PAGE_OFFSET_SIZE: u64 = (0xFFFF_FFFF >> 12) * 256;

/// `KFD_MMAP_GPU_ID(gpu_id)`.
pub(super) fn kfd_mmap_gpu_id(gpu_id: u32) -> u64 {
    (u64::from(gpu_id) << KFD_MMAP_GPU_ID_SHIFT) & KFD_MMAP_GPU_ID_MASK
}

/// The `mmap_offset` ALLOC returns for an MMIO-remap BO: `KFD_MMAP_TYPE_MMIO |
/// KFD_MMAP_GPU_ID(gpu_id)` (`kfd_ioctl_alloc_memory_of_gpu`).
pub(super) fn mmio_offset(gpu_id: u32) -> u64 {
    KFD_MMAP_TYPE_MMIO | kfd_mmap_gpu_id(gpu_id)
}

/// `get_order(size)`: the power of two of pages that holds `size` bytes.
pub(super) fn get_order(size: u64) -> u32 {
    let pages = size.div_ceil(PAGE_SIZE).max(1);
    pages.next_power_of_two().trailing_zeros()
}

/// One DRM device's vma offset manager: which GEM object (backing) each node maps.
#[derive(Debug)]
pub(super) struct VmaSpace {
    free: Slices,
    /// Node start (bytes) → (length in bytes, backing id).
    nodes: BTreeMap<u64, (u64, u64)>,
}

impl VmaSpace {
    /// The empty address space `[DRM_FILE_PAGE_OFFSET_START, + DRM_FILE_PAGE_OFFSET_SIZE)`.
    pub(super) fn new() -> VmaSpace {
        let start = DRM_FILE_PAGE_OFFSET_START * PAGE_SIZE;
        VmaSpace {
            free: Slices::new(start, start + DRM_FILE_PAGE_OFFSET_SIZE * PAGE_SIZE),
            nodes: BTreeMap::new(),
        }
    }

    /// `drm_vma_offset_add`: a node of `size` bytes (page aligned) for `backing`.
    pub(super) fn add(&mut self, size: u64, backing: u64) -> Option<u64> {
        let start = self.free.alloc(size)?;
        self.nodes.insert(start, (size, backing));
        Some(start)
    }

    /// `drm_vma_offset_remove`.
    pub(super) fn remove(&mut self, start: u64) {
        if let Some((size, _)) = self.nodes.remove(&start) {
            self.free.free(start, size);
        }
    }

    /// `drm_vma_offset_lookup_locked`: the node `[offset, offset + len)` lies in, as (start,
    /// backing).
    pub(super) fn lookup(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let (&start, &(size, backing)) = self.nodes.range(..=offset).next_back()?;
        let end = offset.checked_add(len)?;
        (end <= start + size).then_some((start, backing))
    }
}
