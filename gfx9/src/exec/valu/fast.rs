//! The vector ALU's fast path: the hottest 32-bit operations of compiled kernels (address
//! arithmetic, `v_mov_b32`, bitwise and shift operations, `v_mul_lo`/`v_mul_hi`, f32
//! add/mul/fma, the f32 `v_exp`/`v_log`/`v_rcp`/`v_rsq`/`v_sqrt`, `v_cvt_f32_i32`/`_u32`,
//! `v_cndmask_b32`, the carry adds, the f32 and 32-bit integer compares),
//! executed straight on the 32-bit lane arrays when the instruction has nothing that needs the
//! general pipeline of [`super::X`]: a VOP1/VOP2/VOPC/VOP3 form without DPP, SDWA, `omod`,
//! `clamp` or `op_sel` (VOP3 `abs`/`neg` only on the float operations, which apply them as the
//! general path does). The general path widens every source to 64 bits per lane, zeroes three
//! source arrays and a result array and writes through a per-kind post-processing step; for
//! these operations all of that is the identity, so the fast path reads each source once (a
//! VGPR copied, a scalar broadcast), computes the lanes EXEC enables and writes them.
//!
//! The semantics are the general path's, operation by operation (the same [`round`]
//! functions under MODE's FP_ROUND, the same input/output denormal flush under FP_DENORM, the
//! same carry and compare masks with bits of lanes not computed 0); `fast::tests` checks each
//! operation against the general path on random values, EXEC masks, MODE registers and source
//! modifiers. Anything else returns `false` and takes the general path.
//!
//! The lane-wise operations (all but the compares, `v_cndmask_b32` and the carry operations)
//! are also planned ([`plan`], [`run_plan`]): when such an instruction first runs from the
//! code cache, its operation ([`Lane`], one per opcode), destination and sources ([`Source`])
//! are resolved once and kept with it (`exec::plan`), and `exec::steps` runs it from there,
//! lane by lane with the operation's own arm of [`sparse_lane`] (no function pointer per lane,
//! no per-source match) or on the arrays ([`run_arrays`]). One table (`lane_table!`) gives
//! each operation's opcode, its [`Shape`] for the array path and its arm, so the two cannot
//! compute different things; `fast::tests` holds each plan to the general path.

use super::float::{Mode, flush32};
use super::round;
use crate::exec::plan::{Lane, Plan, Source};
use crate::exec::salu::Round;
use crate::exec::wave::{LANES, Ty, Wave, full_lanes};
use crate::inst::{Inst, Modifiers};
use crate::opcode::{Encoding, Opcode, Vop1Op, Vop2Op, Vop3Op};
use crate::operand::Operand;

/// One 32-bit value per lane.
type L32 = [u32; LANES];

/// Lanes computed one at a time, with no 64-lane source and result arrays, when at most
/// this many are on (and DPP reads no other lane): a one-work-item workgroup's wave, a
/// divergent branch's last lanes; here ([`run_sparse`]) and on the general path
/// (`X::map_sparse`). The per-lane reads and writes are the array path's, value by value
/// (`sparse_tests::sparse_path_equals_the_array_path`).
pub(super) const SPARSE_LANES: u32 = 8;

/// What an operation computes from its (up to three) 32-bit sources.
#[derive(Clone, Copy)]
enum Op {
    /// An integer or bit operation: no float modes apply.
    Int(fn(u32, u32, u32) -> u32),
    /// An f32 operation with the rounding mode: MODE's denormal flush applies to its inputs
    /// and result.
    F32(fn(f32, f32, f32, Round) -> f32),
    /// A conversion of one 32-bit integer source to f32 with the rounding mode: MODE's
    /// denormal flush applies to its result only.
    ToF32(fn(u32, Round) -> f32),
}

/// Whether `inst`'s form can take the fast path at all: VOP1/VOP2/VOPC, or VOP3 with no
/// modifier but source `abs`/`neg`.
#[inline]
fn qualifies(inst: &Inst) -> bool {
    match inst.encoding {
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc => true,
        // VOP3 source `abs`/`neg` are taken by the float operations (`float_mods`), which
        // apply them as the general path does; the integer ones leave them to it.
        Encoding::Vop3a | Encoding::Vop3b => {
            Modifiers {
                abs: 0,
                neg: 0,
                ..inst.mods
            } == Modifiers::default()
        }
        _ => false,
    }
}

/// Executes `inst` on the fast path when it qualifies; `false` (the wave untouched) when it
/// does not, and the general path must run it.
pub(super) fn try_execute(w: &mut Wave, inst: &Inst) -> bool {
    if !qualifies(inst) {
        return false;
    }
    if let Opcode::Vopc(op) = inst.op {
        return vopc(w, inst, op.raw());
    }
    let Operand::Vgpr(d) = inst.dst[0] else {
        return false;
    };
    let d = usize::from(d);
    match inst.op {
        Opcode::Vop2(Vop2Op::VCndmaskB32) => cndmask(w, inst, d),
        Opcode::Vop2(Vop2Op::VAddCoU32) => carry(w, inst, d, false, |a, b, _| {
            let r = u64::from(a) + u64::from(b);
            (r as u32, r >> 32 != 0)
        }),
        Opcode::Vop2(Vop2Op::VAddcCoU32) => carry(w, inst, d, true, |a, b, c| {
            let r = u64::from(a) + u64::from(b) + u64::from(c);
            (r as u32, r >> 32 != 0)
        }),
        Opcode::Vop2(Vop2Op::VSubCoU32) => {
            carry(w, inst, d, false, |a, b, _| (a.wrapping_sub(b), b > a))
        }
        Opcode::Vop2(Vop2Op::VSubrevCoU32) => {
            carry(w, inst, d, false, |a, b, _| (b.wrapping_sub(a), a > b))
        }
        _ => match shape(inst) {
            Some(s) => run(w, inst, d, s),
            None => false,
        },
    }
}

/// What [`run`] computes for an instruction of the fast path's lane-wise operations: how many
/// sources it reads, whether the destination is the third, and the operation.
#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    dst_src2: bool,
    op: Op,
}

