//! A real kernel's faults and migrations in a trace: an unmodified HIP 5.2.3 program using
//! `hipMallocManaged` with XNACK on (`HSA_XNACK=1`, a `gfx90a:xnack+` code object), recorded by
//! `kfdtool trace` on the embedded emulator's mi210x8.
//!
//! The host fills the 256 KiB managed array, the kernel reads and rewrites every element, and
//! the host reads the results back. The GPU's accesses come from the interpreted kernel, not
//! from an SDMA stand-in: its first read of the range is a retry fault that migrates the
//! range's block to the GPU (`svm_range_restore_pages` → `svm_migrate_ram_to_vram`, trigger
//! `PAGEFAULT_GPU`, fault record `READ_FAULT_MIGRATED`), and the host's read after the kernel is
//! a CPU fault on VRAM-resident pages that migrates it back (`svm_migrate_to_ram`, trigger
//! `PAGEFAULT_CPU`), unmapping it from every GPU that had it mapped (the process's eight GPUs
//! share the range, `MMU_NOTIFY_MIGRATE`). Each fault migrates the default 2 MiB granularity's
//! block around it, clamped to the range: where the 256 KiB array lies in one block (7 runs in
//! 8: its page-aligned address is random) each direction is one migration of 256 KiB; where it
//! crosses a 2 MiB boundary each direction is two migrations, one per block, and the second
//! GPU migration, made while the range is already mapped to a GPU, unmaps its block from every
//! GPU of the range as well (`svm_range_cpu_invalidate_pagetables` → `svm_range_evict` →
//! `svm_range_unmap_from_gpus`: KFD's notifier does not skip its own migrations). This is what
//! a real MI210 does with the same program and `HSA_XNACK=1` (kfd_svm.c, kfd_migrate.c), so the
//! figures are asserted exactly, for whichever case the run's address gives.

use std::path::{Path, PathBuf};
use std::process::Command;

fn kfdtool() -> &'static str {
    env!("CARGO_BIN_EXE_kfdtool")
}

/// Builds `kfd-emu/tests/clients/hip_managed.hip` with Debian's hipcc for `gfx90a:xnack+`;
/// `None` (skip, a failure under CI) without hipcc.
fn build_hip_managed() -> Option<PathBuf> {
    if !(Path::new("/usr/bin/hipcc").exists()
        && Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so").exists())
    {
        kfd_skip::prerequisite("hipcc and libamdhip64-dev are missing");
        return None;
    }
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../kfd-emu/tests/clients/hip_managed.hip");
    let program = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kfdtool-hip_managed");
    let out = Command::new("hipcc")
        .args(["--offload-arch=gfx90a:xnack+", "-O2", "-o"])
        .arg(&program)
        .arg(&src)
        .output()
        .expect("running hipcc");
    assert!(
        out.status.success(),
        "hipcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(program)
}

#[test]
fn a_managed_memory_hip_programs_kernel_faults_and_migrations_are_traced() {
    if Path::new("/dev/kfd").exists() {
        kfd_skip::skip(
            "this machine has /dev/kfd: the trace would be the hardware's, whose GPU may not be an MI210 with XNACK on",
        );
        return;
    }
    let Some(program) = build_hip_managed() else {
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kfdtool-hip-trace");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(kfdtool())
        .args([
            "trace",
            "--machine",
            "mi210x8",
            "--format",
            "rocpd,csv",
            "--out",
        ])
        .arg(&dir)
        .arg("--")
        .arg(&program)
        .env("HSA_XNACK", "1")
        .output()
        .expect("running kfdtool trace");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let all = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "{all}");
    // The program's own check: the kernel's results, read back by the host, are right.
    assert!(stdout.contains("managed n=65536 bad=0\ndone\n"), "{all}");
    let (start, len) = managed_array(&stdout).unwrap_or_else(|| panic!("no address: {all}"));
    assert_eq!(len, 256 << 10, "{all}");
    // The 2 MiB blocks the array touches, in KiB of the array each.
    const BLOCK: u64 = 2 << 20;
    let boundary = (start / BLOCK + 1) * BLOCK;
    let blocks: Vec<u64> = if start + len <= boundary {
        vec![len >> 10]
    } else {
        vec![(boundary - start) >> 10, (start + len - boundary) >> 10]
    };
    let n = blocks.len();
    // GPU 0 is node 2 on mi210x8, the CPU node 0.
    let mut wants = vec![
        format!("node 0 -> node 2: {n} migrations, 256 KiB"),
        format!("PAGEFAULT_GPU: {n}, 256 KiB"),
        format!("node 2 -> node 0: {n} migrations, 256 KiB"),
        format!("PAGEFAULT_CPU: {n}, 256 KiB"),
        format!("page faults: {n} ({n} migrated, 0 updated)"),
        format!("node 2 READ_FAULT_MIGRATED: {n}"),
        "dropped events: 0".to_owned(),
    ];
    if n == 1 {
        wants.push("node 9 MMU_NOTIFY_MIGRATE: 1, 256 KiB".to_owned());
    } else {
        // The CPU migrations unmap both blocks; the second GPU migration unmaps its own block
        // (whichever block a wave touched second).
        let either = blocks
            .iter()
            .map(|kib| format!("node 9 MMU_NOTIFY_MIGRATE: 3, {} KiB", 256 + kib))
            .collect::<Vec<_>>();
        assert!(
            either.iter().any(|w| all.contains(w.as_str())),
            "none of {either:?} in the summary (array at {start:#x}):\n{all}"
        );
    }
    for want in &wants {
        assert!(
            all.contains(want.as_str()),
            "no `{want}` in the summary (array at {start:#x}, blocks {blocks:?} KiB):\n{all}"
        );
    }
    // The database rocprofv3's tools read holds the same records.
    let csv = std::fs::read_to_string(dir.join("regions_trace.csv")).expect("regions CSV");
    assert!(csv.contains("KFD_PAGE_MIGRATE"), "{csv}");
    assert!(csv.contains("KFD_PAGE_FAULT"), "{csv}");
}

/// The managed array's address and size, from the program's `managed at 0x…, N bytes` line.
fn managed_array(stdout: &str) -> Option<(u64, u64)> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("managed at 0x"))?;
    let (addr, rest) = line.split_once(", ")?;
    let bytes = rest.strip_suffix(" bytes")?;
    Some((u64::from_str_radix(addr, 16).ok()?, bytes.parse().ok()?))
}
