//! `kfd-ioctl`: the KFD ABI and the one crate that issues KFD ioctls.
//!
//! * [`abi`] — `#[repr(C)]` mirrors of every struct, union, enum and constant of the uapi
//!   `linux/kfd_ioctl.h` at KFD 1.23, opcodes, flags and the minimum KFD minor of each.
//! * [`topology`] — the KFD sysfs topology tree, parsed and typed.
//! * [`mem`] — [`mem::Reservation`], an owned aligned `PROT_NONE` range and the fixed
//!   mappings inside it, for every crate that places memory at an address of its choosing.
//! * [`smi`] — SMI event records: the kernel's text lines as types, written and parsed.
//! * [`Kfd`] — the safe handle on `/dev/kfd` with one method per memory-side ioctl.
//! * [`Queue`], [`Event`], [`Doorbells`] — user-mode queues over buffer objects the queue
//!   keeps alive, KFD events and `WAIT_EVENTS`, and the per-process doorbell page
//!   (`kfd-queue` builds SDMA queues on them).
//!
//! * [`Memory`] ([`Kfd::alloc_memory`]) — where a runtime starts: a buffer object at one
//!   address for the CPU and the GPU, the address reserved in the process and released last.
//! * [`validate`] — the kernel's argument checks of ALLOC and MAP, made before the call.
//!
//! `kfd-queue`'s `examples/first_day.rs` is a runtime's whole first program on these crates
//! (memory, SVM, an SDMA queue, copies between host, VRAM and two GPUs).
//!
//! # Tutorial
//!
//! Open KFD, find the GPUs in the topology, make each GPU's VM this process's compute VM, and
//! allocate, map, touch and free memory. This shows the low layer, where the caller places
//! the BO at a GPU address of its choosing ([`Kfd::alloc_memory`] chooses it, and maps the
//! BO for the CPU at that same address). This is the whole life of a buffer object, and the
//! example runs as a test: on a machine without an AMD GPU its syscalls are answered by
//! kfd-emu (in hidden lines), on an MI300X by the kernel.
//!
//! ```
//! # kfd_emu::supervisor::run_attached(
//! #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
//! #     || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use kfd_ioctl::abi::AllocMemFlags;
//! use kfd_ioctl::topology::Topology;
//! use kfd_ioctl::{Errno, Kfd, MemoryPolicy};
//! use vm_memory::Bytes;
//!
//! // O_RDWR | O_CLOEXEC; the version is read once and gates every later call.
//! let kfd = Kfd::open()?;
//! assert_eq!(kfd.version().major, 1);
//!
//! // The sysfs topology names each GPU's gpu_id (a `GpuId`, printed in hex) and render node.
//! let topology = Topology::read()?;
//! let gpu = topology.gpus().next().ok_or("no GPU")?;
//! let gpu_id = gpu.gpu_id().ok_or("no gpu_id")?;
//! println!("using gpu {gpu_id}"); // "using gpu 0x7396"
//! kfd.acquire_vm(gpu_id, gpu.render_minor().ok_or("no render node")?)?;
//! kfd.set_memory_policy(gpu_id, &MemoryPolicy::default())?;
//!
//! // Where GPU virtual addresses may go in this process: the GPUVM aperture. An address the
//! // caller picks must be free for good: reserve it in the process's address space (what
//! // `Kfd::alloc_memory` does for you), 2 MiB aligned for the GPU's large pages.
//! let gpuvm = kfd.gpuvm_aperture(gpu_id)?.ok_or("no aperture")?;
//! let reservation = kfd_ioctl::mem::Reservation::new(4 << 20, 2 << 20)?;
//! let va = reservation.addr().as_ptr() as u64;
//! assert!(gpuvm.contains(&va));
//!
//! // 2 MiB of system memory the GPU can reach, mapped on it and visible to the CPU.
//! let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
//! let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 2 << 20, flags)?;
//! kfd.map_memory_to_gpu(&bo, &[gpu_id])?;
//! // The GPU may write this memory at any time: the CPU reaches it with volatile accesses,
//! // never as a Rust slice (vm-memory's `VolatileSlice` and `Bytes`).
//! let cpu = bo.map_cpu()?;
//! cpu.write_slice(b"hello, GPU", 0)?;
//! let memory = cpu.as_volatile_slice()?;
//! memory.write_obj(0xc0ffee_u32, 64)?;
//! assert_eq!(memory.read_obj::<u32>(64)?, 0xc0ffee);
//!
//! // Errors say which ioctl, GPU, range and errno: a second BO at the same VA cannot be
//! // mapped on the same GPU.
//! let clash = kfd.alloc_memory_of_gpu(gpu_id, va, 4096, flags)?;
//! let err = kfd.map_memory_to_gpu(&clash, &[gpu_id]).unwrap_err();
//! assert_eq!(err.errno(), Some(Errno::INVAL));
//! println!("{err}");
//!
//! // Dropping unmaps from every GPU and frees, retrying what the kernel refused only for now;
//! // `free_memory_of_gpu` reports errors instead, and gives the BO back to retry.
//! drop(cpu);
//! if let Err(failed) = kfd.free_memory_of_gpu(bo) {
//!     println!("{failed}");
//!     kfd.free_memory_of_gpu(failed.into_buffer_object())?;
//! }
//! # Ok(())
//! # }).unwrap().unwrap();
//! ```
#![warn(missing_docs)]

pub mod abi;
pub mod mem;
pub mod smi;
pub mod topology;

mod buffer_object;
mod cpu_mapping;
mod errno;
mod error;
mod event;
mod gpu_id;
mod kfd;
mod location;
mod memory;
mod queue;
mod smi_events;
mod svm;
mod sys;
pub mod validate;
mod values;

pub use buffer_object::{BufferObject, FreeError};
pub use cpu_mapping::{CpuMapping, OwnedCpuMapping};
pub use errno::{errno_by_name, errno_name};
pub use error::{Errno, ErrnoName, Error, GpuIds, IoctlContext, Result, Version};
pub use event::{Event, EventKind, MemoryFault, WaitOutcome};
pub use gpu_id::{GpuId, ParseGpuIdError};
pub use kfd::{KFD_DEVICE_PATH, Kfd, render_node_path};
pub use location::Location;
pub use memory::Memory;
pub use queue::{
    ComputeBuffers, Doorbells, Queue, QueueBuffer, QueueSizes, QueueSpec, QueueType, RawQueueSpec,
};
pub use smi_events::SmiEvents;
pub use svm::SVM_INLINE_ATTRS;
pub use values::{Apertures, CachePolicy, ClockCounters, DmabufInfo, MemoryPolicy, TileConfig};
/// vm-memory, whose [`VolatileSlice`](vm_memory::VolatileSlice) and
/// [`Bytes`](vm_memory::Bytes) this crate hands out for memory the GPU shares: use its
/// traits through this re-export, without a dependency of your own.
pub use vm_memory;
