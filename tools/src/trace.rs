//! `kfdtool trace` and `kfdtool report`: record SMI events while a program runs (or while
//! anything runs, `--all-processes`), write them in rocprofv3's formats and as a Perfetto
//! timeline, summarise them and draw them; and the same summary and pictures for a rocpd
//! database recorded earlier.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kfd_ioctl::abi::SmiEventMask;
use kfd_svm::{
    AgentMap, ClockFit, ClockSample, DEFAULT_PAGE_SIZE, KfdRecord, Pairing, SmiEvent, SmiStream,
    Summary, Timeline,
};
use kfdtool::plots;
use kfdtool::rocpd::{self, Agent, TraceInfo};
use rustix::event::{PollFd, PollFlags, Timespec};

use clap::{Args, ValueEnum};
use kfd_ioctl::topology::Topology;
use kfd_ioctl::{GpuId, Kfd};

use crate::info;
use crate::parse::{parse_idle, parse_u32};

/// A failure of the subcommand, printed as one line.
type CmdResult = Result<(), Box<dyn std::error::Error>>;

/// What `kfdtool trace` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Format {
    /// A rocpd SQLite database, rocprofv3's default output (`results.db`).
    Rocpd,
    /// `regions_trace.csv`, as `rocpd convert -f csv` makes it from the database.
    Csv,
    /// `results.json`, as rocprofv3 `-f json` writes it (records under `buffer_records.kfd`).
    Json,
    /// `trace.json`, a Chrome-trace timeline for Perfetto.
    Perfetto,
    /// `residency.svg`, `throughput.svg`, `latency.svg`, `cumulative.svg` and
    /// `thrashing.svg`.
    Svg,
}

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// Output formats (repeatable or comma-separated). Without any, `--out` names the one
    /// Perfetto file written (default trace.json).
    #[arg(long, value_enum, value_delimiter = ',')]
    format: Vec<Format>,
    /// With `--format`: the directory (it must exist) for results.db, regions_trace.csv,
    /// results.json, trace.json and the pictures (residency.svg, throughput.svg,
    /// latency.svg, cumulative.svg, thrashing.svg). Without: the Perfetto file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Record every process's events, not only the program's (needs CAP_SYS_ADMIN).
    #[arg(long)]
    all_processes: bool,
    /// Record only these processes (repeatable; needs CAP_SYS_ADMIN).
    #[arg(long, value_parser = parse_u32)]
    pid: Vec<u32>,
    /// Without a program: stop after this many seconds (else at Ctrl-C).
    #[arg(long, value_parser = parse_idle)]
    duration: Option<Duration>,
    /// The program and its arguments.
    #[arg(last = true)]
    program: Vec<String>,
}

impl TraceArgs {
    /// The rocpd database this trace writes, if it writes one.
    pub fn rocpd_output(&self) -> Option<PathBuf> {
        self.format.contains(&Format::Rocpd).then(|| {
            self.out
                .clone()
                .unwrap_or_else(|| ".".into())
                .join(file_names(Format::Rocpd)[0])
        })
    }
}

/// The file each format writes in the output directory.
fn file_names(format: Format) -> &'static [&'static str] {
    match format {
        Format::Rocpd => &["results.db"],
        Format::Csv => &["regions_trace.csv"],
        Format::Json => &["results.json"],
        Format::Perfetto => &["trace.json"],
        Format::Svg => &plots::SVG_NAMES,
    }
}

/// Where each output goes, checked (created empty) before anything runs.
struct Outputs {
    /// (format, path), one per file.
    files: Vec<(Format, PathBuf)>,
}

impl Outputs {
    fn prepare(args: &TraceArgs) -> Result<Outputs, String> {
        if args.format.is_empty() {
            let out = args.out.clone().unwrap_or_else(|| "trace.json".into());
            std::fs::File::create(&out)
                .map_err(|e| format!("creating the trace file {}: {e}", out.display()))?;
            return Ok(Outputs {
                files: vec![(Format::Perfetto, out)],
            });
        }
        let dir = args.out.clone().unwrap_or_else(|| ".".into());
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "the output directory {} is not a directory",
                    dir.display()
                ));
            }
            Err(e) => return Err(format!("the output directory {}: {e}", dir.display())),
        }
        let formats: BTreeSet<Format> = args.format.iter().copied().collect();
        let mut files = Vec::new();
        for format in formats {
            for name in file_names(format) {
                let path = dir.join(name);
                std::fs::File::create(&path)
                    .map_err(|e| format!("creating {}: {e}", path.display()))?;
                files.push((format, path));
            }
        }
        Ok(Outputs { files })
    }

    fn path(&self, format: Format) -> Option<&Path> {
        self.files
            .iter()
            .find(|(f, _)| *f == format)
            .map(|(_, p)| p.as_path())
    }

    fn paths(&self, format: Format) -> impl Iterator<Item = &Path> {
        self.files
            .iter()
            .filter(move |(f, _)| *f == format)
            .map(|(_, p)| p.as_path())
    }
}

