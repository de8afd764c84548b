//! Execution: one wave's architectural state ([`Wave`]), the memory it reaches ([`Memory`]),
//! and [`step`], which fetches, decodes and executes one instruction.
//!
//! The state is the "AMD Instinct MI200 ISA" guide's chapter 3 ("Kernel State"): the program
//! counter, up to 102 SGPRs, VCC, EXEC, M0, SCC, the trap temporaries, FLAT_SCRATCH, MODE /
//! STATUS / TRAPSTS, and per lane 256 VGPRs and (gfx90a) 256 AGPRs, 64 lanes per wave. Each
//! encoding family executes in its own module — `salu` (SOP2, SOPK, SOP1, SOPC, SOPP),
//! `valu` (VOP1, VOP2, VOPC, VOP3, VOP3P), `mem` (SMEM, DS, FLAT/GLOBAL/SCRATCH, MUBUF, MTBUF) —
//! and this module holds what they share: operand reads and writes as the guide's operand
//! tables define them (section 3.6 and 4.x: inline constants by operand type, the literal,
//! 64-bit register pairs, VCC/EXEC halves, SCC as a source).
//!
//! What runs around a wave — the kernel descriptor, the ABI's initial registers, workgroups,
//! LDS allocation and `s_barrier` across waves — is the dispatcher's (next to this module, issue 18); whoever embeds
//! the interpreter (kfd-emu) supplies the [`Memory`] (the GPU's view of the process: faults
//! are its to decide) and reads a stopped wave's [`ExecError`] to report the queue error the
//! command processor would.

mod gfx11;
mod mem;
mod salu;
mod valu;
mod wave;

// The memory room's public pieces: the scratch layout, the buffer resource, the clock rate.
pub use mem::{BufferResource, REALTIME_HZ, scratch_addr};
// The scalar unit's state as other families read it: MODE's float modes and the VGPR
// indexing mode (`Wave::mode`, `Wave::gpr_idx`), and the hardware-register ids.
pub use salu::{Denorm, GprIdx, Mode, Round, hwreg};

// The shared state, from its own module (the families use it from there).
pub use wave::{
    Apertures, CodeCache, Ctx, ExecError, Fault, Flow, LANES, Memory, MessageRtn, SGPRS, Target,
    Ty, VGPRS, VSrc, VSrc64, Wave, float_const, mode_from_rsrc1,
};

use crate::inst::Inst;
use crate::opcode::Opcode;

/// Fetches, decodes and executes the instruction at `wave.pc`. Before the instruction runs,
/// `wave.pc` already points at the next one; branches overwrite it.
///
/// # Errors
///
/// The [`ExecError`] that stops the wave; the wave's state is as the failing instruction
/// found it, except `pc`, which points past it.
pub fn step(wave: &mut Wave, ctx: &mut Ctx<'_>) -> Result<Flow, ExecError> {
    let pc = wave.pc;
    // One copy of the cached instruction (see `CodeCache::cached`).
    let inst = match ctx.code.cached(pc) {
        Some(inst) => *inst,
        None => ctx.code.fetch_miss(ctx.mem, pc)?,
    };
    wave.pc = pc.wrapping_add(4 * u64::from(inst.dwords));
    execute(wave, ctx, &inst, pc)
}

/// Executes one decoded instruction found at `pc` (`wave.pc` is already the next one).
///
/// # Errors
///
/// As [`step`].
pub fn execute(
    wave: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    if salu::vskipped(wave, inst) {
        return Ok(Flow::Continue);
    }
    match inst.op {
        Opcode::Sop2(_) | Opcode::Sopk(_) | Opcode::Sop1(_) | Opcode::Sopc(_) | Opcode::Sopp(_) => {
            salu::execute(wave, ctx, inst, pc)
        }
        Opcode::Vop1(_)
        | Opcode::Vop2(_)
        | Opcode::Vopc(_)
        | Opcode::Vop3(_)
        | Opcode::Vop3p(_) => valu::execute(wave, ctx, inst, pc),
        Opcode::Smem(_)
        | Opcode::Ds(_)
        | Opcode::Flat(..)
        | Opcode::Mubuf(_)
        | Opcode::Mtbuf(_) => mem::execute(wave, ctx, inst, pc),
        Opcode::Gfx11(op) => gfx11::execute(wave, ctx, inst, pc, op),
    }
}
