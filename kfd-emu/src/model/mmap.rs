//! `mmap` of the stand-ins at the kernel's offsets ([`Backend::mmap`](crate::backend::Backend::mmap)).
//!
//! * `/dev/kfd`: the offset encodes a type and a GPU id (`KFD_MMAP_*` in `kfd_priv.h`, which are
//!   kernel-internal, not uapi), decoded as `kfd_mmap` (`kfd_chardev.c`) does; the mapping is
//!   redirected to the process's `/dev/kfd` memfd, which keeps the event page and, per GPU, the
//!   doorbell slice, the MMIO-remap page and the CWSR pages of `RESERVED_MEM`.
//! * A render node: the offset is a DRM vma-manager offset (`drm_vma_manager.h`): pages from
//!   `DRM_FILE_PAGE_OFFSET_START` (4 GiB), one node per GEM object and DRM device, placed best
//!   fit as `drm_mm` does (`DRM_MM_INSERT_BEST`). `drm_gem_mmap` finds the node the whole range
//!   lies in (else `EINVAL`), checks the file is allowed on it (`drm_vma_node_is_allowed`, else
//!   `EACCES`), and `amdgpu_gem_object_mmap` refuses userptr BOs (`EPERM`). KFD creates no
//!   `NO_CPU_ACCESS` BO: VRAM without PUBLIC is mapped too (the debugger reaches every BO
//!   through it; on a small BAR the kernel moves the BO where the CPU can reach it on fault).
//!   The mapping is redirected to the BO's own memfd.
//! * A dma-buf: the stand-in is a reopen of the BO's memfd, so its mapping runs natively once
//!   `dma_buf_mmap`'s checks passed.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Arc;

use rustix::io::Errno;

use super::driver::{Driver, FileKind};
use super::files;
use super::memory::PAGE_SIZE;
use super::objects::Store;
use super::offsets::*;
use super::process::{EVENT_PAGE_OFFSET, EVENT_PAGE_SIZE, Process, State, doorbell_slice};
use crate::backend::{CallerId, MmapAction};

impl State {
    /// The vma offset of `backing` on GPU `gpu`, adding a node when it has none there yet (a
    /// GEM object per device: an import on another GPU is a new object).
    pub(super) fn vma_offset(&mut self, backing: u64, gpu: usize) -> Result<u64, Errno> {
        let b = self.backings.get_mut(&backing).ok_or(Errno::INVAL)?;
        if let Some(&(_, start)) = b.offsets.iter().find(|(g, _)| *g == gpu) {
            return Ok(start);
        }
        let start = self.vma[gpu].add(b.size, backing).ok_or(Errno::NOMEM)?;
        b.offsets.push((gpu, start));
        Ok(start)
    }
}

impl State {
    /// A handle on `backing` on GPU `gpu` went: an import's GEM object on a device other than
    /// the memory's own goes with the last handle on it there, and its vma node with it.
    pub(super) fn handle_dropped(&mut self, backing: u64, gpu: usize) {
        if self.backings.get(&backing).is_none_or(|b| b.gpu == gpu) {
            return;
        }
        let held = self.procs.values().any(|p| {
            p.pdds
                .get(gpu)
                .is_some_and(|pdd| pdd.bos.values().any(|bo| bo.backing == backing))
        }) || self
            .drm_files
            .values()
            .any(|f| f.gpu == gpu && f.handles.values().any(|&b| b == backing));
        if held {
            return;
        }
        if let Some(b) = self.backings.get_mut(&backing)
            && let Some(i) = b.offsets.iter().position(|&(g, _)| g == gpu)
        {
            let (_, start) = b.offsets.swap_remove(i);
            self.vma[gpu].remove(start);
        }
    }
}

impl Driver {
    /// [`Backend::mmap`](crate::backend::Backend::mmap).
    pub(super) fn mmap_standin(
        &self,
        caller: CallerId,
        file: BorrowedFd<'_>,
        offset: u64,
        len: u64,
        prot: u32,
        flags: u32,
    ) -> MmapAction {
        let Ok(key) = files::key_of(file) else {
            return MmapAction::Continue;
        };
        let Some(kind) = self.kind_of(&key).or_else(|| self.released_kind(file)) else {
            return MmapAction::Continue;
        };
        // What the mmap syscall itself checks before any driver sees the call.
        if len == 0 || !offset.is_multiple_of(PAGE_SIZE) {
            return MmapAction::Fail(Errno::INVAL);
        }
        let Some(pages) = len.checked_next_multiple_of(PAGE_SIZE) else {
            return MmapAction::Fail(Errno::NOMEM);
        };
        if (offset / PAGE_SIZE)
            .checked_add(pages / PAGE_SIZE)
            .is_none()
        {
            return MmapAction::Fail(Errno::OVERFLOW);
        }
        // Then do_mmap's file checks, still before the driver: a file not open for reading
        // cannot be mapped, and a shared writable mapping needs one open for writing. A
        // stand-in is opened with the caller's access mode, so its duplicate says which.
        if let Some(errno) = files::mmap_access_refused(file, prot, flags) {
            return MmapAction::Fail(errno);
        }
        let result = match kind {
            FileKind::Kfd { tgid, serial } => {
                let r = self.mmap_kfd(caller, tgid, serial, offset, pages);
                // kfd_event_mmap: `p->signal_mapped_size = vma->vm_end - vma->vm_start`.
                if r.is_ok()
                    && offset & KFD_MMAP_TYPE_MASK == KFD_MMAP_TYPE_EVENTS
                    && let Some(p) = self.lock().procs.get_mut(&tgid)
                {
                    p.events.mapped_size = pages;
                }
                r
            }
            FileKind::Render { gpu, .. } => self.mmap_render(key, gpu, offset, pages),
            FileKind::Dmabuf { id } => self.mmap_dmabuf(id, offset, pages),
        };
        match result {
            Ok(Some((fd, offset))) => MmapAction::Redirect { fd, offset },
            Ok(None) => MmapAction::Continue,
            Err(errno) => MmapAction::Fail(errno),
        }
    }

