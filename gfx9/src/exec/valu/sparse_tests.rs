//! The few-lanes path ([`super::SPARSE_LANES`]) against the 64-lane array path: every VOP1,
//! VOP2, VOPC, VOP3 and VOP3P opcode, in its 32-bit, VOP3 and SDWA forms, on random sources
//! (VGPRs holding denormals, NaNs, infinities and random bits; SGPRs, inline constants,
//! literals), random modifiers (abs, neg, omod, clamp, op_sel, SDWA selects), random MODE
//! registers and EXEC masks of 0 to 8 lanes. Both runs must give the same result (an error
//! included) and leave the waves equal; most cases must take the few-lanes path (the
//! `map`-style operations), or this would test nothing.

use super::{SPARSE_RUNS, general_with};
use crate::exec::wave::{Target, Wave};
use crate::inst::{Inst, Modifiers};
use crate::opcode::{Encoding, Opcode, Vop1Op, Vop2Op, Vop3Op, Vop3pOp, VopcOp};
use crate::operand::{FloatConst, Operand, Special};
use std::cell::Cell;

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
    /// A 32-bit value, often an interesting float (f32 or f16 halves).
    fn value(&mut self) -> u32 {
        const SPECIAL: [u32; 14] = [
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
            0x3c00_0001,
            0x7e00_fc00,
        ];
        if self.below(4) == 0 {
            SPECIAL[self.below(SPECIAL.len() as u64) as usize]
        } else {
            self.next() as u32
        }
    }
    fn source(&mut self) -> Operand {
        match self.below(9) {
            0 => Operand::Sgpr(self.below(16) as u8),
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
            4 => Operand::Special(Special::VccLo),
            _ => Operand::Vgpr(self.below(10) as u8),
        }
    }
    /// An EXEC mask of 0 to 8 random lanes.
    fn few_lanes(&mut self) -> u64 {
        let mut m = 0;
        for _ in 0..self.below(9) {
            m |= 1u64 << self.below(64);
        }
        m
    }
}

fn wave(rng: &mut Rng) -> Wave {
    let mut w = Wave::new(Target::Gfx90a, 0x1000);
    for r in w.vgpr.iter_mut().take(12) {
        for v in r.iter_mut() {
            *v = rng.value();
        }
    }
    for r in w.agpr.iter_mut().take(4) {
        for v in r.iter_mut() {
            *v = rng.value();
        }
    }
    for s in w.sgpr.iter_mut().take(20) {
        *s = rng.value();
    }
    w.vcc = rng.next();
    w.m0 = rng.value();
    w.exec = rng.few_lanes();
    // FP_ROUND and FP_DENORM (MODE bits 7:0), IEEE and DX10_CLAMP.
    w.hwreg[1] = rng.below(0x400) as u32;
    w
}

/// Whether two register files hold the same values, NaN payloads aside: Rust leaves the
/// payload of an operation on two NaNs unspecified (LLVM may commute `fadd`/`fmul`, and does
/// when it vectorises the 64-lane loop but not the lane-by-lane one), and so does this
/// interpreter (the module docs: "their payloads as Rust's arithmetic propagates them"). A
/// dword matches when equal, when both are f32 NaNs, when each 16-bit half is equal or both
/// f16 NaNs, or when it is the low half of an f64 NaN in both (the next register's high
/// halves both have the f64 NaN/infinity exponent), or both are such high halves.
pub(super) fn same_regs(a: &[[u32; 64]], b: &[[u32; 64]]) -> bool {
    let nan32 = |x: u32| x & 0x7fff_ffff > 0x7f80_0000;
    let nan16 = |x: u32| x & 0x7fff > 0x7c00;
    let hi64 = |x: u32| x & 0x7ff0_0000 == 0x7ff0_0000;
    let half_ok = |x: u32, y: u32| x == y || (nan16(x) && nan16(y));
    a.len() == b.len()
        && (0..a.len()).all(|r| {
            (0..64).all(|l| {
                let (x, y) = (a[r][l], b[r][l]);
                let next = |v: &[[u32; 64]]| v.get(r + 1).map(|n| n[l]);
                x == y
                    || (nan32(x) && nan32(y))
                    || (half_ok(x & 0xffff, y & 0xffff) && half_ok(x >> 16, y >> 16))
                    || (hi64(x) && hi64(y))
                    || next(a)
                        .zip(next(b))
                        .is_some_and(|(p, q)| hi64(p) && hi64(q))
            })
        })
}

fn same(a: &Wave, b: &Wave) -> bool {
    same_regs(&a.vgpr, &b.vgpr)
        && same_regs(&a.agpr, &b.agpr)
        && a.sgpr == b.sgpr
        && a.vcc == b.vcc
        && a.exec == b.exec
        && a.scc == b.scc
        && a.m0 == b.m0
}

