//! What the suites share: the options, running a program on one machine (under
//! `kfd-emu run --machine M` or on the hardware) with a time limit, and the results tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::exclude;
use super::gtest::{self, Exit, Outcome, Verdict};
use crate::failure::{self, Failure};

/// The suites the harness knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Suite {
    /// AMD's KFD test suite (ROCT-Thunk-Interface `tests/kfdtest`).
    Kfdtest,
    /// ROCr's test suite (ROCR-Runtime `rocrtst`; see the `rocrtst` module).
    Rocrtst,
}

/// Where the KFD topology is (as `run_kfdtest.sh`'s `TOPOLOGY_SYSFS_DIR`).
pub(super) const TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";

/// What the command line asked for.
#[derive(Debug)]
pub(super) struct Options {
    pub(super) suite: Suite,
    pub(super) src: PathBuf,
    /// Presets to emulate; empty means the hardware.
    pub(super) machines: Vec<String>,
    /// A test that runs longer is hung, or slow if `slow_timeout` is longer.
    pub(super) timeout: Duration,
    /// A test still running here is hung; one that ends between `timeout` and this is slow
    /// (its outcome is kept and counted in the `slow` column). Equal to `timeout` unless
    /// `--slow-timeout` says otherwise.
    pub(super) slow_timeout: Duration,
    pub(super) filter: Option<String>,
    pub(super) out: Option<PathBuf>,
    pub(super) kfd_emu: Option<PathBuf>,
    pub(super) llvm: Option<PathBuf>,
    /// Where to build (default `target/conformance/kfdtest/<tree>`).
    pub(super) build: Option<PathBuf>,
    pub(super) run_excluded: bool,
    /// `--kernel K`: the KFD driver kfd-emu acts as (`kfd-emu run --kernel`: `mainline`, the
    /// default, or `dkms`, AMD's out-of-tree driver with its IPC and PC-sampling ioctls).
    pub(super) kernel: Option<String>,
    /// `--rocr-src DIR` (rocrtst only): a ROCR-Runtime tree (rocm-6.2.4) to build and run
    /// the suite against instead of Debian's ROCr 5.2.3.
    pub(super) rocr_src: Option<PathBuf>,
    /// `--hsakmt-src DIR` (with `--rocr-src`): the ROCT-Thunk-Interface tree whose libhsakmt
    /// that ROCr is built against and runs with.
    pub(super) hsakmt_src: Option<PathBuf>,
}

/// The kfd-emu to run the machines under: `--kfd-emu`, or this workspace's, built release;
/// `None` on the hardware.
pub(super) fn kfd_emu_binary(root: &Path, options: &Options) -> Result<Option<PathBuf>, Failure> {
    if options.machines.is_empty() {
        return Ok(None);
    }
    Ok(Some(match &options.kfd_emu {
        Some(p) => fs::canonicalize(p)
            .map_err(|e| Failure::new(format!("--kfd-emu {}: {e}", p.display())))?,
        None => {
            // The cargo that runs `xtask` (the same toolchain).
            let mut cargo =
                Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            failure::run(
                cargo
                    .args(["build", "-p", "kfd-emu", "--release"])
                    .current_dir(root),
                "cargo build -p kfd-emu --release",
            )?;
            root.join("target/release/kfd-emu")
        }
    }))
}

/// The log file of `test`: parameterized names (`KFDCWSRTest.BasicTest/0`) have a '/'.
pub(super) fn log_name(test: &str) -> String {
    format!("{}.log", test.replace('/', "_"))
}

/// The GPU node tests run on, as `run_kfdtest.sh` picks and names it.
pub(super) struct GpuNode {
    pub(super) id: u32,
    pub(super) platform: Option<String>,
    /// How many GPU nodes (simd_count > 0) the machine has.
    pub(super) gpus: usize,
}

