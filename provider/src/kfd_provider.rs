//! [`KfdProvider`]: UMF's memory-provider operations over KFD memory.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{BufferObject, Errno, GpuId, Kfd};
use kfd_ring::{Granularity, MemoryPool};
use kfd_svm::{Access, SvmAttrs};
use rustix::fs::{FallocateFlags, MemfdFlags};
use rustix::mm::Advice;
use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags};

use super::error::{Error, NativeCode, NativeError, Result, recorded};
use super::ipc::{IPC_HANDLE_SIZE, IpcFields, IpcHandle};
use super::sys::{self, Region};
use super::tracker::{Miss, Tracker};
use super::{AllocationInfo, MemoryKind, ProviderParams, ProviderStats};

/// 2 MiB: the VRAM granule (large PTEs) and the SVM default granularity.
const TWO_MIB: usize = 2 << 20;

/// The span of the HOST memfd's offsets. The file is sparse and offsets are never reused, so
/// this is the total a provider can ever hand out (64 PiB), not memory.
const HOST_FILE_SPAN: u64 = 1 << 56;

/// libhsakmt's flags for paged system memory (`0xd4000004`), without the `USERPTR` bit that
/// `alloc_userptr` adds.
const HOST_FLAGS: AllocMemFlags = AllocMemFlags::WRITABLE
    .union(AllocMemFlags::EXECUTABLE)
    .union(AllocMemFlags::NO_SUBSTITUTE)
    .union(AllocMemFlags::COHERENT);

/// How many times a free tries a transiently failing unmap-and-free before it gives up for
/// now (the chunk then waits in [`State::pending`] for the next free or the provider's drop).
const FREE_ATTEMPTS: usize = 3;

/// Tells the providers of one process apart in IPC handles.
static NEXT_PROVIDER_ID: AtomicU64 = AtomicU64::new(1);

/// The backing of one allocation: what KFD and `mmap` handed out.
///
/// Fields drop in declaration order: the buffer object (unmapped from its GPUs and freed)
/// before the address range it lives in.
#[derive(Debug)]
struct Chunk {
    /// The `USERPTR` (HOST) or VRAM (DEVICE) buffer object; `None` for SVM.
    bo: Option<BufferObject>,
    /// The DEVICE chunk's dma-buf, made by the first `get_ipc_handle` and kept for the
    /// handles' consumers to take until the chunk is freed.
    dmabuf: Option<OwnedFd>,
    /// The address range: the memfd mapping, the VRAM reservation (and CPU mapping), or the
    /// SVM range.
    region: Region,
    /// HOST: where the range starts in the provider's memfd.
    file_offset: Option<u64>,
}

impl Chunk {
    /// A chunk of `region` alone, which the steps building it fill in.
    fn over(region: Region) -> Chunk {
        Chunk {
            bo: None,
            dmabuf: None,
            region,
            file_offset: None,
        }
    }
}

/// Whether anyone outside the provider may have seen a chunk (decides if a HOST chunk's
/// memfd offsets may be used again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// An allocation that failed part way: nobody saw it.
    NeverSeen,
    /// An allocation that was handed out (an IPC handle may name its offsets).
    Seen,
}

/// Memory another process shared, as `open_ipc_handle` mapped it here: the import (DEVICE)
/// or the `USERPTR` BO over the mapped memfd range (HOST), in its range.
#[derive(Debug)]
struct Opened {
    chunk: Chunk,
    size: usize,
}

#[derive(Debug, Default)]
struct State {
    tracker: Tracker<Chunk>,
    /// Opened IPC memory by the pointer `open_ipc_handle` returned.
    opened: BTreeMap<usize, Opened>,
    /// Chunks whose buffer object could not be unmapped or freed yet: kept whole (the BO, and
    /// the range it lives in, so nothing else takes its address), and tried again by the
    /// next free and by the provider's drop.
    pending: Vec<Chunk>,
    allocated: usize,
    peak: usize,
}

/// The HOST provider's memfd and the offsets in it.
#[derive(Debug)]
struct HostFile {
    memfd: OwnedFd,
    offsets: Mutex<HostOffsets>,
}

/// Which memfd offsets are free. Offsets an allocation handed out are never reused (see the
/// module docs on IPC); offsets a failed allocation took are given back, as nothing outside
/// the provider ever saw them.
#[derive(Debug, Default)]
struct HostOffsets {
    /// Everything from here to [`HOST_FILE_SPAN`] is unused.
    next: u64,
    /// Given-back ranges below `next`, `start -> len`.
    returned: BTreeMap<u64, u64>,
}

