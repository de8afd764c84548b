//! [`CpuMapping`], a CPU mapping of a buffer object.

use std::fmt;
use std::ptr::NonNull;

use vm_memory::{Bytes, VolatileSlice};

use crate::BufferObject;
use crate::error::{Error, Result};
use crate::sys;

/// A CPU mapping of a [`BufferObject`]; unmapped on drop, and cannot outlive the BO.
///
/// The memory is shared with the GPU, and with any other mapping of the BO, which may write it
/// at any time: it is reached through [`CpuMapping::as_volatile_slice`] (volatile copies, the
/// [`Bytes`] trait) or [`CpuMapping::read_slice`]/[`CpuMapping::write_slice`] (in `Bytes`'
/// argument order: buffer, then offset), never as a Rust slice from
/// safe code. [`CpuMapping::as_slice`] and [`CpuMapping::as_mut_slice`] are the unsafe way.
///
/// ```
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
/// cpu.read_slice(&mut back, 0)?;
/// assert_eq!(&back, b"ping");
/// # Ok(())
/// # }).unwrap().unwrap();
/// ```
///
/// [`Bytes`]: vm_memory::Bytes
pub struct CpuMapping<'bo> {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
    /// The process that mapped it; a forked child does not inherit the mapping.
    pub(crate) owner_pid: u32,
    pub(crate) _bo: std::marker::PhantomData<&'bo BufferObject>,
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

    /// Copies `data` into the mapping at `offset` (volatile writes). The arguments are in
    /// [`vm_memory::Bytes::write_slice`]'s order (buffer, then address), as on the
    /// [`VolatileSlice`] of [`CpuMapping::as_volatile_slice`].
    pub fn write_slice(&self, data: &[u8], offset: usize) -> Result<()> {
        self.check(offset, data.len())?;
        self.as_volatile_slice()?
            .write_slice(data, offset)
            .map_err(|_| self.out_of_range())
    }

    /// Copies `out.len()` bytes at `offset` out of the mapping (volatile reads), in
    /// [`vm_memory::Bytes::read_slice`]'s order.
    pub fn read_slice(&self, out: &mut [u8], offset: usize) -> Result<()> {
        self.check(offset, out.len())?;
        self.as_volatile_slice()?
            .read_slice(out, offset)
            .map_err(|_| self.out_of_range())
    }

    /// [`CpuMapping::write_slice`] with the offset first.
    #[deprecated(note = "use write_slice(data, offset): vm-memory's Bytes order")]
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.write_slice(data, offset)
    }

    /// [`CpuMapping::read_slice`] with the offset first.
    #[deprecated(note = "use read_slice(out, offset): vm-memory's Bytes order")]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.read_slice(out, offset)
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

/// A CPU mapping that owns (a share of) its buffer object: for holders that keep the BO and
/// its mapping together, such as a queue's pointers. Derefs to the [`CpuMapping`].
pub struct OwnedCpuMapping {
    // Unmapped before the BO goes (field order).
    map: CpuMapping<'static>,
    bo: std::sync::Arc<BufferObject>,
}

impl fmt::Debug for OwnedCpuMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedCpuMapping")
            .field("map", &self.map)
            .field("bo", &self.bo)
            .finish()
    }
}

impl OwnedCpuMapping {
    /// The buffer object.
    pub fn buffer_object(&self) -> &std::sync::Arc<BufferObject> {
        &self.bo
    }
}

impl std::ops::Deref for OwnedCpuMapping {
    type Target = CpuMapping<'static>;
    fn deref(&self) -> &CpuMapping<'static> {
        &self.map
    }
}

impl BufferObject {
    /// [`BufferObject::map_cpu`] for a shared BO: the mapping keeps the BO alive.
    ///
    /// # Errors
    /// As [`BufferObject::map_cpu`].
    #[doc(alias = "mmap")]
    pub fn map_cpu_owned(bo: std::sync::Arc<BufferObject>) -> Result<OwnedCpuMapping> {
        let borrowed = bo.map_cpu()?;
        let map = CpuMapping {
            ptr: borrowed.ptr,
            len: borrowed.len,
            owner_pid: borrowed.owner_pid,
            // The `'static` stands for "as long as `bo`", which the value holds and drops
            // after the mapping; the mapping is never handed out by value.
            _bo: std::marker::PhantomData,
        };
        // The unmap moves to `map`.
        std::mem::forget(borrowed);
        Ok(OwnedCpuMapping { map, bo })
    }
}
