//! `kfd-emu`: run a program against the emulated KFD driver.
//!
//! ```text
//! kfd-emu run [--machine NAME | --topology DIR] [--vram SIZE] [--kfd-minor N] [--trace]
//!             [--fail IOCTL:ERRNO[:COUNT]]... [--check-leaks] [--check-teardown]
//!             [--timing FILE] [--clock wall|model|program] [--gpu-threads N]
//!             [--kernel mainline|dkms] -- PROGRAM ARGS...
//! kfd-emu timing [--machine NAME | --topology DIR] [--timing FILE]
//! kfd-emu machines
//! ```
//!
//! `run` starts PROGRAM under the seccomp filter, as its ptrace tracer, and answers its
//! `/dev/kfd`, render-node and KFD-sysfs opens, its KFD/DRM ioctls and its mappings of the
//! stand-ins from the model of the chosen machine. The emulator makes itself non-dumpable,
//! so that a traced program cannot reach its memory or fds through `/proc`. It exits with
//! the program's exit code (128 + the signal if a signal ended it); with `--check-leaks`, with 3
//! when the program succeeded but left buffer objects, mappings or fds behind; with
//! `--check-teardown`, with 3 when the program succeeded but its teardown left behind what
//! the kernel's would free (what the program held at exit is then only reported). It exits with
//! 125 when the emulator itself cannot start, 126/127 when PROGRAM cannot be executed / found.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kfd_emu::machine::Machine;
use kfd_emu::model::{ClockMode, Costs, FailRule, Kernel, Model, ModelConfig, Timing};
use kfd_emu::supervisor::{SupervisorError, spawn_command};

/// Exit code when the emulator itself fails, as `env`/`timeout` use 125.
const EXIT_EMULATOR_FAILED: u8 = 125;
/// Exit code when the program ran cleanly but `--check-leaks` found leaks.
const EXIT_LEAKS: u8 = 3;

/// A syscall-level emulator of the Linux KFD driver (AMD GPUs) for unmodified programs.
#[derive(Debug, Parser)]
#[command(name = "kfd-emu", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run PROGRAM against the emulated /dev/kfd, render nodes and KFD topology.
    Run(RunArgs),
    /// List the machine presets `--machine` accepts.
    Machines,
    /// Print the timing model of a machine: the parameters (as a `--timing` file) and each
    /// GPU's link to system memory.
    Timing(TimingArgs),
}

/// Which time the emulated driver shows.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ClockArg {
    /// The host's CLOCK_BOOTTIME.
    Wall,
    /// The timing model's time: SMI timestamps, GET_CLOCK_COUNTERS and WAIT_EVENTS timeouts
    /// advance only by what migrations, faults, prefetches and waits would take.
    Model,
    /// The machine's time as the program sees it: the timing model's costs for the driver's
    /// and the GPU's work, and the program's own time between them as it passed.
    Program,
}

/// Which KFD driver the emulated machine runs.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum KernelArg {
    /// The mainline Linux kernel's amdkfd.
    Mainline,
    /// AMD's out-of-tree amdgpu-dkms driver (ROCm/ROCK-Kernel-Driver).
    Dkms,
}

