//! Memory: apertures, VM acquisition, buffer objects (alloc, free, map, unmap), dmabuf
//! import/export, available memory, memory policy and the scratch backing VA.

abi_consts! {
    registry MEMORY_CONSTS;
    /// `set_memory_policy` `default_policy`/`alternate_policy`: coherent caching.
    KFD_IOC_CACHE_POLICY_COHERENT: u32 = 0, since 1;
    /// `set_memory_policy` `default_policy`/`alternate_policy`: non-coherent caching.
    KFD_IOC_CACHE_POLICY_NONCOHERENT: u32 = 1, since 1;
    /// Length of the legacy `kfd_ioctl_get_process_apertures_args.process_apertures` array.
    NUM_OF_SUPPORTED_GPUS: usize = 7, since 1;
    /// An fd field that holds no fd (e.g. `kfd_criu_bo_bucket.dmabuf_fd`).
    ///
    /// Present in the 1.11 header; absent from the pre-changelog 1.1 header, exact minor
    /// unverified, so 1.11 is the first minor known to have it.
    KFD_INVALID_FD: u32 = 0xffff_ffff, since 11;
    /// Byte offset of `HDP_MEM_FLUSH_CNTL` in the page an `MMIO_REMAP` BO maps.
    KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL: u32 = 0, since 1;
    /// Byte offset of `HDP_REG_FLUSH_CNTL` in the page an `MMIO_REMAP` BO maps.
    KFD_MMIO_REMAP_HDP_REG_FLUSH_CNTL: u32 = 4, since 1;
}

abi_consts! {
    registry ALLOC_FLAG_CONSTS;
    /// Allocation domain: device-local VRAM.
    KFD_IOC_ALLOC_MEM_FLAGS_VRAM: u32 = 1 << 0, since 1;
    /// Allocation domain: system memory mapped through the GART (GTT).
    KFD_IOC_ALLOC_MEM_FLAGS_GTT: u32 = 1 << 1, since 1;
    /// Allocation domain: existing user memory, whose CPU address is passed in `mmap_offset`.
    KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: u32 = 1 << 2, since 1;
    /// Allocation domain: the process's doorbell slice.
    KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL: u32 = 1 << 3, since 1;
    /// Allocation domain: the remapped MMIO (HDP flush) page.
    KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: u32 = 1 << 4, since 1;
    /// Attribute: GPU-writable mapping (C spells it `1 << 31`, an `int`).
    KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE: u32 = 1 << 31, since 1;
    /// Attribute: GPU-executable mapping.
    KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE: u32 = 1 << 30, since 1;
    /// Attribute: must be CPU-visible (large BAR).
    KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC: u32 = 1 << 29, since 1;
    /// Attribute: do not substitute system memory for VRAM.
    KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE: u32 = 1 << 28, since 1;
    /// Attribute: an AQL queue ring (the kernel maps it twice).
    KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM: u32 = 1 << 27, since 1;
    /// Attribute: coherent mapping.
    KFD_IOC_ALLOC_MEM_FLAGS_COHERENT: u32 = 1 << 26, since 1;
    /// Attribute: uncached mapping.
    ///
    /// Absent from the pre-changelog 1.1 header, present in a 1.8 header (the one NVIDIA's
    /// open kernel modules carry); the exact minor is unverified, so 1.8 is the first minor
    /// known to have it.
    KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED: u32 = 1 << 25, since 8;
    /// Attribute: coherent with device-scope atomics promoted to system scope (GFX 9.4.3).
    ///
    /// Landed on top of the 1.14 header (Linux 6.7) without a version bump; Linux 6.6 is 1.14
    /// without it, so 1.15 is the first minor that always has it.
    KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT: u32 = 1 << 24, since 15;
    /// Attribute: physically contiguous VRAM (libhsakmt 1.17 calls it `CONTIGUOUS_BEST_EFFORT`).
    KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS: u32 = 1 << 23, since 16;
}

