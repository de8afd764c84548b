//! The vector ALU: VOP1, VOP2, VOPC, VOP3A/VOP3B and VOP3P, with the DPP and SDWA forms
//! ("AMD Instinct MI200 ISA", chapter 6 "Vector ALU Operations" and the per-opcode
//! descriptions of chapter 12's VOP2, VOP1, VOPC, VOP3A/VOP3B and VOP3P tables; DPP and SDWA
//! in sections 6.x "Data Parallel Processing" / "Sub-Dword Addressing" and the VOP_DPP /
//! VOP_SDWA microcode formats). The gfx942 additions (`v_mov_b64`, `v_lshl_add_u64`, the
//! f64 MFMA negation) follow the "AMD Instinct MI300 ISA" guide's VOP1 / VOP3 / VOP3P-MAI
//! tables; gfx906 and gfx908 execute the same gfx9 semantics (the "Vega 7nm" and "AMD
//! Instinct MI100" guides), their differences noted where they apply (gfx908's MFMA
//! accumulators; `lds_direct`, which LLVM accepts only before gfx90a: [`lds_direct`]).
//!
//! One instruction runs in three steps: the sources are read for all 64 lanes ([`X::reads`]:
//! VGPRs or a broadcast scalar, inline constants in the operation's type, VOP3 `op_sel`
//! halves, SDWA selects, the DPP lane permutation of src0, then `abs`/`neg` and the MODE
//! register's input-denormal flush for float operands); the operation computes each lane EXEC
//! enables (and DPP's row/bank masks and bound control allow); the result is written
//! ([`X::write`]: VOP3 `omod` and `clamp`, the output-denormal flush, 16-bit results per the
//! form, SDWA's destination select). Compares and carries write a lane mask (bits of lanes
//! not computed are 0) to VCC or the VOP3 SGPR pair; `v_cmpx_*` also to EXEC.
//!
//! Floating point: rounding per MODE's FP_ROUND (f32 operations by FP_ROUND[1:0], f64 and
//! f16 ones by FP_ROUND[3:2]; nearest-even, the default, takes the plain Rust arithmetic;
//! which operations honour the directed modes: [`round`]), denormals per MODE's FP_DENORM (hardware register 1,
//! `Wave::hwreg[1]`; a `Wave::new` has MODE 0, which flushes every precision: the dispatcher
//! sets it from the kernel descriptor's FLOAT_DENORM_MODE_32/16_64); NaN results are quiet,
//! their payloads as Rust's arithmetic propagates them. What each operation's accuracy is:
//! see [`float`].
//!
//! The matrix multiplies (`v_mfma_*`) are in [`mfma`].
//!
//! Speed: [`fast`] runs the hottest plain 32-bit operations straight on the 32-bit lane arrays
//! (no widening, no per-kind post-processing) when the form needs none of the steps above;
//! [`execute`] tries it first and falls back to the general path (`general`) for everything
//! else. When at most [`SPARSE_LANES`] lanes are on (and no DPP reads other lanes), both run
//! lane by lane: each lane's sources read, modified and flushed one value at a time, with no
//! 64-lane arrays (`X::map_sparse`, `fast::run_sparse`); `sparse_tests` holds every opcode and
//! form to the array path.
//!
//! Every VALU opcode the decoder knows executes, MFMAs with their CBSZ/ABID/BLGP controls
//! (see [`mfma`]). `v_clrexcp` is a no-op (no exception state
//! is kept). DPP treats
//! a source lane EXEC disables like one out of range (read as 0 with BOUND_CTRL, else the
//! destination lane is not written), as LLVM's `llvm.amdgcn.update.dpp` describes it.

mod fast;
mod float;
mod mfma;
mod round;

use super::wave::{
    Ctx, ExecError, Flow, LANES, Target, Ty, VGPRS, Wave, full_lanes, illegal, unimplemented,
};
use crate::exec::plan::{Plan, Planning};
use crate::exec::salu::Round;
use crate::inst::Inst;
use crate::opcode::{Encoding, Opcode, Vop1Op, Vop2Op, Vop3Op, Vop3pOp, VopcOp};
use crate::operand::{Operand, Special};
use float::{
    Mode, class_bit, div_fixup, div_fmas, div_scale, f16_to_f32, f32_to_f16, f64_to_f16, flush16,
    flush32, flush64, frexp64, ldexp64, med3_32, minmax32, minmax64, trig_preop,
};
use round::Fmt;
// Lanes computed one at a time (defined with the fast path, which uses it too).
use fast::SPARSE_LANES;

/// One value per lane (32-bit values in the low half).
type L = [u64; LANES];

/// How an operation reads an operand and writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum K {
    /// 32 bits, integer: no float modifiers.
    B32,
    /// 32 bits moved as bits, but VOP3's abs/neg apply as to an f32 (`v_cndmask_b32`).
    M32,
    /// f32.
    F32,
    /// 16-bit integer (the low half, or the `op_sel`/SDWA-selected one).
    B16,
    /// f16.
    F16,
    /// 64-bit integer (a VGPR pair).
    B64,
    /// f64.
    F64,
}

use K::{B16, B32, B64, F16, F32, F64, M32};

impl K {
    fn ty(self) -> Ty {
        match self {
            B16 | F16 => Ty::F16,
            B64 => Ty::B64,
            F64 => Ty::F64,
            _ => Ty::B32,
        }
    }
    fn wide(self) -> bool {
        matches!(self, B64 | F64)
    }
    fn half(self) -> bool {
        matches!(self, B16 | F16)
    }
    fn float(self) -> bool {
        matches!(self, F32 | F16 | F64 | M32)
    }
    fn sign(self) -> u64 {
        match self {
            F16 => 0x8000,
            F64 => 1 << 63,
            _ => 0x8000_0000,
        }
    }
}

/// Where a 16-bit result goes in its 32-bit VGPR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum D16 {
    /// The low half, the high half zeroed (gfx9's VOP1/VOP2 16-bit operations).
    Zero,
    /// The half VOP3's `op_sel[3]` names (the low one outside VOP3), the other kept (the
    /// VOP3-only 16-bit operations, and on gfx9 `v_mac_f16`, `v_madak_f16`, `v_madmk_f16`).
    OpSel,
}

fn f32of(x: u64) -> f32 {
    f32::from_bits(x as u32)
}
fn b32(x: f32) -> u64 {
    u64::from(x.to_bits())
}
fn f64of(x: u64) -> f64 {
    f64::from_bits(x)
}
fn b64(x: f64) -> u64 {
    x.to_bits()
}
/// f16 bits to f32.
fn h(x: u64) -> f32 {
    f16_to_f32(x as u16)
}
/// f32 to f16 bits (round to nearest even).
fn hb(x: f32) -> u64 {
    u64::from(f32_to_f16(x))
}
/// f16 bits to f64.
fn h64(x: u64) -> f64 {
    f64::from(h(x))
}
/// An f64 holding an f16 value (as [`round`] returns them) to its f16 bits (exact).
fn hb64(x: f64) -> u64 {
    u64::from(f64_to_f16(x, false))
}
fn sext24(x: u64) -> i64 {
    i64::from(((x as u32) << 8) as i32 >> 8)
}

/// f16 bits as an f32 (exact), for the memory room's typed buffer formats.
pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    f16_to_f32(h)
}

/// An f32 as f16 bits, rounded to nearest even, for the memory room's typed buffer formats.
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    f32_to_f16(x)
}

/// The set lanes of a mask.
fn lanes(mask: u64) -> impl Iterator<Item = usize> {
    let mut m = mask;
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(l)
    })
}

/// The `lds_direct` source operand (code 254).
const LDS_DIRECT: Operand = Operand::Special(Special::LdsDirect);

/// `inst` with its `lds_direct` sources replaced by the value they read: one LDS value,
/// broadcast to every lane, at the byte address M0\[15:0\] with the data type M0\[18:16\]
/// (0 unsigned byte, 1 unsigned short, 2 dword, 4 signed byte, 5 signed short, extended to
/// 32 bits; 3, 6, 7 are unused: [`ExecError::Illegal`]). The "Vega" and "AMD Instinct MI100"
/// ISA guides, "LDS Direct" (in "Data Share Operations") and the source operand table's
/// LDS_DIRECT (254). An address outside the allocation reads 0 as other LDS reads do.
/// gfx90a and gfx942 do not have it (LLVM 19's assembler refuses `lds_direct` for them,
/// "not supported on this GPU", and the MI200/MI300 guides describe no LDS-direct read):
/// there it is [`ExecError::Illegal`].
pub(super) fn lds_direct(w: &Wave, ctx: &Ctx<'_>, inst: &Inst, pc: u64) -> Result<Inst, ExecError> {
    if matches!(w.target, Target::Gfx90a | Target::Gfx942) {
        return Err(illegal(
            inst,
            pc,
            "lds_direct is not a gfx90a/gfx942 operand",
        ));
    }
    let addr = (w.m0 & 0xffff) as usize;
    let (size, signed) = match w.m0 >> 16 & 7 {
        0 => (1, false),
        1 => (2, false),
        2 => (4, false),
        4 => (1, true),
        5 => (2, true),
        _ => return Err(illegal(inst, pc, "lds_direct with an unused M0 data type")),
    };
    let mut raw = [0u8; 4];
    if let Some(bytes) = ctx.lds.get(addr..addr + size) {
        raw[..size].copy_from_slice(bytes);
    }
    let value = match (size, signed) {
        (1, true) => raw[0] as i8 as i32 as u32,
        (2, true) => i16::from_le_bytes([raw[0], raw[1]]) as i32 as u32,
        _ => u32::from_le_bytes(raw),
    };
    let mut out = *inst;
    for src in out.src.iter_mut().filter(|s| **s == LDS_DIRECT) {
        *src = Operand::Literal(value);
    }
    Ok(out)
}

/// Executes one vector ALU instruction found at `pc`.
pub(super) fn execute(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    inst: &Inst,
    pc: u64,
) -> Result<Flow, ExecError> {
    let direct;
    // A pattern match per source (inlined), not `contains`'s derived comparisons.
    let inst = if inst
        .src
        .iter()
        .any(|s| matches!(s, Operand::Special(Special::LdsDirect)))
    {
        direct = lds_direct(w, ctx, inst, pc)?;
        &direct
    } else {
        inst
    };
    if fast::try_execute(w, inst) {
        return Ok(Flow::Continue);
    }
    general(w, inst, pc)
}

/// How `inst` runs from the code cache ([`crate::exec::plan`]): a planned lane-wise
/// operation of the fast path; any other instruction without an `lds_direct` source by
/// reference ([`run_ref`]); one with it on the per-step path ([`execute`], which reads LDS).
pub(super) fn planning(inst: &Inst) -> Planning {
    // An `lds_direct` source is read by `execute` before the fast path; `fast::plan` refuses it.
    if let Some(p) = fast::plan(inst) {
        return Planning::Valu(p);
    }
    if inst.src.contains(&LDS_DIRECT) {
        Planning::None
    } else {
        Planning::Vector
    }
}

/// Runs the planned `inst` as [`execute`] would (a planned operation cannot fail).
#[inline(always)]
pub(super) fn run_plan(p: &Plan, w: &mut Wave, inst: &Inst) {
    fast::run_plan(p, w, inst);
}

/// [`execute`] of an instruction without an `lds_direct` source (it needs no [`Ctx`]): the
/// fast path, else the general path.
///
/// # Errors
///
/// As [`execute`].
#[inline]
pub(super) fn run_ref(w: &mut Wave, inst: &Inst, pc: u64) -> Result<Flow, ExecError> {
    if fast::try_execute(w, inst) {
        return Ok(Flow::Continue);
    }
    general(w, inst, pc)
}

/// Executes `inst` on the general path (every operation, every form).
fn general(w: &mut Wave, inst: &Inst, pc: u64) -> Result<Flow, ExecError> {
    general_with(w, inst, pc, true)
}

/// [`general`], with the few-lanes path ([`SPARSE_LANES`]) allowed or not (the tests run
/// both and compare).
fn general_with(w: &mut Wave, inst: &Inst, pc: u64, sparse: bool) -> Result<Flow, ExecError> {
    let mut x = X::new(w, inst, pc);
    x.sparse_ok = sparse;
    match inst.op {
        Opcode::Vop1(op) => x.vop1(op)?,
        Opcode::Vop2(op) => x.vop2(op)?,
        Opcode::Vopc(op) => x.vopc(op)?,
        Opcode::Vop3(op) => x.vop3(op)?,
        Opcode::Vop3p(op) => x.vop3p(op)?,
        _ => return Err(unimplemented(inst, pc)),
    }
    Ok(Flow::Continue)
}

