//! The scalar ALU and program control: SOP2, SOPK, SOP1, SOPC and SOPP ("AMD Instinct MI200
//! ISA" reference guide, chapter 4 "Program Flow Control", chapter 5 "Scalar ALU Operations"
//! and the per-opcode descriptions of chapter 12, sections 12.1 "SOP2 Instructions", 12.2
//! "SOPK", 12.3 "SOP1", 12.4 "SOPC" and 12.5 "SOPP"; the hardware registers MODE, STATUS and
//! TRAPSTS of chapter 3 "Kernel State" and the HW_REG ids of `s_getreg_b32`). Where the
//! MI200 guide's prose is loose (which source a tie selects, what a shifted-out bit does to
//! SCC), the comments quote the pseudo-code the CDNA3/CDNA4 guides give for the same gfx9
//! opcodes. gfx906 (the Vega 7nm guide) has the same scalar semantics: where gfx9 targets
//! differ it is in the vector ALU and memory, not here.
//!
//! SCC, per the guide's rules (chapter 5, "Scalar Condition Code (SCC)"): additions and
//! subtractions set it to the unsigned carry/borrow (`_u32`) or to signed overflow (`_i32`);
//! min/max to "S0 was chosen"; logic, shifts, bit-field extraction, bit counts, `s_wqm`,
//! `s_quadmask`, `s_abs`, `s_absdiff` and the saveexec family to "the result is not zero";
//! compares to their outcome. Everything else leaves it alone.
//!
//! Shift amounts and bit positions use only their low 5 bits (32-bit operands) or 6 bits
//! (64-bit), as the guide's `S1.u[4:0]` / `S1.u[5:0]` say. A 64-bit SGPR operand with an odd
//! first register names the even pair below ([`Wave::read_scalar64`]).
//!
//! # Program control, and what has no effect here
//!
//! - `s_waitcnt` has no effect: every memory access of this interpreter completes before its
//!   instruction returns (loads have written their registers, stores are visible to the
//!   [`Memory`]), so the counters `s_waitcnt` waits on are always zero. Nor have `s_nop`,
//!   `s_setkill 0`, `s_wakeup` (a sleeping wave has yielded already), `s_ttracedata` (no
//!   thread trace), `s_incperflevel`/`s_decperflevel` (no performance counters).
//! - `s_sendmsg` is [`Flow::Message`] with its SIMM16: the dispatcher hands the message to
//!   its observer (MSG_INTERRUPT raises the host interrupt with M0's data, MSG_GET_DOORBELL
//!   answers in EXEC: [`crate::dispatch`]); `s_sendmsghalt`'s message reaches nothing here,
//!   it halts like `s_sethalt 1`.
//! - `s_sleep` (but `s_sleep 0`, which does not sleep) and `s_sethalt 1` yield
//!   ([`Flow::Yield`]): the dispatcher runs the other waves and comes back, but a halted
//!   wave ([`Wave::halted`]: `s_sethalt 1`, `s_sendmsghalt`, or a trap handler returning
//!   with STATUS.HALT set) is held by the dispatcher until the dispatch is cancelled (no
//!   host resumes it here). `s_setkill 1` kills the wave:
//!   it ends as at `s_endpgm` ([`Flow::End`]); `s_barrier` is [`Flow::Barrier`].
//! - `s_trap` sets up the trap handler's inputs as the hardware does (TTMP0/1 = the trap
//!   id and the PC of the `s_trap`, STATUS.PRIV) and returns [`Flow::Trap`] with the wave
//!   at the `s_trap`: where the trap handler is (TBA) is the dispatcher's to know
//!   ([`crate::dispatch::Observer::trap`]), which moves the PC there or stops the wave.
//! - `s_icache_inv` drops the decoded instructions of the [`CodeCache`] it runs with, so
//!   code rewritten in memory is decoded again (other threads' caches are theirs).
//! - `s_cbranch_cdbgsys*`/`s_cbranch_cdbguser` branch on STATUS.COND_DBG_SYS/USER, which
//!   only a debugger sets: never taken unless a host sets those bits in [`Wave::hwreg`].
//! - `s_cbranch_g_fork`/`s_cbranch_i_fork`/`s_cbranch_join` keep the guide's branch stack
//!   (MODE.CSP and four SGPRs per level at `SGPR[CSP * 4]`); no compiler emits them.
//!   `s_setvskip` (or MODE.VSKIP through `s_setreg`) makes [`execute`](super::execute)
//!   drop every vector, LDS and vector-memory instruction until it is cleared.
//! - `s_getreg`/`s_setreg` reach [`Wave::hwreg`] by the ids of [`hwreg`]; only MODE and
//!   TRAPSTS take writes, and STATUS and IB_STS in the trap handler (STATUS.PRIV; the
//!   guide's `HwRegWriteMask`: the others are read-only to a wave outside the trap
//!   handler). [`Wave::mode`] and [`Wave::gpr_idx`] are what the
//!   vector ALU reads of them.
//!
//! # Plans
//!
//! [`planning`] says how an instruction runs from the code cache (`exec::plan`): the 32-bit
//! SOP2 operations, `s_mov_b32`, `s_movk_i32` and the 32-bit SOPC compares into an SGPR with
//! their operands resolved ([`run_sop2`], [`run_mov`], [`run_cmp`]: the same [`sop2_b32`] and
//! `compare` as the per-step path, which they fall back to for an operand they cannot read);
//! other SOP2/SOPK/SOP1/SOPC instructions by reference; the SOPP branches with their target
//! resolved ([`taken`]: the conditions of `sopp`) and the SOPP instructions with no effect
//! here; every other SOPP instruction on the per-step path (it may reach the code cache or end
//! the wave).
//!
//! # Not executed
//!
//! `s_rfe_restore_b64` (SOP2 43, trap handlers only) is not in the opcode table: it stops
//! the wave as [`ExecError::Decode`].
//!
//! [`Memory`]: super::Memory
//! [`CodeCache`]: super::CodeCache

use super::plan::{Cond, Planned, Planning};
use super::wave::{Ctx, ExecError, Flow, SGPRS, Ty, Wave, constant32, illegal, unimplemented};
use crate::inst::Inst;
use crate::opcode::{Opcode, Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp};
use crate::operand::Operand;

/// The hardware register ids of `s_getreg_b32`/`s_setreg_b32` (the guide's HW_REG table
/// under `s_getreg_b32`; LLVM's `hwreg(HW_REG_*)` names), indexes of [`Wave::hwreg`].
pub mod hwreg {
    /// MODE: float rounding and denormal modes, IEEE, DX10 clamp, exception enables,
    /// GPR_IDX_EN ([`Mode`](super::Mode)). Writable.
    pub const MODE: usize = 1;
    /// STATUS: SCC (bit 0), EXECZ (9) and VCCZ (10) read live; PRIV (5), HALT (13),
    /// USER_PRIO (4:3), COND_DBG_USER (20), COND_DBG_SYS (21). Read-only to `s_setreg`.
    pub const STATUS: usize = 2;
    /// TRAPSTS: exception status. Writable.
    pub const TRAPSTS: usize = 3;
    /// HW_ID: wave, SIMD, CU, SE, queue ids (the dispatcher's to fill). Read-only.
    pub const HW_ID: usize = 4;
    /// GPR_ALLOC: the wave's VGPR and SGPR allocation. Read-only.
    pub const GPR_ALLOC: usize = 5;
    /// LDS_ALLOC: the workgroup's LDS allocation. Read-only.
    pub const LDS_ALLOC: usize = 6;
    /// IB_STS: the outstanding-counter state (always zero here: accesses complete at once).
    pub const IB_STS: usize = 7;
    /// SH_MEM_BASES: bits 63:48 of the private (15:0) and shared (31:16) apertures, read
    /// from [`Wave::apertures`](crate::exec::Wave::apertures). Read-only.
    pub const SH_MEM_BASES: usize = 15;
    /// gfx11 FLAT_SCR_LO / FLAT_SCR_HI: FLAT_SCRATCH, which gfx10+ reaches only here (no
    /// SGPR code names it); the kernel's prolog writes it from the flat scratch init
    /// (AMDGPUUsage, "Flat Scratch", GFX10/GFX11). Writable.
    pub const FLAT_SCR_LO: usize = 20;
    /// gfx11 FLAT_SCR_HI.
    pub const FLAT_SCR_HI: usize = 21;
}

