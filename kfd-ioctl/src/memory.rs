//! [`Memory`]: a buffer object at one address for the CPU and the GPU, the way libhsakmt,
//! ROCr and tinygrad hand memory out.
//!
//! The GPU virtual address is managed per process by reserving it in the CPU address space:
//! every [`Memory`] owns a [`Reservation`] (an aligned `PROT_NONE` range of this process),
//! its buffer object is allocated at the reservation's address, and when the CPU can reach
//! the memory the BO's render-node mapping is placed `MAP_FIXED` over the reservation, at the
//! same address. One pointer is then valid on the CPU and on every GPU the memory is mapped
//! on, nothing else in the process can be given an address inside it, and two allocations
//! never share a GPU address. This is libhsakmt's scheme on 48-bit GPUs (`fmm.c`: the GPUVM
//! aperture covers the CPU's user address space, so VA is taken with `mmap`, and a
//! CPU-visible BO is mapped at its GPU address). The provider crate's regions are the same
//! reservation.
//!
//! Alignment ([`Memory::alignment`]): an allocation of 2 MiB or more starts on a 2 MiB
//! boundary, so the GPU maps it with 2 MiB fragments (a GFX9+ page-directory entry covers
//! 2 MiB; `amdgpu_vm_pt.c` uses the largest fragment the address and the physical memory
//! allow); smaller VRAM starts on 64 KiB, so that the page tables can use 64 KiB fragments
//! (a PTE's fragment field covers 2^n aligned pages) where the VRAM behind it is contiguous;
//! smaller system memory starts on a page.
//!
//! Release order on drop: the CPU mapping goes first (the range becomes reserved `PROT_NONE`
//! again), then the BO is unmapped from the GPUs and freed, then the reservation is released
//! — so the address is never reused while the GPU can still reach it.

use std::fmt;
use std::os::fd::AsFd;

use vm_memory::VolatileSlice;

use crate::GpuId;
use crate::abi::AllocMemFlags;
use crate::error::{Error, IoctlContext, Result};
use crate::mem::{Reservation, page_size};
use crate::{BufferObject, Kfd, sys, validate};

/// A buffer object at one address for the CPU and the GPU ([`Kfd::alloc_memory`]): GPU
/// memory a runtime hands out as a pointer.
///
/// When the memory is CPU-visible (GTT; VRAM with `PUBLIC`, on a large-BAR GPU or an APU)
/// [`Memory::as_volatile_slice`] reaches it at [`Memory::va`], the address the GPUs use;
/// device-only VRAM has the address reserved but no CPU mapping. Dropping it unmaps the CPU
/// view, unmaps the BO from its GPUs and frees it, then releases the address (module docs).
///
/// ```
/// # kfd_emu::supervisor::run_attached(
/// #     kfd_emu::model::Model::new(kfd_emu::model::ModelConfig::default()).unwrap(),
/// #     || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use kfd_ioctl::{Kfd, abi::AllocMemFlags, topology::Topology};
/// use kfd_ioctl::vm_memory::Bytes;
///
/// let kfd = Kfd::open()?;
/// let gpu = Topology::read()?.gpus().next().cloned().ok_or("no GPU")?;
/// let gpu_id = gpu.gpu_id().ok_or("no gpu_id")?;
/// kfd.acquire_vm(gpu_id, gpu.render_minor().ok_or("no render node")?)?;
/// let flags = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC;
/// let memory = kfd.alloc_memory(gpu_id, 64 << 20, flags, &[gpu_id])?;
/// assert_eq!(memory.va() % (2 << 20), 0);
/// let cpu = memory.as_volatile_slice()?;
/// cpu.write_slice(b"one address", 0)?;
/// // The CPU sees the BO at its GPU address.
/// assert_eq!(cpu.ptr_guard().as_ptr() as u64, memory.va());
/// # Ok(())
/// # }).unwrap().unwrap();
/// ```
pub struct Memory {
    // Field order is drop order, after `Drop::drop` took the CPU mapping away: the BO (its
    // GPU mappings, then the BO itself) goes before the address it lives at.
    bo: BufferObject,
    reservation: Reservation,
    cpu_visible: bool,
    /// The process that mapped it; a forked child does not inherit the CPU mapping.
    owner_pid: u32,
}

impl fmt::Debug for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memory")
            .field("va", &format_args!("{:#x}", self.va()))
            .field("cpu_visible", &self.cpu_visible)
            .field("bo", &self.bo)
            .finish()
    }
}