impl HostFile {
    fn offsets(&self) -> MutexGuard<'_, HostOffsets> {
        self.offsets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl HostOffsets {
    /// `len` bytes of offsets, or `None` when no free range is that large.
    fn take(&mut self, len: u64) -> Option<u64> {
        let fit = self.returned.iter().find(|&(_, &l)| l >= len);
        if let Some((&start, &l)) = fit {
            self.returned.remove(&start);
            if l > len {
                self.returned.insert(start + len, l - len);
            }
            return Some(start);
        }
        let start = self.next;
        self.next = start
            .checked_add(len)
            .filter(|&end| end <= HOST_FILE_SPAN)?;
        Some(start)
    }

    /// Gives back `[start, start + len)`, which `take` returned and nobody saw.
    fn give_back(&mut self, start: u64, len: u64) {
        let mut start = start;
        let mut len = len;
        if let Some((&before, &l)) = self.returned.range(..start).next_back()
            && before + l == start
        {
            self.returned.remove(&before);
            start = before;
            len += l;
        }
        if let Some(l) = self.returned.remove(&(start + len)) {
            len += l;
        }
        if start + len == self.next {
            self.next = start;
        } else {
            self.returned.insert(start, len);
        }
    }
}

/// What a provider of each [`MemoryKind`] allocates from: each kind's own state, so that a
/// provider holds exactly its kind's.
#[derive(Debug)]
enum Backing {
    /// HOST: the provider's memfd and the offsets in it.
    Host(HostFile),
    /// DEVICE: the VRAM pool (flags, host accessibility).
    Device(MemoryPool),
    /// SHARED: the attributes every SVM range gets (boxed: they are held inline, up to the
    /// attribute limit, and would make every provider as large).
    Shared(Box<SvmAttrs>),
}

impl Backing {
    fn kind(&self) -> MemoryKind {
        match self {
            Backing::Host(_) => MemoryKind::Host,
            Backing::Device(_) => MemoryKind::Device,
            Backing::Shared(_) => MemoryKind::Shared,
        }
    }
}

/// What IPC calls on a SHARED provider say.
fn shared_ipc_unsupported() -> Error {
    Error::unsupported(
        "IPC of SHARED memory: SVM memory is private anonymous memory so that it can migrate \
         to VRAM, and cannot be mapped by another process",
    )
}

/// A memory provider with UMF's operations over KFD memory of one [`MemoryKind`].
///
/// Created with [`KfdProvider::new`]; every method is one op of UMF's
/// `umf_memory_provider_ops_t` with UMF's argument rules, and is safe to call from any
/// thread. Pointers are raw because that is what the memory is to its users: the GPUs write
/// it behind Rust's back, so building a slice over it is the caller's `unsafe` decision, and
/// a pointer stays valid until it is freed (or purged, for its contents). See the
/// [module docs](super) for how each kind is built and what split, merge, purge and IPC do
/// with buffer objects.
///
/// Dropping the provider frees everything it still holds and closes what it opened.
pub struct KfdProvider {
    kfd: Kfd,
    /// The provider's GPU first, then its peers.
    gpus: Vec<GpuId>,
    name: String,
    page: usize,
    /// [`sys::fork_generation`] when created: a different value means a forked child.
    generation: u64,
    pid: i32,
    id: u64,
    /// What the provider's kind allocates from.
    backing: Backing,
    /// The render minor of every GPU of the topology, to acquire an exporter's GPU on import.
    render_minors: BTreeMap<GpuId, u32>,
    /// The GPU addresses valid on all of the provider's GPUs.
    aperture: Range<u64>,
    state: Mutex<State>,
}

impl fmt::Debug for KfdProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KfdProvider")
            .field("name", &self.name)
            .field("kind", &self.kind())
            .field("gpus", &self.gpus)
            .field("host_accessible", &self.host_accessible())
            .finish_non_exhaustive()
    }
}

/// Rounds `n` up to a multiple of `page`; `None` on overflow.
fn round_up(n: usize, page: usize) -> Option<usize> {
    n.checked_next_multiple_of(page)
}

impl KfdProvider {
    /// The name of a provider created without [`ProviderParams::name`] (and what UMF's
    /// `get_name` with a NULL provider reports).
    pub const DEFAULT_NAME: &'static str = "KFD";

    /// Creates a provider of `params.kind` memory on `params.gpu_id` (the first GPU when
    /// `None`), mapped on it and on `params.peers`.
    ///
    /// Reads the topology, acquires each GPU's VM on `kfd` (idempotent, so a `Kfd` already
    /// in use is fine), and checks the kind can be had: DEVICE needs a VRAM bank, SHARED
    /// SVM support on every GPU ([`Error::NotSupported`] otherwise). HOST creates the
    /// provider's memfd.
    ///
    /// KFD binds one VM per GPU to a process, through the render-node file that acquired it,
    /// so all providers of a process must be made from one [`Kfd`] (clones of it): a second
    /// `Kfd::open` in the same process cannot acquire the GPUs again (`EBUSY`).
    pub fn new(kfd: Kfd, params: ProviderParams) -> Result<KfdProvider> {
        recorded(|| {
            let generation = sys::fork_generation();
            let init = NativeCode::InitFailed;
            let topology = Topology::read().map_err(|e| {
                Error::provider_specific(init, None, format!("reading the KFD topology: {e}"))
            })?;
            let render_minors: BTreeMap<GpuId, u32> = topology
                .gpus()
                .filter_map(|n| Some((n.gpu_id()?, n.properties.drm_render_minor as u32)))
                .collect();
            let gpu_id = match params.gpu_id {
                Some(id) => id,
                None => *render_minors
                    .keys()
                    .next()
                    .ok_or_else(|| Error::unsupported("the topology has no GPU"))?,
            };
            let mut gpus = vec![gpu_id];
            for &peer in &params.peers {
                if !gpus.contains(&peer) {
                    gpus.push(peer);
                }
            }
            for &gpu in &gpus {
                let minor = *render_minors
                    .get(&gpu)
                    .ok_or_else(|| Error::invalid(format!("no GPU with gpu_id {gpu:#x}")))?;
                kfd.acquire_vm(gpu, minor).map_err(|e| {
                    let step = if e.errno() == Some(Errno::BUSY) {
                        "acquiring the GPU's VM (another /dev/kfd handle of this process holds it: \
                         the providers of a process must share one Kfd, cloned)"
                    } else {
                        "acquiring the GPU's VM"
                    };
                    Error::kfd(init, step, &e)
                })?;
            }
            let apertures = kfd
                .get_process_apertures()
                .map_err(|e| Error::kfd(init, "reading the GPU apertures", &e))?;
            let mut aperture = 0..u64::MAX;
            for &gpu in &gpus {
                let a = apertures
                    .iter()
                    .find(|a| a.gpu_id == gpu)
                    .ok_or_else(|| Error::invalid(format!("gpu {gpu:#x} has no GPUVM aperture")))?;
                aperture = aperture.start.max(a.gpuvm.start)..aperture.end.min(a.gpuvm.end);
            }
            let backing = match params.kind {
                MemoryKind::Host => {
                    let memfd = rustix::fs::memfd_create("kfd-provider-host", MemfdFlags::CLOEXEC)
                        .and_then(|fd| rustix::fs::ftruncate(&fd, HOST_FILE_SPAN).map(|()| fd))
                        .map_err(|e| Error::sys(init, "creating the HOST memfd", e))?;
                    Backing::Host(HostFile {
                        memfd,
                        offsets: Mutex::new(HostOffsets::default()),
                    })
                }
                MemoryKind::Device => {
                    let pool = MemoryPool::device(&topology, gpu_id.get(), Granularity::Coarse)
                        .map_err(|e| Error::unsupported(format!("DEVICE memory: {e}")))?;
                    Backing::Device(pool)
                }
                MemoryKind::Shared => {
                    let mut attrs = SvmAttrs::new();
                    for &gpu in &gpus {
                        let capable = topology
                            .node_by_gpu_id(gpu)
                            .is_some_and(|n| n.capability().svm_api_supported());
                        if !capable {
                            return Err(Error::unsupported(format!(
                                "SHARED memory: gpu {gpu:#x} does not support the SVM API"
                            )));
                        }
                        attrs = attrs.access(gpu, Access::Access);
                    }
                    Backing::Shared(Box::new(attrs))
                }
            };
            Ok(KfdProvider {
                kfd,
                gpus,
                name: params
                    .name
                    .unwrap_or_else(|| KfdProvider::DEFAULT_NAME.to_owned()),
                page: sys::page_size(),
                generation,
                pid: rustix::process::getpid().as_raw_nonzero().get(),
                id: NEXT_PROVIDER_ID.fetch_add(1, Ordering::Relaxed),
                backing,
                render_minors,
                aperture,
                state: Mutex::new(State::default()),
            })
        })
    }

