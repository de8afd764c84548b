//! `cargo xtask conformance rocrtst`: ROCr's own test suite, rocrtst, run test by test under
//! kfd-emu's presets (or on the hardware) against Debian's ROCr 5.2.3.
//!
//! rocrtst lives in ROCm/ROCR-Runtime's history, not in its release tags: the tree to use is
//! the last commit that changed `rocrtst/` before rocm-5.2.0, `752cfd5ffd0a` ("Adjust include
//! paths for new header locations", 2022-05-09), which includes `<hsa/hsa.h>` as Debian's
//! `libhsa-runtime-dev` installs it. `--src` is that tree (the repository root holding
//! `rocrtst/`, or `rocrtst/` itself).
//!
//! Build (out of tree, into `target/conformance/rocrtst/<tree>/`, no source file changed):
//! cmake of `rocrtst/suites/test_common` with its kernels (`make rocrtst_kernels`) built for
//! the GPUs Debian's ROCr 5.2.3 knows among the presets (gfx906, gfx908, gfx90a) by
//! Debian's clang-15 (`--llvm`, default `/usr/lib/llvm-15`; ROCr 5.2 loads code objects up to
//! v4, clang-15's default) with Debian's rocm-device-libs bitcode. Three shims stand in for
//! what the tree expects of AMD's own build machines:
//! * its CMakeLists passes `-include ${OPENCL_INC_DIR}opencl-c.h` (no '/'), which only works
//!   through its fallback `$WORK_ROOT/external/llvm-project/clang/lib/Headers/`: the harness
//!   makes that directory a link to clang's own headers;
//! * Debian's `rocm_smi` CMake package names files that do not exist (`/usr/rocm_smi/include`),
//!   so `find_package(rocm_smi)` is given an empty package and `rocm_smi64` is linked by name;
//! * rocrtst links its bundled prebuilt hwloc 1.11 (`thirdparty/libhwloc.so.5`) but compiles
//!   against the system's hwloc headers, which on Debian 12 are hwloc 2.9's: a 1.x library
//!   under 2.x headers would misread every `hwloc_obj`. So the build uses hwloc 2.9
//!   throughout — no build RPATH, and a `libhwloc.so.5` link to the system's
//!   `libhwloc.so.15` first on `LD_LIBRARY_PATH` — with the one hwloc 1 flag rocrtst passes,
//!   `HWLOC_TOPOLOGY_FLAG_IO_DEVICES`, mapped to hwloc 2's I/O type filter (a force-included
//!   header). Under hwloc 2 a NUMA node is no ancestor of a PCI device, so
//!   `Memory_Async_Copy`'s "same NUMA node" search finds none (it says "Only 1 NUMA node
//!   found"): a version mismatch, not the machine's.
//!
//! Run: each test (`rocrtst64 --gtest_filter=Suite.Test`) as its own process under
//! `kfd-emu run --machine M`, from the build directory (rocrtst loads its kernels from
//! `./<gfx>/`), in a process group killed whole at the time limit ("hung"), with the
//! results table and logs as kfdtest's (see the [module docs](super)). Tests upstream
//! disabled (`DISABLED_`) are listed as excluded (`--run-excluded` runs them). A test the
//! host itself cannot run is skipped with the reason printed ([`host_lacks`]: the CAS
//! hand-over test on fewer than 4 host CPUs). A test whose own design spins for a known time
//! gets that time on top of the slow limit ([`limit`]: `Memory_Async_Copy`'s billion-tick
//! `PerfTimer` calibration per copy, 400 s on a two-GPU preset at 2.6 GHz). GPU kernels — ROCr's blit kernels
//! (code-object loading, `hsa_memory_copy`, `hsa_amd_memory_fill`) and the tests' own — run
//! on kfd-emu's interpreter; a test still running at its limit is killed and reported hung,
//! never holding up the harness.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::gtest::{self, Outcome, Verdict};
use super::runner::{
    Options, Report, Runner, TestResult, kfd_emu_binary, lock_build_dir, log_name,
};
use crate::failure::{self, Failure};

/// The presets whose GPUs Debian's ROCr 5.2.3 makes agents of (gfx906, gfx908, gfx90a); on
/// the others (gfx942, gfx11, gfx12) it sees no GPU.
pub(super) const DEFAULT_MACHINES: &[&str] = &["radeon-vii", "mi100", "mi210x8"];

