//! A small gfx9 encoder: typed constructors for the instructions hand-written kernels need
//! (kfdtool's workload kernels), each returning its machine words, a [`Program`] that resolves
//! branch labels, and the amdhsa kernel descriptor ([`DescriptorBuilder`]). It is the decoder's
//! inverse for the forms it covers: the same opcode tables ([`crate::opcode`]) and operands
//! ([`Operand`]), so what it encodes [`decode`](crate::decode) reads back.
//!
//! # Sources
//!
//! * The microcode formats of the "AMD Instinct MI200 Instruction Set Architecture" guide,
//!   chapter 12: SOP2 (`0b10` in bits 31–30, OP 29–23, SDST 22–16, SSRC1 15–8, SSRC0 7–0),
//!   SOPK (`0b1011`, OP 27–23, SDST, SIMM16), SOP1 (`0b1_0111_1101`, SDST, OP 15–8, SSRC0),
//!   SOPC (`0b1_0111_1110`, OP 22–16, SSRC1, SSRC0), SOPP (`0b1_0111_1111`, OP 22–16,
//!   SIMM16), SMEM (`0b110000`, OP 25–18, IMM 17, GLC 16, SDATA 12–6, SBASE 5–0 in register
//!   pairs; the second dword the 21-bit byte offset), VOP2 (bit 31 clear, OP 30–25, VDST
//!   24–17, VSRC1 16–9, SRC0 8–0), VOP1 (`0b0111111`, VDST, OP 16–9, SRC0), VOP3A/VOP3B
//!   (`0b110100`, OP 25–16 with VOP2's opcodes at 0x100 + op; VOP3B's SDST in 14–8; the
//!   second dword SRC2 26–18, SRC1 17–9, SRC0 8–0) and FLAT (`0b110111`, OP 24–18, SLC 17,
//!   GLC 16, SEG 15–14 with 2 for GLOBAL, the signed 13-bit OFFSET 12–0; the second dword
//!   VDST 31–24, SADDR 22–16 with 0x7f for "off", DATA 15–8, ADDR 7–0). `s_waitcnt`'s
//!   SIMM16 holds VM_CNT in bits 3–0 and 15–14, EXP_CNT in 6–4, LGKM_CNT in 11–8.
//!   gfx942 (MI300) encodes every instruction here the same way (its SC0/SC1/NT cache bits
//!   sit where gfx90a's GLC/SLC do, and this encoder sets none of them).
//! * The kernel descriptor is LLVM's AMDGPUUsage "Kernel Descriptor" for code object v3–v5
//!   (as [`KernelDescriptor`](crate::dispatch::KernelDescriptor) reads it):
//!   GRANULATED_WORKITEM_VGPR_COUNT is `ceil(vgprs / granule) - 1` with a granule of 4 on
//!   gfx906/gfx908 and 8 on gfx90a/gfx942 (whose count includes the AGPRs after
//!   ACCUM_OFFSET), GRANULATED_WAVEFRONT_SGPR_COUNT `ceil(sgprs / 8) - 1` on gfx9 (the SGPRs
//!   the kernel uses, VCC, FLAT_SCRATCH and XNACK_MASK included where it reserves them),
//!   COMPUTE_PGM_RSRC3's ACCUM_OFFSET `accum_offset / 4 - 1` on gfx90a/gfx942, and the
//!   defaults LLVM's `.amdhsa_kernel` gives (IEEE mode, DX10 clamp, f16/f64 denormals kept).
//!
//! The tests (`tests/asm.rs`) hold every constructor to `llvm-mc-19 -show-encoding` for
//! gfx90a and gfx942, the descriptor to the bytes `.amdhsa_kernel` assembles to, and a whole
//! kernel to the decoder.

use crate::exec::Target;
use crate::opcode::{FlatOp, SmemOp, Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp, Vop1Op, Vop2Op};
use crate::operand::{FloatConst, Operand, Special};

/// Why an instruction or a descriptor cannot be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    /// The operand cannot be in this slot (a VGPR as a scalar source, a constant as a
    /// destination, `Operand::None`...).
    #[error("{operand:?} cannot be the {slot}")]
    Operand {
        /// The slot: "scalar source", "scalar destination", "vector source"...
        slot: &'static str,
        /// The operand given.
        operand: Operand,
    },
    /// A field's value does not fit.
    #[error("{what} {value} is out of range ({range})")]
    Range {
        /// The field.
        what: &'static str,
        /// The value given.
        value: i64,
        /// What fits.
        range: &'static str,
    },
    /// Two different literals in one instruction (gfx9 has one literal slot).
    #[error("one instruction takes one literal, got {0:#x} and {1:#x}")]
    TwoLiterals(u32, u32),
    /// A branch names a label never bound.
    #[error("label {0} is used but never bound")]
    Unbound(usize),
    /// A label is bound twice.
    #[error("label {0} is bound twice")]
    Rebound(usize),
}