/// The lane-wise operation `inst` is, when the fast path computes it with [`run`] (not the
/// compares, `v_cndmask_b32` and the carry operations, which have their own functions; not
/// an integer operation with VOP3 `abs`/`neg`, which the general path takes).
fn shape(inst: &Inst) -> Option<Shape> {
    shape_of(inst.op).filter(|s| !(matches!(s.op, Op::Int(_) | Op::ToF32(_)) && has_abs_neg(inst)))
}

/// The fast path's lane-wise operations, one row per opcode: its [`Lane`] (the planned form's
/// kind), its opcode, and what it computes (`Int`: an integer or bit operation of `n`
/// sources; `F32`: an f32 operation with the rounding mode, `dst_src2` when the destination
/// is the third source; `ToF32`: a conversion of an integer source to f32). From this one
/// table come [`lane_of`] (opcode to [`Lane`]), [`shape_of_lane`] (the [`Shape`] the array
/// path runs) and [`sparse_lane`] (the lane-by-lane path, one arm per operation, each with its
/// own code inlined: no function pointer per lane).
macro_rules! lane_table {
    ($($lane:ident: $pat:pat => $class:ident($n:literal, $dsrc2:literal, $f:expr);)*) => {
        /// The [`Lane`] `op` is, when the fast path computes it lane-wise.
        #[inline]
        fn lane_of(op: Opcode) -> Option<Lane> {
            match op {
                $($pat => Some(Lane::$lane),)*
                _ => None,
            }
        }

        /// What `lane` computes, for the array path ([`run_arrays`]).
        fn shape_of_lane(lane: Lane) -> Shape {
            match lane {
                $(Lane::$lane => Shape {
                    n: $n,
                    dst_src2: $dsrc2,
                    op: Op::$class($f),
                },)*
            }
        }

        /// [`sparse`] specialised by operation: `lane`'s computation on the lanes EXEC
        /// enables (at most [`SPARSE_LANES`]), sources resolved (`src`), VOP3 `abs`/`neg`
        /// on the float operations' used sources.
        #[inline(always)]
        fn sparse_lane(w: &mut Wave, lane: Lane, d: usize, src: [Source; 3], abs: u8, neg: u8) {
            match lane {
                $(Lane::$lane => lane_call!($class, w, d, $n, $dsrc2, src, abs, neg, $f),)*
            }
        }
    };
}

/// One arm of [`sparse_lane`]: the lane-by-lane function of the operation's class.
macro_rules! lane_call {
    (Int, $w:expr, $d:expr, $n:literal, $dsrc2:literal, $src:expr, $abs:expr, $neg:expr, $f:expr) => {
        sparse_int::<$n>($w, $d, $src, $f)
    };
    (F32, $w:expr, $d:expr, $n:literal, $dsrc2:literal, $src:expr, $abs:expr, $neg:expr, $f:expr) => {
        sparse_f32::<{ $n + $dsrc2 as usize }>($w, $d, $src, $abs, $neg, $f)
    };
    (ToF32, $w:expr, $d:expr, $n:literal, $dsrc2:literal, $src:expr, $abs:expr, $neg:expr, $f:expr) => {
        sparse_to_f32($w, $d, $src, $f)
    };
}

