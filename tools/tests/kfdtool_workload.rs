//! `kfdtool workload`: HMM access patterns through GPU kernels (gfx9, the default) or SDMA
//! copies and CPU touches, with the migration counts the kernel's rules predict and the data
//! checked (on the emulated MI300X where there is no `/dev/kfd`, on the hardware otherwise).

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

/// The `(migrations, bytes)` of the summary's row `to`, `trigger`; (0, 0) without one.
fn row(text: &str, to: &str, trigger: &str) -> (u64, u64) {
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(to)?.trim_start().strip_prefix(trigger)?;
            let mut n = rest.split_whitespace().map(|w| w.parse::<u64>().ok());
            Some((n.next()??, n.next()??))
        })
        .unwrap_or((0, 0))
}

const MIB: u64 = 1 << 20;

/// N rounds of ping-pong over a 4 MiB range (two 2 MiB granules), XNACK on: every round the
/// GPU's writes fault each granule to VRAM (PAGEFAULT_GPU) and the CPU's touches fault each
/// back (PAGEFAULT_CPU): 2N migrations and 8N MiB each way, and the data survives.
#[test]
fn ping_pong_moves_every_granule_both_ways_each_round() {
    let text = ok(&kfdtool(&[
        "workload",
        "ping-pong",
        "--size",
        "4M",
        "--iterations",
        "3",
    ]));
    assert!(text.contains("engine: kernels on gfx9"), "{text}");
    assert_eq!(row(&text, "gpu", "GPU fault"), (6, 12 * MIB), "{text}");
    assert_eq!(row(&text, "system", "CPU fault"), (6, 12 * MIB), "{text}");
    assert!(text.contains("GPU page faults: 6 (6 migrated)"), "{text}");
}

/// The same ping-pong with the GPU's side as SDMA copies (`--engine sdma`), and as kernels
/// touching every 64-byte line instead of every page (`--touch line`): the same migrations,
/// since a granule moves at its first touched page either way.
#[test]
fn sdma_copies_and_line_touches_give_the_same_migrations() {
    for (extra, engine) in [
        (&["--engine", "sdma"][..], "engine: SDMA copies"),
        (&["--touch", "line"][..], "every 64 B of a block"),
    ] {
        let mut args = vec!["workload", "ping-pong", "--size", "4M", "--iterations", "2"];
        args.extend(extra);
        let text = ok(&kfdtool(&args));
        assert!(text.contains(engine), "{extra:?}: {text}");
        assert_eq!(
            row(&text, "gpu", "GPU fault"),
            (4, 8 * MIB),
            "{extra:?}: {text}"
        );
        assert_eq!(
            row(&text, "system", "CPU fault"),
            (4, 8 * MIB),
            "{extra:?}: {text}"
        );
    }
}

/// XNACK off and no ACCESS attribute: the kernel maps the range on no GPU
/// (`svm_range_validate_and_map` maps the ACCESS / ACCESS_IN_PLACE GPUs only), so the first
/// GPU access — a kernel's load, or a copy — is a VM fault, which the workload reports as
/// such and fails; a prefetch to the GPU does not map it either.
#[test]
fn xnack_off_without_access_is_a_vm_fault_for_kernels_and_copies() {
    for extra in [
        &["--engine", "kernel"][..],
        &["--engine", "sdma"][..],
        &["--prefetch", "gpu"][..],
    ] {
        let mut args = vec![
            "workload",
            "sequential",
            "--size",
            "4M",
            "--xnack",
            "off",
            "--access",
            "none",
        ];
        args.extend(extra);
        let out = kfdtool(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}: {err}");
        assert!(err.contains("took a VM fault at 0x"), "{extra:?}: {err}");
        assert!(err.contains("XNACK is off"), "{extra:?}: {err}");
    }
}