    /// The kind of memory.
    pub fn kind(&self) -> MemoryKind {
        self.backing.kind()
    }

    /// The provider's GPU (DEVICE memory is its VRAM).
    pub fn gpu_id(&self) -> GpuId {
        self.gpus[0]
    }

    /// Every GPU the memory is mapped on: the provider's GPU, then its peers.
    pub fn gpus(&self) -> &[GpuId] {
        &self.gpus
    }

    /// The KFD handle the provider allocates through.
    pub fn kfd(&self) -> &Kfd {
        &self.kfd
    }

    /// Whether the CPU can touch the memory (false only for VRAM behind a small BAR).
    pub fn host_accessible(&self) -> bool {
        match &self.backing {
            Backing::Device(pool) => pool.host_accessible,
            Backing::Host(_) | Backing::Shared(_) => true,
        }
    }

    /// `get_name`: the name given in [`ProviderParams::name`], or
    /// [`KfdProvider::DEFAULT_NAME`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `get_min_page_size`: the smallest granule of this memory, for any pointer (or none):
    /// the system page size. The GPU maps 4 KiB pages of every kind.
    pub fn min_page_size(&self, _ptr: *const u8) -> usize {
        self.page
    }

    /// `get_recommended_page_size`: the granule allocations should be made in — 2 MiB for
    /// VRAM (large PTEs) and SVM (its default granularity), the page size for HOST memory.
    pub fn recommended_page_size(&self, _size: usize) -> usize {
        match self.backing {
            Backing::Host(_) => self.page,
            Backing::Device(_) | Backing::Shared(_) => TWO_MIB,
        }
    }

    /// `get_cache_line_size`: the host's cache line, 64 bytes (UMF's default), which is what
    /// pools use it for (keeping CPU-side blocks from sharing lines).
    pub fn cache_line_size(&self) -> usize {
        64
    }

    /// `get_last_native_error`: this thread's last provider-specific error (see
    /// [`last_native_error`](super::last_native_error)).
    pub fn last_native_error() -> Option<NativeError> {
        super::last_native_error()
    }

    /// `get_ipc_handle_size`: the size of every [`IpcHandle`].
    pub fn get_ipc_handle_size(&self) -> usize {
        IPC_HANDLE_SIZE
    }

    /// Allocation counters (UMF's `stats` ctl).
    pub fn stats(&self) -> ProviderStats {
        let st = self.lock();
        ProviderStats {
            allocated: st.allocated,
            peak: st.peak,
            allocations: st.tracker.pieces(),
            chunks: st.tracker.chunks(),
            opened_ipc: st.opened.len(),
            pending_release: st.pending.len(),
        }
    }

