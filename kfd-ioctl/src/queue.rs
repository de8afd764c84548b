//! [`Queue`], the owner of a KFD user-mode queue, its buffers ([`QueueBuffer`]), the
//! per-process doorbell page ([`Doorbells`]) and the sizes a queue's buffers must have
//! ([`QueueSizes`]).
//!
//! A queue is memory the GPU follows on its own: a ring it reads packets from, a read pointer
//! it writes, a write pointer and doorbell the producer writes, and for compute queues an
//! end-of-pipe buffer and a context save/restore (CWSR) area. The kernel checks little of
//! this at `CREATE_QUEUE` (newer kernels check the BOs are mapped and of the right size,
//! `kfd_queue_acquire_buffers`), so the safe [`Kfd::create_queue`] takes the buffer objects
//! themselves and keeps them alive as long as the queue.

use std::fmt;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::abi::{self, AllocMemFlags};
use crate::error::{Error, IoctlContext, Result};
use crate::topology::Node;
use crate::{BufferObject, GpuId, Kfd, sys};

/// `KFD_MMAP_TYPE_DOORBELL` (`kfd_priv.h`): the top bits of a doorbell mmap offset.
const KFD_MMAP_TYPE_DOORBELL: u64 = 3 << 62;
/// `KFD_MMAP_GPU_ID_SHIFT`: where the GPU id goes in a `/dev/kfd` mmap offset (16 bits).
const KFD_MMAP_GPU_ID_SHIFT: u32 = 46;

/// What runs on a queue (`KFD_IOC_QUEUE_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueueType {
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE`: PM4 packets on a compute (CP) queue; the read and write
    /// pointers count dwords.
    #[doc(alias = "KFD_IOC_QUEUE_TYPE_COMPUTE")]
    Compute,
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE_AQL`: HSA AQL packets on a compute (CP) queue.
    #[doc(alias = "KFD_IOC_QUEUE_TYPE_COMPUTE_AQL")]
    ComputeAql,
    /// `KFD_IOC_QUEUE_TYPE_SDMA`: a copy-engine queue on a PCIe SDMA engine.
    #[doc(alias = "KFD_IOC_QUEUE_TYPE_SDMA")]
    Sdma,
    /// `KFD_IOC_QUEUE_TYPE_SDMA_XGMI`: a copy-engine queue on an xGMI SDMA engine (GPUs with
    /// `num_sdma_xgmi_engines > 0`).
    #[doc(alias = "KFD_IOC_QUEUE_TYPE_SDMA_XGMI")]
    SdmaXgmi,
    /// `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID` (KFD 1.17): a copy-engine queue on the engine with
    /// this id (PCIe engines first, then xGMI ones).
    #[doc(alias = "KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID")]
    SdmaByEngine(u32),
}

impl QueueType {
    fn raw(self) -> (u32, u32) {
        match self {
            QueueType::Compute => (abi::KFD_IOC_QUEUE_TYPE_COMPUTE, 0),
            QueueType::ComputeAql => (abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, 0),
            QueueType::Sdma => (abi::KFD_IOC_QUEUE_TYPE_SDMA, 0),
            QueueType::SdmaXgmi => (abi::KFD_IOC_QUEUE_TYPE_SDMA_XGMI, 0),
            QueueType::SdmaByEngine(id) => (abi::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID, id),
        }
    }

    /// Whether it is a compute queue (which has an EOP buffer and a CWSR area).
    pub fn is_compute(self) -> bool {
        matches!(self, QueueType::Compute | QueueType::ComputeAql)
    }
}

/// A place in a buffer object: where a queue's ring, pointer or area lives. The queue keeps
/// the BO alive until it is destroyed.
#[derive(Debug, Clone)]
pub struct QueueBuffer {
    /// The buffer object (mapped on the queue's GPU).
    pub bo: Arc<BufferObject>,
    /// The byte offset in it.
    pub offset: u64,
}

