//! The interpreter held to compiled code: every kernel of `tests/kernels/corpus.cl`, built by
//! clang-19 for gfx90a, gfx942, gfx908 and gfx906 and linked by ld.lld-19, runs on kfd-gfx9's
//! dispatcher (two threads, no kfd-emu) and its output is compared with the same computation
//! on the host (and on gfx90a and gfx942 compiled at -O0 as well: values through scratch,
//! helpers called), bit for bit wherever the operation is exactly specified (IEEE f32/f64/f16
//! arithmetic, division and square root correctly rounded, integer operations, atomics whose
//! result does not depend on order) and within the ISA guide's accuracy for the hardware's
//! transcendental approximations (`v_exp_f32`, `v_log_f32`, `v_rcp_f32`, `v_rsq_f32`: 1 ULP;
//! `v_sin_f32`/`v_cos_f32`: an absolute error, see [`fmath`]). The loads to LDS have kernels
//! of their own, `tests/kernels/lds_dma.cl` and `lds_dma_ir.ll` (see [`lds_dma`] and
//! [`lds_dma_ir`]).

mod common;
mod kernels;

use kernels::{Arg, Launch, Mem, buffer, build_at, build_lds_dma, build_lds_dma_ir, build_ocl};
use kfd_gfx9::dispatch::{DispatchError, NoObserver, RunOptions, run};
use kfd_gfx9::exec::Target;

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
    /// A float in `lo..hi`.
    fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.u32() >> 8) as f32 / (1u32 << 24) as f32
    }
}

fn bytes<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}
fn u32s(m: &Mem, i: usize, n: usize) -> Vec<u32> {
    m.bytes(buffer(i), 4 * n)
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn u64s(m: &Mem, i: usize, n: usize) -> Vec<u64> {
    m.bytes(buffer(i), 8 * n)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}
fn u16s(m: &Mem, i: usize, n: usize) -> Vec<u16> {
    m.bytes(buffer(i), 2 * n)
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Runs `kernel` and returns the memory after it; `None` when the toolchain is missing.
fn launch(
    cfg: Cfg,
    kernel: &str,
    args: &[Arg],
    buffers: Vec<Vec<u8>>,
    grid: [u32; 3],
    workgroup: [u32; 3],
) -> Option<Mem> {
    let obj = if cfg.opt == "ocl" {
        build_ocl(cfg.target)?
    } else if cfg.opt == "lds_dma" {
        build_lds_dma(cfg.target)?
    } else if cfg.opt == "lds_dma_ir" {
        build_lds_dma_ir(cfg.target)?
    } else {
        build_at(cfg.target, cfg.opt)?
    };
    let target = cfg.target;
    let l = Launch {
        target,
        kernel,
        args,
        buffers,
        grid,
        workgroup,
        dynamic_lds: if args.iter().any(|a| matches!(a, Arg::DynLds)) {
            4096
        } else {
            0
        },
    };
    let (mem, d) = l.prepare(&obj);
    let stats = run(&d, &mem, &RunOptions { threads: 2 }, &NoObserver)
        .unwrap_or_else(|e| panic!("{kernel} on {cfg:?}: {e}"));
    assert!(stats.instructions > 0);
    Some(mem)
}

/// Asserts lane `i`'s values are equal, naming the kernel, target and index.
#[track_caller]
fn same<T: PartialEq + std::fmt::Debug>(what: &str, t: Cfg, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what} on {t:?}: element {i}");
    }
}

/// IEEE binary16 from binary32, round to nearest even (subnormals, overflow to infinity).
fn f16_from_f32(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // The value's significand with the implicit bit, and how far to shift it right.
    let (m, shift) = if e <= 0 {
        (man | 0x80_0000, (14 - e) as u32)
    } else {
        (man | 0x80_0000, 13)
    };
    if shift > 24 {
        return sign;
    }
    let q = m >> shift;
    let rem = m & ((1 << shift) - 1);
    let half = 1 << (shift - 1);
    let q = if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    };
    if e <= 0 {
        sign | q as u16 // may round up into the smallest normal: the encoding carries
    } else {
        // q includes the implicit bit (0x400); a carry to 0x800 bumps the exponent.
        let v = ((e as u32) << 10) + (q - 0x400);
        if v >= 0x7c00 {
            sign | 0x7c00
        } else {
            sign | v as u16
        }
    }
}

fn f32_from_f16(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 10) & 0x1f);
    let m = f32::from(h & 0x3ff);
    sign * match e {
        0 => m * 2f32.powi(-24),
        0x1f if m == 0.0 => f32::INFINITY,
        0x1f => f32::NAN,
        _ => (1.0 + m / 1024.0) * 2f32.powi(e - 15),
    }
}

/// How many representable f32 values apart two finite floats are.
fn ulps(a: f32, b: f32) -> u32 {
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 { i32::MIN - i } else { i }
    };
    key(a).abs_diff(key(b))
}

/// A target and the optimization level its corpus is compiled at.
#[derive(Debug, Clone, Copy)]
struct Cfg {
    target: Target,
    opt: &'static str,
}

/// Each kernel's test per target at -O2, and on gfx90a and gfx942 at -O0 too (every value
/// through scratch, the helpers called, not inlined).
macro_rules! on_every_target {
    ($name:ident) => {
        mod $name {
            use super::Cfg;
            use kfd_gfx9::exec::Target;
            fn at(target: Target, opt: &'static str) {
                super::$name(Cfg { target, opt });
            }
            #[test]
            fn gfx90a() {
                at(Target::Gfx90a, "-O2");
            }
            #[test]
            fn gfx942() {
                at(Target::Gfx942, "-O2");
            }
            #[test]
            fn gfx908() {
                at(Target::Gfx908, "-O2");
            }
            #[test]
            fn gfx906() {
                at(Target::Gfx906, "-O2");
            }
            #[test]
            fn gfx90a_o0() {
                at(Target::Gfx90a, "-O0");
            }
            #[test]
            fn gfx942_o0() {
                at(Target::Gfx942, "-O0");
            }
        }
    };
}

on_every_target!(saxpy);
on_every_target!(dmath);
on_every_target!(hmath);
on_every_target!(intdiv);
on_every_target!(bitops);
on_every_target!(wg_sum);
on_every_target!(gatomics);
on_every_target!(lds_hist);
on_every_target!(stencil);
on_every_target!(scratch);
on_every_target!(call);
on_every_target!(diverge);
on_every_target!(waveops);
on_every_target!(fmath);
on_every_target!(convert);
on_every_target!(fspecial);
on_every_target!(dspecial);
on_every_target!(packed);
on_every_target!(scan1024);
on_every_target!(atomics2);
on_every_target!(lds_wide);
on_every_target!(grid3d);
on_every_target!(i64ops);
on_every_target!(narrow);
on_every_target!(lds_bytes);
on_every_target!(permute);
on_every_target!(trap);
on_every_target!(mfma);
on_every_target!(mfma_f16);
on_every_target!(mfma_f64);
on_every_target!(dyn_lds);
on_every_target!(cvt_special);
on_every_target!(fp_round);

/// 1000 items in groups of 256: the last group is partial, its missing lanes off in EXEC.
const N: u32 = 1000;

fn saxpy(t: Cfg) {
    let mut r = Rng(1);
    let x: Vec<f32> = (0..N).map(|_| r.f32(-10.0, 10.0)).collect();
    let y: Vec<f32> = (0..N).map(|_| r.f32(-10.0, 10.0)).collect();
    let a = 1.75f32;
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::F32(a), Arg::U32(N)];
    let bufs = vec![bytes(&y, f32::to_le_bytes), bytes(&x, f32::to_le_bytes)];
    let Some(m) = launch(t, "saxpy", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..N as usize)
        .map(|i| {
            let v = a * x[i] + y[i];
            (v + x[i] / (y[i] + 3.0) + v.abs().sqrt()).to_bits()
        })
        .collect();
    same("saxpy", t, &u32s(&m, 0, N as usize), &want);
}

