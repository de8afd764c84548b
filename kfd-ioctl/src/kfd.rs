//! [`Kfd`], the safe handle on `/dev/kfd`, and the owning types of what it hands out.

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{Mode, OFlags};
use rustix::ioctl::Opcode;
use vm_memory::{Bytes, VolatileSlice};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::abi::{self, AllocMemFlags, ProcFlags, RuntimeEnableMode, SmiEventMask};
use crate::error::{Errno, Error, IoctlContext, Result, Version};
use crate::sys;

/// The path of the KFD character device.
pub const KFD_DEVICE_PATH: &str = "/dev/kfd";

/// How many SVM attributes an SVM call carries without touching the heap.
pub const SVM_INLINE_ATTRS: usize = 32;

/// The render node of a GPU: `/dev/dri/renderD<minor>`.
pub fn render_node_path(drm_render_minor: u32) -> PathBuf {
    PathBuf::from(format!("/dev/dri/renderD{drm_render_minor}"))
}

struct Inner {
    fd: OwnedFd,
    version: Version,
    /// The process that opened the fd. KFD knows a process by its `mm`: a forked child that
    /// inherited the fd is not that process, and its ioctls on it fail with `EBADF`.
    owner_pid: u32,
    /// The render-node file handed to ACQUIRE_VM, per gpu_id. KFD keeps a reference to that
    /// file for the life of the process; keeping ours lets BOs be CPU-mapped through it.
    vms: Mutex<BTreeMap<u32, Arc<OwnedFd>>>,
}

/// The safe handle on `/dev/kfd`: one typed method per memory-side ioctl.
///
/// Cloning is cheap and shares the fd; the fd closes when the last clone and the last
/// [`BufferObject`] drop. A forked child that inherits a `Kfd` (and its buffer objects) only
/// closes the descriptors when it drops them: KFD serves the process that opened `/dev/kfd`,
/// the child's ioctls on that fd fail with `EBADF`, and the memory stays the parent's. A child
/// that wants KFD opens it again. The KFD version is read once, at open; a method whose ioctl (or
/// flag) the running KFD lacks fails with [`Error::Unsupported`] before any syscall.
///
/// ```no_run
/// use kfd_ioctl::{Kfd, abi::AllocMemFlags, topology::Topology};
///
/// let kfd = Kfd::open()?;
/// let topo = Topology::read()?;
/// for gpu in topo.gpus() {
///     let Some(gpu_id) = gpu.gpu_id() else { continue };
///     kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)?;
///     let apertures = kfd.get_process_apertures()?;
///     let base = apertures.iter().find(|a| a.gpu_id == gpu_id).map(|a| a.gpuvm.start);
///     let va = base.unwrap_or(0) + (1 << 40);
///     let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 2 << 20, AllocMemFlags::VRAM | AllocMemFlags::WRITABLE)?;
///     kfd.map_memory_to_gpu(&bo, &[gpu_id])?;
///     kfd.unmap_memory_from_gpu(&bo, &[gpu_id])?;
/// }
/// # Ok::<(), kfd_ioctl::Error>(())
/// ```
#[derive(Clone)]
pub struct Kfd {
    inner: Arc<Inner>,
}

impl fmt::Debug for Kfd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kfd")
            .field("fd", &self.inner.fd.as_raw_fd())
            .field("version", &self.inner.version)
            .field("owner_pid", &self.inner.owner_pid)
            .finish_non_exhaustive()
    }
}

/// A GPU's apertures in this process, from `GET_PROCESS_APERTURES_NEW`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Apertures {
    /// The GPU.
    pub gpu_id: u32,
    /// The LDS aperture (inclusive limit turned into an exclusive end).
    pub lds: std::ops::Range<u64>,
    /// The scratch aperture.
    pub scratch: std::ops::Range<u64>,
    /// The GPU virtual-address range usable for buffer objects.
    pub gpuvm: std::ops::Range<u64>,
}

impl From<&abi::kfd_process_device_apertures> for Apertures {
    fn from(a: &abi::kfd_process_device_apertures) -> Self {
        let range = |base: u64, limit: u64| base..limit.saturating_add(1);
        Apertures {
            gpu_id: a.gpu_id,
            lds: range(a.lds_base, a.lds_limit),
            scratch: range(a.scratch_base, a.scratch_limit),
            gpuvm: range(a.gpuvm_base, a.gpuvm_limit),
        }
    }
}

/// A cache policy for [`Kfd::set_memory_policy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// `KFD_IOC_CACHE_POLICY_COHERENT`.
    Coherent,
    /// `KFD_IOC_CACHE_POLICY_NONCOHERENT`.
    NonCoherent,
}

impl CachePolicy {
    fn raw(self) -> u32 {
        match self {
            CachePolicy::Coherent => abi::KFD_IOC_CACHE_POLICY_COHERENT,
            CachePolicy::NonCoherent => abi::KFD_IOC_CACHE_POLICY_NONCOHERENT,
        }
    }
}

/// The arguments of [`Kfd::set_memory_policy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPolicy {
    /// The default cache policy.
    pub default: CachePolicy,
    /// The policy inside the alternate aperture (GFX7/8 only).
    pub alternate: CachePolicy,
    /// The alternate aperture base (GFX7/8 only; 0 otherwise).
    pub alternate_aperture_base: u64,
    /// The alternate aperture size (GFX7/8 only; 0 otherwise).
    pub alternate_aperture_size: u64,
    /// Per-process flags (KFD ≥ 1.18).
    pub misc_process_flags: ProcFlags,
}

impl Default for MemoryPolicy {
    /// What libhsakmt sets on GFX9+: coherent default and alternate, no aperture, no flags.
    fn default() -> Self {
        MemoryPolicy {
            default: CachePolicy::Coherent,
            alternate: CachePolicy::Coherent,
            alternate_aperture_base: 0,
            alternate_aperture_size: 0,
            misc_process_flags: ProcFlags::empty(),
        }
    }
}

/// What `GET_DMABUF_INFO` tells about a dma-buf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmabufInfo {
    /// The buffer's size in bytes.
    pub size: u64,
    /// The exporting GPU.
    pub gpu_id: u32,
    /// VRAM or GTT, plus PUBLIC when host-accessible.
    pub flags: AllocMemFlags,
    /// The size of the UMD metadata blob (written into the caller's buffer when one was given).
    pub metadata_size: u32,
}

