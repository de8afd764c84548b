//! [`Kfd`], the safe handle on `/dev/kfd`, and its memory-side ioctls; the owning types of
//! what it hands out live in their own modules.

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{Mode, OFlags};
use rustix::ioctl::Opcode;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::GpuId;
use crate::abi::{self, AllocMemFlags, RuntimeEnableMode};
use crate::error::{Error, IoctlContext, Result, Version};
use crate::{
    Apertures, BufferObject, ClockCounters, DmabufInfo, FreeError, MemoryPolicy, SmiEvents,
    TileConfig,
};
use crate::{sys, validate};

/// The path of the KFD character device.
pub const KFD_DEVICE_PATH: &str = "/dev/kfd";

/// The render node of a GPU: `/dev/dri/renderD<minor>`.
pub fn render_node_path(drm_render_minor: u32) -> PathBuf {
    PathBuf::from(format!("/dev/dri/renderD{drm_render_minor}"))
}

pub(crate) struct Inner {
    pub(crate) fd: OwnedFd,
    version: Version,
    /// The process that opened the fd. KFD knows a process by its `mm`: a forked child that
    /// inherited the fd is not that process, and its ioctls on it fail with `EBADF`.
    pub(crate) owner_pid: u32,
    /// The render-node file handed to ACQUIRE_VM, per gpu_id. KFD keeps a reference to that
    /// file for the life of the process; keeping ours lets BOs be CPU-mapped through it.
    vms: Mutex<BTreeMap<u32, Arc<OwnedFd>>>,
    /// The GPUVM apertures of the process's GPUs, read once (they do not change).
    apertures: Mutex<Option<Vec<Apertures>>>,
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
/// # Errors every method shares
/// Besides those each method lists (the errnos of the kernel's handler in `kfd_chardev.c`):
/// [`Error::Unsupported`] when the running KFD lacks the ioctl; [`Error::Interrupted`] when
/// the kernel kept answering `EINTR` or `EAGAIN` past the retry bound; `EBADF` in a forked
/// child (KFD serves only the process that opened it); `EFAULT` when the kernel cannot copy
/// the arguments.
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
    pub(crate) inner: Arc<Inner>,
}

impl AsFd for Kfd {
    /// The `/dev/kfd` descriptor, for polling or passing it to code that takes any fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
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

impl Kfd {
    /// Opens `/dev/kfd` (`O_RDWR | O_CLOEXEC`) and reads the KFD version.
    ///
    /// # Errors
    /// [`Error::Open`] when `/dev/kfd` cannot be opened (`ENOENT` without the driver, `EACCES`
    /// without access to the device, `EPERM` for a 32-bit process, `ENOMEM`); then as
    /// [`Kfd::from_fd`].
    #[doc(alias = "hsaKmtOpenKFD")]
    #[doc(alias = "AMDKFD_IOC_GET_VERSION")]
    pub fn open() -> Result<Kfd> {
        let fd = open_device(Path::new(KFD_DEVICE_PATH))?;
        Kfd::from_fd(fd)
    }

