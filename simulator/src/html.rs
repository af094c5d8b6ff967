//! `--report out.html`: one self-contained HTML file — the summary's tables and SVG
//! charts drawn with plotters (allocation and use; waiting demand; each queue's GPUs
//! against its guarantee; queueing-delay distributions on a log time axis; evictions
//! over time; fragmentation; fill curves and their differences from the baseline). No
//! scripts, no external files.

use crate::report::Report;
use crate::summary::{self, Better, Summary};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
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
const GREY: RGBColor = RGBColor(150, 150, 150);
/// Delays below this are drawn at it on the log axis (a job that started at once).
const SHORTEST_DELAY_S: f64 = 1.0;

/// How a line is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stroke {
    Solid,
    /// Thin and dashed, for what a line is measured against (a guarantee, use).
    Dashed,
}

/// One line of a chart.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
    colour: RGBColor,
    stroke: Stroke,
    /// Also names the line at its right end (guarantees, which the legend alone leaves
    /// hard to tell from the allocation of the same colour).
    end_label: bool,
}

impl Line {
    fn new(label: impl Into<String>, points: Vec<(f64, f64)>, colour: RGBColor, stroke: Stroke) -> Line {
        Line { label: label.into(), points, colour, stroke, end_label: false }
    }
}

/// The x axis of a chart.
enum Axis {
    Linear,
    /// Logarithmic, values in seconds labelled as durations.
    LogSeconds,
}

/// Why a report cannot be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HtmlError {
    NoRuns,
    /// The chart library failed, in its words.
    Chart(String),
}

impl std::fmt::Display for HtmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HtmlError::NoRuns => f.write_str("no runs to report"),
            HtmlError::Chart(e) => write!(f, "drawing a chart: {e}"),
        }
    }
}

impl std::error::Error for HtmlError {}