/// One instruction's execution: the wave, the instruction (a copy: `v_mac`-style operations
/// read their destination as a third source) and what it computes.
struct X<'a> {
    w: &'a mut Wave,
    i: Inst,
    pc: u64,
    mode: Mode,
    /// Lanes computed and written: EXEC, narrowed by DPP's masks.
    mask: u64,
    /// DPP: for each lane, src0's lane (`None`: out of range or disabled).
    dpp_src: Option<[Option<u8>; LANES]>,
    d16: D16,
    /// Whether `map`, `map_lane` and `map_carry` may compute lane by lane when few lanes
    /// are on ([`X::sparse`]).
    sparse_ok: bool,
}

#[cfg(test)]
thread_local! {
    /// Instructions that took the few-lanes path on this thread (`sparse_tests` checks that
    /// its cases reach it).
    static SPARSE_RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Where a source's value comes from, resolved once per instruction for the few-lanes path.
#[derive(Clone, Copy)]
enum Base {
    /// A VGPR's lane.
    Lane(usize),
    /// A VGPR pair's lane (64-bit kinds).
    Pair(usize),
    /// The same value in every lane (SGPR, constant, literal).
    Value(u64),
}

impl<'a> X<'a> {
    fn new(w: &'a mut Wave, inst: &Inst, pc: u64) -> Self {
        let mode = Mode::from_reg(w.hwreg[1]);
        let mut mask = w.exec;
        let mut dpp_src = None;
        if let Some(d) = inst.dpp() {
            let mut src = [None; LANES];
            for (l, s) in src.iter_mut().enumerate() {
                *s = dpp_lane(d.ctrl, l).filter(|&s| w.exec >> s & 1 == 1);
                let row_on = d.row_mask >> (l / 16) & 1 == 1;
                let bank_on = d.bank_mask >> (l / 4 % 4) & 1 == 1;
                if !row_on || !bank_on || (s.is_none() && !d.bound_ctrl) {
                    mask &= !(1u64 << l);
                }
            }
            dpp_src = Some(src.map(|s| s.map(|s| s as u8)));
        }
        Self {
            w,
            i: *inst,
            pc,
            mode,
            mask,
            dpp_src,
            d16: D16::Zero,
            sparse_ok: true,
        }
    }

    /// Whether this instruction computes lane by lane ([`SPARSE_LANES`]).
    fn sparse(&self) -> bool {
        self.sparse_ok && self.dpp_src.is_none() && self.mask.count_ones() <= SPARSE_LANES
    }

    /// A non-VGPR source's value, as [`Self::read_into`] broadcasts it.
    fn scalar_src(&self, op: Operand, k: K) -> Result<u64, ExecError> {
        let constant = matches!(op, Operand::Int(_) | Operand::Float(_));
        Ok(if self.i.encoding == Encoding::Vop3p && constant {
            // Packed math: an inline constant is the same in both halves (LLVM's
            // isInlinableLiteralV216 / the packed-f32 forms).
            if k.wide() {
                let c = self.w.read_scalar32(op, Ty::B32).unwrap_or(0);
                u64::from(c) | u64::from(c) << 32
            } else {
                let c = self.w.read_scalar32(op, Ty::F16).unwrap_or(0) & 0xffff;
                u64::from(c | c << 16)
            }
        } else if k.wide() {
            self.w
                .read_scalar64(op, k.ty())
                .ok_or_else(|| self.err("an unreadable source"))?
        } else {
            u64::from(
                self.w
                    .read_scalar32(op, k.ty())
                    .ok_or_else(|| self.err("an unreadable source"))?,
            )
        })
    }

    /// Source `slot`'s [`Base`], with [`Self::read_into`]'s errors.
    fn base(&self, slot: usize, k: K) -> Result<Base, ExecError> {
        Ok(match self.i.src[slot] {
            Operand::Vgpr(n) => {
                let n = usize::from(n);
                if !k.wide() {
                    Base::Lane(n)
                } else if n + 1 >= VGPRS {
                    return Err(self.err("a 64-bit source past v255"));
                } else {
                    Base::Pair(n)
                }
            }
            Operand::None => return Err(self.err("a missing source")),
            other => Base::Value(self.scalar_src(other, k)?),
        })
    }

    /// Source `slot` of kind `k` in lane `l` from its [`Base`]: [`Self::read_into`] then
    /// [`Self::flush_in`] for one lane (never DPP: [`Self::sparse`] excludes it).
    fn lane_src(&self, slot: usize, k: K, b: Base, l: usize) -> u64 {
        let mut v = match b {
            Base::Lane(n) => u64::from(self.w.vgpr[n][l]),
            Base::Pair(n) => u64::from(self.w.vgpr[n][l]) | u64::from(self.w.vgpr[n + 1][l]) << 32,
            Base::Value(v) => v,
        };
        let enc = self.i.encoding;
        if enc != Encoding::Vop3p {
            if let Some(s) = self.i.sdwa().filter(|_| slot < 2) {
                let (sel, sext) = if slot == 0 {
                    (s.src0_sel, s.src0_sext)
                } else {
                    (s.src1_sel, s.src1_sext)
                };
                v = u64::from(sdwa_sel(v as u32, sel, sext && !k.float()));
            } else if k.half() {
                let hi = enc == Encoding::Vop3a && self.i.mods.op_sel >> slot & 1 == 1;
                v = if hi { v >> 16 & 0xffff } else { v & 0xffff };
            }
            if k.float() {
                if self.i.mods.abs >> slot & 1 == 1 {
                    v &= !k.sign();
                }
                if self.i.mods.neg >> slot & 1 == 1 {
                    v ^= k.sign();
                }
            }
        }
        self.flush_one(k, v)
    }

    /// The sources `0..kinds.len()` of lane `l` (the others 0, as the arrays' are).
    fn lane_srcs(&self, kinds: &[K], bases: &[Base; 3], l: usize) -> [u64; 3] {
        let mut s = [0u64; 3];
        for (slot, &k) in kinds.iter().enumerate() {
            s[slot] = self.lane_src(slot, k, bases[slot], l);
        }
        s
    }

    /// The [`Base`]s of sources `0..kinds.len()`, in [`Self::reads_into`]'s order.
    fn bases(&self, kinds: &[K]) -> Result<[Base; 3], ExecError> {
        let mut b = [Base::Value(0); 3];
        for (slot, &k) in kinds.iter().enumerate() {
            b[slot] = self.base(slot, k)?;
        }
        Ok(b)
    }

    fn err(&self, why: &'static str) -> ExecError {
        illegal(&self.i, self.pc, why)
    }

    fn unimpl(&self) -> ExecError {
        unimplemented(&self.i, self.pc)
    }

    /// Source `slot` for every lane, as kind `k`, without the input-denormal flush.
    fn read(&self, slot: usize, k: K) -> Result<L, ExecError> {
        let mut out = [0u64; LANES];
        self.read_into(slot, k, &mut out)?;
        Ok(out)
    }

    /// As [`Self::read`], into `out` (no copy of the lane array).
    fn read_into(&self, slot: usize, k: K, out: &mut L) -> Result<(), ExecError> {
        let op = self.i.src[slot];
        let enc = self.i.encoding;
        let vop3p = enc == Encoding::Vop3p;
        match op {
            Operand::Vgpr(n) => {
                let n = usize::from(n);
                if k.wide() {
                    if n + 1 >= VGPRS {
                        return Err(self.err("a 64-bit source past v255"));
                    }
                    let (lo, hi) = (&self.w.vgpr[n], &self.w.vgpr[n + 1]);
                    for l in 0..LANES {
                        out[l] = u64::from(lo[l]) | u64::from(hi[l]) << 32;
                    }
                } else {
                    for (o, v) in out.iter_mut().zip(self.w.vgpr[n].iter()) {
                        *o = u64::from(*v);
                    }
                }
            }
            Operand::None => return Err(self.err("a missing source")),
            other => out.fill(self.scalar_src(other, k)?),
        }
        if vop3p {
            return Ok(());
        }
        // Sub-dword selection.
        if let Some(s) = self.i.sdwa().filter(|_| slot < 2) {
            let (sel, sext) = if slot == 0 {
                (s.src0_sel, s.src0_sext)
            } else {
                (s.src1_sel, s.src1_sext)
            };
            for v in out.iter_mut() {
                *v = u64::from(sdwa_sel(*v as u32, sel, sext && !k.float()));
            }
        } else if k.half() {
            let hi = enc == Encoding::Vop3a && self.i.mods.op_sel >> slot & 1 == 1;
            for v in out.iter_mut() {
                *v = if hi { *v >> 16 & 0xffff } else { *v & 0xffff };
            }
        }
        if slot == 0
            && let Some(src) = &self.dpp_src
        {
            let raw = *out;
            for (l, o) in out.iter_mut().enumerate() {
                *o = src[l].map_or(0, |s| raw[usize::from(s)]);
            }
        }
        if k.float() {
            let (abs, neg) = (
                self.i.mods.abs >> slot & 1 == 1,
                self.i.mods.neg >> slot & 1 == 1,
            );
            if abs || neg {
                let sign = k.sign();
                for v in out.iter_mut() {
                    if abs {
                        *v &= !sign;
                    }
                    if neg {
                        *v ^= sign;
                    }
                }
            }
        }
        Ok(())
    }

    /// The MODE register's input flush for kind `k`, of one value.
    #[inline]
    fn flush_one(&self, k: K, v: u64) -> u64 {
        match k {
            F32 if !self.mode.f32_in => u64::from(flush32(v as u32)),
            F64 if !self.mode.f64_in => flush64(v),
            F16 if !self.mode.f64_in => u64::from(flush16(v as u16)),
            _ => v,
        }
    }

    /// The MODE register's input flush for kind `k`.
    fn flush_in(&self, k: K, v: &mut L) {
        match k {
            F32 if !self.mode.f32_in => v
                .iter_mut()
                .for_each(|x| *x = u64::from(flush32(*x as u32))),
            F64 if !self.mode.f64_in => v.iter_mut().for_each(|x| *x = flush64(*x)),
            F16 if !self.mode.f64_in => v
                .iter_mut()
                .for_each(|x| *x = u64::from(flush16(*x as u16))),
            _ => {}
        }
    }

    /// Sources `0..kinds.len()` as those kinds, with the input flush.
    fn reads(&self, kinds: &[K]) -> Result<[L; 3], ExecError> {
        let mut s = [[0u64; LANES]; 3];
        self.reads_into(kinds, &mut s)?;
        Ok(s)
    }

    /// As [`Self::reads`], into `s`.
    fn reads_into(&self, kinds: &[K], s: &mut [L; 3]) -> Result<(), ExecError> {
        for (slot, &k) in kinds.iter().enumerate() {
            self.read_into(slot, k, &mut s[slot])?;
            self.flush_in(k, &mut s[slot]);
        }
        Ok(())
    }

    /// Whether results of kind `k` need [`Self::post`] at all.
    fn needs_post(&self, k: K) -> bool {
        let m = self.i.mods;
        match k {
            F32 => m.omod != 0 || m.clamp || !self.mode.f32_out,
            F64 | F16 => m.omod != 0 || m.clamp || !self.mode.f64_out,
            _ => false,
        }
    }

    /// The float result post-processing: VOP3/SDWA output modifier, clamp, output flush.
    #[inline]
    fn post(&self, k: K, v: u64) -> u64 {
        if !k.float() || k == M32 {
            return v;
        }
        let (omod, clamp) = (self.i.mods.omod, self.i.mods.clamp);
        let dx10 = self.mode.dx10_clamp;
        let mut v = v;
        if omod != 0 || clamp {
            let f = |x: f64| -> f64 {
                let x = match omod {
                    1 => x * 2.0,
                    2 => x * 4.0,
                    3 => x * 0.5,
                    _ => x,
                };
                if clamp { clamp01(x, dx10) } else { x }
            };
            v = match k {
                F32 => b32(f(f64::from(f32of(v))) as f32),
                F64 => b64(f(f64of(v))),
                _ => u64::from(f64_to_f16(f(f64::from(h(v))), false)),
            };
        }
        match k {
            F32 if !self.mode.f32_out => u64::from(flush32(v as u32)),
            F64 if !self.mode.f64_out => flush64(v),
            F16 if !self.mode.f64_out => u64::from(flush16(v as u16)),
            _ => v,
        }
    }

    /// Writes the per-lane results to the VGPR destination.
    fn write(&mut self, k: K, res: &L) -> Result<(), ExecError> {
        let Operand::Vgpr(d) = self.i.dst[0] else {
            return Err(self.err("not a VGPR destination"));
        };
        let d = usize::from(d);
        if k.wide() && d + 1 >= VGPRS {
            return Err(self.err("a 64-bit destination past v255"));
        }
        let sdwa = self.i.sdwa();
        let post = self.needs_post(k);
        if !post && !k.wide() && !k.half() && sdwa.is_none() {
            // The common case: 32-bit results written as they are.
            let dst = &mut self.w.vgpr[d];
            if let Some(n) = full_lanes(self.mask) {
                // Every lane of the wave (a straight loop the compiler vectorises).
                for (o, r) in dst.iter_mut().zip(res).take(n) {
                    *o = *r as u32;
                }
                return Ok(());
            }
            for l in lanes(self.mask) {
                dst[l] = res[l] as u32;
            }
            return Ok(());
        }
        for l in lanes(self.mask) {
            self.put(k, d, l, res[l], post);
        }
        Ok(())
    }

    /// Writes lane `l`'s result `v` of kind `k` to VGPR `d` (checked by the caller), through
    /// [`Self::post`] when `post`: [`Self::write`]'s per-lane step.
    #[inline]
    fn put(&mut self, k: K, d: usize, l: usize, v: u64, post: bool) {
        let v = if post { self.post(k, v) } else { v };
        if k.wide() {
            self.w.vgpr[d][l] = v as u32;
            self.w.vgpr[d + 1][l] = (v >> 32) as u32;
            return;
        }
        let old = self.w.vgpr[d][l];
        self.w.vgpr[d][l] = if let Some(s) = self.i.sdwa() {
            sdwa_dst(old, v as u32, s.dst_sel, s.dst_unused)
        } else if k.half() {
            match self.d16 {
                D16::Zero => v as u32 & 0xffff,
                D16::OpSel if self.i.mods.op_sel >> 3 & 1 == 1 => old & 0xffff | (v as u32) << 16,
                D16::OpSel => old & 0xffff_0000 | v as u32 & 0xffff,
            }
        } else {
            v as u32
        };
    }

    /// [`Self::write`] of the few lanes computed (lane, result), in lane order.
    fn write_lanes(&mut self, k: K, res: &[(usize, u64)]) -> Result<(), ExecError> {
        let Operand::Vgpr(d) = self.i.dst[0] else {
            return Err(self.err("not a VGPR destination"));
        };
        let d = usize::from(d);
        if k.wide() && d + 1 >= VGPRS {
            return Err(self.err("a 64-bit destination past v255"));
        }
        let post = self.needs_post(k);
        for &(l, v) in res {
            self.put(k, d, l, v, post);
        }
        Ok(())
    }

    /// [`Self::map_lane`] lane by lane ([`Self::sparse`]).
    fn map_sparse(
        &mut self,
        kinds: &[K],
        out: K,
        f: impl Fn(usize, [u64; 3]) -> u64,
    ) -> Result<(), ExecError> {
        let bases = self.bases(kinds)?;
        #[cfg(test)]
        SPARSE_RUNS.with(|c| c.set(c.get() + 1));
        let mut res = [(0usize, 0u64); SPARSE_LANES as usize];
        let mut n = 0;
        for l in lanes(self.mask) {
            res[n] = (l, f(l, self.lane_srcs(kinds, &bases, l)));
            n += 1;
        }
        self.write_lanes(out, &res[..n])
    }

    /// Runs `f` on every computed lane's sources and writes the results as `out`.
    fn map(&mut self, kinds: &[K], out: K, f: impl Fn([u64; 3]) -> u64) -> Result<(), ExecError> {
        if self.sparse() {
            return self.map_sparse(kinds, out, |_, s| f(s));
        }
        let mut s = [[0u64; LANES]; 3];
        self.reads_into(kinds, &mut s)?;
        let mut res = [0u64; LANES];
        if let Some(n) = full_lanes(self.mask) {
            // Every lane of the wave: a straight loop (vectorised for the simple operations)
            // instead of one mask scan per lane.
            for (l, r) in res.iter_mut().enumerate().take(n) {
                *r = f([s[0][l], s[1][l], s[2][l]]);
            }
        } else {
            for l in lanes(self.mask) {
                res[l] = f([s[0][l], s[1][l], s[2][l]]);
            }
        }
        self.write(out, &res)
    }

    /// As [`Self::map`], with the lane number.
    fn map_lane(
        &mut self,
        kinds: &[K],
        out: K,
        f: impl Fn(usize, [u64; 3]) -> u64,
    ) -> Result<(), ExecError> {
        if self.sparse() {
            return self.map_sparse(kinds, out, f);
        }
        let mut s = [[0u64; LANES]; 3];
        self.reads_into(kinds, &mut s)?;
        let mut res = [0u64; LANES];
        if let Some(n) = full_lanes(self.mask) {
            // Every lane (as in `map`).
            for (l, r) in res.iter_mut().enumerate().take(n) {
                *r = f(l, [s[0][l], s[1][l], s[2][l]]);
            }
        } else {
            for l in lanes(self.mask) {
                res[l] = f(l, [s[0][l], s[1][l], s[2][l]]);
            }
        }
        self.write(out, &res)
    }

    /// An operation with a per-lane flag result (carry, borrow, `v_div_scale`'s VCC) written to
    /// `dst[1]`; `carry_in` reads `src[2]` as a lane mask passed to `f`.
    fn map_carry(
        &mut self,
        kinds: &[K],
        out: K,
        carry_in: bool,
        f: impl Fn([u64; 3], bool) -> (u64, bool),
    ) -> Result<(), ExecError> {
        if self.sparse() {
            let bases = self.bases(kinds)?;
            #[cfg(test)]
            SPARSE_RUNS.with(|c| c.set(c.get() + 1));
            let cin = self.carry_in(carry_in)?;
            let mut res = [(0usize, 0u64); SPARSE_LANES as usize];
            let (mut n, mut flags) = (0, 0u64);
            for l in lanes(self.mask) {
                let (r, c) = f(self.lane_srcs(kinds, &bases, l), cin >> l & 1 == 1);
                res[n] = (l, r);
                n += 1;
                flags |= u64::from(c) << l;
            }
            self.write_lanes(out, &res[..n])?;
            if !self.w.write_mask(self.i.dst[1], flags) {
                return Err(self.err("a carry-out that is not a lane mask"));
            }
            return Ok(());
        }
        // Read in place (`reads` would return the three lane arrays by value: a 1.5 KiB copy
        // per instruction).
        let mut s = [[0u64; LANES]; 3];
        self.reads_into(kinds, &mut s)?;
        let cin = self.carry_in(carry_in)?;
        let mut res = [0u64; LANES];
        let mut flags = 0u64;
        if let Some(n) = full_lanes(self.mask) {
            // Every lane (as in `map`).
            for (l, out) in res.iter_mut().enumerate().take(n) {
                let (r, c) = f([s[0][l], s[1][l], s[2][l]], cin >> l & 1 == 1);
                *out = r;
                flags |= u64::from(c) << l;
            }
        } else {
            for l in lanes(self.mask) {
                let (r, c) = f([s[0][l], s[1][l], s[2][l]], cin >> l & 1 == 1);
                res[l] = r;
                flags |= u64::from(c) << l;
            }
        }
        self.write(out, &res)?;
        if !self.w.write_mask(self.i.dst[1], flags) {
            return Err(self.err("a carry-out that is not a lane mask"));
        }
        Ok(())
    }

    /// The carry-in lane mask from `src[2]` when `carry_in`, else 0.
    fn carry_in(&self, carry_in: bool) -> Result<u64, ExecError> {
        if !carry_in {
            return Ok(0);
        }
        self.w
            .read_mask(self.i.src[2])
            .ok_or_else(|| self.err("a carry-in that is not a lane mask"))
    }

    /// The destination VGPR as source 2 (`v_mac`, `v_fmac`, `v_dot*c`, `v_pk_fmac`).
    fn dst_as_src2(&mut self) {
        self.i.src[2] = self.i.dst[0];
    }

    fn vop1(&mut self, op: Vop1Op) -> Result<(), ExecError> {
        use Vop1Op::*;
        let (r32, r64) = (self.mode.r32, self.mode.r64);
        match op {
            VNop | VClrexcp => Ok(()),
            VMovB32 => self.map(&[B32], B32, |s| s[0]),
            // gfx940 (MI300) only; the opcode is unused on gfx90a.
            VMovB64 => self.map(&[B64], B64, |s| s[0]),
            VReadfirstlaneB32 => {
                let s = self.read(0, B32)?;
                let lane = if self.w.exec == 0 {
                    0
                } else {
                    self.w.exec.trailing_zeros() as usize
                };
                if !self.w.write_scalar32(self.i.dst[0], s[lane] as u32) {
                    return Err(self.err("not a scalar destination"));
                }
                Ok(())
            }
            VCvtI32F64 => self.map(&[F64], B32, |s| u64::from(f64of(s[0]) as i32 as u32)),
            VCvtF64I32 => self.map(&[B32], F64, |s| b64(f64::from(s[0] as u32 as i32))),
            VCvtF32I32 => self.map(&[B32], F32, move |s| {
                b32(round::convert(f64::from(s[0] as u32 as i32), Fmt::F32, r32) as f32)
            }),
            VCvtF32U32 => self.map(&[B32], F32, move |s| {
                b32(round::convert(f64::from(s[0] as u32), Fmt::F32, r32) as f32)
            }),
            VCvtU32F32 => self.map(&[F32], B32, |s| u64::from(f32of(s[0]) as u32)),
            VCvtI32F32 => self.map(&[F32], B32, |s| u64::from(f32of(s[0]) as i32 as u32)),
            VCvtF16F32 => self.map(&[F32], F16, move |s| {
                hb64(round::convert(f64::from(f32of(s[0])), Fmt::F16, r64))
            }),
            VCvtF32F16 => self.map(&[F16], F32, |s| b32(h(s[0]))),
            VCvtRpiI32F32 => self.map(&[F32], B32, |s| {
                u64::from((f32of(s[0]) + 0.5).floor() as i32 as u32)
            }),
            VCvtFlrI32F32 => self.map(
                &[F32],
                B32,
                |s| u64::from(f32of(s[0]).floor() as i32 as u32),
            ),
            VCvtOffF32I4 => self.map(&[B32], F32, |s| {
                b32(f32::from(((s[0] as u8) << 4) as i8 >> 4) / 16.0)
            }),
            VCvtF32F64 => self.map(&[F64], F32, move |s| {
                b32(round::convert(f64of(s[0]), Fmt::F32, r32) as f32)
            }),
            VCvtF64F32 => self.map(&[F32], F64, |s| b64(f64::from(f32of(s[0])))),
            VCvtF32Ubyte0 | VCvtF32Ubyte1 | VCvtF32Ubyte2 | VCvtF32Ubyte3 => {
                let shift = 8 * (op.raw() - VCvtF32Ubyte0.raw()) as u32;
                self.map(&[B32], F32, move |s| b32(f32::from((s[0] >> shift) as u8)))
            }
            VCvtU32F64 => self.map(&[F64], B32, |s| u64::from(f64of(s[0]) as u32)),
            VCvtF64U32 => self.map(&[B32], F64, |s| b64(f64::from(s[0] as u32))),
            VTruncF64 => self.map(&[F64], F64, |s| b64(f64of(s[0]).trunc())),
            VCeilF64 => self.map(&[F64], F64, |s| b64(f64of(s[0]).ceil())),
            VRndneF64 => self.map(&[F64], F64, |s| b64(f64of(s[0]).round_ties_even())),
            VFloorF64 => self.map(&[F64], F64, |s| b64(f64of(s[0]).floor())),
            VFractF32 => self.map(&[F32], F32, |s| {
                let x = f32of(s[0]);
                b32((x - x.floor()).min(f32::from_bits(0x3f7f_ffff)))
            }),
            VTruncF32 => self.map(&[F32], F32, |s| b32(f32of(s[0]).trunc())),
            VCeilF32 => self.map(&[F32], F32, |s| b32(f32of(s[0]).ceil())),
            VRndneF32 => self.map(&[F32], F32, |s| b32(f32of(s[0]).round_ties_even())),
            VFloorF32 => self.map(&[F32], F32, |s| b32(f32of(s[0]).floor())),
            VExpF32 | VExpLegacyF32 => {
                self.map(&[F32], F32, |s| b32(f64::from(f32of(s[0])).exp2() as f32))
            }
            VLogF32 | VLogLegacyF32 => {
                self.map(&[F32], F32, |s| b32(f64::from(f32of(s[0])).log2() as f32))
            }
            VRcpF32 | VRcpIflagF32 => {
                self.map(&[F32], F32, |s| b32((1.0 / f64::from(f32of(s[0]))) as f32))
            }
            VRsqF32 => self.map(&[F32], F32, |s| {
                b32((1.0 / f64::from(f32of(s[0])).sqrt()) as f32)
            }),
            VRcpF64 => self.map(&[F64], F64, |s| b64(1.0 / f64of(s[0]))),
            VRsqF64 => self.map(&[F64], F64, |s| b64(1.0 / f64of(s[0]).sqrt())),
            VSqrtF32 => self.map(&[F32], F32, move |s| b32(round::sqrt32(f32of(s[0]), r32))),
            VSqrtF64 => self.map(&[F64], F64, move |s| b64(round::sqrt64(f64of(s[0]), r64))),
            // The guide's V_SIN_F32: sin(S0 · 2π) (the argument in revolutions).
            VSinF32 => self.map(&[F32], F32, |s| {
                b32((f64::from(f32of(s[0])) * std::f64::consts::TAU).sin() as f32)
            }),
            VCosF32 => self.map(&[F32], F32, |s| {
                b32((f64::from(f32of(s[0])) * std::f64::consts::TAU).cos() as f32)
            }),
            VNotB32 => self.map(&[B32], B32, |s| !s[0] & 0xffff_ffff),
            VBfrevB32 => self.map(&[B32], B32, |s| u64::from((s[0] as u32).reverse_bits())),
            // Count from the MSB to the first 1 (none: -1).
            VFfbhU32 => self.map(&[B32], B32, |s| {
                let v = s[0] as u32;
                u64::from(if v == 0 { u32::MAX } else { v.leading_zeros() })
            }),
            VFfblB32 => self.map(&[B32], B32, |s| {
                let v = s[0] as u32;
                u64::from(if v == 0 { u32::MAX } else { v.trailing_zeros() })
            }),
            // Count from the MSB to the first bit that differs from the sign (none: -1).
            VFfbhI32 => self.map(&[B32], B32, |s| {
                let v = s[0] as u32 as i32;
                u64::from(if v == 0 || v == -1 {
                    u32::MAX
                } else {
                    (if v < 0 { !v } else { v }).leading_zeros() - 1
                })
            }),
            VFrexpExpI32F64 => self.map(&[F64], B32, |s| {
                let x = f64of(s[0]);
                u64::from(if x.is_finite() {
                    frexp64(x).1 as u32
                } else {
                    0
                })
            }),
            VFrexpMantF64 => self.map(&[F64], F64, |s| b64(frexp64(f64of(s[0])).0)),
            VFractF64 => self.map(&[F64], F64, |s| {
                let x = f64of(s[0]);
                b64((x - x.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff)))
            }),
            VFrexpExpI32F32 => self.map(&[F32], B32, |s| {
                let x = f64::from(f32of(s[0]));
                u64::from(if x.is_finite() {
                    frexp64(x).1 as u32
                } else {
                    0
                })
            }),
            VFrexpMantF32 => self.map(&[F32], F32, |s| {
                b32(frexp64(f64::from(f32of(s[0]))).0 as f32)
            }),
            VCvtF16U16 => self.map(&[B16], F16, move |s| {
                hb64(round::convert(f64::from(s[0] as u16), Fmt::F16, r64))
            }),
            VCvtF16I16 => self.map(&[B16], F16, move |s| {
                hb64(round::convert(f64::from(s[0] as u16 as i16), Fmt::F16, r64))
            }),
            VCvtU16F16 => self.map(&[F16], B16, |s| u64::from(h(s[0]) as u16)),
            VCvtI16F16 => self.map(&[F16], B16, |s| u64::from(h(s[0]) as i16 as u16)),
            VRcpF16 => self.map(&[F16], F16, |s| hb(1.0 / h(s[0]))),
            VSqrtF16 => self.map(&[F16], F16, move |s| hb64(round::sqrt16(h64(s[0]), r64))),
            VRsqF16 => self.map(&[F16], F16, |s| hb(1.0 / h(s[0]).sqrt())),
            VLogF16 => self.map(&[F16], F16, |s| hb(h(s[0]).log2())),
            VExpF16 => self.map(&[F16], F16, |s| hb(h(s[0]).exp2())),
            VFrexpMantF16 => self.map(&[F16], F16, |s| hb(frexp64(f64::from(h(s[0]))).0 as f32)),
            VFrexpExpI16F16 => self.map(&[F16], B16, |s| {
                let x = f64::from(h(s[0]));
                u64::from(if x.is_finite() {
                    frexp64(x).1 as u16
                } else {
                    0
                })
            }),
            VFloorF16 => self.map(&[F16], F16, |s| hb(h(s[0]).floor())),
            VCeilF16 => self.map(&[F16], F16, |s| hb(h(s[0]).ceil())),
            VTruncF16 => self.map(&[F16], F16, |s| hb(h(s[0]).trunc())),
            VRndneF16 => self.map(&[F16], F16, |s| hb(h(s[0]).round_ties_even())),
            VFractF16 => self.map(&[F16], F16, |s| {
                let x = h(s[0]);
                u64::from(f32_to_f16(x - x.floor()).min(0x3bff))
            }),
            VSinF16 => self.map(&[F16], F16, |s| {
                hb((f64::from(h(s[0])) * std::f64::consts::TAU).sin() as f32)
            }),
            VCosF16 => self.map(&[F16], F16, |s| {
                hb((f64::from(h(s[0])) * std::f64::consts::TAU).cos() as f32)
            }),
            VCvtNormI16F16 => self.map(&[F16], B16, |s| {
                let x = h(s[0]);
                let x = if x.is_nan() { 0.0 } else { x.clamp(-1.0, 1.0) };
                u64::from((x * 32767.0).round_ties_even() as i16 as u16)
            }),
            VCvtNormU16F16 => self.map(&[F16], B16, |s| {
                let x = h(s[0]);
                let x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                u64::from((x * 65535.0).round_ties_even() as u16)
            }),
            VSatPkU8I16 => self.map(&[B32], B32, |s| {
                let sat = |v: u64| u64::from((v as u16 as i16).clamp(0, 255) as u8);
                sat(s[0]) | sat(s[0] >> 16) << 8
            }),
            VSwapB32 => {
                let (Operand::Vgpr(d), Operand::Vgpr(s)) = (self.i.dst[0], self.i.src[0]) else {
                    return Err(self.err("v_swap_b32 swaps two VGPRs"));
                };
                let (d, s) = (usize::from(d), usize::from(s));
                for l in lanes(self.mask) {
                    let t = self.w.vgpr[d][l];
                    self.w.vgpr[d][l] = self.w.vgpr[s][l];
                    self.w.vgpr[s][l] = t;
                }
                Ok(())
            }
            // The operands are AGPRs (the VGPR fields number them).
            VAccvgprMovB32 => {
                let (Operand::Vgpr(d), Operand::Vgpr(s)) = (self.i.dst[0], self.i.src[0]) else {
                    return Err(self.err("v_accvgpr_mov_b32 moves between AGPRs"));
                };
                let (d, s) = (usize::from(d), usize::from(s));
                for l in lanes(self.mask) {
                    self.w.agpr[d][l] = self.w.agpr[s][l];
                }
                Ok(())
            }
        }
    }

    fn vop2(&mut self, op: Vop2Op) -> Result<(), ExecError> {
        use Vop2Op::*;
        let (r32, r64) = (self.mode.r32, self.mode.r64);
        let ieee = self.mode.ieee;
        let clamp = self.i.mods.clamp;
        // Integer clamp saturates (the guide: "clamp" on integer adds).
        let usat = move |v: u64, over: bool, under: bool| -> u64 {
            if !clamp {
                v & 0xffff_ffff
            } else if over {
                0xffff_ffff
            } else if under {
                0
            } else {
                v & 0xffff_ffff
            }
        };
        match op {
            VCndmaskB32 => {
                let mask = self
                    .w
                    .read_mask(self.i.src[2])
                    .ok_or_else(|| self.err("a mask that is not a lane mask"))?;
                self.map_lane(&[M32, M32], M32, |l, s| s[(mask >> l & 1) as usize])
            }
            VAddF32 => self.map(&[F32, F32], F32, move |s| {
                b32(round::add32(f32of(s[0]), f32of(s[1]), r32))
            }),
            VSubF32 => self.map(&[F32, F32], F32, move |s| {
                b32(round::sub32(f32of(s[0]), f32of(s[1]), r32))
            }),
            VSubrevF32 => self.map(&[F32, F32], F32, move |s| {
                b32(round::sub32(f32of(s[1]), f32of(s[0]), r32))
            }),
            VMulF32 => self.map(&[F32, F32], F32, move |s| {
                b32(round::mul32(f32of(s[0]), f32of(s[1]), r32))
            }),
            VFmacF64 => {
                self.dst_as_src2();
                self.map(&[F64, F64, F64], F64, move |s| {
                    b64(round::fma64(f64of(s[0]), f64of(s[1]), f64of(s[2]), r64))
                })
            }
            VMulI32I24 => self.map(&[B32, B32], B32, |s| {
                (sext24(s[0]) * sext24(s[1])) as u64 & 0xffff_ffff
            }),
            VMulHiI32I24 => self.map(&[B32, B32], B32, |s| {
                ((sext24(s[0]) * sext24(s[1])) >> 32) as u64 & 0xffff_ffff
            }),
            VMulU32U24 => self.map(&[B32, B32], B32, |s| {
                ((s[0] & 0xff_ffff) * (s[1] & 0xff_ffff)) & 0xffff_ffff
            }),
            VMulHiU32U24 => self.map(&[B32, B32], B32, |s| {
                ((s[0] & 0xff_ffff) * (s[1] & 0xff_ffff)) >> 32
            }),
            VMinF32 => self.map(&[F32, F32], F32, move |s| {
                b32(minmax32(f32of(s[0]), f32of(s[1]), false, ieee))
            }),
            VMaxF32 => self.map(&[F32, F32], F32, move |s| {
                b32(minmax32(f32of(s[0]), f32of(s[1]), true, ieee))
            }),
            VMinI32 => self.map(&[B32, B32], B32, |s| {
                u64::from((s[0] as i32).min(s[1] as i32) as u32)
            }),
            VMaxI32 => self.map(&[B32, B32], B32, |s| {
                u64::from((s[0] as i32).max(s[1] as i32) as u32)
            }),
            VMinU32 => self.map(&[B32, B32], B32, |s| s[0].min(s[1])),
            VMaxU32 => self.map(&[B32, B32], B32, |s| s[0].max(s[1])),
            VLshrrevB32 => self.map(&[B32, B32], B32, |s| s[1] >> (s[0] & 31)),
            VAshrrevI32 => self.map(&[B32, B32], B32, |s| {
                u64::from(((s[1] as i32) >> (s[0] & 31)) as u32)
            }),
            VLshlrevB32 => self.map(&[B32, B32], B32, |s| (s[1] << (s[0] & 31)) & 0xffff_ffff),
            VAndB32 => self.map(&[B32, B32], B32, |s| s[0] & s[1]),
            VOrB32 => self.map(&[B32, B32], B32, |s| s[0] | s[1]),
            VXorB32 => self.map(&[B32, B32], B32, |s| s[0] ^ s[1]),
            VXnorB32 => self.map(&[B32, B32], B32, |s| !(s[0] ^ s[1]) & 0xffff_ffff),
            // Not fused: the product is rounded, then the sum (the guide's V_MAC_F32).
            VMacF32 => {
                self.dst_as_src2();
                self.map(&[F32, F32, F32], F32, move |s| {
                    b32(round::mad32(f32of(s[0]), f32of(s[1]), f32of(s[2]), r32))
                })
            }
            VMadmkF32 => self.map(&[F32, F32, F32], F32, move |s| {
                b32(round::mad32(f32of(s[0]), f32of(s[2]), f32of(s[1]), r32))
            }),
            VMadakF32 => self.map(&[F32, F32, F32], F32, move |s| {
                b32(round::mad32(f32of(s[0]), f32of(s[1]), f32of(s[2]), r32))
            }),
            VAddCoU32 => self.map_carry(&[B32, B32], B32, false, move |s, _| {
                let r = s[0] + s[1];
                (usat(r, r >> 32 != 0, false), r >> 32 != 0)
            }),
            VSubCoU32 => self.map_carry(&[B32, B32], B32, false, move |s, _| {
                let b = s[1] > s[0];
                (usat(s[0].wrapping_sub(s[1]), false, b), b)
            }),
            VSubrevCoU32 => self.map_carry(&[B32, B32], B32, false, move |s, _| {
                let b = s[0] > s[1];
                (usat(s[1].wrapping_sub(s[0]), false, b), b)
            }),
            VAddcCoU32 => self.map_carry(&[B32, B32], B32, true, move |s, c| {
                let r = s[0] + s[1] + u64::from(c);
                (usat(r, r >> 32 != 0, false), r >> 32 != 0)
            }),
            VSubbCoU32 => self.map_carry(&[B32, B32], B32, true, move |s, c| {
                let b = s[1] + u64::from(c) > s[0];
                (usat(s[0].wrapping_sub(s[1] + u64::from(c)), false, b), b)
            }),
            VSubbrevCoU32 => self.map_carry(&[B32, B32], B32, true, move |s, c| {
                let b = s[0] + u64::from(c) > s[1];
                (usat(s[1].wrapping_sub(s[0] + u64::from(c)), false, b), b)
            }),
            VAddF16 => self.map(&[F16, F16], F16, move |s| {
                hb64(round::add16(h64(s[0]), h64(s[1]), r64))
            }),
            VSubF16 => self.map(&[F16, F16], F16, move |s| {
                hb64(round::sub16(h64(s[0]), h64(s[1]), r64))
            }),
            VSubrevF16 => self.map(&[F16, F16], F16, move |s| {
                hb64(round::sub16(h64(s[1]), h64(s[0]), r64))
            }),
            VMulF16 => self.map(&[F16, F16], F16, move |s| {
                hb64(round::mul16(h64(s[0]), h64(s[1]), r64))
            }),
            // gfx9 changed these three to keep the destination's high half (LLVM's
            // GCNSubtarget::zeroesHigh16BitsOfDest: zeroing only on gfx8); the other 16-bit
            // VOP1/VOP2 results zero it.
            VMacF16 => {
                self.dst_as_src2();
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, move |s| {
                    hb64(round::mad16(h64(s[0]), h64(s[1]), h64(s[2]), r64))
                })
            }
            VMadmkF16 => {
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, move |s| {
                    hb64(round::mad16(h64(s[0]), h64(s[2]), h64(s[1]), r64))
                })
            }
            VMadakF16 => {
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, move |s| {
                    hb64(round::mad16(h64(s[0]), h64(s[1]), h64(s[2]), r64))
                })
            }
            VAddU16 => self.map(&[B16, B16], B16, move |s| {
                let r = s[0] + s[1];
                if clamp { r.min(0xffff) } else { r & 0xffff }
            }),
            VSubU16 => self.map(&[B16, B16], B16, move |s| {
                if clamp && s[1] > s[0] {
                    0
                } else {
                    s[0].wrapping_sub(s[1]) & 0xffff
                }
            }),
            VSubrevU16 => self.map(&[B16, B16], B16, move |s| {
                if clamp && s[0] > s[1] {
                    0
                } else {
                    s[1].wrapping_sub(s[0]) & 0xffff
                }
            }),
            VMulLoU16 => self.map(&[B16, B16], B16, |s| (s[0] * s[1]) & 0xffff),
            VLshlrevB16 => self.map(&[B16, B16], B16, |s| (s[1] << (s[0] & 15)) & 0xffff),
            VLshrrevB16 => self.map(&[B16, B16], B16, |s| s[1] >> (s[0] & 15)),
            VAshrrevI16 => self.map(&[B16, B16], B16, |s| {
                u64::from(((s[1] as u16 as i16) >> (s[0] & 15)) as u16)
            }),
            VMaxF16 => self.map(&[F16, F16], F16, move |s| {
                hb(minmax32(h(s[0]), h(s[1]), true, ieee))
            }),
            VMinF16 => self.map(&[F16, F16], F16, move |s| {
                hb(minmax32(h(s[0]), h(s[1]), false, ieee))
            }),
            VMaxU16 => self.map(&[B16, B16], B16, |s| s[0].max(s[1])),
            VMinU16 => self.map(&[B16, B16], B16, |s| s[0].min(s[1])),
            VMaxI16 => self.map(&[B16, B16], B16, |s| {
                u64::from((s[0] as u16 as i16).max(s[1] as u16 as i16) as u16)
            }),
            VMinI16 => self.map(&[B16, B16], B16, |s| {
                u64::from((s[0] as u16 as i16).min(s[1] as u16 as i16) as u16)
            }),
            VLdexpF16 => self.map(&[F16, B32], F16, move |s| {
                let n = i64::from(s[1] as u16 as i16);
                hb64(round::ldexp(h64(s[0]), n, Fmt::F16, r64))
            }),
            VAddU32 => self.map(&[B32, B32], B32, move |s| {
                let r = s[0] + s[1];
                usat(r, r >> 32 != 0, false)
            }),
            VSubU32 => self.map(&[B32, B32], B32, move |s| {
                usat(s[0].wrapping_sub(s[1]), false, s[1] > s[0])
            }),
            VSubrevU32 => self.map(&[B32, B32], B32, move |s| {
                usat(s[1].wrapping_sub(s[0]), false, s[0] > s[1])
            }),
            VFmacF32 => {
                self.dst_as_src2();
                self.map(&[F32, F32, F32], F32, move |s| {
                    b32(round::fma32(f32of(s[0]), f32of(s[1]), f32of(s[2]), r32))
                })
            }
            // D = D + a.lo·b.lo + a.hi·b.hi (f16 products, f32 sum).
            VDot2cF32F16 => {
                self.dst_as_src2();
                self.map(&[B32, B32, F32], F32, |s| {
                    let p = |k: u32| f64::from(h(s[0] >> k)) * f64::from(h(s[1] >> k));
                    b32((f64::from(f32of(s[2])) + p(0) + p(16)) as f32)
                })
            }
            VDot2cI32I16 => {
                self.dst_as_src2();
                self.map(&[B32, B32, B32], B32, |s| {
                    let p = |k: u32| {
                        i32::from((s[0] >> k) as u16 as i16) * i32::from((s[1] >> k) as u16 as i16)
                    };
                    u64::from((s[2] as u32 as i32).wrapping_add(p(0)).wrapping_add(p(16)) as u32)
                })
            }
            VDot4cI32I8 => {
                self.dst_as_src2();
                self.map(&[B32, B32, B32], B32, |s| {
                    let mut acc = s[2] as u32 as i32;
                    for k in 0..4 {
                        acc = acc.wrapping_add(
                            i32::from((s[0] >> (8 * k)) as u8 as i8)
                                * i32::from((s[1] >> (8 * k)) as u8 as i8),
                        );
                    }
                    u64::from(acc as u32)
                })
            }
            VDot8cI32I4 => {
                self.dst_as_src2();
                self.map(&[B32, B32, B32], B32, |s| {
                    let nib = |v: u64, k: u32| i32::from(((v >> (4 * k)) as u8) << 4) << 24 >> 28;
                    let mut acc = s[2] as u32 as i32;
                    for k in 0..8 {
                        acc = acc.wrapping_add(nib(s[0], k) * nib(s[1], k));
                    }
                    u64::from(acc as u32)
                })
            }
            VPkFmacF16 => {
                self.dst_as_src2();
                self.map(&[B32, B32, B32], B32, move |s| {
                    let f = |k: u32| {
                        let [a, b, c] = [s[0] >> k, s[1] >> k, s[2] >> k].map(h64);
                        hb64(round::fma16(a, b, c, r64))
                    };
                    f(0) | f(16) << 16
                })
            }
        }
    }

    fn vopc(&mut self, op: VopcOp) -> Result<(), ExecError> {
        let raw = op.raw();
        let cmpx;
        let mut bits = 0u64;
        if raw < 0x20 {
            // v_cmp_class_*: S1's bits select classes of S0.
            cmpx = raw & 1 == 1;
            let k = match raw >> 1 & 3 {
                0 => F32,
                1 => F64,
                _ => F16,
            };
            let (a, m) = (self.read(0, k)?, self.read(1, B32)?);
            for l in lanes(self.mask) {
                let (x, snan, den) = match k {
                    F32 => {
                        let v = a[l] as u32;
                        let f = f32::from_bits(v);
                        (
                            f64::from(f),
                            f.is_nan() && v & 0x40_0000 == 0,
                            v & 0x7f80_0000 == 0 && v & 0x7f_ffff != 0,
                        )
                    }
                    F64 => {
                        let f = f64of(a[l]);
                        (
                            f,
                            f.is_nan() && a[l] & (1 << 51) == 0,
                            f != 0.0 && f.abs() < f64::MIN_POSITIVE,
                        )
                    }
                    _ => {
                        let v = a[l] as u16;
                        (
                            f64::from(h(a[l])),
                            v & 0x7c00 == 0x7c00 && v & 0x3ff != 0 && v & 0x200 == 0,
                            v & 0x7c00 == 0 && v & 0x3ff != 0,
                        )
                    }
                };
                if m[l] >> class_bit(x, snan, den) & 1 == 1 {
                    bits |= 1 << l;
                }
            }
        } else if raw < 0x80 {
            cmpx = raw & 0x10 != 0;
            let k = match raw >> 5 {
                1 => F16,
                2 => F32,
                _ => F64,
            };
            let s = self.reads(&[k, k])?;
            let val = |v: u64| match k {
                F16 => f64::from(h(v)),
                F32 => f64::from(f32of(v)),
                _ => f64of(v),
            };
            let pred = raw & 0xf;
            for l in lanes(self.mask) {
                use std::cmp::Ordering::{Equal, Greater, Less};
                // The guide's predicates; "n" forms are true when unordered.
                let o = val(s[0][l]).partial_cmp(&val(s[1][l]));
                let r = match pred {
                    0 => false,
                    1 => o == Some(Less),
                    2 => o == Some(Equal),
                    3 => matches!(o, Some(Less | Equal)),
                    4 => o == Some(Greater),
                    5 => matches!(o, Some(Less | Greater)),
                    6 => matches!(o, Some(Greater | Equal)),
                    7 => o.is_some(),
                    8 => o.is_none(),
                    9 => !matches!(o, Some(Greater | Equal)),
                    10 => !matches!(o, Some(Less | Greater)),
                    11 => o != Some(Greater),
                    12 => !matches!(o, Some(Less | Equal)),
                    13 => o != Some(Equal),
                    14 => o != Some(Less),
                    _ => true,
                };
                bits |= u64::from(r) << l;
            }
        } else if raw >= 0xa0 {
            cmpx = raw & 0x10 != 0;
            let signed = raw & 8 == 0;
            let (k, width) = match raw >> 5 {
                5 => (B16, 16),
                6 => (B32, 32),
                _ => (B64, 64),
            };
            let s = self.reads(&[k, k])?;
            let norm = |v: u64| -> i128 {
                if signed {
                    i128::from(((v << (64 - width)) as i64) >> (64 - width))
                } else {
                    i128::from(if width == 64 {
                        v
                    } else {
                        v & ((1 << width) - 1)
                    })
                }
            };
            let pred = raw & 7;
            for l in lanes(self.mask) {
                let (a, b) = (norm(s[0][l]), norm(s[1][l]));
                let r = match pred {
                    0 => false,
                    1 => a < b,
                    2 => a == b,
                    3 => a <= b,
                    4 => a > b,
                    5 => a != b,
                    6 => a >= b,
                    _ => true,
                };
                bits |= u64::from(r) << l;
            }
        } else {
            return Err(self.unimpl());
        }
        if !self.w.write_mask(self.i.dst[0], bits) {
            return Err(self.err("a compare result that is not a lane mask"));
        }
        // gfx9's v_cmpx writes EXEC as well as its destination.
        if cmpx {
            self.w.exec = bits;
        }
        Ok(())
    }

    fn vop3(&mut self, op: Vop3Op) -> Result<(), ExecError> {
        use Vop3Op::*;
        let (r32, r64) = (self.mode.r32, self.mode.r64);
        let ieee = self.mode.ieee;
        let clamp = self.i.mods.clamp;
        let u16med = |a: u64, b: u64, c: u64| a.max(b).min(a.min(b).max(c));
        let i16v = |v: u64| i64::from(v as u16 as i16);
        match op {
            // DX9 rules: 0 times anything (even inf or NaN) is 0.
            VMadLegacyF32 => self.map(&[F32, F32, F32], F32, |s| {
                let (a, b, c) = (f32of(s[0]), f32of(s[1]), f32of(s[2]));
                let p = if a == 0.0 || b == 0.0 { 0.0 } else { a * b };
                b32(p + c)
            }),
            VMadF32 => self.map(&[F32, F32, F32], F32, move |s| {
                b32(round::mad32(f32of(s[0]), f32of(s[1]), f32of(s[2]), r32))
            }),
            VMadI32I24 => self.map(&[B32, B32, B32], B32, |s| {
                (sext24(s[0]) * sext24(s[1])).wrapping_add(s[2] as u32 as i32 as i64) as u64
                    & 0xffff_ffff
            }),
            VMadU32U24 => self.map(&[B32, B32, B32], B32, |s| {
                ((s[0] & 0xff_ffff) * (s[1] & 0xff_ffff) + s[2]) & 0xffff_ffff
            }),
            VBfeU32 => self.map(&[B32, B32, B32], B32, |s| {
                let (off, width) = (s[1] & 31, s[2] & 31);
                (s[0] >> off) & ((1u64 << width) - 1)
            }),
            VBfeI32 => self.map(&[B32, B32, B32], B32, |s| {
                let (off, width) = (s[1] & 31, s[2] & 31);
                if width == 0 {
                    return 0;
                }
                let v = ((s[0] as u32) >> off) << (32 - width);
                u64::from(((v as i32) >> (32 - width)) as u32)
            }),
            VBfiB32 => self.map(&[B32, B32, B32], B32, |s| {
                (s[0] & s[1]) | (!s[0] & s[2] & 0xffff_ffff)
            }),
            VFmaF32 => self.map(&[F32, F32, F32], F32, move |s| {
                b32(round::fma32(f32of(s[0]), f32of(s[1]), f32of(s[2]), r32))
            }),
            VFmaF64 => self.map(&[F64, F64, F64], F64, move |s| {
                b64(round::fma64(f64of(s[0]), f64of(s[1]), f64of(s[2]), r64))
            }),
            VAlignbitB32 => self.map(&[B32, B32, B32], B32, |s| {
                ((s[0] << 32 | s[1]) >> (s[2] & 31)) & 0xffff_ffff
            }),
            VAlignbyteB32 => self.map(&[B32, B32, B32], B32, |s| {
                ((s[0] << 32 | s[1]) >> (8 * (s[2] & 3))) & 0xffff_ffff
            }),
            VMin3F32 => self.map(&[F32, F32, F32], F32, move |s| {
                let m = minmax32(f32of(s[0]), f32of(s[1]), false, ieee);
                b32(minmax32(m, f32of(s[2]), false, ieee))
            }),
            VMax3F32 => self.map(&[F32, F32, F32], F32, move |s| {
                let m = minmax32(f32of(s[0]), f32of(s[1]), true, ieee);
                b32(minmax32(m, f32of(s[2]), true, ieee))
            }),
            VMed3F32 => self.map(&[F32, F32, F32], F32, move |s| {
                b32(med3_32(f32of(s[0]), f32of(s[1]), f32of(s[2]), ieee))
            }),
            VMin3I32 => self.map(&[B32, B32, B32], B32, |s| {
                let v = [s[0], s[1], s[2]].map(|x| x as u32 as i32);
                u64::from(v[0].min(v[1]).min(v[2]) as u32)
            }),
            VMax3I32 => self.map(&[B32, B32, B32], B32, |s| {
                let v = [s[0], s[1], s[2]].map(|x| x as u32 as i32);
                u64::from(v[0].max(v[1]).max(v[2]) as u32)
            }),
            VMed3I32 => self.map(&[B32, B32, B32], B32, |s| {
                let [a, b, c] = [s[0], s[1], s[2]].map(|x| x as u32 as i32);
                u64::from(a.max(b).min(a.min(b).max(c)) as u32)
            }),
            VMin3U32 => self.map(&[B32, B32, B32], B32, |s| s[0].min(s[1]).min(s[2])),
            VMax3U32 => self.map(&[B32, B32, B32], B32, |s| s[0].max(s[1]).max(s[2])),
            VMed3U32 => self.map(&[B32, B32, B32], B32, move |s| u16med(s[0], s[1], s[2])),
            VSadU8 | VSadHiU8 => {
                let hi = op == VSadHiU8;
                self.map(&[B32, B32, B32], B32, move |s| {
                    let sum: u64 = (0..4)
                        .map(|k| ((s[0] >> (8 * k)) & 0xff).abs_diff((s[1] >> (8 * k)) & 0xff))
                        .sum();
                    ((if hi { sum << 16 } else { sum }) + s[2]) & 0xffff_ffff
                })
            }
            VSadU16 => self.map(&[B32, B32, B32], B32, |s| {
                let sum: u64 = (0..2)
                    .map(|k| ((s[0] >> (16 * k)) & 0xffff).abs_diff((s[1] >> (16 * k)) & 0xffff))
                    .sum();
                (sum + s[2]) & 0xffff_ffff
            }),
            VSadU32 => self.map(&[B32, B32, B32], B32, |s| {
                (s[0].abs_diff(s[1]) + s[2]) & 0xffff_ffff
            }),
            // Byte S1[1:0] of S2 replaced by S0 converted to an unsigned byte.
            VCvtPkU8F32 => self.map(&[F32, B32, B32], B32, |s| {
                let sh = 8 * (s[1] & 3);
                let x = f32of(s[0]);
                let byte = if x.is_nan() {
                    0
                } else {
                    x.round_ties_even().clamp(0.0, 255.0) as u64
                };
                (s[2] & !(0xff << sh)) | byte << sh
            }),
            VDivFixupF32 => self.map(&[F32, F32, F32], F32, |s| {
                b32(div_fixup(
                    f64::from(f32of(s[0])),
                    f64::from(f32of(s[1])),
                    f64::from(f32of(s[2])),
                    false,
                ) as f32)
            }),
            VDivFixupF64 => self.map(&[F64, F64, F64], F64, |s| {
                b64(div_fixup(f64of(s[0]), f64of(s[1]), f64of(s[2]), true))
            }),
            VDivFixupF16 => {
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, |s| {
                    let r = div_fixup(
                        f64::from(h(s[0])),
                        f64::from(h(s[1])),
                        f64::from(h(s[2])),
                        false,
                    );
                    // f16 underflow/overflow thresholds follow from the f16 rounding.
                    u64::from(f64_to_f16(r, false))
                })
            }
            VDivScaleF32 => self.map_carry(&[F32, F32, F32], F32, false, |s, _| {
                let (d, vcc) = div_scale(
                    f64::from(f32of(s[0])),
                    f64::from(f32of(s[1])),
                    f64::from(f32of(s[2])),
                    false,
                );
                (b32(d as f32), vcc)
            }),
            VDivScaleF64 => self.map_carry(&[F64, F64, F64], F64, false, |s, _| {
                let (d, vcc) = div_scale(f64of(s[0]), f64of(s[1]), f64of(s[2]), true);
                (b64(d), vcc)
            }),
            VDivFmasF32 => {
                let vcc = self.w.vcc;
                self.map_lane(&[F32, F32, F32], F32, move |l, s| {
                    // The FMA and the scale round once (see div_fmas).
                    let (a, b, c) = (f32of(s[0]), f32of(s[1]), f32of(s[2]));
                    let flag = vcc >> l & 1 == 1;
                    let r = if r32 == Round::NearestEven {
                        div_fmas(a.into(), b.into(), c.into(), flag, false)
                    } else {
                        round::div_fmas(a.into(), b.into(), c.into(), flag, false, r32)
                    };
                    b32(r as f32)
                })
            }
            VDivFmasF64 => {
                let vcc = self.w.vcc;
                self.map_lane(&[F64, F64, F64], F64, move |l, s| {
                    let (a, b, c) = (f64of(s[0]), f64of(s[1]), f64of(s[2]));
                    let flag = vcc >> l & 1 == 1;
                    b64(if r64 == Round::NearestEven {
                        div_fmas(a, b, c, flag, true)
                    } else {
                        round::div_fmas(a, b, c, flag, true, r64)
                    })
                })
            }
            VMadU64U32 => self.map_carry(&[B32, B32, B64], B64, false, |s, _| {
                let r = u128::from(s[0]) * u128::from(s[1]) + u128::from(s[2]);
                (r as u64, r >> 64 != 0)
            }),
            VMadI64I32 => self.map_carry(&[B32, B32, B64], B64, false, |s, _| {
                let p = i128::from(s[0] as u32 as i32) * i128::from(s[1] as u32 as i32);
                let r = p + i128::from(s[2] as i64);
                (r as u64, r != i128::from(r as i64))
            }),
            VPermB32 => self.map(&[B32, B32, B32], B32, |s| {
                let data = s[0] << 32 | s[1];
                let byte = |sel: u64| -> u64 {
                    match sel {
                        0..=7 => (data >> (8 * sel)) & 0xff,
                        8 => 0xff * (data >> 15 & 1),
                        9 => 0xff * (data >> 31 & 1),
                        10 => 0xff * (data >> 47 & 1),
                        11 => 0xff * (data >> 63 & 1),
                        12 => 0,
                        _ => 0xff,
                    }
                };
                (0..4)
                    .map(|k| byte((s[2] >> (8 * k)) & 0xff) << (8 * k))
                    .sum()
            }),
            VMadU32U16 => self.map(&[B16, B16, B32], B32, |s| {
                (s[0] * s[1] + s[2]) & 0xffff_ffff
            }),
            VMadI32I16 => self.map(&[B16, B16, B32], B32, move |s| {
                (i16v(s[0]) * i16v(s[1]) + i64::from(s[2] as u32 as i32)) as u64 & 0xffff_ffff
            }),
            VXadU32 => self.map(&[B32, B32, B32], B32, |s| {
                ((s[0] ^ s[1]) + s[2]) & 0xffff_ffff
            }),
            VMin3F16 | VMax3F16 | VMed3F16 => {
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, move |s| {
                    let [a, b, c] = [s[0], s[1], s[2]].map(h);
                    let r = match op {
                        VMin3F16 => minmax32(minmax32(a, b, false, ieee), c, false, ieee),
                        VMax3F16 => minmax32(minmax32(a, b, true, ieee), c, true, ieee),
                        _ => med3_32(a, b, c, ieee),
                    };
                    hb(r)
                })
            }
            VMin3I16 | VMax3I16 | VMed3I16 => {
                self.d16 = D16::OpSel;
                self.map(&[B16, B16, B16], B16, move |s| {
                    let [a, b, c] = [s[0], s[1], s[2]].map(i16v);
                    let r = match op {
                        VMin3I16 => a.min(b).min(c),
                        VMax3I16 => a.max(b).max(c),
                        _ => a.max(b).min(a.min(b).max(c)),
                    };
                    r as u64 & 0xffff
                })
            }
            VMin3U16 | VMax3U16 | VMed3U16 => {
                self.d16 = D16::OpSel;
                self.map(&[B16, B16, B16], B16, move |s| match op {
                    VMin3U16 => s[0].min(s[1]).min(s[2]),
                    VMax3U16 => s[0].max(s[1]).max(s[2]),
                    _ => u16med(s[0], s[1], s[2]),
                })
            }
            VLshlAddU32 => self.map(&[B32, B32, B32], B32, |s| {
                ((s[0] << (s[1] & 31)) + s[2]) & 0xffff_ffff
            }),
            VAddLshlU32 => self.map(&[B32, B32, B32], B32, |s| {
                (((s[0] + s[1]) & 0xffff_ffff) << (s[2] & 31)) & 0xffff_ffff
            }),
            // gfx940 only: D = (S0 << S1[2:0]) + S2, 64-bit (the MI300 guide's V_LSHL_ADD_U64).
            VLshlAddU64 => self.map(&[B64, B32, B64], B64, |s| {
                (s[0] << (s[1] & 7)).wrapping_add(s[2])
            }),
            VAdd3U32 => self.map(&[B32, B32, B32], B32, |s| {
                (s[0] + s[1] + s[2]) & 0xffff_ffff
            }),
            VLshlOrB32 => self.map(&[B32, B32, B32], B32, |s| {
                ((s[0] << (s[1] & 31)) & 0xffff_ffff) | s[2]
            }),
            VAndOrB32 => self.map(&[B32, B32, B32], B32, |s| (s[0] & s[1]) | s[2]),
            VOr3B32 => self.map(&[B32, B32, B32], B32, |s| s[0] | s[1] | s[2]),
            VMadF16 => {
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, move |s| {
                    hb64(round::mad16(h64(s[0]), h64(s[1]), h64(s[2]), r64))
                })
            }
            VFmaF16 => {
                self.d16 = D16::OpSel;
                self.map(&[F16, F16, F16], F16, move |s| {
                    hb64(round::fma16(h64(s[0]), h64(s[1]), h64(s[2]), r64))
                })
            }
            VMadU16 => {
                self.d16 = D16::OpSel;
                self.map(&[B16, B16, B16], B16, move |s| {
                    let r = s[0] * s[1] + s[2];
                    if clamp { r.min(0xffff) } else { r & 0xffff }
                })
            }
            VMadI16 => {
                self.d16 = D16::OpSel;
                self.map(&[B16, B16, B16], B16, move |s| {
                    let r = i16v(s[0]) * i16v(s[1]) + i16v(s[2]);
                    let r = if clamp { r.clamp(-32768, 32767) } else { r };
                    r as u64 & 0xffff
                })
            }
            VAddI16 | VSubI16 => {
                self.d16 = D16::OpSel;
                let sub = op == VSubI16;
                self.map(&[B16, B16], B16, move |s| {
                    let r = if sub {
                        i16v(s[0]) - i16v(s[1])
                    } else {
                        i16v(s[0]) + i16v(s[1])
                    };
                    let r = if clamp { r.clamp(-32768, 32767) } else { r };
                    r as u64 & 0xffff
                })
            }
            VAddF64 => self.map(&[F64, F64], F64, move |s| {
                b64(round::add64(f64of(s[0]), f64of(s[1]), r64))
            }),
            VMulF64 => self.map(&[F64, F64], F64, move |s| {
                b64(round::mul64(f64of(s[0]), f64of(s[1]), r64))
            }),
            VMinF64 => self.map(&[F64, F64], F64, move |s| {
                b64(minmax64(f64of(s[0]), f64of(s[1]), false, ieee))
            }),
            VMaxF64 => self.map(&[F64, F64], F64, move |s| {
                b64(minmax64(f64of(s[0]), f64of(s[1]), true, ieee))
            }),
            VLdexpF64 => self.map(&[F64, B32], F64, move |s| {
                let n = i64::from(s[1] as u32 as i32);
                b64(if r64 == Round::NearestEven {
                    ldexp64(f64of(s[0]), n)
                } else {
                    round::ldexp(f64of(s[0]), n, Fmt::F64, r64)
                })
            }),
            VLdexpF32 => self.map(&[F32, B32], F32, move |s| {
                let n = i64::from(s[1] as u32 as i32);
                b32(round::ldexp(f64::from(f32of(s[0])), n, Fmt::F32, r32) as f32)
            }),
            VMulLoU32 => self.map(&[B32, B32], B32, |s| (s[0] * s[1]) & 0xffff_ffff),
            VMulHiU32 => self.map(&[B32, B32], B32, |s| (s[0] * s[1]) >> 32),
            VMulHiI32 => self.map(&[B32, B32], B32, |s| {
                ((i64::from(s[0] as u32 as i32) * i64::from(s[1] as u32 as i32)) >> 32) as u64
                    & 0xffff_ffff
            }),
            VReadlaneB32 => {
                let Operand::Vgpr(v) = self.i.src[0] else {
                    return Err(self.err("v_readlane_b32 reads a VGPR"));
                };
                let lane = self
                    .w
                    .read_scalar32(self.i.src[1], Ty::B32)
                    .ok_or_else(|| self.err("a lane select that is not scalar"))?;
                // The lane select's low 6 bits (wave32: 5, RDNA3 guide V_READLANE_B32).
                let value = self.w.vgpr[usize::from(v)][lane as usize & self.w.last_lane()];
                if !self.w.write_scalar32(self.i.dst[0], value) {
                    return Err(self.err("not a scalar destination"));
                }
                Ok(())
            }
            // Writes one lane whatever EXEC says (the guide's V_WRITELANE_B32).
            VWritelaneB32 => {
                let Operand::Vgpr(d) = self.i.dst[0] else {
                    return Err(self.err("not a VGPR destination"));
                };
                let value = self
                    .w
                    .read_scalar32(self.i.src[0], Ty::B32)
                    .ok_or_else(|| self.err("a value that is not scalar"))?;
                let lane = self
                    .w
                    .read_scalar32(self.i.src[1], Ty::B32)
                    .ok_or_else(|| self.err("a lane select that is not scalar"))?;
                let lane = lane as usize & self.w.last_lane();
                self.w.vgpr[usize::from(d)][lane] = value;
                Ok(())
            }
            VBcntU32B32 => self.map(&[B32, B32], B32, |s| {
                (u64::from(s[0].count_ones()) + s[1]) & 0xffff_ffff
            }),
            // Bits of S0 set below this lane: lanes 0..32 count in _lo, 32..64 in _hi.
            VMbcntLoU32B32 => self.map_lane(&[B32, B32], B32, |l, s| {
                let below = (1u64 << l) - 1;
                (u64::from((s[0] & below & 0xffff_ffff).count_ones()) + s[1]) & 0xffff_ffff
            }),
            VMbcntHiU32B32 => self.map_lane(&[B32, B32], B32, |l, s| {
                let below = ((1u128 << l) - 1) as u64 >> 32;
                (u64::from((s[0] & below).count_ones()) + s[1]) & 0xffff_ffff
            }),
            VLshlrevB64 => self.map(&[B32, B64], B64, |s| s[1] << (s[0] & 63)),
            VLshrrevB64 => self.map(&[B32, B64], B64, |s| s[1] >> (s[0] & 63)),
            VAshrrevI64 => self.map(&[B32, B64], B64, |s| ((s[1] as i64) >> (s[0] & 63)) as u64),
            VBfmB32 => self.map(&[B32, B32], B32, |s| {
                (((1u64 << (s[0] & 31)) - 1) << (s[1] & 31)) & 0xffff_ffff
            }),
            VAddI32 | VSubI32 => {
                let sub = op == VSubI32;
                self.map(&[B32, B32], B32, move |s| {
                    let (a, b) = (i64::from(s[0] as u32 as i32), i64::from(s[1] as u32 as i32));
                    let r = if sub { a - b } else { a + b };
                    let r = if clamp {
                        r.clamp(i64::from(i32::MIN), i64::from(i32::MAX))
                    } else {
                        r
                    };
                    r as u64 & 0xffff_ffff
                })
            }
            VCvtPknormI16F32 | VCvtPknormU16F32 => {
                let signed = op == VCvtPknormI16F32;
                self.map(&[F32, F32], B32, move |s| {
                    let f = |v: u64| -> u64 {
                        let x = f32of(v);
                        let x = if x.is_nan() { 0.0 } else { x };
                        if signed {
                            (x.clamp(-1.0, 1.0) * 32767.0).round_ties_even() as i16 as u16 as u64
                        } else {
                            (x.clamp(0.0, 1.0) * 65535.0).round_ties_even() as u16 as u64
                        }
                    };
                    f(s[0]) | f(s[1]) << 16
                })
            }
            // Round toward zero, as its name says.
            VCvtPkrtzF16F32 => self.map(&[F32, F32], B32, |s| {
                let f = |v: u64| u64::from(f64_to_f16(f64::from(f32of(v)), true));
                f(s[0]) | f(s[1]) << 16
            }),
            VCvtPkU16U32 => self.map(&[B32, B32], B32, |s| {
                s[0].min(0xffff) | s[1].min(0xffff) << 16
            }),
            VCvtPkI16I32 => self.map(&[B32, B32], B32, |s| {
                let f = |v: u64| (v as u32 as i32).clamp(-32768, 32767) as u16 as u64;
                f(s[0]) | f(s[1]) << 16
            }),
            VPackB32F16 => self.map(&[F16, F16], B32, |s| s[0] & 0xffff | (s[1] & 0xffff) << 16),
            VTrigPreopF64 => self.map(&[F64, B32], F64, |s| {
                b64(trig_preop(f64of(s[0]), s[1] as u32))
            }),
            // The cube-map helpers (the guide's V_CUBEID/SC/TC/MA_F32): the major axis is z
            // when |z| is the largest (ties favour z, then y), else y, else x.
            VCubeidF32 | VCubescF32 | VCubetcF32 | VCubemaF32 => {
                self.map(&[F32, F32, F32], F32, move |s| {
                    let [x, y, z] = [s[0], s[1], s[2]].map(f32of);
                    let (ax, ay, az) = (x.abs(), y.abs(), z.abs());
                    let major = if az >= ax && az >= ay {
                        2
                    } else if ay >= ax {
                        1
                    } else {
                        0
                    };
                    let r = match (op, major) {
                        (VCubeidF32, 2) => {
                            if z < 0.0 {
                                5.0
                            } else {
                                4.0
                            }
                        }
                        (VCubeidF32, 1) => {
                            if y < 0.0 {
                                3.0
                            } else {
                                2.0
                            }
                        }
                        (VCubeidF32, _) => {
                            if x < 0.0 {
                                1.0
                            } else {
                                0.0
                            }
                        }
                        (VCubescF32, 2) => {
                            if z < 0.0 {
                                -x
                            } else {
                                x
                            }
                        }
                        (VCubescF32, 1) => x,
                        (VCubescF32, _) => {
                            if x < 0.0 {
                                z
                            } else {
                                -z
                            }
                        }
                        (VCubetcF32, 1) => {
                            if y < 0.0 {
                                -z
                            } else {
                                z
                            }
                        }
                        (VCubetcF32, _) => -y,
                        (_, 2) => 2.0 * z,
                        (_, 1) => 2.0 * y,
                        _ => 2.0 * x,
                    };
                    b32(r)
                })
            }
            // Per byte: the rounded average (a + b + (c & 1)) >> 1, the rounding bit from S2.
            VLerpU8 => self.map(&[B32, B32, B32], B32, |s| {
                (0..4)
                    .map(|k| {
                        let byte = |v: u64| (v >> (8 * k)) & 0xff;
                        ((byte(s[0]) + byte(s[1]) + (byte(s[2]) & 1)) >> 1) << (8 * k)
                    })
                    .sum()
            }),
        }
    }

    /// VOP3P: each half of the result from the sources' halves `op_sel` (low result) and
    /// `op_sel_hi` (high result) pick, `neg`/`neg_hi` negating float halves; gfx90a's packed
    /// f32 operations work on VGPR pairs the same way (the guide, VOP3P opcodes).
    fn vop3p(&mut self, op: Vop3pOp) -> Result<(), ExecError> {
        use Vop3pOp::*;
        let m = self.i.mods;
        let ieee = self.mode.ieee;
        let r64 = self.mode.r64;
        let f16_in = self.mode.f64_in;
        let f16_out = self.mode.f64_out;
        let n = op.sources();
        let half16 = move |s: &[u64; 3], hi: bool, float: bool| -> [u64; 3] {
            let (sel, neg) = if hi {
                (m.op_sel_hi, m.neg_hi)
            } else {
                (m.op_sel, m.neg)
            };
            let mut out = [0u64; 3];
            for i in 0..3 {
                let mut v = (s[i] >> (16 * u32::from(sel >> i & 1))) & 0xffff;
                if float {
                    if !f16_in {
                        v = u64::from(flush16(v as u16));
                    }
                    if neg >> i & 1 == 1 {
                        v ^= 0x8000;
                    }
                }
                out[i] = v;
            }
            out
        };
        let clamp = m.clamp;
        let dx10 = self.mode.dx10_clamp;
        let fin16 = move |x: f64| -> u64 {
            let x = if clamp { clamp01(x, dx10) } else { x };
            let v = f64_to_f16(x, false);
            u64::from(if f16_out { v } else { flush16(v) })
        };
        let i16s = |v: u64| i64::from(v as u16 as i16);
        let sat_i = move |r: i64| -> u64 {
            (if clamp { r.clamp(-32768, 32767) } else { r }) as u64 & 0xffff
        };
        let sat_u =
            move |r: i64| -> u64 { (if clamp { r.clamp(0, 0xffff) } else { r }) as u64 & 0xffff };
        let packed16 = |x: &mut Self, float: bool, f: &dyn Fn([u64; 3]) -> u64| {
            let mut s = [[0u64; LANES]; 3];
            for (slot, v) in s.iter_mut().enumerate().take(n) {
                *v = x.read(slot, B32)?;
            }
            let mut res = [0u64; LANES];
            for l in lanes(x.mask) {
                let raw = [s[0][l], s[1][l], s[2][l]];
                let lo = f(half16(&raw, false, float));
                let hi = f(half16(&raw, true, float));
                res[l] = lo & 0xffff | (hi & 0xffff) << 16;
            }
            x.write(B32, &res)
        };
        if op.is_mfma() {
            return mfma::execute(self.w, &self.i, self.pc, op);
        }
        match op {
            VPkMadI16 => packed16(self, false, &|v| {
                sat_i(i16s(v[0]) * i16s(v[1]) + i16s(v[2]))
            }),
            VPkMulLoU16 => packed16(self, false, &|v| v[0] * v[1]),
            VPkAddI16 => packed16(self, false, &|v| sat_i(i16s(v[0]) + i16s(v[1]))),
            VPkSubI16 => packed16(self, false, &|v| sat_i(i16s(v[0]) - i16s(v[1]))),
            VPkLshlrevB16 => packed16(self, false, &|v| v[1] << (v[0] & 15)),
            VPkLshrrevB16 => packed16(self, false, &|v| v[1] >> (v[0] & 15)),
            VPkAshrrevI16 => packed16(self, false, &|v| (i16s(v[1]) >> (v[0] & 15)) as u64),
            VPkMaxI16 => packed16(self, false, &|v| i16s(v[0]).max(i16s(v[1])) as u64),
            VPkMinI16 => packed16(self, false, &|v| i16s(v[0]).min(i16s(v[1])) as u64),
            VPkMadU16 => packed16(self, false, &|v| sat_u((v[0] * v[1] + v[2]) as i64)),
            VPkAddU16 => packed16(self, false, &|v| sat_u((v[0] + v[1]) as i64)),
            VPkSubU16 => packed16(self, false, &|v| sat_u(v[0] as i64 - v[1] as i64)),
            VPkMaxU16 => packed16(self, false, &|v| v[0].max(v[1])),
            VPkMinU16 => packed16(self, false, &|v| v[0].min(v[1])),
            VPkFmaF16 => packed16(self, true, &|v| {
                fin16(round::fma16(h64(v[0]), h64(v[1]), h64(v[2]), r64))
            }),
            VPkAddF16 => packed16(self, true, &|v| {
                fin16(round::add16(h64(v[0]), h64(v[1]), r64))
            }),
            VPkMulF16 => packed16(self, true, &|v| {
                fin16(round::mul16(h64(v[0]), h64(v[1]), r64))
            }),
            VPkMinF16 => packed16(self, true, &|v| {
                fin16(f64::from(minmax32(h(v[0]), h(v[1]), false, ieee)))
            }),
            VPkMaxF16 => packed16(self, true, &|v| {
                fin16(f64::from(minmax32(h(v[0]), h(v[1]), true, ieee)))
            }),
            VFmaMixF32 | VFmaMixloF16 | VFmaMixhiF16 => self.fma_mix(op),
            VDot2F32F16 | VDot2I32I16 | VDot2U32U16 | VDot4I32I8 | VDot4U32U8 | VDot8I32I4
            | VDot8U32U4 => self.dot(op),
            VPkFmaF32 | VPkMulF32 | VPkAddF32 | VPkMovB32 => self.pk_f32(op),
            VAccvgprReadB32 => {
                let (Operand::Vgpr(d), Operand::Vgpr(a)) = (self.i.dst[0], self.i.src[0]) else {
                    return Err(self.err("v_accvgpr_read_b32 reads an AGPR"));
                };
                let (d, a) = (usize::from(d), usize::from(a));
                for l in lanes(self.mask) {
                    self.w.vgpr[d][l] = self.w.agpr[a][l];
                }
                Ok(())
            }
            VAccvgprWriteB32 => {
                let Operand::Vgpr(d) = self.i.dst[0] else {
                    return Err(self.err("v_accvgpr_write_b32 writes an AGPR"));
                };
                let mut i = self.i;
                i.encoding = Encoding::Vop3a; // read the source as a plain 32-bit one
                let src = {
                    let x = X {
                        w: &mut *self.w,
                        i,
                        pc: self.pc,
                        mode: self.mode,
                        mask: self.mask,
                        dpp_src: None,
                        d16: D16::Zero,
                        sparse_ok: self.sparse_ok,
                    };
                    x.read(0, B32)?
                };
                let d = usize::from(d);
                for l in lanes(self.mask) {
                    self.w.agpr[d][l] = src[l] as u32;
                }
                Ok(())
            }
            // The matrix multiplies returned above.
            _ => Err(self.unimpl()),
        }
    }

    /// The VOP3P dot products: `D = S2 + Σ S0[k]·S1[k]` over 2 f16/16-bit, 4 8-bit or 8 4-bit
    /// elements (signed or unsigned); `v_dot2_f32_f16` takes S0/S1's halves by `op_sel` /
    /// `op_sel_hi` with `neg`/`neg_hi`, sums in f64 and rounds once to f32; the integer forms
    /// wrap, or saturate with `clamp`.
    fn dot(&mut self, op: Vop3pOp) -> Result<(), ExecError> {
        use Vop3pOp::*;
        let m = self.i.mods;
        let mut s = [[0u64; LANES]; 3];
        for (slot, v) in s.iter_mut().enumerate() {
            *v = self.read(slot, B32)?;
        }
        let mut res = [0u64; LANES];
        for l in lanes(self.mask) {
            let (a, b, c) = (s[0][l], s[1][l], s[2][l]);
            res[l] = if op == VDot2F32F16 {
                let half = |v: u64, i: u8, hi: bool| -> f64 {
                    let (sel, neg) = if hi {
                        (m.op_sel_hi, m.neg_hi)
                    } else {
                        (m.op_sel, m.neg)
                    };
                    let x = f64::from(h(v >> (16 * u32::from(sel >> i & 1))));
                    if neg >> i & 1 == 1 { -x } else { x }
                };
                let c = f64::from(f32of(c));
                let c = if m.neg >> 2 & 1 == 1 { -c } else { c };
                let sum =
                    half(a, 0, false) * half(b, 1, false) + half(a, 0, true) * half(b, 1, true);
                self.post(F32, b32((sum + c) as f32))
            } else {
                let (bits, n, signed) = match op {
                    VDot2I32I16 => (16, 2, true),
                    VDot2U32U16 => (16, 2, false),
                    VDot4I32I8 => (8, 4, true),
                    VDot4U32U8 => (8, 4, false),
                    VDot8I32I4 => (4, 8, true),
                    _ => (4, 8, false),
                };
                let elem = |v: u64, k: u32| -> i64 {
                    let x = (v >> (bits * k)) & ((1 << bits) - 1);
                    if signed {
                        ((x << (64 - bits)) as i64) >> (64 - bits)
                    } else {
                        x as i64
                    }
                };
                let acc = if signed {
                    i64::from(c as u32 as i32)
                } else {
                    c as i64
                };
                let sum = (0..n).fold(acc, |s, k| s + elem(a, k) * elem(b, k));
                let sum = match (m.clamp, signed) {
                    (true, true) => sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)),
                    (true, false) => sum.clamp(0, i64::from(u32::MAX)),
                    _ => sum,
                };
                sum as u64 & 0xffff_ffff
            };
        }
        self.write(B32, &res)
    }

    /// `v_fma_mix*`: each source is an f32 or (its `op_sel_hi` bit set) the f16 half its
    /// `op_sel` bit picks; `neg` negates and `neg_hi` takes the absolute value; the result is
    /// an f32, or an f16 into the low (mixlo) or high (mixhi) half, the other kept.
    fn fma_mix(&mut self, op: Vop3pOp) -> Result<(), ExecError> {
        let m = self.i.mods;
        let mut s = [[0u64; LANES]; 3];
        for (slot, v) in s.iter_mut().enumerate() {
            *v = self.read(slot, B32)?;
        }
        let mut vals = [[0f64; LANES]; 3];
        for l in lanes(self.mask) {
            for i in 0..3 {
                let raw = s[i][l];
                let mut x = if m.op_sel_hi >> i & 1 == 1 {
                    let half = (raw >> (16 * u64::from(m.op_sel >> i & 1))) as u16;
                    let half = if self.mode.f64_in {
                        half
                    } else {
                        flush16(half)
                    };
                    f64::from(f16_to_f32(half))
                } else {
                    let v = if self.mode.f32_in {
                        raw as u32
                    } else {
                        flush32(raw as u32)
                    };
                    f64::from(f32::from_bits(v))
                };
                if m.neg_hi >> i & 1 == 1 {
                    x = x.abs();
                }
                if m.neg >> i & 1 == 1 {
                    x = -x;
                }
                vals[i][l] = x;
            }
        }
        let Operand::Vgpr(d) = self.i.dst[0] else {
            return Err(self.err("not a VGPR destination"));
        };
        let d = usize::from(d);
        let dx10 = self.mode.dx10_clamp;
        let clamp = |x: f64| {
            if m.clamp { clamp01(x, dx10) } else { x }
        };
        for l in lanes(self.mask) {
            let (a, b, c) = (vals[0][l], vals[1][l], vals[2][l]);
            let old = self.w.vgpr[d][l];
            self.w.vgpr[d][l] = match op {
                Vop3pOp::VFmaMixF32 => {
                    let r = round::fma32(a as f32, b as f32, c as f32, self.mode.r32);
                    let r = clamp(f64::from(r)) as f32;
                    if self.mode.f32_out {
                        r.to_bits()
                    } else {
                        flush32(r.to_bits())
                    }
                }
                _ => {
                    let r = f64_to_f16(clamp(round::fma16(a, b, c, self.mode.r64)), false);
                    let r = u32::from(if self.mode.f64_out { r } else { flush16(r) });
                    if op == Vop3pOp::VFmaMixloF16 {
                        old & 0xffff_0000 | r
                    } else {
                        old & 0xffff | r << 16
                    }
                }
            };
        }
        Ok(())
    }

    /// gfx90a's packed f32 operations on VGPR pairs (or a 64-bit scalar): result half *j*
    /// from source halves `op_sel` (j = 0) / `op_sel_hi` (j = 1) pick; `v_pk_mov_b32` takes its
    /// low half from src0 and its high half from src1.
    fn pk_f32(&mut self, op: Vop3pOp) -> Result<(), ExecError> {
        let m = self.i.mods;
        let n = op.sources();
        let mut s = [[0u64; LANES]; 3];
        for (slot, v) in s.iter_mut().enumerate().take(n) {
            *v = self.read(slot, B64)?;
        }
        let mut res = [0u64; LANES];
        let f32_in = self.mode.f32_in;
        for l in lanes(self.mask) {
            let half = |i: usize, hi: bool| -> f32 {
                let (sel, neg) = if hi {
                    (m.op_sel_hi, m.neg_hi)
                } else {
                    (m.op_sel, m.neg)
                };
                let raw = (s[i][l] >> (32 * u64::from(sel >> i & 1))) as u32;
                let raw = if f32_in { raw } else { flush32(raw) };
                let x = f32::from_bits(raw);
                if neg >> i & 1 == 1 { -x } else { x }
            };
            if op == Vop3pOp::VPkMovB32 {
                let lo = (s[0][l] >> (32 * u64::from(m.op_sel & 1))) as u32;
                let hi = (s[1][l] >> (32 * u64::from(m.op_sel >> 1 & 1))) as u32;
                res[l] = u64::from(lo) | u64::from(hi) << 32;
                continue;
            }
            let mut out = [0u32; 2];
            for (j, o) in out.iter_mut().enumerate() {
                let hi = j == 1;
                let r32 = self.mode.r32;
                let r = match op {
                    Vop3pOp::VPkFmaF32 => round::fma32(half(0, hi), half(1, hi), half(2, hi), r32),
                    Vop3pOp::VPkMulF32 => round::mul32(half(0, hi), half(1, hi), r32),
                    _ => round::add32(half(0, hi), half(1, hi), r32),
                };
                *o = self.post(F32, b32(r)) as u32;
            }
            res[l] = u64::from(out[0]) | u64::from(out[1]) << 32;
        }
        // post() already ran per half: write as raw 64-bit bits.
        self.write(B64, &res)
    }
}

