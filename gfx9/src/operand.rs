//! Operands: the 9-bit source operand encoding shared by the scalar and vector encodings
//! ("AMD Instinct MI200 ISA", section 3.6 "Operand encoding" / the SSRC and SRC tables of
//! chapter 12, "Microcode formats"), the 7-bit scalar destination and the 8-bit VGPR fields.

use crate::error::DecodeError;

/// One decoded operand: a register, a special register, an inline constant or the literal.
///
/// A 64-bit operand (`s[2:3]`, `v[4:5]`) is named by its first register; how many registers
/// an operand spans is the opcode's business, not the encoding's. The field is kept as
/// encoded: a 64-bit SGPR operand with an odd number names the even pair below it (LLVM
/// disassembles field 9 as `s[8:9]`), which the executor, knowing the width, applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Operand {
    /// No operand in this slot.
    #[default]
    None,
    /// Scalar register `s<n>` (codes 0..=101).
    Sgpr(u8),
    /// Vector register `v<n>` (codes 256..=511 in a 9-bit source; 8-bit VGPR fields).
    Vgpr(u8),
    /// Trap-handler temporary `ttmp<n>` (codes 108..=123).
    Ttmp(u8),
    /// A special register (VCC, EXEC, M0, SCC, the aperture bases...).
    Special(Special),
    /// An inline integer constant, -16..=64 (codes 128..=208).
    Int(i8),
    /// An inline floating-point constant (codes 240..=248).
    Float(FloatConst),
    /// The 32-bit literal constant that follows the instruction (code 255).
    Literal(u32),
}

/// The special registers a source or scalar destination can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Special {
    /// `flat_scratch_lo` (102).
    FlatScratchLo,
    /// `flat_scratch_hi` (103).
    FlatScratchHi,
    /// `xnack_mask_lo` (104).
    XnackMaskLo,
    /// `xnack_mask_hi` (105).
    XnackMaskHi,
    /// `vcc_lo` (106); as a 64-bit operand, `vcc`.
    VccLo,
    /// `vcc_hi` (107).
    VccHi,
    /// `m0` (124; gfx11: 125).
    M0,
    /// gfx11's `null` (124): reads zero, drops writes.
    Null,
    /// `exec_lo` (126); as a 64-bit operand, `exec`.
    ExecLo,
    /// `exec_hi` (127).
    ExecHi,
    /// `src_shared_base` (235), the LDS aperture base.
    SharedBase,
    /// `src_shared_limit` (236).
    SharedLimit,
    /// `src_private_base` (237), the scratch aperture base.
    PrivateBase,
    /// `src_private_limit` (238).
    PrivateLimit,
    /// `src_pops_exiting_wave_id` (239).
    PopsExitingWaveId,
    /// `vccz` (251), VCC is zero.
    Vccz,
    /// `execz` (252), EXEC is zero.
    Execz,
    /// `scc` (253), the scalar condition code.
    Scc,
    /// `lds_direct` (254).
    LdsDirect,
}

/// The inline floating-point constants (codes 240..=248). The value an operation reads
/// depends on its type (f16, f32, f64), so the constant is kept symbolic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FloatConst {
    /// 0.5 (240).
    Half,
    /// -0.5 (241).
    NegHalf,
    /// 1.0 (242).
    One,
    /// -1.0 (243).
    NegOne,
    /// 2.0 (244).
    Two,
    /// -2.0 (245).
    NegTwo,
    /// 4.0 (246).
    Four,
    /// -4.0 (247).
    NegFour,
    /// 1/(2π) (248).
    InvTwoPi,
}

impl FloatConst {
    /// The constant as an `f64` (1/(2π) as the hardware's f64 value 0.15915494309189532).
    pub fn value(self) -> f64 {
        match self {
            Self::Half => 0.5,
            Self::NegHalf => -0.5,
            Self::One => 1.0,
            Self::NegOne => -1.0,
            Self::Two => 2.0,
            Self::NegTwo => -2.0,
            Self::Four => 4.0,
            Self::NegFour => -4.0,
            Self::InvTwoPi => 0.159_154_943_091_895_32,
        }
    }
}

/// Source code 249: the SDWA sub-dword form (a second dword of SDWA controls follows).
pub(crate) const SRC_SDWA: u16 = 249;
/// Source code 250: the DPP form (a second dword of DPP controls follows).
pub(crate) const SRC_DPP: u16 = 250;
/// Source code 255: a 32-bit literal follows the instruction.
pub(crate) const SRC_LITERAL: u16 = 255;

