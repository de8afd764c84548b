//! Floating-point helpers of the vector ALU: f16 conversions (Rust has no stable `f16`),
//! denormal flushing by the MODE register, the guide's min/max/med3 NaN rules, `v_cmp_class`
//! classes, `ldexp`/`frexp`, and the division helpers (`v_div_scale`, `v_div_fmas`,
//! `v_div_fixup`) as "AMD Instinct MI200 ISA" chapter 12's VOP3 descriptions give them.
//!
//! Accuracy: every IEEE basic operation (add, sub, mul, fma, sqrt, division steps, conversions)
//! is correctly rounded, to nearest-even by default and in MODE's other rounding modes as
//! [`super::round`] does them. f16 arithmetic is computed in f64 (add/sub/mul exact) and
//! rounded once to f16; f16 FMA too is rounded once from its exact value (no double
//! rounding through f64). The transcendentals
//! (`v_exp`, `v_log`, `v_rcp`, `v_rsq`, `v_sin`, `v_cos`), which the guide specifies only to
//! about 1 ULP, are computed in f64 with Rust's `std` and rounded once: within 1 ULP of the
//! true value, not bit-equal to the hardware's tables.

use crate::exec::salu::Round;

/// The MODE register's floating-point controls (hardware register 1: FP_ROUND 3:0,
/// FP_DENORM 7:4, DX10_CLAMP 8, IEEE 9). FP_DENORM per precision: 0 flush input and output
/// denormals, 1 allow input / flush output, 2 flush input / allow output, 3 allow both; bits
/// 5:4 are f32, bits 7:6 f64 and f16.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mode {
    /// FP_ROUND[1:0]: f32 results.
    pub r32: Round,
    /// FP_ROUND[3:2]: f64 and f16 results.
    pub r64: Round,
    pub f32_in: bool,
    pub f32_out: bool,
    pub f64_in: bool,
    pub f64_out: bool,
    pub dx10_clamp: bool,
    pub ieee: bool,
}

impl Mode {
    pub(super) fn from_reg(mode: u32) -> Self {
        let reg = crate::exec::salu::Mode(mode);
        Self {
            r32: reg.round_f32(),
            r64: reg.round_f64_f16(),
            f32_in: mode >> 4 & 1 == 1,
            f32_out: mode >> 5 & 1 == 1,
            f64_in: mode >> 6 & 1 == 1,
            f64_out: mode >> 7 & 1 == 1,
            dx10_clamp: mode >> 8 & 1 == 1,
            ieee: mode >> 9 & 1 == 1,
        }
    }
}

/// f32 bits with a denormal replaced by a zero of its sign.
pub(super) fn flush32(x: u32) -> u32 {
    if x & 0x7f80_0000 == 0 {
        x & 0x8000_0000
    } else {
        x
    }
}

/// f64 bits with a denormal replaced by a zero of its sign.
pub(super) fn flush64(x: u64) -> u64 {
    if x & 0x7ff0_0000_0000_0000 == 0 {
        x & 0x8000_0000_0000_0000
    } else {
        x
    }
}

/// f16 bits with a denormal replaced by a zero of its sign.
pub(super) fn flush16(x: u16) -> u16 {
    if x & 0x7c00 == 0 { x & 0x8000 } else { x }
}

/// The exact f32 value of f16 bits.
pub(super) fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from(h >> 10 & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Denormal: m · 2^-24, exact in f32.
            let v = m as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | m << 13,
        (e, m) => sign | (e + 112) << 23 | m << 13,
    };
    f32::from_bits(bits)
}

/// An f64 rounded to f16 bits, to nearest even (`rtz`: toward zero); NaNs stay NaNs (quiet).
pub(super) fn f64_to_f16(x: f64, rtz: bool) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 48) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7e00 | ((bits >> 42) & 0x1ff) as u16;
    }
    let a = x.abs();
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    if a == 0.0 {
        return sign;
    }
    // Scale so that the f16 quantum (2^-24 for denormals, 2^(e-10) otherwise) becomes 1.
    let e = ((a.to_bits() >> 52) as i32) - 1023; // a is normal in f64 here (f16 range)
    let q = (e.max(-14)) - 10;
    let scaled = a * pow2(-q); // exact: a power of two
    let mut m = if rtz {
        scaled.trunc()
    } else {
        scaled.round_ties_even()
    } as u64;
    let mut q = q;
    if m >= 2048 {
        m >>= 1;
        q += 1;
    }
    if m == 0 {
        return sign;
    }
    if m < 1024 {
        // Denormal (q == -24).
        return sign | m as u16;
    }
    let exp = q + 10 + 15;
    if exp >= 31 {
        return if rtz { sign | 0x7bff } else { sign | 0x7c00 };
    }
    sign | (exp as u16) << 10 | (m as u16 & 0x3ff)
}

