//! `cargo xtask conformance kfdtest`: AMD's own KFD test suite, kfdtest, as the judge of
//! kfd-emu (or of the hardware, on a machine with `/dev/kfd`).
//!
//! From a ROCT-Thunk-Interface source tree the user points at (`--src`; the README says which
//! public tag and commit) it builds that tree's libhsakmt (shared) and its `tests/kfdtest`
//! out of tree into `target/conformance/kfdtest/<tree>/` with cmake, changing no source file.
//! Then, per machine (each `--machine` preset under `kfd-emu run`, or the hardware), it reads
//! the KFD topology the way `tests/kfdtest/scripts/run_kfdtest.sh` does (`getHsaNodes`,
//! `getNodeName`) to find the first GPU node and its platform, takes the platform's
//! `FILTER[...]` from the tree's `kfdtest.exclude` (see [`exclude`]), lists the tests
//! (`kfdtest --gtest_list_tests`) and runs each one not excluded as its own process —
//! `kfdtest --node=N --gtest_filter=Suite.Test` with `HSA_DEBUG=1` as the script exports it
//! and `LD_LIBRARY_PATH` at the tree's libhsakmt — in a process group of its own, killed
//! whole when the per-test time limit runs out ("hung"). Each run's output is kept in
//! `<out>/logs/<machine>/<test>.log` and classified by [`gtest::classify`]; `<out>/results.md`
//! (a summary table and a table per machine with each test's first cause) and
//! `<out>/results.tsv` (one line per machine and test, for comparing a lab's hardware run
//! line by line) are rewritten after every test, so an interrupted run keeps what it did.
//!
//! Toolchain shims (no source is changed): kfdtest from rocm-5.3 on assembles its shaders
//! with LLVM MC (`find_package(LLVM)`, pointed at `--llvm`, default the newest
//! `/usr/lib/llvm-N` present). With LLVM 19 and GCC 12, two of its files miss an include
//! their older toolchains gave them transitively (`llvm_shutdown` in `Assemble.cpp`,
//! `std::get` of a tuple in `KFDCWSRTest.cpp`), so `<tuple>` and
//! `llvm/Support/ManagedStatic.h` are force-included through `CMAKE_CXX_FLAGS_RELEASE`
//! (kfdtest's CMakeLists overwrites `CMAKE_CXX_FLAGS`, but not the per-config flags).

mod build;
pub mod exclude;
pub mod gtest;
mod rocr;
mod rocrtst;
mod runner;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::failure::{self, Failure};
use gtest::{Outcome, Verdict};
use runner::{
    Options, Report, Runner, Suite, TestResult, kfd_emu_binary, lock_build_dir, log_name,
};

pub const USAGE: &str = "usage: cargo xtask conformance kfdtest|rocrtst --src DIR [--machine M]... \
[--hardware] [--timeout SECS] [--slow-timeout SECS] [--filter GTEST_FILTER] [--out DIR] [--kfd-emu PATH] \
[--llvm DIR] [--build DIR] [--run-excluded] [--kernel mainline|dkms] \
[--rocr-src DIR --hsakmt-src DIR (rocrtst)]";

/// The presets kfdtest runs on when neither `--machine` nor `/dev/kfd` says otherwise.
const DEFAULT_MACHINES: &[&str] = &["mi300x", "mi210x8", "mi100", "radeon-vii", "rx7900xtx"];