/// The kernels' targets: the GPUs of [`DEFAULT_MACHINES`].
const TARGETS: &str = "gfx906;gfx908;gfx90a";

/// Debian's ROCm 5.2 toolchain.
const DEFAULT_LLVM: &str = "/usr/lib/llvm-15";

/// Where Debian's rocm-device-libs puts its bitcode.
const BITCODE_ROOT: &str = "/usr/lib/x86_64-linux-gnu";

/// The system's hwloc 2 library.
const HWLOC2: &str = "/usr/lib/x86_64-linux-gnu/libhwloc.so.15";

/// The force-included header that gives hwloc 1's I/O flag its hwloc 2 meaning (see the
/// module docs). The filter is looked up at run time: the program links against the bundled
/// hwloc 1 library's name and runs with hwloc 2.
const HWLOC1_COMPAT: &str = r#"/* Written by `cargo xtask conformance rocrtst`: hwloc 1.x's
 * HWLOC_TOPOLOGY_FLAG_IO_DEVICES in hwloc 2 terms (I/O objects are kept by type filters). */
#include <dlfcn.h>
#include <hwloc.h>
#ifndef HWLOC_TOPOLOGY_FLAG_IO_DEVICES
#define HWLOC_TOPOLOGY_FLAG_IO_DEVICES (1UL << 62)
static inline int rocrtst_hwloc_set_flags(hwloc_topology_t t, unsigned long flags) {
  if (flags & HWLOC_TOPOLOGY_FLAG_IO_DEVICES) {
    int (*filter)(hwloc_topology_t, enum hwloc_type_filter_e) =
        (int (*)(hwloc_topology_t, enum hwloc_type_filter_e))dlsym(
            RTLD_DEFAULT, "hwloc_topology_set_io_types_filter");
    if (filter) filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  }
  return hwloc_topology_set_flags(t, flags & ~HWLOC_TOPOLOGY_FLAG_IO_DEVICES);
}
#define hwloc_topology_set_flags rocrtst_hwloc_set_flags
#endif
"#;

/// The built suite.
struct Built {
    /// The build directory (rocrtst runs from here).
    dir: PathBuf,
    /// `rocrtst64`.
    exe: PathBuf,
    /// What goes on `LD_LIBRARY_PATH` (the hwloc link).
    lib: PathBuf,
}

/// The rocrtst directory of `src`: `src/rocrtst` or `src` itself.
fn rocrtst_dir(src: &Path) -> Result<PathBuf, Failure> {
    for dir in [src.join("rocrtst"), src.to_path_buf()] {
        if dir.join("suites/test_common/CMakeLists.txt").is_file() {
            return Ok(dir);
        }
    }
    Err(Failure::new(format!(
        "{}: no rocrtst/suites/test_common/CMakeLists.txt (give the ROCR-Runtime tree of \
         commit 752cfd5ffd0a, or its rocrtst/ directory)",
        src.display()
    )))
}

/// The directory holding clang's `opencl-c.h` under `llvm`.
fn clang_headers(llvm: &Path) -> Option<PathBuf> {
    let clang = llvm.join("lib/clang");
    let mut versions: Vec<PathBuf> = fs::read_dir(&clang)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    versions.sort();
    versions
        .into_iter()
        .rev()
        .map(|v| v.join("include"))
        .find(|inc| inc.join("opencl-c.h").is_file())
}

