//! `cargo xtask`: the workspace's own commands (the alias is in `.cargo/config.toml`).
//!
//! * `cargo xtask test` — puts in place what the tests need, each step only when missing
//!   (Debian packages through `apt-get`, with `sudo` when not root; the sid uapi header and
//!   Intel UMF into `target/` by `scripts/fetch-*.sh`; the nightly toolchain's Miri), then runs
//!   every test with prerequisites required (`CI=true`: a missing one fails instead of
//!   skipping), then the Miri subset, and prints per crate how many tests passed, failed, were
//!   ignored and skipped. Exits non-zero when anything failed. A test that hangs is killed
//!   and reported by name (see `watchdog`): 5 minutes after it started, or a test binary
//!   after 15 minutes without output.
//! * `cargo xtask prerequisites` — only the first part.
//! * `cargo xtask conformance kfdtest --src DIR …` — builds AMD's kfdtest from a
//!   ROCT-Thunk-Interface tree and runs it test by test under kfd-emu's presets (or on the
//!   hardware), writing a results table and per-test logs (`conformance`). Not part of
//!   `test`: the tree cannot be fetched in CI.

mod conformance;
mod failure;
mod prereq;
mod report;
mod watchdog;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use failure::Failure;
use report::{Line, Tally};
use watchdog::Watchdog;

/// The Miri subset: the pure-Rust parts that parse or index memory a peer controls — the SPSC
/// ring's cores, header and claims over heap memory, capacity math; kfd-ioctl's ABI helpers,
/// errors and retry policy; the SMI parser and stream decoder, the SVM attribute builder.
/// (Tests that need mmap, memfds or the emulator's seccomp are `cfg_attr(miri, ignore)`.) The
/// topology parser runs under Miri by hand (~5 minutes; see the README).
const MIRI: &[(&str, &[&str])] = &[
    ("kfd-ring", &["--lib"]),
    (
        "kfd-ioctl",
        &[
            "--lib",
            "--",
            "error::",
            "sys::",
            "abi::",
            "errno::",
            "smi::",
            "location::",
        ],
    ),
    (
        "kfd-svm",
        &[
            "--lib",
            "--",
            "stream::",
            "attrs::",
            "location::",
            "error::",
        ],
    ),
];