fn parse_args(args: &[&str], have_kfd: bool) -> Result<Options, Failure> {
    let usage = || Failure::new(USAGE);
    let [suite, rest @ ..] = args else {
        return Err(usage());
    };
    let suite = match *suite {
        "kfdtest" => Suite::Kfdtest,
        "rocrtst" => Suite::Rocrtst,
        _ => {
            return Err(Failure::new(format!(
                "conformance: unknown suite {suite:?} (kfdtest or rocrtst)\n{USAGE}"
            )));
        }
    };
    let mut src = None;
    let mut machines = Vec::new();
    let mut hardware = false;
    let mut timeout = Duration::from_secs(30);
    let mut slow_timeout = None;
    let (mut filter, mut out, mut kfd_emu, mut llvm, mut build) = (None, None, None, None, None);
    let mut run_excluded = false;
    let mut kernel = None;
    let (mut rocr_src, mut hsakmt_src) = (None, None);
    let mut it = rest.iter();
    while let Some(&arg) = it.next() {
        let mut value = || it.next().copied().ok_or_else(usage);
        match arg {
            "--src" => src = Some(PathBuf::from(value()?)),
            "--machine" => machines.push(value()?.to_owned()),
            "--hardware" => hardware = true,
            "--timeout" | "--slow-timeout" => {
                let v = value()?;
                let secs: u64 =
                    v.parse().ok().filter(|&s| s > 0).ok_or_else(|| {
                        Failure::new(format!("{arg} {v}: not a number of seconds"))
                    })?;
                if arg == "--timeout" {
                    timeout = Duration::from_secs(secs);
                } else {
                    slow_timeout = Some(Duration::from_secs(secs));
                }
            }
            "--filter" => filter = Some(value()?.to_owned()),
            "--out" => out = Some(PathBuf::from(value()?)),
            "--kfd-emu" => kfd_emu = Some(PathBuf::from(value()?)),
            "--llvm" => llvm = Some(PathBuf::from(value()?)),
            "--build" => build = Some(PathBuf::from(value()?)),
            "--run-excluded" => run_excluded = true,
            "--rocr-src" => rocr_src = Some(PathBuf::from(value()?)),
            "--hsakmt-src" => hsakmt_src = Some(PathBuf::from(value()?)),
            "--kernel" => match value()? {
                k @ ("mainline" | "dkms") => kernel = Some(k.to_owned()),
                k => {
                    return Err(Failure::new(format!(
                        "--kernel {k}: mainline or dkms (kfd-emu run --kernel)"
                    )));
                }
            },
            _ => {
                return Err(Failure::new(format!(
                    "conformance: unknown argument {arg:?}\n{USAGE}"
                )));
            }
        }
    }
    let src = src.ok_or_else(usage)?;
    let slow_timeout = slow_timeout.unwrap_or(timeout);
    if slow_timeout < timeout {
        return Err(Failure::new("--slow-timeout is shorter than --timeout"));
    }
    if hardware && !machines.is_empty() {
        return Err(Failure::new("--hardware and --machine exclude each other"));
    }
    if kernel.is_some() && (hardware || (machines.is_empty() && have_kfd)) {
        return Err(Failure::new(
            "--kernel chooses kfd-emu's driver: the hardware runs the one it has",
        ));
    }
    if hardware && !have_kfd {
        return Err(Failure::new("--hardware: this machine has no /dev/kfd"));
    }
    if (rocr_src.is_some() || hsakmt_src.is_some()) && suite != Suite::Rocrtst {
        return Err(Failure::new(
            "--rocr-src and --hsakmt-src are rocrtst's (kfdtest builds the libhsakmt of --src)",
        ));
    }
    if rocr_src.is_some() != hsakmt_src.is_some() {
        return Err(Failure::new(
            "--rocr-src and --hsakmt-src go together: ROCr 6.2.4 needs the libhsakmt of its own \
             release (Debian's 5.2.3 lacks its calls)",
        ));
    }
    if machines.is_empty() && !hardware && !have_kfd {
        let defaults = match suite {
            Suite::Kfdtest => DEFAULT_MACHINES,
            // A ROCr of its own knows every preset's GPU.
            Suite::Rocrtst if rocr_src.is_some() => DEFAULT_MACHINES,
            Suite::Rocrtst => rocrtst::DEFAULT_MACHINES,
        };
        machines = defaults.iter().map(|&m| m.to_owned()).collect();
    }
    Ok(Options {
        suite,
        src,
        machines,
        timeout,
        slow_timeout,
        filter,
        out,
        kfd_emu,
        llvm,
        build,
        run_excluded,
        kernel,
        rocr_src,
        hsakmt_src,
    })
}