lane_table! {
    MovB32: Opcode::Vop1(Vop1Op::VMovB32) => Int(1, false, |a, _, _| a);
    NotB32: Opcode::Vop1(Vop1Op::VNotB32) => Int(1, false, |a, _, _| !a);
    BfrevB32: Opcode::Vop1(Vop1Op::VBfrevB32) => Int(1, false, |a, _, _| a.reverse_bits());
    // The f32 transcendentals, computed as the general path does (in f64, rounded once
    // to f32; `v_sqrt_f32` by MODE's rounding).
    ExpF32: Opcode::Vop1(Vop1Op::VExpF32) => F32(1, false, |a, _, _, _| f64::from(a).exp2() as f32);
    LogF32: Opcode::Vop1(Vop1Op::VLogF32) => F32(1, false, |a, _, _, _| f64::from(a).log2() as f32);
    RcpF32: Opcode::Vop1(Vop1Op::VRcpF32) => F32(1, false, |a, _, _, _| (1.0 / f64::from(a)) as f32);
    RsqF32: Opcode::Vop1(Vop1Op::VRsqF32) => F32(1, false, |a, _, _, _| (1.0 / f64::from(a).sqrt()) as f32);
    SqrtF32: Opcode::Vop1(Vop1Op::VSqrtF32) => F32(1, false, |a, _, _, r| round::sqrt32(a, r));
    // Converted in f64 (exact for every 32-bit integer) and rounded once to f32 by MODE's
    // rounding, as the general path does.
    CvtF32I32: Opcode::Vop1(Vop1Op::VCvtF32I32) => ToF32(1, false,
        |a, r| round::convert(f64::from(a as i32), round::Fmt::F32, r) as f32);
    CvtF32U32: Opcode::Vop1(Vop1Op::VCvtF32U32) => ToF32(1, false,
        |a, r| round::convert(f64::from(a), round::Fmt::F32, r) as f32);
    AddU32: Opcode::Vop2(Vop2Op::VAddU32) => Int(2, false, |a, b, _| a.wrapping_add(b));
    SubU32: Opcode::Vop2(Vop2Op::VSubU32) => Int(2, false, |a, b, _| a.wrapping_sub(b));
    SubrevU32: Opcode::Vop2(Vop2Op::VSubrevU32) => Int(2, false, |a, b, _| b.wrapping_sub(a));
    LshlrevB32: Opcode::Vop2(Vop2Op::VLshlrevB32) => Int(2, false, |a, b, _| b << (a & 31));
    LshrrevB32: Opcode::Vop2(Vop2Op::VLshrrevB32) => Int(2, false, |a, b, _| b >> (a & 31));
    AshrrevI32: Opcode::Vop2(Vop2Op::VAshrrevI32) => Int(2, false,
        |a, b, _| ((b as i32) >> (a & 31)) as u32);
    AndB32: Opcode::Vop2(Vop2Op::VAndB32) => Int(2, false, |a, b, _| a & b);
    OrB32: Opcode::Vop2(Vop2Op::VOrB32) => Int(2, false, |a, b, _| a | b);
    XorB32: Opcode::Vop2(Vop2Op::VXorB32) => Int(2, false, |a, b, _| a ^ b);
    MinU32: Opcode::Vop2(Vop2Op::VMinU32) => Int(2, false, |a, b, _| a.min(b));
    MaxU32: Opcode::Vop2(Vop2Op::VMaxU32) => Int(2, false, |a, b, _| a.max(b));
    MinI32: Opcode::Vop2(Vop2Op::VMinI32) => Int(2, false, |a, b, _| (a as i32).min(b as i32) as u32);
    MaxI32: Opcode::Vop2(Vop2Op::VMaxI32) => Int(2, false, |a, b, _| (a as i32).max(b as i32) as u32);
    MulU32U24: Opcode::Vop2(Vop2Op::VMulU32U24) => Int(2, false,
        |a, b, _| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff));
    AddF32: Opcode::Vop2(Vop2Op::VAddF32) => F32(2, false, |a, b, _, r| round::add32(a, b, r));
    SubF32: Opcode::Vop2(Vop2Op::VSubF32) => F32(2, false, |a, b, _, r| round::sub32(a, b, r));
    SubrevF32: Opcode::Vop2(Vop2Op::VSubrevF32) => F32(2, false, |a, b, _, r| round::sub32(b, a, r));
    MulF32: Opcode::Vop2(Vop2Op::VMulF32) => F32(2, false, |a, b, _, r| round::mul32(a, b, r));
    // The destination is the addend (`super::X::dst_as_src2`).
    FmacF32: Opcode::Vop2(Vop2Op::VFmacF32) => F32(2, true, round::fma32);
    FmaF32: Opcode::Vop3(Vop3Op::VFmaF32) => F32(3, false, round::fma32);
    LshlAddU32: Opcode::Vop3(Vop3Op::VLshlAddU32) => Int(3, false,
        |a, b, c| (a << (b & 31)).wrapping_add(c));
    AddLshlU32: Opcode::Vop3(Vop3Op::VAddLshlU32) => Int(3, false,
        |a, b, c| a.wrapping_add(b) << (c & 31));
    Add3U32: Opcode::Vop3(Vop3Op::VAdd3U32) => Int(3, false,
        |a, b, c| a.wrapping_add(b).wrapping_add(c));
    LshlOrB32: Opcode::Vop3(Vop3Op::VLshlOrB32) => Int(3, false, |a, b, c| (a << (b & 31)) | c);
    AndOrB32: Opcode::Vop3(Vop3Op::VAndOrB32) => Int(3, false, |a, b, c| (a & b) | c);
    Or3B32: Opcode::Vop3(Vop3Op::VOr3B32) => Int(3, false, |a, b, c| a | b | c);
    MulLoU32: Opcode::Vop3(Vop3Op::VMulLoU32) => Int(2, false, |a, b, _| a.wrapping_mul(b));
    MulHiU32: Opcode::Vop3(Vop3Op::VMulHiU32) => Int(2, false,
        |a, b, _| ((u64::from(a) * u64::from(b)) >> 32) as u32);
    MulHiI32: Opcode::Vop3(Vop3Op::VMulHiI32) => Int(2, false,
        |a, b, _| ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32);
    BfiB32: Opcode::Vop3(Vop3Op::VBfiB32) => Int(3, false, |a, b, c| (a & b) | (!a & c));
    BfeU32: Opcode::Vop3(Vop3Op::VBfeU32) => Int(3, false, |a, b, c| {
        let (off, width) = (b & 31, c & 31);
        ((u64::from(a) >> off) & ((1u64 << width) - 1)) as u32
    });
    MadU32U24: Opcode::Vop3(Vop3Op::VMadU32U24) => Int(3, false,
        |a, b, c| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c));
    AlignbitB32: Opcode::Vop3(Vop3Op::VAlignbitB32) => Int(3, false,
        |a, b, c| ((u64::from(a) << 32 | u64::from(b)) >> (c & 31)) as u32);
}

/// [`shape`] by opcode alone.
#[inline]
fn shape_of(op: Opcode) -> Option<Shape> {
    lane_of(op).map(shape_of_lane)
}

/// Source `op` for every lane into `out`: a VGPR's lanes or a scalar operand broadcast (read
/// as the general path reads a 32-bit source, [`Wave::read_scalar32`] with [`Ty::B32`]);
/// `false` for an operand that is neither.
#[inline]
fn src(w: &Wave, op: Operand, out: &mut L32) -> bool {
    match op {
        Operand::Vgpr(n) => *out = w.vgpr[usize::from(n)],
        Operand::None => return false,
        other => match w.read_scalar32(other, Ty::B32) {
            Some(v) => *out = [v; LANES],
            None => return false,
        },
    }
    true
}

/// The sources `0..n` (slot 2 the destination when `dst_src2`).
#[inline]
fn sources(w: &Wave, inst: &Inst, n: usize, dst_src2: bool, s: &mut [L32; 3]) -> bool {
    for (slot, out) in s.iter_mut().enumerate().take(n) {
        if !src(w, inst.src[slot], out) {
            return false;
        }
    }
    if dst_src2 {
        return src(w, inst.dst[0], &mut s[2]);
    }
    true
}

/// Computes `f` on the lanes EXEC enables and writes them to `v[d]`.
#[inline(always)]
fn apply(w: &mut Wave, d: usize, s: &[L32; 3], f: impl Fn(u32, u32, u32) -> u32) {
    let exec = w.exec;
    let dst = &mut w.vgpr[d];
    if let Some(n) = full_lanes(exec) {
        // Every lane of a wave64 or wave32 wave: a straight loop the compiler can vectorise.
        for (l, o) in dst.iter_mut().enumerate().take(n) {
            *o = f(s[0][l], s[1][l], s[2][l]);
        }
    } else {
        let mut m = exec;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            dst[l] = f(s[0][l], s[1][l], s[2][l]);
        }
    }
}

