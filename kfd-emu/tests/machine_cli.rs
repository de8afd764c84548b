//! `kfd-emu run --topology DIR` on hostile trees: the emulator stops with its own exit code
//! and a message naming the file and the value, promptly, and never runs the program.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Exit status of the emulator when it cannot set up (its `EXIT_EMULATOR_FAILED`).
const EMULATOR_FAILED: i32 = 125;

/// A fresh private directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kfd-emu-machine-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, relative: &str) -> PathBuf {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `kfd-emu run --topology root -- /bin/sh -c 'echo ran'`; kills it (by its pid) and
/// fails the test if it has not exited within a minute.
fn run_on(root: &Path) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .arg("run")
        .arg("--topology")
        .arg(root)
        .args(["--", "/bin/sh", "-c", "echo ran"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kfd-emu");
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("a child pid");
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match result.recv_timeout(Duration::from_secs(60)) {
        Ok(output) => output.expect("waiting for kfd-emu"),
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            panic!("kfd-emu run --topology {} did not exit", root.display());
        }
    }
}

fn assert_refused(out: &Output, wants: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EMULATOR_FAILED), "{stderr}");
    assert!(out.stdout.is_empty(), "the program never ran");
    for want in wants {
        assert!(stderr.contains(want), "no {want:?} in {stderr:?}");
    }
}

#[test]
fn a_fifo_in_the_tree_is_refused_by_path_without_blocking() {
    let tree = TempDir::new("fifo");
    let fifo = tree.path("nodes/0/properties");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = run_on(&tree.0);
    assert_refused(
        &out,
        &[&fifo.display().to_string(), "is a FIFO, not a regular file"],
    );
}

#[test]
fn a_tree_whose_machine_would_not_read_back_is_refused_by_value() {
    // A GPU-only tree numbered at the node limit: the CPU node the emulator adds pushes it
    // past the limit.
    let tree = TempDir::new("node-limit");
    std::fs::write(
        tree.path("nodes/4095/properties"),
        "cpu_cores_count 0\nsimd_count 8\n",
    )
    .unwrap();
    let out = run_on(&tree.0);
    assert_refused(&out, &["nodes/4096", "4096", "above the limit of 4095"]);
}

#[test]
fn cpu_cores_count_4294967295_is_refused_by_file_and_value() {
    let tree = TempDir::new("cores");
    let properties = tree.path("nodes/0/properties");
    std::fs::write(&properties, "cpu_cores_count 4294967295\nsimd_count 0\n").unwrap();
    let out = run_on(&tree.0);
    assert_refused(
        &out,
        &[
            &properties.display().to_string(),
            "cpu_cores_count 4294967295",
            "above the limit of 65536",
        ],
    );
}