fn dmath(t: Cfg) {
    let mut r = Rng(2);
    let x: Vec<f64> = (0..N)
        .map(|_| f64::from(r.f32(-100.0, 100.0)) / 3.0)
        .collect();
    let y: Vec<f64> = (0..N)
        .map(|_| f64::from(r.f32(-100.0, 100.0)) / 7.0)
        .collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(N)];
    let bufs = vec![
        vec![0; 32 * N as usize],
        bytes(&x, f64::to_le_bytes),
        bytes(&y, f64::to_le_bytes),
    ];
    let Some(m) = launch(t, "dmath", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u64> = (0..N as usize)
        .flat_map(|i| {
            let (a, b) = (x[i], y[i]);
            [
                a.mul_add(b, 1.5),
                a / b,
                a.abs().sqrt(),
                a.max(b) - a.min(b) * 0.25,
            ]
        })
        .map(f64::to_bits)
        .collect();
    same("dmath", t, &u64s(&m, 0, 4 * N as usize), &want);
}

fn hmath(t: Cfg) {
    let mut r = Rng(3);
    let x: Vec<u16> = (0..N).map(|_| f16_from_f32(r.f32(-4.0, 4.0))).collect();
    let y: Vec<u16> = (0..N).map(|_| f16_from_f32(r.f32(-4.0, 4.0))).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(N)];
    let bufs = vec![
        vec![0; 6 * N as usize],
        bytes(&x, u16::to_le_bytes),
        bytes(&y, u16::to_le_bytes),
    ];
    let Some(m) = launch(t, "hmath", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    // Each half operation rounds the f32 result of the f16 operands once: f32 has more than
    // 2 × 11 + 2 bits, so that equals the operation rounded to f16 directly.
    let h = |v: f32| f16_from_f32(v);
    let f = f32_from_f16;
    let want: Vec<u16> = (0..N as usize)
        .flat_map(|i| {
            let (a, b) = (f(x[i]), f(y[i]));
            [h(f(h(a * b)) + a), h(a - b), h(f(h(a * 0.5)) * 2.0)]
        })
        .collect();
    same("hmath", t, &u16s(&m, 0, 3 * N as usize), &want);
}

fn intdiv(t: Cfg) {
    let mut r = Rng(4);
    let mut a: Vec<u32> = (0..N).map(|_| r.u32()).collect();
    let b: Vec<u32> = (0..N).map(|i| (r.u32() >> (i % 32)).max(1)).collect();
    let mut c: Vec<u64> = (0..N).map(|_| r.next()).collect();
    let d: Vec<u64> = (0..N).map(|i| (r.next() >> (i % 64)).max(1)).collect();
    for i in 0..N as usize {
        // INT_MIN / -1 is undefined in C.
        if a[i] == 0x8000_0000 && b[i] == u32::MAX {
            a[i] = 1;
        }
        if c[i] == 1 << 63 && d[i] == u64::MAX {
            c[i] = 1;
        }
    }
    let args = [
        Arg::Buf(0),
        Arg::Buf(1),
        Arg::Buf(2),
        Arg::Buf(3),
        Arg::Buf(4),
        Arg::Buf(5),
        Arg::U32(N),
    ];
    let bufs = vec![
        vec![0; 16 * N as usize],
        vec![0; 32 * N as usize],
        bytes(&a, u32::to_le_bytes),
        bytes(&b, u32::to_le_bytes),
        bytes(&c, u64::to_le_bytes),
        bytes(&d, u64::to_le_bytes),
    ];
    let Some(m) = launch(t, "intdiv", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want32: Vec<u32> = (0..N as usize)
        .flat_map(|i| {
            let (x, y) = (a[i], b[i]);
            [
                x / y,
                x % y,
                (x as i32).wrapping_div(y as i32) as u32,
                (x as i32).wrapping_rem(y as i32) as u32,
            ]
        })
        .collect();
    let want64: Vec<u64> = (0..N as usize)
        .flat_map(|i| {
            let (x, y) = (c[i], d[i]);
            [
                x / y,
                x % y,
                (x as i64).wrapping_div(y as i64) as u64,
                (x as i64).wrapping_rem(y as i64) as u64,
            ]
        })
        .collect();
    same("intdiv u32/i32", t, &u32s(&m, 0, 4 * N as usize), &want32);
    same("intdiv u64/i64", t, &u64s(&m, 1, 4 * N as usize), &want64);
}

fn bitops(t: Cfg) {
    let mut r = Rng(5);
    let a: Vec<u32> = (0..N)
        .map(|i| if i % 50 == 0 { 0 } else { r.u32() >> (i % 29) })
        .collect();
    let b: Vec<u64> = (0..N)
        .map(|i| if i % 70 == 0 { 0 } else { r.next() >> (i % 61) })
        .collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(N)];
    let bufs = vec![
        vec![0; 32 * N as usize],
        bytes(&a, u32::to_le_bytes),
        bytes(&b, u64::to_le_bytes),
    ];
    let Some(m) = launch(t, "bitops", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..N as usize)
        .flat_map(|i| {
            let (v, w) = (a[i], b[i]);
            let s = i as u32 & 31;
            [
                v.count_ones() + w.count_ones(),
                v.leading_zeros(),
                v.trailing_zeros(),
                v.rotate_left(s),
                (v >> 5) & 0x3ff,
                v.swap_bytes() ^ (w >> 13) as u32,
                w.leading_zeros().wrapping_add(((v as i32) >> s) as u32),
                v.reverse_bits() & !(w as u32),
            ]
        })
        .collect();
    same("bitops", t, &u32s(&m, 0, 8 * N as usize), &want);
}

fn wg_sum(t: Cfg) {
    let mut r = Rng(6);
    let groups = 8usize;
    let input: Vec<u32> = (0..256 * groups).map(|_| r.u32()).collect();
    let bufs = vec![vec![0; 4 * groups], bytes(&input, u32::to_le_bytes)];
    let grid = [256 * groups as u32, 1, 1];
    let Some(m) = launch(
        t,
        "wg_sum",
        &[Arg::Buf(0), Arg::Buf(1)],
        bufs,
        grid,
        [256, 1, 1],
    ) else {
        return;
    };
    let want: Vec<u32> = input
        .chunks(256)
        .map(|c| c.iter().fold(0u32, |s, &v| s.wrapping_add(v)))
        .collect();
    same("wg_sum", t, &u32s(&m, 0, groups), &want);
}

fn gatomics(t: Cfg) {
    let mut r = Rng(7);
    let n = 1024usize;
    let input: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let acc = [0u32, 0, 0, 1, 0, 0];
    let bufs = vec![
        bytes(&acc, u32::to_le_bytes),
        bytes(&input, u32::to_le_bytes),
    ];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(
        t,
        "gatomics",
        &[Arg::Buf(0), Arg::Buf(1)],
        bufs,
        grid,
        [256, 1, 1],
    ) else {
        return;
    };
    let got = u32s(&m, 0, 4);
    let sum = input.iter().fold(0u32, |s, &v| s.wrapping_add(v));
    let max = *input.iter().max().unwrap();
    let xor = input.iter().fold(0, |s, &v| s ^ v);
    let prod = input.iter().fold(1u32, |s, &v| s.wrapping_mul(v | 1));
    same("gatomics", t, &got, &[sum, max, xor, prod]);
    let sum64 = input
        .iter()
        .fold(0u64, |s, &v| s.wrapping_add(u64::from(v) << 20));
    assert_eq!(
        u64::from_le_bytes(m.bytes(buffer(0) + 16, 8).try_into().unwrap()),
        sum64,
        "gatomics 64-bit add on {t:?}"
    );
}

fn lds_hist(t: Cfg) {
    let mut r = Rng(8);
    let (groups, wg) = (6usize, 192usize);
    let input: Vec<u32> = (0..groups * wg).map(|_| r.u32()).collect();
    let bufs = vec![vec![0; 4 * 32], bytes(&input, u32::to_le_bytes)];
    let grid = [(groups * wg) as u32, 1, 1];
    let wgs = [wg as u32, 1, 1];
    let Some(m) = launch(t, "lds_hist", &[Arg::Buf(0), Arg::Buf(1)], bufs, grid, wgs) else {
        return;
    };
    let mut want = [0u32; 32];
    for g in input.chunks(wg) {
        let mut bins = [0u32; 32];
        for &v in g {
            bins[(v & 15) as usize] += 1;
            let m = &mut bins[16 + ((v >> 4) & 15) as usize];
            *m = (*m).max(v);
        }
        for (w, b) in want.iter_mut().zip(bins) {
            *w = w.wrapping_add(b);
        }
    }
    same("lds_hist", t, &u32s(&m, 0, 32), &want);
}