/// The counters of `GET_CLOCK_COUNTERS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockCounters {
    /// The GPU's counter.
    pub gpu_clock_counter: u64,
    /// The CPU's counter (`rdtsc`-like).
    pub cpu_clock_counter: u64,
    /// The system counter (`CLOCK_MONOTONIC_RAW` ns on Linux).
    pub system_clock_counter: u64,
    /// The system counter's frequency in Hz.
    pub system_clock_freq: u64,
}

/// The tiling configuration of `GET_TILE_CONFIG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    /// How many tile-config entries the kernel wrote.
    pub num_tile_configs: u32,
    /// How many macro-tile-config entries the kernel wrote.
    pub num_macro_tile_configs: u32,
    /// `GB_ADDR_CONFIG`.
    pub gb_addr_config: u32,
    /// The number of memory banks.
    pub num_banks: u32,
    /// The number of memory ranks.
    pub num_ranks: u32,
}

/// A buffer object from `ALLOC_MEMORY_OF_GPU` or `IMPORT_DMABUF`; freed on drop.
///
/// Drop unmaps it from the GPUs it was mapped to through [`Kfd::map_memory_to_gpu`] and then
/// frees it, retrying a failure the kernel may not repeat ([`Error::is_transient`]) up to
/// [`BufferObject::DROP_ATTEMPTS`] times; [`Kfd::free_memory_of_gpu`] does the same once and
/// reports errors, giving the object back. A failed unmap keeps the GPUs it did not get
/// through in [`BufferObject::mapped_gpus`], so the next attempt unmaps exactly those.
///
/// In a forked child that inherited it, dropping it issues no ioctl: the BO is the parent's.
pub struct BufferObject {
    kfd: Kfd,
    handle: u64,
    gpu_id: u32,
    va: u64,
    size: u64,
    flags: AllocMemFlags,
    /// `None` for imports: the kernel gives them no offset of their own.
    mmap_offset: Option<u64>,
    /// GPUs this BO is mapped on, in mapping order.
    mapped: Mutex<Vec<u32>>,
    freed: bool,
}

impl fmt::Debug for BufferObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferObject")
            .field("handle", &format_args!("{:#x}", self.handle))
            .field("gpu_id", &format_args!("{:#x}", self.gpu_id))
            .field("va", &format_args!("{:#x}", self.va))
            .field("size", &self.size)
            .field("flags", &self.flags)
            .field("mmap_offset", &self.mmap_offset)
            .field("mapped", &*self.mapped_lock())
            .finish()
    }
}

impl BufferObject {
    /// How many times dropping a buffer object tries to unmap and free it when the kernel
    /// refuses for now (see [`Error::is_transient`]).
    pub const DROP_ATTEMPTS: u32 = 3;

    /// The KFD handle, `(gpu_id << 32) | id`.
    pub fn handle(&self) -> u64 {
        self.handle
    }
    /// The GPU the memory was allocated on.
    pub fn gpu_id(&self) -> u32 {
        self.gpu_id
    }
    /// The GPU virtual address the BO maps at.
    pub fn va(&self) -> u64 {
        self.va
    }
    /// The size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The allocation flags.
    pub fn flags(&self) -> AllocMemFlags {
        self.flags
    }
    /// The offset to mmap (on the render node, or on `/dev/kfd` for doorbell and MMIO pages);
    /// `None` for an imported dma-buf, which has none of its own.
    pub fn mmap_offset(&self) -> Option<u64> {
        self.mmap_offset
    }
    /// The GPUs the BO is currently mapped on through this handle.
    pub fn mapped_gpus(&self) -> Vec<u32> {
        self.mapped_lock().clone()
    }

    fn mapped_lock(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.mapped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Maps the BO into this process for CPU access, through the render node of its GPU
    /// (VRAM, GTT) or through `/dev/kfd` (doorbell, MMIO remap page).
    ///
    /// USERPTR memory is already the caller's; mapping it again is refused. The mapping is not
    /// inherited by a forked child (`MADV_DONTFORK`, as the kernel does for KFD BOs).
    pub fn map_cpu(&self) -> Result<CpuMapping<'_>> {
        self.kfd.check_owner("map_cpu")?;
        let len = usize::try_from(self.size).map_err(|_| Error::InvalidArgument {
            ioctl: "mmap",
            reason: "buffer object larger than the address space",
        })?;
        let offset = self.mmap_offset.ok_or(Error::InvalidArgument {
            ioctl: "mmap",
            reason: "an imported dma-buf has no mmap offset; map the exporting BO",
        })?;
        let errno = |file, errno| Error::Mmap {
            file,
            offset,
            len,
            errno,
        };
        let ptr = if self
            .flags
            .intersects(AllocMemFlags::DOORBELL | AllocMemFlags::MMIO_REMAP)
        {
            sys::mmap_shared(self.kfd.inner.fd.as_fd(), offset, len)
                .map_err(|e| errno("/dev/kfd", e))?
        } else if self.flags.contains(AllocMemFlags::USERPTR) {
            return Err(Error::InvalidArgument {
                ioctl: "mmap",
                reason: "a USERPTR buffer object is already mapped in the process",
            });
        } else {
            let render = self.kfd.render_fd(self.gpu_id).ok_or(Error::NotAcquired {
                gpu_id: self.gpu_id,
            })?;
            sys::mmap_shared(render.as_fd(), offset, len)
                .map_err(|e| errno("the render node", e))?
        };
        Ok(CpuMapping {
            ptr,
            len,
            owner_pid: self.kfd.inner.owner_pid,
            _bo: std::marker::PhantomData,
        })
    }

    /// Unmaps the BO from the GPUs it is still mapped on, then frees it. A failed unmap keeps
    /// the GPUs it did not get through in the mapped list; the BO counts as freed only after
    /// `FREE_MEMORY_OF_GPU` succeeded.
    fn release(&mut self) -> Result<()> {
        let mapped = self.mapped_gpus();
        if !mapped.is_empty() {
            self.kfd.unmap_memory_from_gpu(self, &mapped)?;
        }
        let mut args = abi::kfd_ioctl_free_memory_of_gpu_args {
            handle: self.handle,
        };
        self.kfd.call(
            abi::AMDKFD_IOC_FREE_MEMORY_OF_GPU,
            &mut args,
            IoctlContext::handle(self.handle),
        )?;
        self.freed = true;
        Ok(())
    }
}

