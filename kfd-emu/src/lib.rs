//! `kfd-emu`: a syscall-level emulator of the Linux KFD driver.
//!
//! A program runs under a seccomp filter that turns `open`/`openat` and every ioctl whose type
//! byte is `'K'` (KFD) or `'d'` (DRM) into user notifications. The [`supervisor`] answers them
//! from a [`model`] of the kernel driver: `/dev/kfd`, the render nodes and the KFD sysfs
//! topology become stand-in files, and ioctls are answered with the kernel's results and
//! errnos. The program itself — this project's crates, libhsakmt, rocminfo — is unmodified.
//!
//! # Running a program
//!
//! ```text
//! kfd-emu machines
//! kfd-emu run --machine mi210x8 --check-leaks -- ./my-hsakmt-client
//! kfd-emu run --topology captures/node42 --kfd-minor 11 --trace -- rocminfo
//! kfd-emu run --fail ALLOC_MEMORY_OF_GPU:ENOMEM:1 -- ./my-runtime-tests
//! kfd-emu run --clock model --timing slow-pcie.timing -- kfdtool trace -- ./my-svm-app
//! kfd-emu timing --machine mi210x8
//! ```
//!
//! With `--clock model`, SMI timestamps, GET_CLOCK_COUNTERS and WAIT_EVENTS timeouts follow
//! the timing model ([`model::Timing`], [`model::Costs`]): migrations cost their bytes over the
//! GPU's link as the topology describes it, faults and prefetches their service times.
//!
//! # In a Rust test
//!
//! Build a [`model::Model`] of a machine, run the code under test attached to it (on a fresh
//! thread, so the filter stays on that thread), and look at what the GPU would see:
//!
//! ```
//! use kfd_emu::machine::Machine;
//! use kfd_emu::model::{Model, ModelConfig};
//! use kfd_ioctl::abi::AllocMemFlags;
//! use kfd_ioctl::{Errno, Kfd, topology::Topology};
//!
//! let model = Model::new(ModelConfig {
//!     machine: Machine::preset("mi300x").unwrap(),
//!     fail: vec!["AVAILABLE_MEMORY:ENOMEM:1".parse().unwrap()],
//!     ..ModelConfig::default()
//! })
//! .unwrap();
//! let view = model.clone();
//! kfd_emu::supervisor::run_attached(model, move || {
//!     // Exactly what runs on hardware: /dev/kfd, sysfs, the render node, ioctls, mmap.
//!     let kfd = Kfd::open().unwrap();
//!     let gpu = Topology::read().unwrap().gpus().next().cloned().unwrap();
//!     let gpu_id = gpu.gpu_id().unwrap();
//!     kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32).unwrap();
//!     // The injected failure reaches the caller as the kernel's errno, once.
//!     assert_eq!(kfd.available_memory(gpu_id).unwrap_err().errno(), Some(Errno::NOMEM));
//!     assert!(kfd.available_memory(gpu_id).is_ok());
//!     let va = 0x7f00_0000_0000;
//!     let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
//!     let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 4096, flags).unwrap();
//!     kfd.map_memory_to_gpu(&bo, &[gpu_id]).unwrap();
//!     bo.map_cpu().unwrap().write_slice(b"from the CPU", 0).unwrap();
//!     // The GPU-side view reads through the GPU's page tables.
//!     let mut seen = [0u8; 12];
//!     view.gpu_read(std::process::id() as i32, gpu_id.get(), va, &mut seen).unwrap();
//!     assert_eq!(&seen, b"from the CPU");
//!     // Dropping unmaps and frees; a GPU access now faults.
//!     drop(bo);
//!     assert!(view.gpu_read(std::process::id() as i32, gpu_id.get(), va, &mut seen).is_err());
//! })
//! .unwrap();
//! ```
#![warn(missing_docs)]

mod arenas;
pub mod backend;
pub mod counting;
pub mod machine;
pub mod model;
pub mod own;
mod procmap;
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