fn stencil(t: Cfg) {
    let (w, h) = (37usize, 29usize);
    let mut r = Rng(9);
    let input: Vec<f32> = (0..w * h).map(|_| r.f32(-1.0, 1.0)).collect();
    let args = [
        Arg::Buf(0),
        Arg::Buf(1),
        Arg::U32(w as u32),
        Arg::U32(h as u32),
    ];
    let bufs = vec![vec![0; 4 * w * h], bytes(&input, f32::to_le_bytes)];
    let grid = [w as u32, h as u32, 1];
    let Some(m) = launch(t, "stencil", &args, bufs, grid, [16, 8, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..w * h)
        .map(|i| {
            let (x, y) = (i % w, i / w);
            if x == 0 || y == 0 || x == w - 1 || y == h - 1 {
                return input[i].to_bits();
            }
            let n = input[i - 1] + input[i + 1] + input[i - w] + input[i + w];
            (0.5 * input[i] + 0.125 * n).to_bits()
        })
        .collect();
    same("stencil", t, &u32s(&m, 0, w * h), &want);
}

fn scratch(t: Cfg) {
    let mut r = Rng(10);
    let input: Vec<u32> = (0..N).map(|_| r.u32()).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(N)];
    let bufs = vec![vec![0; 4 * N as usize], bytes(&input, u32::to_le_bytes)];
    let Some(m) = launch(t, "scratch", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..N as usize)
        .map(|i| {
            let v = input[i];
            let mut arr: [u32; 40] =
                std::array::from_fn(|k| v.wrapping_mul(k as u32 + 1) ^ k as u32);
            let mut s = 0u32;
            for k in 0..40u32 {
                let at = (v.wrapping_add(7 * k) % 40) as usize;
                s = s.wrapping_add(arr[at].wrapping_mul(k + 3));
            }
            arr[(v % 40) as usize] = s;
            s.wrapping_add(arr[(i * 3) % 40])
        })
        .collect();
    same("scratch", t, &u32s(&m, 0, N as usize), &want);
}

fn call(t: Cfg) {
    let mut r = Rng(11);
    let x: Vec<f32> = (0..N).map(|_| r.f32(-2.0, 2.0)).collect();
    let c: Vec<f32> = (0..6).map(|_| r.f32(-1.0, 1.0)).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(N)];
    let bufs = vec![
        vec![0; 4 * N as usize],
        bytes(&x, f32::to_le_bytes),
        bytes(&c, f32::to_le_bytes),
    ];
    let Some(m) = launch(t, "call", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let poly = |x: f32, c: &[f32], n: usize| (0..n).rev().fold(0.0f32, |r, k| r.mul_add(x, c[k]));
    let want: Vec<u32> = x
        .iter()
        .map(|&x| (poly(x, &c, 5) + poly(x * 0.5, &c[1..], 3)).to_bits())
        .collect();
    same("call", t, &u32s(&m, 0, N as usize), &want);
}

fn diverge(t: Cfg) {
    let mut r = Rng(12);
    let input: Vec<u32> = (0..N).map(|_| r.u32()).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(N)];
    let bufs = vec![vec![0; 8 * N as usize], bytes(&input, u32::to_le_bytes)];
    let Some(m) = launch(t, "diverge", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..N as usize)
        .flat_map(|i| {
            let v = input[i];
            let mut r = if v & 1 != 0 {
                v.wrapping_mul(3)
                    .wrapping_add(if v & 2 != 0 { 7 } else { 0 })
            } else {
                v / 3
            };
            let (mut steps, mut c) = (0u32, u64::from(v % 1000) + 1);
            while c != 1 && steps < 500 {
                c = if c & 1 != 0 { 3 * c + 1 } else { c / 2 };
                steps += 1;
            }
            for k in 0..(i as u32 % 9) {
                r ^= r << 3 | k;
            }
            [r, steps]
        })
        .collect();
    same("diverge", t, &u32s(&m, 0, 2 * N as usize), &want);
}

fn waveops(t: Cfg) {
    let mut r = Rng(13);
    let n = 256usize;
    let input: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let bufs = vec![vec![0; 32 * n], bytes(&input, u32::to_le_bytes)];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(
        t,
        "waveops",
        &[Arg::Buf(0), Arg::Buf(1)],
        bufs,
        grid,
        [128, 1, 1],
    ) else {
        return;
    };
    let mut want = Vec::new();
    for wave in input.chunks(64) {
        let ballot = wave
            .iter()
            .enumerate()
            .fold(0u64, |b, (l, &v)| b | u64::from(v & 1) << l);
        // DPP row_shr 1, 2, 4, 8 with 0 from outside the row: a prefix sum per row of 16.
        let mut s: Vec<u32> = wave.to_vec();
        for k in [1, 2, 4, 8] {
            let prev = s.clone();
            for l in 0..64 {
                if l % 16 >= k {
                    s[l] = s[l].wrapping_add(prev[l - k]);
                }
            }
        }
        let total = s[15]
            .wrapping_add(s[31])
            .wrapping_add(s[47])
            .wrapping_add(s[63]);
        for l in 0..64 {
            want.extend([
                if l % 16 >= 1 { wave[l - 1] } else { 0 },
                wave[(l & !3) | (3 - (l & 3))],
                wave[l ^ 1],
                wave[(l + 5) & 63],
                wave[0],
                ballot as u32 ^ (ballot >> 32) as u32,
                total,
                s[l],
            ]);
        }
    }
    same("waveops", t, &u32s(&m, 0, 8 * n), &want);
}

fn fmath(t: Cfg) {
    let mut r = Rng(14);
    let x: Vec<f32> = (0..N).map(|_| r.f32(-20.0, 20.0)).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(N)];
    let bufs = vec![vec![0; 32 * N as usize], bytes(&x, f32::to_le_bytes)];
    let Some(m) = launch(t, "fmath", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let got: Vec<f32> = u32s(&m, 0, 8 * N as usize)
        .into_iter()
        .map(f32::from_bits)
        .collect();
    for (i, &a) in x.iter().enumerate() {
        let g = &got[8 * i..8 * i + 8];
        let at = |k: usize| format!("fmath[{k}] on {t:?} at x = {a}: got {}", g[k]);
        assert_eq!(g[0].to_bits(), a.mul_add(a, -2.0).to_bits(), "{}", at(0));
        // The guide: v_exp_f32, v_log_f32, v_rcp_f32 and v_rsq_f32 are accurate to 1 ULP.
        let e = f64::from(a).exp2() as f32;
        assert!(ulps(g[1], e) <= 1, "{} want {e}", at(1));
        let lg = (f64::from(a.abs() + 0.5)).log2() as f32;
        assert!(ulps(g[2], lg) <= 1, "{} want {lg}", at(2));
        let rc = (1.0 / f64::from(a)) as f32;
        assert!(ulps(g[3], rc) <= 1, "{} want {rc}", at(3));
        let rs = (1.0 / f64::from(a.abs() + 1.0).sqrt()) as f32;
        assert!(ulps(g[4], rs) <= 1, "{} want {rs}", at(4));
        // v_sin_f32/v_cos_f32 take revolutions (sin(2πx)); the guide gives no ULP bound, so
        // within 2^-20 absolute.
        let rev = f64::from(a * 0.1) * std::f64::consts::TAU;
        assert!((f64::from(g[5]) - rev.sin()).abs() < 1e-6, "{}", at(5));
        assert!((f64::from(g[6]) - rev.cos()).abs() < 1e-6, "{}", at(6));
        let w = a.min(1.0) + a.max(-1.0) + a.floor() + (a * 1.5).trunc();
        assert_eq!(g[7].to_bits(), w.to_bits(), "{}", at(7));
    }
}

fn convert(t: Cfg) {
    let mut r = Rng(15);
    let x: Vec<f32> = (0..N)
        .map(|i| {
            if i % 2 == 0 {
                r.f32(-1e6, 1e6)
            } else {
                r.f32(-5.0, 5.0)
            }
        })
        .collect();
    let y: Vec<i64> = (0..N).map(|i| (r.next() >> (i % 60)) as i64).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(N)];
    let bufs = vec![
        vec![0; 32 * N as usize],
        bytes(&x, f32::to_le_bytes),
        bytes(&y, i64::to_le_bytes),
    ];
    let Some(m) = launch(t, "convert", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..N as usize)
        .flat_map(|i| {
            let (a, b) = (x[i], y[i]);
            let d = (b as f64).to_bits();
            let h = f16_from_f32(a * 0.001);
            [
                a as i32 as u32,
                a.abs() as u32,
                ((b >> 16) as i32 as f32).to_bits(),
                (b as u64 as f32).to_bits(),
                d as u32 ^ (d >> 32) as u32,
                ((f64::from(a) * 3.0) as f32).to_bits(),
                u32::from(h) | (f32_from_f16(h) as i32 as u32) << 16,
                (f64::from(a) * 1e6) as i64 as u32,
            ]
        })
        .collect();
    same("convert", t, &u32s(&m, 0, 8 * N as usize), &want);
}