/// f32 to f16 bits, to nearest even.
pub(super) fn f32_to_f16(x: f32) -> u16 {
    f64_to_f16(f64::from(x), false)
}

/// A quiet NaN of the same payload.
pub(super) fn quiet32(x: f32) -> f32 {
    f32::from_bits(x.to_bits() | 0x0040_0000)
}

fn is_snan32(x: f32) -> bool {
    x.is_nan() && x.to_bits() & 0x0040_0000 == 0
}

fn is_snan64(x: f64) -> bool {
    x.is_nan() && x.to_bits() & 0x0008_0000_0000_0000 == 0
}

/// `v_max_f32`/`v_min_f32` ("if either is NaN, the other"; with IEEE mode a signalling NaN
/// input gives a quiet NaN); -0 orders below +0.
pub(super) fn minmax32(a: f32, b: f32, max: bool, ieee: bool) -> f32 {
    if ieee && is_snan32(a) {
        return quiet32(a);
    }
    if ieee && is_snan32(b) {
        return quiet32(b);
    }
    match (a.is_nan(), b.is_nan()) {
        (true, true) => quiet32(a),
        (true, false) => b,
        (false, true) => a,
        _ => {
            let a_first = if a == b {
                // Signed zeros: -0 < +0.
                (a.is_sign_negative() && max) == b.is_sign_negative() || a.to_bits() == b.to_bits()
            } else {
                (a > b) == max
            };
            if a_first { a } else { b }
        }
    }
}

/// As [`minmax32`] for f64.
pub(super) fn minmax64(a: f64, b: f64, max: bool, ieee: bool) -> f64 {
    let q = |x: f64| f64::from_bits(x.to_bits() | 0x0008_0000_0000_0000);
    if ieee && is_snan64(a) {
        return q(a);
    }
    if ieee && is_snan64(b) {
        return q(b);
    }
    match (a.is_nan(), b.is_nan()) {
        (true, true) => q(a),
        (true, false) => b,
        (false, true) => a,
        _ => {
            if a == b {
                // -0 < +0: max prefers +0, min prefers -0.
                if a.is_sign_negative() == b.is_sign_negative() {
                    a
                } else if max == a.is_sign_negative() {
                    b
                } else {
                    a
                }
            } else if (a > b) == max {
                a
            } else {
                b
            }
        }
    }
}

/// `v_med3_f32`: with any NaN, `min3`; else the middle value (the guide's V_MED3_F32).
pub(super) fn med3_32(a: f32, b: f32, c: f32, ieee: bool) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return minmax32(minmax32(a, b, false, ieee), c, false, ieee);
    }
    let m = minmax32(minmax32(a, b, true, ieee), c, true, ieee);
    if m.to_bits() == a.to_bits() {
        minmax32(b, c, true, ieee)
    } else if m.to_bits() == b.to_bits() {
        minmax32(a, c, true, ieee)
    } else {
        minmax32(a, b, true, ieee)
    }
}

/// The `v_cmp_class` class bit of a value: 0 signalling NaN, 1 quiet NaN, 2 -inf, 3 -normal,
/// 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf (the guide's V_CMP_CLASS_F32).
pub(super) fn class_bit(x: f64, snan: bool, denormal: bool) -> u32 {
    if x.is_nan() {
        return if snan { 0 } else { 1 };
    }
    let k = if x.is_infinite() {
        3
    } else if x == 0.0 {
        0
    } else if denormal {
        1
    } else {
        2
    };
    // Negative classes count down from 5 (-0) to 2 (-inf), positive ones up from 6 (+0).
    if x.is_sign_negative() { 5 - k } else { 6 + k }
}

/// `2^n` for a normal power (`-1022 <= n <= 1023`), built from its bits (`powi` is a loop).
fn pow2(n: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&n));
    f64::from_bits(((n + 1023) as u64) << 52)
}

