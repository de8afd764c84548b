//! `kfd-tools`: the `kfdtool` command line and, later, a UMF-style memory provider over KFD.
//!
//! The provider (alloc/free/purge/split/merge/IPC, HOST/DEVICE/SHARED kinds, a pooling layer and
//! a C ABI for real UMF pools) will live here; today the crate carries what `kfdtool` prints.

use std::fmt::Write as _;

use kfd_ioctl::topology::{IoLinkType, Topology};

/// A byte count for people: `192 GiB`, `2 MiB`, `1.5 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, scale) in UNITS {
        if bytes >= scale {
            let whole = bytes / scale;
            let tenths = (bytes % scale) * 10 / scale;
            return if tenths == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenths} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

/// One table row: the columns padded to the header's widths.
fn row(out: &mut String, cols: [&str; 11]) {
    let [
        node,
        kind,
        gpu_id,
        name,
        gfx,
        cus,
        simds,
        vram,
        render,
        svm,
        hive,
    ] = cols;
    let _ = writeln!(
        out,
        "{node:<4} {kind:<4} {gpu_id:<8} {name:<16} {gfx:<8} {cus:>5} {simds:>6} {vram:>10} \
         {render:<18} {svm:<4} {hive}"
    );
}

/// The topology as a text table: one row per node, then the links.
pub fn topology_table(topo: &Topology) -> String {
    let mut out = String::new();
    row(
        &mut out,
        [
            "node",
            "kind",
            "gpu_id",
            "name",
            "gfx",
            "CUs",
            "SIMDs",
            "VRAM",
            "render node",
            "SVM",
            "hive",
        ],
    );
    for node in &topo.nodes {
        let kind = if node.is_gpu() { "gpu" } else { "cpu" };
        let gpu_id = node
            .gpu_id()
            .map_or("-".to_owned(), |id| format!("{id:#x}"));
        let name = node
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "-".into());
        let gfx = node
            .gfx_target_version()
            .map_or("-".to_owned(), |v| v.to_string());
        let cus = node.cu_count().map_or("-".to_owned(), |c| c.to_string());
        let vram = if node.is_gpu() {
            human_bytes(node.vram_size())
        } else {
            "-".into()
        };
        let render = node
            .render_node_path()
            .map_or("-".to_owned(), |p| p.display().to_string());
        let svm = if !node.is_gpu() {
            "-"
        } else if node.capability().svm_api_supported() {
            "yes"
        } else {
            "no"
        };
        let hive = node.hive_id().map_or("-".to_owned(), |h| format!("{h:#x}"));
        row(
            &mut out,
            [
                &node.id.to_string(),
                kind,
                &gpu_id,
                &name,
                &gfx,
                &cus,
                &node.properties.simd_count.to_string(),
                &vram,
                &render,
                svm,
                &hive,
            ],
        );
    }
    for node in &topo.nodes {
        for link in node.io_links.iter().chain(&node.p2p_links) {
            let kind = match link.kind() {
                IoLinkType::PciExpress => "PCIe".to_owned(),
                IoLinkType::Xgmi => "xGMI".to_owned(),
                other => format!("{other:?}"),
            };
            let _ = writeln!(
                out,
                "link {} -> {}: {kind}, weight {}",
                link.node_from, link.node_to, link.weight
            );
        }
    }
    out
}

/// Runs this executable again, with the same arguments, under the embedded emulator on the
/// machine preset `machine`; `marker_env` is set in the child's environment to the machine's
/// name, so the child knows not to fall back again. Returns the child's exit code.
pub fn run_self_emulated(machine: &str, marker_env: &str) -> std::process::ExitCode {
    use kfd_emu::machine::Machine;
    use kfd_emu::model::{Model, ModelConfig};
    use std::process::ExitCode;

    let Some(preset) = Machine::preset(machine) else {
        let names: Vec<&str> = Machine::presets().iter().map(|(name, _)| *name).collect();
        eprintln!(
            "kfdtool: no emulated machine named {machine}; choose one of {}",
            names.join(", ")
        );
        return ExitCode::FAILURE;
    };
    let model = match Model::new(ModelConfig {
        machine: preset,
        ..ModelConfig::default()
    }) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("kfdtool: building the emulated machine failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("kfdtool: cannot find my own executable: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut command = std::process::Command::new(exe);
    command
        .args(std::env::args_os().skip(1))
        .env(marker_env, machine);
    match kfd_emu::supervisor::spawn_command(model, &mut command) {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("kfdtool: running under the emulator failed: {e}");
            ExitCode::FAILURE
        }
    }
}
