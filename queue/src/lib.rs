//! `kfd-queue`: user-mode SDMA, AQL and PM4 queues over raw KFD, without ROCr.
//!
//! * [`packet`] — the SDMA packets (copy, rectangle copy, constant fill, write, fence, trap,
//!   poll memory, atomic, timestamp, cache flush), encoded per SDMA generation from the
//!   kernel's `*sdma*_pkt_open.h` headers.
//! * [`SdmaQueue`] — a queue from `CREATE_QUEUE` over a mirrored ring from `kfd-ring` (a
//!   packet is written in one piece even across the wrap), its read and write pointers, its
//!   doorbell, and completions waited on through `WAIT_EVENTS`: each submission ends with a
//!   fence and a TRAP that raises a KFD event, and a GPU VM fault arrives on a memory event as
//!   [`Error::VmFault`]. A copy of any size is split into packets and, past what the ring
//!   holds, into submissions.
//!
//! # Waits and faults
//!
//! Every wait takes a timeout; `Duration::MAX` waits forever. A VM fault stops the queue for
//! good: the kernel evicts every queue of the process on that GPU (`kfd_dqm_evict_pasid`)
//! and never restores them, so after [`Error::VmFault`] the queue answers
//! [`Error::QueueDead`] (naming the fault) to every submission and wait. There is no
//! recovery inside the process (ROCr aborts it); drop the queues and start the work again
//! in a new process.
//! * [`aql`] — [`AqlQueue`]: AQL packets on a compute queue, barrier-AND/OR with
//!   dependencies, completion [`Signal`]s in `amd_signal_t`'s layout wired to KFD events, and
//!   [`KernelDispatch`] encoding for runtimes with their own code objects.
//! * [`kernel`] — [`Kernel`]: a kernel descriptor and its machine code placed in an
//!   executable GTT buffer object (the entry offset filled in as a loader would) with a ring
//!   of kernarg slots, launched by [`AqlQueue::dispatch`] with a checked [`KernelDispatch`]
//!   (typed [`KernelError`]s), for programs that bring hand-assembled code and no code
//!   object (`kfdtool workload`'s kernels).
//! * [`pm4`] — [`Pm4Queue`]: PM4 packets on a compute queue (`KFD_IOC_QUEUE_TYPE_COMPUTE`)
//!   for runtimes that drive the CP without AQL: WRITE_DATA, RELEASE_MEM (fences, GPU
//!   timestamps, and the end-of-pipe interrupt that raises a KFD event), WAIT_REG_MEM on
//!   memory, ACQUIRE_MEM, INDIRECT_BUFFER, SET_SH_REG, encoded per GFX generation (gfx9;
//!   gfx10/11) from the kernel's `soc15d.h` and `nvd.h`; read and write pointers count dwords.
//! * [`QueueContext`] — what a process's queues share: the signal page, the doorbell pages
//!   and the GPU addresses of the queues' own buffer objects.
//!
//! # Tutorial
//!
//! Copy a buffer from host memory into VRAM with the GPU's copy engine and wait for it; on a
//! machine without an AMD GPU kfd-emu answers, and its SDMA engine moves the bytes.
//!
//! ```
//! # kfd_emu::supervisor::run_attached(
//! #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
//! #     || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use std::time::Duration;
//! use kfd_ioctl::vm_memory::Bytes;
//! use kfd_ioctl::{Kfd, MemoryPolicy, abi::AllocMemFlags, topology::Topology};
//! use kfd_queue::{QueueContext, SdmaEngine, SdmaQueue};
//!
//! let kfd = Kfd::open()?;
//! let topology = Topology::read()?;
//! let gpu = topology.gpus().next().ok_or("no GPU")?;
//! let gpu_id = gpu.gpu_id().ok_or("no gpu_id")?;
//! kfd.acquire_vm(gpu_id, gpu.render_minor().ok_or("no render node")?)?;
//! kfd.set_memory_policy(gpu_id, &MemoryPolicy::default())?;
//! let context = QueueContext::new(&kfd, &topology)?;
//! let mut queue = SdmaQueue::new(&context, gpu_id, SdmaEngine::Pcie, 4096)?;
//!
//! // Host memory and VRAM, each at one address for the CPU and the GPU.
//! let host = kfd.alloc_memory(gpu_id, 1 << 20, AllocMemFlags::GTT | AllocMemFlags::WRITABLE, &[gpu_id])?;
//! let vram_flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC;
//! let vram = kfd.alloc_memory(gpu_id, 1 << 20, vram_flags, &[gpu_id])?;
//! host.as_volatile_slice()?.write_slice(b"moved by the copy engine", 0)?;
//!
//! let done = queue.copy(vram.va(), host.va(), 4096)?;
//! // Duration::MAX would wait forever.
//! queue.wait(done, Duration::from_secs(5))?;
//! let mut back = [0u8; 24];
//! vram.as_volatile_slice()?.read_slice(&mut back, 0)?;
//! assert_eq!(&back, b"moved by the copy engine");
//! # Ok(())
//! # }).unwrap().unwrap();
//! ```
#![warn(missing_docs)]

pub mod aql;
mod error;
mod fence_wait;
pub mod kernel;
pub mod packet;
pub mod pm4;
mod sdma;

pub use aql::{AqlQueue, KernelDispatch, Signal};
pub use error::{Error, KernelError, Result};
pub use kernel::Kernel;
/// The GPU id type the queues and [`QueueContext`] take and return.
pub use kfd_ioctl::GpuId;
pub use pm4::{Pm4Command, Pm4Completion, Pm4Queue};
pub use sdma::{Command, Completion, QueueContext, SdmaEngine, SdmaQueue};
