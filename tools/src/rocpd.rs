//! KFD records in rocprofv3's output formats: the rocpd SQLite database, the regions CSV that
//! `rocpd convert -f csv` makes from it, and the `-f json` results under
//! `buffer_records.kfd`; and the database read back.
//!
//! The facts below were read from rocprofiler-sdk's source (its `rocpd_tables.sql`,
//! `rocpd_views.sql`, `data_views.sql`, `summary_views.sql`, `rocpd_indexes.sql`,
//! `generateRocpd.cpp`, `generateJSON.cpp`, `metadata.cpp`, the `rocpd` Python package's
//! `importer.py`, `csv.py` and `query.py`; the SQL and the writer as of rocm-systems 1b1610fc,
//! `projects/rocprofiler-sdk`); `shared/ref/rocprof-kfd.md` lists them with their sources. Nothing was checked against a rocprofv3 run on hardware.
//!
//! # The database
//! * Schema version 3: every `rocpd_*` table exists, named `rocpd_<table>_<uuid>` (the UUID's
//!   hyphens written as underscores), with its foreign keys ([`FOREIGN_KEYS`]; written with
//!   `PRAGMA foreign_keys = ON`, as `rocpd_tables.sql` sets, so every row satisfies them) and a
//!   `rocpd_<table>` view over it; `rocpd_metadata`
//!   holds `schema_version`, `uuid` (with its leading underscore, as rocpd's importer strips it
//!   from the table names) and `guid`. Every view of `data_views.sql` and `summary_views.sql`
//!   is in the file too ([`DATA_VIEW_NAMES`], `rocpd_views.sql` here), 41 views in all, so a
//!   plain `sqlite3` query on any of them works. No index: rocprofiler-sdk's
//!   `rocpd_indexes.sql` creates none. Only the tables KFD records need get rows.
//! * `rocpd_string`: as rocprofv3 fills it (`generateRocpd.cpp` and `metadata.cpp`'s
//!   `get_string_entries`): the empty string, every agent's name, vendor, product and model,
//!   the KFD kinds and all their operation names, sorted and numbered from 1 (rocprofv3 adds
//!   every other buffer and callback kind's names too, which kfdtool does not know).
//! * `rocpd_info_node`: this machine (`/etc/machine-id`, `uname`).
//! * `rocpd_info_process`: the profiled process (the program `kfdtool trace` ran; `kfdtool`
//!   itself when it ran none): `id` = `pid`.
//! * `rocpd_info_thread`: one row per process the kernel named in the records: `id` = `tid` =
//!   that pid (rocprofv3 sets a KFD record's thread to the KFD pid).
//! * `rocpd_info_agent`: one row per KFD topology node, as `generateRocpd.cpp`'s
//!   `insert_agent_data` writes it: `id` = `absolute_index` = the node id (the first CPU is 0),
//!   `logical_index` and `type_index` rocprofv3's logical ids, `uuid` the device id, `type`
//!   CPU or GPU; `extdata` the agent object rocprofv3 serialises ([`crate::agent_info`]:
//!   ~60 members, `capability.*` among them) plus kfdtool's clock samples.
//! * `rocpd_info_pmc`: the 8 KFD kinds, ids from `0x7000000000000000`, block `KFD`.
//! * Per record: a `rocpd_event` (`category_id` → the kind name; stack, parent stack and
//!   correlation ids 0; `extdata` = `{"kfd": {…}}`), a `rocpd_region` (`tid` = the KFD pid,
//!   `start`/`end` = the record's times, equal for instants; `name_id` → the operation name) and
//!   a `rocpd_pmc_event` (`value`: bytes of a migration or an unmap, the address of a fault, 1
//!   for queue records, the count of dropped events).
//! * `extdata` fields: migrations `start_address`, `end_address` (as `"0x…"` strings),
//!   `src_agent_id`, `dst_agent_id`, `prefetch_agent_id`, `preferred_agent_id` (node ids, −1
//!   for none), `error_code`; faults `agent_id`, `address`; queue records `agent_id`; unmaps
//!   `agent_id`, `start_address`, `end_address`; dropped events `count`. rocprofiler-sdk has
//!   shipped more than one encoding of this object (strings everywhere, or a nested
//!   `record.data` variant); [`read_rocpd`] reads all of them.
//!
//! # SMI fields and rocprofv3 columns
//! | SMI field | rocprofv3 | here |
//! |---|---|---|
//! | timestamp (ns, `CLOCK_BOOTTIME`) | `start`/`end`, `*_timestamp` | the same |
//! | pid | region `tid` (thread = KFD pid) | the same |
//! | `gpu_id`, locations | agents (`node_id`) | node ids ([`AgentMap`](kfd_svm::AgentMap)) |
//! | page number, page count | byte addresses (pages × 4 KiB) | pages × the page size |
//! | MIGRATE_END's trigger | ignored (the start's is kept) | the same |
//! | MIGRATE_END's error code | `error_code` | the same (0 when the kernel prints none) |
//! | QUEUE_RESTORE without `R` | closes the eviction, no record of its own | the same |
//! | VM fault, process start/end, thermal, reset | not traced | only in the Perfetto timeline |
//! | — | `rocpd_info_process` command, environment | command only; environment `{}` |
//! | — | CSV `Correlation_Id` | always 0, as rocprofv3 writes for KFD |
//! | — | JSON agent handles | node id + 1 (0: no agent); the `agents` array maps them |

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kfd_ioctl::topology::Topology;
use kfd_svm::{ClockSample, KfdKind, KfdRecord};
use rusqlite::{Connection, params};
use serde_json::{Value, json};

use crate::svm_table::{self, SvmRangeRecord};