impl QueueBuffer {
    /// The start of `bo`.
    pub fn start_of(bo: Arc<BufferObject>) -> QueueBuffer {
        QueueBuffer { bo, offset: 0 }
    }

    /// The GPU address, after checking `len` bytes from it lie in the BO and it is aligned to
    /// `align`.
    fn gpu_address(&self, len: u64, align: u64, what: &'static str) -> Result<u64> {
        let fits = self
            .offset
            .checked_add(len)
            .is_some_and(|end| end <= self.bo.size());
        let va = self.bo.va().checked_add(self.offset);
        match va {
            Some(va) if fits && va.is_multiple_of(align) => Ok(va),
            _ => Err(Error::InvalidArgument {
                ioctl: "CREATE_QUEUE",
                reason: what,
            }),
        }
    }
}

/// The sizes of a compute queue's buffers on a GPU, as the kernel expects them
/// (`kfd_queue_ctx_save_restore_size` in `kfd_queue.c`, which libhsakmt's `queues.c`
/// mirrors): newer kernels refuse a CREATE_QUEUE whose sizes differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSizes {
    /// `eop_buffer_size`: the end-of-pipe buffer.
    pub eop_buffer_size: u64,
    /// `ctl_stack_size`: the control stack at the start of each XCC's save area.
    pub ctl_stack_size: u32,
    /// `cwsr_size`: one XCC's save area (control stack and wave data).
    pub cwsr_size: u32,
    /// The debugger's bytes per XCC after the save area.
    pub debug_memory_size: u32,
    /// XCCs of the GPU (partition).
    pub num_xcc: u32,
}

impl QueueSizes {
    /// The page size the kernel aligns with.
    const PAGE: u64 = 4096;

    /// The sizes for GPU node `node`, from its `cwsr_size` and `ctl_stack_size` when the
    /// kernel publishes them, else computed as the kernel does from the CU and wave counts;
    /// `None` for a node without a GFX version or CUs, or older than GFX 8.0.1 (no CWSR).
    pub fn for_node(node: &Node) -> Option<QueueSizes> {
        let p = &node.properties;
        let gfxv = u32::try_from(p.gfx_target_version?).ok()?;
        if gfxv < 80001 {
            return None;
        }
        let num_xcc = u32::try_from(p.num_xcc.unwrap_or(1).max(1)).ok()?;
        let simd_per_cu = u32::try_from(p.simd_per_cu).ok().filter(|&n| n > 0)?;
        let cu_num = u32::try_from(p.simd_count).ok()? / simd_per_cu / num_xcc;
        // kfd_queue_ctx_save_restore_size: waves per XCC.
        let wave_num = if gfxv < 100100 {
            let per_engine = u32::try_from(p.array_count / p.simd_arrays_per_engine.max(1)).ok()?;
            (cu_num * 40).min(per_engine.saturating_mul(512))
        } else {
            cu_num * 32
        };
        let vgpr_per_cu: u32 = if gfxv / 100 * 100 == 90400 || matches!(gfxv, 90010 | 90008 | 90500)
        {
            0x80000
        } else if matches!(gfxv, 110000 | 110001 | 120000 | 120001) {
            0x60000
        } else {
            0x40000
        };
        let lds_per_cu = if gfxv == 90500 {
            u32::try_from(p.lds_size_in_kb).ok()? << 10
        } else {
            0x10000
        };
        // SGPR_SIZE_PER_CU + HWREG_SIZE_PER_CU.
        let wg_per_cu = vgpr_per_cu + 0x4000 + lds_per_cu + 0x1000;
        let wg_data = align(u64::from(cu_num) * u64::from(wg_per_cu), Self::PAGE);
        let per_wave = if gfxv >= 100100 { 12 } else { 8 };
        // SIZEOF_HSA_USER_CONTEXT_SAVE_AREA_HEADER (40) + the waves' entries + 8.
        let mut ctl = align(40 + u64::from(wave_num) * per_wave + 8, Self::PAGE);
        if gfxv / 10000 * 10000 == 100000 {
            ctl = ctl.min(0x7000);
        }
        let published_ctl = p.ctl_stack_size.filter(|&v| v > 0);
        let published_cwsr = p.cwsr_size.filter(|&v| v > 0);
        let ctl_stack_size = u32::try_from(published_ctl.unwrap_or(ctl)).ok()?;
        let cwsr_size = u32::try_from(published_cwsr.unwrap_or(ctl + wg_data)).ok()?;
        // DEBUGGER_BYTES_PER_WAVE, aligned to DEBUGGER_BYTES_ALIGN.
        let debug_memory_size = u32::try_from(align(u64::from(wave_num) * 32, 64)).ok()?;
        let eop_buffer_size = if gfxv == 80002 { 0x8000 } else { 4096 };
        Some(QueueSizes {
            eop_buffer_size,
            ctl_stack_size,
            cwsr_size,
            debug_memory_size,
            num_xcc,
        })
    }

