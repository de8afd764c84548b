//! `kfdtool`: inspect and exercise the KFD driver.
//!
//! Every subcommand talks to `/dev/kfd` as it is. On a machine without one, `kfdtool` says so
//! on stderr and runs itself again under the embedded emulator (kfd-emu, `--machine`), so the
//! same code path shows what it would do on the emulated machine.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use kfd_ioctl::abi::{SmiEventMask, SvmFlags};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Errno, Kfd};
use kfd_svm::{Access, Location, SmiStream, SvmAttrs, SvmBuffer, Timeline};
use kfd_tools::info;

/// Set in the environment of a `kfdtool` that runs under the embedded emulator.
const EMULATED_ENV: &str = "KFDTOOL_EMULATED_MACHINE";

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Inspect and exercise the AMD KFD driver through raw ioctls"
)]
struct Cli {
    /// The emulated machine to run on when this machine has no /dev/kfd
    /// (`kfd-emu machines` lists them).
    #[arg(long, global = true, default_value = "mi300x")]
    machine: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the KFD version, the topology (nodes, GPUs, memory, links) and per-GPU apertures.
    Info {
        /// Print one JSON object (kfd_version, emulated, nodes) instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Allocate an SVM demo range, set attributes from the flags, print what GET_ATTR says.
    Svm(SvmArgs),
    /// SMI events of a GPU.
    Smi {
        #[command(subcommand)]
        command: SmiCommand,
    },
    /// Run a program and write its migration/fault timeline as Chrome-trace JSON (Perfetto).
    Trace {
        /// Where to write the JSON.
        #[arg(long, default_value = "trace.json")]
        out: PathBuf,
        /// The program and its arguments.
        #[arg(required = true, last = true)]
        program: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum SmiCommand {
    /// Print decoded SMI events of one GPU as they come.
    Watch {
        /// The GPU (default: the first).
        #[arg(long, value_parser = parse_u32)]
        gpu: Option<u32>,
        /// Stop after this many events.
        #[arg(long)]
        count: Option<usize>,
        /// Stop after this many seconds without events.
        #[arg(long, default_value_t = 10.0)]
        idle: f64,
        /// Also events of other processes (needs CAP_SYS_ADMIN).
        #[arg(long)]
        all_processes: bool,
    },
}

/// Where pages of the demo range should live.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Place {
    /// System memory.
    System,
    /// The chosen GPU's VRAM.
    Gpu,
}

/// What the chosen GPU may do with the demo range.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum AccessArg {
    /// Access, migrating toward the GPU when it faults.
    Access,
    /// Access where the pages are (no migration).
    InPlace,
    /// No access.
    None,
}

#[derive(Args, Debug)]
struct SvmArgs {
    /// Size of the range in bytes (rounded up to pages).
    #[arg(long, default_value_t = 2 << 20)]
    size: usize,
    /// The GPU (default: the first).
    #[arg(long, value_parser = parse_u32)]
    gpu: Option<u32>,
    /// Preferred location.
    #[arg(long, value_enum)]
    preferred: Option<Place>,
    /// Prefetch (migrate) the range there.
    #[arg(long, value_enum)]
    prefetch: Option<Place>,
    /// The GPU's access.
    #[arg(long, value_enum, default_value = "access")]
    access: AccessArg,
    /// Flags to set, by name (HOST_ACCESS, COHERENT, HIVE_LOCAL, GPU_RO, GPU_EXEC,
    /// GPU_READ_MOSTLY, GPU_ALWAYS_MAPPED, EXT_COHERENT), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_svm_flag)]
    set_flags: Vec<SvmFlags>,
    /// Flags to clear, by name, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_svm_flag)]
    clear_flags: Vec<SvmFlags>,
    /// Migration granularity as log2 of pages (the kernel clamps to 63).
    #[arg(long)]
    granularity: Option<u8>,
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|e| format!("{s}: {e}"))
}

