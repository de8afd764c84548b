//! The gfx11 (RDNA3) front end: decodes gfx11's encodings into the same [`Inst`] the gfx9
//! decoder produces, so one executor runs both. Where gfx11 only renumbers or renames an
//! operation (`v_add_nc_u32` is gfx9's `v_add_u32`, `s_load_b32` is `s_load_dword`,
//! `flat_store_b32` is `flat_store_dword` at another number), it decodes to the gfx9
//! [`Opcode`]; what gfx11 adds decodes to [`Opcode::Gfx11`] ([`Gfx11Op`]).
//!
//! # Sources
//!
//! The "AMD RDNA3 Instruction Set Architecture" reference guide, chapter "Microcode Formats"
//! (field layouts below), and LLVM 19's AMDGPU disassembler for gfx1100, which names every
//! table entry: `tests/gfx11.rs` checks each entry's number against `llvm-mc-19 --disassemble
//! -mcpu=gfx1100`, and assembled snippets and kfdtest's shaders against this decoder.
//!
//! | encoding | first-dword prefix | fields |
//! |---|---|---|
//! | SOP2 | `10` | OP 29:23, SDST 22:16, SSRC1 15:8, SSRC0 7:0 |
//! | SOPK | `1011` | OP 27:23, SDST 22:16, SIMM16 15:0 |
//! | SOP1 | `1_0111_1101` | SDST 22:16, OP 15:8, SSRC0 7:0 |
//! | SOPC | `1_0111_1110` | OP 22:16, SSRC1 15:8, SSRC0 7:0 |
//! | SOPP | `1_0111_1111` | OP 22:16, SIMM16 15:0 |
//! | SMEM | `11_1101` | OP 25:18, GLC 14, DLC 13, SDATA 12:6, SBASE 5:0; OFFSET 52:32 (signed), SOFFSET 63:57 (`null`: none) |
//! | VOP2 | `0` | OP 30:25, VDST 24:17, VSRC1 16:9, SRC0 8:0 |
//! | VOP1 | `011_1111` | VDST 24:17, OP 16:9, SRC0 8:0 |
//! | VOPC | `011_1110` | OP 24:17, VSRC1 16:9, SRC0 8:0 |
//! | VOP3 / VOP3SD | `11_0101` | OP 25:16, CLAMP 15, OP_SEL 14:11 and ABS 10:8 (VOP3SD: SDST 14:8), VDST 7:0; SRC0 40:32, SRC1 49:41, SRC2 58:50, OMOD 60:59, NEG 63:61 |
//! | VOP3P | `1100_1100` | OP 22:16, CLAMP 15, OP_SEL_HI(2) 14, OP_SEL 13:11, NEG_HI 10:8, VDST 7:0; sources as VOP3, OP_SEL_HI(0,1) 60:59, NEG 63:61 |
//! | DS | `11_0110` | OP 25:18, GDS 17, OFFSET1 15:8, OFFSET0 7:0; ADDR 39:32, DATA0 47:40, DATA1 55:48, VDST 63:56 |
//! | FLAT | `11_0111` | OP 24:18, SEG 17:16, SLC 15, GLC 14, DLC 13, OFFSET 12:0 (GLOBAL/SCRATCH: signed); ADDR 39:32, DATA 47:40, SADDR 54:48 (`null`: off), SVE 55, VDST 63:56 |
//! | VOPD | `11_0010` | OPX 25:22, OPY 21:17, VSRC1X 16:9, SRC0X 8:0; VDSTX 63:56, VDSTY 55:49 (its low bit the inverse of VDSTX's), VSRC1Y 48:41, SRC0Y 40:32 |
//! | MUBUF | `11_1000` | OP 25:18, SLC 12, DLC 13, GLC 14, OFFSET 11:0; VADDR 39:32, VDATA 47:40, SRSRC 52:48 (quads), TFE 53, OFFEN 54, IDXEN 55, SOFFSET 63:56 |
//!
//! gfx11 allows a literal in VOP3 and VOP3P (unlike gfx9). Operands are [`operand::source11`]'s
//! (`null` 124, M0 125, 106 SGPRs). The VOPC `v_cmpx_*` forms write EXEC only (no SGPR
//! result, unlike gfx9): their destination is EXEC.
//!
//! # Not here yet
//!
//! VOPD's `v_dual_mul_dx9_zero_f32` and `v_dual_dot2acc_f32_f16`, DPP8, DPP16's
//! fetch-inactive bit and DPP in VOP3, MIMG, MTBUF, EXP, LDSDIR/VINTERP and WMMA decode
//! to [`DecodeError::Unsupported`]; 16-bit "true16" operand halves are not modelled (the
//! opcodes that need them are left out of the tables).

