//! The code cache's plans (`exec::steps`) against the per-step path (`CodeCache::fetch`, then
//! `exec::execute`, which plans nothing): random straight-line programs of the instructions
//! `steps` runs from plans — the 32-bit SOP2 operations, `s_mov_b32`/`s_movk_i32`, the SOPC
//! compares, the SOPP branches, `s_waitcnt`/`s_nop`, the lane-wise VALU operations, the VOPC
//! compares, `v_cndmask_b32` and the carry operations — mixed with what stays on the per-step
//! path or runs by reference (every other SOP2/SOP1/SOPK/SOPC, `s_setreg_b32` of MODE, which
//! can set VSKIP and the float modes between two planned instructions) on random registers,
//! EXEC masks (none, one lane, a few, random, all), VCC, SCC and MODE. Both runs must end with
//! the same outcome and the same wave, register by register. The planned run goes over a
//! cache that has run the program once, so every instruction it reaches is planned before it
//! runs (an inverted `s_cbranch_scc0` plan, or a VALU plan that ignores VSKIP, fails it).
//!
//! And a code write: a loop whose body the program rewrites in memory, then `s_icache_inv`,
//! must run the new instruction on its next pass (`a_plan_follows_a_code_rewrite`).

use kfd_gfx9::asm;
use kfd_gfx9::exec::{
    CodeCache, Ctx, ExecError, Fault, Flow, Memory, Target, Wave, execute, steps,
};
use kfd_gfx9::opcode::{Sop1Op, Sop2Op, SopcOp, SopkOp, SoppOp, Vop1Op, Vop2Op, VopcOp};
use kfd_gfx9::operand::{FloatConst, Operand, Special};
use std::sync::Mutex;

const CODE: u64 = 0x1_0000_0000;

/// Code at [`CODE`], readable and writable.
struct Code(Mutex<Vec<u8>>);

impl Code {
    fn new(words: &[u32]) -> Self {
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.resize(bytes.len().next_multiple_of(4096) + 4096, 0);
        Self(Mutex::new(bytes))
    }
}

impl Memory for Code {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: false };
        let bytes = self.0.lock().map_err(|_| fault)?;
        let off = usize::try_from(addr.checked_sub(CODE).ok_or(fault)?).map_err(|_| fault)?;
        buf.copy_from_slice(bytes.get(off..off + buf.len()).ok_or(fault)?);
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: true };
        let mut bytes = self.0.lock().map_err(|_| fault)?;
        let off = usize::try_from(addr.checked_sub(CODE).ok_or(fault)?).map_err(|_| fault)?;
        bytes
            .get_mut(off..off + data.len())
            .ok_or(fault)?
            .copy_from_slice(data);
        Ok(())
    }
    fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        Err(Fault { addr, write: true })
    }
}

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
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
    /// A 32-bit value, often an interesting float or a small integer.
    fn value(&mut self) -> u32 {
        match self.below(6) {
            0 => self.pick(&[
                0,
                0x8000_0000,
                1,
                0x807f_ffff,
                0x3f80_0000,
                0x7f80_0000,
                0xff80_0000,
                0x7fc0_0001,
                0x7f7f_ffff,
                u32::MAX,
                0x0080_0000,
            ]),
            1 => self.below(8) as u32,
            2 => (self.below(2000) as f32 - 1000.0).to_bits(),
            _ => self.next() as u32,
        }
    }
    /// A scalar source: SGPRs, special registers, ttmps, inline constants, a literal.
    fn scalar(&mut self) -> Operand {
        match self.below(10) {
            0 => Operand::Int(self.below(81) as i8 - 16),
            1 => Operand::Float(self.pick(&[
                FloatConst::Half,
                FloatConst::NegOne,
                FloatConst::Two,
                FloatConst::InvTwoPi,
            ])),
            2 => Operand::Literal(self.value()),
            3 => Operand::Special(self.pick(&[
                Special::VccLo,
                Special::VccHi,
                Special::M0,
                Special::ExecLo,
                Special::ExecHi,
            ])),
            4 => Operand::Ttmp(self.below(4) as u8),
            _ => Operand::Sgpr(self.below(12) as u8),
        }
    }
    /// A VALU src0: a VGPR or a scalar source.
    fn vsrc(&mut self) -> Operand {
        if self.below(2) == 0 {
            Operand::Vgpr(self.below(8) as u8)
        } else {
            self.scalar()
        }
    }
    fn sdst(&mut self) -> Operand {
        match self.below(12) {
            0 => Operand::Special(Special::VccLo),
            1 => Operand::Special(Special::M0),
            _ => Operand::Sgpr(2 * self.below(6) as u8),
        }
    }
}

