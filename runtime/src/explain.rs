//! `explain` (decision D10): why a job goes where it goes, or waits. Re-runs the rules
//! with the interpreter in declaration order: each admit rule, the quota arithmetic, the
//! first filter that rejects each node, every score of the nodes that pass, and the
//! choice.

use crate::fit;
use crate::jobs::{JobId, Request, State};
use crate::model::NodeId;
use crate::place::Decision;
use crate::quota;
use crate::scheduler::{Event, Scheduler};
use gpol_compiler::engine::clamp_score;
use gpol_compiler::interp::{self, Roots};
use std::fmt::Write;

pub fn request_text(s: &Scheduler, job: JobId) -> String {
    let j = &s.jobs[job];
    let r = match j.request {
        Request::Whole(k) => format!("{k} whole card{}", if k == 1 { "" } else { "s" }),
        Request::Fraction(m) => format!("{:.3} of a card", f64::from(m) / 1000.0),
        Request::Mig(p) => format!(
            "a {} MIG instance",
            gpol_compiler::schema::MIG_PROFILES.get(usize::from(p)).copied().unwrap_or("?")
        ),
        Request::None => "no GPU".into(),
    };
    let replicas = if j.replicas > 1 { format!(" × {} replicas", j.replicas) } else { String::new() };
    format!("{r}{replicas}, {} cpu, {} GiB", j.cpu_milli as f64 / 1000.0, j.mem / (1 << 30))
}