    /// The bytes the context save area must span: `(cwsr_size + debug_memory_size) * num_xcc`,
    /// page aligned (`kfd_queue_acquire_buffers`).
    pub fn total_ctx_save_size(&self) -> u64 {
        align(
            (u64::from(self.cwsr_size) + u64::from(self.debug_memory_size))
                * u64::from(self.num_xcc),
            Self::PAGE,
        )
    }
}

fn align(value: u64, to: u64) -> u64 {
    value.div_ceil(to) * to
}

/// What a queue is made of, for [`Kfd::create_queue`].
#[derive(Debug, Clone)]
pub struct QueueSpec {
    /// The GPU.
    pub gpu_id: GpuId,
    /// What runs on it.
    pub queue_type: QueueType,
    /// Share of the GPU, 0..=100 (`KFD_MAX_QUEUE_PERCENTAGE`).
    pub percentage: u32,
    /// Priority, 0..=15 (`KFD_MAX_QUEUE_PRIORITY`).
    pub priority: u32,
    /// The ring, `ring_size` bytes from here.
    pub ring: QueueBuffer,
    /// The ring size in bytes: a power of two.
    pub ring_size: u32,
    /// Where the GPU writes its read pointer (8 bytes).
    pub read_pointer: QueueBuffer,
    /// Where the producer writes the write pointer (8 bytes).
    pub write_pointer: QueueBuffer,
    /// Compute queues: the end-of-pipe buffer and the context save area, of the sizes
    /// [`QueueSizes`] says.
    pub compute: Option<ComputeBuffers>,
}

/// The extra buffers of a compute queue.
#[derive(Debug, Clone)]
pub struct ComputeBuffers {
    /// The end-of-pipe buffer, `sizes.eop_buffer_size` bytes.
    pub eop: QueueBuffer,
    /// The context save area, `sizes.total_ctx_save_size()` bytes.
    pub ctx_save: QueueBuffer,
    /// The sizes of the GPU.
    pub sizes: QueueSizes,
}

/// [`Kfd::create_queue_raw`]'s arguments: GPU addresses.
#[derive(Debug, Clone, Copy)]
pub struct RawQueueSpec {
    /// The GPU.
    pub gpu_id: GpuId,
    /// What runs on it.
    pub queue_type: QueueType,
    /// Share of the GPU, 0..=100.
    pub percentage: u32,
    /// Priority, 0..=15.
    pub priority: u32,
    /// The ring's GPU address.
    pub ring_va: u64,
    /// The ring size in bytes: a power of two.
    pub ring_size: u32,
    /// The read pointer's GPU address.
    pub read_pointer_va: u64,
    /// The write pointer's GPU address.
    pub write_pointer_va: u64,
    /// Compute queues: the EOP buffer's and context save area's GPU addresses and the sizes.
    pub compute: Option<(u64, u64, QueueSizes)>,
}

