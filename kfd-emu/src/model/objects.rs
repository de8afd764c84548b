//! Buffer objects (the kernel's `kgd_mem`), the memory behind them, dma-bufs, and the GEM
//! side of a DRM file (`drm_file`'s object idr, its `amdgpu_vm` mappings, command-submission
//! contexts and BO lists: `amdgpu_gem.c`, `amdgpu_ctx.c`, `amdgpu_bo_list.c`).

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use kfd_ioctl::abi::AllocMemFlags;
use rustix::io::Errno;

use super::files::FileKey;
use super::memory::Charge;

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
    /// What amdgpu keeps of the object beyond its memory (GEM create info, UMD metadata).
    pub gem: Gem,
    /// Where TTM has it (`evict`): a `Domain::Vram` object is in VRAM unless evicted to GTT.
    pub placed: Placed,
}

/// The amdgpu side of a BO (`amdgpu_bo` / `amdgpu_bo_user`): what GEM_CREATE asked and
/// GEM_METADATA set. KFD BOs have `domains` 0 (their domain is [`Backing::domain`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Gem {
    /// `preferred_domains` (`AMDGPU_GEM_DOMAIN_*`) of a GEM_CREATE object.
    pub domains: u32,
    /// `AMDGPU_GEM_CREATE_*` flags as created.
    pub flags: u64,
    /// The alignment asked (bytes).
    pub alignment: u64,
    /// `amdgpu_bo_set_tiling_flags`.
    pub tiling: u64,
    /// `amdgpu_bo_set_metadata`: the UMD metadata (at most 256 bytes) and its flags.
    pub metadata: Vec<u8>,
    pub metadata_flags: u64,
}

/// Where TTM placed a VRAM object (`ttm_resource`): in VRAM, or evicted to GTT; and its
/// place in the VRAM manager's LRU (`ttm_resource_manager`'s list: moved to the tail at each
/// validation, evicted from the head).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Placed {
    /// Moved out of VRAM (to GTT) by an eviction, or placed in GTT by GEM_CREATE's fallback.
    pub evicted: bool,
    /// The LRU stamp: lower was validated longer ago.
    pub lru: u64,
}

/// A GPU VA mapping of a DRM file's VM (`amdgpu_bo_va_mapping`, GEM_VA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GemVa {
    /// One past the last byte.
    pub end: u64,
    pub backing: u64,
    /// The offset in the BO of the first byte.
    pub offset: u64,
    /// `AMDGPU_VM_PAGE_*` flags.
    pub flags: u32,
}

/// A command-submission context (`amdgpu_ctx`): the sequence number the next submission on
/// each (IP type, instance, ring) gets (`amdgpu_ctx_entity::sequence`, from 1).
#[derive(Debug, Clone, Default)]
pub(super) struct CsCtx {
    pub next_seq: BTreeMap<(u32, u32, u32), u64>,
}

/// What a DRM file (a render-node open) holds: its GEM handles (`drm_file::object_idr`, from
/// 1), its VM's GEM_VA mappings, its contexts and BO lists.
#[derive(Debug)]
pub(super) struct DrmFile {
    /// The GPU index of the node.
    pub gpu: usize,
    /// Handle → backing id (each handle holds one reference).
    pub handles: BTreeMap<u32, u64>,
    /// GEM_VA mappings by start address.
    pub va: BTreeMap<u64, GemVa>,
    /// Contexts by id (from 1).
    pub ctxs: BTreeMap<u32, CsCtx>,
    /// BO lists by id (from 1): the handles listed.
    pub bo_lists: BTreeMap<u32, Vec<u32>>,
}

impl DrmFile {
    pub(super) fn new(gpu: usize) -> DrmFile {
        DrmFile {
            gpu,
            handles: BTreeMap::new(),
            va: BTreeMap::new(),
            ctxs: BTreeMap::new(),
            bo_lists: BTreeMap::new(),
        }
    }

    /// The lowest free id from 1 of `map` (`idr_alloc(.., 1, 0)`).
    pub(super) fn free_id<T>(map: &BTreeMap<u32, T>) -> Option<u32> {
        let mut expected = 1u32;
        for &id in map.keys() {
            if id != expected {
                break;
            }
            expected = expected.checked_add(1)?;
        }
        (expected <= i32::MAX as u32).then_some(expected)
    }

    /// The handle this file already has on `backing` (`drm_prime_lookup_buf_handle`).
    pub(super) fn handle_of(&self, backing: u64) -> Option<u32> {
        self.handles
            .iter()
            .find(|(_, b)| **b == backing)
            .map(|(&h, _)| h)
    }

