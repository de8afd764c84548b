//! `kfdtool report --svg` on a crafted 100 000-record rocpd database, against plain `report`
//! (read the database, summarise) on the same database in the same run.
//!
//! The database is the worst case the issue measured (issue 22): n nested migrations, each
//! covering the previous one and a page more on either side, alternating between system
//! memory and a GPU. Before the residency grid, the picture scanned every record per pair of
//! range boundaries and drew every stretch: 20.5 s and a 1.37 GB SVG at n = 4000. Now every
//! picture is bounded (grids and thinned series) and drawn after one sweep; the bench prints
//! the ratio of `report --svg` (all five pictures) to plain `report` and the SVG sizes.
//!
//! Run: `cargo bench -p kfdtool --bench pictures`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use kfd_svm::{KfdKind, KfdRecord, Summary};
use kfdtool::plots;
use kfdtool::rocpd::{self, Agent, TraceInfo};

#[path = "../../kfd-ioctl/benches/ratio.rs"]
mod ratio;

/// Records in the crafted database.
const N: u64 = 100_000;

/// n nested migrations alternating between node 0 (system memory) and node 1 (a GPU).
fn nested(n: u64) -> Vec<KfdRecord> {
    (0..n)
        .map(|i| {
            let half = (i + 1) * 4096;
            let (src, dst) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
            KfdRecord {
                kind: KfdKind::PageMigrate,
                operation: 1,
                start_ns: 1_000_000 + i * 1000,
                end_ns: 1_000_000 + i * 1000 + 700,
                pid: 4242,
                agent: None,
                src_agent: Some(src),
                dst_agent: Some(dst),
                prefetch_agent: None,
                preferred_agent: None,
                start_address: 0x7000_0000_0000 - half,
                end_address: 0x7000_0000_0000 + half,
                error_code: 0,
                count: 0,
            }
        })
        .collect()
}

fn agents() -> Vec<Agent> {
    vec![
        Agent {
            node_id: 0,
            gpu_id: None,
            is_gpu: false,
            name: "cpu".into(),
            info: serde_json::Value::Null,
        },
        Agent {
            node_id: 1,
            gpu_id: Some(0x1a2b),
            is_gpu: true,
            name: "gfx942".into(),
            info: serde_json::Value::Null,
        },
    ]
}

fn database() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kfdtool-bench-pictures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("results.db");
    let info = TraceInfo {
        pid: 4242,
        ppid: 1,
        command: "nested".into(),
        start_ns: 0,
        end_ns: 1_000_000 + N * 1000,
        agents: agents(),
        clock_samples: Vec::new(),
        ..Default::default()
    };
    rocpd::write_rocpd(&path, &info, &nested(N)).expect("write the database");
    path
}

/// `kfdtool report`: read, summarise, format.
fn report(db: &Path) -> usize {
    let read = rocpd::read_rocpd(db).expect("read");
    Summary::new(&read.records).to_string().len()
}

/// `kfdtool report --svg`: the same and every picture; returns the summary's and each
/// picture's length.
fn report_svg(db: &Path) -> (usize, Vec<(&'static str, usize)>) {
    let read = rocpd::read_rocpd(db).expect("read");
    let text = Summary::new(&read.records).to_string().len();
    let pictures = plots::all_svgs(&read.records, &read.agents).expect("pictures");
    (
        text,
        pictures.into_iter().map(|(n, s)| (n, s.len())).collect(),
    )
}

fn benches(c: &mut Criterion) {
    let db = database();
    let (_, sizes) = report_svg(&db);
    let sizes: Vec<String> = sizes
        .iter()
        .map(|(n, l)| format!("{n} {l} bytes"))
        .collect();
    println!("pictures: {N} records; {}", sizes.join(", "));
    let mut group = c.benchmark_group("report_100k");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("report", |b| b.iter(|| black_box(report(&db))));
    group.bench_function("report_svg", |b| b.iter(|| black_box(report_svg(&db))));
    group.finish();
    if let Some(dir) = db.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

criterion_group!(pictures, benches);

fn main() {
    pictures();
    Criterion::default().configure_from_args().final_summary();
    ratio::report("report_100k", "report_svg", "report", None);
}
