//! The vector ALU against LLVM-assembled snippets: each test runs instructions on one wave
//! whose lanes hold different values, and compares every lane with the "AMD Instinct MI200
//! ISA" guide's definition computed in Rust (IEEE operations bit for bit against Rust's own
//! f32/f64 arithmetic, which is IEEE 754 round-to-nearest-even).

mod common;

use common::run_ok;
use kfd_gfx9::exec::{ExecError, Wave};

/// MODE with every denormal kept (FP_DENORM = 0xf), DX10 clamp and IEEE mode on: a compute
/// kernel's default under HIP on gfx90a (`exec::mode_from_rsrc1` of clang's descriptor).
const MODE_IEEE: u32 = 0x3f0;

fn set(w: &mut Wave, v: usize, vals: impl IntoIterator<Item = u32>) {
    for (l, x) in vals.into_iter().enumerate().take(64) {
        w.vgpr[v][l] = x;
    }
}

fn lane_ids(w: &mut Wave, v: usize) {
    set(w, v, 0..64);
}

/// 64 f32 bit patterns: zeros, denormals, normals, extremes, infinities, NaNs.
fn f32_values() -> Vec<u32> {
    let mut v = vec![
        0x0000_0000,
        0x8000_0000,
        0x3f80_0000,
        0xbf80_0000,
        0x0000_0001,
        0x8000_0001,
        0x007f_ffff,
        0x0080_0000,
        0x7f7f_ffff,
        0xff7f_ffff,
        0x7f80_0000,
        0xff80_0000,
        0x7fc0_0000,
        0x4040_0000,
        0x3dcc_cccd,
        0x4120_0000,
        0xc2f6_e979,
        0x3eaa_aaab,
        0x5f00_0000,
        0x2000_0000,
        0x0040_0000,
        0x3f7f_ffff,
        0x4b80_0000,
        0xcb00_0001,
    ];
    let mut x = 0x1234_5678u32;
    while v.len() < 64 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        // Keep mostly finite normals with a spread of exponents.
        v.push(x & 0xbfff_ffff | 0x0800_0000);
    }
    v
}

fn same32(got: u32, want: f32) -> bool {
    let g = f32::from_bits(got);
    (g.is_nan() && want.is_nan()) || got == want.to_bits()
}

fn same64(got: u64, want: f64) -> bool {
    let g = f64::from_bits(got);
    (g.is_nan() && want.is_nan()) || got == want.to_bits()
}

fn pair(w: &Wave, v: usize, l: usize) -> u64 {
    u64::from(w.vgpr[v][l]) | u64::from(w.vgpr[v + 1][l]) << 32
}

