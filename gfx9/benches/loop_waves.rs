//! The interpreter on single-lane waves that loop: a grid of 256 workgroups of one work-item
//! each (one wave, EXEC = 1 lane) runs a loop of 256 iterations of scalar control (`s_cmp`,
//! `s_cbranch_scc1`, `s_add_u32`, `s_branch`, `s_waitcnt`) and f32 vector math (adds,
//! multiplies, `v_cvt_f32_u32`, `v_log_f32`, `v_exp_f32`, `v_sqrt_f32`, `v_rsq_f32`, a literal
//! operand) — the shape of kfdtest's queue-priority dispatches (`KFDQMTest`'s 262 144
//! one-work-item workgroups of a loop of transcendentals), written here for gfx942 and
//! assembled with `llvm-mc-19 -mcpu=gfx942` (the source is in the comment of [`CODE_WORDS`]).
//! Criterion prints wave-instructions per second of the bench thread's CPU time (every run is
//! on the calling thread; on the shared VM the wall clock also counts other processes' turns:
//! at a load average of 10–17 it swung the same ratio between 0.47 and 1.4). The baselines in
//! the same run: the same waves with 9 work-items each (`nine_lanes`: one lane more than
//! `SPARSE_LANES`, so every VALU instruction takes the 64-lane array path, which is what a
//! one-lane wave took before the lane-by-lane path; the extra lanes cost that path almost
//! nothing), and the one-lane waves run one instruction at a time as `exec::step` ran them
//! before the code cache kept plans (`stepped`: `CodeCache::fetch`'s copy of the instruction,
//! then `exec::execute`; no dispatcher).
//!
//! Measured (2026-12-02, branch `h-fast`, CPU time, the VM at a load average of ~12):
//! `one_lane_1_thread` 70.3 M wave-instructions/s (the dispatcher running quanta with
//! `exec::steps`: planned VALU operations, SOP1/SOP2/SOPK/SOPC by reference), `stepped` 54.5
//! M/s (ratio 0.747: 1.34× faster), `nine_lanes_1_thread` 9.9 M/s. (The last session's 46.3
//! M/s against 7.9 M/s were wall-clock figures on a quieter VM.)
//!
//! Measured (2026-12-02, branch `h-vloop`, CPU time, the VM at a load average of ~9–11):
//! `one_lane_1_thread` 132.8 M wave-instructions/s (plans per opcode: each lane-wise VALU
//! operation by its own match arm with branch-free sources, SOP2/`s_mov`/SOPC compares with
//! resolved operands, SOPP branches and `s_waitcnt` planned, run page by page with the PC in
//! a local), `stepped` 56.2 M/s (ratio 0.423: 2.36× faster; `h-fast`'s plans were 1.34×),
//! `nine_lanes_1_thread` 11.7 M/s.

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kfd_gfx9::dispatch::{Dispatch, KernelDescriptor, NoObserver, RunOptions, Scratch, run};
use kfd_gfx9::exec::{Apertures, CodeCache, Ctx, Fault, Flow, Memory, Target, execute};

#[path = "common/mod.rs"]
mod common;
use common::cpu_time;

const CODE: u64 = 0x1_0000_0000;
const WAVES: u32 = 256;
/// Loop iterations per wave (`s_movk_i32 s1, 0x100`).
const ITERATIONS: u64 = 256;
/// Wave-instructions per wave: 5 before the loop, 19 per iteration, the last test and
/// branch, `s_endpgm`.
const PER_WAVE: u64 = 5 + 19 * ITERATIONS + 3;

/// ```text
///   s_mov_b32 s0, 0
///   s_movk_i32 s1, 0x100
///   v_mov_b32 v1, 1.0
///   v_mov_b32 v2, 0
///   v_mov_b32 v3, 0
/// LOOP:
///   s_cmp_ge_u32 s0, s1
///   s_cbranch_scc1 END
///   v_cvt_f32_u32 v4, s0
///   s_waitcnt lgkmcnt(0)
///   v_add_f32 v5, 1.0, v4
///   v_add_f32 v6, s1, v4
///   v_log_f32 v7, v5
///   v_mul_f32 v7, v6, v7
///   v_exp_f32 v7, v7
///   v_add_f32 v2, v2, v7
///   v_mul_f32 v8, 0x3fb8aa3b, v5
///   v_exp_f32 v8, v8
///   v_add_f32 v3, v3, v8
///   v_sqrt_f32 v9, v6
///   v_rsq_f32 v10, v6
///   v_add_f32 v1, v1, v9
///   v_add_f32 v1, v1, v10
///   s_add_u32 s0, s0, 1
///   s_branch LOOP
/// END:
///   s_endpgm
/// ```
const CODE_WORDS: [u32; 26] = [
    0xbe800080, 0xb0010100, 0x7e0202f2, 0x7e040280, 0x7e060280, 0xbf090100, 0xbf850012, 0x7e080c00,
    0xbf8cc07f, 0x020a08f2, 0x020c0801, 0x7e0e4305, 0x0a0e0f06, 0x7e0e4107, 0x02040f02, 0x0a100aff,
    0x3fb8aa3b, 0x7e104108, 0x02061103, 0x7e124f06, 0x7e144906, 0x02021301, 0x02021501, 0x80008100,
    0xbf82ffec, 0xbf810000,
];