/// `x · 2^n`, correctly rounded (f64; denormal results rounded once).
pub(super) fn ldexp64(x: f64, n: i64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let (m, e) = frexp64(x); // x = m · 2^e, 0.5 <= |m| < 1
    let t = i64::from(e) + n.clamp(-5000, 5000);
    if t > 1024 {
        return f64::INFINITY.copysign(x);
    }
    if t >= -1021 {
        // Exact: 2m is in [1, 2), 2^(t-1) and the product are normal.
        return (m * 2.0) * pow2((t - 1) as i32);
    }
    if t < -1080 {
        return 0.0f64.copysign(x);
    }
    // m · 2^(t + 1021) is normal and exact; one more power of two rounds once.
    m * pow2((t + 1021) as i32) * pow2(-1021)
}

/// `(m, e)` with `x = m · 2^e` and `0.5 <= |m| < 1` (finite, non-zero `x`).
pub(super) fn frexp64(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let (x, adj) = if x.abs() < f64::MIN_POSITIVE {
        (x * pow2(64), -64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32 - 1022;
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022u64 << 52));
    (m, e + adj)
}

/// The biased exponent field of an f32 (the guide's `exponent()` in the division helpers).
pub(super) fn exp32(x: f32) -> i32 {
    (x.to_bits() >> 23 & 0xff) as i32
}

/// The biased exponent field of an f64.
pub(super) fn exp64(x: f64) -> i32 {
    (x.to_bits() >> 52 & 0x7ff) as i32
}

/// `v_div_scale_f32`/`_f64` (the guide's pseudo-code): scales the numerator or denominator
/// (S0 is the one being produced, S1 the denominator, S2 the numerator) so that the
/// Newton-Raphson steps in between stay in range; the flag says the quotient is off by a
/// power of two for `v_div_fmas` to undo. `wide` selects f64 (thresholds 768, 128, 53)
/// over f32 (96, 64, 23).
pub(super) fn div_scale(s0: f64, s1: f64, s2: f64, wide: bool) -> (f64, bool) {
    let (big, scale, tiny, exp, min_normal): (i32, i64, i32, fn(f64) -> i32, f64) = if wide {
        (768, 128, 53, exp64, f64::MIN_POSITIVE)
    } else {
        (
            96,
            64,
            23,
            |x| exp32(x as f32),
            f64::from(f32::MIN_POSITIVE),
        )
    };
    let denorm = |x: f64| x != 0.0 && x.abs() < min_normal;
    let round = |x: f64| if wide { x } else { f64::from(x as f32) };
    if s2 == 0.0 || s1 == 0.0 {
        return (f64::NAN, false);
    }
    if exp(s2) - exp(s1) >= big {
        // N/D near the largest float: only the denominator is scaled.
        let d = if s0 == s1 { ldexp64(s0, scale) } else { s0 };
        return (d, true);
    }
    if denorm(s1) {
        return (ldexp64(s0, scale), false);
    }
    let inv = round(1.0 / s1);
    let quot = round(s2 / s1);
    if denorm(inv) && denorm(quot) {
        // Only the denominator is scaled, down: ldexp(S0, 64) of a denominator whose
        // reciprocal is denormal would overflow (the guide's pseudo-code reads "64" here;
        // the direction is the one that keeps the sequence finite, as v_div_fmas undoes).
        let d = if s0 == s1 { ldexp64(s0, -scale) } else { s0 };
        return (d, true);
    }
    if denorm(inv) {
        return (ldexp64(s0, -scale), false);
    }
    if denorm(quot) {
        let d = if s0 == s2 { ldexp64(s0, scale) } else { s0 };
        return (d, true);
    }
    if exp(s2) <= tiny {
        // The numerator is tiny: both are scaled up alike.
        return (ldexp64(s0, scale), false);
    }
    (s0, false)
}

