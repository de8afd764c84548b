//! The profiler control ioctl, `AMDKFD_IOC_PROFILER` (KFD 1.23).

abi_consts! {
    registry PROFILER_CONSTS;
    /// The profiler interface version `KFD_IOC_PROFILER_VERSION` reports.
    KFD_IOC_PROFILER_VERSION_NUM: u32 = 1, since 23;
    /// `enum kfd_profiler_ops`: set per-GPU performance counter settings (`pmc`).
    KFD_IOC_PROFILER_PMC: u32 = 0, since 23;
    /// `enum kfd_profiler_ops`: query the profiler interface version (`version`).
    KFD_IOC_PROFILER_VERSION: u32 = 2, since 23;
    /// `enum kfd_profiler_ops`: enable or disable PTL on a GPU (`ptl`).
    KFD_IOC_PROFILER_PTL_CONTROL: u32 = 3, since 23;
}

abi_structs! {
    registry PROFILER_STRUCTS;
    /// GPU-specific profiler settings of `KFD_IOC_PROFILER_PMC`.
    struct kfd_ioctl_pmc_settings [since 23, size 12] {
        /// The user gpu_id.
        @0 field gpu_id: u32;
        /// Non-zero to lock the GPU for profiling.
        @4 field lock: u32;
        /// Non-zero to force performance counters on for the GPU's queues.
        @8 field perfcount_enable: u32;
    }

    /// PTL control of `KFD_IOC_PROFILER_PTL_CONTROL`.
    struct kfd_ioctl_ptl_control [since 23, size 8] {
        /// The user gpu_id.
        @0 field gpu_id: u32;
        /// 1 enables PTL, 0 disables it.
        @4 field enable: u32;
    }

    /// Arguments of `AMDKFD_IOC_PROFILER`.
    ///
    /// C puts an anonymous union at offset 4; it is stored here as `data` and read and written
    /// through the member accessors, chosen by `op`.
    struct kfd_ioctl_profiler_args [since 23, size 16] {
        /// `KFD_IOC_PROFILER_*`.
        @0 field op: u32;
        /// Storage of the anonymous C union (12 bytes); use the member accessors.
        @4 union data: [u32; 3];
    }
    union data {
        /// Settings of `KFD_IOC_PROFILER_PMC`.
        pmc: kfd_ioctl_pmc_settings, set set_pmc;
        /// Control of `KFD_IOC_PROFILER_PTL_CONTROL`.
        ptl: kfd_ioctl_ptl_control, set set_ptl;
        /// Version of `KFD_IOC_PROFILER_VERSION` (`KFD_IOC_PROFILER_VERSION_NUM`).
        version: u32, set set_version;
    }
}
