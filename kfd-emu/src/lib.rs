//! `kfd-emu`: a syscall-level emulator of the Linux KFD driver.
//!
//! It will hold a seccomp user-notification supervisor that intercepts `openat` and `'K'`/`'d'`
//! ioctls of a program and answers them from a model of the kernel driver (per-process GPU VMs,
//! buffer objects, dmabuf, SVM ranges, SMI events), so that unmodified programs — this
//! project's crates, libhsakmt, rocminfo — run as on an AMD GPU machine.