/// The encoder's result.
pub type Result<T> = std::result::Result<T, AsmError>;

/// One instruction's machine words (one to three dwords).
pub type Words = Vec<u32>;

fn range(what: &'static str, value: i64, lo: i64, hi: i64, text: &'static str) -> Result<()> {
    if value < lo || value > hi {
        return Err(AsmError::Range {
            what,
            value,
            range: text,
        });
    }
    Ok(())
}

/// The 7-bit code of a special register below the constants.
fn special_code(s: Special) -> Option<u16> {
    Some(match s {
        Special::FlatScratchLo => 102,
        Special::FlatScratchHi => 103,
        Special::XnackMaskLo => 104,
        Special::XnackMaskHi => 105,
        Special::VccLo => 106,
        Special::VccHi => 107,
        Special::M0 => 124,
        Special::ExecLo => 126,
        Special::ExecHi => 127,
        Special::SharedBase => 235,
        Special::SharedLimit => 236,
        Special::PrivateBase => 237,
        Special::PrivateLimit => 238,
        Special::PopsExitingWaveId => 239,
        Special::Vccz => 251,
        Special::Execz => 252,
        Special::Scc => 253,
        Special::LdsDirect => 254,
        // gfx11's `null`: no gfx9 code (the assembler is gfx9's).
        Special::Null => return None,
    })
}

/// The 9-bit source code of `op` and its literal, if any (the inverse of the decoder's
/// operand table). `vector`: whether VGPRs are allowed (a vector source).
fn source(op: Operand, vector: bool) -> Result<(u16, Option<u32>)> {
    let slot = if vector {
        "vector source"
    } else {
        "scalar source"
    };
    let bad = || AsmError::Operand { slot, operand: op };
    Ok(match op {
        Operand::Sgpr(n) if n <= 101 => (u16::from(n), None),
        Operand::Ttmp(n) if n <= 15 => (108 + u16::from(n), None),
        Operand::Special(s) => (special_code(s).ok_or_else(bad)?, None),
        Operand::Int(i @ 0..=64) => (128 + i as u16, None),
        Operand::Int(i @ -16..=-1) => (192 + u16::from(i.unsigned_abs()), None),
        Operand::Float(f) => (
            match f {
                FloatConst::Half => 240,
                FloatConst::NegHalf => 241,
                FloatConst::One => 242,
                FloatConst::NegOne => 243,
                FloatConst::Two => 244,
                FloatConst::NegTwo => 245,
                FloatConst::Four => 246,
                FloatConst::NegFour => 247,
                FloatConst::InvTwoPi => 248,
            },
            None,
        ),
        Operand::Literal(v) => (255, Some(v)),
        Operand::Vgpr(n) if vector => (256 + u16::from(n), None),
        _ => return Err(bad()),
    })
}

