//! Typed buffer data: what `buffer_load_format_*` / `buffer_store_format_*` (and their d16
//! forms) convert between memory and registers, by the buffer resource's DATA_FORMAT,
//! NUM_FORMAT and DST_SEL fields ("AMD Instinct MI200 ISA" chapter 9, "Buffer Resource"
//! and "Buffer Instructions": typed MUBUF accesses take their formats from the V#; the gfx9
//! word-3 layout and the enumerations `BUF_DATA_FORMAT`, `BUF_NUM_FORMAT`, `SQ_SEL_XYZW01`
//! are ROCr's `registers.h`, `SQ_BUF_RSRC_WORD3`).
//!
//! - DATA_FORMAT names the element's components from the most significant bit down
//!   (`10_11_11`: Z in the top 10 bits, X in the low 11; `2_10_10_10`: W in the top 2), as
//!   Mesa's radeonsi maps `R11G11B10_FLOAT` to `10_11_11` and `R10G10B10A2` to `2_10_10_10`.
//!   INVALID (0) and RESERVED (15) make every access out of range (loads 0, stores dropped).
//! - NUM_FORMAT, loading a component of `n` bits: UNORM `x / (2^n − 1)`; SNORM
//!   `max(x / (2^(n−1) − 1), −1)`; USCALED / SSCALED the integer as an f32; UINT / SINT the
//!   integer zero- / sign-extended; FLOAT the 16-bit half, the 32-bit single, or the unsigned
//!   11-/10-bit floats (5-bit exponent) as f32 (a FLOAT 8- or 2-bit component reads 0).
//!   Storing converts back: UNORM / SNORM clamp to [0, 1] / [−1, 1] (NaN to 0), scale and
//!   round to nearest even; USCALED / SSCALED truncate and saturate; UINT / SINT saturate;
//!   FLOAT rounds to nearest even (11-/10-bit floats: negatives to 0, beyond the largest
//!   finite value to it, NaN and infinity kept). The reserved NUM_FORMAT 6 is
//!   [`ExecError::Illegal`](crate::exec::ExecError::Illegal).
//! - A component the format lacks loads as 0 (X, Y, Z) or 1 (W); DST_SEL_X..W then pick
//!   each result channel: 0, 1 (1.0 for the float-valued number formats), or the element's
//!   X, Y, Z, W (the reserved selects 2, 3 read 0). `_x` .. `_xyzw` return the first 1..4
//!   channels. Stores write the components the instruction provides (DST_SEL does not
//!   apply): for byte-aligned components only their bytes; a packed format (10_11_11,
//!   2_10_10_10 ...) is written whole, the missing components 0.
//! - d16 forms hold each channel as 16 bits, two per VGPR: the float-valued number formats
//!   as f16 (rounded to nearest even), UINT / SINT as the low 16 bits; `_d16_x` writes the
//!   low half and keeps the high one, `_d16_hi_x` the high half, `_d16_xyz` the low half
//!   of its second register.

use crate::exec::valu::{f16_bits_to_f32, f32_to_f16_bits};

/// A V#'s typed-access fields (buffer resource word 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Format {
    /// DST_SEL_X..W (2:0, 5:3, 8:6, 11:9).
    dst_sel: [u8; 4],
    /// NUM_FORMAT (14:12).
    num: u8,
    /// DATA_FORMAT (18:15).
    data: u8,
}

/// NUM_FORMAT values.
const UNORM: u8 = 0;
const SNORM: u8 = 1;
const USCALED: u8 = 2;
const SSCALED: u8 = 3;
const UINT: u8 = 4;
const SINT: u8 = 5;
const RESERVED_NUM: u8 = 6;
const FLOAT: u8 = 7;

impl Format {
    /// The fields of word 3.
    pub(super) fn from_word3(w3: u32) -> Self {
        Self {
            dst_sel: [0, 3, 6, 9].map(|s| (w3 >> s & 7) as u8),
            num: (w3 >> 12 & 7) as u8,
            data: (w3 >> 15 & 15) as u8,
        }
    }

    /// Whether NUM_FORMAT is the reserved value.
    pub(super) fn reserved(self) -> bool {
        self.num == RESERVED_NUM
    }

    /// The element's size in bytes and its components' bit widths, X first, or `None` for
    /// INVALID / RESERVED.
    pub(super) fn layout(self) -> Option<(usize, &'static [u32])> {
        Some(match self.data {
            1 => (1, &[8]),
            2 => (2, &[16]),
            3 => (2, &[8, 8]),
            4 => (4, &[32]),
            5 => (4, &[16, 16]),
            6 => (4, &[11, 11, 10]),
            7 => (4, &[10, 11, 11]),
            8 => (4, &[2, 10, 10, 10]),
            9 => (4, &[10, 10, 10, 2]),
            10 => (4, &[8, 8, 8, 8]),
            11 => (8, &[32, 32]),
            12 => (8, &[16, 16, 16, 16]),
            13 => (12, &[32, 32, 32]),
            14 => (16, &[32, 32, 32, 32]),
            _ => return None,
        })
    }

