//! The decoder: the first dword picks the encoding (the guide's "Microcode Formats" chapter
//! gives each one's fixed high bits), then the encoding's fields become an [`Inst`].
//!
//! Encoding prefixes, longest first where they nest: SOP1 `1_0111_1101`, SOPC `1_0111_1110`,
//! SOPP `1_0111_1111` (all inside SOPK's `1011`), SOPK `1011` (inside SOP2's `10`), SOP2 `10`;
//! VOP1 `011_1111` and VOPC `011_1110` (inside VOP2's `0`); VOP3P `1_1010_0111` (inside
//! VOP3's `11_0100`); SMEM `11_0000`, DS `11_0110`, FLAT `11_0111`, MUBUF `11_1000`, MTBUF `11_1010`.

use crate::error::DecodeError;
use crate::inst::{Inst, Modifiers};
use crate::opcode::{
    DsOp, Encoding, FlatOp, MtbufOp, MubufOp, Opcode, Segment, SmemOp, Sop1Op, Sop2Op, SopcOp,
    SopkOp, SoppOp, Vop1Op, Vop2Op, Vop3Op, Vop3pOp, VopcOp,
};
use crate::operand::{self, Operand, SRC_DPP, SRC_LITERAL, SRC_SDWA, VCC};

/// Decodes the instruction at the start of `words` (little-endian dwords, as in a code
/// object's `.text`); [`Inst::dwords`] says where the next one starts.
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
    let mut d = Fields { words, w };
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
            0x17e => d.sopc(),
            0x17f => d.sopp(),
            _ if w >> 28 == 0b1011 => d.sopk(),
            _ => d.sop2(),
        };
    }
    if w >> 23 == 0x1a7 {
        return d.vop3p();
    }
    match w >> 26 {
        0b11_0000 => d.smem(),
        0b11_0100 => d.vop3(),
        0b11_0110 => d.ds(),
        0b11_0111 => d.flat(),
        0b11_1000 => d.mubuf(),
        0b11_0001 => Err(unsupported("EXP", w)),
        0b11_0010 => Err(unsupported("VINTRP", w)),
        0b11_1010 => d.mtbuf(),
        0b11_1100 => Err(unsupported("MIMG", w)),
        _ => Err(DecodeError::UnknownEncoding { word: w }),
    }
}

/// Decodes a stream instruction by instruction: yields each instruction's dword index and
/// its decoding, and ends after the first error (the stream cannot be resynchronised).
///
/// ```
/// let code = [0xbf8c_0000u32, 0xbf81_0000]; // s_waitcnt 0 ; s_endpgm
/// let starts: Vec<usize> = kfd_gfx9::Decoder::new(&code).map(|(at, _)| at).collect();
/// assert_eq!(starts, [0, 1]);
/// ```
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

fn unsupported(what: &'static str, word: u32) -> DecodeError {
    DecodeError::Unsupported { what, word }
}

/// Bits `lo..lo + len` of `x`.
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

/// Which 32-bit VALU form a DPP/SDWA second dword extends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Vop1,
    Vop2,
    Vopc,
}