#[derive(Debug, Args)]
struct TimingArgs {
    /// The machine preset (the default is mi300x).
    #[arg(long, value_name = "NAME", conflicts_with = "topology")]
    machine: Option<String>,
    /// A captured KFD sysfs topology tree.
    #[arg(long, value_name = "DIR")]
    topology: Option<PathBuf>,
    /// Timing parameters to apply over the defaults (`key = value` lines).
    #[arg(long, value_name = "FILE")]
    timing: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The machine preset to emulate (see `kfd-emu machines`); the default is mi300x.
    #[arg(long, value_name = "NAME", conflicts_with = "topology")]
    machine: Option<String>,
    /// Emulate the machine of a captured KFD sysfs topology tree (with or without a leading
    /// `topology/` folder).
    #[arg(long, value_name = "DIR")]
    topology: Option<PathBuf>,
    /// Act as a kernel with KFD version 1.N: ioctls and flags newer than that fail as they
    /// would there.
    #[arg(long, value_name = "N", default_value_t = kfd_ioctl::abi::KFD_IOCTL_MINOR_VERSION)]
    kfd_minor: u32,
    /// Give every GPU SIZE bytes of VRAM (suffixes K, M, G: powers of 1024), to make
    /// oversubscription cheap to study.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    vram: Option<u64>,
    /// Print each ioctl decoded (name, arguments, result) to stderr, strace-style.
    #[arg(long)]
    trace: bool,
    /// Make ioctl IOCTL fail with ERRNO (a name or a number), COUNT times or, without COUNT,
    /// every time; e.g. `ALLOC_MEMORY_OF_GPU:ENOMEM:1`. Repeatable.
    #[arg(long = "fail", value_name = "IOCTL:ERRNO[:COUNT]")]
    fail: Vec<FailRule>,
    /// At exit, report live buffer objects, mappings and fds, and exit with 3 if there are any
    /// (or if the process's teardown left something behind, as `--check-teardown`).
    #[arg(long)]
    check_leaks: bool,
    /// At exit, check that the process's teardown frees everything, as the kernel's does, and
    /// exit with 3 if something survives it (an emulator leak). What the process still held
    /// is reported for information only: the kernel frees it at exit (for programs that never
    /// clean up, such as HIP's, which never calls `hsa_shut_down`).
    #[arg(long)]
    check_teardown: bool,
    /// Timing-model parameters over the defaults: `key = value` lines (see `kfd-emu timing`
    /// for the keys and the default values).
    #[arg(long, value_name = "FILE")]
    timing: Option<PathBuf>,
    /// Which time SMI timestamps, GET_CLOCK_COUNTERS and WAIT_EVENTS timeouts follow.
    #[arg(long, value_enum, default_value = "wall")]
    clock: ClockArg,
    /// The most threads a kernel dispatch runs its workgroups on (default: the host's cores).
    #[arg(long, value_name = "N")]
    gpu_threads: Option<usize>,
    /// Which KFD driver to act as: the mainline kernel's, or AMD's out-of-tree amdgpu-dkms
    /// (adds the IPC handle and PC-sampling ioctls and `/sys/module/amdgpu/version`).
    #[arg(long, value_enum, default_value = "mainline")]
    kernel: KernelArg,
    /// The program and its arguments (after `--`).
    #[arg(
        value_name = "PROGRAM",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    program: Vec<OsString>,
}

fn list_machines() -> ExitCode {
    let presets = Machine::presets();
    let width = presets
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0);
    for (name, description) in presets {
        println!("{name:width$}  {description}");
    }
    ExitCode::SUCCESS
}

fn machine(topology: Option<&PathBuf>, preset: Option<&String>) -> Result<Machine, String> {
    if let Some(dir) = topology {
        return Machine::from_topology_dir(dir)
            .map_err(|err| format!("cannot load the topology in {}: {err}", dir.display()));
    }
    match preset {
        None => Ok(Machine::default()),
        Some(name) => Machine::preset(name).ok_or_else(|| {
            let names: Vec<&str> = Machine::presets().iter().map(|(name, _)| *name).collect();
            format!("no machine preset {name:?}; known: {}", names.join(", "))
        }),
    }
}

/// Restores SIGINT and SIGQUIT in the child: the emulator ignores them while the program
/// runs (a terminal's ^C goes to the whole process group, and the program decides what it
/// means), but the program must not inherit that.
fn restore_interrupt_signals(command: &mut Command) {
    // SAFETY: the hook runs between fork and exec and only calls signal(2), which is
    // async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            Ok(())
        });
    }
}

fn ignore_interrupt_signals() {
    // SAFETY: installs SIG_IGN, no handler code; done before any other thread exists.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
}

/// The timing parameters: the defaults, or FILE's over them.
fn timing(file: Option<&PathBuf>) -> Result<Timing, String> {
    file.map_or_else(
        || Ok(Timing::default()),
        |path| Timing::from_file(path).map_err(|e| e.to_string()),
    )
}