/// Runs programs on one machine: under `kfd-emu run --machine M`, or directly (hardware).
pub(super) struct Runner {
    pub(super) kfd_emu: Option<PathBuf>,
    pub(super) machine: Option<String>,
    /// `LD_LIBRARY_PATH` of the programs run.
    pub(super) lib: PathBuf,
    /// Whether to export `HSA_DEBUG=1`, as `run_kfdtest.sh` does.
    pub(super) hsa_debug: bool,
    /// Where tests run (default: their log's directory).
    pub(super) cwd: Option<PathBuf>,
    /// `kfd-emu run --kernel K` (see [`Options::kernel`]); `None`: kfd-emu's default.
    pub(super) kernel: Option<String>,
}

impl Runner {
    pub(super) fn command(&self, program: &Path) -> Command {
        let mut command = match (&self.kfd_emu, &self.machine) {
            (Some(emu), Some(machine)) => {
                let mut c = Command::new(emu);
                c.args(["run", "--machine", machine]);
                if let Some(kernel) = &self.kernel {
                    c.args(["--kernel", kernel]);
                }
                c.arg("--").arg(program);
                c
            }
            _ => Command::new(program),
        };
        command
            .env("LD_LIBRARY_PATH", &self.lib)
            .stdin(Stdio::null());
        if self.hsa_debug {
            command.env("HSA_DEBUG", "1");
        }
        command
    }

