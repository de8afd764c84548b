//! `kfdtool replay`: a trace recorded on the emulator (GPU read faults with XNACK on, and a
//! prefetch) replayed under other granularities and prefetch locations; the migrations, bytes,
//! faults and modeled times of each run are what the kernel's policy and the timing model
//! give, to the nanosecond.
//!
//! Recording needs kfd-emu's GPU view (a GPU touching memory), so it runs on the emulator; the
//! replay always runs on the model.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
use kfd_ioctl::Kfd;
use kfd_ioctl::abi::SmiEventMask;
use kfd_ioctl::topology::Topology;
use kfd_svm::{
    AgentMap, DEFAULT_PAGE_SIZE, Location, MapOptions, Pairing, SmiStream, Summary, SvmAttrs,
    SvmBuffer,
};
use kfdtool::replay::{AccessArg, Comparison, LocationArg, Policy, RegionRow, Stats, replay};
use kfdtool::rocpd::{self, Agent, TraceInfo};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;

/// Records: GPU reads of pages 5, 6 and 700 of a 4 MiB range (XNACK on, granularity 9: two
/// faults, two 2 MiB migrations; page 6 is mapped by then), then a prefetch of another 2 MiB
/// to the GPU. Returns the database and the two ranges.
fn record(dir: &Path, clock: ClockMode) -> (PathBuf, (u64, u64), (u64, u64)) {
    let model = Model::new(ModelConfig {
        machine: Machine::preset("mi300x").expect("preset"),
        clock,
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    let (records, topology, pid, faulted, prefetched) =
        kfd_emu::supervisor::run_attached(model, move || {
            let kfd = Kfd::open().expect("open the emulated /dev/kfd");
            let topology = Topology::read().expect("topology");
            for g in view.machine().gpus() {
                kfd.acquire_vm(g.gpu_id, g.render_minor)
                    .expect("acquire_vm");
            }
            let gpu = view.machine().gpus()[0].gpu_id;
            kfd.set_xnack_mode(true).expect("XNACK on");
            let mut smi = SmiStream::open(
                &kfd,
                gpu,
                SmiEventMask::all().difference(SmiEventMask::ALL_PROCESS),
            )
            .expect("SMI");
            let huge = MapOptions {
                huge_aligned: true,
                ..MapOptions::default()
            };
            let pid = std::process::id();
            let a = SvmBuffer::with_options(&kfd, (4 * MIB) as usize, &SvmAttrs::new(), huge)
                .expect("buffer");
            for page in [5, 6, 700] {
                view.gpu_read(pid as i32, gpu, a.addr() + page * PAGE, &mut [0u8; 8])
                    .expect("the fault is handled");
            }
            // The prefetched range must not touch the faulted one (touching ranges are one
            // region of the replay): buffers the trace never names are kept until one is apart.
            let apart = |x: u64, xl: u64, y: u64, yl: u64| x + xl < y || y + yl < x;
            let mut spacers = Vec::new();
            let mut b = loop {
                let b = SvmBuffer::with_options(&kfd, (2 * MIB) as usize, &SvmAttrs::new(), huge)
                    .expect("buffer");
                if apart(a.addr(), 4 * MIB, b.addr(), 2 * MIB) {
                    break b;
                }
                assert!(spacers.len() < 8, "every mapping lands next to the first");
                spacers.push(b);
            };
            b.prefetch(Location::Gpu(gpu.into())).expect("prefetch");
            let events: Vec<_> = smi.pending().map(|e| e.expect("event")).collect();
            let pairing = Pairing::new(
                &events,
                DEFAULT_PAGE_SIZE,
                &AgentMap::from_topology(&topology),
            );
            let faulted = (a.addr(), a.addr() + 4 * MIB);
            let prefetched = (b.addr(), b.addr() + 2 * MIB);
            (pairing.records, topology, pid, faulted, prefetched)
        })
        .expect("attach");
    let info = TraceInfo {
        pid,
        ppid: 1,
        command: "replay test".into(),
        start_ns: records.first().map_or(0, |r| r.start_ns),
        end_ns: records.last().map_or(0, |r| r.end_ns),
        agents: Agent::from_topology(&topology),
        clock_samples: Vec::new(),
        ..Default::default()
    };
    let db = dir.join("results.db");
    rocpd::write_rocpd(&db, &info, &records).expect("write the database");
    (db, faulted, prefetched)
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kfdtool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn policy(granularity: Option<u8>) -> Policy {
    Policy {
        machine: Machine::preset("mi300x").expect("preset"),
        timing: Timing::default(),
        granularity,
        preferred: None,
        prefetch: None,
        xnack: None,
        access: None,
    }
}

fn stats(migrations: u64, bytes: u64, faults: u64, modeled_ns: u64) -> Stats {
    Stats {
        migrations,
        bytes,
        faults,
        unserviced: 0,
        modeled_ns,
        ..Stats::default()
    }
}

/// `s` without its cost breakdown (checked apart: its parts add up to the modeled time).
fn whole(s: Stats) -> Stats {
    assert_eq!(
        s.fault_service_ns + s.setup_ns + s.transfer_ns + s.remote_ns,
        s.modeled_ns,
        "the breakdown of {s:?}"
    );
    Stats {
        fault_service_ns: 0,
        setup_ns: 0,
        transfer_ns: 0,
        remote_accesses: 0,
        remote_ns: 0,
        ..s
    }
}

/// The row of the region starting at `start`.
fn row(c: &Comparison, start: u64) -> &RegionRow {
    c.regions
        .iter()
        .find(|r| r.start == start)
        .unwrap_or_else(|| panic!("no region at {start:#x}: {c}"))
}

#[test]
fn granularity_0_and_9_migrate_what_the_policy_says_in_the_modeled_time() {
    let dir = temp_dir("replay");
    let (db, faulted, prefetched) = record(&dir, ClockMode::Wall);
    let trace = rocpd::read_rocpd(&db).expect("read back");
    let costs = Costs::new(&Machine::preset("mi300x").unwrap(), Timing::default());
    let t = &costs.timing;
    let fault_2m = t.fault_service_ns + costs.migration_ns(0, 2 * MIB);
    let prefetch_2m = t.prefetch_setup_ns + costs.migration_ns(0, 2 * MIB);

    // Granularity 9, the recording's: the same two faults, each moving its 2 MiB block.
    let g9 = replay(&trace, &policy(Some(9))).expect("replay");
    assert_eq!(g9.operations, 3, "two faults and one prefetch");
    assert_eq!(g9.regions.len(), 2);
    let (rf, rp) = (row(&g9, faulted.0), row(&g9, prefetched.0));
    assert_eq!((rf.start, rf.end), faulted);
    assert_eq!((rp.start, rp.end), prefetched);
    let expected_faults = stats(2, 4 * MIB, 2, 2 * fault_2m);
    let expected_prefetch = stats(1, 2 * MIB, 0, prefetch_2m);
    assert_eq!(whole(rf.replayed), expected_faults);
    assert_eq!(whole(rp.replayed), expected_prefetch);
    // The parts: two fault services, two migration setups and a prefetch setup, the rest
    // transfer over the link.
    assert_eq!(rf.replayed.fault_service_ns, 2 * t.fault_service_ns);
    assert_eq!(rf.replayed.setup_ns, 2 * t.migrate_setup_ns);
    assert_eq!(
        rp.replayed.setup_ns,
        t.migrate_setup_ns + t.prefetch_setup_ns
    );
    // Unchanged, the replay is the recording to the nanosecond, breakdown and all.
    assert_eq!(
        Stats {
            measured_ns: 0,
            ..rf.recorded
        },
        rf.replayed
    );
    // The recording, timed by the model, is the same.
    let without_measured = |s: Stats| Stats {
        measured_ns: 0,
        ..s
    };
    assert_eq!(whole(without_measured(rf.recorded)), expected_faults);
    assert_eq!(whole(without_measured(rp.recorded)), expected_prefetch);

    // Granularity 0: each fault moves its own page only.
    let g0 = replay(&trace, &policy(Some(0))).expect("replay");
    let fault_page = t.fault_service_ns + costs.migration_ns(0, PAGE);
    assert_eq!(
        whole(row(&g0, faulted.0).replayed),
        stats(2, 2 * PAGE, 2, 2 * fault_page)
    );
    // The prefetch moves the whole range whatever the granularity.
    assert_eq!(whole(row(&g0, prefetched.0).replayed), expected_prefetch);
    let ((_, t9), (_, t0)) = (g9.totals(), g0.totals());
    assert_eq!(t9.bytes - t0.bytes, 4 * MIB - 2 * PAGE);
    assert_eq!(
        t9.modeled_ns - t0.modeled_ns,
        2 * (costs.migration_ns(0, 2 * MIB) - costs.migration_ns(0, PAGE))
    );

    // Prefetches sent to system memory move nothing: the range is there already.
    let mut to_system = policy(None);
    to_system.prefetch = Some(LocationArg::System);
    let sys = replay(&trace, &to_system).expect("replay");
    assert_eq!(row(&sys, prefetched.0).replayed, Stats::default());
    assert_eq!(
        whole(row(&sys, faulted.0).replayed),
        expected_faults,
        "default granularity: 9"
    );

    // ACCESS_IN_PLACE: each fault maps the pages where they are, nothing migrates; each
    // access is served from system memory over the link: one 128-byte line, the link's
    // latency and bandwidth.
    let remote = costs.migration_ns(0, 128) - t.migrate_setup_ns;
    assert!(remote > 0);
    let mut in_place = policy(None);
    in_place.access = Some(AccessArg::InPlace);
    let r = replay(&trace, &in_place).expect("replay");
    let f = row(&r, faulted.0).replayed;
    assert_eq!(
        whole(f),
        stats(0, 0, 2, 2 * t.fault_service_ns + 2 * remote)
    );
    assert_eq!((f.remote_accesses, f.remote_ns), (2, 2 * remote));

    // Preferred location system memory: the faults restore the pages there, and the GPU
    // reads them over the link too.
    let mut preferred = policy(None);
    preferred.preferred = Some(LocationArg::System);
    let r = replay(&trace, &preferred).expect("replay");
    assert_eq!(
        whole(row(&r, faulted.0).replayed),
        stats(0, 0, 2, 2 * t.fault_service_ns + 2 * remote)
    );

    // XNACK off and no access: the GPU accesses stay faults nobody services.
    let mut off = policy(None);
    off.xnack = Some(false);
    let r = replay(&trace, &off).expect("replay");
    assert_eq!(row(&r, faulted.0).replayed.unserviced, 2);
    assert_eq!(
        (
            row(&r, faulted.0).replayed.faults,
            row(&r, faulted.0).replayed.migrations
        ),
        (0, 0)
    );
    // Reported as what they would be on hardware: fatal.
    assert!(
        r.to_string()
            .contains("(2 FATAL: XNACK off, a GPU memory violation that stops the queues)"),
        "{r}"
    );
    assert!(r.to_string().contains("  xnack: off\n"), "{r}");

    // The command line prints the comparison, per range and in total.
    let out = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args(["replay", db.to_str().unwrap(), "--granularity", "0"])
        .output()
        .expect("run kfdtool");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(g0.to_string(), stdout);
    assert!(
        stdout.starts_with("replayed 3 operations with:\n"),
        "{stdout}"
    );
    // The parameters used are printed: the machine, the GPUs named both ways, the timing.
    assert!(stdout.contains("  machine: mi300x\n"), "{stdout}");
    assert!(stdout.contains("  granularity: 0\n"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "timing: pcie_efficiency_pct = {}",
            t.pcie_efficiency_pct
        )),
        "{stdout}"
    );
    assert!(stdout.contains("of the model: fault service "), "{stdout}");
    assert!(
        stdout.contains(&format!("range {:#x}-{:#x} (4 MiB):", faulted.0, faulted.1)),
        "{stdout}"
    );
    assert_eq!(stdout.matches("  replay ").count(), 3, "{stdout}");

    // A location that is no GPU of the trace is refused by name.
    let out = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args(["replay", db.to_str().unwrap(), "--preferred-loc", "77"])
        .output()
        .expect("run kfdtool");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "--preferred-loc: 77 (0x4d) is neither the node id nor the gpu id of a GPU agent"
        ),
        "{stderr}"
    );
    // A GPU is named by its node id or its gpu id alike.
    let gpu = trace.agents.iter().find(|a| a.is_gpu).unwrap();
    let by = |name: String| {
        let out = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
            .args(["replay", db.to_str().unwrap(), "--preferred-loc", &name])
            .output()
            .expect("run kfdtool");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let by_node = by(gpu.node_id.to_string());
    assert_eq!(by_node, by(format!("{:#x}", gpu.gpu_id.unwrap())));
    assert!(
        by_node.contains(&format!(
            "preferred_loc: node {} (gpu {:#x})",
            gpu.node_id,
            gpu.gpu_id.unwrap()
        )),
        "{by_node}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_trace_recorded_under_the_model_clock_summarises_to_the_models_figures() {
    let dir = temp_dir("model-summary");
    let (db, _, _) = record(&dir, ClockMode::Model);
    let trace = rocpd::read_rocpd(&db).expect("read back");
    let costs = Costs::new(&Machine::preset("mi300x").unwrap(), Timing::default());
    let summary = Summary::new(&trace.records);
    // Three 2 MiB migrations to the GPU (two faults, one prefetch), one after the other: busy
    // for three migration times, so the throughput is the modeled link's.
    assert_eq!(summary.migrations.len(), 1, "{summary}");
    let stats = summary.migrations.values().next().expect("one direction");
    let one = costs.migration_ns(0, 2 * MIB);
    assert_eq!((stats.count, stats.bytes), (3, 6 * MIB));
    assert_eq!(stats.busy_ns, 3 * one);
    let expected = (2 * MIB) as f64 * 1e9 / one as f64;
    assert!((stats.throughput().expect("time passed") - expected).abs() < 1e-6);
    // Each fault lasts its service and its block's migration.
    let latency = summary.fault_latency.expect("faults");
    let fault = costs.timing.fault_service_ns + one;
    assert_eq!((latency.count, latency.min, latency.max), (2, fault, fault));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A workload whose outcome depends on its SVM attributes: 6 MiB registered, its first 2 MiB
/// then set ACCESS_IN_PLACE for the GPU and the other 4 MiB granularity 0; the GPU reads
/// pages 5 (in place: no migration), 600, 601 and 1400 (one page each); another 2 MiB
/// prefetched to the GPU. Returns the database (with kfdtool's SVM range table and XNACK
/// mode) and the two ranges.
fn record_with_ranges(dir: &Path) -> (PathBuf, (u64, u64), (u64, u64)) {
    use kfdtool::svm_table::{RangeAccess, RangeAttrs, RangeEvent, SvmRangeRecord};
    let model = Model::new(ModelConfig {
        machine: Machine::preset("mi300x").expect("preset"),
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    let (records, ranges, topology, pid, a_range, b_range) =
        kfd_emu::supervisor::run_attached(model, move || {
            let kfd = Kfd::open().expect("open the emulated /dev/kfd");
            let topology = Topology::read().expect("topology");
            for g in view.machine().gpus() {
                kfd.acquire_vm(g.gpu_id, g.render_minor)
                    .expect("acquire_vm");
            }
            let gpu = view.machine().gpus()[0].gpu_id;
            let node = topology.node_by_gpu_id(gpu).expect("the GPU's node").id;
            kfd.set_xnack_mode(true).expect("XNACK on");
            let mut smi = SmiStream::open(
                &kfd,
                gpu,
                SmiEventMask::all().difference(SmiEventMask::ALL_PROCESS),
            )
            .expect("SMI");
            let huge = MapOptions {
                huge_aligned: true,
                ..MapOptions::default()
            };
            let pid = std::process::id();
            let now = || view.clock().modeled_ns();
            let mut ranges = Vec::new();
            let mut log = |time_ns, start, end, event, attrs| {
                ranges.push(SvmRangeRecord {
                    pid,
                    time_ns,
                    start,
                    end,
                    event,
                    attrs,
                })
            };
            let a = SvmBuffer::with_options(&kfd, (6 * MIB) as usize, &SvmAttrs::new(), huge)
                .expect("buffer");
            let a0 = a.addr();
            log(
                now(),
                a0,
                a0 + 6 * MIB,
                RangeEvent::Register,
                RangeAttrs::default(),
            );
            let in_place = SvmAttrs::new().access(gpu, kfd_svm::Access::AccessInPlace);
            // SAFETY: the first 2 MiB of `a`, which this thread owns; no reference into it.
            unsafe { in_place.apply(&kfd, a0, 2 * MIB) }.expect("ACCESS_IN_PLACE");
            log(
                now(),
                a0,
                a0 + 2 * MIB,
                RangeEvent::SetAttr,
                RangeAttrs {
                    access: vec![(node, RangeAccess::InPlace)],
                    ..RangeAttrs::default()
                },
            );
            // SAFETY: the other 4 MiB of `a`, likewise.
            unsafe {
                SvmAttrs::new()
                    .granularity(0)
                    .apply(&kfd, a0 + 2 * MIB, 4 * MIB)
            }
            .expect("granularity 0");
            log(
                now(),
                a0 + 2 * MIB,
                a0 + 6 * MIB,
                RangeEvent::SetAttr,
                RangeAttrs {
                    granularity: Some(0),
                    ..RangeAttrs::default()
                },
            );
            for page in [5, 600, 601, 1400] {
                view.gpu_read(pid as i32, gpu, a0 + page * PAGE, &mut [0u8; 8])
                    .expect("the fault is handled");
            }
            let apart = |x: u64, xl: u64, y: u64, yl: u64| x + xl < y || y + yl < x;
            let mut spacers = Vec::new();
            let mut b = loop {
                let b = SvmBuffer::with_options(&kfd, (2 * MIB) as usize, &SvmAttrs::new(), huge)
                    .expect("buffer");
                if apart(a0, 6 * MIB, b.addr(), 2 * MIB) {
                    break b;
                }
                assert!(spacers.len() < 8, "every mapping lands next to the first");
                spacers.push(b);
            };
            log(
                now(),
                b.addr(),
                b.addr() + 2 * MIB,
                RangeEvent::Register,
                RangeAttrs::default(),
            );
            b.prefetch(Location::Gpu(gpu.into())).expect("prefetch");
            let events: Vec<_> = smi.pending().map(|e| e.expect("event")).collect();
            let pairing = Pairing::new(
                &events,
                DEFAULT_PAGE_SIZE,
                &AgentMap::from_topology(&topology),
            );
            let b_range = (b.addr(), b.addr() + 2 * MIB);
            (
                pairing.records,
                ranges,
                topology,
                pid,
                (a0, a0 + 6 * MIB),
                b_range,
            )
        })
        .expect("attach");
    let info = TraceInfo {
        pid,
        ppid: 1,
        command: "exact replay test".into(),
        start_ns: records.first().map_or(0, |r| r.start_ns),
        end_ns: records.last().map_or(0, |r| r.end_ns),
        agents: Agent::from_topology(&topology),
        svm_ranges: ranges,
        xnack: Some(true),
        ..Default::default()
    };
    let db = dir.join("results.db");
    rocpd::write_rocpd(&db, &info, &records).expect("write the database");
    (db, a_range, b_range)
}

#[test]
fn a_trace_with_its_svm_ranges_replays_exactly() {
    let dir = temp_dir("exact-replay");
    let (db, a, b) = record_with_ranges(&dir);
    let trace = rocpd::read_rocpd(&db).expect("read back");
    assert_eq!(trace.svm_ranges.len(), 4);
    assert_eq!(trace.xnack, Some(true));
    // What the recording did: four faults, one in place; three one-page migrations and the
    // 2 MiB prefetch.
    let summary = Summary::new(&trace.records);
    assert_eq!(
        (summary.fault_count(), summary.faults_updated),
        (4, 1),
        "{summary}"
    );
    assert_eq!(summary.bytes_migrated(), 3 * PAGE + 2 * MIB, "{summary}");

    // Unchanged, the replay is the recording: per range as registered, to the nanosecond.
    let r = replay(&trace, &policy(None)).expect("replay");
    let rows: Vec<(u64, u64)> = r.regions.iter().map(|x| (x.start, x.end)).collect();
    let mut expected_rows = vec![a, b];
    expected_rows.sort_unstable();
    assert_eq!(rows, expected_rows, "{r}");
    for row in &r.regions {
        assert_eq!(
            Stats {
                measured_ns: 0,
                ..row.recorded
            },
            row.replayed,
            "{r}"
        );
    }
    let (rec, rep) = r.totals();
    assert_eq!(
        (rep.migrations, rep.bytes, rep.faults),
        (4, 3 * PAGE + 2 * MIB, 4)
    );
    assert_eq!(rep.modeled_ns, rec.modeled_ns);
    let text = r.to_string();
    assert!(
        text.contains("ranges: 2 registered, 2 attribute changes, as recorded"),
        "{text}"
    );
    assert!(text.contains("xnack: on (as recorded)"), "{text}");

    // The replay's own records are the recording's in its terms: the same migrations (ranges,
    // directions), the same faults (addresses, kinds), on the model clock.
    let key = |r: &kfd_svm::KfdRecord| {
        (
            r.kind,
            r.operation,
            r.start_address,
            r.end_address,
            r.agent,
            r.src_agent,
            r.dst_agent,
        )
    };
    let mut recorded_keys: Vec<_> = trace.records.iter().map(key).collect();
    let mut replayed_keys: Vec<_> = r.records.iter().map(key).collect();
    recorded_keys.sort();
    replayed_keys.sort();
    assert_eq!(replayed_keys, recorded_keys);
    // `replay --out` writes them; `report --compare` puts both side by side, nothing changed.
    let replay_db = dir.join("replay.db");
    let kfdtool = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
            .args(args)
            .output()
            .expect("run kfdtool");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let printed = kfdtool(&[
        "replay",
        db.to_str().unwrap(),
        "--out",
        replay_db.to_str().unwrap(),
    ]);
    assert!(printed.ends_with(&format!(
        "wrote the replay's records to {}\n",
        replay_db.display()
    )));
    let compared = kfdtool(&[
        "report",
        "--compare",
        db.to_str().unwrap(),
        replay_db.to_str().unwrap(),
    ]);
    for figure in ["migrations", "bytes (MiB)"] {
        let line = compared
            .lines()
            .find(|l| l.contains(" -> ") && l.contains(figure))
            .unwrap_or_else(|| panic!("{figure}: {compared}"));
        assert!(line.trim_end().ends_with('='), "{compared}");
    }
    let faults = compared
        .lines()
        .find(|l| l.starts_with("page faults"))
        .unwrap();
    assert!(faults.trim_end().ends_with('='), "{compared}");

    // Without the table (a rocprofv3 trace) the replay must assume, and says so: the in-place
    // range's fault migrates its 2 MiB block, the granularity-0 faults theirs.
    let mut bare = trace.clone();
    bare.svm_ranges.clear();
    bare.xnack = None;
    let guessed = replay(&bare, &policy(None)).expect("replay");
    let (_, g) = guessed.totals();
    assert_ne!(
        (g.migrations, g.bytes),
        (rep.migrations, rep.bytes),
        "{guessed}"
    );
    let text = guessed.to_string();
    assert!(
        text.contains("assumed: the trace has no SVM ranges"),
        "{text}"
    );
    assert!(
        text.contains("(assumed: the trace has GPU page faults)"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `kfdtool trace` of `kfdtool workload ARGS` into `dir`: the trace's stdout and stderr.
fn trace_workload(dir: &Path, workload: &[&str]) -> (String, String) {
    let exe = env!("CARGO_BIN_EXE_kfdtool");
    let out = Command::new(exe)
        .args([
            "trace",
            "--format",
            "rocpd",
            "--out",
            dir.to_str().unwrap(),
            "--",
        ])
        .arg(exe)
        .arg("workload")
        .args(workload)
        .output()
        .expect("run kfdtool trace");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

/// `kfdtool trace` of two workloads (with XNACK on): a ping-pong prefetched to the GPU
/// (a prefetch, CPU faults moving it back, GPU faults moving it in again, CPU faults again)
/// and a GPU streaming over an ACCESS_IN_PLACE range (faults mapped in place, nothing
/// migrated). Under the embedded emulator the trace holds the program's SET_ATTRs and XNACK
/// mode, which the model heard; `kfdtool replay` of the unchanged trace then reproduces the
/// recording per range and in total: migrations, bytes, faults and modeled time to the
/// nanosecond, with the same breakdown. On hardware nothing reports them, and the trace says
/// so.
#[test]
fn kfdtool_trace_of_a_workload_replays_exactly() {
    let cases: [(&str, &[&str]); 2] = [
        (
            "ping-pong",
            &[
                "ping-pong",
                "--size",
                "4M",
                "--iterations",
                "2",
                "--prefetch",
                "gpu",
            ],
        ),
        (
            "in-place",
            &["sequential", "--size", "4M", "--access", "in-place"],
        ),
    ];
    for (name, workload) in cases {
        let dir = temp_dir(&format!("trace-replay-{name}"));
        let (stdout, stderr) = trace_workload(&dir, workload);
        if std::path::Path::new("/dev/kfd").exists() {
            assert!(
                stderr.contains("svm ranges: not recorded"),
                "{stdout}{stderr}"
            );
            return;
        }
        assert!(
            stderr.contains("SVM SET_ATTR calls of the program and XNACK on; added to"),
            "{stderr}"
        );
        assert!(stderr.contains("svm ranges: the emulator adds"), "{stderr}");
        let trace = rocpd::read_rocpd(&dir.join("results.db")).expect("read the trace");
        assert_eq!(trace.xnack, Some(true), "{name}");
        let registered: Vec<_> = trace
            .svm_ranges
            .iter()
            .filter(|r| r.event == kfdtool::svm_table::RangeEvent::Register)
            .collect();
        assert_eq!(registered.len(), 1, "{name}: {:?}", trace.svm_ranges);
        assert_eq!(registered[0].end - registered[0].start, 4 * MIB, "{name}");
        // What the recording holds: (prefetch, CPU-fault, GPU-fault) migrations, faults.
        let migrations = |op: u32| {
            trace
                .records
                .iter()
                .filter(|r| r.kind == kfd_svm::KfdKind::PageMigrate && r.operation == op)
                .count()
        };
        let summary = Summary::new(&trace.records);
        match name {
            "ping-pong" => {
                assert!(migrations(0) >= 1, "a prefetch: {summary}");
                assert!(migrations(1) >= 1, "GPU-fault migrations: {summary}");
                assert!(migrations(2) >= 2, "CPU-fault migrations: {summary}");
                assert!(summary.fault_count() >= 1, "{summary}");
            }
            _ => {
                assert_eq!(summary.bytes_migrated(), 0, "in place: {summary}");
                assert!(summary.fault_count() >= 1, "{summary}");
                assert_eq!(summary.faults_updated, summary.fault_count(), "{summary}");
            }
        }

        let r = replay(&trace, &policy(None)).expect("replay");
        assert_eq!(r.regions.len(), 1, "{r}");
        for row in &r.regions {
            assert_eq!(
                Stats {
                    measured_ns: 0,
                    ..row.recorded
                },
                row.replayed,
                "{name}: {r}"
            );
        }
        let (rec, rep) = r.totals();
        assert_eq!(
            Stats {
                measured_ns: 0,
                ..rec
            },
            rep,
            "{name}: {r}"
        );
        assert!(rep.faults > 0 && rep.modeled_ns > 0, "{r}");
        println!(
            "{name}: recorded {} migrations, {} bytes, {} faults, {} ns modeled; replay {} \
             migrations, {} bytes, {} faults, {} ns modeled",
            rec.migrations,
            rec.bytes,
            rec.faults,
            rec.modeled_ns,
            rep.migrations,
            rep.bytes,
            rep.faults,
            rep.modeled_ns
        );
        // The command says what it replayed under.
        let out = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
            .args(["replay", dir.join("results.db").to_str().unwrap()])
            .output()
            .expect("run kfdtool replay");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("xnack: on (as recorded)"), "{text}");
        assert!(text.contains("ranges: 1 registered"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