/// STATUS bits this module reads or writes (the guide, "STATUS register fields").
mod status {
    pub const SCC: u32 = 1 << 0;
    pub const USER_PRIO_SHIFT: u32 = 3;
    pub const PRIV: u32 = 1 << 5;
    pub const EXECZ: u32 = 1 << 9;
    pub const VCCZ: u32 = 1 << 10;
    pub const HALT: u32 = 1 << 13;
    pub const COND_DBG_USER: u32 = 1 << 20;
    pub const COND_DBG_SYS: u32 = 1 << 21;
}

/// MODE.GPR_IDX_EN (bit 27): VGPR indexing mode is on.
const MODE_GPR_IDX_EN: u32 = 1 << 27;
/// MODE.VSKIP (bit 28): vector instructions are not issued.
const MODE_VSKIP: u32 = 1 << 28;
/// MODE.CSP (bits 31:29): the depth of the fork/join branch stack.
const MODE_CSP_SHIFT: u32 = 29;

/// Whether MODE.VSKIP drops `inst` (the guide, `s_setvskip`: "no VOP*/M*BUF/MIMG/DS/FLAT
/// instructions are issued"; scalar instructions and SMEM still run).
pub(super) fn vskipped(w: &Wave, inst: &Inst) -> bool {
    w.hwreg[hwreg::MODE] & MODE_VSKIP != 0
        && !matches!(
            inst.op,
            Opcode::Sop2(_)
                | Opcode::Sopk(_)
                | Opcode::Sop1(_)
                | Opcode::Sopc(_)
                | Opcode::Sopp(_)
                | Opcode::Smem(_)
        )
}

/// Whether MODE.VSKIP is set: [`vskipped`] of a vector instruction.
#[inline(always)]
pub(super) fn vskip(w: &Wave) -> bool {
    w.hwreg[hwreg::MODE] & MODE_VSKIP != 0
}

/// `s_cbranch_i_fork`/`s_cbranch_g_fork` (the guide's pseudo-code): lanes of EXEC split by
/// `mask`; a uniform outcome is a plain branch, otherwise the side with fewer lanes runs
/// first (the pass side on a tie) and the other waits on the branch stack — 4 SGPRs at
/// `SGPR[MODE.CSP * 4]`, its EXEC in the low two and its PC in the high two — and MODE.CSP
/// grows.
fn fork(w: &mut Wave, mask: u64, target: u64) {
    let exec = w.exec;
    let (pass, fail) = (mask & exec, !mask & exec);
    if pass == exec {
        w.pc = target;
        return;
    }
    if fail == exec {
        return;
    }
    let mode = w.hwreg[hwreg::MODE];
    let csp = mode >> MODE_CSP_SHIFT & 7;
    // The pass side runs first unless it has more lanes (a tie runs it first).
    let (run, (saved_pc, saved_exec)) = if fail.count_ones() < pass.count_ones() {
        (fail, (target, pass))
    } else {
        (pass, (w.pc, fail))
    };
    let at = 4 * csp as usize;
    w.sgpr[at] = saved_exec as u32;
    w.sgpr[at + 1] = (saved_exec >> 32) as u32;
    w.sgpr[at + 2] = saved_pc as u32;
    w.sgpr[at + 3] = (saved_pc >> 32) as u32;
    w.hwreg[hwreg::MODE] = (mode & !(7 << MODE_CSP_SHIFT)) | ((csp + 1) & 7) << MODE_CSP_SHIFT;
    w.exec = run;
    if run == pass {
        w.pc = target;
    }
}

/// `s_cbranch_join`: the first arrival (MODE.CSP above the saved depth) pops the other
/// side's `{PC, EXEC}` and runs it; the second continues.
fn join(w: &mut Wave, saved_csp: u32) {
    let mode = w.hwreg[hwreg::MODE];
    let csp = mode >> MODE_CSP_SHIFT & 7;
    if csp == saved_csp {
        return;
    }
    let csp = csp.wrapping_sub(1) & 7;
    w.hwreg[hwreg::MODE] = (mode & !(7 << MODE_CSP_SHIFT)) | csp << MODE_CSP_SHIFT;
    let at = 4 * csp as usize;
    let reg = |i: usize| u64::from(w.sgpr[at + i]);
    w.exec = reg(0) | reg(1) << 32;
    w.pc = reg(2) | reg(3) << 32;
}

/// The MODE register ([`hwreg::MODE`]) as the vector ALU obeys it: the guide's "MODE
/// register fields" — FP_ROUND (3:0), FP_DENORM (7:4), DX10_CLAMP (8), IEEE (9),
/// GPR_IDX_EN (27). The dispatcher sets it from the kernel descriptor (FLOAT_MODE,
/// DX10_CLAMP, IEEE_MODE); `s_setreg_b32`/`s_setreg_imm32_b32` change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode(pub u32);

/// A rounding mode of FP_ROUND.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// 0: round to nearest, ties to even.
    NearestEven,
    /// 1: toward +infinity.
    PlusInf,
    /// 2: toward -infinity.
    MinusInf,
    /// 3: toward zero.
    Zero,
}

/// A denormal mode of FP_DENORM: whether denormal inputs and results are kept (else flushed
/// to zero, keeping the sign).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denorm {
    /// Bit 0: denormal inputs are kept.
    pub input: bool,
    /// Bit 1: denormal results are kept.
    pub output: bool,
}

impl Mode {
    fn round(self, shift: u32) -> Round {
        match self.0 >> shift & 3 {
            0 => Round::NearestEven,
            1 => Round::PlusInf,
            2 => Round::MinusInf,
            _ => Round::Zero,
        }
    }

    fn denorm(self, shift: u32) -> Denorm {
        Denorm {
            input: self.0 >> shift & 1 == 1,
            output: self.0 >> shift & 2 == 2,
        }
    }

    /// `FP_ROUND[1:0]`: the rounding of f32 operations.
    pub fn round_f32(self) -> Round {
        self.round(0)
    }

    /// `FP_ROUND[3:2]`: the rounding of f64 and f16 operations.
    pub fn round_f64_f16(self) -> Round {
        self.round(2)
    }

    /// `FP_DENORM[1:0]` (bits 5:4): f32 denormals.
    pub fn denorm_f32(self) -> Denorm {
        self.denorm(4)
    }

    /// `FP_DENORM[3:2]` (bits 7:6): f64 and f16 denormals.
    pub fn denorm_f64_f16(self) -> Denorm {
        self.denorm(6)
    }

    /// DX10_CLAMP (bit 8): clamping maps NaN to 0.
    pub fn dx10_clamp(self) -> bool {
        self.0 >> 8 & 1 == 1
    }

    /// IEEE (bit 9): min/max follow IEEE 754-2008 (quiet signalling NaNs).
    pub fn ieee(self) -> bool {
        self.0 >> 9 & 1 == 1
    }
}

/// VGPR indexing mode as `s_set_gpr_idx_on` sets it (the guide, `s_set_gpr_idx_on`,
/// `s_set_gpr_idx_mode`, `s_set_gpr_idx_idx`, `s_set_gpr_idx_off`): while MODE.GPR_IDX_EN
/// is set, each VALU operand that `mask` selects names VGPR `n + index` instead of `n`. The
/// state lives in MODE bit 27 and M0 (`index` = `M0[7:0]`, `mask` = `M0[15:12]`);
/// [`Wave::gpr_idx`] reads it. Applying it to VALU operands is the vector ALU's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GprIdx {
    /// The index added (`M0[7:0]`).
    pub index: u8,
    /// Which operands are indexed: [`GprIdx::SRC0`] | [`GprIdx::SRC1`] | [`GprIdx::SRC2`] |
    /// [`GprIdx::DST`] (`M0[15:12]`).
    pub mask: u8,
}

