//! The argument structs and numbers of the out-of-tree driver's own ioctls (the "non-upstream
//! ioctls" of amdgpu-dkms's `include/uapi/linux/kfd_ioctl.h`, as libhsakmt 6.2.4 copies it in
//! `include/hsakmt/linux/kfd_ioctl.h`): `AMDKFD_IOC_IPC_IMPORT_HANDLE` (0x80),
//! `AMDKFD_IOC_IPC_EXPORT_HANDLE` (0x81) and `AMDKFD_IOC_PC_SAMPLE` (0x85), numbered from
//! `AMDKFD_COMMAND_START_2`.
//!
//! They live here, not in kfd-ioctl's `abi`, because kfd-ioctl mirrors the mainline header
//! (its layout proof compiles against it), which has none of them.

use kfd_ioctl::abi::{IOC_READ, IOC_WRITE, IoctlInfo, amdkfd_iowr};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// `AMDKFD_COMMAND_START_2`: the first number of the out-of-tree range.
pub(super) const COMMAND_START_2: u8 = 0x80;
/// `AMDKFD_COMMAND_END_2` of libhsakmt 6.2.4's header (one past `PC_SAMPLE`).
pub(super) const COMMAND_END_2: u8 = 0x86;

/// `struct kfd_ioctl_ipc_export_handle_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable)]
pub(crate) struct kfd_ioctl_ipc_export_handle_args {
    /// The BO's handle (to KFD).
    pub handle: u64,
    /// The 128-bit share handle (from KFD).
    pub share_handle: [u32; 4],
    /// The GPU whose process device holds the BO (to KFD).
    pub gpu_id: u32,
    /// Kept with the share handle and given back to importers (to KFD; libhsakmt passes the
    /// BO's `HsaMemFlags`).
    pub flags: u32,
}
const _: () = assert!(size_of::<kfd_ioctl_ipc_export_handle_args>() == 32);
const _: () = assert!(std::mem::offset_of!(kfd_ioctl_ipc_export_handle_args, gpu_id) == 24);

/// `struct kfd_ioctl_ipc_import_handle_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable)]
pub(crate) struct kfd_ioctl_ipc_import_handle_args {
    /// The new BO's handle (from KFD).
    pub handle: u64,
    /// Where the BO goes in the GPU VA space (to KFD).
    pub va_addr: u64,
    /// The render-node offset that maps it (from KFD).
    pub mmap_offset: u64,
    /// The share handle (to KFD).
    pub share_handle: [u32; 4],
    /// The GPU to import on (to KFD).
    pub gpu_id: u32,
    /// The exporter's flags (from KFD).
    pub flags: u32,
}
const _: () = assert!(size_of::<kfd_ioctl_ipc_import_handle_args>() == 48);
const _: () = assert!(std::mem::offset_of!(kfd_ioctl_ipc_import_handle_args, share_handle) == 24);
const _: () = assert!(std::mem::offset_of!(kfd_ioctl_ipc_import_handle_args, gpu_id) == 40);

/// `struct kfd_pc_sample_info`: one sampling method (`HsaPcSamplingInfo` in libhsakmt).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable)]
pub(crate) struct kfd_pc_sample_info {
    /// The interval asked for (in microseconds, cycles or instructions, by `type`).
    pub interval: u64,
    /// The smallest interval the method takes.
    pub interval_min: u64,
    /// The largest interval the method takes.
    pub interval_max: u64,
    /// `KFD_IOCTL_PCS_FLAG_*`.
    pub flags: u64,
    /// `KFD_IOCTL_PCS_METHOD_*`.
    pub method: u32,
    /// `KFD_IOCTL_PCS_TYPE_*`.
    pub type_: u32,
}
const _: () = assert!(size_of::<kfd_pc_sample_info>() == 40);