/// Builds rocrtst and its kernels of `src` (the rocrtst directory) into `build`.
fn build(src: &Path, build: &Path, llvm: Option<&Path>) -> Result<Built, Failure> {
    let llvm = llvm.unwrap_or(Path::new(DEFAULT_LLVM));
    let headers = clang_headers(llvm);
    let bitcode = Path::new(BITCODE_ROOT).join("amdgcn/bitcode");
    let missing: Vec<&str> = [
        (
            llvm.join("bin/clang").is_file() && headers.is_some(),
            "clang-15",
        ),
        (bitcode.join("ockl.bc").is_file(), "rocm-device-libs"),
        (
            Path::new("/usr/include/hsa/hsa.h").is_file(),
            "libhsa-runtime-dev",
        ),
        (
            Path::new("/usr/include/rocm_smi/rocm_smi.h").is_file(),
            "librocm-smi-dev",
        ),
        (
            Path::new("/usr/include/hwloc.h").is_file() && Path::new(HWLOC2).is_file(),
            "libhwloc-dev",
        ),
        (Path::new("/usr/include/numa.h").is_file(), "libnuma-dev"),
    ]
    .into_iter()
    .filter(|(present, _)| !present)
    .map(|(_, package)| package)
    .collect();
    let Some(headers) = headers.filter(|_| missing.is_empty()) else {
        return Err(Failure::new(format!(
            "rocrtst needs Debian's {} (apt-get install {}), and --llvm pointing at an LLVM \
             with clang and opencl-c.h (default {DEFAULT_LLVM})",
            missing.join(", "),
            missing.join(" ")
        )));
    };
    let io = |what: &Path, e: std::io::Error| Failure::new(format!("{}: {e}", what.display()));
    let shim = build.join("shim");
    let smi = shim.join("rocm_smi");
    fs::create_dir_all(&smi).map_err(|e| io(&smi, e))?;
    let smi_config = smi.join("rocm_smi-config.cmake");
    write_unchanged(
        &smi_config,
        "# Written by cargo xtask conformance rocrtst: rocm_smi64 is linked by name.\n",
    )?;
    let compat = shim.join("hwloc1_compat.h");
    write_unchanged(&compat, HWLOC1_COMPAT)?;
    let work_root = build.join("workroot");
    let lib_dir = work_root.join("external/llvm-project/clang/lib");
    fs::create_dir_all(&lib_dir).map_err(|e| io(&lib_dir, e))?;
    replace_link(&headers, &lib_dir.join("Headers"))?;
    let lib = build.join("lib");
    fs::create_dir_all(&lib).map_err(|e| io(&lib, e))?;
    replace_link(Path::new(HWLOC2), &lib.join("libhwloc.so.5"))?;

    let dir = build.join("build");
    let jobs = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .to_string();
    println!("conformance: building rocrtst of {}", src.display());
    failure::run(
        Command::new("cmake")
            .arg("-S")
            .arg(src.join("suites/test_common"))
            .arg("-B")
            .arg(&dir)
            .arg(format!("-DTARGET_DEVICES={TARGETS}"))
            .arg("-DROCRTST_BLD_TYPE=release")
            .arg(format!("-DROCM_DIR={BITCODE_ROOT}"))
            .arg(format!("-DLLVM_DIR={}", llvm.join("bin").display()))
            // Any directory without include/opencl-c.h: the fallback above is taken.
            .arg(format!("-DOPENCL_DIR={}", work_root.display()))
            .arg(format!("-Drocm_smi_DIR={}", smi.display()))
            .arg(format!("-DCMAKE_CXX_FLAGS=-include {}", compat.display()))
            .arg("-DCMAKE_SKIP_BUILD_RPATH=ON")
            .env("WORK_ROOT", &work_root),
        "cmake (rocrtst)",
    )?;
    for target in ["rocrtst64", "rocrtst_kernels"] {
        failure::run(
            Command::new("cmake")
                .arg("--build")
                .arg(&dir)
                .args(["--target", target, "-j", &jobs]),
            &format!("building {target}"),
        )?;
    }
    Ok(Built {
        exe: dir.join("rocrtst64"),
        dir,
        lib,
    })
}

/// Writes `text` to `path` unless it already holds it (a rewrite would make the next build
/// recompile everything that force-includes it).
fn write_unchanged(path: &Path, text: &str) -> Result<(), Failure> {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    fs::write(path, text).map_err(|e| Failure::new(format!("{}: {e}", path.display())))
}

/// Makes `link` a symbolic link to `target`, replacing what was there.
fn replace_link(target: &Path, link: &Path) -> Result<(), Failure> {
    let _ = fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| Failure::new(format!("{} -> {}: {e}", link.display(), target.display())))
}

/// Whether upstream disabled `test` (gtest runs it only with
/// `--gtest_also_run_disabled_tests`).
fn disabled(test: &str) -> bool {
    test.split('.').any(|part| part.starts_with("DISABLED_"))
}

