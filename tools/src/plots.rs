//! The pictures of a trace, as SVG (plotters, SVG backend only, no font files: text is left
//! to the viewer's `sans-serif`):
//! * [`residency_svg`]: address × time, each migrated range coloured by where its pages were
//!   (kfd-svm's [`residency`]);
//! * [`throughput_svg`]: migration throughput over time, one line per direction
//!   ([`throughput_series`]).

use kfd_svm::KfdRecord;
use kfd_svm::summary::{Residency, agent_name, residency, throughput_series};
use plotters::prelude::*;

use crate::rocpd::Agent;

/// Picture size in pixels.
const SIZE: (u32, u32) = (1000, 600);
/// Time bins of the throughput picture.
pub const THROUGHPUT_BINS: usize = 100;

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

/// The residency heatmap: x is ms since the first record, y the migrated address ranges in
/// address order (labelled with their first address), each stretch a rectangle in the colour
/// of its agent, with a legend.
pub fn residency_svg(records: &[KfdRecord], agents: &[Agent]) -> Result<String, String> {
    let spans = residency(records);
    let mut rows: Vec<(u32, u64, u64)> = spans
        .iter()
        .map(|s| (s.pid, s.start_address, s.end_address))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    let several_pids = rows.first().map(|r| r.0) != rows.last().map(|r| r.0);
    let t0 = spans.iter().map(|s| s.from_ns).min().unwrap_or(0);
    let t1 = spans.iter().map(|s| s.until_ns).max().unwrap_or(t0);
    let ms = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
    let x_max = ms(t1).max(1e-3);
    let y_max = rows.len().max(1) as f64;
    let mut located: Vec<Option<u32>> = spans.iter().map(|s| s.agent).collect();
    located.sort_unstable();
    located.dedup();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let caption = if spans.is_empty() {
            "Residency of migrated pages (no migrations)".to_owned()
        } else {
            format!(
                "Residency of migrated pages ({} ranges, {} places)",
                rows.len(),
                located.len()
            )
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(120)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(err)?;
        // A label at each row's lower edge (plotters may also offer fractional positions,
        // which get none).
        let row_label = |y: &f64| {
            if y.fract() != 0.0 {
                return String::new();
            }
            match rows.get(*y as usize) {
                Some((pid, start, _)) if several_pids => format!("{pid}:{start:#x}"),
                Some((_, start, _)) => format!("{start:#x}"),
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
            .y_labels((rows.len() + 1).clamp(2, 17))
            .y_label_formatter(&row_label)
            .draw()
            .map_err(err)?;
        for (i, agent) in located.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let row_of = |s: &Residency| {
                rows.binary_search(&(s.pid, s.start_address, s.end_address))
                    .unwrap_or(0) as f64
            };
            chart
                .draw_series(spans.iter().filter(|s| s.agent == *agent).map(|s| {
                    let y = row_of(s);
                    Rectangle::new(
                        [(ms(s.from_ns), y), (ms(s.until_ns), y + 1.0)],
                        colour.filled(),
                    )
                }))
                .map_err(err)?
                .label(label(*agent, agents))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        if !located.is_empty() {
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
            let colour = Palette99::pick(i).to_rgba();
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
