//! Execution: one wave's architectural state ([`Wave`]), the memory it reaches ([`Memory`]),
//! and [`step`], which fetches, decodes and executes one instruction ([`steps`]: a run of
//! them, from the code cache's plans).
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
mod plan;
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
    steps(wave, ctx, 1).result
}

/// What [`steps`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Instructions executed (the last, which may have failed, included).
    pub executed: usize,
    /// The address of the last instruction executed.
    pub pc: u64,
    /// The last instruction's outcome: [`Flow::Continue`] when the budget ran out.
    pub result: Result<Flow, ExecError>,
}

/// Runs `wave` instruction after instruction, as [`step`] does each, until one's outcome is
/// not [`Flow::Continue`] (an error, `s_endpgm`, a barrier, a message...) or `budget`
/// instructions have run (at least one runs).
///
/// The loop a dispatcher runs a wave's turn with: the instruction at `wave.pc` comes from the
/// [`CodeCache`] by reference, and what the cache planned when the instruction first ran
/// (`exec::plan`) decides how it runs: a lane-wise VALU operation of the fast path from its
/// plan (no copy of the instruction, no match on its form or operands; unless MODE's VSKIP
/// drops it), a SOP2/SOPK/SOP1/SOPC instruction by reference; anything else is copied and
/// executed ([`execute`]). Each computes what [`execute`] computes for it. ([`step`] is one
/// instruction of this.)
pub fn steps(wave: &mut Wave, ctx: &mut Ctx<'_>, budget: usize) -> Ran {
    let mut executed = 0;
    loop {
        let pc = wave.pc;
        executed += 1;
        let result = one(wave, ctx, pc);
        if executed >= budget || result != Ok(Flow::Continue) {
            return Ran {
                executed,
                pc,
                result,
            };
        }
    }
}

/// One instruction of [`steps`], at `pc` (= `wave.pc`).
#[inline(always)]
fn one(wave: &mut Wave, ctx: &mut Ctx<'_>, pc: u64) -> Result<Flow, ExecError> {
    // Branches keep the PC dword-aligned; a misaligned one (`s_setpc` of a bad address) is
    // decoded where it points, uncached (`CodeCache::fetch_miss`).
    let slot = if pc.is_multiple_of(4) {
        ctx.code.slot(pc)
    } else {
        None
    };
    let inst = match slot {
        Some(plan::Slot {
            inst: Some(inst),
            plan,
        }) => {
            wave.pc = pc.wrapping_add(4 * u64::from(inst.dwords));
            match plan {
                plan::Planning::Valu(p) => {
                    if !salu::vskipped(wave, inst) && valu::run_plan(p, wave, inst) {
                        return Ok(Flow::Continue);
                    }
                }
                plan::Planning::Scalar => return salu::execute_alu(wave, inst, pc),
                plan::Planning::Unknown => *plan = planning(inst),
                plan::Planning::None => {}
            }
            // One copy of the cached instruction (see `CodeCache::cached`).
            *inst
        }
        _ => {
            let inst = ctx.code.fetch_miss(ctx.mem, pc)?;
            wave.pc = pc.wrapping_add(4 * u64::from(inst.dwords));
            inst
        }
    };
    execute(wave, ctx, &inst, pc)
}

/// How `inst` will run from the cache: a VALU instruction's plan, or none.
fn planning(inst: &Inst) -> plan::Planning {
    match inst.op {
        Opcode::Vop1(_) | Opcode::Vop2(_) | Opcode::Vop3(_) => valu::planning(inst),
        Opcode::Sop2(_) | Opcode::Sopk(_) | Opcode::Sop1(_) | Opcode::Sopc(_) => {
            plan::Planning::Scalar
        }
        _ => plan::Planning::None,
    }
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
