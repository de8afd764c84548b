//! A UMF-style memory provider over KFD, and a pool on top of it.
//!
//! [`KfdProvider`] has the operations of Intel UMF's memory provider (`alloc`, `free`, purges,
//! split and merge, IPC, page sizes, name, last native error) with UMF's argument rules
//! (`shared/ref/anchors.md` §1), over the allocation kinds of LLVM Offload's `olMemAlloc`
//! ([`MemoryKind`]). Every method maps 1:1 onto an op of UMF's `umf_memory_provider_ops_t`,
//! and every error onto a `umf_result_t` ([`Error::umf_result`]), so the C ABI is a thin
//! wrapper. [`KfdPool`] adds size classes over coarse chunks so that steady-state allocation
//! of 64 B – 2 MiB issues no ioctl at all.
//!
//! This is the layer for allocators (UMF pools, a runtime's suballocator). A runtime's own
//! allocations start one layer down, with `kfd_ioctl::Kfd::alloc_memory` (one address for the
//! CPU and the GPU, the same reservation scheme as DEVICE memory below), and its queues with
//! `kfd-queue`; `kfd-queue`'s `examples/first_day.rs` is that whole program.
//!
//! # The kinds, and how each is built
//!
//! | kind | backing | CPU pointer | GPU VA |
//! |---|---|---|---|
//! | [`MemoryKind::Host`] | one memfd per provider, mapped `MAP_SHARED`; a `USERPTR` buffer object over each allocation, mapped on the provider's GPUs | always | the CPU address |
//! | [`MemoryKind::Device`] | a VRAM buffer object of one GPU at a reserved address | when the BAR is large (`PUBLIC` VRAM): the render node mapped `MAP_FIXED` over the reservation | the reserved address: pointer == GPU VA either way |
//! | [`MemoryKind::Shared`] | private anonymous memory registered as an SVM range with access for the provider's GPUs | always | the CPU address |
//!
//! HOST memory is `USERPTR` over a memfd rather than GTT because the memfd is what another
//! process can map (IPC), and because purging it is the kernel's own `madvise`: the GPU sees
//! the purge through the `USERPTR` notifier. DEVICE memory follows libhsakmt's scheme exactly:
//! reserve the range with an anonymous `PROT_NONE` mapping, allocate the BO at that address,
//! and map the render node there when the host can reach the VRAM. Without a large BAR the
//! pointer is still the GPU address, and the reservation keeps the CPU from putting anything
//! else there (touching it from the CPU faults).
//!
//! # Pieces over chunks: split, merge and free
//!
//! KFD cannot split a buffer object, so each allocation's backing is a *chunk* and what
//! callers hold are *pieces* over chunks. [`KfdProvider::allocation_split`] and
//! [`KfdProvider::allocation_merge`] only reshape pieces (UMF's API-layer and tracking-layer
//! rules apply); a chunk goes back to KFD when no live piece covers any of its bytes. Both
//! maps are `BTreeMap`s keyed by address, so [`KfdProvider::free_ptr`] (free by pointer alone,
//! as LLVM Offload's `olMemFree`) is O(log n).
//!
//! # Purges
//!
//! Both purges need a page-aligned pointer, and a size that is a whole number of pages or
//! reaches exactly to the end of the allocation (whose last page is the provider's alone);
//! otherwise [`Error::InvalidAlignment`].
//!
//! | kind | `purge_lazy` | `purge_force` (reads back as zero) |
//! |---|---|---|
//! | HOST | `MADV_REMOVE` (Linux refuses `MADV_FREE` on shared memory; dropping the pages now is a valid "lazy" purge) | `MADV_REMOVE` |
//! | SHARED | `MADV_FREE` | `MADV_DONTNEED` |
//! | DEVICE | accepted, nothing done (UMF allows a lazy purge to be deferred forever) | zeros written through the CPU mapping; [`Error::NotSupported`] without one |
//!
//! # IPC across processes
//!
//! [`KfdProvider::get_ipc_handle`] gives an [`IpcHandle`] naming the producer's pid and an fd
//! number: for HOST the provider's memfd, for DEVICE the chunk's dma-buf
//! (`EXPORT_DMABUF`, made once per chunk and kept until the chunk is freed). The consumer's
//! [`KfdProvider::open_ipc_handle`] takes the fd with `pidfd_open` + `pidfd_getfd` and:
//! HOST — maps the memfd range and makes its own `USERPTR` BO over it on its GPUs; DEVICE —
//! `IMPORT_DMABUF` at a fresh reserved address on its GPU, maps it there, and when the memory
//! is host-visible maps the exporter's render-node offset over the reservation (falling back
//! to mapping the dma-buf itself where the kernel refuses that). SHARED memory is private
//! anonymous memory so that it can migrate to VRAM; it cannot be shared, and its IPC calls say
//! [`Error::NotSupported`]. HOST memfd offsets are never reused, so a consumer that keeps a
//! stale mapping can never see a later allocation (freed ranges are punched out of the file,
//! so their memory does go back).
//!
//! # Failures
//!
//! A failed `alloc` consumes nothing: whatever step fails (the HOST memfd's span, the address
//! reservation, `ALLOC_MEMORY_OF_GPU`, `MAP_MEMORY_TO_GPU`, the CPU mapping, the SVM
//! registration), what the earlier steps took is given back — the buffer object, the range,
//! the HOST memfd offsets. A free whose `UNMAP_MEMORY_FROM_GPU` fails tries again a few
//! times; if the unmap still fails, the free reports it and the chunk stays whole (buffer
//! object and range) until the next free or the provider's drop releases it
//! ([`ProviderStats::pending_release`]).
//!
//! # Processes and `fork`
//!
//! A KFD process is a thread group: a forked child is a new KFD process and inherits no GPU
//! mappings. A provider created before the fork refuses every call in the child with
//! [`NativeCode::WrongProcess`] (it detects the fork with a `pthread_atfork` handler, one
//! atomic load per call). Dropped there, it frees nothing of the parent's: it closes the
//! fds it inherited and unmaps its copies of the ranges it inherited (not the
//! `MADV_DONTFORK` ones, which the child never had). The child opens
//! `/dev/kfd` again ([`Kfd::open`]) and creates its own provider, which works as in any
//! process. HOST memory stays shared with the child (it is a `MAP_SHARED` memfd); DEVICE
//! mappings are `MADV_DONTFORK`, as libhsakmt makes them.
//!
//! # Example
//!
//! ```
//! # kfd_emu::supervisor::run_attached(
//! #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
//! #     || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! use kfd_ioctl::Kfd;
//! use kfd_provider::{KfdPool, KfdProvider, MemoryKind, PoolParams, ProviderParams};
//!
//! // System memory the first GPU reaches, mapped on it.
//! let provider = KfdProvider::new(Kfd::open()?, ProviderParams::new(MemoryKind::Host))?;
//! let ptr = provider.alloc(3 << 20, 0)?;
//! provider.allocation_split(ptr.as_ptr(), 3 << 20, 1 << 20)?;
//! // The halves are freed separately; the buffer object goes when both are gone.
//! provider.free_ptr(ptr.as_ptr().wrapping_add(1 << 20))?;
//! provider.free(ptr.as_ptr(), 1 << 20)?;
//!
//! // Small allocations come from a pool of 2 MiB chunks.
//! let pool = KfdPool::new(provider, PoolParams::default())?;
//! let block = pool.alloc(4096, 0)?;
//! pool.free(block.as_ptr())?;
//! # Ok(())
//! # }).unwrap().unwrap();
//! ```
//!
//! [`Kfd::open`]: kfd_ioctl::Kfd::open

