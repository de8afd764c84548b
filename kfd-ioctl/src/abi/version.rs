//! The ABI version: `AMDKFD_IOC_GET_VERSION` and the version this crate mirrors.

abi_consts! {
    registry VERSION_CONSTS;
    /// Major version of the KFD ioctl interface mirrored here (`GET_VERSION` reports the
    /// running kernel's).
    KFD_IOCTL_MAJOR_VERSION: u32 = 1, since 1;
    /// Minor version of the KFD ioctl interface mirrored here: 1.23, Linux 7.2.
    KFD_IOCTL_MINOR_VERSION: u32 = 23, since 23;
}

abi_structs! {
    registry VERSION_STRUCTS;
    /// Arguments of `AMDKFD_IOC_GET_VERSION`: the running kernel's KFD interface version.
    struct kfd_ioctl_get_version_args [since 1, size 8] {
        /// Major version (from KFD).
        @0 field major_version: u32;
        /// Minor version (from KFD).
        @4 field minor_version: u32;
    }
}
