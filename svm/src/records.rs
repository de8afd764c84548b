//! [`KfdRecord`]: SMI events paired into the records rocprofv3 (`--kfd-trace`) writes, with the
//! same kinds, operation names, agents and pairing rules, so that a trace recorded here reads
//! like one rocprofv3 recorded on the same machine.
//!
//! What rocprofiler-sdk does (its `kfd/kfd.cpp`, `kfd.def.cpp`; collected with sources in
//! `shared/ref/rocprof-kfd.md`), and this module with it:
//! * Six kinds reach the output: [`KfdKind`]. The per-line kinds `KFD_EVENT_PAGE_MIGRATE`,
//!   `KFD_EVENT_PAGE_FAULT` and the plain queue restore are dropped by the tool.
//! * START/END lines are paired: migrations on (start address, end address, source,
//!   destination), faults on (address, GPU), queues on (pid, GPU). An end without its start
//!   is dropped, a start never closed is never emitted (both are counted in
//!   [`Pairing::unmatched_ends`] and [`Pairing::open_starts`], which rocprofv3 does not
//!   report). A rescheduled queue restore does not close the eviction; it is an instant
//!   `KFD_EVENT_QUEUE` record.
//! * Timestamps are the kernel's `CLOCK_BOOTTIME` nanoseconds, unchanged; addresses are page
//!   numbers times the page size (rocprofv3 assumes 4 KiB); agents are KFD topology node ids
//!   ([`AgentMap`]): a `gpu_id` is its node, system memory (0) the first CPU node, and the
//!   undefined location (`0xffffffff`) no agent.
//! * The DROPPED_EVENT line (id 14 in rocprofiler-sdk's vendored `kfd_ioctl.h` 1.18,
//!   `"%lld -%d %d"`; not in the upstream kernel) becomes `KFD_EVENT_DROPPED_EVENTS`.
//!
//! Where this differs: rocprofv3 keeps open starts in sets (a second identical start replaces
//! the first); here they queue, first in first out. rocprofv3 treats a `gpu_id` outside the
//! topology as fatal; here it becomes no agent (`None`).

use std::collections::{BTreeMap, HashMap, VecDeque};

use kfd_ioctl::topology::Topology;

use crate::location::Location;
use crate::{EvictionTrigger, MigrateTrigger, SmiEvent, UnmapTrigger};

/// The SMI event id of DROPPED_EVENT in rocprofiler-sdk's `kfd_ioctl.h` (1.18).
pub const SMI_DROPPED_EVENT_ID: u32 = 14;

/// The record kinds rocprofv3 writes (its `rocprofiler_buffer_tracing_kind_t` names, which
/// are the rocpd `category` and the CSV `Domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KfdKind {
    /// Paired migrations.
    PageMigrate,
    /// Paired GPU page faults.
    PageFault,
    /// Paired queue eviction and restore.
    Queue,
    /// A rescheduled queue restore (instant).
    EventQueue,
    /// A range unmapped from a GPU (instant).
    EventUnmapFromGpu,
    /// Events the kernel dropped (instant).
    EventDroppedEvents,
}

impl KfdKind {
    /// Every kind, in rocprofv3's order of the paired kinds last.
    pub const ALL: [KfdKind; 6] = [
        KfdKind::EventQueue,
        KfdKind::EventUnmapFromGpu,
        KfdKind::EventDroppedEvents,
        KfdKind::PageMigrate,
        KfdKind::PageFault,
        KfdKind::Queue,
    ];

