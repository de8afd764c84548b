//! The model of the KFD driver: processes, GPU VMs, buffer objects, events and the rest of the
//! `/dev/kfd` ioctl interface, with the kernel's validation order and errnos
//! (`shared/ref/kfd-abi.md` §4).
//!
//! [`Model`] implements the supervisor's [`Backend`]: it decides which opens get a stand-in
//! file ([`Backend::open`]) and answers ioctls on those stand-ins ([`Backend::ioctl`]), reading
//! and writing the caller's memory through [`Caller`].
//!
//! * `/dev/kfd` → a memfd per KFD process (one per thread group, as the kernel keeps one per
//!   `mm`). Its pages hold the event signal page and, per GPU, the doorbell slice, the
//!   MMIO-remap page and the CWSR pages; the ioctls return the kernel's offsets for them
//!   (`KFD_MMAP_TYPE_EVENTS`, `KFD_MMAP_TYPE_MMIO | KFD_MMAP_GPU_ID(gpu_id)`, ...), which
//!   [`Backend::mmap`] decodes as `kfd_mmap` does and redirects to those pages (`mmap`).
//! * Every VRAM or GTT buffer object → its own sealed memfd of its size. Its `mmap_offset` is
//!   the kernel's: a DRM vma-manager offset (from 4 GiB) of the GPU's render node, which
//!   [`Backend::mmap`] looks up and redirects to the BO's memfd (`mmap`). An import shares the
//!   exporter's memfd (and, on the same GPU, its offset), and EXPORT_DMABUF hands out a reopen
//!   of it, so a mapping of the dma-buf fd shows the BO's bytes natively.
//! * `/dev/dri/renderD<minor>` → a new empty memfd per open (a DRM file): `pread` and a
//!   native `mmap` see nothing. It answers the DRM ioctls (naming the GPU) and can be given to
//!   ACQUIRE_VM.
//!
//!   Isolation: the memory of a BO is reachable only through its own memfd, which no process
//!   gets as an fd except as a dma-buf it exported or was given. A mapping through a render
//!   node is redirected only when the file is the DRM file of a process's GPU VM and that
//!   process holds a handle on the object (`drm_vma_node_is_allowed`, else `EACCES`), so a
//!   process maps nothing of another's VRAM, with or without `/dev/kfd`. This needs the
//!   supervisor to carry out [`Backend::mmap`]'s redirects; a program whose mmaps are not
//!   intercepted maps the empty stand-ins and gets `SIGBUS` on access.
//! * Every memfd the model hands out or maps (render nodes, `/dev/kfd`, BOs and their
//!   dma-bufs, `/proc/modules`) is sealed against resizing (`F_SEAL_SHRINK | F_SEAL_GROW`):
//!   `ftruncate` fails with `EPERM` (a real device node says `EINVAL`), and no mapping can be
//!   cut short into a `SIGBUS`.
//! * The file table (stand-in inode → what it is) drops a process's entries when it exits; a
//!   stand-in still held by a child or a peer is then told by its memfd name
//!   (`kfd-emu:<what>`): a `/dev/kfd` of a process that is gone answers `EBADF`, a render node
//!   is a DRM file no object is allowed on. A dma-buf's registration (what IMPORT and
//!   GET_DMABUF_INFO recognise) goes with its exporter's exit; its memory lives on in the fds
//!   and mappings programs still have (the model cannot see those close).
//! * The KFD topology under `/sys/devices/virtual/kfd/kfd/topology` and
//!   `/sys/class/kfd/kfd/topology` → files of a tree generated from the [`Machine`].
//! * `/proc/modules` → a list that contains `amdgpu`; `/sys/module/amdgpu` → what libkmod
//!   reads of a loaded module (`refcnt`, `holders/`, `initstate`, `parameters/noretry`).
//! * A `stat`/`access` of those paths ([`Backend::stat`]): `/dev/kfd` is a character device
//!   `0666` with major [`KFD_MAJOR`], a render node one with major [`DRM_MAJOR`] and its minor,
//!   sysfs files are `0444` with the generated file's size, directories `0755`, and a path
//!   under an emulated sysfs root that is not in the tree is `ENOENT`.
//! * SVM ranges live over the caller's own memory (`svm`), and SMI event fds are socket pairs
//!   the model writes the kernel's records into (`smi`).
//!
//! ```no_run
//! use kfd_emu::model::{Model, ModelConfig};
//!
//! let model = Model::new(ModelConfig {
//!     fail: vec!["ALLOC_MEMORY_OF_GPU:ENOMEM:1".parse()?],
//!     ..ModelConfig::default()
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backend;
mod chardev;
mod device;
mod dispatch;
mod driver;
mod drm;
mod event_ioctls;
mod events;
mod fail;
mod files;
mod gpu_view;
mod handlers;
mod host;
mod memory;
mod memory_ioctls;
mod mmap;
mod objects;
mod offsets;
mod process;
mod smi;
mod svm;
mod teardown;
mod trace;
mod vm;
mod vmas;

pub use backend::{DRM_MAJOR, KFD_MAJOR, Model, ModelError};
pub use device::ModelConfig;
pub use fail::{FailRule, FailRuleError};
pub use gpu_view::{GpuFault, GpuFaultReason};
pub use svm::{SvmPage, SvmRange};
