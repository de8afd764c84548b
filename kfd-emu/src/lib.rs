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
