//! The gfx90a matrix multiplies (`v_mfma_*`) against `D = A·B + C` computed in Rust, with
//! the operands placed where AMD's Matrix Instruction Calculator says each element lives
//! (lane and register of A, B, C, D per instruction shape). Values are small integers, so
//! every product and sum is exact in each type and the comparison is bit for bit. The
//! broadcast controls (CBSZ/ABID on A, BLGP on B; gfx942's f64 negation bits) are checked
//! the same way, the expected D built from the calculator's transformation rules.

mod common;

use common::run_ok;
use kfd_gfx9::exec::{Target, Wave};

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

/// The broadcast controls an MFMA runs with, and the target: the expected D reads A from
/// block `(b >> cbsz << cbsz) + abid` and B from the lane [`blgp_lane`] names, negated per
/// `neg` (gfx942's f64 BLGP bits: A, B, C) — AMD's Matrix Instruction Calculator,
/// `_get_cbsz_abid_transformed_block` / `_get_blgp_transformed_lane`.
#[derive(Clone, Copy)]
struct Ctl {
    cbsz: usize,
    abid: usize,
    blgp: usize,
    neg: u8,
    target: Target,
    mcpu: &'static str,
}

const PLAIN: Ctl = Ctl {
    cbsz: 0,
    abid: 0,
    blgp: 0,
    neg: 0,
    target: Target::Gfx90a,
    mcpu: "gfx90a",
};

/// The calculator's BLGP table, case by case: 1 broadcasts lanes 0-31, 2 lanes 32-63,
/// 3 rotates down by 16, 4..7 broadcast the 1st..4th group of 16 lanes.
fn blgp_lane(lane: usize, blgp: usize) -> usize {
    match blgp {
        1 => lane % 32,
        2 if lane < 32 => lane + 32,
        3 => (lane + 16) % 64,
        4 => lane % 16,
        5 if lane < 16 => lane + 16,
        5 if lane >= 48 => lane - 32,
        5 if lane >= 32 => lane - 16,
        6 if lane >= 48 => lane - 16,
        6 if lane < 16 => lane + 32,
        6 if lane < 32 => lane + 16,
        7 => lane + (3 - lane / 16) * 16,
        _ => lane,
    }
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
    check_with(asm, m, n, k_dim, blocks, ty, agpr, c_base, PLAIN);
}