impl GprIdx {
    /// src0 is indexed.
    pub const SRC0: u8 = 1;
    /// src1 is indexed.
    pub const SRC1: u8 = 2;
    /// src2 is indexed.
    pub const SRC2: u8 = 4;
    /// The destination is indexed.
    pub const DST: u8 = 8;
}

impl Wave {
    /// The MODE register.
    pub fn mode(&self) -> Mode {
        Mode(self.hwreg[hwreg::MODE])
    }

    /// The VGPR indexing mode, when MODE.GPR_IDX_EN is set.
    pub fn gpr_idx(&self) -> Option<GprIdx> {
        (self.hwreg[hwreg::MODE] & MODE_GPR_IDX_EN != 0).then_some(GprIdx {
            index: self.m0 as u8,
            mask: (self.m0 >> 12 & 0xf) as u8,
        })
    }

    /// Whether the wave is halted: STATUS.HALT outside the trap handler (STATUS.PRIV clear;
    /// "HALT is ignored while PRIV == 1"). Only a host (a debugger, context save) resumes it.
    pub fn halted(&self) -> bool {
        let s = self.hwreg[hwreg::STATUS];
        s & status::HALT != 0 && s & status::PRIV == 0
    }

    /// Hardware register `id` as `s_getreg_b32` reads it: STATUS with the live SCC, EXECZ
    /// and VCCZ; SH_MEM_BASES from the apertures; the rest from [`Wave::hwreg`] (an id beyond
    /// it reads zero).
    pub fn read_hwreg(&self, id: usize) -> u32 {
        match id {
            hwreg::STATUS => {
                let live = status::SCC | status::EXECZ | status::VCCZ;
                (self.hwreg[id] & !live)
                    | if self.scc { status::SCC } else { 0 }
                    | if self.exec == 0 { status::EXECZ } else { 0 }
                    | if self.vcc & self.lane_mask() == 0 {
                        status::VCCZ
                    } else {
                        0
                    }
            }
            hwreg::SH_MEM_BASES => {
                (self.apertures.private_base >> 48) as u32
                    | ((self.apertures.shared_base >> 48) as u32) << 16
            }
            hwreg::FLAT_SCR_LO if self.target.is_gfx11() => self.flat_scratch as u32,
            hwreg::FLAT_SCR_HI if self.target.is_gfx11() => (self.flat_scratch >> 32) as u32,
            _ => self.hwreg.get(id).copied().unwrap_or(0),
        }
    }
}

/// The `hwreg(id, offset, size)` field of `s_getreg`/`s_setreg` (SIMM16: ID in 5:0, OFFSET in
/// 10:6, SIZE - 1 in 15:11): `(id, offset, mask of size bits at offset)`.
fn hwreg_field(simm16: i32) -> (usize, u32, u32) {
    let f = simm16 as u32 & 0xffff;
    let id = (f & 0x3f) as usize;
    let offset = f >> 6 & 0x1f;
    let size = (f >> 11 & 0x1f) + 1;
    let mask = (((1u64 << size) - 1) << offset) as u32;
    (id, offset, mask)
}

/// Executes one scalar instruction found at `pc`.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    match inst.op {
        Opcode::Sopp(op) => sopp(w, ctx, inst, pc, op),
        _ => execute_alu(w, inst, pc),
    }
}

/// Executes a SOP2, SOPK, SOP1 or SOPC instruction (the forms that reach neither memory nor
/// the code cache) as [`execute`] does; `exec::steps` runs them by reference from the cache.
pub(super) fn execute_alu(w: &mut Wave, inst: &Inst, pc: u64) -> Result<Flow, ExecError> {
    match inst.op {
        Opcode::Sop2(op) => sop2(w, inst, pc, op),
        Opcode::Sopk(op) => sopk(w, inst, pc, op),
        Opcode::Sop1(op) => sop1(w, inst, pc, op),
        Opcode::Sopc(op) => sopc(w, inst, pc, op),
        _ => Err(unimplemented(inst, pc)),
    }
}

/// How a scalar instruction runs from the code cache ([`crate::exec::plan`]): the common
/// 32-bit operations into an SGPR with their operands resolved (a 32-bit SOP2 operation,
/// `s_mov_b32`, `s_movk_i32`, the 32-bit SOPC compares), other SOP2/SOPK/SOP1/SOPC
/// instructions by reference ([`execute_alu`]), SOPP branches with their target and the SOPP
/// instructions that have no effect here; anything else on the per-step path. `pc` is the
/// instruction's address (a branch's target is relative to it).
pub(super) fn planning(inst: &Inst, pc: u64) -> Planning {
    let sgpr = |op: Operand| match op {
        Operand::Sgpr(n) if usize::from(n) < SGPRS => Some(n),
        _ => None,
    };
    match inst.op {
        Opcode::Sop2(op) if sop2_b32_op(op) => {
            match (
                sgpr(inst.dst[0]),
                plan_src(inst.src[0]),
                plan_src(inst.src[1]),
            ) {
                (Some(d), Some(a), Some(b)) => Planning::Sop2 { op, d, a, b },
                _ => Planning::Scalar,
            }
        }
        Opcode::Sop1(Sop1Op::SMovB32) => match (sgpr(inst.dst[0]), plan_src(inst.src[0])) {
            (Some(d), Some(a)) => Planning::Mov { d, a },
            _ => Planning::Scalar,
        },
        Opcode::Sopk(SopkOp::SMovkI32) => match sgpr(inst.dst[0]) {
            Some(d) => Planning::Mov {
                d,
                a: Planned::Value(inst.imm as i16 as i32 as u32),
            },
            None => Planning::Scalar,
        },
        Opcode::Sopc(op) if op.raw() <= SopcOp::SCmpLeU32.raw() => {
            match (plan_src(inst.src[0]), plan_src(inst.src[1])) {
                (Some(a), Some(b)) => {
                    let signed = op.raw() <= SopcOp::SCmpLeI32.raw();
                    let base = if signed {
                        SopcOp::SCmpEqI32
                    } else {
                        SopcOp::SCmpEqU32
                    };
                    Planning::Cmp {
                        kind: (op.raw() - base.raw()) as u8,
                        signed,
                        a,
                        b,
                    }
                }
                _ => Planning::Scalar,
            }
        }
        Opcode::Sop2(_) | Opcode::Sopk(_) | Opcode::Sop1(_) | Opcode::Sopc(_) => Planning::Scalar,
        Opcode::Sopp(op) => {
            use SoppOp::*;
            let cond = match op {
                SBranch => Cond::Always,
                SCbranchScc0 => Cond::Scc0,
                SCbranchScc1 => Cond::Scc1,
                SCbranchVccz => Cond::Vccz,
                SCbranchVccnz => Cond::Vccnz,
                SCbranchExecz => Cond::Execz,
                SCbranchExecnz => Cond::Execnz,
                // As `sopp`: every access has completed, the rest have nothing to act on.
                SNop | SWaitcnt | SWakeup | STtracedata | SIncperflevel | SDecperflevel => {
                    return Planning::Nop;
                }
                _ => return Planning::None,
            };
            Planning::Branch {
                cond,
                target: branch_target(pc, inst),
            }
        }
        _ => Planning::None,
    }
}

/// A scalar source planned as [`src32`] reads it: an SGPR, a constant or the literal, or
/// (read when it runs) a ttmp or special register; `None` for what [`src32`] refuses.
fn plan_src(op: Operand) -> Option<Planned> {
    Some(match op {
        Operand::Sgpr(n) if usize::from(n) < SGPRS => Planned::Sgpr(n),
        Operand::Int(_) | Operand::Float(_) | Operand::Literal(_) => {
            Planned::Value(constant32(op, Ty::B32)?)
        }
        Operand::Ttmp(n) if n < 16 => Planned::Read(op),
        Operand::Special(_) => Planned::Read(op),
        _ => return None,
    })
}

/// A planned scalar source's value (`None`: not readable, which planning rules out).
#[inline(always)]
fn planned32(w: &Wave, s: Planned) -> Option<u32> {
    match s {
        Planned::Sgpr(n) => Some(w.sgpr[usize::from(n)]),
        Planned::Value(v) => Some(v),
        Planned::Read(op) => w.read_scalar32(op, Ty::B32),
    }
}