/// `v_div_fixup_f32`/`_f64`: the special cases of `S2 / S1` (NaN, 0/0, inf/inf, x/0, inf/y,
/// x/inf, 0/y, underflow, overflow) from the original operands, else the quotient `S0` with
/// the quotient's sign (the guide's V_DIV_FIXUP_F32 pseudo-code). `wide`: f64 (underflow
/// below exponent difference -1075) or f32 (-150).
pub(super) fn div_fixup(s0: f64, s1: f64, s2: f64, wide: bool) -> f64 {
    let neg = s1.is_sign_negative() != s2.is_sign_negative();
    let signed = |x: f64| if neg { -x } else { x };
    let (exp, under, maxexp): (fn(f64) -> i32, i32, i32) = if wide {
        (exp64, -1075, 0x7ff)
    } else {
        (|x| exp32(x as f32), -150, 0xff)
    };
    if s2.is_nan() {
        return s2;
    }
    if s1.is_nan() {
        return s1;
    }
    if s1 == 0.0 && s2 == 0.0 {
        return f64::NAN;
    }
    if s1.is_infinite() && s2.is_infinite() {
        return f64::NAN;
    }
    if s1 == 0.0 || s2.is_infinite() {
        return signed(f64::INFINITY);
    }
    if s1.is_infinite() || s2 == 0.0 {
        return signed(0.0);
    }
    if exp(s2) - exp(s1) < under {
        return signed(0.0);
    }
    if exp(s1) == maxexp {
        return signed(f64::INFINITY);
    }
    // A NaN quotient from finite operands is the Newton-Raphson steps overflowing.
    if s0.is_nan() {
        return signed(f64::INFINITY);
    }
    signed(s0.abs())
}

/// `v_div_fmas_f32`/`_f64`: `fma(S0, S1, S2)`, rescaled when VCC says `v_div_scale` scaled an
/// operand. The guide's pseudo-code multiplies by 2^32 (f32) / 2^64 (f64) whatever was
/// scaled; here the scaling `v_div_scale` applied (2^64 / 2^128) is undone in the direction
/// that quotient needs: a quotient of magnitude ≥ 1 came from a scaled-up denominator
/// (multiplied back up), a smaller one from a scaled-up numerator (scaled down). For operands
/// that need no scaling (VCC clear) it is the plain FMA either way.
///
/// The FMA and the scale round once, as one hardware operation does: scaled down into the
/// denormals, the FMA rounded to f64 first and then to the denormal grid would be a double
/// rounding (one ULP off for a quotient just below the smallest normal). So the exact FMA's
/// distance from its f64 rounding ([`fma_residual`]) breaks the ties the second rounding
/// sees. For f32 (`wide` false; the operands are f32 values) the product is exact in f64 and
/// the sum's error is exact ([`two_sum`]); the result is an f32 value held in an f64.
pub(super) fn div_fmas(s0: f64, s1: f64, s2: f64, vcc: bool, wide: bool) -> f64 {
    let (fma, residual) = if wide {
        let r = s0.mul_add(s1, s2);
        (r, fma_residual(s0, s1, s2, r))
    } else {
        two_sum(s0 * s1, s2)
    };
    let scale = fmas_scale(fma, vcc, wide);
    if wide {
        round_scaled(fma, residual, scale, 53, -1074)
    } else {
        round_scaled(fma, residual, scale, 24, -149)
    }
}

/// The power of two `v_div_fmas` rescales its FMA `fma` by (see [`div_fmas`]).
pub(super) fn fmas_scale(fma: f64, vcc: bool, wide: bool) -> i64 {
    if !vcc || fma == 0.0 || !fma.is_finite() {
        0
    } else {
        let scale = if wide { 128 } else { 64 };
        if fma.abs() >= 1.0 { scale } else { -scale }
    }
}

/// `a + b` rounded and its exact error (Knuth's TwoSum; 0 when not finite).
pub(super) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, if e.is_finite() { e } else { 0.0 })
}

/// The sign-correct approximation of `a·b + c − r` where `r` is `fma(a, b, c)` (Boldo and
/// Muller's ErrFma, "Exact and approximated error of the FMA", IEEE TC 2011: the error is
/// `r2 + r3` exactly, and `r2` its rounding, zero only when the error is).
fn fma_residual(a: f64, b: f64, c: f64, r: f64) -> f64 {
    let u1 = a * b;
    let u2 = a.mul_add(b, -u1);
    let (a1, a2) = two_sum(c, u2);
    let (b1, b2) = two_sum(u1, a1);
    let g = (b1 - r) + b2;
    let r2 = g + a2;
    if r2.is_finite() { r2 } else { 0.0 }
}

