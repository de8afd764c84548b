//! The crate's error type.

use rustix::io::Errno;

/// What went wrong building or using a ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The capacity cannot be made a power-of-two multiple of the granule.
    #[error("ring capacity {requested} bytes: {reason}")]
    Capacity {
        /// The capacity asked for.
        requested: usize,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The granule is not a power-of-two multiple of the page size.
    #[error("granule of {granule} bytes: {reason}")]
    Granule {
        /// The granule given.
        granule: usize,
        /// Why it was refused.
        reason: &'static str,
    },
    /// `memfd_create` or sealing the ring's memfd failed.
    #[error("the ring's memfd: {0}")]
    Memfd(#[source] memfd::Error),
    /// A system call on the ring's address range failed.
    #[error("{op} of {len} bytes at {addr:#x} for the ring failed: {errno}")]
    Map {
        /// The call (`reserve`, `mmap`, `ftruncate`, …).
        op: &'static str,
        /// The address involved (0 before one exists).
        addr: usize,
        /// The length involved.
        len: usize,
        /// What the kernel said.
        errno: Errno,
    },
    /// A file handed in is not the memfd of a ring made by [`HostMirror`](crate::HostMirror).
    #[error("not a ring memfd: {reason}")]
    NotARing {
        /// What did not match.
        reason: &'static str,
    },
    /// A KFD call failed during the named step (the source says which ioctl, GPU and range).
    #[error("{step}: {source}")]
    Kfd {
        /// The step of building or tearing down the ring.
        step: &'static str,
        /// The KFD error.
        #[source]
        source: kfd_ioctl::Error,
    },
    /// The requested rights cannot be expressed by the chosen mechanism.
    #[error("access rights: {reason}")]
    Access {
        /// Why.
        reason: &'static str,
    },
    /// The SPSC role is held by another producer or consumer of the same ring.
    #[error("the ring's {role} is already taken")]
    RoleTaken {
        /// `producer` or `consumer`.
        role: &'static str,
    },
    /// No memory pool of the requested kind exists for the GPU.
    #[error("no {what} memory pool on GPU {gpu_id:#x}: {reason}")]
    NoPool {
        /// The GPU.
        gpu_id: u32,
        /// The kind of pool looked for.
        what: &'static str,
        /// Why none fits.
        reason: &'static str,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps a KFD error with the ring-construction step it failed in.
pub(crate) fn at_step(step: &'static str) -> impl FnOnce(kfd_ioctl::Error) -> Error {
    move |source| Error::Kfd { step, source }
}