    /// The kind's name (`KFD_PAGE_MIGRATE`, …).
    pub const fn name(self) -> &'static str {
        match self {
            KfdKind::PageMigrate => "KFD_PAGE_MIGRATE",
            KfdKind::PageFault => "KFD_PAGE_FAULT",
            KfdKind::Queue => "KFD_QUEUE",
            KfdKind::EventQueue => "KFD_EVENT_QUEUE",
            KfdKind::EventUnmapFromGpu => "KFD_EVENT_UNMAP_FROM_GPU",
            KfdKind::EventDroppedEvents => "KFD_EVENT_DROPPED_EVENTS",
        }
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<KfdKind> {
        KfdKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether records of this kind have a start and an end (the others are instants).
    pub const fn is_paired(self) -> bool {
        matches!(
            self,
            KfdKind::PageMigrate | KfdKind::PageFault | KfdKind::Queue
        )
    }

    /// The full enum spellings of the kind's operations, indexed by operation value.
    pub const fn operation_names(self) -> &'static [&'static str] {
        match self {
            KfdKind::PageMigrate => &[
                "ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH",
                "ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_GPU",
                "ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_CPU",
                "ROCPROFILER_KFD_PAGE_MIGRATE_TTM_EVICTION",
            ],
            KfdKind::PageFault => &[
                "ROCPROFILER_KFD_PAGE_FAULT_READ_FAULT_MIGRATED",
                "ROCPROFILER_KFD_PAGE_FAULT_READ_FAULT_UPDATED",
                "ROCPROFILER_KFD_PAGE_FAULT_WRITE_FAULT_MIGRATED",
                "ROCPROFILER_KFD_PAGE_FAULT_WRITE_FAULT_UPDATED",
            ],
            KfdKind::Queue => &[
                "ROCPROFILER_KFD_QUEUE_EVICT_SVM",
                "ROCPROFILER_KFD_QUEUE_EVICT_USERPTR",
                "ROCPROFILER_KFD_QUEUE_EVICT_TTM",
                "ROCPROFILER_KFD_QUEUE_EVICT_SUSPEND",
                "ROCPROFILER_KFD_QUEUE_EVICT_CRIU_CHECKPOINT",
                "ROCPROFILER_KFD_QUEUE_EVICT_CRIU_RESTORE",
            ],
            // The event enum's values 0..5 are the evictions; 6 is RESTORE_RESCHEDULED.
            KfdKind::EventQueue => &[
                "ROCPROFILER_KFD_EVENT_QUEUE_EVICT_SVM",
                "ROCPROFILER_KFD_EVENT_QUEUE_EVICT_USERPTR",
                "ROCPROFILER_KFD_EVENT_QUEUE_EVICT_TTM",
                "ROCPROFILER_KFD_EVENT_QUEUE_EVICT_SUSPEND",
                "ROCPROFILER_KFD_EVENT_QUEUE_EVICT_CRIU_CHECKPOINT",
                "ROCPROFILER_KFD_EVENT_QUEUE_EVICT_CRIU_RESTORE",
                "ROCPROFILER_KFD_EVENT_QUEUE_RESTORE_RESCHEDULED",
                "ROCPROFILER_KFD_EVENT_QUEUE_RESTORE",
            ],
            KfdKind::EventUnmapFromGpu => &[
                "ROCPROFILER_KFD_EVENT_UNMAP_FROM_GPU_MMU_NOTIFY",
                "ROCPROFILER_KFD_EVENT_UNMAP_FROM_GPU_MMU_NOTIFY_MIGRATE",
                "ROCPROFILER_KFD_EVENT_UNMAP_FROM_GPU_UNMAP_FROM_CPU",
            ],
            KfdKind::EventDroppedEvents => &["ROCPROFILER_KFD_EVENT_DROPPED_EVENTS"],
        }
    }

    /// The full name of operation `op`; one this crate does not know is
    /// `ROCPROFILER_<kind>_<value>`.
    pub fn operation_name(self, op: u32) -> String {
        match self.operation_names().get(op as usize) {
            Some(name) => (*name).to_owned(),
            None => format!("ROCPROFILER_{}_{op}", self.name()),
        }
    }

    /// The operation value whose full name is `name`.
    pub fn operation_from_name(self, name: &str) -> Option<u32> {
        self.operation_names()
            .iter()
            .position(|n| *n == name)
            .map(|i| i as u32)
    }
}

/// The operation value of RESTORE_RESCHEDULED in `rocprofiler_kfd_event_queue_operation_t`.
pub const EVENT_QUEUE_RESTORE_RESCHEDULED: u32 = 6;