#[test]
fn carry_chains_add_and_subtract_64_bit_values_through_vcc_and_sgpr_pairs() {
    let a: Vec<u64> = (0..64u64)
        .map(|l| (u64::MAX - l * 0x1_0000_0001).wrapping_add(7))
        .collect();
    let b: Vec<u64> = (0..64u64)
        .map(|l| l * 0x8000_0001 + 9 + (l << 40))
        .collect();
    let Some(r) = run_ok(
        "v_add_co_u32_e32 v4, vcc, v0, v2\n\
         v_addc_co_u32_e32 v5, vcc, v1, v3, vcc\n\
         s_mov_b64 s[10:11], vcc\n\
         v_sub_co_u32_e64 v6, s[4:5], v0, v2\n\
         v_subb_co_u32_e64 v7, s[6:7], v1, v3, s[4:5]\n\
         v_subrev_co_u32_e32 v8, vcc, v0, v2\n\
         v_subbrev_co_u32_e32 v9, vcc, v1, v3, vcc\n\
         s_endpgm",
        |w, _| {
            set(w, 0, a.iter().map(|x| *x as u32));
            set(w, 1, a.iter().map(|x| (x >> 32) as u32));
            set(w, 2, b.iter().map(|x| *x as u32));
            set(w, 3, b.iter().map(|x| (x >> 32) as u32));
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let (mut carry, mut borrow, mut rborrow) = (0u64, 0u64, 0u64);
    for l in 0..64 {
        let (sum, c) = a[l].overflowing_add(b[l]);
        let (diff, bo) = a[l].overflowing_sub(b[l]);
        let (rdiff, rbo) = b[l].overflowing_sub(a[l]);
        carry |= u64::from(c) << l;
        borrow |= u64::from(bo) << l;
        rborrow |= u64::from(rbo) << l;
        assert_eq!(pair(w, 4, l), sum, "lane {l} sum");
        assert_eq!(pair(w, 6, l), diff, "lane {l} diff");
        assert_eq!(pair(w, 8, l), rdiff, "lane {l} reverse diff");
    }
    let sreg = |n: usize| u64::from(w.sgpr[n]) | u64::from(w.sgpr[n + 1]) << 32;
    assert_eq!(sreg(10), carry, "carry-out of the high halves");
    assert_eq!(sreg(6), borrow, "borrow-out to an SGPR pair");
    assert_eq!(w.vcc, rborrow);
    assert_ne!(carry, 0);
    assert_ne!(carry, u64::MAX);
}

#[test]
fn exec_masked_lanes_keep_their_values_and_their_flag_bits_are_zero() {
    let Some(r) = run_ok(
        "v_add_co_u32_e32 v1, vcc, -1, v0\n\
         v_cmp_gt_u32_e64 s[2:3], v0, 0\n\
         s_endpgm",
        |w, _| {
            set(w, 0, (0..64).map(|l| l * 3));
            set(w, 1, [0xdead_beef; 64]);
            w.exec = 0x0f0f_0000_ffff_0001;
        },
    ) else {
        return;
    };
    let w = &r.wave;
    for l in 0..64 {
        let on = 0x0f0f_0000_ffff_0001u64 >> l & 1 == 1;
        let want = if on {
            (l as u32 * 3).wrapping_sub(1)
        } else {
            0xdead_beef
        };
        assert_eq!(w.vgpr[1][l], want, "lane {l}");
    }
    // Carry where v0 != 0 (x + 0xffffffff carries unless x = 0), only in active lanes.
    assert_eq!(w.vcc, 0x0f0f_0000_ffff_0000);
    let cmp = u64::from(w.sgpr[2]) | u64::from(w.sgpr[3]) << 32;
    assert_eq!(cmp, 0x0f0f_0000_ffff_0000);
}

#[test]
fn integer_multiplies_and_multiply_adds() {
    let a: Vec<u32> = (0..64u32)
        .map(|l| 0x9e37_79b9u32.wrapping_mul(l + 1))
        .collect();
    let b: Vec<u32> = (0..64u32)
        .map(|l| 0x7f4a_7c15u32.wrapping_mul(l + 3) ^ l)
        .collect();
    let Some(r) = run_ok(
        "v_mul_lo_u32 v2, v0, v1\n\
         v_mul_hi_u32 v3, v0, v1\n\
         v_mul_hi_i32 v4, v0, v1\n\
         v_mul_u32_u24_e32 v5, v0, v1\n\
         v_mul_i32_i24_e32 v6, v0, v1\n\
         v_mul_hi_u32_u24_e32 v7, v0, v1\n\
         v_mad_u32_u24 v8, v0, v1, v0\n\
         v_mad_i32_i24 v9, v0, v1, v1\n\
         v_mad_u64_u32 v[10:11], s[4:5], v0, v1, v[0:1]\n\
         v_mad_i64_i32 v[12:13], s[6:7], v0, v1, v[0:1]\n\
         v_mul_hi_i32_i24_e32 v14, v0, v1\n\
         s_endpgm",
        |w, _| {
            set(w, 0, a.clone());
            set(w, 1, b.clone());
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let s24 = |x: u32| i64::from((x << 8) as i32 >> 8);
    let mut mad_carry = 0u64;
    for l in 0..64 {
        let (x, y) = (a[l], b[l]);
        let p = u64::from(x) * u64::from(y);
        let sp = i64::from(x as i32) * i64::from(y as i32);
        assert_eq!(w.vgpr[2][l], p as u32);
        assert_eq!(w.vgpr[3][l], (p >> 32) as u32);
        assert_eq!(w.vgpr[4][l], (sp >> 32) as u32);
        let p24 = u64::from(x & 0xff_ffff) * u64::from(y & 0xff_ffff);
        assert_eq!(w.vgpr[5][l], p24 as u32);
        assert_eq!(w.vgpr[6][l], (s24(x) * s24(y)) as u32);
        assert_eq!(w.vgpr[7][l], (p24 >> 32) as u32);
        assert_eq!(w.vgpr[8][l], (p24 as u32).wrapping_add(x));
        assert_eq!(w.vgpr[9][l], ((s24(x) * s24(y)) as u32).wrapping_add(y));
        assert_eq!(w.vgpr[14][l], ((s24(x) * s24(y)) >> 32) as u32);
        // v[0:1] as the 64-bit addend: a in the low half, b in the high half.
        let c = u64::from(x) | u64::from(y) << 32;
        let (m, carry) = p.overflowing_add(c);
        assert_eq!(pair(w, 10, l), m, "lane {l}");
        mad_carry |= u64::from(carry) << l;
        let sm = (sp as i128 + i128::from(c as i64)) as u64;
        assert_eq!(pair(w, 12, l), sm, "lane {l} signed");
    }
    assert_eq!(u64::from(w.sgpr[4]) | u64::from(w.sgpr[5]) << 32, mad_carry);
}

#[test]
fn shifts_bitfields_and_byte_permutes() {
    let a: Vec<u32> = (0..64u32)
        .map(|l| 0x8765_4321u32.rotate_left(l) ^ (l * 0x1111))
        .collect();
    let b: Vec<u32> = (0..64u32).map(|l| l * 7 + 1).collect();
    let c: Vec<u32> = (0..64u32)
        .map(|l| 0x0c0a_0805u32.wrapping_add(l * 0x0101_0101) & 0x0f0f_0f0f)
        .collect();
    let Some(r) = run_ok(
        "v_lshlrev_b32_e32 v3, v1, v0\n\
         v_lshrrev_b32_e32 v4, v1, v0\n\
         v_ashrrev_i32_e32 v5, v1, v0\n\
         v_bfe_u32 v6, v0, v1, 7\n\
         v_bfe_i32 v7, v0, v1, 9\n\
         v_bfi_b32 v8, v2, v0, v1\n\
         v_bfm_b32 v9, v1, 3\n\
         v_alignbit_b32 v10, v0, v1, v1\n\
         v_alignbyte_b32 v11, v0, v1, v1\n\
         v_perm_b32 v12, v0, v1, v2\n\
         v_bcnt_u32_b32 v13, v0, v1\n\
         v_ffbh_u32_e32 v14, v1\n\
         v_ffbl_b32_e32 v15, v0\n\
         v_ffbh_i32_e32 v16, v0\n\
         v_lshlrev_b64 v[18:19], v1, v[0:1]\n\
         v_ashrrev_i64 v[20:21], v1, v[0:1]\n\
         v_lshl_add_u32 v22, v0, 3, v1\n\
         v_add_lshl_u32 v23, v0, v1, 2\n\
         v_add3_u32 v24, v0, v1, v2\n\
         v_lshl_or_b32 v25, v0, 4, v1\n\
         v_and_or_b32 v26, v0, v1, v2\n\
         v_or3_b32 v27, v0, v1, v2\n\
         v_xad_u32 v28, v0, v1, v2\n\
         v_bfrev_b32_e32 v29, v0\n\
         v_not_b32_e32 v30, v0\n\
         v_xnor_b32_e32 v31, v0, v1\n\
         s_endpgm",
        |w, _| {
            set(w, 0, a.clone());
            set(w, 1, b.clone());
            set(w, 2, c.clone());
        },
    ) else {
        return;
    };
    let w = &r.wave;
    for l in 0..64 {
        let (x, y, z) = (a[l], b[l], c[l]);
        let v = |n: usize| w.vgpr[n][l];
        assert_eq!(v(3), x << (y & 31), "lane {l}");
        assert_eq!(v(4), x >> (y & 31));
        assert_eq!(v(5), ((x as i32) >> (y & 31)) as u32);
        assert_eq!(v(6), (x >> (y & 31)) & 0x7f);
        assert_eq!(
            v(7),
            ((((x >> (y & 31)) & 0x1ff) << 23) as i32 >> 23) as u32
        );
        assert_eq!(v(8), (z & x) | (!z & y));
        assert_eq!(v(9), ((1u32 << (y & 31)) - 1) << 3);
        let cat = u64::from(x) << 32 | u64::from(y);
        assert_eq!(v(10), (cat >> (y & 31)) as u32);
        assert_eq!(v(11), (cat >> (8 * (y & 3))) as u32);
        let perm_data = u64::from(x) << 32 | u64::from(y);
        let sel = |s: u32| -> u32 {
            match s {
                0..=7 => (perm_data >> (8 * s)) as u32 & 0xff,
                8 => 0xff * (perm_data >> 15 & 1) as u32,
                9 => 0xff * (perm_data >> 31 & 1) as u32,
                10 => 0xff * (perm_data >> 47 & 1) as u32,
                11 => 0xff * (perm_data >> 63 & 1) as u32,
                12 => 0,
                _ => 0xff,
            }
        };
        let perm: u32 = (0..4).map(|k| sel(z >> (8 * k) & 0xff) << (8 * k)).sum();
        assert_eq!(v(12), perm, "perm lane {l} sel {z:#x}");
        assert_eq!(v(13), x.count_ones() + y);
        assert_eq!(v(14), y.leading_zeros());
        assert_eq!(v(15), if x == 0 { u32::MAX } else { x.trailing_zeros() });
        let xi = x as i32;
        let ffbh_i = if xi == 0 || xi == -1 {
            u32::MAX
        } else {
            (if xi < 0 { !xi } else { xi }).leading_zeros() - 1
        };
        assert_eq!(v(16), ffbh_i);
        let x64 = u64::from(x) | u64::from(y) << 32;
        assert_eq!(pair(w, 18, l), x64 << (y & 63));
        assert_eq!(pair(w, 20, l), ((x64 as i64) >> (y & 63)) as u64);
        assert_eq!(v(22), (x << 3).wrapping_add(y));
        assert_eq!(v(23), x.wrapping_add(y) << 2);
        assert_eq!(v(24), x.wrapping_add(y).wrapping_add(z));
        assert_eq!(v(25), (x << 4) | y);
        assert_eq!(v(26), (x & y) | z);
        assert_eq!(v(27), x | y | z);
        assert_eq!(v(28), (x ^ y).wrapping_add(z));
        assert_eq!(v(29), x.reverse_bits());
        assert_eq!(v(30), !x);
        assert_eq!(v(31), !(x ^ y));
    }
}

#[test]
fn min_max_med3_and_cndmask() {
    let a: Vec<u32> = (0..64u32)
        .map(|l| l.wrapping_mul(0x0410_4105).wrapping_sub(0x4000_0000))
        .collect();
    let b: Vec<u32> = (0..64u32).map(|l| l.wrapping_mul(0x0901_2345)).collect();
    let c: Vec<u32> = (0..64u32)
        .map(|l| 0x8000_0000u32.wrapping_add(l * 0x0300_0001))
        .collect();
    let Some(r) = run_ok(
        "v_min_i32_e32 v3, v0, v1\n\
         v_max_i32_e32 v4, v0, v1\n\
         v_min_u32_e32 v5, v0, v1\n\
         v_max_u32_e32 v6, v0, v1\n\
         v_med3_i32 v7, v0, v1, v2\n\
         v_med3_u32 v8, v0, v1, v2\n\
         v_min3_i32 v9, v0, v1, v2\n\
         v_max3_u32 v10, v0, v1, v2\n\
         v_cndmask_b32_e32 v11, v0, v1, vcc\n\
         v_cndmask_b32_e64 v12, v1, 7, s[4:5]\n\
         s_endpgm",
        |w, _| {
            set(w, 0, a.clone());
            set(w, 1, b.clone());
            set(w, 2, c.clone());
            w.vcc = 0x0123_4567_89ab_cdef;
            w.sgpr[4] = 0xf0f0_f0f0;
            w.sgpr[5] = 0x0000_ffff;
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let mask2 = 0x0000_ffff_f0f0_f0f0u64;
    for l in 0..64 {
        let (x, y, z) = (a[l], b[l], c[l]);
        let (xi, yi, zi) = (x as i32, y as i32, z as i32);
        let v = |n: usize| w.vgpr[n][l];
        assert_eq!(v(3), xi.min(yi) as u32);
        assert_eq!(v(4), xi.max(yi) as u32);
        assert_eq!(v(5), x.min(y));
        assert_eq!(v(6), x.max(y));
        let mut si = [xi, yi, zi];
        si.sort();
        assert_eq!(v(7), si[1] as u32, "med3_i32 lane {l}");
        let mut su = [x, y, z];
        su.sort();
        assert_eq!(v(8), su[1]);
        assert_eq!(v(9), si[0] as u32);
        assert_eq!(v(10), su[2]);
        let vcc_bit = 0x0123_4567_89ab_cdefu64 >> l & 1 == 1;
        assert_eq!(v(11), if vcc_bit { y } else { x });
        assert_eq!(v(12), if mask2 >> l & 1 == 1 { 7 } else { y });
    }
}

#[test]
fn lane_ids_come_from_mbcnt_and_cross_lane_moves_read_and_write_one_lane() {
    let Some(r) = run_ok(
        "v_mbcnt_lo_u32_b32 v1, -1, 0\n\
         v_mbcnt_hi_u32_b32 v1, -1, v1\n\
         v_mbcnt_lo_u32_b32 v2, s4, 60\n\
         v_mbcnt_hi_u32_b32 v2, s5, v2\n\
         s_mov_b32 s9, 37\n\
         v_readlane_b32 s6, v0, s9\n\
         v_readfirstlane_b32 s7, v0\n\
         s_mov_b32 s8, 0x5a5a\n\
         v_writelane_b32 v3, s8, 63\n\
         s_endpgm",
        |w, _| {
            set(w, 0, (0..64).map(|l| 1000 + l));
            w.sgpr[4] = 0xaaaa_5555;
            w.sgpr[5] = 0x0f0f_f0f0;
            w.exec = !0b111u64; // lanes 0..3 off: readfirstlane reads lane 3
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let mask = 0x0f0f_f0f0_aaaa_5555u64;
    for l in 3..64 {
        assert_eq!(w.vgpr[1][l], l as u32, "lane id in lane {l}");
        let below = (mask & ((1u64 << l) - 1)).count_ones();
        assert_eq!(w.vgpr[2][l], 60 + below, "mbcnt lane {l}");
    }
    assert_eq!(w.vgpr[1][0], 0, "lanes outside EXEC are not written");
    assert_eq!(w.sgpr[6], 1037);
    assert_eq!(w.sgpr[7], 1003);
    assert_eq!(w.vgpr[3][63], 0x5a5a);
    assert!(w.vgpr[3][..63].iter().all(|&v| v == 0));
}

/// Computes `op` on every pair from [`f32_values`] (a against a rotated copy) and returns
/// (a, b, result) per lane.
fn f32_binary(asm_op: &str) -> Option<Vec<(f32, f32, u32)>> {
    let a = f32_values();
    let mut b = a.clone();
    b.rotate_left(5);
    let asm = format!("{asm_op}\ns_endpgm");
    let r = run_ok(&asm, |w, _| {
        w.hwreg[1] = MODE_IEEE;
        set(w, 0, a.clone());
        set(w, 1, b.clone());
    })?;
    Some(
        (0..64)
            .map(|l| {
                (
                    f32::from_bits(a[l]),
                    f32::from_bits(b[l]),
                    r.wave.vgpr[2][l],
                )
            })
            .collect(),
    )
}

#[test]
fn f32_arithmetic_is_ieee_exact_including_denormals_infinities_and_nans() {
    type Op = fn(f32, f32) -> f32;
    let cases: [(&str, Op); 5] = [
        ("v_add_f32_e32 v2, v0, v1", |a, b| a + b),
        ("v_sub_f32_e32 v2, v0, v1", |a, b| a - b),
        ("v_subrev_f32_e32 v2, v0, v1", |a, b| b - a),
        ("v_mul_f32_e32 v2, v0, v1", |a, b| a * b),
        ("v_fma_f32 v2, v0, v1, v0", |a, b| a.mul_add(b, a)),
    ];
    for (asm, f) in cases {
        let Some(res) = f32_binary(asm) else { return };
        for (l, (a, b, got)) in res.into_iter().enumerate() {
            assert!(
                same32(got, f(a, b)),
                "{asm}: lane {l}: {a:e} {b:e} gave {:e} ({got:#x}), want {:e}",
                f32::from_bits(got),
                f(a, b)
            );
        }
    }
}

#[test]
fn f32_min_max_follow_the_guide_nan_and_signed_zero_rules() {
    for (asm, max) in [
        ("v_max_f32_e32 v2, v0, v1", true),
        ("v_min_f32_e32 v2, v0, v1", false),
    ] {
        let Some(res) = f32_binary(asm) else { return };
        for (l, (a, b, got)) in res.into_iter().enumerate() {
            let want = if a.is_nan() {
                b
            } else if b.is_nan() {
                a
            } else if a == b {
                // -0 orders below +0.
                if max == a.is_sign_negative() { b } else { a }
            } else if (a > b) == max {
                a
            } else {
                b
            };
            assert!(
                same32(got, want),
                "{asm} lane {l}: {a:e} {b:e} -> {:e}",
                f32::from_bits(got)
            );
        }
    }
}

#[test]
fn f32_denormals_flush_when_mode_says_so() {
    // MODE 0: f32 denormal inputs and outputs are flushed to zero (sign kept).
    let Some(r) = run_ok(
        "v_add_f32_e32 v2, v0, v1\n\
         v_mul_f32_e32 v3, v0, v1\n\
         v_mov_b32_e32 v4, v0\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = 0;
            set(w, 0, [0x0000_0005, 0x8040_0000, 0x0080_0000, 0x3f80_0000]);
            set(w, 1, [0x0000_0003, 0x8000_0000, 0x3f00_0000, 0x0000_0001]);
        },
    ) else {
        return;
    };
    let v = &r.wave.vgpr;
    assert_eq!(v[2][0], 0x0000_0000, "denormal + denormal flushes");
    assert_eq!(v[2][1], 0x8000_0000, "-denormal + -0 is -0");
    // min normal * 0.5 is a denormal result: flushed.
    assert_eq!(v[3][2], 0x0000_0000);
    assert_eq!(v[2][3], 0x3f80_0000, "1 + flushed denormal");
    assert_eq!(v[4][0], 0x0000_0005, "moves do not flush");
}

#[test]
fn f32_division_as_clang_emits_it_is_correctly_rounded() {
    // clang-19 -O2 -cl-fp32-correctly-rounded-divide-sqrt, f32 denormals on (HIP's default).
    let asm = "v_div_scale_f32 v3, s[4:5], v1, v1, v0\n\
               v_rcp_f32_e32 v5, v3\n\
               v_div_scale_f32 v7, vcc, v0, v1, v0\n\
               v_fma_f32 v8, -v3, v5, 1.0\n\
               v_fmac_f32_e32 v5, v8, v5\n\
               v_mul_f32_e32 v8, v7, v5\n\
               v_fma_f32 v9, -v3, v8, v7\n\
               v_fmac_f32_e32 v8, v9, v5\n\
               v_fma_f32 v3, -v3, v8, v7\n\
               v_div_fmas_f32 v3, v3, v5, v8\n\
               v_div_fixup_f32 v2, v3, v1, v0\n\
               s_endpgm";
    let mut a = f32_values();
    let mut b = a.clone();
    b.rotate_left(7);
    // Quotients near the largest float, tiny numerators and denormal quotients.
    a[60] = 0x7f00_0000;
    b[60] = 0x0080_0000;
    a[61] = 0x0000_1000;
    b[61] = 0x4000_0000;
    a[62] = 0x0080_0000;
    b[62] = 0x4f80_0000;
    a[63] = 0x7f7f_ffff;
    b[63] = 0x3f00_0000;
    let Some(r) = run_ok(asm, |w, _| {
        w.hwreg[1] = MODE_IEEE;
        set(w, 0, a.clone());
        set(w, 1, b.clone());
    }) else {
        return;
    };
    for l in 0..64 {
        let (x, y) = (f32::from_bits(a[l]), f32::from_bits(b[l]));
        let got = r.wave.vgpr[2][l];
        assert!(
            same32(got, x / y),
            "lane {l}: {x:e} / {y:e} gave {:e} ({got:#x}), want {:e} ({:#x})",
            f32::from_bits(got),
            x / y,
            (x / y).to_bits()
        );
    }
}

#[test]
fn f64_division_as_clang_emits_it_is_correctly_rounded() {
    let asm = "v_div_scale_f64 v[6:7], s[4:5], v[4:5], v[4:5], v[2:3]\n\
               v_rcp_f64_e32 v[8:9], v[6:7]\n\
               v_div_scale_f64 v[10:11], vcc, v[2:3], v[4:5], v[2:3]\n\
               v_fma_f64 v[12:13], -v[6:7], v[8:9], 1.0\n\
               v_fmac_f64_e32 v[8:9], v[8:9], v[12:13]\n\
               v_fma_f64 v[12:13], -v[6:7], v[8:9], 1.0\n\
               v_fmac_f64_e32 v[8:9], v[8:9], v[12:13]\n\
               v_mul_f64 v[12:13], v[10:11], v[8:9]\n\
               v_fma_f64 v[6:7], -v[6:7], v[12:13], v[10:11]\n\
               v_div_fmas_f64 v[6:7], v[6:7], v[8:9], v[12:13]\n\
               v_div_fixup_f64 v[0:1], v[6:7], v[4:5], v[2:3]\n\
               s_endpgm";
    let mut x = 0x0123_4567_89ab_cdefu64;
    let mut vals: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -3.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-310,
        f64::MAX,
        f64::MIN_POSITIVE,
        0.1,
        7.0,
        1e300,
        1e-300,
    ];
    while vals.len() < 64 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        vals.push(f64::from_bits(
            x & 0xbfff_ffff_ffff_ffff | 0x1000_0000_0000_0000,
        ));
    }
    let mut den = vals.clone();
    den.rotate_left(3);
    let Some(r) = run_ok(asm, |w, _| {
        w.hwreg[1] = MODE_IEEE;
        set(w, 2, vals.iter().map(|v| v.to_bits() as u32));
        set(w, 3, vals.iter().map(|v| (v.to_bits() >> 32) as u32));
        set(w, 4, den.iter().map(|v| v.to_bits() as u32));
        set(w, 5, den.iter().map(|v| (v.to_bits() >> 32) as u32));
    }) else {
        return;
    };
    for l in 0..64 {
        let want = vals[l] / den[l];
        let got = pair(&r.wave, 0, l);
        assert!(
            same64(got, want),
            "lane {l}: {} / {} gave {} want {want}",
            vals[l],
            den[l],
            f64::from_bits(got)
        );
    }
}

/// The f64 division sequence of [`f64_division_as_clang_emits_it_is_correctly_rounded`].
const F64_DIV: &str = "v_div_scale_f64 v[6:7], s[4:5], v[4:5], v[4:5], v[2:3]\n\
               v_rcp_f64_e32 v[8:9], v[6:7]\n\
               v_div_scale_f64 v[10:11], vcc, v[2:3], v[4:5], v[2:3]\n\
               v_fma_f64 v[12:13], -v[6:7], v[8:9], 1.0\n\
               v_fmac_f64_e32 v[8:9], v[8:9], v[12:13]\n\
               v_fma_f64 v[12:13], -v[6:7], v[8:9], 1.0\n\
               v_fmac_f64_e32 v[8:9], v[8:9], v[12:13]\n\
               v_mul_f64 v[12:13], v[10:11], v[8:9]\n\
               v_fma_f64 v[6:7], -v[6:7], v[12:13], v[10:11]\n\
               v_div_fmas_f64 v[6:7], v[6:7], v[8:9], v[12:13]\n\
               v_div_fixup_f64 v[0:1], v[6:7], v[4:5], v[2:3]\n\
               s_endpgm";

#[test]
fn f64_division_to_a_denormal_quotient_rounds_once() {
    // Found by the kernel corpus (tests/corpus.rs, dspecial): -2.2250738585072e-308 / 1.5
    // came out one ULP off. v_div_scale scales the numerator up by 2^128 and
    // v_div_fmas's FMA scales the result back down by 2^-128 before it is rounded (the
    // guide's pseudo-code: one FMA, then the scale): rounding the FMA to f64 first and then
    // again to the denormal grid is a double rounding.
    let mut x = 0x5eed_u64;
    let mut num = vec![
        -2.2250738585072e-308,
        2.2250738585072014e-308,
        1e-310,
        -4.9e-324,
    ];
    let mut den = vec![1.5, 1.5, 3.0, 2.0];
    while num.len() < 64 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        // Numerators near the smallest normal, denominators in [1, 16): denormal quotients.
        num.push(
            f64::from_bits(x >> 12 & 0x001f_ffff_ffff_ffff) * if x & 1 == 1 { -1.0 } else { 1.0 },
        );
        den.push(1.0 + (x >> 40) as f64 / (1u64 << 20) as f64);
    }
    let Some(r) = run_ok(F64_DIV, |w, _| {
        w.hwreg[1] = MODE_IEEE;
        set(w, 2, num.iter().map(|v| v.to_bits() as u32));
        set(w, 3, num.iter().map(|v| (v.to_bits() >> 32) as u32));
        set(w, 4, den.iter().map(|v| v.to_bits() as u32));
        set(w, 5, den.iter().map(|v| (v.to_bits() >> 32) as u32));
    }) else {
        return;
    };
    for l in 0..64 {
        let want = num[l] / den[l];
        let got = pair(&r.wave, 0, l);
        assert!(
            same64(got, want),
            "lane {l}: {:e} / {} gave {:e} want {want:e}",
            num[l],
            den[l],
            f64::from_bits(got)
        );
    }
}

#[test]
fn f32_division_to_a_denormal_quotient_rounds_once() {
    // As the f64 case: the numerator scaled up by 2^64, the FMA's result scaled back down
    // before its one rounding.
    let asm = "v_div_scale_f32 v3, s[4:5], v1, v1, v0\n\
               v_rcp_f32_e32 v5, v3\n\
               v_div_scale_f32 v7, vcc, v0, v1, v0\n\
               v_fma_f32 v8, -v3, v5, 1.0\n\
               v_fmac_f32_e32 v5, v8, v5\n\
               v_mul_f32_e32 v8, v7, v5\n\
               v_fma_f32 v9, -v3, v8, v7\n\
               v_fmac_f32_e32 v8, v9, v5\n\
               v_fma_f32 v3, -v3, v8, v7\n\
               v_div_fmas_f32 v3, v3, v5, v8\n\
               v_div_fixup_f32 v2, v3, v1, v0\n\
               s_endpgm";
    let mut x = 0x5eed_u32;
    let mut num = vec![-1.1754942e-38f32, 1e-45, -3e-39];
    let mut den = vec![1.5f32, 2.0, 3.0];
    while num.len() < 64 {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        num.push(f32::from_bits(x & 0x80ff_ffff));
        den.push(1.0 + (x >> 12) as f32 / (1u32 << 20) as f32);
    }
    let Some(r) = run_ok(asm, |w, _| {
        w.hwreg[1] = MODE_IEEE;
        set(w, 0, num.iter().map(|v| v.to_bits()));
        set(w, 1, den.iter().map(|v| v.to_bits()));
    }) else {
        return;
    };
    for l in 0..64 {
        let want = num[l] / den[l];
        let got = r.wave.vgpr[2][l];
        assert!(
            same32(got, want),
            "lane {l}: {:e} / {} gave {:e} want {want:e}",
            num[l],
            den[l],
            f32::from_bits(got)
        );
    }
}

#[test]
fn f64_arithmetic_and_rounding_ops() {
    let vals: Vec<f64> = vec![
        2.5,
        -2.5,
        3.5,
        -0.5,
        1e-310,
        -1e-310,
        1.0 / 3.0,
        f64::MAX,
        -7.25,
        0.0,
        -0.0,
        1e16 + 1.0,
        f64::INFINITY,
        f64::NAN,
        123456.789,
        -0.999_999,
    ];
    let Some(r) = run_ok(
        "s_mov_b32 s30, -1030\n\
         v_add_f64 v[4:5], v[0:1], v[2:3]\n\
         v_mul_f64 v[6:7], v[0:1], v[2:3]\n\
         v_fma_f64 v[8:9], v[0:1], v[2:3], v[0:1]\n\
         v_trunc_f64_e32 v[10:11], v[0:1]\n\
         v_floor_f64_e32 v[12:13], v[0:1]\n\
         v_ceil_f64_e32 v[14:15], v[0:1]\n\
         v_rndne_f64_e32 v[16:17], v[0:1]\n\
         v_ldexp_f64 v[18:19], v[0:1], s30\n\
         v_frexp_mant_f64_e32 v[20:21], v[0:1]\n\
         v_frexp_exp_i32_f64_e32 v22, v[0:1]\n\
         v_fract_f64_e32 v[24:25], v[0:1]\n\
         v_cvt_i32_f64_e32 v26, v[0:1]\n\
         v_cvt_f32_f64_e32 v27, v[0:1]\n\
         v_cvt_f64_i32_e32 v[28:29], v26\n\
         v_max_f64 v[30:31], v[0:1], v[2:3]\n\
         v_sqrt_f64_e32 v[32:33], v[0:1]\n\
         v_add_f64 v[34:35], -v[0:1], |v[2:3]|\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            for l in 0..64 {
                let a = vals[l % vals.len()];
                let b = vals[(l / vals.len() + l + 3) % vals.len()];
                w.vgpr[0][l] = a.to_bits() as u32;
                w.vgpr[1][l] = (a.to_bits() >> 32) as u32;
                w.vgpr[2][l] = b.to_bits() as u32;
                w.vgpr[3][l] = (b.to_bits() >> 32) as u32;
            }
        },
    ) else {
        return;
    };
    let w = &r.wave;
    for l in 0..64 {
        let a = f64::from_bits(pair(w, 0, l));
        let b = f64::from_bits(pair(w, 2, l));
        let chk = |v: usize, want: f64, what: &str| {
            assert!(
                same64(pair(w, v, l), want),
                "{what} lane {l} a={a:e} b={b:e}: got {:e} want {want:e}",
                f64::from_bits(pair(w, v, l))
            );
        };
        chk(4, a + b, "add");
        chk(6, a * b, "mul");
        chk(8, a.mul_add(b, a), "fma");
        chk(10, a.trunc(), "trunc");
        chk(12, a.floor(), "floor");
        chk(14, a.ceil(), "ceil");
        chk(16, a.round_ties_even(), "rndne");
        chk(
            18,
            if a.is_finite() && a != 0.0 {
                a * f64::from_bits(1 << 44)
            } else {
                a
            },
            "ldexp",
        );
        if a.is_finite() && a != 0.0 {
            let (mut m, mut e) = (a, 0);
            while m.abs() >= 1.0 {
                m /= 2.0;
                e += 1;
            }
            while m.abs() < 0.5 {
                m *= 2.0;
                e -= 1;
            }
            chk(20, m, "frexp_mant");
            assert_eq!(w.vgpr[22][l] as i32, e, "frexp_exp of {a:e}");
        }
        if a.is_finite() {
            chk(
                24,
                (a - a.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff)),
                "fract",
            );
        }
        assert_eq!(w.vgpr[26][l], a as i32 as u32, "cvt_i32_f64 of {a:e}");
        assert!(same32(w.vgpr[27][l], a as f32), "cvt_f32_f64 of {a:e}");
        chk(28, f64::from(a as i32), "cvt_f64_i32");
        let max = if a.is_nan() {
            b
        } else if b.is_nan() {
            a
        } else {
            a.max(b)
        };
        if !(a == 0.0 && b == 0.0) {
            chk(30, max, "max");
        }
        chk(32, a.sqrt(), "sqrt");
        chk(34, -a + b.abs(), "neg/abs modifiers");
    }
}

#[test]
fn conversions_saturate_round_and_handle_nan() {
    let f: Vec<f32> = vec![
        0.0,
        -0.0,
        1.5,
        -1.5,
        2.5,
        3.5,
        -2.5,
        4e9,
        -4e9,
        3e9,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        65520.0,
        65519.0,
        6.1e-5,
        5.96e-8,
        2.9e-8,
        1e-10,
        0.333_333_34,
        -100000.0,
        255.6,
        0.499_999_97,
        1.000_976_6,
    ];
    let Some(r) = run_ok(
        "v_cvt_i32_f32_e32 v1, v0\n\
         v_cvt_u32_f32_e32 v2, v0\n\
         v_cvt_f16_f32_e32 v3, v0\n\
         v_cvt_f32_f16_e32 v4, v3\n\
         v_cvt_rpi_i32_f32_e32 v5, v0\n\
         v_cvt_flr_i32_f32_e32 v6, v0\n\
         v_cvt_pkrtz_f16_f32 v7, v0, v0\n\
         v_cvt_f32_i32_e32 v8, v10\n\
         v_cvt_f32_u32_e32 v9, v10\n\
         v_cvt_f32_ubyte2_e32 v11, v10\n\
         v_rndne_f32_e32 v12, v0\n\
         v_fract_f32_e32 v13, v0\n\
         v_frexp_exp_i32_f32_e32 v14, v0\n\
         v_cvt_f64_f32_e32 v[16:17], v0\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, (0..64).map(|l| f[l % f.len()].to_bits()));
            set(
                w,
                10,
                (0..64u32).map(|l| 0x8765_4321u32.wrapping_mul(l + 1)),
            );
        },
    ) else {
        return;
    };
    let w = &r.wave;
    for l in 0..64 {
        let x = f[l % f.len()];
        let v = |n: usize| w.vgpr[n][l];
        assert_eq!(v(1), x as i32 as u32, "cvt_i32 {x:e}");
        assert_eq!(v(2), x as u32, "cvt_u32 {x:e}");
        let want_h = f16_bits(x);
        assert_eq!(v(3), u32::from(want_h), "cvt_f16 {x:e}");
        assert!(same32(v(4), f16_value(want_h)), "cvt_f32_f16 {x:e}");
        assert_eq!(v(5), (x + 0.5).floor() as i32 as u32, "rpi {x:e}");
        assert_eq!(v(6), x.floor() as i32 as u32, "flr {x:e}");
        let rtz = f16_bits_rtz(x);
        assert_eq!(v(7), u32::from(rtz) | u32::from(rtz) << 16, "pkrtz {x:e}");
        let i = w.vgpr[10][l];
        assert_eq!(v(8), (i as i32 as f32).to_bits());
        assert_eq!(v(9), (i as f32).to_bits());
        assert_eq!(v(11), f32::from((i >> 16) as u8).to_bits());
        assert!(same32(v(12), x.round_ties_even()));
        if x.is_finite() {
            assert!(
                same32(v(13), (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))),
                "fract {x:e}"
            );
        }
        assert!(same64(pair(w, 16, l), f64::from(x)), "cvt_f64_f32 {x:e}");
    }
}

