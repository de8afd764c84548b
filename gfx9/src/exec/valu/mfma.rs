//! The matrix multiplies of gfx90a (VOP3P-MAI `v_mfma_*`, "AMD Instinct MI200 ISA" chapter 7
//! "Matrix Arithmetic Instructions"): `D = A·B + C` for B independent blocks of an M×K by
//! K×N product, the operands spread over the wave's 64 lanes.
//!
//! Where each element lives (the layout AMD's Matrix Instruction Calculator computes for
//! gfx9, `matrix_calculator.py`, `__get_input_reg_lanes` / `__get_output_reg_lanes`):
//! - A (and B, with N and j for M and i): each lane holds `E = K·M·B/64` consecutive k
//!   elements packed in consecutive registers (element e at bits `e·width..`); element
//!   (b, i, k) is in lane `b·M + (k / E)·M·B + i`, element `k % E`.
//! - C and D: 32-bit results in groups of 4 rows (64-bit: 1 row) by N lanes; element
//!   (b, i, j) is in register `b·(M·N/64) + (i / (h·64/N))·h + i % h` (h = 4, or 1 for f64,
//!   counting register pairs) of lane `(b % bpr)·N + ((i / h) % (64/N))·bpr·N + j`, with
//!   `bpr = ceil(64 / (M·N/h))` blocks per register.
//!
//! Arithmetic: f32, f16 and bf16 products are exact in f64 and each result element is
//! `C + Σ` summed in f64 in k order, rounded once to f32 (the hardware's internal rounding of
//! the dot product is not specified bit for bit); f64 is a chain of FMAs in k order starting
//! from C; i8 products sum in wrapping 32-bit integers. Denormals are kept. Every lane is
//! computed whatever EXEC says (the matrix is the wave's, not a lane's).
//!
//! The broadcast controls (the MI200 guide's VOP3P-MAI fields; their effect as the
//! calculator's `_get_cbsz_abid_transformed_block` and `_get_blgp_transformed_lane` give it):
//! - CBSZ/ABID: block `b` reads its A from block `(b >> CBSZ << CBSZ) + ABID` — one block of
//!   A broadcast to each aligned group of 2^CBSZ blocks. CBSZ above log2(blocks) or ABID of
//!   2^CBSZ or more name a block that does not exist: [`ExecError::Illegal`].
//! - BLGP: the lane B's elements are read from is permuted: 1 lanes 0–31 to both halves,
//!   2 lanes 32–63 to both, 3 rotated down by 16 (lane l reads l + 16 mod 64), 4–7 the
//!   first, second, third or fourth group of 16 lanes to all four.
//! - f64 MFMAs: on gfx942 (the MI300 guide) the three BLGP bits negate A, B and C (LLVM
//!   writes them `neg:[a,b,c]`); gfx90a has no BLGP for them (the calculator refuses it),
//!   so a non-zero one there is [`ExecError::Illegal`].

use super::float::f16_to_f32;
use crate::exec::wave::{ExecError, LANES, Target, Ty, VGPRS, Wave, illegal, unimplemented};
use crate::inst::Inst;
use crate::opcode::Vop3pOp;
use crate::operand::Operand;

/// An input element type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum In {
    F32,
    F16,
    Bf16,
    I8,
    F64,
}

impl In {
    fn bits(self) -> u32 {
        match self {
            In::F32 => 32,
            In::F16 | In::Bf16 => 16,
            In::I8 => 8,
            In::F64 => 64,
        }
    }
}

