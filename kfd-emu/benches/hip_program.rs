//! A whole HIP program under `kfd-emu run` against its host-only equivalent, in the same run
//! (issue 18, "fast enough to be useful": the slowdown of a whole program).
//!
//! `programs/hip_saxpy.hip`, built by Debian's hipcc 5.2.3 for gfx90a, copies two 4 MiB arrays
//! to the GPU with `hipMemcpy` (HIP's blit kernels, reading its USERPTR staging buffers),
//! runs `y = a*x + y` four times over 1 Mi floats, copies `y` back and checks it;
//! `programs/saxpy.c`, built by `cc -O2`, does the same on the CPU (the "device" arrays are
//! malloc'd, the copies `memcpy`). Both are whole processes, started and waited for:
//!
//! * `hip_program/host`: the C program;
//! * `hip_program/kfd_emu`: the HIP program under `kfd-emu run --machine mi210x8` (HIP's and
//!   ROCr's start-up, the emulated ioctls, the kernels on the interpreter);
//! * `hip_blits/kfd_emu`: the time the emulator reports (`--trace`) for the dispatches of the
//!   program run with no kernel of its own (argv[2] = 0): HIP's host-to-device blit kernels
//!   only, whose every source access goes to USERPTR memory. With `KFD_EMU_BASELINE` set to
//!   another `kfd-emu` binary (an older build), `hip_blits/baseline` times that one too.
//!
//! Prints `kfd_emu / host`. Skipped, with the reason printed, without hipcc and
//! libamdhip64-dev or a C compiler. Not run in CI (`.ci/run` runs no benches): each sample is
//! a whole HIP process (about a second under the emulator).

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

/// Elements per array (4 MiB of floats).
const N: &str = "1048576";

/// Compiles `programs/<src>` with `compiler` and `args` into the bench's temporary directory;
/// `None` with the reason printed when it cannot be built.
fn build(compiler: &str, src: &str, out: &str, args: &[&str]) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/programs");
    let program = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(out);
    match Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(&program)
        .arg(dir.join(src))
        .output()
    {
        Ok(o) if o.status.success() => Some(program),
        Ok(o) => {
            println!(
                "hip_program: skipped: {compiler} {src} failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            println!("hip_program: skipped: no {compiler} ({e})");
            None
        }
    }
}

/// Runs `cmd` to its end; panics unless it succeeded and printed `bad=0`.
fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("start the program");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(" bad=0"),
        "{cmd:?}: {}\n{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `kfd-emu run --machine mi210x8 [--trace] -- program args` with emulator `emu`.
fn under(emu: &Path, trace: bool, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(emu);
    cmd.args(["run", "--machine", "mi210x8"]);
    if trace {
        cmd.arg("--trace");
    }
    cmd.arg("--").arg(program).args(args);
    cmd
}

/// The sum of the dispatch times `kfd-emu --trace` reported (`KERNEL_DISPATCH ...: Ok(..) in
/// <duration>`).
fn dispatch_time(stderr: &[u8]) -> Duration {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains("KERNEL_DISPATCH") && l.contains(": Ok("))
        .filter_map(|l| l.rsplit_once(" in ").map(|(_, d)| d.trim()))
        .filter_map(parse_duration)
        .sum()
}

/// A `Duration`'s `Debug` text (`12.3ms`, `456µs`, `1.2s`, `789ns`).
fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (value, unit) = text.split_at(split);
    let value: f64 = value.parse().ok()?;
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "µs" | "us" => 1e3,
        "ns" => 1.0,
        _ => return None,
    };
    Some(Duration::from_nanos((value * scale) as u64))
}

fn bench(c: &mut Criterion) {
    let (Some(hip), Some(host)) = (
        build(
            "hipcc",
            "hip_saxpy.hip",
            "hip_saxpy",
            &["--offload-arch=gfx90a", "-O2"],
        ),
        build("cc", "saxpy.c", "saxpy", &["-O2"]),
    ) else {
        return;
    };
    let emu = PathBuf::from(env!("CARGO_BIN_EXE_kfd-emu"));
    let mut g = c.benchmark_group("hip_program");
    g.sample_size(10).warm_up_time(Duration::from_millis(1));
    g.bench_function("host", |b| {
        b.iter(|| run(Command::new(&host).arg(N)));
    });
    g.bench_function("kfd_emu", |b| {
        b.iter(|| run(&mut under(&emu, false, &hip, &[N])));
    });
    g.finish();
    ratio::report("hip_program", "kfd_emu", "host", None);

    let baseline = std::env::var_os("KFD_EMU_BASELINE").map(PathBuf::from);
    let mut g = c.benchmark_group("hip_blits");
    g.sample_size(10).warm_up_time(Duration::from_millis(1));
    let mut blits = |name: &str, emu: &Path| {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| dispatch_time(&run(&mut under(emu, true, &hip, &[N, "0"])).stderr))
                    .sum()
            });
        });
    };
    blits("kfd_emu", &emu);
    if let Some(base) = &baseline {
        blits("baseline", base);
    }
    g.finish();
    if baseline.is_some() {
        ratio::report("hip_blits", "kfd_emu", "baseline", None);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