/// A VOPC instruction (e32: the result in VCC): `op src0, vsrc1`, from a VOP2 encoding of the
/// same operands (VOPC: `0b0111110` in bits 31-25, OP 24-17, VSRC1 16-9, SRC0 8-0).
fn vopc(op: VopcOp, src0: Operand, vsrc1: u8) -> Option<Vec<u32>> {
    let mut w = asm::vop2(Vop2Op::VCndmaskB32, 0, src0, vsrc1).ok()?;
    w[0] = (w[0] & 0x1_ffff) | 0b011_1110 << 25 | u32::from(op.raw()) << 17;
    Some(w)
}

/// Whether an opcode's mnemonic names program control that leaves a straight-line program
/// (a jump, a call, a fork or join, a return) or takes a trailing literal the SOPK encoder
/// does not write.
fn jumps(mnemonic: &str) -> bool {
    ["pc", "fork", "join", "call", "rfe", "imm32"]
        .iter()
        .any(|s| mnemonic.contains(s))
}

/// One random instruction (its words), or `None` when the encoder refuses the operands.
fn instruction(rng: &mut Rng) -> Option<Vec<u32>> {
    use Vop2Op::*;
    let lane2 = [
        VAddF32,
        VSubF32,
        VSubrevF32,
        VMulF32,
        VFmacF32,
        VAddU32,
        VSubU32,
        VXorB32,
        VAndB32,
        VLshlrevB32,
        VAshrrevI32,
        VMinI32,
        VMaxU32,
        VMulU32U24,
    ];
    let lane1 = [
        Vop1Op::VMovB32,
        Vop1Op::VNotB32,
        Vop1Op::VExpF32,
        Vop1Op::VLogF32,
        Vop1Op::VSqrtF32,
        Vop1Op::VRsqF32,
        Vop1Op::VRcpF32,
        Vop1Op::VCvtF32I32,
        Vop1Op::VCvtF32U32,
    ];
    Some(match rng.below(20) {
        0..=2 => {
            let ops: Vec<Sop2Op> = Sop2Op::ALL
                .iter()
                .copied()
                .filter(|o| !jumps(o.mnemonic()))
                .collect();
            asm::sop2(rng.pick(&ops), rng.sdst(), rng.scalar(), rng.scalar()).ok()?
        }
        3 => {
            let ops: Vec<Sop1Op> = Sop1Op::ALL
                .iter()
                .copied()
                .filter(|o| !jumps(o.mnemonic()))
                .collect();
            let op = if rng.below(2) == 0 {
                Sop1Op::SMovB32
            } else {
                rng.pick(&ops)
            };
            asm::sop1(op, rng.sdst(), rng.scalar()).ok()?
        }
        4 => {
            let ops: Vec<SopkOp> = SopkOp::ALL
                .iter()
                .copied()
                .filter(|o| !jumps(o.mnemonic()) && *o != SopkOp::SSetregB32)
                .collect();
            let op = if rng.below(2) == 0 {
                SopkOp::SMovkI32
            } else {
                rng.pick(&ops)
            };
            asm::sopk(op, rng.sdst(), rng.next() as u16).ok()?
        }
        // s_setreg_b32 hwreg(HW_REG_MODE, offset, size), s_n: the float modes, VSKIP,
        // GPR_IDX_EN.
        5 => {
            let (offset, size) = (rng.below(32) as u16, rng.below(32) as u16);
            let simm16 = 1 | offset << 6 | size << 11;
            asm::sopk(
                SopkOp::SSetregB32,
                Operand::Sgpr(rng.below(12) as u8),
                simm16,
            )
            .ok()?
        }
        6..=7 => {
            let op = rng.pick(SopcOp::ALL);
            if op == SopcOp::SSetGprIdxOn {
                return None;
            }
            asm::sopc(op, rng.scalar(), rng.scalar()).ok()?
        }
        8 => asm::sopp(
            rng.pick(&[SoppOp::SNop, SoppOp::SWaitcnt]),
            rng.next() as u16,
        ),
        9..=11 => asm::vop2(
            rng.pick(&lane2),
            rng.below(8) as u8,
            rng.vsrc(),
            rng.below(8) as u8,
        )
        .ok()?,
        12..=13 => asm::vop1(rng.pick(&lane1), rng.below(8) as u8, rng.vsrc()).ok()?,
        14..=15 => vopc(rng.pick(VopcOp::ALL), rng.vsrc(), rng.below(8) as u8)?,
        16 => asm::vop2(
            rng.pick(&[VCndmaskB32, VAddCoU32, VAddcCoU32, VSubCoU32, VSubbrevCoU32]),
            rng.below(8) as u8,
            rng.vsrc(),
            rng.below(8) as u8,
        )
        .ok()?,
        17 => asm::vop3b_from_vop2(
            rng.pick(&[VAddCoU32, VAddcCoU32, VSubCoU32]),
            rng.below(8) as u8,
            Operand::Sgpr(2 * rng.below(5) as u8),
            Operand::Vgpr(rng.below(8) as u8),
            Operand::Sgpr(rng.below(10) as u8),
            Operand::Sgpr(2 * rng.below(5) as u8),
        )
        .ok()?,
        // s_and_saveexec_b64: EXEC changes between planned instructions.
        18 => asm::sop1(
            Sop1Op::SAndSaveexecB64,
            Operand::Sgpr(2 * rng.below(6) as u8),
            Operand::Sgpr(2 * rng.below(6) as u8),
        )
        .ok()?,
        _ => return None,
    })
}

