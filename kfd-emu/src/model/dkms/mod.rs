//! The out-of-tree driver's own ioctls: what `kfd-emu run --kernel dkms`
//! ([`Kernel::Dkms`](super::device::Kernel)) adds to the mainline model.
//!
//! AMD's amdgpu-dkms driver (ROCm/ROCK-Kernel-Driver, what most MI300X labs run) keeps a
//! second ioctl range from `AMDKFD_COMMAND_START_2` (0x80) that the mainline kernel has not
//! (`amdkfd_ioctls_2` in its `kfd_chardev.c`, found by `kfd_ioctl` when the number is in
//! `[AMDKFD_COMMAND_START_2, AMDKFD_COMMAND_END_2)`). Modelled here:
//! * `IPC_EXPORT_HANDLE` / `IPC_IMPORT_HANDLE` (`ipc`): a BO shared across processes by a
//!   128-bit random handle (`kfd_ipc.c`); the importer's BO is backed by the same memory.
//! * `PC_SAMPLE` (`pc_sampling`): QUERY_CAPABILITIES, CREATE, DESTROY, START and STOP of
//!   `kfd_pc_sampling.c`, with its per-GC-version methods, session ids and errors.
//!
//! And what a program can see of the flavour: the module's version,
//! `/sys/module/amdgpu/version` ([`AMDGPU_VERSION`]): the DKMS `amdgpu_drv.c` declares
//! `MODULE_VERSION(AMDGPU_VERSION)` (`AMDGPU_VERSION` is the package version its
//! `dkms/configure.ac` sets), mainline's amdgpu declares none, so the file exists only here.
//!
//! Where it differs: `CROSS_MEMORY_COPY` (0x83) and `RLC_SPM` (0x84) are not modelled and
//! answer as numbers the kernel lacks (`ENOTTY`), as on mainline; no PC sample is ever
//! delivered (see `pc_sampling`).

mod abi;
mod ipc;
mod pc_sampling;
pub(super) mod state;

use kfd_ioctl::abi::IoctlInfo;
use rustix::io::Errno;

use super::chardev::Ctx;

/// `/sys/module/amdgpu/version` of the emulated amdgpu-dkms: the driver version of the
/// amdgpu-dkms that ROCm 6.2.x ships (package `amdgpu-dkms` 6.8.5, the libhsakmt 6.2.4
/// these ioctls are taken from), in the `MAJOR.MINOR.PATCH` form of `PACKAGE_VERSION`.
pub(super) const AMDGPU_VERSION: &str = "6.8.5";

/// A handler of one of the DKMS ioctls: its ABI entry and the function answering it.
pub(super) struct DkmsIoctl {
    pub info: &'static IoctlInfo,
    pub handler: fn(&Ctx<'_>, &mut [u8]) -> Result<(), Errno>,
}

/// The modelled entries of `amdkfd_ioctls_2`.
static DKMS_IOCTLS: [DkmsIoctl; 3] = [
    DkmsIoctl {
        info: &abi::IPC_IMPORT_HANDLE,
        handler: ipc::import_handle,
    },
    DkmsIoctl {
        info: &abi::IPC_EXPORT_HANDLE,
        handler: ipc::export_handle,
    },
    DkmsIoctl {
        info: &abi::PC_SAMPLE,
        handler: pc_sampling::pc_sample,
    },
];

/// The entry of ioctl number `nr` of the second range, if it is one the model answers.
pub(super) fn lookup(nr: u8) -> Option<&'static DkmsIoctl> {
    if !(abi::COMMAND_START_2..abi::COMMAND_END_2).contains(&nr) {
        return None;
    }
    DKMS_IOCTLS.iter().find(|e| e.info.nr == nr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_range_has_the_three_modelled_numbers_and_no_other() {
        let found: Vec<(u8, &str)> = (0..=u8::MAX)
            .filter_map(|nr| lookup(nr).map(|e| (nr, e.info.name)))
            .collect();
        assert_eq!(
            found,
            [
                (0x80, "IPC_IMPORT_HANDLE"),
                (0x81, "IPC_EXPORT_HANDLE"),
                (0x85, "PC_SAMPLE")
            ]
        );
        for e in &DKMS_IOCTLS {
            assert_eq!(kfd_ioctl::abi::ioc_nr(e.info.opcode), e.info.nr);
            assert_eq!(kfd_ioctl::abi::ioc_size(e.info.opcode), e.info.size);
        }
    }
}