/// (M, N, K, blocks, input type).
fn shape(op: Vop3pOp) -> Option<(usize, usize, usize, usize, In)> {
    use Vop3pOp::*;
    Some(match op {
        VMfmaF32_32x32x1f32 => (32, 32, 1, 2, In::F32),
        VMfmaF32_16x16x1f32 => (16, 16, 1, 4, In::F32),
        VMfmaF32_4x4x1f32 => (4, 4, 1, 16, In::F32),
        VMfmaF32_32x32x2f32 => (32, 32, 2, 1, In::F32),
        VMfmaF32_16x16x4f32 => (16, 16, 4, 1, In::F32),
        VMfmaF32_32x32x4f16 => (32, 32, 4, 2, In::F16),
        VMfmaF32_16x16x4f16 => (16, 16, 4, 4, In::F16),
        VMfmaF32_4x4x4f16 => (4, 4, 4, 16, In::F16),
        VMfmaF32_32x32x8f16 => (32, 32, 8, 1, In::F16),
        VMfmaF32_16x16x16f16 => (16, 16, 16, 1, In::F16),
        VMfmaI32_32x32x4i8 => (32, 32, 4, 2, In::I8),
        VMfmaI32_16x16x4i8 => (16, 16, 4, 4, In::I8),
        VMfmaI32_4x4x4i8 => (4, 4, 4, 16, In::I8),
        VMfmaI32_32x32x8i8 => (32, 32, 8, 1, In::I8),
        VMfmaI32_16x16x16i8 => (16, 16, 16, 1, In::I8),
        VMfmaF32_32x32x4bf16_1k => (32, 32, 4, 2, In::Bf16),
        VMfmaF32_16x16x4bf16_1k => (16, 16, 4, 4, In::Bf16),
        VMfmaF32_4x4x4bf16_1k => (4, 4, 4, 16, In::Bf16),
        VMfmaF32_32x32x8bf16_1k => (32, 32, 8, 1, In::Bf16),
        VMfmaF32_16x16x16bf16_1k => (16, 16, 16, 1, In::Bf16),
        VMfmaF32_32x32x2bf16 => (32, 32, 2, 2, In::Bf16),
        VMfmaF32_16x16x2bf16 => (16, 16, 2, 4, In::Bf16),
        VMfmaF32_4x4x2bf16 => (4, 4, 2, 16, In::Bf16),
        VMfmaF32_32x32x4bf16 => (32, 32, 4, 1, In::Bf16),
        VMfmaF32_16x16x8bf16 => (16, 16, 8, 1, In::Bf16),
        VMfmaF64_16x16x4f64 => (16, 16, 4, 1, In::F64),
        VMfmaF64_4x4x4f64 => (4, 4, 4, 4, In::F64),
        _ => return None,
    })
}

/// The lane and element number of input element (block, row-or-column, k).
pub(super) fn input_at(
    m: usize,
    k_dim: usize,
    blocks: usize,
    b: usize,
    i: usize,
    k: usize,
) -> (usize, usize) {
    let e = k_dim * m * blocks / LANES;
    (b * m + (k / e) * m * blocks + i, k % e)
}

/// The lane and element (register, or register pair for 64-bit results) of output element
/// (block, i, j).
pub(super) fn output_at(
    m: usize,
    n: usize,
    wide: bool,
    b: usize,
    i: usize,
    j: usize,
) -> (usize, usize) {
    let h = if wide { 1 } else { 4 };
    let per_reg = LANES / n;
    let bpr = LANES.div_ceil(m * n / h);
    let reg = b * (m * n / LANES) + i / (h * per_reg) * h + i % h;
    let lane = (b % bpr) * n + (i / h % per_reg) * bpr * n + j;
    (lane, reg)
}

/// The lane B's element is read from under BLGP `blgp` for the lane `lane` holds it in
/// without (the calculator's `_get_blgp_transformed_lane`).
fn blgp_lane(lane: usize, blgp: u8) -> usize {
    match blgp {
        1 => lane % 32,
        2 => lane % 32 + 32,
        3 => (lane + 16) % 64,
        4..=7 => lane % 16 + 16 * usize::from(blgp - 4),
        _ => lane,
    }
}

/// The register file an MFMA operand names: AGPRs when its ACC bit says so.
fn file(w: &Wave, agpr: bool) -> &Vec<[u32; LANES]> {
    if agpr { &w.agpr } else { &w.vgpr }
}