    /// Reads every topology node's `name` and `properties` (in the machine's view).
    pub(super) fn first_gpu(&self) -> Result<GpuNode, Failure> {
        let script = format!(
            "for d in {TOPOLOGY}/*; do echo \"@@node ${{d##*/}}\"; cat \"$d/name\"; \
             echo; echo @@properties; cat \"$d/properties\"; done"
        );
        let output = self
            .command(Path::new("/bin/sh"))
            .args(["-c", &script])
            .output()
            .map_err(|e| Failure::new(format!("reading the topology: {e}")))?;
        let dump = String::from_utf8_lossy(&output.stdout);
        let override_gfx = std::env::var("HSA_OVERRIDE_GFX_VERSION").ok();
        first_gpu_of(&dump, override_gfx.as_deref()).ok_or_else(|| {
            Failure::new(format!(
                "no GPU node (simd_count > 0) in {TOPOLOGY}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        })
    }

    pub(super) fn list(&self, kfdtest: &Path) -> Result<Vec<String>, Failure> {
        let mut command = self.command(kfdtest);
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        let output = command
            .arg("--gtest_list_tests")
            .output()
            .map_err(|e| Failure::new(format!("{} --gtest_list_tests: {e}", kfdtest.display())))?;
        let tests = gtest::parse_list(&String::from_utf8_lossy(&output.stdout));
        if tests.is_empty() {
            return Err(Failure::new(format!(
                "{} --gtest_list_tests listed nothing ({}): {}",
                kfdtest.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(tests)
    }

    /// Runs one test in a process group of its own with its output in `log`; the whole group
    /// is killed at the time limit, and afterwards (nothing it started outlives it).
    ///
    /// The test ends when its program exits, as on the hardware, where the program is this
    /// process's child: what it leaves running (a forked child blocked for good, say) is
    /// killed with the group. Under `kfd-emu run`, which serves every process of the program
    /// until the last one exits (`supervisor::spawn_command`), the program's exit is not the
    /// child's: the program runs under `/bin/sh` ([`PROGRAM_EXIT`]), which writes its exit
    /// status next to the log; once it is there, kfd-emu gets [`GRACE`] to end on its own
    /// before the group is killed and the test is marked as having left processes running.
    pub(super) fn run_test(
        &self,
        program: &Path,
        args: &[String],
        test: &str,
        log: &Path,
        limit: Duration,
    ) -> Result<Ended, Failure> {
        let io = |e: std::io::Error| Failure::new(format!("{}: {e}", log.display()));
        let mut file = File::create(log).map_err(io)?;
        let status_file = log.with_extension("exit");
        let _ = fs::remove_file(&status_file);
        let mut command = if self.kfd_emu.is_some() && self.machine.is_some() {
            let mut c = self.command(Path::new("/bin/sh"));
            c.args(["-c", PROGRAM_EXIT, "sh"])
                .arg(&status_file)
                .arg(program)
                .args(args);
            c
        } else {
            let mut c = self.command(program);
            c.args(args);
            c
        };
        writeln!(file, "$ {command:?}").map_err(io)?;
        let stderr = file.try_clone().map_err(io)?;
        command
            .stdout(file)
            .stderr(stderr)
            .process_group(0)
            .current_dir(
                self.cwd
                    .as_deref()
                    .unwrap_or(log.parent().unwrap_or(Path::new("."))),
            );
        // The group is not the terminal's, so an interrupted run would leave the test running:
        // it gets SIGKILL when this process dies (kfd-emu then ends its program).
        // SAFETY: the hook only calls prctl(PR_SET_PDEATHSIG), which is async-signal-safe, in
        // the child between fork and exec.
        unsafe {
            command.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| Failure::new(format!("running {command:?}: {e}")))?;
        let group = rustix::process::Pid::from_child(&child);
        let deadline = Instant::now() + limit;
        // When the program's exit status appeared, and what it was.
        let mut program_exit: Option<(Instant, i32)> = None;
        let kill = |child: &mut std::process::Child| {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = child.wait();
        };
        let ended = loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    break Ended {
                        exit: match (status.code(), status.signal()) {
                            (Some(code), _) => Exit::Code(code),
                            (None, Some(sig)) => Exit::Signal(sig),
                            (None, None) => Exit::Code(-1),
                        },
                        left_running: false,
                    };
                }
                Ok(None) => {}
                Err(e) => return Err(Failure::new(format!("waiting for {test}: {e}"))),
            }
            if program_exit.is_none() {
                program_exit = fs::read_to_string(&status_file)
                    .ok()
                    .filter(|s| s.ends_with('\n'))
                    .and_then(|s| s.trim().parse().ok())
                    .map(|code| (Instant::now(), code));
            }
            match program_exit {
                // The program is done; what it left is killed (not a hang: its result is in).
                Some((at, code)) if at.elapsed() >= GRACE => {
                    kill(&mut child);
                    break Ended {
                        exit: Exit::Code(code),
                        left_running: true,
                    };
                }
                Some(_) => {}
                None if Instant::now() >= deadline => {
                    kill(&mut child);
                    break Ended {
                        exit: Exit::TimedOut,
                        left_running: false,
                    };
                }
                None => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Whatever the test left running in its group goes with it (ESRCH when nothing did).
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        let _ = fs::remove_file(&status_file);
        Ok(ended)
    }
}

/// The shell script a test's program runs under with kfd-emu: `$1` is the file that gets the
/// program's exit status (`128 + N` for a signal, as the shell reports it), the rest is the
/// program and its arguments; the script exits with the same status.
const PROGRAM_EXIT: &str = r#"s=$1; shift; "$@"; c=$?; echo "$c" > "$s"; exit "$c""#;

/// How long kfd-emu gets to end after its program exited before what the program left
/// running is killed.
const GRACE: Duration = Duration::from_secs(5);

/// How a test's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ended {
    /// The program's exit (or the time limit).
    pub(super) exit: Exit,
    /// The program exited, leaving processes running that were killed.
    pub(super) left_running: bool,
}

impl Ended {
    /// `verdict` (the output classified with [`Ended::exit`]) with the processes the program
    /// left running named in its cause.
    pub(super) fn note(&self, mut verdict: Verdict) -> Verdict {
        if self.left_running {
            let sep = if verdict.cause.is_empty() { "" } else { "; " };
            verdict.cause = format!(
                "{}{sep}exited leaving processes running (killed after {} s)",
                verdict.cause,
                GRACE.as_secs()
            );
        }
        verdict
    }
}

/// The first GPU node (`simd_count` > 0, as `getHsaNodes`) of a topology dump made of
/// `@@node N`, the node's `name`, `@@properties` and its `properties` text, per node.
pub(super) fn first_gpu_of(dump: &str, override_gfx: Option<&str>) -> Option<GpuNode> {
    let mut nodes: BTreeMap<u32, (String, String)> = BTreeMap::new();
    let mut current: Option<(u32, bool)> = None;
    for line in dump.lines() {
        if let Some(id) = line.strip_prefix("@@node ") {
            current = id.trim().parse().ok().map(|id| (id, false));
            if let Some((id, _)) = current {
                nodes.entry(id).or_default();
            }
        } else if line == "@@properties" {
            current = current.map(|(id, _)| (id, true));
        } else if let Some((id, in_properties)) = current
            && let Some(entry) = nodes.get_mut(&id)
        {
            let target = if in_properties {
                &mut entry.1
            } else {
                &mut entry.0
            };
            target.push_str(line);
            target.push('\n');
        }
    }
    let is_gpu = |properties: &str| {
        properties
            .lines()
            .find_map(|l| {
                l.strip_prefix("simd_count ")
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
            .is_some_and(|s| s > 0)
    };
    let gpus = nodes.values().filter(|(_, p)| is_gpu(p)).count();
    nodes.into_iter().find_map(|(id, (name, properties))| {
        is_gpu(&properties).then(|| GpuNode {
            id,
            platform: exclude::platform(&name, &properties, override_gfx),
            gpus,
        })
    })
}

pub(super) struct TestResult {
    pub(super) name: String,
    pub(super) verdict: Verdict,
    pub(super) seconds: f64,
    /// Upstream's exclusion list leaves it out on this GPU (run anyway with --run-excluded).
    pub(super) excluded: bool,
}

pub(super) struct MachineResults {
    pub(super) label: String,
    pub(super) platform: String,
    pub(super) node: u32,
    pub(super) tests: Vec<TestResult>,
}

pub(super) struct Report {
    pub(super) suite: &'static str,
    pub(super) tree: String,
    pub(super) timeout: Duration,
    /// The hard limit (see [`Options::slow_timeout`]).
    pub(super) slow_timeout: Duration,
    pub(super) machines: Vec<MachineResults>,
    /// The kernel flavour the machines were emulated with (`--kernel`), noted in the results.
    pub(super) kernel: Option<String>,
}

impl Report {
    /// Starts `label`'s results (its first GPU `node`) and its log directory under `out`, and
    /// returns the log directory and the tests of `tests` that `options.filter` selects (in
    /// order): what every suite does before it runs a machine's tests.
    pub(super) fn start_machine<'t>(
        &mut self,
        label: &str,
        node: &GpuNode,
        tests: &'t [String],
        out: &Path,
        options: &Options,
    ) -> Result<(PathBuf, Vec<&'t String>), Failure> {
        let logs = out.join("logs").join(label);
        fs::create_dir_all(&logs).map_err(|e| Failure::new(format!("{}: {e}", logs.display())))?;
        self.machines.push(MachineResults {
            label: label.to_owned(),
            platform: node.platform.clone().unwrap_or_else(|| "?".to_owned()),
            node: node.id,
            tests: Vec::new(),
        });
        let selected = tests
            .iter()
            .filter(|t| {
                options
                    .filter
                    .as_deref()
                    .is_none_or(|f| gtest::filter_matches(f, t))
            })
            .collect();
        Ok((logs, selected))
    }

    /// Whether `t` ended (not hung) after the time limit: it gets until the slow limit.
    pub(super) fn is_slow(&self, t: &TestResult) -> bool {
        t.verdict.outcome != Outcome::Hung && t.seconds > self.timeout.as_secs_f64()
    }

    pub(super) fn counts(m: &MachineResults) -> BTreeMap<Outcome, usize> {
        let mut counts = BTreeMap::new();
        for t in &m.tests {
            *counts.entry(t.verdict.outcome).or_insert(0) += 1;
        }
        counts
    }

    /// The summary table (markdown).
    pub(super) fn summary(&self) -> String {
        let mut s = String::from("| machine | platform | tests |");
        for o in Outcome::ALL {
            let _ = write!(s, " {o} |");
        }
        s.push_str(" slow |\n|---|---|---|");
        for _ in Outcome::ALL {
            s.push_str("---|");
        }
        s.push_str("---|\n");
        for m in &self.machines {
            let counts = Report::counts(m);
            let _ = write!(s, "| {} | {} | {} |", m.label, m.platform, m.tests.len());
            for o in Outcome::ALL {
                let _ = write!(s, " {} |", counts.get(&o).copied().unwrap_or(0));
            }
            let slow = m.tests.iter().filter(|t| self.is_slow(t)).count();
            let _ = writeln!(s, " {slow} |");
        }
        s
    }

    pub(super) fn write(&self, out: &Path) -> Result<(), Failure> {
        let mut md = format!(
            "# {} results\n\nTree: `{}`; {}one process per test, {} s limit each{}.\n\n{}",
            self.suite,
            self.tree,
            match &self.kernel {
                Some(kernel) =>
                    format!("kfd-emu's `{kernel}` kernel (`kfd-emu run --kernel {kernel}`); "),
                None => String::new(),
            },
            self.timeout.as_secs(),
            if self.slow_timeout > self.timeout {
                format!(
                    " (a test that ends by {} s is slow: its outcome kept, counted in `slow`)",
                    self.slow_timeout.as_secs()
                )
            } else {
                String::new()
            },
            self.summary()
        );
        let mut tsv = String::from("machine\tplatform\ttest\toutcome\tseconds\texcluded\tcause\n");
        for m in &self.machines {
            let _ = write!(
                md,
                "\n## {} ({}, node {})\n\n| test | outcome | s | first cause |\n|---|---|---|---|\n",
                m.label, m.platform, m.node
            );
            for t in &m.tests {
                let excluded = if t.excluded && t.verdict.outcome != Outcome::Excluded {
                    " (excluded upstream)"
                } else {
                    ""
                };
                let slow = if self.is_slow(t) { " (slow)" } else { "" };
                let _ = writeln!(
                    md,
                    "| {} | {}{excluded}{slow} | {:.1} | {} |",
                    t.name,
                    t.verdict.outcome,
                    t.seconds,
                    t.verdict.cause.replace('|', "\\|")
                );
                let _ = writeln!(
                    tsv,
                    "{}\t{}\t{}\t{}\t{:.1}\t{}\t{}",
                    m.label,
                    m.platform,
                    t.name,
                    t.verdict.outcome,
                    t.seconds,
                    t.excluded,
                    t.verdict.cause.replace(['\t', '\n'], " ")
                );
            }
        }
        for (name, text) in [("results.md", md), ("results.tsv", tsv)] {
            fs::write(out.join(name), text)
                .map_err(|e| Failure::new(format!("writing {name}: {e}")))?;
        }
        Ok(())
    }
}

/// Takes the build directory `build` for this run's build (created if missing): an exclusive
/// lock on `build/.lock`, held until the returned file is dropped. Two harness runs of one
/// tree (two presets at once) would otherwise configure and install into the same cmake
/// directories together, and cmake fails (or installs a half-written library under the
/// other run's tests). The second run waits, then finds the build done; the lock is held for
/// the build only, so runs of different presets still test at once.
pub(super) fn lock_build_dir(build: &Path) -> Result<fs::File, Failure> {
    fs::create_dir_all(build).map_err(|e| Failure::new(format!("{}: {e}", build.display())))?;
    let path = build.join(".lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(fs::TryLockError::WouldBlock) => println!(
            "conformance: {} is being built by another run; waiting for it",
            build.display()
        ),
        Err(fs::TryLockError::Error(e)) => {
            return Err(Failure::new(format!("locking {}: {e}", path.display())));
        }
    }
    file.lock()
        .map_err(|e| Failure::new(format!("locking {}: {e}", path.display())))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    /// A stand-in for `kfd-emu run --machine M -- PROGRAM ARGS...` in a fresh directory: it
    /// runs the program and then, as kfd-emu does while a process of the program is still
    /// being served, stays (`stays`), or exits with the program's status.
    fn fake_emu(dir: &Path, stays: bool) -> PathBuf {
        let emu = dir.join("fake-kfd-emu");
        let tail = if stays {
            "\"$@\"; exec sleep 600"
        } else {
            "exec \"$@\""
        };
        fs::write(&emu, format!("#!/bin/sh\nshift 4\n{tail}\n")).expect("write the stand-in");
        fs::set_permissions(&emu, fs::Permissions::from_mode(0o755)).expect("chmod");
        emu
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-runner-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        dir
    }

    fn runner(emu: PathBuf) -> Runner {
        Runner {
            kfd_emu: Some(emu),
            machine: Some("mi100".to_owned()),
            lib: PathBuf::from("/nonexistent"),
            hsa_debug: false,
            cwd: None,
            kernel: None,
        }
    }

    /// A test that ended (any outcome but hung) after the time limit is counted slow, in the
    /// summary's last column and per test; a hung one is not.
    #[test]
    fn tests_that_end_after_the_limit_are_slow() {
        let result = |name: &str, outcome, seconds| TestResult {
            name: name.to_owned(),
            verdict: Verdict {
                outcome,
                cause: String::new(),
            },
            seconds,
            excluded: false,
        };
        let report = Report {
            suite: "kfdtest",
            tree: "t".to_owned(),
            timeout: Duration::from_secs(30),
            slow_timeout: Duration::from_secs(90),
            kernel: None,
            machines: vec![MachineResults {
                label: "mi300x".to_owned(),
                platform: "gfx942".to_owned(),
                node: 1,
                tests: vec![
                    result("A.fast", Outcome::Passed, 1.0),
                    result("A.slow", Outcome::Passed, 68.0),
                    result("A.slowfail", Outcome::Failed, 31.0),
                    result("A.hung", Outcome::Hung, 90.0),
                ],
            }],
        };
        let summary = report.summary();
        assert!(summary.ends_with(" slow |\n|---|---|---|---|---|---|---|---|---|---|\n| mi300x | gfx942 | 4 | 2 | 1 | 0 | 1 | 0 | 0 | 2 |\n"), "{summary}");
        let tests = &report.machines[0].tests;
        let slow: Vec<bool> = tests.iter().map(|t| report.is_slow(t)).collect();
        assert_eq!(slow, [false, true, true, false]);
    }

    /// A program that exits leaving a process behind, under an emulator that keeps serving
    /// that process: the test ends with the program's own exit status within the grace
    /// period (not at the time limit, not "hung"), marked as having left processes running,
    /// which are killed.
    #[test]
    fn a_program_that_exits_leaving_a_child_ends_the_test_with_its_status() {
        let dir = scratch("left");
        let runner = runner(fake_emu(&dir, true));
        let log = dir.join("t.log");
        let started = Instant::now();
        let ended = runner
            .run_test(
                Path::new("/bin/sh"),
                &["-c".to_owned(), "sleep 600 & echo bye; exit 3".to_owned()],
                "T.t",
                &log,
                Duration::from_secs(120),
            )
            .expect("runs");
        let took = started.elapsed();
        assert_eq!(
            ended,
            Ended {
                exit: Exit::Code(3),
                left_running: true
            }
        );
        assert!(
            took >= GRACE && took < Duration::from_secs(60),
            "took {took:?}"
        );
        assert!(fs::read_to_string(&log).expect("log").contains("bye"));
        let verdict = ended.note(Verdict {
            outcome: Outcome::Failed,
            cause: "x.cpp:1".to_owned(),
        });
        assert!(verdict.cause.contains("leaving processes running"));
        let _ = fs::remove_dir_all(&dir);
    }

    /// A program that exits cleanly ends the test at once, with its status; one that outlives
    /// the limit is hung.
    #[test]
    fn a_clean_exit_is_prompt_and_a_hang_is_cut_at_the_limit() {
        let dir = scratch("clean");
        let runner = runner(fake_emu(&dir, false));
        let log = dir.join("t.log");
        let started = Instant::now();
        let ended = runner
            .run_test(
                Path::new("/bin/sh"),
                &["-c".to_owned(), "exit 0".to_owned()],
                "T.t",
                &log,
                Duration::from_secs(120),
            )
            .expect("runs");
        assert_eq!(
            ended,
            Ended {
                exit: Exit::Code(0),
                left_running: false
            }
        );
        assert!(started.elapsed() < GRACE, "took {:?}", started.elapsed());
        let ended = runner
            .run_test(
                Path::new("/bin/sh"),
                &["-c".to_owned(), "sleep 600".to_owned()],
                "T.t",
                &log,
                Duration::from_secs(1),
            )
            .expect("runs");
        assert_eq!(ended.exit, Exit::TimedOut);
        let _ = fs::remove_dir_all(&dir);
    }
}