/// The kernel's code at CODE, read-only.
struct Code(Vec<u8>);

impl Memory for Code {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let fault = Fault { addr, write: false };
        let off = usize::try_from(addr.checked_sub(CODE).ok_or(fault)?).map_err(|_| fault)?;
        let src = self.0.get(off..off + buf.len()).ok_or(fault)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&self, addr: u64, _: &[u8]) -> Result<(), Fault> {
        Err(Fault { addr, write: true })
    }
    fn atomic(&self, addr: u64, _: u8, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, Fault> {
        Err(Fault { addr, write: true })
    }
}

fn setup(lanes: u32) -> (Code, Dispatch) {
    let mut bytes: Vec<u8> = CODE_WORDS.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.resize(4096, 0);
    // RSRC2: USER_SGPR 0, TGID_X_EN.
    let kd = KernelDescriptor::from_registers(0, 1 << 7, 0).expect("descriptor");
    let d = Dispatch {
        target: Target::Gfx942,
        kd,
        entry: CODE,
        grid: [WAVES * lanes, 1, 1],
        workgroup: [lanes, 1, 1],
        kernarg: 0,
        dispatch_ptr: 0,
        queue_ptr: 0,
        dispatch_id: 0,
        private_segment_size: 0,
        group_segment_size: 0,
        scratch: Scratch::default(),
        apertures: Apertures::default(),
        user_data: None,
    };
    (Code(bytes), d)
}

/// The baseline: every wave run one instruction at a time the way `exec::step` ran it before
/// the code cache kept plans (a copy of the decoded instruction from `CodeCache::fetch`, then
/// `exec::execute`: the form and operands matched every time), one thread, no dispatcher.
fn stepped(code: &Code, d: &Dispatch) -> u64 {
    let mut cache = CodeCache::new();
    let mut lds = [0u8; 0];
    let mut executed = 0;
    for n in 0..WAVES {
        let mut w = d.wave_setup([n, 0, 0], 0, 0);
        let mut ctx = Ctx {
            mem: code,
            lds: &mut lds,
            code: &mut cache,
        };
        loop {
            executed += 1;
            let pc = w.pc;
            let inst = ctx.code.fetch(ctx.mem, pc).expect("decodes");
            w.pc = pc + 4 * u64::from(inst.dwords);
            if execute(&mut w, &mut ctx, &inst, pc).expect("runs") == Flow::End {
                break;
            }
        }
        black_box(&w.vgpr[1][0]);
    }
    executed
}

fn bench(c: &mut Criterion) {
    let (code, one) = setup(1);
    let (_, nine) = setup(9);
    let one_thread = RunOptions { threads: 1 };
    let stats = run(&one, &code, &one_thread, &NoObserver).expect("runs");
    assert_eq!(stats.instructions, u64::from(WAVES) * PER_WAVE);
    let nine_stats = run(&nine, &code, &one_thread, &NoObserver).expect("runs");
    assert_eq!(nine_stats.instructions, stats.instructions);
    assert_eq!(stepped(&code, &one), stats.instructions);
    let mut g = c.benchmark_group("loop_waves");
    g.throughput(Throughput::Elements(stats.instructions));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("one_lane_1_thread", |b| {
        b.iter_custom(|n| {
            cpu_time(n, || {
                black_box(run(&one, &code, &one_thread, &NoObserver).expect("runs"));
            })
        })
    });
    g.bench_function("nine_lanes_1_thread", |b| {
        b.iter_custom(|n| {
            cpu_time(n, || {
                black_box(run(&nine, &code, &one_thread, &NoObserver).expect("runs"));
            })
        })
    });
    g.bench_function("stepped_1_thread", |b| {
        b.iter_custom(|n| {
            cpu_time(n, || {
                black_box(stepped(&code, &one));
            })
        })
    });
    g.finish();
    ratio::report(
        "loop_waves",
        "one_lane_1_thread",
        "nine_lanes_1_thread",
        None,
    );
    ratio::report("loop_waves", "one_lane_1_thread", "stepped_1_thread", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