/// One record as rocprofv3 writes it. Agents are KFD topology node ids (`None`: no agent, the
/// undefined location); times are `CLOCK_BOOTTIME` ns; addresses are bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KfdRecord {
    /// The kind.
    pub kind: KfdKind,
    /// The operation: an index into [`KfdKind::operation_names`] (any other value is a
    /// trigger this crate does not know, kept as the kernel wrote it).
    pub operation: u32,
    /// The start line's time (the time of an instant).
    pub start_ns: u64,
    /// The end line's time (the time of an instant).
    pub end_ns: u64,
    /// The process the kernel named (rocpd's `tid`).
    pub pid: u32,
    /// The GPU of a fault, a queue record or an unmap.
    pub agent: Option<u32>,
    /// A migration's source.
    pub src_agent: Option<u32>,
    /// A migration's destination.
    pub dst_agent: Option<u32>,
    /// A migration's prefetch location when it started.
    pub prefetch_agent: Option<u32>,
    /// A migration's preferred location when it started.
    pub preferred_agent: Option<u32>,
    /// The first byte of a migration or an unmap; the faulting address of a fault.
    pub start_address: u64,
    /// The end (exclusive) of a migration or an unmap; for a fault, the start address again.
    pub end_address: u64,
    /// A migration's error code (0, or a negative errno; 0 for kernels that do not print it).
    pub error_code: i32,
    /// Dropped events: how many.
    pub count: u64,
}

impl KfdRecord {
    fn new(kind: KfdKind, operation: u32, start_ns: u64, end_ns: u64, pid: u32) -> KfdRecord {
        KfdRecord {
            kind,
            operation,
            start_ns,
            end_ns,
            pid,
            agent: None,
            src_agent: None,
            dst_agent: None,
            prefetch_agent: None,
            preferred_agent: None,
            start_address: 0,
            end_address: 0,
            error_code: 0,
            count: 0,
        }
    }

    /// The full operation name (`ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH`, …); an operation this
    /// crate does not know is `<prefix>_<value>`.
    pub fn operation_name(&self) -> String {
        self.kind.operation_name(self.operation)
    }

    /// Bytes of a migration or an unmap (0 for other kinds).
    pub fn bytes(&self) -> u64 {
        match self.kind {
            KfdKind::PageMigrate | KfdKind::EventUnmapFromGpu => {
                self.end_address.saturating_sub(self.start_address)
            }
            _ => 0,
        }
    }

    /// The duration in ns (0 for instants).
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Whether a page fault migrated pages (`*_MIGRATED`) rather than only mapping them.
    pub fn fault_migrated(&self) -> bool {
        self.kind == KfdKind::PageFault && self.operation.is_multiple_of(2)
    }

    /// Whether a page fault was a write fault.
    pub fn fault_is_write(&self) -> bool {
        self.kind == KfdKind::PageFault && self.operation >= 2
    }
}

/// Maps the kernel's locations to KFD topology node ids, as rocprofv3 names agents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentMap {
    gpus: BTreeMap<u32, u32>,
    system: Option<u32>,
}

impl AgentMap {
    /// The map of a topology: each GPU node by its `gpu_id`, system memory by the first node
    /// without one (a CPU node).
    pub fn from_topology(topology: &Topology) -> AgentMap {
        let mut map = AgentMap::default();
        for node in &topology.nodes {
            match node.gpu_id() {
                Some(gpu_id) => {
                    map.gpus.insert(gpu_id.get(), node.id);
                }
                None if map.system.is_none() => map.system = Some(node.id),
                None => {}
            }
        }
        map
    }

    /// A map from explicit pairs (`gpu_id`, node id) and the system memory node.
    pub fn new(gpus: impl IntoIterator<Item = (u32, u32)>, system: Option<u32>) -> AgentMap {
        AgentMap {
            gpus: gpus.into_iter().collect(),
            system,
        }
    }

    /// The node of a location (`None` for the undefined location and unknown GPUs).
    pub fn node(&self, location: Location) -> Option<u32> {
        match location {
            Location::System => self.system,
            Location::Gpu(gpu_id) => self.gpus.get(&gpu_id.get()).copied(),
            Location::Undefined => None,
        }
    }

    /// The node of a `gpu_id` as SMI lines print it.
    pub fn node_of_gpu(&self, gpu_id: u32) -> Option<u32> {
        self.node(Location::from_raw(gpu_id))
    }

    /// (`gpu_id`, node id) of every GPU.
    pub fn gpus(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.gpus.iter().map(|(g, n)| (*g, *n))
    }