/// Computes `s` on the lanes EXEC enables into `v[d]`: lane by lane ([`sparse`]) when at
/// most [`SPARSE_LANES`] are on, else on the lane arrays; `false` (the wave untouched) for a
/// source that is not a 32-bit vector or scalar operand.
#[inline(always)]
fn run(w: &mut Wave, inst: &Inst, d: usize, s: Shape) -> bool {
    if w.exec.count_ones() <= SPARSE_LANES {
        let mut src = [Src::Value(0); 3];
        for (slot, x) in src.iter_mut().enumerate().take(s.n) {
            match resolve(w, inst.src[slot]) {
                Some(v) => *x = v,
                None => return false,
            }
        }
        if s.dst_src2 {
            match resolve(w, inst.dst[0]) {
                Some(v) => src[2] = v,
                None => return false,
            }
        }
        sparse(w, d, s, src, inst.mods.abs, inst.mods.neg);
        return true;
    }
    run_arrays(w, inst, d, s)
}

/// [`run`] on the 64-lane arrays.
fn run_arrays(w: &mut Wave, inst: &Inst, d: usize, shape: Shape) -> bool {
    let Shape { n, dst_src2, op } = shape;
    let mut s = [[0u32; LANES]; 3];
    if !sources(w, inst, n, dst_src2, &mut s) {
        return false;
    }
    match op {
        Op::Int(f) => apply(w, d, &s, f),
        Op::F32(f) => {
            let mode = Mode::from_reg(w.hwreg[1]);
            let r = mode.r32;
            float_mods(inst, n + usize::from(dst_src2), &mut s);
            if !mode.f32_in {
                for v in s.iter_mut().flatten() {
                    *v = flush32(*v);
                }
            }
            let g = |a: u32, b: u32, c: u32| {
                f(f32::from_bits(a), f32::from_bits(b), f32::from_bits(c), r).to_bits()
            };
            if mode.f32_out {
                apply(w, d, &s, g);
            } else {
                apply(w, d, &s, |a, b, c| flush32(g(a, b, c)));
            }
        }
        Op::ToF32(f) => {
            let mode = Mode::from_reg(w.hwreg[1]);
            let r = mode.r32;
            if mode.f32_out {
                apply(w, d, &s, |a, _, _| f(a, r).to_bits());
            } else {
                apply(w, d, &s, |a, _, _| flush32(f(a, r).to_bits()));
            }
        }
    }
    true
}

/// A source resolved once for [`sparse`]: a VGPR, or the value every lane reads.
#[derive(Clone, Copy)]
enum Src {
    Vgpr(usize),
    Value(u32),
}

/// [`src`] for [`sparse`]: `None` for an operand that is neither.
#[inline]
fn resolve(w: &Wave, op: Operand) -> Option<Src> {
    match op {
        Operand::Vgpr(n) => Some(Src::Vgpr(usize::from(n))),
        Operand::None => None,
        other => w.read_scalar32(other, Ty::B32).map(Src::Value),
    }
}

/// [`run_arrays`] lane by lane, when at most [`SPARSE_LANES`] lanes are on: no lane arrays
/// copied; each lane's sources read, modified (`abs`, `neg`: the VOP3 bits) and flushed as
/// [`run_arrays`] does to the arrays. Lanes are independent, so a destination that aliases a
/// source reads each lane before writing it, as the array path does.
#[inline(always)]
fn sparse(w: &mut Wave, d: usize, s: Shape, src: [Src; 3], abs: u8, neg: u8) {
    let lane = |w: &Wave, s: Src, l: usize| match s {
        Src::Vgpr(r) => w.vgpr[r][l],
        Src::Value(v) => v,
    };
    let mut m = w.exec;
    match s.op {
        Op::Int(f) => {
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let r = f(lane(w, src[0], l), lane(w, src[1], l), lane(w, src[2], l));
                w.vgpr[d][l] = r;
            }
        }
        Op::F32(f) => {
            let mode = Mode::from_reg(w.hwreg[1]);
            let used = s.n + usize::from(s.dst_src2);
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let mut v = [0u32; 3];
                for (slot, x) in v.iter_mut().enumerate() {
                    *x = lane(w, src[slot], l);
                    if slot < used {
                        // `float_mods`: abs, then neg.
                        if abs >> slot & 1 == 1 {
                            *x &= 0x7fff_ffff;
                        }
                        if neg >> slot & 1 == 1 {
                            *x ^= 0x8000_0000;
                        }
                    }
                    if !mode.f32_in {
                        *x = flush32(*x);
                    }
                }
                let r = f(
                    f32::from_bits(v[0]),
                    f32::from_bits(v[1]),
                    f32::from_bits(v[2]),
                    mode.r32,
                )
                .to_bits();
                w.vgpr[d][l] = if mode.f32_out { r } else { flush32(r) };
            }
        }
        Op::ToF32(f) => {
            let mode = Mode::from_reg(w.hwreg[1]);
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                m &= m - 1;
                let r = f(lane(w, src[0], l), mode.r32).to_bits();
                w.vgpr[d][l] = if mode.f32_out { r } else { flush32(r) };
            }
        }
    }
}

/// `op` planned as [`resolve`] would read it; `None` for what the plan does not take (no
/// operand, a register out of range, and the operands read when the instruction runs:
/// special registers, ttmps, `lds_direct`; those run by reference).
fn plan_src(op: Operand) -> Option<Source> {
    Some(match op {
        Operand::Vgpr(n) => Source {
            vgpr: n,
            kind: 1,
            ..Source::default()
        },
        Operand::Sgpr(n) if usize::from(n) < crate::exec::wave::SGPRS => Source {
            sgpr: n,
            kind: 2,
            ..Source::default()
        },
        Operand::Int(_) | Operand::Float(_) | Operand::Literal(_) => Source {
            value: crate::exec::wave::constant32(op, Ty::B32)?,
            ..Source::default()
        },
        _ => return None,
    })
}

