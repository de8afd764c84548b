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
    /// A memfd handed in lacks the seals that keep its size fixed: without them the peer
    /// that holds it could shrink the file, and the next access to a mapping of the lost
    /// part would die with `SIGBUS`.
    #[error("the ring memfd lacks {missing}: a peer could shrink or grow it under the mapping")]
    #[doc(alias = "F_SEAL_SHRINK")]
    #[doc(alias = "F_SEAL_GROW")]
    Unsealed {
        /// The missing seals (`F_SEAL_SHRINK`, `F_SEAL_GROW`, or both).
        missing: &'static str,
    },
    /// The SPSC role is held by another producer or consumer of the same ring.
    #[error("the ring's {role} is already taken (by process {holder})")]
    RoleTaken {
        /// `producer` or `consumer`.
        role: &'static str,
        /// The id of the process that claimed it (as written in the shared ring header).
        holder: u32,
    },
    /// The CPU views of a [`DeviceRing`](crate::DeviceRing) are already handed out: only one
    /// [`DeviceCpuView`](crate::DeviceCpuView) exists at a time, so two rings can never be put
    /// on the same bytes.
    #[error("the device ring's CPU views are already in use")]
    CpuViewTaken,
    /// The [`DeviceRing`](crate::DeviceRing) was made without CPU views.
    #[error(
        "the device ring has no CPU views (made without them, or its pool is not host accessible)"
    )]
    NoCpuViews,
    /// The shared header of an SPSC ring holds impossible positions (a peer broke the
    /// protocol) when attaching to it.
    #[error(transparent)]
    Corrupt(#[from] crate::RingCorrupt),
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