/// `(r + e) · 2^k` rounded to nearest even to a format of `p` significant bits whose
/// smallest quantum is `2^lsb_min` (f64: 53, -1074; f32: 24, -149), where `r` is an f64 and
/// `e` (|e| at most half an ULP of `r`) only decides ties. Returned as an f64 (exact).
fn round_scaled(r: f64, e: f64, k: i64, p: i32, lsb_min: i32) -> f64 {
    if r == 0.0 || !r.is_finite() {
        return r;
    }
    if p == 53 && (k == 0 || r.abs() >= f64::MIN_POSITIVE * pow2(128)) {
        // An f64 staying normal (or unscaled): the scale is exact, r is the result.
        return ldexp64(r, k);
    }
    if p == 24 {
        // Rounding to f32 from an f64 whose dropped bits are not exactly half an f32 ULP
        // (for a normal f32 result) rounds as the exact value does.
        let f = ldexp64(r, k);
        let normal = f.abs() >= f64::from(f32::MIN_POSITIVE);
        if e == 0.0 || (normal && f.to_bits() & 0x1fff_ffff != 0x1000_0000) {
            return f64::from(f as f32);
        }
    }
    let (m, ex) = frexp64(r); // |r| = M · 2^(ex - 53), M in [2^52, 2^53)
    let big_m = (m.abs() * pow2(53)) as u64;
    let k = k.clamp(-5000, 5000) as i32;
    let low = ex - 53 + k; // the exponent of M's last bit, scaled
    let lsb = (ex + k - p).max(lsb_min);
    let shift = lsb - low;
    let q = if shift <= 0 {
        return ldexp64(r, i64::from(k));
    } else if shift > 60 {
        0
    } else {
        let q = big_m >> shift;
        let rem = big_m & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        // e away from zero (same sign as r) makes a tie round up in magnitude.
        let away = e != 0.0 && (e > 0.0) == (r > 0.0);
        let up = rem > half || (rem == half && (away || (e == 0.0 && q & 1 == 1)));
        q + u64::from(up)
    };
    ldexp64(q as f64, i64::from(lsb)).copysign(r)
}

/// The first 1216 fraction bits of 2/π (0.A2F9836E4E44…), most significant first; the
/// hardware's table has 1201 of them (the guide's V_TRIG_PREOP_F64), the rest read as 0.
/// Computed with integer arithmetic from Machin's formula for π; the leading words are those
/// of the well-known table of fdlibm's `__kernel_rem_pio2`.
const TWO_OVER_PI: [u64; 19] = [
    0xa2f9_836e_4e44_1529,
    0xfc27_57d1_f534_ddc0,
    0xdb62_9599_3c43_9041,
    0xfe51_63ab_debb_c561,
    0xb724_6e3a_424d_d2e0,
    0x0649_2eea_09d1_921c,
    0xfe1d_eb1c_b129_a73e,
    0xe882_35f5_2ebb_4484,
    0xe99c_7026_b45f_7e41,
    0x3991_d639_8353_39f4,
    0x9c84_5f8b_bdf9_283b,
    0x1ff8_97ff_de05_980f,
    0xef2f_118b_5a0a_6d1f,
    0x6d36_7ecf_27cb_09b7,
    0x4f46_3f66_9e5f_ea2d,
    0x7527_bac7_ebe5_f17b,
    0x3d07_39f7_8a52_92ea,
    0x6bfb_5fb1_1f8d_5d08,
    0x5603_3046_fc7b_6bab,
];

