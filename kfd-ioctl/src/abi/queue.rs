//! User-mode queues: creation, update, CU masks, wave state, GWS, the trap handler, and the
//! clock and tiling queries that come with them.

abi_consts! {
    registry QUEUE_CONSTS;
    /// `kfd_ioctl_create_queue_args.queue_type`: a compute (PM4) queue.
    KFD_IOC_QUEUE_TYPE_COMPUTE: u32 = 0x0, since 1;
    /// `queue_type`: an SDMA queue.
    KFD_IOC_QUEUE_TYPE_SDMA: u32 = 0x1, since 1;
    /// `queue_type`: an AQL compute queue.
    KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: u32 = 0x2, since 1;
    /// `queue_type`: an SDMA queue on an XGMI engine.
    KFD_IOC_QUEUE_TYPE_SDMA_XGMI: u32 = 0x3, since 1;
    /// `queue_type`: an SDMA queue on the engine named by `sdma_engine_id`.
    KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID: u32 = 0x4, since 17;
    /// Largest `queue_percentage`.
    KFD_MAX_QUEUE_PERCENTAGE: u32 = 100, since 1;
    /// Largest `queue_priority`.
    KFD_MAX_QUEUE_PRIORITY: u32 = 15, since 1;
    /// Smallest `ring_size` the kernel accepts, in bytes.
    ///
    /// Mainline headers have it from 1.18 (the released 1.17 header lacks it); Linux 6.1.y
    /// stable backported it into its 1.11 header.
    KFD_MIN_QUEUE_RING_SIZE: u32 = 1024, since 18;
}

