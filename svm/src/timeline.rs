//! [`Timeline`]: SMI events exported as a Chrome trace (the JSON `traceEvents` format that
//! Perfetto and `chrome://tracing` open).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io;

use serde_json::{Map, Value, json};

use crate::location::Location;
use crate::{EvictionTrigger, MigrateTrigger, SmiEvent, UnmapTrigger};

/// The page size SMI page numbers and counts are in, unless told otherwise (x86-64).
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// The `tid` of the track that carries events tied to no device (VM faults, process start
/// and end, thermal and reset events, unknown events).
pub const EVENTS_TID: u32 = u32::MAX;

/// A sequence of SMI events and its export as a migration/fault timeline.
///
/// The trace has one process per `pid` (pid 0, named `kfd`, for device-wide events) and, in
/// each, one track (`tid`) per memory location: the `gpu_id`, or 0 for system memory, plus
/// [`EVENTS_TID`] for events tied to no device.
/// * A migration is a complete slice (`"ph": "X"`) on the track of its destination, from its
///   MIGRATE_START to the matching MIGRATE_END (same pid, pages, source and destination, first
///   in first out). A start without an end, or an end without a start, is an instant.
/// * Bytes moved are counters (`"ph": "C"`), one per process and direction
///   (`"bytes system -> gpu 0x1a2b"`), stepping up at each successful MIGRATE_END (no error
///   code, or 0) to the running total; each starts with a 0 sample. The bytes are the page
///   counts the kernel reports, which cover the range it set out to migrate: pages it could
///   not collect (shared or pinned pages, pages already there) are not subtracted, since the
///   records do not say.
/// * Page faults, queue eviction and restore, unmaps, VM faults, thermal and reset events are
///   instants (`"ph": "i"`, thread scope) on their GPU's track, or on the events track.
/// * Metadata events (`"ph": "M"`) name every process and track used.
///
/// `ts` and `dur` are microseconds (fractional) from the kernel's `CLOCK_BOOTTIME`
/// nanoseconds. Events without a timestamp (VM fault, thermal, reset, process start/end) are
/// placed at the time of the last timestamped event before them (or the first one after, when
/// none came before). Events are sorted by time, metadata first.
///
/// ```
/// use kfd_svm::{SmiEvent, Timeline};
///
/// let timeline: Timeline = [
///     "5 1000000 -42 @7f000(200) 0->1a2b 1a2b:ffffffff 0",
///     "6 1500000 -42 @7f000(200) 0->1a2b 0 0",
/// ]
/// .iter()
/// .map(|line| SmiEvent::parse(line))
/// .collect::<Result<_, _>>()?;
/// let trace = timeline.to_chrome_trace();
/// let slice = trace["traceEvents"]
///     .as_array()
///     .unwrap()
///     .iter()
///     .find(|e| e["ph"] == "X")
///     .unwrap();
/// assert_eq!((slice["ts"].as_f64(), slice["dur"].as_f64()), (Some(1000.0), Some(500.0)));
/// assert_eq!(timeline.bytes_migrated().values().sum::<u64>(), 0x200 * 4096);
/// # Ok::<(), kfd_svm::SmiParseError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    events: Vec<SmiEvent>,
    page_size: u64,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

impl Extend<SmiEvent> for Timeline {
    fn extend<I: IntoIterator<Item = SmiEvent>>(&mut self, iter: I) {
        self.events.extend(iter);
    }
}

impl FromIterator<SmiEvent> for Timeline {
    fn from_iter<I: IntoIterator<Item = SmiEvent>>(iter: I) -> Timeline {
        let mut timeline = Timeline::new();
        timeline.extend(iter);
        timeline
    }
}

/// The key that pairs a MIGRATE_START with its MIGRATE_END.
type MigrationKey = (u32, u64, u64, Location, Location);

/// A trace event under construction: its time, its arrival order, its JSON.
struct Emitted {
    ns: i64,
    seq: usize,
    json: Value,
}

