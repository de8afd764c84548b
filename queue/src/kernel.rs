//! Kernels without a code object loader: a [`Kernel`] places a kernel descriptor and its
//! machine code in an executable GTT buffer object mapped on one GPU, with a ring of
//! kernel-argument slots beside them, and [`AqlQueue::dispatch`] launches it with a checked
//! [`KernelDispatch`] packet.
//!
//! What a loader does, done by hand (ROCr 5.2.3 `amd::hsa::loader` and `ExecutableImpl`;
//! AMDGPUUsage "Kernel Descriptor"): the code goes into memory the GPU may execute
//! (`KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE`, which becomes the page tables' executable bit in
//! `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`), 256-byte aligned; the descriptor, 64-byte
//! aligned, gets `KERNEL_CODE_ENTRY_BYTE_OFFSET` filled in as the linker's relocation would
//! (here the code follows the descriptor at [`CODE_OFFSET`]); the kernarg segment is
//! 16-byte aligned memory the GPU reads (ROCr's kernarg pool is system memory too) and must
//! not change until the dispatch that reads it completed, which the slot ring leaves to the
//! caller: at most `slots` dispatches of one [`Kernel`] in flight.
//!
//! The bytes of the descriptor and the code are the caller's (e.g. `kfd_gfx9::asm`); this
//! module knows no ISA.

use std::sync::Arc;

use kfd_ioctl::abi::AllocMemFlags;
use kfd_ioctl::{BufferObject, GpuId, OwnedCpuMapping};
use vm_memory::Bytes;

use crate::aql::{AqlQueue, KernelDispatch};
use crate::error::{Error, KernelError, Result};
use crate::sdma::QueueContext;

/// A kernel descriptor's size.
pub const DESCRIPTOR_BYTES: usize = 64;
/// Where the code starts in a [`Kernel`]'s buffer: after the descriptor, 256-byte aligned.
pub const CODE_OFFSET: u64 = 256;
/// A kernarg slot's alignment (HSA: 16 bytes; 64 keeps each slot on its own cache line).
pub const KERNARG_ALIGN: u64 = 64;
/// The most work-items of a workgroup (HSA's and every GCN/CDNA GPU's 1024).
pub const MAX_WORKGROUP_ITEMS: u64 = 1024;

impl KernelDispatch {
    /// Checks what the packet processor refuses (HSA: a zero size, a workgroup of more than
    /// 1024 work-items) and the kernel object.
    ///
    /// # Errors
    /// [`KernelError::ZeroSize`], [`KernelError::WorkgroupTooLarge`],
    /// [`KernelError::NoKernelObject`].
    pub fn check(&self) -> Result<(), KernelError> {
        if self.grid_size.contains(&0) || self.workgroup_size.contains(&0) {
            return Err(KernelError::ZeroSize);
        }
        let items: u64 = self.workgroup_size.iter().map(|&w| u64::from(w)).product();
        if items > MAX_WORKGROUP_ITEMS {
            return Err(KernelError::WorkgroupTooLarge(items));
        }
        if self.kernel_object == 0 {
            return Err(KernelError::NoKernelObject);
        }
        Ok(())
    }
}

/// A kernel placed for one GPU: descriptor at the start of an executable GTT buffer object,
/// code at [`CODE_OFFSET`], then `slots` kernarg slots of `slot_bytes` each.
#[derive(Debug)]
pub struct Kernel {
    memory: OwnedCpuMapping,
    kernargs_at: u64,
    slot_bytes: u64,
    slots: u64,
    next: u64,
    gpu_id: GpuId,
}