abi_structs! {
    registry QUEUE_STRUCTS;
    /// Arguments of `AMDKFD_IOC_CREATE_QUEUE`.
    ///
    /// 88 bytes before KFD 1.17; the kernel takes the size from the caller's command word, so
    /// an 88-byte call still works on newer kernels.
    struct kfd_ioctl_create_queue_args [since 1, size 96 since 17, was 88 since 1] {
        /// GPU VA of the ring (to KFD).
        @0 field ring_base_address: u64;
        /// GPU VA of the write pointer (to KFD).
        @8 field write_pointer_address: u64;
        /// GPU VA of the read pointer (to KFD).
        @16 field read_pointer_address: u64;
        /// mmap offset of the queue's doorbell on `/dev/kfd` (from KFD).
        @24 field doorbell_offset: u64;
        /// Ring size in bytes (to KFD).
        @32 field ring_size: u32;
        /// Target GPU (to KFD).
        @36 field gpu_id: u32;
        /// `KFD_IOC_QUEUE_TYPE_*` (to KFD).
        @40 field queue_type: u32;
        /// Share of the GPU, 0..=`KFD_MAX_QUEUE_PERCENTAGE` (to KFD).
        @44 field queue_percentage: u32;
        /// Priority, 0..=`KFD_MAX_QUEUE_PRIORITY` (to KFD).
        @48 field queue_priority: u32;
        /// The new queue's id (from KFD).
        @52 field queue_id: u32;
        /// GPU VA of the end-of-pipe buffer (to KFD).
        @56 field eop_buffer_address: u64;
        /// Size of the end-of-pipe buffer (to KFD).
        @64 field eop_buffer_size: u64;
        /// GPU VA of the context save/restore area (to KFD).
        @72 field ctx_save_restore_address: u64;
        /// Size of the context save/restore area (to KFD).
        @80 field ctx_save_restore_size: u32;
        /// Size of the control stack (to KFD).
        @84 field ctl_stack_size: u32;
        /// SDMA engine for `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID` (to KFD).
        @88 field sdma_engine_id: u32, since 17;
        /// Size of the metadata ring that follows the ring (to KFD); `pad` in 1.17–1.21.
        @92 field metadata_ring_size: u32, since 22;
    }

    /// Arguments of `AMDKFD_IOC_DESTROY_QUEUE`.
    struct kfd_ioctl_destroy_queue_args [since 1, size 8] {
        /// The queue (to KFD).
        @0 field queue_id: u32;
        /// Reserved.
        @4 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_UPDATE_QUEUE`.
    struct kfd_ioctl_update_queue_args [since 1, size 24] {
        /// New ring GPU VA (to KFD).
        @0 field ring_base_address: u64;
        /// The queue (to KFD).
        @8 field queue_id: u32;
        /// New ring size in bytes (to KFD).
        @12 field ring_size: u32;
        /// New share of the GPU (to KFD).
        @16 field queue_percentage: u32;
        /// New priority (to KFD).
        @20 field queue_priority: u32;
    }

    /// Arguments of `AMDKFD_IOC_SET_CU_MASK`.
    struct kfd_ioctl_set_cu_mask_args [since 1, size 16] {
        /// The queue (to KFD).
        @0 field queue_id: u32;
        /// Number of bits in the mask (to KFD).
        @4 field num_cu_mask: u32;
        /// User pointer to the `u32` mask words (to KFD).
        @8 field cu_mask_ptr: u64;
    }

    /// Arguments of `AMDKFD_IOC_GET_QUEUE_WAVE_STATE`.
    struct kfd_ioctl_get_queue_wave_state_args [since 1, size 24] {
        /// User pointer that receives the control stack (to KFD).
        @0 field ctl_stack_address: u64;
        /// Bytes of control stack in use (from KFD).
        @8 field ctl_stack_used_size: u32;
        /// Bytes of the save area in use (from KFD).
        @12 field save_area_used_size: u32;
        /// The queue (to KFD).
        @16 field queue_id: u32;
        /// Reserved.
        @20 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_ALLOC_QUEUE_GWS`: global wave sync entries for a queue.
    struct kfd_ioctl_alloc_queue_gws_args [since 1, size 16] {
        /// The queue (to KFD).
        @0 field queue_id: u32;
        /// How many GWS entries (to KFD).
        @4 field num_gws: u32;
        /// Index of the first entry allocated (from KFD).
        @8 field first_gws: u32;
        /// Reserved.
        @12 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_SET_TRAP_HANDLER`: the CWSR trap handler of a GPU.
    struct kfd_ioctl_set_trap_handler_args [since 1, size 24] {
        /// Trap base address (to KFD).
        @0 field tba_addr: u64;
        /// Trap memory address (to KFD).
        @8 field tma_addr: u64;
        /// Target GPU (to KFD).
        @16 field gpu_id: u32;
        /// Reserved.
        @20 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_GET_CLOCK_COUNTERS`: monotonic counters for profiling.
    struct kfd_ioctl_get_clock_counters_args [since 1, size 40] {
        /// GPU clock counter (from KFD).
        @0 field gpu_clock_counter: u64;
        /// CPU clock counter (from KFD).
        @8 field cpu_clock_counter: u64;
        /// System clock counter (from KFD).
        @16 field system_clock_counter: u64;
        /// System clock frequency in Hz (from KFD).
        @24 field system_clock_freq: u64;
        /// Target GPU (to KFD).
        @32 field gpu_id: u32;
        /// Reserved.
        @36 field pad: u32;
    }

    /// Arguments of `AMDKFD_IOC_GET_TILE_CONFIG`.
    struct kfd_ioctl_get_tile_config_args [since 1, size 40] {
        /// User pointer to the tile config array (to KFD).
        @0 field tile_config_ptr: u64;
        /// User pointer to the macro tile config array (to KFD).
        @8 field macro_tile_config_ptr: u64;
        /// In: capacity of the tile array; out: entries filled.
        @16 field num_tile_configs: u32;
        /// In: capacity of the macro tile array; out: entries filled.
        @20 field num_macro_tile_configs: u32;
        /// Target GPU (to KFD).
        @24 field gpu_id: u32;
        /// `GB_ADDR_CONFIG` (from KFD).
        @28 field gb_addr_config: u32;
        /// Number of banks (from KFD).
        @32 field num_banks: u32;
        /// Number of ranks (from KFD).
        @36 field num_ranks: u32;
    }
}
