//! MODE.FP_ROUND: the IEEE operations of the vector ALU rounded to nearest-even, toward +∞,
//! toward −∞ or toward zero ("AMD Instinct MI200 ISA" chapter 3 "Kernel State", the MODE
//! register's fields, as in the Vega and MI300 guides: FP_ROUND[1:0] rounds
//! single-precision results, FP_ROUND[3:2] double- and half-precision ones; the value 0 is
//! nearest-even, 1 +∞, 2 −∞, 3 zero).
//!
//! Technique: each operation computes `v`, the f64 nearest to its exact result `x`, then the
//! sign of the residual `x − v` exactly, and rounds `v` with that sign into the destination
//! format ([`round`]): nearest-even breaks a tie by the residual, the directed modes step one
//! ULP when the residual points past `v`. The residual's sign comes from error-free
//! transforms where their range allows: TwoSum of any two addends (exact unless the sum
//! overflows); for f32 and f16 operands, whose products are exact in f64, TwoSum of the
//! product and the addend (FMA) and `fma(−v, v, a)` (square root). For f64 products,
//! FMAs and roots, whose residuals can lie below the smallest denormal, [`exact_sign`] sums
//! the operands and `v` as products of two f64s in integers of 4 352 bits. Nearest-even
//! takes Rust's own arithmetic wherever that is already correct (f32/f64 add, mul, fma,
//! sqrt, conversions to f32).
//! Results beyond the format's largest finite value become infinity when the mode rounds away
//! from zero in that direction, else the largest finite value; an exact zero sum is −0 in
//! round-toward-−∞ (IEEE 754 section 6.3), else +0 unless both addends are −0.
//!
//! What honours the mode (the rest rounds to nearest-even whatever FP_ROUND says):
//! - f32 (FP_ROUND[1:0]): `v_add/sub/subrev/mul_f32`, `v_fma_f32`, `v_fmac_f32`,
//!   `v_mad_f32`/`v_mac_f32`/`v_madak_f32`/`v_madmk_f32` (product and sum each rounded in the
//!   mode: they are not fused), `v_pk_add/mul/fma_f32`, `v_fma_mix_f32`, `v_sqrt_f32`,
//!   `v_ldexp_f32`, `v_cvt_f32_i32`/`_u32`, `v_cvt_f32_f64`.
//! - f64 and f16 (FP_ROUND[3:2]): `v_add/mul/fma/fmac_f64`, `v_sqrt_f64`, `v_ldexp_f64`;
//!   `v_add/sub/subrev/mul/fma_f16`, `v_mad/mac/madak/madmk_f16`, `v_pk_add/mul/fma_f16`,
//!   `v_pk_fmac_f16`, `v_fma_mixlo/mixhi_f16`, `v_sqrt_f16`, `v_ldexp_f16`,
//!   `v_cvt_f16_f32`, `v_cvt_f16_i16`/`_u16`.
//! - Exact whatever the mode (nothing to round): `v_cvt_f64_f32`/`_i32`/`_u32`,
//!   `v_cvt_f32_f16`, `v_cvt_f32_ubyte*`, `v_div_scale`, `v_div_fixup` (it passes S0 through
//!   or returns a special value), min/max/med3, `v_frexp_*`, `v_trunc/ceil/floor/rndne/fract`
//!   (their own fixed rounding).
//! - Fixed rounding by definition: `v_cvt_pkrtz_f16_f32` (toward zero), float-to-integer
//!   conversions (truncation, `v_cvt_flr`/`v_cvt_rpi` floor and round-half-up).
//! - `v_div_fmas_f32/f64` by their precision's field: the FMA rescaled as VCC says, rounded
//!   once on the format's grid scaled alike ([`div_fmas`]), so clang's division sequence
//!   gives the quotient rounded in the mode (`tests/exec_fpround.rs` holds it to the host's
//!   `divss`/`divsd`); `v_div_fixup`'s underflow rule stays the guide's (a signed zero).
//! - Not honoured (nearest-even): `v_mad_legacy_f32` (DX9 semantics), the dot products
//!   (`v_dot2_f32_f16`, `v_dot2c_f32_f16`: one rounding of the exact sum), the MFMAs, and
//!   the VOP3 output modifier (`omod`, applied to the rounded result). The transcendentals
//!   (`v_rcp`, `v_rsq`, `v_exp`, `v_log`, `v_sin`, `v_cos`, their f16 forms) are specified
//!   to about 1 ULP and computed in f64 then rounded to nearest: within 1 ULP in every mode,
//!   not the hardware's bits. `v_sqrt_f32`/`_f64` are correctly rounded here; the guide
//!   promises 1 ULP, so hardware may differ by one ULP from the rounded root.
//!
//! Which precision's bits apply: an operation's destination precision. For the conversions
//! that is how LLVM itself sets the mode for `llvm.fptrunc.round.f16.f32`: `llc-19
//! -mcpu=gfx90a` emits `s_setreg_imm32_b32 hwreg(HW_REG_MODE, 2, 1), 1` (FP_ROUND[3:2] = 1,
//! toward +∞) before `v_cvt_f16_f32` for "round.upward" — the f16/f64 field.

