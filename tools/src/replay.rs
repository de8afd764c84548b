//! What-if replay: the GPU faults and prefetches of a recorded trace run again on kfd-emu's
//! model, under the timing model's clock and changed SVM attributes, compared with the
//! recording.
//!
//! The replay lives in kfdtool, not kfd-emu: reading a trace needs SQLite and kfd-svm's records
//! (here), and replaying drives the model as a client does, through kfd-ioctl's `Kfd`, kfd-svm's
//! `SvmBuffer` and the model's GPU view. kfd-emu keeps depending on kfd-ioctl's ABI types only
//! (ARCHITECTURE.md), and kfdtool already depends on all of them.
//!
//! What is replayed, in the recorded order:
//! * each GPU page fault (`KFD_PAGE_FAULT`, its address, GPU and read/write) as an access of
//!   that GPU through the model's GPU view: with XNACK on, a retry fault the model services
//!   (migrating the granularity block around it toward the best restore location); with XNACK
//!   off, a fault nothing services unless the policy mapped the range;
//! * each prefetch migration (`KFD_PAGE_MIGRATE` with trigger PREFETCH) as a SET_ATTR of
//!   PREFETCH_LOC over its pages: to the recorded destination, or `--prefetch-loc`;
//! * each CPU fault migration (`KFD_PAGE_MIGRATE` with trigger PAGEFAULT_CPU) as a CPU access
//!   of its first page ([`Model::cpu_access`]: the kernel's `svm_migrate_to_ram` when the page
//!   is in VRAM then, nothing when the replay already has it in system memory).
//!
//! Migrations caused by GPU faults and evictions are outcomes, not inputs: the replay makes
//! its own. Accesses that did not fault in the recording are not in the trace, so the
//! replay cannot see them (with a smaller granularity than the recording's, pages the
//! recording found already mapped do not fault again here). A CPU access that found its
//! page in system memory faulted nowhere and is not in the trace either.
//!
//! The memory: a trace with kfdtool's SVM range table ([`crate::svm_table`]) replays its
//! ranges as registered (each a row of the comparison) with their recorded attributes, and
//! each recorded SET_ATTR in its place among the operations (less its PREFETCH_LOC: what a
//! prefetch moved is replayed from its migrations), under the recorded XNACK mode:
//! unchanged, such a replay reproduces the recording's migrations, bytes, faults and modeled
//! time exactly. A trace without it (rocprofv3's) gets regions of the recorded addresses
//! rounded out to 2 MiB (so granularity blocks line up as in the recording) and merged where
//! they touch, with the kernel's default attributes, and the comparison says so. The replay
//! maps each 2 MiB-aligned span as one `SvmBuffer` of the replaying thread, registered with the
//! policy's attributes; the recorded attributes go over the recorded ranges, then the policy's
//! again (the policy wins).
//!
//! The recorded run's modeled time is the timing model applied to the recorded records (a
//! fault costs `fault_service_ns`, a prefetch migration `prefetch_setup_ns`, every migration
//! `migration_ns` of its bytes over its GPU's link, a fault resolved without migration on
//! pages that are not in the GPU's VRAM one remote access: a [`REMOTE_ACCESS_BYTES`] line over
//! the link, where the pages are is painted by the recording's migrations, system memory until
//! then); the replay's is the model clock's advance over each replayed operation plus the same
//! remote-access cost for each access the model served from memory not the GPU's own. `measured` is the recording's own time: the sum of its
//! faults' and prefetch migrations' durations. Both modeled times come with their parts (fault
//! service, setup, transfer: the timing model applied to each run's records), and the
//! comparison starts with every parameter the replay used (machine, GPUs, XNACK, attributes,
//! timing).
//!
//! With XNACK off an access nothing services is not a retry fault but a GPU memory
//! violation, which the kernel does not service (`kfd_signal_vm_fault_event`; the process's
//! queues stop): the comparison calls them FATAL. A GPU is named on the command line by its
//! node id or its `gpu_id`, and printed with both.

use std::fmt;
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{ClockMode, Costs, Model, ModelConfig, Timing};
use kfd_ioctl::Kfd;
use kfd_ioctl::abi::SmiEventMask;
use kfd_svm::{
    Access, AgentMap, DEFAULT_PAGE_SIZE, KfdKind, KfdRecord, Location, MapOptions, Pairing,
    SmiStream, SvmAttrs, SvmBuffer,
};

use crate::rocpd::RocpdTrace;
use crate::svm_table::{RangeAccess, RangeAttrs, RangeEvent, RangeLoc, SvmRangeRecord};

/// Regions are aligned to this (the kernel's default granularity, 2^9 pages).
const REGION_ALIGN: u64 = 2 << 20;
/// The most memory a replay maps (address space; pages are only touched where written).
pub const MAX_REPLAY_BYTES: u64 = 1 << 40;
/// The operation value of `ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH`.
const OP_PREFETCH: u32 = 0;
/// The operation value of `ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_CPU`.
const OP_PAGEFAULT_CPU: u32 = 2;
/// What one access served in place from remote memory moves over the link: one L2 cache line
/// (128 bytes on gfx9's L2, the unit a GPU reads remote memory in).
pub const REMOTE_ACCESS_BYTES: u64 = 128;

/// The modeled cost of one access of GPU `gpu` served in place from system memory: one
/// [`REMOTE_ACCESS_BYTES`] line over the GPU's host link (its latency and bandwidth, as a
/// migration's transfer; no migration setup).
fn remote_access_ns(costs: &Costs, gpu: usize) -> u64 {
    costs
        .migration_ns(gpu, REMOTE_ACCESS_BYTES)
        .saturating_sub(costs.timing.migrate_setup_ns)
}