/// A failure to write or read a rocpd database.
#[derive(Debug, thiserror::Error)]
pub enum RocpdError {
    /// SQLite refused something.
    #[error("rocpd database {path}: {source}")]
    Sql {
        /// The database.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The database is not one rocpd wrote, or a record in it makes no sense.
    #[error("rocpd database {path}: {what}")]
    Format {
        /// The database.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

/// One agent: a KFD topology node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The node id.
    pub node_id: u32,
    /// The `gpu_id` of a GPU node.
    pub gpu_id: Option<u32>,
    /// GPU (else CPU).
    pub is_gpu: bool,
    /// The node's name (`gfx942`, a CPU's name), possibly empty.
    pub name: String,
    /// rocprofv3's agent object for this node ([`agent_info`](crate::agent_info)): written
    /// as the agent's `extdata` and in `results.json`'s `agents`; `Null` when not known (an
    /// agent made by hand), read back from `extdata`.
    pub info: Value,
}

impl Agent {
    /// The agents of a topology, in node order, with rocprofv3's agent objects (CPUs named
    /// from this machine's `/proc/cpuinfo`).
    pub fn from_topology(topology: &Topology) -> Vec<Agent> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Agent::from_topology_with_cpuinfo(topology, &cpuinfo)
    }

    /// [`from_topology`](Self::from_topology) with `/proc/cpuinfo`'s text given.
    pub fn from_topology_with_cpuinfo(topology: &Topology, cpuinfo: &str) -> Vec<Agent> {
        topology
            .nodes
            .iter()
            .zip(crate::agent_info::agent_objects(topology, cpuinfo))
            .map(|(n, info)| Agent {
                node_id: n.id,
                gpu_id: n.gpu_id().map(kfd_ioctl::GpuId::get),
                is_gpu: n.gpu_id().is_some(),
                // rocprofv3's name (gfx942, the CPU's model name), else the node's name file.
                name: info
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map_or_else(|| n.name.clone().unwrap_or_default(), str::to_owned),
                info,
            })
            .collect()
    }

    /// A string field of [`info`](Self::info) (empty when absent).
    fn info_str(&self, key: &str) -> &str {
        self.info.get(key).and_then(Value::as_str).unwrap_or("")
    }

    /// The agent object for `results.json`: [`info`](Self::info), or for an agent without one
    /// the fields rocprofv3's schema requires (`size`, `id`, `type`, `capability`) and ours.
    pub fn object(&self) -> Value {
        if self.info.is_object() {
            let mut v = self.info.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove(CLOCK_SAMPLES_KEY);
            }
            return v;
        }
        let capability: serde_json::Map<String, Value> = crate::agent_info::CAPABILITY_FIELDS
            .iter()
            .map(|f| ((*f).to_owned(), json!(0)))
            .collect();
        json!({
            "size": crate::agent_info::AGENT_SIZE, "id": handle(Some(self.node_id)),
            "type": if self.is_gpu { 2 } else { 1 }, "capability": capability,
            "node_id": self.node_id, "name": self.name, "gpu_id": self.gpu_id.unwrap_or(0),
        })
    }
}

/// One line naming the agents the summary's node ids stand for: `agents: node 0 CPU (name),
/// node 1 GPU 0x7396 (gfx942)`.
pub fn agents_line(agents: &[Agent]) -> String {
    let names: Vec<String> = agents
        .iter()
        .map(|a| {
            let kind = match (a.is_gpu, a.gpu_id) {
                (true, Some(g)) => format!("GPU {g:#x}"),
                (true, None) => "GPU".to_owned(),
                (false, _) => "CPU".to_owned(),
            };
            if a.name.is_empty() {
                format!("node {} {kind}", a.node_id)
            } else {
                format!("node {} {kind} ({})", a.node_id, a.name)
            }
        })
        .collect();
    format!("agents: {}", names.join(", "))
}

/// What a trace says besides its records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceInfo {
    /// The profiled process.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// Its command line.
    pub command: String,
    /// When recording started and ended (`CLOCK_BOOTTIME` ns).
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// The agents.
    pub agents: Vec<Agent>,
    /// GET_CLOCK_COUNTERS samples of each GPU (at the start and the end of recording): kept in
    /// the database in each GPU agent's `extdata` under `kfd_clock_samples`.
    pub clock_samples: Vec<ClockSample>,
    /// The traced process's SVM ranges as registered and changed, when known (kfdtool's own
    /// table, [`crate::svm_table`]; empty from `kfdtool trace` on hardware).
    pub svm_ranges: Vec<SvmRangeRecord>,
    /// The traced process's XNACK mode, when known.
    pub xnack: Option<bool>,
}

/// The key of an agent's `extdata` (rocpd's `rocpd_info_agent` keeps agent facts as JSON)
/// under which kfdtool keeps that GPU's GET_CLOCK_COUNTERS samples: an array of objects with
/// the ioctl's field names. rocprofv3 does not write it; rocpd's readers ignore it.
pub const CLOCK_SAMPLES_KEY: &str = "kfd_clock_samples";

/// A clock sample as JSON (GET_CLOCK_COUNTERS' field names).
pub fn clock_sample_json(c: &ClockSample) -> Value {
    json!({
        "gpu_id": c.gpu_id,
        "node_id": c.node_id,
        "gpu_clock_counter": c.gpu_counter,
        "cpu_clock_counter": c.cpu_counter,
        "system_clock_counter": c.system_counter,
        "system_clock_freq": c.system_freq,
    })
}

/// A clock sample read back from JSON; `None` when a field is missing.
pub fn clock_sample_from_json(v: &Value) -> Option<ClockSample> {
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    Some(ClockSample {
        gpu_id: u32::try_from(n("gpu_id")?).ok()?,
        node_id: u32::try_from(n("node_id")?).ok()?,
        gpu_counter: n("gpu_clock_counter")?,
        cpu_counter: n("cpu_clock_counter")?,
        system_counter: n("system_clock_counter")?,
        system_freq: n("system_clock_freq")?,
    })
}

/// The schema version rocprofiler-sdk's `rocpd_tables.sql` writes.
pub const SCHEMA_VERSION: &str = "3";

/// The first `rocpd_info_pmc` id rocprofv3 gives the KFD kinds.
pub const KFD_PMC_ID_BASE: u64 = 0x7000_0000_0000_0000;

/// The 8 KFD buffer kinds rocprofv3 describes in `rocpd_info_pmc`, with its descriptions.
const PMC_KINDS: [(&str, &str); 8] = [
    ("KFD_EVENT_PAGE_MIGRATE", "KFD page migration events"),
    ("KFD_EVENT_PAGE_FAULT", "KFD page fault events"),
    ("KFD_EVENT_QUEUE", "KFD queue eviction/restore events"),
    ("KFD_EVENT_UNMAP_FROM_GPU", "KFD unmap from GPU events"),
    ("KFD_EVENT_DROPPED_EVENTS", "KFD dropped_events events"),
    ("KFD_PAGE_MIGRATE", "KFD page migration paired records"),
    ("KFD_PAGE_FAULT", "KFD page fault paired records"),
    ("KFD_QUEUE", "KFD queue eviction/restore paired records"),
];