use super::float::{frexp64, ldexp64, two_sum};
use crate::exec::salu::Round;
use std::cmp::Ordering::{self, Equal, Greater, Less};

/// A destination format: its precision and its smallest quantum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fmt {
    F16,
    F32,
    F64,
}

impl Fmt {
    /// Significand bits, the implicit one included.
    fn precision(self) -> i32 {
        match self {
            Fmt::F16 => 11,
            Fmt::F32 => 24,
            Fmt::F64 => 53,
        }
    }

    /// The exponent of the smallest denormal.
    fn min_lsb(self) -> i32 {
        match self {
            Fmt::F16 => -24,
            Fmt::F32 => -149,
            Fmt::F64 => -1074,
        }
    }

    /// The largest finite value.
    fn max(self) -> f64 {
        match self {
            Fmt::F16 => 65504.0,
            Fmt::F32 => f64::from(f32::MAX),
            Fmt::F64 => f64::MAX,
        }
    }

    /// Its grid of representable values.
    fn grid(self) -> Grid {
        Grid {
            precision: self.precision(),
            min_lsb: self.min_lsb(),
            max: self.max(),
        }
    }
}

/// The values a rounding may give: `precision` significant bits, quanta no smaller than
/// `2^min_lsb`, magnitudes up to `max` (a format, or one scaled by a power of two).
#[derive(Debug, Clone, Copy)]
struct Grid {
    precision: i32,
    min_lsb: i32,
    max: f64,
}

/// Whether `mode` rounds a value of this sign away from zero (the other directed modes and
/// round-toward-zero truncate its magnitude).
fn away(mode: Round, negative: bool) -> bool {
    matches!(
        (mode, negative),
        (Round::PlusInf, false) | (Round::MinusInf, true)
    )
}

/// The result of an exact value too large for `fmt`: infinity, or the largest finite value
/// when the mode truncates it.
fn overflow(negative: bool, max: f64, mode: Round) -> f64 {
    let r = if mode == Round::NearestEven || away(mode, negative) {
        f64::INFINITY
    } else {
        max
    };
    if negative { -r } else { r }
}

/// The exact value `x = v + ε` (ε of sign `rest`, smaller than half an f64 ULP of `v`: `v`
/// is `x` rounded to nearest f64) rounded to `fmt` with `mode`, returned as an f64 (exact).
/// `v` infinite or NaN is returned as is (an overflow of finite operands is the caller's:
/// [`settle`]).
pub(super) fn round(v: f64, rest: Ordering, fmt: Fmt, mode: Round) -> f64 {
    round_on(v, rest, fmt.grid(), mode)
}

