//! `cargo xtask conformance rocrtst`: ROCr's own test suite, rocrtst, run test by test under
//! kfd-emu's presets (or on the hardware) against Debian's ROCr 5.2.3, or, with `--rocr-src
//! DIR --hsakmt-src DIR`, against a ROCr built from source (ROCR-Runtime `rocm-6.2.4`,
//! [`super::rocr`]) that knows every preset's GPU.
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
//! Against a ROCr of its own (`--rocr-src`), the build goes to
//! `target/conformance/rocrtst/<tree>+<ROCr tree>/` and differs in four ways (the stable HSA
//! API rocrtst uses is the same in both):
//! * `find_package(hsa-runtime64)` is that ROCr's install (its headers, its library), linked
//!   with `-rpath-link` at its libhsakmt (Debian's libhsakmt 5.2.3 lacks 18 of the calls
//!   ROCr 6.2.4 makes); the build's `lib/` (on `LD_LIBRARY_PATH`) links both libraries;
//! * the kernels are built for all five presets' GPUs ([`TARGETS_OWN_ROCR`]) by Debian's
//!   clang-19 (`--llvm`, default `/usr/lib/llvm-19`): clang-15 has gfx940 but not gfx942
//!   (LLVM added gfx941/gfx942 in 16);
//! * that clang runs through a script that adds `-mcode-object-version=4`
//!   ([`clang_wrapper`]: rocrtst fills v4's kernel arguments);
//! * Debian's rocm-device-libs 5.2.3 has no `oclc_isa_version_942.bc` or `_1100.bc` (nor any
//!   gfx11 or gfx12 one), which clang-19 needs to build for those processors: the bitcode
//!   directory the build gets links Debian's files and adds one compiled from a
//!   one-constant source of ours ([`isa_version_source`], [`device_libs`]).
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

use super::build::write_unchanged;
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

/// The kernels' targets against a ROCr of its own (`--rocr-src`): every preset's GPU
/// (radeon-vii, mi100, mi210x8, mi300x, rx7900xtx).
const TARGETS_OWN_ROCR: &str = "gfx906;gfx908;gfx90a;gfx942;gfx1100";

/// Debian's ROCm 5.2 toolchain.
const DEFAULT_LLVM: &str = "/usr/lib/llvm-15";

/// The code-object version rocrtst's kernels are built for (see [`clang_wrapper`]).
const CODE_OBJECT_VERSION: u32 = 4;

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

/// A ROCr built from source (`--rocr-src`, [`super::rocr`]) and the libhsakmt it runs with.
pub(super) struct OwnRocr {
    /// The ROCr install prefix (`lib/libhsa-runtime64.so.1`, `lib/cmake/hsa-runtime64`).
    pub(super) prefix: PathBuf,
    /// The libhsakmt install prefix ([`super::build::hsakmt`]).
    pub(super) hsakmt: PathBuf,
}

/// `gfx`'s ISA version as the device libraries' `__oclc_ISA_version` holds it: major
/// × 1000 plus minor × 100 plus stepping, the last two digits of the name being hexadecimal
/// minor and stepping (`gfx90a` → 9010, `gfx942` → 9402, `gfx1100` → 11000), as LLVM's AMDGPU target
/// names its processors (`AMDGPUUsage.rst`, "Processors"). `None` for what is no such name.
fn isa_version(gfx: &str) -> Option<u32> {
    let digits = gfx.strip_prefix("gfx")?;
    if !(3..=4).contains(&digits.len()) || !digits.is_ascii() {
        return None;
    }
    let (major, rest) = digits.split_at(digits.len() - 2);
    let major: u32 = major.parse().ok()?;
    let mut hex = rest.chars().map(|c| c.to_digit(16));
    let (minor, stepping) = (hex.next()??, hex.next()??);
    Some(major * 1000 + minor * 100 + stepping)
}