    /// The mapping that holds GPU VA `va` (`amdgpu_vm_bo_lookup_mapping`).
    pub(super) fn mapping_at(&self, va: u64) -> Option<(u64, GemVa)> {
        self.va
            .range(..=va)
            .next_back()
            .filter(|(_, m)| va < m.end)
            .map(|(&s, &m)| (s, m))
    }
}

/// One buffer object handle of a process on one GPU.
#[derive(Debug)]
pub(super) struct Bo {
    /// The GPU VA recorded at ALLOC or IMPORT (mapped at MAP).
    pub va: u64,
    /// The BO size in bytes (page aligned; half the request for `AQL_QUEUE_MEM`).
    pub size: u64,
    /// `KFD_IOC_ALLOC_MEM_FLAGS_*` (for imports: VRAM or GTT | WRITABLE | EXECUTABLE).
    pub flags: AllocMemFlags,
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

/// What the MMU notifiers of a process's USERPTR BOs left (`amdgpu_amdkfd_evict_userptr`):
/// BOs by backing id.
#[derive(Debug, Default)]
pub(super) struct Userptrs {
    /// `process_info->evicted_bos != 0`: the queues were quiesced for a USERPTR and the restore
    /// worker has not run yet.
    pub evicted: bool,
    /// `mem->invalid`: invalidated since the restore worker last got their pages.
    pub invalid: BTreeSet<u64>,
    /// Their pages could not be got again (the memory was unmapped): the restore worker
    /// takes that `EFAULT` for success ("it will fail later with a VM fault if the GPU tries
    /// to access it"), and GPU accesses through them fault.
    pub no_pages: BTreeSet<u64>,
}

/// A dma-buf the model exported: a stand-in memfd the model recognises by inode. It holds a
/// reference on its backing and lives, as the kernel's `struct dma_buf` does, while any
/// program still holds one of the files exported for it (an fd in any process or in flight,
/// a mapping), whoever exported it and whether or not that process is still there
/// (`teardown::release_closed_dmabufs`).
#[derive(Debug)]
pub(super) struct Dmabuf {
    pub backing: u64,
    /// An open file of the stand-in that the model keeps and never hands out: exports are new
    /// opens of it (`files::exported_file`), and it is what asks whether any of them is still
    /// held (`files::exported_file_alive`).
    pub probe: OwnedFd,
    pub key: FileKey,
}

/// Open `/proc/<tgid>/mem` files kept for the GPU's accesses to process memory
/// ([`remote_read`], [`remote_write`]), the most recently opened last: a `pread`/`pwrite` on
/// one costs the host no `ptrace` access check and no task lookup, which every
/// `process_vm_readv`/`writev` makes (`mm_access`: a quarter of an empty dispatch's time on a
/// queue in USERPTR memory, `docs/conformance.md`, "A dispatch's fixed cost"). The file
/// holds the process's `mm` as it was when opened: a process gone (or a pid reused) reads
/// nothing through it, the access falls back to `process_vm_*`, which says why (`ESRCH` for a
/// process gone), and the file is forgotten, so that a later process given the same pid is
/// never read through it. The list's lock is held only to find or change an entry, never during
/// an access (`tests` below hold both to it).
static MEM_FILES: std::sync::Mutex<Vec<(i32, Arc<std::fs::File>)>> =
    std::sync::Mutex::new(Vec::new());
/// Files [`MEM_FILES`] keeps at most.
const MEM_FILES_KEPT: usize = 16;

/// Process `tgid`'s kept `/proc/<tgid>/mem`, opened on first use; `None` when it cannot be.
fn mem_file(tgid: i32) -> Option<Arc<std::fs::File>> {
    let lock = || MEM_FILES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, f)) = lock().iter().find(|(t, _)| *t == tgid) {
        return Some(Arc::clone(f));
    }
    let file = Arc::new(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{tgid}/mem"))
            .ok()?,
    );
    let mut files = lock();
    files.retain(|(t, _)| *t != tgid);
    if files.len() >= MEM_FILES_KEPT {
        files.remove(0);
    }
    files.push((tgid, Arc::clone(&file)));
    Some(file)
}

/// Drops process `tgid`'s kept file (an access through it failed: the process may be gone).
fn forget_mem_file(tgid: i32) {
    MEM_FILES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(t, _)| *t != tgid);
}

/// Moves bytes of process `tgid`'s memory through its kept `/proc/<tgid>/mem` ([`MEM_FILES`]):
/// what `process_vm_*` followed by the `/proc/<tgid>/mem` fallback of [`remote_read`] and
/// [`remote_write`] reach (the file's accesses are forced, as that fallback's are), in one
/// call. False when it failed (nothing to rely on: the caller goes the `process_vm_*` way).
fn through_mem_file(tgid: i32, f: impl FnOnce(&std::fs::File) -> std::io::Result<()>) -> bool {
    let Some(file) = mem_file(tgid) else {
        return false;
    };
    super::host_calls::process_vm();
    if f(&file).is_ok() {
        return true;
    }
    forget_mem_file(tgid);
    false
}