/// The 7-bit scalar destination code.
fn scalar_dst(op: Operand) -> Result<u32> {
    let bad = || AsmError::Operand {
        slot: "scalar destination",
        operand: op,
    };
    match op {
        Operand::Sgpr(n) if n <= 101 => Ok(u32::from(n)),
        Operand::Ttmp(n) if n <= 15 => Ok(108 + u32::from(n)),
        Operand::Special(s) => match special_code(s) {
            Some(c) if c < 128 => Ok(u32::from(c)),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

/// The one literal of an instruction's sources (equal literals share the slot).
fn literal(lits: &[Option<u32>]) -> Result<Option<u32>> {
    let mut one = None;
    for l in lits.iter().flatten() {
        match one {
            Some(o) if o != *l => return Err(AsmError::TwoLiterals(o, *l)),
            _ => one = Some(*l),
        }
    }
    Ok(one)
}

fn with_literal(word: u32, lit: Option<u32>) -> Words {
    let mut w = vec![word];
    w.extend(lit);
    w
}

// ---- scalar ALU ----

/// A SOP2 instruction: `op sdst, ssrc0, ssrc1`.
///
/// # Errors
/// A source that is no scalar source, a destination that is no scalar destination, two
/// different literals.
pub fn sop2(op: Sop2Op, sdst: Operand, ssrc0: Operand, ssrc1: Operand) -> Result<Words> {
    let (s0, l0) = source(ssrc0, false)?;
    let (s1, l1) = source(ssrc1, false)?;
    let lit = literal(&[l0, l1])?;
    let word = 0b10 << 30
        | u32::from(op.raw()) << 23
        | scalar_dst(sdst)? << 16
        | u32::from(s1) << 8
        | u32::from(s0);
    Ok(with_literal(word, lit))
}

/// A SOPK instruction: `op sdst, simm16`.
///
/// # Errors
/// A destination that is no scalar destination.
pub fn sopk(op: SopkOp, sdst: Operand, simm16: u16) -> Result<Words> {
    Ok(vec![
        0b1011 << 28 | u32::from(op.raw()) << 23 | scalar_dst(sdst)? << 16 | u32::from(simm16),
    ])
}

/// A SOP1 instruction: `op sdst, ssrc0`.
///
/// # Errors
/// As [`sop2`].
pub fn sop1(op: Sop1Op, sdst: Operand, ssrc0: Operand) -> Result<Words> {
    let (s0, lit) = source(ssrc0, false)?;
    let word = 0b1_0111_1101 << 23 | scalar_dst(sdst)? << 16 | u32::from(op.raw()) << 8;
    Ok(with_literal(word | u32::from(s0), lit))
}

/// A SOPC comparison: `op ssrc0, ssrc1` (the result in SCC).
///
/// # Errors
/// As [`sop2`].
pub fn sopc(op: SopcOp, ssrc0: Operand, ssrc1: Operand) -> Result<Words> {
    let (s0, l0) = source(ssrc0, false)?;
    let (s1, l1) = source(ssrc1, false)?;
    let lit = literal(&[l0, l1])?;
    let word = 0b1_0111_1110 << 23 | u32::from(op.raw()) << 16 | u32::from(s1) << 8;
    Ok(with_literal(word | u32::from(s0), lit))
}

/// A SOPP instruction: `op simm16` (a branch's SIMM16 counts dwords from the next
/// instruction, signed).
pub fn sopp(op: SoppOp, simm16: u16) -> Words {
    vec![0b1_0111_1111 << 23 | u32::from(op.raw()) << 16 | u32::from(simm16)]
}

/// `s_mov_b32 sdst, ssrc0`.
///
/// # Errors
/// As [`sop1`].
pub fn s_mov_b32(sdst: Operand, ssrc0: Operand) -> Result<Words> {
    sop1(Sop1Op::SMovB32, sdst, ssrc0)
}

/// `s_movk_i32 sdst, simm16` (sign-extended).
///
/// # Errors
/// As [`sopk`].
pub fn s_movk_i32(sdst: Operand, simm16: i16) -> Result<Words> {
    sopk(SopkOp::SMovkI32, sdst, simm16 as u16)
}

/// `s_add_u32 sdst, ssrc0, ssrc1` (the carry out in SCC).
///
/// # Errors
/// As [`sop2`].
pub fn s_add_u32(sdst: Operand, a: Operand, b: Operand) -> Result<Words> {
    sop2(Sop2Op::SAddU32, sdst, a, b)
}

/// `s_addc_u32 sdst, ssrc0, ssrc1` (adds SCC; the carry out in SCC).
///
/// # Errors
/// As [`sop2`].
pub fn s_addc_u32(sdst: Operand, a: Operand, b: Operand) -> Result<Words> {
    sop2(Sop2Op::SAddcU32, sdst, a, b)
}

/// `s_lshl_b32 sdst, ssrc0, ssrc1`.
///
/// # Errors
/// As [`sop2`].
pub fn s_lshl_b32(sdst: Operand, a: Operand, shift: Operand) -> Result<Words> {
    sop2(Sop2Op::SLshlB32, sdst, a, shift)
}

/// `s_mul_i32 sdst, ssrc0, ssrc1`.
///
/// # Errors
/// As [`sop2`].
pub fn s_mul_i32(sdst: Operand, a: Operand, b: Operand) -> Result<Words> {
    sop2(Sop2Op::SMulI32, sdst, a, b)
}

/// `s_cmp_lt_u32 ssrc0, ssrc1`.
///
/// # Errors
/// As [`sopc`].
pub fn s_cmp_lt_u32(a: Operand, b: Operand) -> Result<Words> {
    sopc(SopcOp::SCmpLtU32, a, b)
}

/// `s_cmp_eq_u32 ssrc0, ssrc1`.
///
/// # Errors
/// As [`sopc`].
pub fn s_cmp_eq_u32(a: Operand, b: Operand) -> Result<Words> {
    sopc(SopcOp::SCmpEqU32, a, b)
}

/// `s_endpgm`.
pub fn s_endpgm() -> Words {
    sopp(SoppOp::SEndpgm, 0)
}

/// `s_waitcnt` for the counters given (`None`: do not wait on that counter): VM_CNT 0–63,
/// EXP_CNT 0–7, LGKM_CNT 0–15.
///
/// # Errors
/// [`AsmError::Range`] for a count past its field.
pub fn s_waitcnt(vmcnt: Option<u8>, expcnt: Option<u8>, lgkmcnt: Option<u8>) -> Result<Words> {
    let vm = u32::from(vmcnt.unwrap_or(63));
    let exp = u32::from(expcnt.unwrap_or(7));
    let lgkm = u32::from(lgkmcnt.unwrap_or(15));
    range("vmcnt", i64::from(vm), 0, 63, "0 to 63")?;
    range("expcnt", i64::from(exp), 0, 7, "0 to 7")?;
    range("lgkmcnt", i64::from(lgkm), 0, 15, "0 to 15")?;
    let simm = (vm & 0xf) | (vm >> 4) << 14 | exp << 4 | lgkm << 8;
    Ok(sopp(SoppOp::SWaitcnt, simm as u16))
}

// ---- scalar memory ----

/// An SMEM load: `op s[sdata...], s[sbase:sbase+1], offset` (an immediate byte offset).
///
/// # Errors
/// [`AsmError::Range`] for an odd `sbase`, registers past `s101`, or an offset past 20 bits.
pub fn smem(op: SmemOp, sdata: u8, sbase: u8, offset: u32) -> Result<Words> {
    range("sdata", i64::from(sdata), 0, 101, "s0 to s101")?;
    if !sbase.is_multiple_of(2) || sbase > 100 {
        return Err(AsmError::Range {
            what: "sbase",
            value: i64::from(sbase),
            range: "an even SGPR from s0 to s100",
        });
    }
    range(
        "SMEM offset",
        i64::from(offset),
        0,
        (1 << 20) - 1,
        "0 to 2^20-1",
    )?;
    Ok(vec![
        0b11_0000 << 26
            | u32::from(op.raw()) << 18
            | 1 << 17
            | u32::from(sdata) << 6
            | u32::from(sbase >> 1),
        offset,
    ])
}

/// `s_load_dword s[sdata], s[sbase:sbase+1], offset`.
///
/// # Errors
/// As [`smem`].
pub fn s_load_dword(sdata: u8, sbase: u8, offset: u32) -> Result<Words> {
    smem(SmemOp::SLoadDword, sdata, sbase, offset)
}

/// `s_load_dwordx2 s[sdata:sdata+1], s[sbase:sbase+1], offset`.
///
/// # Errors
/// As [`smem`].
pub fn s_load_dwordx2(sdata: u8, sbase: u8, offset: u32) -> Result<Words> {
    smem(SmemOp::SLoadDwordx2, sdata, sbase, offset)
}

/// `s_load_dwordx4 s[sdata:sdata+3], s[sbase:sbase+1], offset`.
///
/// # Errors
/// As [`smem`].
pub fn s_load_dwordx4(sdata: u8, sbase: u8, offset: u32) -> Result<Words> {
    smem(SmemOp::SLoadDwordx4, sdata, sbase, offset)
}

// ---- vector ALU ----

/// A VOP2 instruction: `op vdst, src0, vsrc1` (carry ops read and write VCC implicitly).
///
/// # Errors
/// A `src0` that is no source.
pub fn vop2(op: Vop2Op, vdst: u8, src0: Operand, vsrc1: u8) -> Result<Words> {
    let (s0, lit) = source(src0, true)?;
    let word = u32::from(op.raw()) << 25 | u32::from(vdst) << 17 | u32::from(vsrc1) << 9;
    Ok(with_literal(word | u32::from(s0), lit))
}

/// A VOP1 instruction: `op vdst, src0`.
///
/// # Errors
/// As [`vop2`].
pub fn vop1(op: Vop1Op, vdst: u8, src0: Operand) -> Result<Words> {
    let (s0, lit) = source(src0, true)?;
    let word = 0b011_1111 << 25 | u32::from(vdst) << 17 | u32::from(op.raw()) << 9;
    Ok(with_literal(word | u32::from(s0), lit))
}

/// A VOP2 carry operation in its VOP3B form: `op vdst, sdst, src0, src1[, src2]` with the
/// carry out in the SGPR pair (or VCC) `sdst` and, for `v_addc`/`v_subb`, the carry in from
/// `src2`. gfx9 VOP3 takes no literal.
///
/// # Errors
/// A literal or other non-operand in a source, a destination that is no scalar destination.
pub fn vop3b_from_vop2(
    op: Vop2Op,
    vdst: u8,
    sdst: Operand,
    src0: Operand,
    src1: Operand,
    src2: Operand,
) -> Result<Words> {
    let no_literal = |o: Operand| match o {
        Operand::Literal(_) => Err(AsmError::Operand {
            slot: "VOP3 source (gfx9 has no VOP3 literal)",
            operand: o,
        }),
        Operand::None => Ok(0),
        _ => Ok(source(o, true)?.0),
    };
    let (s0, s1, s2) = (no_literal(src0)?, no_literal(src1)?, no_literal(src2)?);
    Ok(vec![
        0b11_0100 << 26
            | (0x100 + u32::from(op.raw())) << 16
            | scalar_dst(sdst)? << 8
            | u32::from(vdst),
        u32::from(s2) << 18 | u32::from(s1) << 9 | u32::from(s0),
    ])
}

/// `v_mov_b32 vdst, src0`.
///
/// # Errors
/// As [`vop1`].
pub fn v_mov_b32(vdst: u8, src0: Operand) -> Result<Words> {
    vop1(Vop1Op::VMovB32, vdst, src0)
}

/// `v_and_b32 vdst, src0, vsrc1`.
///
/// # Errors
/// As [`vop2`].
pub fn v_and_b32(vdst: u8, src0: Operand, vsrc1: u8) -> Result<Words> {
    vop2(Vop2Op::VAndB32, vdst, src0, vsrc1)
}

/// `v_add_u32 vdst, src0, vsrc1` (no carry).
///
/// # Errors
/// As [`vop2`].
pub fn v_add_u32(vdst: u8, src0: Operand, vsrc1: u8) -> Result<Words> {
    vop2(Vop2Op::VAddU32, vdst, src0, vsrc1)
}

/// `v_lshlrev_b32 vdst, shift, vsrc1` (`vsrc1 << shift`).
///
/// # Errors
/// As [`vop2`].
pub fn v_lshlrev_b32(vdst: u8, shift: Operand, vsrc1: u8) -> Result<Words> {
    vop2(Vop2Op::VLshlrevB32, vdst, shift, vsrc1)
}

/// `v_lshrrev_b32 vdst, shift, vsrc1` (`vsrc1 >> shift`).
///
/// # Errors
/// As [`vop2`].
pub fn v_lshrrev_b32(vdst: u8, shift: Operand, vsrc1: u8) -> Result<Words> {
    vop2(Vop2Op::VLshrrevB32, vdst, shift, vsrc1)
}

/// `v_add_co_u32_e32 vdst, vcc, src0, vsrc1` (the carry out in VCC).
///
/// # Errors
/// As [`vop2`].
pub fn v_add_co_u32(vdst: u8, src0: Operand, vsrc1: u8) -> Result<Words> {
    vop2(Vop2Op::VAddCoU32, vdst, src0, vsrc1)
}

/// `v_addc_co_u32_e32 vdst, vcc, src0, vsrc1, vcc` (adds VCC's carry; the carry out in VCC).
///
/// # Errors
/// As [`vop2`].
pub fn v_addc_co_u32(vdst: u8, src0: Operand, vsrc1: u8) -> Result<Words> {
    vop2(Vop2Op::VAddcCoU32, vdst, src0, vsrc1)
}

/// `v_add_co_u32_e64 vdst, sdst, src0, src1` (the carry out in the SGPR pair `sdst`).
///
/// # Errors
/// As [`vop3b_from_vop2`].
pub fn v_add_co_u32_e64(vdst: u8, sdst: Operand, src0: Operand, src1: Operand) -> Result<Words> {
    vop3b_from_vop2(Vop2Op::VAddCoU32, vdst, sdst, src0, src1, Operand::None)
}

/// `v_addc_co_u32_e64 vdst, sdst, src0, src1, carry_in` (the carry in from the SGPR pair
/// `carry_in`, out to `sdst`).
///
/// # Errors
/// As [`vop3b_from_vop2`].
pub fn v_addc_co_u32_e64(
    vdst: u8,
    sdst: Operand,
    src0: Operand,
    src1: Operand,
    carry_in: Operand,
) -> Result<Words> {
    vop3b_from_vop2(Vop2Op::VAddcCoU32, vdst, sdst, src0, src1, carry_in)
}

// ---- global memory ----

/// The `SADDR` of a GLOBAL access: an SGPR pair base (with a 32-bit VGPR offset), or none
/// (a 64-bit VGPR address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saddr {
    /// `off`: the address is the VGPR pair `vaddr`.
    Off,
    /// `s[n:n+1]` (n even) plus the VGPR `vaddr` as an unsigned 32-bit offset.
    Sgpr(u8),
}

/// A GLOBAL instruction (FLAT with SEG 2): `op` with `vdst` (loads), `vdata` (stores),
/// `vaddr`, `saddr` and a signed 13-bit byte `offset`.
///
/// # Errors
/// [`AsmError::Range`] for an offset outside -4096..=4095 or an odd or too high SADDR.
pub fn global(
    op: FlatOp,
    vdst: u8,
    vaddr: u8,
    vdata: u8,
    saddr: Saddr,
    offset: i16,
) -> Result<Words> {
    range(
        "GLOBAL offset",
        i64::from(offset),
        -4096,
        4095,
        "-4096 to 4095",
    )?;
    let sa = match saddr {
        Saddr::Off => 0x7f,
        Saddr::Sgpr(n) if n.is_multiple_of(2) && n <= 100 => u32::from(n),
        Saddr::Sgpr(n) => {
            return Err(AsmError::Range {
                what: "saddr",
                value: i64::from(n),
                range: "an even SGPR from s0 to s100",
            });
        }
    };
    Ok(vec![
        0b11_0111 << 26 | u32::from(op.raw()) << 18 | 2 << 14 | (offset as u32 & 0x1fff),
        u32::from(vdst) << 24 | sa << 16 | u32::from(vdata) << 8 | u32::from(vaddr),
    ])
}

/// `global_load_dword vdst, vaddr, saddr offset:offset`.
///
/// # Errors
/// As [`global`].
pub fn global_load_dword(vdst: u8, vaddr: u8, saddr: Saddr, offset: i16) -> Result<Words> {
    global(FlatOp::LoadDword, vdst, vaddr, 0, saddr, offset)
}

/// `global_load_dwordx4 v[vdst:vdst+3], vaddr, saddr offset:offset`.
///
/// # Errors
/// As [`global`].
pub fn global_load_dwordx4(vdst: u8, vaddr: u8, saddr: Saddr, offset: i16) -> Result<Words> {
    global(FlatOp::LoadDwordx4, vdst, vaddr, 0, saddr, offset)
}

/// `global_store_dword vaddr, vdata, saddr offset:offset`.
///
/// # Errors
/// As [`global`].
pub fn global_store_dword(vaddr: u8, vdata: u8, saddr: Saddr, offset: i16) -> Result<Words> {
    global(FlatOp::StoreDword, 0, vaddr, vdata, saddr, offset)
}

/// `global_store_dwordx4 vaddr, v[vdata:vdata+3], saddr offset:offset`.
///
/// # Errors
/// As [`global`].
pub fn global_store_dwordx4(vaddr: u8, vdata: u8, saddr: Saddr, offset: i16) -> Result<Words> {
    global(FlatOp::StoreDwordx4, 0, vaddr, vdata, saddr, offset)
}

// ---- programs with labels ----

/// A branch target of a [`Program`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label(usize);

/// Machine code being assembled: instructions appended in order, branches to labels
/// resolved by [`Program::finish`] (a SOPP branch's SIMM16 counts dwords from the
/// instruction after it).
#[derive(Debug, Default, Clone)]
pub struct Program {
    words: Vec<u32>,
    labels: Vec<Option<usize>>,
    /// (the branch's dword index, its target).
    fixups: Vec<(usize, Label)>,
}

impl Program {
    /// An empty program.
    pub fn new() -> Program {
        Program::default()
    }

    /// Appends an instruction's words.
    pub fn push(&mut self, words: Words) -> &mut Program {
        self.words.extend(words);
        self
    }

    /// A new label, not yet bound.
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Binds `label` to the next instruction.
    ///
    /// # Errors
    /// [`AsmError::Rebound`] for a label bound before.
    pub fn bind(&mut self, label: Label) -> Result<&mut Program> {
        let slot = self
            .labels
            .get_mut(label.0)
            .ok_or(AsmError::Unbound(label.0))?;
        if slot.is_some() {
            return Err(AsmError::Rebound(label.0));
        }
        *slot = Some(self.words.len());
        Ok(self)
    }

    /// Appends a SOPP branch (`s_branch`, `s_cbranch_*`) to `label`.
    pub fn branch(&mut self, op: SoppOp, label: Label) -> &mut Program {
        self.fixups.push((self.words.len(), label));
        self.push(sopp(op, 0))
    }

    /// The machine words, every branch resolved.
    ///
    /// # Errors
    /// [`AsmError::Unbound`] for a branch to a label never bound; [`AsmError::Range`] for one
    /// more than 32768 dwords away.
    pub fn finish(mut self) -> Result<Vec<u32>> {
        for &(at, label) in &self.fixups {
            let target = self
                .labels
                .get(label.0)
                .copied()
                .flatten()
                .ok_or(AsmError::Unbound(label.0))?;
            let delta = target as i64 - (at as i64 + 1);
            range(
                "branch offset",
                delta,
                -32768,
                32767,
                "a signed 16-bit dword count",
            )?;
            self.words[at] = self.words[at] & 0xffff_0000 | (delta as u16 as u32);
        }
        Ok(self.words)
    }
}

// ---- the kernel descriptor ----

/// `kernel_code_properties` bits this builder sets (AMDGPUUsage "Kernel Descriptor").
const KCP_DISPATCH_PTR: u16 = 1 << 1;
const KCP_QUEUE_PTR: u16 = 1 << 2;
const KCP_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
/// COMPUTE_PGM_RSRC1: FLOAT_DENORM_MODE_16_64 (bits 18–19, 3: keep), DX10_CLAMP (21),
/// IEEE_MODE (23): what `.amdhsa_kernel` sets by default.
const RSRC1_DEFAULTS: u32 = 3 << 18 | 1 << 21 | 1 << 23;

/// An amdhsa kernel descriptor (64 bytes) for a code-object-less kernel: register counts,
/// segment sizes, the user and system SGPRs the kernel wants, and where its code is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorBuilder {
    target: Target,
    vgprs: u32,
    sgprs: u32,
    /// `None`: every VGPR is an ArchVGPR (the offset is the VGPR count rounded up to 4).
    accum_offset: Option<u32>,
    group_segment: u32,
    private_segment: u32,
    kernarg_size: u32,
    entry_offset: i64,
    user_sgprs: u16,
    workgroup_ids: u8,
    workitem_ids: u8,
}

impl DescriptorBuilder {
    /// A descriptor for `target`: one VGPR and one SGPR, no segments, no user SGPRs, the
    /// work-group id X in the first SGPR after the user SGPRs and the work-item id X in `v0`
    /// (`.amdhsa_kernel`'s defaults).
    pub fn new(target: Target) -> DescriptorBuilder {
        DescriptorBuilder {
            target,
            vgprs: 1,
            sgprs: 1,
            accum_offset: None,
            group_segment: 0,
            private_segment: 0,
            kernarg_size: 0,
            entry_offset: 0,
            user_sgprs: 0,
            workgroup_ids: 1,
            workitem_ids: 0,
        }
    }

    /// VGPRs the kernel uses (on gfx90a/gfx942 the ArchVGPRs and AGPRs together), 1 to 512.
    pub fn vgprs(mut self, n: u32) -> Self {
        self.vgprs = n;
        self
    }

    /// SGPRs the kernel uses with the ones it reserves (VCC, FLAT_SCRATCH, XNACK_MASK: two
    /// each), 1 to 112.
    pub fn sgprs(mut self, n: u32) -> Self {
        self.sgprs = n;
        self
    }

    /// gfx90a/gfx942: the first AGPR's index in the unified register file, a multiple of 4
    /// from 4 to 256 (by default the VGPR count rounded up to 4: no AGPRs, so every VGPR
    /// the kernel names below [`vgprs`](Self::vgprs) is an ArchVGPR).
    pub fn accum_offset(mut self, n: u32) -> Self {
        self.accum_offset = Some(n);
        self
    }

    /// `GROUP_SEGMENT_FIXED_SIZE`: static LDS bytes.
    pub fn group_segment(mut self, bytes: u32) -> Self {
        self.group_segment = bytes;
        self
    }

    /// `PRIVATE_SEGMENT_FIXED_SIZE`: scratch bytes per work-item (the kernel then needs the
    /// queue's scratch; this builder does not set up the private segment buffer).
    pub fn private_segment(mut self, bytes: u32) -> Self {
        self.private_segment = bytes;
        self
    }

    /// `KERNARG_SIZE`: the kernel arguments' bytes.
    pub fn kernarg_size(mut self, bytes: u32) -> Self {
        self.kernarg_size = bytes;
        self
    }

    /// `KERNEL_CODE_ENTRY_BYTE_OFFSET`: from the descriptor's address to the code's (the
    /// code 256-byte aligned).
    pub fn entry_offset(mut self, bytes: i64) -> Self {
        self.entry_offset = bytes;
        self
    }

    /// The dispatch packet's address in two user SGPRs.
    pub fn dispatch_ptr(mut self) -> Self {
        self.user_sgprs |= KCP_DISPATCH_PTR;
        self
    }

    /// The `amd_queue_t`'s address in two user SGPRs.
    pub fn queue_ptr(mut self) -> Self {
        self.user_sgprs |= KCP_QUEUE_PTR;
        self
    }

    /// The kernarg segment's address in two user SGPRs (after the dispatch and queue
    /// pointers when they are on).
    pub fn kernarg_segment_ptr(mut self) -> Self {
        self.user_sgprs |= KCP_KERNARG_SEGMENT_PTR;
        self
    }

    /// How many work-group ids the waves get in system SGPRs: 0 to 3 (X, Y, Z).
    pub fn workgroup_ids(mut self, n: u8) -> Self {
        self.workgroup_ids = n;
        self
    }

    /// Which work-item ids the waves get beyond X: 0 (X), 1 (X, Y), 2 (X, Y, Z).
    pub fn workitem_ids(mut self, n: u8) -> Self {
        self.workitem_ids = n;
        self
    }

    /// The 64 bytes.
    ///
    /// # Errors
    /// [`AsmError::Range`] for register counts, an accumulator offset or id counts out of
    /// range, or an entry offset not a multiple of 256 from a 64-byte aligned descriptor.
    pub fn build(&self) -> Result<[u8; 64]> {
        let unified = matches!(self.target, Target::Gfx90a | Target::Gfx942);
        let vgpr_max = if unified { 512 } else { 256 };
        range(
            "VGPRs",
            i64::from(self.vgprs),
            1,
            vgpr_max,
            "1 to 256 (512 on gfx90a/gfx942)",
        )?;
        range("SGPRs", i64::from(self.sgprs), 1, 112, "1 to 112")?;
        range(
            "work-group ids",
            i64::from(self.workgroup_ids),
            0,
            3,
            "0 to 3",
        )?;
        range(
            "work-item ids",
            i64::from(self.workitem_ids),
            0,
            2,
            "0 to 2",
        )?;
        if self.entry_offset % 64 != 0 {
            return Err(AsmError::Range {
                what: "entry offset",
                value: self.entry_offset,
                range: "a multiple of 64 (code 256-byte aligned, descriptor 64-byte aligned)",
            });
        }
        let granule = if unified { 8 } else { 4 };
        let mut rsrc1 = RSRC1_DEFAULTS;
        rsrc1 |= self.vgprs.div_ceil(granule) - 1;
        rsrc1 |= (self.sgprs.div_ceil(8) - 1) << 6;
        let mut rsrc3 = 0;
        if unified {
            let accum = self
                .accum_offset
                .unwrap_or_else(|| self.vgprs.next_multiple_of(4).min(256));
            if !accum.is_multiple_of(4) || !(4..=256).contains(&accum) {
                return Err(AsmError::Range {
                    what: "accum_offset",
                    value: i64::from(accum),
                    range: "a multiple of 4 from 4 to 256",
                });
            }
            rsrc3 = accum / 4 - 1;
        }
        let user: u32 = [KCP_DISPATCH_PTR, KCP_QUEUE_PTR, KCP_KERNARG_SEGMENT_PTR]
            .iter()
            .filter(|b| self.user_sgprs & **b != 0)
            .count() as u32
            * 2;
        let mut rsrc2 = u32::from(self.private_segment > 0) | user << 1;
        for i in 0..u32::from(self.workgroup_ids) {
            rsrc2 |= 1 << (7 + i);
        }
        rsrc2 |= u32::from(self.workitem_ids) << 11;
        let mut raw = [0u8; 64];
        raw[0..4].copy_from_slice(&self.group_segment.to_le_bytes());
        raw[4..8].copy_from_slice(&self.private_segment.to_le_bytes());
        raw[8..12].copy_from_slice(&self.kernarg_size.to_le_bytes());
        raw[16..24].copy_from_slice(&self.entry_offset.to_le_bytes());
        raw[44..48].copy_from_slice(&rsrc3.to_le_bytes());
        raw[48..52].copy_from_slice(&rsrc1.to_le_bytes());
        raw[52..56].copy_from_slice(&rsrc2.to_le_bytes());
        raw[56..58].copy_from_slice(&self.user_sgprs.to_le_bytes());
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_operands_and_fields_are_typed_errors() {
        assert!(matches!(
            s_mov_b32(Operand::Int(1), Operand::Sgpr(0)),
            Err(AsmError::Operand { .. })
        ));
        assert!(matches!(
            s_add_u32(Operand::Sgpr(0), Operand::Vgpr(0), Operand::Sgpr(1)),
            Err(AsmError::Operand { .. })
        ));
        assert_eq!(
            s_add_u32(Operand::Sgpr(0), Operand::Literal(1), Operand::Literal(2)),
            Err(AsmError::TwoLiterals(1, 2))
        );
        assert!(s_add_u32(Operand::Sgpr(0), Operand::Literal(7), Operand::Literal(7)).is_ok());
        assert!(s_load_dword(0, 1, 0).is_err());
        assert!(s_load_dword(0, 0, 1 << 20).is_err());
        assert!(global_load_dword(0, 0, Saddr::Off, 4096).is_err());
        assert!(global_load_dword(0, 0, Saddr::Sgpr(3), 0).is_err());
        assert!(s_waitcnt(Some(64), None, None).is_err());
        assert!(
            v_add_co_u32_e64(0, Operand::Sgpr(4), Operand::Literal(1), Operand::Vgpr(0)).is_err()
        );
        let mut p = Program::new();
        let l = p.label();
        p.branch(SoppOp::SBranch, l);
        assert_eq!(p.clone().finish(), Err(AsmError::Unbound(0)));
        p.bind(l).unwrap();
        assert_eq!(p.bind(l).err(), Some(AsmError::Rebound(0)));
        assert_eq!(p.finish().unwrap(), [0xbf82_0000]);
        let d = DescriptorBuilder::new(Target::Gfx90a);
        assert!(d.vgprs(0).build().is_err());
        assert!(d.accum_offset(6).build().is_err());
        assert!(d.entry_offset(100).build().is_err());
        assert!(
            DescriptorBuilder::new(Target::Gfx906)
                .vgprs(257)
                .build()
                .is_err()
        );
    }
}
