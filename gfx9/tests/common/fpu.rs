//! The host FPU as a rounding-mode oracle (x86_64 only): each function loads MXCSR with the
//! rounding control of an AMD FP_ROUND value (RC, bits 14:13: 0 nearest, 1 down, 2 up,
//! 3 toward zero), runs one SSE / FMA3 / F16C instruction and restores MXCSR, all in one
//! inline-assembly block so the compiler cannot move the arithmetic out of the mode. The
//! FMA3 and F16C forms need the CPU features (callers check `is_x86_feature_detected!`).

use std::arch::asm;

/// MXCSR with every exception masked, no DAZ/FTZ, and the rounding of AMD's FP_ROUND
/// value `r` (AMD 1 = +∞ is x86 RC 2 = up; AMD 2 = −∞ is RC 1 = down).
fn csr(r: u32) -> u32 {
    let rc = [0, 2, 1, 3][r as usize & 3];
    0x1f80 | rc << 13
}

macro_rules! binary {
    ($name:ident, $ty:ty, $ins:literal) => {
        pub fn $name(r: u32, a: $ty, b: $ty) -> $ty {
            let new = csr(r);
            let mut old = 0u32;
            let mut x = a;
            // SAFETY: only MXCSR (saved and restored in the same block) and the named
            // registers change; the pointers are to live locals.
            unsafe {
                asm!(
                    "stmxcsr dword ptr [{old}]",
                    "ldmxcsr dword ptr [{new}]",
                    concat!($ins, " {x}, {b}"),
                    "ldmxcsr dword ptr [{old}]",
                    old = in(reg) &mut old as *mut u32,
                    new = in(reg) &new as *const u32,
                    x = inout(xmm_reg) x,
                    b = in(xmm_reg) b,
                    options(nostack),
                );
            }
            x
        }
    };
}

binary!(add32, f32, "addss");
binary!(sub32, f32, "subss");
binary!(mul32, f32, "mulss");
binary!(add64, f64, "addsd");
binary!(mul64, f64, "mulsd");
binary!(div32, f32, "divss");
binary!(div64, f64, "divsd");

macro_rules! unary {
    ($name:ident, $from:ty, $to:ty, $ins:literal, $class:ident) => {
        pub fn $name(r: u32, a: $from) -> $to {
            let new = csr(r);
            let mut old = 0u32;
            let mut x: $to = Default::default();
            // SAFETY: as in `binary!`.
            unsafe {
                asm!(
                    "stmxcsr dword ptr [{old}]",
                    "ldmxcsr dword ptr [{new}]",
                    $ins,
                    "ldmxcsr dword ptr [{old}]",
                    old = in(reg) &mut old as *mut u32,
                    new = in(reg) &new as *const u32,
                    x = out(xmm_reg) x,
                    a = in($class) a,
                    options(nostack),
                );
            }
            x
        }
    };
}

unary!(sqrt32, f32, f32, "sqrtss {x}, {a}", xmm_reg);
unary!(sqrt64, f64, f64, "sqrtsd {x}, {a}", xmm_reg);
unary!(cvt_f32_f64, f64, f32, "cvtsd2ss {x}, {a}", xmm_reg);
unary!(cvt_f32_i32, i32, f32, "cvtsi2ss {x}, {a:e}", reg);
unary!(cvt_f32_i64, i64, f32, "cvtsi2ss {x}, {a}", reg);

macro_rules! fused {
    ($name:ident, $ty:ty, $ins:literal) => {
        /// `a·b + c`, one rounding (FMA3).
        pub fn $name(r: u32, a: $ty, b: $ty, c: $ty) -> $ty {
            let new = csr(r);
            let mut old = 0u32;
            let mut x = a;
            // SAFETY: as in `binary!`; the caller checked the CPU has FMA3.
            unsafe {
                asm!(
                    "stmxcsr dword ptr [{old}]",
                    "ldmxcsr dword ptr [{new}]",
                    concat!($ins, " {x}, {b}, {c}"),
                    "ldmxcsr dword ptr [{old}]",
                    old = in(reg) &mut old as *mut u32,
                    new = in(reg) &new as *const u32,
                    x = inout(xmm_reg) x,
                    b = in(xmm_reg) b,
                    c = in(xmm_reg) c,
                    options(nostack),
                );
            }
            x
        }
    };
}

fused!(fma32, f32, "vfmadd213ss");
fused!(fma64, f64, "vfmadd213sd");

/// f32 to f16 bits by MXCSR.RC (F16C `vcvtps2ph` with immediate 4: "use MXCSR.RC").
pub fn cvt_f16_f32(r: u32, a: f32) -> u16 {
    let new = csr(r);
    let mut old = 0u32;
    let out: u32;
    // SAFETY: as in `binary!`; the caller checked the CPU has F16C.
    unsafe {
        asm!(
            "stmxcsr dword ptr [{old}]",
            "ldmxcsr dword ptr [{new}]",
            "vcvtps2ph {t}, {a}, 4",
            "ldmxcsr dword ptr [{old}]",
            "vmovd {out:e}, {t}",
            old = in(reg) &mut old as *mut u32,
            new = in(reg) &new as *const u32,
            t = out(xmm_reg) _,
            a = in(xmm_reg) a,
            out = out(reg) out,
            options(nostack),
        );
    }
    out as u16
}

/// f16 bits to f32 (exact; F16C `vcvtph2ps`).
pub fn f16_to_f32(h: u16) -> f32 {
    let x: f32;
    // SAFETY: a pure register conversion; the caller checked the CPU has F16C.
    unsafe {
        asm!(
            "vmovd {t}, {h:e}",
            "vcvtph2ps {x}, {t}",
            h = in(reg) u32::from(h),
            t = out(xmm_reg) _,
            x = out(xmm_reg) x,
            options(nostack, nomem, pure),
        );
    }
    x
}
