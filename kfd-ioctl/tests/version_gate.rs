//! The safe handle refuses what the running KFD lacks before any syscall, naming the version
//! it needs; what the version has reaches the kernel (here `/dev/null`, which says ENOTTY).

use std::fs::File;
use std::os::fd::OwnedFd;

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::{Errno, Error, Kfd, Version};

fn kfd_at_minor(minor: u32) -> Kfd {
    let fd = OwnedFd::from(
        File::options()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap(),
    );
    Kfd::from_fd_assume_version(fd, Version { major: 1, minor })
}

fn needed_minor(e: &Error) -> Option<u32> {
    match e {
        Error::Unsupported { needed_minor, .. } => Some(*needed_minor),
        _ => None,
    }
}

#[test]
fn ioctls_newer_than_the_running_kfd_are_refused_with_the_version_they_need() {
    let old = kfd_at_minor(4);
    let mut attrs = [];
    let cases: [(&str, Result<(), Error>, u32); 4] = [
        ("SVM", old.svm_get_attr(0x10000, 0x1000, &mut attrs), 5),
        ("SET_XNACK_MODE", old.xnack_mode().map(drop), 5),
        ("AVAILABLE_MEMORY", old.available_memory(1).map(drop), 9),
        (
            "RUNTIME_ENABLE",
            old.runtime_enable(0, kfd_ioctl::abi::RuntimeEnableMode::empty())
                .map(drop),
            13,
        ),
    ];
    for (name, result, minor) in cases {
        let err = result.expect_err(name);
        assert_eq!(needed_minor(&err), Some(minor), "{name}: {err}");
        assert_eq!(
            err.to_string(),
            format!("{name} needs KFD 1.{minor} or newer; the running KFD is 1.4")
        );
    }
}

#[test]
fn ioctls_the_running_kfd_has_reach_the_kernel() {
    let new = kfd_at_minor(23);
    let err = new.available_memory(0x1a2b).unwrap_err();
    assert_eq!(err.errno(), Some(Errno::NOTTY));
    assert_eq!(
        err.to_string(),
        "AVAILABLE_MEMORY on gpu 0x1a2b failed: ENOTTY"
    );
}

#[test]
fn allocation_flags_newer_than_the_running_kfd_are_refused() {
    let kfd = kfd_at_minor(15);
    let err = kfd
        .alloc_memory_of_gpu(
            0x1a2b,
            0x10_0000,
            1 << 21,
            AllocMemFlags::VRAM | AllocMemFlags::CONTIGUOUS,
        )
        .unwrap_err();
    assert_eq!(needed_minor(&err), Some(16), "{err}");
    // Without the new flag the same call reaches the kernel.
    let err = kfd
        .alloc_memory_of_gpu(0x1a2b, 0x10_0000, 1 << 21, AllocMemFlags::VRAM)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ALLOC_MEMORY_OF_GPU (VRAM, 2 MiB at 0x100000) on gpu 0x1a2b failed: ENOTTY"
    );
}

#[test]
fn userptr_goes_through_the_unsafe_constructor() {
    let kfd = kfd_at_minor(23);
    let err = kfd
        .alloc_memory_of_gpu(0x1a2b, 0x10_0000, 4096, AllocMemFlags::USERPTR)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

#[test]
fn opening_a_missing_device_names_the_path() {
    // This machine may have /dev/kfd; the error shape is what matters, so check the render
    // node helper on a path that cannot exist.
    let path = kfd_ioctl::render_node_path(999);
    assert_eq!(path, std::path::Path::new("/dev/dri/renderD999"));
    let kfd = kfd_at_minor(23);
    let err = kfd.acquire_vm(0x1a2b, 999).unwrap_err();
    assert_eq!(
        err.to_string(),
        "opening /dev/dri/renderD999 failed: ENOENT"
    );
}

#[test]
fn svm_flags_newer_than_the_running_kfd_are_refused() {
    use kfd_ioctl::abi::{self, SvmFlags};
    let attr = |flags: SvmFlags| abi::kfd_ioctl_svm_attribute {
        r#type: abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
        value: flags.bits(),
    };
    let kfd = kfd_at_minor(10);
    // SAFETY: /dev/null registers nothing.
    let err = unsafe { kfd.svm_set_attr(0x10000, 0x1000, &[attr(SvmFlags::GPU_ALWAYS_MAPPED)]) }
        .unwrap_err();
    assert_eq!(needed_minor(&err), Some(11), "{err}");
    // Flags of 1.5 pass the gate and reach the kernel.
    // SAFETY: as above.
    let err =
        unsafe { kfd.svm_set_attr(0x10000, 0x1000, &[attr(SvmFlags::COHERENT)]) }.unwrap_err();
    assert_eq!(err.errno(), Some(Errno::NOTTY), "{err}");
    // Querying cleared flags needs 1.6.
    let mut query = [abi::kfd_ioctl_svm_attribute {
        r#type: abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
        value: 0,
    }];
    let err = kfd_at_minor(5)
        .svm_get_attr(0x10000, 0x1000, &mut query)
        .unwrap_err();
    assert_eq!(needed_minor(&err), Some(6), "{err}");
}