/// f32 special values: zeros, infinities, NaN, denormals, the extremes.
const F32_SPECIAL: [f32; 15] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    1.5,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    1e-45,
    -3e-39,
    f32::MAX,
    f32::MIN_POSITIVE,
    1.1754942e-38,
    -2.5e38,
    1e-20,
];

/// Results equal: the same bits, any NaN for a NaN, and (`zeros`) either zero for a zero.
fn same_float<T: Copy + PartialEq + std::fmt::Debug>(
    what: &str,
    t: Cfg,
    got: &[T],
    want: &[T],
    nan: impl Fn(T) -> bool,
    zero: impl Fn(T) -> bool,
    zeros: impl Fn(usize) -> bool,
) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (nan(g) && nan(w)) || (zeros(i) && zero(g) && zero(w));
        assert!(ok, "{what} on {t:?}: element {i}: got {g:?}, want {w:?}");
    }
}

fn fspecial(t: Cfg) {
    let mut x = Vec::new();
    let mut y = Vec::new();
    for a in F32_SPECIAL {
        for b in F32_SPECIAL {
            x.push(a);
            y.push(b);
        }
    }
    let n = x.len();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(n as u32)];
    let bufs = vec![
        vec![0; 32 * n],
        bytes(&x, f32::to_le_bytes),
        bytes(&y, f32::to_le_bytes),
    ];
    let Some(m) = launch(t, "fspecial", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..n)
        .flat_map(|i| {
            let (a, b) = (x[i], y[i]);
            let sel = if a < b {
                a - b
            } else if a == b {
                1.0
            } else {
                2f32.copysign(b)
            };
            [
                a + b,
                a * b,
                a / b,
                a.sqrt(),
                a.min(b),
                a.max(b),
                a.mul_add(b, a),
                sel,
            ]
        })
        .map(f32::to_bits)
        .collect();
    let got = u32s(&m, 0, 8 * n);
    let nan = |v: u32| f32::from_bits(v).is_nan();
    let zero = |v: u32| v & 0x7fff_ffff == 0;
    // min/max of +0 and -0 may return either (IEEE 754-2008 minNum/maxNum).
    same_float("fspecial", t, &got, &want, nan, zero, |i| {
        matches!(i % 8, 4 | 5)
    });
}

fn dspecial(t: Cfg) {
    let special: Vec<f64> = F32_SPECIAL
        .iter()
        .map(|&v| f64::from(v))
        .chain([f64::MAX, 5e-324, -2.2250738585072e-308, 1e300, 1.0 / 3.0])
        .collect();
    let mut x = Vec::new();
    let mut y = Vec::new();
    for &a in &special {
        for &b in &special {
            x.push(a);
            y.push(b);
        }
    }
    let n = x.len();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(n as u32)];
    let bufs = vec![
        vec![0; 64 * n],
        bytes(&x, f64::to_le_bytes),
        bytes(&y, f64::to_le_bytes),
    ];
    let Some(m) = launch(t, "dspecial", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    let want: Vec<u64> = (0..n)
        .flat_map(|i| {
            let (a, b) = (x[i], y[i]);
            let sel = if a < b {
                a - b
            } else if a == b {
                1.0
            } else {
                2f64.copysign(b)
            };
            [
                a + b,
                a * b,
                a / b,
                a.sqrt(),
                a.min(b),
                a.max(b),
                a.mul_add(b, a),
                sel,
            ]
        })
        .map(f64::to_bits)
        .collect();
    let got = u64s(&m, 0, 8 * n);
    let nan = |v: u64| f64::from_bits(v).is_nan();
    let zero = |v: u64| v & 0x7fff_ffff_ffff_ffff == 0;
    same_float("dspecial", t, &got, &want, nan, zero, |i| {
        matches!(i % 8, 4 | 5)
    });
}

fn packed(t: Cfg) {
    let mut r = Rng(16);
    let n = 300usize;
    let x: Vec<f32> = (0..2 * n).map(|_| r.f32(-8.0, 8.0)).collect();
    let h: Vec<u16> = (0..2 * n).map(|_| f16_from_f32(r.f32(-8.0, 8.0))).collect();
    let args = [
        Arg::Buf(0),
        Arg::Buf(1),
        Arg::Buf(2),
        Arg::Buf(3),
        Arg::U32(n as u32),
    ];
    let bufs = vec![
        vec![0; 16 * n],
        vec![0; 8 * n],
        bytes(&x, f32::to_le_bytes),
        bytes(&h, u16::to_le_bytes),
    ];
    let Some(m) = launch(t, "packed", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    let hr = f16_from_f32;
    let f = f32_from_f16;
    let mut want = Vec::new();
    let mut hwant = Vec::new();
    for i in 0..n {
        let j = (i + 1) % n;
        for c in 0..2 {
            want.push((x[2 * i + c] * x[2 * j + c] + x[2 * i + c]).to_bits());
        }
        for c in 0..2 {
            want.push((x[2 * i + c] - x[2 * j + c] * 0.5).to_bits());
        }
        let (p, q) = (
            &h[2 * i..2 * i + 2],
            &h[2 * ((i + 3) % n)..2 * ((i + 3) % n) + 2],
        );
        for c in 0..2 {
            hwant.push(hr(f(hr(f(p[c]) * f(q[c]))) - f(p[c])));
        }
        for c in 0..2 {
            hwant.push(hr(f(p[1 - c]) + f(hr(f(q[c]) * 0.25))));
        }
    }
    same("packed f32", t, &u32s(&m, 0, 4 * n), &want);
    same("packed f16", t, &u16s(&m, 1, 4 * n), &hwant);
}

fn scan1024(t: Cfg) {
    let mut r = Rng(17);
    let n = 2048usize;
    let input: Vec<u32> = (0..n).map(|_| r.u32() >> 8).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::Buf(3)];
    let bufs = vec![
        vec![0; 4 * n],
        vec![0; n],
        vec![0; 2 * n],
        bytes(&input, u32::to_le_bytes),
    ];
    let Some(m) = launch(t, "scan1024", &args, bufs, [n as u32, 1, 1], [1024, 1, 1]) else {
        return;
    };
    let mut want = Vec::new();
    for g in input.chunks(1024) {
        let mut s = 0u32;
        want.extend(g.iter().map(|&v| {
            s = s.wrapping_add(v);
            s
        }));
    }
    same("scan1024", t, &u32s(&m, 0, n), &want);
    let wb: Vec<u8> = (0..n)
        .map(|i| (want[i / 1024 * 1024 + 1023 - i % 1024] >> 3) as u8)
        .collect();
    same("scan1024 bytes", t, &m.bytes(buffer(1), n), &wb);
    let ws: Vec<u16> = want.iter().map(|&v| (v >> 7) as u16).collect();
    same("scan1024 shorts", t, &u16s(&m, 2, n), &ws);
}

fn atomics2(t: Cfg) {
    let mut r = Rng(18);
    let (groups, n) = (4usize, 1024usize);
    let input: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let acc = [0u32, 5, i32::MAX as u32, 0, 0, 0];
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2)];
    let bufs = vec![
        bytes(&acc, u32::to_le_bytes),
        vec![0; 4 * (1 + groups)],
        bytes(&input, u32::to_le_bytes),
    ];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(t, "atomics2", &args, bufs, grid, [256, 1, 1]) else {
        return;
    };
    let got = u32s(&m, 0, 4);
    let min = input.iter().map(|&v| v as i32).min().unwrap();
    let dec = (5 - n as i64).rem_euclid(1001) as u32;
    same("atomics2", t, &got, &[n as u32 % 100, dec, min as u32, 7]);
    let sum64 = input
        .iter()
        .fold(0u64, |s, &v| s + (u64::from(v) << 16) + 1);
    assert_eq!(
        u64::from_le_bytes(m.bytes(buffer(0) + 16, 8).try_into().unwrap()),
        sum64,
        "atomics2 64-bit cmpswap on {t:?}"
    );
    let f: Vec<f32> = u32s(&m, 1, 1 + groups)
        .into_iter()
        .map(f32::from_bits)
        .collect();
    let total: u32 = input.iter().map(|&v| v & 255).sum();
    assert_eq!(f[0], total as f32 * 0.5, "atomics2 global fadd on {t:?}");
    for (g, c) in input.chunks(256).enumerate() {
        let s: u32 = c.iter().map(|&v| v & 255).sum();
        assert_eq!(f[1 + g], s as f32, "atomics2 LDS fadd on {t:?}, group {g}");
    }
}