/// Reads another process's memory: through its kept `/proc/<pid>/mem` ([`MEM_FILES`]), else
/// `process_vm_readv` (and `/proc/<pid>/mem` opened anew for memory hidden from the CPU).
pub(super) fn remote_read(tgid: i32, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    if through_mem_file(tgid, |f| {
        std::os::unix::fs::FileExt::read_exact_at(f, buf, addr)
    }) {
        return Ok(());
    }
    let len = buf.len();
    let remote = [RemoteIoVec {
        base: usize::try_from(addr).map_err(|_| Errno::FAULT)?,
        len,
    }];
    let mut local = [std::io::IoSliceMut::new(buf)];
    super::host_calls::process_vm();
    match process_vm_readv(nix::unistd::Pid::from_raw(tgid), &mut local, &remote) {
        Ok(n) if n == len => Ok(()),
        // Memory the supervisor hid from the CPU (`svm::cpu`), which the GPU still reaches.
        Ok(_) | Err(nix::errno::Errno::EFAULT) => forced(tgid, addr, |f, at| {
            std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
        }),
        Err(e) => Err(Errno::from_raw_os_error(e as i32)),
    }
}

/// Accesses another process's memory through its `/proc/<pid>/mem`, which reaches pages its
/// protection forbids (`FOLL_FORCE`): the SVM pages hidden from its CPU while in VRAM.
fn forced(
    tgid: i32,
    addr: u64,
    f: impl FnOnce(&std::fs::File, u64) -> std::io::Result<()>,
) -> Result<(), Errno> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/{tgid}/mem"))
        .map_err(|_| Errno::FAULT)?;
    f(&file, addr).map_err(|_| Errno::FAULT)
}