/// A user-mode queue from `CREATE_QUEUE`; destroyed on drop, or by [`Queue::close`], which
/// reports errors. It keeps its buffer objects alive until then.
pub struct Queue {
    kfd: Kfd,
    id: u32,
    gpu_id: u32,
    queue_type: QueueType,
    doorbell_offset: u64,
    ring_va: u64,
    ring_size: u32,
    closed: bool,
    /// Dropped after the queue is destroyed (field order does not matter: `drop` destroys
    /// first).
    _buffers: Vec<Arc<BufferObject>>,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("id", &self.id)
            .field("gpu_id", &format_args!("{:#x}", self.gpu_id))
            .field("queue_type", &self.queue_type)
            .field(
                "doorbell_offset",
                &format_args!("{:#x}", self.doorbell_offset),
            )
            .field("ring_va", &format_args!("{:#x}", self.ring_va))
            .field("ring_size", &self.ring_size)
            .finish()
    }
}

impl Kfd {
    /// `CREATE_QUEUE`: a queue of `spec`'s type on `spec.gpu_id` over `spec`'s buffers.
    ///
    /// The buffers are checked to lie in their BOs (the ring `ring_size` bytes, page aligned;
    /// the pointers 8 bytes, 8-aligned; the compute buffers their [`QueueSizes`]) before the
    /// call; they must also be mapped on the GPU, which newer kernels check.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a buffer outside its BO or misaligned, or compute
    /// buffers missing for a compute queue; [`Error::Unsupported`] for `SdmaByEngine` before
    /// KFD 1.17. From the kernel (`kfd_ioctl_create_queue`): `EINVAL` for a percentage above
    /// 100, a priority above 15, a ring size that is not a power of two, a `gpu_id` the
    /// process does not have, an SDMA engine id past the GPU's engines, buffers that are not
    /// mapped BOs of the expected size (newer kernels), or EOP/CWSR sizes other than the
    /// GPU's; `EFAULT` for addresses outside user space; `ESRCH` when the process cannot be
    /// bound to the GPU; `ENOTSUPP` (524) for a queue type the kernel does not know;
    /// `ENOMEM`/`ENOSPC` when no queue slot or SDMA queue is left, `EBUSY` when no doorbell is.
    #[doc(alias = "AMDKFD_IOC_CREATE_QUEUE")]
    #[doc(alias = "hsaKmtCreateQueue")]
    pub fn create_queue(&self, spec: &QueueSpec) -> Result<Queue> {
        let ring = spec.ring.gpu_address(
            u64::from(spec.ring_size),
            4096,
            "the ring must be page aligned and ring_size bytes must lie in its BO",
        )?;
        let rptr = spec.read_pointer.gpu_address(
            8,
            8,
            "the read pointer must be 8-aligned and lie in its BO",
        )?;
        let wptr = spec.write_pointer.gpu_address(
            8,
            8,
            "the write pointer must be 8-aligned and lie in its BO",
        )?;
        let mut buffers = vec![
            spec.ring.bo.clone(),
            spec.read_pointer.bo.clone(),
            spec.write_pointer.bo.clone(),
        ];
        let mut raw = RawQueueSpec {
            gpu_id: spec.gpu_id,
            queue_type: spec.queue_type,
            percentage: spec.percentage,
            priority: spec.priority,
            ring_va: ring,
            ring_size: spec.ring_size,
            read_pointer_va: rptr,
            write_pointer_va: wptr,
            compute: None,
        };
        match (&spec.compute, spec.queue_type.is_compute()) {
            (Some(c), true) => {
                let eop = c.eop.gpu_address(
                    c.sizes.eop_buffer_size,
                    256,
                    "the EOP buffer must lie in its BO",
                )?;
                let ctx_save = c.ctx_save.gpu_address(
                    c.sizes.total_ctx_save_size(),
                    4096,
                    "the context save area must be page aligned and lie in its BO",
                )?;
                raw.compute = Some((eop, ctx_save, c.sizes));
                buffers.push(c.eop.bo.clone());
                buffers.push(c.ctx_save.bo.clone());
            }
            (None, true) => {
                return Err(Error::InvalidArgument {
                    ioctl: "CREATE_QUEUE",
                    reason: "a compute queue needs an EOP buffer and a context save area",
                });
            }
            (_, false) => {}
        }
        // SAFETY: every address of `raw` is GPU memory of a BO checked above to hold it; the
        // BOs go into the returned `Queue`, which keeps them alive until DESTROY_QUEUE.
        let mut queue = unsafe { self.create_queue_raw(&raw) }?;
        queue._buffers = buffers;
        Ok(queue)
    }