mod table;

pub use crate::opcode::Gfx11Op;

use crate::error::DecodeError;
use crate::inst::{Inst, Modifiers};
use crate::opcode::{Encoding, Opcode, Segment, Vop1Op, Vop2Op, Vop3Op};
use crate::operand::{self, Operand, Special};

/// `vcc_lo`, gfx11's implicit VOP2/VOPC lane mask in wave32 (and `vcc` in wave64).
const VCC: Operand = Operand::Special(Special::VccLo);
/// The literal's source code.
const LITERAL: u16 = 255;
/// Source code 250: the DPP16 form (its controls in a second dword).
const DPP16: u16 = 250;
/// `null` as a 7-bit SADDR/SOFFSET: no register.
const NULL: u16 = 124;

/// Decodes the gfx11 instruction at the start of `words`.
///
/// # Errors
///
/// A [`DecodeError`] for a truncated stream, an unknown encoding or opcode, a reserved operand
/// code or a form not decoded yet.
pub fn decode(words: &[u32]) -> Result<Inst, DecodeError> {
    let Some(&w) = words.first() else {
        return Err(DecodeError::Truncated {
            needed: 1,
            available: 0,
        });
    };
    let d = Fields { words, w };
    if w >> 31 == 0 {
        return match w >> 25 {
            0x3e => d.vopc(),
            0x3f => d.vop1(),
            _ => d.vop2(),
        };
    }
    if w >> 30 == 0b10 {
        return match w >> 23 {
            0x17d => d.sop1(),
            0x17e => d.sop2_like(Kind::Sopc),
            0x17f => d.sopp(),
            _ if w >> 28 == 0b1011 => d.sopk(),
            _ => d.sop2_like(Kind::Sop2),
        };
    }
    if w >> 24 == 0xcc {
        return d.vop3p();
    }
    match w >> 26 {
        0b11_1101 => d.smem(),
        0b11_0101 => d.vop3(),
        0b11_0110 => d.ds(),
        0b11_0111 => d.flat(),
        0b11_1000 => d.mubuf(),
        0b11_0010 => d.vopd(),
        0b11_1010 => Err(unsupported("MTBUF", w)),
        0b11_1100 => Err(unsupported("MIMG", w)),
        0b11_1110 => Err(unsupported("EXP", w)),
        _ => Err(DecodeError::UnknownEncoding { word: w }),
    }
}

/// Decodes a gfx11 stream instruction by instruction, as [`crate::Decoder`] does gfx9's.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    words: &'a [u32],
    at: usize,
    failed: bool,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `words`.
    pub fn new(words: &'a [u32]) -> Self {
        Self {
            words,
            at: 0,
            failed: false,
        }
    }
}

impl Iterator for Decoder<'_> {
    type Item = (usize, Result<Inst, DecodeError>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.words.len() {
            return None;
        }
        let at = self.at;
        let result = decode(&self.words[at..]);
        match &result {
            Ok(inst) => self.at += usize::from(inst.dwords),
            Err(_) => self.failed = true,
        }
        Some((at, result))
    }
}

/// Every table entry: `(encoding, opcode number, LLVM mnemonic, what it decodes to)`; the
/// tests hold each to `llvm-mc-19 --disassemble -mcpu=gfx1100`.
pub fn table() -> impl Iterator<Item = (Encoding, u16, &'static str, Opcode)> {
    TABLES.iter().flat_map(|&enc| {
        table::rows(enc)
            .iter()
            .map(move |&(raw, name, op)| (enc, raw, name, op))
    })
}

