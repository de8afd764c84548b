//! `kfdtool`: inspect and exercise the KFD driver.
//!
//! Every subcommand talks to `/dev/kfd` as it is. On a machine without one, `kfdtool` says so
//! on stderr and runs itself again under the embedded emulator (kfd-emu, `--machine`), so the
//! same code path shows what it would do on the emulated machine.

mod copy;
mod emulated;
mod info;
mod parse;
mod replay_cmd;
mod trace;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use kfd_ioctl::abi::{SmiEventMask, SvmFlags};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{Errno, GpuId, Kfd};
use kfd_svm::{Access, FlagNames, Location, SmiStream, SvmAttrs, SvmBuffer};
use parse::{parse_idle, parse_u32, parse_whole};
use vm_memory::VolatileSlice;

/// `--clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ClockArg {
    /// The emulator's own time.
    Wall,
    /// The machine's time, as the timing model has it.
    Model,
}

use emulated::EMULATED_ENV;

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
    /// With the embedded emulator: give every GPU this much VRAM (K, M, G suffixes), to study
    /// oversubscription cheaply.
    #[arg(long, global = true, value_parser = workload::parse_size)]
    vram: Option<u64>,
    /// The time of the embedded emulator: `model`, the machine's (the timing model's costs for
    /// the driver's and the GPU's work, the program's own time as it passed; the default for
    /// `trace`), or `wall`, the emulator's own (the default otherwise). On hardware the clock
    /// is the hardware's.
    #[arg(long, global = true, value_enum)]
    clock: Option<ClockArg>,
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
    /// Allocate through the UMF-style provider: write, read back, show what the provider tracks.
    Alloc {
        /// The kind of memory.
        #[arg(long, value_enum, default_value = "host")]
        kind: KindArg,
        /// Bytes per allocation (1 B to 1 TiB).
        #[arg(long, default_value = "1048576", value_parser = whole_in::<usize>(1, MAX_BYTES))]
        size: usize,
        /// How many allocations (1 to 65536).
        #[arg(long, default_value = "4", value_parser = whole_in::<usize>(1, 1 << 16))]
        count: usize,
        /// The GPU: its gpu id or its node id (default: the first).
        #[arg(long, value_parser = parse_u32)]
        gpu: Option<u32>,
    },
    /// Build mirrored rings (host, and device-local on the GPU) and stream records through one.
    Ring {
        /// Minimum capacity in bytes (rounded up to the granule and a power of two; 1 B to
        /// 1 GiB).
        #[arg(long, default_value = "65536", value_parser = whole_in::<usize>(1, 1 << 30))]
        capacity: usize,
        /// Records to stream through the host ring (1 to 10^9).
        #[arg(long, default_value = "100000", value_parser = whole_in::<usize>(1, 1_000_000_000))]
        records: usize,
    },
    /// SDMA copy throughput by direction and link (system→VRAM, VRAM→system, VRAM→VRAM,
    /// peer), in a table; under the emulator these are the emulator's own speeds.
    Copy {
        /// Bytes per copy (4 KiB to 1 GiB).
        #[arg(long, default_value = "16777216", value_parser = whole_in::<u64>(4096, 1 << 30))]
        size: u64,
        /// Timed copies per direction (1 to 10000).
        #[arg(long, default_value = "8", value_parser = whole_in::<u32>(1, 10_000))]
        repeat: u32,
    },
    /// Measure the provider, the rings and an ioctl round trip, with a summary table.
    Bench {
        /// Fewer iterations (a smoke run).
        #[arg(long)]
        quick: bool,
    },
    /// Record the SMI events of a program (or of every process, or of some) in rocprofv3's
    /// formats and as a Perfetto timeline, then print a summary and draw SVG pictures.
    Trace(trace::TraceArgs),
    /// Run an HMM access pattern (sequential, random, strided, stencil, ping-pong,
    /// oversubscribe) on an SVM range through SDMA copies and CPU touches, and count what the
    /// driver did; `--trace DIR` records it with `kfdtool trace`.
    Workload(workload::WorkloadArgs),
    /// Replay the GPU faults and prefetches of a recorded trace on the emulator's model under
    /// changed SVM attributes, and compare migrations, faults and modeled time with the
    /// recording, per range and in total.
    Replay(replay_cmd::ReplayArgs),
    /// Summarise and draw a trace recorded earlier: a rocpd database (`results.db` of
    /// `kfdtool trace --format rocpd`, or one rocprofv3 wrote).
    Report {
        /// The rocpd database.
        #[arg(required_unless_present = "compare")]
        trace: Option<PathBuf>,
        /// Put two traces (or a trace and its replay) side by side instead: every summary
        /// figure of A and of B on one line, with B's change.
        #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with_all = ["trace", "svg"])]
        compare: Vec<PathBuf>,
        /// Draw the pictures (residency.svg, throughput.svg, latency.svg, cumulative.svg,
        /// thrashing.svg) into this directory (it must exist).
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Only the records of these processes (repeatable).
        #[arg(long, value_parser = parse_u32)]
        pid: Vec<u32>,
    },
}

