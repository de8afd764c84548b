//! MODE.FP_ROUND ("AMD Instinct MI200 ISA", "MODE register": FP_ROUND[1:0] for f32,
//! FP_ROUND[3:2] for f64 and f16; 0 nearest-even, 1 toward +∞, 2 toward −∞, 3 toward zero)
//! held to an independent oracle: the host CPU's own IEEE arithmetic under each rounding
//! mode. On x86_64 each reference result comes from one inline-assembly block that loads
//! MXCSR with the rounding-control field set (RC, bits 14:13: 0 nearest, 1 down, 2 up,
//! 3 toward zero), runs the SSE / FMA3 / F16C instruction, and restores MXCSR — so the
//! compiler cannot move the arithmetic out of the mode. Thousands of random operands per
//! mode (denormals, ties, cancellations, overflow, exact zeros) run through LLVM-assembled
//! `v_add/sub/mul/fma/mad/sqrt/ldexp` (f32, f64, f16), packed f32 and conversions, every lane
//! bit for bit.

mod common;

#[cfg(target_arch = "x86_64")]
use common::fpu as oracle;
use common::{CODE, TestMemory, assemble, run_ok, run_on};
use kfd_gfx9::dispatch::KernelDescriptor;
use kfd_gfx9::exec::{CodeCache, Ctx, Flow, Mode, Round, Target, Wave, mode_from_rsrc1, step};

/// MODE with every denormal kept, DX10 clamp and IEEE on (HIP's default), FP_ROUND 0.
const MODE_IEEE: u32 = 0x3f0;

/// MODE for rounding mode `r` (0..=3) in both FP_ROUND fields.
fn mode(r: u32) -> u32 {
    MODE_IEEE | r | r << 2
}

/// A small xorshift generator (reproducible runs).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// An f32 bit pattern: denormals, normals of every size, a share of short significands
    /// (exact results and ties), the extremes.
    fn f32(&mut self) -> u32 {
        let r = self.next();
        let sign = (r & 1) as u32;
        let exp = match r >> 1 & 7 {
            0 => 0,
            1 => 254 - (r >> 8 & 3) as u32,
            2 => 1 + (r >> 8 & 7) as u32,
            _ => 100 + (r >> 8 & 63) as u32,
        };
        let mut man = (r >> 16) as u32 & 0x7f_ffff;
        if r >> 40 & 3 == 0 {
            man &= 0x7f_f000;
        }
        sign << 31 | exp << 23 | man
    }

    /// `b` near `a`'s exponent (so sums round, tie and cancel), or independent.
    fn f32_near(&mut self, a: u32) -> u32 {
        let r = self.next();
        if r & 3 == 0 {
            return self.f32();
        }
        let e = (a >> 23 & 0xff) as i32 - (r >> 2 & 31) as i32 + 4;
        let e = e.clamp(0, 254) as u32;
        ((r >> 8 & 1) as u32) << 31 | e << 23 | (r >> 16) as u32 & 0x7f_ffff
    }

    fn f64(&mut self) -> u64 {
        let r = self.next();
        let sign = r & 1;
        let exp = match r >> 1 & 7 {
            0 => 0,
            1 => 2046 - (r >> 8 & 3),
            2 => 1 + (r >> 8 & 7),
            _ => 900 + (r >> 8 & 255),
        };
        let mut man = self.next() & ((1 << 52) - 1);
        if r >> 40 & 3 == 0 {
            man &= !0xff_ffff;
        }
        sign << 63 | exp << 52 | man
    }

    fn f64_near(&mut self, a: u64) -> u64 {
        let r = self.next();
        if r & 3 == 0 {
            return self.f64();
        }
        let e = (a >> 52 & 0x7ff) as i64 - (r >> 2 & 63) as i64 + 4;
        let e = e.clamp(0, 2046) as u64;
        (r >> 8 & 1) << 63 | e << 52 | self.next() & ((1 << 52) - 1)
    }

    /// An f16 bit pattern.
    fn f16(&mut self) -> u16 {
        let r = self.next();
        let exp = match r >> 1 & 3 {
            0 => 0,
            1 => 30 - (r >> 8 & 1),
            _ => 8 + (r >> 8 & 15),
        };
        ((r & 1) << 15 | exp << 10 | r >> 16 & 0x3ff) as u16
    }
}