    /// `CREATE_QUEUE` over addresses: what [`Kfd::create_queue`] does once it checked its
    /// buffer objects, for rings and pointers in memory that is not one (a USERPTR view of a
    /// mirrored ring, an SVM range). The returned queue keeps nothing alive.
    ///
    /// # Errors
    /// As [`Kfd::create_queue`], without its argument checks.
    ///
    /// # Safety
    /// The ring (`ring_size` bytes), the read and write pointers (8 bytes each) and for a
    /// compute queue the EOP buffer and context save area must be memory of this process the
    /// GPU reaches at those addresses, and stay so until the queue is destroyed (dropped or
    /// closed): the GPU reads and writes them behind Rust's back for that long.
    #[doc(alias = "AMDKFD_IOC_CREATE_QUEUE")]
    pub unsafe fn create_queue_raw(&self, spec: &RawQueueSpec) -> Result<Queue> {
        self.check_owner("CREATE_QUEUE")?;
        let (queue_type, sdma_engine_id) = spec.queue_type.raw();
        if let QueueType::SdmaByEngine(_) = spec.queue_type {
            self.require_minor("KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID", 17)?;
        }
        let mut args = abi::kfd_ioctl_create_queue_args {
            ring_base_address: spec.ring_va,
            write_pointer_address: spec.write_pointer_va,
            read_pointer_address: spec.read_pointer_va,
            ring_size: spec.ring_size,
            gpu_id: spec.gpu_id.get(),
            queue_type,
            queue_percentage: spec.percentage,
            queue_priority: spec.priority,
            sdma_engine_id,
            ..Default::default()
        };
        if let Some((eop, ctx_save, sizes)) = spec.compute {
            args.eop_buffer_address = eop;
            args.eop_buffer_size = sizes.eop_buffer_size;
            args.ctx_save_restore_address = ctx_save;
            args.ctx_save_restore_size = sizes.cwsr_size;
            args.ctl_stack_size = sizes.ctl_stack_size;
        }
        let context = IoctlContext {
            gpu_id: Some(spec.gpu_id),
            range: Some((spec.ring_va, u64::from(spec.ring_size))),
            ..IoctlContext::default()
        };
        // SAFETY: the kernel only checks the addresses (`access_ok`, and the GPU mappings on
        // newer kernels) during the call; the caller vouches for the memory for the queue's
        // life.
        unsafe { self.call_with_pointers(abi::AMDKFD_IOC_CREATE_QUEUE, &mut args, context) }?;
        Ok(Queue {
            kfd: self.clone(),
            id: args.queue_id,
            gpu_id: spec.gpu_id.get(),
            queue_type: spec.queue_type,
            doorbell_offset: args.doorbell_offset,
            ring_va: spec.ring_va,
            ring_size: spec.ring_size,
            closed: false,
            _buffers: Vec::new(),
        })
    }

