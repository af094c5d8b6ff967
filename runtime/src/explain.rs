//! `explain` (decision D10): why a job goes where it goes, or waits. Re-runs the rules
//! with the interpreter in declaration order: each admit rule, the quota arithmetic, the
//! first filter that rejects each node, every score of the nodes that pass, and the
//! choice. This is where decisions — reasons, quota blocks, victim verdicts, events,
//! which carry rule identities and numbers — become words.

use crate::fit;
use crate::jobs::{JobId, Reason, Request, State, Unschedulable};
use crate::model::NodeId;
use crate::place::Decision;
use crate::preempt::{Place, Verdict};
use crate::quota::{self, Block};
use crate::scheduler::{Event, Scheduler};
use gpol_compiler::engine::clamp_score;
use gpol_compiler::interp::{self, Roots};
use gpol_compiler::ir::RuleId;
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

/// A quota block in words, with its numbers.
pub fn block_text(s: &Scheduler, block: Block) -> String {
    let queue = |q: usize| &s.quotas.queues[q].name;
    match block {
        Block::Limit { queue: q, res, limit, allocated, needs } => format!(
            "queue `{}` would exceed its {} limit (holds {}, needs {}, limit {})",
            queue(q),
            res.name(&s.syms),
            res.show(allocated),
            res.show(needs),
            res.show(limit)
        ),
        Block::UserLimit { queue: q, res, limit, used, needs } => format!(
            "the user would exceed queue `{}`'s {} user limit (holds {}, needs {}, limit {})",
            queue(q),
            res.name(&s.syms),
            res.show(used),
            res.show(needs),
            res.show(limit)
        ),
        Block::Cohort { queue: q, res, available, needs } => format!(
            "queue `{}` has {} {} available in its cohort, needs {}",
            queue(q),
            res.show(available.max(0)),
            res.name(&s.syms),
            res.show(needs)
        ),
    }
}

/// Why a job can never run, in words.
pub fn unschedulable_text(s: &Scheduler, job: JobId, why: Unschedulable) -> String {
    match why {
        Unschedulable::NoNode => {
            format!("no node could hold one replica ({}) even if it were empty", request_text(s, job))
        }
        Unschedulable::TooFewNodes { room } => {
            format!("the nodes could hold {room} of its replicas ({}) even if they were empty", request_text(s, job))
        }
        Unschedulable::OverLimit { queue, .. } => {
            format!("it needs more than queue `{}`'s limit", s.quotas.queues[queue].name)
        }
    }
}

/// What a waiting reason says beyond its name (the quota cap, why it can never run).
pub fn reason_detail(s: &Scheduler, job: JobId, reason: &Reason) -> Option<String> {
    match *reason {
        Reason::Quota(block) => Some(block_text(s, block)),
        Reason::Unschedulable(why) => Some(unschedulable_text(s, job, why)),
        _ => None,
    }
}

/// A job's state in a few words (`pending because quota`, `running on n1, n2`).
pub fn state_text(s: &Scheduler, job: JobId) -> String {
    let j = &s.jobs[job];
    let program = &s.policy.program;
    match &s.state(job) {
        State::Running => {
            let nodes: Vec<&str> = j.slots.iter().map(|sl| s.cluster.nodes[sl.node].name.as_str()).collect();
            format!("running on {}", nodes.join(", "))
        }
        State::Pending(Some(r)) => format!("pending because {}", r.name(program)),
        State::Pending(None) => "pending".into(),
        State::Finished => "finished".into(),
        State::Rejected(r) => format!("rejected because {}", program.rule_name(*r)),
        State::Withdrawn => "withdrawn".to_string(),
    }
}