#[derive(Subcommand, Debug)]
enum SmiCommand {
    /// Print decoded SMI events of one GPU as they come.
    Watch {
        /// The GPU: its gpu id or its node id (default: the first).
        #[arg(long, value_parser = parse_u32)]
        gpu: Option<u32>,
        /// Stop after this many events (at least 1).
        #[arg(long, value_parser = whole_in::<usize>(1, u64::MAX))]
        count: Option<usize>,
        /// Stop after this many seconds without events (a finite number from 0 to 31536000,
        /// a year; fractions allowed).
        #[arg(long, default_value = "10", value_parser = parse_idle)]
        idle: Duration,
        /// Also events of other processes (needs CAP_SYS_ADMIN).
        #[arg(long)]
        all_processes: bool,
    },
}

/// The provider's kinds of memory.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    /// System memory the GPUs reach.
    Host,
    /// VRAM of one GPU.
    Device,
    /// SVM: one pointer for CPU and GPUs.
    Shared,
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
    /// Size of the range in bytes (rounded up to pages; 1 B to 1 TiB).
    #[arg(long, default_value = "2097152", value_parser = whole_in::<usize>(1, MAX_BYTES))]
    size: usize,
    /// The GPU: its gpu id or its node id (default: the first).
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
    /// Migration granularity as log2 of pages (0 to 63).
    #[arg(long, value_parser = whole_in::<u8>(0, 63))]
    granularity: Option<u8>,
}

/// The largest byte count a flag takes: 1 TiB.
const MAX_BYTES: u64 = 1 << 40;