/// `struct kfd_ioctl_pc_sample_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable)]
pub(crate) struct kfd_ioctl_pc_sample_args {
    /// An array of `kfd_pc_sample_info`.
    pub sample_info_ptr: u64,
    /// Its length (in and out).
    pub num_sample_info: u32,
    /// `KFD_IOCTL_PCS_OP_*`.
    pub op: u32,
    pub gpu_id: u32,
    /// The session (out of CREATE, in of the others).
    pub trace_id: u32,
    /// `KFD_IOCTL_PCS_QUERY_TYPE_FULL` for QUERY_CAPABILITIES.
    pub flags: u32,
    /// `reserved` in libhsakmt 6.2.4's header; the driver writes its PC-sampling revision
    /// there at QUERY_CAPABILITIES ("use version field to pass back pc sampling revision
    /// temporarily, not for upstream", `kfd_pc_sample_query_cap`).
    pub version: u32,
}
const _: () = assert!(size_of::<kfd_ioctl_pc_sample_args>() == 32);
const _: () = assert!(std::mem::offset_of!(kfd_ioctl_pc_sample_args, version) == 28);

/// `KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES`.
pub(crate) const KFD_IOCTL_PCS_OP_QUERY_CAPABILITIES: u32 = 0;
/// `KFD_IOCTL_PCS_OP_CREATE`.
pub(crate) const KFD_IOCTL_PCS_OP_CREATE: u32 = 1;
/// `KFD_IOCTL_PCS_OP_DESTROY`.
pub(crate) const KFD_IOCTL_PCS_OP_DESTROY: u32 = 2;
/// `KFD_IOCTL_PCS_OP_START`.
pub(crate) const KFD_IOCTL_PCS_OP_START: u32 = 3;
/// `KFD_IOCTL_PCS_OP_STOP`.
pub(crate) const KFD_IOCTL_PCS_OP_STOP: u32 = 4;
/// `KFD_IOCTL_PCS_FLAG_POWER_OF_2`.
pub(crate) const KFD_IOCTL_PCS_FLAG_POWER_OF_2: u64 = 1;
/// `KFD_IOCTL_PCS_METHOD_HOSTTRAP`.
pub(crate) const KFD_IOCTL_PCS_METHOD_HOSTTRAP: u32 = 1;
/// `KFD_IOCTL_PCS_METHOD_STOCHASTIC`.
pub(crate) const KFD_IOCTL_PCS_METHOD_STOCHASTIC: u32 = 2;
/// `KFD_IOCTL_PCS_TYPE_TIME_US`.
pub(crate) const KFD_IOCTL_PCS_TYPE_TIME_US: u32 = 0;
/// `KFD_IOCTL_PCS_TYPE_CLOCK_CYCLES`.
pub(crate) const KFD_IOCTL_PCS_TYPE_CLOCK_CYCLES: u32 = 1;
/// `KFD_IOCTL_PCS_QUERY_TYPE_FULL`.
pub(crate) const KFD_IOCTL_PCS_QUERY_TYPE_FULL: u32 = 1;

/// The ioctl's ABI entry, as kfd-ioctl's table describes mainline's.
const fn info<T>(name: &'static str, nr: u8, arg: &'static str) -> IoctlInfo {
    IoctlInfo {
        name,
        nr,
        opcode: amdkfd_iowr::<T>(nr),
        dir: IOC_READ | IOC_WRITE,
        size: size_of::<T>(),
        arg: Some(arg),
        since_minor: 1,
        deprecated: false,
    }
}

/// `AMDKFD_IOC_IPC_IMPORT_HANDLE`.
pub(crate) static IPC_IMPORT_HANDLE: IoctlInfo = info::<kfd_ioctl_ipc_import_handle_args>(
    "IPC_IMPORT_HANDLE",
    0x80,
    "kfd_ioctl_ipc_import_handle_args",
);
/// `AMDKFD_IOC_IPC_EXPORT_HANDLE`.
pub(crate) static IPC_EXPORT_HANDLE: IoctlInfo = info::<kfd_ioctl_ipc_export_handle_args>(
    "IPC_EXPORT_HANDLE",
    0x81,
    "kfd_ioctl_ipc_export_handle_args",
);
/// `AMDKFD_IOC_PC_SAMPLE`.
pub(crate) static PC_SAMPLE: IoctlInfo =
    info::<kfd_ioctl_pc_sample_args>("PC_SAMPLE", 0x85, "kfd_ioctl_pc_sample_args");