/// f32 to f16 bits, nearest even, by exhaustive search over the f16 values (slow, simple).
fn f16_bits(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = f64::from(x.abs());
    let mut best = 0u16;
    for h in 0u16..0x7c00 {
        let (hv, bv) = (f64::from(f16_value(h)), f64::from(f16_value(best)));
        let (dh, db) = ((hv - a).abs(), (bv - a).abs());
        if dh < db || (dh == db && h & 1 == 0 && best & 1 == 1) {
            best = h;
        }
    }
    // Beyond the largest f16 by half an ULP or more: infinity.
    if a >= 65520.0 {
        best = 0x7c00;
    }
    sign | best
}

fn f16_bits_rtz(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    let best = (0u16..0x7c00)
        .take_while(|&h| f16_value(h) <= a)
        .last()
        .unwrap_or(0);
    sign | best
}

fn f16_value(h: u16) -> f32 {
    let e = i32::from(h >> 10 & 0x1f);
    let m = f32::from(h & 0x3ff);
    let v = match e {
        0 => m * 2f32.powi(-24),
        31 => {
            if m == 0.0 {
                f32::INFINITY
            } else {
                f32::NAN
            }
        }
        _ => (1.0 + m / 1024.0) * 2f32.powi(e - 15),
    };
    if h & 0x8000 != 0 { -v } else { v }
}