    /// Whether the number format's values are floats (else integers).
    fn float_valued(self) -> bool {
        !matches!(self.num, UINT | SINT)
    }

    /// The element in `raw` (little-endian, [`Self::layout`]'s size) as the four result
    /// channels (f32 bits or integers), DST_SEL applied.
    pub(super) fn load(self, raw: &[u8]) -> [u32; 4] {
        let Some((_, widths)) = self.layout() else {
            return [0; 4];
        };
        let one = if self.float_valued() {
            1.0f32.to_bits()
        } else {
            1
        };
        let mut comp = [0, 0, 0, one];
        let mut shift = 0u32;
        for (c, &n) in widths.iter().enumerate() {
            comp[c] = self.decode(field(raw, shift, n), n);
            shift += n;
        }
        self.dst_sel.map(|s| match s {
            1 => one,
            4..=7 => comp[usize::from(s - 4)],
            _ => 0,
        })
    }

    /// Component bits `x` of width `n` as a register value.
    fn decode(self, x: u64, n: u32) -> u32 {
        let max = ((1u64 << n) - 1) as f64;
        let signed = ((x << (64 - n)) as i64 >> (64 - n)) as f64;
        let f = |v: f64| (v as f32).to_bits();
        match self.num {
            UNORM => f(x as f64 / max),
            SNORM => f((signed / (((1u64 << (n - 1)) - 1) as f64)).max(-1.0)),
            USCALED => f(x as f64),
            SSCALED => f(signed),
            UINT => x as u32,
            SINT => signed as i64 as u32,
            FLOAT => match n {
                32 => x as u32,
                16 => f16_bits_to_f32(x as u16).to_bits(),
                11 | 10 => small_float(x as u32, n - 5).to_bits(),
                _ => 0,
            },
            _ => 0,
        }
    }

    /// Register value `v` (f32 bits or an integer) as component bits of width `n`.
    fn encode(self, v: u32, n: u32) -> u64 {
        let x = f64::from(f32::from_bits(v));
        let x = if x.is_nan() { 0.0 } else { x };
        let umax = (1u64 << n) - 1;
        let smax = (umax >> 1) as i64;
        let mask = |i: i64| i as u64 & umax;
        match self.num {
            UNORM => (x.clamp(0.0, 1.0) * umax as f64).round_ties_even() as u64,
            SNORM => mask((x.clamp(-1.0, 1.0) * smax as f64).round_ties_even() as i64),
            USCALED => (x.trunc().clamp(0.0, umax as f64)) as u64,
            SSCALED => mask(x.trunc().clamp(-(smax as f64) - 1.0, smax as f64) as i64),
            UINT => u64::from(v).min(umax),
            SINT => mask(i64::from(v as i32).clamp(-smax - 1, smax)),
            FLOAT => match n {
                32 => u64::from(v),
                16 => u64::from(f32_to_f16_bits(f32::from_bits(v))),
                11 | 10 => u64::from(to_small_float(f32::from_bits(v), n - 5)),
                _ => 0,
            },
            _ => 0,
        }
    }

    /// The bytes of an element holding `vals` (the instruction's first `count` channels,
    /// X first) and which of them to write.
    pub(super) fn store(self, vals: &[u32], count: usize) -> ([u8; 16], [bool; 16]) {
        let mut bytes = [0u8; 16];
        let mut write = [false; 16];
        let Some((size, widths)) = self.layout() else {
            return (bytes, write);
        };
        let packed = widths.iter().any(|n| n % 8 != 0);
        let mut word = 0u128;
        let mut shift = 0u32;
        for (c, &n) in widths.iter().enumerate() {
            if c < count {
                word |= u128::from(self.encode(vals[c], n)) << shift;
                if !packed {
                    for b in shift / 8..(shift + n) / 8 {
                        write[b as usize] = true;
                    }
                }
            }
            shift += n;
        }
        bytes.copy_from_slice(&word.to_le_bytes());
        if packed {
            write[..size].fill(true);
        }
        (bytes, write)
    }

    /// A channel as d16 bits (f16 for the float-valued formats, else the low half).
    pub(super) fn narrow_d16(self, v: u32) -> u16 {
        if self.float_valued() {
            f32_to_f16_bits(f32::from_bits(v))
        } else {
            v as u16
        }
    }

    /// d16 bits as a channel (the inverse of [`Self::narrow_d16`]; SINT sign-extends).
    pub(super) fn widen_d16(self, h: u16) -> u32 {
        match self.num {
            UINT => u32::from(h),
            SINT => h as i16 as i32 as u32,
            _ => f16_bits_to_f32(h).to_bits(),
        }
    }
}

