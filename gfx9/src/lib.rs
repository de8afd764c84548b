//! `kfd-gfx9`: a decoder of AMD gfx9 shader instructions (gfx90a, the MI200 series, first) into
//! a compact internal form — the first part of the gfx9 ISA interpreter that will let kfd-emu
//! run unmodified HIP programs. Like wasmi and tinygrad's remu, an interpreter here decodes a
//! code object once into [`Inst`]s and executes them with one `match` over [`Opcode`]; this
//! crate is that decoding step.
//!
//! ```
//! use kfd_gfx9::{decode, Encoding, Inst, Opcode, Operand, Sop2Op, SoppOp};
//!
//! // s_add_u32 s0, s1, 0x1234 ; s_endpgm   (encodings from llvm-mc -mcpu=gfx90a)
//! let code = [0x8000_ff01, 0x0000_1234, 0xbf81_0000];
//! let add = decode(&code)?;
//! assert_eq!(add.op, Opcode::Sop2(Sop2Op::SAddU32));
//! assert_eq!(add.encoding, Encoding::Sop2);
//! assert_eq!(add.dst[0], Operand::Sgpr(0));
//! assert_eq!(add.src[..2], [Operand::Sgpr(1), Operand::Literal(0x1234)]);
//! assert_eq!(add.dwords, 2);
//! let end = decode(&code[2..])?;
//! assert_eq!(end.op, Opcode::Sopp(SoppOp::SEndpgm));
//! # Ok::<(), kfd_gfx9::DecodeError>(())
//! ```
//!
//! # What it decodes
//!
//! The encodings of the "AMD Instinct MI200 Instruction Set Architecture" reference guide,
//! chapter "Microcode Formats": the scalar ALU (SOP2, SOPK, SOP1, SOPC, SOPP), scalar memory
//! (SMEM), the vector ALU (VOP2, VOP1, VOPC, VOP3A/VOP3B, VOP3P), LDS (DS), FLAT with its
//! GLOBAL and SCRATCH segments, and untyped buffers (MUBUF); operands per the guide's operand
//! tables (SGPRs, VGPRs, VCC, EXEC, M0, SCC, the trap temporaries, the aperture registers,
//! the inline integer and float constants and the 32-bit literal). Opcode numbers are those of
//! the guide's per-encoding opcode tables ([`opcode`]); the tests check them, the operand
//! fields and the instruction lengths against LLVM's assembler (`llvm-mc -show-encoding`) and
//! disassembler (`llvm-objdump`) on a clang-compiled kernel.
//!
//! Every input gives an [`Inst`] or a typed [`DecodeError`]: unknown opcodes, reserved
//! operand codes, a literal where gfx9 allows none, a truncated stream; never a panic.
//!
//! # Not here yet
//!
//! - Execution: the wave state, the lane loop under EXEC and the memory trait are the next
//!   rooms of the interpreter (issue 18).
//! - The DPP and SDWA forms (source code 250 / 249) and the MTBUF, MIMG, EXP, VINTRP and
//!   VOP3P-MAI (MFMA) encodings decode to [`DecodeError::Unsupported`].
//! - The opcode tables hold what clang emits for ordinary kernels and their neighbours, not
//!   every opcode of the guide; a missing one is [`DecodeError::UnknownOpcode`].
//! - gfx942 (MI300) differences: its SC0/SC1/NT cache bits, renamed opcodes and the
//!   `v_mov_b64` / 64-bit `s_mov` additions; the decoder follows gfx90a's bit layout.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod decode;
pub mod opcode;
pub mod operand;

pub use decode::{Decoder, decode};
pub use opcode::{
    DsOp, FlatOp, MubufOp, Opcode, Segment, SmemOp, Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp, Vop1Op,
    Vop2Op, Vop3Op, Vop3pOp, VopcOp,
};
pub use operand::{FloatConst, Operand, Special};

/// The microcode format an instruction was encoded in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// SOP2 (32 bits, + literal).
    Sop2,
    /// SOPK (32 bits; `s_setreg_imm32_b32` + a 32-bit immediate).
    Sopk,
    /// SOP1 (32 bits, + literal).
    Sop1,
    /// SOPC (32 bits, + literal).
    Sopc,
    /// SOPP (32 bits).
    Sopp,
    /// SMEM (64 bits).
    Smem,
    /// VOP2 (32 bits, + literal).
    Vop2,
    /// VOP1 (32 bits, + literal).
    Vop1,
    /// VOPC (32 bits, + literal).
    Vopc,
    /// VOP3A (64 bits): three sources, abs/neg/omod/clamp/op_sel modifiers.
    Vop3a,
    /// VOP3B (64 bits): a scalar destination (carry, flags) instead of abs/op_sel.
    Vop3b,
    /// VOP3P (64 bits): packed math.
    Vop3p,
    /// DS (64 bits).
    Ds,
    /// FLAT, GLOBAL or SCRATCH (64 bits).
    Flat,
    /// MUBUF (64 bits).
    Mubuf,
}

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
/// | SOP2, SOP1, SOPC | sdst | ssrc0, ssrc1 | — |
/// | SOPK | sdst (for `s_cmpk_*`/`s_setreg*`, `src[0]` instead) | the same register when read | simm16, sign-extended (`s_setreg_imm32_b32`: the 32-bit immediate) |
/// | SOPP | — | — | simm16, sign-extended (branches: the offset in dwords) |
/// | SMEM | sdata | sbase, soffset | byte offset (21-bit signed) |
/// | VOP2, VOP1, VOPC, VOP3 | vdst (VOPC/VOP3 SGPR results: that SGPR), carry-out/`vcc` | src0, src1, src2 (implicit `vcc` where the 32-bit form reads it; `v_madmk/madak`: the constant as `src[2]`) | — |
/// | VOP3P | vdst | src0..src2 | — |
/// | DS | vdst | addr, data0, data1 | `offset1 << 8 \| offset0` |
/// | FLAT | vdst | addr, data, saddr (global/scratch; `None` for `off`) | offset (global/scratch: 13-bit signed) |
/// | MUBUF | vdata | vaddr, srsrc, soffset | offset |
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

/// Why an instruction did not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The stream ended inside an instruction.
    #[error("truncated instruction: needs {needed} dwords, {available} left")]
    Truncated {
        /// Dwords the instruction needs.
        needed: u8,
        /// Dwords the stream had left.
        available: usize,
    },
    /// The first dword matches no gfx9 encoding.
    #[error("no gfx9 encoding starts with {word:#010x}")]
    UnknownEncoding {
        /// The first dword.
        word: u32,
    },
    /// The encoding is known but its opcode is not in this decoder's table.
    #[error("unknown {encoding:?} opcode {op} (first dword {word:#010x})")]
    UnknownOpcode {
        /// The encoding.
        encoding: Encoding,
        /// The opcode field.
        op: u16,
        /// The first dword.
        word: u32,
    },
    /// An operand field holds a reserved code, or one the form does not allow (a literal in
    /// VOP3 on gfx9).
    #[error("illegal operand code {code}")]
    IllegalOperand {
        /// The operand field's value.
        code: u16,
    },
    /// A gfx9 form this decoder does not handle yet (DPP, SDWA, MTBUF, MIMG, EXP, VINTRP, MFMA).
    #[error("{what} is not decoded yet (first dword {word:#010x})")]
    Unsupported {
        /// The form.
        what: &'static str,
        /// The first dword.
        word: u32,
    },
}