/// As [`round`], onto any [`Grid`].
fn round_on(v: f64, rest: Ordering, grid: Grid, mode: Round) -> f64 {
    if !v.is_finite() || (v == 0.0 && rest == Equal) {
        return v;
    }
    let negative = if v == 0.0 { rest == Less } else { v < 0.0 };
    // The residual's sign relative to the magnitude.
    let mrest = if negative { rest.reverse() } else { rest };
    let a = v.abs();
    let lsb = |a: f64| -> i32 {
        if a == 0.0 {
            grid.min_lsb
        } else {
            // a in [2^e, 2^(e+1)): its quantum in fmt is 2^(e - p + 1), or the denormals'.
            let e = frexp64(a).1 - 1;
            (e - grid.precision + 1).max(grid.min_lsb)
        }
    };
    let q = lsb(a);
    // a / 2^q: exact (below 2^53, a normal f64 unless 0); m its integer part.
    let scaled = ldexp64(a, -i64::from(q));
    let m = scaled.floor();
    let frac = scaled - m;
    let mag = if frac == 0.0 && mrest == Less {
        // Just below a point of the format: nearest and away keep it, toward zero takes the
        // point below (whose quantum is half as large at the bottom of a binade).
        if mode == Round::NearestEven || away(mode, negative) {
            a
        } else {
            let below = lsb(a - ldexp64(1.0, i64::from(q)) * 0.5).min(q);
            a - ldexp64(1.0, i64::from(below))
        }
    } else {
        let up = match mode {
            Round::NearestEven => {
                frac > 0.5
                    || (frac == 0.5 && (mrest == Greater || (mrest == Equal && m % 2.0 == 1.0)))
            }
            _ if away(mode, negative) => frac > 0.0 || mrest == Greater,
            _ => false,
        };
        ldexp64(m + f64::from(u8::from(up)), i64::from(q))
    };
    if mag > grid.max {
        return overflow(negative, grid.max, mode);
    }
    if negative { -mag } else { mag }
}

/// `v` (the round-to-nearest f64 of an exact result, of f64-or-narrower operands) rounded to
/// `fmt` with `mode`: NaN stays; an infinity from finite operands (`finite_in`) is an
/// overflow ([`overflow`]); else [`round`] with the residual sign `rest(v)` gives.
pub(super) fn settle(
    v: f64,
    fmt: Fmt,
    mode: Round,
    finite_in: bool,
    rest: impl FnOnce(f64) -> Ordering,
) -> f64 {
    if v.is_nan() {
        return v;
    }
    if v.is_infinite() {
        return if finite_in {
            overflow(v < 0.0, fmt.max(), mode)
        } else {
            v
        };
    }
    round(v, rest(v), fmt, mode)
}

/// The limbs of [`exact_sign`]'s integers: a product of two f64s spans bits 2^-2148 to
/// 2^2048, plus carries (68 · 64 = 4 352 bits).
const LIMBS: usize = 68;
/// The bit position of 2^0 in those integers.
const BIAS: i32 = 2148;

/// An f64 as `(sign, significand, exponent of its last bit)`: `x = ±m · 2^e`.
fn parts(x: f64) -> (bool, u64, i32) {
    let bits = x.to_bits();
    let biased = (bits >> 52 & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    let (m, e) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, biased - 1075)
    };
    (x.is_sign_negative(), m, e)
}

/// Adds `m · 2^off` to `acc`.
fn add_at(acc: &mut [u64; LIMBS], m: u128, off: usize) {
    let (limb, sh) = (off / 64, (off % 64) as u32);
    let (lo, hi) = (m as u64, (m >> 64) as u64);
    let pieces = if sh == 0 {
        [lo, hi, 0]
    } else {
        [lo << sh, lo >> (64 - sh) | hi << sh, hi >> (64 - sh)]
    };
    let mut carry = 0u64;
    for (i, p) in pieces.into_iter().enumerate() {
        let (s1, c1) = acc[limb + i].overflowing_add(p);
        let (s2, c2) = s1.overflowing_add(carry);
        acc[limb + i] = s2;
        carry = u64::from(c1) + u64::from(c2);
    }
    let mut i = limb + 3;
    while carry != 0 && i < LIMBS {
        let (s, c) = acc[i].overflowing_add(carry);
        acc[i] = s;
        carry = u64::from(c);
        i += 1;
    }
}

/// The sign of `Σ a·b` over `terms`, computed exactly (every operand finite).
pub(super) fn exact_sign(terms: &[(f64, f64)]) -> Ordering {
    let mut pos = [0u64; LIMBS];
    let mut neg = [0u64; LIMBS];
    for &(a, b) in terms {
        if a == 0.0 || b == 0.0 {
            continue;
        }
        let ((sa, ma, ea), (sb, mb, eb)) = (parts(a), parts(b));
        let acc = if sa != sb { &mut neg } else { &mut pos };
        add_at(
            acc,
            u128::from(ma) * u128::from(mb),
            (ea + eb + BIAS) as usize,
        );
    }
    pos.iter().rev().cmp(neg.iter().rev())
}