/// A random program of `n` instructions, each maybe followed by a conditional or plain
/// branch over the next instruction (taken or not), then `s_endpgm`.
fn program(rng: &mut Rng, n: usize) -> Vec<u32> {
    let mut body: Vec<Vec<u32>> = Vec::new();
    while body.len() < n {
        if let Some(words) = instruction(rng) {
            body.push(words);
        }
    }
    let mut words = Vec::new();
    for (i, inst) in body.iter().enumerate() {
        words.extend(inst);
        if rng.below(5) == 0 {
            let skip = body.get(i + 1).map_or(0, |next| next.len() as u16);
            let op = rng.pick(&[
                SoppOp::SBranch,
                SoppOp::SCbranchScc0,
                SoppOp::SCbranchScc1,
                SoppOp::SCbranchVccz,
                SoppOp::SCbranchVccnz,
                SoppOp::SCbranchExecz,
                SoppOp::SCbranchExecnz,
            ]);
            words.extend(asm::sopp(op, skip));
        }
    }
    words.extend(asm::s_endpgm());
    words
}

fn wave(rng: &mut Rng) -> Wave {
    let mut w = Wave::new(Target::Gfx90a, CODE);
    for r in w.vgpr.iter_mut().take(8) {
        for v in r.iter_mut() {
            *v = rng.value();
        }
    }
    for s in w.sgpr.iter_mut().take(16) {
        *s = rng.value();
    }
    for t in w.ttmp.iter_mut().take(4) {
        *t = rng.value();
    }
    w.m0 = rng.value();
    w.vcc = rng.next();
    w.scc = rng.below(2) == 0;
    w.exec = match rng.below(6) {
        0 => u64::MAX,
        1 => 0,
        2 => 1 << rng.below(64),
        3 => (0..rng.below(9)).fold(0, |m, _| m | 1 << rng.below(64)),
        _ => rng.next(),
    };
    // FP_ROUND, FP_DENORM, DX10_CLAMP, IEEE; sometimes VSKIP (bit 28).
    w.hwreg[1] = rng.below(0x400) as u32 | if rng.below(8) == 0 { 1 << 28 } else { 0 };
    w
}

/// The per-step path: each instruction fetched (a copy) and executed, nothing planned.
fn stepped(w: &mut Wave, code: &Code, cache: &mut CodeCache) -> (usize, Result<Flow, ExecError>) {
    let mut lds = [0u8; 0];
    let mut ctx = Ctx {
        mem: code,
        lds: &mut lds,
        code: cache,
    };
    for n in 1..10_000 {
        let pc = w.pc;
        let inst = match ctx.code.fetch(ctx.mem, pc) {
            Ok(inst) => inst,
            Err(e) => return (n, Err(e)),
        };
        w.pc = pc + 4 * u64::from(inst.dwords);
        let r = execute(w, &mut ctx, &inst, pc);
        if r != Ok(Flow::Continue) {
            return (n, r);
        }
    }
    panic!("no end");
}

/// The planned path: `steps` with budgets of random sizes (a quantum's end between any two
/// instructions), on a cache that has run the program before (so every instruction is
/// planned when it runs).
fn planned(
    w: &mut Wave,
    code: &Code,
    cache: &mut CodeCache,
    rng: &mut Rng,
) -> (usize, Result<Flow, ExecError>) {
    let mut lds = [0u8; 0];
    let mut ctx = Ctx {
        mem: code,
        lds: &mut lds,
        code: cache,
    };
    let mut total = 0;
    loop {
        let budget = 1 + rng.below(12) as usize;
        let ran = steps(w, &mut ctx, budget);
        assert!(ran.executed <= budget && ran.executed > 0);
        total += ran.executed;
        if ran.result != Ok(Flow::Continue) {
            return (total, ran.result);
        }
        assert_eq!(ran.executed, budget, "a quantum ended early with Continue");
        assert!(total < 10_000, "no end");
    }
}

