//! `kfdtool svm`, `smi watch` and `trace` end to end (on the emulated MI300X where there is no
//! `/dev/kfd`, on the hardware otherwise).

use std::process::{Command, Output};

fn kfdtool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args(args)
        .output()
        .expect("running kfdtool")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kfdtool failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn svm_sets_attributes_and_prints_what_get_attr_reports() {
    let text = ok(&kfdtool(&[
        "svm",
        "--preferred",
        "gpu",
        "--prefetch",
        "gpu",
        "--set-flags",
        "gpu_ro,gpu_exec",
        "--clear-flags",
        "coherent",
        "--granularity",
        "4",
    ]));
    let line = |key: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no `{key}` line in\n{text}"))
            .to_owned()
    };
    assert!(line("preferred location").contains("gpu 0x"), "{text}");
    assert!(line("prefetch location").contains("gpu 0x"), "{text}");
    let set = line("flags set");
    let names = |l: &str| -> Vec<String> {
        l.split_whitespace()
            .last()
            .unwrap_or("")
            .split('|')
            .map(str::to_owned)
            .collect()
    };
    let set_names = names(&set);
    for flag in ["GPU_RO", "GPU_EXEC", "HOST_ACCESS"] {
        assert!(set_names.iter().any(|n| n == flag), "{flag} in {set}");
    }
    assert!(
        !set_names.iter().any(|n| n == "COHERENT"),
        "COHERENT was cleared: {set}"
    );
    assert!(
        names(&line("flags clear")).iter().any(|n| n == "COHERENT"),
        "{text}"
    );
    // What was asked reads as words, GPU ids in hex (not Rust's Debug of the enum).
    let requested = line("requested:");
    assert!(
        requested.contains("preferred location gpu 0x") && requested.contains(": access;"),
        "{requested}"
    );
    assert!(!requested.contains("PreferredLocation("), "{requested}");
    assert!(line("granularity").contains("4 (2^4 pages)"), "{text}");
}

#[test]
fn svm_rejects_unknown_flags_with_the_known_names() {
    let out = kfdtool(&["svm", "--set-flags", "bogus"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown SVM flag bogus; known: HOST_ACCESS"),
        "{stderr}"
    );
}

#[test]
fn smi_watch_stops_when_idle() {
    let out = kfdtool(&["smi", "watch", "--idle", "0.2"]);
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("watching SMI events of gpu 0x"), "{stderr}");
    assert!(stderr.contains("kfdtool: 0 events"), "{stderr}");
}

