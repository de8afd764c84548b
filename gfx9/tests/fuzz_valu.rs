//! Random vector-ALU encodings (VOP2, VOP1, VOPC, VOP3, VOP3P with their DPP/SDWA/MAI forms)
//! executed on a wave of random registers, MODE values and EXEC masks: every one either runs
//! or stops with a typed [`ExecError`], never a panic (the emulator's supervisor must survive
//! any code a program hands the GPU). `KFD_FUZZ_ITERS=N` runs N draws instead.

mod common;

use kfd_gfx9::exec::{CodeCache, Ctx, ExecError, Target, Wave, execute};
use kfd_gfx9::{Opcode, decode};
use kfd_skip::Rng;

const PREFIXES: &[(u32, u32)] = &[
    (0b0, 1),           // VOP2
    (0b011_1111, 7),    // VOP1
    (0b011_1110, 7),    // VOPC
    (0b11_0100, 6),     // VOP3
    (0b1_1010_0111, 9), // VOP3P (and MAI)
];

#[test]
fn random_valu_instructions_run_or_fail_with_a_typed_error() {
    let draws = std::env::var("KFD_FUZZ_ITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let mut rng = Rng(0x7a1a_0000_f00d_cafe);
    let mem = common::TestMemory::with_code(&[0; 16]);
    let mut lds = vec![0u8; 1024];
    let mut cache = CodeCache::new();
    let mut wave = Wave::new(Target::Gfx90a, common::CODE);
    let (mut ran, mut stopped) = (0usize, 0usize);
    for i in 0..draws {
        if i % 256 == 0 {
            // Fresh random registers now and then (the executor reads them all).
            for r in wave.vgpr.iter_mut().chain(wave.agpr.iter_mut()) {
                for v in r.iter_mut() {
                    *v = rng.next() as u32;
                }
            }
            for s in wave.sgpr.iter_mut() {
                *s = rng.next() as u32;
            }
        }
        wave.exec = if rng.chance(20) { rng.next() } else { u64::MAX };
        wave.vcc = rng.next();
        wave.hwreg[1] = rng.next() as u32 & 0x3ff;
        let (value, len) = rng.pick(PREFIXES);
        let low = 32 - len;
        let mut w0 = value << low | (rng.next() as u32 & ((1u32 << low) - 1));
        if w0 >> 31 == 0 && rng.chance(30) {
            w0 = w0 & !0x1ff | if rng.chance(50) { 250 } else { 249 };
        }
        let words = [w0, rng.next() as u32, rng.next() as u32];
        let Ok(inst) = decode(&words) else { continue };
        if !matches!(
            inst.op,
            Opcode::Vop1(_)
                | Opcode::Vop2(_)
                | Opcode::Vopc(_)
                | Opcode::Vop3(_)
                | Opcode::Vop3p(_)
        ) {
            continue;
        }
        let mut ctx = Ctx {
            mem: &mem,
            lds: &mut lds,
            code: &mut cache,
        };
        match execute(&mut wave, &mut ctx, &inst, common::CODE) {
            Ok(_) => ran += 1,
            Err(ExecError::Illegal { .. } | ExecError::Unimplemented { .. }) => stopped += 1,
            Err(other) => panic!("{words:08x?} ({inst:?}): unexpected {other:?}"),
        }
    }
    assert!(
        ran > draws / 4,
        "only {ran} of {draws} ran ({stopped} stopped)"
    );
}
