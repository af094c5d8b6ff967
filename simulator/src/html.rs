//! `--report out.html`: one self-contained HTML file — the summary and SVG charts drawn
//! with plotters (allocation vs utilization, each queue's share vs its guarantee, the
//! queueing-delay distribution, fragmentation). No scripts, no external files.

use crate::report::Report;
use crate::summary;
use plotters::prelude::*;
use std::fmt::Write as _;

const WIDTH: u32 = 860;
const HEIGHT: u32 = 340;
/// Colours of successive series (a palette that survives colour blindness).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// One line of a chart.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
    colour: RGBColor,
    dashed: bool,
}

/// The whole report for runs grouped by policy (each with one report per seed); charts
/// show each policy's first seed.
pub fn render(runs: &[(String, Vec<Report>)]) -> Result<String, String> {
    let firsts: Vec<(&str, &Report)> =
        runs.iter().filter_map(|(name, reports)| reports.first().map(|r| (name.as_str(), r))).collect();
    let Some(&(_, first)) = firsts.first() else { return Err("no runs to report".into()) };
    let mut body = String::new();
    let title = if firsts.len() == 1 {
        format!("gpol simulation: {}", esc(&first.policy))
    } else {
        format!("gpol simulation: {}", firsts.iter().map(|(n, _)| esc(n)).collect::<Vec<_>>().join(" vs "))
    };
    let _ = writeln!(body, "<h1>{title}</h1>");
    let _ = writeln!(
        body,
        "<p class=\"meta\">cluster {} · trace {} · {} replay · seeds {}</p>",
        esc(&first.cluster),
        esc(&first.trace),
        esc(&first.mode),
        runs.first().map_or(String::new(), |(_, r)| r
            .iter()
            .map(|r| r.seed.to_string())
            .collect::<Vec<_>>()
            .join(", "))
    );
    let text = if runs.len() == 1 && runs[0].1.len() == 1 { summary::render(first) } else { summary::compare(runs) };
    let _ = writeln!(body, "<pre>{}</pre>", esc(&text));
    if first.fill.is_some() {
        body.push_str(&section(
            "Allocation and fragmentation as jobs arrive",
            "Each point is the state after the jobs that arrived so far asked for that share of the cluster's GPUs. \
             Fragmentation is the free capacity the workload's popular task shapes cannot use, weighted by how common each shape is.",
            &chart("share of capacity requested", "share of capacity", &fill_lines(&firsts))?,
        ));
    } else {
        body.push_str(&section(
            "Allocation vs utilization",
            "GPUs allocated to jobs, and what the jobs really used (allocation × each job's `utilization` from the trace, 1.0 when not given). The gap is capacity paid for and idle.",
            &chart("days", "GPUs", &allocation_lines(&firsts))?,
        ));
        for (name, r) in &firsts {
            if r.series.queues.is_empty() {
                continue;
            }
            body.push_str(&section(
                &format!("Queue shares vs guarantees — {}", esc(name)),
                "GPUs each leaf queue held (solid) and its guarantee (dashed), time-averaged per interval.",
                &chart("days", "GPUs", &queue_lines(r))?,
            ));
        }
        body.push_str(&section(
            "Queueing delay",
            "Share of started jobs that waited at most this long (arrival to first start), all queues.",
            &chart("hours waited", "share of jobs", &delay_lines(&firsts))?,
        ));
        body.push_str(&section(
            "Fragmentation over time",
            "Free GPUs that no waiting job's shape can use (a job cannot combine free shares of different cards).",
            &chart("days", "GPUs", &fragmentation_lines(&firsts))?,
        ));
    }
    if !first.notes.is_empty() {
        body.push_str("<h2>Notes</h2><ul>");
        for n in &first.notes {
            let _ = write!(body, "<li>{}</li>", esc(n));
        }
        body.push_str("</ul>");
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>\n\
         body {{ font-family: system-ui, sans-serif; max-width: 920px; margin: 2em auto; color: #222; }}\n\
         pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 12px; }}\n\
         .meta, .why {{ color: #555; }} svg {{ display: block; margin: 0.5em 0 1.5em; }}\n\
         </style></head><body>\n{body}</body></html>\n"
    ))
}

fn section(title: &str, why: &str, svg: &str) -> String {
    format!("<h2>{title}</h2>\n<p class=\"why\">{}</p>\n{svg}\n", esc(why))
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn days(r: &Report) -> impl Iterator<Item = f64> + '_ {
    r.series.time_s.iter().map(|t| t / 86_400.0)
}

fn allocation_lines(runs: &[(&str, &Report)]) -> Vec<Line> {
    let mut lines = Vec::new();
    let several = runs.len() > 1;
    for (i, (name, r)) in runs.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let prefix = if several { format!("{name}: ") } else { String::new() };
        lines.push(Line {
            label: format!("{prefix}allocated"),
            points: days(r).zip(r.series.allocated.iter().copied()).collect(),
            colour,
            dashed: false,
        });
        lines.push(Line {
            label: format!("{prefix}used"),
            points: days(r).zip(r.series.used.iter().copied()).collect(),
            colour: if several { colour } else { PALETTE[1] },
            dashed: true,
        });
    }
    if let Some((_, r)) = runs.first() {
        lines.push(Line {
            label: "capacity".into(),
            points: days(r).zip(r.series.capacity.iter().copied()).collect(),
            colour: RGBColor(150, 150, 150),
            dashed: false,
        });
    }
    lines
}