/// A readable account of the next decision about `job`.
pub fn explain(s: &Scheduler, job: JobId) -> String {
    let mut out = String::new();
    let j = &s.jobs[job];
    let q = &s.quotas.queues[j.queue];
    let program = &s.policy.program;
    let state = match &s.state(job) {
        State::Pending(Some(r)) => format!("pending ({})", r.name(program)),
        State::Pending(None) => "pending".into(),
        State::Running => "running".into(),
        State::Finished => "finished".into(),
        State::Rejected(r) => format!("rejected by {}", program.rule_name(*r)),
        State::Withdrawn => "withdrawn".to_string(),
    };
    let _ = writeln!(out, "job {} in queue {} ({state}): {}", j.name, q.name, request_text(s, job));
    queue_order_text(s, job, &mut out);
    let demand = quota::demand(j, None);
    let view = s.view(Some(job));
    let ctx = s.ctx(&view);
    let rec = s.job_rec(job);
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
            // Borrow and lend limits only where they are set: most queues have none.
            let limits: String = [("borrow limit", &node.borrow_limit), ("lend limit", &node.lend_limit)]
                .iter()
                .filter_map(|(what, amounts)| amounts.get(&r).map(|&v| format!(", {what} {}", r.show(v))))
                .collect();
            let _ = writeln!(
                out,
                "  quota {} {}: allocated {}, guarantee {}, limit {}{limits}, borrowed {}{}",
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
    if let Err(block) = s.quotas.admissible(j.queue, j.user, &demand) {
        let _ = writeln!(out, "  quota blocks it: {}", block_text(s, block));
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
    if j.replicas > 1 && j.is_pending() {
        gang_text(s, job, &mut out);
    }
    match s.decide(job) {
        Decision::Place { replicas } => {
            let nodes: Vec<&str> = replicas.iter().map(|&n| s.cluster.nodes[n].name.as_str()).collect();
            let _ = writeln!(out, "  → would go to {}", nodes.join(", "));
        }
        Decision::Wait(r) => {
            let why = match reason_detail(s, job, &r) {
                Some(detail) => format!("{} ({detail})", r.name(program)),
                None => r.name(program),
            };
            let _ = writeln!(out, "  → waits: {why}");
            if !s.policy.program.victims.is_empty() && j.is_pending() {
                // The search tries evictions on the model and undoes them: run it on a copy.
                let search = s.clone().victim_search_explained(job);
                victim_search_text(s, &search, &mut out);
            }
        }
        Decision::Reject(r) => {
            let _ = writeln!(out, "  → rejected by {}", program.rule_name(r));
        }
    }
    if let Some(nodes) = s.reservations.get(&job) {
        let names: Vec<&str> = nodes.iter().map(|&n| s.cluster.nodes[n].name.as_str()).collect();
        let _ = writeln!(out, "  holds {} in reserve until it starts", names.join(", "));
    }
    out
}

/// How many of a gang's placements explain shows.
const GANG_PLACEMENTS_SHOWN: usize = 5;

/// A gang's placements as the quota admits it now, best first, with their values.
fn gang_text(s: &Scheduler, job: JobId, out: &mut String) {
    let Ok(count) = s.quota_count(job) else { return };
    let view = s.placement_view(job);
    let (ctx, rec) = (s.ctx(&view), s.job_rec(job));
    match s.gang_placements(job, None, &ctx, &rec, count, s.score_tiers()) {
        Ok(placements) => {
            let _ = writeln!(out, "  gang placements ({} found, best first):", placements.len());
            for p in placements.iter().take(GANG_PLACEMENTS_SHOWN) {
                let nodes: Vec<&str> = p.replicas.iter().map(|&n| s.cluster.nodes[n].name.as_str()).collect();
                let tiers = if s.score_tiers() > 0 { format!(", tiers {:?}", p.tiers) } else { String::new() };
                let _ = writeln!(
                    out,
                    "    {} replica{} on {}: value {:.3}{tiers}",
                    p.replicas.len(),
                    if p.replicas.len() == 1 { "" } else { "s" },
                    nodes.join(", "),
                    p.value
                );
            }
        }
        Err(reason) => {
            let _ = writeln!(out, "  gang placements: none ({})", reason.name(&s.policy.program));
        }
    }
}

/// Where the job's queue stands in the order of queues, level by level from the root:
/// each level's queues best first, with their keys, the job's marked.
fn queue_order_text(s: &Scheduler, job: JobId, out: &mut String) {
    let quotas = &s.quotas;
    if quotas.queues.len() < 2 {
        return;
    }
    let program = &s.policy.program;
    let view = s.view(None);
    let path: Vec<usize> = quotas.path(s.jobs[job].queue).collect();
    let what = if program.queue_order.is_empty() {
        "weighted dominant share, least first".to_string()
    } else {
        let keys: Vec<String> = (0..program.queue_order.len())
            .map(|k| program.rule_name(RuleId::QueueOrder(u16::try_from(k).unwrap_or(u16::MAX))))
            .collect();
        keys.join(", then ")
    };
    let heads = if program.queue_order.iter().any(|k| {
        ["head_waiting", "head_gpus", "head_priority", "head_fits_guarantee"]
            .iter()
            .any(|f| k.body.node.reads(gpol_compiler::schema::Record::Queue, f))
    }) {
        " (`head_*` fields as a cycle fills them, not shown here)"
    } else {
        ""
    };
    let _ = writeln!(out, "  queue order ({what}){heads}:");
    for &q in path.iter().rev() {
        let siblings: Vec<usize> = match quotas.queues[q].parent {
            Some(p) => quotas.queues[p].children.clone(),
            None => (0..quotas.queues.len()).filter(|&r| quotas.queues[r].parent.is_none()).collect(),
        };
        if siblings.len() < 2 {
            continue;
        }
        let mut ranked: Vec<(usize, Vec<f64>)> = siblings.iter().map(|&c| (c, s.queue_order_keys(&view, c))).collect();
        ranked.sort_by(|a, b| s.queue_order_cmp((a.0, &a.1), (b.0, &b.1)));
        let shown: Vec<String> = ranked
            .iter()
            .map(|(c, keys)| {
                let values: Vec<String> = keys.iter().map(|k| format!("{k:.4}")).collect();
                let waiting = if quotas.queues[*c].pending == 0 { ", nothing waiting" } else { "" };
                let mark = if *c == q { " ← its queue" } else { "" };
                format!("{} [{}{waiting}]{mark}", quotas.queues[*c].name, values.join(", "))
            })
            .collect();
        let level = match quotas.queues[q].parent {
            Some(p) => format!("in {}", quotas.queues[p].name),
            None => "at the top".to_string(),
        };
        let _ = writeln!(out, "    {level}: {}", shown.join(" · "));
    }
}

/// One line for an event of the log (`None` for submissions, which say nothing new).
pub fn describe_event(s: &Scheduler, event: &Event) -> Option<String> {
    let program = &s.policy.program;
    let name = |j: &JobId| s.jobs[*j].name.as_str();
    let nodes = |ns: &[NodeId]| ns.iter().map(|n| s.cluster.nodes[*n].name.as_str()).collect::<Vec<_>>().join(", ");
    Some(match event {
        Event::Submitted { .. } => return None,
        Event::Placed { job, nodes: ns, .. } => format!("placed {} on {}", name(job), nodes(ns)),
        Event::Grown { job, node, .. } => format!("grew {} by a replica on {}", name(job), s.cluster.nodes[*node].name),
        Event::Rejected { job, rule, .. } => format!("rejected {} by {}", name(job), program.rule_name(*rule)),
        Event::Finished { job, .. } => format!("finished {}", name(job)),
        Event::Requeued { job, node, .. } => {
            format!("requeued {} (lost node {})", name(job), s.cluster.nodes[*node].name)
        }
        Event::Evicted { job, by, rule, lost_gpu_s, .. } => format!(
            "evicted {} for {} under {}, losing {lost_gpu_s} GPU-seconds",
            name(job),
            name(by),
            program.rule_name(*rule)
        ),
        Event::Reserved { job, nodes: ns, .. } => format!("reserved {} for {}", nodes(ns), name(job)),
        Event::Shrunk { job, by, rule, node, lost_gpu_s, .. } => format!(
            "took {}'s replica on {} for {} under {}, losing {lost_gpu_s} GPU-seconds",
            name(job),
            s.cluster.nodes[*node].name,
            name(by),
            program.rule_name(*rule)
        ),
    })
}

/// The account of a victim search: the verdict on every running job, and the outcome.
fn victim_search_text(s: &Scheduler, search: &crate::preempt::VictimSearch, out: &mut String) {
    let program = &s.policy.program;
    let queue = |q: usize| &s.quotas.queues[q].name;
    let _ = writeln!(out, "  victim search:");
    for (job, verdict) in &search.considered {
        let why = match verdict {
            Verdict::WithinGuarantee { queue: q } => {
                format!("not a candidate: queue `{}` borrows none of what it needs and this job holds", queue(*q))
            }
            Verdict::JustStarted => "not a candidate: it started in this cycle".to_string(),
            Verdict::Protected { rule } => {
                let reason = match rule {
                    RuleId::Victim(i) => program.victims.get(usize::from(*i)).and_then(|r| r.reason.as_deref()),
                    _ => None,
                };
                match reason {
                    Some(r) => format!("protected by `{}`: {r}", program.rule_name(*rule)),
                    None => format!("protected by `{}`", program.rule_name(*rule)),
                }
            }
            Verdict::NoRule { place: Place::Own | Place::Anywhere } => "no preempt rule allows evicting it".to_string(),
            Verdict::NoRule { place: Place::Other } => "no reclaim or borrow rule allows evicting it".to_string(),
            Verdict::Candidate { place, rules, cost } => {
                let names: Vec<String> = rules.iter().map(|r| format!("`{}`", program.rule_label(*r))).collect();
                let place = match place {
                    Place::Own => "in its own queue",
                    Place::Anywhere => "anywhere (the tree governs nothing it needs)",
                    Place::Other => "in a queue that borrows",
                };
                format!("candidate {place}, allowed by {}, cost {cost}", names.join(" and "))
            }
        };
        let _ = writeln!(out, "    {}: {why}", s.jobs[*job].name);
    }
    let candidates = search.considered.iter().filter(|(_, v)| matches!(v, Verdict::Candidate { .. })).count();
    match &search.eviction {
        Some(e) => {
            let names: Vec<String> = e
                .victims
                .iter()
                .map(|v| {
                    let what = match v.replica.and_then(|k| s.jobs[v.job].slots.get(k)) {
                        Some(slot) => {
                            format!("{}'s replica on {}", s.jobs[v.job].name, s.cluster.nodes[slot.node].name)
                        }
                        None => s.jobs[v.job].name.clone(),
                    };
                    format!("{what} under `{}` (cost {})", program.rule_label(v.rule), v.cost)
                })
                .collect();
            let nodes: Vec<&str> = e.replicas.iter().map(|&n| s.cluster.nodes[n].name.as_str()).collect();
            let _ = writeln!(
                out,
                "    chosen: evict {}; total cost {}; then start on {}",
                names.join(", "),
                e.cost,
                nodes.join(", ")
            );
        }
        None if candidates == 0 => {
            let _ = writeln!(out, "    no job may be evicted for it");
        }
        None => {
            let _ = writeln!(out, "    no set of these victims lets it start: nothing is evicted");
        }
    }
}