/// Where pages are, as painted intervals `[start, end)` → GPU index (`None`: system memory).
/// Memory never painted is in system memory (SVM memory starts there).
#[derive(Debug, Default)]
struct Places(std::collections::BTreeMap<u64, (u64, Option<usize>)>);

impl Places {
    fn paint(&mut self, start: u64, end: u64, at: Option<usize>) {
        if start >= end {
            return;
        }
        if let Some((&ks, &(ke, v))) = self.0.range(..start).next_back()
            && ke > start
        {
            self.0.insert(ks, (start, v));
            if ke > end {
                self.0.insert(end, (ke, v));
            }
        }
        let inside: Vec<u64> = self.0.range(start..end).map(|(k, _)| *k).collect();
        for k in inside {
            if let Some((ke, v)) = self.0.remove(&k)
                && ke > end
            {
                self.0.insert(end, (ke, v));
            }
        }
        self.0.insert(start, (end, at));
    }

    fn at(&self, address: u64) -> Option<usize> {
        self.0
            .range(..=address)
            .next_back()
            .filter(|(_, (end, _))| address < *end)
            .and_then(|(_, (_, at))| *at)
    }
}

/// A location named on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocationArg {
    /// System memory.
    System,
    /// The GPU of this trace agent: its KFD topology node id or its `gpu_id` (as `kfdtool
    /// report` names agents: `node 1 GPU 0x7396`).
    Node(u32),
}

/// Which access the policy gives the GPUs of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessArg {
    /// ACCESS: map, migrate toward the GPU.
    Access,
    /// ACCESS_IN_PLACE: map where the pages are.
    InPlace,
    /// NO_ACCESS.
    None,
}

/// The changed SVM attributes and the machine of the replay. `None` keeps what the replay
/// would do by default (the kernel's defaults; prefetches to their recorded destinations).
#[derive(Debug, Clone)]
pub struct Policy {
    /// The machine the model emulates.
    pub machine: Machine,
    /// The timing model's parameters.
    pub timing: Timing,
    /// GRANULARITY (log2 pages) of every region.
    pub granularity: Option<u8>,
    /// PREFERRED_LOC of every region.
    pub preferred: Option<LocationArg>,
    /// Where every prefetch goes instead of its recorded destination.
    pub prefetch: Option<LocationArg>,
    /// XNACK; `None`: on when the trace has GPU page faults.
    pub xnack: Option<bool>,
    /// The access every GPU of the trace gets to every region.
    pub access: Option<AccessArg>,
}

/// What a run did to one region (or to all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Migration records.
    pub migrations: u64,
    /// Bytes they cover.
    pub bytes: u64,
    /// GPU page faults the kernel serviced (PAGE_FAULT records).
    pub faults: u64,
    /// GPU accesses that stayed faults (nothing serviced them: XNACK off, no access).
    pub unserviced: u64,
    /// The modeled time, ns.
    pub modeled_ns: u64,
    /// The recording's measured time, ns (0 for a replay).
    pub measured_ns: u64,
    /// Of the modeled time by the timing model's parts: fault service (`fault_service_ns` per
    /// serviced fault), ns.
    pub fault_service_ns: u64,
    /// Setup: `migrate_setup_ns` per migration, `prefetch_setup_ns` per prefetch, ns.
    pub setup_ns: u64,
    /// Transfer: each migration's bytes over its GPU's host link, ns.
    pub transfer_ns: u64,
    /// Faulting accesses served in place from memory that is not the GPU's own.
    pub remote_accesses: u64,
    /// Their cost: one [`REMOTE_ACCESS_BYTES`] line each over the GPU's host link, ns.
    pub remote_ns: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.migrations += o.migrations;
        self.bytes += o.bytes;
        self.faults += o.faults;
        self.unserviced += o.unserviced;
        self.modeled_ns += o.modeled_ns;
        self.measured_ns += o.measured_ns;
        self.fault_service_ns += o.fault_service_ns;
        self.setup_ns += o.setup_ns;
        self.transfer_ns += o.transfer_ns;
        self.remote_accesses += o.remote_accesses;
        self.remote_ns += o.remote_ns;
    }
}

/// One region's two runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRow {
    /// The recorded addresses `[start, end)`.
    pub start: u64,
    /// See `start`.
    pub end: u64,
    /// The recording.
    pub recorded: Stats,
    /// The replay.
    pub replayed: Stats,
}

/// The comparison `kfdtool replay` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Per region, in address order.
    pub regions: Vec<RegionRow>,
    /// Operations replayed (faults, prefetches).
    pub operations: u64,
    /// XNACK in the replay: off makes every unserviced access a fatal GPU memory fault.
    pub xnack: bool,
    /// What the replay ran with, one `key: value` per line (machine, attributes, GPUs, timing
    /// parameters), printed with the comparison.
    pub parameters: Vec<String>,
    /// The replay's own records, in the recording's terms (recorded addresses, the trace's
    /// agents; times on the model clock): `kfdtool replay --out` writes them as a trace for
    /// `kfdtool report --compare`.
    pub records: Vec<KfdRecord>,
}

