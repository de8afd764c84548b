//! tinygrad from PyPI (0.14.0, unmodified) computes `Tensor` results under `kfd-emu run` on
//! the mi300x preset: its AMD backend through its KFD interface (`DEV=KFD+AMD:LLVM`) opens
//! `/dev/kfd`, reads the topology and `ip_discovery`, compiles its kernels for gfx942 with
//! Debian's libLLVM 19, copies through SDMA and dispatches on a compute queue, and numpy
//! checks each result (elementwise with exp, log and sqrt, sum and max reductions, a 64x64
//! matmul; then int32, uint8, float16 and float64 arithmetic, argmax, softmax, cumsum and a
//! 3x3 conv2d): `tests/clients/tinygrad_tensors.py`. Both of tinygrad's compute queues run: on
//! mi300x's 8 XCCs it picks AQL (KERNEL_DISPATCH packets, and PM4 IBs in vendor packets for
//! its waits, PRED_EXEC-predicated signals and timestamps); `AMD_AQL=0` makes it a PM4 queue
//! (SET_SH_REG state, per-XCC scratch bases under PRED_EXEC, DISPATCH_DIRECT, RELEASE_MEM).
//!
//! The venv (`target/tinygrad/venv`, `scripts/fetch-tinygrad.sh`) and libLLVM 19 are
//! installed by `cargo xtask test`; when either is missing the test fails under `CI=true` and
//! is recorded as skipped otherwise (`kfd_skip::prerequisite`). Not `--check-leaks`: tinygrad
//! leaves its buffers and queues to the process's exit, as on hardware.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// Where Debian's `libllvm19` puts libLLVM 19 (tinygrad's `LLVM_PATH` names it, so that no
/// other LLVM on the machine is picked).
const LIBLLVM19: &str = "/usr/lib/x86_64-linux-gnu/libLLVM-19.so";

fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tinygrad/venv/bin/python")
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs the tensor script under `kfd-emu run --machine mi300x` with `env`, tinygrad's caches
/// in a directory of its own (so each run compiles its kernels afresh); what it printed.
fn run_tensors(env: &[(&str, &str)]) -> Option<Output> {
    let python = venv_python();
    if !python.exists() {
        kfd_skip::prerequisite(
            "tinygrad's venv (target/tinygrad/venv, scripts/fetch-tinygrad.sh) is missing",
        );
        return None;
    }
    if !Path::new(LIBLLVM19).exists() {
        kfd_skip::prerequisite(format!(
            "libLLVM 19 ({LIBLLVM19}, package libllvm19) is missing"
        ));
        return None;
    }
    let tag: String = env.iter().map(|(k, v)| format!("-{k}={v}")).collect();
    let cache = std::env::temp_dir().join(format!("kfd-emu-tinygrad-{}{tag}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/tinygrad_tensors.py");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .args(["run", "--machine", "mi300x", "--"])
        .arg(&python)
        .arg(&script)
        .env("DEV", "KFD+AMD:LLVM")
        .env("LLVM_PATH", LIBLLVM19)
        .env("XDG_CACHE_HOME", &cache)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .envs(env.iter().copied())
        .output()
        .expect("running kfd-emu");
    let _ = std::fs::remove_dir_all(&cache);
    // Shown with --nocapture, and on failure.
    println!(
        "{env:?}: {:.1} s\n{}",
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stdout)
    );
    Some(out)
}

/// What every run must print: the device, each result checked, and the end.
fn assert_all_ok(out: &Output, aql: bool) {
    assert!(out.status.success(), "{}", describe(out));
    let text = String::from_utf8_lossy(&out.stdout);
    let device = format!(
        "device AMD gfx942 AMDLLVMRenderer xccs=8 aql={}",
        u8::from(aql)
    );
    assert!(text.contains(&device), "want {device:?}\n{}", describe(out));
    for name in [
        "a+b",
        "a*b+c",
        "exp",
        "log",
        "sqrt",
        "sum",
        "max",
        "sum(axis=1)",
        "matmul 64x64",
        "sum 100000",
        "argmax",
        "softmax",
        "sin",
        "int32 (i*3+j)//j",
        "int32 i%j",
        "int32 (i<<3)&0xff0",
        "float16 h*h+1",
        "float64 exp",
        "uint8 +7",
        "cumsum",
        "conv2d 3x3",
    ] {
        assert!(
            text.contains(&format!("\n{name}: ok ")),
            "{name} not checked ok\n{}",
            describe(out)
        );
    }
    assert!(text.contains("\nall ok in "), "{}", describe(out));
}

/// tinygrad's default queue on mi300x (8 XCCs): AQL, its waits and signals in PM4 IBs.
#[test]
fn tinygrad_tensors_are_right_on_mi300x_through_its_aql_queue() {
    let Some(out) = run_tensors(&[]) else {
        return;
    };
    assert_all_ok(&out, true);
}

/// `AMD_AQL=0`: tinygrad's PM4 compute queue (its kernels dispatched by DISPATCH_DIRECT from
/// the SH registers it sets).
#[test]
fn tinygrad_tensors_are_right_on_mi300x_through_its_pm4_queue() {
    let Some(out) = run_tensors(&[("AMD_AQL", "0")]) else {
        return;
    };
    assert_all_ok(&out, false);
}
