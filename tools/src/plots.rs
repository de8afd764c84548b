//! The pictures of a trace, as SVG (plotters, SVG backend only, no font files: text is left
//! to the viewer's `sans-serif`):
//! * [`residency_svg`]: where pages lived over time, on kfd-svm's bounded
//!   [`ResidencyMap`] grid (rows proportional to the size of each touched address range,
//!   ranges used in place included; faults marked; only residency the trace states drawn);
//! * [`throughput_svg`]: migration throughput over time, one line per direction
//!   ([`throughput_series`]);
//! * [`latency_svg`]: the fault-to-resolution latency distribution, one cumulative curve per
//!   GPU and resolution;
//! * [`cumulative_svg`]: bytes migrated so far per direction, a step per migration;
//! * [`thrashing_svg`]: migrations per address stretch and time column (the residency
//!   picture's axis), darker where pages move back and forth.
//!
//! Colours are the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), told
//! apart under the common colour-vision deficiencies; legends sit outside the data. Every
//! picture's size is bounded whatever the trace's length: the residency picture draws at most
//! [`RESIDENCY_ROWS`] × [`RESIDENCY_COLS`] blocks and twice as many fault marks.

use kfd_svm::KfdRecord;
use kfd_svm::residency::ResidencyMap;
use kfd_svm::summary::{agent_name, throughput_series};
use plotters::prelude::*;

use crate::rocpd::Agent;

/// Picture size in pixels.
const SIZE: (u32, u32) = (1100, 600);
/// The width of the legend panel right of the data.
const LEGEND_WIDTH: u32 = 320;
/// Time bins of the throughput picture.
pub const THROUGHPUT_BINS: usize = 100;
/// Address rows of the residency grid.
pub const RESIDENCY_ROWS: u32 = 200;
/// Time columns of the residency grid.
pub const RESIDENCY_COLS: u32 = 400;

/// The Okabe–Ito colours (black left out: it marks faults).
const OKABE_ITO: [RGBColor; 7] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];
/// No agent (the undefined location).
const NO_AGENT: RGBColor = RGBColor(0xBB, 0xBB, 0xBB);

/// The colour of the `i`th place.
fn colour(i: usize, agent: Option<u32>) -> RGBColor {
    match agent {
        None => NO_AGENT,
        Some(_) => OKABE_ITO[i % OKABE_ITO.len()],
    }
}

fn label(agent: Option<u32>, agents: &[Agent]) -> String {
    match agent.and_then(|n| agents.iter().find(|a| a.node_id == n)) {
        Some(Agent {
            gpu_id: Some(g), ..
        }) => format!("{} (gpu {g:#x})", agent_name(agent)),
        Some(_) => format!("{} (system)", agent_name(agent)),
        None => agent_name(agent),
    }
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("drawing the picture: {e}")
}

/// Labels the address axis with the touched ranges: each range's first address and size at
/// its middle, right-aligned left of the axis; a range too close to the previous label gets
/// none (the rows stay proportional to size).
fn label_ranges(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    chart: &ChartContext<
        '_,
        SVGBackend<'_>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    map: &ResidencyMap,
    several_pids: bool,
) -> Result<(), String> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    if map.total_bytes == 0 {
        return Ok(());
    }
    let style = ("sans-serif", 11)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    let mut last: Option<i32> = None;
    for e in &map.extents {
        let size = e.end - e.start;
        let mid =
            (e.offset as f64 + size as f64 / 2.0) / map.total_bytes as f64 * f64::from(map.rows);
        let (x, y) = chart.backend_coord(&(0.0, mid));
        if last.is_some_and(|l| (l - y).abs() < 13) {
            continue;
        }
        last = Some(y);
        let text = if several_pids {
            format!("{}:{:#x} {}", e.pid, e.start, agent_size(size))
        } else {
            format!("{:#x} {}", e.start, agent_size(size))
        };
        root.draw(&Text::new(text, (x - 6, y), style.clone()))
            .map_err(err)?;
    }
    Ok(())
}

/// A size for a label (`2 MiB`, `4 KiB`).
fn agent_size(bytes: u64) -> String {
    kfd_svm::summary::human_bytes(bytes)
}

