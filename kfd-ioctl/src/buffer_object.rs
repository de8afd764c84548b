//! [`BufferObject`], the owner of a KFD buffer-object handle, and [`FreeError`].

use std::fmt;
use std::os::fd::AsFd;
use std::sync::{Mutex, PoisonError};

use crate::GpuId;
use crate::abi::{self, AllocMemFlags};
use crate::error::{Error, IoctlContext, Result};
use crate::{CpuMapping, Kfd, sys};

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
    pub(crate) kfd: Kfd,
    pub(crate) handle: u64,
    pub(crate) gpu_id: u32,
    pub(crate) va: u64,
    pub(crate) size: u64,
    pub(crate) flags: AllocMemFlags,
    /// `None` for imports: the kernel gives them no offset of their own.
    pub(crate) mmap_offset: Option<u64>,
    /// GPUs this BO is mapped on, in mapping order.
    pub(crate) mapped: Mutex<Vec<u32>>,
    pub(crate) freed: bool,
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
    pub fn gpu_id(&self) -> GpuId {
        GpuId(self.gpu_id)
    }
    /// The GPU virtual address the BO maps at.
    pub fn va(&self) -> u64 {
        self.va
    }
    /// The size in bytes, as the kernel made it: the requested size rounded up to whole
    /// pages (`PAGE_ALIGN` in `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`); for an
    /// `AQL_QUEUE_MEM` BO the GPU range it covers (twice its rounded half).
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
    pub fn mapped_gpus(&self) -> Vec<GpuId> {
        self.mapped_lock().iter().copied().map(GpuId).collect()
    }

    pub(crate) fn mapped_lock(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        self.mapped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Maps the BO into this process for CPU access, through the render node of its GPU
    /// (VRAM, GTT) or through `/dev/kfd` (doorbell, MMIO remap page).
    ///
    /// USERPTR memory is already the caller's; mapping it again is refused. The mapping is not
    /// inherited by a forked child (`MADV_DONTFORK`, as the kernel does for KFD BOs).
    ///
    /// # Errors
    /// [`Error::Inherited`] in a forked child; [`Error::InvalidArgument`] for a USERPTR BO, an
    /// imported one (it has no mmap offset) or one larger than the address space;
    /// [`Error::NotAcquired`] when the GPU's VM was not acquired through this handle;
    /// [`Error::Mmap`] with `mmap`'s or `madvise`'s errno (`EINVAL` for a BO the driver will
    /// not let the CPU map, such as VRAM outside a small BAR; `ENOMEM`).
    #[doc(alias = "mmap")]
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
                gpu_id: GpuId(self.gpu_id),
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
    pub(crate) fn release(&mut self) -> Result<()> {
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
    pub(crate) error: Error,
    /// Boxed: errors stay small, and this one is rare.
    pub(crate) bo: Box<BufferObject>,
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
