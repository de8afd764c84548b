//! The GPU-visible host ring: a [`HostMirror`] the chosen GPUs reach at the same addresses
//! as the CPU, through USERPTR buffer objects or an SVM range.

use std::ptr::NonNull;

use kfd_ioctl::abi::{
    AllocMemFlags, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
    KFD_IOCTL_SVM_ATTR_NO_ACCESS, KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, KFD_IOCTL_SVM_ATTR_SET_FLAGS,
    KFD_IOCTL_SVM_LOCATION_SYSMEM, SvmFlags, kfd_ioctl_svm_attribute,
};
use kfd_ioctl::{BufferObject, Kfd};

use crate::access::{GpuAccess, Right, check_unique, with_right};
use crate::error::{Error, Result, at_step};
use crate::host::{HostMirror, Mirrored};
use crate::pool::Granularity;

/// How the GPUs reach a [`GpuHostRing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostRingBacking {
    /// Three USERPTR buffer objects per right (one per view), each at the GPU VA equal to the
    /// CPU address of its view, mapped on the GPUs holding that right.
    UserPtr,
    /// One SVM range over the three views: preferred location system memory, access in
    /// place for the chosen GPUs (memfd pages are shared pages: they must not migrate).
    Svm,
}

/// An SVM range's access, revoked on drop.
#[derive(Debug)]
struct SvmAccess {
    kfd: Kfd,
    start: u64,
    size: u64,
    gpus: Vec<u32>,
}

impl Drop for SvmAccess {
    fn drop(&mut self) {
        let attrs: Vec<kfd_ioctl_svm_attribute> = self
            .gpus
            .iter()
            .map(|&gpu| kfd_ioctl_svm_attribute {
                r#type: KFD_IOCTL_SVM_ATTR_NO_ACCESS,
                value: gpu,
            })
            .collect();
        // SAFETY: the range is the ring's own views, still mapped (the mirror drops after
        // us); taking access away gives nothing new to anyone. Errors cannot be reported
        // from drop, and unmapping the views removes the range from the kernel anyway.
        let _ = unsafe { self.kfd.svm_set_attr(self.start, self.size, &attrs) };
    }
}

/// A host mirrored ring the chosen GPUs can reach, at the same addresses as the CPU: byte
/// `base + i` of the CPU is GPU VA `base + i`, so the GPU sees the same `[prev][base][next]`
/// aliasing.
///
/// Two ways in (see [`HostRingBacking`]):
/// * [`GpuHostRing::userptr`]: works everywhere KFD does, and gives true per-GPU read-only
///   rights: each right gets its own three buffer objects (without `WRITABLE` for readers),
///   mapped on its GPUs only — GPU VMs are per GPU, so the sets share the addresses without
///   overlapping.
/// * [`GpuHostRing::svm`]: one `AMDKFD_IOC_SVM` call through `kfd_ioctl`'s raw
///   [`svm_set_attr`](Kfd::svm_set_attr) (this crate does not depend on the `svm` crate).
///   An SVM range's `GPU_RO` flag holds for every GPU of the range, so SVM cannot give one GPU
///   read-only and another read-write: such rights are refused (use USERPTR).
///
/// Teardown: GPU access goes first (USERPTR buffer objects unmapped and freed, SVM access
/// revoked), then the host mapping.
#[derive(Debug)]
pub struct GpuHostRing {
    // Fields drop in declaration order: GPU access first, then the host memory.
    bos: Vec<BufferObject>,
    svm: Option<SvmAccess>,
    mirror: HostMirror,
    access: Vec<GpuAccess>,
}

impl GpuHostRing {
    /// Makes `mirror` reachable by the GPUs of `access` through USERPTR buffer objects
    /// (`COHERENT` when `granularity` is fine).
    ///
    /// On an error, everything made so far is released (and `mirror` with it).
    pub fn userptr(
        kfd: &Kfd,
        mirror: HostMirror,
        access: &[GpuAccess],
        granularity: Granularity,
    ) -> Result<GpuHostRing> {
        check_unique(access)?;
        let mut ring = GpuHostRing {
            bos: Vec::new(),
            svm: None,
            mirror,
            access: access.to_vec(),
        };
        let capacity = ring.mirror.capacity() as u64;
        let start = ring.mirror.prev().as_ptr() as u64;
        let mut flags = AllocMemFlags::empty();
        if granularity == Granularity::Fine {
            flags |= AllocMemFlags::COHERENT;
        }
        for right in [Right::ReadWrite, Right::Read] {
            let gpus = with_right(access, right);
            let Some(&owner) = gpus.first() else {
                continue;
            };
            let flags = match right {
                Right::ReadWrite => flags | AllocMemFlags::WRITABLE,
                Right::Read => flags,
            };
            for view in 0..3 {
                let va = start + view * capacity;
                // SAFETY: `[va, va + capacity)` is one view of `ring.mirror`, which the ring
                // owns and keeps mapped until after its buffer objects are freed (field
                // order). The crate hands this memory, which the GPUs now write too, out to
                // safe code only as raw pointers or `VolatileSlice`s; plain slices only from
                // `unsafe` accessors whose callers vouch for every agent.
                let bo = unsafe { kfd.alloc_userptr(owner, va, va, capacity, flags) }.map_err(
                    at_step("allocating a USERPTR buffer object over a ring view"),
                )?;
                kfd.map_memory_to_gpu(&bo, &gpus)
                    .map_err(at_step("mapping a ring view's USERPTR buffer object"))?;
                ring.bos.push(bo);
            }
        }
        Ok(ring)
    }