/// Bits `shift..shift + n` of the little-endian `raw`.
fn field(raw: &[u8], shift: u32, n: u32) -> u64 {
    let mut word = [0u8; 16];
    word[..raw.len().min(16)].copy_from_slice(&raw[..raw.len().min(16)]);
    let w = u128::from_le_bytes(word);
    (w >> shift) as u64 & ((1u64 << n) - 1)
}

/// An unsigned float of a 5-bit exponent (bias 15) and `m` fraction bits.
fn small_float(x: u32, m: u32) -> f32 {
    let (e, f) = (x >> m & 31, x & ((1 << m) - 1));
    let frac = f64::from(f) / f64::from(1u32 << m);
    match e {
        0 => (frac * 2f64.powi(-14)) as f32,
        31 if f == 0 => f32::INFINITY,
        31 => f32::NAN,
        e => ((1.0 + frac) * 2f64.powi(e as i32 - 15)) as f32,
    }
}

/// An f32 as an unsigned float of a 5-bit exponent and `m` fraction bits, rounded to
/// nearest even; negatives become 0, finite values beyond the largest become it.
fn to_small_float(v: f32, m: u32) -> u32 {
    if v.is_nan() {
        return 31 << m | 1 << (m - 1);
    }
    if v == f32::INFINITY {
        return 31 << m;
    }
    if v <= 0.0 {
        return 0;
    }
    let x = f64::from(v);
    let max = 30 << m | ((1 << m) - 1);
    // The quantum: 2^(e − m) in the binade of x, 2^(−14 − m) for the denormals.
    let e = (x.log2().floor() as i32).max(-14);
    let q = 2f64.powi(e - m as i32);
    let n = (x / q).round_ties_even();
    let r = n * q;
    if r >= small_float(max, m) as f64 * (1.0 + f64::EPSILON) || e > 15 {
        return max;
    }
    // Re-encode the rounded value (it may have moved into the next binade).
    let e = (r.log2().floor() as i32).max(-14);
    if r < 2f64.powi(-14) {
        return (r / 2f64.powi(-14 - m as i32)) as u32;
    }
    let frac = ((r / 2f64.powi(e) - 1.0) * f64::from(1u32 << m)) as u32;
    ((e + 15) as u32) << m | frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_floats_round_trip_every_finite_value() {
        for m in [6, 5] {
            for x in 0..(31 << m) {
                let f = small_float(x, m);
                assert_eq!(to_small_float(f, m), x, "m {m}: {x:#x} = {f}");
            }
        }
        assert_eq!(small_float(15 << 6, 6), 1.0);
        assert_eq!(to_small_float(1e9, 6), 30 << 6 | 63);
        assert_eq!(to_small_float(-2.0, 5), 0);
    }

    #[test]
    fn unorm_snorm_and_float_components_convert_both_ways() {
        // 8_8_8_8 UNORM, identity DST_SEL (X Y Z W = 4 5 6 7).
        let sel = 4 | 5 << 3 | 6 << 6 | 7 << 9;
        let f = Format::from_word3(sel | UNORM as u32 | 10 << 15);
        let got = f.load(&[0, 255, 51, 128]);
        assert_eq!(got.map(f32::from_bits), [0.0, 1.0, 0.2, 128.0 / 255.0]);
        let (bytes, write) = f.store(&[0.5f32.to_bits(), 2.0f32.to_bits()], 2);
        assert_eq!(
            (&bytes[..2], &write[..4]),
            (&[128u8, 255][..], &[true, true, false, false][..])
        );
        // 16_16 SNORM: -32768 clamps to -1.
        let f = Format::from_word3(sel | u32::from(SNORM) << 12 | 5 << 15);
        let got = f.load(&[0x00, 0x80, 0xff, 0x7f]);
        assert_eq!(got.map(f32::from_bits), [-1.0, 1.0, 0.0, 1.0]);
        // 10_11_11 FLOAT: X = 1.0 (uf11 15 << 6), Y = 2.0, Z = 0.5 (uf10 14 << 5).
        let f = Format::from_word3(sel | u32::from(FLOAT) << 12 | 6 << 15);
        let raw = (15u32 << 6 | (16 << 6) << 11 | (14 << 5) << 22).to_le_bytes();
        assert_eq!(f.load(&raw).map(f32::from_bits), [1.0, 2.0, 0.5, 1.0]);
        // DST_SEL: W X 0 1 (UINT 32: one component; W defaults to 1).
        let f = Format::from_word3(7 | 4 << 3 | 1 << 9 | u32::from(UINT) << 12 | 4 << 15);
        assert_eq!(f.load(&7u32.to_le_bytes()), [1, 7, 0, 1]);
    }
}