    /// Maps the per-process doorbell page of `gpu_id`: `ALLOC_MEMORY_OF_GPU(DOORBELL)` of
    /// the process's doorbell slice at GPU address `va` (as libhsakmt does), then `mmap` of
    /// `/dev/kfd` at the kernel's doorbell offset (`KFD_MMAP_TYPE_DOORBELL |
    /// KFD_MMAP_GPU_ID(gpu_id)`, which `kfd_mmap` sends to `kfd_doorbell_mmap`).
    /// `gfx_major` picks the doorbell size: 8 bytes from GFX 9 (SOC15), 4 before
    /// (`kfd_doorbell_process_slice`: 1024 doorbells, page aligned).
    ///
    /// # Errors
    /// The errors of [`Kfd::alloc_memory_of_gpu`] (`EINVAL` for a wrong slice size) and of
    /// the mapping ([`Error::Mmap`]).
    #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL")]
    pub fn map_doorbells(
        &self,
        gpu_id: impl Into<GpuId>,
        gfx_major: u32,
        va: u64,
    ) -> Result<Doorbells> {
        let gpu_id = gpu_id.into().get();
        let doorbell_size: usize = if gfx_major >= 9 { 8 } else { 4 };
        let slice = doorbell_size * 1024;
        let flags = AllocMemFlags::DOORBELL
            | AllocMemFlags::WRITABLE
            | AllocMemFlags::COHERENT
            | AllocMemFlags::NO_SUBSTITUTE;
        let bo = self.alloc_memory_of_gpu(gpu_id, va, slice as u64, flags)?;
        // Not the BO's `mmap_offset` (a DRM offset of the SG BO): `/dev/kfd` at the doorbell
        // type and the GPU id, as CREATE_QUEUE's `doorbell_offset` says without its low bits
        // (libhsakmt masks them off).
        let offset = KFD_MMAP_TYPE_DOORBELL | (u64::from(gpu_id) & 0xFFFF) << KFD_MMAP_GPU_ID_SHIFT;
        let ptr = sys::mmap_shared(self.inner.fd.as_fd(), offset, slice).map_err(|errno| {
            Error::Mmap {
                file: "/dev/kfd",
                offset,
                len: slice,
                errno,
            }
        })?;
        Ok(Doorbells {
            ptr,
            len: slice,
            doorbell_size,
            owner_pid: self.inner.owner_pid,
            bo,
        })
    }
}

impl Queue {
    /// The queue id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The GPU.
    pub fn gpu_id(&self) -> GpuId {
        GpuId(self.gpu_id)
    }
    /// The type.
    pub fn queue_type(&self) -> QueueType {
        self.queue_type
    }
    /// What CREATE_QUEUE returned in `doorbell_offset`: the doorbell page's mmap offset, and
    /// on SOC15 GPUs the doorbell's byte offset in it in the low bits.
    pub fn doorbell_offset(&self) -> u64 {
        self.doorbell_offset
    }
    /// The byte offset of this queue's doorbell in `doorbells` (libhsakmt's
    /// `get_doorbell_offset`: the low bits of `doorbell_offset` with 8-byte doorbells,
    /// `queue_id * 4` before).
    pub fn doorbell_in_page(&self, doorbells: &Doorbells) -> usize {
        if doorbells.doorbell_size == 8 {
            (self.doorbell_offset as usize) & (doorbells.len - 1)
        } else {
            self.id as usize * 4
        }
    }
    /// The ring's GPU address.
    pub fn ring_va(&self) -> u64 {
        self.ring_va
    }
    /// The ring size in bytes.
    pub fn ring_size(&self) -> u32 {
        self.ring_size
    }

    /// `UPDATE_QUEUE`: a new share of the GPU and priority (the ring stays).
    ///
    /// # Errors
    /// `EINVAL` for a percentage above 100 or a priority above 15; `EFAULT` when the kernel
    /// does not know the queue.
    #[doc(alias = "AMDKFD_IOC_UPDATE_QUEUE")]
    #[doc(alias = "hsaKmtUpdateQueue")]
    pub fn update_queue(&self, percentage: u32, priority: u32) -> Result<()> {
        let mut args = abi::kfd_ioctl_update_queue_args {
            ring_base_address: self.ring_va,
            queue_id: self.id,
            ring_size: self.ring_size,
            queue_percentage: percentage,
            queue_priority: priority,
        };
        self.kfd
            .call(abi::AMDKFD_IOC_UPDATE_QUEUE, &mut args, self.context())?;
        Ok(())
    }