#[test]
fn compares_write_lane_masks_to_vcc_or_sgpr_pairs_and_cmpx_writes_exec() {
    let a = f32_values();
    let mut b = a.clone();
    b.rotate_left(1);
    let ai: Vec<u32> = (0..64u32).map(|l| l.wrapping_mul(0x9e37_79b9)).collect();
    let bi: Vec<u32> = (0..64u32).map(|l| l.wrapping_mul(0x7f4a_7c15)).collect();
    let Some(r) = run_ok(
        "s_mov_b32 s30, 0x3c3\n\
         v_cmp_lt_f32_e32 vcc, v0, v1\n\
         s_mov_b64 s[10:11], vcc\n\
         v_cmp_neq_f32_e64 s[12:13], v0, v1\n\
         v_cmp_u_f32_e64 s[14:15], v0, v1\n\
         v_cmp_lg_f32_e64 s[16:17], v0, v1\n\
         v_cmp_lt_i32_e64 s[18:19], v2, v3\n\
         v_cmp_lt_u32_e64 s[20:21], v2, v3\n\
         v_cmp_class_f32_e64 s[22:23], v0, s30\n\
         v_cmp_ge_u64_e64 s[24:25], v[2:3], v[4:5]\n\
         v_cmpx_gt_u32_e32 vcc, v2, v3\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, a.clone());
            set(w, 1, b.clone());
            set(w, 2, ai.clone());
            set(w, 3, bi.clone());
            set(w, 4, bi.clone());
            set(w, 5, ai.clone());
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let mask = |f: &dyn Fn(usize) -> bool| (0..64).fold(0u64, |m, l| m | u64::from(f(l)) << l);
    let sp = |n: usize| u64::from(w.sgpr[n]) | u64::from(w.sgpr[n + 1]) << 32;
    let fa = |l: usize| f32::from_bits(a[l]);
    let fb = |l: usize| f32::from_bits(b[l]);
    assert_eq!(sp(10), mask(&|l| fa(l) < fb(l)));
    assert_eq!(sp(12), mask(&|l| fa(l) != fb(l)), "neq is true for NaN");
    assert_eq!(sp(14), mask(&|l| fa(l).is_nan() || fb(l).is_nan()));
    assert_eq!(
        sp(16),
        mask(&|l| fa(l) < fb(l) || fa(l) > fb(l)),
        "lg is false for NaN"
    );
    assert_eq!(sp(18), mask(&|l| (ai[l] as i32) < bi[l] as i32));
    assert_eq!(sp(20), mask(&|l| ai[l] < bi[l]));
    // 0x3c3: signalling/quiet NaN, +normal, +inf... bits 0,1,6,7,8,9: NaNs, +0, +denormal,
    // +normal, +inf.
    let class = |l: usize| {
        let x = fa(l);
        x.is_nan() || (!x.is_sign_negative())
    };
    assert_eq!(sp(22), mask(&class));
    let u64s = |l: usize| {
        (
            u64::from(ai[l]) | u64::from(bi[l]) << 32,
            u64::from(bi[l]) | u64::from(ai[l]) << 32,
        )
    };
    assert_eq!(sp(24), mask(&|l| u64s(l).0 >= u64s(l).1));
    let gt = mask(&|l| ai[l] > bi[l]);
    assert_eq!(w.exec, gt, "v_cmpx writes EXEC");
    assert_eq!(w.vcc, gt, "and VCC");
}

#[test]
fn vop3_output_modifiers_clamp_and_source_modifiers() {
    let Some(r) = run_ok(
        "v_add_f32_e64 v2, v0, v1 mul:2\n\
         v_add_f32_e64 v3, v0, v1 div:2\n\
         v_add_f32_e64 v4, v0, v1 clamp\n\
         v_mul_f32_e64 v5, -|v0|, v1 mul:4\n\
         v_fma_f32 v6, |v0|, -v1, -v0\n\
         v_add_u32_e64 v7, v8, v9 clamp\n\
         v_cndmask_b32_e64 v10, -v0, |v1|, s[4:5]\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            let a = [0.75f32, -3.0, 0.25, f32::NAN];
            let b = [0.5f32, 1.0, -0.5, 1.0];
            set(w, 0, a.map(f32::to_bits));
            set(w, 1, b.map(f32::to_bits));
            set(w, 8, [0xffff_fff0, 5, 0x8000_0000, 0]);
            set(w, 9, [0x20, 6, 0x8000_0000, 0]);
            w.sgpr[4] = 0b0101;
        },
    ) else {
        return;
    };
    let v = |n: usize, l: usize| f32::from_bits(r.wave.vgpr[n][l]);
    assert_eq!(v(2, 0), 2.5);
    assert_eq!(v(3, 1), -1.0);
    assert_eq!(v(4, 0), 1.0, "clamped above");
    assert_eq!(v(4, 1), 0.0, "clamped below");
    assert_eq!(v(4, 2), 0.0, "-0.25 clamps to 0");
    assert_eq!(r.wave.vgpr[4][3], 0, "NaN clamps to 0");
    assert_eq!(v(5, 1), -12.0);
    assert_eq!(v(6, 1), 3.0f32.mul_add(-1.0, 3.0));
    assert_eq!(
        r.wave.vgpr[7][0],
        u32::MAX,
        "unsigned add saturates with clamp"
    );
    assert_eq!(r.wave.vgpr[7][1], 11);
    assert_eq!(r.wave.vgpr[7][2], u32::MAX);
    assert_eq!(v(10, 0), 0.5, "selected |v1|");
    assert_eq!(v(10, 1), 3.0, "selected -v0");
}