/// Runs the command (see the module docs).
pub fn main(root: &Path, args: &[&str]) -> Result<(), Failure> {
    let options = parse_args(args, Path::new("/dev/kfd").exists())?;
    if options.suite == Suite::Rocrtst {
        return rocrtst::main(root, &options);
    }
    let src = fs::canonicalize(&options.src)
        .map_err(|e| Failure::new(format!("--src {}: {e}", options.src.display())))?;
    let tree = src
        .file_name()
        .map_or_else(|| "tree".to_owned(), |n| n.to_string_lossy().into_owned());
    let build = options
        .build
        .clone()
        .unwrap_or_else(|| root.join("target/conformance/kfdtest").join(&tree));
    let built = {
        let _lock = lock_build_dir(&build)?;
        build_kfdtest(&src, &build, options.llvm.as_deref())?
    };
    let filters = exclude::parse(
        &fs::read_to_string(src.join("tests/kfdtest/scripts/kfdtest.exclude"))
            .map_err(|e| Failure::new(format!("reading kfdtest.exclude: {e}")))?,
    )
    .map_err(|e| Failure::new(format!("kfdtest.exclude: {e}")))?;

    let kfd_emu = kfd_emu_binary(root, &options)?;
    let out = options.out.clone().unwrap_or_else(|| build.join("results"));
    fs::create_dir_all(&out).map_err(|e| Failure::new(format!("{}: {e}", out.display())))?;

    let mut report = Report {
        suite: "kfdtest",
        tree: src.display().to_string(),
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
            hsa_debug: true,
            cwd: None,
            kernel: options.kernel.clone(),
        };
        let label = machine.clone().unwrap_or_else(|| "hardware".to_owned());
        let node = runner.first_gpu()?;
        let platform_filter = node.platform.as_ref().and_then(|p| filters.get(p)).cloned();
        if platform_filter.is_none() {
            println!(
                "conformance: {label}: platform {:?} has no FILTER in kfdtest.exclude \
                 (run_kfdtest.sh would refuse it); running every test",
                node.platform
            );
        }
        let tests = runner.list(&built.kfdtest)?;
        let (logs, selected) = report.start_machine(&label, &node, &tests, &out, &options)?;
        for (n, test) in selected.iter().enumerate() {
            let excluded = platform_filter
                .as_deref()
                .is_some_and(|f| !gtest::filter_matches(f, test));
            let result = if excluded && !options.run_excluded {
                TestResult {
                    name: (*test).clone(),
                    verdict: Verdict {
                        outcome: Outcome::Excluded,
                        cause: format!(
                            "kfdtest.exclude FILTER[{}]",
                            node.platform.as_deref().unwrap_or("?")
                        ),
                    },
                    seconds: 0.0,
                    excluded,
                }
            } else {
                let log = logs.join(log_name(test));
                let started = Instant::now();
                let args = [
                    format!("--node={}", node.id),
                    format!("--gtest_filter={test}"),
                ];
                let ended =
                    runner.run_test(&built.kfdtest, &args, test, &log, options.slow_timeout)?;
                let output = fs::read(&log).unwrap_or_default();
                // How it ended, for whoever reads the log (after reading it).
                if let Ok(mut file) = fs::OpenOptions::new().append(true).open(&log) {
                    let _ = writeln!(file, "$ ended: {ended:?}");
                }
                TestResult {
                    name: (*test).clone(),
                    verdict: ended.note(gtest::classify(
                        test,
                        &String::from_utf8_lossy(&output),
                        ended.exit,
                    )),
                    seconds: started.elapsed().as_secs_f64(),
                    excluded,
                }
            };
            println!(
                "[{label} {}/{}] {}: {}{} ({:.1} s) {}",
                n + 1,
                selected.len(),
                result.name,
                result.verdict.outcome,
                if result.excluded && options.run_excluded {
                    " (excluded upstream)"
                } else {
                    ""
                },
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

/// The built tree: kfdtest and the directory of its libhsakmt.
struct Built {
    kfdtest: PathBuf,
    lib: PathBuf,
}

/// Builds libhsakmt and kfdtest of `src` into `build` (see the module docs).
fn build_kfdtest(src: &Path, build: &Path, llvm: Option<&Path>) -> Result<Built, Failure> {
    let kfdtest_src = src.join("tests/kfdtest");
    if !kfdtest_src.join("CMakeLists.txt").is_file() || !src.join("CMakeLists.txt").is_file() {
        return Err(Failure::new(format!(
            "{}: not a ROCT-Thunk-Interface tree (no CMakeLists.txt, or no tests/kfdtest)",
            src.display()
        )));
    }
    let jobs = build::jobs();
    let prefix = build::hsakmt(src, build)?;

    println!("conformance: building kfdtest");
    let cmakelists = fs::read_to_string(kfdtest_src.join("CMakeLists.txt"))
        .map_err(|e| Failure::new(format!("kfdtest's CMakeLists.txt: {e}")))?;
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(&kfdtest_src)
        .arg("-B")
        .arg(build.join("kfdtest"))
        .arg("-DCMAKE_BUILD_TYPE=Release")
        // kfdtest's CMakeLists takes libhsakmt from $LIBHSAKMT_PATH/lib when it is set.
        .env("LIBHSAKMT_PATH", &prefix);
    if cmakelists.contains("find_package( LLVM") || cmakelists.contains("find_package(LLVM") {
        let llvm = match llvm {
            Some(dir) => dir.to_path_buf(),
            None => newest_llvm().ok_or_else(|| {
                Failure::new(
                    "kfdtest needs LLVM (its shaders are assembled with LLVM MC): install \
                     llvm-19-dev or pass --llvm DIR",
                )
            })?,
        };
        configure
            .arg(format!("-DLLVM_DIR={}", llvm.join("lib/cmake/llvm").display()))
            .arg("-DCMAKE_CXX_FLAGS_RELEASE=-O2 -include tuple -include llvm/Support/ManagedStatic.h");
    } else if !kfdtest_src.join("sp3/libamdsp3.a").is_file() {
        return Err(Failure::new(
            "this kfdtest (before rocm-5.3) links AMD's closed SP3 assembler, \
             tests/kfdtest/sp3/libamdsp3.a, which this tree lacks (the public repository's \
             blob is not stored); use a rocm-5.3 or newer tree",
        ));
    }
    failure::run(&mut configure, "cmake (kfdtest)")?;
    failure::run(
        Command::new("cmake")
            .arg("--build")
            .arg(build.join("kfdtest"))
            .args(["-j", &jobs]),
        "building kfdtest",
    )?;
    Ok(Built {
        kfdtest: build.join("kfdtest/kfdtest"),
        lib: prefix.join("lib"),
    })
}

/// The newest `/usr/lib/llvm-N` with a CMake package.
fn newest_llvm() -> Option<PathBuf> {
    (14..=30)
        .rev()
        .map(|v| PathBuf::from(format!("/usr/lib/llvm-{v}")))
        .find(|d| d.join("lib/cmake/llvm/LLVMConfig.cmake").is_file())
}

#[cfg(test)]
mod tests {
    use super::runner::first_gpu_of;
    use super::*;

    #[test]
    fn a_second_run_waits_for_the_first_runs_build() {
        let dir = std::env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        let first = lock_build_dir(&dir).expect("the first run takes the lock");
        // An open file description of its own, as another process's run would have.
        let other = fs::OpenOptions::new()
            .write(true)
            .open(dir.join(".lock"))
            .expect("the lock file exists");
        assert!(
            matches!(other.try_lock(), Err(fs::TryLockError::WouldBlock)),
            "a second run must not build while the first builds"
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let lock = lock_build_dir(&dir);
                tx.send(lock.is_ok()).expect("the test waits");
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "the second run took the lock while the first held it"
        );
        drop(first);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(60)),
            Ok(true),
            "the second run gets the lock once the first's build is done"
        );
        waiter.join().expect("no panic");
        drop(other);
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn the_first_gpu_is_the_first_node_with_simds() {
        let dump = "@@node 0\n\n@@properties\nsimd_count 0\ncpu_cores_count 24\n\
                    @@node 1\nip discovery\n@@properties\nsimd_count 1216\ngfx_target_version 90402\n\
                    @@node 2\nvega20\n@@properties\nsimd_count 240\n";
        let node = first_gpu_of(dump, None).expect("a GPU");
        assert_eq!(node.id, 1);
        assert_eq!(node.platform.as_deref(), Some("gfx942"));
        assert_eq!(node.gpus, 2, "nodes 1 and 2 have SIMDs");
        assert!(first_gpu_of("@@node 0\n\n@@properties\nsimd_count 0\n", None).is_none());
    }

    #[test]
    fn a_parameterized_test_logs_to_one_file() {
        assert_eq!(
            log_name("KFDCWSRTest.BasicTest/0"),
            "KFDCWSRTest.BasicTest_0.log"
        );
        assert_eq!(
            log_name("KFDQMTest.CreateCpQueue"),
            "KFDQMTest.CreateCpQueue.log"
        );
    }

    #[test]
    fn arguments() {
        let o = parse_args(&["kfdtest", "--src", "/t"], false).expect("parses");
        assert_eq!(o.machines, DEFAULT_MACHINES);
        assert_eq!(o.timeout, Duration::from_secs(30));
        // With /dev/kfd and no --machine: the hardware.
        let o = parse_args(&["kfdtest", "--src", "/t"], true).expect("parses");
        assert!(o.machines.is_empty());
        let o = parse_args(
            &[
                "kfdtest",
                "--src",
                "/t",
                "--machine",
                "mi100",
                "--machine",
                "radeon-vii",
                "--timeout",
                "20",
            ],
            true,
        )
        .expect("parses");
        assert_eq!(o.machines, ["mi100", "radeon-vii"]);
        assert_eq!(o.timeout, Duration::from_secs(20));
        assert!(
            parse_args(&["kfdtest"], false).is_err(),
            "--src is required"
        );
        let o = parse_args(&["rocrtst", "--src", "/t"], false).expect("parses");
        assert_eq!(o.suite, Suite::Rocrtst);
        assert_eq!(o.machines, rocrtst::DEFAULT_MACHINES);
        assert!(parse_args(&["hiptest", "--src", "/t"], false).is_err());
        assert!(parse_args(&["kfdtest", "--src", "/t", "--timeout", "0"], false).is_err());
        assert!(parse_args(&["kfdtest", "--src", "/t", "--hardware"], false).is_err());
        assert!(parse_args(&["kfdtest", "--src", "/t", "--bogus"], false).is_err());
    }

    #[test]
    fn rocrtst_against_its_own_rocr() {
        let own = [
            "rocrtst",
            "--src",
            "/t",
            "--rocr-src",
            "/r",
            "--hsakmt-src",
            "/h",
        ];
        let o = parse_args(&own, false).expect("parses");
        assert_eq!(o.rocr_src.as_deref(), Some(Path::new("/r")));
        assert_eq!(o.hsakmt_src.as_deref(), Some(Path::new("/h")));
        assert_eq!(
            o.machines, DEFAULT_MACHINES,
            "a ROCr that knows all five presets"
        );
        // Without: Debian's ROCr and the presets it knows, as before.
        let o = parse_args(&["rocrtst", "--src", "/t"], false).expect("parses");
        assert_eq!((o.rocr_src, o.hsakmt_src), (None, None));
        assert_eq!(o.machines, rocrtst::DEFAULT_MACHINES);
        // One without the other, or for kfdtest: refused.
        assert!(parse_args(&own[..5], false).is_err(), "no --hsakmt-src");
        let hsakmt_only = ["rocrtst", "--src", "/t", "--hsakmt-src", "/h"];
        assert!(parse_args(&hsakmt_only, false).is_err());
        let mut kfdtest = own;
        kfdtest[0] = "kfdtest";
        assert!(parse_args(&kfdtest, false).is_err());
        assert!(parse_args(&["rocrtst", "--src", "/t", "--rocr-src"], false).is_err());
        // --machine still chooses.
        let mut one = own.to_vec();
        one.extend(["--machine", "mi300x"]);
        assert_eq!(
            parse_args(&one, false).expect("parses").machines,
            ["mi300x"]
        );
    }

    #[test]
    fn the_kernel_flavour_is_kfd_emus_only() {
        let o = parse_args(&["kfdtest", "--src", "/t", "--kernel", "dkms"], false).expect("parses");
        assert_eq!(o.kernel.as_deref(), Some("dkms"));
        let o = parse_args(&["kfdtest", "--src", "/t"], false).expect("parses");
        assert_eq!(o.kernel, None, "kfd-emu's default (mainline)");
        assert!(parse_args(&["kfdtest", "--src", "/t", "--kernel", "amdgpu"], false).is_err());
        // On the hardware the kernel is the machine's.
        assert!(parse_args(&["kfdtest", "--src", "/t", "--kernel", "dkms"], true).is_err());
        let args = [
            "kfdtest",
            "--src",
            "/t",
            "--machine",
            "mi100",
            "--kernel",
            "dkms",
        ];
        assert!(
            parse_args(&args, true).is_ok(),
            "emulated on a machine with /dev/kfd"
        );
        // The flavour reaches kfd-emu's command line, before the program.
        let runner = Runner {
            kfd_emu: Some(PathBuf::from("/emu")),
            machine: Some("mi100".to_owned()),
            lib: PathBuf::from("/lib"),
            hsa_debug: false,
            cwd: None,
            kernel: Some("dkms".to_owned()),
        };
        let command = runner.command(Path::new("/kfdtest"));
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(
            args,
            [
                "run",
                "--machine",
                "mi100",
                "--kernel",
                "dkms",
                "--",
                "/kfdtest"
            ]
        );
    }
}