/// A GPU that is not gfx9 (an emulated RX 7900 XTX, gfx1100) runs the workload on SDMA and
/// says why; `--engine kernel` there is an error naming the ISA.
#[test]
fn a_gpu_without_gfx9_kernels_falls_back_to_sdma_with_the_reason() {
    if std::path::Path::new("/dev/kfd").exists() {
        // --machine shapes the emulated machine only.
        return;
    }
    let base = [
        "--machine",
        "rx7900xtx",
        "workload",
        "ping-pong",
        "--size",
        "4M",
        "--xnack",
        "off",
    ];
    let text = ok(&kfdtool(&base));
    assert!(
        text.contains("engine: SDMA copies (gpu ") && text.contains("has gfx1100, not a gfx9 ISA"),
        "{text}"
    );
    let mut args = base.to_vec();
    args.extend(["--engine", "kernel"]);
    let out = kfdtool(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("--engine kernel: gpu") && err.contains("gfx1100"),
        "{err}"
    );
}

/// The kernel's mitigations: with ACCESS_IN_PLACE, or a preferred location in system memory,
/// the GPU's faults map the pages where they are (one fault per granule, none migrated) and
/// nothing ever moves; with XNACK off the range is mapped up front and nothing faults.
#[test]
fn access_in_place_preferred_system_and_xnack_off_stop_the_ping_pong() {
    for extra in [
        &["--access", "in-place"][..],
        &["--preferred", "system"][..],
    ] {
        let mut args = vec!["workload", "ping-pong", "--size", "4M", "--iterations", "3"];
        args.extend(extra);
        let text = ok(&kfdtool(&args));
        assert!(
            text.contains("total: 0 bytes to the GPU, 0 bytes to system memory"),
            "{extra:?}: {text}"
        );
        assert!(
            text.contains("GPU page faults: 2 (0 migrated)"),
            "{extra:?}: {text}"
        );
    }
    let text = ok(&kfdtool(&[
        "workload",
        "ping-pong",
        "--size",
        "4M",
        "--iterations",
        "3",
        "--xnack",
        "off",
    ]));
    assert!(
        text.contains("total: 0 bytes to the GPU, 0 bytes to system memory"),
        "{text}"
    );
    assert!(text.contains("GPU page faults: 0 (0 migrated)"), "{text}");
}

/// Twice the VRAM (an emulated MI300X given 64 MiB) streams through the GPU twice: each of the
/// 2 × 64 faults migrates a 2 MiB range in, every one past what fits evicts one back (trigger
/// TTM_EVICTION), the CPU's final check faults back what stayed, and no write is lost.
#[test]
fn a_working_set_twice_the_vram_streams_through_with_evictions() {
    if std::path::Path::new("/dev/kfd").exists() {
        // --vram shapes the emulated machine only.
        return;
    }
    let text = ok(&kfdtool(&[
        "--vram",
        "64M",
        "workload",
        "oversubscribe",
        "--iterations",
        "2",
    ]));
    let faults = row(&text, "gpu", "GPU fault");
    let evicted = row(&text, "system", "TTM eviction");
    let back = row(&text, "system", "CPU fault");
    assert_eq!(faults, (128, 128 * 2 * MIB), "{text}");
    assert_eq!(
        evicted.0 + back.0,
        128,
        "every range left VRAM once per pass: {text}"
    );
    assert!(
        back.0 >= 2 && back.0 < 32,
        "what fits in 64 MiB stayed: {text}"
    );
    assert_eq!(evicted.1 + back.1, faults.1, "{text}");
}