abi_consts! {
    registry PROC_FLAG_CONSTS;
    /// `set_memory_policy.misc_process_flag`: MFMA high-precision mode for the process.
    KFD_PROC_FLAG_MFMA_HIGH_PRECISION: u32 = 1 << 0, since 18;
}

abi_structs! {
    registry MEMORY_STRUCTS;
    /// The apertures of one GPU in this process (`GET_PROCESS_APERTURES[_NEW]`).
    struct kfd_process_device_apertures [since 1, size 56] {
        /// Base of the LDS aperture (from KFD).
        @0 field lds_base: u64;
        /// Limit of the LDS aperture (from KFD).
        @8 field lds_limit: u64;
        /// Base of the scratch aperture (from KFD).
        @16 field scratch_base: u64;
        /// Limit of the scratch aperture (from KFD).
        @24 field scratch_limit: u64;
        /// Base of the GPUVM aperture (from KFD).
        @32 field gpuvm_base: u64;
        /// Limit of the GPUVM aperture (from KFD).
        @40 field gpuvm_limit: u64;
        /// The GPU (from KFD).
        @48 field gpu_id: u32;
        /// Reserved.
        @52 field pad: u32;
    }

    /// Arguments of the deprecated `AMDKFD_IOC_GET_PROCESS_APERTURES` (at most 7 GPUs).
    struct kfd_ioctl_get_process_apertures_args [since 1, size 400] {
        /// One entry per GPU (from KFD).
        @0 field process_apertures: [kfd_process_device_apertures; NUM_OF_SUPPORTED_GPUS];
        /// Number of entries filled, 1..=7 (from KFD).
        @392 field num_of_nodes: u32;
        /// Reserved.
        @396 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`.
    struct kfd_ioctl_get_process_apertures_new_args [since 1, size 16] {
        /// User pointer to a `kfd_process_device_apertures` array (to KFD).
        @0 field kfd_process_device_apertures_ptr: u64;
        /// In: capacity of the array (0 queries the count); out: entries filled or needed.
        @8 field num_of_nodes: u32;
        /// Reserved.
        @12 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_ACQUIRE_VM`: adopt a DRM fd's VM as this process's GPU VM.
    struct kfd_ioctl_acquire_vm_args [since 1, size 8] {
        /// An amdgpu DRM fd (to KFD).
        @0 field drm_fd: u32;
        /// The GPU (to KFD).
        @4 field gpu_id: u32;
    }

    /// Arguments of `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
    struct kfd_ioctl_alloc_memory_of_gpu_args [since 1, size 40] {
        /// GPU VA every later mapping uses (to KFD).
        @0 field va_addr: u64;
        /// Size in bytes (to KFD).
        @8 field size: u64;
        /// Buffer handle (from KFD).
        @16 field handle: u64;
        /// To KFD: CPU address of a USERPTR; from KFD: mmap offset on the render node.
        @24 field mmap_offset: u64;
        /// The GPU (to KFD).
        @32 field gpu_id: u32;
        /// `KFD_IOC_ALLOC_MEM_FLAGS_*` (to KFD).
        @36 field flags: u32;
    }

    /// Arguments of `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
    struct kfd_ioctl_free_memory_of_gpu_args [since 1, size 8] {
        /// Buffer handle from ALLOC or IMPORT (to KFD).
        @0 field handle: u64;
    }

    /// Arguments of `AMDKFD_IOC_MAP_MEMORY_TO_GPU`.
    struct kfd_ioctl_map_memory_to_gpu_args [since 1, size 24] {
        /// Buffer handle (to KFD).
        @0 field handle: u64;
        /// User pointer to a `u32` gpu_id array (to KFD).
        @8 field device_ids_array_ptr: u64;
        /// Length of that array (to KFD).
        @16 field n_devices: u32;
        /// In: entries already mapped (start at 0); out: entries mapped.
        @20 field n_success: u32;
    }

    /// Arguments of `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`.
    struct kfd_ioctl_unmap_memory_from_gpu_args [since 1, size 24] {
        /// Buffer handle (to KFD).
        @0 field handle: u64;
        /// User pointer to a `u32` gpu_id array (to KFD).
        @8 field device_ids_array_ptr: u64;
        /// Length of that array (to KFD).
        @16 field n_devices: u32;
        /// In: entries already unmapped (start at 0); out: entries unmapped.
        @20 field n_success: u32;
    }

    /// Arguments of `AMDKFD_IOC_GET_DMABUF_INFO`.
    struct kfd_ioctl_get_dmabuf_info_args [since 1, size 32] {
        /// Size of the buffer (from KFD).
        @0 field size: u64;
        /// User pointer for the metadata, may be 0 (to KFD).
        @8 field metadata_ptr: u64;
        /// In: capacity of the metadata buffer; out: metadata size.
        @16 field metadata_size: u32;
        /// The GPU that owns the buffer (from KFD).
        @20 field gpu_id: u32;
        /// `KFD_IOC_ALLOC_MEM_FLAGS_*` of the buffer (from KFD).
        @24 field flags: u32;
        /// The dmabuf (to KFD).
        @28 field dmabuf_fd: u32;
    }

    /// Arguments of `AMDKFD_IOC_IMPORT_DMABUF`.
    struct kfd_ioctl_import_dmabuf_args [since 1, size 24] {
        /// GPU VA for the import (to KFD).
        @0 field va_addr: u64;
        /// Buffer handle (from KFD).
        @8 field handle: u64;
        /// The GPU (to KFD).
        @16 field gpu_id: u32;
        /// The dmabuf (to KFD).
        @20 field dmabuf_fd: u32;
    }

    /// Arguments of `AMDKFD_IOC_EXPORT_DMABUF`.
    struct kfd_ioctl_export_dmabuf_args [since 12, size 16] {
        /// Buffer handle (to KFD).
        @0 field handle: u64;
        /// Open flags of the new fd, e.g. `O_CLOEXEC | O_RDWR` (to KFD).
        @8 field flags: u32;
        /// The new dmabuf fd (from KFD).
        @12 field dmabuf_fd: u32;
    }

    /// Arguments of `AMDKFD_IOC_AVAILABLE_MEMORY`.
    struct kfd_ioctl_get_available_memory_args [since 9, size 16] {
        /// Bytes of VRAM still available to this process (from KFD).
        @0 field available: u64;
        /// The GPU (to KFD).
        @8 field gpu_id: u32;
        /// Reserved.
        @12 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_SET_MEMORY_POLICY`.
    struct kfd_ioctl_set_memory_policy_args [since 1, size 32] {
        /// Base of the alternate aperture (to KFD).
        @0 field alternate_aperture_base: u64;
        /// Size of the alternate aperture (to KFD).
        @8 field alternate_aperture_size: u64;
        /// The GPU (to KFD).
        @16 field gpu_id: u32;
        /// `KFD_IOC_CACHE_POLICY_*` (to KFD).
        @20 field default_policy: u32;
        /// `KFD_IOC_CACHE_POLICY_*` of the alternate aperture (to KFD).
        @24 field alternate_policy: u32;
        /// `KFD_PROC_FLAG_*` (to KFD); named `pad` before 1.18.
        @28 field misc_process_flag: u32, since 18;
    }

    /// Arguments of `AMDKFD_IOC_SET_SCRATCH_BACKING_VA`.
    struct kfd_ioctl_set_scratch_backing_va_args [since 1, size 16] {
        /// GPU VA of the scratch backing memory (to KFD).
        @0 field va_addr: u64;
        /// The GPU (to KFD).
        @8 field gpu_id: u32;
        /// Reserved.
        @12 field pad: u32;
    }
}