/// `CLOCK_BOOTTIME` now, in ns (the SMI clock).
fn boottime_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

/// One GET_CLOCK_COUNTERS sample of each GPU; a GPU whose sample fails is left out (an
/// old kernel without the ioctl: the trace then has no clock correlation for it).
fn clock_samples(kfd: &Kfd, topology: &Topology, gpus: &[GpuId]) -> Vec<ClockSample> {
    gpus.iter()
        .filter_map(|&gpu_id| {
            let c = kfd.get_clock_counters(gpu_id).ok()?;
            let node_id = topology
                .nodes
                .iter()
                .find(|n| n.gpu_id() == Some(gpu_id))
                .map_or(0, |n| n.id);
            Some(ClockSample {
                gpu_id: gpu_id.get(),
                node_id,
                gpu_counter: c.gpu_clock_counter,
                cpu_counter: c.cpu_clock_counter,
                system_counter: c.system_clock_counter,
                system_freq: c.system_clock_freq,
            })
        })
        .collect()
}

/// Which events are kept.
enum Filter {
    /// Everything (`--all-processes`).
    All,
    /// These pids.
    Pids(BTreeSet<u32>),
}

impl Filter {
    fn keeps(&self, event: &SmiEvent) -> bool {
        match self {
            Filter::All => true,
            Filter::Pids(pids) => event.pid().is_some_and(|p| pids.contains(&p)),
        }
    }
}

/// What recording saw.
#[derive(Default)]
struct Capture {
    events: Vec<SmiEvent>,
    unparsed: u64,
    first_unparsed: Option<String>,
}

impl Capture {
    /// Reads everything pending on `streams`; a stream whose fd ended is dropped.
    fn drain(
        &mut self,
        streams: &mut Vec<SmiStream>,
        filter: &Filter,
    ) -> Result<(), kfd_svm::Error> {
        let mut ended = Vec::new();
        for (i, stream) in streams.iter_mut().enumerate() {
            for event in stream.pending() {
                match event {
                    Ok(event) if filter.keeps(&event) => self.events.push(event),
                    Ok(_) => {}
                    Err(e @ kfd_svm::Error::SmiParse { .. }) => {
                        self.unparsed += 1;
                        self.first_unparsed.get_or_insert_with(|| e.to_string());
                    }
                    Err(e) if e.is_end_of_stream() => ended.push(i),
                    Err(e) => return Err(e),
                }
            }
        }
        for i in ended.into_iter().rev() {
            streams.remove(i);
        }
        Ok(())
    }
}

/// Waits up to `wait` for any stream to be readable.
fn wait_readable(streams: &[SmiStream], wait: Duration) -> Result<(), String> {
    if streams.is_empty() {
        std::thread::sleep(wait);
        return Ok(());
    }
    let mut fds: Vec<PollFd<'_>> = streams
        .iter()
        .map(|s| PollFd::new(s, PollFlags::IN))
        .collect();
    let timeout = Timespec::try_from(wait).ok();
    match rustix::event::poll(&mut fds, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(format!("waiting for SMI events: {e}")),
    }
}

/// How often recording looks at the program and the clock.
const TICK: Duration = Duration::from_millis(20);