impl Drop for BufferObject {
    fn drop(&mut self) {
        // A forked child's ioctls on the inherited fd fail (EBADF) and the BO is the parent's:
        // closing the descriptors (when the last `Kfd` clone drops) is all the child does.
        if self.freed || !self.kfd.is_owner_process() {
            return;
        }
        // Errors cannot be reported from drop (`Kfd::free_memory_of_gpu` reports them); one
        // the kernel may not repeat is worth another try, so that nothing stays behind.
        for _ in 0..Self::DROP_ATTEMPTS {
            match self.release() {
                Err(e) if e.is_transient() => continue,
                _ => break,
            }
        }
    }
}

/// A failed [`Kfd::free_memory_of_gpu`]: the error, and the buffer object, which is still
/// allocated (and still mapped on [`BufferObject::mapped_gpus`]).
///
/// Retry with [`Kfd::free_memory_of_gpu`] on [`FreeError::into_buffer_object`], or drop it:
/// dropping the buffer object (also by turning this into an [`Error`]) tries again.
#[derive(Debug)]
pub struct FreeError {
    error: Error,
    /// Boxed: errors stay small, and this one is rare.
    bo: Box<BufferObject>,
}

impl FreeError {
    /// Why the unmap or the free failed.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The buffer object, still allocated.
    pub fn buffer_object(&self) -> &BufferObject {
        &self.bo
    }

    /// The buffer object back, to retry or to keep.
    pub fn into_buffer_object(self) -> BufferObject {
        *self.bo
    }

    /// The error and the buffer object.
    pub fn into_parts(self) -> (Error, BufferObject) {
        (self.error, *self.bo)
    }
}

impl fmt::Display for FreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "buffer object {:#x} stays allocated: {}",
            self.bo.handle, self.error
        )?;
        let mapped = self.bo.mapped_lock();
        if !mapped.is_empty() {
            write!(f, " (still mapped on gpus")?;
            for gpu in mapped.iter() {
                write!(f, " {gpu:#x}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

impl std::error::Error for FreeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<FreeError> for Error {
    /// The error; the buffer object drops, which tries once more to unmap and free it.
    fn from(e: FreeError) -> Error {
        e.error
    }
}

/// A CPU mapping of a [`BufferObject`]; unmapped on drop, and cannot outlive the BO.
///
/// The memory is shared with the GPU, and with any other mapping of the BO, which may write it
/// at any time: it is reached through [`CpuMapping::as_volatile_slice`] (volatile copies, the
/// [`Bytes`] trait) or [`CpuMapping::read`]/[`CpuMapping::write`], never as a Rust slice from
/// safe code. [`CpuMapping::as_slice`] and [`CpuMapping::as_mut_slice`] are the unsafe way.
///
/// ```no_run
/// # kfd_emu::supervisor::run_attached(
/// #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
/// #     || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use kfd_ioctl::{Kfd, abi::AllocMemFlags, topology::Topology};
/// use vm_memory::Bytes;
///
/// let kfd = Kfd::open()?;
/// let gpu = Topology::read()?.gpus().next().cloned().ok_or("no GPU")?;
/// let gpu_id = gpu.gpu_id().ok_or("no gpu_id")?;
/// kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)?;
/// let va = kfd.get_process_apertures()?[0].gpuvm.start + (1 << 40);
/// let flags = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
/// let bo = kfd.alloc_memory_of_gpu(gpu_id, va, 4096, flags)?;
/// let cpu = bo.map_cpu()?;
/// let memory = cpu.as_volatile_slice()?;
/// memory.write_slice(b"ping", 0)?;
/// memory.write_obj(42u32, 8)?;
/// assert_eq!(memory.read_obj::<u32>(8)?, 42);
/// let mut back = [0u8; 4];
/// cpu.read(0, &mut back)?;
/// assert_eq!(&back, b"ping");
/// # Ok(())
/// # }).unwrap().unwrap();
/// ```
///
/// [`Bytes`]: vm_memory::Bytes
pub struct CpuMapping<'bo> {
    ptr: NonNull<u8>,
    len: usize,
    /// The process that mapped it; a forked child does not inherit the mapping.
    owner_pid: u32,
    _bo: std::marker::PhantomData<&'bo BufferObject>,
}

impl fmt::Debug for CpuMapping<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuMapping")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

// SAFETY: the mapping is plain shared memory; nothing in it is tied to the creating thread.
unsafe impl Send for CpuMapping<'_> {}
// SAFETY: safe access from `&self` is volatile (`VolatileSlice`), which tolerates concurrent
// writers (other threads, the GPU) as it must anyway; the slice accessors are unsafe.
unsafe impl Sync for CpuMapping<'_> {}

impl CpuMapping<'_> {
    /// The start of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the mapping is empty (never, for a real BO).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping as memory another agent may write at any time: volatile reads, writes and
    /// copies through [`vm_memory::Bytes`] and [`VolatileSlice`]'s methods.
    ///
    /// Fails with [`Error::Inherited`] in a forked child, which does not have the mapping.
    pub fn as_volatile_slice(&self) -> Result<VolatileSlice<'_>> {
        if sys::current_pid() != self.owner_pid {
            return Err(Error::Inherited {
                what: "CPU mapping",
                owner_pid: self.owner_pid,
            });
        }
        // SAFETY: `ptr..ptr + len` is this value's live mapping, valid for the slice's
        // lifetime (it borrows `self`, whose drop unmaps), in this process (checked above). Safe
        // code reaches it only through volatile accesses; the slice accessors are unsafe and
        // make their caller rule out every other access.
        Ok(unsafe { VolatileSlice::new(self.ptr.as_ptr(), self.len) })
    }

    /// Copies `data` into the mapping at `offset` (volatile writes).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        self.as_volatile_slice()?
            .write_slice(data, offset)
            .map_err(|_| self.out_of_range())
    }

    /// Copies `out.len()` bytes at `offset` out of the mapping (volatile reads).
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        self.as_volatile_slice()?
            .read_slice(out, offset)
            .map_err(|_| self.out_of_range())
    }

    fn check(&self, offset: usize, n: usize) -> Result<()> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.out_of_range()),
        }
    }

    fn out_of_range(&self) -> Error {
        Error::InvalidArgument {
            ioctl: "mmap",
            reason: "access beyond the end of the CPU mapping",
        }
    }

    /// The mapping as a Rust slice.
    ///
    /// # Safety
    /// For as long as the slice lives, nothing may write the BO's memory: no GPU (no queue or
    /// copy engine writing it, which includes page migration), no other mapping of the BO (in
    /// this or another process, through an export or IPC), no other thread through this
    /// mapping. And the calling process must be the one that mapped it (not a forked child).
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` readable bytes mapped until `self` drops; the caller rules out writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The mapping as a mutable Rust slice.
    ///
    /// # Safety
    /// For as long as the slice lives, nothing else may read or write the BO's memory: no GPU,
    /// no other mapping of the BO (in this or another process), no other thread through this
    /// mapping. And the calling process must be the one that mapped it (not a forked child).
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` writable bytes mapped until `self` drops, borrowed mutably; the caller
        // rules out every other access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for CpuMapping<'_> {
    fn drop(&mut self) {
        // A forked child does not have the mapping (MADV_DONTFORK): the range may hold
        // something else of the child's by now.
        if sys::current_pid() != self.owner_pid {
            return;
        }
        // SAFETY: `ptr`/`len` came from `mmap_shared` in this process and nothing borrows them
        // past `self`.
        unsafe { sys::munmap(self.ptr, self.len) }
    }
}

