//! The gfx90a matrix multiplies (`v_mfma_*`) against `D = A·B + C` computed in Rust, with
//! the operands placed where AMD's Matrix Instruction Calculator says each element lives
//! (lane and register of A, B, C, D per instruction shape). Values are small integers, so
//! every product and sum is exact in each type and the comparison is bit for bit.

mod common;

use common::run_ok;
use kfd_gfx9::exec::Wave;

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    F32,
    F16,
    Bf16,
    I8,
    F64,
}

impl Ty {
    fn bits(self) -> usize {
        match self {
            Ty::F32 => 32,
            Ty::F16 | Ty::Bf16 => 16,
            Ty::I8 => 8,
            Ty::F64 => 64,
        }
    }
    fn encode(self, v: i32) -> u64 {
        match self {
            Ty::F32 => u64::from((v as f32).to_bits()),
            // Small integers: exact in f16 (the exponent and a 10-bit fraction).
            Ty::F16 => {
                if v == 0 {
                    return 0;
                }
                let (sign, a) = (if v < 0 { 0x8000u64 } else { 0 }, v.unsigned_abs());
                let e = 31 - a.leading_zeros();
                sign | u64::from(e + 15) << 10 | u64::from((a << (10 - e)) & 0x3ff)
            }
            Ty::Bf16 => u64::from((v as f32).to_bits() >> 16),
            Ty::I8 => u64::from(v as i8 as u8),
            Ty::F64 => (v as f64).to_bits(),
        }
    }
}

/// Input element (block b, row-or-column i, k): (lane, element within the lane's registers).
/// Each lane holds E = K·M·B/64 consecutive k values; blocks then k-groups step the lanes.
fn input_at(m: usize, k_dim: usize, blocks: usize, b: usize, i: usize, k: usize) -> (usize, usize) {
    let e = k_dim * m * blocks / 64;
    (b * m + (k / e) * m * blocks + i, k % e)
}

/// Output element (b, i, j): (lane, register or register pair).
fn output_at(m: usize, n: usize, wide: bool, b: usize, i: usize, j: usize) -> (usize, usize) {
    let h = if wide { 1 } else { 4 };
    let per_reg = 64 / n;
    let bpr = 64usize.div_ceil(m * n / h);
    let reg = b * (m * n / 64) + i / (h * per_reg) * h + i % h;
    (((b % bpr) * n + (i / h % per_reg) * bpr * n + j), reg)
}

#[test]
fn the_layout_matches_the_calculators_published_points() {
    // v_mfma_f32_16x16x16f16: A[0][4] is in lane 16 (first f16 of the lane), A[0][1] in
    // lane 0's second f16.
    assert_eq!(input_at(16, 16, 1, 0, 0, 4), (16, 0));
    assert_eq!(input_at(16, 16, 1, 0, 0, 1), (0, 1));
    // v_mfma_f32_32x32x8f16: D[8·(r/4) + 4·(l/32) + r%4][l%32] is register r of lane l.
    for l in 0..64 {
        for r in 0..16 {
            let (i, j) = (8 * (r / 4) + 4 * (l / 32) + r % 4, l % 32);
            assert_eq!(output_at(32, 32, false, 0, i, j), (l, r));
        }
    }
    // v_mfma_f32_4x4x1f32 (16 blocks): lane 4b + j, register i.
    assert_eq!(output_at(4, 4, false, 5, 2, 3), (23, 2));
}