/// `kfdtool trace`; `open` opens KFD and acquires every GPU (returning the topology and the GPU
/// ids).
pub fn trace_cmd(
    args: &TraceArgs,
    open: impl FnOnce() -> Result<(Kfd, Topology, Vec<GpuId>), kfd_ioctl::Error>,
) -> CmdResult {
    if args.program.is_empty() && !args.all_processes && args.pid.is_empty() {
        return Err(
            "nothing to trace: give a PROGRAM after --, or --all-processes, or --pid".into(),
        );
    }
    if !args.program.is_empty() && args.duration.is_some() {
        return Err(
            "--duration is for recording without a PROGRAM (a program is recorded until it ends)"
                .into(),
        );
    }
    // Ctrl-C ends the recording, not kfdtool: caught before anything else, so that a kfdtool
    // that re-runs itself under the emulator (when open_all finds no /dev/kfd) also outlives
    // it and waits for its child to write the outputs.
    let interrupted = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&interrupted))
        .map_err(|e| format!("catching Ctrl-C: {e}"))?;
    let (kfd, topology, gpus) = open()?;
    // The program is another process, so its events need the ALL_PROCESS bit (CAP_SYS_ADMIN,
    // as in the kernel's kfd_smi_ev_enabled); the filter below keeps the wanted pids.
    let mut streams = Vec::new();
    for gpu in &gpus {
        streams.push(
            SmiStream::open(&kfd, *gpu, SmiEventMask::all()).map_err(|e| {
                format!("opening the SMI events of gpu {gpu} with ALL_PROCESS: {e}")
            })?,
        );
    }
    // The outputs first: a trace that cannot be written is known before the program runs.
    let outputs = Outputs::prepare(args)?;

    let started = Instant::now();
    let mut samples = clock_samples(&kfd, &topology, &gpus);
    let start_ns = boottime_ns();
    let mut child = match args.program.split_first() {
        Some((name, rest)) => Some(
            std::process::Command::new(name)
                .args(rest)
                .spawn()
                .map_err(|e| format!("running {name}: {e}"))?,
        ),
        None => None,
    };
    let me = std::process::id();
    let traced_pid = child.as_ref().map_or(me, std::process::Child::id);
    let filter = if args.all_processes {
        Filter::All
    } else if !args.pid.is_empty() {
        Filter::Pids(args.pid.iter().copied().collect())
    } else {
        Filter::Pids([traced_pid].into())
    };
    if child.is_none() {
        eprintln!(
            "kfdtool: recording SMI events of {} GPUs {}",
            gpus.len(),
            match args.duration {
                Some(d) => format!("for {} s", d.as_secs_f64()),
                None => "until Ctrl-C".to_owned(),
            }
        );
    }
    let mut capture = Capture::default();
    let status = loop {
        capture.drain(&mut streams, &filter)?;
        if let Some(c) = child.as_mut() {
            if let Some(status) = c
                .try_wait()
                .map_err(|e| format!("waiting for pid {traced_pid}: {e}"))?
            {
                break Some(status);
            }
        } else if interrupted.load(Ordering::Relaxed)
            || args.duration.is_some_and(|d| started.elapsed() >= d)
        {
            break None;
        }
        wait_readable(&streams, TICK)?;
    };
    // What the kernel queued before the program ended.
    capture.drain(&mut streams, &filter)?;
    let end_ns = boottime_ns();
    samples.extend(clock_samples(&kfd, &topology, &gpus));

    let agents = Agent::from_topology(&topology);
    let pairing = Pairing::new(
        &capture.events,
        DEFAULT_PAGE_SIZE,
        &AgentMap::from_topology(&topology),
    );
    let info = TraceInfo {
        pid: traced_pid,
        ppid: if child.is_some() {
            me
        } else {
            rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32)
        },
        command: if args.program.is_empty() {
            std::env::args().collect::<Vec<_>>().join(" ")
        } else {
            args.program.join(" ")
        },
        start_ns,
        end_ns,
        agents,
        clock_samples: samples,
        svm_ranges: Vec::new(),
        xnack: None,
    };
    write_outputs(&outputs, &info, &capture.events, &pairing.records)?;

    let timeline: Timeline = capture.events.iter().cloned().collect();
    let moved: u64 = timeline.bytes_migrated().values().sum();
    let what = match (&args.program.first(), status) {
        (Some(name), Some(status)) => format!("{name} (pid {traced_pid}) {status}"),
        _ => "recording stopped".to_owned(),
    };
    let written: Vec<String> = outputs
        .files
        .iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    eprintln!(
        "kfdtool: {what} after {:.2} s; {} events, {} migrated; wrote {}",
        started.elapsed().as_secs_f64(),
        capture.events.len(),
        info::human_bytes(moved),
        written.join(", ")
    );
    if let Some(line) = &capture.first_unparsed {
        eprintln!(
            "kfdtool: {} SMI records did not parse; the first: {line}",
            capture.unparsed
        );
    }
    print!("{}", Summary::new(&pairing.records));
    println!("{}", rocpd::agents_line(&info.agents));
    print_clock_fits(&info.clock_samples);
    if outputs.path(Format::Rocpd).is_some() {
        // On hardware nothing reports another process's SET_ATTR or XNACK mode (SMI events
        // carry migrations, faults and evictions); the embedded emulator's model sees them and
        // the kfdtool that runs it adds them to the database once this one is written.
        if std::env::var_os(crate::emulated::EMULATED_ENV).is_some() {
            eprintln!(
                "kfdtool: svm ranges: the emulator adds the program's SET_ATTRs and XNACK mode to \
                 results.db (kfdtool_svm_range, kfdtool_metadata) once it is written, for an exact \
                 replay"
            );
        } else {
            eprintln!(
                "kfdtool: svm ranges: not recorded (no GPU driver reports another process's \
                 SET_ATTR or XNACK mode): `kfdtool replay` of this trace assumes them (2 MiB-aligned regions of \
                 the recorded addresses with the kernel's default attributes; XNACK on when \
                 it has GPU page faults)"
            );
        }
    }
    println!(
        "unpaired: {} ends without their start, {} starts without their end (rocprofv3 drops both)",
        pairing.unmatched_ends, pairing.open_starts
    );
    match status {
        Some(status) if !status.success() => Err(format!("{} {status}", args.program[0]).into()),
        _ => Ok(()),
    }
}