/// The encodings with a table (VOP3's holds VOP3SD's operations too).
const TABLES: [Encoding; 14] = [
    Encoding::Sop2,
    Encoding::Sopk,
    Encoding::Sop1,
    Encoding::Sopc,
    Encoding::Sopp,
    Encoding::Smem,
    Encoding::Vop2,
    Encoding::Vop1,
    Encoding::Vopc,
    Encoding::Vop3a,
    Encoding::Vop3p,
    Encoding::Ds,
    Encoding::Flat,
    Encoding::Mubuf,
];

/// The operation of opcode `raw` in `encoding` (the tables are sorted by number).
fn lookup(encoding: Encoding, raw: u16) -> Option<Opcode> {
    let rows = table::rows(encoding);
    rows.binary_search_by_key(&raw, |r| r.0)
        .ok()
        .map(|i| rows[i].2)
}

fn unsupported(what: &'static str, word: u32) -> DecodeError {
    DecodeError::Unsupported { what, word }
}

fn bits(x: u32, lo: u32, len: u32) -> u16 {
    ((x >> lo) & ((1 << len) - 1)) as u16
}

fn bit(x: u32, n: u32) -> bool {
    (x >> n) & 1 == 1
}

fn sext(x: u32, width: u32) -> i32 {
    let shift = 32 - width;
    ((x << shift) as i32) >> shift
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sop2,
    Sopc,
}

struct Fields<'a> {
    words: &'a [u32],
    w: u32,
}