impl Memory {
    /// The GPU address of a new allocation of `size` bytes with `flags` is a multiple of this
    /// (module docs): 2 MiB from 2 MiB up, 64 KiB for smaller VRAM, a page otherwise.
    pub fn alignment(size: u64, flags: AllocMemFlags) -> usize {
        const TWO_MIB: usize = 2 << 20;
        if size >= TWO_MIB as u64 {
            TWO_MIB
        } else if flags.contains(AllocMemFlags::VRAM) {
            64 << 10
        } else {
            page_size()
        }
    }

    /// The address, the same for the CPU and the GPUs.
    pub fn va(&self) -> u64 {
        self.reservation.addr().as_ptr() as u64
    }

    /// The size in bytes (the request rounded up to pages, as the kernel makes it).
    pub fn size(&self) -> u64 {
        self.bo.size()
    }

    /// The GPU the memory was allocated on.
    pub fn gpu_id(&self) -> GpuId {
        self.bo.gpu_id()
    }

    /// Whether the CPU reaches the memory at [`Memory::va`].
    pub fn is_cpu_visible(&self) -> bool {
        self.cpu_visible
    }

    /// The buffer object, for the ioctls that take one (mapping it on more GPUs, export).
    pub fn buffer_object(&self) -> &BufferObject {
        &self.bo
    }

    /// The memory as the CPU sees it, at [`Memory::va`]: memory the GPUs may write at any
    /// time, reached through volatile accesses ([`vm_memory::Bytes`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for device-only memory (VRAM without `PUBLIC`);
    /// [`Error::Inherited`] in a forked child, which does not have the mapping.
    pub fn as_volatile_slice(&self) -> Result<VolatileSlice<'_>> {
        if !self.cpu_visible {
            return Err(Error::InvalidArgument {
                ioctl: "mmap",
                reason: "device-only memory (VRAM without PUBLIC) has no CPU mapping",
            });
        }
        if sys::current_pid() != self.owner_pid {
            return Err(Error::Inherited {
                what: "CPU mapping",
                owner_pid: self.owner_pid,
            });
        }
        let len = usize::try_from(self.size()).map_err(|_| Error::InvalidArgument {
            ioctl: "mmap",
            reason: "buffer object larger than the address space",
        })?;
        // SAFETY: the first `len` bytes of the reservation are the BO's shared mapping
        // (placed in `Kfd::alloc_memory`, removed only in `drop`), valid while `self` is
        // borrowed, in this process (checked). Safe code reaches it only through volatile
        // accesses, which tolerate the GPU writing concurrently.
        Ok(unsafe { VolatileSlice::new(self.reservation.addr().as_ptr(), len) })
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // A forked child has no CPU mapping there (MADV_DONTFORK) and its BO drop issues no
        // ioctl; its copy of the reservation is released with the field.
        if self.cpu_visible && sys::current_pid() == self.owner_pid {
            let len = self.bo.size() as usize;
            // SAFETY: the range is our reservation's; the only views into it are the
            // `VolatileSlice`s borrowed from `self`, which cannot outlive this call. Errors
            // cannot be reported from drop; the reservation's munmap removes the mapping
            // anyway, after the BO is freed.
            let _ = unsafe { self.reservation.unmap_to_reserved(0, len) };
        }
    }
}