impl Comparison {
    /// The sums over the regions: (recorded, replayed).
    pub fn totals(&self) -> (Stats, Stats) {
        let mut t = (Stats::default(), Stats::default());
        for r in &self.regions {
            t.0 += r.recorded;
            t.1 += r.replayed;
        }
        t
    }
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

fn stats_line(f: &mut fmt::Formatter<'_>, what: &str, s: &Stats, xnack: bool) -> fmt::Result {
    write!(
        f,
        "  {what:<9}{:>6} migrations {:>12} {:>6} faults",
        s.migrations,
        kfd_svm::summary::human_bytes(s.bytes),
        s.faults
    )?;
    if s.unserviced > 0 {
        if xnack {
            write!(f, " ({} unserviced: no access)", s.unserviced)?;
        } else {
            // Without retry faults the GPU raises a memory violation the kernel does not
            // service (kfd_signal_vm_fault_event): the process's queues are stopped.
            write!(
                f,
                " ({} FATAL: XNACK off, a GPU memory violation that stops the queues)",
                s.unserviced
            )?;
        }
    }
    write!(f, "  modeled {}", ms(s.modeled_ns))?;
    if s.measured_ns > 0 {
        write!(f, "  measured {}", ms(s.measured_ns))?;
    }
    writeln!(f)?;
    writeln!(
        f,
        "  {:<9}of the model: fault service {}, setup {}, transfer {}, remote access {} ({} \
         accesses in place over the link)",
        "",
        ms(s.fault_service_ns),
        ms(s.setup_ns),
        ms(s.transfer_ns),
        ms(s.remote_ns),
        s.remote_accesses
    )
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "replayed {} operations with:", self.operations)?;
        for p in &self.parameters {
            writeln!(f, "  {p}")?;
        }
        for r in &self.regions {
            writeln!(
                f,
                "range {:#x}-{:#x} ({}):",
                r.start,
                r.end,
                kfd_svm::summary::human_bytes(r.end - r.start)
            )?;
            stats_line(f, "recorded", &r.recorded, true)?;
            stats_line(f, "replay", &r.replayed, self.xnack)?;
        }
        let (rec, rep) = self.totals();
        writeln!(f, "total:")?;
        stats_line(f, "recorded", &rec, true)?;
        stats_line(f, "replay", &rep, self.xnack)
    }
}

/// Why a replay cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Nothing to replay.
    #[error("the trace has no GPU page faults and no prefetch migrations to replay")]
    Empty,
    /// The trace names a GPU agent the machine does not have.
    #[error(
        "the trace's GPU agent {node} is its GPU number {index}, and the machine {machine} \
         has {gpus} GPUs"
    )]
    NoSuchGpu {
        /// The trace's agent.
        node: u32,
        /// Its index among the trace's GPU agents.
        index: usize,
        /// The machine.
        machine: String,
        /// How many GPUs it has.
        gpus: usize,
    },
    /// A location argument names no GPU agent of the trace.
    #[error(
        "{what}: {node} ({node:#x}) is neither the node id nor the gpu id of a GPU agent of the \
         trace (its GPU agents: {known})"
    )]
    BadLocation {
        /// Which option.
        what: &'static str,
        /// The node.
        node: u32,
        /// The GPU agents.
        known: String,
    },
    /// The recorded addresses span too much memory.
    #[error("the recorded addresses span {bytes} bytes in their regions, more than {max}")]
    TooLarge {
        /// The span.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// The model or the emulator failed.
    #[error("the emulator: {0}")]
    Emulator(String),
    /// A client call failed.
    #[error("replaying: {0}")]
    Replay(String),
}

/// One thing the replay does.
#[derive(Debug, Clone, Copy)]
enum Op {
    Fault {
        gpu: usize,
        addr: u64,
        write: bool,
    },
    Prefetch {
        start: u64,
        end: u64,
        to: Target,
    },
    /// A CPU fault (a migration to system memory with trigger PAGEFAULT_CPU): the CPU
    /// touching the first page it moved.
    CpuFault {
        addr: u64,
    },
    /// A recorded SET_ATTR (index into the trace's `svm_ranges`), replayed in its place.
    Attr(usize),
}

/// Where a prefetch goes.
#[derive(Debug, Clone, Copy)]
enum Target {
    System,
    Gpu(usize),
}

/// How the trace's agents map to the machine's GPUs: the i-th GPU agent is GPU i.
struct Agents {
    gpu_nodes: Vec<u32>,
    /// The `gpu_id` of each of `gpu_nodes`, when the trace's agent rows say it.
    gpu_ids: Vec<Option<u32>>,
    system_nodes: Vec<u32>,
}

impl Agents {
    fn of(trace: &RocpdTrace) -> Agents {
        let mut gpu_nodes: Vec<u32> = trace
            .agents
            .iter()
            .filter(|a| a.is_gpu)
            .map(|a| a.node_id)
            .collect();
        // A trace without agent rows (or missing some): the GPUs its records name.
        for r in &trace.records {
            for n in [r.agent, r.src_agent, r.dst_agent].into_iter().flatten() {
                let is_cpu = trace.agents.iter().any(|a| a.node_id == n && !a.is_gpu);
                if !is_cpu && !gpu_nodes.contains(&n) && r.kind != KfdKind::PageMigrate {
                    gpu_nodes.push(n);
                }
            }
        }
        let system_nodes = trace
            .agents
            .iter()
            .filter(|a| !a.is_gpu)
            .map(|a| a.node_id)
            .collect();
        let gpu_ids = gpu_nodes
            .iter()
            .map(|&n| {
                trace
                    .agents
                    .iter()
                    .find(|a| a.node_id == n)
                    .and_then(|a| a.gpu_id)
            })
            .collect();
        Agents {
            gpu_nodes,
            gpu_ids,
            system_nodes,
        }
    }