/// Runs `cases` random instructions of `op` in `encoding` both ways; returns how many ran
/// without an error.
fn check(op: Opcode, encoding: Encoding, rng: &mut Rng, cases: u32) -> u32 {
    let mut ok = 0;
    for case in 0..cases {
        let vector_dst = rng.below(6) != 0 || encoding == Encoding::Sdwa;
        let mut inst = Inst {
            op,
            encoding,
            dst: [
                if vector_dst {
                    Operand::Vgpr(rng.below(10) as u8)
                } else {
                    Operand::Sgpr(2 * rng.below(6) as u8)
                },
                if rng.below(2) == 0 {
                    Operand::Special(Special::VccLo)
                } else {
                    Operand::Sgpr(2 * rng.below(6) as u8)
                },
            ],
            src: [rng.source(), rng.source(), rng.source()],
            imm: 0,
            mods: Modifiers::default(),
            dwords: 2,
        };
        match encoding {
            Encoding::Vop3a | Encoding::Vop3b | Encoding::Vop3p if rng.below(2) == 0 => {
                inst.mods.abs = rng.below(8) as u8;
                inst.mods.neg = rng.below(8) as u8;
                inst.mods.omod = rng.below(4) as u8;
                inst.mods.clamp = rng.below(2) == 0;
                inst.mods.op_sel = rng.below(16) as u8;
                inst.mods.op_sel_hi = rng.below(8) as u8;
                inst.mods.neg_hi = rng.below(8) as u8;
            }
            Encoding::Sdwa => {
                // DST_SEL, DST_UNUSED, SRC0_SEL, SRC0_SEXT, SRC1_SEL, SRC1_SEXT.
                inst.imm = (rng.below(7)
                    | rng.below(3) << 3
                    | rng.below(7) << 5
                    | rng.below(2) << 8
                    | rng.below(7) << 9
                    | rng.below(2) << 12) as i32;
            }
            _ => {}
        }
        let w0 = wave(rng);
        let (mut a, mut b) = (w0.clone(), w0);
        let sparse = general_with(&mut a, &inst, 0x1000, true);
        let array = general_with(&mut b, &inst, 0x1000, false);
        assert_eq!(sparse, array, "case {case}: {inst:?}");
        assert!(
            same(&a, &b),
            "case {case}: {inst:?} exec {:#x} differs",
            b.exec
        );
        ok += u32::from(array.is_ok());
    }
    ok
}

#[test]
fn sparse_path_equals_the_array_path() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut ok = 0;
    let mut all = 0;
    let mut run = |op: Opcode, encodings: &[Encoding], cases: u32| {
        for &e in encodings {
            ok += check(op, e, &mut rng, cases);
            all += cases;
        }
    };
    for &op in Vop1Op::ALL {
        run(
            Opcode::Vop1(op),
            &[Encoding::Vop1, Encoding::Vop3a, Encoding::Sdwa],
            60,
        );
    }
    for &op in Vop2Op::ALL {
        run(
            Opcode::Vop2(op),
            &[
                Encoding::Vop2,
                Encoding::Vop3a,
                Encoding::Vop3b,
                Encoding::Sdwa,
            ],
            60,
        );
    }
    for &op in VopcOp::ALL {
        run(Opcode::Vopc(op), &[Encoding::Vopc, Encoding::Vop3a], 30);
    }
    for &op in Vop3Op::ALL {
        run(Opcode::Vop3(op), &[Encoding::Vop3a, Encoding::Vop3b], 60);
    }
    for &op in Vop3pOp::ALL {
        run(Opcode::Vop3p(op), &[Encoding::Vop3p], 20);
    }
    // Most random cases are well formed (the others must fail the same way), and most took
    // the few-lanes path.
    assert!(ok > all / 2, "only {ok} of {all} cases ran");
    let sparse = SPARSE_RUNS.with(Cell::get);
    assert!(
        sparse > u64::from(all) / 3,
        "only {sparse} of {all} cases took the few-lanes path"
    );
}

#[test]
fn one_lane_math_takes_the_sparse_path_and_matches() {
    // v_exp_f32 v1, v0 with one lane on: lane 5's result, the others untouched.
    let mut w = Wave::new(Target::Gfx942, 0);
    w.hwreg[1] = 0x3f0;
    w.vgpr[0] = [2.0f32.to_bits(); 64];
    w.vgpr[1] = [7; 64];
    w.exec = 1 << 5;
    let inst = Inst {
        op: Opcode::Vop1(Vop1Op::VExpF32),
        encoding: Encoding::Vop1,
        dst: [Operand::Vgpr(1), Operand::None],
        src: [Operand::Vgpr(0), Operand::None, Operand::None],
        imm: 0,
        mods: Modifiers::default(),
        dwords: 1,
    };
    let before = SPARSE_RUNS.with(Cell::get);
    general_with(&mut w, &inst, 0, true).expect("runs");
    assert_eq!(SPARSE_RUNS.with(Cell::get), before + 1);
    assert_eq!(f32::from_bits(w.vgpr[1][5]), 4.0);
    assert!(w.vgpr[1].iter().enumerate().all(|(l, &v)| l == 5 || v == 7));
}
