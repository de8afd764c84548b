//! A known workload under kfd-emu (an 8 MiB SVM prefetch to a GPU, a GPU read fault and a GPU
//! write fault with XNACK on, an munmap of a registered range, and an SDMA copy, which adds
//! no KFD record) recorded and written in
//! rocprofv3's formats: the records, the rocpd database rows (read with queries like rocpd's),
//! the regions CSV text and the JSON values are checked field by field, the summary figures
//! against what the workload implies, the SVGs for their structure, and `kfdtool report` on the
//! database against the live summary.
//!
//! The GPU touching memory needs kfd-emu's GPU view, so this runs on the emulator only; every
//! expected record is what the kernel's `kfd_smi_events.c` writes for these calls.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use kfd_emu::machine::Machine;
use kfd_emu::model::{Model, ModelConfig};
use kfd_ioctl::Kfd;
use kfd_ioctl::abi::{AllocMemFlags, SmiEventMask};
use kfd_ioctl::topology::Topology;
use kfd_queue::{QueueContext, SdmaEngine, SdmaQueue};
use kfd_svm::{
    Access, AgentMap, DEFAULT_PAGE_SIZE, KfdKind, KfdRecord, Location, MapOptions, Pairing,
    SmiEvent, SmiStream, Summary, SvmAttrs, SvmBuffer,
};
use kfdtool::rocpd::{self, Agent, TraceInfo};
use rusqlite::Connection;

const MIB: u64 = 1 << 20;
/// The prefetched size.
const N_MIB: u64 = 8;

/// What the workload did, to build the expected records from.
struct Workload {
    events: Vec<SmiEvent>,
    topology: Topology,
    pid: u32,
    gpu: u32,
    /// The prefetched (and then unmapped) range.
    prefetched: (u64, u64),
    /// The range the GPU faulted in.
    faulted: u64,
}

