//! Memory instructions: SMEM (scalar loads and stores), DS (LDS and its atomics, the
//! cross-lane `ds_swizzle`/`ds_permute`/`ds_bpermute`), FLAT / GLOBAL / SCRATCH, and MUBUF
//! / MTBUF (buffer resources) ("AMD Instinct MI200 ISA", chapters 7 "Scalar Memory Operations",
//! 9 "Vector Memory Buffer Instructions", 10 "Flat Memory Instructions" and 11 "Data Share
//! Operations", with each opcode's description in chapter 12's SMEM, DS, FLAT and MUBUF
//! tables).
//!
//! # Timing
//!
//! Every access completes before the instruction returns: loads have written their
//! registers, stores and atomics are visible to the next instruction and to other waves. So
//! `s_waitcnt` has nothing to wait for (the salu room treats it as a no-op) and the cache
//! controls (`s_dcache_*`, `buffer_wbinvl1*`, `buffer_wbl2`, `buffer_invl2`, the GLC/SLC/SCC
//! bits) have no effect: there is no cache between a wave and its [`Memory`](super::Memory).
//!
//! # Faults
//!
//! A global access the [`Memory`](super::Memory) refuses stops the wave with
//! [`ExecError::Memory`] carrying the instruction's address and the faulting one (retrying
//! an XNACK-replayable fault is the `Memory`'s business, inside its `read`/`write`/`atomic`).
//! Loads and returning atomics commit their registers only when every lane succeeded; stores
//! of lanes before the faulting one have happened, as on hardware where the wave halts with
//! part of its stores done.
//!
//! # Bulk access
//!
//! A whole-register load or store (byte, short, dword..dwordx4; not D16, atomics or loads to
//! LDS) of FLAT, GLOBAL or MUBUF whose enabled lanes form one block (EXEC's set bits
//! contiguous: a full wave, a partial wave's leading lanes) and whose lanes' global addresses
//! follow each other at the access size (lane *i + 1* right after lane *i*: ROCr's blit and
//! fill kernels, any unit-stride copy) goes to [`Memory`](super::Memory) as one access of the
//! whole run, split at pages (`access::bulk_load` / `bulk_store`), the registers filled from
//! or gathered into one buffer. For MUBUF every dword piece the per-lane path would move
//! must be in range and in line (a swizzled or strided V# that scatters them, or a lane past
//! NUM_RECORDS, takes the per-lane path). Anything else, and a bulk access that faults, runs
//! lane by lane as the guide defines it, so faults and partial stores are exactly the
//! per-lane ones (`tests/exec_mem_bulk.rs` holds random instructions to a per-lane model and
//! to the same instruction run one lane at a time). `benches/blit.rs` measures it on ROCr's
//! blit kernel.
//!
//! # Address spaces
//!
//! - Global: a GPU virtual address, through [`Memory`](super::Memory), split at 4 KiB pages.
//! - LDS ([`Ctx::lds`](super::Ctx::lds), the workgroup's allocation): gfx9 no longer clamps
//!   LDS addresses with M0 (LLVM initialises M0 before DS instructions only for targets
//!   before gfx9: `ldsRequiresM0Init`); an access beyond the allocation reads 0 and its
//!   writes are dropped (chapter 11, "LDS Access": out-of-range reads return 0, writes are
//!   discarded). The check is per dword: a `ds_read_b64` straddling the end returns its
//!   first dword and a zero — our choice where the guide does not say.
//! - Private (scratch), see [`scratch_addr`]: swizzled per lane in dwords, the layout the
//!   scratch buffer resource ROCr builds describes, so that MUBUF scratch access (through
//!   that V#) and FLAT/SCRATCH access (through FLAT_SCRATCH) reach the same bytes.

mod access;
mod ds;
mod flat;
mod format;
mod mubuf;
mod smem;

pub use access::scratch_addr;
pub use mubuf::BufferResource;
pub use smem::REALTIME_HZ;
pub(crate) use smem::realtime;

use super::wave::{Ctx, ExecError, Flow, Wave, unimplemented};
use crate::inst::Inst;
use crate::opcode::Opcode;

/// Executes one memory instruction found at `pc`.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    match inst.op {
        Opcode::Ds(op) if op.gws().is_some() => return ds::gws(w, ctx, inst, pc, op),
        Opcode::Smem(op) => smem::execute(w, ctx, inst, pc, op),
        Opcode::Ds(op) => ds::execute(w, ctx, inst, pc, op),
        Opcode::Flat(seg, op) => flat::execute(w, ctx, inst, pc, seg, op),
        Opcode::Mubuf(op) => mubuf::execute(w, ctx, inst, pc, op),
        Opcode::Mtbuf(op) => mubuf::execute_mtbuf(w, ctx, inst, pc, op),
        _ => Err(unimplemented(inst, pc)),
    }?;
    Ok(Flow::Continue)
}
