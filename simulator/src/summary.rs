//! The terminal summary of a run, and the side-by-side table of several.

use crate::report::{Report, Stats};
use std::fmt::Write as _;

/// A duration in seconds, the way people read them: `45s`, `12m 5s`, `3h 20m`, `2d 4h`.
pub fn duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "-".into();
    }
    let s = seconds.round() as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) if seconds < 10.0 && seconds.fract() != 0.0 => format!("{seconds:.1}s"),
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => {
            if sec > 0 {
                format!("{m}m {sec}s")
            } else {
                format!("{m}m")
            }
        }
        (0, _, _) => {
            if m > 0 {
                format!("{h}h {m}m")
            } else {
                format!("{h}h")
            }
        }
        _ => {
            if h > 0 {
                format!("{d}d {h}h")
            } else {
                format!("{d}d")
            }
        }
    }
}

fn percent(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A number with thousands separators and `digits` decimals.
fn number(x: f64, digits: usize) -> String {
    let text = format!("{:.*}", digits, x.abs());
    let (int, frac) = text.split_once('.').map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if x < 0.0 && text.chars().any(|c| c.is_ascii_digit() && c != '0') { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// Rows of cells as columns two spaces apart; with `numbers`, cells after the first
/// that start like a number are right-aligned.
fn table(rows: &[Vec<String>], indent: &str, numbers: bool) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(indent);
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            let numeric = numbers && c > 0 && is_number(cell);
            if c > 0 {
                line.push_str("  ");
            }
            if numeric {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn stats_row(name: &str, s: &Stats) -> Vec<String> {
    vec![
        name.to_string(),
        s.count.to_string(),
        duration(s.mean),
        duration(s.p50),
        duration(s.p95),
        duration(s.p99),
        duration(s.max),
    ]
}

/// What the summary shows, as data: the terminal renders it as text, the HTML report as
/// tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// One line saying what ran.
    pub headline: Option<String>,
    pub tables: Vec<Table>,
    pub notes: Vec<String>,
}

/// One table: rows of cells, the first the column names when `header` is set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// A line above the table (`never started`).
    pub title: Option<String>,
    pub rows: Vec<Vec<String>>,
    pub header: bool,
    /// Cells after the first that read as numbers align right.
    pub numbers: bool,
    /// A comparison's: per row, which way its metric improves (empty otherwise).
    pub better: Vec<Better>,
}

impl Table {
    fn new(rows: Vec<Vec<String>>, header: bool, numbers: bool) -> Table {
        Table { title: None, rows, header, numbers, better: Vec::new() }
    }
}

/// Whether a cell after the first aligns right: numbers, deltas, and "–" for none.
pub fn is_number(cell: &str) -> bool {
    cell == "–" || cell.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+')
}

/// The summary as text, tables a blank line apart.
pub fn text(s: &Summary) -> String {
    let mut out = String::new();
    if let Some(h) = &s.headline {
        let _ = writeln!(out, "{h}\n");
    }
    for (i, t) in s.tables.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let indent = match &t.title {
            Some(title) => {
                let _ = writeln!(out, "{title}");
                "  "
            }
            None => "",
        };
        out.push_str(&table(&t.rows, indent, t.numbers));
    }
    if !s.notes.is_empty() {
        out.push_str("\nnotes\n");
        for n in &s.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

/// The summary of one run, as text.
pub fn render(r: &Report) -> String {
    text(&summary(r))
}

/// The summary of one run.
pub fn summary(r: &Report) -> Summary {
    let headline = format!(
        "policy {} · cluster {} ({} nodes, {} GPUs) · trace {} · {} · seed {}",
        r.policy,
        r.cluster,
        number(r.nodes as f64, 0),
        number(r.gpus, 0),
        r.trace,
        r.mode,
        r.seed
    );
    let mut out = Summary { headline: Some(headline), ..Summary::default() };
    let j = &r.jobs;
    let mut head = vec![vec![
        "jobs".to_string(),
        format!(
            "{} in all: {} finished, {} running, {} pending, {} rejected{}",
            number(j.total as f64, 0),
            number(j.finished as f64, 0),
            number(j.running as f64, 0),
            number(j.pending as f64, 0),
            number(j.rejected as f64, 0),
            if j.withdrawn > 0 { format!(", {} did not fit", number(j.withdrawn as f64, 0)) } else { String::new() }
        ),
    ]];
    if let Some(f) = &r.fill {
        let arrived = f.arrived.last().copied().unwrap_or(0.0);
        head.push(vec![
            "fill".into(),
            format!(
                "arrived {} of capacity (target {}) · allocated {} · unallocated {} · {} of the arrived request did not fit",
                percent(arrived),
                percent(f.target),
                percent(1.0 - f.unallocated),
                percent(f.unallocated),
                percent(f.failed)
            ),
        ]);
        head.push(vec![
            "fragmentation".into(),
            format!("{} of capacity at the end (expected over the workload's task shapes)", percent(r.fragmentation)),
        ]);
    } else {
        let h = &r.gpu_hours;
        head.push(vec!["makespan".into(), duration(r.makespan_s)]);
        head.push(vec![
            "GPU-hours".into(),
            format!(
                "capacity {} · allocated {} ({}) · used {} ({}) · idle {}",
                number(h.capacity, 0),
                number(h.allocated, 0),
                percent(r.allocation),
                number(h.used, 0),
                percent(r.utilization),
                number(h.idle, 0)
            ),
        ]);
        head.push(vec![
            "fragmentation".into(),
            format!(
                "{} of capacity, time-averaged (free GPUs no waiting job's shape can use)",
                percent(r.fragmentation)
            ),
        ]);
        if let Some(c) = &r.cost {
            let prices: Vec<String> =
                c.price_per_gpu_hour.iter().map(|(m, p)| format!("{m} {}", number(*p, 2))).collect();
            head.push(vec![
                "cost".into(),
                format!(
                    "idle {} · allocated but unused {} · lost work {} · of {} for the capacity (per GPU-hour: {})",
                    number(c.idle, 2),
                    number(c.allocated_unused, 2),
                    number(c.lost, 2),
                    number(c.capacity, 2),
                    if prices.is_empty() { "none".to_string() } else { prices.join(", ") }
                ),
            ]);
        }
        head.push(vec!["fair share".into(), format!("deviation {} (time-averaged)", percent(r.fair_share_deviation))]);
        let p = &r.preemption;
        let rules: Vec<String> = p.by_rule.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        head.push(vec![
            "preemption".into(),
            format!(
                "{} evictions{} · {} requeues after node failures · {} GPU-hours of work lost{}",
                number(p.evictions as f64, 0),
                if rules.is_empty() { String::new() } else { format!(" ({})", rules.join(", ")) },
                number(p.requeues as f64, 0),
                number(p.gpu_hours_lost, 1),
                if p.reservations > 0 { format!(" · {} reservations", p.reservations) } else { String::new() }
            ),
        ]);
    }
    out.tables.push(Table::new(head, false, false));
    if r.fill.is_none() && (!r.queueing_delay.is_empty() || r.completion_time.is_some()) {
        let mut rows = vec![["", "jobs", "mean", "p50", "p95", "p99", "max"].map(str::to_string).to_vec()];
        rows[0][0] = "queueing delay".into();
        for d in &r.queueing_delay {
            rows.push(stats_row(&format!("  {}", d.group), &d.stats));
        }
        if let Some(c) = &r.completion_time {
            rows.push(stats_row("completion time", c));
        }
        out.tables.push(Table::new(rows, true, true));
    }
    if r.fill.is_none() && !r.queues.is_empty() {
        let mut rows = vec![
            [
                "queue",
                "jobs",
                "done",
                "guarantee",
                "mean GPUs",
                "share",
                "fair",
                "borrowed GPU-h",
                "lent GPU-h",
                "evictions",
                "lost GPU-h",
            ]
            .map(str::to_string)
            .to_vec(),
        ];
        for q in &r.queues {
            rows.push(vec![
                q.name.clone(),
                number(q.jobs as f64, 0),
                number(q.finished as f64, 0),
                number(q.guarantee_gpus, 1),
                number(q.mean_gpus, 1),
                percent(q.mean_share),
                percent(q.mean_fair_share),
                q.borrowed_gpu_hours.map_or("–".into(), |h| number(h, 0)),
                q.lent_gpu_hours.map_or("–".into(), |h| number(h, 0)),
                number(q.evictions as f64, 0),
                number(q.lost_gpu_hours, 1),
            ]);
        }
        out.tables.push(Table::new(rows, true, true));
    }
    if !r.never_scheduled.is_empty() {
        let rows: Vec<Vec<String>> = r
            .never_scheduled
            .iter()
            .map(|n| {
                vec![
                    n.reason.clone(),
                    format!("{} jobs", number(n.jobs as f64, 0)),
                    format!("{} GPUs", number(n.gpus, 1)),
                    format!("e.g. {}", n.example),
                ]
            })
            .collect();
        out.tables.push(Table { title: Some("never started".into()), ..Table::new(rows, false, true) });
    }
    let unpriced = r
        .cost
        .as_ref()
        .filter(|c| !c.unpriced.is_empty())
        .map(|c| format!("no price for GPU model {}: its GPU-hours are not in the cost", c.unpriced.join(", ")));
    out.notes = r.notes.iter().cloned().chain(unpriced).collect();
    out
}

/// One metric of the comparison: its name, how to read it from a run, how to show it,
/// and whether higher is better (for the sign of the delta, not to judge).
struct Metric {
    name: &'static str,
    value: fn(&Report) -> Option<f64>,
    show: fn(f64) -> String,
    delta: fn(f64) -> String,
    better: Better,
}

/// Which way a metric improves: what the report's highlighting of a delta says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    /// Neither (a queue's GPUs: more for one is less for another).
    Neither,
}

fn signed(text: String, x: f64) -> String {
    if x > 0.0 { format!("+{text}") } else { text }
}

fn metrics(fill: bool) -> Vec<Metric> {
    let pct = |x: f64| percent(x);
    let pt = |x: f64| signed(format!("{:.1} pt", x * 100.0), x);
    let dur = |x: f64| duration(x);
    let ddur = |x: f64| if x < 0.0 { format!("-{}", duration(-x)) } else { signed(duration(x), x) };
    let count = |x: f64| number(x, 0);
    let dcount = |x: f64| signed(number(x, 0), x);
    let hours = |x: f64| number(x, 1);
    let dhours = |x: f64| signed(number(x, 1), x);
    let money = |x: f64| number(x, 2);
    let dmoney = |x: f64| signed(number(x, 2), x);
    fn delay(r: &Report, f: fn(&Stats) -> f64) -> Option<f64> {
        r.queueing_delay.iter().find(|d| d.group == "all").map(|d| f(&d.stats))
    }
    if fill {
        return vec![
            Metric {
                name: "allocated",
                value: |r| r.fill.as_ref().map(|f| 1.0 - f.unallocated),
                show: pct,
                delta: pt,
                better: Better::Higher,
            },
            Metric {
                name: "did not fit (of arrived)",
                value: |r| r.fill.as_ref().map(|f| f.failed),
                show: pct,
                delta: pt,
                better: Better::Lower,
            },
            Metric {
                name: "fragmentation",
                value: |r| Some(r.fragmentation),
                show: pct,
                delta: pt,
                better: Better::Lower,
            },
            Metric {
                name: "jobs placed",
                value: |r| Some((r.jobs.running + r.jobs.finished) as f64),
                show: count,
                delta: dcount,
                better: Better::Higher,
            },
        ];
    }
    vec![
        Metric { name: "allocation", value: |r| Some(r.allocation), show: pct, delta: pt, better: Better::Higher },
        Metric { name: "utilization", value: |r| Some(r.utilization), show: pct, delta: pt, better: Better::Higher },
        Metric {
            name: "idle GPU-hours",
            value: |r| Some(r.gpu_hours.idle),
            show: hours,
            delta: dhours,
            better: Better::Lower,
        },
        Metric { name: "fragmentation", value: |r| Some(r.fragmentation), show: pct, delta: pt, better: Better::Lower },
        Metric {
            name: "fair-share deviation",
            value: |r| Some(r.fair_share_deviation),
            show: pct,
            delta: pt,
            better: Better::Lower,
        },
        Metric {
            name: "queueing delay p50",
            value: |r| delay(r, |s| s.p50),
            show: dur,
            delta: ddur,
            better: Better::Lower,
        },
        Metric {
            name: "queueing delay p95",
            value: |r| delay(r, |s| s.p95),
            show: dur,
            delta: ddur,
            better: Better::Lower,
        },
        Metric {
            name: "queueing delay p99",
            value: |r| delay(r, |s| s.p99),
            show: dur,
            delta: ddur,
            better: Better::Lower,
        },
        Metric {
            name: "completion time p50",
            value: |r| r.completion_time.as_ref().map(|s| s.p50),
            show: dur,
            delta: ddur,
            better: Better::Lower,
        },
        Metric { name: "makespan", value: |r| Some(r.makespan_s), show: dur, delta: ddur, better: Better::Lower },
        Metric {
            name: "evictions",
            value: |r| Some(r.preemption.evictions as f64),
            show: count,
            delta: dcount,
            better: Better::Lower,
        },
        Metric {
            name: "GPU-hours lost",
            value: |r| Some(r.gpu_hours.lost),
            show: hours,
            delta: dhours,
            better: Better::Lower,
        },
        Metric {
            name: "cost of idle GPUs",
            value: |r| r.cost.as_ref().map(|c| c.idle),
            show: money,
            delta: dmoney,
            better: Better::Lower,
        },
        Metric {
            name: "cost allocated, unused",
            value: |r| r.cost.as_ref().map(|c| c.allocated_unused),
            show: money,
            delta: dmoney,
            better: Better::Lower,
        },
        Metric {
            name: "cost of lost work",
            value: |r| r.cost.as_ref().map(|c| c.lost),
            show: money,
            delta: dmoney,
            better: Better::Lower,
        },
        Metric {
            name: "jobs finished",
            value: |r| Some(r.jobs.finished as f64),
            show: count,
            delta: dcount,
            better: Better::Higher,
        },
        Metric {
            name: "jobs never started",
            value: |r| Some(r.never_scheduled.iter().map(|n| n.jobs).sum::<u64>() as f64),
            show: count,
            delta: dcount,
            better: Better::Lower,
        },
    ]
}

/// Several policies side by side, each over the same seeds: the mean of each metric
/// (± its standard deviation when there are several seeds), and each policy's delta
/// from the first.
pub fn compare(runs: &[(String, Vec<Report>)]) -> String {
    text(&comparison(runs))
}

/// [`compare`] as data: one table, its first row the column names.
pub fn comparison(runs: &[(String, Vec<Report>)]) -> Summary {
    let fill = runs.iter().flat_map(|(_, r)| r).any(|r| r.fill.is_some());
    let seeds = runs.first().map_or(0, |(_, r)| r.len());
    let mut header = vec![format!("{} seed{}", seeds, if seeds == 1 { "" } else { "s" })];
    for (i, (name, _)) in runs.iter().enumerate() {
        header.push(name.clone());
        if i > 0 {
            header.push("Δ".into());
        }
    }
    let mut t = Table { better: vec![Better::Neither], ..Table::new(vec![header], true, true) };
    for m in metrics(fill) {
        t.rows.push(compare_row(m.name.to_string(), runs, &m.value, m.show, m.delta));
        t.better.push(m.better);
    }
    if !fill {
        per_group_rows(runs, &mut t);
    }
    Summary { tables: vec![t], ..Summary::default() }
}

/// Each queue's and priority class's queueing delay (p50, p95, p99) and each queue's
/// mean GPUs held, for every group any run has, in the first run's order.
fn per_group_rows(runs: &[(String, Vec<Report>)], t: &mut Table) {
    let ddur = |x: f64| if x < 0.0 { format!("-{}", duration(-x)) } else { signed(duration(x), x) };
    let mut groups: Vec<&str> = Vec::new();
    let mut queues: Vec<&str> = Vec::new();
    for r in runs.iter().flat_map(|(_, r)| r) {
        for d in r.queueing_delay.iter().filter(|d| d.group != "all") {
            if !groups.contains(&d.group.as_str()) {
                groups.push(&d.group);
            }
        }
        for q in &r.queues {
            if !queues.contains(&q.name.as_str()) {
                queues.push(&q.name);
            }
        }
    }
    for group in groups {
        for label in ["p50", "p95", "p99"] {
            let pick = |s: &Stats| match label {
                "p50" => s.p50,
                "p95" => s.p95,
                _ => s.p99,
            };
            let value = |r: &Report| r.queueing_delay.iter().find(|d| d.group == group).map(|d| pick(&d.stats));
            t.rows.push(compare_row(format!("{group} delay {label}"), runs, &value, duration, ddur));
            t.better.push(Better::Lower);
        }
    }
    let tenth = |x: f64| number(x, 1);
    let dtenth = |x: f64| signed(number(x, 1), x);
    let count = |x: f64| number(x, 0);
    let dcount = |x: f64| signed(number(x, 0), x);
    for queue in queues {
        let find = |r: &Report| r.queues.iter().find(|q| q.name == queue).cloned();
        let gpus = |r: &Report| find(r).map(|q| q.mean_gpus);
        t.rows.push(compare_row(format!("queue {queue} mean GPUs"), runs, &gpus, tenth, dtenth));
        t.better.push(Better::Neither);
        let evictions = |r: &Report| find(r).map(|q| q.evictions as f64);
        t.rows.push(compare_row(format!("queue {queue} evictions"), runs, &evictions, count, dcount));
        t.better.push(Better::Lower);
        let lost = |r: &Report| find(r).map(|q| q.lost_gpu_hours);
        t.rows.push(compare_row(format!("queue {queue} GPU-hours lost"), runs, &lost, tenth, dtenth));
        t.better.push(Better::Lower);
    }
}

/// One metric across the runs: each run's mean over its seeds (± the standard deviation
/// when there are several), and each later run's difference from the first.
fn compare_row(
    name: String,
    runs: &[(String, Vec<Report>)],
    value: &dyn Fn(&Report) -> Option<f64>,
    show: fn(f64) -> String,
    delta: fn(f64) -> String,
) -> Vec<String> {
    let mut row = vec![name];
    let mut first = None;
    for (i, (_, reports)) in runs.iter().enumerate() {
        let values: Vec<f64> = reports.iter().filter_map(value).collect();
        if values.is_empty() {
            row.push("-".into());
            if i > 0 {
                row.push(String::new());
            }
            continue;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        row.push(if values.len() > 1 { format!("{} ± {}", show(mean), show(sd)) } else { show(mean) });
        match first {
            None => first = Some(mean),
            Some(base) => row.push(delta(mean - base)),
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_numbers_read_naturally() {
        assert_eq!(duration(0.0), "0s");
        assert_eq!(duration(2.5), "2.5s");
        assert_eq!(duration(45.0), "45s");
        assert_eq!(duration(725.0), "12m 5s");
        assert_eq!(duration(3600.0 * 3.0 + 1200.0), "3h 20m");
        assert_eq!(duration(86_400.0 * 2.0 + 3600.0 * 4.0), "2d 4h");
        assert_eq!(number(1_234_567.891, 1), "1,234,567.9");
        assert_eq!(number(-1234.0, 0), "-1,234");
        assert_eq!(number(-0.01, 0), "0");
        assert_eq!(number(999.0, 0), "999");
    }
}