/// The cause of `verdict` under kfd-emu, naming what the output shows where it is not the
/// test's own assertion:
/// - ROCr 5.2.3 refusing the GPU itself ("Agent creation failed. The GPU node has an
///   unrecognized id.", `GpuAgent::GpuAgent` in `amd_gpu_agent.cpp` at rocm-5.2.3: its ISA
///   table predates gfx942 and gfx11), after which only the CPU agent is left;
/// - a queue stopped at a kernel dispatch whose descriptor kfd-emu's interpreter cannot run
///   (`model/queue_error.rs`: the CP's "Out of VGPRs", which ROCr prints as
///   `HSA_STATUS_ERROR_INVALID_ISA` before its default handler aborts).
fn emulator_cause(verdict: &Verdict, output: &str) -> String {
    if verdict.outcome == Outcome::Passed {
        verdict.cause.clone()
    } else if output.contains("The GPU node has an unrecognized id") {
        format!(
            "ROCr 5.2.3 does not know this GPU (agent creation failed: unrecognized id; \
             a version mismatch): {}",
            verdict.cause
        )
    } else if output.contains("HSA_STATUS_ERROR_INVALID_ISA") {
        format!(
            "kernel dispatch the interpreter cannot run (its queue error reads INVALID_ISA): {}",
            verdict.cause
        )
    } else {
        verdict.cause.clone()
    }
}

/// What the host lacks to run `test` at all, if anything: `cpus` is the host's CPU count.
///
/// `rocrtstStress.Queue_CAS_Write_Index_ConcurrentTest` hands the queue's write index round
/// `kNumThreadsForCas` = 4 threads in strict turn, each spinning on
/// `hsa_queue_cas_write_index_*` until the index is its own, 1 Mi hand-overs per memory order
/// and four orders (`queue_write_index_concurrent_tests.cc`, `thread_proc_write_index_cas_atomic`).
/// ROCr's CAS is one atomic on the queue's `write_dispatch_id` in host memory
/// (`AqlQueue::CasWriteIndex*`, `amd_aql_queue.cpp`): neither the kernel nor the emulator is
/// involved. With fewer host CPUs than threads, every hand-over waits for the scheduler to
/// run the one spinning thread whose turn it is (`scripts/rocrtst-cas-handover.c`, the loop
/// on a plain word without ROCr: 46 hand-overs per second on 2 CPUs, about 25 hours for the
/// test), so it is skipped, with this reason, where the host has fewer than 4 CPUs — as on
/// the hardware.
fn host_lacks(test: &str, cpus: usize) -> Option<String> {
    const CAS_THREADS: usize = 4;
    (test == "rocrtstStress.Queue_CAS_Write_Index_ConcurrentTest" && cpus < CAS_THREADS).then(
        || {
            format!(
                "the host has {cpus} CPUs: the test hands a word round {CAS_THREADS} spinning \
             threads in strict turn (kNumThreadsForCas), about 25 hours on 2 CPUs"
            )
        },
    )
}

/// The TSC ticks one `rocrtst::PerfTimer` spins for when it is made: its constructor measures
/// the TSC's frequency by spinning on `rdtscp` for a billion ticks (`MeasureTSCFreqHz`,
/// `rocrtst/common/hsatimer.cc`), about 0.4 s at 2.6 GHz, on the hardware as here.
const PERF_TIMER_SPIN: u64 = 1_000_000_000;

/// How many [`PERF_TIMER_SPIN`]s `test` makes by its own design on a machine with `gpus` GPUs,
/// where that is most of its time. `Memory_Async_Copy` makes a `PerfTimer` per copy
/// (`memory_async_copy.cc`, `RunBenchmarkWithVerification`): 20 sizes × 13 iterations
/// (`RealIterationNum`: 10 × 1.2 + 1) per transaction, and it has host-to-device and
/// device-to-host, plus both peer-to-peer directions when there is a second GPU
/// (`ConstructTransactionList`; the "remote" ones need a GPU under another NUMA node than
/// the CPU's, which hwloc 2 never reports as an ancestor: module docs). 1 041 spins on a
/// two-GPU machine: 401 s at 2.6 GHz before the first byte's time counts.
fn own_spins(test: &str, gpus: usize) -> Option<u64> {
    const SIZES: u64 = 20;
    const ITERATIONS: u64 = 13;
    (test == "rocrtstPerf.Memory_Async_Copy").then(|| {
        let transactions = if gpus >= 2 { 4 } else { 2 };
        // The test object's own `hsa_timer_` (`BaseRocR`) spins once too.
        transactions * SIZES * ITERATIONS + 1
    })
}

