//! The crate's error type.

use std::time::Duration;

use kfd_ioctl::{Errno, MemoryFault};

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
    /// The GPU has no SDMA engine the crate can drive (unknown, or older than gfx9).
    #[error("gpu {0:#x} has no SDMA engine this crate encodes packets for")]
    NoSdma(u32),
    /// The GPU has no PM4 layouts this crate encodes (unknown, before gfx9, or gfx12 and
    /// later), or no compute-queue sizes.
    #[error("gpu {0:#x} has no PM4 compute queue this crate encodes packets for")]
    NoPm4(u32),
    /// The ring is larger than CREATE_QUEUE's 32-bit size.
    #[error("the ring is larger than 4 GiB")]
    RingTooLarge,
    /// A command the engine cannot take.
    #[error("invalid command: {0}")]
    Command(&'static str),
    /// The ring has no room for the submission (larger than the ring, or the engine made no
    /// progress within a second).
    #[error("the SDMA ring has no room for the submission")]
    RingFull,
    /// The GPU took a VM fault (reported through the queue's memory event); the queue stopped.
    #[error("GPU VM fault on gpu {:#x} at {:#x}{}: the queue stopped", .0.gpu_id, .0.va, if .0.read_only { " (write to read-only memory)" } else { "" })]
    VmFault(MemoryFault),
    /// The completion did not arrive in time.
    #[error("the SDMA queue did not complete within {0:?}")]
    Timeout(Duration),
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