fn lds_wide(t: Cfg) {
    let mut r = Rng(19);
    let n = 512usize;
    let input: Vec<u32> = (0..4 * n).map(|_| r.u32()).collect();
    let bufs = vec![vec![0; 16 * n], bytes(&input, u32::to_le_bytes)];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(
        t,
        "lds_wide",
        &[Arg::Buf(0), Arg::Buf(1)],
        bufs,
        grid,
        [256, 1, 1],
    ) else {
        return;
    };
    let mut want = Vec::new();
    for i in 0..n {
        let (g, l) = (i / 256 * 256, i % 256);
        let v = &input[4 * i..4 * i + 4];
        let a = &input[4 * (g + (v[1] & 255) as usize)..][..4];
        let k = g + 255 - (v[2] & 255) as usize;
        let b = u64::from(input[4 * k]) << 32 | u64::from(input[4 * k + 3]);
        want.extend([
            a[0].wrapping_add(b as u32),
            a[1] ^ (b >> 32) as u32,
            a[2],
            a[3].wrapping_add(l as u32),
        ]);
    }
    same("lds_wide", t, &u32s(&m, 0, 4 * n), &want);
}

fn grid3d(t: Cfg) {
    let (w, h, d) = (19u32, 11u32, 5u32);
    let n = (w * h * d) as usize;
    let args = [Arg::Buf(0), Arg::U32(w), Arg::U32(h)];
    let Some(m) = launch(
        t,
        "grid3d",
        &args,
        vec![vec![0; 4 * n]],
        [w, h, d],
        [8, 4, 2],
    ) else {
        return;
    };
    let want: Vec<u32> = (0..n as u32)
        .map(|i| {
            let (x, y, z) = (i % w, i / w % h, i / w / h);
            x | y << 8 | z << 16 | (z % 2) << 24
        })
        .collect();
    same("grid3d", t, &u32s(&m, 0, n), &want);
}

fn i64ops(t: Cfg) {
    let mut r = Rng(20);
    let a: Vec<u64> = (0..N).map(|i| r.next() >> (i % 40)).collect();
    let b: Vec<u64> = (0..N).map(|_| r.next()).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(N)];
    let bufs = vec![
        vec![0; 64 * N as usize],
        bytes(&a, u64::to_le_bytes),
        bytes(&b, u64::to_le_bytes),
    ];
    let Some(m) = launch(t, "i64ops", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let want: Vec<u64> = (0..N as usize)
        .flat_map(|i| {
            let (x, y) = (a[i], b[i]);
            let (sx, sy) = (x as i64, y as i64);
            [
                x.wrapping_mul(y),
                (x & 0xffff_ffff) * (y & 0xffff_ffff),
                (x << (y & 63)) ^ (x >> (y >> 58)),
                (sx >> (y & 63)) as u64,
                sx.min(sy) as u64,
                x.abs_diff(y),
                (i64::from(x as i32) * i64::from((y >> 32) as i32)) as u64,
                (x & 0xff_ffff) * (y & 0xff_ffff),
            ]
        })
        .collect();
    same("i64ops", t, &u64s(&m, 0, 8 * N as usize), &want);
}

fn narrow(t: Cfg) {
    let mut r = Rng(21);
    let a: Vec<u32> = (0..N).map(|_| r.u32()).collect();
    let b: Vec<u32> = (0..N).map(|_| r.u32()).collect();
    let args = [
        Arg::Buf(0),
        Arg::Buf(1),
        Arg::Buf(2),
        Arg::Buf(3),
        Arg::U32(N),
    ];
    let bufs = vec![
        vec![0; 4 * N as usize],
        vec![0; 4 * N as usize],
        bytes(&a, u32::to_le_bytes),
        bytes(&b, u32::to_le_bytes),
    ];
    let Some(m) = launch(t, "narrow", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let n = N as usize;
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let x = a[i].to_le_bytes();
            let y = a[(i + 7) % n].to_le_bytes();
            u32::from_le_bytes([
                x[0].wrapping_add(y[1]),
                x[1].wrapping_mul(y[0]),
                x[2].max(y[3]),
                x[3] ^ y[2],
            ])
        })
        .collect();
    same("narrow uchar4", t, &u32s(&m, 0, n), &want);
    let h = |v: u32, k: u32| (v >> (16 * k)) as u16 as i16;
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let (p, q) = (b[i], b[(i + 3) % n]);
            let x = h(p, 0).wrapping_mul(h(q, 1));
            let y = (h(p, 1) >> 3).wrapping_sub(h(q, 0));
            u32::from(x as u16) | u32::from(y as u16) << 16
        })
        .collect();
    same("narrow short2", t, &u32s(&m, 1, n), &want);
}

fn lds_bytes(t: Cfg) {
    let mut r = Rng(22);
    let n = 768usize;
    let input: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let bufs = vec![vec![0; 4 * n], bytes(&input, u32::to_le_bytes)];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(
        t,
        "lds_bytes",
        &[Arg::Buf(0), Arg::Buf(1)],
        bufs,
        grid,
        [256, 1, 1],
    ) else {
        return;
    };
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let g = i / 256 * 256;
            let v = input[i];
            let b = input[g + ((v >> 16) & 255) as usize] as u8;
            let h = (input[g + 255 - (v >> 24) as usize] >> 8) as u16;
            u32::from(b) | u32::from(h) << 8
        })
        .collect();
    same("lds_bytes", t, &u32s(&m, 0, n), &want);
}

fn permute(t: Cfg) {
    let mut r = Rng(23);
    let n = 256usize;
    let input: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(45)];
    let bufs = vec![vec![0; 8 * n], bytes(&input, u32::to_le_bytes)];
    let Some(m) = launch(t, "permute", &args, bufs, [n as u32, 1, 1], [128, 1, 1]) else {
        return;
    };
    // ds_permute pushes lane l's value to lane 7l mod 64: lane d gets lane 55d's (7 · 55 =
    // 385 = 1 mod 64).
    let want: Vec<u32> = (0..n)
        .flat_map(|i| {
            let w = i / 64 * 64;
            [input[w + 45], input[w + (i % 64 * 55) % 64]]
        })
        .collect();
    same("permute", t, &u32s(&m, 0, 2 * n), &want);
}

fn trap(t: Cfg) {
    let Some(obj) = build_at(t.target, t.opt) else {
        return;
    };
    let mut input: Vec<u32> = (0..512).map(|i| i + 100).collect();
    input[300] = 7;
    let launch = Launch {
        target: t.target,
        kernel: "trap",
        args: &[Arg::Buf(0), Arg::Buf(1)],
        buffers: vec![vec![0; 4 * 512], bytes(&input, u32::to_le_bytes)],
        grid: [512, 1, 1],
        workgroup: [128, 1, 1],
        dynamic_lds: 0,
    };
    let (mem, d) = launch.prepare(&obj);
    match run(&d, &mem, &RunOptions { threads: 1 }, &NoObserver) {
        // Item 300: workgroup 2, its wave 0 (items 256..320); llvm.trap is s_trap 2.
        Err(DispatchError::Trap {
            workgroup,
            wave,
            trap_id,
            ..
        }) => {
            assert_eq!((workgroup, wave, trap_id), ([2, 0, 0], 0, 2), "on {t:?}");
        }
        other => panic!("trap on {t:?}: {other:?}"),
    }
}