const USAGE: &str = "usage: cargo xtask test | cargo xtask prerequisites | cargo xtask conformance kfdtest --src DIR ...";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["test"] => test(&root),
        ["prerequisites"] => prerequisites(&root),
        ["conformance", ref rest @ ..] => conformance::main(&root, rest),
        ["help" | "--help" | "-h"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(Failure::new(USAGE)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn prerequisites(root: &Path) -> Result<(), Failure> {
    prereq::packages()?;
    prereq::fetched(root)?;
    prereq::huge_pages()?;
    prereq::userfaultfd()?;
    prereq::miri()
}

/// The cargo that runs `xtask` (so the tests use the same toolchain).
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn test(root: &Path) -> Result<(), Failure> {
    let started = Instant::now();
    prerequisites(root)?;
    let names = PackageNames::read(root)?;

    let mut tally = Tally::default();
    println!("xtask: every test, prerequisites required (CI=true)");
    let mut workspace = cargo();
    workspace
        .args(["test", "--workspace", "--no-fail-fast"])
        .env("CI", "true");
    let cargo_ok = stream(
        root,
        workspace,
        &mut tally,
        &|line| names.of(line),
        Watchdog::default(),
        &mut std::io::stdout(),
    )?;

    println!("xtask: the Miri subset");
    let mut miri_ok = true;
    for (package, args) in MIRI {
        let mut miri = Command::new("cargo");
        miri.args(["+nightly", "miri", "test", "-p", package])
            .args(*args)
            .env("CI", "true");
        let label = format!("{package} (miri)");
        miri_ok &= stream(
            root,
            miri,
            &mut tally,
            &|_| Some(label.clone()),
            // Miri runs a test some hundred times slower: a hang there is one that outlasts
            // the CI's whole budget.
            Watchdog::new(
                std::time::Duration::from_secs(15 * 60),
                std::time::Duration::from_secs(20 * 60),
            ),
            &mut std::io::stdout(),
        )?;
    }

    let total = tally.total();
    println!();
    println!("xtask test: summary ({} s)", started.elapsed().as_secs());
    print!("{}", tally.table());
    let failed =
        total.failed > 0 || total.crashed > 0 || !tally.hangs.is_empty() || !cargo_ok || !miri_ok;
    println!(
        "{} passed, {} failed, {} ignored, {} skipped; {} left a part out",
        total.passed, total.failed, total.ignored, total.skipped, total.skipped_part
    );
    for reason in &tally.reasons {
        println!("  skipped because: {reason}");
    }
    for hang in &tally.hangs {
        println!(
            "  HUNG (killed after {} s): {}: {}",
            hang.after.as_secs(),
            hang.binary,
            if hang.tests.is_empty() {
                "no output (libtest named no test)".to_owned()
            } else {
                hang.tests.join(", ")
            }
        );
    }
    if failed {
        Err(Failure::new(if cargo_ok && miri_ok {
            "tests failed".to_owned()
        } else {
            "tests failed (or a test binary did not build or run: see above)".to_owned()
        }))
    } else {
        Ok(())
    }
}

/// Runs `command` in `root` with its stdout and stderr merged into one stream, which is
/// echoed line by line and fed to `tally` and to `dog`; a test binary `dog` finds hung is
/// killed (with what it started) and the hang noted in `tally`. Returns whether the command
/// succeeded.
fn stream(
    root: &Path,
    mut command: Command,
    tally: &mut Tally,
    package_of: &dyn Fn(&Line<'_>) -> Option<String>,
    mut dog: Watchdog,
    out: &mut dyn Write,
) -> Result<bool, Failure> {
    let (reader, writer) =
        std::io::pipe().map_err(|e| Failure::new(format!("creating a pipe: {e}")))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| Failure::new(format!("duplicating a pipe: {e}")))?;
    command
        .current_dir(root)
        .env("CARGO_TERM_COLOR", "never")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2);
    let mut child = command
        .spawn()
        .map_err(|e| Failure::new(format!("running {command:?}: {e}")))?;
    // The command holds the pipe's write ends: without dropping it, the read never ends.
    drop(command);
    // Read on a thread: a process a test started and left behind (a stopped child of a test
    // that failed, say) keeps the pipe's write end open after cargo has exited, and a read
    // to the end of the pipe would then wait for it forever.
    let (lines, received) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        loop {
            let mut buf = Vec::new();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if lines.send(buf).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut exited: Option<(std::process::ExitStatus, Instant)> = None;
    loop {
        match received.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(buf) => {
                let _ = out.write_all(&buf);
                let line = String::from_utf8_lossy(&buf);
                tally.feed(line.trim_end(), package_of);
                dog.feed(line.trim_end());
                continue;
            }
            // Every write end is closed: all output is in.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if exited.is_none()
            && let Some(hang) = dog.check()
        {
            let killed = watchdog::kill_below(child.id());
            println!(
                "xtask: watchdog: {} hung ({} after {} s); killed {killed} processes",
                hang.binary,
                if hang.tests.is_empty() {
                    "no output".to_owned()
                } else {
                    hang.tests.join(", ")
                },
                hang.after.as_secs()
            );
            tally.hangs.push(hang);
        }
        match exited {
            None => {
                let status = child
                    .try_wait()
                    .map_err(|e| Failure::new(format!("waiting for cargo: {e}")))?;
                exited = status.map(|s| (s, Instant::now()));
            }
            // Cargo is gone and nothing came for a while, yet the pipe is still open.
            Some((_, at)) if at.elapsed() >= LEFTOVER_GRACE => {
                println!(
                    "xtask: warning: cargo exited {} s ago but a process it started still \
                     holds its output open (a test left a child running); not waiting for it",
                    at.elapsed().as_secs()
                );
                break;
            }
            Some(_) => {}
        }
    }
    tally.finish();
    let status = match exited {
        Some((status, _)) => status,
        None => child
            .wait()
            .map_err(|e| Failure::new(format!("waiting for cargo: {e}")))?,
    };
    Ok(status.success())
}

/// How long output may still come after cargo exited (a test binary's last lines can trail
/// the exit of cargo only through a process left behind).
const LEFTOVER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Which package a test binary or doctest crate is: built from `cargo metadata` (library
/// crate names) and from the test build's own artifact messages (executables).
struct PackageNames {
    by_lib: HashMap<String, String>,
    by_executable: HashMap<String, String>,
}

impl PackageNames {
    /// Builds every test binary of the workspace (the build the test run then reuses) and
    /// notes which package each belongs to.
    fn read(root: &Path) -> Result<PackageNames, Failure> {
        let metadata = cargo()
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .current_dir(root)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| Failure::new(format!("cargo metadata: {e}")))?;
        if !metadata.status.success() {
            return Err(Failure::new("cargo metadata failed"));
        }
        let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout)
            .map_err(|e| Failure::new(format!("cargo metadata printed no JSON: {e}")))?;
        let mut by_id = HashMap::new();
        let mut by_lib = HashMap::new();
        for package in metadata["packages"].as_array().into_iter().flatten() {
            let (Some(id), Some(name)) = (package["id"].as_str(), package["name"].as_str()) else {
                continue;
            };
            by_id.insert(id.to_owned(), name.to_owned());
            for target in package["targets"].as_array().into_iter().flatten() {
                let kinds = target["kind"].as_array().into_iter().flatten();
                let is_lib = kinds.filter_map(|k| k.as_str()).any(|k| k.ends_with("lib"));
                if is_lib && let Some(lib) = target["name"].as_str() {
                    by_lib.insert(lib.replace('-', "_"), name.to_owned());
                }
            }
        }

        println!("xtask: building every test");
        let build = cargo()
            .args([
                "test",
                "--workspace",
                "--no-run",
                "--message-format=json-render-diagnostics",
            ])
            .current_dir(root)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| Failure::new(format!("cargo test --no-run: {e}")))?;
        if !build.status.success() {
            return Err(Failure::new("building the tests failed (see above)"));
        }
        let mut by_executable = HashMap::new();
        for line in build.stdout.split(|&b| b == b'\n') {
            let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            let (Some(executable), Some(name)) = (
                message["executable"].as_str(),
                message["package_id"].as_str().and_then(|id| by_id.get(id)),
            ) else {
                continue;
            };
            if let Some(file) = Path::new(executable).file_name() {
                by_executable.insert(file.to_string_lossy().into_owned(), name.clone());
            }
        }
        Ok(PackageNames {
            by_lib,
            by_executable,
        })
    }

    fn of(&self, line: &Line<'_>) -> Option<String> {
        match line {
            Line::Running { binary } => {
                let file = Path::new(binary).file_name()?.to_string_lossy();
                self.by_executable.get(file.as_ref()).cloned()
            }
            Line::DocTests { krate } => self.by_lib.get(*krate).cloned(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process the command leaves behind with the output pipe open does not hold the run:
    /// the output before it is read, and the command's status is reported once the grace
    /// period has passed.
    #[test]
    fn a_process_left_behind_does_not_hold_the_run() {
        let mut command = Command::new("sh");
        // The background sleeper keeps stdout open for 20 s after `sh` exits.
        command.args(["-c", "sleep 20 & echo 'test result: ok. 1 passed'; exit 3"]);
        let started = Instant::now();
        let mut tally = Tally::default();
        let ok = stream(
            Path::new("."),
            command,
            &mut tally,
            &|_| None,
            Watchdog::default(),
            // Not this test binary's stdout: the test run that runs it reads that.
            &mut std::io::sink(),
        )
        .expect("stream");
        assert!(!ok, "the command's own status (3) is reported");
        let took = started.elapsed();
        assert!(
            took >= LEFTOVER_GRACE && took < std::time::Duration::from_secs(30),
            "{took:?}"
        );
    }

    /// A test that libtest reports long-running and that does not end is killed, with the
    /// process it runs in, and named; the run goes on and the binary counts as crashed.
    #[test]
    fn a_hung_test_is_killed_and_named() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "echo '     Running tests/h.rs (target/debug/deps/h-1)'; \
             echo 'test stuck has been running for over 60 seconds'; \
             sleep 1000; echo 'the run went on'",
        ]);
        let started = Instant::now();
        let mut tally = Tally::default();
        let dog = Watchdog::new(
            std::time::Duration::ZERO,
            std::time::Duration::from_secs(3600),
        );
        let ok = stream(
            Path::new("."),
            command,
            &mut tally,
            &|_| None,
            dog,
            &mut std::io::sink(),
        )
        .expect("stream");
        assert!(ok, "sh itself went on after its child was killed");
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        assert_eq!(tally.hangs.len(), 1);
        assert_eq!(tally.hangs[0].tests, ["stuck"]);
        assert_eq!(
            tally.total().crashed,
            1,
            "no result line from the killed binary"
        );
    }
}