/// DPP: the lane src0 is read from for `lane`, or `None` when out of range ("AMD Instinct
/// MI200 ISA", DPP_CTRL enumeration).
fn dpp_lane(ctrl: u16, lane: usize) -> Option<usize> {
    let row = lane & !15;
    let i = lane & 15;
    let n = usize::from(ctrl & 15);
    match ctrl {
        0x00..=0xff => Some((lane & !3) + usize::from(ctrl >> (2 * (lane & 3)) & 3)),
        0x101..=0x10f => (i + n < 16).then_some(lane + n),
        0x111..=0x11f => (i >= n).then(|| lane - n),
        0x121..=0x12f => Some(row + (i + 16 - n) % 16),
        0x130 => (lane < 63).then_some(lane + 1),
        0x134 => Some((lane + 1) % 64),
        0x138 => lane.checked_sub(1),
        0x13c => Some((lane + 63) % 64),
        0x140 => Some(row + 15 - i),
        0x141 => Some((lane & !7) + 7 - (lane & 7)),
        // Lane 15 of the previous row, for rows 1..3.
        0x142 => (row > 0).then(|| row - 1),
        // Lane 31, for rows 2 and 3.
        0x143 => (row >= 32).then_some(31),
        // gfx90a row_newbcast, gfx10+ row_share: lane n of the row, to the whole row.
        0x150..=0x15f => Some(row + n),
        // gfx10+ row_xmask (gfx11 only: gfx9 decodes no such control): lane i ^ n of the row.
        0x160..=0x16f => Some(row + (i ^ n)),
        _ => None,
    }
}

