//! What the code cache keeps beside a decoded instruction so that running it again costs
//! less than decoding its form again: a [`Planning`], made once when the instruction first
//! runs (`exec::steps`) and kept with it in its [`crate::exec::CodeCache`] slot.
//!
//! Only data lives here (the module uses nothing of the executor's, so the cache, in
//! `wave`, can hold it without a module cycle). Each plan is one operation with its operands
//! resolved, and the family that made it runs it by a `match` on its kind, with what its
//! per-step path computes:
//! - a lane-wise VALU operation of the fast path ([`Plan`], [`Lane`]: `valu::fast::plan`
//!   makes it, `valu::fast::run_plan` runs it, lane by lane when few lanes are on, with the
//!   operation's own code per [`Lane`] and no function pointer per lane);
//! - any other VALU instruction without an `lds_direct` source ([`Planning::Vector`]): run
//!   by reference, without the code-cache context (compares, `v_cndmask_b32`, carries...);
//! - the common 32-bit scalar operations with resolved operands ([`Planning::Sop2`],
//!   [`Planning::Mov`], [`Planning::Cmp`]; `salu::planning`), other SOP2/SOPK/SOP1/SOPC by
//!   reference ([`Planning::Scalar`]);
//! - SOPP program control that reaches nothing but the wave: branches with their target
//!   resolved ([`Planning::Branch`]) and the instructions with no effect here, `s_waitcnt`
//!   and `s_nop` among them ([`Planning::Nop`]).

use crate::inst::Inst;
use crate::opcode::Sop2Op;
use crate::operand::Operand;

/// A code cache slot: the instruction decoded at its dword, if any, and how it runs
/// ([`Planning`], made when it first runs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    /// The instruction.
    pub(crate) inst: Option<Inst>,
    /// Its plan.
    pub(crate) plan: Planning,
}

/// Whether an instruction was planned yet, and how.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum Planning {
    /// Not run since it was decoded.
    #[default]
    Unknown,
    /// Run, and it has no plan: every run takes the per-step path (`exec::execute`).
    None,
    /// A lane-wise VALU operation of the fast path.
    Valu(Plan),
    /// A VALU instruction with no `lds_direct` source: run by reference (the fast path, else
    /// the general path), without the code cache context.
    Vector,
    /// A SOP2, SOPK, SOP1 or SOPC instruction: run by reference (`salu::execute_alu`), with
    /// no copy of it.
    Scalar,
    /// A 32-bit SOP2 operation (`salu::sop2_b32`) into SGPR `d`.
    Sop2 {
        /// The operation.
        op: Sop2Op,
        /// The destination SGPR.
        d: u8,
        /// S0.
        a: Planned,
        /// S1.
        b: Planned,
    },
    /// `s_mov_b32` / `s_movk_i32` into SGPR `d` (SCC unchanged).
    Mov {
        /// The destination SGPR.
        d: u8,
        /// The value.
        a: Planned,
    },
    /// A 32-bit SOPC compare: SCC = the compare of S0 and S1 (`kind` 0..=5: eq, lg, gt,
    /// ge, lt, le; signed or not).
    Cmp {
        /// The compare.
        kind: u8,
        /// `_i32` (signed) or `_u32`.
        signed: bool,
        /// S0.
        a: Planned,
        /// S1.
        b: Planned,
    },
    /// A SOPP branch: to `target` when `cond` holds.
    Branch {
        /// When it is taken.
        cond: Cond,
        /// The target's byte address.
        target: u64,
    },
    /// A SOPP instruction with no effect here (`s_nop`, `s_waitcnt`...: `salu`'s module
    /// docs).
    Nop,
}

/// When a planned SOPP branch is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cond {
    /// `s_branch`.
    Always,
    /// `s_cbranch_scc0`.
    Scc0,
    /// `s_cbranch_scc1`.
    Scc1,
    /// `s_cbranch_vccz`.
    Vccz,
    /// `s_cbranch_vccnz`.
    Vccnz,
    /// `s_cbranch_execz`.
    Execz,
    /// `s_cbranch_execnz`.
    Execnz,
}

/// A lane-wise VALU instruction of the fast path with its form resolved: the operation, the
/// destination VGPR and each source's kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The operation.
    pub(crate) lane: Lane,
    /// The destination VGPR.
    pub(crate) d: u8,
    /// The sources, slot by slot (unused slots: the value 0).
    pub(crate) src: [Source; 3],
    /// VOP3 `abs` bits, by source.
    pub(crate) abs: u8,
    /// VOP3 `neg` bits, by source.
    pub(crate) neg: u8,
}

/// The lane-wise operations of the VALU fast path, one per opcode (`valu::fast`'s table
/// says what each computes and which opcode it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub(crate) enum Lane {
    MovB32,
    NotB32,
    BfrevB32,
    ExpF32,
    LogF32,
    RcpF32,
    RsqF32,
    SqrtF32,
    CvtF32I32,
    CvtF32U32,
    AddU32,
    SubU32,
    SubrevU32,
    LshlrevB32,
    LshrrevB32,
    AshrrevI32,
    AndB32,
    OrB32,
    XorB32,
    MinU32,
    MaxU32,
    MinI32,
    MaxI32,
    MulU32U24,
    AddF32,
    SubF32,
    SubrevF32,
    MulF32,
    FmacF32,
    FmaF32,
    LshlAddU32,
    AddLshlU32,
    Add3U32,
    LshlOrB32,
    AndOrB32,
    Or3B32,
    MulLoU32,
    MulHiU32,
    MulHiI32,
    BfiB32,
    BfeU32,
    MadU32U24,
    AlignbitB32,
}

/// A planned source of a lane-wise VALU operation, read without a branch on its kind: lane
/// `l` reads `(v[vgpr][l] & vm) | (s[sgpr] & sm) | value`, where `vm` and `sm` are all ones
/// when `kind` has bit 0 (a VGPR) or bit 1 (an SGPR) set, else 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Source {
    /// The VGPR (0 when not a VGPR).
    pub(crate) vgpr: u8,
    /// The SGPR, in range (0 when not an SGPR).
    pub(crate) sgpr: u8,
    /// Bit 0: a VGPR; bit 1: an SGPR; neither: `value`.
    pub(crate) kind: u8,
    /// An inline constant or the literal as a 32-bit operand reads it (0 for registers).
    pub(crate) value: u32,
}

/// A planned scalar source.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Planned {
    /// An SGPR in range.
    Sgpr(u8),
    /// An inline constant or the literal, as a 32-bit operand reads it.
    Value(u32),
    /// Another scalar operand (a special register, a ttmp), read when the instruction runs.
    Read(Operand),
}