fn queue_lines(r: &Report) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, (queue, s)) in r.series.queues.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        lines.push(Line {
            label: queue.clone(),
            points: days(r).zip(s.allocated.iter().copied()).collect(),
            colour,
            dashed: false,
        });
        lines.push(Line {
            label: format!("{queue} guarantee"),
            points: days(r).zip(s.guarantee.iter().copied()).collect(),
            colour,
            dashed: true,
        });
    }
    lines
}

fn delay_lines(runs: &[(&str, &Report)]) -> Vec<Line> {
    runs.iter()
        .enumerate()
        .map(|(i, (name, r))| Line {
            label: name.to_string(),
            points: r.delay_percentiles.iter().enumerate().map(|(p, d)| (d / 3600.0, p as f64 / 100.0)).collect(),
            colour: PALETTE[i % PALETTE.len()],
            dashed: false,
        })
        .collect()
}

fn fragmentation_lines(runs: &[(&str, &Report)]) -> Vec<Line> {
    runs.iter()
        .enumerate()
        .map(|(i, (name, r))| Line {
            label: name.to_string(),
            points: days(r).zip(r.series.fragmented.iter().copied()).collect(),
            colour: PALETTE[i % PALETTE.len()],
            dashed: false,
        })
        .collect()
}

fn fill_lines(runs: &[(&str, &Report)]) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, (name, r)) in runs.iter().enumerate() {
        let Some(f) = &r.fill else { continue };
        let colour = PALETTE[i % PALETTE.len()];
        let arrived = f.arrived.iter().copied();
        lines.push(Line {
            label: format!("{name}: allocated"),
            points: arrived.clone().zip(f.allocated.iter().copied()).collect(),
            colour,
            dashed: false,
        });
        lines.push(Line {
            label: format!("{name}: fragmented"),
            points: arrived.zip(f.fragmented.iter().copied()).collect(),
            colour,
            dashed: true,
        });
    }
    lines
}

/// One line chart as an SVG element.
fn chart(x_label: &str, y_label: &str, lines: &[Line]) -> Result<String, String> {
    let points = || lines.iter().flat_map(|l| l.points.iter().copied()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let x_max = points().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max).max(1e-9) * 1.08;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| format!("drawing a chart: {e}");
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let mut c = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(38)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|e| fail(&e))?;
        c.configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|e| fail(&e))?;
        for line in lines {
            let style = ShapeStyle { color: line.colour.to_rgba(), filled: false, stroke_width: 2 };
            let pts: Vec<(f64, f64)> =
                line.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
            let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 18, y)], style);
            if line.dashed {
                c.draw_series(DashedLineSeries::new(pts, 6, 4, style))
                    .map_err(|e| fail(&e))?
                    .label(&line.label)
                    .legend(legend);
            } else {
                c.draw_series(LineSeries::new(pts, style)).map_err(|e| fail(&e))?.label(&line.label).legend(legend);
            }
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| fail(&e))?;
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}
