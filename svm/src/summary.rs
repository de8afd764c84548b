//! [`Summary`]: what a list of [`KfdRecord`]s says about migration, faults and queue churn, and
//! the series the throughput picture is drawn from ([`throughput_series`]; residency is
//! [`crate::residency`]).
//!
//! Everything here is arithmetic on the records (no I/O, no dependencies), so the same figures
//! come out of a trace recorded live and of a rocpd database read back, ours or rocprofv3's.

use std::collections::BTreeMap;
use std::fmt;

use crate::records::{KfdKind, KfdRecord};

/// A migration direction: (source node, destination node); `None` is no agent.
pub type Direction = (Option<u32>, Option<u32>);

/// The migrations of one direction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Migrations that succeeded (error code 0).
    pub count: u64,
    /// Migrations that reported an error (not in `bytes`).
    pub failed: u64,
    /// Bytes of the successful migrations (the ranges the kernel reported; see
    /// [`Timeline`](crate::Timeline) on what they cover).
    pub bytes: u64,
    /// Nanoseconds during which at least one migration of this direction was under way (the
    /// union of their start..end intervals).
    pub busy_ns: u64,
    /// Successful migrations and bytes per operation (trigger).
    pub by_operation: BTreeMap<u32, (u64, u64)>,
}

impl DirectionStats {
    /// Effective throughput: bytes over the time migrations were under way, in bytes per
    /// second; `None` when no time passed.
    pub fn throughput(&self) -> Option<f64> {
        (self.busy_ns > 0).then(|| self.bytes as f64 * 1e9 / self.busy_ns as f64)
    }
}

/// Latency figures in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// How many samples.
    pub count: u64,
    /// The smallest.
    pub min: u64,
    /// The median (the lower one of an even count).
    pub median: u64,
    /// The mean, rounded down.
    pub mean: u64,
    /// The largest.
    pub max: u64,
}

impl Latency {
    /// The figures of `samples` (`None` when there are none).
    pub fn of(mut samples: Vec<u64>) -> Option<Latency> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let count = samples.len() as u64;
        let sum: u128 = samples.iter().map(|s| u128::from(*s)).sum();
        Some(Latency {
            count,
            min: samples[0],
            median: samples[(samples.len() - 1) / 2],
            mean: (sum / u128::from(count)) as u64,
            max: samples[samples.len() - 1],
        })
    }
}

/// The figures of a trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Migrations per direction.
    pub migrations: BTreeMap<Direction, DirectionStats>,
    /// Page faults per (GPU, operation) (see [`KfdKind::operation_names`]).
    pub faults: BTreeMap<(Option<u32>, u32), u64>,
    /// Faults resolved by migrating pages.
    pub faults_migrated: u64,
    /// Faults resolved by updating the mapping only.
    pub faults_updated: u64,
    /// Fault-to-resolution time (PAGE_FAULT_START to PAGE_FAULT_END).
    pub fault_latency: Option<Latency>,
    /// Queue evictions (closed by a restore) per (GPU, operation).
    pub queue_evictions: BTreeMap<(Option<u32>, u32), u64>,
    /// Time queues were evicted, eviction to restore.
    pub queue_evicted: Option<Latency>,
    /// Restores that failed and were rescheduled.
    pub restores_rescheduled: u64,
    /// Unmaps from GPUs per (GPU, operation): (count, bytes).
    pub unmaps: BTreeMap<(Option<u32>, u32), (u64, u64)>,
    /// Events the kernel dropped (the sum of the DROPPED_EVENTS counts).
    pub dropped_events: u64,
    /// Records per kind.
    pub records: BTreeMap<KfdKind, u64>,
    /// The first start and last end over all records.
    pub span_ns: Option<(u64, u64)>,
}