/// Executes one `v_mfma_*`.
pub(super) fn execute(w: &mut Wave, inst: &Inst, pc: u64, op: Vop3pOp) -> Result<(), ExecError> {
    let Some((m, n, k_dim, blocks, ty)) = shape(op) else {
        return Err(unimplemented(inst, pc));
    };
    let wide = ty == In::F64;
    let imm = inst.imm as u32;
    let (cbsz, abid, blgp) = (imm & 7, imm >> 3 & 15, imm >> 7 & 7);
    if cbsz > blocks.trailing_zeros() || abid >> cbsz != 0 {
        return Err(illegal(
            inst,
            pc,
            "an MFMA broadcast from a block that does not exist",
        ));
    }
    // f64: BLGP is gfx942's negation of A, B, C.
    let (blgp, neg) = if wide {
        if blgp != 0 && w.target != Target::Gfx942 {
            return Err(illegal(inst, pc, "BLGP on an f64 MFMA before gfx942"));
        }
        (0, blgp)
    } else {
        (blgp, 0)
    };
    let a_block = |b: usize| (b >> cbsz << cbsz) + abid as usize;
    let b_lane = |l: usize| blgp_lane(l, blgp as u8);
    let sign = |x: f64, bit: u32| if neg >> bit & 1 == 1 { -x } else { x };
    let e = k_dim * m * blocks / LANES;
    let in_regs = (e * ty.bits() as usize).div_ceil(32);
    let out_elems = m * n * blocks / LANES;
    let out_regs = out_elems * if wide { 2 } else { 1 };
    let reg = |op: Operand, count: usize| -> Result<usize, ExecError> {
        match op {
            Operand::Vgpr(r) if usize::from(r) + count <= VGPRS => Ok(usize::from(r)),
            _ => Err(illegal(
                inst,
                pc,
                "an MFMA operand that is not a register range",
            )),
        }
    };
    let (a0, b0) = (reg(inst.src[0], in_regs)?, reg(inst.src[1], in_regs)?);
    let d0 = reg(inst.dst[0], out_regs)?;
    let acc = inst.mods.op_sel_hi;
    let (fa, fb) = (file(w, acc & 1 == 1), file(w, acc & 2 == 2));
    // Element `el` of the packed input at register `base` in `lane`.
    let element = |f: &Vec<[u32; LANES]>, base: usize, lane: usize, el: usize| -> f64 {
        let bits = ty.bits() as usize;
        let lo = el * bits;
        let word = |r: usize| u64::from(f[base + r][lane]);
        let raw = if bits == 64 {
            word(lo / 32) | word(lo / 32 + 1) << 32
        } else {
            word(lo / 32) >> (lo % 32) & ((1u64 << bits) - 1)
        };
        match ty {
            In::F32 => f64::from(f32::from_bits(raw as u32)),
            In::F16 => f64::from(f16_to_f32(raw as u16)),
            In::Bf16 => f64::from(f32::from_bits((raw as u32) << 16)),
            In::I8 => f64::from(raw as u8 as i8),
            In::F64 => f64::from_bits(raw),
        }
    };
    // C and D: in AGPRs with ACC_CD (gfx90a/gfx942). gfx908's MFMA has no ACC_CD bit: its
    // SrcC and VDST are always AccVGPRs (the MI100 guide's matrix instructions; LLVM 19
    // gives gfx908's MAI operands AGPR register classes and encodes no ACC_CD).
    let cd_acc = inst.mods.acc || w.target == Target::Gfx908;
    // C: a register range of VDST's file, or an inline constant in every element.
    let c_file = file(w, cd_acc);
    let c_at = |lane: usize, el: usize| -> Result<u64, ExecError> {
        Ok(match inst.src[2] {
            Operand::Vgpr(r) => {
                let r = usize::from(r);
                if r + out_regs > VGPRS {
                    return Err(illegal(
                        inst,
                        pc,
                        "an MFMA accumulator past the last register",
                    ));
                }
                if wide {
                    u64::from(c_file[r + 2 * el][lane])
                        | u64::from(c_file[r + 2 * el + 1][lane]) << 32
                } else {
                    u64::from(c_file[r + el][lane])
                }
            }
            other => {
                let ty = if wide { Ty::F64 } else { Ty::B32 };
                if wide {
                    w.read_scalar64(other, ty)
                } else {
                    w.read_scalar32(other, ty).map(u64::from)
                }
                .ok_or_else(|| illegal(inst, pc, "an MFMA accumulator that is not readable"))?
            }
        })
    };
    let mut out = vec![[0u32; LANES]; out_regs];
    for b in 0..blocks {
        for i in 0..m {
            for j in 0..n {
                let (lane, el) = output_at(m, n, wide, b, i, j);
                let c = c_at(lane, el)?;
                let terms = (0..k_dim).map(|k| {
                    let (la, ea) = input_at(m, k_dim, blocks, a_block(b), i, k);
                    let (lb, eb) = input_at(n, k_dim, blocks, b, j, k);
                    (
                        sign(element(fa, a0, la, ea), 0),
                        sign(element(fb, b0, b_lane(lb), eb), 1),
                    )
                });
                let d = match ty {
                    In::F64 => terms
                        .fold(sign(f64::from_bits(c), 2), |acc, (x, y)| x.mul_add(y, acc))
                        .to_bits(),
                    In::I8 => u64::from(terms.fold(c as u32 as i32, |acc, (x, y)| {
                        acc.wrapping_add((x * y) as i32)
                    }) as u32),
                    _ => {
                        let sum = terms.fold(f64::from(f32::from_bits(c as u32)), |acc, (x, y)| {
                            acc + x * y
                        });
                        u64::from((sum as f32).to_bits())
                    }
                };
                if wide {
                    out[2 * el][lane] = d as u32;
                    out[2 * el + 1][lane] = (d >> 32) as u32;
                } else {
                    out[el][lane] = d as u32;
                }
            }
        }
    }
    let dst = if cd_acc { &mut w.agpr } else { &mut w.vgpr };
    for (r, values) in out.into_iter().enumerate() {
        dst[d0 + r] = values;
    }
    Ok(())
}