/// An SMI event file: set an event mask, read the kernel's text records.
///
/// Reads never block (the kernel's fd is non-blocking by nature); poll [`AsFd`] for
/// readiness. Records are lines; [`SmiEvents::read_line`] reassembles records split across
/// reads.
#[derive(Debug)]
pub struct SmiEvents {
    fd: OwnedFd,
    gpu_id: u32,
    pending: Vec<u8>,
}

impl AsFd for SmiEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl SmiEvents {
    /// Wraps an SMI event fd obtained elsewhere (passed over a socket, or a pipe in tests).
    pub fn from_fd(fd: OwnedFd, gpu_id: u32) -> SmiEvents {
        SmiEvents {
            fd,
            gpu_id,
            pending: Vec::new(),
        }
    }

    /// The GPU whose events this fd carries.
    pub fn gpu_id(&self) -> u32 {
        self.gpu_id
    }

    /// Replaces the event mask (bit `i - 1` enables event `i`; 0 disables everything).
    pub fn set_mask(&self, mask: SmiEventMask) -> Result<()> {
        let bytes = mask.bits().to_ne_bytes();
        match rustix::io::write(&self.fd, &bytes) {
            Ok(8) => Ok(()),
            Ok(_) => Err(Error::SmiIo {
                op: "write",
                errno: Errno::IO,
            }),
            Err(errno) => Err(Error::SmiIo { op: "write", errno }),
        }
    }

    /// Reads what the kernel has, up to `buf.len()` bytes (at least one, for a non-empty
    /// `buf`); 0 when nothing is pending (the kernel's `EAGAIN`).
    ///
    /// End of file — the writer of a pipe or socket gone; the kernel's own fd never ends — is
    /// [`Error::SmiEndOfStream`], not 0: a caller that polls and reads again would spin.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match rustix::io::read(&self.fd, buf) {
            Ok(0) => Err(Error::SmiEndOfStream {
                gpu_id: self.gpu_id,
                unfinished: self.pending.len(),
            }),
            Ok(n) => Ok(n),
            Err(Errno::AGAIN) | Err(Errno::INTR) => Ok(0),
            Err(errno) => Err(Error::SmiIo { op: "read", errno }),
        }
    }

    /// The next complete record (without its newline), or `None` when none is pending yet;
    /// [`Error::SmiEndOfStream`] after the last record when the fd reached end of file.
    pub fn read_line(&mut self) -> Result<Option<String>> {
        loop {
            if let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                return Ok(Some(
                    String::from_utf8_lossy(&line[..line.len() - 1]).into_owned(),
                ));
            }
            let mut buf = [0u8; 1024];
            let n = match self.read(&mut buf) {
                Err(e @ Error::SmiEndOfStream { .. }) => {
                    // What never got its newline never will: report it once, then forget it.
                    self.pending.clear();
                    return Err(e);
                }
                other => other?,
            };
            if n == 0 {
                return Ok(None);
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }
}

/// `kfd_ioctl_svm_args` followed by its attributes, laid out as the kernel reads them.
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
struct SvmCall {
    head: abi::kfd_ioctl_svm_args,
    attrs: [abi::kfd_ioctl_svm_attribute; SVM_INLINE_ATTRS],
}

impl Kfd {
    /// Opens `/dev/kfd` (`O_RDWR | O_CLOEXEC`) and reads the KFD version.
    #[doc(alias = "hsaKmtOpenKFD")]
    pub fn open() -> Result<Kfd> {
        let fd = open_device(Path::new(KFD_DEVICE_PATH))?;
        Kfd::from_fd(fd)
    }

    /// Wraps an already open `/dev/kfd` descriptor and reads the KFD version.
    pub fn from_fd(fd: OwnedFd) -> Result<Kfd> {
        let mut args = abi::kfd_ioctl_get_version_args::default();
        sys::ioctl(fd.as_fd(), abi::AMDKFD_IOC_GET_VERSION, &mut args)
            .map_err(|failure| ioctl_error("GET_VERSION", IoctlContext::default(), failure))?;
        let version = Version {
            major: args.major_version,
            minor: args.minor_version,
        };
        if version.major != abi::KFD_IOCTL_MAJOR_VERSION {
            return Err(Error::UnsupportedMajor(version));
        }
        Ok(Kfd::with_version(fd, version))
    }

    /// Wraps a descriptor and trusts `version` without asking the kernel.
    ///
    /// For benchmarks and tests that drive the wrappers against a file that is not KFD.
    #[doc(hidden)]
    pub fn from_fd_assume_version(fd: OwnedFd, version: Version) -> Kfd {
        Kfd::with_version(fd, version)
    }

    fn with_version(fd: OwnedFd, version: Version) -> Kfd {
        Kfd {
            inner: Arc::new(Inner {
                fd,
                version,
                owner_pid: sys::current_pid(),
                vms: Mutex::new(BTreeMap::new()),
            }),
        }
    }

    /// The version read at open.
    pub fn version(&self) -> Version {
        self.inner.version
    }

    /// The `/dev/kfd` descriptor.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    /// The process that opened `/dev/kfd`: the one KFD serves through this handle.
    pub fn owner_pid(&self) -> u32 {
        self.inner.owner_pid
    }

    /// Whether the calling process is the one that opened `/dev/kfd` (false in a forked child
    /// that inherited this handle: its ioctls on it fail with `EBADF`).
    pub fn is_owner_process(&self) -> bool {
        sys::current_pid() == self.inner.owner_pid
    }