/// Runs `code` (assembled once) as one wave with `setup`, to `s_endpgm`.
fn run_code(code: &[u8], setup: impl FnOnce(&mut Wave)) -> Wave {
    let mem = TestMemory::with_code(code);
    let mut wave = Wave::new(Target::Gfx90a, CODE);
    setup(&mut wave);
    let mut lds = vec![0u8; 64 << 10];
    let mut cache = CodeCache::new();
    for _ in 0..10_000 {
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        match step(&mut wave, &mut ctx) {
            Ok(Flow::End) => return wave,
            Ok(_) => continue,
            Err(e) => panic!("the wave stopped: {e:?}"),
        }
    }
    panic!("no s_endpgm");
}

/// One checked result: the instruction, the lane's bits, the oracle's, and the NaN test
/// of its format.
type Case<'a> = (&'static str, u64, u64, &'a dyn Fn(u64) -> bool);

/// Same bits, or both NaN (the NaN payloads are the host's, not the guide's).
fn same(got: u64, want: u64, nan: impl Fn(u64) -> bool) -> bool {
    got == want || (nan(got) && nan(want))
}

#[cfg(target_arch = "x86_64")]
#[test]
fn every_rounding_mode_matches_the_host_fpu_for_random_operands() {
    if !(std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("f16c"))
    {
        println!("skipped: the host CPU lacks FMA3 or F16C, the oracle's fused and f16 forms");
        return;
    }
    let Some(code) = assemble(
        "s_setreg_b32 hwreg(HW_REG_MODE), s0\n\
         v_add_f32 v10, v0, v1\n\
         v_sub_f32 v11, v0, v1\n\
         v_mul_f32 v12, v0, v1\n\
         v_fma_f32 v13, v0, v1, v2\n\
         v_sqrt_f32 v14, v0\n\
         v_cvt_f32_f64 v15, v[4:5]\n\
         v_cvt_f32_i32 v16, v3\n\
         v_cvt_f16_f32 v17, v0\n\
         v_mad_f32 v18, v0, v1, v2\n\
         v_mul_f16 v19, v28, v29\n\
         v_add_f16 v30, v28, v31\n\
         v_add_f64 v[20:21], v[4:5], v[6:7]\n\
         v_mul_f64 v[22:23], v[4:5], v[6:7]\n\
         v_fma_f64 v[24:25], v[4:5], v[6:7], v[8:9]\n\
         v_sqrt_f64 v[26:27], v[4:5]\n\
         v_ldexp_f32 v32, v0, v33\n\
         v_ldexp_f64 v[36:37], v[4:5], v34\n\
         v_cvt_f32_u32 v35, v3\n\
         v_pk_add_f32 v[38:39], v[40:41], v[42:43]\n\
         v_pk_mul_f32 v[44:45], v[40:41], v[42:43]\n\
         s_endpgm",
    ) else {
        return;
    };
    use oracle as o;
    let nan32 = |x: u64| f32::from_bits(x as u32).is_nan();
    let nan64 = |x: u64| f64::from_bits(x).is_nan();
    let nan16 = |x: u64| x & 0x7c00 == 0x7c00 && x & 0x3ff != 0;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut checked = 0usize;
    let mut directed_differs = 0usize;
    for r in 0..4u32 {
        for _ in 0..40 {
            let mut a32 = [0u32; 64];
            let mut b32 = [0u32; 64];
            let mut c32 = [0u32; 64];
            let mut i32s = [0i32; 64];
            let mut a64 = [0u64; 64];
            let mut b64 = [0u64; 64];
            let mut c64 = [0u64; 64];
            let mut h = [[0u16; 3]; 64];
            // ldexp exponents whose power of two is a normal f32 / f64, so that the host's
            // multiplication by it is one correctly rounded operation.
            let mut ldexp_n = [(0i32, 0i32); 64];
            for l in 0..64 {
                a32[l] = rng.f32();
                b32[l] = rng.f32_near(a32[l]);
                // c near the product's exponent, so the fused sums cancel and tie.
                let p = f32::from_bits(a32[l]) * f32::from_bits(b32[l]);
                c32[l] = if l % 2 == 0 {
                    rng.f32_near(p.to_bits())
                } else {
                    rng.f32()
                };
                i32s[l] = rng.next() as i32 >> (rng.next() % 24);
                a64[l] = rng.f64();
                b64[l] = rng.f64_near(a64[l]);
                let p = f64::from_bits(a64[l]) * f64::from_bits(b64[l]);
                c64[l] = if l % 2 == 0 {
                    rng.f64_near(p.to_bits())
                } else {
                    rng.f64()
                };
                let ha = rng.f16();
                // For the f16 sum, an addend within 2^12 of `ha`: the f32 sum is exact, so
                // the oracle's one rounding (vcvtps2ph) is the sum's.
                let hb = loop {
                    let x = rng.f16();
                    let (ea, eb) = (i32::from(ha >> 10 & 31), i32::from(x >> 10 & 31));
                    if (ea - eb).abs() <= 12 {
                        break x;
                    }
                };
                h[l] = [ha, rng.f16(), hb];
                ldexp_n[l] = (
                    (rng.next() % 254) as i32 - 126,
                    (rng.next() % 2046) as i32 - 1022,
                );
            }
            let w = run_code(&code, |w| {
                w.sgpr[0] = mode(r);
                for l in 0..64 {
                    w.vgpr[0][l] = a32[l];
                    w.vgpr[1][l] = b32[l];
                    w.vgpr[2][l] = c32[l];
                    w.vgpr[3][l] = i32s[l] as u32;
                    for (v, x) in [(4, a64[l]), (6, b64[l]), (8, c64[l])] {
                        w.vgpr[v][l] = x as u32;
                        w.vgpr[v + 1][l] = (x >> 32) as u32;
                    }
                    w.vgpr[28][l] = u32::from(h[l][0]);
                    w.vgpr[29][l] = u32::from(h[l][1]);
                    w.vgpr[31][l] = u32::from(h[l][2]);
                    w.vgpr[33][l] = ldexp_n[l].0 as u32;
                    w.vgpr[34][l] = ldexp_n[l].1 as u32;
                    // Packed f32 pairs: (a, c) + (b, b).
                    w.vgpr[40][l] = a32[l];
                    w.vgpr[41][l] = c32[l];
                    w.vgpr[42][l] = b32[l];
                    w.vgpr[43][l] = b32[l];
                }
            });
            for l in 0..64 {
                let (a, b, c) = (
                    f32::from_bits(a32[l]),
                    f32::from_bits(b32[l]),
                    f32::from_bits(c32[l]),
                );
                let (x, y, z) = (
                    f64::from_bits(a64[l]),
                    f64::from_bits(b64[l]),
                    f64::from_bits(c64[l]),
                );
                let pair = |v: usize| u64::from(w.vgpr[v][l]) | u64::from(w.vgpr[v + 1][l]) << 32;
                let (ha, hm, hb) = (
                    o::f16_to_f32(h[l][0]),
                    o::f16_to_f32(h[l][1]),
                    o::f16_to_f32(h[l][2]),
                );
                let (n32, n64) = ldexp_n[l];
                let pow32 = f32::from_bits(((n32 + 127) as u32) << 23);
                let pow64 = f64::from_bits(((n64 + 1023) as u64) << 52);
                let cases: [Case; 20] = [
                    (
                        "v_add_f32",
                        w.vgpr[10][l].into(),
                        o::add32(r, a, b).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_sub_f32",
                        w.vgpr[11][l].into(),
                        o::sub32(r, a, b).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_mul_f32",
                        w.vgpr[12][l].into(),
                        o::mul32(r, a, b).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_fma_f32",
                        w.vgpr[13][l].into(),
                        o::fma32(r, a, b, c).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_sqrt_f32",
                        w.vgpr[14][l].into(),
                        o::sqrt32(r, a).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_cvt_f32_f64",
                        w.vgpr[15][l].into(),
                        o::cvt_f32_f64(r, x).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_cvt_f32_i32",
                        w.vgpr[16][l].into(),
                        o::cvt_f32_i32(r, i32s[l]).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_cvt_f16_f32",
                        w.vgpr[17][l].into(),
                        o::cvt_f16_f32(r, a).into(),
                        &nan16,
                    ),
                    (
                        "v_mad_f32",
                        w.vgpr[18][l].into(),
                        o::add32(r, o::mul32(r, a, b), c).to_bits().into(),
                        &nan32,
                    ),
                    // f16 products are exact in f32: one rounding, the conversion's.
                    (
                        "v_mul_f16",
                        w.vgpr[19][l].into(),
                        o::cvt_f16_f32(r, ha * hm).into(),
                        &nan16,
                    ),
                    (
                        "v_add_f16",
                        w.vgpr[30][l].into(),
                        o::cvt_f16_f32(r, ha + hb).into(),
                        &nan16,
                    ),
                    ("v_add_f64", pair(20), o::add64(r, x, y).to_bits(), &nan64),
                    ("v_mul_f64", pair(22), o::mul64(r, x, y).to_bits(), &nan64),
                    (
                        "v_fma_f64",
                        pair(24),
                        o::fma64(r, x, y, z).to_bits(),
                        &nan64,
                    ),
                    ("v_sqrt_f64", pair(26), o::sqrt64(r, x).to_bits(), &nan64),
                    (
                        "v_ldexp_f32",
                        w.vgpr[32][l].into(),
                        o::mul32(r, a, pow32).to_bits().into(),
                        &nan32,
                    ),
                    (
                        "v_ldexp_f64",
                        pair(36),
                        o::mul64(r, x, pow64).to_bits(),
                        &nan64,
                    ),
                    (
                        "v_cvt_f32_u32",
                        w.vgpr[35][l].into(),
                        o::cvt_f32_i64(r, i64::from(i32s[l] as u32))
                            .to_bits()
                            .into(),
                        &nan32,
                    ),
                    (
                        "v_pk_add_f32",
                        pair(38),
                        u64::from(o::add32(r, a, b).to_bits())
                            | u64::from(o::add32(r, c, b).to_bits()) << 32,
                        &|x| nan32(x) || nan32(x >> 32),
                    ),
                    (
                        "v_pk_mul_f32",
                        pair(44),
                        u64::from(o::mul32(r, a, b).to_bits())
                            | u64::from(o::mul32(r, c, b).to_bits()) << 32,
                        &|x| nan32(x) || nan32(x >> 32),
                    ),
                ];
                for (name, got, want, nan) in cases {
                    assert!(
                        same(got, want, nan),
                        "{name} in FP_ROUND {r}, lane {l}: got {got:#x}, the host gives \
                         {want:#x} (a {:#x} b {:#x} c {:#x} / {:#x} {:#x} {:#x} / i {} / \
                         f16 {:#x} {:#x} {:#x})",
                        a32[l],
                        b32[l],
                        c32[l],
                        a64[l],
                        b64[l],
                        c64[l],
                        i32s[l],
                        h[l][0],
                        h[l][1],
                        h[l][2]
                    );
                    checked += 1;
                }
                if r != 0 && o::add64(r, x, y) != o::add64(0, x, y) {
                    directed_differs += 1;
                }
            }
        }
    }
    println!(
        "{checked} lane results agree with the host FPU; {directed_differs} f64 sums differ from nearest"
    );
    // The operands exercise the modes: many directed results are not the nearest one.
    assert!(directed_differs > 500, "{directed_differs}");
}