mod error;
mod ipc;
mod kfd_provider;
mod pool;
mod sys;
mod tracker;

use std::ptr::NonNull;

pub use kfd_ioctl::GpuId;

pub use error::{Error, NativeCode, NativeError, Result, UmfResult, last_native_error};
pub use ipc::{IPC_HANDLE_SIZE, IpcHandle};
pub use kfd_provider::KfdProvider;
pub use pool::{KfdPool, POOL_MAX_CLASS, POOL_MIN_CLASS, PoolParams, PoolStats};

/// What memory a provider hands out: LLVM Offload's `OL_ALLOC_TYPE_*` (UR's USM kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// System memory the provider's GPUs can reach, mapped on them, and CPU-visible.
    #[doc(alias = "OL_ALLOC_TYPE_HOST")]
    Host,
    /// VRAM of one GPU; CPU-visible when the BAR allows. The pointer is the GPU address.
    #[doc(alias = "OL_ALLOC_TYPE_DEVICE")]
    Device,
    /// Shared virtual memory: one pointer for the CPU and the GPUs, migrated between them.
    #[doc(alias = "OL_ALLOC_TYPE_MANAGED")]
    Shared,
}

/// How to create a [`KfdProvider`].
///
/// ```
/// use kfd_provider::{MemoryKind, ProviderParams};
///
/// let params = ProviderParams::new(MemoryKind::Device)
///     .gpu(0x1a2b)
///     .peer(0x3c4d)
///     .name("vram0");
/// assert_eq!(params.peers, [kfd_ioctl::GpuId(0x3c4d)]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderParams {
    /// The kind of memory.
    pub kind: MemoryKind,
    /// The GPU whose VRAM DEVICE memory is, and on which everything is mapped; `None`: the
    /// first GPU of the topology.
    pub gpu_id: Option<GpuId>,
    /// Further GPUs the memory is mapped on (given access to, for SHARED).
    pub peers: Vec<GpuId>,
    /// The provider's name instead of [`KfdProvider::DEFAULT_NAME`].
    pub name: Option<String>,
}