#[test]
fn trace_writes_the_programs_migrations_as_chrome_trace_json() {
    let dir = std::env::temp_dir().join(format!("kfdtool-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("trace.json");
    let me = env!("CARGO_BIN_EXE_kfdtool");
    let out = kfdtool(&[
        "trace",
        "--out",
        json.to_str().unwrap(),
        "--",
        me,
        "svm",
        "--preferred",
        "gpu",
        "--prefetch",
        "gpu",
        "--size",
        "8388608",
    ]);
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("8 MiB migrated"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let slices: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert!(!slices.is_empty(), "no migration slice: {v}");
    let bytes: u64 = slices
        .iter()
        .map(|s| s["args"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(bytes, 8 << 20);
    assert!(slices.iter().all(|s| s["args"]["trigger"] == "prefetch"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn alloc_writes_reads_and_frees_every_kind() {
    for kind in ["host", "device", "shared"] {
        let text = ok(&kfdtool(&[
            "alloc", "--kind", kind, "--count", "3", "--size", "65536",
        ]));
        assert!(text.contains("live: 3 allocations"), "{kind}: {text}");
        assert!(
            text.contains("freed by pointer; live now: 0"),
            "{kind}: {text}"
        );
        let kind_word = format!("{}{}", kind[..1].to_uppercase(), &kind[1..]);
        assert_eq!(
            text.matches(&format!("64 KiB {kind_word} on gpu")).count(),
            3,
            "{text}"
        );
    }
}

#[test]
fn ring_shows_the_aliases_and_streams_checksummed_records() {
    let text = ok(&kfdtool(&["ring", "--records", "20000"]));
    let host = text
        .lines()
        .find(|l| l.starts_with("host ring:"))
        .expect("host ring line");
    // Filled with i % 251: p[-1] = p[cap-1] = 65535 % 251, p[cap] = p[0] = 0.
    assert!(
        host.contains(&format!("p[-1] = {} = p[cap-1]", 65535 % 251)),
        "{host}"
    );
    assert!(host.contains("p[cap] = 0 = p[0]"), "{host}");
    assert!(text.contains("spsc: 20000 records"), "{text}");
    assert!(text.contains("device ring: 2 MiB at GPU VA"), "{text}");
    assert!(text.contains("read \"wrap\" at p[cap]"), "{text}");
}

#[test]
fn bench_prints_a_summary_with_ratios() {
    let text = ok(&kfdtool(&["bench", "--quick"]));
    for row in [
        "GET_VERSION round trip",
        "pooled HOST alloc+free",
        "4 KiB copy across the wrap",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains('×'), "{line}");
    }
}

/// `kfdtool copy` moves bytes with the GPU's copy engine in every direction, checks them, and
/// prints the throughput table; under the emulator it says the speeds are the emulator's.
#[test]
fn copy_prints_the_sdma_throughput_by_direction() {
    let out = kfdtool(&[
        "--machine",
        "mi210x8",
        "copy",
        "--size",
        "1048576",
        "--repeat",
        "2",
    ]);
    let text = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let emulated = stderr.contains("running under the embedded emulator");
    for direction in ["system → VRAM ", "VRAM → VRAM ", "VRAM → system "] {
        let line = text
            .lines()
            .find(|l| l.starts_with(direction))
            .unwrap_or_else(|| panic!("no `{direction}` row in\n{text}"));
        assert!(line.contains(" 1048576 "), "{line}");
        let rate: f64 = line
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no GB/s in `{line}`"));
        assert!(rate > 0.0, "{line}");
    }
    if emulated {
        assert!(text.contains("the emulator's own speeds"), "{text}");
        // Eight MI210s in xGMI hives of four: the peer copy runs on an xGMI engine.
        let peer = text
            .lines()
            .find(|l| l.starts_with("peer VRAM → VRAM"))
            .unwrap_or_else(|| panic!("no peer row in\n{text}"));
        assert!(peer.contains("xGMI") && peer.contains("xgmi"), "{peer}");
    }
}

/// Asserts kfdtool refused `args` as a usage error (clap's exit code 2, not a panic's 101
/// nor a command's failure) whose message names `value`.
#[track_caller]
fn usage_error(args: &[&str], value: &str) {
    let out = kfdtool(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains("invalid value") && stderr.contains(value),
        "{args:?}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// The audit's case: an infinite idle timeout used to panic converting it to a `Duration`.
#[test]
fn smi_watch_rejects_an_infinite_idle_timeout() {
    usage_error(&["smi", "watch", "--idle", "inf"], "inf");
}

/// Every numeric flag refuses what it cannot mean — not a number, not finite, negative,
/// zero where a count or size must be positive, too large — with a usage error naming the
/// value, before anything runs.
#[test]
fn numeric_flags_out_of_range_are_usage_errors() {
    for idle in ["nan", "NaN", "-inf", "-1", "1e300", "31536001", "ten"] {
        usage_error(&["smi", "watch", &format!("--idle={idle}")], idle);
    }
    for (args, value) in [
        (&["smi", "watch", "--count", "0"][..], "0"),
        (&["smi", "watch", "--gpu", "0x100000000"], "0x100000000"),
        (&["alloc", "--size", "0"], "0"),
        (&["alloc", "--size", "1099511627777"], "1099511627777"),
        (&["alloc", "--count", "0"], "0"),
        (&["alloc", "--count", "65537"], "65537"),
        (&["alloc", "--size=-5"], "-5"),
        (&["ring", "--capacity", "0"], "0"),
        (&["ring", "--capacity", "1073741825"], "1073741825"),
        (&["ring", "--records", "0"], "0"),
        (&["svm", "--size", "0"], "0"),
        (&["svm", "--granularity", "64"], "64"),
        (&["svm", "--gpu", "12x"], "12x"),
        (&["copy", "--size", "4095"], "4095"),
        (&["copy", "--size", "1073741825"], "1073741825"),
        (&["copy", "--repeat", "0"], "0"),
    ] {
        usage_error(args, value);
    }
}

/// A program that cannot be run is named in the error.
#[test]
fn trace_names_a_program_that_cannot_run() {
    let dir = std::env::temp_dir().join(format!("kfdtool-noprog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("trace.json");
    let out = kfdtool(&[
        "trace",
        "--out",
        json.to_str().unwrap(),
        "--",
        "/nonexistent/kfdtool-test-program",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("running /nonexistent/kfdtool-test-program: No such file"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An output that cannot be created is named in the error, and found before the program
/// runs (the program would leave a marker file).
#[test]
fn trace_checks_its_output_before_running_the_program() {
    let dir = std::env::temp_dir().join(format!("kfdtool-noout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("ran");
    let out_path = dir.join("missing").join("x.json");
    let out = kfdtool(&[
        "trace",
        "--out",
        out_path.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        &format!("echo ran > {}", marker.display()),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("creating the trace file {}", out_path.display())),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "the program ran before the output was checked"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_gpu_is_named_by_its_gpu_id_or_its_node_id() {
    let preferred = |gpu: &str| {
        let text = ok(&kfdtool(&["svm", "--gpu", gpu, "--preferred", "gpu"]));
        text.lines()
            .find(|l| l.trim_start().starts_with("preferred location"))
            .unwrap_or_else(|| panic!("no preferred location in\n{text}"))
            .to_owned()
    };
    // The first GPU (as `info --json` lists it) by its node id, then by its gpu id.
    let info: serde_json::Value = serde_json::from_str(&ok(&kfdtool(&["info", "--json"]))).unwrap();
    let gpu = info["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "gpu")
        .expect("a GPU");
    let node = gpu["node"].as_u64().unwrap();
    let raw = gpu["gpu_id"].as_u64().unwrap();
    let gpu_id = format!("{raw:#x}");
    let by_node = preferred(&node.to_string());
    assert!(by_node.contains(&gpu_id), "{by_node}");
    assert_eq!(preferred(&gpu_id), by_node);
    // The gpu id in decimal (as sysfs writes it) names the same GPU, printed in hex.
    assert_eq!(preferred(&raw.to_string()), by_node);
    // Neither: the GPUs are listed by both names.
    let out = kfdtool(&["svm", "--gpu", "77"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("77 (0x4d) is neither the gpu id nor the node id of a GPU")
            && stderr.contains(&format!("node {node} (gpu {gpu_id})")),
        "{stderr}"
    );
}
