//! The interpreter's throughput on compiled code: the corpus's `saxpy` (f32 multiply-add, a
//! correctly rounded division and a square root per element: 65536 elements, 1024 waves) and
//! `wg_sum` (a 256-item LDS tree reduction with barriers: 256 work-groups) and `fmath` (the
//! VALU's transcendentals, eight results per element of 65536), built by clang-19
//! for gfx90a as `tests/corpus.rs` builds them, run by kfd-gfx9's dispatcher on one thread and
//! on two. The baseline in the same run is a plain Rust loop doing the same arithmetic over
//! the same data. Criterion prints wave-instructions per second (the throughput is the
//! dispatch's executed wave-instruction count, measured once); the ratios printed at the end
//! are the interpreter's slowdown against plain Rust. Without clang-19/ld.lld-19 the bench
//! says so and measures nothing.

#[path = "../tests/kernels/mod.rs"]
mod kernels;
#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kernels::{Arg, Launch, build};
use kfd_gfx9::dispatch::{NoObserver, RunOptions, run};
use kfd_gfx9::exec::Target;

const N: usize = 1 << 16;
const A: f32 = 1.75;

fn data() -> (Vec<f32>, Vec<f32>, Vec<u32>) {
    let mut s = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let x = (0..N)
        .map(|_| (next() % 2000) as f32 / 100.0 - 10.0)
        .collect();
    let y = (0..N)
        .map(|_| (next() % 2000) as f32 / 100.0 - 10.0)
        .collect();
    let u = (0..N).map(|_| next() as u32).collect();
    (x, y, u)
}

fn plain_saxpy(y: &mut [f32], x: &[f32], a: f32) {
    for (y, &x) in y.iter_mut().zip(x) {
        let v = a * x + *y;
        *y = v + x / (*y + 3.0) + v.abs().sqrt();
    }
}

fn plain_fmath(out: &mut [f32], x: &[f32]) {
    for (o, &a) in out.chunks_exact_mut(8).zip(x) {
        o[0] = a.mul_add(a, -2.0);
        o[1] = a.exp2();
        o[2] = (a.abs() + 0.5).log2();
        o[3] = 1.0 / a;
        o[4] = 1.0 / (a.abs() + 1.0).sqrt();
        o[5] = (a * 0.1 * std::f32::consts::TAU).sin();
        o[6] = (a * 0.1 * std::f32::consts::TAU).cos();
        o[7] = a.min(1.0) + a.max(-1.0) + a.floor() + (a * 1.5).trunc();
    }
}

fn plain_sum(out: &mut [u32], input: &[u32]) {
    for (o, c) in out.iter_mut().zip(input.chunks(256)) {
        *o = c.iter().fold(0u32, |s, &v| s.wrapping_add(v));
    }
}

fn to_bytes<T: Copy, const K: usize>(v: &[T], f: impl Fn(T) -> [u8; K]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn bench(c: &mut Criterion) {
    let Some(obj) = build(Target::Gfx90a) else {
        println!("kernels bench: clang-19 or ld.lld-19 missing; nothing measured");
        return;
    };
    let (x, y, u) = data();
    let n = N as u32;

    // saxpy.
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::F32(A), Arg::U32(n)];
    let launch = Launch {
        target: Target::Gfx90a,
        kernel: "saxpy",
        args: &args,
        buffers: vec![
            to_bytes(&y, f32::to_le_bytes),
            to_bytes(&x, f32::to_le_bytes),
        ],
        grid: [n, 1, 1],
        workgroup: [256, 1, 1],
        dynamic_lds: 0,
    };
    let (mem, d) = launch.prepare(&obj);
    let one = RunOptions { threads: 1 };
    let two = RunOptions { threads: 2 };
    let insts = run(&d, &mem, &one, &NoObserver)
        .expect("saxpy runs")
        .instructions;
    println!("saxpy: {insts} wave-instructions per dispatch");
    let mut g = c.benchmark_group("kernels_saxpy");
    g.throughput(Throughput::Elements(insts));
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.bench_function("interpreter_1_thread", |b| {
        b.iter(|| run(&d, &mem, &one, &NoObserver).expect("runs"))
    });
    g.bench_function("interpreter_2_threads", |b| {
        b.iter(|| run(&d, &mem, &two, &NoObserver).expect("runs"))
    });
    let mut yy = y.clone();
    g.bench_function("plain_rust", |b| {
        b.iter(|| {
            yy.copy_from_slice(&y);
            plain_saxpy(black_box(&mut yy), black_box(&x), black_box(A));
        })
    });
    g.finish();

    // wg_sum.
    let args = [Arg::Buf(0), Arg::Buf(1)];
    let launch = Launch {
        target: Target::Gfx90a,
        kernel: "wg_sum",
        args: &args,
        buffers: vec![vec![0; 4 * N / 256], to_bytes(&u, u32::to_le_bytes)],
        grid: [n, 1, 1],
        workgroup: [256, 1, 1],
        dynamic_lds: 0,
    };
    let (mem, d) = launch.prepare(&obj);
    let insts = run(&d, &mem, &one, &NoObserver)
        .expect("wg_sum runs")
        .instructions;
    println!("wg_sum: {insts} wave-instructions per dispatch");
    let mut g = c.benchmark_group("kernels_wg_sum");
    g.throughput(Throughput::Elements(insts));
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.bench_function("interpreter_1_thread", |b| {
        b.iter(|| run(&d, &mem, &one, &NoObserver).expect("runs"))
    });
    let mut out = vec![0u32; N / 256];
    g.bench_function("plain_rust", |b| {
        b.iter(|| plain_sum(black_box(&mut out), black_box(&u)))
    });
    g.finish();

    // fmath: the VALU's transcendentals (v_exp/v_log/v_rcp/v_rsq/v_sin/v_cos, as kfdtest's
    // loop shaders use them), eight results per element.
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(n)];
    let launch = Launch {
        target: Target::Gfx90a,
        kernel: "fmath",
        args: &args,
        buffers: vec![vec![0; 32 * N], to_bytes(&x, f32::to_le_bytes)],
        grid: [n, 1, 1],
        workgroup: [256, 1, 1],
        dynamic_lds: 0,
    };
    let (mem, d) = launch.prepare(&obj);
    let insts = run(&d, &mem, &one, &NoObserver)
        .expect("fmath runs")
        .instructions;
    println!("fmath: {insts} wave-instructions per dispatch");
    let mut g = c.benchmark_group("kernels_fmath");
    g.throughput(Throughput::Elements(insts));
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.bench_function("interpreter_1_thread", |b| {
        b.iter(|| run(&d, &mem, &one, &NoObserver).expect("runs"))
    });
    let mut out = vec![0f32; 8 * N];
    g.bench_function("plain_rust", |b| {
        b.iter(|| plain_fmath(black_box(&mut out), black_box(&x)))
    });
    g.finish();

    ratio::report("kernels_saxpy", "interpreter_1_thread", "plain_rust", None);
    ratio::report("kernels_saxpy", "interpreter_2_threads", "plain_rust", None);
    ratio::report("kernels_wg_sum", "interpreter_1_thread", "plain_rust", None);
    ratio::report("kernels_fmath", "interpreter_1_thread", "plain_rust", None);
}

criterion_group!(benches, bench);
criterion_main!(benches);
