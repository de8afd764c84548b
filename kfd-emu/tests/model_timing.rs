//! The timing model: link costs read from the machine's topology, SMI timestamps, clock
//! counters and WAIT_EVENTS timeouts under the model clock, and timing files.

mod model_support;
mod model_svm_support;

use std::path::Path;
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
use kfd_ioctl::SmiEvents;
use kfd_ioctl::abi::*;
use kfd_ioctl::topology::IoLinkType;
use model_svm_support::*;

/// The raw `max_bandwidth` (MB/s) and kind of the first link from GPU `gpu`'s node to a CPU
/// node, read from the topology (not through the model).
fn host_link_of(machine: &Machine, gpu: usize) -> (u64, IoLinkType) {
    let node = machine.node_of(&machine.gpus()[gpu]).expect("node");
    let topo = machine.topology();
    let l = node
        .io_links
        .iter()
        .find(|l| topo.node(l.node_to).is_some_and(|n| !n.is_gpu()))
        .expect("a host link");
    (u64::from(l.max_bandwidth), l.kind())
}

/// bytes / bandwidth + setup, in ns, rounded up: what a migration must cost.
fn expected_migration(t: &Timing, raw_mbps: u64, kind: IoLinkType, bytes: u64) -> u64 {
    let raw = if raw_mbps == 0 {
        t.default_link_mbps
    } else {
        raw_mbps
    };
    let pct = if kind == IoLinkType::Xgmi {
        t.xgmi_efficiency_pct
    } else {
        t.pcie_efficiency_pct
    };
    let mbps = raw * pct / 100;
    t.migrate_setup_ns + (bytes * 1000).div_ceil(mbps)
}

#[test]
fn a_migration_costs_bytes_over_the_link_bandwidth_plus_setup_on_two_presets() {
    let t = Timing::default();
    let mut costs = Vec::new();
    for name in ["mi300x", "mi300a"] {
        let machine = Machine::preset(name).expect("preset");
        let c = Costs::new(&machine, t.clone());
        let (raw, kind) = host_link_of(&machine, 0);
        for bytes in [4096, 2 << 20, 4 << 20, 12345 * 4096] {
            assert_eq!(
                c.migration_ns(0, bytes),
                expected_migration(&t, raw, kind, bytes),
                "{name}: {bytes} bytes over {raw} MB/s"
            );
        }
        assert_eq!(c.migration_ns(0, 0), t.migrate_setup_ns, "nothing moved");
        costs.push(c.migration_ns(0, 4 << 20));
    }
    assert_ne!(costs[0], costs[1], "the two presets' links differ");
    // mi300x: 32000 MB/s PCIe at 80% moves 4 MiB in 4194304000 / 25600 ns.
    assert_eq!(costs[0], t.migrate_setup_ns + 163_840);

    // An SDMA copy between two GPUs of an xGMI hive goes over their direct link.
    let machine = Machine::preset("mi210x8").expect("preset");
    let c = Costs::new(&machine, t.clone());
    let node0 = machine.gpus()[0].node_id;
    let (peer, link) = machine
        .gpus()
        .iter()
        .enumerate()
        .find_map(|(i, g)| {
            let node = machine.node_of(g)?;
            let l = machine
                .node_of(&machine.gpus()[0])?
                .io_links
                .iter()
                .find(|l| l.node_to == node.id && l.kind() == IoLinkType::Xgmi)?;
            Some((i, l.clone()))
        })
        .expect("an xGMI peer of GPU 0");
    assert_ne!(machine.gpus()[peer].node_id, node0);
    let mbps = u64::from(link.max_bandwidth) * t.xgmi_efficiency_pct / 100;
    assert_eq!(
        c.sdma_copy_ns(0, Some(0), Some(peer), 1 << 30),
        t.sdma_setup_ns + u64::from(link.min_latency) + ((1u64 << 30) * 1000).div_ceil(mbps)
    );
    assert_eq!(
        c.sdma_copy_ns(0, None, Some(0), 1 << 20),
        t.sdma_setup_ns + c.host_link(0).transfer_ns(1 << 20)
    );
}