/// Builds the `traceEvents` list.
struct Builder {
    page_size: u64,
    out: Vec<Emitted>,
    tracks: BTreeSet<(u32, u32)>,
    pids: BTreeSet<u32>,
    task_names: BTreeMap<u32, String>,
    /// Per (pid, source, destination): bytes moved so far.
    totals: BTreeMap<(u32, Location, Location), u64>,
    /// MIGRATE_STARTs waiting for their end.
    open: HashMap<MigrationKey, VecDeque<(i64, SmiEvent)>>,
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn migrate_trigger_name(trigger: MigrateTrigger) -> String {
    match trigger {
        MigrateTrigger::Prefetch => "prefetch".into(),
        MigrateTrigger::PageFaultGpu => "gpu page fault".into(),
        MigrateTrigger::PageFaultCpu => "cpu page fault".into(),
        MigrateTrigger::TtmEviction => "ttm eviction".into(),
        MigrateTrigger::Other(raw) => format!("trigger {raw}"),
    }
}

fn eviction_trigger_name(trigger: EvictionTrigger) -> String {
    match trigger {
        EvictionTrigger::Svm => "svm".into(),
        EvictionTrigger::Userptr => "userptr".into(),
        EvictionTrigger::Ttm => "ttm".into(),
        EvictionTrigger::Suspend => "suspend".into(),
        EvictionTrigger::CriuCheckpoint => "criu checkpoint".into(),
        EvictionTrigger::CriuRestore => "criu restore".into(),
        EvictionTrigger::Other(raw) => format!("trigger {raw}"),
    }
}

fn unmap_trigger_name(trigger: UnmapTrigger) -> String {
    match trigger {
        UnmapTrigger::MmuNotify => "mmu notifier".into(),
        UnmapTrigger::MmuNotifyMigrate => "mmu notifier, migration".into(),
        UnmapTrigger::UnmapFromCpu => "cpu unmap".into(),
        UnmapTrigger::Other(raw) => format!("trigger {raw}"),
    }
}

impl Builder {
    fn push(&mut self, ns: i64, json: Value) {
        let seq = self.out.len();
        self.out.push(Emitted { ns, seq, json });
    }

    fn instant(&mut self, ns: i64, pid: u32, tid: u32, name: String, cat: &str, args: Value) {
        self.tracks.insert((pid, tid));
        self.pids.insert(pid);
        self.push(
            ns,
            json!({
                "name": name, "cat": cat, "ph": "i", "s": "t",
                "ts": us(ns), "pid": pid, "tid": tid, "args": args,
            }),
        );
    }

    fn counter(&mut self, ns: i64, pid: u32, from: Location, to: Location, bytes: u64) {
        self.pids.insert(pid);
        self.push(
            ns,
            json!({
                "name": format!("bytes {from} -> {to}"), "cat": "migration", "ph": "C",
                "ts": us(ns), "pid": pid, "args": { "bytes": bytes },
            }),
        );
    }

    /// Starts the counter of a direction with a 0 sample the first time it is seen.
    fn ensure_counter(&mut self, ns: i64, pid: u32, from: Location, to: Location) {
        if let std::collections::btree_map::Entry::Vacant(slot) = self.totals.entry((pid, from, to))
        {
            slot.insert(0);
            self.counter(ns, pid, from, to, 0);
        }
    }

    fn migration_args(
        &self,
        start_page: u64,
        npages: u64,
        from: Location,
        to: Location,
    ) -> Map<String, Value> {
        let mut args = Map::new();
        args.insert("start_page".into(), hex(start_page).into());
        args.insert(
            "addr".into(),
            hex(start_page.saturating_mul(self.page_size)).into(),
        );
        args.insert("npages".into(), npages.into());
        args.insert("bytes".into(), npages.saturating_mul(self.page_size).into());
        args.insert("from".into(), from.to_string().into());
        args.insert("to".into(), to.to_string().into());
        args
    }