    /// The trace's GPU `index` as `node N (gpu 0x…)`.
    fn name(&self, index: usize) -> String {
        match self.gpu_ids.get(index).copied().flatten() {
            Some(g) => format!("node {} (gpu {g:#x})", self.gpu_nodes[index]),
            None => format!("node {}", self.gpu_nodes[index]),
        }
    }

    /// Every GPU agent, named.
    fn known(&self) -> String {
        let names: Vec<String> = (0..self.gpu_nodes.len()).map(|i| self.name(i)).collect();
        names.join(", ")
    }

    fn gpu(&self, node: u32) -> Option<usize> {
        self.gpu_nodes.iter().position(|&n| n == node)
    }

    fn target(&self, node: Option<u32>) -> Option<Target> {
        match node {
            Some(n) if self.system_nodes.contains(&n) => Some(Target::System),
            Some(n) => self.gpu(n).map(Target::Gpu),
            None => None,
        }
    }

    fn location(&self, what: &'static str, arg: LocationArg) -> Result<Target, ReplayError> {
        match arg {
            LocationArg::System => Ok(Target::System),
            // One way to name a GPU everywhere: its node id or its gpu_id.
            LocationArg::Node(node) => self
                .gpu(node)
                .or_else(|| self.gpu_ids.iter().position(|&g| g == Some(node)))
                .map(Target::Gpu)
                .ok_or_else(|| ReplayError::BadLocation {
                    what,
                    node,
                    known: self.known(),
                }),
        }
    }
}

/// The operations of a trace, in time order.
fn operations(trace: &RocpdTrace, agents: &Agents) -> Vec<(u64, Op)> {
    let mut ops = Vec::new();
    for r in &trace.records {
        let op = match r.kind {
            KfdKind::PageFault => r.agent.and_then(|n| agents.gpu(n)).map(|gpu| Op::Fault {
                gpu,
                addr: r.start_address,
                write: r.fault_is_write(),
            }),
            KfdKind::PageMigrate if r.operation == OP_PAGEFAULT_CPU && r.bytes() > 0 => {
                Some(Op::CpuFault {
                    addr: r.start_address,
                })
            }
            KfdKind::PageMigrate if r.operation == OP_PREFETCH && r.bytes() > 0 => {
                agents.target(r.dst_agent).map(|to| Op::Prefetch {
                    start: r.start_address,
                    end: r.end_address,
                    to,
                })
            }
            _ => None,
        };
        if let Some(op) = op {
            ops.push((r.start_ns, op));
        }
    }
    // Registrations are applied before anything runs; later changes in their place (before
    // an operation of the same time: the call returned before the access it enabled).
    for (i, r) in trace.svm_ranges.iter().enumerate() {
        if r.event == RangeEvent::SetAttr {
            ops.push((r.time_ns, Op::Attr(i)));
        }
    }
    ops.sort_by_key(|(t, op)| (*t, !matches!(op, Op::Attr(_))));
    ops
}

/// An address span `[start, end)`.
type Span = (u64, u64);