/// `--trace DIR` records the workload with `kfdtool trace` in every format, whose summary
/// counts the same migrations.
#[test]
fn trace_records_the_workload_in_every_format() {
    let dir = std::env::temp_dir().join(format!("kfdtool-workload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let text = ok(&kfdtool(&[
        "workload",
        "ping-pong",
        "--size",
        "4M",
        "--iterations",
        "2",
        "--trace",
        dir.to_str().expect("utf-8"),
    ]));
    for file in [
        "results.db",
        "regions_trace.csv",
        "results.json",
        "trace.json",
        "residency.svg",
        "throughput.svg",
    ] {
        let len = std::fs::metadata(dir.join(file)).map_or(0, |m| m.len());
        assert!(len > 0, "{file} is empty: {text}");
    }
    assert!(text.contains("PAGEFAULT_GPU: 4, 8 MiB"), "{text}");
    assert!(text.contains("PAGEFAULT_CPU: 4, 8 MiB"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sequential, random, strided and stencil reads over an 8 MiB range (four 2 MiB granules),
/// twice: each granule the GPU touches faults to VRAM once and stays (the second pass and
/// the stencil's reuse fault nothing).
#[test]
fn gpu_only_patterns_fault_each_granule_in_once() {
    for pattern in ["sequential", "random", "strided", "stencil"] {
        let text = ok(&kfdtool(&[
            "workload",
            pattern,
            "--size",
            "8M",
            "--iterations",
            "2",
        ]));
        assert!(
            text.contains("engine: kernels on gfx9"),
            "{pattern}: {text}"
        );
        assert_eq!(
            row(&text, "gpu", "GPU fault"),
            (4, 8 * MIB),
            "{pattern}: {text}"
        );
        assert!(
            text.contains("0 bytes to system memory"),
            "{pattern}: {text}"
        );
        assert!(
            text.contains("GPU page faults: 4 (4 migrated)"),
            "{pattern}: {text}"
        );
    }
}

/// Kernels reading one 64 KiB block every 4 MiB of a 16 MiB range fault in only the granules
/// they touch: 4 of the 8 (2 MiB each), once, over two passes; and with XNACK off and ACCESS
/// the stencil's reads and writes (checked by the CPU) fault nothing, the range being mapped
/// up front.
#[test]
fn kernels_fault_in_only_the_granules_they_touch() {
    let text = ok(&kfdtool(&[
        "workload",
        "strided",
        "--size",
        "16M",
        "--stride",
        "4M",
        "--iterations",
        "2",
    ]));
    assert!(text.contains("accesses: 8 GPU reads"), "{text}");
    assert_eq!(row(&text, "gpu", "GPU fault"), (4, 8 * MIB), "{text}");
    assert!(text.contains("GPU page faults: 4 (4 migrated)"), "{text}");
    let text = ok(&kfdtool(&[
        "workload", "stencil", "--size", "2M", "--xnack", "off",
    ]));
    assert!(
        text.contains("accesses: 96 GPU reads, 32 GPU writes (kernels)"),
        "{text}"
    );
    assert!(
        text.contains("total: 0 bytes to the GPU, 0 bytes to system memory"),
        "{text}"
    );
    assert!(text.contains("GPU page faults: 0 (0 migrated)"), "{text}");
}

/// The migrations' "effective" rate in a `kfdtool trace` summary, per direction.
fn effective(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| l.split("effective ").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse().ok())
        .collect()
}

/// On the emulator a trace is on the machine's clock by default: each migration of a 2 MiB
/// granule lasts what the timing model says (`Costs::migration_ns`), so the summary's
/// effective rate is the model's, both ways; `--clock wall` shows the emulator's own speed
/// instead.
#[test]
fn a_trace_on_the_emulator_is_on_the_model_clock_by_default() {
    if std::path::Path::new("/dev/kfd").exists() {
        return;
    }
    let machine = kfd_emu::machine::Machine::preset("mi300x").expect("preset");
    let costs = kfd_emu::model::Costs::new(&machine, kfd_emu::model::Timing::default());
    let ns = costs.migration_ns(0, 2 * MIB) as f64;
    let want = 2.0 / (ns * 1e-9);
    for clock in [None, Some("model"), Some("wall")] {
        let dir = std::env::temp_dir().join(format!(
            "kfdtool-clock-{}-{}",
            std::process::id(),
            clock.unwrap_or("default")
        ));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut args = vec![];
        if let Some(c) = clock {
            args.extend(["--clock", c]);
        }
        args.extend([
            "workload",
            "ping-pong",
            "--size",
            "4M",
            "--iterations",
            "2",
            "--trace",
        ]);
        args.push(dir.to_str().expect("utf-8"));
        let text = ok(&kfdtool(&args));
        let rates = effective(&text);
        assert_eq!(rates.len(), 2, "{text}");
        for rate in rates {
            let model = (rate - want).abs() / want < 0.001;
            assert_eq!(
                model,
                clock != Some("wall"),
                "{clock:?}: {rate} vs the model's {want}: {text}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