fn run_workload() -> Workload {
    let model = Model::new(ModelConfig {
        machine: Machine::preset("mi300x").expect("preset"),
        ..ModelConfig::default()
    })
    .expect("model");
    let view = Arc::clone(&model);
    kfd_emu::supervisor::run_attached(model, move || {
        let kfd = Kfd::open().expect("open the emulated /dev/kfd");
        let topology = Topology::read().expect("topology");
        for g in view.machine().gpus() {
            kfd.acquire_vm(g.gpu_id, g.render_minor)
                .expect("acquire_vm");
        }
        let gpu = view.machine().gpus()[0].gpu_id;
        kfd.set_xnack_mode(true).expect("XNACK on");
        let mask = SmiEventMask::all().difference(SmiEventMask::ALL_PROCESS);
        let mut streams: Vec<SmiStream> = view
            .machine()
            .gpus()
            .iter()
            .map(|g| SmiStream::open(&kfd, g.gpu_id, mask).expect("SMI"))
            .collect();
        let pid = std::process::id();
        let huge = MapOptions {
            huge_aligned: true,
            ..MapOptions::default()
        };

        // 1. N MiB registered with access for the GPU, prefetched to its VRAM.
        let attrs = SvmAttrs::new().access(gpu, Access::Access);
        let mut a = SvmBuffer::with_options(&kfd, (N_MIB * MIB) as usize, &attrs, huge).unwrap();
        a.copy_in(0, &vec![0x5a; a.len()]).unwrap();
        a.prefetch(Location::Gpu(gpu.into())).unwrap();
        let prefetched = (a.addr(), a.addr() + a.len() as u64);

        // 2. 4 MiB in system memory, 2 MiB granules: the GPU reads page 5 (block 0) and writes
        //    page 700 (block 1); each fault migrates its block to the GPU.
        let b = SvmBuffer::with_options(
            &kfd,
            (4 * MIB) as usize,
            &attrs.clone().granularity(9),
            huge,
        )
        .unwrap();
        b.copy_in(0, &vec![0xa5; b.len()]).unwrap();
        let mut seen = [0u8; 8];
        view.gpu_read(pid as i32, gpu, b.addr() + 5 * 4096, &mut seen)
            .expect("read fault handled");
        assert_eq!(seen, [0xa5; 8]);
        view.gpu_write(pid as i32, gpu, b.addr() + 700 * 4096, b"GPU data")
            .expect("write fault handled");

        // 3. The prefetched range unmapped by the CPU.
        drop(a);
        // GET flushes the kernel's deferred work on the unmapped range.
        let _ = kfd_svm::get_attrs(&kfd, b.addr(), b.len() as u64, &[gpu]);

        let mut events = Vec::new();
        for s in &mut streams {
            for e in s.pending() {
                events.push(e.expect("event"));
            }
        }
        // 4. An SDMA copy of 1 MiB from system memory to VRAM through a user queue: the
        //    kernel emits no SMI record for a user queue's work, so it adds no KFD record.
        let va = kfd_ioctl::mem::Reservation::new(8 << 20, 2 << 20).expect("GPU VA range");
        let base = va.addr().as_ptr() as u64;
        let gtt = AllocMemFlags::GTT | AllocMemFlags::WRITABLE;
        let vram = AllocMemFlags::VRAM | AllocMemFlags::WRITABLE | AllocMemFlags::PUBLIC;
        let host = kfd
            .alloc_memory_of_gpu(gpu, base, MIB, gtt)
            .expect("GTT BO");
        let dev = kfd
            .alloc_memory_of_gpu(gpu, base + (4 << 20), MIB, vram)
            .expect("VRAM BO");
        kfd.map_memory_to_gpu(&host, &[gpu]).expect("map");
        kfd.map_memory_to_gpu(&dev, &[gpu]).expect("map");
        host.map_cpu()
            .expect("CPU map")
            .write_slice(&[0x3c; 4096], 0)
            .expect("write");
        let context = QueueContext::new(&kfd, &topology).expect("queue context");
        let mut q = SdmaQueue::new(&context, gpu, SdmaEngine::Pcie, 4096).expect("SDMA queue");
        let done = q.copy(dev.va(), host.va(), MIB).expect("copy");
        q.wait(done, std::time::Duration::from_secs(10))
            .expect("copy done");
        let mut copied = [0u8; 4096];
        dev.map_cpu()
            .expect("CPU map")
            .read_slice(&mut copied, 0)
            .expect("read");
        assert_eq!(copied, [0x3c; 4096], "the SDMA copy ran");
        drop(q);
        for s in &mut streams {
            for e in s.pending() {
                events.push(e.expect("event"));
            }
        }

        let faulted = b.addr();
        drop(b);
        Workload {
            events,
            topology,
            pid,
            gpu,
            prefetched,
            faulted,
        }
    })
    .expect("attach")
}

fn node_of(topology: &Topology, gpu: u32) -> u32 {
    topology
        .nodes
        .iter()
        .find(|n| n.gpu_id() == Some(kfd_ioctl::GpuId(gpu)))
        .expect("the GPU's node")
        .id
}