/// FP_ROUND comes from the kernel descriptor's FLOAT_ROUND_MODE_32 (COMPUTE_PGM_RSRC1
/// 13:12) and FLOAT_ROUND_MODE_16_64 (15:14).
#[test]
fn the_descriptor_sets_each_precisions_rounding() {
    let m = Mode(mode_from_rsrc1(1 << 12 | 2 << 14 | 3 << 16));
    assert_eq!(m.round_f32(), Round::PlusInf);
    assert_eq!(m.round_f64_f16(), Round::MinusInf);
    let m = Mode(mode_from_rsrc1(3 << 12));
    assert_eq!(
        (m.round_f32(), m.round_f64_f16()),
        (Round::Zero, Round::NearestEven)
    );
    // The dispatcher's own reading of RSRC1 (a PM4 dispatch's COMPUTE_PGM_RSRC1) agrees.
    for rsrc1 in [1 << 12 | 2 << 14, 3 << 12 | 1 << 14 | 0xf << 16] {
        let kd = KernelDescriptor::from_registers(rsrc1, 0, 0).expect("a valid RSRC1");
        assert_eq!(
            kd.mode() & 0xff,
            mode_from_rsrc1(rsrc1) & 0xff,
            "{rsrc1:#x}"
        );
    }
}

/// f32 and f64 round by their own fields: FP_ROUND = 1 (f32 up), f64 nearest.
#[test]
fn f32_and_f64_follow_their_own_fields() {
    // 1 + 2^-30 (f32) and 1 + 2^-60 (f64): both inexact, just above 1.
    let Some(r) = run_ok(
        "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 1\n\
         v_add_f32 v2, v0, v1\n\
         v_add_f64 v[4:5], v[6:7], v[8:9]\n\
         s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 4\n\
         v_add_f32 v3, v0, v1\n\
         v_add_f64 v[10:11], v[6:7], v[8:9]\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            w.vgpr[0] = [1.0f32.to_bits(); 64];
            w.vgpr[1] = [f32::from_bits(0x3080_0000).to_bits(); 64];
            let (one, tiny) = (1.0f64.to_bits(), 2f64.powi(-60).to_bits());
            w.vgpr[6] = [one as u32; 64];
            w.vgpr[7] = [(one >> 32) as u32; 64];
            w.vgpr[8] = [tiny as u32; 64];
            w.vgpr[9] = [(tiny >> 32) as u32; 64];
        },
    ) else {
        return;
    };
    let f64_at = |v: usize| u64::from(r.wave.vgpr[v][0]) | u64::from(r.wave.vgpr[v + 1][0]) << 32;
    assert_eq!(r.wave.vgpr[2][0], 0x3f80_0001, "f32 rounded up");
    assert_eq!(f64_at(4), 1.0f64.to_bits(), "f64 still nearest");
    assert_eq!(r.wave.vgpr[3][0], 0x3f80_0000, "f32 nearest");
    assert_eq!(f64_at(10), 1.0f64.next_up().to_bits(), "f64 rounded up");
}