/// `a + b` (f64 operands, or narrower ones held in f64s) rounded to `fmt` with `mode`, where
/// `v` is the caller's round-to-nearest f64 sum; the exact zero's sign per IEEE 754.
fn sum(a: f64, b: f64, v: f64, fmt: Fmt, mode: Round) -> f64 {
    if v == 0.0 && a.is_finite() && b.is_finite() {
        // An exact zero (sums never underflow to zero): −0 in round-toward-−∞ unless both
        // are +0; +0 otherwise unless both are −0.
        let both_neg = a.is_sign_negative() && b.is_sign_negative();
        let both_pos = a.is_sign_positive() && b.is_sign_positive();
        let negative = both_neg || (mode == Round::MinusInf && !both_pos);
        return if negative { -0.0 } else { 0.0 };
    }
    // TwoSum's error is exact whenever the sum is finite (Knuth; gradual underflow
    // included), which is when `settle` asks for it.
    settle(v, fmt, mode, a.is_finite() && b.is_finite(), |_| {
        two_sum(a, b).1.partial_cmp(&0.0).unwrap_or(Equal)
    })
}

/// `a·b + c` fused, rounded once to `fmt` with `mode` (operands exact in f64).
fn fused(a: f64, b: f64, c: f64, fmt: Fmt, mode: Round) -> f64 {
    let v = a.mul_add(b, c);
    let finite = a.is_finite() && b.is_finite() && c.is_finite();
    if v == 0.0 && finite && exact_sign(&[(a, b), (c, 1.0)]) == Equal {
        // An exact zero: as a sum of the product (its sign) and c.
        let p = if a == 0.0 || b == 0.0 {
            0.0f64.copysign(if a.is_sign_negative() != b.is_sign_negative() {
                -1.0
            } else {
                1.0
            })
        } else {
            a * b
        };
        return sum(p, c, 0.0, fmt, mode);
    }
    settle(v, fmt, mode, finite, |v| {
        if fmt == Fmt::F64 {
            exact_sign(&[(a, b), (c, 1.0), (-v, 1.0)])
        } else {
            // f32/f16 operands: the product is exact in f64, and so is TwoSum's error of
            // adding c to it (its sum is v).
            two_sum(a * b, c).1.partial_cmp(&0.0).unwrap_or(Equal)
        }
    })
}

/// `a·b` rounded to `fmt` with `mode`.
fn product(a: f64, b: f64, fmt: Fmt, mode: Round) -> f64 {
    let v = a * b;
    settle(v, fmt, mode, a.is_finite() && b.is_finite(), |v| {
        if fmt == Fmt::F64 {
            exact_sign(&[(a, b), (-v, 1.0)])
        } else {
            // f32/f16 products are exact in f64.
            Equal
        }
    })
}

/// `√a` rounded to `fmt` with `mode`.
fn root(a: f64, fmt: Fmt, mode: Round) -> f64 {
    let v = a.sqrt();
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    // x − v has the sign of a − v² (both positive). For f32/f16 operands v² spans at most
    // 106 bits above 2^-254, so the FMA's rounding of a − v² keeps its sign.
    let rest = if fmt == Fmt::F64 {
        exact_sign(&[(a, 1.0), (-v, v)])
    } else {
        (-v).mul_add(v, a).partial_cmp(&0.0).unwrap_or(Equal)
    };
    round(v, rest, fmt, mode)
}

/// f32 `a + b` with `mode` (f32 sums are exact in f64 or within half an f64 ULP).
#[inline]
pub(super) fn add32(a: f32, b: f32, mode: Round) -> f32 {
    if mode == Round::NearestEven {
        return a + b;
    }
    let (a, b) = (f64::from(a), f64::from(b));
    sum(a, b, a + b, Fmt::F32, mode) as f32
}

/// f32 `a − b` with `mode` (a NaN keeps its sign: not `a + (−b)` then).
#[inline]
pub(super) fn sub32(a: f32, b: f32, mode: Round) -> f32 {
    if mode == Round::NearestEven || b.is_nan() {
        return a - b;
    }
    add32(a, -b, mode)
}

/// f32 `a·b` with `mode`.
#[inline]
pub(super) fn mul32(a: f32, b: f32, mode: Round) -> f32 {
    if mode == Round::NearestEven {
        return a * b;
    }
    product(f64::from(a), f64::from(b), Fmt::F32, mode) as f32
}