/// The length of the union of `intervals` (start, end).
fn union_ns(mut intervals: Vec<(u64, u64)>) -> u64 {
    intervals.sort_unstable();
    let mut total = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for (s, e) in intervals {
        current = match current {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total = total.saturating_add(ce - cs);
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = current {
        total = total.saturating_add(ce - cs);
    }
    total
}

impl Summary {
    /// The figures of `records`.
    pub fn new(records: &[KfdRecord]) -> Summary {
        let mut s = Summary::default();
        let mut busy: BTreeMap<Direction, Vec<(u64, u64)>> = BTreeMap::new();
        let mut fault_ns = Vec::new();
        let mut evicted_ns = Vec::new();
        for r in records {
            *s.records.entry(r.kind).or_default() += 1;
            s.span_ns = Some(match s.span_ns {
                Some((a, b)) => (a.min(r.start_ns), b.max(r.end_ns)),
                None => (r.start_ns, r.end_ns),
            });
            match r.kind {
                KfdKind::PageMigrate => {
                    let dir = (r.src_agent, r.dst_agent);
                    let stats = s.migrations.entry(dir).or_default();
                    if r.error_code != 0 {
                        stats.failed += 1;
                        continue;
                    }
                    stats.count += 1;
                    stats.bytes = stats.bytes.saturating_add(r.bytes());
                    let op = stats.by_operation.entry(r.operation).or_default();
                    op.0 += 1;
                    op.1 = op.1.saturating_add(r.bytes());
                    busy.entry(dir)
                        .or_default()
                        .push((r.start_ns, r.end_ns.max(r.start_ns)));
                }
                KfdKind::PageFault => {
                    *s.faults.entry((r.agent, r.operation)).or_default() += 1;
                    if r.fault_migrated() {
                        s.faults_migrated += 1;
                    } else {
                        s.faults_updated += 1;
                    }
                    fault_ns.push(r.duration_ns());
                }
                KfdKind::Queue => {
                    *s.queue_evictions.entry((r.agent, r.operation)).or_default() += 1;
                    evicted_ns.push(r.duration_ns());
                }
                KfdKind::EventQueue => s.restores_rescheduled += 1,
                KfdKind::EventUnmapFromGpu => {
                    let u = s.unmaps.entry((r.agent, r.operation)).or_default();
                    u.0 += 1;
                    u.1 = u.1.saturating_add(r.bytes());
                }
                KfdKind::EventDroppedEvents => {
                    s.dropped_events = s.dropped_events.saturating_add(r.count);
                }
            }
        }
        for (dir, intervals) in busy {
            if let Some(stats) = s.migrations.get_mut(&dir) {
                stats.busy_ns = union_ns(intervals);
            }
        }
        s.fault_latency = Latency::of(fault_ns);
        s.queue_evicted = Latency::of(evicted_ns);
        s
    }

    /// Bytes migrated successfully, all directions.
    pub fn bytes_migrated(&self) -> u64 {
        self.migrations.values().map(|d| d.bytes).sum()
    }

    /// Page faults, all kinds.
    pub fn fault_count(&self) -> u64 {
        self.faults.values().sum()
    }
}

/// An agent as the summary prints it.
pub fn agent_name(agent: Option<u32>) -> String {
    match agent {
        Some(node) => format!("node {node}"),
        None => "none".to_owned(),
    }
}

/// Bytes with a binary unit (`8 MiB`, `1.5 GiB`, `512 B`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// The part of an operation name after its kind's prefix (`PREFETCH`, `READ_FAULT_MIGRATED`).
fn short_op(kind: KfdKind, op: u32) -> String {
    let name = kind.operation_name(op);
    let prefix = format!(
        "ROCPROFILER_{}_",
        match kind {
            KfdKind::EventUnmapFromGpu => "KFD_EVENT_UNMAP_FROM_GPU",
            KfdKind::EventQueue => "KFD_EVENT_QUEUE",
            KfdKind::EventDroppedEvents => "KFD_EVENT",
            other => other.name(),
        }
    );
    name.strip_prefix(&prefix).unwrap_or(&name).to_owned()
}

fn write_latency(f: &mut fmt::Formatter<'_>, what: &str, l: &Latency) -> fmt::Result {
    writeln!(
        f,
        "  {what}: n {}, min {} ns, median {} ns, mean {} ns, max {} ns",
        l.count, l.min, l.median, l.mean, l.max
    )
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.span_ns {
            Some((a, b)) => writeln!(
                f,
                "KFD trace summary: {} records over {:.3} ms (agents are KFD topology nodes)",
                self.records.values().sum::<u64>(),
                b.saturating_sub(a) as f64 / 1e6
            )?,
            None => return writeln!(f, "KFD trace summary: no records"),
        }
        writeln!(f, "migrations:")?;
        if self.migrations.is_empty() {
            writeln!(f, "  none")?;
        }
        for ((src, dst), d) in &self.migrations {
            let rate = match d.throughput() {
                Some(r) => format!("{:.1} MiB/s", r / f64::from(1 << 20)),
                None => "n/a (no time elapsed)".to_owned(),
            };
            writeln!(
                f,
                "  {} -> {}: {} migrations, {}, busy {:.3} ms, effective {rate}{}",
                agent_name(*src),
                agent_name(*dst),
                d.count,
                human_bytes(d.bytes),
                d.busy_ns as f64 / 1e6,
                if d.failed > 0 {
                    format!(", {} failed", d.failed)
                } else {
                    String::new()
                }
            )?;
            for (op, (n, bytes)) in &d.by_operation {
                writeln!(
                    f,
                    "    {}: {n}, {}",
                    short_op(KfdKind::PageMigrate, *op),
                    human_bytes(*bytes)
                )?;
            }
        }
        writeln!(
            f,
            "page faults: {} ({} migrated, {} updated)",
            self.fault_count(),
            self.faults_migrated,
            self.faults_updated
        )?;
        for ((agent, op), n) in &self.faults {
            writeln!(
                f,
                "  {} {}: {n}",
                agent_name(*agent),
                short_op(KfdKind::PageFault, *op)
            )?;
        }
        if let Some(l) = &self.fault_latency {
            write_latency(f, "fault to resolution", l)?;
        }
        writeln!(
            f,
            "queue evictions: {}, restores rescheduled: {}",
            self.queue_evictions.values().sum::<u64>(),
            self.restores_rescheduled
        )?;
        for ((agent, op), n) in &self.queue_evictions {
            writeln!(
                f,
                "  {} {}: {n}",
                agent_name(*agent),
                short_op(KfdKind::Queue, *op)
            )?;
        }
        if let Some(l) = &self.queue_evicted {
            write_latency(f, "evicted to restored", l)?;
        }
        writeln!(
            f,
            "unmaps from GPU: {}",
            self.unmaps.values().map(|u| u.0).sum::<u64>()
        )?;
        for ((agent, op), (n, bytes)) in &self.unmaps {
            writeln!(
                f,
                "  {} {}: {n}, {}",
                agent_name(*agent),
                short_op(KfdKind::EventUnmapFromGpu, *op),
                human_bytes(*bytes)
            )?;
        }
        writeln!(f, "dropped events: {}", self.dropped_events)
    }
}

/// Migrated bytes per time bin and direction: the trace's span cut into `bins` equal bins (at
/// least 1), each successful migration's bytes spread evenly over its start..end (all in the
/// bin of its end when it took no time). Returns the bin width in ns and, per direction, the
/// bytes of each bin.
pub fn throughput_series(
    records: &[KfdRecord],
    bins: usize,
) -> (u64, BTreeMap<Direction, Vec<f64>>) {
    let bins = bins.max(1);
    let mut out: BTreeMap<Direction, Vec<f64>> = BTreeMap::new();
    let Some(t0) = records.iter().map(|r| r.start_ns).min() else {
        return (1, out);
    };
    let t1 = records.iter().map(|r| r.end_ns).max().unwrap_or(t0);
    let width = (t1.saturating_sub(t0)).div_ceil(bins as u64).max(1);
    let bin_of = |t: u64| (((t - t0) / width) as usize).min(bins - 1);
    for r in records
        .iter()
        .filter(|r| r.kind == KfdKind::PageMigrate && r.error_code == 0)
    {
        let series = out
            .entry((r.src_agent, r.dst_agent))
            .or_insert_with(|| vec![0.0; bins]);
        let bytes = r.bytes() as f64;
        let (s, e) = (r.start_ns.max(t0), r.end_ns.max(r.start_ns).max(t0));
        if e == s {
            series[bin_of(e)] += bytes;
            continue;
        }
        for (b, slot) in series
            .iter_mut()
            .enumerate()
            .take(bin_of(e) + 1)
            .skip(bin_of(s))
        {
            let lo = t0 + b as u64 * width;
            let hi = lo + width;
            let overlap = e.min(hi).saturating_sub(s.max(lo));
            *slot += bytes * overlap as f64 / (e - s) as f64;
        }
    }
    (width, out)
}

/// Fault-to-resolution latencies (ns, sorted) per (GPU, resolved by migration).
pub fn fault_latencies(records: &[KfdRecord]) -> BTreeMap<(Option<u32>, bool), Vec<u64>> {
    let mut out: BTreeMap<(Option<u32>, bool), Vec<u64>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == KfdKind::PageFault) {
        out.entry((r.agent, r.fault_migrated()))
            .or_default()
            .push(r.duration_ns());
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// Bytes migrated so far per direction over time: per direction, (time ns, cumulative bytes)
/// at the end of each successful migration, in time order, thinned to at most `max_points`
/// points (evenly over the migrations; the last one always kept, so the final total is
/// exact).
pub fn cumulative_bytes(
    records: &[KfdRecord],
    max_points: usize,
) -> BTreeMap<Direction, Vec<(u64, u64)>> {
    let mut ends: BTreeMap<Direction, Vec<(u64, u64)>> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.kind == KfdKind::PageMigrate && r.error_code == 0)
    {
        ends.entry((r.src_agent, r.dst_agent))
            .or_default()
            .push((r.end_ns, r.bytes()));
    }
    let max_points = max_points.max(2);
    ends.into_iter()
        .map(|(dir, mut v)| {
            v.sort_unstable();
            let mut total = 0u64;
            let all: Vec<(u64, u64)> = v
                .into_iter()
                .map(|(t, b)| {
                    total = total.saturating_add(b);
                    (t, total)
                })
                .collect();
            let step = all.len().div_ceil(max_points).max(1);
            let mut points: Vec<(u64, u64)> = all.iter().copied().step_by(step).collect();
            if points.last() != all.last() {
                points.extend(all.last());
            }
            (dir, points)
        })
        .collect()
}

/// Two summaries side by side (`kfdtool report --compare A B`): one line per figure, A's and
/// B's values and B's change against A; directions, fault kinds and queue kinds that only one
/// trace has show `-` on the other side.
pub fn side_by_side(a: &Summary, b: &Summary, name_a: &str, name_b: &str) -> String {
    let mut rows: Vec<(String, Option<f64>, Option<f64>, &str)> = Vec::new();
    let span = |s: &Summary| s.span_ns.map(|(x, y)| y.saturating_sub(x) as f64 / 1e6);
    rows.push((
        "records".into(),
        Some(a.records.values().sum::<u64>() as f64),
        Some(b.records.values().sum::<u64>() as f64),
        "",
    ));
    rows.push(("span".into(), span(a), span(b), "ms"));
    let dirs: std::collections::BTreeSet<&Direction> =
        a.migrations.keys().chain(b.migrations.keys()).collect();
    for dir in dirs {
        let name = format!("{} -> {}", agent_name(dir.0), agent_name(dir.1));
        let (da, db) = (a.migrations.get(dir), b.migrations.get(dir));
        let f = |d: Option<&DirectionStats>, g: fn(&DirectionStats) -> f64| d.map(g);
        rows.push((
            format!("{name} migrations"),
            f(da, |d| d.count as f64),
            f(db, |d| d.count as f64),
            "",
        ));
        rows.push((
            format!("{name} bytes"),
            f(da, |d| d.bytes as f64 / f64::from(1 << 20)),
            f(db, |d| d.bytes as f64 / f64::from(1 << 20)),
            "MiB",
        ));
        rows.push((
            format!("{name} busy"),
            f(da, |d| d.busy_ns as f64 / 1e6),
            f(db, |d| d.busy_ns as f64 / 1e6),
            "ms",
        ));
        rows.push((
            format!("{name} throughput"),
            da.and_then(DirectionStats::throughput)
                .map(|t| t / f64::from(1 << 20)),
            db.and_then(DirectionStats::throughput)
                .map(|t| t / f64::from(1 << 20)),
            "MiB/s",
        ));
    }
    rows.push((
        "page faults".into(),
        Some(a.fault_count() as f64),
        Some(b.fault_count() as f64),
        "",
    ));
    rows.push((
        "  migrated".into(),
        Some(a.faults_migrated as f64),
        Some(b.faults_migrated as f64),
        "",
    ));
    rows.push((
        "  updated".into(),
        Some(a.faults_updated as f64),
        Some(b.faults_updated as f64),
        "",
    ));
    let lat = |s: &Summary, g: fn(&Latency) -> u64| s.fault_latency.map(|l| g(&l) as f64 / 1e3);
    rows.push((
        "fault latency median".into(),
        lat(a, |l| l.median),
        lat(b, |l| l.median),
        "us",
    ));
    rows.push((
        "fault latency max".into(),
        lat(a, |l| l.max),
        lat(b, |l| l.max),
        "us",
    ));
    rows.push((
        "queue evictions".into(),
        Some(a.queue_evictions.values().sum::<u64>() as f64),
        Some(b.queue_evictions.values().sum::<u64>() as f64),
        "",
    ));
    rows.push((
        "unmaps from GPU".into(),
        Some(a.unmaps.values().map(|u| u.0).sum::<u64>() as f64),
        Some(b.unmaps.values().map(|u| u.0).sum::<u64>() as f64),
        "",
    ));
    rows.push((
        "dropped events".into(),
        Some(a.dropped_events as f64),
        Some(b.dropped_events as f64),
        "",
    ));
    let value = |v: Option<f64>| match v {
        None => "-".to_owned(),
        Some(x) if x.fract() == 0.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned(),
    };
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(6);
    let mut out = format!(
        "{:<width$}  {:>14}  {:>14}  change (B against A)\n",
        "", "A", "B"
    );
    out.push_str(&format!(
        "{:<width$}  A = {name_a}\n{:<width$}  B = {name_b}\n",
        "", ""
    ));
    for (name, x, y, unit) in rows {
        let change = match (x, y) {
            (Some(x), Some(y)) if x == y => "=".to_owned(),
            (Some(x), Some(y)) if x != 0.0 => format!("{:+.1}%", (y - x) / x * 100.0),
            (Some(_), Some(y)) => format!("+{}", value(Some(y))),
            _ => String::new(),
        };
        let name = if unit.is_empty() {
            name
        } else {
            format!("{name} ({unit})")
        };
        out.push_str(&format!(
            "{name:<width$}  {:>14}  {:>14}  {change}\n",
            value(x),
            value(y)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SmiEvent;
    use crate::records::{AgentMap, Pairing};

    fn records(lines: &[&str]) -> Vec<KfdRecord> {
        let events: Vec<SmiEvent> = lines.iter().map(|l| SmiEvent::parse(l).unwrap()).collect();
        Pairing::new(&events, 4096, &AgentMap::new([(0x1a2b, 1)], Some(0))).records
    }

    #[test]
    fn figures_per_direction_fault_and_queue() {
        let r = records(&[
            "5 0 -1 @0(100) 0->1a2b ffffffff:ffffffff 0",
            "5 500 -1 @100(100) 0->1a2b ffffffff:ffffffff 0",
            "6 1000 -1 @0(100) 0->1a2b 0 0",
            "6 2000 -1 @100(100) 0->1a2b 0 0",
            "5 3000 -1 @0(100) 1a2b->0 ffffffff:ffffffff 2",
            "6 3000 -1 @0(100) 1a2b->0 2 -14",
            "7 4000 -1 @5(1a2b) R",
            "8 4100 -1 @5(1a2b) M",
            "7 4200 -1 @6(1a2b) W",
            "8 4500 -1 @6(1a2b) U",
            "9 5000 -1 1a2b 2",
            "a 6000 -1 1a2b R",
            "a 9000 -1 1a2b 0",
            "e 9500 -1 3",
        ]);
        let s = Summary::new(&r);
        let up = &s.migrations[&(Some(0), Some(1))];
        assert_eq!((up.count, up.bytes, up.busy_ns), (2, 2 << 20, 2000));
        assert_eq!(up.throughput(), Some((2u64 << 20) as f64 * 1e9 / 2000.0));
        assert_eq!(s.migrations[&(Some(1), Some(0))].failed, 1);
        assert_eq!((s.faults_migrated, s.faults_updated), (1, 1));
        let l = s.fault_latency.unwrap();
        assert_eq!(
            (l.count, l.min, l.median, l.mean, l.max),
            (2, 100, 100, 200, 300)
        );
        assert_eq!(s.queue_evictions[&(Some(1), 2)], 1);
        assert_eq!(s.queue_evicted.unwrap().max, 4000);
        assert_eq!((s.restores_rescheduled, s.dropped_events), (1, 3));
        let text = s.to_string();
        assert!(
            text.contains("node 0 -> node 1: 2 migrations, 2 MiB"),
            "{text}"
        );
        assert!(text.contains("READ_FAULT_MIGRATED: 1"), "{text}");
        assert!(text.contains("EVICT_TTM: 1"), "{text}");
        assert!(text.contains("dropped events: 3"), "{text}");

        let (width, series) = throughput_series(&r, 19);
        assert_eq!(width, 500);
        let total: f64 = series[&(Some(0), Some(1))].iter().sum();
        assert!((total - (2u64 << 20) as f64).abs() < 1e-3, "{total}");
    }

    #[test]
    fn side_by_side_puts_every_figure_of_both_traces_in_one_line() {
        let a = Summary::new(&records(&[
            "5 0 -1 @0(100) 0->1a2b ffffffff:ffffffff 0",
            "6 1000 -1 @0(100) 0->1a2b 0 0",
        ]));
        let b = Summary::new(&records(&[
            "5 0 -1 @0(100) 0->1a2b ffffffff:ffffffff 0",
            "6 500 -1 @0(100) 0->1a2b 0 0",
            "5 600 -1 @0(100) 1a2b->0 ffffffff:ffffffff 0",
            "6 900 -1 @0(100) 1a2b->0 0 0",
        ]));
        let text = side_by_side(&a, &b, "a.db", "b.db");
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix}: {text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(
            text.contains("A = a.db") && text.contains("B = b.db"),
            "{text}"
        );
        assert_eq!(line("records"), "records 1 2 +100.0%");
        assert_eq!(
            line("node 0 -> node 1 busy"),
            "node 0 -> node 1 busy (ms) 0.001 0.0005 -50.0%"
        );
        assert_eq!(
            line("node 0 -> node 1 bytes"),
            "node 0 -> node 1 bytes (MiB) 1 1 ="
        );
        // A direction only B has.
        assert_eq!(
            line("node 1 -> node 0 migrations"),
            "node 1 -> node 0 migrations - 1"
        );
    }

    #[test]
    fn latencies_and_cumulative_bytes_per_direction() {
        let r = records(&[
            "7 4000 -1 @5(1a2b) R",
            "8 4100 -1 @5(1a2b) M",
            "7 4200 -1 @6(1a2b) W",
            "8 4500 -1 @6(1a2b) U",
            "7 4600 -1 @7(1a2b) R",
            "8 4650 -1 @7(1a2b) M",
            "5 0 -1 @0(100) 0->1a2b ffffffff:ffffffff 0",
            "6 1000 -1 @0(100) 0->1a2b 0 0",
            "5 1000 -1 @100(100) 0->1a2b ffffffff:ffffffff 0",
            "6 2000 -1 @100(100) 0->1a2b 0 0",
            "5 2000 -1 @200(100) 0->1a2b ffffffff:ffffffff 0",
            "6 3000 -1 @200(100) 0->1a2b 0 0",
        ]);
        let l = fault_latencies(&r);
        assert_eq!(l[&(Some(1), true)], [50, 100]);
        assert_eq!(l[&(Some(1), false)], [300]);
        let c = cumulative_bytes(&r, 2);
        // Three 1 MiB migrations thinned to two points, the total kept.
        assert_eq!(c[&(Some(0), Some(1))], [(1000, 1 << 20), (3000, 3 << 20)]);
    }
}