/// rocpd's tables (schema version 3): name and columns after `id` and `guid`. Written from
/// `rocpd_tables.sql`; the foreign keys are [`FOREIGN_KEYS`].
const TABLES: &[(&str, &str)] = &[
    (
        "string",
        r#""string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT"#,
    ),
    (
        "info_node",
        r#""hash" BIGINT NOT NULL UNIQUE, "machine_id" TEXT NOT NULL UNIQUE, "system_name" TEXT,
        "hostname" TEXT, "release" TEXT, "version" TEXT, "hardware_name" TEXT, "domain_name" TEXT"#,
    ),
    (
        "info_process",
        r#""nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, "init" BIGINT,
        "fini" BIGINT, "start" BIGINT, "end" BIGINT, "command" TEXT,
        "environment" JSONB DEFAULT "{}" NOT NULL, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_thread",
        r#""nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
        "name" TEXT, "start" BIGINT, "end" BIGINT, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_agent",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "type" TEXT CHECK ("type" IN ('CPU', 'GPU')),
        "absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER,
        "name" TEXT, "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT,
        "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_queue",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_stream",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_pmc",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER,
        "target_arch" TEXT CHECK ("target_arch" IN ('CPU', 'GPU')), "event_code" INT,
        "instance_id" INTEGER, "name" TEXT NOT NULL, "symbol" TEXT NOT NULL, "description" TEXT,
        "long_description" TEXT DEFAULT "", "component" TEXT, "units" TEXT DEFAULT "",
        "value_type" TEXT CHECK ("value_type" IN ('ABS', 'ACCUM', 'RELATIVE')), "block" TEXT,
        "expression" TEXT, "is_constant" INTEGER, "is_derived" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_code_object",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER, "uri" TEXT,
        "load_base" BIGINT, "load_size" BIGINT, "load_delta" BIGINT,
        "storage_type" TEXT CHECK ("storage_type" IN ('FILE', 'MEMORY')),
        "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "info_kernel_symbol",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL,
        "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
        "kernarg_segment_size" INTEGER, "kernarg_segment_alignment" INTEGER,
        "group_segment_size" INTEGER, "private_segment_size" INTEGER, "sgpr_count" INTEGER,
        "arch_vgpr_count" INTEGER, "accum_vgpr_count" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "track",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER, "tid" INTEGER, "name_id" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "event",
        r#""category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER,
        "correlation_id" INTEGER, "call_stack" JSONB DEFAULT "{}" NOT NULL,
        "line_info" JSONB DEFAULT "{}" NOT NULL, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "arg",
        r#""event_id" INTEGER NOT NULL, "position" INTEGER NOT NULL, "type" TEXT NOT NULL,
        "name" TEXT NOT NULL, "value" TEXT, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "pmc_event",
        r#""event_id" INTEGER, "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0,
        "extdata" JSONB DEFAULT "{}""#,
    ),
    (
        "region",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
        "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL,
        "event_id" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "sample",
        r#""track_id" INTEGER NOT NULL, "timestamp" BIGINT NOT NULL, "event_id" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "kernel_dispatch",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER NOT NULL,
        "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL, "queue_id" INTEGER NOT NULL,
        "stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL,
        "private_segment_size" INTEGER, "group_segment_size" INTEGER,
        "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL,
        "workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL,
        "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER,
        "event_id" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "memory_copy",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, "start" BIGINT NOT NULL,
        "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "dst_agent_id" INTEGER,
        "dst_address" INTEGER, "src_agent_id" INTEGER, "src_address" INTEGER,
        "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER,
        "region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
    (
        "memory_allocate",
        r#""nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER,
        "type" TEXT CHECK ("type" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM')),
        "level" TEXT CHECK ("level" IN ('REAL', 'VIRTUAL', 'SCRATCH')), "start" BIGINT NOT NULL,
        "end" BIGINT NOT NULL, "address" INTEGER, "size" INTEGER NOT NULL, "queue_id" INTEGER,
        "stream_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL"#,
    ),
];

/// The views of rocprofiler-sdk's `data_views.sql` and `summary_views.sql`, every one.
const DATA_VIEWS: &str = include_str!("rocpd_views.sql");

/// The names of the views of `rocpd_views.sql`, in file order (21: 18 data views, 3 summary
/// views).
pub const DATA_VIEW_NAMES: [&str; 21] = [
    "code_objects",
    "kernel_symbols",
    "processes",
    "threads",
    "regions",
    "region_args",
    "samples",
    "sample_regions",
    "regions_and_samples",
    "kernels",
    "pmc_info",
    "pmc_events",
    "events_args",
    "stream_args",
    "memory_copies",
    "memory_allocations",
    "scratch_memory",
    "counters_collection",
    "top_kernels",
    "busy",
    "top",
];

/// The foreign keys of each table of `rocpd_tables.sql` (rocm-systems 1b1610fc): (table,
/// [(column, referenced table)]); every one references `id` with `ON UPDATE CASCADE`.
/// (`rocpd_indexes.sql` there creates no index: all its statements are commented out.)
pub const FOREIGN_KEYS: &[(&str, &[(&str, &str)])] = &[
    ("info_process", &[("nid", "info_node")]),
    (
        "info_thread",
        &[("nid", "info_node"), ("pid", "info_process")],
    ),
    (
        "info_agent",
        &[("nid", "info_node"), ("pid", "info_process")],
    ),
    (
        "info_queue",
        &[("nid", "info_node"), ("pid", "info_process")],
    ),
    (
        "info_stream",
        &[("nid", "info_node"), ("pid", "info_process")],
    ),
    (
        "info_pmc",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("agent_id", "info_agent"),
        ],
    ),
    (
        "info_code_object",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("agent_id", "info_agent"),
        ],
    ),
    (
        "info_kernel_symbol",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("code_object_id", "info_code_object"),
        ],
    ),
    (
        "track",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("tid", "info_thread"),
            ("name_id", "string"),
        ],
    ),
    ("event", &[("category_id", "string")]),
    ("arg", &[("event_id", "event")]),
    (
        "pmc_event",
        &[("pmc_id", "info_pmc"), ("event_id", "event")],
    ),
    (
        "region",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("tid", "info_thread"),
            ("name_id", "string"),
            ("event_id", "event"),
        ],
    ),
    ("sample", &[("track_id", "track"), ("event_id", "event")]),
    (
        "kernel_dispatch",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("tid", "info_thread"),
            ("agent_id", "info_agent"),
            ("kernel_id", "info_kernel_symbol"),
            ("queue_id", "info_queue"),
            ("stream_id", "info_stream"),
            ("region_name_id", "string"),
            ("event_id", "event"),
        ],
    ),
    (
        "memory_copy",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("tid", "info_thread"),
            ("name_id", "string"),
            ("dst_agent_id", "info_agent"),
            ("src_agent_id", "info_agent"),
            ("stream_id", "info_stream"),
            ("queue_id", "info_queue"),
            ("region_name_id", "string"),
            ("event_id", "event"),
        ],
    ),
    (
        "memory_allocate",
        &[
            ("nid", "info_node"),
            ("pid", "info_process"),
            ("tid", "info_thread"),
            ("agent_id", "info_agent"),
            ("stream_id", "info_stream"),
            ("queue_id", "info_queue"),
            ("event_id", "event"),
        ],
    ),
];

