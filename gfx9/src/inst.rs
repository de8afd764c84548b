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
/// | DPP, SDWA (VOP1/VOP2/VOPC) | as the 32-bit form (VOPC SDWA: SDST when SD is set, else `vcc`) | as the 32-bit form (src0 from the second dword; SDWA: a scalar one when S0/S1 say so) | the controls: [`Inst::dpp`], [`Inst::sdwa`] |
/// | VOP3P | vdst | src0..src2 | — |
/// | VOP3P-MAI (`v_mfma_*`) | vdst (an AGPR when `mods.acc`, ACC_CD) | src0, src1 (AGPRs per `mods.op_sel_hi` bits 0/1, ACC), src2 (as vdst) | `CBSZ \| ABID << 3 \| BLGP << 7` |
/// | DS | vdst | addr, data0, data1 | `offset1 << 8 \| offset0` |
/// | FLAT | vdst | addr, data, saddr (global/scratch; `None` for `off`) | offset (global/scratch: 13-bit signed) |
/// | MUBUF | vdata | vaddr (read with OFFEN/IDXEN), srsrc (the first SGPR of the quad), soffset | offset (12-bit) |
/// | MTBUF | vdata | as MUBUF | `offset \| DFMT << 12 \| NFMT << 16` |
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
// bytes, an instruction 68, no heap), and changing that is a decision, not an accident. The
// DPP and SDWA controls fit the `imm` the VALU forms otherwise leave unused, so they did not
// grow it.
const _: () = assert!(std::mem::size_of::<Inst>() == 68);
const _: () = assert!(std::mem::size_of::<Operand>() == 8);

impl Inst {
    /// The DPP controls of an [`Encoding::Dpp`](crate::Encoding::Dpp) instruction.
    pub fn dpp(&self) -> Option<Dpp> {
        (self.encoding == crate::Encoding::Dpp).then(|| {
            let imm = self.imm as u32;
            Dpp {
                ctrl: (imm & 0x1ff) as u16,
                bound_ctrl: imm >> 9 & 1 == 1,
                bank_mask: (imm >> 10 & 0xf) as u8,
                row_mask: (imm >> 14 & 0xf) as u8,
            }
        })
    }

    /// The SDWA selects of an [`Encoding::Sdwa`](crate::Encoding::Sdwa) instruction.
    pub fn sdwa(&self) -> Option<Sdwa> {
        (self.encoding == crate::Encoding::Sdwa).then(|| {
            let imm = self.imm as u32;
            Sdwa {
                dst_sel: (imm & 7) as u8,
                dst_unused: (imm >> 3 & 3) as u8,
                src0_sel: (imm >> 5 & 7) as u8,
                src0_sext: imm >> 8 & 1 == 1,
                src1_sel: (imm >> 9 & 7) as u8,
                src1_sext: imm >> 12 & 1 == 1,
            }
        })
    }
}

/// DPP ("data parallel primitives") controls: which lane src0 is read from ("AMD Instinct
/// MI200 ISA", section 12.x "VOP_DPP": DPP_CTRL, BOUND_CTRL, BANK_MASK, ROW_MASK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dpp {
    /// DPP_CTRL: `0x00..=0xff` quad_perm, `0x101..` row_shl, `0x111..` row_shr, `0x121..`
    /// row_ror, `0x130` wave_shl, `0x134` wave_rol, `0x138` wave_shr, `0x13c` wave_ror,
    /// `0x140` row_mirror, `0x141` row_half_mirror, `0x142` row_bcast15, `0x143` row_bcast31,
    /// `0x150..=0x15f` row_newbcast (gfx90a).
    pub ctrl: u16,
    /// BOUND_CTRL (LLVM's `bound_ctrl:0`/`bound_ctrl:1`): a lane whose source lane is out of
    /// range reads 0 instead of not being written.
    pub bound_ctrl: bool,
    /// BANK_MASK: bank *b* (lanes `4b..4b+4` of every row) is written only when bit *b* is set.
    pub bank_mask: u8,
    /// ROW_MASK: row *r* (lanes `16r..16r+16`) is written only when bit *r* is set.
    pub row_mask: u8,
}

/// Whether `ctrl` is a DPP_CTRL value gfx90a defines (the others are reserved).
pub(crate) fn dpp_ctrl_valid(ctrl: u16) -> bool {
    matches!(ctrl,
        0x000..=0x0ff | 0x101..=0x10f | 0x111..=0x11f | 0x121..=0x12f
        | 0x130 | 0x134 | 0x138 | 0x13c | 0x140..=0x143 | 0x150..=0x15f)
}

/// SDWA ("sub-dword addressing") selects ("AMD Instinct MI200 ISA", section 12.x
/// "VOP_SDWA"): a select is 0..=3 byte *n*, 4 word 0, 5 word 1, 6 the whole dword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sdwa {
    /// DST_SEL: where in the destination the result goes.
    pub dst_sel: u8,
    /// DST_UNUSED: the other bits are 0 (pad), the result's sign (sext) or kept (preserve).
    pub dst_unused: u8,
    /// SRC0_SEL.
    pub src0_sel: u8,
    /// SRC0_SEXT: sign-extend the selected src0 bits (integer operations).
    pub src0_sext: bool,
    /// SRC1_SEL.
    pub src1_sel: u8,
    /// SRC1_SEXT.
    pub src1_sext: bool,
}
