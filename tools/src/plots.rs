//! The pictures of a trace, as SVG (plotters, SVG backend only, no font files: text is left
//! to the viewer's `sans-serif`):
//! * [`residency_svg`]: where pages lived over time, on kfd-svm's bounded
//!   [`ResidencyMap`] grid (rows proportional to the size of each touched address range,
//!   ranges used in place included; faults marked; only residency the trace states drawn);
//! * [`throughput_svg`]: migration throughput over time, one line per direction
//!   ([`throughput_series`]).
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
const LEGEND_WIDTH: u32 = 260;
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
        Some(_) => format!("{} (system memory)", agent_name(agent)),
        None => agent_name(agent),
    }
}

fn err<E: std::fmt::Display>(e: E) -> String {
    format!("drawing the picture: {e}")
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
            .y_label_area_size(140)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        // A tick's label is the address at that height.
        let row_label = |y: &f64| {
            if map.total_bytes == 0 {
                return String::new();
            }
            let offset = (y / y_max * map.total_bytes as f64) as u64;
            match map.address_at(offset.min(map.total_bytes - 1)) {
                Some((pid, address)) if several_pids => format!("{pid}:{address:#x}"),
                Some((_, address)) => format!("{address:#x}"),
                None => String::new(),
            }
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("time since the first record (ms)")
            .y_desc(if several_pids {
                "pid:address (migrated ranges)"
            } else {
                "address (migrated ranges)"
            })
            .y_labels(12)
            .y_label_formatter(&row_label)
            .draw()
            .map_err(err)?;
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
        let mut chart = ChartBuilder::on(&root)
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
        for (i, ((src, dst), bins)) in series.iter().enumerate() {
            let colour = colour(i, Some(0)).to_rgba();
            let points = bins
                .iter()
                .enumerate()
                .map(|(b, bytes)| ((b as f64 + 0.5) * width_ns as f64 / 1e6, mib_s(*bytes)));
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(err)?
                .label(format!(
                    "{} -> {}",
                    label(*src, agents),
                    label(*dst, agents)
                ))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        if !series.is_empty() {
            chart
                .configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.85))
                .draw()
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

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
}