/// The schema: tables suffixed with `suffix`, the `rocpd_*` views, the data views, metadata.
fn schema_sql(suffix: &str, guid: &str) -> String {
    let mut sql = String::new();
    let _ = writeln!(
        sql,
        "CREATE TABLE IF NOT EXISTS \"rocpd_metadata{suffix}\" (\"id\" INTEGER NOT NULL PRIMARY KEY \
         AUTOINCREMENT, \"tag\" TEXT NOT NULL, \"value\" TEXT NOT NULL);\n\
         CREATE VIEW IF NOT EXISTS `rocpd_metadata` AS SELECT * FROM `rocpd_metadata{suffix}`;"
    );
    for (table, columns) in TABLES {
        let mut keys = String::new();
        let fks = FOREIGN_KEYS.iter().find(|(t, _)| t == table);
        for (column, parent) in fks.map_or(&[][..], |(_, k)| k) {
            let _ = write!(
                keys,
                ", FOREIGN KEY ({column}) REFERENCES `rocpd_{parent}{suffix}` (id) ON UPDATE CASCADE"
            );
        }
        let _ = writeln!(
            sql,
            "CREATE TABLE IF NOT EXISTS `rocpd_{table}{suffix}` (\"id\" INTEGER NOT NULL PRIMARY \
             KEY AUTOINCREMENT, \"guid\" TEXT DEFAULT '{guid}' NOT NULL, {columns}{keys});\n\
             CREATE VIEW IF NOT EXISTS `rocpd_{table}` AS SELECT * FROM `rocpd_{table}{suffix}`;"
        );
    }
    sql.push_str(DATA_VIEWS);
    let _ = writeln!(
        sql,
        "INSERT INTO `rocpd_metadata{suffix}` (\"tag\", \"value\") VALUES ('schema_version', \
         '{SCHEMA_VERSION}'), ('uuid', '{suffix}'), ('guid', '{guid}');"
    );
    sql
}

/// A node id as rocpd's `extdata` writes it: −1 for no agent.
fn agent_json(agent: Option<u32>) -> Value {
    agent.map_or(json!(-1), |a| json!(a))
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// The `{"kfd": {…}}` object of a record's event.
pub fn extdata(r: &KfdRecord) -> Value {
    let fields = match r.kind {
        KfdKind::PageMigrate => json!({
            "start_address": hex(r.start_address), "end_address": hex(r.end_address),
            "src_agent_id": agent_json(r.src_agent), "dst_agent_id": agent_json(r.dst_agent),
            "prefetch_agent_id": agent_json(r.prefetch_agent),
            "preferred_agent_id": agent_json(r.preferred_agent), "error_code": r.error_code,
        }),
        KfdKind::PageFault => json!({
            "agent_id": agent_json(r.agent), "address": hex(r.start_address),
        }),
        KfdKind::Queue | KfdKind::EventQueue => json!({ "agent_id": agent_json(r.agent) }),
        KfdKind::EventUnmapFromGpu => json!({
            "agent_id": agent_json(r.agent), "start_address": hex(r.start_address),
            "end_address": hex(r.end_address),
        }),
        KfdKind::EventDroppedEvents => json!({ "count": r.count }),
    };
    json!({ "kfd": fields })
}

/// The `rocpd_pmc_event` value of a record.
pub fn pmc_value(r: &KfdRecord) -> f64 {
    match r.kind {
        KfdKind::PageMigrate | KfdKind::EventUnmapFromGpu => r.bytes() as f64,
        KfdKind::PageFault => r.start_address as f64,
        KfdKind::Queue | KfdKind::EventQueue => 1.0,
        KfdKind::EventDroppedEvents => r.count as f64,
    }
}

/// This machine as `rocpd_info_node` describes it.
struct NodeInfo {
    machine_id: String,
    sysname: String,
    hostname: String,
    release: String,
    version: String,
    machine: String,
    domain: String,
}

fn node_info() -> NodeInfo {
    let uname = rustix::system::uname();
    let s = |c: &std::ffi::CStr| c.to_string_lossy().into_owned();
    let machine_id = std::fs::read_to_string("/etc/machine-id")
        .map(|m| m.trim().to_owned())
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| s(uname.nodename()));
    NodeInfo {
        machine_id,
        sysname: s(uname.sysname()),
        hostname: s(uname.nodename()),
        release: s(uname.release()),
        version: s(uname.version()),
        machine: s(uname.machine()),
        domain: s(uname.domainname()),
    }
}

/// FNV-1a of the machine id: `rocpd_info_node.hash` (rocprofv3 hashes its own way; the column
/// only has to be unique per machine).
fn machine_hash(id: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 1) as i64
}

