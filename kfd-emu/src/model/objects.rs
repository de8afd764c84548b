//! Buffer objects (the kernel's `kgd_mem`), the memory behind them, and dma-bufs.

use std::collections::BTreeSet;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::io::Errno;

use super::files::{self, FileKey};
use super::memory::Charge;
use super::process::State;

/// Where a BO's bytes are.
#[derive(Debug, Clone)]
pub(super) enum Store {
    /// Its own sealed memfd of the BO's size, the bytes from offset 0 (VRAM and GTT). CPU
    /// mappings through the render node are redirected to it, a dma-buf of the BO is a reopen
    /// of it, and its pages live as long as any of those or a backing holds it.
    Memfd(Arc<OwnedFd>),
    /// The caller's own memory at `addr` (USERPTR).
    UserPtr { tgid: i32, addr: u64 },
    /// The KFD process's `/dev/kfd` memfd at `offset` (doorbells, the MMIO-remap page).
    Kfd { tgid: i32, offset: u64 },
}

/// The memory domain a BO prefers (`preferred_domains`), which dma-buf queries report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Domain {
    /// Device memory.
    Vram,
    /// System memory (GTT, USERPTR, and the SG BOs of doorbells and MMIO).
    Gtt,
}

/// The memory of a BO, shared by the BO, its imports and its dma-buf.
#[derive(Debug)]
pub(super) struct Backing {
    /// BOs and dma-bufs that refer to it.
    pub refs: u32,
    pub store: Store,
    /// Bytes (page-aligned).
    pub size: u64,
    /// The GPU (index) the memory belongs to.
    pub gpu: usize,
    pub domain: Domain,
    /// `AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED` (VRAM allocated `PUBLIC`).
    pub cpu_access: bool,
    /// What was reserved for it, given back when the last reference goes.
    pub charge: Charge,
    /// Its DRM vma offsets, as (GPU index, byte offset): a GEM object per DRM device. The
    /// memory's own GPU's goes with the last reference, another GPU's (an import there) with
    /// the last handle on that GPU.
    pub offsets: Vec<(usize, u64)>,
}

/// One buffer object handle of a process on one GPU.
#[derive(Debug)]
pub(super) struct Bo {
    /// The GPU VA recorded at ALLOC or IMPORT (mapped at MAP).
    pub va: u64,
    /// The BO size in bytes (page aligned; half the request for `AQL_QUEUE_MEM`).
    pub size: u64,
    /// `KFD_IOC_ALLOC_MEM_FLAGS_*` (for imports: VRAM or GTT | WRITABLE | EXECUTABLE).
    pub flags: u32,
    /// The backing id.
    pub backing: u64,
    /// GPU indices it is mapped on.
    pub mapped: BTreeSet<usize>,
    /// Made by IMPORT_DMABUF.
    pub imported: bool,
    /// Mapped twice, at `va` and `va + size` (`AQL_QUEUE_MEM`).
    pub aql: bool,
    /// The dma-buf EXPORT_DMABUF made for it.
    pub dmabuf: Option<u64>,
}

/// A dma-buf the model exported: a stand-in memfd the model recognises by inode.
#[derive(Debug)]
pub(super) struct Dmabuf {
    pub backing: u64,
    /// The stand-in file; every export of the BO installs this same open file.
    pub file: OwnedFd,
    pub key: FileKey,
    /// The process that exported it (the dma-buf goes when that process does).
    pub exporter: i32,
}

impl State {
    /// Registers a new backing with one reference.
    pub(super) fn add_backing(&mut self, backing: Backing) -> u64 {
        let id = self.next_backing;
        self.next_backing += 1;
        self.backings.insert(id, backing);
        id
    }

