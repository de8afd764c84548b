//! What the code cache keeps beside a decoded instruction so that running it again costs
//! less than decoding its form again: a [`Plan`], made once when the instruction first runs
//! (`exec::run`) and kept with it in its [`crate::exec::CodeCache`] slot.
//!
//! Only data lives here (the module uses nothing of the executor's, so the cache, in
//! `wave`, can hold it without a module cycle): the vector ALU's fast path makes a plan
//! (`valu::fast::Plan::new`) and runs it (`valu::fast::Plan::run`), with the same lane
//! computation as its per-step path.

use crate::inst::Inst;
use crate::opcode::Opcode;
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
    /// A SOP2, SOPK, SOP1 or SOPC instruction: run by reference (`salu::execute_alu`), with
    /// no copy of it.
    Scalar,
}

/// A lane-wise VALU instruction of the fast path with its form resolved: the operation, the
/// destination VGPR and each source's kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The operation (its lane function is the fast path's for this opcode).
    pub(crate) op: Opcode,
    /// The destination VGPR.
    pub(crate) d: u8,
    /// The sources, slot by slot (unused slots: `Value(0)`).
    pub(crate) src: [Planned; 3],
    /// VOP3 `abs` bits, by source.
    pub(crate) abs: u8,
    /// VOP3 `neg` bits, by source.
    pub(crate) neg: u8,
}

/// A planned source.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Planned {
    /// A VGPR.
    Vgpr(u8),
    /// An SGPR in range.
    Sgpr(u8),
    /// An inline constant or the literal, as a 32-bit operand reads it.
    Value(u32),
    /// Another scalar operand (a special register, a ttmp), read when the instruction runs.
    Read(Operand),
}