    /// The allocation containing `ptr` (any byte of it), if it is this provider's.
    pub fn allocation_info(&self, ptr: *const u8) -> Option<AllocationInfo> {
        let st = self.lock();
        let (start, size) = st.tracker.piece_containing(ptr as usize)?;
        Some(AllocationInfo {
            base: NonNull::new(start as *mut u8)?,
            size,
            kind: self.kind(),
            gpu_id: self.gpu_id(),
            host_accessible: self.host_accessible(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Refuses to act in a forked child (a new KFD process, where this provider's KFD
    /// objects do not exist).
    pub(crate) fn check_process(&self) -> Result<()> {
        if sys::fork_generation() == self.generation {
            return Ok(());
        }
        Err(Error::native_with(
            NativeCode::WrongProcess,
            Errno::BADF,
            format!(
                "this provider belongs to process {}; a forked child is a new KFD process: open \
                 /dev/kfd and create a provider there",
                self.pid
            ),
        ))
    }

    /// `alloc`: `size` bytes (rounded up to whole pages in the backing) aligned to
    /// `alignment`, which is 0 (the page size), a divisor of the page size (the page size is
    /// then enough) or a multiple of it — anything else is [`Error::InvalidArgument`], as is a
    /// zero size. A size that cannot be rounded or mapped (`usize::MAX`), and KFD's refusals
    /// (`ENOMEM` when VRAM or GTT is exhausted), are [`Error::ProviderSpecific`] with
    /// [`NativeCode::AllocFailed`].
    pub fn alloc(&self, size: usize, alignment: usize) -> Result<NonNull<u8>> {
        recorded(|| {
            self.check_process()?;
            if size == 0 {
                return Err(Error::invalid("alloc: the size must not be zero"));
            }
            let page = self.page;
            let align = if alignment == 0 || page.is_multiple_of(alignment) {
                page
            } else if alignment.is_multiple_of(page) {
                alignment
            } else {
                return Err(Error::invalid(format!(
                    "alloc: alignment {alignment} is neither 0, a divisor nor a multiple of the page size {page}"
                )));
            };
            let len = round_up(size, page).ok_or_else(|| {
                Error::native_with(
                    NativeCode::AllocFailed,
                    Errno::NOMEM,
                    format!("alloc: {size} bytes cannot be rounded up to whole pages"),
                )
            })?;
            let chunk = match &self.backing {
                Backing::Host(host) => self.host_chunk(host, len, align),
                Backing::Device(pool) => self.device_chunk(pool, len, align),
                Backing::Shared(attrs) => self.shared_chunk(attrs, len, align),
            }?;
            let ptr = chunk.region.ptr_at(0);
            let mut st = self.lock();
            st.tracker.insert(chunk.region.addr(), size, chunk);
            st.allocated += size;
            st.peak = st.peak.max(st.allocated);
            Ok(ptr)
        })
    }

    /// Fails unless the whole region is a valid GPU address on every GPU of the provider.
    fn check_va(&self, region: &Region, step: &str) -> Result<()> {
        let start = region.addr() as u64;
        let end = start + region.len() as u64;
        if start < self.aperture.start || end > self.aperture.end {
            return Err(Error::native_with(
                NativeCode::AllocFailed,
                Errno::INVAL,
                format!(
                    "{step}: {start:#x}..{end:#x} is outside the GPUVM aperture {:#x}..{:#x}",
                    self.aperture.start, self.aperture.end
                ),
            ));
        }
        Ok(())
    }

    /// A `USERPTR` BO over `region` on the provider's GPU, mapped on all its GPUs, put in
    /// `slot` as soon as it exists (so that a failed map leaves it to the caller's cleanup).
    fn userptr_into(
        &self,
        slot: &mut Option<BufferObject>,
        region: &Region,
        code: NativeCode,
        step: &str,
    ) -> Result<()> {
        let bo = sys::userptr_over(&self.kfd, self.gpu_id(), region, HOST_FLAGS)
            .map_err(|e| Error::kfd(code, step, &e))?;
        let bo = slot.insert(bo);
        self.kfd
            .map_memory_to_gpu(bo, &self.gpus)
            .map_err(|e| Error::kfd(code, step, &e))
    }

    /// Runs the steps that complete a fresh `chunk`; when one fails, gives back everything
    /// the chunk holds so far (see [`KfdProvider::release_chunk`]), so that a failed `alloc`
    /// consumes nothing.
    fn build(
        &self,
        mut chunk: Chunk,
        steps: impl FnOnce(&mut Chunk) -> Result<()>,
    ) -> Result<Chunk> {
        match steps(&mut chunk) {
            Ok(()) => Ok(chunk),
            Err(e) => {
                // The step's error is what the caller needs; a failed cleanup keeps the chunk
                // pending (retried later) and is reported by the next free that retries it.
                let _ = self.release_chunk(chunk, Fate::NeverSeen);
                Err(e)
            }
        }
    }

    fn host_chunk(&self, host: &HostFile, len: usize, align: usize) -> Result<Chunk> {
        let code = NativeCode::AllocFailed;
        let offset = host.offsets().take(len as u64).ok_or_else(|| {
            Error::native_with(
                code,
                Errno::NOSPC,
                format!(
                    "alloc: {len} bytes do not fit in what is left of the HOST memfd's span \
                     ({HOST_FILE_SPAN:#x} bytes of offsets per provider)"
                ),
            )
        })?;
        let region = Region::reserve(len, align).map_err(|e| {
            host.offsets().give_back(offset, len as u64);
            Error::sys(code, "alloc: reserving address space", e)
        })?;
        let chunk = Chunk {
            bo: None,
            dmabuf: None,
            region,
            file_offset: Some(offset),
        };
        self.build(chunk, |chunk| {
            chunk
                .region
                .map_file(host.memfd.as_fd(), offset)
                .map_err(|e| Error::sys(code, "alloc: mapping the HOST memfd", e))?;
            self.check_va(&chunk.region, "alloc")?;
            self.userptr_into(&mut chunk.bo, &chunk.region, code, "alloc")
        })
    }

    fn device_chunk(&self, pool: &MemoryPool, len: usize, align: usize) -> Result<Chunk> {
        let code = NativeCode::AllocFailed;
        // Large BOs at 2 MiB-aligned addresses get large PTEs, unless an alignment was asked.
        let align = if align == self.page && len >= TWO_MIB {
            TWO_MIB
        } else {
            align
        };
        let region = Region::reserve(len, align)
            .map_err(|e| Error::sys(code, "alloc: reserving address space", e))?;
        let chunk = Chunk {
            bo: None,
            dmabuf: None,
            region,
            file_offset: None,
        };
        self.build(chunk, |chunk| {
            self.check_va(&chunk.region, "alloc")?;
            let va = chunk.region.addr() as u64;
            let bo = self
                .kfd
                .alloc_memory_of_gpu(self.gpu_id(), va, len as u64, pool.alloc_flags)
                .map_err(|e| Error::kfd(code, "alloc", &e))?;
            let bo = chunk.bo.insert(bo);
            self.kfd
                .map_memory_to_gpu(bo, &self.gpus)
                .map_err(|e| Error::kfd(code, "alloc", &e))?;
            if !pool.host_accessible {
                return Ok(());
            }
            let render = self.kfd.render_fd(self.gpu_id()).ok_or_else(|| {
                let gpu_id = self.gpu_id();
                Error::kfd(code, "alloc", &kfd_ioctl::Error::NotAcquired { gpu_id })
            })?;
            let offset = bo.mmap_offset().unwrap_or(0);
            chunk
                .region
                .map_file(render.as_fd(), offset)
                .map_err(|e| Error::sys(code, "alloc: mapping VRAM for the CPU", e))?;
            chunk
                .region
                .advise(0, len, Advice::LinuxDontFork)
                .map_err(|e| Error::sys(code, "alloc: MADV_DONTFORK", e))
        })
    }

    fn shared_chunk(&self, attrs: &SvmAttrs, len: usize, align: usize) -> Result<Chunk> {
        let code = NativeCode::AllocFailed;
        let region = Region::anonymous(len, align)
            .map_err(|e| Error::sys(code, "alloc: mapping anonymous memory", e))?;
        // Unmapping the range (dropping the region) is what removes a registration, so a
        // failed step needs no cleanup beyond the region's own.
        self.check_va(&region, "alloc")?;
        sys::register_svm(&self.kfd, &region, attrs)
            .map_err(|e| Error::svm(code, "alloc: registering the SVM range", &e))?;
        Ok(Chunk {
            bo: None,
            dmabuf: None,
            region,
            file_offset: None,
        })
    }

    /// Unmaps `bo` from every GPU it is mapped on and frees it; a failure is tried again, up
    /// to [`FREE_ATTEMPTS`] times in all, unless [`kfd_ioctl::Error::is_transient`] says it
    /// cannot succeed. On an error the BO comes back when it still exists, for the caller to
    /// keep (with the range it lives in) and try again later.
    fn free_bo(
        &self,
        bo: BufferObject,
    ) -> std::result::Result<(), Box<(Option<BufferObject>, kfd_ioctl::Error)>> {
        // `free_memory_of_gpu` unmaps from every GPU still mapped, then frees; a failure hands
        // the BO back, still allocated, so a transient one is retried and a lasting one kept.
        let mut bo = bo;
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.kfd.free_memory_of_gpu(bo) {
                Ok(()) => return Ok(()),
                Err(failure) => {
                    let (e, back) = failure.into_parts();
                    if attempts >= FREE_ATTEMPTS || !e.is_transient() {
                        return Err(Box::new((Some(back), e)));
                    }
                    bo = back;
                }
            }
        }
    }

    /// Gives a chunk back: its BO unmapped from the GPUs and freed, its range unmapped, and
    /// for HOST its pages punched out of the memfd — and its offsets given back when
    /// `fate` says nobody ever saw them. When the BO cannot be freed yet, the whole chunk is
    /// kept in [`State::pending`] and the error reported.
    fn release_chunk(&self, chunk: Chunk, fate: Fate) -> Result<()> {
        let Chunk {
            bo,
            dmabuf,
            region,
            file_offset,
        } = chunk;
        let mut result = Ok(());
        if let Some(bo) = bo
            && let Err(failure) = self.free_bo(bo)
        {
            let (kept, e) = *failure;
            let error = Error::kfd(NativeCode::FreeFailed, "free", &e);
            if let Some(bo) = kept {
                self.lock().pending.push(Chunk {
                    bo: Some(bo),
                    dmabuf,
                    region,
                    file_offset,
                });
                return Err(error);
            }
            result = Err(error);
        }
        drop(dmabuf);
        let len = region.len() as u64;
        drop(region);
        if let (Some(offset), Backing::Host(host)) = (file_offset, &self.backing) {
            let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
            match rustix::fs::fallocate(&host.memfd, punch, offset, len) {
                Ok(()) if fate == Fate::NeverSeen => host.offsets().give_back(offset, len),
                Ok(()) => {}
                Err(e) => {
                    result = result.and(Err(Error::sys(
                        NativeCode::FreeFailed,
                        "free: punching the pages out of the HOST memfd",
                        e,
                    )));
                }
            }
        }
        result
    }

    /// Tries again to release the chunks earlier frees could not. What still fails goes back
    /// to [`State::pending`]; its error was reported by the free that left it there, and is
    /// not the business of the free that retries it.
    fn release_pending(&self, pending: Vec<Chunk>) {
        for chunk in pending {
            let _ = self.release_chunk(chunk, Fate::Seen);
        }
    }

    /// Takes the piece at `addr` out of the tracker and releases the chunks left uncovered.
    /// The outer error is the lookup's; the inner one a release's (reported, but the piece is
    /// gone either way).
    fn remove_piece(&self, addr: usize, size: Option<usize>) -> Result<Result<()>, Miss> {
        let (removed, pending) = {
            let mut st = self.lock();
            let removed = st.tracker.remove(addr, size)?;
            st.allocated -= removed.size;
            (removed, std::mem::take(&mut st.pending))
        };
        let mut result = Ok(());
        for (_, chunk) in removed.emptied {
            result = result.and(self.release_chunk(chunk, Fate::Seen));
        }
        self.release_pending(pending);
        Ok(result)
    }

    /// `free`: frees the allocation (or split piece) at `ptr` of exactly `size` bytes; the
    /// backing goes back to KFD when no piece of it is left. A NULL `ptr` succeeds. As UMF's
    /// OS provider, a pointer that is not the start of an allocation of this provider is
    /// [`Error::ProviderSpecific`] with [`NativeCode::FreeFailed`] (`EINVAL`); a size other
    /// than the allocation's (0 included) is [`Error::InvalidArgument`].
    pub fn free(&self, ptr: *mut u8, size: usize) -> Result<()> {
        recorded(|| {
            if ptr.is_null() {
                return Ok(());
            }
            self.check_process()?;
            let addr = ptr as usize;
            match self.remove_piece(addr, Some(size)) {
                Ok(released) => released,
                Err(Miss::Size { tracked }) => Err(Error::invalid(format!(
                    "free: the allocation at {addr:#x} is {tracked} bytes, not {size}"
                ))),
                Err(Miss::Interior { start }) => Err(Error::native_with(
                    NativeCode::FreeFailed,
                    Errno::INVAL,
                    format!(
                        "free: {addr:#x} is inside the allocation at {start:#x}, not its start"
                    ),
                )),
                Err(Miss::Unknown) => Err(Error::native_with(
                    NativeCode::FreeFailed,
                    Errno::INVAL,
                    format!("free: {addr:#x} is not an allocation of this provider"),
                )),
            }
        })
    }

    /// Frees the allocation at `ptr` by its pointer alone (LLVM Offload's `olMemFree`),
    /// found in O(log n). NULL is [`Error::NullPointer`]; an unknown or interior pointer is
    /// [`Error::InvalidArgument`].
    pub fn free_ptr(&self, ptr: *mut u8) -> Result<()> {
        recorded(|| {
            if ptr.is_null() {
                return Err(Error::NullPointer("free_ptr: the pointer is NULL"));
            }
            self.check_process()?;
            let addr = ptr as usize;
            match self.remove_piece(addr, None) {
                Ok(released) => released,
                Err(Miss::Interior { start }) => Err(Error::invalid(format!(
                    "free_ptr: {addr:#x} is inside the allocation at {start:#x}, not its start"
                ))),
                Err(Miss::Unknown | Miss::Size { .. }) => Err(Error::invalid(format!(
                    "free_ptr: {addr:#x} is not a known allocation"
                ))),
            }
        })
    }

    /// `ext_purge_lazy`: the contents of `[ptr, ptr + size)` are no longer needed; the
    /// memory may be given back later (see the [module docs](super#purges) per kind).
    pub fn purge_lazy(&self, ptr: *mut u8, size: usize) -> Result<()> {
        recorded(|| self.purge(ptr, size, false))
    }

    /// `ext_purge_force`: gives the memory of `[ptr, ptr + size)` back now; afterwards it
    /// reads as zeros (see the [module docs](super#purges) per kind).
    pub fn purge_force(&self, ptr: *mut u8, size: usize) -> Result<()> {
        recorded(|| self.purge(ptr, size, true))
    }

    fn purge(&self, ptr: *mut u8, size: usize, force: bool) -> Result<()> {
        let (op, code) = if force {
            ("purge_force", NativeCode::PurgeForceFailed)
        } else {
            ("purge_lazy", NativeCode::PurgeLazyFailed)
        };
        if ptr.is_null() {
            return Err(Error::NullPointer("purge: the pointer is NULL"));
        }
        self.check_process()?;
        let page = self.page;
        let addr = ptr as usize;
        if size == 0 {
            return Err(Error::invalid(format!("{op}: the size must not be zero")));
        }
        if !addr.is_multiple_of(page) {
            return Err(Error::alignment(format!(
                "{op}: {addr:#x} is not aligned to the page size {page}"
            )));
        }
        let st = self.lock();
        let (base, slot) = st.tracker.chunk_containing(addr).ok_or_else(|| {
            Error::invalid(format!("{op}: {addr:#x} is not memory of this provider"))
        })?;
        let end = addr
            .checked_add(size)
            .ok_or_else(|| Error::invalid(format!("{op}: the range wraps around")))?;
        // A partial last page is only the provider's to purge at the allocation's very end.
        if !size.is_multiple_of(page) && end != base + slot.len {
            return Err(Error::alignment(format!(
                "{op}: {size} bytes is not a whole number of pages and does not end the allocation"
            )));
        }
        let len = round_up(size, page).unwrap_or(usize::MAX);
        let region = &slot.chunk.region;
        if addr - base + len > region.len() {
            return Err(Error::invalid(format!(
                "{op}: {size} bytes at {addr:#x} run past the allocation"
            )));
        }
        let offset = addr - base;
        let advise = |advice, what: &str| {
            region
                .advise(offset, len, advice)
                .map_err(|e| Error::sys(code, &format!("{op}: {what}"), e))
        };
        match (&self.backing, force) {
            (Backing::Host(_), _) => advise(Advice::LinuxRemove, "MADV_REMOVE"),
            (Backing::Shared(_), false) => advise(Advice::LinuxFree, "MADV_FREE"),
            (Backing::Shared(_), true) => advise(Advice::LinuxDontNeed, "MADV_DONTNEED"),
            (Backing::Device(_), false) => Ok(()),
            (Backing::Device(pool), true) if pool.host_accessible => region
                .fill_zero(offset, len)
                .map_err(|e| Error::sys(code, "purge_force: zeroing VRAM", e)),
            (Backing::Device(_), true) => Err(Error::unsupported(
                "purge_force: this VRAM has no CPU mapping (small BAR), and zeroing it would \
                 need a GPU copy engine, which this provider does not drive",
            )),
        }
    }

    /// `ext_allocation_split`: the allocation at `ptr` of `total` bytes becomes two, of
    /// `first` bytes at `ptr` and `total - first` after them, freed separately. UMF's rules:
    /// `first` and `total` non-zero, `first < total`, and `total` the allocation's size;
    /// otherwise [`Error::InvalidArgument`]. The backing buffer object is shared by the
    /// pieces and freed with the last of them.
    pub fn allocation_split(&self, ptr: *mut u8, total: usize, first: usize) -> Result<()> {
        recorded(|| {
            if ptr.is_null() {
                return Err(Error::NullPointer("allocation_split: the pointer is NULL"));
            }
            self.check_process()?;
            self.lock().tracker.split(ptr as usize, total, first)
        })
    }

    /// `ext_allocation_merge`: the adjacent allocations at `low` and `high` become one of
    /// `total` bytes at `low`. UMF's rules: both non-NULL, `total` non-zero, `low < high`,
    /// `high - low < total`, both allocations of this provider (so of the same kind and
    /// GPU), `high` where `low` ends, and their sizes adding up to `total`; otherwise
    /// [`Error::InvalidArgument`]. Two allocations that happen to be adjacent can be merged
    /// too; the merged one then holds both backing chunks.
    pub fn allocation_merge(&self, low: *mut u8, high: *mut u8, total: usize) -> Result<()> {
        recorded(|| {
            if low.is_null() || high.is_null() {
                return Err(Error::NullPointer("allocation_merge: a pointer is NULL"));
            }
            self.check_process()?;
            self.lock()
                .tracker
                .merge(low as usize, high as usize, total)
        })
    }

    fn ipc_unsupported(&self) -> Result<()> {
        if let Backing::Shared(_) = self.backing {
            return Err(shared_ipc_unsupported());
        }
        Ok(())
    }

    /// `ext_get_ipc_handle`: a handle another process opens to reach `[ptr, ptr + size)`,
    /// which must lie inside one allocation (any part of it) and one backing chunk.
    ///
    /// DEVICE memory is exported as a dma-buf the first time (kept until the allocation is
    /// freed); HOST memory is named by the provider's memfd. SHARED memory is
    /// [`Error::NotSupported`]. See [`IpcHandle`] for what the consumer needs.
    pub fn get_ipc_handle(&self, ptr: *mut u8, size: usize) -> Result<IpcHandle> {
        recorded(|| {
            self.ipc_unsupported()?;
            if ptr.is_null() {
                return Err(Error::NullPointer("get_ipc_handle: the pointer is NULL"));
            }
            if size == 0 {
                return Err(Error::invalid("get_ipc_handle: the size must not be zero"));
            }
            self.check_process()?;
            let addr = ptr as usize;
            let mut st = self.lock();
            let (start, piece) = st.tracker.piece_containing(addr).ok_or_else(|| {
                Error::invalid(format!(
                    "get_ipc_handle: {addr:#x} is not memory of this provider"
                ))
            })?;
            let end = addr.saturating_add(size);
            if end > start + piece {
                return Err(Error::invalid(format!(
                    "get_ipc_handle: {size} bytes at {addr:#x} run past the allocation"
                )));
            }
            let (base, slot) = st
                .tracker
                .chunk_containing_mut(addr)
                .ok_or_else(|| Error::invalid("get_ipc_handle: no backing chunk"))?;
            if end > base + slot.len {
                return Err(Error::invalid(
                    "get_ipc_handle: the range spans two backing chunks (a merge of separate \
                     allocations); take a handle for each",
                ));
            }
            let in_chunk = (addr - base) as u64;
            let mut fields = IpcFields {
                kind: self.kind(),
                cpu_visible: self.host_accessible(),
                pid: self.pid,
                fd: -1,
                gpu_id: self.gpu_id().get(),
                offset: in_chunk,
                size: size as u64,
                object_size: 0,
                mmap_offset: 0,
                provider_id: self.id,
            };
            let chunk = &mut slot.chunk;
            match (&self.backing, &chunk.bo) {
                (Backing::Host(host), _) => {
                    fields.fd = host.memfd.as_raw_fd();
                    fields.offset += chunk.file_offset.unwrap_or(0);
                }
                (Backing::Device(_), Some(bo)) => {
                    if chunk.dmabuf.is_none() {
                        let fd = self.kfd.export_dmabuf(bo, true).map_err(|e| {
                            Error::kfd(NativeCode::IpcGetFailed, "get_ipc_handle", &e)
                        })?;
                        chunk.dmabuf = Some(fd);
                    }
                    fields.fd = chunk.dmabuf.as_ref().map_or(-1, |fd| fd.as_raw_fd());
                    fields.object_size = bo.size();
                    fields.mmap_offset = bo.mmap_offset().unwrap_or(0);
                }
                (Backing::Device(_), None) => {
                    return Err(Error::invalid("get_ipc_handle: no buffer object"));
                }
                (Backing::Shared(_), _) => return Err(shared_ipc_unsupported()),
            }
            Ok(IpcHandle::encode(&fields))
        })
    }

    /// `ext_put_ipc_handle`: the producer is done with a handle it made. Handles are cached
    /// per allocation (one dma-buf per chunk, released with the chunk), so this only checks
    /// that the handle is this provider's; putting it after the allocation was freed is fine,
    /// as in UMF.
    pub fn put_ipc_handle(&self, handle: &IpcHandle) -> Result<()> {
        recorded(|| {
            self.ipc_unsupported()?;
            let fields = handle.decode()?;
            self.check_process()?;
            if fields.pid != self.pid || fields.provider_id != self.id {
                return Err(Error::invalid(
                    "put_ipc_handle: the handle was not made by this provider",
                ));
            }
            Ok(())
        })
    }

    /// `ext_open_ipc_handle`: maps memory another process (or this one) shared, on this
    /// provider's GPUs, and returns its pointer here. The handle's kind must be this
    /// provider's. Errors reaching the producer (gone: `ESRCH`; no ptrace rights: `EPERM`)
    /// and from the import are [`Error::ProviderSpecific`] with
    /// [`NativeCode::IpcOpenFailed`].
    pub fn open_ipc_handle(&self, handle: &IpcHandle) -> Result<NonNull<u8>> {
        recorded(|| {
            self.ipc_unsupported()?;
            let f = handle.decode()?;
            self.check_process()?;
            if f.kind != self.kind() {
                return Err(Error::invalid(format!(
                    "open_ipc_handle: a {:?} handle cannot be opened by a {:?} provider",
                    f.kind,
                    self.kind()
                )));
            }
            let code = NativeCode::IpcOpenFailed;
            let size = usize::try_from(f.size)
                .map_err(|_| Error::invalid("open_ipc_handle: the size does not fit"))?;
            let fd = take_fd(f.pid, f.fd)?;
            let page = self.page as u64;
            let (opened, offset) = match self.backing {
                Backing::Host(_) => {
                    let file_start = f.offset & !(page - 1);
                    let delta = (f.offset - file_start) as usize;
                    let len = delta
                        .checked_add(size)
                        .and_then(|n| round_up(n, self.page))
                        .ok_or_else(|| Error::invalid("open_ipc_handle: the size does not fit"))?;
                    let region = Region::reserve(len, self.page).map_err(|e| {
                        Error::sys(code, "open_ipc_handle: reserving address space", e)
                    })?;
                    let chunk = self.build(Chunk::over(region), |chunk| {
                        chunk.region.map_file(fd.as_fd(), file_start).map_err(|e| {
                            Error::sys(code, "open_ipc_handle: mapping the memfd", e)
                        })?;
                        self.check_va(&chunk.region, "open_ipc_handle")?;
                        self.userptr_into(&mut chunk.bo, &chunk.region, code, "open_ipc_handle")
                    })?;
                    let opened = Opened { chunk, size };
                    (opened, delta)
                }
                Backing::Device(_) => {
                    let object = usize::try_from(f.object_size).unwrap_or(0);
                    let offset = usize::try_from(f.offset).unwrap_or(usize::MAX);
                    if object == 0
                        || !object.is_multiple_of(self.page)
                        || offset.checked_add(size).is_none_or(|end| end > object)
                    {
                        return Err(Error::invalid(
                            "open_ipc_handle: the handle's range does not fit its buffer object",
                        ));
                    }
                    let align = if object >= TWO_MIB {
                        TWO_MIB
                    } else {
                        self.page
                    };
                    let region = Region::reserve(object, align).map_err(|e| {
                        Error::sys(code, "open_ipc_handle: reserving address space", e)
                    })?;
                    let chunk = self.build(Chunk::over(region), |chunk| {
                        self.check_va(&chunk.region, "open_ipc_handle")?;
                        let va = chunk.region.addr() as u64;
                        let bo = self
                            .kfd
                            .import_dmabuf(fd.as_fd(), self.gpu_id(), va)
                            .map_err(|e| Error::kfd(code, "open_ipc_handle", &e))?;
                        let bo = chunk.bo.insert(bo);
                        self.kfd
                            .map_memory_to_gpu(bo, &self.gpus)
                            .map_err(|e| Error::kfd(code, "open_ipc_handle", &e))?;
                        if f.cpu_visible {
                            self.map_import_for_cpu(
                                &chunk.region,
                                &fd,
                                GpuId(f.gpu_id),
                                f.mmap_offset,
                            )?;
                        }
                        Ok(())
                    })?;
                    let opened = Opened { chunk, size };
                    (opened, offset)
                }
                Backing::Shared(_) => return Err(shared_ipc_unsupported()),
            };
            let ptr = opened.chunk.region.ptr_at(offset);
            self.lock().opened.insert(ptr.as_ptr() as usize, opened);
            Ok(ptr)
        })
    }

    /// Maps an imported dma-buf for the CPU over its reservation: the exporter's render-node
    /// offset on this process's render node of the exporting GPU (KFD ≥ 6.x kernels give an
    /// import a GEM handle in that file, which is what permits it), else the dma-buf itself.
    fn map_import_for_cpu(
        &self,
        region: &Region,
        dmabuf: &OwnedFd,
        exporter: GpuId,
        mmap_offset: u64,
    ) -> Result<()> {
        let code = NativeCode::IpcOpenFailed;
        if self.kfd.render_fd(exporter).is_none()
            && let Some(&minor) = self.render_minors.get(&exporter)
        {
            self.kfd.acquire_vm(exporter, minor).map_err(|e| {
                Error::kfd(code, "open_ipc_handle: acquiring the exporter's GPU", &e)
            })?;
        }
        let through_render = match self.kfd.render_fd(exporter) {
            Some(render) => region.map_file(render.as_fd(), mmap_offset),
            None => Err(Errno::NODEV),
        };
        match through_render {
            Ok(()) => {}
            Err(Errno::ACCESS | Errno::PERM | Errno::INVAL | Errno::NODEV) => region
                .map_file(dmabuf.as_fd(), 0)
                .map_err(|e| Error::sys(code, "open_ipc_handle: mapping the dma-buf", e))?,
            Err(e) => {
                return Err(Error::sys(
                    code,
                    "open_ipc_handle: mapping the exporter's VRAM",
                    e,
                ));
            }
        }
        region
            .advise(0, region.len(), Advice::LinuxDontFork)
            .map_err(|e| Error::sys(code, "open_ipc_handle: MADV_DONTFORK", e))
    }

    /// `ext_close_ipc_handle`: unmaps what [`KfdProvider::open_ipc_handle`] returned as
    /// `ptr`. `size` is the handle's size, or 0 (ignored, as UMF's OS provider ignores it).
    /// Any other pointer is [`Error::InvalidArgument`].
    pub fn close_ipc_handle(&self, ptr: *mut u8, size: usize) -> Result<()> {
        recorded(|| {
            self.ipc_unsupported()?;
            if ptr.is_null() {
                return Err(Error::NullPointer("close_ipc_handle: the pointer is NULL"));
            }
            self.check_process()?;
            let addr = ptr as usize;
            let opened = {
                let mut st = self.lock();
                match st.opened.get(&addr) {
                    Some(o) if size == 0 || size == o.size => st.opened.remove(&addr),
                    Some(o) => {
                        return Err(Error::invalid(format!(
                            "close_ipc_handle: the memory at {addr:#x} is {} bytes, not {size}",
                            o.size
                        )));
                    }
                    None => None,
                }
            };
            let opened = opened.ok_or_else(|| {
                Error::invalid(format!(
                    "close_ipc_handle: {addr:#x} is not a pointer open_ipc_handle returned"
                ))
            })?;
            self.release_opened(opened)
        })
    }

    fn release_opened(&self, opened: Opened) -> Result<()> {
        self.release_chunk(opened.chunk, Fate::Seen)
            .map_err(|e| match e {
                Error::ProviderSpecific(mut native) => {
                    native.code = NativeCode::IpcCloseFailed;
                    native.message = format!("close_ipc_handle: {}", native.message);
                    Error::ProviderSpecific(native)
                }
                other => other,
            })
    }
}

/// Takes a reference to fd `fd` of process `pid` (`pidfd_open` + `pidfd_getfd`).
fn take_fd(pid: i32, fd: i32) -> Result<OwnedFd> {
    let code = NativeCode::IpcOpenFailed;
    let pid = Pid::from_raw(pid).ok_or_else(|| Error::invalid("open_ipc_handle: no pid"))?;
    let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).map_err(|e| {
        Error::native_with(
            code,
            e,
            format!(
                "open_ipc_handle: pidfd_open of the producer (pid {}) failed: {}",
                pid.as_raw_nonzero(),
                kfd_ioctl::ErrnoName(e)
            ),
        )
    })?;
    rustix::process::pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()).map_err(|e| {
        Error::native_with(
            code,
            e,
            format!(
                "open_ipc_handle: pidfd_getfd of fd {fd} of pid {} failed: {} (the consumer \
                 needs ptrace rights on the producer: the same user, and with Yama \
                 ptrace_scope=1 a PR_SET_PTRACER from the producer)",
                pid.as_raw_nonzero(),
                kfd_ioctl::ErrnoName(e)
            ),
        )
    })
}

impl Drop for KfdProvider {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        let mut chunks: Vec<Chunk> = state.tracker.drain().map(|(_, chunk)| chunk).collect();
        chunks.append(&mut state.pending);
        chunks.extend(
            std::mem::take(&mut state.opened)
                .into_values()
                .map(|o| o.chunk),
        );
        if sys::fork_generation() != self.generation {
            // A forked child, a new KFD process: the KFD objects are the parent's, and
            // freeing them is the parent's business. The child closes what it inherited (the
            // fds each buffer object's `Kfd` and the provider hold, dma-bufs, the memfd) and
            // unmaps its copies of the ranges — except ranges it never got (MADV_DONTFORK),
            // where unmapping would remove whatever the child has mapped there since.
            // Dropping a BO issues no ioctl in a child only with a fork-aware kfd-ioctl;
            // before that, KFD refuses the child's UNMAP/FREE with EBADF (the fd belongs to
            // the parent's KFD process), which leaves the parent's objects alone.
            for chunk in chunks {
                let Chunk {
                    bo, dmabuf, region, ..
                } = chunk;
                drop(bo);
                drop(dmabuf);
                region.release_in_forked_child();
            }
            return;
        }
        // Errors cannot be reported from drop. A chunk whose BO still cannot be freed comes
        // back to `pending`; after one more try its BO's own drop makes the last attempt.
        for chunk in chunks {
            let _ = self.release_chunk(chunk, Fate::Seen);
        }
        let pending = std::mem::take(&mut self.lock().pending);
        self.release_pending(pending);
        drop(std::mem::take(&mut self.lock().pending));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets a failed allocation gives back are used again, in any order of giving back,
    /// and the span's end is never passed.
    #[test]
    fn host_offsets_given_back_are_reused() {
        let mut o = HostOffsets::default();
        let a = o.take(10).unwrap();
        let b = o.take(20).unwrap();
        let c = o.take(30).unwrap();
        assert_eq!((a, b, c), (0, 10, 30));
        o.give_back(b, 20);
        assert_eq!(o.take(5), Some(10), "first fit in a returned range");
        o.give_back(10, 5);
        o.give_back(a, 10);
        assert_eq!(o.returned.len(), 1, "neighbours coalesce: {:?}", o.returned);
        o.give_back(c, 30);
        assert_eq!((o.next, o.returned.len()), (0, 0), "all given back");
        assert_eq!(o.take(HOST_FILE_SPAN + 1), None);
        assert_eq!(
            (o.next, o.returned.len()),
            (0, 0),
            "a refusal takes nothing"
        );
        assert_eq!(o.take(HOST_FILE_SPAN), Some(0));
        assert_eq!(o.take(1), None);
    }
}