/// FP_DENORM still applies with a directed rounding: a flushed denormal input is a zero (so
/// rounding up has nothing to round), a result rounded up into the denormals is flushed when
/// FP_DENORM says so, and kept when it allows them.
#[test]
fn denormal_flushing_composes_with_directed_rounding() {
    let tiny = f32::from_bits(1); // 2^-149
    let Some(r) = run_ok(
        // f32 up, denormals flushed (FP_DENORM[1:0] = 0).
        "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 8), 0x01\n\
         v_mul_f32 v2, v0, v1\n\
         v_mul_f32 v3, v4, v4\n\
         s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 8), 0x31\n\
         v_mul_f32 v5, v0, v1\n\
         v_mul_f32 v6, v4, v4\n\
         s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 8), 0x32\n\
         v_mul_f32 v7, v4, v4\n\
         s_endpgm",
        |w, _| {
            w.vgpr[0] = [tiny.to_bits(); 64];
            w.vgpr[1] = [0.75f32.to_bits(); 64];
            // 2^-80 squared is 2^-160: below the denormals, not zero.
            w.vgpr[4] = [2f32.powi(-80).to_bits(); 64];
        },
    ) else {
        return;
    };
    let v = |n: usize| r.wave.vgpr[n][0];
    assert_eq!(
        v(2),
        0,
        "a flushed denormal input times 0.75 is +0, up or not"
    );
    assert_eq!(
        v(3),
        0,
        "2^-160 rounded up is 2^-149, flushed as a denormal result"
    );
    assert_eq!(v(5), 1, "kept denormals: 0.75·2^-149 rounds up to 2^-149");
    assert_eq!(v(6), 1, "kept denormals: 2^-160 rounds up to 2^-149");
    assert_eq!(v(7), 0, "toward −∞ the positive 2^-160 is +0");
}