/// Writes `records` into a new rocpd database on `conn` (empty: no table of rocpd's yet).
pub fn write_rocpd_to(
    conn: &mut Connection,
    info: &TraceInfo,
    records: &[KfdRecord],
) -> rusqlite::Result<()> {
    let uuid = uuid::Uuid::now_v7();
    let guid = uuid.hyphenated().to_string();
    let suffix = format!("_{}", guid.replace('-', "_"));
    // rocpd_tables.sql turns foreign keys on: every row written here must satisfy them.
    conn.execute_batch("PRAGMA foreign_keys = ON")?;
    let tx = conn.transaction()?;
    tx.execute_batch(&schema_sql(&suffix, &guid))?;
    let t = |name: &str| format!("rocpd_{name}{suffix}");

    // Strings as rocprofv3 fills rocpd_string (generateRocpd.cpp, write_rocpd, and
    // metadata.cpp, get_string_entries): the empty string, each agent's name, vendor, product
    // and model, the buffer kinds' names and their operations (of those, kfdtool knows the
    // KFD ones), deduplicated, sorted (byte order), numbered from 1.
    let mut set: BTreeSet<String> = BTreeSet::new();
    set.insert(String::new());
    for a in &info.agents {
        for key in ["name", "vendor_name", "product_name", "model_name"] {
            set.insert(a.info_str(key).to_owned());
        }
        set.insert(a.name.clone());
    }
    for (name, _) in PMC_KINDS {
        set.insert(name.to_owned());
    }
    for kind in KfdKind::ALL {
        set.insert(kind.name().to_owned());
        set.extend(kind.operation_names().iter().map(|n| (*n).to_owned()));
    }
    for r in records {
        set.insert(r.operation_name());
    }
    let strings: BTreeMap<String, i64> = set
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, i as i64 + 1))
        .collect();
    {
        let mut insert = tx.prepare(&format!(
            "INSERT INTO `{}` (id, guid, string) VALUES (?1, ?2, ?3)",
            t("string")
        ))?;
        for (s, id) in &strings {
            insert.execute(params![id, guid, s])?;
        }
    }
    let node = node_info();
    let nid: i64 = 1;
    tx.execute(
        &format!(
            "INSERT INTO `{}` (id, guid, hash, machine_id, system_name, hostname, release, \
             version, hardware_name, domain_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            t("info_node")
        ),
        params![
            nid,
            guid,
            machine_hash(&node.machine_id),
            node.machine_id,
            node.sysname,
            node.hostname,
            node.release,
            node.version,
            node.machine,
            node.domain
        ],
    )?;
    let pid = i64::from(info.pid);
    tx.execute(
        &format!(
            "INSERT INTO `{}` (id, guid, nid, ppid, pid, init, fini, start, end, command) \
             VALUES (?1, ?2, ?3, ?4, ?1, ?5, ?6, ?5, ?6, ?7)",
            t("info_process")
        ),
        params![
            pid,
            guid,
            nid,
            i64::from(info.ppid),
            info.start_ns as i64,
            info.end_ns as i64,
            info.command
        ],
    )?;
    let threads: BTreeSet<u32> = records.iter().map(|r| r.pid).collect();
    for tid in threads {
        tx.execute(
            &format!(
                "INSERT INTO `{}` (id, guid, nid, ppid, pid, tid) VALUES (?1, ?2, ?3, ?4, ?5, ?1)",
                t("info_thread")
            ),
            params![i64::from(tid), guid, nid, i64::from(info.ppid), pid],
        )?;
    }
    // Agents as generateRocpd.cpp's insert_agent_data writes them: id and absolute index the
    // node id, logical and type indexes rocprofv3's, uuid the device id, the user name the
    // product name, extdata the agent object (plus kfdtool's clock samples).
    let mut type_index: BTreeMap<bool, i64> = BTreeMap::new();
    for (logical, a) in info.agents.iter().enumerate() {
        let index = type_index.entry(a.is_gpu).or_default();
        let mut extdata = if a.info.is_object() {
            a.info.clone()
        } else {
            json!({ "node_id": a.node_id, "gpu_id": a.gpu_id.unwrap_or(0) })
        };
        if let Some(o) = extdata.as_object_mut() {
            o.remove(CLOCK_SAMPLES_KEY);
        }
        let samples: Vec<Value> = info
            .clock_samples
            .iter()
            .filter(|c| Some(c.gpu_id) == a.gpu_id)
            .map(clock_sample_json)
            .collect();
        if !samples.is_empty() {
            extdata[CLOCK_SAMPLES_KEY] = Value::Array(samples);
        }
        let int =
            |key: &str, default: i64| a.info.get(key).and_then(Value::as_i64).unwrap_or(default);
        let text = |key: &str| a.info.get(key).and_then(Value::as_str).map(str::to_owned);
        tx.execute(
            &format!(
                "INSERT INTO `{}` (id, guid, nid, pid, type, absolute_index, logical_index, \
                 type_index, uuid, name, model_name, vendor_name, product_name, user_name, \
                 extdata) VALUES (?1, ?2, ?3, ?4, ?5, ?1, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13)",
                t("info_agent")
            ),
            params![
                i64::from(a.node_id),
                guid,
                nid,
                pid,
                if a.is_gpu { "GPU" } else { "CPU" },
                int("logical_node_id", logical as i64),
                int("logical_node_type_id", *index),
                int("device_id", 0),
                a.name,
                text("model_name").unwrap_or_else(|| a.name.clone()),
                text("vendor_name").unwrap_or_default(),
                text("product_name").unwrap_or_else(|| a.name.clone()),
                extdata.to_string()
            ],
        )?;
        *index += 1;
    }
    let mut pmc_ids: BTreeMap<&str, i64> = BTreeMap::new();
    for (i, (name, description)) in PMC_KINDS.iter().enumerate() {
        let id = (KFD_PMC_ID_BASE + i as u64) as i64;
        tx.execute(
            &format!(
                "INSERT INTO `{}` (id, guid, nid, pid, name, symbol, description, component, \
                 value_type, block, is_constant, is_derived) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, 'rocm', 'ABS', 'KFD', 0, 0)",
                t("info_pmc")
            ),
            params![id, guid, nid, pid, name, description],
        )?;
        pmc_ids.insert(name, id);
    }
    {
        let mut event = tx.prepare(&format!(
            "INSERT INTO `{}` (guid, category_id, stack_id, parent_stack_id, correlation_id, \
             extdata) VALUES (?1, ?2, 0, 0, 0, ?3)",
            t("event")
        ))?;
        let mut region = tx.prepare(&format!(
            "INSERT INTO `{}` (guid, nid, pid, tid, start, end, name_id, event_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            t("region")
        ))?;
        let mut pmc = tx.prepare(&format!(
            "INSERT INTO `{}` (guid, event_id, pmc_id, value) VALUES (?1, ?2, ?3, ?4)",
            t("pmc_event")
        ))?;
        for r in records {
            let category = strings[r.kind.name()];
            let name = strings[&r.operation_name()];
            let event_id = event.insert(params![guid, category, extdata(r).to_string()])?;
            region.execute(params![
                guid,
                nid,
                pid,
                i64::from(r.pid),
                r.start_ns as i64,
                r.end_ns as i64,
                name,
                event_id
            ])?;
            pmc.execute(params![
                guid,
                event_id,
                pmc_ids[r.kind.name()],
                pmc_value(r)
            ])?;
        }
    }
    svm_table::write(&tx, &guid, &info.svm_ranges, info.xnack)?;
    tx.commit()
}