    /// Wraps an already open `/dev/kfd` descriptor and reads the KFD version.
    ///
    /// # Errors
    /// [`Error::UnsupportedMajor`] for a KFD whose major version is not 1. The kernel's
    /// GET_VERSION cannot fail; on a descriptor that is not `/dev/kfd` the ioctl fails as that
    /// file's driver says (`ENOTTY` from most).
    #[doc(alias = "AMDKFD_IOC_GET_VERSION")]
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
                apertures: Mutex::new(None),
            }),
        }
    }

    /// The version read at open.
    pub fn version(&self) -> Version {
        self.inner.version
    }

    /// The `/dev/kfd` descriptor (also through [`AsFd`], for generic code).
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
    pub(crate) fn check_owner(&self, what: &'static str) -> Result<()> {
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
    ///
    /// # Errors
    /// Only the errors every method shares (see [`Kfd`]): the kernel's handler cannot fail.
    #[doc(alias = "AMDKFD_IOC_GET_VERSION")]
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
    pub(crate) fn require_nr(&self, opcode: Opcode) -> Result<()> {
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

    pub(crate) fn require_minor(&self, what: &'static str, needed_minor: u32) -> Result<()> {
        if needed_minor > self.inner.version.minor {
            return Err(Error::Unsupported {
                what,
                needed_minor,
                running: self.inner.version,
            });
        }
        Ok(())
    }

    /// Issues one ioctl with a pointer-free argument on `/dev/kfd` — after checking the running
    /// KFD has it — turning an errno into [`Error::Ioctl`].
    pub(crate) fn call<T: sys::PointerFree>(
        &self,
        opcode: Opcode,
        args: &mut T,
        context: IoctlContext,
    ) -> Result<i32> {
        // SAFETY: `T: PointerFree`: the kernel follows no address in `args`.
        unsafe { self.call_with_pointers(opcode, args, context) }
    }

    /// [`Kfd::call`] with an argument that holds addresses the kernel reads or writes through.
    ///
    /// # Safety
    /// As for [`sys::ioctl_with_pointers`]: every address in `args` the kernel follows for
    /// `opcode` is valid for that access, over the length the kernel uses, for the call.
    pub(crate) unsafe fn call_with_pointers<T: IntoBytes + FromBytes>(
        &self,
        opcode: Opcode,
        args: &mut T,
        context: IoctlContext,
    ) -> Result<i32> {
        self.require_nr(opcode)?;
        // SAFETY: the caller's guarantee, passed on.
        unsafe { sys::ioctl_with_pointers(self.inner.fd.as_fd(), opcode, args) }
            .map_err(|failure| ioctl_error(ioctl_name(opcode), context, failure))
    }

    /// The render-node file acquired for `gpu_id`, if any.
    pub fn render_fd(&self, gpu_id: impl Into<GpuId>) -> Option<Arc<OwnedFd>> {
        let gpu_id = gpu_id.into().get();
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
    ///
    /// # Errors
    /// [`Error::Open`] when the render node cannot be opened; `EINVAL` for a `gpu_id` the
    /// process does not have; `EBUSY` when the GPU's VM was already acquired through another
    /// render-node file; the errnos of the VM's initialisation (`ENOMEM`, `EINVAL`).
    #[doc(alias = "AMDKFD_IOC_ACQUIRE_VM")]
    pub fn acquire_vm(&self, gpu_id: impl Into<GpuId>, drm_render_minor: u32) -> Result<()> {
        let gpu_id = gpu_id.into().get();
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
    ///
    /// # Errors
    /// `ENOMEM` when the kernel cannot allocate its copy of the array; `EFAULT` when it cannot
    /// write ours (not expected: the array is allocated here).
    #[doc(alias = "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW")]
    pub fn get_process_apertures(&self) -> Result<Vec<Apertures>> {
        let count = self.process_apertures_into(&mut [])?;
        let mut raw = vec![abi::kfd_process_device_apertures::new_zeroed(); count];
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        let filled = self.process_apertures_into(&mut raw)?;
        raw.truncate(filled);
        Ok(raw.iter().map(Apertures::from).collect())
    }

    /// The GPUVM aperture of `gpu_id` (`None` for a GPU the process does not have), from
    /// [`Kfd::get_process_apertures`], asked once per handle.
    ///
    /// # Errors
    /// Those of [`Kfd::get_process_apertures`].
    pub fn gpuvm_aperture(&self, gpu_id: impl Into<GpuId>) -> Result<Option<std::ops::Range<u64>>> {
        let gpu_id = gpu_id.into().get();
        let mut cached = self
            .inner
            .apertures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cached.is_none() {
            *cached = Some(self.get_process_apertures()?);
        }
        Ok(cached
            .iter()
            .flatten()
            .find(|a| a.gpu_id == gpu_id)
            .map(|a| a.gpuvm.clone()))
    }

    /// One `GET_PROCESS_APERTURES_NEW` into `entries`: with none, the count query (how many
    /// GPUs the process has); else the fill of up to `entries.len()`. Returns the count.
    fn process_apertures_into(
        &self,
        entries: &mut [abi::kfd_process_device_apertures],
    ) -> Result<usize> {
        let mut args = abi::kfd_ioctl_get_process_apertures_new_args {
            kfd_process_device_apertures_ptr: entries.as_mut_ptr() as u64,
            num_of_nodes: u32::try_from(entries.len()).unwrap_or(u32::MAX),
            ..Default::default()
        };
        // SAFETY: the kernel writes at most `num_of_nodes` entries (it clamps the count to the
        // caller's, and with 0 writes none) to the pointer: `entries` has at least that many,
        // is exclusively borrowed across the call, and the entries are valid in any pattern.
        unsafe {
            self.call_with_pointers(
                abi::AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
                &mut args,
                IoctlContext::default(),
            )
        }?;
        Ok(args.num_of_nodes as usize)
    }

    /// `SET_MEMORY_POLICY` for one GPU (libhsakmt sets [`MemoryPolicy::default`] after
    /// `ACQUIRE_VM`).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for misc process flags before KFD 1.18; `EINVAL` for a `gpu_id`
    /// the process does not have or an alternate aperture the GPU's queue manager refuses; `ESRCH`
    /// when the process cannot be bound to the GPU.
    #[doc(alias = "AMDKFD_IOC_SET_MEMORY_POLICY")]
    pub fn set_memory_policy(&self, gpu_id: impl Into<GpuId>, policy: &MemoryPolicy) -> Result<()> {
        let gpu_id = gpu_id.into().get();
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
    ///
    /// The kernel rounds `size` up to whole pages (`PAGE_ALIGN` in
    /// `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`): a request of 4097 bytes is an 8 KiB BO,
    /// and [`BufferObject::size`] says so. `va` may be 0 (a BO that is never mapped on a GPU,
    /// only exported or CPU-mapped: [`Kfd::map_memory_to_gpu`] then refuses it); any other
    /// `va` must be 4 KiB aligned. The checks this makes before the call, and where the
    /// kernel makes them, are listed in [`crate::validate`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `USERPTR` in `flags`; [`Error::Unsupported`] for flags
    /// newer than the running KFD; [`Error::Rejected`] (`EINVAL`), before any syscall, for a
    /// size of 0, a `va` that is not 4 KiB aligned or whose range wraps, an MMIO_REMAP size
    /// other than one page; then `EINVAL` for a
    /// `gpu_id` the process does not have, host-visible VRAM (`PUBLIC`) on a GPU without a large
    /// BAR, or a DOORBELL or MMIO_REMAP size other than the process's doorbell slice or one page;
    /// `EADDRINUSE` when `[va, va + size)` overlaps an SVM range; `ENOMEM` when the memory (or the
    /// doorbell or MMIO page) is not available; `EFAULT` when the kernel runs out of handles; the
    /// errnos of binding the process to the GPU.
    #[doc(alias = "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU")]
    pub fn alloc_memory_of_gpu(
        &self,
        gpu_id: impl Into<GpuId>,
        va: u64,
        size: u64,
        flags: AllocMemFlags,
    ) -> Result<BufferObject> {
        let gpu_id = gpu_id.into().get();
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
    /// # Errors
    /// [`Error::Unsupported`] for flags newer than the running KFD; `EINVAL` for a size of 0, a
    /// `gpu_id` the process does not have, host-visible VRAM (`PUBLIC`) on a GPU without a large
    /// BAR, or a DOORBELL or MMIO_REMAP size other than the process's doorbell slice or one page;
    /// `EADDRINUSE` when `[va, va + size)` overlaps an SVM range; `ENOMEM` when the memory (or the
    /// doorbell or MMIO page) is not available; `EFAULT` when the kernel runs out of handles; the
    /// errnos of binding the process to the GPU. For USERPTR also `EADDRINUSE` when the CPU
    /// range is registered as SVM, and the errnos of reaching its pages (`EFAULT` when unmapped).
    ///
    /// # Safety
    /// `cpu_addr..cpu_addr + size` must be memory this process owns, mapped and not freed
    /// while the BO lives, and the caller accepts that the GPU reads and writes it behind
    /// Rust's back once the BO is mapped (no `&`/`&mut` to it may be live across GPU access).
    #[doc(alias = "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU")]
    #[doc(alias = "KFD_IOC_ALLOC_MEM_FLAGS_USERPTR")]
    pub unsafe fn alloc_userptr(
        &self,
        gpu_id: impl Into<GpuId>,
        va: u64,
        cpu_addr: u64,
        size: u64,
        flags: AllocMemFlags,
    ) -> Result<BufferObject> {
        let gpu_id = gpu_id.into().get();
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
        let context = IoctlContext {
            gpu_id: Some(GpuId(gpu_id)),
            range: Some((va, size)),
            handle: None,
            alloc_flags: Some(flags),
        };
        let bo_size = validate::alloc(
            context,
            va,
            size,
            flags,
            cpu_addr,
            crate::mem::page_size() as u64,
        )?;
        let mut args = abi::kfd_ioctl_alloc_memory_of_gpu_args {
            va_addr: va,
            size,
            handle: 0,
            mmap_offset: cpu_addr,
            gpu_id,
            flags: flags.bits(),
        };
        // SAFETY: the only address in the arguments is `cpu_addr` (in `mmap_offset`), and only
        // for USERPTR, which only the unsafe `alloc_userptr` passes, whose caller vouches for
        // the memory; otherwise `mmap_offset` is 0 and the kernel follows nothing.
        unsafe {
            self.call_with_pointers(abi::AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mut args, context)
        }?;
        Ok(BufferObject {
            kfd: self.clone(),
            handle: args.handle,
            gpu_id,
            va,
            size: bo_size,
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
    ///
    /// # Errors
    /// A [`FreeError`] holding the buffer object and: [`Error::Inherited`] in a forked child; the
    /// errors of [`Kfd::unmap_memory_from_gpu`] for the GPUs it is still mapped on; `EINVAL` for a
    /// handle the kernel does not know; `EPERM` for the event-signal BO (freed only at exit);
    /// `EBUSY` when the driver still counts GPU mappings of it.
    #[doc(alias = "AMDKFD_IOC_FREE_MEMORY_OF_GPU")]
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
    ///
    /// # Errors
    /// [`Error::Rejected`] (`EINVAL`), before any syscall, for a BO allocated at GPU address
    /// 0 (`kfd_mem_attach` refuses it) or at an unaligned one (an import);
    /// [`Error::InvalidArgument`] for an empty `gpus`; [`Error::DeviceList`] naming the GPU
    /// that failed and those done before it: `EINVAL` for a `gpu_id` the process does not have, the
    /// driver's errnos of the mapping (`ENOMEM`, `EINVAL` for a VA clash), or the bind's; `ENOMEM`
    /// for a handle the kernel does not know; `EFAULT` if the kernel cannot read the list. An
    /// interrupted wait for the page tables resumes from `n_success`.
    #[doc(alias = "AMDKFD_IOC_MAP_MEMORY_TO_GPU")]
    pub fn map_memory_to_gpu<G: Into<GpuId> + Copy>(
        &self,
        bo: &BufferObject,
        gpus: &[G],
    ) -> Result<()> {
        let gpus = raw_ids(gpus);
        let gpus = &gpus[..];
        let context = IoctlContext {
            range: Some((bo.va, bo.size)),
            ..IoctlContext::handle(bo.handle)
        };
        validate::map(context, bo.va, bo.size)?;
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
    ///
    /// # Errors
    /// As [`Kfd::map_memory_to_gpu`]: [`Error::InvalidArgument`] for an empty `gpus`,
    /// [`Error::DeviceList`] for a GPU that failed (`EINVAL` for one the process does not have or
    /// where the BO is not mapped), `ENOMEM` for an unknown handle, `EFAULT` for an unreadable
    /// list.
    #[doc(alias = "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU")]
    pub fn unmap_memory_from_gpu<G: Into<GpuId> + Copy>(
        &self,
        bo: &BufferObject,
        gpus: &[G],
    ) -> Result<()> {
        let gpus = raw_ids(gpus);
        let gpus = &gpus[..];
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
        // SAFETY: the kernel reads `n_devices` u32s at `device_ids_array_ptr`: `gpus` has that
        // many and is borrowed across the call.
        match unsafe { sys::ioctl_with_pointers(self.inner.fd.as_fd(), opcode, &mut args) } {
            Ok(_) => Ok(()),
            Err(failure) => {
                let errno = failure.errno;
                let done = (args.n_success as usize).min(gpus.len());
                match gpus.get(done) {
                    Some(&failed_gpu) => Err(Error::DeviceList {
                        ioctl: name,
                        handle,
                        done: gpus[..done].iter().copied().map(GpuId).collect(),
                        failed_gpu: GpuId(failed_gpu),
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
    ///
    /// # Errors
    /// `EINVAL` for an fd that is not a dma-buf exported by an amdgpu device (or when the
    /// caller may use no GPU), or for a `metadata` buffer smaller than the blob; `ENOMEM`;
    /// `EFAULT` when the kernel cannot write the metadata.
    #[doc(alias = "AMDKFD_IOC_GET_DMABUF_INFO")]
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
        // SAFETY: with a metadata buffer, the kernel writes at most `metadata_size` bytes to
        // `metadata_ptr` (it fails when the blob is larger): `len` is at most the length of
        // the exclusively borrowed `buf`, and bytes are valid in any pattern. Without one,
        // the pointer is null and the kernel follows nothing.
        unsafe {
            self.call_with_pointers(
                abi::AMDKFD_IOC_GET_DMABUF_INFO,
                &mut args,
                IoctlContext::default(),
            )
        }?;
        Ok(DmabufInfo {
            size: args.size,
            gpu_id: GpuId(args.gpu_id),
            flags: AllocMemFlags::from_bits_retain(args.flags),
            metadata_size: args.metadata_size,
        })
    }

    /// `IMPORT_DMABUF`: a new buffer object on `gpu_id` at GPU address `va` over the memory of
    /// `dmabuf` (the same memory, not a copy, when it was exported by the same device).
    ///
    /// Issues `GET_DMABUF_INFO` first: the kernel's import does not return the size, which the
    /// returned [`BufferObject`] carries.
    ///
    /// # Errors
    /// Those of [`Kfd::get_dmabuf_info`]; then `EINVAL` for a `gpu_id` the process does not
    /// have or a dma-buf the driver cannot import; `ENOMEM`; `EFAULT` when the kernel runs out of
    /// handles; the errnos of binding the process to the GPU.
    #[doc(alias = "AMDKFD_IOC_IMPORT_DMABUF")]
    pub fn import_dmabuf(
        &self,
        dmabuf: BorrowedFd<'_>,
        gpu_id: impl Into<GpuId>,
        va: u64,
    ) -> Result<BufferObject> {
        let gpu_id = gpu_id.into().get();
        let info = self.get_dmabuf_info(dmabuf, None)?;
        let mut args = abi::kfd_ioctl_import_dmabuf_args {
            va_addr: va,
            handle: 0,
            gpu_id,
            dmabuf_fd: dmabuf.as_raw_fd() as u32,
        };
        let context = IoctlContext {
            gpu_id: Some(GpuId(gpu_id)),
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
    ///
    /// # Errors
    /// `EINVAL` for a handle (or its GPU) the kernel does not know; the errnos of exporting
    /// and of making the fd (`EMFILE` when this process's fd table is full).
    #[doc(alias = "AMDKFD_IOC_EXPORT_DMABUF")]
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
    /// `SET_XNACK_MODE` with a negative value: whether XNACK (retry on GPU page faults) is on
    /// for this process.
    ///
    /// # Errors
    /// `EPERM` when the kernel has no SVM support.
    #[doc(alias = "AMDKFD_IOC_SET_XNACK_MODE")]
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
    ///
    /// # Errors
    /// `EBUSY` while the process has user queues; `EPERM` when a GPU of the process cannot run
    /// with XNACK on (or the kernel has no SVM support); `ENOMEM` when the memory reservation
    /// the switch changes cannot be made.
    #[doc(alias = "AMDKFD_IOC_SET_XNACK_MODE")]
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
    ///
    /// # Errors
    /// `EINVAL` for a `gpu_id` the process does not have.
    #[doc(alias = "AMDKFD_IOC_AVAILABLE_MEMORY")]
    pub fn available_memory(&self, gpu_id: impl Into<GpuId>) -> Result<u64> {
        let gpu_id = gpu_id.into().get();
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
    ///
    /// # Errors
    /// `EINVAL` for a `gpu_id` the process does not have; `ENOMEM`, or `EMFILE` when this
    /// process's fd table is full.
    #[doc(alias = "AMDKFD_IOC_SMI_EVENTS")]
    pub fn smi_events(&self, gpu_id: impl Into<GpuId>) -> Result<SmiEvents> {
        let gpu_id = gpu_id.into().get();
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
    ///
    /// # Errors
    /// `EBUSY` when enabling a runtime that is already enabled; `EEXIST` when enabling while a
    /// GPU of the process has queues; an interrupted wait for an attached debugger is retried.
    #[doc(alias = "AMDKFD_IOC_RUNTIME_ENABLE")]
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
    ///
    /// # Errors
    /// Only the errors every method shares (see [`Kfd`]): a `gpu_id` the process does not have
    /// reads a GPU counter of 0.
    #[doc(alias = "AMDKFD_IOC_GET_CLOCK_COUNTERS")]
    pub fn get_clock_counters(&self, gpu_id: impl Into<GpuId>) -> Result<ClockCounters> {
        let gpu_id = gpu_id.into().get();
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
    ///
    /// # Errors
    /// `EINVAL` for a `gpu_id` the process does not have; `EFAULT` when the kernel cannot write
    /// the arrays (not expected: they are the caller's slices).
    #[doc(alias = "AMDKFD_IOC_GET_TILE_CONFIG")]
    pub fn get_tile_config(
        &self,
        gpu_id: impl Into<GpuId>,
        tile_config: &mut [u32],
        macro_tile_config: &mut [u32],
    ) -> Result<TileConfig> {
        let gpu_id = gpu_id.into().get();
        let count = |s: &[u32]| u32::try_from(s.len()).unwrap_or(u32::MAX);
        let mut args = abi::kfd_ioctl_get_tile_config_args {
            tile_config_ptr: tile_config.as_mut_ptr() as u64,
            macro_tile_config_ptr: macro_tile_config.as_mut_ptr() as u64,
            num_tile_configs: count(tile_config),
            num_macro_tile_configs: count(macro_tile_config),
            gpu_id,
            ..Default::default()
        };
        // SAFETY: the kernel writes at most `num_tile_configs` and `num_macro_tile_configs`
        // u32s (it clamps each count to the caller's) to the two pointers: each is an
        // exclusively borrowed slice of at least that many, and u32s are valid in any pattern.
        unsafe {
            self.call_with_pointers(
                abi::AMDKFD_IOC_GET_TILE_CONFIG,
                &mut args,
                IoctlContext::gpu(gpu_id),
            )
        }?;
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
pub(crate) fn ioctl_error(
    ioctl: &'static str,
    context: IoctlContext,
    failure: sys::Failure,
) -> Error {
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

/// The raw ids of a GPU list, as the device-list ioctls take them: a `GpuId` slice and a `u32`
/// slice both convert.
fn raw_ids<G: Into<GpuId> + Copy>(gpus: &[G]) -> Vec<u32> {
    gpus.iter().map(|&g| g.into().get()).collect()
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use super::*;

    /// Generic code that takes any descriptor owner reaches the `/dev/kfd` fd.
    #[test]
    fn kfd_is_as_fd_of_the_descriptor_it_wraps() {
        fn raw_of(owner: &impl AsFd) -> i32 {
            owner.as_fd().as_raw_fd()
        }
        let (reader, _writer) = rustix::pipe::pipe().expect("pipe");
        let raw = reader.as_raw_fd();
        let kfd = Kfd::from_fd_assume_version(
            reader,
            Version {
                major: 1,
                minor: 23,
            },
        );
        assert_eq!(raw_of(&kfd), raw);
    }
}
