//! `kfd-emu`: a syscall-level emulator of the Linux KFD driver.
//!
//! A program runs under a seccomp filter that turns `open`/`openat` and every ioctl whose type
//! byte is `'K'` (KFD) or `'d'` (DRM) into user notifications. The [`supervisor`] answers them
//! from a [`model`] of the kernel driver: `/dev/kfd`, the render nodes and the KFD sysfs
//! topology become stand-in files, and ioctls are answered with the kernel's results and
//! errnos. The program itself — this project's crates, libhsakmt, rocminfo — is unmodified.
#![warn(missing_docs)]

pub mod backend;
pub mod machine;
pub mod model;
pub mod supervisor;

/// Runs `f` on this machine's `/dev/kfd` when it has one; otherwise on a fresh thread attached
/// to a model of the default machine (MI300X). For benches and tools that measure whatever KFD
/// is at hand.
///
/// # Panics
/// When the emulator cannot be built or attached (a broken environment, not a KFD error).
pub fn on_kfd_or_emulated<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if std::path::Path::new(kfd_ioctl::KFD_DEVICE_PATH).exists() {
        return f();
    }
    let model =
        model::Model::new(model::ModelConfig::default()).expect("building the kfd-emu model");
    supervisor::run_attached(model, f).expect("attaching kfd-emu")
}