/// Writes `records` as a new rocpd database at `path` (an existing file is replaced).
pub fn write_rocpd(path: &Path, info: &TraceInfo, records: &[KfdRecord]) -> Result<(), RocpdError> {
    let sql = |source| RocpdError::Sql {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(RocpdError::Format {
                path: path.to_owned(),
                what: format!("cannot replace it: {e}"),
            });
        }
    }
    let mut conn = Connection::open(path).map_err(sql)?;
    write_rocpd_to(&mut conn, info, records).map_err(sql)
}

/// A CSV field as Python's `csv.QUOTE_NONNUMERIC` writes it (via pandas): strings quoted,
/// quotes doubled; numbers bare; NULL an empty quoted string.
fn csv_field(value: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => "\"\"".to_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format!("{f:?}"),
        ValueRef::Text(t) => format!("\"{}\"", String::from_utf8_lossy(t).replace('"', "\"\"")),
        ValueRef::Blob(b) => format!("\"{}\"", String::from_utf8_lossy(b).replace('"', "\"\"")),
    }
}

/// Python's `str.title()`: the first letter of every run of letters upper case, the rest lower
/// case (rocpd's `query.py` titles the CSV header so).
fn python_title(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_word = false;
    for c in name.chars() {
        if c.is_alphabetic() {
            if in_word {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            in_word = true;
        } else {
            out.push(c);
            in_word = false;
        }
    }
    out
}

/// The query of rocpd's `write_region_csv` (`csv.py`): every region, KFD ones included.
pub const REGIONS_QUERY: &str = "SELECT guid, category AS Domain, name AS Function, \
     pid AS Process_Id, tid AS Thread_Id, stack_id AS Correlation_Id, start AS Start_Timestamp, \
     end AS End_Timestamp FROM regions ORDER BY guid ASC, start ASC, end DESC";

/// `regions_trace.csv` as `rocpd convert -f csv` writes it from the database on `conn`: the
/// header of title-cased column names, every field quoted but the numbers, `\n` line ends.
pub fn regions_csv(conn: &Connection) -> rusqlite::Result<String> {
    let mut stmt = conn.prepare(REGIONS_QUERY)?;
    let names: Vec<String> = stmt
        .column_names()
        .map(|n| format!("\"{}\"", python_title(n)))
        .collect();
    let columns = names.len();
    let mut out = names.join(",");
    out.push('\n');
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let fields: rusqlite::Result<Vec<String>> = (0..columns)
            .map(|i| row.get_ref(i).map(csv_field))
            .collect();
        out.push_str(&fields?.join(","));
        out.push('\n');
    }
    Ok(out)
}

/// The size rocprofiler-sdk's C record of `kind` has on x86-64 (the JSON `size` field).
fn record_size(kind: KfdKind) -> u64 {
    match kind {
        // size, kind, operation, start, end, pid (+4), 2 addresses, 4 agents, error (+4)
        KfdKind::PageMigrate => 96,
        // size, kind, operation, start, end, pid (+4), agent, address
        KfdKind::PageFault => 56,
        // size, kind, operation, start, end, pid (+4), agent
        KfdKind::Queue => 48,
        // size, kind, operation, timestamp, pid (+4), agent
        KfdKind::EventQueue => 40,
        // size, kind, operation, timestamp, pid (+4), agent, 2 addresses
        KfdKind::EventUnmapFromGpu => 56,
        // size, kind, operation, timestamp, pid, count
        KfdKind::EventDroppedEvents => 32,
    }
}

/// A JSON agent handle: the node id + 1 (0 for no agent).
fn handle(agent: Option<u32>) -> Value {
    json!({ "handle": agent.map_or(0, |a| u64::from(a) + 1) })
}

/// One record as `-f json` writes it under `buffer_records.kfd` (fields in save.hpp's order).
pub fn record_json(r: &KfdRecord) -> Value {
    let mut v = serde_json::Map::new();
    v.insert("size".into(), record_size(r.kind).into());
    v.insert("operation".into(), r.operation.into());
    if r.kind.is_paired() {
        v.insert("start_timestamp".into(), r.start_ns.into());
        v.insert("end_timestamp".into(), r.end_ns.into());
    } else {
        v.insert("timestamp".into(), r.start_ns.into());
    }
    v.insert("pid".into(), r.pid.into());
    let address = |a: u64| json!({ "handle": a });
    match r.kind {
        KfdKind::PageMigrate => {
            v.insert("start_address".into(), address(r.start_address));
            v.insert("end_address".into(), address(r.end_address));
            v.insert("src_agent".into(), handle(r.src_agent));
            v.insert("dst_agent".into(), handle(r.dst_agent));
            v.insert("prefetch_agent".into(), handle(r.prefetch_agent));
            v.insert("preferred_agent".into(), handle(r.preferred_agent));
            v.insert("error_code".into(), r.error_code.into());
        }
        KfdKind::PageFault => {
            v.insert("agent_id".into(), handle(r.agent));
            v.insert("address".into(), address(r.start_address));
        }
        KfdKind::Queue | KfdKind::EventQueue => {
            v.insert("agent_id".into(), handle(r.agent));
        }
        KfdKind::EventUnmapFromGpu => {
            v.insert("agent_id".into(), handle(r.agent));
            v.insert("start_address".into(), address(r.start_address));
            v.insert("end_address".into(), address(r.end_address));
        }
        KfdKind::EventDroppedEvents => {
            v.insert("count".into(), r.count.into());
        }
    }
    Value::Object(v)
}