    /// The node of system memory.
    pub fn system(&self) -> Option<u32> {
        self.system
    }
}

/// SMI events paired into [`KfdRecord`]s; see the module notes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pairing {
    /// The records, in the order rocprofv3 emits them: a paired record when its end arrives,
    /// an instant when it arrives.
    pub records: Vec<KfdRecord>,
    /// Ends whose start was not seen (rocprofv3 drops them silently).
    pub unmatched_ends: u64,
    /// Starts still waiting for their end when the events ran out (never emitted).
    pub open_starts: u64,
    /// Events that carry no record: plain queue restores that closed nothing, VM faults,
    /// process start and end, thermal and reset events, unknown ids.
    pub ignored: u64,
}

fn ns(ns: i64) -> u64 {
    u64::try_from(ns).unwrap_or(0)
}

fn migrate_op(trigger: MigrateTrigger) -> u32 {
    match trigger {
        MigrateTrigger::Prefetch => 0,
        MigrateTrigger::PageFaultGpu => 1,
        MigrateTrigger::PageFaultCpu => 2,
        MigrateTrigger::TtmEviction => 3,
        MigrateTrigger::Other(raw) => u32::try_from(raw).unwrap_or(u32::MAX),
    }
}

fn queue_op(trigger: EvictionTrigger) -> u32 {
    match trigger {
        EvictionTrigger::Svm => 0,
        EvictionTrigger::Userptr => 1,
        EvictionTrigger::Ttm => 2,
        EvictionTrigger::Suspend => 3,
        EvictionTrigger::CriuCheckpoint => 4,
        EvictionTrigger::CriuRestore => 5,
        EvictionTrigger::Other(raw) => u32::try_from(raw).unwrap_or(u32::MAX),
    }
}

fn unmap_op(trigger: UnmapTrigger) -> u32 {
    match trigger {
        UnmapTrigger::MmuNotify => 0,
        UnmapTrigger::MmuNotifyMigrate => 1,
        UnmapTrigger::UnmapFromCpu => 2,
        UnmapTrigger::Other(raw) => u32::try_from(raw).unwrap_or(u32::MAX),
    }
}

/// Parses the text of a DROPPED_EVENT line after its id: `"%lld -%d %d"` (time, pid, count).
fn parse_dropped(text: &str) -> Option<(u64, u32, u64)> {
    let mut fields = text.split_ascii_whitespace();
    let ts = fields.next()?.parse::<u64>().ok()?;
    let pid = fields.next()?.strip_prefix('-')?.parse::<u32>().ok()?;
    let count = fields.next()?.parse::<u64>().ok()?;
    Some((ts, pid, count))
}

