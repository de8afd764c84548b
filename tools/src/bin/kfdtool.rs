//! `kfdtool`: inspect and exercise the KFD driver.
//!
//! `kfdtool info` prints the KFD version and topology of this machine. On a machine without
//! `/dev/kfd` it says so and runs itself again under the embedded emulator (kfd-emu), so the
//! same code path shows what it would do on the emulated machine.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Errno, Error, Kfd};
use kfd_tools::info;

/// Set in the environment of a `kfdtool` that runs under the embedded emulator.
const EMULATED_ENV: &str = "KFDTOOL_EMULATED_MACHINE";

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Inspect and exercise the AMD KFD driver through raw ioctls"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the KFD version, the topology (nodes, GPUs, memory, links) and per-GPU apertures.
    Info {
        /// The emulated machine to use when this machine has no /dev/kfd.
        #[arg(long, default_value = "mi300x")]
        machine: String,
        /// Print one JSON object (kfd_version, emulated, nodes) instead of tables.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Info { machine, json } => match info(json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Error::Open {
                ref path,
                errno: Errno::NOENT,
            }) if path == std::path::Path::new(kfd_ioctl::KFD_DEVICE_PATH)
                && std::env::var_os(EMULATED_ENV).is_none() =>
            {
                eprintln!(
                    "kfdtool: this machine has no /dev/kfd; running under the embedded emulator \
                     (kfd-emu, machine {machine})"
                );
                kfd_tools::run_self_emulated(&machine, EMULATED_ENV)
            }
            Err(e) => {
                eprintln!("kfdtool: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn info(json: bool) -> Result<(), Error> {
    let kfd = Kfd::open()?;
    let topo = Topology::read()?;
    let emulated = std::env::var(EMULATED_ENV).ok();
    if json {
        let version = kfd.version().to_string();
        let value = info::topology_json(&topo, &version, emulated.is_some());
        println!("{value:#}");
        return Ok(());
    }
    let origin = match emulated {
        Some(machine) => format!("emulated by kfd-emu, machine {machine}"),
        None => "/dev/kfd".to_owned(),
    };
    println!("KFD {} ({origin})", kfd.version());
    print!("{}", info::topology_table(&topo));
    for gpu in topo.gpus() {
        let Some(gpu_id) = gpu.gpu_id() else { continue };
        let minor = gpu.properties.drm_render_minor as u32;
        kfd.acquire_vm(gpu_id, minor)?;
    }
    let apertures = kfd.get_process_apertures()?;
    for a in &apertures {
        let available = kfd
            .available_memory(a.gpu_id)
            .map(info::human_bytes)
            .unwrap_or_else(|e| format!("unknown ({e})"));
        println!(
            "gpu {:#06x}: gpuvm {:#x}..{:#x}, lds {:#x}, scratch {:#x}, available VRAM {available}",
            a.gpu_id, a.gpuvm.start, a.gpuvm.end, a.lds.start, a.scratch.start
        );
    }
    match kfd.xnack_mode() {
        Ok(on) => println!("XNACK: {}", if on { "on" } else { "off" }),
        Err(e) => println!("XNACK: unknown ({e})"),
    }
    Ok(())
}