    fn event(&mut self, ns: i64, event: &SmiEvent) {
        match event {
            SmiEvent::MigrateStart {
                pid,
                start_page,
                npages,
                from,
                to,
                ..
            } => {
                self.ensure_counter(ns, *pid, *from, *to);
                self.open
                    .entry((*pid, *start_page, *npages, *from, *to))
                    .or_default()
                    .push_back((ns, event.clone()));
            }
            SmiEvent::MigrateEnd {
                pid,
                start_page,
                npages,
                from,
                to,
                trigger,
                error_code,
                ..
            } => {
                let (pid, from, to) = (*pid, *from, *to);
                let mut args = self.migration_args(*start_page, *npages, from, to);
                args.insert("trigger".into(), migrate_trigger_name(*trigger).into());
                if let Some(code) = error_code {
                    args.insert("error_code".into(), (*code).into());
                }
                let start = self
                    .open
                    .get_mut(&(pid, *start_page, *npages, from, to))
                    .and_then(VecDeque::pop_front);
                match start {
                    Some((start_ns, start_event)) => {
                        if let SmiEvent::MigrateStart {
                            prefetch_loc,
                            preferred_loc,
                            ..
                        } = start_event
                        {
                            args.insert("prefetch_loc".into(), prefetch_loc.to_string().into());
                            args.insert("preferred_loc".into(), preferred_loc.to_string().into());
                        }
                        let tid = to.to_raw();
                        self.tracks.insert((pid, tid));
                        self.pids.insert(pid);
                        self.push(
                            start_ns,
                            json!({
                                "name": format!("migrate {from} -> {to} ({})", migrate_trigger_name(*trigger)),
                                "cat": "migration", "ph": "X",
                                "ts": us(start_ns), "dur": us(ns.saturating_sub(start_ns).max(0)),
                                "pid": pid, "tid": tid, "args": args,
                            }),
                        );
                    }
                    None => self.instant(
                        ns,
                        pid,
                        to.to_raw(),
                        "migrate end (start not seen)".into(),
                        "migration",
                        Value::Object(args),
                    ),
                }
                if error_code.unwrap_or(0) == 0 {
                    self.ensure_counter(ns, pid, from, to);
                    let total = self.totals.entry((pid, from, to)).or_default();
                    *total = total.saturating_add(npages.saturating_mul(self.page_size));
                    let total = *total;
                    self.counter(ns, pid, from, to, total);
                }
            }
            SmiEvent::PageFaultStart {
                pid,
                addr_page,
                node,
                write,
                ..
            } => self.instant(
                ns,
                *pid,
                *node,
                format!("gpu page fault ({})", if *write { "write" } else { "read" }),
                "fault",
                json!({ "page": hex(*addr_page), "addr": hex(addr_page.saturating_mul(self.page_size)) }),
            ),
            SmiEvent::PageFaultEnd {
                pid,
                addr_page,
                node,
                migrated,
                ..
            } => self.instant(
                ns,
                *pid,
                *node,
                format!(
                    "gpu page fault recovered ({})",
                    if *migrated { "migrated" } else { "mapped" }
                ),
                "fault",
                json!({ "page": hex(*addr_page), "addr": hex(addr_page.saturating_mul(self.page_size)) }),
            ),
            SmiEvent::QueueEviction {
                pid, node, trigger, ..
            } => self.instant(
                ns,
                *pid,
                *node,
                format!("queues evicted ({})", eviction_trigger_name(*trigger)),
                "queue",
                json!({}),
            ),
            SmiEvent::QueueRestore {
                pid,
                node,
                rescheduled,
                ..
            } => self.instant(
                ns,
                *pid,
                *node,
                if rescheduled.is_rescheduled() {
                    "queue restore rescheduled".into()
                } else {
                    "queues restored".into()
                },
                "queue",
                json!({}),
            ),
            SmiEvent::UnmapFromGpu {
                pid,
                start_page,
                npages,
                node,
                trigger,
                ..
            } => self.instant(
                ns,
                *pid,
                *node,
                format!("unmap from gpu ({})", unmap_trigger_name(*trigger)),
                "unmap",
                json!({ "start_page": hex(*start_page), "npages": npages }),
            ),
            SmiEvent::VmFault { pid, task } => {
                self.task_names.entry(*pid).or_insert_with(|| task.clone());
                self.instant(ns, *pid, EVENTS_TID, "vm fault".into(), "fault", json!({ "task": task }));
            }
            SmiEvent::ProcessStart { pid, task } | SmiEvent::ProcessEnd { pid, task } => {
                self.task_names.entry(*pid).or_insert_with(|| task.clone());
                let name = if matches!(event, SmiEvent::ProcessStart { .. }) {
                    "process start"
                } else {
                    "process end"
                };
                self.instant(ns, *pid, EVENTS_TID, name.into(), "process", json!({ "task": task }));
            }
            SmiEvent::ThermalThrottle { bitmask, counter } => self.instant(
                ns,
                0,
                EVENTS_TID,
                "thermal throttle".into(),
                "device",
                json!({ "bitmask": hex(*bitmask), "counter": counter }),
            ),
            SmiEvent::GpuPreReset { seq, reason } | SmiEvent::GpuPostReset { seq, reason } => {
                let name = if matches!(event, SmiEvent::GpuPreReset { .. }) {
                    "gpu reset begins"
                } else {
                    "gpu reset done"
                };
                self.instant(
                    ns,
                    0,
                    EVENTS_TID,
                    name.into(),
                    "device",
                    json!({ "seq": seq, "reason": reason }),
                );
            }
            SmiEvent::Unknown { id, text } => self.instant(
                ns,
                0,
                EVENTS_TID,
                format!("smi event {id:#x}"),
                "unknown",
                json!({ "text": text }),
            ),
        }
    }

