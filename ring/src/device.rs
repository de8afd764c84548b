//! The device-local ring: one buffer object of a GPU pool at the middle of three GPU VAs,
//! exported as a dma-buf and imported at its neighbours — KFD ioctls only.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::{BufferObject, Kfd};

use crate::access::{GpuAccess, Right, check_unique, with_right};
use crate::capacity::{Granule, ring_capacity};
use crate::error::{Error, Result, at_step};
use crate::host::Mirrored;
use crate::pool::MemoryPool;
use crate::sys::Reservation;

/// What a GPU of a [`DeviceRing`] sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuView {
    /// All three views, `[prev][base][next]`.
    Mirrored,
    /// The base view only.
    ///
    /// A reader's: KFD marks every dma-buf import `WRITABLE`, so the only read-only mapping
    /// of the memory KFD can make is the original buffer object (allocated without
    /// `WRITABLE`), at the base. Rather than widen a reader's right to write, the neighbours
    /// are not mapped for it; it reads a record that crosses the end in two pieces.
    BaseOnly,
}

/// A device-local mirrored ring, built with KFD ioctls only (`shared/ref/kfd-abi.md` §7.1):
///
/// 1. Reserve `3 × capacity` of address space (`PROT_NONE`); its address `V` is the GPU VA
///    too, as libhsakmt places buffer objects, so GPU and CPU agree on addresses.
/// 2. `ALLOC_MEMORY_OF_GPU` of `capacity` bytes from the pool at `V + capacity` (the base).
/// 3. `EXPORT_DMABUF` it; `IMPORT_DMABUF` at `V` and `V + 2 × capacity`: on the same device
///    the imports are the same memory, not copies.
/// 4. `MAP_MEMORY_TO_GPU` on the chosen GPUs, by right (see below).
/// 5. For CPU access (a host-accessible pool: large-BAR `PUBLIC` VRAM), map the render node
///    at the original's mmap offset three times, at `V`, `V + capacity`, `V + 2 × capacity`:
///    the three CPU views alias as the GPU's do. (Imports have no mmap offset of their own
///    in KFD, and the three views are the same memory, so mapping the original's offset
///    three times is exactly the aliases' CPU mappings.)
///
/// Rights: writers get the full mirror. When there are readers, the original is allocated
/// without `WRITABLE` and mapped on them at the base only ([`GpuView::BaseOnly`]), and the
/// writers get a third import at the base instead of the original.
///
/// Teardown, in `shared/ref/kfd-abi.md` §7.1's order: CPU views back to the reservation,
/// imports unmapped and freed, the original unmapped and freed, the dma-buf closed, the
/// address range freed. A construction that fails part way tears down what it made in the
/// same order.
#[derive(Debug)]
pub struct DeviceRing {
    cpu_mapped: bool,
    /// A [`DeviceCpuView`] is live.
    cpu_taken: AtomicBool,
    // Fields drop in declaration order, after `Drop::drop` unmapped the CPU views.
    imports: Vec<BufferObject>,
    original: Option<BufferObject>,
    dmabuf: Option<OwnedFd>,
    reservation: Reservation,
    capacity: usize,
    pool: MemoryPool,
    access: Vec<GpuAccess>,
}

impl DeviceRing {
    /// Builds a ring of at least `min_capacity` bytes from `pool` (capacity rounded to the
    /// pool's granule and a power of two), reachable by the GPUs of `access`, with CPU views
    /// when `cpu_views` is set (the pool must then be host accessible).
    pub fn new(
        kfd: &Kfd,
        pool: &MemoryPool,
        min_capacity: usize,
        access: &[GpuAccess],
        cpu_views: bool,
    ) -> Result<DeviceRing> {
        check_unique(access)?;
        if cpu_views && !pool.host_accessible {
            return Err(Error::NoPool {
                gpu_id: pool.gpu_id,
                what: "host-accessible",
                reason: "CPU views need a host-accessible pool (large-BAR VRAM or system memory)",
            });
        }
        let capacity = ring_capacity(min_capacity, Granule::Bytes(pool.granule))?;
        let total = 3 * capacity;
        let reservation = Reservation::new(total, pool.granule).map_err(|errno| Error::Map {
            op: "reserve",
            addr: 0,
            len: total,
            errno,
        })?;
        let mut ring = DeviceRing {
            cpu_mapped: false,
            cpu_taken: AtomicBool::new(false),
            imports: Vec::new(),
            original: None,
            dmabuf: None,
            reservation,
            capacity,
            pool: pool.clone(),
            access: access.to_vec(),
        };
        let va = ring.reservation.addr().as_ptr() as u64;
        let cap = capacity as u64;
        let readers = with_right(access, Right::Read);
        let writers = with_right(access, Right::ReadWrite);
        let mut flags = pool.alloc_flags;
        flags.set(AllocMemFlags::WRITABLE, readers.is_empty());
        let original = kfd
            .alloc_memory_of_gpu(pool.gpu_id, va + cap, cap, flags)
            .map_err(at_step("allocating the ring's buffer object"))?;
        let original = ring.original.insert(original);
        let dmabuf = kfd
            .export_dmabuf(original, true)
            .map_err(at_step("exporting the ring's buffer object"))?;
        let dmabuf: &OwnedFd = ring.dmabuf.insert(dmabuf);
        if !writers.is_empty() {
            let views: &[u64] = if readers.is_empty() {
                &[0, 2]
            } else {
                &[0, 1, 2]
            };
            for &view in views {
                let import = kfd
                    .import_dmabuf(dmabuf.as_fd(), pool.gpu_id, va + view * cap)
                    .map_err(at_step("importing the ring's dma-buf at an alias"))?;
                kfd.map_memory_to_gpu(&import, &writers)
                    .map_err(at_step("mapping a ring alias on the writing GPUs"))?;
                ring.imports.push(import);
            }
        }
        let original = ring.original.as_ref().ok_or(Error::Access {
            reason: "internal: the original buffer object vanished",
        })?;
        let base_gpus = if readers.is_empty() {
            &writers
        } else {
            &readers
        };
        kfd.map_memory_to_gpu(original, base_gpus)
            .map_err(at_step("mapping the ring's base view"))?;
        if cpu_views {
            let render = kfd.render_fd(pool.gpu_id).ok_or(Error::Kfd {
                step: "mapping the ring for the CPU",
                source: kfd_ioctl::Error::NotAcquired {
                    gpu_id: kfd_ioctl::GpuId(pool.gpu_id),
                },
            })?;
            let offset = original.mmap_offset().ok_or(Error::Access {
                reason: "the ring's buffer object has no mmap offset",
            })?;
            ring.cpu_mapped = true;
            for view in 0..3 {
                // SAFETY: the reservation is the ring's own and nothing references it yet.
                unsafe {
                    ring.reservation
                        .map_fixed(view * capacity, capacity, render.as_fd(), offset)
                }
                .map_err(|errno| Error::Map {
                    op: "mmap of the render node",
                    addr: va as usize + view * capacity,
                    len: capacity,
                    errno,
                })?;
            }
        }
        Ok(ring)
    }