/// The records the workload must produce, in emission order.
fn expected(w: &Workload) -> Vec<KfdRecord> {
    let g = Some(node_of(&w.topology, w.gpu));
    let cpu = Some(0);
    let blank = KfdRecord {
        kind: KfdKind::PageMigrate,
        operation: 0,
        start_ns: 0,
        end_ns: 0,
        pid: w.pid,
        agent: None,
        src_agent: None,
        dst_agent: None,
        prefetch_agent: None,
        preferred_agent: None,
        start_address: 0,
        end_address: 0,
        error_code: 0,
        count: 0,
    };
    let migrate = |op, start, end, prefetch| KfdRecord {
        operation: op,
        start_address: start,
        end_address: end,
        src_agent: cpu,
        dst_agent: g,
        prefetch_agent: prefetch,
        ..blank
    };
    let fault = |op, address| KfdRecord {
        kind: KfdKind::PageFault,
        operation: op,
        agent: g,
        start_address: address,
        end_address: address,
        ..blank
    };
    let b = w.faulted;
    vec![
        migrate(0, w.prefetched.0, w.prefetched.1, g),
        migrate(1, b, b + 2 * MIB, None),
        fault(0, b + 5 * 4096),
        // Block 0's fault mapped the range on the GPU (`mapped_to_gpu`), so migrating block 1
        // invalidates it first: svm_range_evict, XNACK on, unmaps the migrating part from the
        // GPUs (svm_range_unmap_from_gpus, trigger MMU_NOTIFY_MIGRATE).
        KfdRecord {
            kind: KfdKind::EventUnmapFromGpu,
            operation: 1,
            agent: g,
            start_address: b + 2 * MIB,
            end_address: b + 4 * MIB,
            ..blank
        },
        migrate(1, b + 2 * MIB, b + 4 * MIB, None),
        fault(2, b + 700 * 4096),
        KfdRecord {
            kind: KfdKind::EventUnmapFromGpu,
            operation: 2,
            agent: g,
            start_address: w.prefetched.0,
            end_address: w.prefetched.1,
            ..blank
        },
    ]
}