/// A parser of whole numbers in `min..=max` (the error names the value and the range).
fn whole_in<T: TryFrom<u64>>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |s| {
        let n = parse_whole(s)?;
        if !(min..=max).contains(&n) {
            return Err(format!("{s} is out of range: from {min} to {max}"));
        }
        T::try_from(n).map_err(|_| format!("{s} does not fit this machine's integers"))
    }
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
    if cli.clock == Some(ClockArg::Model)
        && std::env::var_os(EMULATED_ENV).is_none()
        && std::path::Path::new(kfd_ioctl::KFD_DEVICE_PATH).exists()
    {
        eprintln!("kfdtool: --clock model is the emulator's; on this GPU the clock is its own");
    }
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
        Command::Trace(args) => trace::trace_cmd(args, open_all),
        Command::Workload(args) => workload::workload_cmd(
            args,
            &cli.machine,
            cli.vram,
            cli.clock.map(|c| {
                if c == ClockArg::Model {
                    "model"
                } else {
                    "wall"
                }
            }),
        ),
        Command::Report {
            trace,
            compare,
            svg,
            pid,
        } => match (trace, compare.as_slice()) {
            (_, [a, b]) => trace::compare_cmd(a, b, pid),
            (Some(trace), _) => trace::report_cmd(trace, svg.as_deref(), pid),
            (None, _) => Err("report: give a trace, or --compare A B".into()),
        },
        Command::Replay(args) => replay_cmd::replay_cmd(args),
        Command::Alloc {
            kind,
            size,
            count,
            gpu,
        } => alloc_cmd(*kind, *size, *count, *gpu),
        Command::Ring { capacity, records } => ring_cmd(*capacity, *records),
        Command::Bench { quick } => bench_cmd(*quick),
        Command::Copy { size, repeat } => {
            copy::copy_cmd(*size, *repeat, std::env::var(EMULATED_ENV).ok().as_deref())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if no_kfd_device(&*e) && std::env::var_os(EMULATED_ENV).is_none() => {
            eprintln!(
                "kfdtool: this machine has no /dev/kfd; running under the embedded emulator \
                 (kfd-emu, machine {})",
                cli.machine
            );
            let clock = match (cli.clock, &cli.command) {
                (Some(ClockArg::Model), _) | (None, Command::Trace(_)) => {
                    kfd_emu::model::ClockMode::Program
                }
                _ => kfd_emu::model::ClockMode::Wall,
            };
            // `kfdtool trace` records the program's SVM calls and XNACK mode, which the model
            // sees and no SMI event carries, into its database once the program ended.
            let db = match &cli.command {
                Command::Trace(args) => args.rocpd_output(),
                _ => None,
            };
            let mut recorder = None;
            let code = emulated::run_self_emulated(
                &cli.machine,
                cli.vram,
                clock,
                EMULATED_ENV,
                |machine| {
                    db.as_ref()?;
                    let r = std::sync::Arc::new(kfdtool::svm_table::SvmRecorder::new(
                        machine
                            .gpus()
                            .iter()
                            .map(|g| (g.gpu_id, g.node_id))
                            .collect(),
                    ));
                    recorder = Some(std::sync::Arc::clone(&r));
                    Some(r as std::sync::Arc<dyn kfd_emu::model::SvmObserver>)
                },
            );
            if let (Some(db), Some(recorder)) = (db, recorder)
                && db.exists()
            {
                match recorder.append_to(&db) {
                    Ok((n, xnack)) => eprintln!(
                        "kfdtool: the emulator heard {n} SVM SET_ATTR calls of the program and \
                         XNACK {}; added to {} (kfdtool_svm_range, kfdtool_metadata) for an \
                         exact replay",
                        match xnack {
                            Some(true) => "on",
                            Some(false) => "off",
                            None => "unknown",
                        },
                        db.display()
                    ),
                    Err(e) => {
                        eprintln!("kfdtool: adding the SVM ranges to {}: {e}", db.display());
                        return ExitCode::FAILURE;
                    }
                }
            }
            code
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
fn open_all() -> Result<(Kfd, Topology, Vec<GpuId>), kfd_ioctl::Error> {
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

/// The GPU `wanted` names, by its gpu_id or by its topology node id (one way to name a GPU
/// in every command: `kfdtool replay` takes the same), or the first.
///
/// `wanted` is a plain number (hex with `0x` or decimal, as `--gpu` takes it) because it may
/// be either; the answer is a [`GpuId`].
fn pick_gpu(topology: &Topology, gpus: &[GpuId], wanted: Option<u32>) -> Result<GpuId, String> {
    let node_of = |gpu: GpuId| topology.node_by_gpu_id(gpu).map(|n| n.id);
    match wanted {
        Some(gpu) if gpus.contains(&GpuId(gpu)) => Ok(GpuId(gpu)),
        Some(node) => gpus
            .iter()
            .copied()
            .find(|&g| node_of(g) == Some(node))
            .ok_or_else(|| {
                let names: Vec<String> = gpus
                    .iter()
                    .map(|&g| match node_of(g) {
                        Some(n) => format!("node {n} (gpu {g})"),
                        None => format!("gpu {g}"),
                    })
                    .collect();
                format!(
                    "{node} ({node:#x}) is neither the gpu id nor the node id of a GPU; the GPUs \
                     are {}",
                    names.join(", ")
                )
            }),
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
            "gpu {}: gpuvm {:#x}..{:#x}, lds {:#x}, scratch {:#x}, available VRAM {available}",
            a.gpu_id, a.gpuvm.start, a.gpuvm.end, a.lds.start, a.scratch.start
        );
    }
    match kfd.xnack_mode() {
        Ok(on) => println!("XNACK: {}", if on { "on" } else { "off" }),
        Err(e) => println!("XNACK: unknown ({e})"),
    }
    Ok(())
}

fn location(place: Place, gpu: GpuId) -> Location {
    match place {
        Place::System => Location::System,
        Place::Gpu => Location::Gpu(gpu),
    }
}

fn svm_cmd(args: &SvmArgs) -> CmdResult {
    let (kfd, topo, gpus) = open_all()?;
    let gpu = pick_gpu(&topo, &gpus, args.gpu)?;
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
        "SVM range {:#x}..{:#x} ({}) on gpu {gpu}",
        buffer.addr(),
        buffer.addr() + buffer.len() as u64,
        info::human_bytes(buffer.len() as u64)
    );
    let requested: Vec<String> = buffer.requested().iter().map(|a| a.to_string()).collect();
    println!("  requested:         {}", requested.join("; "));
    println!("  preferred location {}", got.preferred_location);
    println!("  prefetch location  {}", got.prefetch_location);
    println!("  flags set          {}", FlagNames(got.flags));
    match got.cleared_flags {
        Some(cleared) => println!("  flags clear        {}", FlagNames(cleared)),
        None => println!("  flags clear        (KFD before 1.6 cannot say)"),
    }
    println!(
        "  granularity        {} (2^{} pages)",
        got.granularity, got.granularity
    );
    for g in &gpus {
        match got.access_of(*g) {
            Some(a) => println!("  gpu {g} access    {a}"),
            None => println!("  gpu {g} access    (not reported)"),
        }
    }
    Ok(())
}

fn smi_watch(gpu: Option<u32>, count: Option<usize>, idle: Duration, all: bool) -> CmdResult {
    let (kfd, topo, gpus) = open_all()?;
    let gpu = pick_gpu(&topo, &gpus, gpu)?;
    let mut mask = SmiEventMask::all();
    if !all {
        mask.remove(SmiEventMask::ALL_PROCESS);
    }
    let mut stream = SmiStream::open(&kfd, gpu, mask)?;
    eprintln!(
        "kfdtool: watching SMI events of gpu {gpu} (idle timeout {} s)",
        idle.as_secs_f64()
    );
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

fn alloc_cmd(kind: KindArg, size: usize, count: usize, gpu: Option<u32>) -> CmdResult {
    use kfd_provider::{KfdProvider, MemoryKind, ProviderParams};
    let (kfd, topo, gpus) = open_all()?;
    let gpu = pick_gpu(&topo, &gpus, gpu)?;
    let kind = match kind {
        KindArg::Host => MemoryKind::Host,
        KindArg::Device => MemoryKind::Device,
        KindArg::Shared => MemoryKind::Shared,
    };
    let provider = KfdProvider::new(kfd, ProviderParams::new(kind).gpu(gpu))?;
    println!(
        "provider {:?} ({:?} on gpu {gpu}; pages: min {}, recommended {}; host access: {})",
        provider.name(),
        provider.kind(),
        provider.min_page_size(std::ptr::null()),
        provider.recommended_page_size(size),
        provider.host_accessible()
    );
    let mut live = Vec::new();
    for i in 0..count {
        let ptr = provider.alloc(size, 0)?;
        if provider.host_accessible() {
            let pattern = vec![(i as u8).wrapping_add(0xa5); size];
            // SAFETY: the provider just returned `size` host-accessible bytes at `ptr`, which
            // stay mapped until `free_ptr` below, after the slice is gone (only this thread
            // has the pointer). The GPU may write them meanwhile, which volatile access
            // tolerates; no Rust reference into them is made.
            let memory = unsafe { VolatileSlice::new(ptr.as_ptr(), size) };
            memory.copy_from(&pattern);
            let mut back = vec![0u8; size];
            memory.copy_to(&mut back);
            if back != pattern {
                return Err(format!("allocation {i} at {ptr:p} did not read back").into());
            }
        }
        let info = provider
            .allocation_info(ptr.as_ptr())
            .ok_or("the provider does not know its own allocation")?;
        println!(
            "  {:p}: {} {:?} on gpu {}",
            info.base,
            info::human_bytes(info.size as u64),
            info.kind,
            info.gpu_id
        );
        live.push(ptr);
    }
    let stats = provider.stats();
    println!(
        "  live: {} allocations in {} chunks, {} (peak {})",
        stats.allocations,
        stats.chunks,
        info::human_bytes(stats.allocated as u64),
        info::human_bytes(stats.peak as u64)
    );
    for ptr in live {
        provider.free_ptr(ptr.as_ptr())?;
    }
    println!(
        "  freed by pointer; live now: {}",
        provider.stats().allocations
    );
    Ok(())
}

fn ring_cmd(capacity: usize, records: usize) -> CmdResult {
    use kfd_ring::{
        AccessMode, DeviceRing, Granularity, HostMirror, MemoryPool, Mirrored, SpscRing,
    };
    // KFD first: on a machine without it, the fallback re-runs everything under the emulator.
    let (kfd, topo, gpus) = open_all()?;
    let host = HostMirror::new(capacity)?;
    let cap = host.capacity();
    for i in 0..cap {
        host.write(i as isize, &[(i % 251) as u8])?;
    }
    let (mut before, mut after) = ([0u8; 1], [0u8; 1]);
    host.read(-1, &mut before)?;
    host.read(cap as isize, &mut after)?;
    println!(
        "host ring: {} at {:p} (views {:p} | {:p} | {:p}); p[-1] = {} = p[cap-1], p[cap] = {} = p[0]",
        info::human_bytes(cap as u64),
        host.base(),
        host.prev(),
        host.base(),
        host.next(),
        before[0],
        after[0]
    );
    let (mut producer, mut consumer) = SpscRing::new(host)?.split()?;
    let started = Instant::now();
    let (bytes, sum) = std::thread::scope(|scope| -> Result<(u64, u64), String> {
        scope.spawn(move || {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64;
            for i in 0..records {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let len = 1 + (seed as usize % 4096).min(producer.max_record() - 1);
                let fill = (i % 256) as u8;
                loop {
                    match producer.reserve(len) {
                        Ok(buf) => {
                            buf.copy_from(&[fill; 4096][..len]);
                            producer.commit();
                            break;
                        }
                        Err(_) => std::hint::spin_loop(),
                    }
                }
            }
        });
        let (mut bytes, mut sum) = (0u64, 0u64);
        let (mut seen, mut record) = (0usize, Vec::new());
        while seen < records {
            match consumer.pop_into(&mut record) {
                Ok(true) => {
                    bytes += record.len() as u64;
                    sum += record.iter().map(|b| u64::from(*b)).sum::<u64>();
                    seen += 1;
                }
                Ok(false) => std::hint::spin_loop(),
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok((bytes, sum))
    })?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "spsc: {records} records, {} in {:.3} s ({:.0} MiB/s), checksum {sum:#x}",
        info::human_bytes(bytes),
        secs,
        bytes as f64 / secs / f64::from(1 << 20)
    );

    let gpu = pick_gpu(&topo, &gpus, None)?;
    let pool = MemoryPool::find(&topo, gpu.get(), Granularity::Coarse)?;
    println!("device ring pool: {pool}");
    // kfd-ring takes raw ids.
    let raw: Vec<u32> = gpus.iter().map(|g| g.get()).collect();
    let rights = AccessMode::Shared.rights(gpu.get(), &raw[1..]);
    let ring = DeviceRing::new(&kfd, &pool, capacity, &rights, pool.host_accessible)?;
    let base = ring.gpu_base();
    let c = ring.capacity() as u64;
    println!(
        "device ring: {} at GPU VA {base:#x}; aliases at {:#x} and {:#x} ({} buffer objects)",
        info::human_bytes(c),
        base - c,
        base + c,
        ring.buffer_objects().count()
    );
    if let Ok(cpu) = ring.cpu() {
        cpu.write(0, b"wrap")?;
        let mut back = [0u8; 4];
        cpu.read(c as isize, &mut back)?;
        println!(
            "device ring CPU views: wrote at p[0], read {:?} at p[cap]",
            String::from_utf8_lossy(&back)
        );
    }
    Ok(())
}

/// One row of the bench summary.
struct BenchRow {
    what: &'static str,
    candidate: f64,
    baseline: f64,
    baseline_name: &'static str,
}

/// Times `iters` calls of `f`, in ns per call.
fn time_per_call(iters: u64, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..iters {
        f();
    }
    started.elapsed().as_nanos() as f64 / iters as f64
}

/// A progress line on stderr: `[####------] step n/total: what`.
fn progress(step: usize, total: usize, what: &str) {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return;
    }
    let done = step * 20 / total;
    eprint!(
        "\r[{}{}] {step}/{total} {what:<40}",
        "#".repeat(done),
        "-".repeat(20 - done)
    );
    if step == total {
        eprintln!();
    }
}

fn bench_cmd(quick: bool) -> CmdResult {
    use kfd_provider::{KfdPool, KfdProvider, MemoryKind, PoolParams, ProviderParams};
    use kfd_ring::{HostMirror, Mirrored};
    let scale: u64 = if quick { 1 } else { 20 };
    let steps = 4;
    let mut rows = Vec::new();
    let (kfd, _, _) = open_all()?;

    progress(0, steps, "ioctl round trip");
    let ioctl = time_per_call(2_000 * scale, || {
        let _ = std::hint::black_box(kfd.get_version());
    });
    // A native ioctl of another type, which no emulator intercepts.
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("opening /dev/null: {e}"))?;
    let native = time_per_call(2_000 * scale, || {
        let _ = std::hint::black_box(rustix::io::ioctl_fionbio(&null, false));
    });
    rows.push(BenchRow {
        what: "GET_VERSION round trip",
        candidate: ioctl,
        baseline: native,
        baseline_name: "FIONBIO on /dev/null",
    });

    progress(1, steps, "pooled HOST alloc+free, 4 KiB - 2 MiB");
    let pool = KfdPool::new(
        KfdProvider::new(kfd.clone(), ProviderParams::new(MemoryKind::Host))?,
        PoolParams::default(),
    )?;
    let sizes = [4usize << 10, 64 << 10, 512 << 10, 2 << 20];
    let mut i = 0usize;
    let pooled = time_per_call(500 * scale, || {
        let size = sizes[i % sizes.len()];
        i += 1;
        if let Ok(p) = pool.alloc(size, 0) {
            let _ = pool.free(p.as_ptr());
        }
    });
    let mut j = 0usize;
    let malloc = time_per_call(500 * scale, || {
        let size = sizes[j % sizes.len()];
        j += 1;
        let v: Vec<u8> = Vec::with_capacity(size);
        std::hint::black_box(&v);
    });
    rows.push(BenchRow {
        what: "pooled HOST alloc+free",
        candidate: pooled,
        baseline: malloc,
        baseline_name: "malloc+free",
    });

    progress(2, steps, "copy across the wrap point, 4 KiB");
    let ring = HostMirror::new(64 << 10)?;
    let cap = ring.capacity() as isize;
    let data = vec![7u8; 4096];
    let wrap = time_per_call(20_000 * scale, || {
        let _ = ring.write(cap - 2048, std::hint::black_box(&data));
    });
    let mut flat = vec![0u8; 4096];
    let contiguous = time_per_call(20_000 * scale, || {
        flat.copy_from_slice(std::hint::black_box(&data));
        std::hint::black_box(&flat);
    });
    rows.push(BenchRow {
        what: "4 KiB copy across the wrap",
        candidate: wrap,
        baseline: contiguous,
        baseline_name: "contiguous copy",
    });
    progress(3, steps, "summary");
    progress(steps, steps, "done");

    println!(
        "{:<28} {:>12} {:>12} {:>8}  baseline",
        "measurement", "ns/op", "baseline", "ratio"
    );
    for r in &rows {
        println!(
            "{:<28} {:>12.1} {:>12.1} {:>7.2}×  {}",
            r.what,
            r.candidate,
            r.baseline,
            r.candidate / r.baseline,
            r.baseline_name
        );
    }
    println!("(timed loops for a quick look; the criterion benches are the reference numbers)");
    Ok(())
}
