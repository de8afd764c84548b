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
/// The loop a dispatcher runs a wave's turn with: while the PC stays in one cached code
/// page, the instruction at `wave.pc` is its slot of the [`CodeCache`] page, by reference,
/// and what the cache planned when the instruction first ran (`exec::plan`) decides how it
/// runs: a lane-wise VALU operation from its plan (its operation's own code, the operands
/// resolved; unless MODE's VSKIP drops it), another VALU instruction by reference, the common
/// 32-bit scalar operations and compares from their plans, other SOP2/SOPK/SOP1/SOPC
/// instructions by reference, SOPP branches with their target resolved and `s_waitcnt`/
/// `s_nop` as the no-ops they are here. Anything else (memory, the rest of SOPP, `lds_direct`
/// sources, an instruction not decoded yet) is copied and executed ([`execute`]) with the
/// code cache released, so an `s_icache_inv` that empties it leaves no plan in use. Each
/// computes what [`execute`] computes for it. ([`step`] is one instruction of this.)
pub fn steps(wave: &mut Wave, ctx: &mut Ctx<'_>, budget: usize) -> Ran {
    let mut executed = 0;
    loop {
        let (pc, result) = match planned(wave, ctx.code, budget, &mut executed) {
            Exit::Ran(pc, result) => (pc, result),
            Exit::Other(pc) => {
                executed += 1;
                (pc, other(wave, ctx, pc))
            }
        };
        if executed >= budget || !matches!(result, Ok(Flow::Continue)) {
            return Ran {
                executed,
                pc,
                result,
            };
        }
    }
}

/// Where [`planned`] stopped.
enum Exit {
    /// The instruction at this address ran; its outcome is not [`Flow::Continue`] or the
    /// budget ran out.
    Ran(u64, Result<Flow, ExecError>),
    /// The instruction at this address (`wave.pc`, untouched) has no plan, or is not cached.
    Other(u64),
}

/// Runs planned instructions from the code cache's pages (see [`steps`]), counting them in
/// `executed`, until one's outcome is not [`Flow::Continue`], `budget` is reached, or the
/// instruction at `wave.pc` must take the per-step path ([`other`]).
#[inline(always)]
fn planned(wave: &mut Wave, code: &mut CodeCache, budget: usize, executed: &mut usize) -> Exit {
    // The PC is kept here and stored to the wave before anything that may read or change it
    // (an instruction run by reference) and when the run stops.
    let mut pc = wave.pc;
    loop {
        // Branches keep the PC dword-aligned; a misaligned one (`s_setpc` of a bad address) is
        // decoded where it points, uncached (`CodeCache::fetch_miss`).
        if !pc.is_multiple_of(4) {
            wave.pc = pc;
            return Exit::Other(pc);
        }
        let Some((base, slots)) = code.page(pc) else {
            wave.pc = pc;
            return Exit::Other(pc);
        };
        // Instructions of this page, until the PC leaves it. Only an instruction run by
        // reference can make the PC misaligned: a planned one's next PC and a planned
        // branch's target are dword-aligned.
        loop {
            let off = pc.wrapping_sub(base);
            if off >= 4096 {
                break;
            }
            let plan::Slot { inst, plan } = &mut slots[(off / 4) as usize];
            let Some(inst) = inst else {
                wave.pc = pc;
                return Exit::Other(pc);
            };
            if let plan::Planning::Unknown = plan {
                *plan = planning(inst, pc);
            }
            let mut next = pc.wrapping_add(4 * u64::from(inst.dwords));
            let result = match plan {
                plan::Planning::Valu(p) => {
                    if !salu::vskip(wave) {
                        valu::run_plan(p, wave, inst);
                    }
                    Ok(Flow::Continue)
                }
                &mut plan::Planning::Branch { cond, target } => {
                    if salu::taken(wave, cond) {
                        next = target;
                    }
                    Ok(Flow::Continue)
                }
                plan::Planning::Nop => Ok(Flow::Continue),
                // These never change the PC (neither planned nor on their fallback).
                &mut plan::Planning::Sop2 { op, d, a, b } => {
                    wave.pc = next;
                    salu::run_sop2(wave, (op, d, a, b), inst, pc)
                }
                &mut plan::Planning::Mov { d, a } => {
                    wave.pc = next;
                    salu::run_mov(wave, d, a, inst, pc)
                }
                &mut plan::Planning::Cmp { kind, signed, a, b } => {
                    wave.pc = next;
                    salu::run_cmp(wave, (kind, signed, a, b), inst, pc)
                }
                plan::Planning::Vector => {
                    wave.pc = next;
                    if salu::vskip(wave) {
                        Ok(Flow::Continue)
                    } else {
                        let r = valu::run_ref(wave, inst, pc);
                        next = wave.pc;
                        r
                    }
                }
                plan::Planning::Scalar => {
                    wave.pc = next;
                    let r = salu::execute_alu(wave, inst, pc);
                    next = wave.pc;
                    if !next.is_multiple_of(4) && matches!(r, Ok(Flow::Continue)) {
                        *executed += 1;
                        if *executed >= budget {
                            return Exit::Ran(pc, r);
                        }
                        return Exit::Other(next);
                    }
                    r
                }
                plan::Planning::None | plan::Planning::Unknown => {
                    wave.pc = pc;
                    return Exit::Other(pc);
                }
            };
            *executed += 1;
            if *executed >= budget || !matches!(result, Ok(Flow::Continue)) {
                wave.pc = next;
                return Exit::Ran(pc, result);
            }
            pc = next;
        }
    }
}

/// One instruction of [`steps`] on the per-step path, at `pc` (= `wave.pc`): copied from the
/// cache (or decoded, [`CodeCache::fetch_miss`]) and executed ([`execute`]).
#[inline(never)]
fn other(wave: &mut Wave, ctx: &mut Ctx<'_>, pc: u64) -> Result<Flow, ExecError> {
    let inst = match ctx.code.cached(pc) {
        // One copy of the cached instruction (see `CodeCache::cached`).
        Some(inst) => *inst,
        None => ctx.code.fetch_miss(ctx.mem, pc)?,
    };
    wave.pc = pc.wrapping_add(4 * u64::from(inst.dwords));
    execute(wave, ctx, &inst, pc)
}

/// How `inst` (at `pc`) will run from the cache (see [`steps`]).
fn planning(inst: &Inst, pc: u64) -> plan::Planning {
    match inst.op {
        Opcode::Vop1(_)
        | Opcode::Vop2(_)
        | Opcode::Vopc(_)
        | Opcode::Vop3(_)
        | Opcode::Vop3p(_) => valu::planning(inst),
        Opcode::Sop2(_) | Opcode::Sopk(_) | Opcode::Sop1(_) | Opcode::Sopc(_) | Opcode::Sopp(_) => {
            salu::planning(inst, pc)
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