/// Runs a 32-bit SOP2 operation planned by [`planning`] (`inst` the instruction it was made
/// from, at `pc`), as [`execute`] does; `wave.pc` is already the next instruction.
///
/// # Errors
///
/// As [`execute`].
#[inline(always)]
pub(super) fn run_sop2(
    w: &mut Wave,
    (op, d, a, b): (Sop2Op, u8, Planned, Planned),
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    if let (Some(a), Some(b)) = (planned32(w, a), planned32(w, b))
        && let Some((v, scc)) = sop2_b32(op, a, b, w.scc)
    {
        w.sgpr[usize::from(d)] = v;
        if let Some(scc) = scc {
            w.scc = scc;
        }
        return Ok(Flow::Continue);
    }
    execute_alu(w, inst, pc)
}

/// Runs a planned `s_mov_b32`/`s_movk_i32` ([`run_sop2`]).
///
/// # Errors
///
/// As [`execute`].
#[inline(always)]
pub(super) fn run_mov(
    w: &mut Wave,
    d: u8,
    a: Planned,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    if let Some(v) = planned32(w, a) {
        w.sgpr[usize::from(d)] = v;
        return Ok(Flow::Continue);
    }
    execute_alu(w, inst, pc)
}

/// Runs a planned 32-bit SOPC compare ([`run_sop2`]).
///
/// # Errors
///
/// As [`execute`].
#[inline(always)]
pub(super) fn run_cmp(
    w: &mut Wave,
    (kind, signed, a, b): (u8, bool, Planned, Planned),
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    if let (Some(a), Some(b)) = (planned32(w, a), planned32(w, b)) {
        w.scc = if signed {
            compare(u16::from(kind), a as i32, b as i32)
        } else {
            compare(u16::from(kind), a, b)
        };
        return Ok(Flow::Continue);
    }
    execute_alu(w, inst, pc)
}

/// Whether a planned SOPP branch is taken: `cond` holds (as [`sopp`] decides).
#[inline(always)]
pub(super) fn taken(w: &Wave, cond: Cond) -> bool {
    match cond {
        Cond::Always => true,
        Cond::Scc0 => !w.scc,
        Cond::Scc1 => w.scc,
        // A wave32 wave's VCC is VCC_LO (as `sopp`).
        Cond::Vccz => w.vcc & w.lane_mask() == 0,
        Cond::Vccnz => w.vcc & w.lane_mask() != 0,
        Cond::Execz => w.exec == 0,
        Cond::Execnz => w.exec != 0,
    }
}

/// Whether SOP2 `op` is one of [`sop2_b32`]'s 32-bit operations (what [`sop2`] computes
/// with it: not a 64-bit one, the fork or `s_bfm_b64`).
fn sop2_b32_op(op: Sop2Op) -> bool {
    !sop2_wide(op) && sop2_b32(op, 0, 0, false).is_some()
}

/// The SOP2 operations [`sop2`] does not compute with [`sop2_b32`].
fn sop2_wide(op: Sop2Op) -> bool {
    use Sop2Op::*;
    matches!(
        op,
        SCselectB64
            | SAndB64
            | SOrB64
            | SXorB64
            | SAndn2B64
            | SOrn2B64
            | SNandB64
            | SNorB64
            | SXnorB64
            | SLshlB64
            | SLshrB64
            | SAshrI64
            | SBfeU64
            | SBfeI64
            | SCbranchGFork
            | SBfmB64
    )
}

/// A SOPP branch's target: `pc + 4 + simm16 * 4` (the guide, "s_branch").
fn branch_target(pc: u64, inst: &Inst) -> u64 {
    pc.wrapping_add(4)
        .wrapping_add((i64::from(inst.imm) * 4) as u64)
}

/// Source `slot` as 32 bits.
fn src32(w: &Wave, inst: &Inst, pc: u64, slot: usize) -> Result<u32, ExecError> {
    w.read_scalar32(inst.src[slot], Ty::B32)
        .ok_or_else(|| illegal(inst, pc, "not a scalar source"))
}

/// Source `slot` as 64 bits.
fn src64(w: &Wave, inst: &Inst, pc: u64, slot: usize) -> Result<u64, ExecError> {
    w.read_scalar64(inst.src[slot], Ty::B64)
        .ok_or_else(|| illegal(inst, pc, "not a 64-bit scalar source"))
}

/// Source `slot` of a signed 64-bit operand (`S0.i64` of `s_ashr_i64`, `s_bfe_i64`,
/// `s_flbit_i32_i64`): a 32-bit literal is sign-extended, where an unsigned or bitwise
/// operand's is zero-extended (LLVM, "[AMDGPU] Prevent folding of the negative i32 literals
/// as i64", llvm-project PR 70274: the hardware sign-extends the literal for signed
/// operands and zero-extends it otherwise).
fn src64_signed(w: &Wave, inst: &Inst, pc: u64, slot: usize) -> Result<u64, ExecError> {
    match inst.src[slot] {
        Operand::Literal(v) => Ok(v as i32 as i64 as u64),
        _ => src64(w, inst, pc, slot),
    }
}

/// Writes the 32-bit destination.
fn dst32(w: &mut Wave, inst: &Inst, pc: u64, v: u32) -> Result<(), ExecError> {
    if w.write_scalar32(inst.dst[0], v) {
        Ok(())
    } else {
        Err(illegal(inst, pc, "not a scalar destination"))
    }
}

/// Writes the 64-bit destination.
fn dst64(w: &mut Wave, inst: &Inst, pc: u64, v: u64) -> Result<(), ExecError> {
    if w.write_scalar64(inst.dst[0], v) {
        Ok(())
    } else {
        Err(illegal(inst, pc, "not a 64-bit scalar destination"))
    }
}