/// The non-fused and fused multiply-adds differ by their roundings: `v_mad_f32` rounds the
/// product in the mode first, `v_fma_f32` does not; f16 FMA rounds once (no double rounding
/// through a wider format), and `v_cvt_pkrtz_f16_f32` truncates whatever FP_ROUND says.
#[test]
fn mad_rounds_twice_fma_once_and_pkrtz_ignores_the_mode() {
    // (1 + 2^-23)² − 1 = 2^-22 + 2^-46 exactly: fused and rounded up, 2^-22 + 2^-45; the
    // product rounded up first (1 + 2^-22 + 2^-23), then the sum: 2^-22 + 2^-23.
    let a = f32::from_bits(0x3f80_0001);
    let Some(r) = run_on(
        Target::Gfx908,
        "gfx908",
        "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0x5\n\
         v_mad_f32 v3, v0, v0, v1\n\
         v_fma_f32 v4, v0, v0, v1\n\
         v_fma_f16 v5, v6, v7, v8\n\
         v_cvt_pkrtz_f16_f32 v9, v10, v10\n\
         s_endpgm",
        |w, _| {
            w.hwreg[1] = MODE_IEEE;
            w.vgpr[0] = [a.to_bits(); 64];
            w.vgpr[1] = [(-1.0f32).to_bits(); 64];
            // f16: (1 + 2^-10)² + 2^-20 = 1 + 2^-9 + 2^-19 exactly: nearest 1 + 2^-9
            // (0x3c02), up 0x3c03.
            w.vgpr[6] = [0x3c01; 64];
            w.vgpr[7] = [0x3c01; 64];
            w.vgpr[8] = [0x0010; 64]; // 2^-20 (an f16 denormal: 16 · 2^-24)
            // 1.0005: nearest and up 0x3c01 in f16, truncated 0x3c00.
            w.vgpr[10] = [1.0005f32.to_bits(); 64];
        },
    ) else {
        return;
    };
    assert_eq!(r.end, Ok(Flow::End));
    // Mode 0x5: f32 and f16/f64 toward +∞.
    let v = |n: usize| r.wave.vgpr[n][0];
    assert_eq!(f32::from_bits(v(3)), 2f32.powi(-22) + 2f32.powi(-23), "mad");
    assert_eq!(f32::from_bits(v(4)), 2f32.powi(-22) + 2f32.powi(-45), "fma");
    assert_eq!(v(5) & 0xffff, 0x3c03, "f16 fma rounded up once");
    assert_eq!(v(9), 0x3c00_3c00, "pkrtz truncates");
}

