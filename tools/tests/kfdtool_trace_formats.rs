//! `kfdtool trace --format … --out DIR` end to end (on the emulated MI300X where there is no
//! /dev/kfd): every format from one run, `kfdtool report` on its database, the checks made
//! before the program runs, `--all-processes` and `--pid`, recording without a program.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rusqlite::Connection;

fn kfdtool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args(args)
        .output()
        .expect("run kfdtool")
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kfdtool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (Domain, Function, Process_Id, Thread_Id) of every region in the database.
fn regions(db: &Path) -> Vec<(String, String, i64, i64)> {
    let conn = Connection::open(db).unwrap();
    conn.prepare("SELECT category, name, pid, tid FROM regions ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn trace_writes_every_format_and_report_reads_the_database_back() {
    let dir = temp_dir("formats");
    let me = env!("CARGO_BIN_EXE_kfdtool");
    let out = kfdtool(&[
        "trace",
        "--format",
        "rocpd",
        "--format",
        "csv,json,perfetto,svg",
        "--out",
        dir.to_str().unwrap(),
        "--",
        me,
        "svm",
        "--prefetch",
        "gpu",
        "--size",
        "8388608",
    ]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("8 MiB migrated"), "{stderr}");
    assert!(stdout.contains("1 migrations, 8 MiB"), "{stdout}");
    assert!(stdout.contains("PREFETCH: 1, 8 MiB"), "{stdout}");
    assert!(stdout.contains("agents: node 0 CPU"), "{stdout}");
    assert!(stdout.contains(", node 1 GPU 0x"), "{stdout}");

    // The database: the prefetch, on the program's pid (process and KFD thread).
    let db = dir.join("results.db");
    let rows = regions(&db);
    let prefetch: Vec<_> = rows
        .iter()
        .filter(|r| r.1 == "ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH")
        .collect();
    assert_eq!(prefetch.len(), 1, "{rows:?}");
    assert_eq!(prefetch[0].0, "KFD_PAGE_MIGRATE");
    assert_eq!(prefetch[0].2, prefetch[0].3);
    // The CSV is the database through rocpd convert's query.
    let csv = std::fs::read_to_string(dir.join("regions_trace.csv")).unwrap();
    assert_eq!(
        csv,
        kfdtool::rocpd::regions_csv(&Connection::open(&db).unwrap()).unwrap()
    );
    assert_eq!(csv.lines().count(), rows.len() + 1);
    assert!(csv.contains("\"KFD_PAGE_MIGRATE\",\"ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH\","));
    // The JSON: the same records.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let kfd = json["rocprofiler-sdk-tool"][0]["buffer_records"]["kfd"]
        .as_array()
        .unwrap();
    assert_eq!(kfd.len(), rows.len());
    let migrate = kfd.iter().find(|r| r["size"] == 96).unwrap();
    let bytes = migrate["end_address"]["handle"].as_u64().unwrap()
        - migrate["start_address"]["handle"].as_u64().unwrap();
    assert_eq!(bytes, 8 << 20);
    // The Perfetto timeline and the pictures.
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("trace.json")).unwrap()).unwrap();
    assert!(
        trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["ph"] == "X")
    );
    for name in kfdtool::plots::SVG_NAMES {
        let svg = std::fs::read_to_string(dir.join(name)).unwrap();
        roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    // `report` prints the summary `trace` printed after the program's own output (all but its
    // last line, the pairing note).
    let report = ok(&kfdtool(&["report", db.to_str().unwrap()]));
    let summary: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("KFD trace summary"))
        .collect();
    assert!(
        summary.last().unwrap().starts_with("unpaired: 0 ends"),
        "{stdout}"
    );
    assert_eq!(
        report.lines().collect::<Vec<_>>(),
        summary[..summary.len() - 1]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_refuses_a_missing_output_directory_before_running_the_program() {
    let dir = temp_dir("nodir");
    let marker = dir.join("ran");
    let missing = dir.join("missing");
    let out = kfdtool(&[
        "trace",
        "--format",
        "csv",
        "--out",
        missing.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        &format!("echo ran > {}", marker.display()),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("the output directory {}", missing.display())),
        "{stderr}"
    );
    assert!(
        !marker.exists(),
        "the program ran before the output was checked"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_needs_a_program_or_processes_to_record() {
    let out = kfdtool(&["trace", "--format", "csv"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing to trace"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kfdtool(&["trace", "--duration", "1", "--", "/bin/true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration is for recording without"));
}

#[test]
fn report_names_a_file_that_is_not_a_rocpd_database() {
    let dir = temp_dir("notdb");
    let path = dir.join("x.db");
    std::fs::write(&path, "not sqlite").unwrap();
    let out = kfdtool(&["report", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("rocpd database {}", path.display())),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `report` and `replay` of a FIFO or a device refuse it at once, naming it: nothing waits
/// for a writer (SQLite's open of a FIFO would).
#[test]
fn report_and_replay_refuse_a_fifo_or_a_device_at_once() {
    let dir = temp_dir("fifodb");
    let fifo = dir.join("x.db");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for path in [fifo.to_str().unwrap(), "/dev/null"] {
        for command in ["report", "replay"] {
            let started = std::time::Instant::now();
            let out = kfdtool(&[command, path]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{command} {path}: {stderr}");
            assert!(
                stderr.contains(&format!("rocpd database {path}: not a regular file")),
                "{command}: {stderr}"
            );
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A shell that runs `kfdtool svm` as its child (`; true` keeps the shell from exec'ing it),
/// so the events are another process's than the traced program's.
fn grandchild_prefetch() -> Vec<String> {
    let me = env!("CARGO_BIN_EXE_kfdtool");
    vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("{me} svm --prefetch gpu --size 4194304 >/dev/null; true"),
    ]
}

fn trace_into(dir: &Path, flags: &[&str], program: &[String]) -> Vec<(String, String, i64, i64)> {
    let mut args = vec!["trace", "--format", "rocpd", "--out", dir.to_str().unwrap()];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend(program.iter().map(String::as_str));
    ok(&kfdtool(&args));
    regions(&dir.join("results.db"))
}

#[test]
fn all_processes_records_another_processs_events_and_pid_filters() {
    if !rustix::process::geteuid().is_root() {
        kfd_skip::skip("the ALL_PROCESS SMI flag needs CAP_SYS_ADMIN; this test is not root");
        return;
    }
    let dir = temp_dir("allproc");
    let program = grandchild_prefetch();
    // Only the shell's own events: none.
    let own = trace_into(&dir, &[], &program);
    assert_eq!(own, [], "the shell itself does no KFD work");
    // Every process: the grandchild's prefetch, on its own pid, under the shell's process row.
    let all = trace_into(&dir, &["--all-processes"], &program);
    let prefetch: Vec<_> = all
        .iter()
        .filter(|r| r.1 == "ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH")
        .collect();
    assert_eq!(prefetch.len(), 1, "{all:?}");
    let (shell, kfd_pid) = (prefetch[0].2, prefetch[0].3);
    assert_ne!(shell, kfd_pid, "the KFD pid is the grandchild's");
    // --pid with a pid that does nothing: nothing.
    let none = trace_into(&dir, &["--pid", "1"], &program);
    assert_eq!(none, []);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn without_a_program_recording_stops_after_the_duration() {
    if !rustix::process::geteuid().is_root() {
        kfd_skip::skip("the ALL_PROCESS SMI flag needs CAP_SYS_ADMIN; this test is not root");
        return;
    }
    let dir = temp_dir("duration");
    let started = std::time::Instant::now();
    let out = kfdtool(&[
        "trace",
        "--all-processes",
        "--duration",
        "0.3",
        "--format",
        "csv",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("recording SMI events of 1 GPUs for 0.3 s"),
        "{stderr}"
    );
    assert!(started.elapsed().as_secs_f64() >= 0.3);
    assert!(stdout.contains("KFD trace summary: no records"), "{stdout}");
    let csv = std::fs::read_to_string(dir.join("regions_trace.csv")).unwrap();
    assert_eq!(
        csv,
        "\"Guid\",\"Domain\",\"Function\",\"Process_Id\",\"Thread_Id\",\"Correlation_Id\",\
         \"Start_Timestamp\",\"End_Timestamp\"\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_ends_a_recording_without_a_program_and_the_outputs_are_written() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        kfd_skip::skip("the ALL_PROCESS SMI flag needs CAP_SYS_ADMIN; this test is not root");
        return;
    }
    let dir = temp_dir("sigint");
    let child = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args(["trace", "--all-processes", "--format", "rocpd", "--out"])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    // Ctrl-C reaches the whole foreground process group: here, once kfdtool said it records.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let db = dir.join("results.db");
    while !db.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let group = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process_group(group, rustix::process::Signal::INT).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = ok(&out);
    assert!(stdout.contains("KFD trace summary: no records"), "{stdout}");
    assert_eq!(regions(&db), []);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_records_each_gpus_clock_samples_and_the_summary_prints_the_fit() {
    let dir = temp_dir("clock");
    let me = env!("CARGO_BIN_EXE_kfdtool");
    let out = kfdtool(&[
        "trace",
        "--format",
        "rocpd,perfetto",
        "--out",
        dir.to_str().unwrap(),
        "--",
        me,
        "svm",
        "--prefetch",
        "gpu",
        "--size",
        "2097152",
    ]);
    let stdout = ok(&out);
    let read = kfdtool::rocpd::read_rocpd(&dir.join("results.db")).expect("read back");
    let gpus: Vec<&kfdtool::rocpd::Agent> = read.agents.iter().filter(|a| a.is_gpu).collect();
    assert!(!gpus.is_empty());
    // Two samples (start, end) of every GPU, under that GPU's agent, in BOOTTIME ns at 1 GHz.
    assert_eq!(read.clock_samples.len(), 2 * gpus.len(), "{read:?}");
    for a in &gpus {
        let mine: Vec<_> = read
            .clock_samples
            .iter()
            .filter(|s| Some(s.gpu_id) == a.gpu_id)
            .collect();
        assert_eq!(mine.len(), 2);
        assert!(mine.iter().all(|s| s.node_id == a.node_id));
        assert!(mine.iter().all(|s| s.system_freq == 1_000_000_000));
        assert!(mine[0].system_counter < mine[1].system_counter);
        assert!(mine[0].gpu_counter < mine[1].gpu_counter);
        let fit = kfd_svm::ClockFit::new(mine[0], mine[1]).expect("a fit");
        // The GPU counter of gfx9 and later is the 100 MHz reference clock: kfd-emu's and an
        // MI300X's. Between samples taken within microseconds of each other the fit is within
        // 1% of it over the program's run.
        assert!(
            (fit.gpu_hz - 100e6).abs() < 1e6,
            "{fit}: the GPU counter is not at 100 MHz"
        );
        // The fit puts the end sample's counter at its boottime.
        let err = fit.boottime_ns(mine[1].gpu_counter) - mine[1].system_counter as f64;
        assert!(err.abs() < 1.0, "{err}");
        let line = format!(
            "clock: GPU {:#x} (node {}) counter at ",
            fit.gpu_id, a.node_id
        );
        assert!(stdout.contains(&line), "{stdout}");
    }
    // The Perfetto timeline carries the same samples in its metadata.
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("trace.json")).unwrap()).unwrap();
    let samples = trace["otherData"]["kfd_clock_samples"]
        .as_array()
        .expect("samples in otherData");
    let back: Vec<kfd_svm::ClockSample> = samples
        .iter()
        .map(|v| kfdtool::rocpd::clock_sample_from_json(v).expect("a sample"))
        .collect();
    let mut sorted = read.clock_samples.clone();
    sorted.sort_by_key(|s| (s.gpu_id, s.system_counter));
    let mut back_sorted = back;
    back_sorted.sort_by_key(|s| (s.gpu_id, s.system_counter));
    assert_eq!(back_sorted, sorted);
    // `kfdtool report` prints the same fit from the database.
    let report = ok(&kfdtool(&[
        "report",
        dir.join("results.db").to_str().unwrap(),
    ]));
    let fit_lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("clock: "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(fit_lines(&report), fit_lines(&stdout));
    assert_eq!(fit_lines(&report).len(), gpus.len());
    std::fs::remove_dir_all(&dir).unwrap();
}
