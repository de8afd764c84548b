//! `kfdtool replay`: the command line of [`kfdtool::replay`].

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use kfd_emu::machine::Machine;
use kfd_emu::model::Timing;
use kfdtool::replay::{self, AccessArg, LocationArg, Policy};
use kfdtool::rocpd;

use crate::parse::parse_u32;

/// XNACK on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OnOff {
    /// Retry faults on.
    On,
    /// Retry faults off.
    Off,
}

/// An access on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AccessValue {
    /// ACCESS.
    Access,
    /// ACCESS_IN_PLACE.
    InPlace,
    /// NO_ACCESS.
    None,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The trace: a rocpd database (`results.db` of `kfdtool trace --format rocpd`, or one
    /// rocprofv3 wrote on hardware).
    trace: PathBuf,
    /// GRANULARITY of every range: blocks of 2^N pages migrate on a fault (0 to 63; the
    /// kernel's default is 9, 2 MiB).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=63))]
    granularity: Option<u8>,
    /// PREFERRED_LOC of every range: `system`, or a GPU agent's node id or gpu id (as
    /// `kfdtool report` lists agents: `node 1 GPU 0x7396`).
    #[arg(long, value_name = "system|NODE", value_parser = parse_location)]
    preferred_loc: Option<LocationArg>,
    /// Send every prefetch here instead of its recorded destination: `system`, or a GPU
    /// agent's node id or gpu id.
    #[arg(long, value_name = "system|NODE", value_parser = parse_location)]
    prefetch_loc: Option<LocationArg>,
    /// XNACK (retry faults); default: on when the trace has GPU page faults.
    #[arg(long, value_enum)]
    xnack: Option<OnOff>,
    /// The access every GPU of the trace gets to every range (default: none set).
    #[arg(long, value_enum)]
    access: Option<AccessValue>,
    /// The machine preset to replay on (see `kfd-emu machines`; default mi300x). The trace's
    /// i-th GPU agent is the machine's i-th GPU.
    #[arg(long, value_name = "NAME")]
    machine: Option<String>,
    /// Timing-model parameters over the defaults (`key = value` lines; `kfd-emu timing`
    /// prints them).
    #[arg(long, value_name = "FILE")]
    timing: Option<PathBuf>,
    /// Also write the replay's records as a rocpd database here (recorded addresses, the
    /// trace's agents), for `kfdtool report --compare TRACE FILE`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

fn parse_location(s: &str) -> Result<LocationArg, String> {
    if s.eq_ignore_ascii_case("system") {
        return Ok(LocationArg::System);
    }
    parse_u32(s)
        .map(LocationArg::Node)
        .map_err(|e| format!("{e} (a location is `system`, or a GPU agent's node id or gpu id)"))
}

/// `kfdtool replay`.
pub fn replay_cmd(args: &ReplayArgs) -> Result<(), Box<dyn std::error::Error>> {
    let machine = match &args.machine {
        None => Machine::default(),
        Some(name) => Machine::preset(name).ok_or_else(|| {
            let names: Vec<&str> = Machine::presets().iter().map(|(n, _)| *n).collect();
            format!("no machine preset {name:?}; known: {}", names.join(", "))
        })?,
    };
    let timing = match &args.timing {
        None => Timing::default(),
        Some(path) => Timing::from_file(path)?,
    };
    let trace = rocpd::read_rocpd(&args.trace)?;
    let policy = Policy {
        machine,
        timing,
        granularity: args.granularity,
        preferred: args.preferred_loc,
        prefetch: args.prefetch_loc,
        xnack: args.xnack.map(|x| matches!(x, OnOff::On)),
        access: args.access.map(|a| match a {
            AccessValue::Access => AccessArg::Access,
            AccessValue::InPlace => AccessArg::InPlace,
            AccessValue::None => AccessArg::None,
        }),
    };
    let comparison = replay::replay(&trace, &policy)?;
    print!("{comparison}");
    if let Some(path) = &args.out {
        let info = rocpd::TraceInfo {
            pid: std::process::id(),
            ppid: rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get() as u32),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            start_ns: comparison
                .records
                .iter()
                .map(|r| r.start_ns)
                .min()
                .unwrap_or(0),
            end_ns: comparison
                .records
                .iter()
                .map(|r| r.end_ns)
                .max()
                .unwrap_or(0),
            agents: trace.agents.clone(),
            ..rocpd::TraceInfo::default()
        };
        rocpd::write_rocpd(path, &info, &comparison.records)?;
        println!("wrote the replay's records to {}", path.display());
    }
    Ok(())
}