/// The OpenCL source of `oclc_isa_version_<suffix>.bc` for `gfx`, the device-library file
/// clang links for that processor: one constant, `__oclc_ISA_version`, which the device
/// libraries' functions branch on. Debian's rocm-device-libs 5.2.3 has no file for gfx942
/// or gfx11 (it stops at gfx90c, gfx940 and gfx1036), and clang-19 refuses to build an
/// OpenCL kernel for a processor without one ("cannot find ROCm device library for
/// gfx942"). Written here, compiled by the same clang; not AMD's file.
fn isa_version_source(gfx: &str) -> Option<String> {
    let version = isa_version(gfx)?;
    Some(format!(
        "/* Written by `cargo xtask conformance rocrtst --rocr-src`: the ISA version of {gfx}\n\
         \x20* for the device libraries (major * 1000 + minor * 100 + stepping). */\n\
         __attribute__((weak, visibility(\"protected\")))\n\
         __constant int __oclc_ISA_version = {version};\n"
    ))
}

/// The `clang` rocrtst's CMakeLists runs (`${LLVM_DIR}/clang`) against a ROCr of its own: a
/// script running `clang` with `-mcode-object-version=4`. rocrtst (2022) fills the kernel
/// arguments of its own AQL packets and knows code object v4's hidden arguments only
/// (`rocrtst/common/base_rocr_utils.cc`); clang-19 builds code object v5 by default, whose
/// kernels read their work-group sizes from hidden arguments rocrtst leaves zero. Yet
/// clang-19's driver links the v4 device library (`oclc_abi_version_400.bc`) when no
/// version is given, so the default would even mix the two. Clang-15, the Debian-ROCr
/// build's, defaults to v4; ROCr 6.2.4 loads v4 and v5.
fn clang_wrapper(clang: &Path) -> String {
    format!(
        "#!/bin/sh\n# Written by `cargo xtask conformance rocrtst --rocr-src`: rocrtst's \
         kernels as code object v{CODE_OBJECT_VERSION}.\n\
         exec '{}' -mcode-object-version={CODE_OBJECT_VERSION} \"$@\"\n",
        clang.display()
    )
}

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