/// Decodes a 9-bit source operand code (an 8-bit scalar source is the same with bit 8 clear).
/// The literal (255) is returned as `Literal(0)`; the caller fills in the dword it reads.
pub(crate) fn source(code: u16) -> Result<Operand, DecodeError> {
    Ok(match code {
        0..=101 => Operand::Sgpr(code as u8),
        102..=127 => special_low(code)?,
        128..=192 => Operand::Int((code - 128) as i8),
        193..=208 => Operand::Int(-((code - 192) as i8)),
        235 => Operand::Special(Special::SharedBase),
        236 => Operand::Special(Special::SharedLimit),
        237 => Operand::Special(Special::PrivateBase),
        238 => Operand::Special(Special::PrivateLimit),
        239 => Operand::Special(Special::PopsExitingWaveId),
        240 => Operand::Float(FloatConst::Half),
        241 => Operand::Float(FloatConst::NegHalf),
        242 => Operand::Float(FloatConst::One),
        243 => Operand::Float(FloatConst::NegOne),
        244 => Operand::Float(FloatConst::Two),
        245 => Operand::Float(FloatConst::NegTwo),
        246 => Operand::Float(FloatConst::Four),
        247 => Operand::Float(FloatConst::NegFour),
        248 => Operand::Float(FloatConst::InvTwoPi),
        251 => Operand::Special(Special::Vccz),
        252 => Operand::Special(Special::Execz),
        253 => Operand::Special(Special::Scc),
        254 => Operand::Special(Special::LdsDirect),
        SRC_LITERAL => Operand::Literal(0),
        256..=511 => Operand::Vgpr((code - 256) as u8),
        _ => return Err(DecodeError::IllegalOperand { code }),
    })
}

/// Decodes a 7-bit scalar destination (SDST): SGPRs and the writable special registers.
pub(crate) fn scalar_dst(code: u16) -> Result<Operand, DecodeError> {
    match code {
        0..=101 => Ok(Operand::Sgpr(code as u8)),
        102..=127 => special_low(code),
        _ => Err(DecodeError::IllegalOperand { code }),
    }
}

/// Codes 102..=127: the special registers below the constants, and the trap temporaries.
/// 125 is reserved on gfx9: LLVM 19's disassembler prints it as `null` (gfx10's register),
/// but its assembler refuses `null` for gfx90a ("not supported on this GPU").
fn special_low(code: u16) -> Result<Operand, DecodeError> {
    Ok(match code {
        102 => Operand::Special(Special::FlatScratchLo),
        103 => Operand::Special(Special::FlatScratchHi),
        104 => Operand::Special(Special::XnackMaskLo),
        105 => Operand::Special(Special::XnackMaskHi),
        106 => Operand::Special(Special::VccLo),
        107 => Operand::Special(Special::VccHi),
        108..=123 => Operand::Ttmp((code - 108) as u8),
        124 => Operand::Special(Special::M0),
        126 => Operand::Special(Special::ExecLo),
        127 => Operand::Special(Special::ExecHi),
        _ => return Err(DecodeError::IllegalOperand { code }),
    })
}

/// Decodes a gfx11 9-bit source operand (RDNA3 ISA guide, "Scalar ALU operands" / the
/// SRC0 table of "Microcode Formats"): SGPRs `s0`..`s105` (0..=105), VCC (106, 107), the trap
/// temporaries (108..=123), `null` (124), M0 (125), EXEC (126, 127), the inline constants
/// and the aperture registers as gfx9, VCCZ/EXECZ/SCC (251..=253), the literal (255) and the
/// VGPRs. gfx9's FLAT_SCRATCH/XNACK_MASK codes are SGPRs here, and gfx11 has no
/// `lds_direct` (254) and no SDWA (249); the DPP forms (233 DPP8, 250 DPP16) are the
/// decoder's to reject.
pub(crate) fn source11(code: u16) -> Result<Operand, DecodeError> {
    match code {
        0..=127 => scalar_dst11(code),
        233 | 249 | 254 => Err(DecodeError::IllegalOperand { code }),
        _ => source(code),
    }
}

/// Decodes a gfx11 7-bit scalar destination: `s0`..`s105`, VCC, the trap temporaries,
/// `null`, M0 and EXEC.
pub(crate) fn scalar_dst11(code: u16) -> Result<Operand, DecodeError> {
    Ok(match code {
        0..=105 => Operand::Sgpr(code as u8),
        106 => Operand::Special(Special::VccLo),
        107 => Operand::Special(Special::VccHi),
        108..=123 => Operand::Ttmp((code - 108) as u8),
        124 => Operand::Special(Special::Null),
        125 => Operand::Special(Special::M0),
        126 => Operand::Special(Special::ExecLo),
        127 => Operand::Special(Special::ExecHi),
        _ => return Err(DecodeError::IllegalOperand { code }),
    })
}

/// `vcc`, the implicit carry / mask operand of the 32-bit VOP2 and VOPC forms.
pub(crate) const VCC: Operand = Operand::Special(Special::VccLo);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_code_decodes_or_is_a_typed_error() {
        let illegal: Vec<u16> = (0..512u16).filter(|&c| source(c).is_err()).collect();
        // 125 is reserved; 209..=234 are unused; 249/250 (SDWA/DPP) are forms, not operands.
        let expected: Vec<u16> = std::iter::once(125)
            .chain(209..=234)
            .chain([SRC_SDWA, SRC_DPP])
            .collect();
        assert_eq!(illegal, expected);
        assert_eq!(source(193), Ok(Operand::Int(-1)));
        assert_eq!(source(208), Ok(Operand::Int(-16)));
        assert_eq!(source(192), Ok(Operand::Int(64)));
        assert_eq!(source(511), Ok(Operand::Vgpr(255)));
        assert!(scalar_dst(128).is_err());
    }
}