/// The plan of `inst` ([`crate::exec::plan`]), when [`try_execute`] computes it with [`run`]
/// and its sources are VGPRs, SGPRs or constants (not the compares, `v_cndmask_b32`, the
/// carry operations, a special register source: those run by reference): its [`Lane`], its
/// destination VGPR and its sources resolved, so [`run_plan`] neither matches the form nor
/// the operands again.
pub(crate) fn plan(inst: &Inst) -> Option<Plan> {
    if !qualifies(inst) {
        return None;
    }
    let Operand::Vgpr(d) = inst.dst[0] else {
        return None;
    };
    let shape = shape(inst)?;
    let lane = lane_of(inst.op)?;
    let mut src = [Source::default(); 3];
    for (slot, x) in src.iter_mut().enumerate().take(shape.n) {
        *x = plan_src(inst.src[slot])?;
    }
    if shape.dst_src2 {
        src[2] = plan_src(Operand::Vgpr(d))?;
    }
    Some(Plan {
        lane,
        d,
        src,
        abs: inst.mods.abs,
        neg: inst.mods.neg,
    })
}

/// Executes the planned `inst` (the instruction `p` was made from) on `w`, computing what
/// [`try_execute`] computes (lane by lane when at most [`SPARSE_LANES`] lanes are on, with
/// the operation's own arm of [`sparse_lane`]; else [`run_arrays`]).
#[inline(always)]
pub(crate) fn run_plan(p: &Plan, w: &mut Wave, inst: &Inst) {
    let d = usize::from(p.d);
    let exec = w.exec;
    // One lane or none (a one-work-item wave) needs no count.
    if exec & exec.wrapping_sub(1) != 0 && exec.count_ones() > SPARSE_LANES {
        let planned = run_arrays(w, inst, d, shape_of_lane(p.lane));
        debug_assert!(planned, "a planned instruction's sources always resolve");
        return;
    }
    sparse_lane(w, p.lane, d, p.src, p.abs, p.neg);
}

/// A planned source's value in lane `l` (see [`Source`]: no branch on its kind).
#[inline(always)]
fn lane_value(w: &Wave, s: Source, l: usize) -> u32 {
    let vm = 0u32.wrapping_sub(u32::from(s.kind & 1));
    let sm = 0u32.wrapping_sub(u32::from(s.kind >> 1 & 1));
    (w.vgpr[usize::from(s.vgpr)][l] & vm) | (w.sgpr[usize::from(s.sgpr)] & sm) | s.value
}

/// [`sparse`] of an integer operation of `N` sources (the others read as 0, as planned).
#[inline(always)]
fn sparse_int<const N: usize>(
    w: &mut Wave,
    d: usize,
    src: [Source; 3],
    f: impl Fn(u32, u32, u32) -> u32,
) {
    let mut m = w.exec;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        let r = f(
            lane_value(w, src[0], l),
            if N > 1 { lane_value(w, src[1], l) } else { 0 },
            if N > 2 { lane_value(w, src[2], l) } else { 0 },
        );
        w.vgpr[d][l] = r;
    }
}

/// [`sparse`] of an f32 operation whose first `USED` sources are read (`abs`/`neg` apply to
/// those; MODE's input flush to every source, as [`run_arrays`] flushes every array: the
/// unused ones are planned as 0, which the flush keeps).
#[inline(always)]
fn sparse_f32<const USED: usize>(
    w: &mut Wave,
    d: usize,
    src: [Source; 3],
    abs: u8,
    neg: u8,
    f: impl Fn(f32, f32, f32, Round) -> f32,
) {
    let reg = w.hwreg[1];
    let r = crate::exec::salu::Mode(reg).round_f32();
    let (f32_in, f32_out) = (reg >> 4 & 1 == 1, reg >> 5 & 1 == 1);
    let mut m = w.exec;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        let mut v = [
            lane_value(w, src[0], l),
            if USED > 1 {
                lane_value(w, src[1], l)
            } else {
                0
            },
            if USED > 2 {
                lane_value(w, src[2], l)
            } else {
                0
            },
        ];
        if abs | neg != 0 {
            for (slot, x) in v.iter_mut().enumerate().take(USED) {
                // `float_mods`: abs, then neg.
                if abs >> slot & 1 == 1 {
                    *x &= 0x7fff_ffff;
                }
                if neg >> slot & 1 == 1 {
                    *x ^= 0x8000_0000;
                }
            }
        }
        if !f32_in {
            v = v.map(flush32);
        }
        let x = f(
            f32::from_bits(v[0]),
            f32::from_bits(v[1]),
            f32::from_bits(v[2]),
            r,
        )
        .to_bits();
        w.vgpr[d][l] = if f32_out { x } else { flush32(x) };
    }
}

/// [`sparse`] of a conversion to f32 (MODE's flush on its result only).
#[inline(always)]
fn sparse_to_f32(w: &mut Wave, d: usize, src: [Source; 3], f: impl Fn(u32, Round) -> f32) {
    let reg = w.hwreg[1];
    let r = crate::exec::salu::Mode(reg).round_f32();
    let f32_out = reg >> 5 & 1 == 1;
    let mut m = w.exec;
    while m != 0 {
        let l = m.trailing_zeros() as usize;
        m &= m - 1;
        let x = f(lane_value(w, src[0], l), r).to_bits();
        w.vgpr[d][l] = if f32_out { x } else { flush32(x) };
    }
}

/// `v_cndmask_b32`: src1 where the mask (VCC, or the VOP3 form's SGPR pair in `src[2]`) has
/// the lane's bit, else src0.
fn cndmask(w: &mut Wave, inst: &Inst, d: usize) -> bool {
    let Some(mask) = w.read_mask(inst.src[2]) else {
        return false;
    };
    let mut s = [[0u32; LANES]; 3];
    if !sources(w, inst, 2, false, &mut s) {
        return false;
    }
    // Moved as bits, but VOP3's abs/neg apply as to an f32 (the general path's `M32`).
    float_mods(inst, 2, &mut s);
    for (l, m) in s[2].iter_mut().enumerate() {
        *m = (mask >> l & 1) as u32;
    }
    apply(w, d, &s, |a, b, m| if m != 0 { b } else { a });
    true
}