fn mfma(t: Cfg) {
    if t.target == Target::Gfx906 {
        return; // gfx906 has no matrix instructions (the kernel is not built for it)
    }
    let mut r = Rng(24);
    let n = 256usize; // 4 waves, each its own product
    // Small integers: every product and sum is exact, whatever order the hardware sums in.
    let small = |r: &mut Rng| (r.u32() % 17) as f32 - 8.0;
    let a: Vec<f32> = (0..n).map(|_| small(&mut r)).collect();
    let b: Vec<f32> = (0..n).map(|_| small(&mut r)).collect();
    let c: Vec<f32> = (0..4 * n).map(|_| small(&mut r)).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::Buf(3)];
    let bufs = vec![
        vec![0; 16 * n],
        bytes(&a, f32::to_le_bytes),
        bytes(&b, f32::to_le_bytes),
        bytes(&c, f32::to_le_bytes),
    ];
    let Some(m) = launch(t, "mfma", &args, bufs, [n as u32, 1, 1], [128, 1, 1]) else {
        return;
    };
    let mut want = vec![0u32; 4 * n];
    for w in 0..n / 64 {
        let (a, b, c) = (&a[64 * w..], &b[64 * w..], &c[256 * w..]);
        for i in 0..16 {
            for j in 0..16 {
                // D[i][j] and C[i][j]: register i % 4 of lane 16 (i / 4) + j.
                let at = 4 * (16 * (i / 4) + j) + i % 4;
                let dot: f32 = (0..4).map(|k| a[16 * k + i] * b[16 * k + j]).sum();
                want[256 * w + at] = (c[at] + dot).to_bits();
            }
        }
    }
    same("mfma", t, &u32s(&m, 0, 4 * n), &want);
}

fn mfma_f16(t: Cfg) {
    if t.target == Target::Gfx906 {
        return; // no matrix instructions
    }
    let mut r = Rng(25);
    let n = 128usize;
    let small = |r: &mut Rng| (r.u32() % 9) as f32 - 4.0;
    let a: Vec<f32> = (0..4 * n).map(|_| small(&mut r)).collect();
    let b: Vec<f32> = (0..4 * n).map(|_| small(&mut r)).collect();
    let c: Vec<f32> = (0..4 * n).map(|_| small(&mut r)).collect();
    let h = |v: &[f32]| -> Vec<u8> {
        v.iter()
            .flat_map(|&x| f16_from_f32(x).to_le_bytes())
            .collect()
    };
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::Buf(3)];
    let bufs = vec![vec![0; 16 * n], h(&a), h(&b), bytes(&c, f32::to_le_bytes)];
    let Some(m) = launch(t, "mfma_f16", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    let mut want = vec![0u32; 4 * n];
    for w in 0..n / 64 {
        let (a, b, c) = (&a[256 * w..], &b[256 * w..], &c[256 * w..]);
        for i in 0..16 {
            for j in 0..16 {
                let at = 4 * (16 * (i / 4) + j) + i % 4;
                // A[i][k]: element k % 4 of lane 16 (k / 4) + i.
                let dot: f32 = (0..16)
                    .map(|k| a[4 * (16 * (k / 4) + i) + k % 4] * b[4 * (16 * (k / 4) + j) + k % 4])
                    .sum();
                want[256 * w + at] = (c[at] + dot).to_bits();
            }
        }
    }
    same("mfma_f16", t, &u32s(&m, 0, 4 * n), &want);
}

fn mfma_f64(t: Cfg) {
    if matches!(t.target, Target::Gfx906 | Target::Gfx908) {
        return; // f64 matrix instructions are gfx90a's and gfx942's
    }
    let mut r = Rng(26);
    let n = 128usize;
    let small = |r: &mut Rng| f64::from(r.u32() % 17) - 8.0;
    let a: Vec<f64> = (0..n).map(|_| small(&mut r)).collect();
    let b: Vec<f64> = (0..n).map(|_| small(&mut r)).collect();
    let c: Vec<f64> = (0..4 * n).map(|_| small(&mut r)).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::Buf(3)];
    let bufs = vec![
        vec![0; 32 * n],
        bytes(&a, f64::to_le_bytes),
        bytes(&b, f64::to_le_bytes),
        bytes(&c, f64::to_le_bytes),
    ];
    let Some(m) = launch(t, "mfma_f64", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    let mut want = vec![0u64; 4 * n];
    for w in 0..n / 64 {
        let (a, b, c) = (&a[64 * w..], &b[64 * w..], &c[256 * w..]);
        for i in 0..16 {
            for j in 0..16 {
                // D[i][j]: register pair i / 4 of lane 16 (i % 4) + j.
                let at = 4 * (16 * (i % 4) + j) + i / 4;
                let dot: f64 = (0..4).map(|k| a[16 * k + i] * b[16 * k + j]).sum();
                want[256 * w + at] = (c[at] + dot).to_bits();
            }
        }
    }
    same("mfma_f64", t, &u64s(&m, 0, 4 * n), &want);
}

fn dyn_lds(t: Cfg) {
    let mut r = Rng(27);
    let (n, wg) = (600usize, 200usize);
    let input: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::DynLds];
    let bufs = vec![vec![0; 4 * n], bytes(&input, u32::to_le_bytes)];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(t, "dyn_lds", &args, bufs, grid, [wg as u32, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let (g, l) = (i / wg * wg, i % wg);
            input[g + (l * 5) % wg].wrapping_add(input[g + l % 64] ^ 0x55)
        })
        .collect();
    same("dyn_lds", t, &u32s(&m, 0, n), &want);
}

fn cvt_special(t: Cfg) {
    let vals: Vec<f64> = vec![
        0.0,
        -0.0,
        -0.5,
        0.99,
        -1.5,
        2147483520.0,
        2147483648.0,
        -2147483904.0,
        3e9,
        4294967040.0,
        5e9,
        -3e9,
        1e30,
        -1e30,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        4294967295.5,
        -2147483648.9,
    ];
    let n = vals.len();
    let x: Vec<f32> = vals.iter().map(|&v| v as f32).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(n as u32)];
    let bufs = vec![
        vec![0; 16 * n],
        bytes(&x, f32::to_le_bytes),
        bytes(&vals, f64::to_le_bytes),
    ];
    let Some(m) = launch(t, "cvt_special", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    // The guide's V_CVT_{I32,U32}_{F32,F64}: saturating, NaN to 0, truncating — Rust's `as`.
    let want: Vec<u32> = (0..n)
        .flat_map(|i| {
            let (a, d) = (x[i], vals[i]);
            [a as i32 as u32, a as u32, d as i32 as u32, d as u32]
        })
        .collect();
    same("cvt_special", t, &u32s(&m, 0, 4 * n), &want);
}

/// The kernels of `ocl.cl` (built against the ROCm device libraries) per target.
macro_rules! ocl_on_every_target {
    ($name:ident) => {
        mod $name {
            use super::Cfg;
            use kfd_gfx9::exec::Target;
            fn at(target: Target) {
                super::$name(Cfg { target, opt: "ocl" });
            }
            #[test]
            fn gfx90a() {
                at(Target::Gfx90a);
            }
            #[test]
            fn gfx942() {
                at(Target::Gfx942);
            }
            #[test]
            fn gfx908() {
                at(Target::Gfx908);
            }
            #[test]
            fn gfx906() {
                at(Target::Gfx906);
            }
        }
    };
}

ocl_on_every_target!(ocl_ids);
ocl_on_every_target!(ocl_math);
ocl_on_every_target!(ocl_dmath);
ocl_on_every_target!(ocl_subgroup);

fn ocl_ids(t: Cfg) {
    let (w, h) = (37u32, 21u32);
    let (lx, ly) = (16u32, 8u32);
    let n = (w * h) as usize;
    let Some(m) = launch(
        t,
        "ocl_ids",
        &[Arg::Buf(0)],
        vec![vec![0; 32 * n]],
        [w, h, 1],
        [lx, ly, 1],
    ) else {
        return;
    };
    let pack = |a: u32, b: u32| a | b << 16;
    let (gx, gy) = (w.div_ceil(lx), h.div_ceil(ly));
    let want: Vec<u32> = (0..w * h)
        .flat_map(|i| {
            let (x, y) = (i % w, i / w);
            let (bx, by) = (x / lx, y / ly);
            // OpenCL 2.0: the last group of a dimension is the remainder.
            let sx = if bx == gx - 1 && w % lx != 0 {
                w % lx
            } else {
                lx
            };
            let sy = if by == gy - 1 && h % ly != 0 {
                h % ly
            } else {
                ly
            };
            [
                pack(x % lx, y % ly),
                pack(bx, by),
                pack(sx, sy),
                pack(gx, gy),
                pack(w, h),
                2,
                pack(lx, ly),
                // ROCm 5.2's ockl computes it from the packet's (enqueued) work-group size.
                (y % ly) * lx + x % lx,
            ]
        })
        .collect();
    same("ocl_ids", t, &u32s(&m, 0, 8 * n), &want);
}