impl ProviderParams {
    /// Memory of `kind` on the first GPU, no peers, the default name.
    pub fn new(kind: MemoryKind) -> ProviderParams {
        ProviderParams {
            kind,
            gpu_id: None,
            peers: Vec::new(),
            name: None,
        }
    }

    /// On GPU `gpu_id` (0 keeps the default, the first GPU, as the C ABI's 0 does).
    pub fn gpu(mut self, gpu_id: impl Into<GpuId>) -> ProviderParams {
        let gpu_id = gpu_id.into();
        self.gpu_id = (gpu_id != 0).then_some(gpu_id);
        self
    }

    /// Also mapped on (accessible to) GPU `gpu_id`.
    pub fn peer(mut self, gpu_id: impl Into<GpuId>) -> ProviderParams {
        self.peers.push(gpu_id.into());
        self
    }

    /// Named `name`.
    pub fn name(mut self, name: impl Into<String>) -> ProviderParams {
        self.name = Some(name.into());
        self
    }
}

/// A provider's allocation counters (UMF's `stats.allocated_memory` and `stats.peak_memory`
/// ctl values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProviderStats {
    /// Bytes in live allocations (as asked for, not page rounded).
    pub allocated: usize,
    /// The most `allocated` has been.
    pub peak: usize,
    /// Live allocations (pieces, after splits and merges).
    pub allocations: usize,
    /// Live backing chunks (buffer objects or SVM ranges).
    pub chunks: usize,
    /// IPC handles opened and not closed yet.
    pub opened_ipc: usize,
    /// Backing chunks already freed whose buffer object KFD has not let go yet (an unmap
    /// that kept failing); the next free, and the provider's drop, try them again.
    pub pending_release: usize,
}

/// What the provider knows about the allocation containing an address (UMF's allocation
/// properties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocationInfo {
    /// The allocation's first byte (its pointer and GPU address).
    pub base: NonNull<u8>,
    /// Its size in bytes.
    pub size: usize,
    /// Its kind.
    pub kind: MemoryKind,
    /// The provider's GPU.
    pub gpu_id: GpuId,
    /// Whether the CPU can touch it.
    pub host_accessible: bool,
}