/// Builds rocrtst and its kernels of `src` (the rocrtst directory) into `build`, against
/// Debian's ROCr or `own`.
fn build(
    src: &Path,
    build: &Path,
    llvm: Option<&Path>,
    own: Option<&OwnRocr>,
) -> Result<Built, Failure> {
    let default_llvm = if own.is_some() {
        super::rocr::DEFAULT_LLVM
    } else {
        DEFAULT_LLVM
    };
    let llvm = llvm.unwrap_or(Path::new(default_llvm));
    let headers = clang_headers(llvm);
    let bitcode = Path::new(BITCODE_ROOT).join("amdgcn/bitcode");
    let missing: Vec<&str> = [
        (
            llvm.join("bin/clang").is_file() && headers.is_some(),
            if own.is_some() {
                "clang-19"
            } else {
                "clang-15"
            },
        ),
        (bitcode.join("ockl.bc").is_file(), "rocm-device-libs"),
        (
            own.is_some() || Path::new("/usr/include/hsa/hsa.h").is_file(),
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
             with clang and opencl-c.h (default {default_llvm})",
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
    // Against a ROCr of its own: that ROCr and its libhsakmt on the same LD_LIBRARY_PATH,
    // clang through the code-object-version script, and the device libraries' bitcode with
    // the ISA-version files Debian's lacks.
    let (targets, clang_dir, rocm_dir) = match own {
        None => (TARGETS, llvm.join("bin"), PathBuf::from(BITCODE_ROOT)),
        Some(own) => {
            replace_link(
                &own.prefix.join("lib/libhsa-runtime64.so.1"),
                &lib.join("libhsa-runtime64.so.1"),
            )?;
            replace_link(
                &own.hsakmt.join("lib/libhsakmt.so.1"),
                &lib.join("libhsakmt.so.1"),
            )?;
            let clang_dir = shim.join("llvm");
            fs::create_dir_all(&clang_dir).map_err(|e| io(&clang_dir, e))?;
            let wrapper = clang_dir.join("clang");
            write_unchanged(&wrapper, &clang_wrapper(&llvm.join("bin/clang")))?;
            {
                use std::os::unix::fs::PermissionsExt as _;
                fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))
                    .map_err(|e| io(&wrapper, e))?;
            }
            let rocm_dir = shim.join("device-libs");
            device_libs(
                &bitcode,
                &rocm_dir.join("amdgcn/bitcode"),
                &llvm.join("bin/clang"),
                TARGETS_OWN_ROCR,
            )?;
            (TARGETS_OWN_ROCR, clang_dir, rocm_dir)
        }
    };

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
            .arg(format!("-DTARGET_DEVICES={targets}"))
            .arg("-DROCRTST_BLD_TYPE=release")
            .arg(format!("-DROCM_DIR={}", rocm_dir.display()))
            .arg(format!("-DLLVM_DIR={}", clang_dir.display()))
            // Any directory without include/opencl-c.h: the fallback above is taken.
            .arg(format!("-DOPENCL_DIR={}", work_root.display()))
            .arg(format!("-Drocm_smi_DIR={}", smi.display()))
            .arg(format!("-DCMAKE_CXX_FLAGS=-include {}", compat.display()))
            .arg("-DCMAKE_SKIP_BUILD_RPATH=ON")
            .args(own.map(|own| {
                format!(
                    "-Dhsa-runtime64_DIR={}",
                    own.prefix.join("lib/cmake/hsa-runtime64").display()
                )
            }))
            .args(own.map(|own| {
                format!(
                    "-Dhsakmt_DIR={}",
                    own.hsakmt.join("lib/cmake/hsakmt").display()
                )
            }))
            // The linker looks for the ROCr's own libhsakmt.so.1 (a DT_NEEDED without
            // RPATH) in the system's directories unless told: Debian's lacks its symbols.
            .args(own.map(|own| {
                format!(
                    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,{}",
                    own.hsakmt.join("lib").display()
                )
            }))
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

/// Makes `dir` the device libraries' bitcode directory for `targets`: a link to each file of
/// Debian's (`debian`), and, for each target Debian's lacks an `oclc_isa_version_*.bc` for,
/// one compiled by `clang` from [`isa_version_source`] (with no code-object version, which
/// would add clang's own `__oclc_ABI_version` to the file: the one constant is all).
fn device_libs(debian: &Path, dir: &Path, clang: &Path, targets: &str) -> Result<(), Failure> {
    let io = |what: &Path, e: std::io::Error| Failure::new(format!("{}: {e}", what.display()));
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for entry in fs::read_dir(debian).map_err(|e| io(debian, e))? {
        let path = entry.map_err(|e| io(debian, e))?.path();
        if let Some(name) = path.file_name()
            && path.extension().is_some_and(|x| x == "bc")
        {
            replace_link(&path, &dir.join(name))?;
        }
    }
    for gfx in targets.split(';') {
        let name = format!("oclc_isa_version_{}.bc", gfx.trim_start_matches("gfx"));
        if debian.join(&name).is_file() {
            continue;
        }
        let source = isa_version_source(gfx)
            .ok_or_else(|| Failure::new(format!("{gfx}: not a processor name")))?;
        let cl = dir.join(format!("isa_version_{gfx}.cl"));
        write_unchanged(&cl, &source)?;
        println!("conformance: {name} (Debian's device libraries have none for {gfx})");
        failure::run(
            Command::new(clang)
                .args(["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa"])
                .args(["-Xclang", "-mcode-object-version=none"])
                .args(["-nogpulib", "-emit-llvm", "-c", "-o"])
                .arg(dir.join(&name))
                .arg(&cl),
            &format!("compiling {name}"),
        )?;
    }
    Ok(())
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
             a version mismatch: --rocr-src builds a ROCr that does): {}",
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

/// The name of a source tree's build directory: its directory name.
fn tree_name(src: &Path) -> String {
    src.file_name()
        .map_or_else(|| "tree".to_owned(), |n| n.to_string_lossy().into_owned())
}

/// The build directory's name under `target/conformance/rocrtst/`: the rocrtst tree's, and
/// `+<ROCr tree>` when built against a ROCr of its own (its headers and kernels differ).
fn build_name(tree: &str, rocr_tree: Option<&str>) -> String {
    match rocr_tree {
        Some(rocr) => format!("{tree}+{rocr}"),
        None => tree.to_owned(),
    }
}

/// With `--rocr-src` and `--hsakmt-src`: builds that libhsakmt (into kfdtest's directory for
/// its tree, [`super::build::hsakmt`]) and that ROCr against it (into
/// `target/conformance/rocr/<tree>/`, [`super::rocr::build`]), each under its directory's
/// lock; the ROCr tree's name and the two installs.
fn own_rocr(root: &Path, options: &Options) -> Result<Option<(String, OwnRocr)>, Failure> {
    let (Some(rocr_src), Some(hsakmt_src)) = (&options.rocr_src, &options.hsakmt_src) else {
        return Ok(None);
    };
    let canonical = |flag: &str, p: &Path| {
        fs::canonicalize(p).map_err(|e| Failure::new(format!("{flag} {}: {e}", p.display())))
    };
    let rocr_src = canonical("--rocr-src", rocr_src)?;
    let hsakmt_src = canonical("--hsakmt-src", hsakmt_src)?;
    let hsakmt_build = root
        .join("target/conformance/kfdtest")
        .join(tree_name(&hsakmt_src));
    let hsakmt = {
        let _lock = lock_build_dir(&hsakmt_build)?;
        super::build::hsakmt(&hsakmt_src, &hsakmt_build)?
    };
    let rocr_tree = tree_name(&rocr_src);
    let rocr_build = root.join("target/conformance/rocr").join(&rocr_tree);
    let llvm = options
        .llvm
        .clone()
        .unwrap_or_else(|| PathBuf::from(super::rocr::DEFAULT_LLVM));
    let prefix = {
        let _lock = lock_build_dir(&rocr_build)?;
        super::rocr::build(&rocr_src, &rocr_build, &hsakmt, &llvm)?
    };
    Ok(Some((rocr_tree, OwnRocr { prefix, hsakmt })))
}

/// Runs the suite (see the module docs).
pub(super) fn main(root: &Path, options: &Options) -> Result<(), Failure> {
    let src = fs::canonicalize(&options.src)
        .map_err(|e| Failure::new(format!("--src {}: {e}", options.src.display())))?;
    let dir = rocrtst_dir(&src)?;
    let tree = tree_name(&src);
    let own = own_rocr(root, options)?;
    let build_dir = options.build.clone().unwrap_or_else(|| {
        root.join("target/conformance/rocrtst").join(build_name(
            &tree,
            own.as_ref().map(|(name, _)| name.as_str()),
        ))
    });
    let built = {
        let _lock = lock_build_dir(&build_dir)?;
        build(
            &dir,
            &build_dir,
            options.llvm.as_deref(),
            own.as_ref().map(|(_, own)| own),
        )?
    };
    let kfd_emu = kfd_emu_binary(root, options)?;
    let out = options
        .out
        .clone()
        .unwrap_or_else(|| build_dir.join("results"));
    fs::create_dir_all(&out).map_err(|e| Failure::new(format!("{}: {e}", out.display())))?;
    let mut report = Report {
        suite: "rocrtst",
        tree: match (&own, &options.rocr_src) {
            (Some(_), Some(rocr)) => format!("{} (ROCr of {})", dir.display(), rocr.display()),
            _ => format!("{} (Debian's ROCr 5.2.3)", dir.display()),
        },
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
    fn isa_versions_read_the_processor_name() {
        // The values Debian's own files hold (llvm-dis of oclc_isa_version_*.bc).
        assert_eq!(isa_version("gfx906"), Some(9006));
        assert_eq!(isa_version("gfx90a"), Some(9010));
        assert_eq!(isa_version("gfx940"), Some(9400));
        assert_eq!(isa_version("gfx1030"), Some(10300));
        // The two Debian lacks.
        assert_eq!(isa_version("gfx942"), Some(9402));
        assert_eq!(isa_version("gfx1100"), Some(11000));
        for bad in ["gfx", "gfx9", "gfx90g", "gfx12345", "sm_90", "gfx9é"] {
            assert_eq!(isa_version(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_isa_version_file_defines_one_constant() {
        let text = isa_version_source("gfx942").expect("a processor");
        assert!(
            text.contains("__constant int __oclc_ISA_version = 9402;"),
            "{text}"
        );
        assert_eq!(text.matches(';').count(), 1, "one definition: {text}");
        assert!(isa_version_source("gfx9").is_none());
    }

    #[test]
    fn every_preset_has_a_kernel_target() {
        let targets: Vec<&str> = TARGETS_OWN_ROCR.split(';').collect();
        assert_eq!(
            targets,
            ["gfx906", "gfx908", "gfx90a", "gfx942", "gfx1100"],
            "radeon-vii, mi100, mi210x8, mi300x, rx7900xtx"
        );
        assert!(TARGETS.split(';').all(|t| targets.contains(&t)));
        assert!(targets.iter().all(|t| isa_version(t).is_some()));
    }

    #[test]
    fn the_clang_script_builds_code_object_v4() {
        let text = clang_wrapper(Path::new("/usr/lib/llvm-19/bin/clang"));
        assert!(text.starts_with("#!/bin/sh\n"), "{text}");
        assert!(
            text.ends_with("exec '/usr/lib/llvm-19/bin/clang' -mcode-object-version=4 \"$@\"\n"),
            "{text}"
        );
    }

    #[test]
    fn a_build_against_its_own_rocr_has_its_own_directory() {
        assert_eq!(build_name("rocrtst-752cfd5", None), "rocrtst-752cfd5");
        assert_eq!(
            build_name("rocrtst-752cfd5", Some("ROCR-Runtime-6.2.4")),
            "rocrtst-752cfd5+ROCR-Runtime-6.2.4"
        );
    }

    #[test]
    fn device_libs_link_debians_and_add_what_it_lacks() {
        let tmp = std::env::temp_dir().join(format!("rocrtst-bc-{}", std::process::id()));
        let debian = tmp.join("debian");
        fs::create_dir_all(&debian).unwrap();
        for name in ["ocml.bc", "oclc_isa_version_906.bc", "README"] {
            fs::write(debian.join(name), name).unwrap();
        }
        let dir = tmp.join("out");
        // A clang that writes its -o argument, standing in for clang-19.
        let clang = tmp.join("clang");
        fs::write(
            &clang,
            "#!/bin/sh\nwhile [ \"$1\" != -o ]; do shift; done; echo bc > \"$2\"\n",
        )
        .unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&clang, fs::Permissions::from_mode(0o755)).unwrap();
        }
        device_libs(&debian, &dir, &clang, "gfx906;gfx942").expect("builds");
        assert_eq!(
            fs::read_link(dir.join("ocml.bc")).unwrap(),
            debian.join("ocml.bc")
        );
        assert!(
            fs::read_link(dir.join("oclc_isa_version_906.bc")).is_ok(),
            "Debian's own"
        );
        assert!(!dir.join("README").exists(), "bitcode only");
        assert!(dir.join("oclc_isa_version_942.bc").is_file(), "compiled");
        assert!(
            fs::read_to_string(dir.join("isa_version_gfx942.cl"))
                .unwrap()
                .contains("= 9402;")
        );
        assert!(!dir.join("oclc_isa_version_906.cl").exists());
        assert!(device_libs(&debian, &dir, &clang, "sm_90").is_err());
        fs::remove_dir_all(&tmp).unwrap();
    }

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