/// The residency picture: x is ms since the first record, y the touched address space (each
/// range's rows in proportion to its size, labelled with addresses), each block in the colour
/// of where its pages were, faults as marks (filled: migrated, hollow: mapping updated only),
/// cells the trace says nothing about left white; the legend right of the data.
pub fn residency_svg(records: &[KfdRecord], agents: &[Agent]) -> Result<String, String> {
    let map = ResidencyMap::new(records, RESIDENCY_ROWS, RESIDENCY_COLS);
    let several_pids = map.extents.first().map(|e| e.pid) != map.extents.last().map(|e| e.pid);
    let ms_of = |col: u32| map.col_ns(col) as f64 / 1e6;
    let x_max = ms_of(map.cols).max(1e-3);
    let y_max = f64::from(map.rows);
    let located = map.agents();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (data, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let caption = if map.extents.is_empty() {
            "Residency of migrated pages (no migrations)".to_owned()
        } else {
            format!(
                "Residency of migrated pages ({} ranges, {} places)",
                map.extents.len(),
                located.len()
            )
        };
        let mut chart = ChartBuilder::on(&data)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(175)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("time since the first record (ms)")
            .y_desc(if several_pids {
                "pid:address (migrated ranges)"
            } else {
                "address (migrated ranges)"
            })
            .y_label_formatter(&|_| String::new())
            .draw()
            .map_err(err)?;
        label_ranges(&root, &chart, &map, several_pids)?;
        let fill = |agent: Option<u32>| {
            let i = located.iter().position(|a| *a == agent).unwrap_or(0);
            colour(i, agent)
        };
        chart
            .draw_series(map.blocks.iter().map(|b| {
                Rectangle::new(
                    [
                        (ms_of(b.col0), f64::from(b.row0)),
                        (ms_of(b.col1), f64::from(b.row1)),
                    ],
                    fill(b.agent).filled(),
                )
            }))
            .map_err(err)?;
        // Range boundaries, when few enough to tell apart.
        if map.extents.len() > 1 && map.extents.len() <= 64 {
            chart
                .draw_series(map.extents.iter().skip(1).map(|e| {
                    let y = e.offset as f64 / map.total_bytes as f64 * y_max;
                    PathElement::new([(0.0, y), (x_max, y)], BLACK.mix(0.3).stroke_width(1))
                }))
                .map_err(err)?;
        }
        let half_col = x_max / f64::from(map.cols) / 2.0;
        chart
            .draw_series(map.faults.iter().map(|f| {
                let at = (ms_of(f.col) + half_col, f64::from(f.row) + 0.5);
                if f.migrated {
                    Circle::new(at, 2, BLACK.filled())
                } else {
                    Circle::new(at, 2, BLACK.stroke_width(1))
                }
            }))
            .map_err(err)?;
        let style = ("sans-serif", 13).into_font().color(&BLACK);
        let mut line = 0;
        let mut next_y = || {
            line += 1;
            40 + 22 * line
        };
        for agent in &located {
            let y = next_y();
            legend
                .draw(&Rectangle::new(
                    [(8, y - 6), (22, y + 6)],
                    fill(*agent).filled(),
                ))
                .map_err(err)?;
            legend
                .draw(&Text::new(
                    label(*agent, agents),
                    (30, y - 7),
                    style.clone(),
                ))
                .map_err(err)?;
        }
        if !map.faults.is_empty() {
            let y = next_y();
            legend
                .draw(&Circle::new((15, y), 3, BLACK.filled()))
                .map_err(err)?;
            legend
                .draw(&Text::new(
                    "fault, pages migrated",
                    (30, y - 7),
                    style.clone(),
                ))
                .map_err(err)?;
            let y = next_y();
            legend
                .draw(&Circle::new((15, y), 3, BLACK.stroke_width(1)))
                .map_err(err)?;
            legend
                .draw(&Text::new(
                    "fault, mapping updated",
                    (30, y - 7),
                    style.clone(),
                ))
                .map_err(err)?;
        }
        if !map.extents.is_empty() {
            let y = next_y();
            legend
                .draw(&Text::new(
                    "white: not in the trace",
                    (8, y - 7),
                    style.clone(),
                ))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Throughput over time: x is ms since the first record, y MiB/s per [`THROUGHPUT_BINS`] bin,
/// one line per migration direction, with a legend.
pub fn throughput_svg(records: &[KfdRecord], agents: &[Agent]) -> Result<String, String> {
    let (width_ns, series) = throughput_series(records, THROUGHPUT_BINS);
    let mib_s = |bytes: f64| bytes / f64::from(1 << 20) / (width_ns as f64 / 1e9);
    let peak = series
        .values()
        .flat_map(|v| v.iter().copied())
        .fold(0.0, f64::max);
    let y_max = (mib_s(peak) * 1.1).max(1.0);
    let x_max = (width_ns as f64 * THROUGHPUT_BINS as f64 / 1e6).max(1e-3);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (data, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&data)
            .caption("Migration throughput over time", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time since the first record (ms)")
            .y_desc("throughput (MiB/s)")
            .draw()
            .map_err(err)?;
        let mut entries = Vec::new();
        for (i, ((src, dst), bins)) in series.iter().enumerate() {
            let colour = OKABE_ITO[i % OKABE_ITO.len()];
            let points = bins
                .iter()
                .enumerate()
                .map(|(b, bytes)| ((b as f64 + 0.5) * width_ns as f64 / 1e6, mib_s(*bytes)));
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(err)?;
            entries.push(Entry {
                colour,
                line: true,
                text: format!("{} -> {}", label(*src, agents), label(*dst, agents)),
            });
        }
        draw_legend(&legend, "direction", &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Points per direction of the cumulative-bytes picture.
pub const CUMULATIVE_POINTS: usize = 500;
/// Points per series of the fault-latency picture (quantiles beyond that).
pub const LATENCY_POINTS: usize = 200;
/// Address rows of the thrashing picture's grid.
pub const THRASHING_ROWS: u32 = 100;
/// Time columns of the thrashing picture's grid.
pub const THRASHING_COLS: u32 = 50;

/// One legend entry: a colour, drawn as a line or a box, and its text.
struct Entry {
    colour: RGBColor,
    line: bool,
    text: String,
}

/// A legend in the panel right of the data.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    entries: &[Entry],
) -> Result<(), String> {
    let style = ("sans-serif", 12).into_font().color(&BLACK);
    area.draw(&Text::new(title.to_owned(), (8, 40), style.clone()))
        .map_err(err)?;
    for (i, e) in entries.iter().enumerate() {
        let y = 66 + 22 * i as i32;
        if e.line {
            area.draw(&PathElement::new(
                [(6, y), (24, y)],
                e.colour.stroke_width(2),
            ))
            .map_err(err)?;
        } else {
            area.draw(&Rectangle::new(
                [(8, y - 6), (22, y + 6)],
                e.colour.filled(),
            ))
            .map_err(err)?;
        }
        area.draw(&Text::new(e.text.clone(), (30, y - 7), style.clone()))
            .map_err(err)?;
    }
    Ok(())
}

/// Fault-to-resolution latency as a distribution: one cumulative curve per GPU and
/// resolution (pages migrated, or the mapping only updated), x the latency in µs, y the share
/// of that series' faults resolved within it. At most [`LATENCY_POINTS`] points per curve.
pub fn latency_svg(records: &[KfdRecord], agents: &[Agent]) -> Result<String, String> {
    let series = kfd_svm::summary::fault_latencies(records);
    let x_max = series
        .values()
        .filter_map(|v| v.last())
        .max()
        .map_or(1.0, |&ns| ns as f64 / 1e3)
        .max(1e-3)
        * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (data, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let caption = format!(
            "Fault-to-resolution latency ({} faults)",
            series.values().map(Vec::len).sum::<usize>()
        );
        let mut chart = ChartBuilder::on(&data)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..x_max, 0f64..1.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("latency (µs)")
            .y_desc("share of faults resolved")
            .draw()
            .map_err(err)?;
        let mut entries = Vec::new();
        for (i, ((agent, migrated), ns)) in series.iter().enumerate() {
            let colour = OKABE_ITO[i % OKABE_ITO.len()];
            let n = ns.len();
            let take = n.min(LATENCY_POINTS);
            // The k-th of `take` quantiles: the sample at rank ceil(k n / take).
            let points = (1..=take).map(|k| {
                let rank = (k * n).div_ceil(take);
                (ns[rank - 1] as f64 / 1e3, rank as f64 / n as f64)
            });
            // A step function: the share holds until the next latency.
            let mut steps = vec![(0.0, 0.0)];
            let mut share = 0.0;
            for (x, y) in points {
                steps.push((x, share));
                share = y;
                steps.push((x, share));
            }
            steps.push((x_max, share));
            chart
                .draw_series(LineSeries::new(steps, colour.stroke_width(2)))
                .map_err(err)?;
            entries.push(Entry {
                colour,
                line: true,
                text: format!(
                    "{} {} (n {n})",
                    label(*agent, agents),
                    if *migrated { "migrated" } else { "updated" }
                ),
            });
        }
        draw_legend(&legend, "GPU, resolution", &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Bytes migrated so far, per direction, over time (ms since the first record), at most
/// [`CUMULATIVE_POINTS`] points per direction: where the traffic went, without bins cutting
/// migrations apart.
pub fn cumulative_svg(records: &[KfdRecord], agents: &[Agent]) -> Result<String, String> {
    let series = kfd_svm::summary::cumulative_bytes(records, CUMULATIVE_POINTS);
    let t0 = records.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let t1 = records.iter().map(|r| r.end_ns).max().unwrap_or(t0);
    let ms = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let y_max = series
        .values()
        .filter_map(|v| v.last())
        .map(|p| mib(p.1))
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.05;
    let x_max = ms(t1).max(1e-3);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (data, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&data)
            .caption("Bytes migrated so far, per direction", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time since the first record (ms)")
            .y_desc("migrated (MiB)")
            .draw()
            .map_err(err)?;
        let mut entries = Vec::new();
        for (i, ((src, dst), points)) in series.iter().enumerate() {
            let colour = OKABE_ITO[i % OKABE_ITO.len()];
            // A step: the total holds until the next migration ends.
            let mut steps = vec![(0.0, 0.0)];
            let mut last = 0.0;
            for &(t, b) in points {
                steps.push((ms(t), last));
                last = mib(b);
                steps.push((ms(t), last));
            }
            steps.push((x_max, last));
            chart
                .draw_series(LineSeries::new(steps, colour.stroke_width(2)))
                .map_err(err)?;
            entries.push(Entry {
                colour,
                line: true,
                text: format!("{} -> {}", label(*src, agents), label(*dst, agents)),
            });
        }
        draw_legend(&legend, "direction", &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A sequential, colour-blind-safe scale (viridis at five stops, light to dark) for counts.
const SEQUENTIAL: [RGBColor; 5] = [
    RGBColor(0xFD, 0xE7, 0x25),
    RGBColor(0x5E, 0xC9, 0x62),
    RGBColor(0x21, 0x91, 0x8C),
    RGBColor(0x3B, 0x52, 0x8B),
    RGBColor(0x44, 0x01, 0x54),
];

/// The thrashing view: how often the pages of each stretch of the touched address space (the
/// residency picture's axis, on a [`THRASHING_ROWS`] × [`THRASHING_COLS`] grid) migrated in
/// each stretch of time; darker is more. Ranges that move back and forth show as dark bands.
pub fn thrashing_svg(records: &[KfdRecord]) -> Result<String, String> {
    let map = ResidencyMap::new(records, THRASHING_ROWS, THRASHING_COLS);
    let cells = kfd_svm::residency::migration_density(&map, records);
    let max = cells.iter().map(|c| c.2).max().unwrap_or(0);
    // Five bins of count, doubling: 1, 2-3, 4-7, 8-15, 16+ (scaled when the maximum is
    // smaller than 16).
    let bin = |n: u32| ((32 - n.leading_zeros()) as usize - 1).min(SEQUENTIAL.len() - 1);
    let ms_of = |col: u32| map.col_ns(col) as f64 / 1e6;
    let x_max = ms_of(map.cols).max(1e-3);
    let y_max = f64::from(map.rows);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (data, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&data)
            .caption(
                format!("Migrations per range over time (most in a cell: {max})"),
                ("sans-serif", 20),
            )
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(175)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("time since the first record (ms)")
            .y_desc("address (touched ranges)")
            .y_label_formatter(&|_| String::new())
            .draw()
            .map_err(err)?;
        let several_pids = map.extents.first().map(|e| e.pid) != map.extents.last().map(|e| e.pid);
        label_ranges(&root, &chart, &map, several_pids)?;
        // Cells of one row next to each other in the same shade are one rectangle.
        let mut runs: Vec<(u32, u32, u32, usize)> = Vec::new();
        for &(row, col, n) in &cells {
            match runs.last_mut() {
                Some(r) if r.0 == row && r.2 == col && r.3 == bin(n) => r.2 = col + 1,
                _ => runs.push((row, col, col + 1, bin(n))),
            }
        }
        chart
            .draw_series(runs.iter().map(|&(row, col0, col1, shade)| {
                Rectangle::new(
                    [
                        (ms_of(col0), f64::from(row)),
                        (ms_of(col1), f64::from(row + 1)),
                    ],
                    SEQUENTIAL[shade].filled(),
                )
            }))
            .map_err(err)?;
        let entries: Vec<Entry> = ["1 migration", "2-3", "4-7", "8-15", "16 or more"]
            .iter()
            .zip(SEQUENTIAL)
            .map(|(text, colour)| Entry {
                colour,
                line: false,
                text: (*text).to_owned(),
            })
            .collect();
        draw_legend(&legend, "migrations in a cell", &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Every picture of a trace: (file name, SVG), in the order `kfdtool trace --format svg` and
/// `kfdtool report --svg` write them.
pub fn all_svgs(
    records: &[KfdRecord],
    agents: &[Agent],
) -> Result<Vec<(&'static str, String)>, String> {
    Ok(vec![
        ("residency.svg", residency_svg(records, agents)?),
        ("throughput.svg", throughput_svg(records, agents)?),
        ("latency.svg", latency_svg(records, agents)?),
        ("cumulative.svg", cumulative_svg(records, agents)?),
        ("thrashing.svg", thrashing_svg(records)?),
    ])
}

/// The file names of [`all_svgs`].
pub const SVG_NAMES: [&str; 5] = [
    "residency.svg",
    "throughput.svg",
    "latency.svg",
    "cumulative.svg",
    "thrashing.svg",
];

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_svm::KfdKind;

    /// n nested migrations alternating between two places (the quadratic case) and a
    /// fault per migration.
    fn nested(n: u64) -> Vec<KfdRecord> {
        let mut out = Vec::new();
        for i in 0..n {
            let half = (i + 1) * 4096;
            let m = KfdRecord {
                kind: KfdKind::PageMigrate,
                operation: 1,
                start_ns: i * 100,
                end_ns: i * 100 + 50,
                pid: 1,
                agent: None,
                src_agent: Some(i as u32 % 2),
                dst_agent: Some(1 - i as u32 % 2),
                prefetch_agent: None,
                preferred_agent: None,
                start_address: 0x1_0000_0000 - half,
                end_address: 0x1_0000_0000 + half,
                error_code: 0,
                count: 0,
            };
            out.push(KfdRecord {
                kind: KfdKind::PageFault,
                operation: (i % 4) as u32,
                agent: Some(1),
                start_address: m.start_address,
                end_address: m.start_address,
                ..m
            });
            out.push(m);
        }
        out
    }

    #[test]
    fn the_residency_picture_is_bounded_whatever_the_records() {
        let agents = [];
        let small = residency_svg(&nested(100), &agents).unwrap();
        let large = residency_svg(&nested(20_000), &agents).unwrap();
        for svg in [&small, &large] {
            let doc = roxmltree::Document::parse(svg).unwrap();
            let count = |tag: &str| doc.descendants().filter(|n| n.has_tag_name(tag)).count();
            let cells = (RESIDENCY_ROWS * RESIDENCY_COLS) as usize;
            // Background, blocks, legend swatches; fault marks and their two legend marks.
            assert!(count("rect") <= 1 + cells + 2, "{}", count("rect"));
            assert!(count("circle") <= 2 * cells + 2, "{}", count("circle"));
        }
        // 200 times the records, not 40 000 times the picture (the old stretches were
        // quadratic): well under a megabyte here.
        assert!(large.len() < 1 << 20, "{} bytes", large.len());
    }

    #[test]
    fn every_picture_is_bounded_and_names_what_it_shows() {
        let records = nested(20_000);
        let pictures = all_svgs(&records, &[]).unwrap();
        let names: Vec<&str> = pictures.iter().map(|p| p.0).collect();
        assert_eq!(names, SVG_NAMES);
        for (name, svg) in &pictures {
            let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{name}: {e}"));
            let count = |tag: &str| doc.descendants().filter(|n| n.has_tag_name(tag)).count();
            assert!(svg.len() < 1 << 20, "{name}: {} bytes", svg.len());
            match *name {
                "latency.svg" => {
                    // Faults of one GPU, migrated or updated: two step curves of at most
                    // 2 LATENCY_POINTS + 2 points each.
                    let lines: Vec<_> = doc
                        .descendants()
                        .filter(|n| n.has_tag_name("polyline"))
                        .filter_map(|n| n.attribute("points"))
                        .filter(|p| p.split_whitespace().count() > 2)
                        .collect();
                    assert_eq!(lines.len(), 2, "{name}");
                    assert!(
                        lines
                            .iter()
                            .all(|p| p.split_whitespace().count() <= 2 * LATENCY_POINTS + 2)
                    );
                }
                "cumulative.svg" => {
                    let longest = doc
                        .descendants()
                        .filter(|n| n.has_tag_name("polyline"))
                        .filter_map(|n| n.attribute("points"))
                        .map(|p| p.split_whitespace().count())
                        .max()
                        .unwrap();
                    assert!(longest <= 2 * CUMULATIVE_POINTS + 4, "{longest}");
                }
                "thrashing.svg" => {
                    assert!(count("rect") <= 1 + (THRASHING_ROWS * THRASHING_COLS) as usize + 5);
                }
                _ => {}
            }
        }
    }
}