impl Fields<'_> {
    fn dword(&self, i: usize, needed: u8) -> Result<u32, DecodeError> {
        self.words.get(i).copied().ok_or(DecodeError::Truncated {
            needed,
            available: self.words.len(),
        })
    }

    fn unknown(&self, encoding: Encoding, op: u16) -> DecodeError {
        DecodeError::UnknownOpcode {
            encoding,
            op,
            word: self.w,
        }
    }

    fn lookup(&self, encoding: Encoding, raw: u16) -> Result<Opcode, DecodeError> {
        lookup(encoding, raw).ok_or_else(|| self.unknown(encoding, raw))
    }

    fn inst(&self, op: Opcode, encoding: Encoding, dwords: u8) -> Inst {
        Inst {
            op,
            encoding,
            dst: [Operand::None; 2],
            src: [Operand::None; 3],
            imm: 0,
            mods: Modifiers::default(),
            dwords,
        }
    }

    /// Sources from 9-bit codes; a literal reads the dword after the instruction's fixed
    /// part (`at`: 1 for the 32-bit forms, 2 for VOP3/VOP3P), one literal shared by every
    /// source naming it.
    fn sources(&self, codes: &[u16], at: usize, inst: &mut Inst) -> Result<(), DecodeError> {
        for (slot, &code) in codes.iter().enumerate() {
            let mut operand = match code {
                233 | 250 => return Err(unsupported("DPP (gfx11)", self.w)),
                _ => operand::source11(code)?,
            };
            if code == LITERAL {
                operand = Operand::Literal(self.dword(at, at as u8 + 1)?);
                inst.dwords = at as u8 + 1;
            }
            inst.src[slot] = operand;
        }
        Ok(())
    }

    fn sop2_like(&self, kind: Kind) -> Result<Inst, DecodeError> {
        let (encoding, raw) = match kind {
            Kind::Sop2 => (Encoding::Sop2, bits(self.w, 23, 7)),
            Kind::Sopc => (Encoding::Sopc, bits(self.w, 16, 7)),
        };
        let op = self.lookup(encoding, raw)?;
        let mut inst = self.inst(op, encoding, 1);
        if kind == Kind::Sop2 {
            inst.dst[0] = operand::scalar_dst11(bits(self.w, 16, 7))?;
        }
        self.sources(&[bits(self.w, 0, 8), bits(self.w, 8, 8)], 1, &mut inst)?;
        Ok(inst)
    }

    fn sopk(&self) -> Result<Inst, DecodeError> {
        use crate::opcode::SopkOp::*;
        let raw = bits(self.w, 23, 5);
        let op = self.lookup(Encoding::Sopk, raw)?;
        let mut inst = self.inst(op, Encoding::Sopk, 1);
        let reg = operand::scalar_dst11(bits(self.w, 16, 7))?;
        inst.imm = sext(self.w, 16);
        match op {
            Opcode::Sopk(
                SCmpkEqI32 | SCmpkLgI32 | SCmpkGtI32 | SCmpkGeI32 | SCmpkLtI32 | SCmpkLeI32
                | SCmpkEqU32 | SCmpkLgU32 | SCmpkGtU32 | SCmpkGeU32 | SCmpkLtU32 | SCmpkLeU32
                | SSetregB32,
            ) => inst.src[0] = reg,
            Opcode::Sopk(SCmovkI32 | SAddkI32 | SMulkI32) => {
                inst.dst[0] = reg;
                inst.src[0] = reg;
            }
            Opcode::Sopk(SSetregImm32B32) => {
                inst.src[0] = Operand::Literal(self.dword(1, 2)?);
                inst.dwords = 2;
            }
            // s_waitcnt_*cnt: SDST names an SGPR whose count is combined with SIMM16.
            Opcode::Gfx11(_) => inst.src[0] = reg,
            _ => inst.dst[0] = reg,
        }
        Ok(inst)
    }

    fn sop1(&self) -> Result<Inst, DecodeError> {
        use crate::opcode::Sop1Op::*;
        let raw = bits(self.w, 8, 8);
        let op = self.lookup(Encoding::Sop1, raw)?;
        let mut inst = self.inst(op, Encoding::Sop1, 1);
        if !matches!(op, Opcode::Sop1(SSetpcB64 | SRfeB64)) {
            inst.dst[0] = operand::scalar_dst11(bits(self.w, 16, 7))?;
        }
        match op {
            Opcode::Sop1(SGetpcB64) => {}
            // s_sendmsg_rtn: SSRC0 is the message id itself, not an operand.
            Opcode::Gfx11(Gfx11Op::SSendmsgRtnB32 | Gfx11Op::SSendmsgRtnB64) => {
                inst.imm = i32::from(bits(self.w, 0, 8));
            }
            _ => self.sources(&[bits(self.w, 0, 8)], 1, &mut inst)?,
        }
        Ok(inst)
    }

    fn sopp(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 7);
        let op = self.lookup(Encoding::Sopp, raw)?;
        let mut inst = self.inst(op, Encoding::Sopp, 1);
        inst.imm = sext(self.w, 16);
        Ok(inst)
    }

    fn smem(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 18, 8);
        let op = self.lookup(Encoding::Smem, raw)?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(op, Encoding::Smem, 2);
        inst.dst[0] = operand::scalar_dst11(bits(self.w, 6, 7))?;
        inst.src[0] = operand::scalar_dst11(bits(self.w, 0, 6) * 2)?;
        inst.mods.glc = bit(self.w, 14);
        inst.imm = sext(w1, 21);
        let soffset = bits(w1, 25, 7);
        if soffset != NULL {
            inst.src[1] = operand::scalar_dst11(soffset)?;
        }
        Ok(inst)
    }

    fn vop2(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 25, 6);
        let op = self.lookup(Encoding::Vop2, raw)?;
        let mut inst = self.inst(op, Encoding::Vop2, 1);
        inst.dst[0] = Operand::Vgpr(bits(self.w, 17, 8) as u8);
        let (src0, vsrc1) = (bits(self.w, 0, 9), 256 + bits(self.w, 9, 8));
        use Vop2Op::*;
        match op {
            // v_fmamk_f32 vdst, src0, K, vsrc1 = src0 * K + vsrc1 and v_fmaak_f32 vdst,
            // src0, vsrc1, K = src0 * vsrc1 + K: v_fma_f32 with the literal K.
            Opcode::Gfx11(Gfx11Op::VFmamkF32) => {
                self.sources(&[src0, LITERAL, vsrc1], 1, &mut inst)?;
                inst.op = Opcode::Vop3(Vop3Op::VFmaF32);
                inst.dwords = 2;
                inst.src[1] = Operand::Literal(self.dword(1, 2)?);
                return Ok(inst);
            }
            Opcode::Gfx11(Gfx11Op::VFmaakF32) => {
                self.sources(&[src0, vsrc1, LITERAL], 1, &mut inst)?;
                inst.op = Opcode::Vop3(Vop3Op::VFmaF32);
                inst.dwords = 2;
                inst.src[2] = Operand::Literal(self.dword(1, 2)?);
                return Ok(inst);
            }
            _ if src0 == DPP16 => self.dpp16(Some(vsrc1), &mut inst)?,
            _ => self.sources(&[src0, vsrc1], 1, &mut inst)?,
        }
        match op {
            Opcode::Vop2(VCndmaskB32) => inst.src[2] = VCC,
            Opcode::Vop2(VAddcCoU32 | VSubbCoU32 | VSubbrevCoU32) => {
                inst.dst[1] = VCC;
                inst.src[2] = VCC;
            }
            _ => {}
        }
        Ok(inst)
    }

    fn vop1(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 9, 8);
        let op = self.lookup(Encoding::Vop1, raw)?;
        let mut inst = self.inst(op, Encoding::Vop1, 1);
        let vdst = bits(self.w, 17, 8);
        let no_operands = matches!(op, Opcode::Vop1(Vop1Op::VNop));
        inst.dst[0] = match op {
            Opcode::Vop1(Vop1Op::VReadfirstlaneB32) => operand::scalar_dst11(vdst)?,
            _ if no_operands => Operand::None,
            _ => Operand::Vgpr(vdst as u8),
        };
        let src0 = bits(self.w, 0, 9);
        if src0 == DPP16 && !no_operands {
            self.dpp16(None, &mut inst)?;
        } else if !no_operands {
            self.sources(&[src0], 1, &mut inst)?;
        }
        Ok(inst)
    }

    fn vopc(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 17, 8);
        let op = self.lookup(Encoding::Vopc, raw)?;
        let mut inst = self.inst(op, Encoding::Vopc, 1);
        inst.dst[0] = if is_cmpx(op) {
            Operand::Special(Special::ExecLo)
        } else {
            VCC
        };
        let (src0, vsrc1) = (bits(self.w, 0, 9), 256 + bits(self.w, 9, 8));
        if src0 == DPP16 {
            self.dpp16(Some(vsrc1), &mut inst)?;
        } else {
            self.sources(&[src0, vsrc1], 1, &mut inst)?;
        }
        Ok(inst)
    }

    /// DPP16 of VOP1/VOP2/VOPC (SRC0 = 250; RDNA3 guide, "VOP_DPP16"): the second dword's
    /// SRC0 (a VGPR) 7:0, DPP_CTRL 16:8, FI 18, BOUND_CTRL 19, SRC0_NEG 20, SRC0_ABS 21,
    /// SRC1_NEG 22, SRC1_ABS 23, BANK_MASK 27:24, ROW_MASK 31:28, kept as gfx9's DPP form
    /// ([`crate::Dpp`]). gfx10+'s controls: quad_perm, row_shl/shr/ror, row_mirror,
    /// row_half_mirror, row_share (lane n of the row, gfx90a's row_newbcast) and row_xmask
    /// (lane `i ^ n` of the row); gfx9's wave shifts and row broadcasts are reserved. FI
    /// (fetch inactive lanes) is not modelled: a typed error.
    fn dpp16(&self, vsrc1: Option<u16>, inst: &mut Inst) -> Result<(), DecodeError> {
        let w1 = self.dword(1, 2)?;
        let ctrl = bits(w1, 8, 9);
        let valid = matches!(ctrl,
            0x000..=0x0ff | 0x101..=0x10f | 0x111..=0x11f | 0x121..=0x12f | 0x140 | 0x141
            | 0x150..=0x15f | 0x160..=0x16f);
        if !valid {
            return Err(DecodeError::IllegalOperand { code: ctrl });
        }
        if bit(w1, 18) {
            return Err(unsupported("DPP fetch-inactive (FI)", self.w));
        }
        inst.encoding = Encoding::Dpp;
        inst.dwords = 2;
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        if let Some(v) = vsrc1 {
            inst.src[1] = Operand::Vgpr((v - 256) as u8);
        }
        inst.imm = i32::from(ctrl)
            | i32::from(bit(w1, 19)) << 9
            | i32::from(bits(w1, 24, 4)) << 10
            | i32::from(bits(w1, 28, 4)) << 14;
        inst.mods.neg = (bit(w1, 20) as u8) | (bit(w1, 22) as u8) << 1;
        inst.mods.abs = (bit(w1, 21) as u8) | (bit(w1, 23) as u8) << 1;
        Ok(())
    }

    fn vop3(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 10);
        let op = self.lookup(Encoding::Vop3a, raw)?;
        let (sources, vop3b, sgpr_dst) = match op {
            Opcode::Vopc(_) => (2, false, !is_cmpx(op)),
            Opcode::Vop2(v) => {
                use Vop2Op::*;
                match v {
                    VCndmaskB32 => (3, false, false),
                    VAddCoU32 | VSubCoU32 | VSubrevCoU32 => (2, true, false),
                    VAddcCoU32 | VSubbCoU32 | VSubbrevCoU32 => (3, true, false),
                    _ => (2, false, false),
                }
            }
            Opcode::Vop1(v) => (
                usize::from(v != Vop1Op::VNop),
                false,
                v == Vop1Op::VReadfirstlaneB32,
            ),
            Opcode::Vop3(v) => (v.sources(), v.is_vop3b(), v == Vop3Op::VReadlaneB32),
            _ => return Err(self.unknown(Encoding::Vop3a, raw)),
        };
        let w1 = self.dword(1, 2)?;
        let encoding = if vop3b {
            Encoding::Vop3b
        } else {
            Encoding::Vop3a
        };
        let mut inst = self.inst(op, encoding, 2);
        let vdst = bits(self.w, 0, 8);
        inst.dst[0] = if is_cmpx(op) {
            Operand::Special(Special::ExecLo)
        } else if sgpr_dst {
            operand::scalar_dst11(vdst)?
        } else if op == Opcode::Vop1(Vop1Op::VNop) {
            Operand::None
        } else {
            Operand::Vgpr(vdst as u8)
        };
        inst.mods.clamp = bit(self.w, 15);
        inst.mods.omod = bits(w1, 27, 2) as u8;
        inst.mods.neg = bits(w1, 29, 3) as u8;
        if vop3b {
            inst.dst[1] = operand::scalar_dst11(bits(self.w, 8, 7))?;
        } else {
            inst.mods.abs = bits(self.w, 8, 3) as u8;
            inst.mods.op_sel = bits(self.w, 11, 4) as u8;
        }
        let codes: Vec<u16> = (0..sources).map(|i| bits(w1, 9 * i as u32, 9)).collect();
        self.sources(&codes, 2, &mut inst)?;
        Ok(inst)
    }

    fn vop3p(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 7);
        let op = self.lookup(Encoding::Vop3p, raw)?;
        let Opcode::Vop3p(p) = op else {
            return Err(self.unknown(Encoding::Vop3p, raw));
        };
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(op, Encoding::Vop3p, 2);
        inst.dst[0] = Operand::Vgpr(bits(self.w, 0, 8) as u8);
        inst.mods.neg_hi = bits(self.w, 8, 3) as u8;
        inst.mods.op_sel = bits(self.w, 11, 3) as u8;
        inst.mods.op_sel_hi = (bits(w1, 27, 2) | bits(self.w, 14, 1) << 2) as u8;
        inst.mods.clamp = bit(self.w, 15);
        inst.mods.neg = bits(w1, 29, 3) as u8;
        let codes: Vec<u16> = (0..p.sources())
            .map(|i| bits(w1, 9 * i as u32, 9))
            .collect();
        self.sources(&codes, 2, &mut inst)?;
        Ok(inst)
    }

    fn ds(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 18, 8);
        let op = self.lookup(Encoding::Ds, raw)?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(op, Encoding::Ds, 2);
        inst.imm = i32::from(bits(self.w, 0, 16));
        inst.mods.gds = bit(self.w, 17);
        let vgpr = |lo| Operand::Vgpr(bits(w1, lo, 8) as u8);
        inst.src = [vgpr(0), vgpr(8), vgpr(16)];
        inst.dst[0] = vgpr(24);
        Ok(inst)
    }

    fn flat(&self) -> Result<Inst, DecodeError> {
        let segment = match bits(self.w, 16, 2) {
            0 => Segment::Flat,
            1 => Segment::Scratch,
            2 => Segment::Global,
            _ => return Err(DecodeError::UnknownEncoding { word: self.w }),
        };
        let raw = bits(self.w, 18, 7);
        let op = match self.lookup(Encoding::Flat, raw)? {
            Opcode::Flat(_, f) => Opcode::Flat(segment, f),
            _ => return Err(self.unknown(Encoding::Flat, raw)),
        };
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(op, Encoding::Flat, 2);
        inst.imm = match segment {
            Segment::Flat => i32::from(bits(self.w, 0, 12)),
            Segment::Scratch | Segment::Global => sext(self.w, 13),
        };
        inst.mods.glc = bit(self.w, 14);
        inst.mods.slc = bit(self.w, 15);
        // SVE (scratch: the VGPR address is used), kept where gfx942's is (`mods.lds`).
        inst.mods.lds = segment == Segment::Scratch && bit(w1, 23);
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        inst.src[1] = Operand::Vgpr(bits(w1, 8, 8) as u8);
        let saddr = bits(w1, 16, 7);
        if segment != Segment::Flat && saddr != NULL && saddr != 0x7f {
            inst.src[2] = operand::scalar_dst11(saddr)?;
        }
        inst.dst[0] = Operand::Vgpr(bits(w1, 24, 8) as u8);
        Ok(inst)
    }

    /// VOPD: the pair as one [`Gfx11Op::Vopd`] (see there for where each field goes). A
    /// literal (either SRC0, or the K of `fmaak`/`fmamk`) is one dword after the pair, shared.
    fn vopd(&self) -> Result<Inst, DecodeError> {
        let (opx, opy) = (bits(self.w, 22, 4), bits(self.w, 17, 5));
        if vopd_op(opx).is_none() || vopd_op(opy).is_none() {
            return Err(unsupported("VOPD operation", self.w));
        }
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(Opcode::Gfx11(Gfx11Op::Vopd), Encoding::Vopd, 2);
        let vdstx = bits(w1, 24, 8);
        let vdsty = bits(w1, 17, 7) << 1 | (!vdstx & 1);
        inst.dst = [Operand::Vgpr(vdstx as u8), Operand::Vgpr(vdsty as u8)];
        let (src0x, src0y) = (bits(self.w, 0, 9), bits(w1, 0, 9));
        let k = matches!(opx, VOPD_FMAAK | VOPD_FMAMK) || matches!(opy, VOPD_FMAAK | VOPD_FMAMK);
        let codes = [src0x, src0y];
        self.sources(&codes, 2, &mut inst)?;
        if k {
            inst.src[2] = Operand::Literal(self.dword(2, 3)?);
            inst.dwords = 3;
        }
        inst.imm = i32::from(bits(self.w, 9, 8))
            | i32::from(bits(w1, 9, 8)) << 8
            | i32::from(opx) << 16
            | i32::from(opy) << 20;
        Ok(inst)
    }

    fn mubuf(&self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 18, 8);
        let op = self.lookup(Encoding::Mubuf, raw)?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(op, Encoding::Mubuf, 2);
        inst.imm = i32::from(bits(self.w, 0, 12));
        inst.mods.slc = bit(self.w, 12);
        inst.mods.glc = bit(self.w, 14);
        inst.mods.offen = bit(w1, 22);
        inst.mods.idxen = bit(w1, 23);
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        inst.dst[0] = Operand::Vgpr(bits(w1, 8, 8) as u8);
        inst.src[1] = operand::scalar_dst11(bits(w1, 16, 5) * 4)?;
        let soffset = bits(w1, 24, 8);
        if soffset == LITERAL {
            return Err(DecodeError::IllegalOperand { code: soffset });
        }
        inst.src[2] = operand::source11(soffset)?;
        Ok(inst)
    }
}