    /// `kfd_mmap` on the `/dev/kfd` of process `(tgid, serial)`: only that process may map
    /// it, `EBADF` for another one or once it is gone (the 2025 `kfd_mmap` that takes the
    /// process from the file, as `kfd_ioctl` does; before it, `kfd_get_process(current)` gave
    /// the caller's own process, and `EINVAL` when it had none).
    fn mmap_kfd(
        &self,
        caller: CallerId,
        tgid: i32,
        serial: u64,
        offset: u64,
        len: u64,
    ) -> Result<Option<(Arc<OwnedFd>, u64)>, Errno> {
        let st = self.lock();
        let process = match st.procs.get(&tgid) {
            Some(p) if p.serial == serial && caller.tgid == tgid => p,
            _ => return Err(Errno::BADF),
        };
        let gpu_id = ((offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT) as u32;
        let dev = if gpu_id != 0 {
            self.dev.gpu_index(gpu_id)
        } else {
            None
        };
        let memfd = process.memfd.clone();
        let at = match offset & KFD_MMAP_TYPE_MASK {
            KFD_MMAP_TYPE_DOORBELL => {
                let gpu = dev.ok_or(Errno::NODEV)?;
                // kfd_doorbell_mmap: the whole slice of one process and GPU, nothing else.
                if len != doorbell_slice(self.dev.cfg.machine.gpus()[gpu].layout) {
                    return Err(Errno::INVAL);
                }
                Process::doorbell_offset(gpu)
            }
            KFD_MMAP_TYPE_EVENTS => {
                // kfd_event_mmap: at most the signal page, once there is one.
                if get_order(EVENT_PAGE_SIZE) < get_order(len) {
                    return Err(Errno::INVAL);
                }
                match process.events.signal_page() {
                    None => return Err(Errno::INVAL),
                    Some(super::events::SignalPage::Kernel) => EVENT_PAGE_OFFSET,
                    // A BO given as the signal page: the kernel maps its kernel mapping; the
                    // model maps the BO's memory.
                    Some(super::events::SignalPage::Bo { backing }) => {
                        let b = st.backings.get(&backing).ok_or(Errno::INVAL)?;
                        return match &b.store {
                            Store::Memfd(fd) if len <= b.size => Ok(Some((fd.clone(), 0))),
                            _ => Err(Errno::INVAL),
                        };
                    }
                }
            }
            KFD_MMAP_TYPE_RESERVED_MEM => {
                let gpu = dev.ok_or(Errno::NODEV)?;
                if len != KFD_CWSR_TBA_TMA_SIZE {
                    return Err(Errno::INVAL);
                }
                Process::reserved_offset(gpu)
            }
            _ => {
                // KFD_MMAP_TYPE_MMIO, kfd_mmio_mmap: exactly one page.
                let gpu = dev.ok_or(Errno::NODEV)?;
                if len != PAGE_SIZE {
                    return Err(Errno::INVAL);
                }
                Process::mmio_offset(gpu)
            }
        };
        Ok(Some((memfd, at)))
    }

    /// `drm_gem_mmap` on render stand-in `key` of GPU `gpu`.
    fn mmap_render(
        &self,
        key: files::FileKey,
        gpu: usize,
        offset: u64,
        len: u64,
    ) -> Result<Option<(Arc<OwnedFd>, u64)>, Errno> {
        let st = self.lock();
        let (start, backing) = st.vma[gpu].lookup(offset, len).ok_or(Errno::INVAL)?;
        // drm_vma_node_is_allowed: the file is the DRM file of a process's GPU VM
        // (ACQUIRE_VM) and that process holds a handle on the object, or the file holds a
        // GEM handle on it (`drm_gem_handle_create` allows the file on its node). Decided by the file, so
        // a forked child mapping through its parent's fd gets what the parent would.
        let allowed = st.procs.values().any(|p| {
            p.pdds.get(gpu).is_some_and(|pdd| {
                pdd.drm_key == Some(key) && pdd.bos.values().any(|bo| bo.backing == backing)
            })
        }) || st
            .drm_files
            .get(&key)
            .is_some_and(|f| f.handles.values().any(|&b| b == backing));
        if !allowed {
            return Err(Errno::ACCESS);
        }
        let b = st.backings.get(&backing).ok_or(Errno::INVAL)?;
        let at = offset - start;
        match &b.store {
            // A GEM object created NO_CPU_ACCESS is refused (`amdgpu_gem_object_mmap`).
            Store::Memfd(_) if b.gem.flags & 0x2 != 0 => Err(Errno::PERM),
            // amdgpu_gem_object_mmap refuses AMDGPU_GEM_CREATE_NO_CPU_ACCESS, which
            // amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu no longer sets on VRAM without PUBLIC
            // (`PUBLIC ? CPU_ACCESS_REQUIRED : 0`, since "The thunk needs to mmap all BOs for
            // CPU access to allow the debugger to access them"): every VRAM BO maps.
            Store::Memfd(fd) => Ok(Some((fd.clone(), at))),
            // amdgpu_ttm_tt_get_usermm: a userptr BO cannot be mapped through DRM.
            Store::UserPtr { .. } => Err(Errno::PERM),
            // The SG BOs of doorbells and MMIO: the pages they stand for.
            Store::Kfd { tgid, offset: base } => {
                let p = st.procs.get(tgid).ok_or(Errno::INVAL)?;
                Ok(Some((p.memfd.clone(), base + at)))
            }
        }
    }

    /// `dma_buf_mmap_internal` then `amdgpu_gem_object_mmap` on the exported BO: the range
    /// must lie in the buffer; the mapping itself runs natively on the BO's memfd.
    fn mmap_dmabuf(
        &self,
        id: u64,
        offset: u64,
        len: u64,
    ) -> Result<Option<(Arc<OwnedFd>, u64)>, Errno> {
        let st = self.lock();
        let dmabuf = st.dmabufs.get(&id).ok_or(Errno::INVAL)?;
        let b = st.backings.get(&dmabuf.backing).ok_or(Errno::INVAL)?;
        if offset.checked_add(len).is_none_or(|end| end > b.size) {
            return Err(Errno::INVAL);
        }
        match b.store {
            // amdgpu_gem_object_mmap again: no KFD BO is NO_CPU_ACCESS (see mmap_render).
            Store::Memfd(_) => Ok(None),
            Store::UserPtr { .. } | Store::Kfd { .. } => Err(Errno::PERM),
        }
    }
}

/// A tracer's `PTRACE_POKEDATA` of `word` at `addr` of `tracee` where `addr` is in a read-only
/// (or inaccessible) mapping of a BO's memfd: the kernel's `ptrace_access_vm` cannot pin such
/// a page for writing (a shared mapping without `VM_WRITE` refuses `FOLL_FORCE`), so
/// `__access_remote_vm` calls the VMA's `vm_ops->access`, which for a BO mapping is
/// `ttm_bo_vm_access` (`amdgpu_ttm_access_memory` for VRAM, the host-invisible part
/// included): it writes the BO's memory whatever the mapping's protection. Here the word
/// goes into the BO's memfd at the mapping's offset. `None` (the kernel runs the call) for
/// any other address, a writable mapping (the kernel's own write reaches the memfd), a word
/// crossing the mapping's end, or a kernel without `PROCMAP_QUERY`; `EIO` for a word past
/// the BO's end (the access hook fails, `ptrace` answers `EIO`).
pub(super) fn ptrace_poke(
    drv: &Driver,
    tracee: i32,
    addr: u64,
    word: u64,
) -> Option<Result<(), Errno>> {
    use crate::procmap::{PROCMAP_QUERY_VMA_WRITABLE, procmap_query};
    use std::os::fd::AsFd;
    let maps = std::fs::File::open(format!("/proc/{tracee}/maps")).ok()?;
    let q = procmap_query(maps.as_fd(), addr, 0, &mut []).ok()?;
    let end = addr.checked_add(8)?;
    if end > q.vma_end || q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE != 0 {
        return None;
    }
    let key = (libc::makedev(q.dev_major, q.dev_minor), q.inode);
    let (fd, size) = {
        let st = drv.lock();
        st.backings.values().find_map(|b| match &b.store {
            Store::Memfd(fd) if files::key_of(fd.as_fd()) == Ok(key) => {
                Some((Arc::clone(fd), b.size))
            }
            _ => None,
        })?
    };
    let at = q.vma_offset + (addr - q.vma_start);
    if at.checked_add(8).is_none_or(|e| e > size) {
        return Some(Err(Errno::IO));
    }
    Some(files::write_at(fd.as_fd(), at, &word.to_ne_bytes()).map_err(|_| Errno::IO))
}