    /// Starts still waiting for their end become instants.
    fn close_open(&mut self) {
        let mut left: Vec<(i64, SmiEvent)> = self.open.drain().flat_map(|(_, q)| q).collect();
        left.sort_by_key(|(ns, _)| *ns);
        for (ns, event) in left {
            if let SmiEvent::MigrateStart {
                pid,
                start_page,
                npages,
                from,
                to,
                trigger,
                ..
            } = event
            {
                let mut args = self.migration_args(start_page, npages, from, to);
                args.insert("trigger".into(), migrate_trigger_name(trigger).into());
                self.instant(
                    ns,
                    pid,
                    to.to_raw(),
                    "migrate start (end not seen)".into(),
                    "migration",
                    Value::Object(args),
                );
            }
        }
    }

    fn process_name(&self, pid: u32) -> String {
        match (pid, self.task_names.get(&pid)) {
            (0, _) => "kfd".into(),
            (_, Some(task)) => format!("{task} (pid {pid})"),
            (_, None) => format!("pid {pid}"),
        }
    }

    fn finish(mut self) -> Vec<Value> {
        self.close_open();
        let mut events: Vec<Value> = Vec::with_capacity(self.out.len() + 2 * self.tracks.len());
        for &pid in &self.pids {
            events.push(json!({
                "name": "process_name", "ph": "M", "pid": pid,
                "args": { "name": self.process_name(pid) },
            }));
        }
        for &(pid, tid) in &self.tracks {
            let name = if tid == EVENTS_TID {
                "events".to_owned()
            } else {
                match Location::from_raw(tid) {
                    Location::System => "system memory".to_owned(),
                    location => location.to_string(),
                }
            };
            events.push(json!({
                "name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                "args": { "name": name },
            }));
        }
        self.out.sort_by_key(|e| (e.ns, e.seq));
        events.extend(self.out.into_iter().map(|e| e.json));
        events
    }
}

impl Timeline {
    /// An empty timeline with 4 KiB pages.
    pub fn new() -> Timeline {
        Timeline::with_page_size(DEFAULT_PAGE_SIZE)
    }

    /// An empty timeline whose page numbers and counts are in pages of `page_size` bytes.
    pub fn with_page_size(page_size: u64) -> Timeline {
        Timeline {
            events: Vec::new(),
            page_size,
        }
    }

    /// Appends an event (events are kept in the order they were read).
    pub fn push(&mut self, event: SmiEvent) {
        self.events.push(event);
    }

    /// The events, in order.
    pub fn events(&self) -> &[SmiEvent] {
        &self.events
    }

    /// The page size in bytes.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Bytes moved per (source, destination): the pages of every MIGRATE_END without an error
    /// (as reported; see the type's notes on counters).
    pub fn bytes_migrated(&self) -> BTreeMap<(Location, Location), u64> {
        let mut totals = BTreeMap::new();
        for event in &self.events {
            if let SmiEvent::MigrateEnd {
                npages,
                from,
                to,
                error_code,
                ..
            } = event
                && error_code.unwrap_or(0) == 0
            {
                let total: &mut u64 = totals.entry((*from, *to)).or_default();
                *total = total.saturating_add(npages.saturating_mul(self.page_size));
            }
        }
        totals
    }

    /// The Chrome trace: `{"traceEvents": [...], "displayTimeUnit": "ns", ...}`.
    pub fn to_chrome_trace(&self) -> Value {
        let mut builder = Builder {
            page_size: self.page_size,
            out: Vec::with_capacity(self.events.len() * 2),
            tracks: BTreeSet::new(),
            pids: BTreeSet::new(),
            task_names: BTreeMap::new(),
            totals: BTreeMap::new(),
            open: HashMap::new(),
        };
        let mut clock = self.events.iter().find_map(SmiEvent::ns).unwrap_or(0);
        for event in &self.events {
            if let Some(ns) = event.ns() {
                clock = ns;
            }
            builder.event(clock, event);
        }
        json!({
            "traceEvents": builder.finish(),
            "displayTimeUnit": "ns",
            "otherData": { "source": "kfd-svm SMI events", "page_size": self.page_size },
        })
    }

    /// Writes [`Timeline::to_chrome_trace`] as JSON.
    pub fn write_chrome_trace<W: io::Write>(&self, writer: W) -> io::Result<()> {
        serde_json::to_writer(writer, &self.to_chrome_trace()).map_err(io::Error::from)
    }
}