/// The whole report for runs grouped by policy (each with one report per seed); charts
/// show each policy's first seed.
pub fn render(runs: &[(String, Vec<Report>)]) -> Result<String, HtmlError> {
    let firsts: Vec<(&str, &Report)> =
        runs.iter().filter_map(|(name, reports)| reports.first().map(|r| (name.as_str(), r))).collect();
    let Some(&(_, first)) = firsts.first() else { return Err(HtmlError::NoRuns) };
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
    let single = runs.len() == 1 && runs[0].1.len() == 1;
    let summary = if single { summary::summary(first) } else { summary::comparison(runs) };
    body.push_str(&tables(&summary));
    if first.fill.is_some() {
        body.push_str(&section(
            "Allocation and fragmentation as jobs arrive",
            "Each point is the state after the jobs that arrived so far asked for that share of the cluster's GPUs. \
             Fragmentation is the free capacity the workload's popular task shapes cannot use, weighted by how common each shape is.",
            &chart("share of capacity requested", "share of capacity", &fill_lines(&firsts), Axis::Linear)?,
        ));
        if firsts.len() > 1 {
            body.push_str(&section(
                &format!("Allocation against {}", esc(firsts[0].0)),
                "Each policy's allocated share minus the first policy's at the same requested share, in percentage \
                 points (first seed): policies half a point apart are as far apart here as the chart is tall.",
                &chart("share of capacity requested", "points of capacity", &fill_differences(&firsts), Axis::Linear)?,
            ));
        }
    } else {
        body.push_str(&section(
            "Allocation vs utilization",
            "GPUs allocated to jobs (solid), and what the jobs really used (dashed: allocation × each job's \
             `utilization` from the trace, 1.0 when not given). The gap is capacity paid for and idle.",
            &chart("days", "GPUs", &allocation_lines(&firsts), Axis::Linear)?,
        ));
        body.push_str(&section(
            "Waiting demand",
            "GPUs that waiting jobs ask for (every replica), time-averaged per interval, on the same days as the \
             allocation above: demand the cluster did not serve at the time.",
            &chart("days", "GPUs", &per_policy_lines(&firsts, |s| &s.pending_gpus), Axis::Linear)?,
        ));
        for (name, r) in &firsts {
            if r.series.queues.is_empty() {
                continue;
            }
            body.push_str(&section(
                &format!("Queue GPUs vs guarantees — {}", esc(name)),
                "GPUs each leaf queue held (solid, time-averaged per interval) and its guarantee (thin dashed, named at its end).",
                &chart("days", "GPUs", &queue_lines(r), Axis::Linear)?,
            ));
        }
        for (group, lines) in delay_charts(&firsts) {
            body.push_str(&section(
                &format!("Queueing delay — {}", esc(&group)),
                &format!(
                    "Share of started jobs that waited at most this long (arrival to first start), on a log time axis; \
                     jobs that started within {SHORTEST_DELAY_S} s are drawn at {SHORTEST_DELAY_S} s."
                ),
                &chart("waited", "share of jobs", &lines, Axis::LogSeconds)?,
            ));
        }
        if firsts.iter().any(|(_, r)| r.preemption.evictions > 0) {
            body.push_str(&section(
                "Evictions over time",
                "Evictions (and replicas taken from elastic gangs) per hour, averaged over each interval.",
                &chart(
                    "days",
                    "evictions per hour",
                    &per_policy_lines(&firsts, |s| &s.evictions_per_hour),
                    Axis::Linear,
                )?,
            ));
        }
        body.push_str(&section(
            "Fragmentation over time",
            "Free GPUs that no waiting job's shape can use (a job cannot combine free shares of different cards).",
            &chart("days", "GPUs", &per_policy_lines(&firsts, |s| &s.fragmented), Axis::Linear)?,
        ));
    }
    let notes: Vec<&String> = summary.notes.iter().chain(if single { &[][..] } else { &first.notes[..] }).collect();
    if !notes.is_empty() {
        body.push_str("<h2>Notes</h2><ul>");
        for n in notes {
            let _ = write!(body, "<li>{}</li>", esc(n));
        }
        body.push_str("</ul>");
    }
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>\n\
         body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}\n\
         h1, h2, p, ul {{ max-width: 920px; }}\n\
         table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }}\n\
         td, th {{ padding: 2px 10px; text-align: left; white-space: nowrap; border-bottom: 1px solid #eee; }}\n\
         th {{ border-bottom: 1px solid #bbb; }} td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}\n\
         td.better {{ color: #0a6b3d; font-weight: 600; }} td.worse {{ color: #a3231b; font-weight: 600; }}\n\
         td.changed {{ font-weight: 600; }}\n\
         .meta, .why {{ color: #555; }} svg {{ display: block; margin: 0.5em 0 1.5em; }}\n\
         </style></head><body>\n{body}</body></html>\n"
    ))
}

/// The summary's tables. A comparison's deltas are highlighted: green where the metric
/// improved on the first policy, red where it got worse, bold where it changed and
/// neither is better.
fn tables(s: &Summary) -> String {
    let mut out = String::new();
    for t in &s.tables {
        if let Some(title) = &t.title {
            let _ = writeln!(out, "<h3>{}</h3>", esc(title));
        }
        out.push_str("<table>\n");
        let delta_columns: Vec<bool> =
            t.rows.first().filter(|_| t.header).map(|h| h.iter().map(|c| c == "Δ").collect()).unwrap_or_default();
        for (i, row) in t.rows.iter().enumerate() {
            out.push_str("<tr>");
            for (c, cell) in row.iter().enumerate() {
                if i == 0 && t.header {
                    let _ = write!(out, "<th>{}</th>", esc(cell));
                    continue;
                }
                let mut class = Vec::new();
                if t.numbers && c > 0 && summary::is_number(cell) {
                    class.push("num");
                }
                if delta_columns.get(c).copied().unwrap_or(false) {
                    class.extend(judge(cell, t.better.get(i).copied().unwrap_or(Better::Neither)));
                }
                if class.is_empty() {
                    let _ = write!(out, "<td>{}</td>", esc(cell.trim_start()));
                } else {
                    let _ = write!(out, "<td class=\"{}\">{}</td>", class.join(" "), esc(cell.trim_start()));
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
    }
    out
}

/// The class of a delta cell: `better`, `worse`, `changed`, or none when it is zero.
fn judge(delta: &str, better: Better) -> Option<&'static str> {
    let zero = !delta.chars().any(|c| c.is_ascii_digit() && c != '0');
    let up = delta.starts_with('+');
    match (zero, better) {
        (true, _) => None,
        (false, Better::Neither) => Some("changed"),
        (false, Better::Higher) => Some(if up { "better" } else { "worse" }),
        (false, Better::Lower) => Some(if up { "worse" } else { "better" }),
    }
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

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn allocation_lines(runs: &[(&str, &Report)]) -> Vec<Line> {
    let mut lines = Vec::new();
    let several = runs.len() > 1;
    for (i, (name, r)) in runs.iter().enumerate() {
        let prefix = if several { format!("{name}: ") } else { String::new() };
        // One policy: a colour per line; several: a colour per policy.
        let pick = |k: usize| if several { colour(i) } else { colour(k) };
        let s = &r.series;
        lines.push(Line::new(
            format!("{prefix}allocated"),
            days(r).zip(s.allocated.iter().copied()).collect(),
            pick(0),
            Stroke::Solid,
        ));
        lines.push(Line::new(
            format!("{prefix}used"),
            days(r).zip(s.used.iter().copied()).collect(),
            pick(1),
            Stroke::Dashed,
        ));
    }
    if let Some((_, r)) = runs.first() {
        lines.push(Line::new(
            "capacity",
            days(r).zip(r.series.capacity.iter().copied()).collect(),
            GREY,
            Stroke::Solid,
        ));
    }
    lines
}

/// One line per policy of the series `pick` chooses, over days.
fn per_policy_lines(runs: &[(&str, &Report)], pick: fn(&crate::report::Series) -> &Vec<f64>) -> Vec<Line> {
    runs.iter()
        .enumerate()
        .map(|(i, (name, r))| {
            Line::new(
                name.to_string(),
                days(r).zip(pick(&r.series).iter().copied()).collect(),
                colour(i),
                Stroke::Solid,
            )
        })
        .collect()
}

fn queue_lines(r: &Report) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, (queue, s)) in r.series.queues.iter().enumerate() {
        lines.push(Line::new(
            queue.clone(),
            days(r).zip(s.allocated.iter().copied()).collect(),
            colour(i),
            Stroke::Solid,
        ));
        if s.guarantee.iter().any(|g| *g > 0.0) {
            lines.push(Line {
                end_label: true,
                ..Line::new(
                    format!("{queue} guarantee"),
                    days(r).zip(s.guarantee.iter().copied()).collect(),
                    colour(i),
                    Stroke::Dashed,
                )
            });
        }
    }
    lines
}

/// A delay distribution's points: (seconds waited, share of jobs), from its percentiles.
fn delay_points(percentiles: &[f64]) -> Vec<(f64, f64)> {
    percentiles.iter().enumerate().map(|(p, d)| (d.max(SHORTEST_DELAY_S), p as f64 / 100.0)).collect()
}

/// The delay charts: one policy gets one chart, a line for all jobs and one per queue;
/// several get a chart for all jobs and one per queue, a line per policy.
fn delay_charts(runs: &[(&str, &Report)]) -> Vec<(String, Vec<Line>)> {
    if let [(_, r)] = runs {
        let mut lines = vec![Line::new("all jobs", delay_points(&r.delay_percentiles), GREY, Stroke::Solid)];
        for (i, q) in r.queues.iter().filter(|q| !q.delay_percentiles.is_empty()).enumerate() {
            lines.push(Line::new(q.name.clone(), delay_points(&q.delay_percentiles), colour(i), Stroke::Solid));
        }
        return vec![("all jobs and each queue".into(), lines)];
    }
    let per_policy = |pick: &dyn Fn(&Report) -> Option<&Vec<f64>>| -> Vec<Line> {
        runs.iter()
            .enumerate()
            .filter_map(|(i, (name, r))| {
                let p = pick(r).filter(|p| !p.is_empty())?;
                Some(Line::new(name.to_string(), delay_points(p), colour(i), Stroke::Solid))
            })
            .collect()
    };
    let mut charts = vec![("all jobs".to_string(), per_policy(&|r| Some(&r.delay_percentiles)))];
    let mut queues: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for q in &r.queues {
            if !queues.contains(&q.name.as_str()) {
                queues.push(&q.name);
            }
        }
    }
    for queue in queues {
        let lines = per_policy(&|r| r.queues.iter().find(|q| q.name == queue).map(|q| &q.delay_percentiles));
        if !lines.is_empty() {
            charts.push((format!("queue {queue}"), lines));
        }
    }
    charts
}

fn fill_lines(runs: &[(&str, &Report)]) -> Vec<Line> {
    let mut lines = Vec::new();
    for (i, (name, r)) in runs.iter().enumerate() {
        let Some(f) = &r.fill else { continue };
        let arrived = f.arrived.iter().copied();
        lines.push(Line::new(
            format!("{name}: allocated"),
            arrived.clone().zip(f.allocated.iter().copied()).collect(),
            colour(i),
            Stroke::Solid,
        ));
        lines.push(Line::new(
            format!("{name}: fragmented"),
            arrived.zip(f.fragmented.iter().copied()).collect(),
            colour(i),
            Stroke::Dashed,
        ));
    }
    lines
}

/// Each later policy's allocation minus the first's at the same requested share
/// (the first's curve interpolated linearly), in percentage points.
fn fill_differences(runs: &[(&str, &Report)]) -> Vec<Line> {
    let Some(base) = runs.first().and_then(|(_, r)| r.fill.as_ref()) else { return Vec::new() };
    let curve: Vec<(f64, f64)> = base.arrived.iter().copied().zip(base.allocated.iter().copied()).collect();
    let mut lines = vec![Line::new(runs[0].0, vec![], GREY, Stroke::Solid)];
    if let (Some(&(x0, _)), Some(&(x1, _))) = (curve.first(), curve.last()) {
        lines[0].points = vec![(x0, 0.0), (x1, 0.0)];
    }
    for (i, (name, r)) in runs.iter().enumerate().skip(1) {
        let Some(f) = &r.fill else { continue };
        let points = f
            .arrived
            .iter()
            .zip(&f.allocated)
            .filter_map(|(&x, &y)| Some((x, (y - interpolate(&curve, x)?) * 100.0)))
            .collect();
        lines.push(Line::new(name.to_string(), points, colour(i), Stroke::Solid));
    }
    lines
}

/// `curve` (ascending in x) at `x`, linearly between its points; `None` outside it.
fn interpolate(curve: &[(f64, f64)], x: f64) -> Option<f64> {
    let i = curve.partition_point(|p| p.0 < x);
    match (i.checked_sub(1).and_then(|j| curve.get(j)), curve.get(i)) {
        (_, Some(&(x1, y1))) if x1 == x => Some(y1),
        (Some(&(x0, y0)), Some(&(x1, y1))) if x1 > x0 => Some(y0 + (y1 - y0) * (x - x0) / (x1 - x0)),
        _ => None,
    }
}

/// One line chart as an SVG element.
fn chart(x_label: &str, y_label: &str, lines: &[Line], axis: Axis) -> Result<String, HtmlError> {
    let finite = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite();
    let points = || lines.iter().flat_map(|l| l.points.iter().copied()).filter(finite);
    let (x_min, x_max) = points().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (y_min, y_max) = points().fold((0.0f64, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let pad = |v: f64| if v == 0.0 { 0.0 } else { v * 1.08 };
    let (y_min, y_max) = (pad(y_min), pad(y_max).max(y_min + 1e-9));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        match axis {
            Axis::Linear => {
                let x = 0.0f64.min(x_min).min(0.0)..x_max.max(1e-9);
                draw(&root, x, y_min..y_max, x_label, y_label, lines, &|v: &f64| format!("{v}"))?;
            }
            Axis::LogSeconds => {
                let end = x_max.max(SHORTEST_DELAY_S * 10.0);
                // Ticks at the durations people think in, not at powers of ten seconds.
                let ticks = [1.0, 10.0, 60.0, 600.0, 3600.0, 6.0 * 3600.0, 86_400.0, 7.0 * 86_400.0, 30.0 * 86_400.0];
                let ticks: Vec<f64> = ticks.into_iter().filter(|t| *t <= end).collect();
                let x = (SHORTEST_DELAY_S..end).log_scale().with_key_points(ticks);
                draw(&root, x, y_min..y_max, x_label, y_label, lines, &|v: &f64| summary::duration(*v))?;
            }
        }
        root.present().map_err(|e| fail(&e))?;
    }
    Ok(svg)
}

fn fail(e: &dyn std::fmt::Display) -> HtmlError {
    HtmlError::Chart(e.to_string())
}

/// Draws `lines` on `root` over the x range `x` (linear or logarithmic).
fn draw<X>(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    x: X,
    y: std::ops::Range<f64>,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    x_format: &dyn Fn(&f64) -> String,
) -> Result<(), HtmlError>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut c = ChartBuilder::on(root)
        .margin(12)
        .x_label_area_size(38)
        .y_label_area_size(56)
        .build_cartesian_2d(x, y)
        .map_err(|e| fail(&e))?;
    c.configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(x_format)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| fail(&e))?;
    for line in lines {
        let width = if line.stroke == Stroke::Dashed { 1 } else { 2 };
        let style = ShapeStyle { color: line.colour.to_rgba(), filled: false, stroke_width: width };
        let pts: Vec<(f64, f64)> =
            line.points.iter().copied().filter(|(x, y)| x.is_finite() && y.is_finite()).collect();
        let legend = move |(x, y): (i32, i32)| PathElement::new(vec![(x, y), (x + 18, y)], style);
        let drawn = match line.stroke {
            Stroke::Solid => c.draw_series(LineSeries::new(pts.clone(), style)),
            Stroke::Dashed => c.draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style)),
        };
        drawn.map_err(|e| fail(&e))?.label(&line.label).legend(legend);
        if let (true, Some(&end)) = (line.end_label, pts.last()) {
            // Ends where the line ends, just above it, inside the plot.
            let anchor = Pos::new(HPos::Right, VPos::Bottom);
            let font = ("sans-serif", 11).into_font().color(&line.colour).pos(anchor);
            c.draw_series(std::iter::once(Text::new(line.label.clone(), end, font))).map_err(|e| fail(&e))?;
        }
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| fail(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_are_judged_by_which_way_their_metric_improves() {
        assert_eq!(judge("+1.2 pt", Better::Higher), Some("better"));
        assert_eq!(judge("-1.2 pt", Better::Higher), Some("worse"));
        assert_eq!(judge("+5m", Better::Lower), Some("worse"));
        assert_eq!(judge("-5m", Better::Lower), Some("better"));
        assert_eq!(judge("0.0 pt", Better::Lower), None);
        assert_eq!(judge("0s", Better::Higher), None);
        assert_eq!(judge("+2.0", Better::Neither), Some("changed"));
    }

    #[test]
    fn the_baseline_is_interpolated_between_its_points() {
        let curve = [(0.0, 0.0), (0.5, 0.4), (1.0, 0.6)];
        assert_eq!(interpolate(&curve, 0.5), Some(0.4));
        assert!((interpolate(&curve, 0.75).unwrap_or(f64::NAN) - 0.5).abs() < 1e-12);
        assert_eq!(interpolate(&curve, 1.1), None);
        assert_eq!(interpolate(&curve, 0.0), Some(0.0));
    }
}