/// A readable account of the next decision about `job`.
pub fn explain(s: &Scheduler, job: JobId) -> String {
    let mut out = String::new();
    let j = &s.jobs[job];
    let q = &s.quotas.queues[j.queue];
    let state = match &j.state {
        State::Pending(Some(r)) => format!("pending ({})", r.name()),
        State::Pending(None) => "pending".into(),
        State::Running => "running".into(),
        State::Finished => "finished".into(),
        State::Rejected(r) => format!("rejected by {r}"),
        State::Withdrawn => "withdrawn".to_string(),
    };
    let _ = writeln!(out, "job {} in queue {} ({state}): {}", j.name, q.name, request_text(s, job));
    let demand = quota::demand(j, None);
    let view = s.view(Some(job));
    let ctx = s.ctx(&view);
    let rec = s.job_rec(job);
    let program = &s.policy.program;
    let roots = Roots { job: Some(&rec), ..Roots::default() };
    for r in &program.admit {
        if !interp::eval(&r.body, &ctx, &roots).b() {
            let kind = if r.is_static { "rejects it for good" } else { "holds it back for now" };
            let _ = writeln!(
                out,
                "  admit {}: fails and {kind}{}",
                r.name,
                r.reason.as_ref().map(|x| format!(" (\"{x}\")")).unwrap_or_default()
            );
        } else {
            let _ = writeln!(out, "  admit {}: passes", r.name);
        }
    }
    // Quota arithmetic along the queue's path, for the resources the job asks for.
    for (&r, &need) in demand.iter().filter(|(_, a)| **a > 0) {
        let limited = s.quotas.available(j.queue, r) != i64::MAX
            || std::iter::successors(Some(j.queue), |&q| s.quotas.queues[q].parent)
                .any(|q| s.quotas.queues[q].limit.contains_key(&r));
        if !limited {
            continue;
        }
        let mut p = Some(j.queue);
        while let Some(qi) = p {
            let node = &s.quotas.queues[qi];
            let g = node.guarantee.get(&r).copied();
            let l = node.limit.get(&r).copied();
            let alloc = node.get(&node.alloc, r);
            let borrowed = (alloc - g.unwrap_or(0)).max(0);
            let _ = writeln!(
                out,
                "  quota {} {}: allocated {}, guarantee {}, limit {}, borrowed {}{}",
                node.name,
                r.name(&s.syms),
                r.show(alloc),
                g.map_or("none".into(), |v| r.show(v)),
                l.map_or("none".into(), |v| r.show(v)),
                r.show(borrowed),
                if qi == j.queue {
                    format!(", available {}, needs {}", r.show(s.quotas.available(qi, r)), r.show(need))
                } else {
                    String::new()
                }
            );
            p = node.parent;
        }
    }
    if let Err(why) = s.quotas.admissible(j.queue, j.user, &demand).map_err(|b| s.quotas.describe(b, &s.syms)) {
        let _ = writeln!(out, "  quota blocks it: {why}");
    }
    let nodes = s.node_records();
    for (i, n) in nodes.iter().enumerate() {
        let node = &s.cluster.nodes[i];
        let roots = Roots { job: Some(&rec), node: Some(n), ..Roots::default() };
        let name = &node.name;
        if !node.up {
            let _ = writeln!(out, "  node {name}: out of service");
            continue;
        }
        if let Some(f) = program.filters.iter().find(|f| !interp::eval(&f.body, &ctx, &roots).b()) {
            let why = f.reason.as_ref().map(|x| format!(": \"{x}\"")).unwrap_or_default();
            let _ = writeln!(out, "  node {name}: rejected by filter {}{why}", f.name);
            continue;
        }
        if let Some(&owner) = s.reserved.get(&i)
            && owner != job
        {
            let _ = writeln!(out, "  node {name}: held in reserve for {}", s.jobs[owner].name);
            continue;
        }
        let fits = fit::fits(node, j);
        let mut scores = Vec::new();
        let (mut total, mut tiers) = (0.0, [0.0f64; 4]);
        for sc in &program.scores {
            let raw = interp::eval(&sc.body, &ctx, &roots).f();
            let (v, fault) = clamp_score(raw);
            let fault = if fault > 0 { format!(" (raw {raw}, a fault)") } else { String::new() };
            match sc.tier {
                Some(t) => {
                    tiers[usize::from(t).saturating_sub(1).min(3)] += v;
                    scores.push(format!("{} {v:.3} tier {t}{fault}", sc.name));
                }
                None => {
                    total += sc.weight * v;
                    scores.push(format!("{} {v:.3} × {}{fault}", sc.name, sc.weight));
                }
            }
        }
        let tiers_text =
            if program.scores.iter().any(|s| s.tier.is_some()) { format!(", tiers {tiers:?}") } else { String::new() };
        let fit_text = if fits { "" } else { "; does not fit (not enough free capacity)" };
        let _ = writeln!(out, "  node {name}: passes; score {total:.3}{tiers_text} [{}]{fit_text}", scores.join(", "));
    }
    match s.decide(job) {
        Decision::Place { replicas } => {
            let nodes: Vec<&str> = replicas.iter().map(|&n| s.cluster.nodes[n].name.as_str()).collect();
            let _ = writeln!(out, "  → would go to {}", nodes.join(", "));
        }
        Decision::Wait(r) => {
            let why = match &r {
                crate::jobs::Reason::Quota(why) => format!("quota ({why})"),
                crate::jobs::Reason::Unschedulable(why) => format!("unschedulable ({why})"),
                other => other.name().to_string(),
            };
            let _ = writeln!(out, "  → waits: {why}");
            if !s.policy.program.victims.is_empty() && j.is_pending() {
                // The search tries evictions on the model and undoes them: run it on a copy.
                let mut trial = s.clone();
                trial.victim_search(job, Some(&mut out));
            }
        }
        Decision::Reject(r) => {
            let _ = writeln!(out, "  → rejected by {r}");
        }
    }
    if let Some(nodes) = s.reservations.get(&job) {
        let names: Vec<&str> = nodes.iter().map(|&n| s.cluster.nodes[n].name.as_str()).collect();
        let _ = writeln!(out, "  holds {} in reserve until it starts", names.join(", "));
    }
    out
}

/// One line for an event of the log (`None` for submissions, which say nothing new).
pub fn describe_event(s: &Scheduler, event: &Event) -> Option<String> {
    let name = |j: &JobId| s.jobs[*j].name.as_str();
    let nodes = |ns: &[NodeId]| ns.iter().map(|n| s.cluster.nodes[*n].name.as_str()).collect::<Vec<_>>().join(", ");
    Some(match event {
        Event::Submitted { .. } => return None,
        Event::Placed { job, nodes: ns, .. } => format!("placed {} on {}", name(job), nodes(ns)),
        Event::Rejected { job, rule, .. } => format!("rejected {} by {rule}", name(job)),
        Event::Finished { job, .. } => format!("finished {}", name(job)),
        Event::Requeued { job, node, .. } => {
            format!("requeued {} (lost node {})", name(job), s.cluster.nodes[*node].name)
        }
        Event::Evicted { job, by, rule, lost_gpu_s, .. } => {
            format!("evicted {} for {} under {rule}, losing {lost_gpu_s} GPU-seconds", name(job), name(by))
        }
        Event::Reserved { job, nodes: ns, .. } => format!("reserved {} for {}", nodes(ns), name(job)),
    })
}