impl Kernel {
    /// Places `descriptor` (its entry offset filled in) and `code` on `gpu_id`, with `slots`
    /// kernarg slots of `kernarg_bytes` each (rounded up to [`KERNARG_ALIGN`]).
    ///
    /// # Errors
    /// [`Error::Kernel`] for no code, no slot or more than 16 MiB; [`Error::UnknownGpu`]; the
    /// errors of the allocation, GPU mapping and CPU mapping.
    pub fn new(
        context: &Arc<QueueContext>,
        gpu_id: impl Into<GpuId>,
        descriptor: &[u8; DESCRIPTOR_BYTES],
        code: &[u8],
        kernarg_bytes: u64,
        slots: u64,
    ) -> Result<Kernel> {
        let gpu_id: GpuId = gpu_id.into();
        context.check_gpu(gpu_id)?;
        if code.is_empty() {
            return Err(KernelError::NoCode.into());
        }
        let slot_bytes = kernarg_bytes.max(1).next_multiple_of(KERNARG_ALIGN);
        if slots == 0 {
            return Err(KernelError::Kernargs {
                len: 0,
                slot: slot_bytes,
            }
            .into());
        }
        let kernargs_at = (CODE_OFFSET + code.len() as u64).next_multiple_of(KERNARG_ALIGN);
        let total = slot_bytes
            .checked_mul(slots)
            .and_then(|k| k.checked_add(kernargs_at))
            .filter(|&t| t <= 16 << 20)
            .ok_or(KernelError::TooLarge {
                bytes: kernargs_at.saturating_add(slot_bytes.saturating_mul(slots)),
            })?;
        let bo = context.alloc(
            gpu_id,
            total.next_multiple_of(4096),
            AllocMemFlags::GTT | AllocMemFlags::WRITABLE | AllocMemFlags::EXECUTABLE,
        )?;
        let memory = BufferObject::map_cpu_owned(bo)?;
        let m = memory.as_volatile_slice()?;
        let mut kd = *descriptor;
        // KERNEL_CODE_ENTRY_BYTE_OFFSET (bytes 16-23): from the descriptor to the code.
        kd[16..24].copy_from_slice(&(CODE_OFFSET as i64).to_le_bytes());
        m.write_slice(&kd, 0)?;
        m.write_slice(code, CODE_OFFSET as usize)?;
        Ok(Kernel {
            memory,
            kernargs_at,
            slot_bytes,
            slots,
            next: 0,
            gpu_id,
        })
    }

    /// The kernel descriptor's GPU address (a dispatch's `kernel_object`).
    pub fn descriptor_va(&self) -> u64 {
        self.memory.buffer_object().va()
    }

    /// The GPU the kernel is placed for.
    pub fn gpu_id(&self) -> GpuId {
        self.gpu_id
    }

    /// Writes `args` into the next kernarg slot (round robin over the slots) and returns its
    /// GPU address. The slot is reused `slots` calls later: the dispatch reading it must have
    /// completed by then.
    ///
    /// # Errors
    /// [`KernelError::Kernargs`] for arguments larger than a slot; a CPU mapping error.
    pub fn kernargs(&mut self, args: &[u8]) -> Result<u64> {
        if args.len() as u64 > self.slot_bytes {
            return Err(KernelError::Kernargs {
                len: args.len(),
                slot: self.slot_bytes,
            }
            .into());
        }
        let at = self.kernargs_at + (self.next % self.slots) * self.slot_bytes;
        self.next += 1;
        self.memory
            .as_volatile_slice()?
            .write_slice(args, at as usize)?;
        Ok(self.descriptor_va() + at)
    }

    /// The packet that runs this kernel over `grid` work-items in workgroups of `workgroup`
    /// with the arguments `args` (written into the next slot), decrementing `completion`.
    ///
    /// # Errors
    /// As [`Kernel::kernargs`].
    pub fn packet(
        &mut self,
        grid: [u32; 3],
        workgroup: [u16; 3],
        args: &[u8],
        completion: Option<&crate::Signal>,
    ) -> Result<KernelDispatch> {
        Ok(KernelDispatch {
            workgroup_size: workgroup,
            grid_size: grid,
            private_segment_size: 0,
            group_segment_size: 0,
            kernel_object: self.descriptor_va(),
            kernarg_address: self.kernargs(args)?,
            completion_signal: completion.map_or(0, crate::Signal::va),
        })
    }
}

impl AqlQueue {
    /// Submits a KERNEL_DISPATCH packet after [`KernelDispatch::check`]. Returns its index.
    ///
    /// # Errors
    /// [`Error::Kernel`] for a packet the packet processor would refuse; as
    /// [`AqlQueue::submit`].
    pub fn dispatch(&mut self, d: &KernelDispatch) -> Result<u64> {
        d.check()?;
        self.submit(&d.encode())
    }
}

impl From<KernelError> for Error {
    fn from(e: KernelError) -> Error {
        Error::Kernel(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatches_the_packet_processor_refuses_are_typed_errors() {
        let ok = KernelDispatch {
            workgroup_size: [256, 1, 1],
            grid_size: [1000, 1, 1],
            kernel_object: 0x1000,
            ..KernelDispatch::default()
        };
        assert_eq!(ok.check(), Ok(()));
        let zero = KernelDispatch {
            grid_size: [0, 1, 1],
            ..ok
        };
        assert_eq!(zero.check(), Err(KernelError::ZeroSize));
        let big = KernelDispatch {
            workgroup_size: [64, 32, 1],
            ..ok
        };
        assert_eq!(big.check(), Err(KernelError::WorkgroupTooLarge(2048)));
        let none = KernelDispatch {
            kernel_object: 0,
            ..ok
        };
        assert_eq!(none.check(), Err(KernelError::NoKernelObject));
    }
}