#[test]
fn transcendentals_are_within_one_ulp() {
    let xs: Vec<f32> = (0..64).map(|l| 0.37 + l as f32 * 1.7).collect();
    let Some(r) = run_ok(
        "v_rcp_f32_e32 v1, v0\n\
         v_sqrt_f32_e32 v2, v0\n\
         v_rsq_f32_e32 v3, v0\n\
         v_exp_f32_e32 v4, v5\n\
         v_log_f32_e32 v6, v0\n\
         v_sin_f32_e32 v7, v5\n\
         v_cos_f32_e32 v8, v5\n\
         v_rcp_f64_e32 v[10:11], v[12:13]\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, xs.iter().map(|x| x.to_bits()));
            set(w, 5, xs.iter().map(|x| (x / 20.0 - 1.0).to_bits()));
            set(w, 12, xs.iter().map(|x| f64::from(*x).to_bits() as u32));
            set(
                w,
                13,
                xs.iter().map(|x| (f64::from(*x).to_bits() >> 32) as u32),
            );
        },
    ) else {
        return;
    };
    let ulp = |got: u32, want: f64| {
        let w32 = want as f32;
        (i64::from(got as i32) - i64::from(w32.to_bits() as i32)).abs() <= 1
    };
    for (l, &xl) in xs.iter().enumerate() {
        let x = f64::from(xl);
        let y = f64::from(xl / 20.0 - 1.0);
        let v = |n: usize| r.wave.vgpr[n][l];
        assert!(ulp(v(1), 1.0 / x), "rcp {x}");
        assert_eq!(v(2), xl.sqrt().to_bits(), "sqrt {x}");
        assert!(ulp(v(3), 1.0 / x.sqrt()), "rsq {x}");
        assert!(ulp(v(4), y.exp2()), "exp {y}");
        assert!(ulp(v(6), x.log2()), "log {x}");
        assert!(ulp(v(7), (y * std::f64::consts::TAU).sin()), "sin {y}");
        assert!(ulp(v(8), (y * std::f64::consts::TAU).cos()), "cos {y}");
        assert_eq!(pair(&r.wave, 10, l), (1.0 / x).to_bits());
    }
}