    /// Makes `mirror` reachable by the GPUs of `access` as one SVM range over its three
    /// views: preferred location system memory, `ACCESS_IN_PLACE` for each GPU of `access`,
    /// `NO_ACCESS` for the other GPUs of `all_gpus`, `HOST_ACCESS` (and `COHERENT` when fine
    /// grained), and `GPU_RO` when every GPU only reads.
    ///
    /// Rights that mix readers and writers are refused with [`Error::Access`]: `GPU_RO` is a
    /// property of the range, not of one GPU.
    pub fn svm(
        kfd: &Kfd,
        mirror: HostMirror,
        access: &[GpuAccess],
        all_gpus: &[u32],
        granularity: Granularity,
    ) -> Result<GpuHostRing> {
        check_unique(access)?;
        let readers = with_right(access, Right::Read);
        let writers = with_right(access, Right::ReadWrite);
        if !readers.is_empty() && !writers.is_empty() {
            return Err(Error::Access {
                reason: "an SVM range's GPU_RO holds for all its GPUs, so it cannot give one GPU read-only and another read-write access; use the USERPTR ring",
            });
        }
        let attr = |r#type, value| kfd_ioctl_svm_attribute { r#type, value };
        let mut attrs = vec![attr(
            KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            KFD_IOCTL_SVM_LOCATION_SYSMEM,
        )];
        attrs.extend(
            access
                .iter()
                .map(|a| attr(KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, a.gpu_id)),
        );
        attrs.extend(
            all_gpus
                .iter()
                .filter(|&&g| access.iter().all(|a| a.gpu_id != g))
                .map(|&g| attr(KFD_IOCTL_SVM_ATTR_NO_ACCESS, g)),
        );
        let mut set = SvmFlags::HOST_ACCESS;
        let mut clear = SvmFlags::empty();
        match granularity {
            Granularity::Fine => set |= SvmFlags::COHERENT,
            Granularity::Coarse => clear |= SvmFlags::COHERENT,
        }
        if writers.is_empty() {
            set |= SvmFlags::GPU_RO;
        } else {
            clear |= SvmFlags::GPU_RO;
        }
        attrs.push(attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, set.bits()));
        attrs.push(attr(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, clear.bits()));
        let start = mirror.prev().as_ptr() as u64;
        let size = 3 * mirror.capacity() as u64;
        // SAFETY: the range is the three views of `mirror`, which the ring owns and keeps
        // mapped until after the access is revoked (field order); its memory is only handed
        // out as raw pointers or `VolatileSlice`s to safe code (see `userptr`).
        unsafe { kfd.svm_set_attr(start, size, &attrs) }
            .map_err(at_step("registering the ring views as an SVM range"))?;
        Ok(GpuHostRing {
            bos: Vec::new(),
            svm: Some(SvmAccess {
                kfd: kfd.clone(),
                start,
                size,
                gpus: access.iter().map(|a| a.gpu_id).collect(),
            }),
            mirror,
            access: access.to_vec(),
        })
    }

    /// The GPU VA of the base view (the CPU address of [`Mirrored::base`]).
    pub fn gpu_base(&self) -> u64 {
        self.mirror.base().as_ptr() as u64
    }

    /// The host mapping.
    pub fn mirror(&self) -> &HostMirror {
        &self.mirror
    }

    /// The GPUs and their rights.
    pub fn access(&self) -> &[GpuAccess] {
        &self.access
    }

    /// USERPTR or SVM.
    pub fn backing(&self) -> HostRingBacking {
        match self.svm {
            Some(_) => HostRingBacking::Svm,
            None => HostRingBacking::UserPtr,
        }
    }

    /// The USERPTR buffer objects (read-write set first, one per view); empty for SVM.
    pub fn buffer_objects(&self) -> &[BufferObject] {
        &self.bos
    }
}

// SAFETY: the views are those of the owned `HostMirror`, which upholds the contract and
// stays mapped as long as the ring.
unsafe impl Mirrored for GpuHostRing {
    fn base(&self) -> NonNull<u8> {
        self.mirror.base()
    }
    fn capacity(&self) -> usize {
        self.mirror.capacity()
    }
    fn control(&self) -> Option<(NonNull<u8>, usize)> {
        self.mirror.control()
    }
}
