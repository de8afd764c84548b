//! The GPU-side view of memory: reads and writes through a GPU's page tables (its VM
//! mappings), as a kernel running on that GPU would see them. Only an emulator can offer this.

use std::fmt;

use rustix::io::Errno;

use super::Model;

/// Why a GPU access faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GpuFaultReason {
    /// The process has no KFD process in the model.
    NoProcess,
    /// The machine has no GPU with that id.
    UnknownGpu,
    /// No mapping covers the address (the PTE is not present).
    NotMapped,
    /// A write to a mapping without `WRITABLE`.
    ReadOnly,
    /// The memory behind the mapping could not be reached (a USERPTR page the process
    /// unmapped): the errno of the access.
    Backing(Errno),
}

impl fmt::Display for GpuFaultReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoProcess => f.write_str("no KFD process"),
            Self::UnknownGpu => f.write_str("no such GPU"),
            Self::NotMapped => f.write_str("not mapped"),
            Self::ReadOnly => f.write_str("write to a read-only mapping"),
            Self::Backing(errno) => write!(f, "backing memory unreachable: {errno}"),
        }
    }
}

/// A GPU VM fault: what the hardware would report (and KFD turn into a VM-fault event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("VM fault on GPU {gpu_id:#x} at {va:#x} ({access}): {reason}", access = if *.write { "write" } else { "read" })]
pub struct GpuFault {
    /// The GPU.
    pub gpu_id: u32,
    /// The first faulting address.
    pub va: u64,
    /// Whether the access was a write.
    pub write: bool,
    /// Why.
    pub reason: GpuFaultReason,
}

/// One piece of an access: `len` bytes at `offset` of backing `backing`.
struct Piece {
    backing: u64,
    offset: u64,
    len: usize,
}

impl Model {
    /// Reads `buf.len()` bytes at GPU VA `va` as GPU `gpu_id` sees them in process `tgid`'s
    /// VM. Faults when any byte is unmapped.
    pub fn gpu_read(
        &self,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        buf: &mut [u8],
    ) -> Result<(), GpuFault> {
        let st = self.lock();
        let pieces = self.translate(&st, tgid, gpu_id, va, buf.len(), false)?;
        let mut done = 0usize;
        let mut at = va;
        for p in pieces {
            st.backing_read(self, p.backing, p.offset, &mut buf[done..done + p.len])
                .map_err(|e| fault(gpu_id, at, false, GpuFaultReason::Backing(e)))?;
            done += p.len;
            at += p.len as u64;
        }
        Ok(())
    }

    /// Writes `buf` at GPU VA `va` as GPU `gpu_id` would in process `tgid`'s VM. Faults, before
    /// writing anything, when any byte is unmapped or mapped read-only.
    pub fn gpu_write(&self, tgid: i32, gpu_id: u32, va: u64, buf: &[u8]) -> Result<(), GpuFault> {
        let st = self.lock();
        let pieces = self.translate(&st, tgid, gpu_id, va, buf.len(), true)?;
        let mut done = 0usize;
        let mut at = va;
        for p in pieces {
            st.backing_write(self, p.backing, p.offset, &buf[done..done + p.len])
                .map_err(|e| fault(gpu_id, at, true, GpuFaultReason::Backing(e)))?;
            done += p.len;
            at += p.len as u64;
        }
        Ok(())
    }

    /// Walks the VM over `[va, va + len)`.
    fn translate(
        &self,
        st: &super::process::State,
        tgid: i32,
        gpu_id: u32,
        va: u64,
        len: usize,
        write: bool,
    ) -> Result<Vec<Piece>, GpuFault> {
        let process = st
            .procs
            .get(&tgid)
            .ok_or_else(|| fault(gpu_id, va, write, GpuFaultReason::NoProcess))?;
        let pdd = process
            .pdds
            .iter()
            .find(|p| p.gpu_id == gpu_id && gpu_id != 0)
            .ok_or_else(|| fault(gpu_id, va, write, GpuFaultReason::UnknownGpu))?;
        let mut pieces = Vec::new();
        let mut at = va;
        let mut left = len as u64;
        while left > 0 {
            let (start, m) = pdd
                .vm
                .lookup(at)
                .ok_or_else(|| fault(gpu_id, at, write, GpuFaultReason::NotMapped))?;
            if write && !m.writable {
                return Err(fault(gpu_id, at, write, GpuFaultReason::ReadOnly));
            }
            let chunk = (m.end - at).min(left);
            pieces.push(Piece {
                backing: m.backing,
                offset: m.offset + (at - start),
                len: chunk as usize,
            });
            at += chunk;
            left -= chunk;
        }
        Ok(pieces)
    }
}

fn fault(gpu_id: u32, va: u64, write: bool, reason: GpuFaultReason) -> GpuFault {
    GpuFault {
        gpu_id,
        va,
        write,
        reason,
    }
}