#[test]
fn f16_and_packed_math_use_halves_op_sel_and_neg() {
    let h = |x: f32| u32::from(f16_bits(x));
    let Some(r) = run_ok(
        "v_add_f16_e32 v2, v0, v1\n\
         v_mul_f16_e32 v3, v0, v1\n\
         v_pk_add_f16 v4, v0, v1\n\
         v_pk_mul_f16 v5, v0, v1 op_sel:[1,0] op_sel_hi:[0,1]\n\
         v_pk_fma_f16 v6, v0, v1, v0 neg_lo:[1,0,0] neg_hi:[0,0,1]\n\
         v_pk_add_u16 v7, v8, v9\n\
         v_pk_sub_i16 v10, v8, v9 clamp\n\
         v_pk_add_f16 v11, v0, 1.0\n\
         v_mad_f16 v12, v0, v1, v0 op_sel:[1,1,0,1]\n\
         v_fma_mix_f32 v13, v0, v1, v14 op_sel_hi:[1,1,0]\n\
         v_pk_fma_f32 v[16:17], v[18:19], v[20:21], v[18:19]\n\
         v_pk_mov_b32 v[22:23], v[18:19], v[20:21] op_sel:[1,0]\n\
         v_pk_mul_f32 v[24:25], v[18:19], v[20:21] op_sel_hi:[0,1] neg_hi:[1,0]\n\
         v_cvt_f16_f32_e32 v15, v14\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            w.vgpr[0][0] = h(1.5) | h(-2.0) << 16;
            w.vgpr[1][0] = h(0.25) | h(3.0) << 16;
            w.vgpr[8][0] = 0xfff0 | 0x8000 << 16;
            w.vgpr[9][0] = 0x0020 | 0x0001 << 16;
            w.vgpr[12][0] = 0xabcd_1234;
            w.vgpr[14][0] = 10.0f32.to_bits();
            w.vgpr[18][0] = 1.5f32.to_bits();
            w.vgpr[19][0] = (-2.0f32).to_bits();
            w.vgpr[20][0] = 4.0f32.to_bits();
            w.vgpr[21][0] = 0.5f32.to_bits();
        },
    ) else {
        return;
    };
    let v = |n: usize| r.wave.vgpr[n][0];
    assert_eq!(v(2), h(1.75), "v_add_f16 zeroes the high half");
    assert_eq!(v(3), h(0.375));
    assert_eq!(v(4), h(1.75) | h(1.0) << 16);
    // lo = a.hi * b.lo = -2 * 0.25; hi = a.lo * b.hi = 1.5 * 3.
    assert_eq!(v(5), h(-0.5) | h(4.5) << 16);
    // lo = -(1.5) * 0.25 + 1.5; hi = -2 * 3 + -(-2).
    assert_eq!(v(6), h(1.125) | h(-4.0) << 16);
    assert_eq!(v(7), 0x0010 | 0x8001 << 16, "u16 adds wrap per half");
    // lo: -16 - 32 = -48; hi: -32768 - 1 saturates at -32768.
    assert_eq!(v(10), 0xffd0 | 0x8000 << 16);
    assert_eq!(
        v(11),
        h(2.5) | h(-1.0) << 16,
        "the inline constant in both halves"
    );
    // a.hi * b.hi + a.lo = -2 * 3 + 1.5 into the high half, the low half kept.
    assert_eq!(
        v(12),
        0x1234 | h(-4.5) << 16,
        "v_mad_f16 op_sel:[..,1] keeps the low half"
    );
    assert_eq!(f32::from_bits(v(13)), 1.5f32.mul_add(0.25, 10.0));
    assert_eq!(f32::from_bits(v(16)), 1.5f32.mul_add(4.0, 1.5));
    assert_eq!(f32::from_bits(v(17)), (-2.0f32).mul_add(0.5, -2.0));
    assert_eq!((f32::from_bits(v(22)), f32::from_bits(v(23))), (-2.0, 4.0));
    // lo = s0.lo * s1.lo; hi = -(s0.lo) * s1.hi (op_sel_hi[0] = 0 picks s0's low half).
    assert_eq!((f32::from_bits(v(24)), f32::from_bits(v(25))), (6.0, -0.75));
    assert_eq!(v(15), h(10.0));
}

#[test]
fn dpp_row_shifts_broadcasts_and_masks_permute_src0_across_lanes() {
    let Some(r) = run_ok(
        "v_mov_b32_dpp v1, v0 row_shr:1 bound_ctrl:0\n\
         v_mov_b32_dpp v2, v0 row_shr:1\n\
         v_mov_b32_dpp v3, v0 row_shl:3\n\
         v_mov_b32_dpp v4, v0 row_ror:4\n\
         v_mov_b32_dpp v5, v0 wave_shr:1\n\
         v_mov_b32_dpp v6, v0 wave_rol:1\n\
         v_mov_b32_dpp v7, v0 row_mirror\n\
         v_mov_b32_dpp v8, v0 row_half_mirror\n\
         v_mov_b32_dpp v9, v0 quad_perm:[3,0,1,1]\n\
         v_mov_b32_dpp v10, v0 row_bcast:15 row_mask:0xa\n\
         v_mov_b32_dpp v11, v0 row_bcast:31 row_mask:0xc\n\
         v_mov_b32_dpp v12, v0 quad_perm:[0,1,2,3] row_mask:0x6 bank_mask:0x5\n\
         v_add_u32_dpp v13, v0, v0 row_shr:2 bound_ctrl:0\n\
         v_add_f32_dpp v14, -v15, |v15| row_shl:1 bound_ctrl:0\n\
         s_endpgm",
        |w, _| {
            lane_ids(w, 0);
            for v in 1..15 {
                set(w, v, [0xdead; 64]);
            }
            set(w, 15, (0..64).map(|l| (l as f32 - 10.0).to_bits()));
        },
    ) else {
        return;
    };
    let w = &r.wave;
    for l in 0..64usize {
        let (row, i) = (l / 16, l % 16);
        let v = |n: usize| w.vgpr[n][l];
        let dead = 0xdead;
        assert_eq!(
            v(1),
            if i == 0 { 0 } else { l as u32 - 1 },
            "row_shr bound_ctrl lane {l}"
        );
        assert_eq!(
            v(2),
            if i == 0 { dead } else { l as u32 - 1 },
            "row_shr lane {l}"
        );
        assert_eq!(
            v(3),
            if i + 3 < 16 { l as u32 + 3 } else { dead },
            "row_shl lane {l}"
        );
        assert_eq!(v(4), (row * 16 + (i + 12) % 16) as u32, "row_ror lane {l}");
        assert_eq!(
            v(5),
            if l == 0 { dead } else { l as u32 - 1 },
            "wave_shr lane {l}"
        );
        assert_eq!(v(6), ((l + 1) % 64) as u32, "wave_rol lane {l}");
        assert_eq!(v(7), (row * 16 + 15 - i) as u32, "row_mirror lane {l}");
        assert_eq!(
            v(8),
            ((l & !7) + 7 - (l & 7)) as u32,
            "row_half_mirror lane {l}"
        );
        let sel = [3, 0, 1, 1][l % 4];
        assert_eq!(v(9), ((l & !3) + sel) as u32, "quad_perm lane {l}");
        let bcast15 = match row {
            1 => 15,
            3 => 47,
            _ => dead,
        };
        assert_eq!(v(10), bcast15, "row_bcast:15 lane {l}");
        assert_eq!(
            v(11),
            if row >= 2 { 31 } else { dead },
            "row_bcast:31 lane {l}"
        );
        let bank = i / 4;
        let on = (row == 1 || row == 2) && (bank == 0 || bank == 2);
        assert_eq!(v(12), if on { l as u32 } else { dead }, "masks lane {l}");
        let shr2 = if i >= 2 { l as u32 - 2 } else { 0 };
        assert_eq!(v(13), shr2 + l as u32, "v_add_u32_dpp lane {l}");
        let src = if i < 15 {
            -((l + 1) as f32 - 10.0)
        } else {
            -0.0
        };
        assert_eq!(
            f32::from_bits(v(14)),
            src + (l as f32 - 10.0).abs(),
            "v_add_f32_dpp lane {l}"
        );
    }
}