    /// Drops one reference to backing `id`; the last gives the memory and its charge back.
    pub(super) fn put_backing(&mut self, id: u64) {
        let Some(backing) = self.backings.get_mut(&id) else {
            return;
        };
        backing.refs = backing.refs.saturating_sub(1);
        if backing.refs > 0 {
            return;
        }
        let Some(backing) = self.backings.remove(&id) else {
            return;
        };
        self.acc.unreserve(backing.gpu, backing.charge);
        for (gpu, start) in backing.offsets {
            self.vma[gpu].remove(start);
        }
        // The memfd closes with the last holder: a mapping or a dma-buf fd a program still
        // has keeps its pages, as the kernel's keep a reference on the GEM object.
    }

    /// The process memory behind `offset` of backing `id` (`(tgid, address)`) when it is a
    /// USERPTR BO; `None` when the model keeps the bytes itself.
    pub(super) fn backing_user(&self, id: u64, offset: u64) -> Result<Option<(i32, u64)>, Errno> {
        let backing = self.backings.get(&id).ok_or(Errno::FAULT)?;
        match &backing.store {
            &Store::UserPtr { tgid, addr } => {
                Ok(Some((tgid, addr.checked_add(offset).ok_or(Errno::FAULT)?)))
            }
            Store::Memfd(_) | Store::Kfd { .. } => Ok(None),
        }
    }

    /// Reads `buf.len()` bytes at `offset` of backing `id`.
    pub(super) fn backing_read(&self, id: u64, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let backing = self.backings.get(&id).ok_or(Errno::FAULT)?;
        match &backing.store {
            Store::Memfd(fd) => files::read_at(fd.as_fd(), offset, buf),
            &Store::Kfd { tgid, offset: base } => {
                let process = self.procs.get(&tgid).ok_or(Errno::FAULT)?;
                files::read_at(process.memfd.as_fd(), base + offset, buf)
            }
            &Store::UserPtr { tgid, addr } => {
                remote_read(tgid, addr.checked_add(offset).ok_or(Errno::FAULT)?, buf)
            }
        }
    }

    /// Writes `buf` at `offset` of backing `id`.
    pub(super) fn backing_write(&self, id: u64, offset: u64, buf: &[u8]) -> Result<(), Errno> {
        let backing = self.backings.get(&id).ok_or(Errno::FAULT)?;
        match &backing.store {
            Store::Memfd(fd) => files::write_at(fd.as_fd(), offset, buf),
            &Store::Kfd { tgid, offset: base } => {
                let process = self.procs.get(&tgid).ok_or(Errno::FAULT)?;
                files::write_at(process.memfd.as_fd(), base + offset, buf)
            }
            &Store::UserPtr { tgid, addr } => {
                remote_write(tgid, addr.checked_add(offset).ok_or(Errno::FAULT)?, buf)
            }
        }
    }
}

/// Reads another process's memory (`process_vm_readv`).
pub(super) fn remote_read(tgid: i32, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    let len = buf.len();
    let remote = [RemoteIoVec {
        base: usize::try_from(addr).map_err(|_| Errno::FAULT)?,
        len,
    }];
    let mut local = [std::io::IoSliceMut::new(buf)];
    let n = process_vm_readv(nix::unistd::Pid::from_raw(tgid), &mut local, &remote)
        .map_err(|e| Errno::from_raw_os_error(e as i32))?;
    if n == len { Ok(()) } else { Err(Errno::FAULT) }
}

/// Writes another process's memory (`process_vm_writev`).
pub(super) fn remote_write(tgid: i32, addr: u64, buf: &[u8]) -> Result<(), Errno> {
    use nix::sys::uio::{RemoteIoVec, process_vm_writev};
    let remote = [RemoteIoVec {
        base: usize::try_from(addr).map_err(|_| Errno::FAULT)?,
        len: buf.len(),
    }];
    let local = [std::io::IoSlice::new(buf)];
    let n = process_vm_writev(nix::unistd::Pid::from_raw(tgid), &local, &remote)
        .map_err(|e| Errno::from_raw_os_error(e as i32))?;
    if n == buf.len() {
        Ok(())
    } else {
        Err(Errno::FAULT)
    }
}