fn print_timing(args: TimingArgs) -> ExitCode {
    let (machine, timing) = match machine(args.topology.as_ref(), args.machine.as_ref())
        .and_then(|m| Ok((m, timing(args.timing.as_ref())?)))
    {
        Ok(both) => both,
        Err(message) => {
            eprintln!("kfd-emu: {message}");
            return ExitCode::from(EXIT_EMULATOR_FAILED);
        }
    };
    print!("{timing}");
    let costs = Costs::new(&machine, timing);
    for (i, gpu) in machine.gpus().iter().enumerate() {
        let link = costs.host_link(i);
        println!(
            "# GPU {i} (gpu_id {:#x}, node {}): host link {} MB/s effective, {} ns latency; \
             1 MiB migrates in {} ns",
            gpu.gpu_id,
            gpu.node_id,
            link.mbps,
            link.latency_ns,
            costs.migration_ns(i, 1 << 20)
        );
    }
    ExitCode::SUCCESS
}

/// A size in bytes: a number with an optional K, M or G (powers of 1024).
fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is no size (a number, then K, M or G)"))?;
    n.checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("{text:?} is no usable size"))
}

fn run(args: RunArgs) -> ExitCode {
    let setup = machine(args.topology.as_ref(), args.machine.as_ref())
        .and_then(|m| match args.vram {
            Some(bytes) => m
                .with_vram(bytes)
                .map_err(|e| format!("cannot give the GPUs {bytes} bytes of VRAM: {e}")),
            None => Ok(m),
        })
        .and_then(|m| Ok((m, timing(args.timing.as_ref())?)));
    let (machine, timing) = match setup {
        Ok(both) => both,
        Err(message) => {
            eprintln!("kfd-emu: {message}");
            return ExitCode::from(EXIT_EMULATOR_FAILED);
        }
    };
    let config = ModelConfig {
        machine,
        kfd_minor: args.kfd_minor,
        trace: args.trace,
        fail: args.fail,
        check_leaks: args.check_leaks,
        check_teardown: args.check_teardown,
        timing,
        clock: match args.clock {
            ClockArg::Wall => ClockMode::Wall,
            ClockArg::Model => ClockMode::Model,
            ClockArg::Program => ClockMode::Program,
        },
        gpu_threads: args
            .gpu_threads
            .unwrap_or_else(|| ModelConfig::default().gpu_threads)
            .max(1),
        kernel: match args.kernel {
            KernelArg::Mainline => Kernel::Mainline,
            KernelArg::Dkms => Kernel::Dkms,
        },
        doorbell_watch: true,
    };
    let model: Arc<Model> = match Model::new(config) {
        Ok(model) => model,
        Err(err) => {
            eprintln!("kfd-emu: cannot build the model: {err}");
            return ExitCode::from(EXIT_EMULATOR_FAILED);
        }
    };
    let mut program = args.program.into_iter();
    let Some(name) = program.next() else {
        eprintln!("kfd-emu: no program given");
        return ExitCode::from(EXIT_EMULATOR_FAILED);
    };
    let mut command = Command::new(&name);
    command.args(program);
    restore_interrupt_signals(&mut command);
    ignore_interrupt_signals();
    // The supervisor holds every traced process's memory (memfds) and is the same user as the
    // programs it serves: non-dumpable, a traced program cannot open /proc/<our pid>/fd/* or
    // /proc/<our pid>/mem to reach another's. Our own access to the tracees (ptrace,
    // pidfd_getfd, their /proc files) does not depend on it; they stay dumpable.
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        eprintln!("kfd-emu: prctl(PR_SET_DUMPABLE, 0) failed: {err}");
        return ExitCode::from(EXIT_EMULATOR_FAILED);
    }
    let status = match spawn_command(model.clone(), &mut command) {
        Ok(status) => status,
        Err(SupervisorError::Spawn { program, source }) => {
            eprintln!(
                "kfd-emu: cannot run {}: {source}",
                program.to_string_lossy()
            );
            let code = if source.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            return ExitCode::from(code);
        }
        Err(err) => {
            eprintln!("kfd-emu: {err}");
            return ExitCode::from(EXIT_EMULATOR_FAILED);
        }
    };
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => i32::from(EXIT_EMULATOR_FAILED),
    };
    if code == 0
        && ((args.check_leaks && model.leaks_found())
            || (args.check_teardown && model.teardown_leaks_found()))
    {
        return ExitCode::from(EXIT_LEAKS);
    }
    ExitCode::from(u8::try_from(code & 0xff).unwrap_or(EXIT_EMULATOR_FAILED))
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Cmd::Run(args) => run(args),
        Cmd::Machines => list_machines(),
        Cmd::Timing(args) => print_timing(args),
    }
}
