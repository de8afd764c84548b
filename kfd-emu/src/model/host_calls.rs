//! Counts of the host system calls the model makes to reach GPU-visible memory: mappings of
//! BO memfds made and unmapped ([`bo_maps`](super::bo_maps)), `process_vm_readv`/`writev`
//! or `pread`/`pwrite` of `/proc/<pid>/mem` on a process's memory
//! (`objects::remote_read`/`remote_write`) and `pread`/`pwrite` on the
//! model's memfds (`files::read_at`/`write_at`). They do not depend on the host's speed, so a
//! test can hold a dispatch's fixed cost to them (`tests/model_dispatch_cost.rs`: no mapping
//! made or unmapped, and no system call at all, per dispatch of a queue whose memory lies in
//! BOs, once its first dispatch ran).
//!
//! The counts are the emulator process's, over every model in it: relaxed atomic increments,
//! next to system calls that cost thousands of times more.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The system calls counted so far (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCalls {
    /// `mmap`s of a BO memfd (a `bo_maps::BoMap` made).
    pub maps: u64,
    /// `munmap`s of one.
    pub unmaps: u64,
    /// Accesses to a process's memory: `process_vm_readv`/`writev`, or a `pread`/`pwrite` of
    /// its `/proc/<pid>/mem`.
    pub process_vm: u64,
    /// `pread` and `pwrite` calls on the model's memfds.
    pub memfd_io: u64,
}

static MAPS: AtomicU64 = AtomicU64::new(0);
static UNMAPS: AtomicU64 = AtomicU64::new(0);
static PROCESS_VM: AtomicU64 = AtomicU64::new(0);
static MEMFD_IO: AtomicU64 = AtomicU64::new(0);

/// The counts so far.
pub fn host_calls() -> HostCalls {
    HostCalls {
        maps: MAPS.load(Relaxed),
        unmaps: UNMAPS.load(Relaxed),
        process_vm: PROCESS_VM.load(Relaxed),
        memfd_io: MEMFD_IO.load(Relaxed),
    }
}

impl std::ops::Sub for HostCalls {
    type Output = HostCalls;
    /// The calls made between two readings.
    fn sub(self, earlier: HostCalls) -> HostCalls {
        HostCalls {
            maps: self.maps - earlier.maps,
            unmaps: self.unmaps - earlier.unmaps,
            process_vm: self.process_vm - earlier.process_vm,
            memfd_io: self.memfd_io - earlier.memfd_io,
        }
    }
}

pub(super) fn mapped() {
    MAPS.fetch_add(1, Relaxed);
}
pub(super) fn unmapped() {
    UNMAPS.fetch_add(1, Relaxed);
}
pub(super) fn process_vm() {
    PROCESS_VM.fetch_add(1, Relaxed);
}
pub(super) fn memfd_io() {
    MEMFD_IO.fetch_add(1, Relaxed);
}