/// f32 `fma(a, b, c)` with `mode`.
#[inline]
pub(super) fn fma32(a: f32, b: f32, c: f32, mode: Round) -> f32 {
    if mode == Round::NearestEven {
        return a.mul_add(b, c);
    }
    fused(a.into(), b.into(), c.into(), Fmt::F32, mode) as f32
}

/// f32 `a·b + c`, each step rounded with `mode` (`v_mad_f32`, `v_mac_f32`).
#[inline]
pub(super) fn mad32(a: f32, b: f32, c: f32, mode: Round) -> f32 {
    add32(mul32(a, b, mode), c, mode)
}

/// f32 `√a` with `mode`.
pub(super) fn sqrt32(a: f32, mode: Round) -> f32 {
    if mode == Round::NearestEven {
        return a.sqrt();
    }
    root(a.into(), Fmt::F32, mode) as f32
}

/// f64 `a + b` with `mode`.
#[inline]
pub(super) fn add64(a: f64, b: f64, mode: Round) -> f64 {
    if mode == Round::NearestEven {
        return a + b;
    }
    sum(a, b, a + b, Fmt::F64, mode)
}

/// f64 `a·b` with `mode`.
#[inline]
pub(super) fn mul64(a: f64, b: f64, mode: Round) -> f64 {
    if mode == Round::NearestEven {
        return a * b;
    }
    product(a, b, Fmt::F64, mode)
}

/// f64 `fma(a, b, c)` with `mode`.
#[inline]
pub(super) fn fma64(a: f64, b: f64, c: f64, mode: Round) -> f64 {
    if mode == Round::NearestEven {
        return a.mul_add(b, c);
    }
    fused(a, b, c, Fmt::F64, mode)
}

/// f64 `√a` with `mode`.
pub(super) fn sqrt64(a: f64, mode: Round) -> f64 {
    if mode == Round::NearestEven {
        return a.sqrt();
    }
    root(a, Fmt::F64, mode)
}

/// f16 values (held in f64s) `a + b`, as f16 bits' value, with `mode`.
pub(super) fn add16(a: f64, b: f64, mode: Round) -> f64 {
    if mode == Round::NearestEven {
        // Exact in f64 (zeros signed as IEEE's nearest mode does): one rounding to f16.
        return round(a + b, Equal, Fmt::F16, mode);
    }
    sum(a, b, a + b, Fmt::F16, mode)
}

/// f16 `a − b` with `mode` (a NaN keeps its sign).
pub(super) fn sub16(a: f64, b: f64, mode: Round) -> f64 {
    if b.is_nan() {
        return a - b;
    }
    add16(a, -b, mode)
}

/// f16 `a·b` with `mode`.
pub(super) fn mul16(a: f64, b: f64, mode: Round) -> f64 {
    product(a, b, Fmt::F16, mode)
}

/// f16 `fma(a, b, c)` with `mode`: rounded once (exact residual, so nearest-even too is the
/// fused result, not a double rounding through f64).
pub(super) fn fma16(a: f64, b: f64, c: f64, mode: Round) -> f64 {
    fused(a, b, c, Fmt::F16, mode)
}

/// f16 `a·b + c`, each step rounded (`v_mad_f16`, `v_mac_f16`).
pub(super) fn mad16(a: f64, b: f64, c: f64, mode: Round) -> f64 {
    add16(mul16(a, b, mode), c, mode)
}

/// f16 `√a` with `mode`.
pub(super) fn sqrt16(a: f64, mode: Round) -> f64 {
    root(a, Fmt::F16, mode)
}