/// Writes another process's memory: as [`remote_read`] reads it (`process_vm_writev` the fallback).
pub(super) fn remote_write(tgid: i32, addr: u64, buf: &[u8]) -> Result<(), Errno> {
    use nix::sys::uio::{RemoteIoVec, process_vm_writev};
    if through_mem_file(tgid, |f| {
        std::os::unix::fs::FileExt::write_all_at(f, buf, addr)
    }) {
        return Ok(());
    }
    let remote = [RemoteIoVec {
        base: usize::try_from(addr).map_err(|_| Errno::FAULT)?,
        len: buf.len(),
    }];
    let local = [std::io::IoSlice::new(buf)];
    super::host_calls::process_vm();
    match process_vm_writev(nix::unistd::Pid::from_raw(tgid), &local, &remote) {
        Ok(n) if n == buf.len() => Ok(()),
        // Memory hidden from the CPU (see `remote_read`).
        Ok(_) | Err(nix::errno::Errno::EFAULT) => forced(tgid, addr, |f, at| {
            std::os::unix::fs::FileExt::write_all_at(f, buf, at)
        }),
        Err(e) => Err(Errno::from_raw_os_error(e as i32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, OwnedFd};

    /// A child forked from this test: it runs nothing but a `read` of a pipe (an
    /// async-signal-safe call), so its memory is this process's as it was at the fork, and it
    /// exits when released. Dropping it kills and reaps it if the test did not.
    struct Child {
        pid: i32,
        release: Option<OwnedFd>,
        reaped: bool,
    }

    impl Child {
        /// Forks (or, with `pid`, `clone3`s with that pid as `set_tid`, which needs
        /// `CAP_SYS_ADMIN` in the pid namespace: `None` when the kernel refuses it).
        fn spawn(pid: Option<i32>) -> Option<Child> {
            let (read, release) = rustix::pipe::pipe().expect("pipe");
            let (raw_read, raw_release) = (read.as_raw_fd(), release.as_raw_fd());
            let got = match pid {
                None => {
                    // SAFETY: the child only makes raw system calls (close, read, _exit) on
                    // fds and a local prepared before the fork.
                    unsafe { libc::fork() }
                }
                Some(want) => {
                    let set_tid = [libc::pid_t::from(want)];
                    let mut args = [0u64; 11];
                    args[4] = libc::SIGCHLD as u64; // exit_signal
                    args[8] = set_tid.as_ptr() as u64; // set_tid
                    args[9] = 1; // set_tid_size
                    // SAFETY: clone3 with a `struct clone_args` of 11 u64 fields (88 bytes,
                    // CLONE_ARGS_SIZE_VER2) and no flags: a fork whose child gets `want` as
                    // its pid; `set_tid` outlives the call. The child makes raw system calls
                    // only, as after `fork` above.
                    unsafe {
                        libc::syscall(
                            libc::SYS_clone3,
                            args.as_mut_ptr(),
                            std::mem::size_of_val(&args),
                        ) as i32
                    }
                }
            };
            if got == 0 {
                let mut byte = 0u8;
                // SAFETY: in the child: closes its copy of the release end (so the parent's
                // exit ends the read) and reads one byte into a local, then ends at once.
                unsafe {
                    libc::close(raw_release);
                    libc::read(raw_read, (&raw mut byte).cast(), 1);
                    libc::_exit(0);
                }
            }
            if got < 0 {
                assert!(pid.is_some(), "fork: {}", std::io::Error::last_os_error());
                return None;
            }
            Some(Child {
                pid: got,
                release: Some(release),
                reaped: false,
            })
        }

        /// Lets the child exit and reaps it: its `mm` is gone, and its pid free.
        fn exit_and_reap(&mut self) {
            let release = self.release.take().expect("not released yet");
            rustix::io::write(&release, &[1]).expect("release the child");
            let mut status = 0;
            // SAFETY: waitpid on this test's own child with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &raw mut status, 0) };
            assert_eq!(r, self.pid, "waitpid: {}", std::io::Error::last_os_error());
            self.reaped = true;
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            if !self.reaped {
                // SAFETY: kill and reap this test's own child, still unreaped.
                unsafe {
                    libc::kill(self.pid, libc::SIGKILL);
                    libc::waitpid(self.pid, std::ptr::null_mut(), 0);
                }
            }
        }
    }

    /// Process `tgid`'s kept file, if [`MEM_FILES`] holds one.
    fn kept(tgid: i32) -> Option<Arc<std::fs::File>> {
        MEM_FILES
            .lock()
            .unwrap()
            .iter()
            .find(|(t, _)| *t == tgid)
            .map(|(_, f)| Arc::clone(f))
    }

    /// A process's kept `/proc/<pid>/mem` ([`MEM_FILES`]) does not outlive the process. A
    /// forked child (no exec: its memory is this test's as it was at the fork) is read through
    /// its kept file; once it has exited and been reaped, a read of it reports the process gone
    /// (`ESRCH`, no bytes) and the kept file is dropped; a new process given the same pid
    /// (`clone3`'s `set_tid`, where allowed; a new pid otherwise) is read as itself, never
    /// through the old file. Fails if [`through_mem_file`] does not forget a file whose access
    /// failed.
    #[test]
    fn a_kept_mem_file_of_a_process_gone_reads_nothing() {
        let mut page = vec![0xa1u8; 4096];
        let addr = page.as_ptr() as u64;
        let mut first = Child::spawn(None).expect("fork");
        let tgid = first.pid;
        // This process's copy changes; the child's stays as it was at the fork.
        page.fill(0xb2);
        let mut got = [0u8; 16];
        remote_read(tgid, addr, &mut got).expect("the live child's memory");
        assert_eq!(got, [0xa1; 16], "the child's page, not this process's");
        let old = kept(tgid).expect("a kept file of the child after a read");

        first.exit_and_reap();
        let mut gone = [0u8; 16];
        assert_eq!(remote_read(tgid, addr, &mut gone), Err(Errno::SRCH));
        assert_eq!(gone, [0; 16], "no bytes from a process gone");
        assert!(
            kept(tgid).is_none(),
            "the kept file of a process gone is dropped"
        );

        page.fill(0xc3);
        let second = Child::spawn(Some(tgid)).or_else(|| Child::spawn(None));
        let second = second.expect("a second child");
        page.fill(0xd4);
        let mut again = [0u8; 16];
        remote_read(second.pid, addr, &mut again).expect("the new process's memory");
        assert_eq!(again, [0xc3; 16], "the new process's page");
        if let Some(now) = kept(second.pid) {
            assert!(
                !Arc::ptr_eq(&now, &old),
                "the new process is never read through the old process's file"
            );
        }
        drop(old);
    }

    /// No lock is held while a kept file is read or written: the access runs with
    /// [`MEM_FILES`] free (a slow read, a page fault in the process, does not stall every
    /// other access to process memory).
    #[test]
    fn no_lock_is_held_while_a_kept_file_is_accessed() {
        let page = [0x5au8; 64];
        let child = Child::spawn(None).expect("fork");
        let mut got = [0u8; 8];
        let mut free = false;
        assert!(through_mem_file(child.pid, |f| {
            free = MEM_FILES.try_lock().is_ok();
            std::os::unix::fs::FileExt::read_exact_at(f, &mut got, page.as_ptr() as u64)
        }));
        assert!(free, "MEM_FILES is not locked during the access");
        assert_eq!(got, [0x5a; 8]);
    }
}