/// The host's TSC frequency, measured against the monotonic clock over 50 ms (`None` where
/// there is no TSC).
fn tsc_hz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let start = Instant::now();
        // SAFETY: `rdtsc` has no preconditions on x86_64.
        let t0 = unsafe { std::arch::x86_64::_rdtsc() };
        std::thread::sleep(std::time::Duration::from_millis(50));
        // SAFETY: as above.
        let t1 = unsafe { std::arch::x86_64::_rdtsc() };
        let secs = start.elapsed().as_secs_f64();
        (t1 > t0 && secs > 0.0).then(|| (t1 - t0) as f64 / secs)
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The time limit of `test`: the slow limit, plus the time its own `PerfTimer` spins take at
/// `tsc_hz` ([`own_spins`]), which is not the machine's to shorten.
fn limit(test: &str, gpus: usize, slow: Duration, tsc_hz: Option<f64>) -> Duration {
    match (own_spins(test, gpus), tsc_hz) {
        (Some(spins), Some(hz)) if hz > 0.0 => {
            slow + Duration::from_secs_f64(spins as f64 * PERF_TIMER_SPIN as f64 / hz)
        }
        _ => slow,
    }
}

/// Runs the suite (see the module docs).
pub(super) fn main(root: &Path, options: &Options) -> Result<(), Failure> {
    let src = fs::canonicalize(&options.src)
        .map_err(|e| Failure::new(format!("--src {}: {e}", options.src.display())))?;
    let dir = rocrtst_dir(&src)?;
    let tree = src
        .file_name()
        .map_or_else(|| "tree".to_owned(), |n| n.to_string_lossy().into_owned());
    let build_dir = options
        .build
        .clone()
        .unwrap_or_else(|| root.join("target/conformance/rocrtst").join(&tree));
    let built = {
        let _lock = lock_build_dir(&build_dir)?;
        build(&dir, &build_dir, options.llvm.as_deref())?
    };
    let kfd_emu = kfd_emu_binary(root, options)?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| build_dir.join("results"));
    fs::create_dir_all(&out).map_err(|e| Failure::new(format!("{}: {e}", out.display())))?;
    let mut report = Report {
        suite: "rocrtst",
        tree: dir.display().to_string(),
        timeout: options.timeout,
        slow_timeout: options.slow_timeout,
        machines: Vec::new(),
        kernel: options.kernel.clone(),
    };
    let targets: Vec<Option<String>> = if options.machines.is_empty() {
        vec![None]
    } else {
        options.machines.iter().cloned().map(Some).collect()
    };
    for machine in targets {
        let runner = Runner {
            kfd_emu: kfd_emu.clone(),
            machine: machine.clone(),
            lib: built.lib.clone(),
            hsa_debug: false,
            cwd: Some(built.dir.clone()),
            kernel: options.kernel.clone(),
        };
        let label = machine.clone().unwrap_or_else(|| "hardware".to_owned());
        let node = runner.first_gpu()?;
        let tests = runner.list(&built.exe)?;
        let (logs, selected) = report.start_machine(&label, &node, &tests, &out, options)?;
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let tsc = tsc_hz();
        for (n, test) in selected.iter().enumerate() {
            let excluded = disabled(test);
            let lacks = host_lacks(test, cpus);
            let result = if let Some(cause) = lacks.filter(|_| !excluded || options.run_excluded) {
                TestResult {
                    name: (*test).clone(),
                    verdict: Verdict {
                        outcome: Outcome::Skipped,
                        cause,
                    },
                    seconds: 0.0,
                    excluded,
                }
            } else if excluded && !options.run_excluded {
                TestResult {
                    name: (*test).clone(),
                    verdict: Verdict {
                        outcome: Outcome::Excluded,
                        cause: "DISABLED_ upstream".to_owned(),
                    },
                    seconds: 0.0,
                    excluded,
                }
            } else {
                let log = logs.join(log_name(test));
                let mut args = vec![format!("--gtest_filter={test}")];
                if excluded {
                    args.push("--gtest_also_run_disabled_tests".to_owned());
                }
                let started = Instant::now();
                let limit = limit(test, node.gpus, options.slow_timeout, tsc);
                if limit > options.slow_timeout {
                    println!(
                        "[{label}] {test}: limit {:.0} s (its own PerfTimer spins: {} s more)",
                        limit.as_secs_f64(),
                        (limit - options.slow_timeout).as_secs()
                    );
                }
                let ended = runner.run_test(&built.exe, &args, test, &log, limit)?;
                let output =
                    String::from_utf8_lossy(&fs::read(&log).unwrap_or_default()).into_owned();
                let mut verdict = ended.note(gtest::classify(test, &output, ended.exit));
                if machine.is_some() {
                    verdict.cause = emulator_cause(&verdict, &output);
                }
                TestResult {
                    name: (*test).clone(),
                    verdict,
                    seconds: started.elapsed().as_secs_f64(),
                    excluded,
                }
            };
            println!(
                "[{label} {}/{}] {}: {} ({:.1} s) {}",
                n + 1,
                selected.len(),
                result.name,
                result.verdict.outcome,
                result.seconds,
                result.verdict.cause
            );
            if let Some(m) = report.machines.last_mut() {
                m.tests.push(result);
            }
            report.write(&out)?;
        }
        report.write(&out)?;
    }
    print!("{}", report.summary());
    println!("conformance: results in {}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dispatch_the_emulator_cannot_run_is_named() {
        let crashed = Verdict {
            outcome: Outcome::Crashed,
            cause: "signal 6".to_owned(),
        };
        let out = "Queue at 0x1 inactivated due to async error:\n\
                   \tHSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid.";
        assert!(emulator_cause(&crashed, out).starts_with("kernel dispatch"));
        let old_rocr = "Agent creation failed.\nThe GPU node has an unrecognized id.\n";
        assert!(emulator_cause(&crashed, old_rocr).starts_with("ROCr 5.2.3 does not know"));
        assert_eq!(emulator_cause(&crashed, "other"), "signal 6");
        let passed = Verdict {
            outcome: Outcome::Passed,
            cause: String::new(),
        };
        assert_eq!(emulator_cause(&passed, out), "");
    }

    #[test]
    fn the_cas_hand_over_needs_a_cpu_per_thread() {
        let cas = "rocrtstStress.Queue_CAS_Write_Index_ConcurrentTest";
        assert!(host_lacks(cas, 2).is_some_and(|why| why.contains("2 CPUs")));
        assert_eq!(host_lacks(cas, 4), None);
        assert_eq!(
            host_lacks("rocrtstStress.Queue_Add_Write_Index_ConcurrentTest", 2),
            None
        );
    }

    #[test]
    fn async_copys_limit_counts_its_own_timer_spins() {
        let copy = "rocrtstPerf.Memory_Async_Copy";
        let slow = Duration::from_secs(400);
        let hz = Some(2.6e9);
        // Two GPUs: 4 transactions × 20 sizes × 13 iterations + 1 = 1 041 spins of 1e9 ticks.
        let two = limit(copy, 2, slow, hz);
        assert_eq!(two.as_secs(), 400 + 400, "{two:?}");
        // One GPU: no peer-to-peer, 521 spins.
        assert_eq!(limit(copy, 1, slow, hz).as_secs(), 400 + 200);
        // No other test, and no TSC, gets more.
        assert_eq!(limit("rocrtstPerf.ENQUEUE_LATENCY", 8, slow, hz), slow);
        assert_eq!(limit(copy, 2, slow, None), slow);
    }

    #[test]
    fn the_tsc_is_measured_where_there_is_one() {
        if cfg!(target_arch = "x86_64") {
            let hz = tsc_hz().expect("x86_64 has a TSC");
            assert!((1e8..1e11).contains(&hz), "{hz} Hz");
        }
    }

    #[test]
    fn disabled_tests_are_upstreams_disabled_prefix() {
        assert!(disabled("rocrtstFunc.DISABLED_Signal_Kernel_Set"));
        assert!(disabled("DISABLED_Suite.Test"));
        assert!(!disabled("rocrtstFunc.Memory_Max_Mem"));
    }

    #[test]
    fn the_tree_is_the_repository_or_its_rocrtst_directory() {
        let tmp = std::env::temp_dir().join(format!("rocrtst-tree-{}", std::process::id()));
        let inner = tmp.join("rocrtst/suites/test_common");
        fs::create_dir_all(&inner).unwrap();
        fs::write(inner.join("CMakeLists.txt"), "").unwrap();
        assert_eq!(rocrtst_dir(&tmp).unwrap(), tmp.join("rocrtst"));
        assert_eq!(
            rocrtst_dir(&tmp.join("rocrtst")).unwrap(),
            tmp.join("rocrtst")
        );
        assert!(rocrtst_dir(&tmp.join("rocrtst/suites")).is_err());
        fs::remove_dir_all(&tmp).unwrap();
    }
}