#[test]
fn sdwa_selects_sub_dword_sources_and_destination_fields() {
    let Some(r) = run_ok(
        "v_add_u32_sdwa v2, v0, v1 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1 src1_sel:WORD_0\n\
         v_mov_b32_sdwa v3, sext(v0) dst_sel:BYTE_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_3\n\
         v_mov_b32_sdwa v4, v0 dst_sel:BYTE_2 dst_unused:UNUSED_PAD src0_sel:BYTE_3\n\
         v_cmp_eq_u32_sdwa s[2:3], v0, v1 src0_sel:BYTE_0 src1_sel:WORD_1\n\
         v_add_f16_sdwa v5, v6, v6 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:WORD_0\n\
         v_mul_u32_u24_sdwa v7, v0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:BYTE_2\n\
         s_endpgm",
        |w, _| {
            set(
                w,
                0,
                (0..64u32).map(|l| 0x80f0_1234u32.wrapping_add(l * 0x0301_0101)),
            );
            set(
                w,
                1,
                (0..64u32).map(|l| {
                    if l % 3 == 0 {
                        (0x34 + l) << 16 | 7
                    } else {
                        0x1111_2222
                    }
                }),
            );
            set(w, 2, [0xaaaa_bbbb; 64]);
            set(w, 3, [0xffff_ffff; 64]);
            set(w, 6, [0x4000_3c00; 64]); // hi 2.0, lo 1.0
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let mut eq = 0u64;
    for l in 0..64usize {
        let (a, b) = (w.vgpr[0][l], w.vgpr[1][l]);
        let sum = ((a >> 8) & 0xff) + (b & 0xffff);
        assert_eq!(w.vgpr[2][l], (sum & 0xffff) << 16 | 0xbbbb, "lane {l}");
        let byte3 = (a >> 24) as u8 as i8 as i32 as u32;
        let sext = (byte3 & 0xff) | if byte3 & 0x80 != 0 { 0xffff_ff00 } else { 0 };
        assert_eq!(w.vgpr[3][l], sext, "UNUSED_SEXT lane {l}");
        assert_eq!(w.vgpr[4][l], (a >> 24) << 16, "UNUSED_PAD lane {l}");
        if a & 0xff == b >> 16 {
            eq |= 1 << l;
        }
        assert_eq!(
            w.vgpr[5][l],
            0x4200 << 16,
            "f16 halves: 2.0 + 1.0 = 3.0 into the high word"
        );
        assert_eq!(w.vgpr[7][l], (a >> 16) * ((b >> 16) & 0xff));
    }
    assert_eq!(u64::from(w.sgpr[2]) | u64::from(w.sgpr[3]) << 32, eq);
    assert_ne!(eq, 0);
}

#[test]
fn mac_and_fmac_accumulate_into_their_destination() {
    let Some(r) = run_ok(
        "v_fmac_f32_e32 v2, v0, v1\n\
         v_mac_f32_e32 v3, v0, v1\n\
         v_madmk_f32 v4, v0, 0x41200000, v1\n\
         v_madak_f32 v5, v0, v1, 0x41200000\n\
         v_fmac_f64_e32 v[6:7], v[8:9], v[8:9]\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, [3.0f32.to_bits(); 64]);
            set(w, 1, [0.5f32.to_bits(); 64]);
            set(w, 2, [1.0f32.to_bits(); 64]);
            set(w, 3, [(-1.0f32).to_bits(); 64]);
            set(w, 6, [0; 64]);
            set(w, 7, [(2.0f64.to_bits() >> 32) as u32; 64]);
            set(w, 8, [0; 64]);
            set(w, 9, [(3.0f64.to_bits() >> 32) as u32; 64]);
        },
    ) else {
        return;
    };
    let f = |n: usize| f32::from_bits(r.wave.vgpr[n][9]);
    assert_eq!(f(2), 2.5);
    assert_eq!(f(3), 0.5);
    assert_eq!(f(4), 30.5);
    assert_eq!(f(5), 11.5);
    assert_eq!(f64::from_bits(pair(&r.wave, 6, 9)), 11.0);
}

#[test]
fn agpr_moves_reach_the_accumulation_registers() {
    let Some(r) = run_ok(
        "v_accvgpr_write_b32 a3, v0\n\
         v_accvgpr_mov_b32 a4, a3\n\
         v_accvgpr_read_b32 v1, a4\n\
         v_accvgpr_write_b32 a5, 7\n\
         s_endpgm",
        |w, _| lane_ids(w, 0),
    ) else {
        return;
    };
    assert_eq!(r.wave.agpr[3][9], 9);
    assert_eq!(r.wave.agpr[4][9], 9);
    assert_eq!(r.wave.vgpr[1][63], 63);
    assert_eq!(r.wave.agpr[5][0], 7);
}

#[test]
fn cube_map_helpers_and_lerp() {
    let Some(r) = run_ok(
        "v_cubeid_f32 v3, v0, v1, v2\n\
         v_cubesc_f32 v4, v0, v1, v2\n\
         v_cubetc_f32 v5, v0, v1, v2\n\
         v_cubema_f32 v6, v0, v1, v2\n\
         v_lerp_u8 v7, v8, v9, v10\n\
         s_endpgm",
        |w, _| {
            // Lane 0: +x major; lane 1: -y major; lane 2: -z major.
            set(w, 0, [3.0f32, 0.5, 0.25].map(f32::to_bits));
            set(w, 1, [1.0f32, -4.0, 0.5].map(f32::to_bits));
            set(w, 2, [-2.0f32, 1.0, -8.0].map(f32::to_bits));
            set(w, 8, [0x10_20_30_ff]);
            set(w, 9, [0x11_20_31_ff]);
            set(w, 10, [0x01_00_01_01]);
        },
    ) else {
        return;
    };
    let f = |v: usize, l: usize| f32::from_bits(r.wave.vgpr[v][l]);
    assert_eq!([f(3, 0), f(3, 1), f(3, 2)], [0.0, 3.0, 5.0], "face ids");
    assert_eq!([f(4, 0), f(4, 1), f(4, 2)], [2.0, 0.5, -0.25], "sc");
    assert_eq!([f(5, 0), f(5, 1), f(5, 2)], [-1.0, -1.0, -0.5], "tc");
    assert_eq!([f(6, 0), f(6, 1), f(6, 2)], [6.0, -8.0, -16.0], "2·major");
    // (0x10 + 0x11 + 1) / 2, (0x20 + 0x20) / 2, (0x30 + 0x31 + 1) / 2, (0xff + 0xff + 1) / 2.
    assert_eq!(r.wave.vgpr[7][0], 0x11_20_31_ff);
}

#[test]
fn an_mfma_broadcasting_from_a_missing_block_stops_the_wave_with_its_pc() {
    // v_mfma_f32_16x16x4f32 has one block: CBSZ 1 / ABID 1 names block 1.
    let Some(r) = common::run(
        "v_nop\nv_mfma_f32_16x16x4f32 v[4:7], v0, v2, 0 cbsz:1 abid:1\ns_endpgm",
        |_, _| {},
    ) else {
        return;
    };
    match r.end {
        Err(ExecError::Illegal { pc, op, .. }) => {
            assert_eq!(pc, common::CODE + 4);
            assert_eq!(op.to_string(), "v_mfma_f32_16x16x4f32");
        }
        other => panic!("expected Illegal, got {other:?}"),
    }
}

#[test]
fn trig_preop_returns_53_bit_segments_of_two_over_pi() {
    // 2/π = 0.A2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163AB… (hex fraction).
    const HEX: &str = "A2F9836E4E441529FC2757D1F534DDC0DB6295993C439041FE5163ABDEBBC561";
    let bit = |i: usize| {
        let d = u64::from_str_radix(&HEX[i / 4..i / 4 + 1], 16).unwrap();
        d >> (3 - i % 4) & 1
    };
    // Segment k of x: fraction bits [53k + shift, +53) at their place value, where shift
    // grows by x's biased exponent above 1077.
    let segment = |k: usize, shift: usize| -> f64 {
        let r = (0..53).fold(0u64, |r, i| r << 1 | bit(53 * k + shift + i));
        r as f64 * 2f64.powi(-53 - (53 * k + shift) as i32)
    };
    let Some(r) = run_ok(
        "v_trig_preop_f64 v[2:3], v[0:1], 0\n\
         v_trig_preop_f64 v[4:5], v[0:1], 1\n\
         v_trig_preop_f64 v[6:7], v[0:1], 2\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            // Lane 0: 1.0; lane 1: 2^100 (biased exponent 1123: 46 bits further).
            for (l, x) in [1.0f64, 2f64.powi(100)].iter().enumerate() {
                w.vgpr[0][l] = x.to_bits() as u32;
                w.vgpr[1][l] = (x.to_bits() >> 32) as u32;
            }
        },
    ) else {
        return;
    };
    let w = &r.wave;
    assert_eq!(f64::from_bits(pair(w, 2, 0)), segment(0, 0));
    assert_eq!(
        pair(w, 2, 0),
        0x3fe4_5f30_6dc9_c882,
        "2/π truncated to 53 bits"
    );
    assert_eq!(f64::from_bits(pair(w, 4, 0)), segment(1, 0));
    assert_eq!(f64::from_bits(pair(w, 6, 0)), segment(2, 0));
    assert_eq!(f64::from_bits(pair(w, 2, 1)), segment(0, 46));
    assert_eq!(f64::from_bits(pair(w, 4, 1)), segment(1, 46));
    // The segments add up to 2/π far beyond one double's precision.
    let sum = f64::from_bits(pair(w, 2, 0)) + f64::from_bits(pair(w, 4, 0));
    assert_eq!(sum, 2.0 / std::f64::consts::PI);
}

#[test]
fn dot_products_accumulate_packed_elements() {
    let a = 0x7f80_01ffu32; // bytes 0xff, 0x01, 0x80, 0x7f
    let b = 0x0203_fe05u32; // bytes 0x05, 0xfe, 0x03, 0x02
    let Some(r) = run_ok(
        "v_dot4_i32_i8 v3, v0, v1, v2\n\
         v_dot4_u32_u8 v4, v0, v1, v2\n\
         v_dot2_i32_i16 v5, v0, v1, v2\n\
         v_dot8_i32_i4 v6, v0, v1, v2\n\
         v_dot2_f32_f16 v7, v8, v9, v10\n\
         v_dot4_i32_i8 v11, v0, v0, v12 clamp\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, [a; 64]);
            set(w, 1, [b; 64]);
            set(w, 2, [100; 64]);
            set(w, 8, [0x4000_3c00; 64]); // (1.0, 2.0)
            set(w, 9, [0xc400_3800; 64]); // (0.5, -4.0)
            set(w, 10, [0.25f32.to_bits(); 64]);
            set(w, 12, [0x7fff_fff0; 64]);
        },
    ) else {
        return;
    };
    let v = |n: usize| r.wave.vgpr[n][5];
    let bytes = |x: u32| x.to_le_bytes();
    let sdot: i32 = (0..4)
        .map(|k| i32::from(bytes(a)[k] as i8) * i32::from(bytes(b)[k] as i8))
        .sum();
    assert_eq!(v(3), (100 + sdot) as u32);
    let udot: u32 = (0..4)
        .map(|k| u32::from(bytes(a)[k]) * u32::from(bytes(b)[k]))
        .sum();
    assert_eq!(v(4), 100 + udot);
    let h = |x: u32, k: u32| i32::from((x >> (16 * k)) as u16 as i16);
    assert_eq!(v(5), (100 + h(a, 0) * h(b, 0) + h(a, 1) * h(b, 1)) as u32);
    let nib = |x: u32, k: u32| ((x >> (4 * k)) as i32) << 28 >> 28;
    let d8: i32 = (0..8).map(|k| nib(a, k) * nib(b, k)).sum();
    assert_eq!(v(6), (100 + d8) as u32);
    assert_eq!(f32::from_bits(v(7)), 1.0 * 0.5 + 2.0 * -4.0 + 0.25);
    assert_eq!(v(11), i32::MAX as u32, "clamp saturates the signed sum");
}