    /// `SET_CU_MASK`: the compute units the queue may use, 32 per word (at most 1024 bits
    /// count).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty mask; from the kernel `EINVAL` for a non-compute
    /// queue or one it does not know (`EFAULT` on older kernels).
    #[doc(alias = "AMDKFD_IOC_SET_CU_MASK")]
    #[doc(alias = "hsaKmtSetQueueCUMask")]
    pub fn set_cu_mask(&self, mask: &[u32]) -> Result<()> {
        let bits = u32::try_from(mask.len())
            .ok()
            .and_then(|n| n.checked_mul(32))
            .filter(|&n| n > 0)
            .ok_or(Error::InvalidArgument {
                ioctl: "SET_CU_MASK",
                reason: "the mask must have between 1 and 2^27 words",
            })?;
        let mut args = abi::kfd_ioctl_set_cu_mask_args {
            queue_id: self.id,
            num_cu_mask: bits,
            cu_mask_ptr: mask.as_ptr() as u64,
        };
        // SAFETY: `cu_mask_ptr` is `mask`, `bits / 32` readable words for the call; the
        // kernel reads at most that many.
        unsafe {
            self.kfd
                .call_with_pointers(abi::AMDKFD_IOC_SET_CU_MASK, &mut args, self.context())
        }?;
        Ok(())
    }

    /// `GET_QUEUE_WAVE_STATE`: copies the control stack of a compute queue's saved waves into
    /// `ctl_stack` and returns the bytes used of the control stack and of the save area.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `ctl_stack` is shorter than the GPU's control stack;
    /// from the kernel `EINVAL` for a queue that is not a compute queue, has no CWSR area, or
    /// is unknown.
    #[doc(alias = "AMDKFD_IOC_GET_QUEUE_WAVE_STATE")]
    pub fn get_queue_wave_state(
        &self,
        ctl_stack: &mut [u8],
        sizes: &QueueSizes,
    ) -> Result<(u32, u32)> {
        if ctl_stack.len() < sizes.ctl_stack_size as usize {
            return Err(Error::InvalidArgument {
                ioctl: "GET_QUEUE_WAVE_STATE",
                reason: "the buffer is smaller than the control stack",
            });
        }
        let mut args = abi::kfd_ioctl_get_queue_wave_state_args {
            ctl_stack_address: ctl_stack.as_mut_ptr() as u64,
            queue_id: self.id,
            ..Default::default()
        };
        // SAFETY: the kernel writes at most the queue's `ctl_stack_size` bytes at
        // `ctl_stack_address`, which `ctl_stack` holds (checked above), borrowed mutably for
        // the call.
        unsafe {
            self.kfd.call_with_pointers(
                abi::AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
                &mut args,
                self.context(),
            )
        }?;
        Ok((args.ctl_stack_used_size, args.save_area_used_size))
    }

    /// `ALLOC_QUEUE_GWS`: gives the queue `num_gws` global wave sync entries (0 releases
    /// them); returns the first entry.
    ///
    /// # Errors
    /// `ENODEV` for a GPU without GWS (or with the hardware scheduler off); `EINVAL` for an
    /// unknown queue or one that has GWS already; `EBUSY` when the GWS are taken.
    #[doc(alias = "AMDKFD_IOC_ALLOC_QUEUE_GWS")]
    #[doc(alias = "hsaKmtAllocQueueGWS")]
    pub fn alloc_queue_gws(&self, num_gws: u32) -> Result<u32> {
        let mut args = abi::kfd_ioctl_alloc_queue_gws_args {
            queue_id: self.id,
            num_gws,
            ..Default::default()
        };
        self.kfd
            .call(abi::AMDKFD_IOC_ALLOC_QUEUE_GWS, &mut args, self.context())?;
        Ok(args.first_gws)
    }