/// `(1 << width) - 1` for widths up to and beyond 64.
fn ones(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// Sign-extends the low `width` bits of `v` (`width` 0 gives 0, 64 and more `v`).
fn sext_from(v: u64, width: u32) -> u64 {
    match width {
        0 => 0,
        1..=63 => (((v << (64 - width)) as i64) >> (64 - width)) as u64,
        _ => v,
    }
}

/// The 32-bit SOP2 operations: `(D, SCC)` from S0, S1 and the incoming SCC; `None` for SCC
/// when the operation leaves it alone. The guide's section 12.1 pseudo-code.
fn sop2_b32(op: Sop2Op, a: u32, b: u32, scc: bool) -> Option<(u32, Option<bool>)> {
    use Sop2Op::*;
    let nz = |d: u32| (d, Some(d != 0));
    Some(match op {
        // D = S0 + S1; SCC = the carry out.
        SAddU32 => {
            let (d, c) = a.overflowing_add(b);
            (d, Some(c))
        }
        // D = S0 - S1; SCC = the borrow (S1 > S0, unsigned).
        SSubU32 => {
            let (d, c) = a.overflowing_sub(b);
            (d, Some(c))
        }
        // SCC = signed overflow: the operands' signs agree and the result's differs.
        SAddI32 => {
            let (d, o) = (a as i32).overflowing_add(b as i32);
            (d as u32, Some(o))
        }
        SSubI32 => {
            let (d, o) = (a as i32).overflowing_sub(b as i32);
            (d as u32, Some(o))
        }
        // D = S0 + S1 + SCC; SCC = the carry out of the 33-bit sum.
        SAddcU32 => {
            let t = u64::from(a) + u64::from(b) + u64::from(scc);
            (t as u32, Some(t >> 32 != 0))
        }
        // D = S0 - S1 - SCC; SCC = the borrow.
        SSubbU32 => {
            let d = a.wrapping_sub(b).wrapping_sub(u32::from(scc));
            (d, Some(u64::from(b) + u64::from(scc) > u64::from(a)))
        }
        // SCC = 1 when S0 is the one chosen: min picks S1 on a tie.
        SMinI32 => {
            let c = (a as i32) < (b as i32);
            (if c { a } else { b }, Some(c))
        }
        SMinU32 => {
            let c = a < b;
            (if c { a } else { b }, Some(c))
        }
        // Max picks S0 on a tie, so SCC = S0 >= S1 (the CDNA3/CDNA4 guides' pseudo-code
        // `SCC = S0.i32 >= S1.i32; D0.i32 = SCC ? S0.i32 : S1.i32`).
        SMaxI32 => {
            let c = (a as i32) >= (b as i32);
            (if c { a } else { b }, Some(c))
        }
        SMaxU32 => {
            let c = a >= b;
            (if c { a } else { b }, Some(c))
        }
        SCselectB32 => (if scc { a } else { b }, None),
        SAndB32 => nz(a & b),
        SOrB32 => nz(a | b),
        SXorB32 => nz(a ^ b),
        SAndn2B32 => nz(a & !b),
        SOrn2B32 => nz(a | !b),
        SNandB32 => nz(!(a & b)),
        SNorB32 => nz(!(a | b)),
        SXnorB32 => nz(!(a ^ b)),
        SLshlB32 => nz(a << (b & 31)),
        SLshrB32 => nz(a >> (b & 31)),
        SAshrI32 => nz(((a as i32) >> (b & 31)) as u32),
        // D = ((1 << S0[4:0]) - 1) << S1[4:0]; SCC unchanged.
        SBfmB32 => ((((1u64 << (a & 31)) - 1) << (b & 31)) as u32, None),
        SMulI32 => (a.wrapping_mul(b), None),
        // Offset S1[4:0], width S1[22:16]; SCC = D != 0. The signed form shifts
        // arithmetically, then sign-extends from the field's top bit.
        SBfeU32 => {
            let width = b >> 16 & 0x7f;
            nz(((u64::from(a >> (b & 31))) & ones(width)) as u32)
        }
        SBfeI32 => {
            let width = b >> 16 & 0x7f;
            let field = (((a as i32) >> (b & 31)) as u32 as u64) & ones(width);
            let d = if width >= 32 {
                field as u32
            } else {
                sext_from(field, width) as u32
            };
            nz(d)
        }
        // D = |S0 - S1| in 32-bit arithmetic (the guide: D = S0 - S1; if D < 0, D = -D);
        // SCC = D != 0.
        SAbsdiffI32 => nz((a as i32).wrapping_sub(b as i32).wrapping_abs() as u32),
        SMulHiU32 => (((u64::from(a) * u64::from(b)) >> 32) as u32, None),
        SMulHiI32 => (
            ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32,
            None,
        ),
        // D = (S0 << n) + S1; SCC = the carry out of the 64-bit sum (shifted-out bits count).
        SLshl1AddU32 | SLshl2AddU32 | SLshl3AddU32 | SLshl4AddU32 => {
            let n = match op {
                SLshl1AddU32 => 1,
                SLshl2AddU32 => 2,
                SLshl3AddU32 => 3,
                _ => 4,
            };
            let t = (u64::from(a) << n) + u64::from(b);
            (t as u32, Some(t >> 32 != 0))
        }
        SPackLlB32B16 => ((a & 0xffff) | b << 16, None),
        SPackLhB32B16 => ((a & 0xffff) | (b & 0xffff_0000), None),
        SPackHhB32B16 => ((a >> 16) | (b & 0xffff_0000), None),
        _ => return None,
    })
}

/// The 64-bit SOP2 operations (S0 64 bits; S1 64 bits for logic and select, 32 for shifts
/// and `s_bfe_*64`, whose caller passes it zero-extended).
fn sop2_b64(op: Sop2Op, a: u64, b: u64, scc: bool) -> Option<(u64, Option<bool>)> {
    use Sop2Op::*;
    let nz = |d: u64| (d, Some(d != 0));
    Some(match op {
        SCselectB64 => (if scc { a } else { b }, None),
        SAndB64 => nz(a & b),
        SOrB64 => nz(a | b),
        SXorB64 => nz(a ^ b),
        SAndn2B64 => nz(a & !b),
        SOrn2B64 => nz(a | !b),
        SNandB64 => nz(!(a & b)),
        SNorB64 => nz(!(a | b)),
        SXnorB64 => nz(!(a ^ b)),
        SLshlB64 => nz(a << (b & 63)),
        SLshrB64 => nz(a >> (b & 63)),
        SAshrI64 => nz(((a as i64) >> (b & 63)) as u64),
        // Offset S1[5:0], width S1[22:16].
        SBfeU64 => nz((a >> (b & 63)) & ones((b >> 16 & 0x7f) as u32)),
        SBfeI64 => {
            let width = (b >> 16 & 0x7f) as u32;
            let field = (((a as i64) >> (b & 63)) as u64) & ones(width);
            nz(sext_from(field, width))
        }
        _ => return None,
    })
}

fn sop2(w: &mut Wave, inst: &Inst, pc: u64, op: Sop2Op) -> Result<Flow, ExecError> {
    use Sop2Op::*;
    let (d, scc) = match op {
        SCselectB64 | SAndB64 | SOrB64 | SXorB64 | SAndn2B64 | SOrn2B64 | SNandB64 | SNorB64
        | SXnorB64 => {
            let (a, b) = (src64(w, inst, pc, 0)?, src64(w, inst, pc, 1)?);
            sop2_b64(op, a, b, w.scc).ok_or_else(|| unimplemented(inst, pc))?
        }
        SLshlB64 | SLshrB64 | SAshrI64 | SBfeU64 | SBfeI64 => {
            let a = if matches!(op, SAshrI64 | SBfeI64) {
                src64_signed(w, inst, pc, 0)?
            } else {
                src64(w, inst, pc, 0)?
            };
            let b = src32(w, inst, pc, 1)?;
            sop2_b64(op, a, u64::from(b), w.scc).ok_or_else(|| unimplemented(inst, pc))?
        }
        // S0 = the lane mask, S1 = the target's byte address.
        SCbranchGFork => {
            let (mask, target) = (src64(w, inst, pc, 0)?, src64(w, inst, pc, 1)?);
            fork(w, mask, target);
            return Ok(Flow::Continue);
        }
        // D.u64 = ((1 << S0[5:0]) - 1) << S1[5:0], both sources 32 bits; SCC unchanged.
        SBfmB64 => {
            let (a, b) = (src32(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            (ones(a & 63) << (b & 63), None)
        }
        _ => {
            let (a, b) = (src32(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            let (d, scc) = sop2_b32(op, a, b, w.scc).ok_or_else(|| unimplemented(inst, pc))?;
            dst32(w, inst, pc, d)?;
            if let Some(scc) = scc {
                w.scc = scc;
            }
            return Ok(Flow::Continue);
        }
    };
    dst64(w, inst, pc, d)?;
    if let Some(scc) = scc {
        w.scc = scc;
    }
    Ok(Flow::Continue)
}

/// A compare of SOPC/SOPK: `kind` 0..=5 is eq, lg (not equal), gt, ge, lt, le.
fn compare<T: Ord>(kind: u16, a: T, b: T) -> bool {
    match kind {
        0 => a == b,
        1 => a != b,
        2 => a > b,
        3 => a >= b,
        4 => a < b,
        _ => a <= b,
    }
}

/// SOPK (section 12.2): the 16-bit immediate is sign-extended, except for the unsigned
/// compares, which zero-extend it (`SCC = S0.u == SIMM16.u`...).
fn sopk(w: &mut Wave, inst: &Inst, pc: u64, op: SopkOp) -> Result<Flow, ExecError> {
    use SopkOp::*;
    let simm = inst.imm as i16 as i32;
    let uimm = u32::from(inst.imm as u16);
    match op {
        SMovkI32 => dst32(w, inst, pc, simm as u32)?,
        SCmovkI32 => {
            if w.scc {
                dst32(w, inst, pc, simm as u32)?;
            }
        }
        SCmpkEqI32 | SCmpkLgI32 | SCmpkGtI32 | SCmpkGeI32 | SCmpkLtI32 | SCmpkLeI32 => {
            let a = src32(w, inst, pc, 0)? as i32;
            w.scc = compare(op.raw() - SCmpkEqI32.raw(), a, simm);
        }
        SCmpkEqU32 | SCmpkLgU32 | SCmpkGtU32 | SCmpkGeU32 | SCmpkLtU32 | SCmpkLeU32 => {
            let a = src32(w, inst, pc, 0)?;
            w.scc = compare(op.raw() - SCmpkEqU32.raw(), a, uimm);
        }
        // D = D + signext(SIMM16); SCC = signed overflow.
        SAddkI32 => {
            let (d, o) = (src32(w, inst, pc, 0)? as i32).overflowing_add(simm);
            dst32(w, inst, pc, d as u32)?;
            w.scc = o;
        }
        SMulkI32 => {
            let d = (src32(w, inst, pc, 0)? as i32).wrapping_mul(simm);
            dst32(w, inst, pc, d as u32)?;
        }
        // D = (HW_REG[id] >> offset) & ((1 << size) - 1).
        SGetregB32 => {
            let (id, offset, mask) = hwreg_field(inst.imm);
            dst32(w, inst, pc, (w.read_hwreg(id) & mask) >> offset)?;
        }
        // HW_REG[id][offset + size - 1 : offset] = the value's low bits. MODE and TRAPSTS
        // take writes; in the trap handler (STATUS.PRIV) STATUS and IB_STS do too (a trap
        // handler restores them before `s_rfe_b64`); the other registers are read-only to a
        // wave (writes dropped). STATUS.SCC written is SCC; EXECZ and VCCZ stay live. On gfx11
        // FLAT_SCR_LO/HI are the wave's flat-scratch base (gfx11 has no FLAT_SCRATCH SGPRs).
        SSetregB32 | SSetregImm32B32 => {
            let v = src32(w, inst, pc, 0)?;
            let (id, offset, mask) = hwreg_field(inst.imm);
            let privileged = w.hwreg[hwreg::STATUS] & status::PRIV != 0;
            if w.target.is_gfx11() && matches!(id, hwreg::FLAT_SCR_LO | hwreg::FLAT_SCR_HI) {
                let shift = if id == hwreg::FLAT_SCR_HI { 32 } else { 0 };
                let old = (w.flat_scratch >> shift) as u32;
                let new = (old & !mask) | (v << offset & mask);
                w.flat_scratch =
                    (w.flat_scratch & !(0xffff_ffff << shift)) | u64::from(new) << shift;
            } else if matches!(id, hwreg::MODE | hwreg::TRAPSTS)
                || (privileged && matches!(id, hwreg::STATUS | hwreg::IB_STS))
            {
                let old = w.read_hwreg(id);
                let new = (old & !mask) | (v << offset & mask);
                w.hwreg[id] = new;
                if id == hwreg::STATUS {
                    w.scc = new & status::SCC != 0;
                }
            }
        }
        // S0 (the SDST field) = the lane mask; the target is PC + signext(SIMM16 * 4) + 4.
        SCbranchIFork => {
            let mask = src64(w, inst, pc, 0)?;
            let target = pc
                .wrapping_add(4)
                .wrapping_add((i64::from(simm) * 4) as u64);
            fork(w, mask, target);
        }
        // D = PC + 4; PC = PC + signext(SIMM16 * 4) + 4.
        SCallB64 => {
            dst64(w, inst, pc, pc.wrapping_add(4))?;
            w.pc = pc
                .wrapping_add(4)
                .wrapping_add((i64::from(simm) * 4) as u64);
        }
    }
    Ok(Flow::Continue)
}

/// The saveexec family (section 12.3): `D = EXEC; EXEC = f(S0, EXEC); SCC = EXEC != 0`, or,
/// for the `wrexec` forms, `EXEC = f(S0, EXEC); D = EXEC; SCC = EXEC != 0`.
fn saveexec(w: &mut Wave, inst: &Inst, pc: u64, op: Sop1Op) -> Result<Flow, ExecError> {
    use Sop1Op::*;
    let s = src64(w, inst, pc, 0)?;
    let e = w.exec;
    let new = match op {
        SAndSaveexecB64 => s & e,
        SOrSaveexecB64 => s | e,
        SXorSaveexecB64 => s ^ e,
        SAndn2SaveexecB64 | SAndn2WrexecB64 => s & !e,
        SOrn2SaveexecB64 => s | !e,
        SNandSaveexecB64 => !(s & e),
        SNorSaveexecB64 => !(s | e),
        SXnorSaveexecB64 => !(s ^ e),
        SAndn1SaveexecB64 | SAndn1WrexecB64 => !s & e,
        SOrn1SaveexecB64 => !s | e,
        _ => return Err(unimplemented(inst, pc)),
    };
    let wrexec = matches!(op, SAndn1WrexecB64 | SAndn2WrexecB64);
    dst64(w, inst, pc, if wrexec { new } else { e })?;
    w.exec = new;
    w.scc = new != 0;
    Ok(Flow::Continue)
}

/// The SGPR-file operand `base` moved by M0 (`s_movrels`/`s_movreld`: `SGPR[addr + M0]`),
/// `width` registers wide: an SGPR or a trap temporary in the same file, or an error when
/// the index leaves it (or, for a pair, is odd).
fn relative(
    w: &Wave,
    inst: &Inst,
    pc: u64,
    base: Operand,
    width: u32,
) -> Result<Operand, ExecError> {
    let out = || illegal(inst, pc, "M0 moves the operand outside its register file");
    if width == 2 && w.m0 & 1 == 1 {
        return Err(illegal(inst, pc, "a 64-bit relative move needs an even M0"));
    }
    let (n, limit) = match base {
        Operand::Sgpr(n) => (u32::from(n & !(width as u8 - 1)), w.sgpr_limit() as u32),
        Operand::Ttmp(n) => (u32::from(n & !(width as u8 - 1)), 16),
        _ => return Err(illegal(inst, pc, "relative moves address SGPRs or ttmps")),
    };
    let at = n.checked_add(w.m0).ok_or_else(out)?;
    if at + width > limit {
        return Err(out());
    }
    Ok(match base {
        Operand::Ttmp(_) => Operand::Ttmp(at as u8),
        _ => Operand::Sgpr(at as u8),
    })
}

/// SOP1 (section 12.3).
fn sop1(w: &mut Wave, inst: &Inst, pc: u64, op: Sop1Op) -> Result<Flow, ExecError> {
    use Sop1Op::*;
    // The 32-bit result and whether it sets SCC (= D != 0).
    let (d, sets_scc): (u32, bool) = match op {
        SMovB32 => (src32(w, inst, pc, 0)?, false),
        SCmovB32 => {
            if w.scc {
                let v = src32(w, inst, pc, 0)?;
                dst32(w, inst, pc, v)?;
            }
            return Ok(Flow::Continue);
        }
        SNotB32 => (!src32(w, inst, pc, 0)?, true),
        // Each quad of bits becomes all ones if any of its bits is set.
        SWqmB32 => (wqm(u64::from(src32(w, inst, pc, 0)?)) as u32, true),
        SBrevB32 => (src32(w, inst, pc, 0)?.reverse_bits(), false),
        SBcnt0I32B32 => (src32(w, inst, pc, 0)?.count_zeros(), true),
        SBcnt0I32B64 => (src64(w, inst, pc, 0)?.count_zeros(), true),
        SBcnt1I32B32 => (src32(w, inst, pc, 0)?.count_ones(), true),
        SBcnt1I32B64 => (src64(w, inst, pc, 0)?.count_ones(), true),
        // The index of the lowest 0 / 1 bit, -1 when there is none; SCC unchanged.
        SFf0I32B32 => (first_one(u64::from(!src32(w, inst, pc, 0)?)), false),
        SFf0I32B64 => (first_one(!src64(w, inst, pc, 0)?), false),
        SFf1I32B32 => (first_one(u64::from(src32(w, inst, pc, 0)?)), false),
        SFf1I32B64 => (first_one(src64(w, inst, pc, 0)?), false),
        // Leading zeros from the MSB, -1 for 0.
        SFlbitI32B32 => {
            let a = src32(w, inst, pc, 0)?;
            (if a == 0 { u32::MAX } else { a.leading_zeros() }, false)
        }
        SFlbitI32B64 => {
            let a = src64(w, inst, pc, 0)?;
            (if a == 0 { u32::MAX } else { a.leading_zeros() }, false)
        }
        // The first bit from the MSB that differs from the sign bit, -1 for 0 and -1.
        SFlbitI32 => {
            let a = src32(w, inst, pc, 0)?;
            let x = a ^ ((a as i32 >> 31) as u32);
            (if x == 0 { u32::MAX } else { x.leading_zeros() }, false)
        }
        SFlbitI32I64 => {
            let a = src64_signed(w, inst, pc, 0)?;
            let x = a ^ ((a as i64 >> 63) as u64);
            (if x == 0 { u32::MAX } else { x.leading_zeros() }, false)
        }
        SSextI32I8 => (src32(w, inst, pc, 0)? as i8 as i32 as u32, false),
        SSextI32I16 => (src32(w, inst, pc, 0)? as i16 as i32 as u32, false),
        // D[S0[4:0]] = 0 / 1: the destination is read, one bit changed.
        SBitset0B32 | SBitset1B32 => {
            let bit = 1u32 << (src32(w, inst, pc, 0)? & 31);
            let old = w
                .read_scalar32(inst.dst[0], Ty::B32)
                .ok_or_else(|| illegal(inst, pc, "not a scalar destination"))?;
            let d = if op == SBitset0B32 {
                old & !bit
            } else {
                old | bit
            };
            (d, false)
        }
        SAbsI32 => ((src32(w, inst, pc, 0)? as i32).wrapping_abs() as u32, true),
        // One bit for each quad of S0, set if any of its bits is.
        SQuadmaskB32 => (quadmask(u64::from(src32(w, inst, pc, 0)?)) as u32, true),
        SQuadmaskB64 => {
            let d = quadmask(src64(w, inst, pc, 0)?);
            dst64(w, inst, pc, d)?;
            w.scc = d != 0;
            return Ok(Flow::Continue);
        }
        // SGPR[D] = SGPR[S0 + M0].
        SMovrelsB32 => {
            let from = relative(w, inst, pc, inst.src[0], 1)?;
            let v = w.read_scalar32(from, Ty::B32).unwrap_or(0);
            (v, false)
        }
        SMovrelsB64 => {
            let from = relative(w, inst, pc, inst.src[0], 2)?;
            let v = w.read_scalar64(from, Ty::B64).unwrap_or(0);
            dst64(w, inst, pc, v)?;
            return Ok(Flow::Continue);
        }
        // SGPR[D + M0] = S0.
        SMovreldB32 => {
            let v = src32(w, inst, pc, 0)?;
            let to = relative(w, inst, pc, inst.dst[0], 1)?;
            w.write_scalar32(to, v);
            return Ok(Flow::Continue);
        }
        SMovreldB64 => {
            let v = src64(w, inst, pc, 0)?;
            let to = relative(w, inst, pc, inst.dst[0], 2)?;
            w.write_scalar64(to, v);
            return Ok(Flow::Continue);
        }
        // S0 = the branch-stack depth saved before the fork.
        SCbranchJoin => {
            let saved = src32(w, inst, pc, 0)?;
            join(w, saved);
            return Ok(Flow::Continue);
        }
        // M0[7:0] = S0[7:0] (the VGPR index of the gpr-index mode).
        SSetGprIdxIdx => {
            let v = src32(w, inst, pc, 0)?;
            w.m0 = (w.m0 & !0xff) | (v & 0xff);
            return Ok(Flow::Continue);
        }
        // D = PC + 4.
        SGetpcB64 => {
            dst64(w, inst, pc, pc.wrapping_add(4))?;
            return Ok(Flow::Continue);
        }
        // PC = S0.
        SSetpcB64 => {
            w.pc = src64(w, inst, pc, 0)?;
            return Ok(Flow::Continue);
        }
        // D = PC + 4; PC = S0 (S0 read first: it may be D).
        SSwappcB64 => {
            let to = src64(w, inst, pc, 0)?;
            dst64(w, inst, pc, pc.wrapping_add(4))?;
            w.pc = to;
            return Ok(Flow::Continue);
        }
        // Return from the trap handler: PC = S0, STATUS.PRIV cleared. A handler that set
        // STATUS.HALT (restoring STATUS with it) leaves the wave halted: it yields.
        SRfeB64 => {
            w.pc = src64(w, inst, pc, 0)?;
            w.hwreg[hwreg::STATUS] &= !status::PRIV;
            return Ok(if w.halted() {
                Flow::Yield
            } else {
                Flow::Continue
            });
        }
        SAndSaveexecB64 | SOrSaveexecB64 | SXorSaveexecB64 | SAndn2SaveexecB64
        | SOrn2SaveexecB64 | SNandSaveexecB64 | SNorSaveexecB64 | SXnorSaveexecB64
        | SAndn1SaveexecB64 | SOrn1SaveexecB64 | SAndn1WrexecB64 | SAndn2WrexecB64 => {
            return saveexec(w, inst, pc, op);
        }
        SMovB64 | SCmovB64 | SNotB64 | SWqmB64 | SBrevB64 | SBitset0B64 | SBitset1B64
        | SBitreplicateB64B32 => return sop1_b64(w, inst, pc, op),
    };
    dst32(w, inst, pc, d)?;
    if sets_scc {
        w.scc = d != 0;
    }
    Ok(Flow::Continue)
}

/// The SOP1 operations with a 64-bit result.
fn sop1_b64(w: &mut Wave, inst: &Inst, pc: u64, op: Sop1Op) -> Result<Flow, ExecError> {
    use Sop1Op::*;
    let (d, sets_scc) = match op {
        SMovB64 => (src64(w, inst, pc, 0)?, false),
        SCmovB64 => {
            if w.scc {
                let v = src64(w, inst, pc, 0)?;
                dst64(w, inst, pc, v)?;
            }
            return Ok(Flow::Continue);
        }
        SNotB64 => (!src64(w, inst, pc, 0)?, true),
        SWqmB64 => (wqm(src64(w, inst, pc, 0)?), true),
        SBrevB64 => (src64(w, inst, pc, 0)?.reverse_bits(), false),
        // D.u64[S0[5:0]] = 0 / 1 (S0 is 32 bits).
        SBitset0B64 | SBitset1B64 => {
            let bit = 1u64 << (src32(w, inst, pc, 0)? & 63);
            let old = w
                .read_scalar64(inst.dst[0], Ty::B64)
                .ok_or_else(|| illegal(inst, pc, "not a 64-bit scalar destination"))?;
            let d = if op == SBitset0B64 {
                old & !bit
            } else {
                old | bit
            };
            (d, false)
        }
        // Each bit of S0 twice: D[2i] = D[2i + 1] = S0[i].
        SBitreplicateB64B32 => {
            let a = src32(w, inst, pc, 0)?;
            let d = (0..32).fold(0u64, |d, i| d | (u64::from(a >> i & 1) * 3) << (2 * i));
            (d, false)
        }
        _ => return Err(unimplemented(inst, pc)),
    };
    dst64(w, inst, pc, d)?;
    if sets_scc {
        w.scc = d != 0;
    }
    Ok(Flow::Continue)
}

/// `s_wqm`: every 4-bit group with a bit set becomes 0xf.
fn wqm(a: u64) -> u64 {
    (0..16).fold(0, |d, q| {
        if a >> (4 * q) & 0xf != 0 {
            d | 0xf << (4 * q)
        } else {
            d
        }
    })
}

/// `s_quadmask`: bit `q` is set when 4-bit group `q` of `a` has a bit set.
fn quadmask(a: u64) -> u64 {
    (0..16).fold(0, |d, q| d | u64::from(a >> (4 * q) & 0xf != 0) << q)
}

/// The index of the lowest set bit, or -1 (all ones) when there is none.
fn first_one(a: u64) -> u32 {
    if a == 0 { u32::MAX } else { a.trailing_zeros() }
}

/// SOPC (section 12.4): SCC = the compare.
fn sopc(w: &mut Wave, inst: &Inst, pc: u64, op: SopcOp) -> Result<Flow, ExecError> {
    use SopcOp::*;
    w.scc = match op {
        SCmpEqI32 | SCmpLgI32 | SCmpGtI32 | SCmpGeI32 | SCmpLtI32 | SCmpLeI32 => {
            let (a, b) = (src32(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            compare(op.raw() - SCmpEqI32.raw(), a as i32, b as i32)
        }
        SCmpEqU32 | SCmpLgU32 | SCmpGtU32 | SCmpGeU32 | SCmpLtU32 | SCmpLeU32 => {
            let (a, b) = (src32(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            compare(op.raw() - SCmpEqU32.raw(), a, b)
        }
        SCmpEqU64 | SCmpLgU64 => {
            let (a, b) = (src64(w, inst, pc, 0)?, src64(w, inst, pc, 1)?);
            compare(op.raw() - SCmpEqU64.raw(), a, b)
        }
        // SCC = S0[S1[4:0]] == 0 / == 1.
        SBitcmp0B32 | SBitcmp1B32 => {
            let (a, b) = (src32(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            (a >> (b & 31) & 1 == 1) == (op == SBitcmp1B32)
        }
        // SCC = S0.u64[S1[5:0]] == 0 / == 1 (S1 is 32 bits).
        SBitcmp0B64 | SBitcmp1B64 => {
            let (a, b) = (src64(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            (a >> (b & 63) & 1 == 1) == (op == SBitcmp1B64)
        }
        // MODE.VSKIP = S0[S1[4:0]]; SCC unchanged.
        SSetvskip => {
            let (a, b) = (src32(w, inst, pc, 0)?, src32(w, inst, pc, 1)?);
            let on = a >> (b & 31) & 1 == 1;
            let mode = w.hwreg[hwreg::MODE];
            w.hwreg[hwreg::MODE] = if on {
                mode | MODE_VSKIP
            } else {
                mode & !MODE_VSKIP
            };
            return Ok(Flow::Continue);
        }
        // MODE.GPR_IDX_EN = 1; M0[7:0] = S0[7:0]; M0[15:12] = SIMM4 (the raw SSRC1 field);
        // SCC unchanged.
        SSetGprIdxOn => {
            let idx = src32(w, inst, pc, 0)?;
            let mode = inst.imm as u32 & 0xf;
            w.m0 = (w.m0 & !0xf0ff) | (idx & 0xff) | mode << 12;
            w.hwreg[hwreg::MODE] |= MODE_GPR_IDX_EN;
            return Ok(Flow::Continue);
        }
    };
    Ok(Flow::Continue)
}

/// SOPP: program control (section 12.5 and chapter 4). Branch targets are
/// `pc + 4 + simm16 * 4` (the guide, "s_branch": `PC = PC + signext(SIMM16 * 4) + 4`, PC
/// being the branch's own address).
fn sopp(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
    op: SoppOp,
) -> Result<Flow, ExecError> {
    use SoppOp::*;
    let target = branch_target(pc, inst);
    let imm = inst.imm as u32 & 0xffff;
    let status = w.hwreg[hwreg::STATUS];
    let taken = match op {
        SEndpgm | SEndpgmSaved | SEndpgmOrderedPsDone => return Ok(Flow::End),
        SBarrier => return Ok(Flow::Barrier),
        // Every access has completed (see the module docs); the rest have nothing to act on.
        SNop | SWaitcnt | SWakeup | STtracedata | SIncperflevel | SDecperflevel => {
            return Ok(Flow::Continue);
        }
        // The message goes to the dispatcher (the module docs).
        SSendmsg => return Ok(Flow::Message(imm as u16)),
        // "Kill this wave if the least significant bit of the immediate is 1": it ends.
        SSetkill => {
            return Ok(if imm & 1 == 1 {
                Flow::End
            } else {
                Flow::Continue
            });
        }
        SIcacheInv => {
            ctx.code.clear();
            return Ok(Flow::Continue);
        }
        // STATUS.USER_PRIO = SIMM16[1:0].
        SSetprio => {
            let field = 3 << status::USER_PRIO_SHIFT;
            w.hwreg[hwreg::STATUS] = (status & !field) | (imm & 3) << status::USER_PRIO_SHIFT;
            return Ok(Flow::Continue);
        }
        // STATUS.HALT = SIMM16[0] ("ignored while PRIV == 1"); a halted wave yields:
        // nothing here holds it until a host resumes it.
        SSethalt | SSendmsghalt => {
            let halt = op == SSendmsghalt || imm & 1 == 1;
            w.hwreg[hwreg::STATUS] = (status & !status::HALT) | if halt { status::HALT } else { 0 };
            let halted = halt && status & status::PRIV == 0;
            return Ok(if halted { Flow::Yield } else { Flow::Continue });
        }
        // Sleeps 64 * SIMM16[6:0] clocks; 0 does not sleep.
        SSleep => {
            return Ok(if imm & 0x7f == 0 {
                Flow::Continue
            } else {
                Flow::Yield
            });
        }
        // The hardware's trap entry: {TTMP1, TTMP0} = {PCRewind, HT, TrapID[7:0], PC[47:0]}
        // with PC the s_trap itself, STATUS.PRIV = 1, then PC = TBA. No trap handler runs
        // here: the wave stops at the s_trap with the handler's inputs set, and the
        // dispatcher reports the trap (or, to resume past it, sets `pc` 4 bytes on).
        STrap => {
            let id = imm & 0xff;
            w.ttmp[0] = pc as u32;
            w.ttmp[1] = (pc >> 32) as u32 & 0xffff | id << 16;
            w.hwreg[hwreg::STATUS] = status | status::PRIV;
            w.pc = pc;
            return Ok(Flow::Trap(id as u16));
        }
        // MODE.GPR_IDX_EN = 0.
        SSetGprIdxOff => {
            w.hwreg[hwreg::MODE] &= !MODE_GPR_IDX_EN;
            return Ok(Flow::Continue);
        }
        // M0[15:12] = SIMM16[3:0].
        SSetGprIdxMode => {
            w.m0 = (w.m0 & !0xf000) | (imm & 0xf) << 12;
            return Ok(Flow::Continue);
        }
        SBranch => true,
        SCbranchScc0 => !w.scc,
        SCbranchScc1 => w.scc,
        // A wave32 wave's VCC is VCC_LO (RDNA3 guide, "VCCZ").
        SCbranchVccz => w.vcc & w.lane_mask() == 0,
        SCbranchVccnz => w.vcc & w.lane_mask() != 0,
        SCbranchExecz => w.exec == 0,
        SCbranchExecnz => w.exec != 0,
        SCbranchCdbgsys => status & status::COND_DBG_SYS != 0,
        SCbranchCdbguser => status & status::COND_DBG_USER != 0,
        SCbranchCdbgsysOrUser => status & (status::COND_DBG_SYS | status::COND_DBG_USER) != 0,
        SCbranchCdbgsysAndUser => {
            let both = status::COND_DBG_SYS | status::COND_DBG_USER;
            status & both == both
        }
    };
    if taken {
        w.pc = target;
    }
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hwreg_field_splits_simm16() {
        // hwreg(HW_REG_SH_MEM_BASES, 16, 16): llvm-mc encodes 0x7c0f.
        assert_eq!(hwreg_field(0x7c0f), (15, 16, 0xffff_0000));
        // hwreg(HW_REG_MODE) = hwreg(1, 0, 32): 0xf801 (negative as a sign-extended imm).
        assert_eq!(hwreg_field(0xf801u16 as i16 as i32), (1, 0, u32::MAX));
        // A field running past bit 31 keeps only the bits that exist.
        assert_eq!(hwreg_field(1 | 30 << 6 | 7 << 11), (1, 30, 0xc000_0000));
    }

    #[test]
    fn bit_helpers() {
        assert_eq!(wqm(0x0000_0000_0010_8001), 0x0000_0000_00f0_f00f);
        assert_eq!(quadmask(0x8000_0000_0010_8001), 0x8000 | 0x20 | 0x8 | 1);
        assert_eq!(first_one(0), u32::MAX);
        assert_eq!(sext_from(0b100, 3), u64::MAX - 3);
        assert_eq!(ones(64), u64::MAX);
    }
}
