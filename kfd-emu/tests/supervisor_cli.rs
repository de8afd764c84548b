//! The `kfd-emu` command line: what it runs, and the exit codes it promises.

use std::process::{Command, Output};

fn kfd_emu(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .args(args)
        .output()
        .expect("running kfd-emu")
}

#[test]
fn machines_lists_every_preset() {
    let out = kfd_emu(&["machines"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for name in ["mi300x", "mi210x8", "mi100", "radeon-vii", "rx7900xtx"] {
        assert!(
            text.lines().any(|line| line.starts_with(name)),
            "{name} missing from:\n{text}"
        );
    }
}

#[test]
fn run_opens_the_emulated_dev_kfd() {
    // No /dev/kfd here: the shell's redirection succeeds only through the emulator.
    let out = kfd_emu(&[
        "run",
        "--",
        "/bin/sh",
        "-c",
        "exec 3</dev/kfd && echo opened",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, b"opened\n");
}

#[test]
fn run_shows_dev_kfd_to_ls_as_a_character_device() {
    // `ls -l` stats with `statx`; there is no /dev/kfd here to find natively.
    let out = kfd_emu(&["run", "--", "ls", "-l", "/dev/kfd"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("crw-rw-rw-"), "{text}");
    assert!(text.trim_end().ends_with("/dev/kfd"), "{text}");
    // Its `lgetxattr(security.selinux)` finds no attribute rather than no file.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn run_exits_with_the_programs_code() {
    assert_eq!(
        kfd_emu(&["run", "--", "/bin/sh", "-c", "exit 7"])
            .status
            .code(),
        Some(7)
    );
    assert_eq!(kfd_emu(&["run", "/bin/true"]).status.code(), Some(0));
}

#[test]
fn run_exits_with_128_plus_the_signal_that_ended_the_program() {
    let out = kfd_emu(&["run", "--", "/bin/sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{out:?}");
}

#[test]
fn run_reports_what_cannot_start() {
    assert_eq!(
        kfd_emu(&["run", "--", "/nonexistent/program"])
            .status
            .code(),
        Some(127)
    );
    assert_eq!(kfd_emu(&["run", "--", "/"]).status.code(), Some(126));
    let out = kfd_emu(&["run", "--machine", "no-such-machine", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mi300x"),
        "{out:?}"
    );
}

/// `run --vram SIZE` gives every GPU that much VRAM: its sysfs bank says so (the CPU's bank
/// keeps its size), and a size that is no size is a usage error (exit 2).
#[test]
fn run_with_vram_gives_every_gpu_that_much_vram() {
    let banks = "cat /sys/class/kfd/kfd/topology/nodes/*/mem_banks/*/properties";
    let out = kfd_emu(&[
        "run",
        "--machine",
        "mi210x8",
        "--vram",
        "64M",
        "--",
        "/bin/sh",
        "-c",
        banks,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let vram = text
        .split("heap_type ")
        .filter(|bank| bank.starts_with('1') || bank.starts_with('2'))
        .map(|bank| bank.contains("size_in_bytes 67108864\n"))
        .collect::<Vec<_>>();
    assert_eq!(vram, vec![true; 8], "{text}");
    assert!(
        text.contains("heap_type 0\n"),
        "the CPU's bank stays: {text}"
    );
    for bad in ["12X", "0", "G"] {
        let out = kfd_emu(&["run", "--vram", bad, "--", "true"]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
    }
}