    /// `DESTROY_QUEUE`, reporting what dropping would swallow; the buffers are released after.
    ///
    /// # Errors
    /// [`Error::Inherited`] in a forked child; `EINVAL` when the kernel does not know the
    /// queue; `ETIME`/`EIO` when the hardware did not let it go.
    #[doc(alias = "AMDKFD_IOC_DESTROY_QUEUE")]
    #[doc(alias = "hsaKmtDestroyQueue")]
    pub fn close(mut self) -> Result<()> {
        self.kfd.check_owner("DESTROY_QUEUE")?;
        self.closed = true;
        self.destroy()
    }

    fn destroy(&self) -> Result<()> {
        let mut args = abi::kfd_ioctl_destroy_queue_args {
            queue_id: self.id,
            pad: 0,
        };
        self.kfd
            .call(abi::AMDKFD_IOC_DESTROY_QUEUE, &mut args, self.context())?;
        Ok(())
    }

    fn context(&self) -> IoctlContext {
        IoctlContext {
            gpu_id: Some(crate::GpuId(self.gpu_id)),
            range: Some((self.ring_va, u64::from(self.ring_size))),
            ..IoctlContext::default()
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        if self.closed || !self.kfd.is_owner_process() {
            return;
        }
        // Errors are reported by `close`; the buffers are released after this either way, as
        // process teardown destroys a queue the kernel kept.
        let _ = self.destroy();
    }
}

/// The per-process doorbell page of one GPU, mapped from `/dev/kfd`; unmapped and freed on
/// drop. Queues ring their doorbell at [`Queue::doorbell_in_page`].
pub struct Doorbells {
    ptr: NonNull<u8>,
    len: usize,
    doorbell_size: usize,
    owner_pid: u32,
    bo: BufferObject,
}

impl fmt::Debug for Doorbells {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Doorbells")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("doorbell_size", &self.doorbell_size)
            .field("bo", &self.bo)
            .finish()
    }
}

// SAFETY: the page is device memory written only by volatile stores; nothing in it is tied to
// the creating thread.
unsafe impl Send for Doorbells {}
// SAFETY: every access through `&self` is a single volatile store.
unsafe impl Sync for Doorbells {}

impl Doorbells {
    /// The bytes of the slice.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the page is empty (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes per doorbell: 8 from GFX 9, 4 before.
    pub fn doorbell_size(&self) -> usize {
        self.doorbell_size
    }
    /// The doorbell BO.
    pub fn buffer_object(&self) -> &BufferObject {
        &self.bo
    }

    /// Rings the doorbell at byte `offset` with `value` (the queue's new write pointer), one
    /// volatile store of the doorbell's size (a 4-byte doorbell takes the low half).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an offset past the page or not aligned to the doorbell
    /// size; [`Error::Inherited`] in a forked child (the mapping is not inherited).
    pub fn ring(&self, offset: usize, value: u64) -> Result<()> {
        if sys::current_pid() != self.owner_pid {
            return Err(Error::Inherited {
                what: "doorbell page",
                owner_pid: self.owner_pid,
            });
        }
        let fits = offset
            .checked_add(self.doorbell_size)
            .is_some_and(|end| end <= self.len);
        if !fits || !offset.is_multiple_of(self.doorbell_size) {
            return Err(Error::InvalidArgument {
                ioctl: "doorbell",
                reason: "the doorbell offset is outside the page or misaligned",
            });
        }
        // SAFETY: `ptr + offset` lies in this value's live mapping (checked above) in this
        // process, aligned to the store's size; a volatile store is how device registers are
        // written.
        unsafe {
            let at = self.ptr.as_ptr().add(offset);
            if self.doorbell_size == 8 {
                at.cast::<u64>().write_volatile(value);
            } else {
                at.cast::<u32>().write_volatile(value as u32);
            }
        }
        Ok(())
    }
}

impl Drop for Doorbells {
    fn drop(&mut self) {
        if sys::current_pid() != self.owner_pid {
            return;
        }
        // SAFETY: `ptr`/`len` came from `mmap_shared` in this process and nothing borrows
        // them past `self`.
        unsafe { sys::munmap(self.ptr, self.len) }
    }
}