/// `v_trig_preop_f64`: the 53-bit segment `seg` of 2/π (fraction bits `53·seg ..`, moved
/// further by how much S0's exponent exceeds 1077), at its place value, rounded toward zero
/// (the guide's V_TRIG_PREOP_F64; results that would underflow are scaled up by 2^128 when
/// S0's exponent is 1968 or more).
pub(super) fn trig_preop(x: f64, seg: u32) -> f64 {
    let e = exp64(x);
    let mut shift = (seg & 31) * 53;
    if e > 1077 {
        shift += e as u32 - 1077;
    }
    let bit = |i: u32| -> u64 {
        if i >= 1201 {
            0
        } else {
            TWO_OVER_PI[(i / 64) as usize] >> (63 - i % 64) & 1
        }
    };
    let r = (shift..shift + 53).fold(0u64, |r, i| r << 1 | bit(i));
    let mut scale = -53 - i64::from(shift);
    if e >= 1968 {
        scale += 128;
    }
    if r == 0 {
        return 0.0;
    }
    // r < 2^53: r·2^scale is exact while normal; a denormal result is truncated.
    let lead = 63 - i64::from(r.leading_zeros());
    if lead + scale >= -1022 {
        return ldexp64(r as f64, scale);
    }
    // The denormal's significand: r·2^(scale + 1074), below 2^52.
    let drop = -1074 - scale;
    if drop >= 64 {
        return 0.0;
    }
    if drop <= 0 {
        return f64::from_bits(r << -drop);
    }
    f64::from_bits(r >> drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f16 nearest to `x` by the definition: the representable neighbours below and
    /// above, the closer one, ties to the even significand; beyond the largest finite value
    /// by half an ULP (65520) or more, infinity.
    fn f16_reference(x: f32) -> u16 {
        let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
        let a = f64::from(x.abs());
        if a >= 65520.0 {
            return sign | 0x7c00;
        }
        // Binary search for the largest f16 magnitude <= a (magnitudes order as integers).
        let (mut lo, mut hi) = (0u16, 0x7bff);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if f64::from(f16_to_f32(mid)) <= a {
                lo = mid
            } else {
                hi = mid - 1
            }
        }
        let below = lo;
        if below == 0x7bff || f64::from(f16_to_f32(below)) == a {
            return sign | below;
        }
        let (d0, d1) = (
            a - f64::from(f16_to_f32(below)),
            f64::from(f16_to_f32(below + 1)) - a,
        );
        let pick = if d0 < d1 || (d0 == d1 && below & 1 == 0) {
            below
        } else {
            below + 1
        };
        sign | pick
    }

    #[test]
    fn f32_to_f16_rounds_to_nearest_even_everywhere() {
        // Every 2^11-th f32 bit pattern of both signs (denormals, normals, ties, overflow).
        for bits in (0..=u32::MAX)
            .step_by(2048)
            .chain([0x3380_0000, 0x3300_0000, 0x477f_f000])
        {
            let x = f32::from_bits(bits);
            if x.is_nan() {
                assert_eq!(f32_to_f16(x) & 0x7e00, 0x7e00, "{bits:#x}");
                continue;
            }
            assert_eq!(f32_to_f16(x), f16_reference(x), "{x:e} ({bits:#x})");
        }
    }

    #[test]
    fn f16_to_f32_is_exact_and_round_trips() {
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert_eq!(h & 0x7c00, 0x7c00);
                continue;
            }
            assert_eq!(f32_to_f16(x), h, "{h:#x}");
        }
    }

    #[test]
    fn ldexp_and_frexp_agree_with_multiplication() {
        let values = [1.0, -3.5, 1e-310, f64::MAX, f64::MIN_POSITIVE, 0.1, -7e200];
        for &x in &values {
            for n in [-1100i64, -1074, -1022, -60, -1, 0, 1, 60, 1023, 2100] {
                let want = if (-1022..=1023).contains(&n) {
                    // One multiplication by an exact power of two rounds once.
                    x * 2f64.powi(n as i32)
                } else {
                    // Two steps, each exact or the final one rounding.
                    let (n1, n2) = (n / 2, n - n / 2);
                    let y = x * 2f64.powi(n1 as i32);
                    if y.is_finite() && y.abs() >= f64::MIN_POSITIVE {
                        y * 2f64.powi(n2 as i32)
                    } else {
                        continue;
                    }
                };
                assert_eq!(ldexp64(x, n).to_bits(), want.to_bits(), "ldexp({x:e}, {n})");
            }
            let (m, e) = frexp64(x);
            assert!((0.5..1.0).contains(&m.abs()), "{x:e}");
            assert_eq!(ldexp64(m, i64::from(e)), x);
        }
    }

    #[test]
    fn trig_preop_never_panics_and_stays_below_one() {
        // Every segment of x across the exponent range, including the 2^128 rescaling.
        for e in (0..2047u64).step_by(7) {
            let x = f64::from_bits(e << 52 | 0x000f_0000_0000_0001);
            for seg in 0..32 {
                let v = trig_preop(x, seg);
                assert!(
                    v.is_finite() && (0.0..1.0).contains(&v),
                    "{x:e} {seg}: {v:e}"
                );
            }
        }
    }

    #[test]
    fn classes_of_each_kind() {
        assert_eq!(class_bit(f64::NAN, true, false), 0);
        assert_eq!(class_bit(f64::NAN, false, false), 1);
        assert_eq!(class_bit(f64::NEG_INFINITY, false, false), 2);
        assert_eq!(class_bit(-1.0, false, false), 3);
        assert_eq!(class_bit(-1e-310, false, true), 4);
        assert_eq!(class_bit(-0.0, false, false), 5);
        assert_eq!(class_bit(0.0, false, false), 6);
        assert_eq!(class_bit(1e-310, false, true), 7);
        assert_eq!(class_bit(1.0, false, false), 8);
        assert_eq!(class_bit(f64::INFINITY, false, false), 9);
    }
}
