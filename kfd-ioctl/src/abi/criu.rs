//! CRIU (checkpoint/restore in userspace) of a KFD process: `AMDKFD_IOC_CRIU_OP`.

abi_consts! {
    registry CRIU_CONSTS;
    /// `enum kfd_criu_op`: query process info; pauses the process and evicts its queues.
    KFD_CRIU_OP_PROCESS_INFO: u32 = 0, since 7;
    /// `enum kfd_criu_op`: checkpoint BOs, queues, events and SVM ranges.
    KFD_CRIU_OP_CHECKPOINT: u32 = 1, since 7;
    /// `enum kfd_criu_op`: un-evict the queues after `PROCESS_INFO`.
    KFD_CRIU_OP_UNPAUSE: u32 = 2, since 7;
    /// `enum kfd_criu_op`: restore the process contents.
    KFD_CRIU_OP_RESTORE: u32 = 3, since 7;
    /// `enum kfd_criu_op`: resume the restored process.
    KFD_CRIU_OP_RESUME: u32 = 4, since 7;
}

abi_structs! {
    registry CRIU_STRUCTS;
    /// Arguments of `AMDKFD_IOC_CRIU_OP`.
    ///
    /// C ends the struct after `op` at byte 52 and pads it to 56; the padding is explicit here.
    struct kfd_ioctl_criu_args [since 7, size 56] {
        /// User pointer to a `kfd_criu_device_bucket` array (CHECKPOINT, RESTORE).
        @0 field devices: u64;
        /// User pointer to a `kfd_criu_bo_bucket` array (CHECKPOINT, RESTORE).
        @8 field bos: u64;
        /// User pointer to the private data (CHECKPOINT, RESTORE).
        @16 field priv_data: u64;
        /// Size of the private data in bytes (PROCESS_INFO, RESTORE).
        @24 field priv_data_size: u64;
        /// Number of GPUs of the process (PROCESS_INFO, RESTORE).
        @32 field num_devices: u32;
        /// Number of BOs of the process (PROCESS_INFO, RESTORE).
        @36 field num_bos: u32;
        /// Number of opaque objects of the process (PROCESS_INFO, RESTORE).
        @40 field num_objects: u32;
        /// The process being checkpointed (PROCESS_INFO, RESUME).
        @44 field pid: u32;
        /// `KFD_CRIU_OP_*` (to KFD).
        @48 field op: u32;
        /// Implicit trailing padding in C (no C member); keep zero.
        @52 pad pad: u32;
    }

    /// One GPU of a CRIU checkpoint.
    struct kfd_criu_device_bucket [since 7, size 16] {
        /// The gpu_id the process saw.
        @0 field user_gpu_id: u32;
        /// The gpu_id on this machine.
        @4 field actual_gpu_id: u32;
        /// A DRM fd of that GPU.
        @8 field drm_fd: u32;
        /// Reserved.
        @12 field pad: u32;
    }

    /// One BO of a CRIU checkpoint.
    struct kfd_criu_bo_bucket [since 7, size 48] {
        /// GPU VA.
        @0 field addr: u64;
        /// Size in bytes.
        @8 field size: u64;
        /// mmap offset.
        @16 field offset: u64;
        /// During restore, the BO's new mmap offset.
        @24 field restored_offset: u64;
        /// The user gpu_id.
        @32 field gpu_id: u32;
        /// `KFD_IOC_ALLOC_MEM_FLAGS_*`.
        @36 field alloc_flags: u32;
        /// A dmabuf fd of the BO, or `KFD_INVALID_FD`.
        @40 field dmabuf_fd: u32;
        /// Reserved.
        @44 field pad: u32;
    }
}