/// `v_div_fmas_f32`/`_f64` in a directed `mode` (nearest-even is [`super::float::div_fmas`]):
/// `fma(s0, s1, s2)`, rescaled as `v_div_scale` asked (VCC), rounded once with `mode` — the
/// exact FMA's residual sign decides, and the rescaled value is rounded on the format's grid
/// scaled by the same power of two, so a quotient scaled into the denormals rounds once.
pub(super) fn div_fmas(s0: f64, s1: f64, s2: f64, vcc: bool, wide: bool, mode: Round) -> f64 {
    let fmt = if wide { Fmt::F64 } else { Fmt::F32 };
    let v = s0.mul_add(s1, s2);
    let k = super::float::fmas_scale(v, vcc, wide);
    if k == 0 || !v.is_finite() {
        return fused(s0, s1, s2, fmt, mode);
    }
    let rest = if wide {
        exact_sign(&[(s0, s1), (s2, 1.0), (-v, 1.0)])
    } else {
        two_sum(s0 * s1, s2).1.partial_cmp(&0.0).unwrap_or(Equal)
    };
    let g = fmt.grid();
    let k = k as i32;
    let scaled = Grid {
        precision: g.precision,
        min_lsb: g.min_lsb - k,
        max: ldexp64(g.max, -i64::from(k)),
    };
    // On the scaled grid, then scaled back exactly (an infinity stays one).
    ldexp64(round_on(v, rest, scaled, mode), i64::from(k))
}

/// An exactly known value (a wider float, an integer) converted to `fmt` with `mode`.
pub(super) fn convert(x: f64, fmt: Fmt, mode: Round) -> f64 {
    if mode == Round::NearestEven {
        match fmt {
            Fmt::F64 => return x,
            // Rust's conversion rounds to nearest even (overflow: infinity).
            Fmt::F32 => return f64::from(x as f32),
            Fmt::F16 => {}
        }
    }
    round(x, Equal, fmt, mode)
}