/// The output clamp to [0, 1]; a NaN becomes 0 when MODE's DX10_CLAMP is set, else stays NaN
/// (the guide's MODE register, DX10_CLAMP).
fn clamp01(x: f64, dx10: bool) -> f64 {
    if x.is_nan() {
        if dx10 { 0.0 } else { x }
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// SDWA source select: byte `sel` (0..=3), word 0/1 (4, 5) or the dword (6), zero- or
/// sign-extended.
fn sdwa_sel(v: u32, sel: u8, sext: bool) -> u32 {
    match sel {
        0..=3 => {
            let b = (v >> (8 * sel)) as u8;
            if sext {
                b as i8 as i32 as u32
            } else {
                u32::from(b)
            }
        }
        4 | 5 => {
            let w = (v >> (16 * (sel - 4))) as u16;
            if sext {
                w as i16 as i32 as u32
            } else {
                u32::from(w)
            }
        }
        _ => v,
    }
}

/// SDWA destination: the result's low bits into the selected field; the other bits zero
/// (UNUSED_PAD, 0), the field's sign above it and zeros below (UNUSED_SEXT, 1) or the old
/// bits (UNUSED_PRESERVE, 2).
fn sdwa_dst(old: u32, v: u32, sel: u8, unused: u8) -> u32 {
    let (shift, width) = match sel {
        0..=3 => (8 * u32::from(sel), 8),
        4 | 5 => (16 * u32::from(sel - 4), 16),
        _ => return v,
    };
    let field_mask = ((1u64 << width) - 1) as u32;
    let field = (v & field_mask) << shift;
    let mask = field_mask << shift;
    match unused {
        2 => old & !mask | field,
        1 => {
            let top = shift + width;
            let sign = v >> (width - 1) & 1 == 1;
            let above = if sign && top < 32 { u32::MAX << top } else { 0 };
            field | above
        }
        _ => field,
    }
}

#[cfg(test)]
mod sparse_tests;