/// A model of `machine` on the model clock with `timing`.
fn timed_model(machine: &str, timing: Timing) -> Arc<Model> {
    Model::new(ModelConfig {
        machine: Machine::preset(machine).expect("preset"),
        timing,
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .expect("model")
}

fn smi_svm(kfd: &kfd_ioctl::Kfd, gpu: u32) -> SmiEvents {
    let smi = kfd.smi_events(gpu).expect("SMI_EVENTS");
    smi.set_mask(
        SmiEventMask::MIGRATE_START
            | SmiEventMask::MIGRATE_END
            | SmiEventMask::PAGE_FAULT_START
            | SmiEventMask::PAGE_FAULT_END
            | SmiEventMask::QUEUE_EVICTION
            | SmiEventMask::QUEUE_RESTORE,
    )
    .expect("mask");
    smi
}

/// The records' ids and timestamps.
fn stamps(smi: &mut SmiEvents) -> Vec<(String, u64)> {
    drain_raw(smi)
        .iter()
        .map(|l| {
            let id = l.split(' ').next().expect("id").to_owned();
            (id, timestamp(l) as u64)
        })
        .collect()
}

/// Prefetches 4 MiB to the GPU and back and takes one GPU fault under the model clock; every
/// SMI timestamp and clock counter is where the model puts it, to the nanosecond.
fn check_model_spacing(timing: Timing) {
    let model = timed_model("mi300x", timing);
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let (kfd, gpus) = open_all(&view);
        let g = gpus[0];
        let costs = view.costs().clone();
        let t = costs.timing.clone();
        let mut smi = smi_svm(&kfd, g);
        let mem = Anon::new(4 * MIB);
        svm_set(&kfd, mem.addr, mem.len, &[access(g)]).expect("map");
        let c0 = kfd.get_clock_counters(g).expect("clock counters");
        assert_eq!(c0.system_clock_freq, 1_000_000_000);
        assert_eq!(c0.gpu_clock_counter, c0.cpu_clock_counter / 10, "100 MHz");
        assert_eq!(c0.system_clock_counter, c0.cpu_clock_counter);
        let t0 = c0.system_clock_counter;

        svm_set(&kfd, mem.addr, mem.len, &[prefetch(g)]).expect("prefetch");
        let migrate = costs.migration_ns(0, 4 * MIB);
        assert_eq!(
            stamps(&mut smi),
            [
                ("5".to_owned(), t0 + t.prefetch_setup_ns),
                ("9".to_owned(), t0 + t.prefetch_setup_ns),
                ("6".to_owned(), t0 + t.prefetch_setup_ns + migrate),
                ("a".to_owned(), t0 + t.prefetch_setup_ns + migrate),
            ]
        );
        let t1 = t0 + t.prefetch_setup_ns + migrate;
        let c1 = kfd.get_clock_counters(g).expect("clock counters");
        assert_eq!(
            (c1.system_clock_counter, c1.gpu_clock_counter),
            (t1, t1 / 10)
        );
        assert_eq!(view.clock().now_ns(), t1);

        // Back to system memory: the same link, the same cost.
        svm_set(&kfd, mem.addr, mem.len, &[prefetch(0)]).expect("back");
        let t2 = t1 + t.prefetch_setup_ns;
        let st = stamps(&mut smi);
        assert_eq!((st[0].1, st[2].1), (t2, t2 + migrate), "{st:?}");
        let t3 = t2 + migrate;

        // XNACK on: a GPU read fault on an unregistered page migrates its 2 MiB block.
        let other = Anon::new(4 * MIB);
        kfd.set_xnack_mode(true).expect("XNACK on");
        let pid = pid();
        let mut byte = [0u8; 1];
        view.gpu_read(pid, g, other.page(3), &mut byte)
            .expect("the fault is handled");
        let block = costs.migration_ns(0, 2 * MIB);
        assert_eq!(
            stamps(&mut smi),
            [
                ("7".to_owned(), t3),
                ("5".to_owned(), t3 + t.fault_service_ns),
                ("6".to_owned(), t3 + t.fault_service_ns + block),
                ("8".to_owned(), t3 + t.fault_service_ns + block),
            ]
        );
    })
    .expect("attach");
}

#[test]
fn smi_timestamps_under_the_model_clock_are_spaced_exactly_by_the_model() {
    check_model_spacing(Timing::default());
}

