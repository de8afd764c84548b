//! The decoded form: [`Inst`] and its [`Modifiers`].

use crate::opcode::{Encoding, Opcode};
use crate::operand::Operand;

/// The modifier and cache-control bits of an instruction; all zero when the encoding has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Modifiers {
    /// VOP3/VOP3P: clamp the result.
    pub clamp: bool,
    /// VOP3A: the output modifier (0 none, 1 ×2, 2 ×4, 3 ÷2).
    pub omod: u8,
    /// VOP3A: absolute value of source *i* in bit *i*.
    pub abs: u8,
    /// VOP3A/VOP3P: negate source *i* (VOP3P: its low half) in bit *i*.
    pub neg: u8,
    /// VOP3P: negate the high half of source *i* in bit *i*.
    pub neg_hi: u8,
    /// VOP3A/VOP3P: OP_SEL bits (VOP3A bit 3 is the destination).
    pub op_sel: u8,
    /// VOP3P: OP_SEL_HI bits.
    pub op_sel_hi: u8,
    /// Memory: globally coherent (GLC).
    pub glc: bool,
    /// Memory: system level coherent (SLC).
    pub slc: bool,
    /// gfx90a memory: the SCC (system coherent) cache bit.
    pub scc: bool,
    /// SMEM: non-volatile (NV).
    pub nv: bool,
    /// DS: global data share instead of LDS (GDS).
    pub gds: bool,
    /// MUBUF/FLAT: the data goes to LDS (LDS).
    pub lds: bool,
    /// MUBUF: VADDR holds an offset (OFFEN).
    pub offen: bool,
    /// MUBUF: VADDR holds an index (IDXEN).
    pub idxen: bool,
    /// gfx90a DS/FLAT/MUBUF: the data registers are AGPRs (ACC).
    pub acc: bool,
}

/// One decoded instruction.
///
/// Operand slots, per encoding (an unused slot is [`Operand::None`]):
///
/// | encoding | `dst` | `src` | `imm` |
/// |---|---|---|---|
/// | SOP2, SOP1, SOPC | sdst (none for `s_setpc_b64`, `s_rfe_b64`, `s_set_gpr_idx_idx`, `s_cbranch_g_fork`, `s_cbranch_join`) | ssrc0, ssrc1 (none for `s_getpc_b64`; `s_set_gpr_idx_on`: ssrc0 only) | `s_set_gpr_idx_on`: the SSRC1 field (the index mode bits) |
/// | SOPK | sdst (for `s_cmpk_*`/`s_setreg_b32`/`s_cbranch_i_fork`, `src[0]` instead) | the same register when read (`s_setreg_imm32_b32`: the literal) | simm16, sign-extended (the hwreg field of `s_getreg`/`s_setreg*`) |
/// | SOPP | — | — | simm16, sign-extended (branches: the offset in dwords) |
/// | SMEM | sdata | sbase (the first SGPR of the pair/quad), soffset (an SGPR, when IMM is clear or SOE set) | byte offset (21-bit signed, when IMM is set) |
/// | VOP2, VOP1, VOPC, VOP3 | vdst (VOPC/VOP3 SGPR results: that SGPR), carry-out/`vcc` | src0, src1, src2 (implicit `vcc` where the 32-bit form reads it; `v_madmk/madak`: the constant as `src[2]`) | — |
/// | VOP3P | vdst | src0..src2 | — |
/// | DS | vdst | addr, data0, data1 | `offset1 << 8 \| offset0` |
/// | FLAT | vdst | addr, data, saddr (global/scratch; `None` for `off`) | offset (global/scratch: 13-bit signed) |
/// | MUBUF | vdata | vaddr (read with OFFEN/IDXEN), srsrc (the first SGPR of the quad), soffset | offset (12-bit) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Inst {
    /// The operation.
    pub op: Opcode,
    /// The form it was encoded in.
    pub encoding: Encoding,
    /// Destinations.
    pub dst: [Operand; 2],
    /// Sources.
    pub src: [Operand; 3],
    /// The immediate (offset, simm16), see the table above.
    pub imm: i32,
    /// Modifiers and cache bits.
    pub mods: Modifiers,
    /// The instruction's length in dwords, including its literal.
    pub dwords: u8,
}

// An interpreter keeps a decoded kernel as a `Vec<Inst>`: the form stays small (operands 8
// bytes, an instruction 68, no heap), and changing that is a decision, not an accident.
const _: () = assert!(std::mem::size_of::<Inst>() == 68);
const _: () = assert!(std::mem::size_of::<Operand>() == 8);