fn parse_svm_flag(s: &str) -> Result<SvmFlags, String> {
    SvmFlags::from_name(&s.to_ascii_uppercase()).ok_or_else(|| {
        let names: Vec<&str> = SvmFlags::all().iter_names().map(|(n, _)| n).collect();
        format!("unknown SVM flag {s}; known: {}", names.join(", "))
    })
}

/// A failure of a subcommand, printed as one line.
type CmdResult = Result<(), Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Info { json } => info_cmd(*json),
        Command::Svm(args) => svm_cmd(args),
        Command::Smi {
            command:
                SmiCommand::Watch {
                    gpu,
                    count,
                    idle,
                    all_processes,
                },
        } => smi_watch(*gpu, *count, *idle, *all_processes),
        Command::Trace { out, program } => trace_cmd(out, program),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if no_kfd_device(&*e) && std::env::var_os(EMULATED_ENV).is_none() => {
            eprintln!(
                "kfdtool: this machine has no /dev/kfd; running under the embedded emulator \
                 (kfd-emu, machine {})",
                cli.machine
            );
            kfd_tools::run_self_emulated(&cli.machine, EMULATED_ENV)
        }
        Err(e) => {
            eprintln!("kfdtool: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `e` is "opening /dev/kfd failed: ENOENT".
fn no_kfd_device(e: &(dyn std::error::Error + 'static)) -> bool {
    let kfd_error =
        e.downcast_ref::<kfd_ioctl::Error>()
            .or_else(|| match e.downcast_ref::<kfd_svm::Error>() {
                Some(kfd_svm::Error::Kfd(inner)) => Some(inner),
                _ => None,
            });
    matches!(
        kfd_error,
        Some(kfd_ioctl::Error::Open { path, errno: Errno::NOENT })
            if path == std::path::Path::new(kfd_ioctl::KFD_DEVICE_PATH)
    )
}

/// Opens KFD and acquires every GPU; returns the handle and the GPU ids in topology order.
fn open_all() -> Result<(Kfd, Topology, Vec<u32>), kfd_ioctl::Error> {
    let kfd = Kfd::open()?;
    let topo = Topology::read()?;
    let mut gpus = Vec::new();
    for node in topo.gpus() {
        let Some(gpu_id) = node.gpu_id() else {
            continue;
        };
        kfd.acquire_vm(gpu_id, node.properties.drm_render_minor as u32)?;
        gpus.push(gpu_id);
    }
    Ok((kfd, topo, gpus))
}

fn pick_gpu(gpus: &[u32], wanted: Option<u32>) -> Result<u32, String> {
    match wanted {
        Some(gpu) if gpus.contains(&gpu) => Ok(gpu),
        Some(gpu) => Err(format!(
            "no GPU with gpu_id {gpu:#x}; the GPUs are {gpus:#x?}"
        )),
        None => gpus
            .first()
            .copied()
            .ok_or_else(|| "this machine has no GPU".into()),
    }
}

fn info_cmd(json: bool) -> CmdResult {
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
        kfd.acquire_vm(gpu_id, gpu.properties.drm_render_minor as u32)?;
    }
    for a in kfd.get_process_apertures()? {
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

fn location(place: Place, gpu: u32) -> Location {
    match place {
        Place::System => Location::System,
        Place::Gpu => Location::Gpu(gpu),
    }
}

fn svm_cmd(args: &SvmArgs) -> CmdResult {
    let (kfd, _, gpus) = open_all()?;
    let gpu = pick_gpu(&gpus, args.gpu)?;
    let mut attrs = SvmAttrs::new().access(
        gpu,
        match args.access {
            AccessArg::Access => Access::Access,
            AccessArg::InPlace => Access::AccessInPlace,
            AccessArg::None => Access::NoAccess,
        },
    );
    if let Some(place) = args.preferred {
        attrs = attrs.preferred_location(location(place, gpu));
    }
    let set = args.set_flags.iter().fold(SvmFlags::empty(), |a, f| a | *f);
    let clear = args
        .clear_flags
        .iter()
        .fold(SvmFlags::empty(), |a, f| a | *f);
    if !set.is_empty() {
        attrs = attrs.set_flags(set);
    }
    if !clear.is_empty() {
        attrs = attrs.clear_flags(clear);
    }
    if let Some(g) = args.granularity {
        attrs = attrs.granularity(g);
    }
    let mut buffer = SvmBuffer::new(&kfd, args.size, &attrs)?;
    if let Some(place) = args.prefetch {
        buffer.prefetch(location(place, gpu))?;
    }
    let got = buffer.attrs(&gpus)?;
    println!(
        "SVM range {:#x}..{:#x} ({}) on gpu {gpu:#x}",
        buffer.addr(),
        buffer.addr() + buffer.len() as u64,
        info::human_bytes(buffer.len() as u64)
    );
    println!(
        "  requested:         {:?}",
        buffer.requested().iter().collect::<Vec<_>>()
    );
    println!("  preferred location {}", got.preferred_location);
    println!("  prefetch location  {}", got.prefetch_location);
    println!("  flags set          {:?}", got.flags);
    match got.cleared_flags {
        Some(cleared) => println!("  flags clear        {cleared:?}"),
        None => println!("  flags clear        (KFD before 1.6 cannot say)"),
    }
    println!(
        "  granularity        {} (2^{} pages)",
        got.granularity, got.granularity
    );
    for g in &gpus {
        match got.access_of(*g) {
            Some(a) => println!("  gpu {g:#x} access    {a:?}"),
            None => println!("  gpu {g:#x} access    (not reported)"),
        }
    }
    Ok(())
}

fn smi_watch(gpu: Option<u32>, count: Option<usize>, idle: f64, all: bool) -> CmdResult {
    let (kfd, _, gpus) = open_all()?;
    let gpu = pick_gpu(&gpus, gpu)?;
    let mut mask = SmiEventMask::all();
    if !all {
        mask.remove(SmiEventMask::ALL_PROCESS);
    }
    let mut stream = SmiStream::open(&kfd, gpu, mask)?;
    eprintln!("kfdtool: watching SMI events of gpu {gpu:#x} (idle timeout {idle} s)");
    let idle = Duration::from_secs_f64(idle.max(0.0));
    let mut seen = 0usize;
    while count.is_none_or(|c| seen < c) {
        match stream.next_event(Some(idle))? {
            Some(event) => {
                println!("{event}");
                seen += 1;
            }
            None => break,
        }
    }
    eprintln!("kfdtool: {seen} events");
    Ok(())
}

fn trace_cmd(out: &PathBuf, program: &[String]) -> CmdResult {
    let (kfd, _, gpus) = open_all()?;
    // Every event of every GPU, of every process (the program is another process): the
    // ALL_PROCESS bit needs CAP_SYS_ADMIN, as in the kernel.
    let mut streams = Vec::new();
    for gpu in &gpus {
        streams.push(SmiStream::open(&kfd, *gpu, SmiEventMask::all())?);
    }
    let (name, args) = program.split_first().ok_or("no program to run")?;
    let started = Instant::now();
    let mut child = std::process::Command::new(name).args(args).spawn()?;
    let pid = child.id();
    let status = child.wait()?;
    let mut timeline = Timeline::new();
    for stream in &mut streams {
        for event in stream.pending() {
            let event = event?;
            if event.pid().is_none_or(|p| p == pid) {
                timeline.push(event);
            }
        }
    }
    let file = std::fs::File::create(out)?;
    timeline.write_chrome_trace(std::io::BufWriter::new(file))?;
    let moved: u64 = timeline.bytes_migrated().values().sum();
    eprintln!(
        "kfdtool: {name} (pid {pid}) {status} after {:.2} s; {} events, {} migrated; wrote {}",
        started.elapsed().as_secs_f64(),
        timeline.events().len(),
        info::human_bytes(moved),
        out.display()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} {status}").into())
    }
}
