//! Real, unmodified clients of `/dev/kfd` under `kfd-emu run`: a C program built against
//! Debian's libhsakmt, and ROCr's rocminfo. What they print is checked against the emulated
//! machine's topology.
//!
//! The packages (`libhsakmt-dev`, `rocminfo`) are installed by `cargo xtask test`. When one is
//! missing the test fails under `CI=true` and is recorded as skipped otherwise (`kfd_skip`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kfd_emu::machine::Machine;

fn kfd_emu() -> &'static str {
    env!("CARGO_BIN_EXE_kfd-emu")
}

/// Returns false (after printing why) when `what` is missing and we may skip; panics under CI.
fn prerequisite(present: bool, what: &str) -> bool {
    if present {
        return true;
    }
    kfd_skip::prerequisite(format!("{what} is missing"));
    false
}

/// Runs `program` under `kfd-emu run --machine machine`, with `--check-leaks` when `leaks`
/// should fail the run (ROCr leaves its events page mapped at exit, as it does on hardware).
fn run_under_emulator(machine: &str, leaks: bool, program: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(kfd_emu());
    command.args(["run", "--machine", machine]);
    if leaks {
        command.arg("--check-leaks");
    }
    command
        .arg("--")
        .arg(program)
        .args(args)
        .output()
        .expect("running kfd-emu")
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Builds the libhsakmt probe into the target directory.
fn build_hsakmt_probe() -> Option<PathBuf> {
    let header = Path::new("/usr/include/hsakmt.h").exists();
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libhsakmt.so").exists();
    if !prerequisite(header && lib, "libhsakmt-dev (hsakmt.h, libhsakmt.so)") {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/hsakmt_probe.c");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hsakmt_probe");
    let status = Command::new("cc")
        .args(["-Wall", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-lhsakmt")
        .status()
        .expect("running cc");
    assert!(status.success(), "building {} failed", src.display());
    Some(out)
}

#[test]
fn libhsakmt_program_runs_on_every_preset() {
    let Some(probe) = build_hsakmt_probe() else {
        return;
    };
    for (name, _) in Machine::presets() {
        let machine = Machine::preset(name).unwrap();
        let topo = machine.topology();
        let out = run_under_emulator(name, true, &probe, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        assert!(
            text.contains("version 1.23\n"),
            "{name}: {}",
            describe(&out)
        );
        assert!(
            text.contains(&format!("nodes {}\n", topo.nodes.len())),
            "{name}: {text}"
        );
        for node in &topo.nodes {
            let p = &node.properties;
            let line = format!(
                "node {} cpu_cores={} simds={} ",
                node.id, p.cpu_cores_count, p.simd_count
            );
            assert!(text.contains(&line), "{name}: no line `{line}` in\n{text}");
            if node.is_gpu() {
                let render = format!("render={} ", p.drm_render_minor);
                let vram = format!("node {} vram={}\n", node.id, node.vram_size());
                let alloc = format!("alloc node={} kind=vram size=2097152 ok\n", node.id);
                for want in [render, vram, alloc] {
                    assert!(text.contains(&want), "{name}: no `{want}` in\n{text}");
                }
                if node.capability().svm_api_supported() {
                    let svm = format!("svm node={} ok\n", node.id);
                    assert!(text.contains(&svm), "{name}: no `{svm}` in\n{text}");
                }
            }
        }
        // XNACK starts off; turning it on works where every GPU has per-process XNACK.
        assert!(text.contains("xnack mode=0\n"), "{name}: {text}");
        let on = if machine.gpus().iter().all(|g| g.xnack_capable) {
            "xnack on ok\n"
        } else {
            "xnack on not-supported\n"
        };
        assert!(text.contains(on), "{name}: no `{on}` in\n{text}");
        assert!(
            text.contains("alloc node=0 kind=system size=1048576 ok\n"),
            "{name}: {text}"
        );
        assert!(text.ends_with("done\n"), "{name}: {text}");
    }
}

#[test]
fn rocminfo_lists_the_cpu_and_gpu_agents() {
    let rocminfo = Path::new("/usr/bin/rocminfo");
    if !prerequisite(rocminfo.exists(), "rocminfo") {
        return;
    }
    for name in ["radeon-vii", "mi100", "mi210x8"] {
        let machine = Machine::preset(name).unwrap();
        let out = run_under_emulator(name, false, rocminfo, &[]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name}: {}", describe(&out));
        // lsmod (run by rocminfo) finds the module's sysfs directory too.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("libkmod: ERROR"), "{name}: {stderr}");
        let gpus = machine.topology().gpus().count();
        let cpu_agents = text.matches("Device Type:             CPU").count();
        let gpu_agents = text.matches("Device Type:             GPU").count();
        assert_eq!(
            cpu_agents,
            machine.topology().nodes.len() - gpus,
            "{name}: {text}"
        );
        assert_eq!(gpu_agents, gpus, "{name}: {text}");
        for gpu in machine.topology().gpus() {
            let isa = gpu
                .gfx_target_version()
                .expect("presets carry gfx_target_version");
            let want = format!("amdgcn-amd-amdhsa--{isa}");
            assert!(text.contains(&want), "{name}: no ISA {want} in\n{text}");
        }
    }
}