/// VOPD's OPX/OPY codes that take a literal K (`v_dual_fmaak_f32`, `v_dual_fmamk_f32`).
const VOPD_FMAAK: u16 = 1;
const VOPD_FMAMK: u16 = 2;

/// What VOPD operation code `op` is (the RDNA3 guide's VOPD opcode table: 0–12 for both
/// halves, 16–18 for Y only), as the VOP2/VOP1/VOP3 operation it runs as; `None` for a
/// reserved code and for the two not modelled (7 `v_dual_mul_dx9_zero_f32`, 12
/// `v_dual_dot2acc_f32_f16`).
fn vopd_op(op: u16) -> Option<Opcode> {
    Some(match op {
        0 => Opcode::Vop2(Vop2Op::VFmacF32),
        VOPD_FMAAK | VOPD_FMAMK => Opcode::Vop3(Vop3Op::VFmaF32),
        3 => Opcode::Vop2(Vop2Op::VMulF32),
        4 => Opcode::Vop2(Vop2Op::VAddF32),
        5 => Opcode::Vop2(Vop2Op::VSubF32),
        6 => Opcode::Vop2(Vop2Op::VSubrevF32),
        8 => Opcode::Vop1(Vop1Op::VMovB32),
        9 => Opcode::Vop2(Vop2Op::VCndmaskB32),
        10 => Opcode::Vop2(Vop2Op::VMaxF32),
        11 => Opcode::Vop2(Vop2Op::VMinF32),
        16 => Opcode::Vop2(Vop2Op::VAddU32),
        17 => Opcode::Vop2(Vop2Op::VLshlrevB32),
        18 => Opcode::Vop2(Vop2Op::VAndB32),
        _ => return None,
    })
}