/// A carry operation: the result to `v[d]`, the carry-out of each computed lane to
/// `dst[1]` (VCC or the VOP3B SGPR pair), the carry-in (`carry_in`) from `src[2]`.
fn carry(
    w: &mut Wave,
    inst: &Inst,
    d: usize,
    carry_in: bool,
    f: fn(u32, u32, u32) -> (u32, bool),
) -> bool {
    if has_abs_neg(inst) {
        return false;
    }
    let cin = if carry_in {
        match w.read_mask(inst.src[2]) {
            Some(c) => c,
            None => return false,
        }
    } else {
        0
    };
    // The carry-out must be a lane mask the wave can write (as `Wave::write_scalar64` takes
    // it): checked before anything changes, so a refusal leaves it to the general path.
    if !lane_mask_dst(inst.dst[1]) {
        return false;
    }
    let mut s = [[0u32; LANES]; 3];
    if !sources(w, inst, 2, false, &mut s) {
        return false;
    }
    let exec = w.exec;
    let mut flags = 0u64;
    let mut res = w.vgpr[d];
    if let Some(n) = full_lanes(exec) {
        for (l, o) in res.iter_mut().enumerate().take(n) {
            let (r, c) = f(s[0][l], s[1][l], (cin >> l & 1) as u32);
            *o = r;
            flags |= u64::from(c) << l;
        }
    } else {
        let mut m = exec;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let (r, c) = f(s[0][l], s[1][l], (cin >> l & 1) as u32);
            res[l] = r;
            flags |= u64::from(c) << l;
        }
    }
    w.vgpr[d] = res;
    w.write_mask(inst.dst[1], flags)
}

/// The f32 and 32-bit integer compares, `v_cmp_*` and `v_cmpx_*` (VOPC opcodes 0x40..=0x5f
/// and 0xc0..=0xdf; not `v_cmp_class_*`): the lane mask to `dst[0]` (VCC or the VOP3 SGPR
/// pair; bits of lanes EXEC disables 0), `v_cmpx` also to EXEC. The predicate's low bits are
/// its truth table, as the guide's VOPC list orders them: bit 0 less, 1 equal, 2 greater,
/// 3 unordered (f32: `v_cmp_nge_f32` = 9 is "less or unordered"); the general path spells each
/// out.
fn vopc(w: &mut Wave, inst: &Inst, raw: u16) -> bool {
    let float = match raw {
        0x40..=0x5f => true,
        0xc0..=0xdf => false,
        _ => return false,
    };
    if !lane_mask_dst(inst.dst[0]) || (!float && has_abs_neg(inst)) {
        return false;
    }
    let mut s = [[0u32; LANES]; 3];
    if !sources(w, inst, 2, false, &mut s) {
        return false;
    }
    let cmpx = raw & 0x10 != 0;
    let exec = w.exec;
    let mut bits = 0u64;
    if float {
        let pred = raw & 0xf;
        float_mods(inst, 2, &mut s);
        if !Mode::from_reg(w.hwreg[1]).f32_in {
            for v in s.iter_mut().take(2).flatten() {
                *v = flush32(*v);
            }
        }
        for (l, (&a, &b)) in s[0].iter().zip(&s[1]).enumerate() {
            let (a, b) = (f32::from_bits(a), f32::from_bits(b));
            let idx = if a < b {
                0
            } else if a == b {
                1
            } else if a > b {
                2
            } else {
                3
            };
            bits |= u64::from(pred >> idx & 1) << l;
        }
    } else {
        let pred = raw & 7;
        let signed = raw & 8 == 0;
        for (l, (&a, &b)) in s[0].iter().zip(&s[1]).enumerate() {
            let o = if signed {
                (a as i32).cmp(&(b as i32))
            } else {
                a.cmp(&b)
            };
            bits |= u64::from(pred >> (o as i8 + 1) & 1) << l;
        }
    }
    bits &= exec;
    w.write_mask(inst.dst[0], bits);
    if cmpx {
        w.exec = bits;
    }
    true
}

/// Whether the instruction has VOP3 `abs`/`neg` bits (the integer operations leave those to
/// the general path).
fn has_abs_neg(inst: &Inst) -> bool {
    inst.mods.abs | inst.mods.neg != 0
}

/// VOP3 `abs` then `neg` on the f32 sign of sources `0..n` (bit *i* of each for source *i*),
/// before MODE's input flush, as the general path's `read_into` does for float kinds.
fn float_mods(inst: &Inst, n: usize, s: &mut [L32; 3]) {
    let (abs, neg) = (inst.mods.abs, inst.mods.neg);
    if abs | neg == 0 {
        return;
    }
    for (slot, v) in s.iter_mut().enumerate().take(n) {
        let clear = if abs >> slot & 1 == 1 {
            0x7fff_ffff
        } else {
            u32::MAX
        };
        let flip = if neg >> slot & 1 == 1 { 0x8000_0000 } else { 0 };
        for x in v.iter_mut() {
            *x = (*x & clear) ^ flip;
        }
    }
}