/// The instruction being decoded: the stream from its first dword.
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

    /// Decodes the 32-bit forms' sources; a literal code reads the dword after the
    /// instruction (one literal per instruction, shared by every source that names it).
    fn sources32(&self, codes: &[u16], inst: &mut Inst) -> Result<(), DecodeError> {
        for (slot, &code) in codes.iter().enumerate() {
            let mut operand = operand::source(code)?;
            if code == SRC_LITERAL {
                operand = Operand::Literal(self.dword(1, 2)?);
                inst.dwords = 2;
            }
            inst.src[slot] = operand;
        }
        Ok(())
    }

    fn sop2(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 23, 7);
        let op = Sop2Op::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Sop2, raw))?;
        let mut inst = self.inst(Opcode::Sop2(op), Encoding::Sop2, 1);
        // s_cbranch_g_fork reads its two sources and writes no SGPR.
        if op != Sop2Op::SCbranchGFork {
            inst.dst[0] = operand::scalar_dst(bits(self.w, 16, 7))?;
        }
        self.sources32(&[bits(self.w, 0, 8), bits(self.w, 8, 8)], &mut inst)?;
        Ok(inst)
    }

    fn sopk(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 23, 5);
        let op = SopkOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Sopk, raw))?;
        let mut inst = self.inst(Opcode::Sopk(op), Encoding::Sopk, 1);
        let reg = operand::scalar_dst(bits(self.w, 16, 7))?;
        inst.imm = sext(self.w, 16);
        use SopkOp::*;
        match op {
            SCmpkEqI32 | SCmpkLgI32 | SCmpkGtI32 | SCmpkGeI32 | SCmpkLtI32 | SCmpkLeI32
            | SCmpkEqU32 | SCmpkLgU32 | SCmpkGtU32 | SCmpkGeU32 | SCmpkLtU32 | SCmpkLeU32
            | SSetregB32 | SCbranchIFork => inst.src[0] = reg,
            SCmovkI32 | SAddkI32 | SMulkI32 => {
                inst.dst[0] = reg;
                inst.src[0] = reg;
            }
            // The hwreg field stays in `imm`; the value written is the literal dword.
            SSetregImm32B32 => {
                inst.src[0] = Operand::Literal(self.dword(1, 2)?);
                inst.dwords = 2;
            }
            SMovkI32 | SGetregB32 | SCallB64 => inst.dst[0] = reg,
        }
        Ok(inst)
    }

    fn sop1(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 8, 8);
        let op = Sop1Op::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Sop1, raw))?;
        let mut inst = self.inst(Opcode::Sop1(op), Encoding::Sop1, 1);
        // s_getpc_b64 reads nothing; s_setpc_b64, s_rfe_b64, s_cbranch_join and
        // s_set_gpr_idx_idx (which writes M0's index bits) write no SGPR.
        if !matches!(
            op,
            Sop1Op::SSetpcB64 | Sop1Op::SRfeB64 | Sop1Op::SCbranchJoin | Sop1Op::SSetGprIdxIdx
        ) {
            inst.dst[0] = operand::scalar_dst(bits(self.w, 16, 7))?;
        }
        if op != Sop1Op::SGetpcB64 {
            self.sources32(&[bits(self.w, 0, 8)], &mut inst)?;
        }
        Ok(inst)
    }

    fn sopc(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 7);
        let op = SopcOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Sopc, raw))?;
        let mut inst = self.inst(Opcode::Sopc(op), Encoding::Sopc, 1);
        if op == SopcOp::SSetGprIdxOn {
            // SSRC1 holds the raw index-mode bits (SIMM4), not an operand.
            self.sources32(&[bits(self.w, 0, 8)], &mut inst)?;
            inst.imm = i32::from(bits(self.w, 8, 8));
            return Ok(inst);
        }
        self.sources32(&[bits(self.w, 0, 8), bits(self.w, 8, 8)], &mut inst)?;
        Ok(inst)
    }

    fn sopp(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 7);
        let op = SoppOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Sopp, raw))?;
        let mut inst = self.inst(Opcode::Sopp(op), Encoding::Sopp, 1);
        inst.imm = sext(self.w, 16);
        Ok(inst)
    }

    /// SMEM: IMM selects a 21-bit signed byte offset in the second dword; SOE adds the SGPR
    /// in its top bits; with neither, the second dword's low 7 bits name the offset SGPR.
    fn smem(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 18, 8);
        let op = SmemOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Smem, raw))?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(Opcode::Smem(op), Encoding::Smem, 2);
        inst.dst[0] = operand::scalar_dst(bits(self.w, 6, 7))?;
        // SBASE counts SGPR pairs: 54 is ttmp[0:1], like any scalar operand code 108.
        inst.src[0] = operand::scalar_dst(bits(self.w, 0, 6) * 2)?;
        let (soe, imm) = (bit(self.w, 14), bit(self.w, 17));
        inst.mods.nv = bit(self.w, 15);
        inst.mods.glc = bit(self.w, 16);
        if imm {
            inst.imm = sext(w1, 21);
        }
        if soe {
            inst.src[1] = operand::scalar_dst(bits(w1, 25, 7))?;
        } else if !imm {
            // An SGPR (7-bit scalar destination code), never a constant.
            inst.src[1] = operand::scalar_dst(bits(w1, 0, 7))?;
        }
        Ok(inst)
    }

    fn vop2(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 25, 6);
        let op = Vop2Op::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Vop2, raw))?;
        let src0 = bits(self.w, 0, 9);
        let mut inst = self.inst(Opcode::Vop2(op), Encoding::Vop2, 1);
        inst.dst[0] = Operand::Vgpr(bits(self.w, 17, 8) as u8);
        self.vop_sources(src0, Some(bits(self.w, 9, 8)), Form::Vop2, &mut inst)?;
        use Vop2Op::*;
        match op {
            VCndmaskB32 => inst.src[2] = VCC,
            VAddCoU32 | VSubCoU32 | VSubrevCoU32 => inst.dst[1] = VCC,
            VAddcCoU32 | VSubbCoU32 | VSubbrevCoU32 => {
                inst.dst[1] = VCC;
                inst.src[2] = VCC;
            }
            // vdst = src0 * K + vsrc1 / src0 * vsrc1 + K: the constant K is the literal dword.
            VMadmkF32 | VMadakF32 | VMadmkF16 | VMadakF16 => {
                // The constant takes the second dword: no DPP/SDWA form.
                if inst.encoding != Encoding::Vop2 {
                    return Err(DecodeError::IllegalOperand { code: src0 });
                }
                inst.src[2] = Operand::Literal(self.dword(1, 2)?);
                inst.dwords = 2;
            }
            _ => {}
        }
        Ok(inst)
    }

    fn vop1(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 9, 8);
        let op = Vop1Op::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Vop1, raw))?;
        let src0 = bits(self.w, 0, 9);
        let mut inst = self.inst(Opcode::Vop1(op), Encoding::Vop1, 1);
        let vdst = bits(self.w, 17, 8);
        let no_operands = matches!(op, Vop1Op::VNop | Vop1Op::VClrexcp);
        inst.dst[0] = match op {
            Vop1Op::VReadfirstlaneB32 => operand::scalar_dst(vdst)?,
            _ if no_operands => Operand::None,
            _ => Operand::Vgpr(vdst as u8),
        };
        if !no_operands {
            self.vop_sources(src0, None, Form::Vop1, &mut inst)?;
        }
        Ok(inst)
    }

    fn vopc(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 17, 8);
        let op = VopcOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Vopc, raw))?;
        let src0 = bits(self.w, 0, 9);
        let mut inst = self.inst(Opcode::Vopc(op), Encoding::Vopc, 1);
        inst.dst[0] = VCC;
        self.vop_sources(src0, Some(bits(self.w, 9, 8)), Form::Vopc, &mut inst)?;
        Ok(inst)
    }

    /// The sources of VOP1/VOP2/VOPC: SRC0 and the 8-bit VSRC1 field (a VGPR), or, when SRC0
    /// names the DPP (250) or SDWA (249) form, the second dword's controls ("AMD Instinct MI200
    /// ISA", "Microcode Formats": VOP_DPP and VOP_SDWA / VOPC_SDWA).
    fn vop_sources(
        &self,
        src0: u16,
        vsrc1: Option<u16>,
        form: Form,
        inst: &mut Inst,
    ) -> Result<(), DecodeError> {
        match src0 {
            SRC_DPP => self.dpp(vsrc1, inst),
            SRC_SDWA => self.sdwa(vsrc1, form, inst),
            _ => {
                let mut codes = vec![src0];
                codes.extend(vsrc1.map(|v| 256 + v));
                self.sources32(&codes, inst)
            }
        }
    }

    /// VOP_DPP: SRC0 (a VGPR) in bits 0..8, DPP_CTRL 8..17, BOUND_CTRL 19, SRC0_NEG 20,
    /// SRC0_ABS 21, SRC1_NEG 22, SRC1_ABS 23, BANK_MASK 24..28, ROW_MASK 28..32. The controls
    /// go to `imm` (see [`crate::Dpp`]), the source modifiers to `mods.neg`/`mods.abs`.
    fn dpp(&self, vsrc1: Option<u16>, inst: &mut Inst) -> Result<(), DecodeError> {
        let w1 = self.dword(1, 2)?;
        let ctrl = bits(w1, 8, 9);
        if !crate::inst::dpp_ctrl_valid(ctrl) {
            return Err(DecodeError::IllegalOperand { code: ctrl });
        }
        inst.encoding = Encoding::Dpp;
        inst.dwords = 2;
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        if let Some(v) = vsrc1 {
            inst.src[1] = Operand::Vgpr(v as u8);
        }
        inst.imm = i32::from(ctrl)
            | i32::from(bit(w1, 19)) << 9
            | i32::from(bits(w1, 24, 4)) << 10
            | i32::from(bits(w1, 28, 4)) << 14;
        inst.mods.neg = (bit(w1, 20) as u8) | (bit(w1, 22) as u8) << 1;
        inst.mods.abs = (bit(w1, 21) as u8) | (bit(w1, 23) as u8) << 1;
        Ok(())
    }

    /// VOP_SDWA: SRC0 0..8, DST_SEL 8..11, DST_UNUSED 11..13, CLAMP 13, OMOD 14..16,
    /// SRC0_SEL 16..19, SRC0_SEXT 19, SRC0_NEG 20, SRC0_ABS 21, S0 23 (SRC0 is a scalar
    /// operand), SRC1_SEL 24..27, SRC1_SEXT 27, SRC1_NEG 28, SRC1_ABS 29, S1 31. VOPC_SDWA has
    /// SDST 8..15 and SD 15 (SDST is the destination, else VCC) instead of DST_SEL..OMOD. The
    /// selects go to `imm` (see [`crate::Sdwa`]).
    fn sdwa(&self, vsrc1: Option<u16>, form: Form, inst: &mut Inst) -> Result<(), DecodeError> {
        let w1 = self.dword(1, 2)?;
        inst.encoding = Encoding::Sdwa;
        inst.dwords = 2;
        let sel = |lo| -> Result<u16, DecodeError> {
            let s = bits(w1, lo, 3);
            if s > 6 {
                return Err(DecodeError::IllegalOperand { code: s });
            }
            Ok(s)
        };
        let src = |code: u16, scalar: bool| -> Result<Operand, DecodeError> {
            if !scalar {
                return Ok(Operand::Vgpr(code as u8));
            }
            match code {
                SRC_LITERAL | SRC_DPP | SRC_SDWA => Err(DecodeError::IllegalOperand { code }),
                _ => operand::source(code),
            }
        };
        inst.src[0] = src(bits(w1, 0, 8), bit(w1, 23))?;
        if let Some(v) = vsrc1 {
            inst.src[1] = src(v, bit(w1, 31))?;
        }
        let (dst_sel, dst_unused) = if form == Form::Vopc {
            if bit(w1, 15) {
                inst.dst[0] = operand::scalar_dst(bits(w1, 8, 7))?;
            }
            (6, 0)
        } else {
            inst.mods.clamp = bit(w1, 13);
            inst.mods.omod = bits(w1, 14, 2) as u8;
            let unused = bits(w1, 11, 2);
            if unused == 3 {
                return Err(DecodeError::IllegalOperand { code: unused });
            }
            (sel(8)?, unused)
        };
        inst.imm = i32::from(dst_sel)
            | i32::from(dst_unused) << 3
            | i32::from(sel(16)?) << 5
            | i32::from(bit(w1, 19)) << 8
            | i32::from(if vsrc1.is_some() { sel(24)? } else { 6 }) << 9
            | i32::from(bit(w1, 27)) << 12;
        inst.mods.neg = (bit(w1, 20) as u8) | (bit(w1, 28) as u8) << 1;
        inst.mods.abs = (bit(w1, 21) as u8) | (bit(w1, 29) as u8) << 1;
        Ok(())
    }

    /// The three 9-bit sources of VOP3/VOP3P (`count` of them read); gfx9 has no literal here.
    fn sources64(&self, w1: u32, count: usize, inst: &mut Inst) -> Result<(), DecodeError> {
        for slot in 0..count {
            let code = bits(w1, 9 * slot as u32, 9);
            if matches!(code, SRC_LITERAL | SRC_DPP | SRC_SDWA) {
                return Err(DecodeError::IllegalOperand { code });
            }
            inst.src[slot] = operand::source(code)?;
        }
        Ok(())
    }

    fn vop3(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 10);
        let unknown = || self.unknown(Encoding::Vop3a, raw);
        let (op, sources, vop3b, sgpr_dst) = match raw {
            0..=0xff => {
                let op = VopcOp::from_raw(raw).ok_or_else(unknown)?;
                (Opcode::Vopc(op), 2, false, true)
            }
            0x100..=0x13f => {
                let op = Vop2Op::from_raw(raw - 0x100).ok_or_else(unknown)?;
                use Vop2Op::*;
                let (sources, vop3b) = match op {
                    VCndmaskB32 => (3, false),
                    VAddCoU32 | VSubCoU32 | VSubrevCoU32 => (2, true),
                    VAddcCoU32 | VSubbCoU32 | VSubbrevCoU32 => (3, true),
                    VMadmkF32 | VMadakF32 | VMadmkF16 | VMadakF16 => return Err(unknown()),
                    _ => (2, false),
                };
                (Opcode::Vop2(op), sources, vop3b, false)
            }
            0x140..=0x17f => {
                let op = Vop1Op::from_raw(raw - 0x140).ok_or_else(unknown)?;
                let no_operands = matches!(op, Vop1Op::VNop | Vop1Op::VClrexcp);
                let sources = if no_operands { 0 } else { 1 };
                (
                    Opcode::Vop1(op),
                    sources,
                    false,
                    op == Vop1Op::VReadfirstlaneB32,
                )
            }
            _ => {
                let op = Vop3Op::from_raw(raw).ok_or_else(unknown)?;
                (
                    Opcode::Vop3(op),
                    op.sources(),
                    op.is_vop3b(),
                    op == Vop3Op::VReadlaneB32,
                )
            }
        };
        let w1 = self.dword(1, 2)?;
        let encoding = if vop3b {
            Encoding::Vop3b
        } else {
            Encoding::Vop3a
        };
        let mut inst = self.inst(op, encoding, 2);
        let vdst = bits(self.w, 0, 8);
        inst.dst[0] = if sgpr_dst {
            operand::scalar_dst(vdst)?
        } else if matches!(op, Opcode::Vop1(Vop1Op::VNop | Vop1Op::VClrexcp)) {
            Operand::None
        } else {
            Operand::Vgpr(vdst as u8)
        };
        inst.mods.clamp = bit(self.w, 15);
        inst.mods.omod = bits(w1, 27, 2) as u8;
        inst.mods.neg = bits(w1, 29, 3) as u8;
        if vop3b {
            inst.dst[1] = operand::scalar_dst(bits(self.w, 8, 7))?;
        } else {
            inst.mods.abs = bits(self.w, 8, 3) as u8;
            inst.mods.op_sel = bits(self.w, 11, 4) as u8;
        }
        self.sources64(w1, sources, &mut inst)?;
        Ok(inst)
    }

    fn vop3p(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 16, 7);
        let op = Vop3pOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Vop3p, raw))?;
        let w1 = self.dword(1, 2)?;
        if op.is_mfma() {
            return self.mfma(op, w1);
        }
        let mut inst = self.inst(Opcode::Vop3p(op), Encoding::Vop3p, 2);
        inst.dst[0] = Operand::Vgpr(bits(self.w, 0, 8) as u8);
        inst.mods.neg_hi = bits(self.w, 8, 3) as u8;
        inst.mods.op_sel = bits(self.w, 11, 3) as u8;
        inst.mods.op_sel_hi = (bits(w1, 27, 2) | bits(self.w, 14, 1) << 2) as u8;
        inst.mods.clamp = bit(self.w, 15);
        inst.mods.neg = bits(w1, 29, 3) as u8;
        self.sources64(w1, op.sources(), &mut inst)?;
        Ok(inst)
    }

    /// VOP3P-MAI (the guide's "VOP3P-MAI" format): VDST 0..8, CBSZ 8..11, ABID 11..15,
    /// ACC_CD 15 (VDST and SRC2 are AGPRs); SRC0/1/2 as VOP3P, ACC 59..61 (SRC0/SRC1 are AGPRs),
    /// BLGP 61..64. ACC_CD goes to `mods.acc`, ACC to `mods.op_sel_hi` (bit per source),
    /// `CBSZ | ABID << 3 | BLGP << 7` to `imm`.
    fn mfma(&self, op: Vop3pOp, w1: u32) -> Result<Inst, DecodeError> {
        let mut inst = self.inst(Opcode::Vop3p(op), Encoding::Vop3p, 2);
        inst.dst[0] = Operand::Vgpr(bits(self.w, 0, 8) as u8);
        inst.mods.acc = bit(self.w, 15);
        inst.mods.op_sel_hi = bits(w1, 27, 2) as u8;
        inst.imm = i32::from(bits(self.w, 8, 3))
            | i32::from(bits(self.w, 11, 4)) << 3
            | i32::from(bits(w1, 29, 3)) << 7;
        self.sources64(w1, 3, &mut inst)?;
        Ok(inst)
    }

    fn ds(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 17, 8);
        let op = DsOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Ds, raw))?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(Opcode::Ds(op), Encoding::Ds, 2);
        inst.imm = i32::from(bits(self.w, 0, 16));
        inst.mods.gds = bit(self.w, 16);
        inst.mods.acc = bit(self.w, 25);
        let vgpr = |lo| Operand::Vgpr(bits(w1, lo, 8) as u8);
        inst.src = [vgpr(0), vgpr(8), vgpr(16)];
        inst.dst[0] = vgpr(24);
        Ok(inst)
    }

    fn flat(&mut self) -> Result<Inst, DecodeError> {
        let segment = match bits(self.w, 14, 2) {
            0 => Segment::Flat,
            1 => Segment::Scratch,
            2 => Segment::Global,
            _ => return Err(DecodeError::UnknownEncoding { word: self.w }),
        };
        let raw = bits(self.w, 18, 7);
        let op = FlatOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Flat, raw))?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(Opcode::Flat(segment, op), Encoding::Flat, 2);
        inst.imm = match segment {
            Segment::Flat => i32::from(bits(self.w, 0, 12)),
            Segment::Scratch | Segment::Global => sext(self.w, 13),
        };
        inst.mods.lds = bit(self.w, 13);
        inst.mods.glc = bit(self.w, 16);
        inst.mods.slc = bit(self.w, 17);
        inst.mods.scc = bit(self.w, 25);
        inst.mods.acc = bit(w1, 23);
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        inst.src[1] = Operand::Vgpr(bits(w1, 8, 8) as u8);
        let saddr = bits(w1, 16, 7);
        if segment != Segment::Flat && saddr != 0x7f {
            inst.src[2] = operand::scalar_dst(saddr)?;
        }
        inst.dst[0] = Operand::Vgpr(bits(w1, 24, 8) as u8);
        Ok(inst)
    }

    fn mubuf(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 18, 7);
        let op = MubufOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Mubuf, raw))?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(Opcode::Mubuf(op), Encoding::Mubuf, 2);
        inst.imm = i32::from(bits(self.w, 0, 12));
        inst.mods.offen = bit(self.w, 12);
        inst.mods.idxen = bit(self.w, 13);
        inst.mods.glc = bit(self.w, 14);
        inst.mods.scc = bit(self.w, 15);
        inst.mods.lds = bit(self.w, 16);
        inst.mods.slc = bit(self.w, 17);
        inst.mods.acc = bit(w1, 23);
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        inst.dst[0] = Operand::Vgpr(bits(w1, 8, 8) as u8);
        // SRSRC counts SGPR quads: 27 is ttmp[0:3], like any scalar operand code 108.
        inst.src[1] = operand::scalar_dst(bits(w1, 16, 5) * 4)?;
        let soffset = bits(w1, 24, 8);
        if soffset == SRC_LITERAL {
            return Err(DecodeError::IllegalOperand { code: soffset });
        }
        inst.src[2] = operand::source(soffset)?;
        Ok(inst)
    }

    /// MTBUF (the guide's "MTBUF" microcode format): OFFSET 0..12, OFFEN 12, IDXEN 13, GLC
    /// 14, OP 15..19, DFMT 19..23, NFMT 23..26; VADDR, VDATA, SRSRC and SOFFSET as MUBUF,
    /// gfx90a's SCC at bit 53, SLC 54, ACC 55. `imm` is `OFFSET | DFMT << 12 | NFMT << 16`.
    fn mtbuf(&mut self) -> Result<Inst, DecodeError> {
        let raw = bits(self.w, 15, 4);
        let op = MtbufOp::from_raw(raw).ok_or_else(|| self.unknown(Encoding::Mtbuf, raw))?;
        let w1 = self.dword(1, 2)?;
        let mut inst = self.inst(Opcode::Mtbuf(op), Encoding::Mtbuf, 2);
        inst.imm = i32::from(bits(self.w, 0, 12))
            | i32::from(bits(self.w, 19, 4)) << 12
            | i32::from(bits(self.w, 23, 3)) << 16;
        inst.mods.offen = bit(self.w, 12);
        inst.mods.idxen = bit(self.w, 13);
        inst.mods.glc = bit(self.w, 14);
        inst.mods.scc = bit(w1, 21);
        inst.mods.slc = bit(w1, 22);
        inst.mods.acc = bit(w1, 23);
        inst.src[0] = Operand::Vgpr(bits(w1, 0, 8) as u8);
        inst.dst[0] = Operand::Vgpr(bits(w1, 8, 8) as u8);
        inst.src[1] = operand::scalar_dst(bits(w1, 16, 5) * 4)?;
        let soffset = bits(w1, 24, 8);
        if soffset == SRC_LITERAL {
            return Err(DecodeError::IllegalOperand { code: soffset });
        }
        inst.src[2] = operand::source(soffset)?;
        Ok(inst)
    }
}