/// `records` with their times zeroed (the times are checked apart).
fn timeless(records: &[KfdRecord]) -> Vec<KfdRecord> {
    records
        .iter()
        .map(|r| KfdRecord {
            start_ns: 0,
            end_ns: 0,
            ..*r
        })
        .collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kfdtool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn info(w: &Workload) -> TraceInfo {
    TraceInfo {
        pid: w.pid,
        ppid: 1,
        command: "the workload".into(),
        start_ns: 1,
        end_ns: 2,
        agents: Agent::from_topology(&w.topology),
        clock_samples: Vec::new(),
        ..Default::default()
    }
}

#[test]
fn a_known_workload_gives_exactly_the_expected_records_in_every_format() {
    if Path::new(kfd_ioctl::KFD_DEVICE_PATH).exists() {
        kfd_skip::skip_part(
            "the hardware run",
            "the GPU's reads and writes come from kfd-emu's GPU view",
        );
    }
    let w = run_workload();
    let pairing = Pairing::new(
        &w.events,
        DEFAULT_PAGE_SIZE,
        &AgentMap::from_topology(&w.topology),
    );
    let records = &pairing.records;
    assert_eq!(timeless(records), expected(&w), "{:#?}", w.events);
    assert_eq!((pairing.unmatched_ends, pairing.open_starts), (0, 0));
    // Times: each paired record ends after it starts; records come in end order.
    for pair in records.windows(2) {
        assert!(pair[0].end_ns <= pair[1].end_ns, "{records:#?}");
    }
    assert!(
        records
            .iter()
            .all(|r| r.start_ns > 0 && r.start_ns <= r.end_ns)
    );
    // A fault ends after its migration.
    assert!(records[1].end_ns <= records[2].end_ns && records[2].start_ns <= records[1].start_ns);
    assert_eq!(records[3].start_ns, records[3].end_ns);
    assert_eq!(records[6].start_ns, records[6].end_ns);

    // The summary: what the workload implies.
    let s = Summary::new(records);
    let g = node_of(&w.topology, w.gpu);
    let up = &s.migrations[&(Some(0), Some(g))];
    assert_eq!((up.count, up.bytes, up.failed), (3, (N_MIB + 4) * MIB, 0));
    assert_eq!(up.by_operation[&0], (1, N_MIB * MIB));
    assert_eq!(up.by_operation[&1], (2, 4 * MIB));
    assert_eq!(s.migrations.len(), 1);
    assert_eq!(
        (s.fault_count(), s.faults_migrated, s.faults_updated),
        (2, 2, 0)
    );
    assert_eq!(s.faults[&(Some(g), 0)], 1);
    assert_eq!(s.faults[&(Some(g), 2)], 1);
    assert_eq!(s.fault_latency.unwrap().count, 2);
    assert_eq!(s.unmaps[&(Some(g), 2)], (1, N_MIB * MIB));
    assert_eq!(s.unmaps[&(Some(g), 1)], (1, 2 * MIB));
    assert_eq!((s.restores_rescheduled, s.dropped_events), (0, 0));
    assert!(s.queue_evictions.is_empty());

    let dir = temp_dir("hmm-known");
    let db = dir.join("results.db");
    let info = info(&w);
    rocpd::write_rocpd(&db, &info, records).unwrap();
    check_database(&db, &w, records);
    check_csv(&db, records);
    check_json(&info, records, &w);
    check_svgs(&evenly_timed(records), &info.agents);

    // `kfdtool report` on the database prints the same summary.
    let out = Command::new(env!("CARGO_BIN_EXE_kfdtool"))
        .args([
            "report",
            db.to_str().unwrap(),
            "--svg",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{s}{}\n", rocpd::agents_line(&info.agents))
    );
    for name in kfdtool::plots::SVG_NAMES {
        roxmltree::Document::parse(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap();
    }
    // Read back, the records are the same.
    assert_eq!(&rocpd::read_rocpd(&db).unwrap().records, records);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The rows, read as rocpd's views and tools read them.
fn check_database(db: &Path, w: &Workload, records: &[KfdRecord]) {
    let conn = Connection::open(db).unwrap();
    let meta: Vec<(String, String)> = conn
        .prepare("SELECT tag, value FROM rocpd_metadata ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(meta[0], ("schema_version".into(), "3".into()));
    let (uuid, guid) = (&meta[1].1, &meta[2].1);
    assert_eq!(meta[1].0, "uuid");
    assert_eq!(uuid, &format!("_{}", guid.replace('-', "_")));
    // rocpd's importer: every rocpd_% table carries the uuid, and stripping it gives a view.
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tables.len(), 20, "{tables:?}");
    for t in &tables {
        let base = t.replace(uuid.as_str(), "");
        assert_ne!(&base, t);
        conn.query_row(&format!("SELECT COUNT(*) FROM {base}"), [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap();
    }

    // The regions view, as rocpd's csv.py queries it, plus the extdata and the PMC value.
    let mut stmt = conn
        .prepare(
            "SELECT R.category, R.name, R.pid, R.tid, R.start, R.end, R.stack_id, R.corr_id, \
             R.extdata, P.value, I.name, I.block FROM regions R \
             JOIN rocpd_pmc_event P ON P.event_id = R.event_id \
             JOIN rocpd_info_pmc I ON I.id = P.pmc_id ORDER BY R.id",
        )
        .unwrap();
    type Row = (
        String,
        String,
        i64,
        i64,
        i64,
        i64,
        i64,
        i64,
        String,
        f64,
        String,
        String,
    );
    let rows: Vec<Row> = stmt
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
                r.get(9)?,
                r.get(10)?,
                r.get(11)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), records.len());
    let g = i64::from(node_of(&w.topology, w.gpu));
    let hex = |v: u64| format!("{v:#x}");
    let b = w.faulted;
    let expected_ext = [
        serde_json::json!({"kfd": {"start_address": hex(w.prefetched.0), "end_address": hex(w.prefetched.1),
            "src_agent_id": 0, "dst_agent_id": g, "prefetch_agent_id": g, "preferred_agent_id": -1, "error_code": 0}}),
        serde_json::json!({"kfd": {"start_address": hex(b), "end_address": hex(b + 2 * MIB),
            "src_agent_id": 0, "dst_agent_id": g, "prefetch_agent_id": -1, "preferred_agent_id": -1, "error_code": 0}}),
        serde_json::json!({"kfd": {"agent_id": g, "address": hex(b + 5 * 4096)}}),
        serde_json::json!({"kfd": {"agent_id": g, "start_address": hex(b + 2 * MIB), "end_address": hex(b + 4 * MIB)}}),
        serde_json::json!({"kfd": {"start_address": hex(b + 2 * MIB), "end_address": hex(b + 4 * MIB),
            "src_agent_id": 0, "dst_agent_id": g, "prefetch_agent_id": -1, "preferred_agent_id": -1, "error_code": 0}}),
        serde_json::json!({"kfd": {"agent_id": g, "address": hex(b + 700 * 4096)}}),
        serde_json::json!({"kfd": {"agent_id": g, "start_address": hex(w.prefetched.0), "end_address": hex(w.prefetched.1)}}),
    ];
    let expected_names = [
        ("KFD_PAGE_MIGRATE", "ROCPROFILER_KFD_PAGE_MIGRATE_PREFETCH"),
        (
            "KFD_PAGE_MIGRATE",
            "ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_GPU",
        ),
        (
            "KFD_PAGE_FAULT",
            "ROCPROFILER_KFD_PAGE_FAULT_READ_FAULT_MIGRATED",
        ),
        (
            "KFD_EVENT_UNMAP_FROM_GPU",
            "ROCPROFILER_KFD_EVENT_UNMAP_FROM_GPU_MMU_NOTIFY_MIGRATE",
        ),
        (
            "KFD_PAGE_MIGRATE",
            "ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_GPU",
        ),
        (
            "KFD_PAGE_FAULT",
            "ROCPROFILER_KFD_PAGE_FAULT_WRITE_FAULT_MIGRATED",
        ),
        (
            "KFD_EVENT_UNMAP_FROM_GPU",
            "ROCPROFILER_KFD_EVENT_UNMAP_FROM_GPU_UNMAP_FROM_CPU",
        ),
    ];
    let expected_values = [
        (N_MIB * MIB) as f64,
        (2 * MIB) as f64,
        (b + 5 * 4096) as f64,
        (2 * MIB) as f64,
        (2 * MIB) as f64,
        (b + 700 * 4096) as f64,
        (N_MIB * MIB) as f64,
    ];
    for (i, row) in rows.iter().enumerate() {
        let r = &records[i];
        assert_eq!(
            (row.0.as_str(), row.1.as_str()),
            expected_names[i],
            "row {i}"
        );
        assert_eq!(
            (row.2, row.3),
            (i64::from(w.pid), i64::from(w.pid)),
            "row {i}"
        );
        assert_eq!(
            (row.4, row.5),
            (r.start_ns as i64, r.end_ns as i64),
            "row {i}"
        );
        assert_eq!((row.6, row.7), (0, 0), "row {i}");
        let ext: serde_json::Value = serde_json::from_str(&row.8).unwrap();
        assert_eq!(ext, expected_ext[i], "row {i}");
        assert_eq!(row.9, expected_values[i], "row {i}");
        assert_eq!(
            (row.10.as_str(), row.11.as_str()),
            (row.0.as_str(), "KFD"),
            "row {i}"
        );
    }
    // Agents are the topology's nodes; the thread is the KFD pid.
    let agents: Vec<(i64, String, i64)> = conn
        .prepare("SELECT id, type, absolute_index FROM rocpd_info_agent ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(agents.len(), w.topology.nodes.len());
    assert_eq!(agents[0], (0, "CPU".into(), 0));
    assert_eq!(agents[g as usize], (g, "GPU".into(), g));
    let pmc_ids: Vec<i64> = conn
        .prepare("SELECT id FROM rocpd_info_pmc ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        pmc_ids,
        (0..8)
            .map(|i| 0x7000_0000_0000_0000 + i)
            .collect::<Vec<i64>>()
    );
    let threads: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM threads WHERE tid = ?1",
            [w.pid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(threads, 1);
}

/// The CSV, character for character.
fn check_csv(db: &Path, records: &[KfdRecord]) {
    let conn = Connection::open(db).unwrap();
    let guid: String = conn
        .query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = 'guid'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let csv = rocpd::regions_csv(&conn).unwrap();
    let mut sorted: Vec<&KfdRecord> = records.iter().collect();
    sorted.sort_by(|a, b| a.start_ns.cmp(&b.start_ns).then(b.end_ns.cmp(&a.end_ns)));
    let mut expected = String::from(
        "\"Guid\",\"Domain\",\"Function\",\"Process_Id\",\"Thread_Id\",\"Correlation_Id\",\
         \"Start_Timestamp\",\"End_Timestamp\"\n",
    );
    for r in sorted {
        expected.push_str(&format!(
            "\"{guid}\",\"{}\",\"{}\",{},{},0,{},{}\n",
            r.kind.name(),
            r.operation_name(),
            r.pid,
            r.pid,
            r.start_ns,
            r.end_ns
        ));
    }
    assert_eq!(csv, expected);
}

/// The JSON values under `buffer_records.kfd`.
fn check_json(info: &TraceInfo, records: &[KfdRecord], w: &Workload) {
    let v = rocpd::results_json(info, records);
    let tool = &v["rocprofiler-sdk-tool"][0];
    let kfd = tool["buffer_records"]["kfd"].as_array().unwrap();
    assert_eq!(kfd.len(), records.len());
    let g = u64::from(node_of(&w.topology, w.gpu));
    let prefetch = &kfd[0];
    let keys: Vec<&str> = prefetch
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "size",
            "operation",
            "start_timestamp",
            "end_timestamp",
            "pid",
            "start_address",
            "end_address",
            "src_agent",
            "dst_agent",
            "prefetch_agent",
            "preferred_agent",
            "error_code"
        ]
    );
    assert_eq!(prefetch["operation"], 0);
    assert_eq!(prefetch["start_timestamp"], records[0].start_ns);
    assert_eq!(prefetch["end_timestamp"], records[0].end_ns);
    assert_eq!(prefetch["pid"], w.pid);
    assert_eq!(prefetch["start_address"]["handle"], w.prefetched.0);
    assert_eq!(prefetch["end_address"]["handle"], w.prefetched.1);
    assert_eq!(prefetch["src_agent"]["handle"], 1, "node 0 + 1");
    assert_eq!(prefetch["dst_agent"]["handle"], g + 1);
    assert_eq!(prefetch["prefetch_agent"]["handle"], g + 1);
    assert_eq!(prefetch["preferred_agent"]["handle"], 0, "no agent");
    assert_eq!(kfd[1]["operation"], 1);
    let read = &kfd[2];
    assert_eq!(
        read.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "size",
            "operation",
            "start_timestamp",
            "end_timestamp",
            "pid",
            "agent_id",
            "address"
        ]
    );
    assert_eq!(
        (read["operation"].as_u64(), read["size"].as_u64()),
        (Some(0), Some(56))
    );
    assert_eq!(read["address"]["handle"], w.faulted + 5 * 4096);
    assert_eq!(read["agent_id"]["handle"], g + 1);
    assert_eq!(kfd[5]["operation"], 2);
    let unmap = &kfd[6];
    assert_eq!(
        unmap.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "size",
            "operation",
            "timestamp",
            "pid",
            "agent_id",
            "start_address",
            "end_address"
        ]
    );
    assert_eq!(unmap["operation"], 2);
    assert_eq!(unmap["timestamp"], records[6].start_ns);
    assert_eq!(kfd[3]["operation"], 1);
    // The agents array maps handles to nodes; the strings name the operations.
    let agents = tool["agents"].as_array().unwrap();
    assert!(
        agents
            .iter()
            .any(|a| a["id"]["handle"] == g + 1 && a["node_id"] == g)
    );
    let kinds = tool["strings"]["buffer_records"].as_array().unwrap();
    let migrate = kinds
        .iter()
        .find(|k| k["kind"] == "KFD_PAGE_MIGRATE")
        .unwrap();
    assert_eq!(
        migrate["operations"][1],
        "ROCPROFILER_KFD_PAGE_MIGRATE_PAGEFAULT_GPU"
    );
}

/// `records` with their times replaced by their ranks, 1 ms apart, order and ties kept: the
/// pictures' cells then do not depend on how fast this machine ran the workload (on the wall
/// clock a migration that ends within the first cell hides the range's time in system memory).
fn evenly_timed(records: &[KfdRecord]) -> Vec<KfdRecord> {
    let mut times: Vec<u64> = records
        .iter()
        .flat_map(|r| [r.start_ns, r.end_ns])
        .collect();
    times.sort_unstable();
    times.dedup();
    let rank = |t: u64| (times.binary_search(&t).unwrap_or(0) as u64 + 1) * 1_000_000;
    records
        .iter()
        .map(|r| KfdRecord {
            start_ns: rank(r.start_ns),
            end_ns: rank(r.end_ns),
            ..*r
        })
        .collect()
}

/// Well-formed SVG with the expected elements.
fn check_svgs(records: &[KfdRecord], agents: &[Agent]) {
    let texts = |doc: &roxmltree::Document<'_>| -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_owned())
            .collect()
    };
    let residency = kfdtool::plots::residency_svg(records, agents).unwrap();
    let doc = roxmltree::Document::parse(&residency).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let t = texts(&doc);
    for label in [
        "time since the first record (ms)",
        "address (migrated ranges)",
        "Residency of migrated pages (3 ranges, 2 places)",
    ] {
        assert!(t.iter().any(|x| x == label), "{label} not in {t:?}");
    }
    // Legend: the CPU node and the GPU node.
    assert!(t.iter().any(|x| x.ends_with("(system)")), "{t:?}");
    assert!(t.iter().any(|x| x.contains("(gpu 0x")), "{t:?}");
    // Background, one rectangle per block of the residency grid, and the legend's two
    // swatches (outside the data, right of x = 780); every range ends on the GPU.
    let map = kfd_svm::residency::ResidencyMap::new(
        records,
        kfdtool::plots::RESIDENCY_ROWS,
        kfdtool::plots::RESIDENCY_COLS,
    );
    let rects: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .collect();
    assert_eq!(rects.len(), 1 + map.blocks.len() + 2, "{residency}");
    let legend_x = |n: &roxmltree::Node<'_, '_>| {
        n.attribute("x")
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(
        rects[rects.len() - 2..]
            .iter()
            .all(|r| legend_x(r) >= 780.0)
    );
    let g = agents.iter().find(|a| a.is_gpu).unwrap().node_id;
    for e in &map.extents {
        let row = (e.offset as u128 * u128::from(map.rows) / u128::from(map.total_bytes)) as u32;
        assert!(
            map.blocks
                .iter()
                .any(|b| b.row0 <= row && row < b.row1 && b.col1 == map.cols && b.agent == Some(g)),
            "{e:?} {:?}",
            map.blocks
        );
    }
    // Two faults (one read, one write, both migrating) in the data, two legend marks.
    assert_eq!(map.faults.iter().filter(|f| f.migrated).count(), 2);
    let circles = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert_eq!(circles, 2 + 2, "{residency}");
    // No red or green: the Okabe-Ito palette.
    assert!(!residency.contains("#FF0000") && !residency.contains("#00FF00"));

    let throughput = kfdtool::plots::throughput_svg(records, agents).unwrap();
    let doc = roxmltree::Document::parse(&throughput).unwrap();
    let t = texts(&doc);
    for label in ["throughput (MiB/s)", "Migration throughput over time"] {
        assert!(t.iter().any(|x| x == label), "{label} not in {t:?}");
    }
    assert!(
        t.iter().any(|x| x.contains("->")),
        "a legend entry per direction: {t:?}"
    );
    // One line of THROUGHPUT_BINS points for the one direction.
    let lines: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .collect();
    assert_eq!(lines.len(), 2, "the series and its legend sample");
    let points = lines[0]
        .attribute("points")
        .unwrap()
        .split_whitespace()
        .count();
    assert_eq!(points, kfdtool::plots::THROUGHPUT_BINS);
}