impl Pairing {
    /// Pairs `events` (in the order they were read) whose page numbers count pages of
    /// `page_size` bytes, naming agents through `agents`.
    pub fn new<'a>(
        events: impl IntoIterator<Item = &'a SmiEvent>,
        page_size: u64,
        agents: &AgentMap,
    ) -> Pairing {
        type MigrateKey = (u64, u64, Location, Location);
        let mut out = Pairing::default();
        let mut migrations: HashMap<MigrateKey, VecDeque<KfdRecord>> = HashMap::new();
        let mut faults: HashMap<(u64, u32), VecDeque<KfdRecord>> = HashMap::new();
        let mut queues: HashMap<(u32, u32), VecDeque<KfdRecord>> = HashMap::new();
        let bytes = |page: u64| page.saturating_mul(page_size);
        for event in events {
            match event {
                SmiEvent::MigrateStart {
                    ns: t,
                    pid,
                    start_page,
                    npages,
                    from,
                    to,
                    prefetch_loc,
                    preferred_loc,
                    trigger,
                } => {
                    let start = bytes(*start_page);
                    let end = bytes(start_page.saturating_add(*npages));
                    let mut r =
                        KfdRecord::new(KfdKind::PageMigrate, migrate_op(*trigger), ns(*t), 0, *pid);
                    r.start_address = start;
                    r.end_address = end;
                    r.src_agent = agents.node(*from);
                    r.dst_agent = agents.node(*to);
                    r.prefetch_agent = agents.node(*prefetch_loc);
                    r.preferred_agent = agents.node(*preferred_loc);
                    migrations
                        .entry((start, end, *from, *to))
                        .or_default()
                        .push_back(r);
                }
                SmiEvent::MigrateEnd {
                    ns: t,
                    start_page,
                    npages,
                    from,
                    to,
                    error_code,
                    ..
                } => {
                    let key = (
                        bytes(*start_page),
                        bytes(start_page.saturating_add(*npages)),
                        *from,
                        *to,
                    );
                    match migrations.get_mut(&key).and_then(VecDeque::pop_front) {
                        Some(mut r) => {
                            r.end_ns = ns(*t);
                            r.error_code = error_code.unwrap_or(0);
                            out.records.push(r);
                        }
                        None => out.unmatched_ends += 1,
                    }
                }
                SmiEvent::PageFaultStart {
                    ns: t,
                    pid,
                    addr_page,
                    node,
                    write,
                } => {
                    // The operation is completed by the end's M/U: 0/1 read, 2/3 write.
                    let mut r = KfdRecord::new(
                        KfdKind::PageFault,
                        if *write { 2 } else { 0 },
                        ns(*t),
                        0,
                        *pid,
                    );
                    r.agent = agents.node_of_gpu(*node);
                    r.start_address = bytes(*addr_page);
                    r.end_address = r.start_address;
                    faults.entry((*addr_page, *node)).or_default().push_back(r);
                }
                SmiEvent::PageFaultEnd {
                    ns: t,
                    addr_page,
                    node,
                    migrated,
                    ..
                } => match faults
                    .get_mut(&(*addr_page, *node))
                    .and_then(VecDeque::pop_front)
                {
                    Some(mut r) => {
                        r.end_ns = ns(*t);
                        r.operation += u32::from(!*migrated);
                        out.records.push(r);
                    }
                    None => out.unmatched_ends += 1,
                },
                SmiEvent::QueueEviction {
                    ns: t,
                    pid,
                    node,
                    trigger,
                } => {
                    let mut r = KfdRecord::new(KfdKind::Queue, queue_op(*trigger), ns(*t), 0, *pid);
                    r.agent = agents.node_of_gpu(*node);
                    queues.entry((*pid, *node)).or_default().push_back(r);
                }
                SmiEvent::QueueRestore {
                    ns: t,
                    pid,
                    node,
                    rescheduled,
                } => {
                    if rescheduled.is_rescheduled() {
                        let mut r = KfdRecord::new(
                            KfdKind::EventQueue,
                            EVENT_QUEUE_RESTORE_RESCHEDULED,
                            ns(*t),
                            ns(*t),
                            *pid,
                        );
                        r.agent = agents.node_of_gpu(*node);
                        out.records.push(r);
                    } else {
                        match queues.get_mut(&(*pid, *node)).and_then(VecDeque::pop_front) {
                            Some(mut r) => {
                                r.end_ns = ns(*t);
                                out.records.push(r);
                            }
                            None => out.unmatched_ends += 1,
                        }
                    }
                }
                SmiEvent::UnmapFromGpu {
                    ns: t,
                    pid,
                    start_page,
                    npages,
                    node,
                    trigger,
                } => {
                    let mut r = KfdRecord::new(
                        KfdKind::EventUnmapFromGpu,
                        unmap_op(*trigger),
                        ns(*t),
                        ns(*t),
                        *pid,
                    );
                    r.agent = agents.node_of_gpu(*node);
                    r.start_address = bytes(*start_page);
                    r.end_address = bytes(start_page.saturating_add(*npages));
                    out.records.push(r);
                }
                SmiEvent::Unknown { id, text } if *id == SMI_DROPPED_EVENT_ID => {
                    match parse_dropped(text) {
                        Some((t, pid, count)) => {
                            let mut r = KfdRecord::new(KfdKind::EventDroppedEvents, 0, t, t, pid);
                            r.count = count;
                            out.records.push(r);
                        }
                        None => out.ignored += 1,
                    }
                }
                _ => out.ignored += 1,
            }
        }
        out.open_starts = [
            migrations.values().map(VecDeque::len).sum::<usize>(),
            faults.values().map(VecDeque::len).sum(),
            queues.values().map(VecDeque::len).sum(),
        ]
        .iter()
        .sum::<usize>() as u64;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(lines: &[&str]) -> Pairing {
        let events: Vec<SmiEvent> = lines.iter().map(|l| SmiEvent::parse(l).unwrap()).collect();
        let agents = AgentMap::new([(0x1a2b, 1), (0x3c4d, 2)], Some(0));
        Pairing::new(&events, 4096, &agents)
    }

    #[test]
    fn migrations_pair_on_range_and_direction_and_take_the_starts_trigger() {
        let p = pair(&[
            "5 1000 -42 @7f000(200) 0->1a2b 1a2b:ffffffff 0",
            "5 1100 -42 @80000(10) 0->3c4d ffffffff:0 1",
            "6 1500 -42 @7f000(200) 0->1a2b 0 0",
            "6 1600 -42 @80000(10) 0->3c4d 1 -12",
            "6 1700 -42 @90000(10) 0->3c4d 1 0",
            "5 1800 -42 @a0000(10) 1a2b->0 ffffffff:ffffffff 3",
        ]);
        assert_eq!((p.unmatched_ends, p.open_starts, p.ignored), (1, 1, 0));
        let [a, b] = p.records[..] else {
            panic!("{p:?}")
        };
        assert_eq!(a.operation_name(), "ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH");
        assert_eq!((a.start_ns, a.end_ns, a.pid), (1000, 1500, 42));
        assert_eq!((a.start_address, a.end_address), (0x7f00_0000, 0x7f20_0000));
        assert_eq!(a.bytes(), 2 << 20);
        assert_eq!((a.src_agent, a.dst_agent), (Some(0), Some(1)));
        assert_eq!((a.prefetch_agent, a.preferred_agent), (Some(1), None));
        assert_eq!(
            b.operation_name(),
            "ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_GPU"
        );
        assert_eq!((b.dst_agent, b.error_code), (Some(2), -12));
    }

    #[test]
    fn faults_queues_unmaps_and_dropped_events() {
        let p = pair(&[
            "7 10 -7 @1000(1a2b) W",
            "7 11 -7 @1000(3c4d) R",
            "8 20 -7 @1000(3c4d) U",
            "8 30 -7 @1000(1a2b) M",
            "9 40 -7 1a2b 0",
            "a 45 -7 1a2b R",
            "a 50 -7 1a2b 0",
            "b 60 -7 @2000(100) 1a2b 2",
            "e 70 -7 5",
            "a 80 -7 3c4d 0",
            "1 7:task",
        ]);
        let names: Vec<String> = p.records.iter().map(KfdRecord::operation_name).collect();
        assert_eq!(
            names,
            [
                "ROCPROFILER_KFD_PAGE_FAULT_READ_FAULT_UPDATED",
                "ROCPROFILER_KFD_PAGE_FAULT_WRITE_FAULT_MIGRATED",
                "ROCPROFILER_KFD_EVENT_QUEUE_RESTORE_RESCHEDULED",
                "ROCPROFILER_KFD_QUEUE_EVICT_SVM",
                "ROCPROFILER_KFD_EVENT_UNMAP_FROM_GPU_UNMAP_FROM_CPU",
                "ROCPROFILER_KFD_EVENT_DROPPED_EVENTS",
            ]
        );
        let r = &p.records;
        assert_eq!((r[0].agent, r[0].start_ns, r[0].end_ns), (Some(2), 11, 20));
        assert!(!r[0].fault_migrated() && !r[0].fault_is_write());
        assert_eq!((r[1].agent, r[1].start_address), (Some(1), 0x100_0000));
        assert!(r[1].fault_migrated() && r[1].fault_is_write());
        assert_eq!((r[2].start_ns, r[2].end_ns), (45, 45));
        assert_eq!((r[3].start_ns, r[3].end_ns, r[3].agent), (40, 50, Some(1)));
        assert_eq!(r[4].bytes(), 0x100 * 4096);
        assert_eq!((r[5].count, r[5].pid, r[5].start_ns), (5, 7, 70));
        // The restore on 3c4d closed nothing; the VM fault carries no record.
        assert_eq!((p.unmatched_ends, p.ignored), (1, 1));
    }
}