/// As [`check`], with broadcast controls.
#[allow(clippy::too_many_arguments)]
fn check_with(
    asm: &str,
    m: usize,
    n: usize,
    k_dim: usize,
    blocks: usize,
    ty: Ty,
    agpr: bool,
    c_base: usize,
    ctl: Ctl,
) {
    let a = |b: usize, i: usize, k: usize| ((b * 7 + i * 3 + k * 5) % 11) as i32 - 5;
    let bm = |b: usize, k: usize, j: usize| ((b * 5 + k * 2 + j * 7) % 9) as i32 - 4;
    let c = |b: usize, i: usize, j: usize| ((b + i * 13 + j * 17) % 23) as i32 - 11;
    // B as stored: lane, element → value (BLGP reads another lane's).
    let e_b = k_dim * n * blocks / 64;
    let mut b_stored = vec![vec![0i32; e_b]; 64];
    for b in 0..blocks {
        for k in 0..k_dim {
            for j in 0..n {
                let (lane, el) = input_at(n, k_dim, blocks, b, j, k);
                b_stored[lane][el] = bm(b, k, j);
            }
        }
    }
    let sign = |bit: u8| if ctl.neg >> bit & 1 == 1 { -1 } else { 1 };
    let a_eff =
        |b: usize, i: usize, k: usize| sign(0) * a((b >> ctl.cbsz << ctl.cbsz) + ctl.abid, i, k);
    let b_eff = |b: usize, k: usize, j: usize| {
        let (lane, el) = input_at(n, k_dim, blocks, b, j, k);
        sign(1) * b_stored[blgp_lane(lane, ctl.blgp)][el]
    };
    let wide = ty == Ty::F64;
    let Some(r) = common::run_on(
        ctl.target,
        ctl.mcpu,
        &format!("{asm}\ns_endpgm"),
        |w: &mut Wave, _| {
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
        },
    ) else {
        return;
    };
    assert_eq!(r.end, Ok(kfd_gfx9::exec::Flow::End), "{asm}");
    let file = if agpr { &r.wave.agpr } else { &r.wave.vgpr };
    for b in 0..blocks {
        for i in 0..m {
            for j in 0..n {
                let want = sign(2) * c(b, i, j)
                    + (0..k_dim)
                        .map(|k| a_eff(b, i, k) * b_eff(b, k, j))
                        .sum::<i32>();
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
fn an_inline_constant_accumulator_and_a_broadcast_from_a_missing_block() {
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
    // CBSZ larger than the block count allows names a block that does not exist.
    let r = common::run(
        "v_mfma_f32_16x16x4f32 v[4:7], v0, v2, 0 cbsz:1 abid:1\ns_endpgm",
        |_, _| {},
    );
    if let Some(r) = r {
        assert!(
            matches!(r.end, Err(kfd_gfx9::exec::ExecError::Illegal { .. })),
            "{:?}",
            r.end
        );
    }
}

#[test]
fn cbsz_and_abid_broadcast_one_block_of_a_to_its_group() {
    // 2 blocks: both read A from block 1.
    let ctl = Ctl {
        cbsz: 1,
        abid: 1,
        ..PLAIN
    };
    check_with(
        "v_mfma_f32_32x32x1f32 v[4:35], v0, v2, v[4:35] cbsz:1 abid:1",
        32,
        32,
        1,
        2,
        Ty::F32,
        false,
        4,
        ctl,
    );
    // 16 blocks in groups of 4, each from its group's block 3; and groups of 16 from block 9.
    for (cbsz, abid) in [(2, 3), (4, 9), (1, 0)] {
        check_with(
            &format!("v_mfma_f32_4x4x1f32 v[4:7], v0, v2, v[4:7] cbsz:{cbsz} abid:{abid}"),
            4,
            4,
            1,
            16,
            Ty::F32,
            false,
            4,
            Ctl {
                cbsz,
                abid,
                ..PLAIN
            },
        );
    }
    // Packed f16 inputs: 4 blocks, pairs from block 1 of each pair.
    check_with(
        "v_mfma_f32_16x16x4f16 a[0:15], v[0:1], v[2:3], a[0:15] cbsz:1 abid:1",
        16,
        16,
        4,
        4,
        Ty::F16,
        true,
        0,
        Ctl {
            cbsz: 1,
            abid: 1,
            ..PLAIN
        },
    );
}

#[test]
fn blgp_permutes_the_lanes_b_is_read_from() {
    for blgp in 1..8 {
        check_with(
            &format!("v_mfma_f32_4x4x1f32 v[4:7], v0, v2, v[4:7] blgp:{blgp}"),
            4,
            4,
            1,
            16,
            Ty::F32,
            false,
            4,
            Ctl { blgp, ..PLAIN },
        );
        check_with(
            &format!("v_mfma_i32_16x16x16i8 a[0:3], v0, v2, a[0:3] blgp:{blgp}"),
            16,
            16,
            16,
            1,
            Ty::I8,
            true,
            0,
            Ctl { blgp, ..PLAIN },
        );
    }
    // All three together.
    check_with(
        "v_mfma_f32_4x4x1f32 v[4:7], v0, v2, v[4:7] cbsz:3 abid:5 blgp:6",
        4,
        4,
        1,
        16,
        Ty::F32,
        false,
        4,
        Ctl {
            cbsz: 3,
            abid: 5,
            blgp: 6,
            ..PLAIN
        },
    );
}

#[test]
fn gfx942_f64_mfma_blgp_bits_negate_a_b_and_c() {
    let gfx942 = Ctl {
        target: kfd_gfx9::exec::Target::Gfx942,
        mcpu: "gfx942",
        ..PLAIN
    };
    for neg in [1u8, 2, 4, 5, 7] {
        let bits = format!("{},{},{}", neg & 1, neg >> 1 & 1, neg >> 2 & 1);
        check_with(
            &format!("v_mfma_f64_4x4x4_4b_f64 v[4:5], v[0:1], v[2:3], v[4:5] neg:[{bits}]"),
            4,
            4,
            4,
            4,
            Ty::F64,
            false,
            4,
            Ctl { neg, ..gfx942 },
        );
        check_with(
            &format!("v_mfma_f64_16x16x4_f64 v[4:11], v[0:1], v[2:3], v[4:11] neg:[{bits}]"),
            16,
            16,
            4,
            1,
            Ty::F64,
            false,
            4,
            Ctl { neg, ..gfx942 },
        );
    }
    // gfx90a's f64 MFMAs have no BLGP: the same bits are an illegal instruction there.
    let r = common::run(
        "v_mfma_f64_4x4x4f64 v[4:5], v[0:1], v[2:3], v[4:5] blgp:1\ns_endpgm",
        |_, _| {},
    );
    if let Some(r) = r {
        assert!(
            matches!(r.end, Err(kfd_gfx9::exec::ExecError::Illegal { .. })),
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