impl Kfd {
    /// Allocates `size` bytes of VRAM or GTT memory on `gpu_id` at an address this process
    /// reserves, maps it on `gpus` (none, or any GPUs that may reach it, `gpu_id` among them
    /// usually), and, when the CPU can reach it, maps it for the CPU at the same address:
    /// the one-address allocation a runtime hands out ([`Memory`]).
    ///
    /// `flags` holds `VRAM` or `GTT` and any modifiers; `PUBLIC` VRAM (large BAR) and GTT are
    /// CPU-visible. [`Kfd::alloc_memory_of_gpu`] stays the way to put a BO at an address of
    /// the caller's choosing.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a domain other than VRAM or GTT;
    /// [`Error::Rejected`] for a size of 0, or an address the reservation got outside a
    /// GPU's GPUVM aperture (`ENOMEM`); [`Error::Mmap`] when the address cannot be reserved
    /// or the BO not mapped there for the CPU; [`Error::NotAcquired`] for a CPU-visible BO
    /// on a GPU whose VM was not acquired through this handle; then the errors of
    /// [`Kfd::alloc_memory_of_gpu`] and [`Kfd::map_memory_to_gpu`]. Nothing stays behind
    /// on failure.
    #[doc(alias = "hsaKmtAllocMemory")]
    #[doc(alias = "hsaKmtMapMemoryToGPUNodes")]
    pub fn alloc_memory(
        &self,
        gpu_id: impl Into<GpuId>,
        size: u64,
        flags: AllocMemFlags,
        gpus: &[impl Into<GpuId> + Copy],
    ) -> Result<Memory> {
        let gpu_id = gpu_id.into().get();
        let gpus: Vec<u32> = gpus.iter().map(|&g| g.into().get()).collect();
        let gpus = &gpus[..];
        let context = IoctlContext {
            gpu_id: Some(GpuId(gpu_id)),
            range: Some((0, size)),
            handle: None,
            alloc_flags: Some(flags),
        };
        let domain = AllocMemFlags::VRAM | AllocMemFlags::GTT;
        let others = AllocMemFlags::USERPTR | AllocMemFlags::DOORBELL | AllocMemFlags::MMIO_REMAP;
        if !flags.intersects(domain) || flags.intersects(others) {
            return Err(Error::InvalidArgument {
                ioctl: "ALLOC_MEMORY_OF_GPU",
                reason: "alloc_memory takes VRAM or GTT memory; USERPTR, doorbell and MMIO \
                         pages go through alloc_userptr and alloc_memory_of_gpu",
            });
        }
        let page = page_size() as u64;
        // Size 0 and overflow: the kernel's EINVAL, with its reason, before reserving.
        let len = validate::alloc(context, 0, size, flags, 0, page)?;
        let len_usize = usize::try_from(len).map_err(|_| Error::Rejected {
            ioctl: "ALLOC_MEMORY_OF_GPU",
            context,
            errno: crate::Errno::NOMEM,
            reason: "larger than this process's address space",
        })?;
        let reservation =
            Reservation::new(len_usize, Memory::alignment(size, flags)).map_err(|errno| {
                Error::Mmap {
                    file: "an anonymous reservation",
                    offset: 0,
                    len: len_usize,
                    errno,
                }
            })?;
        let va = reservation.addr().as_ptr() as u64;
        let context = IoctlContext {
            range: Some((va, size)),
            ..context
        };
        for &gpu in std::iter::once(&gpu_id).chain(gpus) {
            let inside = self
                .gpuvm_aperture(gpu)?
                .is_some_and(|a| a.start <= va && va + len <= a.end);
            if !inside {
                return Err(Error::Rejected {
                    ioctl: "ALLOC_MEMORY_OF_GPU",
                    context: IoctlContext {
                        gpu_id: Some(GpuId(gpu)),
                        ..context
                    },
                    errno: crate::Errno::NOMEM,
                    reason: "the address reserved for it lies outside the GPU's GPUVM \
                             aperture (or the process has no such GPU)",
                });
            }
        }
        // Declared after the reservation: on an error below the BO drops (unmapped from
        // the GPUs, freed) before the reservation.
        let bo = self.alloc_memory_of_gpu(gpu_id, va, size, flags)?;
        if !gpus.is_empty() {
            self.map_memory_to_gpu(&bo, gpus)?;
        }
        let cpu_visible = flags.contains(AllocMemFlags::GTT)
            || flags.contains(AllocMemFlags::VRAM | AllocMemFlags::PUBLIC);
        if cpu_visible {
            let render = self.render_fd(gpu_id).ok_or(Error::NotAcquired {
                gpu_id: crate::GpuId(gpu_id),
            })?;
            let offset = bo.mmap_offset().unwrap_or(0);
            let mmap_error = |errno| Error::Mmap {
                file: "the render node",
                offset,
                len: len_usize,
                errno,
            };
            // SAFETY: the range is the reservation made above, owned here, with nothing
            // referencing it; the BO's mapping replaces the PROT_NONE reservation.
            unsafe { reservation.map_fixed(0, len_usize, render.as_fd(), offset) }
                .map_err(mmap_error)?;
            // As the kernel does for its own BO mappings: a forked child gets none.
            reservation.dont_fork(0, len_usize).map_err(mmap_error)?;
        }
        Ok(Memory {
            bo,
            reservation,
            cpu_visible,
            owner_pid: self.inner.owner_pid,
        })
    }
}