    /// The GPU VA of the base view; the neighbours are one capacity below and above.
    pub fn gpu_base(&self) -> u64 {
        self.reservation.addr().as_ptr() as u64 + self.capacity as u64
    }

    /// The capacity of one view.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The pool the memory came from.
    pub fn pool(&self) -> &MemoryPool {
        &self.pool
    }

    /// The GPUs and their rights.
    pub fn access(&self) -> &[GpuAccess] {
        &self.access
    }

    /// What `gpu_id` may do and which views it has; `None` for a GPU without access.
    pub fn gpu_view(&self, gpu_id: u32) -> Option<(Right, GpuView)> {
        let a = self.access.iter().find(|a| a.gpu_id == gpu_id)?;
        let view = match a.right {
            Right::ReadWrite => GpuView::Mirrored,
            Right::Read => GpuView::BaseOnly,
        };
        Some((a.right, view))
    }

    /// The CPU views, when the ring was made with them ([`Error::NoCpuViews`] else).
    ///
    /// One view exists at a time ([`Error::CpuViewTaken`] while another lives): a view is
    /// not `Copy` or `Clone`, and an [`SpscRing`](crate::SpscRing) takes it by value, so two
    /// rings can never be put on the same bytes.
    pub fn cpu(&self) -> Result<DeviceCpuView<'_>> {
        if !self.cpu_mapped {
            return Err(Error::NoCpuViews);
        }
        self.cpu_taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .map_err(|_| Error::CpuViewTaken)?;
        Ok(DeviceCpuView { ring: self })
    }

    /// The original buffer object (at the base), then the imports.
    pub fn buffer_objects(&self) -> impl Iterator<Item = &BufferObject> + '_ {
        self.original.iter().chain(self.imports.iter())
    }

    /// The dma-buf of the ring's memory.
    pub fn dmabuf(&self) -> Option<BorrowedFd<'_>> {
        self.dmabuf.as_ref().map(AsFd::as_fd)
    }
}

impl Drop for DeviceRing {
    fn drop(&mut self) {
        if self.cpu_mapped {
            // SAFETY: we are being dropped, so no `DeviceCpuView` (which borrows us) and no
            // reference into the views is live.
            let _ = unsafe {
                self.reservation
                    .unmap_to_reserved(0, self.reservation.len())
            };
        }
        // Then the fields: imports, original, dma-buf, reservation.
    }
}

/// The CPU side of a [`DeviceRing`]: its three CPU views, a [`Mirrored`] mapping.
///
/// The GPUs reach the same memory, so it is read and written through volatile accesses
/// ([`Mirrored::volatile`]). Only one view of a ring exists at a time
/// ([`DeviceRing::cpu`]); dropping it lets the next one be taken. It cannot be copied or
/// cloned, so two rings are never put on the same bytes:
///
/// ```compile_fail
/// fn two_rings(view: kfd_ring::DeviceCpuView<'_>) {
///     let copy = view.clone();
///     let _ = (kfd_ring::SpscRing::new(view), kfd_ring::SpscRing::new(copy));
/// }
/// ```
#[derive(Debug)]
pub struct DeviceCpuView<'r> {
    ring: &'r DeviceRing,
}

impl Drop for DeviceCpuView<'_> {
    fn drop(&mut self) {
        self.ring.cpu_taken.store(false, Ordering::Release);
    }
}

// SAFETY: the three views map the same render-node offset (the same memory) at consecutive
// capacities of the ring's reservation, read-write, and stay mapped while the ring (which
// this view borrows) lives; the capacity is a power-of-two multiple of the page size and the
// base is page aligned.
unsafe impl Mirrored for DeviceCpuView<'_> {
    fn base(&self) -> NonNull<u8> {
        // SAFETY: one capacity into the reservation.
        unsafe { self.ring.reservation.addr().add(self.ring.capacity) }
    }
    fn capacity(&self) -> usize {
        self.ring.capacity
    }
}
