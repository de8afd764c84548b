//! The crate's error type.

use std::time::Duration;

use kfd_ioctl::{Errno, GpuId, MemoryFault};

/// What can go wrong with a queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A KFD call failed.
    #[error(transparent)]
    Kfd(#[from] kfd_ioctl::Error),
    /// The ring could not be made.
    #[error(transparent)]
    Ring(#[from] kfd_ring::Error),
    /// Shared memory could not be read or written.
    #[error("queue memory: {0}")]
    Memory(#[from] vm_memory::VolatileMemoryError),
    /// The context's GPU address range could not be reserved.
    #[error("reserving the queues' GPU address range failed: {0}")]
    Reserve(Errno),
    /// The context's GPU address range is used up.
    #[error("the queue context's GPU address range is used up")]
    AddressSpace,
    /// The GPU is not one of the topology the [`crate::QueueContext`] was made from.
    #[error(
        "gpu {gpu_id:#x} is not a GPU of this queue context (its GPUs: {})",
        kfd_ioctl::GpuIds(.known)
    )]
    UnknownGpu {
        /// The GPU asked for.
        gpu_id: GpuId,
        /// The GPUs the context knows, from its topology.
        known: Vec<GpuId>,
    },
    /// The GPU exists but has no SDMA engine the crate can drive (older than gfx9, or a
    /// generation it has no packets for).
    #[error("gpu {0:#x} has no SDMA engine this crate encodes packets for (gfx9 and later)")]
    NoSdma(GpuId),
    /// [`crate::SdmaEngine::Id`] names an engine the GPU does not have (the kernel's
    /// CREATE_QUEUE answers `EINVAL`).
    #[error(
        "gpu {gpu_id:#x} has {engines} SDMA engines (ids 0 to {}); engine {engine} does not exist",
        .engines.saturating_sub(1)
    )]
    NoSuchEngine {
        /// The GPU.
        gpu_id: GpuId,
        /// The engine id asked for.
        engine: u32,
        /// How many engines the GPU has (PCIe and xGMI, from the topology).
        engines: u32,
    },
    /// The GPU has no compute-queue sizes in its topology (EOP buffer and CWSR area, gfx9
    /// and later), which an AQL queue needs.
    #[error("gpu {0:#x} has no compute-queue sizes (EOP buffer, CWSR area) this crate knows")]
    NoQueueSizes(GpuId),
    /// The GPU has no PM4 layouts this crate encodes (unknown, before gfx9, or gfx12 and
    /// later), or no compute-queue sizes.
    #[error("gpu {0:#x} has no PM4 compute queue this crate encodes packets for")]
    NoPm4(GpuId),
    /// The ring is larger than CREATE_QUEUE's 32-bit size.
    #[error("the ring is larger than 4 GiB")]
    RingTooLarge,
    /// A command the engine cannot take.
    #[error("invalid command: {0}")]
    Command(&'static str),
    /// The ring has no room for the submission: it is larger than the whole ring, or the
    /// engine made no room within a second.
    #[error(
        "the ring has no room for a submission of {needed} bytes: {free} of its {ring} bytes are free{}",
        if .needed > .ring { "; submit less at a time, or make the ring larger" } else { " and the engine made no progress for a second" }
    )]
    RingFull {
        /// Bytes the submission needs (its packets, fence and signal).
        needed: u64,
        /// Bytes free when it gave up.
        free: u64,
        /// The ring's size in bytes.
        ring: u64,
    },
    /// The GPU took a VM fault (reported through the queue's memory event); the queue stopped.
    ///
    /// The kernel stops every queue of the process on that GPU (`kfd_dqm_evict_pasid`, from
    /// the fault interrupt) and never restores them: they, and queues created later on the
    /// GPU, take no more work in this process. Later calls on the queue return
    /// [`Error::QueueDead`].
    #[error(
        "GPU VM fault on gpu {:#x} at {:#x}{}: the queue stopped, with every queue of this process on the GPU",
        .0.gpu_id, .0.va,
        if .0.read_only { " (write to read-only memory)" } else { " (page not present)" }
    )]
    VmFault(MemoryFault),
    /// The queue stopped at a VM fault earlier ([`Error::VmFault`]) and takes no more work;
    /// or it was made on a GPU where a queue of the same [`QueueContext`](crate::QueueContext)
    /// had reported one, and never runs.
    ///
    /// There is no recovery in this process: the kernel evicted every queue of the process
    /// on the GPU (`kfd_dqm_evict_pasid`) and does not restore them, and a new queue on the
    /// GPU is created evicted (`create_queue_cpsch`). ROCr ends the process (its default
    /// VM-fault handler aborts); a runtime that wants to go on drops its queues and
    /// memory and runs the work again in a new process.
    #[error(
        "the queue on gpu {:#x} is dead: it stopped at a GPU VM fault at {:#x} and takes no \
         more work; the kernel does not restore a process's queues after a VM fault, so drop \
         the queue and run the work again in a new process",
        .0.gpu_id, .0.va
    )]
    QueueDead(MemoryFault),
    /// A kernel that cannot be placed, or a dispatch the packet processor would refuse.
    #[error("kernel: {0}")]
    Kernel(KernelError),
    /// The completion did not arrive in time.
    #[error("the queue did not complete within {0:?}")]
    Timeout(Duration),
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a kernel cannot be placed or a dispatch cannot be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// No code.
    #[error("a kernel needs code")]
    NoCode,
    /// More code or kernarg slots than this small loader places (16 MiB in all).
    #[error("{bytes} bytes of code and kernarg slots are more than 16 MiB")]
    TooLarge {
        /// Bytes asked for.
        bytes: u64,
    },
    /// No kernarg slot, or a kernarg larger than a slot.
    #[error("{len} bytes of kernel arguments do not fit a {slot}-byte slot")]
    Kernargs {
        /// Bytes given.
        len: usize,
        /// A slot's size.
        slot: u64,
    },
    /// A zero grid or workgroup size.
    #[error("a grid or workgroup size of 0")]
    ZeroSize,
    /// A workgroup of more than 1024 work-items (`kernel::MAX_WORKGROUP_ITEMS`).
    #[error("a workgroup of {0} work-items: the most is 1024")]
    WorkgroupTooLarge(u64),
    /// A dispatch with no kernel descriptor.
    #[error("a dispatch names no kernel descriptor")]
    NoKernelObject,
}
