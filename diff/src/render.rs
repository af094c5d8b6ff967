//! A diff's report in words (people), JSON (tools) or GitHub workflow annotations (CI).

use crate::report::{Decision, DecisionReport, Direction, Report, RuleRef, Verdict};
use gpol_compiler::diag::render::{escape_data, escape_property};
use std::fmt::Write;

/// The report for people.
pub fn human(r: &Report) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "gpolc diff {} → {}: {}", r.old, r.new, status(r));
    let _ = writeln!(t, "searched {} cases ({} (job, node) pairs), seed {}\n", r.cases, r.pairs, r.seed);
    for d in &r.decisions {
        let _ = writeln!(t, "  {:<22} {}", d.decision.title(), verdict(d));
    }
    for note in &r.notes {
        let _ = writeln!(t, "\nnote: {note}");
    }
    for rn in &r.renames {
        let _ = writeln!(t, "\nrenamed: {} {} → {} (same behaviour)", rn.kind, rn.old, rn.new);
    }
    for x in &r.replay {
        let _ = writeln!(t, "\ntrace replay ({} mode, seed {}):", x.mode, x.seed);
        match &x.first_divergence {
            None => {
                let _ = writeln!(t, "  every decision the same");
            }
            Some(d) => {
                let _ =
                    writeln!(t, "  first divergent decision at {} s:\n    old: {}\n    new: {}", d.at_s, d.old, d.new);
                let _ = writeln!(
                    t,
                    "  jobs placed differently {}, started at another time {}, evicted differently {}",
                    x.placed_differently, x.ordered_differently, x.evicted_differently
                );
            }
        }
        let _ = writeln!(
            t,
            "  {:<16} {:>21} {:>21} {:>19} {:>13} {:>19}",
            "queue",
            "delay p50 s old→new",
            "delay p95 s old→new",
            "mean GPUs old→new",
            "evictions",
            "lost GPU-h old→new"
        );
        let opt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
        for q in &x.queues {
            let _ = writeln!(
                t,
                "  {:<16} {:>21} {:>21} {:>19} {:>13} {:>19}",
                q.queue,
                format!("{}→{}", opt(q.delay_p50_s.old), opt(q.delay_p50_s.new)),
                format!("{}→{}", opt(q.delay_p95_s.old), opt(q.delay_p95_s.new)),
                format!("{:.1}→{:.1}", q.mean_gpus.old, q.mean_gpus.new),
                format!("{}→{}", q.evictions.old, q.evictions.new),
                format!("{:.1}→{:.1}", q.lost_gpu_hours.old, q.lost_gpu_hours.new),
            );
        }
    }
    for d in r.decisions.iter().filter(|d| !d.counterexamples.is_empty()) {
        for (i, c) in d.counterexamples.iter().enumerate() {
            let _ = writeln!(t, "\n── {} — difference {} of {}", d.decision.title(), i + 1, d.differed);
            let _ = writeln!(t, "   decided in old by: {}", rules(&c.old_rules));
            let _ = writeln!(t, "   decided in new by: {}", rules(&c.new_rules));
            let _ = writeln!(t, "   old: {}", c.old_expectations.join("; "));
            let _ = writeln!(t, "   new: {}", c.new_expectations.join("; "));
            let _ = writeln!(t, "   this test passes on new and fails on old:\n");
            for line in c.test.lines() {
                let _ = writeln!(t, "   {line}");
            }
        }
    }
    t
}

/// The verdict on the whole diff.
fn status(r: &Report) -> &'static str {
    match r.exit_code() {
        crate::report::CHANGED => "behaviour changed",
        crate::report::INCONCLUSIVE => "inconclusive",
        _ => "no behaviour change found",
    }
}

/// One line: the verdict and its strength.
fn verdict(d: &DecisionReport) -> String {
    let ties = match d.ties {
        0 => String::new(),
        n => format!("; {n} more moved only with tie-breaking under both versions (not a change)"),
    };
    match &d.verdict {
        Verdict::Proved { .. } => "equivalent, proved".into(),
        Verdict::UpToBound { domain, cases } => {
            format!("equivalent up to bound ({cases} decisions over {domain}){ties}")
        }
        Verdict::Sampled { samples } => format!("no difference in {samples} samples{ties}"),
        Verdict::Different { direction } => {
            format!(
                "DIFFERENT{}: {} of {} decisions{ties}",
                direction_words(d.decision, *direction),
                d.differed,
                d.samples
            )
        }
        Verdict::Inconclusive { unconfirmed: 0 } => {
            "inconclusive: not proved, and no case reached this decision".into()
        }
        Verdict::Inconclusive { unconfirmed } => {
            let why = match d.ties {
                0 => String::new(),
                n => format!(" ({n} schedules showed it only together with tie-breaking under both versions)"),
            };
            format!("inconclusive: {unconfirmed} decisions differed, but no schedule showing it was confirmed{why}")
        }
    }
}

fn direction_words(d: Decision, dir: Direction) -> String {
    match (d.more(), dir) {
        (Some(more), Direction::More) => format!(", new {more} more"),
        (Some(more), Direction::Less) => format!(", new {more} less"),
        (Some(_), Direction::Incomparable) => ", incomparable (new allows some old refuses, and the other way)".into(),
        _ => String::new(),
    }
}

fn rules(list: &[RuleRef]) -> String {
    if list.is_empty() {
        return "declarations (no single rule)".into();
    }
    let parts: Vec<String> = list.iter().map(|r| format!("{} ({}:{}:{})", r.label, r.file, r.line, r.column)).collect();
    parts.join(", ")
}

/// The report as JSON.
pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
}

/// One GitHub annotation per counterexample (at the new version's deciding rule), and a
/// notice for an inconclusive decision.
pub fn github(r: &Report) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "::notice title={}::{}",
        escape_property(&format!("gpolc diff: {} → {}", r.old, r.new)),
        escape_data(&format!("{}; {} cases ({} (job, node) pairs), seed {}", status(r), r.cases, r.pairs, r.seed))
    );
    for d in &r.decisions {
        for c in &d.counterexamples {
            let at = c.new_rules.first().or(c.old_rules.first());
            let (file, line, col) = at.map_or((r.new.clone(), 1, 1), |x| (x.file.clone(), x.line, x.column));
            let message = format!(
                "{} changed{}\nold: {}\nnew: {}\n\n{}",
                d.decision.title(),
                direction_words(d.decision, c.direction),
                c.old_expectations.join("; "),
                c.new_expectations.join("; "),
                c.test
            );
            let _ = writeln!(
                t,
                "::warning file={},line={line},col={col},title={}::{}",
                escape_property(&file),
                escape_property(&format!("gpolc diff: {}", d.decision.title())),
                escape_data(&message)
            );
        }
        if let Verdict::Inconclusive { unconfirmed } = d.verdict {
            let _ = writeln!(
                t,
                "::notice file={},title={}::{}",
                escape_property(&r.new),
                escape_property(&format!("gpolc diff: {}", d.decision.title())),
                escape_data(&format!("{unconfirmed} decisions differed but no schedule showing it was confirmed"))
            );
        }
    }
    t
}