/// Whether [`Wave::write_scalar64`] accepts `op`: an SGPR or ttmp pair in range, VCC, EXEC,
/// FLAT_SCRATCH, XNACK_MASK.
fn lane_mask_dst(op: Operand) -> bool {
    use crate::operand::Special;
    match op {
        Operand::Sgpr(n) => usize::from(n & !1) + 1 < crate::exec::wave::SGPRS,
        Operand::Ttmp(n) => usize::from(n & !1) + 1 < 16,
        Operand::Special(s) => matches!(
            s,
            Special::VccLo | Special::ExecLo | Special::FlatScratchLo | Special::XnackMaskLo
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    //! The fast path against the general path ([`super::super::general`]): each operation
    //! on random sources (VGPRs holding denormals, NaNs, infinities and random bits; SGPRs,
    //! inline constants, literals), random EXEC masks and random MODE registers (every
    //! FP_ROUND and FP_DENORM), destinations that alias sources. The waves must end equal, and
    //! the fast path must have taken most cases (or this would test nothing).

    use super::{shape, shape_of, try_execute};
    use crate::exec::wave::{LANES, Target, Wave};
    use crate::inst::{Inst, Modifiers};
    use crate::opcode::{Encoding, Opcode, Vop1Op, Vop2Op, Vop3Op, VopcOp};
    use crate::operand::{FloatConst, Operand, Special};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// A 32-bit value, often an interesting float.
        fn value(&mut self) -> u32 {
            const SPECIAL: [u32; 12] = [
                0,
                0x8000_0000,
                0x0000_0001,
                0x807f_ffff,
                0x3f80_0000,
                0x7f80_0000,
                0xff80_0000,
                0x7fc0_0001,
                0x7f80_0001,
                0x7f7f_ffff,
                0xffff_ffff,
                0x0080_0000,
            ];
            if self.below(4) == 0 {
                SPECIAL[self.below(12) as usize]
            } else {
                self.next() as u32
            }
        }
        fn source(&mut self) -> Operand {
            match self.below(9) {
                0 => Operand::Sgpr(self.below(8) as u8),
                1 => Operand::Int(self.below(81) as i8 - 16),
                2 => Operand::Float(
                    [
                        FloatConst::Half,
                        FloatConst::NegOne,
                        FloatConst::Four,
                        FloatConst::InvTwoPi,
                    ][self.below(4) as usize],
                ),
                3 => Operand::Literal(self.value()),
                // Read when an instruction runs (`Planned::Read`).
                8 => [
                    Operand::Special(Special::VccLo),
                    Operand::Special(Special::VccHi),
                    Operand::Special(Special::M0),
                    Operand::Ttmp(3),
                ][self.below(4) as usize],
                _ => Operand::Vgpr(self.below(6) as u8),
            }
        }
    }

    fn wave(rng: &mut Rng) -> Wave {
        let mut w = Wave::new(Target::Gfx90a, 0x1000);
        for r in w.vgpr.iter_mut().take(8) {
            for v in r.iter_mut() {
                *v = rng.value();
            }
        }
        for s in w.sgpr.iter_mut().take(16) {
            *s = rng.value();
        }
        w.vcc = rng.next();
        w.exec = match rng.below(4) {
            0 => u64::MAX,
            1 => 0,
            // A few lanes (`run_sparse`).
            2 => (0..rng.below(9)).fold(0, |m, _| m | 1 << rng.below(64)),
            _ => rng.next(),
        };
        // FP_ROUND and FP_DENORM (MODE bits 7:0), IEEE and DX10_CLAMP.
        w.hwreg[1] = rng.below(0x400) as u32;
        w
    }

    fn same(a: &Wave, b: &Wave) -> bool {
        // NaN payloads aside (`sparse_tests::same_regs`).
        super::super::sparse_tests::same_regs(&a.vgpr, &b.vgpr)
            && a.sgpr == b.sgpr
            && a.vcc == b.vcc
            && a.exec == b.exec
            && a.scc == b.scc
            && a.m0 == b.m0
    }

    /// Runs `cases` random instructions of `op` in `encoding`; `extra` fills `dst[1]` and
    /// `src[2]` where the operation needs them.
    fn check(op: Opcode, encoding: Encoding, nsrc: usize, extra: fn(&mut Inst, bool)) {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (format!("{op:?}{encoding:?}").len() as u64));
        let mut fast = 0;
        let mut planned = 0;
        for case in 0..400 {
            let mut inst = Inst {
                op,
                encoding,
                dst: [Operand::Vgpr(rng.below(6) as u8), Operand::None],
                src: [Operand::None; 3],
                imm: 0,
                mods: Modifiers::default(),
                dwords: 1,
            };
            for s in inst.src.iter_mut().take(nsrc) {
                *s = rng.source();
            }
            extra(&mut inst, rng.below(2) == 0);
            if matches!(encoding, Encoding::Vop3a | Encoding::Vop3b) && rng.below(2) == 0 {
                // Source modifiers: the float operations take them, the integer ones not.
                inst.mods.abs = rng.below(8) as u8;
                inst.mods.neg = rng.below(8) as u8;
            }
            let w0 = wave(&mut rng);
            let (mut a, mut b, mut c) = (w0.clone(), w0.clone(), w0);
            let general = super::super::general(&mut b, &inst, 0x1000);
            let taken = try_execute(&mut a, &inst);
            if taken {
                fast += 1;
                assert!(general.is_ok(), "{inst:?}: general path {general:?}");
                assert!(same(&a, &b), "case {case}: {inst:?} differs");
            }
            // The planned form (`exec::steps`) of a lane-wise operation: planned exactly when
            // the fast path takes it and no source is read when it runs (a special register
            // or ttmp: those run by reference), and the same wave.
            if shape(&inst).is_some() {
                let plan = super::plan(&inst);
                let read = inst.src[..shape(&inst).map_or(0, |s| s.n)]
                    .iter()
                    .any(|s| matches!(s, Operand::Special(_) | Operand::Ttmp(_)));
                assert_eq!(
                    plan.is_some(),
                    taken && !read,
                    "case {case}: {inst:?} planned"
                );
                if let Some(p) = plan {
                    planned += 1;
                    super::run_plan(&p, &mut c, &inst);
                    assert!(same(&c, &b), "case {case}: {inst:?}: plan differs");
                }
            } else {
                assert!(super::plan(&inst).is_none(), "{inst:?}: planned");
            }
        }
        if shape_of(op).is_some() {
            assert!(planned > 120, "{op:?} {encoding:?}: only {planned} planned");
        }
        // At least the cases without abs/neg (an integer operation's VOP3 form with them takes
        // the general path: about half of those cases).
        assert!(
            fast > 150,
            "{op:?} {encoding:?}: only {fast} cases on the fast path"
        );
    }

    fn none(_: &mut Inst, _: bool) {}

    fn vcc_dst(i: &mut Inst, _: bool) {
        i.dst[0] = Operand::Special(Special::VccLo);
    }

    fn sgpr_dst(i: &mut Inst, alt: bool) {
        i.dst[0] = Operand::Sgpr(if alt { 12 } else { 2 });
    }

    #[test]
    fn fast_compares_equal_general_compares() {
        let mut taken = 0;
        for &op in VopcOp::ALL {
            if !matches!(op.raw(), 0x40..=0x5f | 0xc0..=0xdf) {
                continue;
            }
            taken += 1;
            check(Opcode::Vopc(op), Encoding::Vopc, 2, vcc_dst);
            check(Opcode::Vopc(op), Encoding::Vop3a, 2, sgpr_dst);
        }
        // Every f32 and 32-bit integer compare and cmpx: 32 + 32 opcodes.
        assert_eq!(taken, 64);
    }

    fn vcc_carry(i: &mut Inst, _: bool) {
        i.dst[1] = Operand::Special(Special::VccLo);
        i.src[2] = Operand::Special(Special::VccLo);
    }

    fn sgpr_carry(i: &mut Inst, alt: bool) {
        i.dst[1] = Operand::Sgpr(if alt { 10 } else { 4 });
        i.src[2] = Operand::Sgpr(if alt { 2 } else { 4 });
    }

    #[test]
    fn fast_path_equals_general_path() {
        use Vop2Op::*;
        check(Opcode::Vop1(Vop1Op::VMovB32), Encoding::Vop1, 1, none);
        check(Opcode::Vop1(Vop1Op::VMovB32), Encoding::Vop3a, 1, none);
        for op in [
            Vop1Op::VExpF32,
            Vop1Op::VLogF32,
            Vop1Op::VRcpF32,
            Vop1Op::VRsqF32,
            Vop1Op::VSqrtF32,
        ] {
            check(Opcode::Vop1(op), Encoding::Vop1, 1, none);
            check(Opcode::Vop1(op), Encoding::Vop3a, 1, none);
        }
        for op in [Vop1Op::VNotB32, Vop1Op::VBfrevB32] {
            check(Opcode::Vop1(op), Encoding::Vop1, 1, none);
        }
        for op in [Vop1Op::VCvtF32I32, Vop1Op::VCvtF32U32] {
            check(Opcode::Vop1(op), Encoding::Vop1, 1, none);
            check(Opcode::Vop1(op), Encoding::Vop3a, 1, none);
        }
        for op in [
            VAddU32,
            VSubU32,
            VSubrevU32,
            VLshlrevB32,
            VLshrrevB32,
            VAshrrevI32,
            VAndB32,
            VOrB32,
            VXorB32,
            VMinU32,
            VMaxU32,
            VMinI32,
            VMaxI32,
            VMulU32U24,
            VAddF32,
            VSubF32,
            VSubrevF32,
            VMulF32,
            VFmacF32,
        ] {
            check(Opcode::Vop2(op), Encoding::Vop2, 2, none);
            check(Opcode::Vop2(op), Encoding::Vop3a, 2, none);
        }
        check(Opcode::Vop2(VCndmaskB32), Encoding::Vop2, 2, vcc_carry);
        check(Opcode::Vop2(VCndmaskB32), Encoding::Vop3a, 2, sgpr_carry);
        for op in [VAddCoU32, VAddcCoU32, VSubCoU32, VSubrevCoU32] {
            check(Opcode::Vop2(op), Encoding::Vop2, 2, vcc_carry);
            check(Opcode::Vop2(op), Encoding::Vop3b, 2, sgpr_carry);
        }
        use Vop3Op::*;
        for (op, n) in [
            (VFmaF32, 3),
            (VLshlAddU32, 3),
            (VAddLshlU32, 3),
            (VAdd3U32, 3),
            (VLshlOrB32, 3),
            (VAndOrB32, 3),
            (VOr3B32, 3),
            (VMulLoU32, 2),
            (VMulHiU32, 2),
            (VMulHiI32, 2),
            (VBfiB32, 3),
            (VBfeU32, 3),
            (VMadU32U24, 3),
            (VAlignbitB32, 3),
        ] {
            check(Opcode::Vop3(op), Encoding::Vop3a, n, none);
        }
    }

    #[test]
    fn modifiers_dpp_and_sdwa_take_the_general_path() {
        let mut w = Wave::new(Target::Gfx90a, 0);
        let base = Inst {
            op: Opcode::Vop2(Vop2Op::VAddF32),
            encoding: Encoding::Vop3a,
            dst: [Operand::Vgpr(0), Operand::None],
            src: [Operand::Vgpr(1), Operand::Vgpr(2), Operand::None],
            imm: 0,
            mods: Modifiers::default(),
            dwords: 2,
        };
        assert!(try_execute(&mut w, &base));
        // abs/neg: the f32 add takes them, the integer add leaves them.
        let absneg = Modifiers {
            abs: 1,
            neg: 2,
            ..Modifiers::default()
        };
        assert!(try_execute(
            &mut w,
            &Inst {
                mods: absneg,
                ..base
            }
        ));
        let int = Inst {
            op: Opcode::Vop2(Vop2Op::VAddU32),
            mods: absneg,
            ..base
        };
        assert!(!try_execute(&mut w, &int));
        for mods in [
            Modifiers {
                clamp: true,
                ..Modifiers::default()
            },
            Modifiers {
                omod: 1,
                ..Modifiers::default()
            },
            Modifiers {
                op_sel: 8,
                ..Modifiers::default()
            },
        ] {
            assert!(!try_execute(&mut w, &Inst { mods, ..base }));
        }
        for encoding in [Encoding::Dpp, Encoding::Sdwa, Encoding::Vop3p] {
            assert!(!try_execute(&mut w, &Inst { encoding, ..base }));
        }
        // A scalar destination or a missing source is the general path's to refuse.
        let sdst = Inst {
            dst: [Operand::Sgpr(0), Operand::None],
            ..base
        };
        assert!(!try_execute(&mut w, &sdst));
        let missing = Inst {
            src: [Operand::Vgpr(1), Operand::None, Operand::None],
            ..base
        };
        assert!(!try_execute(&mut w, &missing));
        // v0 = |v1| + -v2 of zeros: +0 - 0 = +0.
        assert_eq!(w.vgpr[0], [0; LANES]);
    }
}