/// Division as clang emits it (`v_div_scale`, `v_rcp`, Newton-Raphson FMAs, `v_div_fmas`,
/// `v_div_fixup`; the sequences of `tests/exec_valu.rs`), run in each rounding mode: the
/// final `v_div_fmas` rounds the exact corrected quotient once in the mode, so the quotient
/// is the host's `divss`/`divsd` under the same rounding (what ocml's `__fdiv_ru` and
/// friends rely on when they switch MODE around a division) — except where the guide's
/// V_DIV_FIXUP pseudo-code declares an underflow (exponent difference below −150 / −1075):
/// a zero of the quotient's sign in every mode, where the host rounds up to a denormal.
#[cfg(target_arch = "x86_64")]
#[test]
fn division_as_clang_emits_it_rounds_in_every_mode() {
    let f32_asm = "s_setreg_b32 hwreg(HW_REG_MODE), s0\n\
               v_div_scale_f32 v3, s[4:5], v1, v1, v0\n\
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
    let f64_asm = "s_setreg_b32 hwreg(HW_REG_MODE), s0\n\
               v_div_scale_f64 v[6:7], s[4:5], v[4:5], v[4:5], v[2:3]\n\
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
    let (Some(c32), Some(c64)) = (assemble(f32_asm), assemble(f64_asm)) else {
        return;
    };
    let mut rng = Rng(0x6469_7669_6465_2121);
    let mut wrong = Vec::new();
    let mut underflows = 0;
    for r in 0..4u32 {
        for _ in 0..20 {
            let a: Vec<u32> = (0..64).map(|_| rng.f32()).collect();
            let b: Vec<u32> = a.iter().map(|&x| rng.f32_near(x)).collect();
            let w = run_code(&c32, |w| {
                w.sgpr[0] = mode(r);
                w.vgpr[0][..].copy_from_slice(&a);
                w.vgpr[1][..].copy_from_slice(&b);
            });
            for l in 0..64 {
                let (p, q) = (f32::from_bits(a[l]), f32::from_bits(b[l]));
                let exp = |x: u32| (x >> 23 & 0xff) as i32;
                let want = if exp(a[l]) - exp(b[l]) < -150 && p != 0.0 && q.is_finite() {
                    underflows += 1;
                    (0.0f32).copysign(p / q)
                } else {
                    oracle::div32(r, p, q)
                };
                if !same(w.vgpr[2][l].into(), want.to_bits().into(), |x| {
                    f32::from_bits(x as u32).is_nan()
                }) {
                    wrong.push(format!(
                        "f32 mode {r}: {:#x} / {:#x} = {:#x}, host {:#x}",
                        a[l],
                        b[l],
                        w.vgpr[2][l],
                        want.to_bits()
                    ));
                }
            }
            let a: Vec<u64> = (0..64).map(|_| rng.f64()).collect();
            let b: Vec<u64> = a.iter().map(|&x| rng.f64_near(x)).collect();
            let w = run_code(&c64, |w| {
                w.sgpr[0] = mode(r);
                for l in 0..64 {
                    w.vgpr[2][l] = a[l] as u32;
                    w.vgpr[3][l] = (a[l] >> 32) as u32;
                    w.vgpr[4][l] = b[l] as u32;
                    w.vgpr[5][l] = (b[l] >> 32) as u32;
                }
            });
            for l in 0..64 {
                let got = u64::from(w.vgpr[0][l]) | u64::from(w.vgpr[1][l]) << 32;
                let (p, q) = (f64::from_bits(a[l]), f64::from_bits(b[l]));
                let exp = |x: u64| (x >> 52 & 0x7ff) as i32;
                let want = if exp(a[l]) - exp(b[l]) < -1075 && p != 0.0 && q.is_finite() {
                    underflows += 1;
                    0.0f64.copysign(p / q)
                } else {
                    oracle::div64(r, p, q)
                };
                if !same(got, want.to_bits(), |x| f64::from_bits(x).is_nan()) {
                    wrong.push(format!(
                        "f64 mode {r}: {:#x} / {:#x} = {got:#x}, host {:#x}",
                        a[l],
                        b[l],
                        want.to_bits()
                    ));
                }
            }
        }
    }
    println!("{underflows} of 10240 quotients are the guide's underflow zeros");
    assert!(underflows > 0 && underflows < 1000, "{underflows}");
    assert!(
        wrong.is_empty(),
        "{} of 10240 quotients differ:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}
