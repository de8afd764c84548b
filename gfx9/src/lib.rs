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
//! GLOBAL and SCRATCH segments, untyped buffers (MUBUF) and typed ones (MTBUF); operands per
//! the guide's operand tables (SGPRs, VGPRs, VCC, EXEC, M0, SCC, the trap temporaries, the aperture registers,
//! the inline integer and float constants and the 32-bit literal). Opcode numbers are those of
//! the guide's per-encoding opcode tables ([`opcode`]). The tests hold the decoder to LLVM 19
//! (`tests/llvm.rs`): assembled snippets decode to the expected [`Inst`]; every table entry
//! is the opcode `llvm-mc --disassemble` names for its number; 8 000 random encodings agree
//! with `llvm-mc` on opcode, length, operands, modifiers and offsets wherever both decode
//! them; and clang-compiled kernels decode whole, as `llvm-objdump` lists them.
//!
//! Every input gives an [`Inst`] or a typed [`DecodeError`]: unknown opcodes, reserved
//! operand codes, a literal where gfx9 allows none, a truncated stream; never a panic.
//!
//! Around the decoder: [`exec`] executes one wave's instructions over a [`exec::Memory`] the
//! embedder supplies, and [`dispatch`] runs a whole kernel dispatch — the amdhsa kernel
//! descriptor, each wave's initial registers as the AMDGPU ABI sets them, workgroups with
//! their LDS and `s_barrier`, in parallel on several threads. [`asm`] goes the other way for
//! the forms hand-written kernels need: typed constructors returning machine words, a
//! [`asm::Program`] with branch labels, and the amdhsa kernel descriptor
//! ([`asm::DescriptorBuilder`]), held to `llvm-mc-19 -show-encoding` by `tests/asm.rs`.
//!
//! [`gfx11`] is a second front end: RDNA3's encodings decoded into the same [`Inst`]s (the
//! gfx9 [`Opcode`] wherever gfx11 only renumbers or renames an operation), for
//! [`exec::Target::Gfx11`], whose waves may be wave32 ([`exec::Wave::wave32`]).
//!
//! # Not here yet
//!
//! - The MIMG, EXP and VINTRP encodings decode to [`DecodeError::Unsupported`]. The
//!   DPP and SDWA forms (source code 250 / 249) decode to [`Encoding::Dpp`] /
//!   [`Encoding::Sdwa`] with their controls in [`Inst::dpp`] / [`Inst::sdwa`]; VOP3P-MAI
//!   (gfx90a's `v_mfma_*` and the AGPR moves) decodes as VOP3P, an MFMA's ACC_CD in
//!   `mods.acc`, its ACC bits in `mods.op_sel_hi` and `CBSZ | ABID << 3 | BLGP << 7` in `imm`.
//! - The opcode tables hold what clang emits for ordinary kernels and their neighbours, not
//!   every opcode of the guide; a missing one is [`DecodeError::UnknownOpcode`].
//! - Operand widths and register classes: an operand names its first register, and the
//!   decoder does not check what the opcode accepts (an odd SGPR for a 64-bit operand, an
//!   SGPR source of `v_readfirstlane_b32`); AGPRs appear only as the memory encodings' ACC
//!   bit. Implicit operands beyond VCC (the accumulator of `v_mac`/`v_fmac`, EXEC written by
//!   `v_cmpx_*`, M0 of LDS access) are the opcode's semantics, left to execution.
//! - gfx942 (MI300) differences: its SC0/SC1/NT cache bits, renamed opcodes and the
//!   `v_mov_b64` / 64-bit `s_mov` additions; the decoder follows gfx90a's bit layout.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod asm;
mod decode;
pub mod dispatch;
mod error;
pub mod exec;
pub mod gfx11;
pub mod gws;
mod inst;
pub mod opcode;
pub mod operand;

pub use decode::{Decoder, decode};
pub use error::DecodeError;
pub use inst::{Dpp, Inst, Modifiers, Sdwa};
pub use opcode::{
    DsOp, Encoding, FlatOp, Gfx11Op, MtbufOp, MubufOp, Opcode, Segment, SmemOp, Sop1Op, Sop2Op,
    SopcOp, SopkOp, SoppOp, Vop1Op, Vop2Op, Vop3Op, Vop3pOp, VopcOp,
};
pub use operand::{FloatConst, Operand, Special};