/// The two operations of a VOPD pair ([`Gfx11Op::Vopd`]) as the VOP1/VOP2/VOP3 `Inst`s they
/// run as: `[X, Y]`. `None` when `inst` is no VOPD pair.
pub fn vopd_ops(inst: &Inst) -> Option<[Inst; 2]> {
    if inst.op != Opcode::Gfx11(Gfx11Op::Vopd) {
        return None;
    }
    let imm = inst.imm as u32;
    let half = |dst: Operand, src0: Operand, vsrc1: u32, op: u32| -> Option<Inst> {
        let op = op as u16;
        let vsrc1 = Operand::Vgpr(vsrc1 as u8);
        let k = inst.src[2];
        let (encoding, src) = match op {
            VOPD_FMAAK => (Encoding::Vop3a, [src0, vsrc1, k]),
            VOPD_FMAMK => (Encoding::Vop3a, [src0, k, vsrc1]),
            8 => (Encoding::Vop1, [src0, Operand::None, Operand::None]),
            9 => (Encoding::Vop2, [src0, vsrc1, VCC]),
            _ => (Encoding::Vop2, [src0, vsrc1, Operand::None]),
        };
        Some(Inst {
            op: vopd_op(op)?,
            encoding,
            dst: [dst, Operand::None],
            src,
            imm: 0,
            mods: Modifiers::default(),
            dwords: inst.dwords,
        })
    };
    Some([
        half(inst.dst[0], inst.src[0], imm & 0xff, imm >> 16 & 0xf)?,
        half(inst.dst[1], inst.src[1], imm >> 8 & 0xff, imm >> 20 & 0x1f)?,
    ])
}

/// Whether `op` is a `v_cmpx_*` (its gfx9 opcode's mnemonic says so).
fn is_cmpx(op: Opcode) -> bool {
    matches!(op, Opcode::Vopc(c) if c.mnemonic().starts_with("v_cmpx_"))
}