/// `x · 2^n` rounded to `fmt` with `mode` (`v_ldexp_*`).
pub(super) fn ldexp(x: f64, n: i64, fmt: Fmt, mode: Round) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let (m, e) = frexp64(x); // x = m · 2^e, 0.5 <= |m| < 1
    let t = i64::from(e) + n.clamp(-5000, 5000);
    if t > 1100 {
        return overflow(x < 0.0, fmt.max(), mode);
    }
    if t < -1200 {
        // Far below every format's smallest denormal: only the sign and direction matter.
        return round(0.0, if x < 0.0 { Less } else { Greater }, fmt, mode);
    }
    let v = ldexp64(x, n);
    settle(v, fmt, mode, true, |v| {
        if v.abs() >= f64::MIN_POSITIVE {
            // A normal f64 result is exact.
            return Equal;
        }
        // x·2^n − v, both scaled by 2^1074: m·2^(t+1074) (t < -1021 here) is at least
        // 2^-127 (normal, exact) and v·2^1074 an integer.
        exact_sign(&[(ldexp64(m, t + 1074), 1.0), (-ldexp64(v, 1074), 1.0)])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODES: [Round; 4] = [
        Round::NearestEven,
        Round::PlusInf,
        Round::MinusInf,
        Round::Zero,
    ];

    #[test]
    fn exact_sign_sees_residuals_below_the_denormals() {
        let tiny = f64::from_bits(1); // 2^-1074
        // tiny·tiny is 2^-2148: far below f64, still positive.
        assert_eq!(exact_sign(&[(tiny, tiny)]), Greater);
        assert_eq!(exact_sign(&[(tiny, tiny), (-tiny, tiny)]), Equal);
        assert_eq!(exact_sign(&[(f64::MAX, f64::MAX), (-tiny, 1.0)]), Greater);
        assert_eq!(exact_sign(&[(1.0, 1.0), (-1.0, 1.0), (-tiny, tiny)]), Less);
    }

    #[test]
    fn nearest_even_agrees_with_the_hardware_rounding_of_rust() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = f32::from_bits(x as u32);
            let b = f32::from_bits((x >> 32) as u32);
            if !a.is_finite() || !b.is_finite() {
                continue;
            }
            assert_eq!(add32(a, b, Round::NearestEven).to_bits(), (a + b).to_bits());
            assert_eq!(mul32(a, b, Round::NearestEven).to_bits(), (a * b).to_bits());
            let (c, d) = (f64::from_bits(x), f64::from_bits(x.rotate_left(29)));
            if c.is_finite() && d.is_finite() {
                assert_eq!(mul64(c, d, Round::NearestEven).to_bits(), (c * d).to_bits());
                assert_eq!(
                    fma64(c, d, 1.5, Round::NearestEven).to_bits(),
                    c.mul_add(d, 1.5).to_bits()
                );
            }
        }
    }

    #[test]
    fn directed_modes_bracket_the_exact_value() {
        // 1 + 2^-30 in f32: between 1 and 1 + 2^-23.
        let (one, eps) = (1.0f32, f32::from_bits(0x3080_0000));
        let up = f32::from_bits(0x3f80_0001);
        assert_eq!(add32(one, eps, Round::NearestEven), one);
        assert_eq!(add32(one, eps, Round::PlusInf), up);
        assert_eq!(add32(one, eps, Round::MinusInf), one);
        assert_eq!(add32(-one, -eps, Round::MinusInf), -up);
        assert_eq!(add32(-one, -eps, Round::Zero), -one);
        // 1 − 2^-30: just below 1, where the quantum halves.
        assert_eq!(add32(one, -eps, Round::Zero), f32::from_bits(0x3f7f_ffff));
        assert_eq!(add32(one, -eps, Round::PlusInf), one);
        // Overflow: MAX + MAX.
        assert_eq!(add32(f32::MAX, f32::MAX, Round::Zero), f32::MAX);
        assert_eq!(add32(f32::MAX, f32::MAX, Round::PlusInf), f32::INFINITY);
        assert_eq!(add32(-f32::MAX, -f32::MAX, Round::PlusInf), -f32::MAX);
        assert_eq!(mul64(f64::MAX, 2.0, Round::MinusInf), f64::MAX);
        // Underflow: the smallest denormal squared.
        let d = f32::from_bits(1);
        assert_eq!(mul32(d, d, Round::PlusInf), d);
        assert_eq!(mul32(d, -d, Round::PlusInf).to_bits(), 0x8000_0000);
        assert_eq!(mul32(d, -d, Round::MinusInf), -d);
        // Exact zeros.
        assert_eq!(add32(1.0, -1.0, Round::MinusInf).to_bits(), 0x8000_0000);
        assert_eq!(add32(1.0, -1.0, Round::Zero).to_bits(), 0);
        for mode in MODES {
            assert_eq!(add64(-0.0, -0.0, mode).to_bits(), (-0.0f64).to_bits());
            // √2 rounded: below √2 (2 − r² > 0) toward −∞ and zero, above it toward +∞ and
            // (as it happens) to nearest.
            let r = sqrt64(2.0, mode);
            let below = exact_sign(&[(2.0, 1.0), (-r, r)]) == Greater;
            assert_eq!(
                below,
                matches!(mode, Round::MinusInf | Round::Zero),
                "{mode:?}"
            );
        }
        assert_eq!(
            sqrt64(2.0, Round::PlusInf),
            sqrt64(2.0, Round::Zero).next_up()
        );
    }

    #[test]
    fn conversions_and_ldexp_round_by_mode() {
        // 2^24 + 1 is not an f32.
        let x = 16_777_217.0;
        assert_eq!(convert(x, Fmt::F32, Round::NearestEven), 16_777_216.0);
        assert_eq!(convert(x, Fmt::F32, Round::PlusInf), 16_777_218.0);
        assert_eq!(convert(-x, Fmt::F32, Round::Zero), -16_777_216.0);
        // f16: 65520 is a tie to infinity in nearest, the maximum toward zero.
        assert_eq!(
            convert(65520.0, Fmt::F16, Round::NearestEven),
            f64::INFINITY
        );
        assert_eq!(convert(65520.0, Fmt::F16, Round::Zero), 65504.0);
        assert_eq!(convert(1e-9, Fmt::F16, Round::PlusInf), ldexp64(1.0, -24));
        // ldexp into the f32 denormals: 1.5 · 2^-149 rounds by mode.
        assert_eq!(
            ldexp(1.5, -149, Fmt::F32, Round::NearestEven),
            ldexp64(1.0, -148)
        );
        assert_eq!(ldexp(1.5, -149, Fmt::F32, Round::Zero), ldexp64(1.0, -149));
        assert_eq!(
            ldexp(1.5, -1074, Fmt::F64, Round::MinusInf),
            ldexp64(1.0, -1074)
        );
        assert_eq!(
            ldexp(1.5, -1074, Fmt::F64, Round::PlusInf),
            ldexp64(1.0, -1073)
        );
        assert_eq!(
            ldexp(1.0, -3000, Fmt::F64, Round::PlusInf),
            ldexp64(1.0, -1074)
        );
    }
}