fn ocl_math(t: Cfg) {
    let mut r = Rng(28);
    let x: Vec<f32> = (0..N).map(|_| r.f32(-10.0, 10.0)).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(N)];
    let bufs = vec![vec![0; 32 * N as usize], bytes(&x, f32::to_le_bytes)];
    let Some(m) = launch(t, "ocl_math", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let got: Vec<f32> = u32s(&m, 0, 8 * N as usize)
        .into_iter()
        .map(f32::from_bits)
        .collect();
    // The OpenCL 2.0 single-precision ULP limits (table 7.1) against f64 references.
    let limits = [3, 3, 4, 4, 16, 5, 6, 2];
    for (i, &a) in x.iter().enumerate() {
        let d = f64::from(a);
        let want = [
            d.exp(),
            (d.abs() + 0.5).ln(),
            d.sin(),
            d.cos(),
            (d.abs() + 0.25).powf(1.5),
            (d * 0.25).tanh(),
            d.atan2(3.0),
            d.cbrt(),
        ];
        for k in 0..8 {
            let (g, w) = (got[8 * i + k], want[k] as f32);
            assert!(
                ulps(g, w) <= limits[k],
                "ocl_math[{k}] on {t:?} at x = {a}: got {g}, want {w} ({} ulps)",
                ulps(g, w)
            );
        }
    }
}

fn ocl_dmath(t: Cfg) {
    let mut r = Rng(29);
    let x: Vec<f64> = (0..N)
        .map(|_| f64::from(r.f32(-20.0, 20.0)) / 3.0)
        .collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::U32(N)];
    let bufs = vec![vec![0; 32 * N as usize], bytes(&x, f64::to_le_bytes)];
    let Some(m) = launch(t, "ocl_dmath", &args, bufs, [N, 1, 1], [256, 1, 1]) else {
        return;
    };
    let got: Vec<f64> = u64s(&m, 0, 4 * N as usize)
        .into_iter()
        .map(f64::from_bits)
        .collect();
    let ulps64 = |a: f64, b: f64| {
        let key = |x: f64| {
            let i = x.to_bits() as i64;
            if i < 0 { i64::MIN - i } else { i }
        };
        key(a).abs_diff(key(b))
    };
    // OpenCL's double limits (exp, log 3 ulp; sin 4; sqrt correctly rounded), plus one for
    // the host's own libm.
    for (i, &a) in x.iter().enumerate() {
        let want = [a.exp(), (a.abs() + 0.5).ln(), a.sin(), a.abs().sqrt()];
        for (k, (&g, w)) in got[4 * i..4 * i + 4].iter().zip(want).enumerate() {
            let limit = [4, 4, 5, 0][k];
            assert!(
                ulps64(g, w) <= limit,
                "ocl_dmath[{k}] on {t:?} at x = {a}: got {g}, want {w}"
            );
        }
    }
}

fn ocl_subgroup(t: Cfg) {
    let mut r = Rng(30);
    let n = 256usize;
    let input: Vec<i32> = (0..n).map(|_| r.u32() as i32).collect();
    let bufs = vec![vec![0; 24 * n], bytes(&input, i32::to_le_bytes)];
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(
        t,
        "ocl_subgroup",
        &[Arg::Buf(0), Arg::Buf(1)],
        bufs,
        grid,
        [128, 1, 1],
    ) else {
        return;
    };
    let mut want = Vec::new();
    for (w, wave) in input.chunks(64).enumerate() {
        let sum = wave.iter().fold(0i32, |s, &v| s.wrapping_add(v));
        let max = *wave.iter().max().unwrap();
        let any = wave.iter().any(|&v| v > 1_000_000_000);
        let all = wave.iter().all(|&v| v > -2_000_000_000);
        let mut scan = 0i32;
        for (l, &v) in wave.iter().enumerate() {
            scan = scan.wrapping_add(v);
            want.extend([
                sum,
                scan,
                max,
                wave[5],
                ((w % 2) << 8 | l) as i32,
                i32::from(any) | i32::from(all) << 1,
            ]);
        }
    }
    let got: Vec<i32> = u32s(&m, 0, 6 * n).into_iter().map(|v| v as i32).collect();
    same("ocl_subgroup", t, &got, &want);
}

/// `fspecial` compiled with `-cl-denorms-are-zero`: the descriptor's MODE flushes f32
/// denormals, inputs and results (sign kept).
fn fspecial_ftz(target: Target) {
    let t = Cfg {
        target,
        opt: "-O2 -cl-denorms-are-zero",
    };
    let mut x = Vec::new();
    let mut y = Vec::new();
    for a in F32_SPECIAL {
        for b in F32_SPECIAL {
            x.push(a);
            y.push(b);
        }
    }
    let n = x.len();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::Buf(2), Arg::U32(n as u32)];
    let bufs = vec![
        vec![0; 32 * n],
        bytes(&x, f32::to_le_bytes),
        bytes(&y, f32::to_le_bytes),
    ];
    let Some(m) = launch(t, "fspecial", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
        return;
    };
    let ftz = |v: f32| {
        if v.is_subnormal() {
            0.0f32.copysign(v)
        } else {
            v
        }
    };
    let want: Vec<u32> = (0..n)
        .flat_map(|i| {
            let (a, b) = (ftz(x[i]), ftz(y[i]));
            let sel = if a < b {
                a - b
            } else if a == b {
                1.0
            } else {
                2f32.copysign(b)
            };
            [
                a + b,
                a * b,
                a / b,
                a.sqrt(),
                a.min(b),
                a.max(b),
                a.mul_add(b, a),
                sel,
            ]
        })
        .map(|v| ftz(v).to_bits())
        .collect();
    let got = u32s(&m, 0, 8 * n);
    let nan = |v: u32| f32::from_bits(v).is_nan();
    let zero = |v: u32| v & 0x7fff_ffff == 0;
    same_float(
        "fspecial -cl-denorms-are-zero",
        t,
        &got,
        &want,
        nan,
        zero,
        |i| matches!(i % 8, 4 | 5),
    );
}

#[test]
fn fspecial_ftz_gfx90a() {
    fspecial_ftz(Target::Gfx90a);
}

#[test]
fn fspecial_ftz_gfx942() {
    fspecial_ftz(Target::Gfx942);
}