fn assert_same(a: &Wave, b: &Wave, what: &str) {
    assert_eq!(a.pc, b.pc, "{what}: pc");
    assert_eq!(a.sgpr, b.sgpr, "{what}: sgprs");
    assert_eq!(a.vcc, b.vcc, "{what}: vcc");
    assert_eq!(a.exec, b.exec, "{what}: exec");
    assert_eq!(a.scc, b.scc, "{what}: scc");
    assert_eq!(a.m0, b.m0, "{what}: m0");
    assert_eq!(a.hwreg, b.hwreg, "{what}: hwregs");
    assert_eq!(a.ttmp, b.ttmp, "{what}: ttmps");
    for r in 0..8 {
        for l in 0..64 {
            let (x, y) = (a.vgpr[r][l], b.vgpr[r][l]);
            // NaN payloads aside (both quiet NaNs).
            let nan = |v: u32| v & 0x7f80_0000 == 0x7f80_0000 && v & 0x007f_ffff != 0;
            assert!(
                x == y || nan(x) && nan(y),
                "{what}: v{r}[{l}] {x:#x} != {y:#x}"
            );
        }
    }
}

#[test]
fn planned_runs_equal_the_per_step_path() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut outcomes = [0usize; 2];
    for case in 0..1500 {
        let n = 1 + rng.below(24) as usize;
        let words = program(&mut rng, n);
        let code = Code::new(&words);
        let w0 = wave(&mut rng);
        let (mut a, mut b) = (w0.clone(), w0.clone());
        let mut cache = CodeCache::new();
        // A first run plans every instruction it reaches.
        let mut warm = w0.clone();
        let _ = planned(&mut warm, &code, &mut cache, &mut rng);
        let pa = planned(&mut a, &code, &mut cache, &mut rng);
        let pb = stepped(&mut b, &code, &mut CodeCache::new());
        assert_eq!(pa, pb, "case {case}: {words:08x?}");
        assert_same(&a, &b, &format!("case {case}: {words:08x?}"));
        outcomes[usize::from(pa.1.is_ok())] += 1;
    }
    // Most programs end at s_endpgm; some stop on an operand an instruction refuses.
    assert!(outcomes[1] > 1000, "{outcomes:?}");
}

#[test]
fn a_plan_follows_a_code_rewrite() {
    // s0 = 0
    // LOOP: v_add_f32 v1, 1.0, v1   (rewritten by the host to v_mul_f32 v1, 2.0, v1)
    //       s_add_u32 s0, s0, 1
    //       s_icache_inv
    //       s_cmp_lt_u32 s0, 3
    //       s_cbranch_scc1 LOOP
    //       s_endpgm
    let mut words = asm::s_mov_b32(Operand::Sgpr(0), Operand::Int(0)).expect("encodes");
    let body = words.len();
    let add = asm::vop2(Vop2Op::VAddF32, 1, Operand::Float(FloatConst::One), 1).expect("encodes");
    let mul = asm::vop2(Vop2Op::VMulF32, 1, Operand::Float(FloatConst::Two), 1).expect("encodes");
    words.extend(&add);
    words.extend(
        asm::s_add_u32(Operand::Sgpr(0), Operand::Sgpr(0), Operand::Int(1)).expect("encodes"),
    );
    words.extend(asm::sopp(SoppOp::SIcacheInv, 0));
    words.extend(asm::s_cmp_lt_u32(Operand::Sgpr(0), Operand::Int(3)).expect("encodes"));
    let back = -((words.len() + 1 - body) as i16);
    words.extend(asm::sopp(SoppOp::SCbranchScc1, back as u16));
    words.extend(asm::s_endpgm());
    let code = Code::new(&words);
    let mut w = Wave::new(Target::Gfx90a, CODE);
    w.exec = 1;
    w.hwreg[1] = 0xf0;
    w.vgpr[1][0] = 1.0f32.to_bits();
    let mut cache = CodeCache::new();
    let mut lds = [0u8; 0];
    let mut ctx = Ctx {
        mem: &code,
        lds: &mut lds,
        code: &mut cache,
    };
    // The first pass, up to the s_icache_inv: v1 = 1 + 1, planned.
    let ran = steps(&mut w, &mut ctx, 3);
    assert_eq!(ran.result, Ok(Flow::Continue));
    assert_eq!(f32::from_bits(w.vgpr[1][0]), 2.0);
    // The host rewrites the loop's first instruction.
    let mul_bytes: Vec<u8> = mul.iter().flat_map(|w| w.to_le_bytes()).collect();
    code.write(CODE + 4 * body as u64, &mul_bytes)
        .expect("writes");
    // s_icache_inv, then two more passes of v_mul_f32: 2 * 2 * 2.
    let ran = steps(&mut w, &mut ctx, 1000);
    assert_eq!(ran.result, Ok(Flow::End));
    assert_eq!(
        f32::from_bits(w.vgpr[1][0]),
        8.0,
        "the old plan ran after the rewrite"
    );
    assert_eq!(w.sgpr[0], 3);
}