/// Runs `asm` (A at v[0:1], B at v[2:3], C and D at `c_base` of VGPRs or AGPRs) and checks
/// every element of D.
#[allow(clippy::too_many_arguments)]
fn check(
    asm: &str,
    m: usize,
    n: usize,
    k_dim: usize,
    blocks: usize,
    ty: Ty,
    agpr: bool,
    c_base: usize,
) {
    let a = |b: usize, i: usize, k: usize| ((b * 7 + i * 3 + k * 5) % 11) as i32 - 5;
    let bm = |b: usize, k: usize, j: usize| ((b * 5 + k * 2 + j * 7) % 9) as i32 - 4;
    let c = |b: usize, i: usize, j: usize| ((b + i * 13 + j * 17) % 23) as i32 - 11;
    let wide = ty == Ty::F64;
    let Some(r) = run_ok(&format!("{asm}\ns_endpgm"), |w: &mut Wave, _| {
        w.hwreg[1] = 0x2f0;
        let mut put = |base: usize, lane: usize, el: usize, v: u64| {
            let bit = el * ty.bits();
            if ty.bits() == 64 {
                w.vgpr[base + bit / 32][lane] = v as u32;
                w.vgpr[base + bit / 32 + 1][lane] = (v >> 32) as u32;
            } else {
                w.vgpr[base + bit / 32][lane] |= (v as u32) << (bit % 32);
            }
        };
        for b in 0..blocks {
            for k in 0..k_dim {
                for i in 0..m {
                    let (lane, el) = input_at(m, k_dim, blocks, b, i, k);
                    put(0, lane, el, ty.encode(a(b, i, k)));
                }
                for j in 0..n {
                    let (lane, el) = input_at(n, k_dim, blocks, b, j, k);
                    put(2, lane, el, ty.encode(bm(b, k, j)));
                }
            }
        }
        let file = if agpr { &mut w.agpr } else { &mut w.vgpr };
        for b in 0..blocks {
            for i in 0..m {
                for j in 0..n {
                    let (lane, reg) = output_at(m, n, wide, b, i, j);
                    let v = c(b, i, j);
                    match ty {
                        Ty::F64 => {
                            let bits = (v as f64).to_bits();
                            file[c_base + 2 * reg][lane] = bits as u32;
                            file[c_base + 2 * reg + 1][lane] = (bits >> 32) as u32;
                        }
                        Ty::I8 => file[c_base + reg][lane] = v as u32,
                        _ => file[c_base + reg][lane] = (v as f32).to_bits(),
                    }
                }
            }
        }
    }) else {
        return;
    };
    let file = if agpr { &r.wave.agpr } else { &r.wave.vgpr };
    for b in 0..blocks {
        for i in 0..m {
            for j in 0..n {
                let want = c(b, i, j) + (0..k_dim).map(|k| a(b, i, k) * bm(b, k, j)).sum::<i32>();
                let (lane, reg) = output_at(m, n, wide, b, i, j);
                let got = match ty {
                    Ty::F64 => {
                        let bits = u64::from(file[c_base + 2 * reg][lane])
                            | u64::from(file[c_base + 2 * reg + 1][lane]) << 32;
                        f64::from_bits(bits)
                    }
                    Ty::I8 => f64::from(file[c_base + reg][lane] as i32),
                    _ => f64::from(f32::from_bits(file[c_base + reg][lane])),
                };
                assert_eq!(
                    got,
                    f64::from(want),
                    "{asm}: D[{b}][{i}][{j}] (lane {lane}, register {reg})"
                );
            }
        }
    }
}

#[test]
fn f32_mfma_with_vgpr_accumulators() {
    check(
        "v_mfma_f32_16x16x4f32 v[4:7], v0, v2, v[4:7]",
        16,
        16,
        4,
        1,
        Ty::F32,
        false,
        4,
    );
    check(
        "v_mfma_f32_32x32x2f32 v[4:19], v0, v2, v[4:19]",
        32,
        32,
        2,
        1,
        Ty::F32,
        false,
        4,
    );
    check(
        "v_mfma_f32_32x32x1f32 v[4:35], v0, v2, v[4:35]",
        32,
        32,
        1,
        2,
        Ty::F32,
        false,
        4,
    );
    check(
        "v_mfma_f32_4x4x1f32 v[4:7], v0, v2, v[4:7]",
        4,
        4,
        1,
        16,
        Ty::F32,
        false,
        4,
    );
}

#[test]
fn f16_and_bf16_mfma_with_agpr_accumulators() {
    check(
        "v_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]",
        32,
        32,
        8,
        1,
        Ty::F16,
        true,
        0,
    );
    check(
        "v_mfma_f32_16x16x16f16 a[0:3], v[0:1], v[2:3], a[0:3]",
        16,
        16,
        16,
        1,
        Ty::F16,
        true,
        0,
    );
    check(
        "v_mfma_f32_4x4x4f16 a[0:3], v[0:1], v[2:3], a[0:3]",
        4,
        4,
        4,
        16,
        Ty::F16,
        true,
        0,
    );
    check(
        "v_mfma_f32_16x16x8bf16 a[0:3], v0, v2, a[0:3]",
        16,
        16,
        8,
        1,
        Ty::Bf16,
        true,
        0,
    );
    check(
        "v_mfma_f32_32x32x8bf16_1k a[0:15], v[0:1], v[2:3], a[0:15]",
        32,
        32,
        8,
        1,
        Ty::Bf16,
        true,
        0,
    );
}