#[test]
fn f16_conversion_helper_rounds_to_nearest_even() {
    assert_eq!(f16_from_f32(1.0), 0x3c00);
    assert_eq!(f16_from_f32(65504.0), 0x7bff);
    assert_eq!(f16_from_f32(65520.0), 0x7c00);
    assert_eq!(f16_from_f32(-2.0), 0xc000);
    assert_eq!(f16_from_f32(2f32.powi(-24)), 1);
    assert_eq!(f16_from_f32(1.0 + 2f32.powi(-11)), 0x3c00); // tie to even
    assert_eq!(f16_from_f32(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
    assert_eq!(
        f16_from_f32(2f32.powi(-14) * (1.0 - 2f32.powi(-12))),
        0x0400
    );
    for h in [0x3c00u16, 0x0001, 0x03ff, 0x7bff, 0xc123] {
        assert_eq!(f16_from_f32(f32_from_f16(h)), h);
    }
}

/// FP_ROUND as compiled code sets it: the kernel switches the rounding mode with
/// `__builtin_set_flt_rounds` (LLVM's own FLT_ROUNDS → MODE table, both FP_ROUND fields)
/// around f32 add, mul, fma and correctly rounded division: each mode's f32 results equal
/// the host FPU's under the same rounding (MXCSR, `common::fpu`), so LLVM's encoding of the
/// modes and the interpreter's reading of FP_ROUND agree, division sequence included. The
/// f64 add, mul and division round to nearest in every mode: LLVM 19's SIModeRegister pass
/// writes FP_ROUND[3:2] = 0 (`s_setreg_imm32_b32 hwreg(HW_REG_MODE, 2, 2), 0`) before the
/// first f64 instruction, whose FPDPRounding flag requires it, and the interpreter obeys that
/// `s_setreg` too.
fn fp_round(t: Cfg) {
    #[cfg(target_arch = "x86_64")]
    {
        if !std::arch::is_x86_feature_detected!("fma") {
            println!("skipped: the host CPU lacks FMA3, the oracle's fused form");
            return;
        }
        use common::fpu;
        let n = 256usize;
        let mut r = Rng(33);
        // Operands of similar and distant magnitudes: sums and quotients that round.
        let x: Vec<f32> = (0..2 * n)
            .map(|i| r.f32(-10.0, 10.0) * [1.0, 1e-7, 3e5, 0.1][i % 4])
            .collect();
        let dx: Vec<f64> = (0..2 * n)
            .map(|i| f64::from(r.f32(-10.0, 10.0)) / 3.0 * [1.0, 1e-17, 7e9, 1.0][i % 4])
            .collect();
        // FLT_ROUNDS value → FP_ROUND value: toward zero 3, nearest 0, upward 1, downward 2.
        for (flt_rounds, amd) in [(0u32, 3u32), (1, 0), (2, 1), (3, 2)] {
            let args = [
                Arg::Buf(0),
                Arg::Buf(1),
                Arg::Buf(2),
                Arg::Buf(3),
                Arg::U32(flt_rounds),
            ];
            let bufs = vec![
                vec![0; 16 * n],
                vec![0; 24 * n],
                bytes(&x, f32::to_le_bytes),
                bytes(&dx, f64::to_le_bytes),
            ];
            let Some(m) = launch(t, "fp_round", &args, bufs, [n as u32, 1, 1], [64, 1, 1]) else {
                return;
            };
            let want: Vec<u32> = (0..n)
                .flat_map(|i| {
                    let (a, b) = (x[2 * i], x[2 * i + 1]);
                    [
                        fpu::add32(amd, a, b),
                        fpu::mul32(amd, a, b),
                        fpu::fma32(amd, a, b, 0.75),
                        fpu::div32(amd, a, b),
                    ]
                })
                .map(f32::to_bits)
                .collect();
            // The operands make the modes matter: a directed mode changes many results.
            let nearest: Vec<u32> = (0..n)
                .flat_map(|i| {
                    let (a, b) = (x[2 * i], x[2 * i + 1]);
                    [a + b, a * b, a.mul_add(b, 0.75), a / b]
                })
                .map(f32::to_bits)
                .collect();
            let moved = want.iter().zip(&nearest).filter(|(w, n)| w != n).count();
            assert_eq!(
                amd == 0,
                moved == 0,
                "FLT_ROUNDS {flt_rounds}: {moved} differ"
            );
            assert!(
                amd == 0 || moved > n / 2,
                "FLT_ROUNDS {flt_rounds}: {moved} differ"
            );
            let what = format!("fp_round f32, FLT_ROUNDS {flt_rounds}");
            same(&what, t, &u32s(&m, 0, 4 * n), &want);
            let want: Vec<u64> = (0..n)
                .flat_map(|i| {
                    let (c, d) = (dx[2 * i], dx[2 * i + 1]);
                    [
                        fpu::add64(0, c, d),
                        fpu::mul64(0, c, d),
                        fpu::div64(0, c, d),
                    ]
                })
                .map(f64::to_bits)
                .collect();
            let what = format!("fp_round f64, FLT_ROUNDS {flt_rounds}");
            same(&what, t, &u64s(&m, 1, 3 * n), &want);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("skipped on {:?}: the oracle is the x86 FPU", t.target);
}

/// `tests/kernels/lds_dma.cl`: on gfx942 each lane's dword goes from global memory to LDS by
/// `global_load_lds_dword` (M0 the wave's LDS base, the immediate offset added to both
/// addresses, lane t at base + offset + 4 t), then the workgroup reads it back permuted;
/// on gfx90a the same kernel copies through VGPRs. Both equal the host's
/// `out[g + l] = in[g + 4 + (5 l mod 256)] + l`.
fn lds_dma(t: Cfg) {
    let mut r = Rng(31);
    let (n, wg) = (1024usize, 256usize);
    let input: Vec<u32> = (0..n + 4).map(|_| r.u32()).collect();
    let args = [Arg::Buf(0), Arg::Buf(1), Arg::DynLds];
    let bufs = vec![vec![0; 4 * n], bytes(&input, u32::to_le_bytes)];
    let Some(m) = launch(
        t,
        "lds_dma",
        &args,
        bufs,
        [n as u32, 1, 1],
        [wg as u32, 1, 1],
    ) else {
        return;
    };
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let (g, l) = (i / wg * wg, i % wg);
            input[g + 4 + (l * 5) % wg].wrapping_add(l as u32)
        })
        .collect();
    same("lds_dma", t, &u32s(&m, 0, n), &want);
}

/// Whether the kernel `name` of `obj` contains `op` (decoded from its entry to `s_endpgm`).
fn kernel_has(obj: &kernels::CodeObject, name: &str, op: kfd_gfx9::Opcode) -> bool {
    let start = obj.symbols[name] as usize;
    let words: Vec<u32> = obj.image[start..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    kfd_gfx9::Decoder::new(&words)
        .map_while(|(_, inst)| inst.ok())
        .take_while(|inst| inst.op != kfd_gfx9::Opcode::Sopp(kfd_gfx9::SoppOp::SEndpgm))
        .any(|inst| inst.op == op)
}

#[test]
fn lds_dma_gfx942_loads_to_lds_without_vgprs() {
    let Some(obj) = build_lds_dma(Target::Gfx942) else {
        return;
    };
    // The test is about the instruction: clang must have selected it.
    let op = kfd_gfx9::Opcode::Flat(kfd_gfx9::Segment::Global, kfd_gfx9::FlatOp::LoadLdsDword);
    assert!(kernel_has(&obj, "lds_dma", op), "no global_load_lds_dword");
    lds_dma(Cfg {
        target: Target::Gfx942,
        opt: "lds_dma",
    });
}

#[test]
fn lds_dma_gfx90a_copies_through_vgprs() {
    lds_dma(Cfg {
        target: Target::Gfx90a,
        opt: "lds_dma",
    });
}

/// `tests/kernels/lds_dma_ir.ll`: a dword per lane to LDS by `buffer_load_dword ... lds` and
/// a short per lane by `global_load_ushort ... lds` (gfx942: `global_load_lds_ushort`), read
/// back permuted; equal to the host's
/// `out[g + l] = in32[g + 4 + (5 l mod 256)] + 3 in16[g + 2 + (7 l mod 256)] + l`. The code
/// must hold both loads to LDS (the test is about them).
fn lds_dma_ir(target: Target) {
    use kfd_gfx9::{FlatOp, MubufOp, Opcode, Segment};
    let Some(obj) = build_lds_dma_ir(target) else {
        return;
    };
    let has = |op| kernel_has(&obj, "lds_dma_ir", op);
    assert!(has(Opcode::Mubuf(MubufOp::BufferLoadDword)));
    let short = if target == Target::Gfx942 {
        FlatOp::LoadLdsUshort
    } else {
        FlatOp::LoadUshort
    };
    assert!(has(Opcode::Flat(Segment::Global, short)));
    let mut r = Rng(37);
    let (n, wg) = (1024usize, 256usize);
    let input: Vec<u32> = (0..n + 4).map(|_| r.u32()).collect();
    let half = |k: usize| input[k / 2] >> (16 * (k % 2)) & 0xffff;
    let args = [
        Arg::Buf(0),
        Arg::Buf(1),
        Arg::U32(4 * (n as u32 + 4)),
        Arg::DynLds,
    ];
    let bufs = vec![vec![0; 4 * n], bytes(&input, u32::to_le_bytes)];
    let cfg = Cfg {
        target,
        opt: "lds_dma_ir",
    };
    let grid = [n as u32, 1, 1];
    let Some(m) = launch(cfg, "lds_dma_ir", &args, bufs, grid, [wg as u32, 1, 1]) else {
        return;
    };
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let (g, l) = (i / wg * wg, i % wg);
            input[g + 4 + (l * 5) % wg]
                .wrapping_add(3 * half(g + 2 + (l * 7) % wg))
                .wrapping_add(l as u32)
        })
        .collect();
    same("lds_dma_ir", cfg, &u32s(&m, 0, n), &want);
}

#[test]
fn lds_dma_ir_gfx906() {
    lds_dma_ir(Target::Gfx906);
}

#[test]
fn lds_dma_ir_gfx908() {
    lds_dma_ir(Target::Gfx908);
}

#[test]
fn lds_dma_ir_gfx90a() {
    lds_dma_ir(Target::Gfx90a);
}

#[test]
fn lds_dma_ir_gfx942() {
    lds_dma_ir(Target::Gfx942);
}
