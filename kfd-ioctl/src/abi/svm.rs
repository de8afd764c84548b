//! Shared virtual memory: `AMDKFD_IOC_SVM` (attributes of a virtual address range) and
//! `AMDKFD_IOC_SET_XNACK_MODE`.

abi_consts! {
    registry SVM_CONSTS;
    /// `enum kfd_ioctl_svm_op`: set attributes of a range (splitting existing ranges).
    KFD_IOCTL_SVM_OP_SET_ATTR: u32 = 0, since 5;
    /// `enum kfd_ioctl_svm_op`: query the intersection of attributes over a range.
    KFD_IOCTL_SVM_OP_GET_ATTR: u32 = 1, since 5;
    /// `enum kfd_ioctl_svm_location`: system memory.
    KFD_IOCTL_SVM_LOCATION_SYSMEM: u32 = 0, since 5;
    /// `enum kfd_ioctl_svm_location`: unspecified (GET: pages disagree).
    KFD_IOCTL_SVM_LOCATION_UNDEFINED: u32 = 0xffff_ffff, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: preferred location (gpu_id or a location).
    KFD_IOCTL_SVM_ATTR_PREFERRED_LOC: u32 = 0, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: prefetch location; setting it migrates immediately.
    KFD_IOCTL_SVM_ATTR_PREFETCH_LOC: u32 = 1, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: the gpu_id may access (map or migrate).
    KFD_IOCTL_SVM_ATTR_ACCESS: u32 = 2, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: the gpu_id may access in place (no migration).
    KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE: u32 = 3, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: the gpu_id may not access.
    KFD_IOCTL_SVM_ATTR_NO_ACCESS: u32 = 4, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: flags to set (`KFD_IOCTL_SVM_FLAG_*`).
    KFD_IOCTL_SVM_ATTR_SET_FLAGS: u32 = 5, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: flags to clear (GET of cleared flags since 1.6).
    KFD_IOCTL_SVM_ATTR_CLR_FLAGS: u32 = 6, since 5;
    /// `enum kfd_ioctl_svm_attr_type`: migration granularity, log2 of pages.
    KFD_IOCTL_SVM_ATTR_GRANULARITY: u32 = 7, since 5;
}

abi_consts! {
    registry SVM_FLAG_CONSTS;
    /// SVM flag: guarantee host access to the memory.
    KFD_IOCTL_SVM_FLAG_HOST_ACCESS: u32 = 0x0000_0001, since 5;
    /// SVM flag: fine-grained coherence between all devices with access.
    KFD_IOCTL_SVM_FLAG_COHERENT: u32 = 0x0000_0002, since 5;
    /// SVM flag: any GPU in the same hive may serve as the preferred device.
    KFD_IOCTL_SVM_FLAG_HIVE_LOCAL: u32 = 0x0000_0004, since 5;
    /// SVM flag: GPUs only read (allows replication).
    KFD_IOCTL_SVM_FLAG_GPU_RO: u32 = 0x0000_0008, since 5;
    /// SVM flag: GPUs may execute.
    KFD_IOCTL_SVM_FLAG_GPU_EXEC: u32 = 0x0000_0010, since 5;
    /// SVM flag: GPUs mostly read (writes may fault).
    KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY: u32 = 0x0000_0020, since 5;
    /// SVM flag: keep GPU mappings valid as if XNACK were off.
    ///
    /// Added without a version bump; present in the 1.11 header, so 1.11 is the first minor
    /// verified to have it.
    KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED: u32 = 0x0000_0040, since 11;
    /// SVM flag: fine-grained coherence using device-scope atomics (GFX 9.4.3).
    ///
    /// Landed with the allocation flag of the same name on top of the 1.14 header (Linux 6.7),
    /// so 1.15 is the first minor that always has it.
    KFD_IOCTL_SVM_FLAG_EXT_COHERENT: u32 = 0x0000_0080, since 15;
}

abi_structs! {
    registry SVM_STRUCTS;
    /// One SVM attribute: a type and a value whose meaning depends on the type.
    struct kfd_ioctl_svm_attribute [since 5, size 8] {
        /// `KFD_IOCTL_SVM_ATTR_*`; GET of an access attribute overwrites it with the access.
        @0 field r#type: u32;
        /// The value: a gpu_id, a location, a flag mask or a granularity.
        @4 field value: u32;
    }

    /// The fixed 24-byte header of `AMDKFD_IOC_SVM`'s argument; `nattr`
    /// `kfd_ioctl_svm_attribute`s follow it in memory (C's flexible array `attrs[]`), and the
    /// opcode carries `24 + 8 * nattr` (see `amdkfd_ioc_svm`).
    struct kfd_ioctl_svm_args [since 5, size 24] {
        /// Start of the range in bytes, page aligned.
        @0 field start_addr: u64;
        /// Size of the range in bytes, page aligned.
        @8 field size: u64;
        /// `KFD_IOCTL_SVM_OP_*`.
        @16 field op: u32;
        /// Number of attributes that follow.
        @20 field nattr: u32;
    }
    flex attrs: kfd_ioctl_svm_attribute;

    /// Arguments of `AMDKFD_IOC_SET_XNACK_MODE`.
    struct kfd_ioctl_set_xnack_mode_args [since 5, size 4] {
        /// In: negative queries, 0 disables, positive enables; out: the current mode.
        @0 field xnack_enabled: i32;
    }
}