/// Writes every requested output.
fn write_outputs(
    outputs: &Outputs,
    info: &TraceInfo,
    events: &[SmiEvent],
    records: &[KfdRecord],
) -> Result<(), String> {
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    if let Some(path) = outputs.path(Format::Rocpd) {
        rocpd::write_rocpd(path, info, records).map_err(|e| e.to_string())?;
    }
    if let Some(path) = outputs.path(Format::Csv) {
        // The CSV is what `rocpd convert` reads out of the database: the same query on the
        // same rows (a database in memory when none is written).
        let conn = match outputs.path(Format::Rocpd) {
            Some(db) => rusqlite::Connection::open(db),
            None => rusqlite::Connection::open_in_memory().and_then(|mut c| {
                rocpd::write_rocpd_to(&mut c, info, records)?;
                Ok(c)
            }),
        };
        let csv = conn
            .and_then(|c| rocpd::regions_csv(&c))
            .map_err(|e| format!("making {}: {e}", path.display()))?;
        write(path, csv.as_bytes())?;
    }
    if let Some(path) = outputs.path(Format::Json) {
        let json = rocpd::results_json(info, records);
        write(path, json.to_string().as_bytes())?;
    }
    if let Some(path) = outputs.path(Format::Perfetto) {
        let timeline: Timeline = events.iter().cloned().collect();
        let mut json = timeline.to_chrome_trace();
        // The clock samples go with the trace's metadata (Chrome's `otherData`).
        json["otherData"][rocpd::CLOCK_SAMPLES_KEY] = info
            .clock_samples
            .iter()
            .map(rocpd::clock_sample_json)
            .collect();
        write(path, json.to_string().as_bytes())?;
    }
    let paths: Vec<&Path> = outputs.paths(Format::Svg).collect();
    if !paths.is_empty() {
        for (path, (_, svg)) in paths.iter().zip(plots::all_svgs(records, &info.agents)?) {
            write(path, svg.as_bytes())?;
        }
    }
    Ok(())
}

/// The summary's clock lines: each GPU's counter against `CLOCK_BOOTTIME`.
fn print_clock_fits(samples: &[ClockSample]) {
    for fit in ClockFit::of_samples(samples) {
        println!("{fit}");
    }
}

/// `kfdtool report --compare A B`.
pub fn compare_cmd(a: &Path, b: &Path, pids: &[u32]) -> CmdResult {
    let read = |path: &Path| -> Result<Summary, Box<dyn std::error::Error>> {
        let mut read = rocpd::read_rocpd(path)?;
        if !pids.is_empty() {
            read.records.retain(|r| pids.contains(&r.pid));
        }
        Ok(Summary::new(&read.records))
    };
    let (sa, sb) = (read(a)?, read(b)?);
    print!(
        "{}",
        kfd_svm::summary::side_by_side(
            &sa,
            &sb,
            &a.display().to_string(),
            &b.display().to_string()
        )
    );
    Ok(())
}

/// `kfdtool report`.
pub fn report_cmd(trace: &Path, svg: Option<&Path>, pids: &[u32]) -> CmdResult {
    if let Some(dir) = svg
        && !dir.is_dir()
    {
        return Err(format!("the SVG directory {} is not a directory", dir.display()).into());
    }
    let mut read = rocpd::read_rocpd(trace)?;
    if !pids.is_empty() {
        read.records.retain(|r| pids.contains(&r.pid));
    }
    print!("{}", Summary::new(&read.records));
    println!("{}", rocpd::agents_line(&read.agents));
    print_clock_fits(&read.clock_samples);
    if read.other_regions > 0 {
        println!(
            "(and {} regions of other domains, not KFD)",
            read.other_regions
        );
    }
    if let Some(dir) = svg {
        for (name, picture) in plots::all_svgs(&read.records, &read.agents)? {
            let path = dir.join(name);
            std::fs::write(&path, picture)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
    }
    Ok(())
}