#[test]
fn a_timing_file_overrides_the_costs_the_timestamps_follow() {
    let dir = std::env::temp_dir().join(format!("kfd-emu-timing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("slow.timing");
    std::fs::write(
        &file,
        "# a slow link and slow faults\npcie_efficiency_pct = 25\nfault_service_ns = 1_000_000\n",
    )
    .expect("write");
    let timing = Timing::from_file(&file).expect("a good file");
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(
        (timing.pcie_efficiency_pct, timing.fault_service_ns),
        (25, 1_000_000)
    );
    let slow = Costs::new(&Machine::preset("mi300x").expect("preset"), timing.clone());
    // 32000 MB/s at 25%: 8000 MB/s.
    assert_eq!(
        slow.migration_ns(0, 4 * MIB),
        timing.migrate_setup_ns + 4 * MIB * 1000 / 8000
    );
    check_model_spacing(timing);
}

#[test]
fn bad_timing_files_are_refused_naming_the_file_the_line_and_the_key() {
    let p = Path::new("/some/where/my.timing");
    let err = |text: &str| Timing::parse(text, p).expect_err(text).to_string();
    let e = err("fault_service_ns = 10\nfault_latency_ns = 5\n");
    assert!(
        e.starts_with("/some/where/my.timing:2: unknown key \"fault_latency_ns\""),
        "{e}"
    );
    let e = err("migrate_setup_ns = ten");
    assert!(
        e.starts_with("/some/where/my.timing:1: bad value \"ten\" for key \"migrate_setup_ns\""),
        "{e}"
    );
    let e = err("\n\npcie_efficiency_pct = 0\n");
    assert!(
        e.contains(":3: ") && e.contains("pcie_efficiency_pct"),
        "{e}"
    );
    let e = err("default_link_mbps = 0");
    assert!(e.contains("default_link_mbps"), "{e}");
    let e = err("just words");
    assert!(e.starts_with("/some/where/my.timing:1: expected"), "{e}");
    let e = Timing::from_file(Path::new("/nonexistent/x.timing"))
        .expect_err("missing")
        .to_string();
    assert!(e.contains("/nonexistent/x.timing"), "{e}");

    // The CLI refuses such a file before running anything, naming file and key.
    let dir = std::env::temp_dir().join(format!("kfd-emu-badtiming-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("bad.timing");
    std::fs::write(&file, "sdma_setup_ns = 5\nsdma_speed = 3\n").expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
        .arg("run")
        .arg("--timing")
        .arg(&file)
        .args(["--", "true"])
        .output()
        .expect("run kfd-emu");
    std::fs::remove_dir_all(&dir).expect("clean up");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:2: unknown key \"sdma_speed\"", file.display())),
        "{stderr}"
    );
}

#[test]
fn a_wait_that_times_out_takes_its_timeout_in_model_time() {
    use model_support::{Emu, create, data, wait};
    let emu = Emu::new(ModelConfig {
        machine: Machine::preset("mi300x").expect("preset"),
        clock: ClockMode::Model,
        ..ModelConfig::default()
    });
    let ev = create(&emu, KFD_IOC_EVENT_SIGNAL, true);
    let clock = |emu: &Emu| {
        let mut a = kfd_ioctl_get_clock_counters_args::default();
        emu.ioctl(AMDKFD_IOC_GET_CLOCK_COUNTERS, &mut a)
            .expect("clock counters");
        a.system_clock_counter
    };
    let before = clock(&emu);
    let (r, result) = wait(&emu, &mut [data(ev.event_id)], false, 20);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_TIMEOUT));
    // msecs_to_jiffies(20) + 1 jiffy, at HZ=250: 24 ms.
    assert_eq!(clock(&emu) - before, 24_000_000);
    // A wait of 0 polls: no time passes.
    let (r, result) = wait(&emu, &mut [data(ev.event_id)], false, 0);
    assert_eq!((r, result), (Ok(0), KFD_IOC_WAIT_RESULT_TIMEOUT));
    assert_eq!(clock(&emu) - before, 24_000_000);
}

#[test]
fn kfd_emu_timing_prints_the_parameters_and_each_gpus_link() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfd-emu"))
            .arg("timing")
            .args(args)
            .output()
            .expect("run kfd-emu");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let text = run(&["--machine", "mi210x8"]);
    // The parameters read back as a timing file equal to the defaults.
    let params: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        Timing::parse(&params, Path::new("stdout")).expect("a timing file"),
        Timing::default()
    );
    let machine = Machine::preset("mi210x8").expect("preset");
    let costs = Costs::new(&machine, Timing::default());
    let links: Vec<&str> = text.lines().filter(|l| l.starts_with("# GPU ")).collect();
    assert_eq!(links.len(), 8);
    for (i, line) in links.iter().enumerate() {
        let link = costs.host_link(i);
        assert!(
            line.contains(&format!("host link {} MB/s effective", link.mbps))
                && line.contains(&format!(
                    "1 MiB migrates in {} ns",
                    costs.migration_ns(i, 1 << 20)
                )),
            "{line}"
        );
    }
}

/// A timing file that is a FIFO, a device or too large is refused at once, naming the path;
/// nothing waits for a writer or reads without end (`/dev/zero`).
#[test]
fn timing_files_that_are_not_small_regular_files_are_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("kfd-emu-hostiletiming-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let fifo = dir.join("fifo.timing");
    let _ = std::fs::remove_file(&fifo);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let big = dir.join("big.timing");
    std::fs::write(&big, "# padding\n".repeat(10_000)).expect("write");
    let started = std::time::Instant::now();
    for path in [fifo.as_path(), Path::new("/dev/zero"), big.as_path()] {
        let e = Timing::from_file(path).expect_err("refused").to_string();
        assert!(e.contains(&*path.to_string_lossy()), "{e}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