#[test]
fn gfx942_64_bit_moves_and_shift_adds() {
    let Some(r) = common::run_on(
        kfd_gfx9::exec::Target::Gfx942,
        "gfx942",
        "v_mov_b64_e32 v[4:5], v[0:1]\n\
         v_lshl_add_u64 v[6:7], v[0:1], 2, v[2:3]\n\
         v_lshl_add_u64 v[8:9], v[0:1], 0, s[4:5]\n\
         s_endpgm",
        |w, _| {
            for l in 0..64u64 {
                let a = 0xdead_beef_0000_0000u64 | l << 28;
                let b = 0x0123_4567_89ab_cdefu64.wrapping_mul(l + 1);
                w.vgpr[0][l as usize] = a as u32;
                w.vgpr[1][l as usize] = (a >> 32) as u32;
                w.vgpr[2][l as usize] = b as u32;
                w.vgpr[3][l as usize] = (b >> 32) as u32;
            }
            w.sgpr[4] = 0xffff_ffff;
            w.sgpr[5] = 7;
        },
    ) else {
        return;
    };
    let w = &r.wave;
    for l in 0..64 {
        let (a, b) = (pair(w, 0, l), pair(w, 2, l));
        assert_eq!(pair(w, 4, l), a);
        assert_eq!(pair(w, 6, l), (a << 2).wrapping_add(b), "lane {l}");
        assert_eq!(pair(w, 8, l), a.wrapping_add(0x7_ffff_ffff));
    }
}

/// Random f32 bit patterns over the whole range (denormals, huge, tiny, NaN, inf) through
/// clang's division sequence, 8 waves of 64: each quotient is Rust's (IEEE) one.
#[test]
fn f32_division_is_correctly_rounded_for_random_operands() {
    let asm = "v_div_scale_f32 v3, s[4:5], v1, v1, v0\n\
               v_rcp_f32_e32 v5, v3\n\
               v_div_scale_f32 v7, vcc, v0, v1, v0\n\
               v_fma_f32 v8, -v3, v5, 1.0\n\
               v_fmac_f32_e32 v5, v8, v5\n\
               v_mul_f32_e32 v8, v7, v5\n\
               v_fma_f32 v9, -v3, v8, v7\n\
               v_fmac_f32_e32 v8, v9, v5\n\
               v_fma_f32 v3, -v3, v8, v7\n\
               v_div_fmas_f32 v3, v3, v5, v8\n\
               v_div_fixup_f32 v2, v3, v1, v0\n\
               s_endpgm";
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    };
    for round in 0..8 {
        let a: Vec<u32> = (0..64).map(|_| next()).collect();
        let b: Vec<u32> = (0..64).map(|_| next()).collect();
        let Some(r) = run_ok(asm, |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, a.clone());
            set(w, 1, b.clone());
        }) else {
            return;
        };
        for l in 0..64 {
            let (p, q) = (f32::from_bits(a[l]), f32::from_bits(b[l]));
            let got = r.wave.vgpr[2][l];
            assert!(
                same32(got, p / q),
                "round {round} lane {l}: {p:e} ({:#x}) / {q:e} ({:#x}) gave {:e} ({got:#x}), want {:e}",
                a[l],
                b[l],
                f32::from_bits(got),
                p / q
            );
        }
    }
}

/// As above for f64 (clang's f64 sequence).
#[test]
fn f64_division_is_correctly_rounded_for_random_operands() {
    let asm = "v_div_scale_f64 v[6:7], s[4:5], v[4:5], v[4:5], v[2:3]\n\
               v_rcp_f64_e32 v[8:9], v[6:7]\n\
               v_div_scale_f64 v[10:11], vcc, v[2:3], v[4:5], v[2:3]\n\
               v_fma_f64 v[12:13], -v[6:7], v[8:9], 1.0\n\
               v_fmac_f64_e32 v[8:9], v[8:9], v[12:13]\n\
               v_fma_f64 v[12:13], -v[6:7], v[8:9], 1.0\n\
               v_fmac_f64_e32 v[8:9], v[8:9], v[12:13]\n\
               v_mul_f64 v[12:13], v[10:11], v[8:9]\n\
               v_fma_f64 v[6:7], -v[6:7], v[12:13], v[10:11]\n\
               v_div_fmas_f64 v[6:7], v[6:7], v[8:9], v[12:13]\n\
               v_div_fixup_f64 v[0:1], v[6:7], v[4:5], v[2:3]\n\
               s_endpgm";
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..8 {
        let a: Vec<u64> = (0..64).map(|_| next()).collect();
        let b: Vec<u64> = (0..64).map(|_| next()).collect();
        let Some(r) = run_ok(asm, |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 2, a.iter().map(|v| *v as u32));
            set(w, 3, a.iter().map(|v| (v >> 32) as u32));
            set(w, 4, b.iter().map(|v| *v as u32));
            set(w, 5, b.iter().map(|v| (v >> 32) as u32));
        }) else {
            return;
        };
        for l in 0..64 {
            let (p, q) = (f64::from_bits(a[l]), f64::from_bits(b[l]));
            let got = pair(&r.wave, 0, l);
            assert!(
                same64(got, p / q),
                "round {round} lane {l}: {p:e} / {q:e} gave {:e}, want {:e}",
                f64::from_bits(got),
                p / q
            );
        }
    }
}

/// The wave-wide inclusive prefix sum from AMD's "GCN assembly: cross-lane operations"
/// (GPUOpen): row shifts with bound control, bank-masked shifts and the two row broadcasts.
/// Every lane ends with the sum of v0 over lanes 0..=lane, which only holds if each DPP
/// control, mask and bound rule is right.
#[test]
fn the_dpp_prefix_sum_idiom_computes_inclusive_prefix_sums() {
    let Some(r) = run_ok(
        "v_add_u32_dpp v1, v0, v0 row_shr:1 bound_ctrl:0\n\
         v_add_u32_dpp v1, v0, v1 row_shr:2 bound_ctrl:0\n\
         v_add_u32_dpp v1, v0, v1 row_shr:3 bound_ctrl:0\n\
         v_nop\n\
         v_nop\n\
         v_add_u32_dpp v1, v1, v1 row_shr:4 bank_mask:0xe\n\
         v_nop\n\
         v_nop\n\
         v_add_u32_dpp v1, v1, v1 row_shr:8 bank_mask:0xc\n\
         v_nop\n\
         v_nop\n\
         v_add_u32_dpp v1, v1, v1 row_bcast:15 row_mask:0xa\n\
         v_nop\n\
         v_nop\n\
         v_add_u32_dpp v1, v1, v1 row_bcast:31 row_mask:0xc\n\
         s_endpgm",
        |w, _| set(w, 0, (0..64u32).map(|l| l * l + 3)),
    ) else {
        return;
    };
    let mut sum = 0u32;
    for l in 0..64u32 {
        sum += l * l + 3;
        assert_eq!(r.wave.vgpr[1][l as usize], sum, "lane {l}");
    }
}

#[test]
fn clamp_turns_nan_into_zero_only_with_dx10_clamp() {
    for (mode, want_nan) in [(0x3f0, false), (0x2f0, true)] {
        let Some(r) = run_ok("v_add_f32_e64 v1, v0, v0 clamp\ns_endpgm", |w, _| {
            w.hwreg[1] = mode;
            set(w, 0, [f32::NAN.to_bits()]);
        }) else {
            return;
        };
        let got = f32::from_bits(r.wave.vgpr[1][0]);
        assert_eq!(got.is_nan(), want_nan, "MODE {mode:#x}: {got}");
        if !want_nan {
            assert_eq!(got.to_bits(), 0);
        }
    }
}

#[test]
fn sixteen_bit_results_zero_or_keep_the_high_half_as_gfx9_does() {
    // gfx9: v_add_f16 zeroes the high half, v_mac_f16 and v_madak_f16 keep it (LLVM's
    // GCNSubtarget::zeroesHigh16BitsOfDest), v_fma_f16 writes the op_sel-named half.
    let Some(r) = run_ok(
        "v_add_f16_e32 v2, v0, v1\n\
         v_mac_f16_e32 v3, v0, v1\n\
         v_madak_f16 v4, v0, v1, 0x3c00\n\
         v_fma_f16 v5, v0, v1, v0 op_sel:[0,0,0,1]\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            set(w, 0, [0x4000]); // 2.0
            set(w, 1, [0x4200]); // 3.0
            for v in 2..6 {
                set(w, v, [0xabcd_0000]); // high half 0xabcd, low 0.0
            }
        },
    ) else {
        return;
    };
    let v = |n: usize| r.wave.vgpr[n][0];
    assert_eq!(v(2), 0x0000_4500, "2 + 3 = 5, high half zeroed");
    assert_eq!(v(3), 0xabcd_4600, "2·3 + 0 = 6, high half kept");
    assert_eq!(v(4), 0xabcd_4700, "2·3 + 1 = 7, high half kept");
    assert_eq!(
        v(5),
        0x4800_0000,
        "2·3 + 2 = 8 into the high half, low kept"
    );
}

#[test]
fn sdwa_sign_extends_integer_selects_and_vopc_sdwa_writes_vcc() {
    let Some(r) = run_ok(
        "v_cmp_gt_i32_sdwa vcc, sext(v0), v1 src0_sel:BYTE_0 src1_sel:DWORD\n\
         v_add_u32_sdwa v2, sext(v0), v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:DWORD\n\
         v_add_u32_sdwa v3, v0, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:DWORD\n\
         s_endpgm",
        |w, _| {
            set(
                w,
                0,
                (0..64u32).map(|l| 0x1234_8000 | (l * 9) << 2 | (0x80 * (l & 1))),
            );
            set(w, 1, (0..64u32).map(|l| (l as i32 - 40) as u32));
        },
    ) else {
        return;
    };
    let w = &r.wave;
    let mut gt = 0u64;
    for l in 0..64usize {
        let (a, b) = (w.vgpr[0][l], w.vgpr[1][l]);
        if i32::from(a as u8 as i8) > b as i32 {
            gt |= 1 << l;
        }
        assert_eq!(
            w.vgpr[2][l],
            (a as u16 as i16 as i32 as u32).wrapping_add(b),
            "lane {l}"
        );
        assert_eq!(w.vgpr[3][l], (a & 0xffff).wrapping_add(b), "lane {l}");
    }
    assert_eq!(w.vcc, gt);
    assert!(gt != 0 && gt != u64::MAX);
}