    /// Fails with [`Error::Inherited`] in a forked child that inherited this handle.
    fn check_owner(&self, what: &'static str) -> Result<()> {
        if self.is_owner_process() {
            Ok(())
        } else {
            Err(Error::Inherited {
                what,
                owner_pid: self.inner.owner_pid,
            })
        }
    }

    /// `GET_VERSION`: asks the kernel for its KFD version again.
    pub fn get_version(&self) -> Result<Version> {
        let mut args = abi::kfd_ioctl_get_version_args::default();
        self.call(
            abi::AMDKFD_IOC_GET_VERSION,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(Version {
            major: args.major_version,
            minor: args.minor_version,
        })
    }

    /// Fails with [`Error::Unsupported`] unless the running KFD has ioctl `opcode`.
    fn require_nr(&self, opcode: Opcode) -> Result<()> {
        let nr = abi::ioc_nr(opcode);
        match abi::ioctl_info(nr) {
            Some(info) if info.since_minor > self.inner.version.minor => Err(Error::Unsupported {
                what: info.name,
                needed_minor: info.since_minor,
                running: self.inner.version,
            }),
            _ => Ok(()),
        }
    }

    fn require_minor(&self, what: &'static str, needed_minor: u32) -> Result<()> {
        if needed_minor > self.inner.version.minor {
            return Err(Error::Unsupported {
                what,
                needed_minor,
                running: self.inner.version,
            });
        }
        Ok(())
    }

    /// Issues one ioctl on `/dev/kfd` — after checking the running KFD has it — turning an
    /// errno into [`Error::Ioctl`].
    fn call<T: IntoBytes + FromBytes>(
        &self,
        opcode: Opcode,
        args: &mut T,
        context: IoctlContext,
    ) -> Result<i32> {
        self.require_nr(opcode)?;
        sys::ioctl(self.inner.fd.as_fd(), opcode, args)
            .map_err(|failure| ioctl_error(ioctl_name(opcode), context, failure))
    }

    /// The render-node file acquired for `gpu_id`, if any.
    pub fn render_fd(&self, gpu_id: u32) -> Option<Arc<OwnedFd>> {
        self.vms_lock().get(&gpu_id).cloned()
    }

    fn vms_lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, Arc<OwnedFd>>> {
        self.inner
            .vms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `ACQUIRE_VM`: opens the GPU's render node `/dev/dri/renderD<drm_render_minor>` and makes
    /// its GPU VM this process's compute VM. Once per GPU: a second call is a no-op.
    pub fn acquire_vm(&self, gpu_id: u32, drm_render_minor: u32) -> Result<()> {
        self.require_nr(abi::AMDKFD_IOC_ACQUIRE_VM)?;
        let mut vms = self.vms_lock();
        if vms.contains_key(&gpu_id) {
            return Ok(());
        }
        let render = open_device(&render_node_path(drm_render_minor))?;
        let mut args = abi::kfd_ioctl_acquire_vm_args {
            drm_fd: render.as_raw_fd() as u32,
            gpu_id,
        };
        self.call(
            abi::AMDKFD_IOC_ACQUIRE_VM,
            &mut args,
            IoctlContext::gpu(gpu_id),
        )?;
        vms.insert(gpu_id, Arc::new(render));
        Ok(())
    }

    /// `GET_PROCESS_APERTURES_NEW`: the apertures of every GPU of the process (a count query,
    /// then the fill).
    pub fn get_process_apertures(&self) -> Result<Vec<Apertures>> {
        let mut args = abi::kfd_ioctl_get_process_apertures_new_args::default();
        self.call(
            abi::AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
            &mut args,
            IoctlContext::default(),
        )?;
        let mut raw =
            vec![abi::kfd_process_device_apertures::new_zeroed(); args.num_of_nodes as usize];
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        args.kfd_process_device_apertures_ptr = raw.as_mut_ptr() as u64;
        self.call(
            abi::AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
            &mut args,
            IoctlContext::default(),
        )?;
        raw.truncate(args.num_of_nodes as usize);
        Ok(raw.iter().map(Apertures::from).collect())
    }

    /// `SET_MEMORY_POLICY` for one GPU (libhsakmt sets [`MemoryPolicy::default`] after
    /// `ACQUIRE_VM`).
    pub fn set_memory_policy(&self, gpu_id: u32, policy: &MemoryPolicy) -> Result<()> {
        if !policy.misc_process_flags.is_empty() {
            self.require_minor("SET_MEMORY_POLICY misc_process_flag", 18)?;
        }
        let mut args = abi::kfd_ioctl_set_memory_policy_args {
            alternate_aperture_base: policy.alternate_aperture_base,
            alternate_aperture_size: policy.alternate_aperture_size,
            gpu_id,
            default_policy: policy.default.raw(),
            alternate_policy: policy.alternate.raw(),
            misc_process_flag: policy.misc_process_flags.bits(),
        };
        self.call(
            abi::AMDKFD_IOC_SET_MEMORY_POLICY,
            &mut args,
            IoctlContext::gpu(gpu_id),
        )?;
        Ok(())
    }

    /// `ALLOC_MEMORY_OF_GPU` of VRAM, GTT, DOORBELL or MMIO_REMAP memory at GPU address `va`.
    ///
    /// `flags` carries one domain bit plus any modifiers (`WRITABLE`, `EXECUTABLE`, `PUBLIC`,
    /// `NO_SUBSTITUTE`, `AQL_QUEUE_MEM`, `COHERENT`, `UNCACHED`, `EXT_COHERENT`, `CONTIGUOUS`).
    /// USERPTR memory wraps caller memory and goes through [`Kfd::alloc_userptr`].
    pub fn alloc_memory_of_gpu(
        &self,
        gpu_id: u32,
        va: u64,
        size: u64,
        flags: AllocMemFlags,
    ) -> Result<BufferObject> {
        if flags.contains(AllocMemFlags::USERPTR) {
            return Err(Error::InvalidArgument {
                ioctl: "ALLOC_MEMORY_OF_GPU",
                reason: "USERPTR memory is allocated with the unsafe alloc_userptr",
            });
        }
        self.alloc(gpu_id, va, size, flags, 0)
    }

    /// `ALLOC_MEMORY_OF_GPU` with `USERPTR`: makes `size` bytes of this process's memory at
    /// `cpu_addr` a buffer object the GPU reaches at `va`. `flags` adds modifiers.
    ///
    /// # Safety
    /// `cpu_addr..cpu_addr + size` must be memory this process owns, mapped and not freed
    /// while the BO lives, and the caller accepts that the GPU reads and writes it behind
    /// Rust's back once the BO is mapped (no `&`/`&mut` to it may be live across GPU access).
    pub unsafe fn alloc_userptr(
        &self,
        gpu_id: u32,
        va: u64,
        cpu_addr: u64,
        size: u64,
        flags: AllocMemFlags,
    ) -> Result<BufferObject> {
        self.alloc(gpu_id, va, size, flags | AllocMemFlags::USERPTR, cpu_addr)
    }

    fn alloc(
        &self,
        gpu_id: u32,
        va: u64,
        size: u64,
        flags: AllocMemFlags,
        cpu_addr: u64,
    ) -> Result<BufferObject> {
        self.require_nr(abi::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU)?;
        let needed = abi::alloc_flags_min_minor(flags);
        if needed > self.inner.version.minor {
            return Err(Error::Unsupported {
                what: "ALLOC_MEMORY_OF_GPU flags",
                needed_minor: needed,
                running: self.inner.version,
            });
        }
        let mut args = abi::kfd_ioctl_alloc_memory_of_gpu_args {
            va_addr: va,
            size,
            handle: 0,
            mmap_offset: cpu_addr,
            gpu_id,
            flags: flags.bits(),
        };
        let context = IoctlContext {
            gpu_id: Some(gpu_id),
            range: Some((va, size)),
            handle: None,
            alloc_flags: Some(flags),
        };
        self.call(abi::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut args, context)?;
        Ok(BufferObject {
            kfd: self.clone(),
            handle: args.handle,
            gpu_id,
            va,
            size,
            flags,
            mmap_offset: Some(args.mmap_offset),
            mapped: Mutex::new(Vec::new()),
            freed: false,
        })
    }

    /// `FREE_MEMORY_OF_GPU`, after unmapping the BO from the GPUs it is mapped on; reports
    /// what dropping the BO would swallow.
    ///
    /// On failure the BO comes back in the [`FreeError`], still allocated and still mapped on
    /// the GPUs the unmap did not get through: free it again, or drop it (which retries).
    /// In a forked child that inherited the BO this fails with [`Error::Inherited`].
    pub fn free_memory_of_gpu(&self, mut bo: BufferObject) -> Result<(), FreeError> {
        let result = bo.kfd.check_owner("FREE_MEMORY_OF_GPU");
        match result.and_then(|()| bo.release()) {
            Ok(()) => Ok(()),
            Err(error) => Err(FreeError {
                error,
                bo: Box::new(bo),
            }),
        }
    }

    /// `MAP_MEMORY_TO_GPU` on each GPU of `gpus`, in order.
    ///
    /// A failure part way reports which GPUs were mapped and which one failed
    /// ([`Error::DeviceList`]); the BO stays mapped on the ones that succeeded (and is unmapped
    /// from them when dropped). Mapping again where it is mapped is a no-op.
    pub fn map_memory_to_gpu(&self, bo: &BufferObject, gpus: &[u32]) -> Result<()> {
        let result = self.device_list_ioctl(
            abi::AMDKFD_IOC_MAP_MEMORY_TO_GPU,
            "MAP_MEMORY_TO_GPU",
            bo.handle,
            gpus,
        );
        let mut mapped = bo.mapped_lock();
        for gpu in &gpus[..done_count(&result, gpus)] {
            if !mapped.contains(gpu) {
                mapped.push(*gpu);
            }
        }
        result
    }

    /// `UNMAP_MEMORY_FROM_GPU` on each GPU of `gpus`, in order; errors as for
    /// [`Kfd::map_memory_to_gpu`].
    pub fn unmap_memory_from_gpu(&self, bo: &BufferObject, gpus: &[u32]) -> Result<()> {
        let result = self.device_list_ioctl(
            abi::AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
            "UNMAP_MEMORY_FROM_GPU",
            bo.handle,
            gpus,
        );
        let done = &gpus[..done_count(&result, gpus)];
        bo.mapped_lock().retain(|g| !done.contains(g));
        result
    }

    /// One MAP or UNMAP over a device list, resuming from `n_success` after EINTR/EAGAIN.
    fn device_list_ioctl(
        &self,
        opcode: Opcode,
        name: &'static str,
        handle: u64,
        gpus: &[u32],
    ) -> Result<()> {
        self.require_nr(opcode)?;
        if gpus.is_empty() {
            return Err(Error::InvalidArgument {
                ioctl: name,
                reason: "the device list is empty",
            });
        }
        let n_devices = u32::try_from(gpus.len()).map_err(|_| Error::InvalidArgument {
            ioctl: name,
            reason: "the device list is longer than u32::MAX",
        })?;
        // MAP and UNMAP share one layout (asserted in the ABI module).
        let mut args = abi::kfd_ioctl_map_memory_to_gpu_args {
            handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices,
            n_success: 0,
        };
        match sys::ioctl(self.inner.fd.as_fd(), opcode, &mut args) {
            Ok(_) => Ok(()),
            Err(failure) => {
                let errno = failure.errno;
                let done = (args.n_success as usize).min(gpus.len());
                match gpus.get(done) {
                    Some(&failed_gpu) => Err(Error::DeviceList {
                        ioctl: name,
                        handle,
                        done: gpus[..done].to_vec(),
                        failed_gpu,
                        total: gpus.len(),
                        errno,
                    }),
                    None => Err(ioctl_error(name, IoctlContext::handle(handle), failure)),
                }
            }
        }
    }

    /// `GET_DMABUF_INFO`: size, exporter and flags of a dma-buf; fills `metadata` with the UMD
    /// metadata blob when given.
    pub fn get_dmabuf_info(
        &self,
        dmabuf: BorrowedFd<'_>,
        metadata: Option<&mut [u8]>,
    ) -> Result<DmabufInfo> {
        let (ptr, len) = match metadata {
            Some(buf) => (
                buf.as_mut_ptr() as u64,
                u32::try_from(buf.len()).unwrap_or(u32::MAX),
            ),
            None => (0, 0),
        };
        let mut args = abi::kfd_ioctl_get_dmabuf_info_args {
            metadata_ptr: ptr,
            metadata_size: len,
            dmabuf_fd: dmabuf.as_raw_fd() as u32,
            ..Default::default()
        };
        self.call(
            abi::AMDKFD_IOC_GET_DMABUF_INFO,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(DmabufInfo {
            size: args.size,
            gpu_id: args.gpu_id,
            flags: AllocMemFlags::from_bits_retain(args.flags),
            metadata_size: args.metadata_size,
        })
    }

    /// `IMPORT_DMABUF`: a new buffer object on `gpu_id` at GPU address `va` over the memory of
    /// `dmabuf` (the same memory, not a copy, when it was exported by the same device).
    ///
    /// Issues `GET_DMABUF_INFO` first: the kernel's import does not return the size, which the
    /// returned [`BufferObject`] carries.
    pub fn import_dmabuf(
        &self,
        dmabuf: BorrowedFd<'_>,
        gpu_id: u32,
        va: u64,
    ) -> Result<BufferObject> {
        let info = self.get_dmabuf_info(dmabuf, None)?;
        let mut args = abi::kfd_ioctl_import_dmabuf_args {
            va_addr: va,
            handle: 0,
            gpu_id,
            dmabuf_fd: dmabuf.as_raw_fd() as u32,
        };
        let context = IoctlContext {
            gpu_id: Some(gpu_id),
            range: Some((va, info.size)),
            ..IoctlContext::default()
        };
        self.call(abi::AMDKFD_IOC_IMPORT_DMABUF, &mut args, context)?;
        // The kernel marks imports writable and executable in their own domain.
        let flags = (info.flags & (AllocMemFlags::VRAM | AllocMemFlags::GTT))
            | AllocMemFlags::WRITABLE
            | AllocMemFlags::EXECUTABLE;
        Ok(BufferObject {
            kfd: self.clone(),
            handle: args.handle,
            gpu_id,
            va,
            size: info.size,
            flags,
            mmap_offset: None,
            mapped: Mutex::new(Vec::new()),
            freed: false,
        })
    }

    /// `EXPORT_DMABUF`: a dma-buf fd for `bo` (`O_CLOEXEC` when `cloexec`).
    pub fn export_dmabuf(&self, bo: &BufferObject, cloexec: bool) -> Result<OwnedFd> {
        let mut flags = OFlags::RDWR;
        if cloexec {
            flags |= OFlags::CLOEXEC;
        }
        let mut args = abi::kfd_ioctl_export_dmabuf_args {
            handle: bo.handle,
            flags: flags.bits(),
            dmabuf_fd: 0,
        };
        self.call(
            abi::AMDKFD_IOC_EXPORT_DMABUF,
            &mut args,
            IoctlContext::handle(bo.handle),
        )?;
        // SAFETY: on success the kernel installed a new descriptor with this number in our fd
        // table, and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(args.dmabuf_fd as i32) })
    }

    /// `SVM` `SET_ATTR` on `[start, start + size)` (bytes, page aligned) with raw attributes.
    ///
    /// Up to [`SVM_INLINE_ATTRS`] attributes travel in a stack buffer: no heap allocation.
    ///
    /// # Safety
    /// The range is this process's memory; registering it lets the GPUs named in the attributes
    /// read and write it and the kernel migrate it. The caller must own the range and hold no
    /// Rust reference into it across GPU access.
    pub unsafe fn svm_set_attr(
        &self,
        start: u64,
        size: u64,
        attrs: &[abi::kfd_ioctl_svm_attribute],
    ) -> Result<()> {
        self.svm(abi::KFD_IOCTL_SVM_OP_SET_ATTR, start, size, attrs, &mut [])
    }

    /// `SVM` `GET_ATTR` on `[start, start + size)`: the kernel overwrites each attribute's
    /// value (and, for access queries, its type) in `attrs`.
    ///
    /// Up to [`SVM_INLINE_ATTRS`] attributes travel in a stack buffer: no heap allocation.
    pub fn svm_get_attr(
        &self,
        start: u64,
        size: u64,
        attrs: &mut [abi::kfd_ioctl_svm_attribute],
    ) -> Result<()> {
        self.svm(abi::KFD_IOCTL_SVM_OP_GET_ATTR, start, size, &[], attrs)
    }

    /// The SVM call: `input` for SET (read only), `output` for GET (copied back).
    fn svm(
        &self,
        op: u32,
        start: u64,
        size: u64,
        input: &[abi::kfd_ioctl_svm_attribute],
        output: &mut [abi::kfd_ioctl_svm_attribute],
    ) -> Result<()> {
        self.require_nr(abi::AMDKFD_IOC_SVM)?;
        // Flags newer than the running KFD would be silently ignored by it: refuse them.
        for attr in input {
            if matches!(
                attr.r#type,
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS | abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS
            ) {
                let needed = abi::svm_flags_min_minor(abi::SvmFlags::from_bits_retain(attr.value));
                self.require_minor("SVM flags", needed)?;
            }
        }
        // CLR_FLAGS as a GET query arrived in 1.6.
        if output
            .iter()
            .any(|a| a.r#type == abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS)
        {
            self.require_minor("SVM GET_ATTR of cleared flags", 6)?;
        }
        let n = input.len().max(output.len());
        if n > abi::SVM_MAX_ATTRS as usize {
            return Err(Error::InvalidArgument {
                ioctl: "SVM",
                reason: "more attributes than the ioctl size field can carry",
            });
        }
        let head = abi::kfd_ioctl_svm_args {
            start_addr: start,
            size,
            op,
            nattr: n as u32,
        };
        let context = IoctlContext::range(start, size);
        let opcode = abi::amdkfd_ioc_svm(n as u32);
        if n <= SVM_INLINE_ATTRS {
            let mut call = SvmCall {
                head,
                attrs: [abi::kfd_ioctl_svm_attribute::default(); SVM_INLINE_ATTRS],
            };
            let src: &[abi::kfd_ioctl_svm_attribute] =
                if input.is_empty() { output } else { input };
            call.attrs[..n].copy_from_slice(src);
            let result = self.call(opcode, &mut call, context);
            output.copy_from_slice(&call.attrs[..output.len()]);
            result.map(drop)
        } else {
            // Header and attributes as one u64-aligned buffer.
            let words = (size_of::<abi::kfd_ioctl_svm_args>() + n * 8) / 8;
            let mut buf = vec![0u64; words];
            let bytes = buf.as_mut_bytes();
            bytes[..24].copy_from_slice(head.as_bytes());
            let src: &[abi::kfd_ioctl_svm_attribute] =
                if input.is_empty() { output } else { input };
            bytes[24..].copy_from_slice(src.as_bytes());
            let result = sys::ioctl_bytes(self.inner.fd.as_fd(), opcode, bytes)
                .map_err(|failure| ioctl_error("SVM", context, failure));
            if !output.is_empty() {
                output.as_mut_bytes().copy_from_slice(&bytes[24..]);
            }
            result.map(drop)
        }
    }

    /// `SET_XNACK_MODE` with a negative value: whether XNACK (retry on GPU page faults) is on
    /// for this process.
    pub fn xnack_mode(&self) -> Result<bool> {
        let mut args = abi::kfd_ioctl_set_xnack_mode_args { xnack_enabled: -1 };
        self.call(
            abi::AMDKFD_IOC_SET_XNACK_MODE,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(args.xnack_enabled > 0)
    }

    /// `SET_XNACK_MODE`: turns XNACK on or off for this process (only while it has no queues).
    pub fn set_xnack_mode(&self, enabled: bool) -> Result<()> {
        let mut args = abi::kfd_ioctl_set_xnack_mode_args {
            xnack_enabled: i32::from(enabled),
        };
        self.call(
            abi::AMDKFD_IOC_SET_XNACK_MODE,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(())
    }

    /// `AVAILABLE_MEMORY`: bytes of VRAM this process could still allocate on `gpu_id`.
    pub fn available_memory(&self, gpu_id: u32) -> Result<u64> {
        let mut args = abi::kfd_ioctl_get_available_memory_args {
            gpu_id,
            ..Default::default()
        };
        self.call(
            abi::AMDKFD_IOC_AVAILABLE_MEMORY,
            &mut args,
            IoctlContext::gpu(gpu_id),
        )?;
        Ok(args.available)
    }

    /// `SMI_EVENTS`: an event fd for `gpu_id`, with no events enabled yet.
    pub fn smi_events(&self, gpu_id: u32) -> Result<SmiEvents> {
        let mut args = abi::kfd_ioctl_smi_events_args {
            gpuid: gpu_id,
            anon_fd: 0,
        };
        self.call(
            abi::AMDKFD_IOC_SMI_EVENTS,
            &mut args,
            IoctlContext::gpu(gpu_id),
        )?;
        // SAFETY: on success the kernel installed a new descriptor with this number in our fd
        // table, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(args.anon_fd as i32) };
        Ok(SmiEvents::from_fd(fd, gpu_id))
    }

    /// `RUNTIME_ENABLE`: tells KFD the runtime is up (`mode` ENABLE, optionally TTMP_SAVE) or
    /// down (empty `mode`), with the address of the runtime's `r_debug`. Returns the
    /// capabilities mask the kernel wrote back.
    pub fn runtime_enable(&self, r_debug: u64, mode: RuntimeEnableMode) -> Result<u32> {
        let mut args = abi::kfd_ioctl_runtime_enable_args {
            r_debug,
            mode_mask: mode.bits(),
            capabilities_mask: 0,
        };
        self.call(
            abi::AMDKFD_IOC_RUNTIME_ENABLE,
            &mut args,
            IoctlContext::default(),
        )?;
        Ok(args.capabilities_mask)
    }

    /// `GET_CLOCK_COUNTERS` for `gpu_id` (0 asks for the CPU/system counters only).
    pub fn get_clock_counters(&self, gpu_id: u32) -> Result<ClockCounters> {
        let mut args = abi::kfd_ioctl_get_clock_counters_args {
            gpu_id,
            ..Default::default()
        };
        self.call(
            abi::AMDKFD_IOC_GET_CLOCK_COUNTERS,
            &mut args,
            IoctlContext::gpu(gpu_id),
        )?;
        Ok(ClockCounters {
            gpu_clock_counter: args.gpu_clock_counter,
            cpu_clock_counter: args.cpu_clock_counter,
            system_clock_counter: args.system_clock_counter,
            system_clock_freq: args.system_clock_freq,
        })
    }

    /// `GET_TILE_CONFIG`: fills `tile_config` and `macro_tile_config` (up to their lengths) and
    /// returns how many entries the kernel wrote plus the address configuration.
    pub fn get_tile_config(
        &self,
        gpu_id: u32,
        tile_config: &mut [u32],
        macro_tile_config: &mut [u32],
    ) -> Result<TileConfig> {
        let count = |s: &[u32]| u32::try_from(s.len()).unwrap_or(u32::MAX);
        let mut args = abi::kfd_ioctl_get_tile_config_args {
            tile_config_ptr: tile_config.as_mut_ptr() as u64,
            macro_tile_config_ptr: macro_tile_config.as_mut_ptr() as u64,
            num_tile_configs: count(tile_config),
            num_macro_tile_configs: count(macro_tile_config),
            gpu_id,
            ..Default::default()
        };
        self.call(
            abi::AMDKFD_IOC_GET_TILE_CONFIG,
            &mut args,
            IoctlContext::gpu(gpu_id),
        )?;
        Ok(TileConfig {
            num_tile_configs: args.num_tile_configs,
            num_macro_tile_configs: args.num_macro_tile_configs,
            gb_addr_config: args.gb_addr_config,
            num_banks: args.num_banks,
            num_ranks: args.num_ranks,
        })
    }
}

/// How many GPUs of `gpus`, from the front, a device-list MAP or UNMAP got through.
fn done_count(result: &Result<()>, gpus: &[u32]) -> usize {
    match result {
        Ok(()) => gpus.len(),
        Err(Error::DeviceList { done, .. }) => done.len(),
        Err(_) => 0,
    }
}

/// The error of an ioctl that failed: [`Error::Interrupted`] when it was given up after
/// retrying `EINTR`/`EAGAIN`, [`Error::Ioctl`] otherwise.
fn ioctl_error(ioctl: &'static str, context: IoctlContext, failure: sys::Failure) -> Error {
    if failure.gave_up_retrying() {
        Error::Interrupted {
            ioctl,
            context,
            attempts: failure.attempts,
            errno: failure.errno,
        }
    } else {
        Error::Ioctl {
            ioctl,
            context,
            errno: failure.errno,
        }
    }
}

/// The C name (without `AMDKFD_IOC_`) of an opcode, for messages.
fn ioctl_name(opcode: Opcode) -> &'static str {
    abi::ioctl_info(abi::ioc_nr(opcode)).map_or("unknown ioctl", |info| info.name)
}

/// Opens a device file `O_RDWR | O_CLOEXEC`.
fn open_device(path: &Path) -> Result<OwnedFd> {
    rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|errno| {
        Error::Open {
            path: path.to_owned(),
            errno,
        }
    })
}