/// The `-f json` results: `{"rocprofiler-sdk-tool": [{metadata, agents, counters, strings,
/// code_objects, kernel_symbols, host_functions, callback_records, buffer_records: {kfd:
/// […]}}]}`, valid against rocprofv3's `rocprofv3-schema.json` (rocm-systems ac6e512e:
/// every required member present with its type; agents are [`Agent::object`]).
pub fn results_json(info: &TraceInfo, records: &[KfdRecord]) -> Value {
    let agents: Vec<Value> = info.agents.iter().map(Agent::object).collect();
    let kinds: Vec<Value> = KfdKind::ALL
        .iter()
        .map(|k| json!({ "kind": k.name(), "operations": k.operation_names() }))
        .collect();
    // The members rocprofv3-schema.json requires, in its order; a KFD trace has no counters,
    // code objects, kernel symbols, host functions or callback records.
    json!({
        "rocprofiler-sdk-tool": [{
            "metadata": {
                "pid": info.pid, "ppid": info.ppid, "command": info.command,
                "init_time": info.start_ns, "fini_time": info.end_ns,
            },
            "agents": agents,
            "counters": [],
            "strings": { "buffer_records": kinds },
            "code_objects": [],
            "kernel_symbols": [],
            "host_functions": [],
            "callback_records": {},
            "buffer_records": { "kfd": records.iter().map(record_json).collect::<Vec<_>>() },
        }]
    })
}

/// A number in `extdata`: a JSON number, or a string in decimal or `0x` hex.
fn number(v: &Value) -> Option<i128> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        Value::String(s) => match s.strip_prefix("0x") {
            Some(h) => i128::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        },
        // cereal writes an agent or address struct as {"handle": N}.
        Value::Object(o) => o.get("handle").and_then(number),
        _ => None,
    }
}

/// The KFD fields of an event's `extdata`, whichever encoding wrote them.
fn kfd_fields(extdata: &Value) -> Option<&serde_json::Map<String, Value>> {
    let kfd = extdata.get("kfd")?;
    let inner = kfd
        .get("record")
        .and_then(|r| r.get("data"))
        .or_else(|| kfd.get("data"))
        .unwrap_or(kfd);
    inner.as_object()
}

/// A trace read back from a rocpd database.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RocpdTrace {
    /// The KFD records, in region order.
    pub records: Vec<KfdRecord>,
    /// The agents (`rocpd_info_agent`).
    pub agents: Vec<Agent>,
    /// Regions of other categories (HIP, HSA, kernels …), not read.
    pub other_regions: u64,
    /// The GPUs' clock samples kfdtool keeps in agent `extdata` ([`CLOCK_SAMPLES_KEY`]).
    pub clock_samples: Vec<ClockSample>,
    /// The SVM ranges of kfdtool's own table (empty for rocprofv3's databases).
    pub svm_ranges: Vec<SvmRangeRecord>,
    /// The XNACK mode kfdtool's table recorded.
    pub xnack: Option<bool>,
}