#[test]
fn i8_and_f64_mfma() {
    check(
        "v_mfma_i32_16x16x16i8 a[0:3], v0, v2, a[0:3]",
        16,
        16,
        16,
        1,
        Ty::I8,
        true,
        0,
    );
    check(
        "v_mfma_i32_32x32x4i8 a[0:31], v0, v2, a[0:31]",
        32,
        32,
        4,
        2,
        Ty::I8,
        true,
        0,
    );
    check(
        "v_mfma_f64_16x16x4f64 v[4:11], v[0:1], v[2:3], v[4:11]",
        16,
        16,
        4,
        1,
        Ty::F64,
        false,
        4,
    );
    check(
        "v_mfma_f64_4x4x4f64 v[4:5], v[0:1], v[2:3], v[4:5]",
        4,
        4,
        4,
        4,
        Ty::F64,
        false,
        4,
    );
}

#[test]
fn an_inline_constant_accumulator_and_unimplemented_broadcasts() {
    // C = 0 in every element: D = A·B.
    let Some(r) = run_ok("v_mfma_f32_4x4x1f32 v[4:7], v0, v2, 0\ns_endpgm", |w, _| {
        for l in 0..64 {
            w.vgpr[0][l] = (l as f32).to_bits();
            w.vgpr[2][l] = 2.0f32.to_bits();
        }
    }) else {
        return;
    };
    // Block b, D[i][j] = A[i]·B[j] = (4b + i)·2, at lane 4b + j, register i.
    for l in 0..64 {
        for i in 0..4 {
            let b = l / 4;
            assert_eq!(
                f32::from_bits(r.wave.vgpr[4 + i][l]),
                ((4 * b + i) * 2) as f32
            );
        }
    }
    let r = common::run(
        "v_mfma_f32_4x4x1f32 v[4:7], v0, v2, 0 cbsz:1 abid:1\ns_endpgm",
        |_, _| {},
    );
    if let Some(r) = r {
        assert!(
            matches!(r.end, Err(kfd_gfx9::exec::ExecError::Unimplemented { .. })),
            "{:?}",
            r.end
        );
    }
}

#[test]
fn gfx908_mfma_accumulates_in_agprs_without_an_acc_cd_bit() {
    // Found by the kernel corpus (tests/corpus.rs, mfma on gfx908): gfx908's encoding has no
    // ACC_CD bit — its SrcC and VDST are always AccVGPRs — and the result went to v[0:3].
    // v_mfma_f32_4x4x1f32: block b, D[i][j] = C + A[i]·B[j] at lane 4b + j, register i.
    let Some(r) = common::run_on(
        kfd_gfx9::exec::Target::Gfx908,
        "gfx908",
        "v_mfma_f32_4x4x1f32 a[0:3], v10, v11, a[0:3]\ns_endpgm",
        |w, _| {
            for l in 0..64 {
                w.vgpr[10][l] = (l as f32).to_bits();
                w.vgpr[11][l] = 2.0f32.to_bits();
                for i in 0..4 {
                    w.agpr[i][l] = 1.0f32.to_bits();
                    w.vgpr[i][l] = 0xdead;
                }
            }
        },
    ) else {
        return;
    };
    assert_eq!(r.end, Ok(kfd_gfx9::exec::Flow::End));
    for l in 0..64 {
        for i in 0..4 {
            let b = l / 4;
            assert_eq!(
                f32::from_bits(r.wave.agpr[i][l]),
                ((4 * b + i) * 2 + 1) as f32,
                "lane {l} a{i}"
            );
            assert_eq!(r.wave.vgpr[i][l], 0xdead, "lane {l} v{i} untouched");
        }
    }
}