/// The 2 MiB-aligned spans covering `spans`, merged where they overlap or touch.
fn aligned_spans(spans: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = spans
        .map(|(s, e)| {
            (
                s / REGION_ALIGN * REGION_ALIGN,
                e.div_ceil(REGION_ALIGN).saturating_mul(REGION_ALIGN),
            )
        })
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in spans {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// The address span an operation touches.
fn op_span(op: &Op) -> Option<(u64, u64)> {
    match *op {
        Op::Fault { addr, .. } => Some((addr, addr.saturating_add(1))),
        Op::Prefetch { start, end, .. } => Some((start, end)),
        Op::CpuFault { addr } => Some((addr, addr.saturating_add(1))),
        Op::Attr(_) => None,
    }
}

/// The rows the comparison reports and the spans the replay maps. Without recorded ranges
/// both are the 2 MiB-aligned regions around the recorded addresses, merged where they
/// overlap or touch (a rocprofv3 trace does not say where one allocation ends and the next
/// begins). With them, the rows are the ranges as registered (and a 2 MiB region around any
/// recorded address outside them), the spans the rows rounded out to 2 MiB and merged.
fn layout(ops: &[(u64, Op)], trace: &RocpdTrace) -> (Vec<Span>, Vec<Span>) {
    let registered: Vec<(u64, u64)> = trace
        .svm_ranges
        .iter()
        .filter(|r| r.event == RangeEvent::Register)
        .map(|r| (r.start, r.end))
        .collect();
    let outside = aligned_spans(
        ops.iter()
            .filter_map(|(_, op)| op_span(op))
            .filter(|&(s, e)| !registered.iter().any(|&(rs, re)| rs <= s && e <= re)),
    );
    let mut rows = registered;
    // A region around unregistered addresses keeps clear of the registered ranges.
    for (s, e) in outside {
        let s = rows
            .iter()
            .filter(|&&(_, re)| re > s && re <= e)
            .map(|&(_, re)| re)
            .max()
            .unwrap_or(s);
        let e = rows
            .iter()
            .filter(|&&(rs, _)| rs >= s && rs < e)
            .map(|&(rs, _)| rs)
            .min()
            .unwrap_or(e);
        if s < e {
            rows.push((s, e));
        }
    }
    rows.sort_unstable();
    rows.dedup();
    let spans = aligned_spans(rows.iter().copied());
    (rows, spans)
}

fn region_of(regions: &[(u64, u64)], addr: u64) -> Option<usize> {
    regions.iter().position(|&(s, e)| s <= addr && addr < e)
}

/// Charges `r` to `s` under the timing model: a fault its service, a migration its setup
/// and transfer over the link of its GPU (`gpu_of` maps an agent to a GPU index), a prefetch
/// migration the prefetch setup too; counts migrations and bytes.
fn charge(s: &mut Stats, r: &KfdRecord, costs: &Costs, gpu_of: impl Fn(u32) -> Option<usize>) {
    match r.kind {
        KfdKind::PageFault => {
            s.fault_service_ns += costs.fault_ns();
            s.modeled_ns += costs.fault_ns();
        }
        KfdKind::PageMigrate => {
            s.migrations += 1;
            s.bytes += r.bytes();
            let gpu = [r.src_agent, r.dst_agent]
                .into_iter()
                .flatten()
                .find_map(&gpu_of)
                .unwrap_or(0);
            let all = costs.migration_ns(gpu, r.bytes());
            let setup = costs.timing.migrate_setup_ns.min(all);
            s.setup_ns += setup;
            s.transfer_ns += all - setup;
            s.modeled_ns += all;
            if r.operation == OP_PREFETCH {
                s.setup_ns += costs.prefetch_ns();
                s.modeled_ns += costs.prefetch_ns();
            }
        }
        _ => {}
    }
}

/// The recorded run's stats per region, with the timing model applied to its records.
fn recorded_stats(
    trace: &RocpdTrace,
    agents: &Agents,
    regions: &[(u64, u64)],
    costs: &Costs,
) -> Vec<Stats> {
    let mut stats = vec![Stats::default(); regions.len()];
    // Where the recording's pages were: painted by its migrations as they end, so that a
    // fault resolved without migrating is known to be served in place or locally.
    let mut places = Places::default();
    let mut order: Vec<&KfdRecord> = trace.records.iter().collect();
    order.sort_by_key(|r| (r.end_ns, r.kind == KfdKind::PageFault));
    for r in order {
        if r.kind == KfdKind::PageMigrate && r.error_code == 0 {
            places.paint(
                r.start_address,
                r.end_address,
                r.dst_agent.and_then(|n| agents.gpu(n)),
            );
        }
        let Some(i) = region_of(regions, r.start_address) else {
            continue;
        };
        let s = &mut stats[i];
        charge(s, r, costs, |n| agents.gpu(n));
        if r.kind == KfdKind::PageFault
            && !r.fault_migrated()
            && let Some(gpu) = r.agent.and_then(|n| agents.gpu(n))
            && places.at(r.start_address) != Some(gpu)
        {
            let ns = remote_access_ns(costs, gpu);
            s.remote_accesses += 1;
            s.remote_ns += ns;
            s.modeled_ns += ns;
        }
        match r.kind {
            KfdKind::PageFault => {
                s.faults += 1;
                s.measured_ns += r.duration_ns();
            }
            KfdKind::PageMigrate if r.operation == OP_PREFETCH => {
                s.measured_ns += r.duration_ns();
            }
            _ => {}
        }
    }
    stats
}

/// Replays `trace` under `policy` and compares it with the recording.
pub fn replay(trace: &RocpdTrace, policy: &Policy) -> Result<Comparison, ReplayError> {
    let agents = Agents::of(trace);
    let ops = operations(trace, &agents);
    if ops.iter().all(|(_, op)| matches!(op, Op::Attr(_))) {
        return Err(ReplayError::Empty);
    }
    let gpus = policy.machine.gpus().len();
    // Only the GPUs the replayed operations use must exist on the machine.
    let used = |i: usize| {
        ops.iter().any(|(_, op)| match *op {
            Op::Fault { gpu, .. } => gpu == i,
            Op::Prefetch { to, .. } => matches!(to, Target::Gpu(g) if g == i),
            Op::CpuFault { .. } | Op::Attr(_) => false,
        })
    };
    if let Some((index, &node)) = agents
        .gpu_nodes
        .iter()
        .enumerate()
        .find(|&(i, _)| i >= gpus && used(i))
    {
        return Err(ReplayError::NoSuchGpu {
            node,
            index,
            machine: policy.machine.name().to_owned(),
            gpus,
        });
    }
    let preferred = policy
        .preferred
        .map(|p| agents.location("--preferred-loc", p))
        .transpose()?;
    let prefetch = policy
        .prefetch
        .map(|p| agents.location("--prefetch-loc", p))
        .transpose()?;
    for target in [preferred, prefetch].into_iter().flatten() {
        if let Target::Gpu(index) = target
            && index >= gpus
        {
            return Err(ReplayError::NoSuchGpu {
                node: agents.gpu_nodes[index],
                index,
                machine: policy.machine.name().to_owned(),
                gpus,
            });
        }
    }
    let (regions, spans) = layout(&ops, trace);
    let span: u64 = spans.iter().map(|(s, e)| e - s).sum();
    if span > MAX_REPLAY_BYTES {
        return Err(ReplayError::TooLarge {
            bytes: span,
            max: MAX_REPLAY_BYTES,
        });
    }
    let model = Model::new(ModelConfig {
        machine: policy.machine.clone(),
        timing: policy.timing.clone(),
        clock: ClockMode::Model,
        ..ModelConfig::default()
    })
    .map_err(|e| ReplayError::Emulator(e.to_string()))?;
    let costs = model.costs().clone();
    let recorded = recorded_stats(trace, &agents, &regions, &costs);
    let has_faults = ops.iter().any(|(_, op)| matches!(op, Op::Fault { .. }));
    let xnack = policy.xnack.or(trace.xnack).unwrap_or(has_faults);
    let view = Arc::clone(&model);
    let setup = Setup {
        regions: regions.clone(),
        spans,
        ranges: trace.svm_ranges.clone(),
        gpu_nodes: agents.gpu_nodes.clone(),
        system_node: agents.system_nodes.first().copied(),
        ops,
        xnack,
        granularity: policy.granularity,
        preferred,
        prefetch,
        access: policy.access,
        trace_gpus: agents.gpu_nodes.len(),
    };
    let replayed = kfd_emu::supervisor::run_attached(model, move || run(&view, &setup))
        .map_err(|e| ReplayError::Emulator(e.to_string()))??;
    let target_name = |t: Option<Target>| match t {
        None => "as recorded".to_owned(),
        Some(Target::System) => "system".to_owned(),
        Some(Target::Gpu(i)) => agents.name(i),
    };
    let mut parameters = vec![format!("machine: {}", policy.machine.name())];
    for (i, g) in policy.machine.gpus().iter().enumerate() {
        if i < agents.gpu_nodes.len() {
            parameters.push(format!(
                "GPU {i}: the trace's {} is the machine's node {} (gpu {:#x})",
                agents.name(i),
                g.node_id,
                g.gpu_id
            ));
        }
    }
    parameters.push(format!(
        "xnack: {}{}",
        if xnack { "on" } else { "off" },
        match (policy.xnack, trace.xnack) {
            (Some(_), _) => "",
            (None, Some(_)) => " (as recorded)",
            (None, None) if has_faults => " (assumed: the trace has GPU page faults)",
            (None, None) => " (assumed: the trace has no GPU page faults)",
        }
    ));
    if trace.svm_ranges.is_empty() {
        parameters.push(
            "assumed: the trace has no SVM ranges (rocprofv3 records none): each range is the \
             recorded addresses rounded out to 2 MiB, merged where they touch, with the \
             kernel's default attributes"
                .to_owned(),
        );
    } else {
        parameters.push(format!(
            "ranges: {} registered, {} attribute changes, as recorded",
            trace
                .svm_ranges
                .iter()
                .filter(|r| r.event == RangeEvent::Register)
                .count(),
            trace
                .svm_ranges
                .iter()
                .filter(|r| r.event == RangeEvent::SetAttr)
                .count()
        ));
    }
    parameters.push(format!(
        "granularity: {}",
        policy
            .granularity
            .map_or("9 (the kernel's default)".to_owned(), |g| g.to_string())
    ));
    parameters.push(format!("preferred_loc: {}", target_name(preferred)));
    parameters.push(format!("prefetch_loc: {}", target_name(prefetch)));
    parameters.push(format!(
        "access: {}",
        match policy.access {
            None => "none set",
            Some(AccessArg::Access) => "ACCESS",
            Some(AccessArg::InPlace) => "ACCESS_IN_PLACE",
            Some(AccessArg::None) => "NO_ACCESS",
        }
    ));
    let timing: Vec<String> = policy
        .timing
        .to_string()
        .lines()
        .map(str::to_owned)
        .collect();
    parameters.push(format!("timing: {}", timing.join(", ")));
    Ok(Comparison {
        xnack,
        parameters,
        regions: regions
            .iter()
            .zip(recorded)
            .zip(replayed.per_region)
            .map(|((&(start, end), recorded), replayed)| RegionRow {
                start,
                end,
                recorded,
                replayed,
            })
            .collect(),
        operations: replayed.operations,
        records: replayed.records,
    })
}

/// What the replaying thread needs.
struct Setup {
    /// The rows of the comparison (recorded addresses).
    regions: Vec<(u64, u64)>,
    /// The recorded address spans the replay maps, one buffer each.
    spans: Vec<(u64, u64)>,
    /// The recorded SET_ATTR calls.
    ranges: Vec<SvmRangeRecord>,
    /// The trace's GPU agents' nodes, in GPU order.
    gpu_nodes: Vec<u32>,
    /// The trace's system-memory node.
    system_node: Option<u32>,
    ops: Vec<(u64, Op)>,
    xnack: bool,
    granularity: Option<u8>,
    preferred: Option<Target>,
    prefetch: Option<Target>,
    access: Option<AccessArg>,
    trace_gpus: usize,
}

struct Replayed {
    per_region: Vec<Stats>,
    operations: u64,
    records: Vec<KfdRecord>,
}

/// On the thread attached to `model`: registers the regions and runs the operations.
fn run(model: &Model, setup: &Setup) -> Result<Replayed, ReplayError> {
    let fail = |what: &str, e: &dyn fmt::Display| ReplayError::Replay(format!("{what}: {e}"));
    let kfd = Kfd::open().map_err(|e| fail("opening the emulated /dev/kfd", &e))?;
    let gpu_ids: Vec<u32> = model.machine().gpus().iter().map(|g| g.gpu_id).collect();
    for g in model.machine().gpus() {
        kfd.acquire_vm(g.gpu_id, g.render_minor)
            .map_err(|e| fail("ACQUIRE_VM", &e))?;
    }
    kfd.set_xnack_mode(setup.xnack)
        .map_err(|e| fail("SET_XNACK_MODE", &e))?;
    let location = |t: Target| match t {
        Target::System => Location::System,
        Target::Gpu(i) => Location::Gpu(gpu_ids[i].into()),
    };
    let mut attrs = SvmAttrs::new();
    if let Some(g) = setup.granularity {
        attrs = attrs.granularity(g);
    }
    if let Some(p) = setup.preferred {
        attrs = attrs.preferred_location(location(p));
    }
    if let Some(a) = setup.access {
        let access = match a {
            AccessArg::Access => Access::Access,
            AccessArg::InPlace => Access::AccessInPlace,
            AccessArg::None => Access::NoAccess,
        };
        for &g in &gpu_ids[..setup.trace_gpus.min(gpu_ids.len())] {
            attrs = attrs.access(g, access);
        }
    }
    let options = MapOptions {
        huge_aligned: true,
        ..MapOptions::default()
    };
    let mut buffers = Vec::new();
    for &(s, e) in &setup.spans {
        let len = usize::try_from(e - s).map_err(|_| fail("a region", &"too large"))?;
        buffers.push(
            SvmBuffer::with_options(&kfd, len, &attrs, options)
                .map_err(|e| fail("registering a region", &e))?,
        );
    }
    // Where a recorded address is in the replay: (span, replayed address).
    let translate = |addr: u64| {
        let i = region_of(&setup.spans, addr)?;
        Some((i, buffers[i].addr() + (addr - setup.spans[i].0)))
    };
    // A recorded SET_ATTR as the replay's call: nodes become the machine's GPUs; then the
    // policy's attributes over the same pages (the policy wins).
    let recorded_location = |l: RangeLoc| match l {
        RangeLoc::System => Some(Location::System),
        RangeLoc::Undefined => Some(Location::Undefined),
        RangeLoc::Node(n) => match setup.gpu_nodes.iter().position(|&g| g == n) {
            Some(i) => gpu_ids.get(i).map(|&g| Location::Gpu(g.into())),
            // A node that is no GPU of the trace: its system memory.
            None => Some(Location::System),
        },
    };
    let recorded_attrs = |a: &RangeAttrs| {
        let mut out = SvmAttrs::new();
        if let Some(g) = a.granularity {
            out = out.granularity(g);
        }
        if let Some(l) = a.preferred.and_then(recorded_location) {
            out = out.preferred_location(l);
        }
        // A recorded PREFETCH_LOC is not sent again: what it moved is in the trace as
        // prefetch migrations, replayed in their place (and redirected by `--prefetch-loc`).
        for &(node, access) in &a.access {
            if let Some(Location::Gpu(g)) = recorded_location(RangeLoc::Node(node)) {
                out = out.access(
                    g,
                    match access {
                        RangeAccess::Access => Access::Access,
                        RangeAccess::InPlace => Access::AccessInPlace,
                        RangeAccess::None => Access::NoAccess,
                    },
                );
            }
        }
        if a.set_flags != 0 {
            out = out.set_flags(kfd_ioctl::abi::SvmFlags::from_bits_retain(a.set_flags));
        }
        if a.clr_flags != 0 {
            out = out.clear_flags(kfd_ioctl::abi::SvmFlags::from_bits_retain(a.clr_flags));
        }
        out
    };
    let apply_recorded = |r: &SvmRangeRecord| -> Result<(), ReplayError> {
        let (Some((i, a)), Some((j, _))) = (translate(r.start), translate(r.end - 1)) else {
            return Ok(());
        };
        if i != j {
            return Ok(());
        }
        for call in [recorded_attrs(&r.attrs), attrs.clone()] {
            if call.is_empty() {
                continue;
            }
            // SAFETY: [a, a + end - start) lies inside buffer i, which this thread owns and
            // registered; nothing holds a reference into it.
            unsafe { call.apply(&kfd, a, r.end - r.start) }
                .map_err(|e| fail("a recorded SET_ATTR", &e))?;
        }
        Ok(())
    };
    for r in setup
        .ranges
        .iter()
        .filter(|r| r.event == RangeEvent::Register)
    {
        apply_recorded(r)?;
    }
    // Everything the recording's KFD records come from, so that the replay's records compare
    // with them one for one.
    let mask = SmiEventMask::MIGRATE_START
        | SmiEventMask::MIGRATE_END
        | SmiEventMask::PAGE_FAULT_START
        | SmiEventMask::PAGE_FAULT_END
        | SmiEventMask::UNMAP_FROM_GPU
        | SmiEventMask::QUEUE_EVICTION
        | SmiEventMask::QUEUE_RESTORE;
    let mut streams = gpu_ids
        .iter()
        .map(|&g| SmiStream::open(&kfd, g, mask))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail("SMI_EVENTS", &e))?;
    let row_of = |addr: u64| region_of(&setup.regions, addr);
    let pid = std::process::id() as i32;
    let mut per_region = vec![Stats::default(); setup.regions.len()];
    let mut events = Vec::new();
    let mut operations = 0;
    for &(_, op) in &setup.ops {
        let before = model.clock().modeled_ns();
        let region = match op {
            Op::Attr(index) => {
                let r = &setup.ranges[index];
                apply_recorded(r)?;
                if let Some(row) = row_of(r.start) {
                    per_region[row].modeled_ns += model.clock().modeled_ns() - before;
                }
                continue;
            }
            Op::Fault { gpu, addr, write } => {
                let (Some((_, at)), Some(row)) = (translate(addr), row_of(addr)) else {
                    continue;
                };
                let at = at & !(DEFAULT_PAGE_SIZE - 1);
                let access = if write {
                    model.gpu_write(pid, gpu_ids[gpu], at, &[0])
                } else {
                    model.gpu_read(pid, gpu_ids[gpu], at, &mut [0])
                };
                if access.is_err() {
                    per_region[row].unserviced += 1;
                } else if model
                    .svm_page(pid, at)
                    .is_some_and(|p| p.location != gpu_ids[gpu])
                {
                    // Served from memory that is not this GPU's: over the link.
                    let ns = remote_access_ns(model.costs(), gpu);
                    per_region[row].remote_accesses += 1;
                    per_region[row].remote_ns += ns;
                    per_region[row].modeled_ns += ns;
                }
                row
            }
            Op::CpuFault { addr } => {
                let (Some((_, at)), Some(row)) = (translate(addr), row_of(addr)) else {
                    continue;
                };
                // The replaying thread's own touches are not seen in attach mode: the model
                // takes the access as its CPU fault path would.
                model.cpu_access(pid, at & !(DEFAULT_PAGE_SIZE - 1));
                row
            }
            Op::Prefetch { start, end, to } => {
                let (Some((i, a)), Some((j, _)), Some(row)) =
                    (translate(start), translate(end - 1), row_of(start))
                else {
                    continue;
                };
                if i != j {
                    continue;
                }
                let to = location(setup.prefetch.unwrap_or(to));
                let prefetch = SvmAttrs::new().prefetch_location(to);
                // SAFETY: [a, a + end - start) lies inside buffer i, which this thread owns
                // and registered; nothing holds a reference into it.
                unsafe { prefetch.apply(&kfd, a, end - start) }
                    .map_err(|e| fail("a prefetch", &e))?;
                row
            }
        };
        operations += 1;
        per_region[region].modeled_ns += model.clock().modeled_ns() - before;
        for stream in &mut streams {
            for event in stream.pending() {
                events.push(event.map_err(|e| fail("reading SMI events", &e))?);
            }
        }
    }
    // GPUs as their index, system memory as SYSTEM.
    const SYSTEM: u32 = u32::MAX;
    let agent_map = AgentMap::new(
        gpu_ids.iter().enumerate().map(|(i, &g)| (g, i as u32)),
        Some(SYSTEM),
    );
    let pairing = Pairing::new(&events, DEFAULT_PAGE_SIZE, &agent_map);
    // A replayed address's row: back to the recorded address first.
    let base_of = |addr: u64| {
        setup
            .spans
            .iter()
            .zip(&buffers)
            .find(|&(&(s, e), b)| b.addr() <= addr && addr < b.addr() + (e - s))
            .and_then(|(&(s, _), b)| row_of(s + (addr - b.addr())))
    };
    // The replay's modeled time is the model clock's; its parts are the timing model applied
    // to the replay's own records, as for the recording.
    let costs = model.costs();
    for r in &pairing.records {
        let Some(i) = base_of(r.start_address) else {
            continue;
        };
        let s = &mut per_region[i];
        let modeled = s.modeled_ns;
        charge(s, r, costs, |n| (n != SYSTEM).then_some(n as usize));
        s.modeled_ns = modeled;
        if r.kind == KfdKind::PageFault {
            s.faults += 1;
        }
    }
    // The replay's records in the recording's terms: recorded addresses, the trace's agents.
    let back = |addr: u64| {
        setup
            .spans
            .iter()
            .zip(&buffers)
            .find(|&(&(s, e), b)| b.addr() <= addr && addr < b.addr() + (e - s))
            .map(|(&(s, _), b)| s + (addr - b.addr()))
    };
    let node = |a: Option<u32>| match a {
        Some(SYSTEM) => setup.system_node,
        Some(i) => setup
            .gpu_nodes
            .get(i as usize)
            .copied()
            .or_else(|| model.machine().gpus().get(i as usize).map(|g| g.node_id)),
        None => None,
    };
    let records = pairing
        .records
        .iter()
        .filter_map(|r| {
            let start = back(r.start_address)?;
            let end = if r.end_address > r.start_address {
                back(r.end_address - 1)? + 1
            } else {
                start
            };
            Some(KfdRecord {
                start_address: start,
                end_address: end,
                agent: node(r.agent),
                src_agent: node(r.src_agent),
                dst_agent: node(r.dst_agent),
                prefetch_agent: node(r.prefetch_agent),
                preferred_agent: node(r.preferred_agent),
                ..*r
            })
        })
        .collect();
    drop(buffers);
    Ok(Replayed {
        per_region,
        operations,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_paint_over_and_split_what_was_there() {
        let mut p = Places::default();
        assert_eq!(p.at(5), None, "never painted: system memory");
        p.paint(0, 100, Some(1));
        p.paint(40, 60, Some(2));
        p.paint(90, 120, None);
        assert_eq!(
            [
                p.at(0),
                p.at(39),
                p.at(40),
                p.at(59),
                p.at(60),
                p.at(89),
                p.at(95)
            ],
            [Some(1), Some(1), Some(2), Some(2), Some(1), Some(1), None]
        );
        // Over everything at once.
        p.paint(10, 110, Some(3));
        assert_eq!(
            [p.at(9), p.at(10), p.at(109), p.at(110)],
            [Some(1), Some(3), Some(3), None]
        );
        assert_eq!(p.0.len(), 3);
    }
}