/// Reads the KFD records of a rocpd database (ours or rocprofv3's) at `path`.
pub fn read_rocpd(path: &Path) -> Result<RocpdTrace, RocpdError> {
    let sql = |source| RocpdError::Sql {
        path: path.to_owned(),
        source,
    };
    let bad = |what: String| RocpdError::Format {
        path: path.to_owned(),
        what,
    };
    // SQLite's open of a FIFO would wait for a writer forever, and a device is no database:
    // only a regular file is opened. (A missing file is left to SQLite's own error.)
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        return Err(bad("not a regular file".to_owned()));
    }
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(sql)?;
    let has_regions: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'rocpd_region'",
            [],
            |row| row.get::<_, i64>(0),
        )
        .map_err(sql)?
        > 0;
    if !has_regions {
        return Err(bad("no rocpd_region view: not a rocpd database".into()));
    }
    let mut trace = RocpdTrace::default();
    let mut stmt = conn
        .prepare(
            "SELECT C.string, S.string, T.tid, R.start, R.end, E.extdata \
             FROM rocpd_region R \
             INNER JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid \
             INNER JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid \
             INNER JOIN rocpd_string C ON C.id = E.category_id AND C.guid = E.guid \
             INNER JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid \
             ORDER BY R.guid, R.id",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    while let Some(row) = rows.next().map_err(sql)? {
        let category: String = row.get(0).map_err(sql)?;
        let Some(kind) = KfdKind::from_name(&category) else {
            trace.other_regions += 1;
            continue;
        };
        let name: String = row.get(1).map_err(sql)?;
        let operation = kind
            .operation_from_name(&name)
            .or_else(|| {
                name.rsplit('_')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|_| name.starts_with(&format!("ROCPROFILER_{category}_")))
            })
            .ok_or_else(|| bad(format!("{category} region with an unknown name {name}")))?;
        let tid: i64 = row.get(2).map_err(sql)?;
        let start: i64 = row.get(3).map_err(sql)?;
        let end: i64 = row.get(4).map_err(sql)?;
        let extdata: String = row
            .get::<_, Option<String>>(5)
            .map_err(sql)?
            .unwrap_or_default();
        let extdata: Value = serde_json::from_str(&extdata)
            .map_err(|e| bad(format!("{category} {name}: extdata is not JSON: {e}")))?;
        let fields = kfd_fields(&extdata)
            .ok_or_else(|| bad(format!("{category} {name}: extdata has no kfd object")))?;
        let get = |key: &str| fields.get(key).and_then(number);
        let agent = |key: &str| get(key).and_then(|n| u32::try_from(n).ok());
        let address = |key: &str| get(key).and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        let fault_address = address("address");
        let record = KfdRecord {
            kind,
            operation,
            start_ns: u64::try_from(start).unwrap_or(0),
            end_ns: u64::try_from(end).unwrap_or(0),
            pid: u32::try_from(tid).map_err(|_| bad(format!("thread id {tid} is not a pid")))?,
            agent: agent("agent_id"),
            src_agent: agent("src_agent_id"),
            dst_agent: agent("dst_agent_id"),
            prefetch_agent: agent("prefetch_agent_id"),
            preferred_agent: agent("preferred_agent_id"),
            start_address: if kind == KfdKind::PageFault {
                fault_address
            } else {
                address("start_address")
            },
            end_address: if kind == KfdKind::PageFault {
                fault_address
            } else {
                address("end_address")
            },
            error_code: get("error_code")
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0),
            count: get("count")
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0),
        };
        trace.records.push(record);
    }
    drop(rows);
    let mut stmt = conn
        .prepare("SELECT id, type, name, extdata FROM rocpd_info_agent ORDER BY id")
        .map_err(sql)?;
    let mut rows = stmt.query([]).map_err(sql)?;
    while let Some(row) = rows.next().map_err(sql)? {
        let id: i64 = row.get(0).map_err(sql)?;
        let kind: Option<String> = row.get(1).map_err(sql)?;
        let name: Option<String> = row.get(2).map_err(sql)?;
        let extdata: Option<String> = row.get(3).map_err(sql)?;
        let extdata = extdata.and_then(|e| serde_json::from_str::<Value>(&e).ok());
        let gpu_id = extdata
            .as_ref()
            .and_then(|e| e.get("gpu_id").and_then(Value::as_u64))
            .and_then(|g| u32::try_from(g).ok())
            .filter(|&g| g != 0);
        if let Some(samples) = extdata
            .as_ref()
            .and_then(|e| e.get(CLOCK_SAMPLES_KEY))
            .and_then(Value::as_array)
        {
            for v in samples {
                let sample = clock_sample_from_json(v)
                    .ok_or_else(|| bad(format!("agent {id}: a bad clock sample {v}")))?;
                trace.clock_samples.push(sample);
            }
        }
        trace.agents.push(Agent {
            node_id: u32::try_from(id).map_err(|_| bad(format!("agent id {id}")))?,
            gpu_id,
            is_gpu: kind.as_deref() == Some("GPU"),
            name: name.unwrap_or_default(),
            info: extdata.unwrap_or(Value::Null),
        });
    }
    (trace.svm_ranges, trace.xnack) = svm_table::read(&conn).map_err(bad)?;
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: KfdKind, operation: u32) -> KfdRecord {
        KfdRecord {
            kind,
            operation,
            start_ns: 100,
            end_ns: 250,
            pid: 77,
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

    fn sample() -> Vec<KfdRecord> {
        vec![
            KfdRecord {
                src_agent: Some(0),
                dst_agent: Some(2),
                preferred_agent: Some(2),
                start_address: 0x7f00_0000_0000,
                end_address: 0x7f00_0020_0000,
                error_code: -12,
                ..record(KfdKind::PageMigrate, 3)
            },
            KfdRecord {
                agent: Some(2),
                start_address: 0x7f00_0000_5000,
                end_address: 0x7f00_0000_5000,
                ..record(KfdKind::PageFault, 3)
            },
            KfdRecord {
                agent: Some(1),
                ..record(KfdKind::Queue, 4)
            },
            KfdRecord {
                agent: Some(1),
                end_ns: 100,
                ..record(KfdKind::EventQueue, 6)
            },
            KfdRecord {
                count: 9,
                end_ns: 100,
                ..record(KfdKind::EventDroppedEvents, 0)
            },
        ]
    }

    fn info() -> TraceInfo {
        TraceInfo {
            pid: 76,
            ppid: 1,
            command: "a \"quoted\" command".into(),
            start_ns: 1,
            end_ns: 2,
            agents: vec![],
            clock_samples: Vec::new(),
            ..Default::default()
        }
    }

    #[test]
    fn records_read_back_from_every_extdata_encoding() {
        let dir = std::env::temp_dir().join(format!("kfdtool-rocpd-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.db");
        let records = sample();
        write_rocpd(&path, &info(), &records).unwrap();
        assert_eq!(read_rocpd(&path).unwrap().records, records);

        // The other shapes rocprofiler-sdk has written: every value a string (agents -1 for
        // none), and the cereal variant nesting the fields in record.data with numbers.
        let conn = Connection::open(&path).unwrap();
        let rows: Vec<(i64, String)> = conn
            .prepare("SELECT id, extdata FROM rocpd_event ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let table: String = conn
            .query_row(
                "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_event_%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        for (i, (id, ext)) in rows.iter().enumerate() {
            let v: Value = serde_json::from_str(ext).unwrap();
            let fields = v["kfd"].as_object().unwrap();
            let rewritten = if i % 2 == 0 {
                let strings: serde_json::Map<String, Value> = fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            Value::String(v.to_string().trim_matches('"').into()),
                        )
                    })
                    .collect();
                json!({ "kfd": strings })
            } else {
                let numbers: serde_json::Map<String, Value> = fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            number(v).map_or(json!(null), |n| json!(n as i64)),
                        )
                    })
                    .collect();
                json!({ "kfd": { "record": { "index": 5, "data": numbers } } })
            };
            conn.execute(
                &format!("UPDATE `{table}` SET extdata = ?1 WHERE id = ?2"),
                params![rewritten.to_string(), id],
            )
            .unwrap();
        }
        drop(conn);
        assert_eq!(read_rocpd(&path).unwrap().records, records);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_csv_quotes_strings_only_and_titles_the_header() {
        assert_eq!(python_title("guid"), "Guid");
        assert_eq!(python_title("Process_Id"), "Process_Id");
        assert_eq!(python_title("start_TIMESTAMP2x"), "Start_Timestamp2X");
        let mut conn = Connection::open_in_memory().unwrap();
        write_rocpd_to(&mut conn, &info(), &sample()).unwrap();
        let csv = regions_csv(&conn).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 6);
        // Sorted by start, then end descending: the 250 ends before the instants at 100.
        assert!(
            lines[1].contains(
                "\"KFD_PAGE_MIGRATE\",\"ROCPROFILER_KFD_PAGE_MIGRATE_TTM_EVICTION\",76,77,0,100,250"
            ),
            "{csv}"
        );
        assert!(lines[5].ends_with(",76,77,0,100,100"), "{csv}");
        assert_eq!(
            csv_field(rusqlite::types::ValueRef::Text(b"a\"b")),
            "\"a\"\"b\""
        );
    }

    #[test]
    fn a_database_without_rocpd_tables_is_refused() {
        let dir = std::env::temp_dir().join(format!("kfdtool-rocpd-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("empty.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        match read_rocpd(&path) {
            Err(RocpdError::Format { what, .. }) => assert!(what.contains("not a rocpd database")),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_view_names_are_the_views_of_the_sql_file() {
        let created: Vec<&str> = DATA_VIEWS
            .split("CREATE VIEW IF NOT EXISTS `")
            .skip(1)
            .filter_map(|rest| rest.split('`').next())
            .collect();
        assert_eq!(created, DATA_VIEW_NAMES);
    }
}
