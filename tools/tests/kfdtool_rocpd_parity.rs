//! rocprofv3 parity of what `kfdtool trace` writes, checked against rocprofiler-sdk's
//! published schema, encoded here (rocm-systems commit 1b1610fc,
//! `projects/rocprofiler-sdk/source/share/rocprofiler-sdk-rocpd/*.sql`; the JSON schema
//! `projects/rocprofiler-sdk/source/docs/rocprofv3-schema.json`, last changed in ac6e512e,
//! draft-07):
//! * every view of `rocpd_views.sql`, `data_views.sql` and `summary_views.sql` is in the file
//!   (41) and queries; every foreign key of `rocpd_tables.sql` is declared and the rows satisfy
//!   them; no index (`rocpd_indexes.sql` creates none);
//! * agents are numbered and described as rocprofv3 does (`generateRocpd.cpp`,
//!   `agent.cpp`), `rocpd_string` starts with the empty string and is sorted;
//! * `results.json` has every member the JSON schema requires, with its type.

use kfd_emu::machine::Machine;
use kfd_svm::{KfdKind, KfdRecord};
use kfdtool::rocpd::{self, Agent, TraceInfo};
use rusqlite::Connection;
use serde_json::{Value, json};

fn blank(kind: KfdKind, operation: u32) -> KfdRecord {
    KfdRecord {
        kind,
        operation,
        start_ns: 1000,
        end_ns: 2000,
        pid: 4242,
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

/// One record of each kind on the MI300X preset's first GPU (node 1).
fn records() -> Vec<KfdRecord> {
    vec![
        KfdRecord {
            src_agent: Some(0),
            dst_agent: Some(1),
            prefetch_agent: Some(1),
            start_address: 0x7f00_0000_0000,
            end_address: 0x7f00_0020_0000,
            ..blank(KfdKind::PageMigrate, 0)
        },
        KfdRecord {
            agent: Some(1),
            start_address: 0x7f00_0000_5000,
            end_address: 0x7f00_0000_5000,
            ..blank(KfdKind::PageFault, 1)
        },
        KfdRecord {
            agent: Some(1),
            ..blank(KfdKind::Queue, 0)
        },
        KfdRecord {
            agent: Some(1),
            end_ns: 1000,
            ..blank(KfdKind::EventQueue, 6)
        },
        KfdRecord {
            agent: Some(1),
            start_address: 0x7f00_0000_0000,
            end_address: 0x7f00_0020_0000,
            end_ns: 1000,
            ..blank(KfdKind::EventUnmapFromGpu, 2)
        },
        KfdRecord {
            count: 3,
            end_ns: 1000,
            ..blank(KfdKind::EventDroppedEvents, 0)
        },
    ]
}

const CPUINFO: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\
    model name\t: AMD EPYC 9654 96-Core Processor\napicid\t: 0\n\n";

fn info() -> TraceInfo {
    let machine = Machine::preset("mi300x").expect("preset");
    TraceInfo {
        pid: 4242,
        ppid: 1,
        command: "parity".into(),
        start_ns: 1,
        end_ns: 3000,
        agents: Agent::from_topology_with_cpuinfo(machine.topology(), CPUINFO),
        clock_samples: Vec::new(),
        ..Default::default()
    }
}

fn database() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    rocpd::write_rocpd_to(&mut conn, &info(), &records()).unwrap();
    conn
}

fn strings(conn: &Connection, sql: &str) -> Vec<String> {
    conn.prepare(sql)
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The views rocprofv3 writes into results.db: rocpd_views.sql, data_views.sql,
/// summary_views.sql.
const VIEWS: [&str; 41] = [
    "rocpd_metadata",
    "rocpd_string",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_info_agent",
    "rocpd_info_queue",
    "rocpd_info_stream",
    "rocpd_info_pmc",
    "rocpd_info_code_object",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "rocpd_event",
    "rocpd_arg",
    "rocpd_pmc_event",
    "rocpd_region",
    "rocpd_sample",
    "rocpd_kernel_dispatch",
    "rocpd_memory_copy",
    "rocpd_memory_allocate",
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

#[test]
fn every_view_of_rocprofiler_sdk_is_in_the_file_and_queries() {
    let conn = database();
    let mut views = strings(&conn, "SELECT name FROM sqlite_master WHERE type = 'view'");
    views.sort();
    let mut expected: Vec<String> = VIEWS.iter().map(|v| (*v).to_owned()).collect();
    expected.sort();
    assert_eq!(views, expected);
    for view in VIEWS {
        conn.prepare(&format!("SELECT * FROM `{view}`"))
            .and_then(|mut s| s.query([]).and_then(|mut rows| rows.next().map(|_| ())))
            .unwrap_or_else(|e| panic!("{view}: {e}"));
    }
    let regions: i64 = conn
        .query_row("SELECT COUNT(*) FROM regions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(regions, records().len() as i64);
    // `top` sums the regions by name: the migration's 1000 ns under its operation's name.
    let (calls, total): (i64, f64) = conn
        .query_row(
            "SELECT total_calls, total_duration FROM top \
             WHERE name = 'ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((calls, total), (1, 1.0));
    // Neither kfdtool nor rocprofiler-sdk (its rocpd_indexes.sql is all comments) makes an
    // index; SQLite's own for UNIQUE columns have no SQL.
    let indexes = strings(
        &conn,
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
    );
    assert!(indexes.is_empty(), "{indexes:?}");
}

/// rocpd_tables.sql's foreign keys: "table: column->parent, …".
const FOREIGN_KEYS: [&str; 17] = [
    "info_process: nid->info_node",
    "info_thread: nid->info_node pid->info_process",
    "info_agent: nid->info_node pid->info_process",
    "info_queue: nid->info_node pid->info_process",
    "info_stream: nid->info_node pid->info_process",
    "info_pmc: nid->info_node pid->info_process agent_id->info_agent",
    "info_code_object: nid->info_node pid->info_process agent_id->info_agent",
    "info_kernel_symbol: nid->info_node pid->info_process code_object_id->info_code_object",
    "track: nid->info_node pid->info_process tid->info_thread name_id->string",
    "event: category_id->string",
    "arg: event_id->event",
    "pmc_event: pmc_id->info_pmc event_id->event",
    "region: nid->info_node pid->info_process tid->info_thread name_id->string event_id->event",
    "sample: track_id->track event_id->event",
    "kernel_dispatch: nid->info_node pid->info_process tid->info_thread agent_id->info_agent \
     kernel_id->info_kernel_symbol queue_id->info_queue stream_id->info_stream \
     region_name_id->string event_id->event",
    "memory_copy: nid->info_node pid->info_process tid->info_thread name_id->string \
     dst_agent_id->info_agent src_agent_id->info_agent stream_id->info_stream \
     queue_id->info_queue region_name_id->string event_id->event",
    "memory_allocate: nid->info_node pid->info_process tid->info_thread agent_id->info_agent \
     stream_id->info_stream queue_id->info_queue event_id->event",
];

#[test]
fn tables_carry_rocprofiler_sdks_foreign_keys_and_the_rows_satisfy_them() {
    let conn = database();
    let uuid: String = conn
        .query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = 'uuid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let tables = strings(
        &conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_%' \
         AND name NOT LIKE 'rocpd_metadata%'",
    );
    assert_eq!(tables.len(), 19);
    for table in &tables {
        let base = table
            .strip_prefix("rocpd_")
            .and_then(|t| t.strip_suffix(uuid.as_str()))
            .unwrap();
        let mut keys: Vec<(i64, String, String, String, String)> = conn
            .prepare(&format!("PRAGMA foreign_key_list(`{table}`)"))
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // SQLite lists them last-declared first.
        keys.sort_by_key(|k| std::cmp::Reverse(k.0));
        let mut got = Vec::new();
        for (_, parent, from, to, on_update) in keys {
            assert_eq!(
                (to.as_str(), on_update.as_str()),
                ("id", "CASCADE"),
                "{table}"
            );
            let parent = parent
                .strip_prefix("rocpd_")
                .and_then(|p| p.strip_suffix(uuid.as_str()))
                .unwrap()
                .to_owned();
            got.push(format!("{from}->{parent}"));
        }
        let expected = FOREIGN_KEYS
            .iter()
            .find_map(|k| k.strip_prefix(&format!("{base}: ")))
            .map_or_else(Vec::new, |k| k.split_whitespace().collect::<Vec<_>>());
        assert_eq!(got, expected, "{table}");
    }
    // Every row written refers to rows that exist.
    let violations: i64 = conn
        .query_row("SELECT COUNT(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(violations, 0);
}

#[test]
fn agents_and_strings_are_as_rocprofv3_writes_them() {
    let conn = database();
    let machine = Machine::preset("mi300x").unwrap();
    let topology = machine.topology();
    type Row = (i64, String, i64, i64, i64, String, String, String, String);
    let rows: Vec<Row> = conn
        .prepare(
            "SELECT id, type, absolute_index, logical_index, type_index, name, vendor_name, \
             model_name, extdata FROM rocpd_info_agent ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), topology.nodes.len());
    let mut gpus = 0;
    for (i, (row, node)) in rows.iter().zip(&topology.nodes).enumerate() {
        // Ids are node ids (the CPU is 0), as generateRocpd.cpp inserts `itr.node_id`.
        assert_eq!(
            (row.0, row.2, row.3),
            (i64::from(node.id), i64::from(node.id), i as i64)
        );
        let ext: Value = serde_json::from_str(&row.8).unwrap();
        assert_eq!(ext["node_id"], node.id);
        assert_eq!(ext["logical_node_id"], i);
        assert_eq!(ext["cpu_cores_count"], node.properties.cpu_cores_count);
        assert_eq!(ext["simd_count"], node.properties.simd_count);
        assert_eq!(ext["capability"].as_object().unwrap().len(), 24);
        assert!(ext["mem_banks"].is_array() && ext["io_links"].is_array());
        assert!(ext.as_object().unwrap().len() >= 60, "{ext}");
        if node.is_gpu() {
            assert_eq!(row.1, "GPU");
            assert_eq!(row.4, gpus);
            gpus += 1;
            assert_eq!(ext["type"], 2);
            assert_eq!(ext["gpu_id"], node.gpu_id().unwrap().get());
            assert_eq!((row.5.as_str(), row.6.as_str()), ("gfx942", "AMD"));
            assert_eq!(ext["cu_count"], node.cu_count().unwrap());
            assert_eq!(
                ext["capability"]["SVMAPISupported"],
                u64::from(node.capability().svm_api_supported())
            );
            assert_eq!(ext["wave_front_size"], 64);
        } else {
            assert_eq!(row.1, "CPU");
            assert_eq!(ext["type"], 1);
            assert_eq!(
                (row.5.as_str(), row.6.as_str()),
                ("AMD EPYC 9654 96-Core Processor", "CPU")
            );
            assert_eq!(ext["family_id"], 25);
        }
        assert_eq!(row.7, node.name.clone().unwrap_or_default());
    }
    assert!(gpus > 0);
    // rocpd_string: sorted, numbered from 1, the empty string first; the agents' names, the
    // KFD kinds and every operation of theirs are there.
    let all: Vec<(i64, String)> = conn
        .prepare("SELECT id, string FROM rocpd_string ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all[0], (1, String::new()));
    assert!(
        all.windows(2)
            .all(|w| w[0].1 < w[1].1 && w[1].0 == w[0].0 + 1)
    );
    for s in [
        "gfx942",
        "AMD",
        "CPU",
        "KFD_EVENT_PAGE_MIGRATE",
        "KFD_PAGE_FAULT",
        "ROCPROFILER_KFD_QUEUE_EVICT_CRIU_RESTORE",
    ] {
        assert!(all.iter().any(|(_, x)| x == s), "{s} missing");
    }
    // Read back: the agents, with their objects.
    let dir = std::env::temp_dir().join(format!("kfdtool-parity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("results.db");
    rocpd::write_rocpd(&path, &info(), &records()).unwrap();
    let read = rocpd::read_rocpd(&path).unwrap();
    assert_eq!(read.agents, info().agents);
    assert_eq!(read.records, records());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The parts of rocprofv3-schema.json a KFD trace's results.json touches: every `required`
/// member with its `type`, and the types of the optional members present. The validator
/// below reads this draft-07 subset (type, properties, required, items).
fn schema() -> Value {
    let int = json!({"type": "integer"});
    let handle = json!({"type": "object", "required": ["handle"],
        "properties": {"handle": int}});
    let bitfields = |names: &[&str]| {
        let props: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| ((*n).to_owned(), int.clone()))
            .collect();
        json!({"type": "object", "required": names, "properties": props})
    };
    let agent_ints = [
        "size",
        "type",
        "cpu_cores_count",
        "simd_count",
        "mem_banks_count",
        "caches_count",
        "io_links_count",
        "cpu_core_id_base",
        "simd_id_base",
        "max_waves_per_simd",
        "lds_size_in_kb",
        "gds_size_in_kb",
        "num_gws",
        "wave_front_size",
        "num_xcc",
        "cu_count",
        "array_count",
        "num_shader_banks",
        "simd_arrays_per_engine",
        "cu_per_simd_array",
        "simd_per_cu",
        "max_slots_scratch_cu",
        "gfx_target_version",
        "vendor_id",
        "device_id",
        "location_id",
        "domain",
        "drm_render_minor",
        "num_sdma_engines",
        "num_sdma_xgmi_engines",
        "num_sdma_queues_per_engine",
        "num_cp_queues",
        "max_engine_clk_ccompute",
        "max_engine_clk_fcompute",
    ];
    let mut agent_props: serde_json::Map<String, Value> = agent_ints
        .iter()
        .map(|n| ((*n).to_owned(), int.clone()))
        .collect();
    agent_props.insert("id".into(), handle.clone());
    agent_props.insert(
        "sdma_fw_version".into(),
        bitfields(&["uCodeSDMA", "uCodeRes"]),
    );
    agent_props.insert(
        "fw_version".into(),
        bitfields(&["uCode", "Major", "Minor", "Stepping"]),
    );
    agent_props.insert(
        "capability".into(),
        bitfields(&[
            "HotPluggable",
            "HSAMMUPresent",
            "SharedWithGraphics",
            "QueueSizePowerOfTwo",
            "QueueSize32bit",
            "QueueIdleEvent",
            "VALimit",
            "WatchPointsSupported",
            "WatchPointsTotalBits",
            "DoorbellType",
            "AQLQueueDoubleMap",
            "DebugTrapSupported",
            "WaveLaunchTrapOverrideSupported",
            "WaveLaunchModeSupported",
            "PreciseMemoryOperationsSupported",
            "DEPRECATED_SRAM_EDCSupport",
            "Mem_EDCSupport",
            "RASEventNotify",
            "ASICRevision",
            "SRAM_EDCSupport",
            "SVMAPISupported",
            "CoherentHostAccess",
            "DebugSupportedFirmware",
            "Reserved",
        ]),
    );
    let kinds = json!({"type": "array", "items": {"type": "object",
        "required": ["kind", "operations"],
        "properties": {"kind": {"type": "string"}, "operations": {"type": "array"}}}});
    json!({
        "type": "object",
        "required": ["rocprofiler-sdk-tool"],
        "properties": {"rocprofiler-sdk-tool": {"type": "array", "items": {
            "type": "object",
            "required": ["metadata", "agents", "counters", "strings", "code_objects",
                "kernel_symbols", "callback_records", "buffer_records"],
            "properties": {
                "metadata": {"type": "object", "required": ["pid", "init_time", "fini_time"],
                    "properties": {"pid": int, "init_time": int, "fini_time": int}},
                "agents": {"type": "array", "items": {"type": "object",
                    "required": ["size", "id", "type", "capability"],
                    "properties": agent_props}},
                "counters": {"type": "array"},
                "strings": {"type": "object", "properties": {
                    "callback_records": kinds, "buffer_records": kinds,
                    "marker_api": {"type": "array"}, "counters": {"type": "object"}}},
                "code_objects": {"type": "array"},
                "kernel_symbols": {"type": "array"},
                "host_functions": {"type": "array"},
                "callback_records": {"type": "object", "properties": {
                    "counter_collection": {"type": "array"}}},
                "buffer_records": {"type": "object", "properties": {
                    "kernel_dispatch": {"type": "array"}, "hip_api": {"type": "array"},
                    "hsa_api": {"type": "array"}, "marker_api": {"type": "array"},
                    "memory_copy": {"type": "array"}, "memory_allocation": {"type": "array"},
                    "rocdecoder_api": {"type": "array"}}},
            }
        }}}
    })
}

/// Draft-07 `type`, `properties`, `required`, `items`: the problems of `value` at `path`.
fn validate(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !ok {
            problems.push(format!("{path}: not {t}: {value}"));
            return;
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if value.get(r).is_none() {
                problems.push(format!("{path}: lacks {r}"));
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            if let Some(v) = value.get(k) {
                validate(s, v, &format!("{path}.{k}"), problems);
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            validate(items, v, &format!("{path}[{i}]"), problems);
        }
    }
}

#[test]
fn results_json_validates_against_rocprofv3s_schema() {
    let json = rocpd::results_json(&info(), &records());
    let mut problems = Vec::new();
    validate(&schema(), &json, "", &mut problems);
    assert!(problems.is_empty(), "{problems:#?}");
    let agents = json["rocprofiler-sdk-tool"][0]["agents"]
        .as_array()
        .unwrap();
    assert!(
        agents
            .iter()
            .all(|a| a["capability"].as_object().unwrap().len() == 24)
    );

    // The validator sees what the issue saw: without the members, 8 problems.
    let mut old = json.clone();
    let tool = old["rocprofiler-sdk-tool"][0].as_object_mut().unwrap();
    for k in [
        "counters",
        "code_objects",
        "kernel_symbols",
        "callback_records",
    ] {
        tool.remove(k);
    }
    for a in tool["agents"].as_array_mut().unwrap().iter_mut().take(2) {
        let a = a.as_object_mut().unwrap();
        a.remove("size");
        a.remove("capability");
    }
    let mut problems = Vec::new();
    validate(&schema(), &old, "", &mut problems);
    assert_eq!(problems.len(), 8, "{problems:#?}");
    // A hand-made agent (no topology object) still validates.
    let mut bare = info();
    for a in &mut bare.agents {
        a.info = Value::Null;
    }
    let mut problems = Vec::new();
    validate(
        &schema(),
        &rocpd::results_json(&bare, &records()),
        "",
        &mut problems,
    );
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn report_compare_puts_two_traces_side_by_side() {
    let dir = std::env::temp_dir().join(format!("kfdtool-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.db"), dir.join("b.db"));
    let ra = records();
    // B: the migration twice as large and a second fault.
    let mut rb = records();
    rb[0].end_address = rb[0].start_address + (4 << 20);
    rb.push(KfdRecord {
        start_ns: 2500,
        end_ns: 2600,
        ..rb[1]
    });
    rocpd::write_rocpd(&a, &info(), &ra).unwrap();
    rocpd::write_rocpd(&b, &info(), &rb).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args([
            "report",
            "--compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        kfd_svm::summary::side_by_side(
            &kfd_svm::Summary::new(&ra),
            &kfd_svm::Summary::new(&rb),
            a.to_str().unwrap(),
            b.to_str().unwrap()
        )
    );
    let line = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix}: {stdout}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("node 0 -> node 1 bytes"),
        "node 0 -> node 1 bytes (MiB) 2 4 +100.0%"
    );
    assert_eq!(line("page faults"), "page faults 1 2 +100.0%");
    std::fs::remove_dir_all(&dir).unwrap();
}
