//! `explain` (decision D10): why a job goes where it goes, or waits. Re-runs the rules
//! with the interpreter in declaration order: each admit rule, the quota arithmetic, the
//! first filter that rejects each node, every score of the nodes that pass, and the
//! choice. This is where decisions — reasons, quota blocks, victim verdicts, events,
//! which carry rule identities and numbers — become words.

use crate::account::{self, Account, GangSeen, NodeSaw, Outcome, QueueOrder, SearchSeen, VictimSaw};
use crate::jobs::{JobId, Reason, State, Unschedulable};
use crate::model::NodeId;
use crate::preempt::Place;
use crate::quota::Block;
use crate::scheduler::{Event, Scheduler};
use crate::verdict::{Closed, NodeVerdict};
use gpol_compiler::ir::RuleId;
use gpol_compiler::spec::Request;
use std::fmt::Write;

pub(crate) fn request_text(s: &Scheduler, job: JobId) -> String {
    let j = &s.world.jobs()[job];
    let r = match j.ask.request {
        Request::Whole(k) => format!("{k} whole card{}", if k == 1 { "" } else { "s" }),
        Request::Fraction(m) => format!("{:.3} of a card", f64::from(m) / 1000.0),
        Request::Mig(p) => format!(
            "a {} MIG instance",
            gpol_compiler::schema::MIG_PROFILES.get(usize::from(p)).copied().unwrap_or("?")
        ),
        Request::None => "no GPU".into(),
    };
    let replicas = if j.ask.replicas > 1 { format!(" × {} replicas", j.ask.replicas) } else { String::new() };
    format!("{r}{replicas}, {} cpu, {} GiB", j.ask.cpu_milli as f64 / 1000.0, j.ask.mem / (1 << 30))
}

/// A quota block in words, with its numbers.
pub(crate) fn block_text(s: &Scheduler, block: Block) -> String {
    let queue = |q: usize| &s.world.quotas().queues[q].place.name;
    match block {
        Block::Limit { queue: q, res, limit, allocated, needs } => format!(
            "queue `{}` would exceed its {} limit (holds {}, needs {}, limit {})",
            queue(q),
            res.name(s.world.syms()),
            res.show(allocated),
            res.show(needs),
            res.show(limit)
        ),
        Block::UserLimit { queue: q, res, limit, used, needs } => format!(
            "the user would exceed queue `{}`'s {} user limit (holds {}, needs {}, limit {})",
            queue(q),
            res.name(s.world.syms()),
            res.show(used),
            res.show(needs),
            res.show(limit)
        ),
        Block::Cohort { queue: q, res, available, needs } => format!(
            "queue `{}` has {} {} available in its cohort, needs {}",
            queue(q),
            res.show(available.max(0)),
            res.name(s.world.syms()),
            res.show(needs)
        ),
    }
}

/// Why a job can never run, in words.
pub(crate) fn unschedulable_text(s: &Scheduler, job: JobId, why: Unschedulable) -> String {
    match why {
        Unschedulable::NoNode => {
            format!("no node could hold one replica ({}) even if it were empty", request_text(s, job))
        }
        Unschedulable::TooFewNodes { room } => {
            format!("the nodes could hold {room} of its replicas ({}) even if they were empty", request_text(s, job))
        }
        Unschedulable::OverLimit { queue, .. } => {
            format!("it needs more than queue `{}`'s limit", s.world.quotas().queues[queue].place.name)
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

/// A rule by name, with its reason string when it has one: `gpu_only (GPU jobs only)`.
pub(crate) fn rule_text(program: &gpol_compiler::ir::Program, rule: RuleId) -> String {
    let r = match rule {
        RuleId::Admit(i) => program.admit.get(usize::from(i)),
        RuleId::Filter(i) => program.filters.get(usize::from(i)),
        _ => None,
    };
    match r.and_then(|r| r.reason.as_deref()) {
        Some(reason) => format!("{} ({reason})", program.rule_name(rule)),
        None => program.rule_name(rule),
    }
}

/// Why the job cannot start anywhere now ([`Scheduler::gate`]), in words.
pub fn closed_text(s: &Scheduler, job: JobId, closed: Closed) -> String {
    let program = &s.facts.policy.program;
    match closed.reason {
        Reason::Rule(rule) => rule_text(program, rule),
        reason => reason_detail(s, job, &reason).unwrap_or_else(|| reason.name(program)),
    }
}

/// Why a node does not take the job, in words; `None` when it does.
pub fn verdict_text(s: &Scheduler, verdict: &NodeVerdict) -> Option<String> {
    Some(match *verdict {
        NodeVerdict::Fits(_) => return None,
        NodeVerdict::Filtered(rule) => format!("filter {}", rule_text(&s.facts.policy.program, rule)),
        NodeVerdict::Full => "not enough free capacity".into(),
        NodeVerdict::TooSmall => "too small for the job even when empty".into(),
        NodeVerdict::Down => "cordoned or out of service".into(),
        NodeVerdict::Model => "the job may not run on this GPU model".into(),
        NodeVerdict::Reserved => "reserved for another job".into(),
        NodeVerdict::Quota(block) => block_text(s, block),
    })
}

/// Why a job was evicted: for whom (`claimant`, as the caller names it) and under which
/// rule.
pub fn eviction_text(s: &Scheduler, claimant: &str, rule: RuleId) -> String {
    format!("evicted for {claimant} under {}", s.facts.policy.program.rule_name(rule))
}

/// Why a job was turned away for good: the admit rule.
pub fn refusal_text(s: &Scheduler, rule: RuleId) -> String {
    format!("refused by admit rule {}", s.facts.policy.program.rule_name(rule))
}

/// A job's state in a few words (`pending because quota`, `running on n1, n2`).
pub fn state_text(s: &Scheduler, job: JobId) -> String {
    let j = &s.world.jobs()[job];
    let program = &s.facts.policy.program;
    match &s.state(job) {
        State::Running => {
            let nodes: Vec<&str> =
                j.holding.slots.iter().map(|sl| s.world.cluster().nodes[sl.node].name.as_str()).collect();
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
    render(&account::account(s, job))
}

/// An account of a decision in words: what it saw, and how it came out.
pub fn render(a: &Account) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "job {} in queue {} ({}): {}", a.job, a.queue, a.state, a.request);
    if let Some(order) = &a.order {
        order_text(order, &mut out);
    }
    for r in &a.admits {
        if r.passed {
            let _ = writeln!(out, "  admit {}: passes", r.rule);
        } else {
            let kind = if r.for_good { "rejects it for good" } else { "holds it back for now" };
            let why = r.reason.as_ref().map(|x| format!(" (\"{x}\")")).unwrap_or_default();
            let _ = writeln!(out, "  admit {}: fails and {kind}{why}", r.rule);
        }
    }
    for q in &a.quota {
        let limits: String = [("borrow limit", &q.borrow_limit), ("lend limit", &q.lend_limit)]
            .iter()
            .filter_map(|(what, v)| v.as_ref().map(|v| format!(", {what} {v}")))
            .collect();
        let leaf = q.available_needs.as_ref().map(|(a, n)| format!(", available {a}, needs {n}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  quota {} {}: allocated {}, guarantee {}, limit {}{limits}, borrowed {}{leaf}",
            q.queue,
            q.resource,
            q.allocated,
            q.guarantee.as_deref().unwrap_or("none"),
            q.limit.as_deref().unwrap_or("none"),
            q.borrowed,
        );
    }
    if let Some(block) = &a.quota_block {
        let _ = writeln!(out, "  quota blocks it: {block}");
    }
    for n in &a.nodes {
        let name = &n.name;
        let _ = match &n.verdict {
            NodeSaw::OutOfService => writeln!(out, "  node {name}: out of service"),
            NodeSaw::Filtered { rule, reason } => {
                let why = reason.as_ref().map(|x| format!(": \"{x}\"")).unwrap_or_default();
                writeln!(out, "  node {name}: rejected by filter {rule}{why}")
            }
            NodeSaw::HeldFor { job } => writeln!(out, "  node {name}: held in reserve for {job}"),
            NodeSaw::Passes { total, tiers, scores, fits } => {
                let scores: Vec<String> = scores
                    .iter()
                    .map(|sc| {
                        let fault = sc.fault.map(|raw| format!(" (raw {raw}, a fault)")).unwrap_or_default();
                        match sc.tier {
                            Some(t) => format!("{} {:.3} tier {t}{fault}", sc.rule, sc.value),
                            None => format!("{} {:.3} × {}{fault}", sc.rule, sc.value, sc.weight),
                        }
                    })
                    .collect();
                let tiers = tiers.map(|t| format!(", tiers {t:?}")).unwrap_or_default();
                let fit = if *fits { "" } else { "; does not fit (not enough free capacity)" };
                writeln!(out, "  node {name}: passes; score {total:.3}{tiers} [{}]{fit}", scores.join(", "))
            }
        };
    }
    match &a.gang {
        Some(GangSeen::Placements { found, best }) => {
            let _ = writeln!(out, "  gang placements ({found} found, best first):");
            for p in best {
                let tiers = p.tiers.map(|t| format!(", tiers {t:?}")).unwrap_or_default();
                let plural = if p.nodes.len() == 1 { "" } else { "s" };
                let _ = writeln!(
                    out,
                    "    {} replica{plural} on {}: value {:.3}{tiers}",
                    p.nodes.len(),
                    p.nodes.join(", "),
                    p.value
                );
            }
        }
        Some(GangSeen::None { reason }) => {
            let _ = writeln!(out, "  gang placements: none ({reason})");
        }
        None => {}
    }
    match &a.outcome {
        Outcome::WouldPlace { nodes } => {
            let _ = writeln!(out, "  → would go to {}", nodes.join(", "));
        }
        Outcome::Placed { nodes } => {
            if let Some(search) = &a.victims {
                search_text(search, &mut out);
            }
            let _ = writeln!(out, "  → started on {}", nodes.join(", "));
        }
        Outcome::Waits { reason, detail } => {
            let why = detail.as_ref().map(|d| format!("{reason} ({d})")).unwrap_or_else(|| reason.clone());
            let _ = writeln!(out, "  → waits: {why}");
            if let Some(search) = &a.victims {
                search_text(search, &mut out);
            }
        }
        Outcome::Rejected { rule } => {
            let _ = writeln!(out, "  → rejected by {rule}");
        }
    }
    if !a.holds.is_empty() {
        let _ = writeln!(out, "  holds {} in reserve until it starts", a.holds.join(", "));
    }
    out
}

/// Where the job's queue stands in the order of queues, level by level from the root:
/// each level's queues best first, with their keys, the job's marked.
fn order_text(order: &QueueOrder, out: &mut String) {
    let heads = if order.reads_heads { " (`head_*` fields as a cycle fills them, not shown here)" } else { "" };
    let _ = writeln!(out, "  queue order ({}){heads}:", order.by);
    for level in &order.levels {
        let shown: Vec<String> = level
            .queues
            .iter()
            .map(|q| {
                let values: Vec<String> = q.keys.iter().map(|k| format!("{k:.4}")).collect();
                let waiting = if q.waiting { "" } else { ", nothing waiting" };
                let mark = if q.its { " ← its queue" } else { "" };
                format!("{} [{}{waiting}]{mark}", q.name, values.join(", "))
            })
            .collect();
        let at = match &level.parent {
            Some(p) => format!("in {p}"),
            None => "at the top".to_string(),
        };
        let _ = writeln!(out, "    {at}: {}", shown.join(" · "));
    }
}

/// A victim search in words: the verdict on every running job, and the outcome.
fn search_text(search: &SearchSeen, out: &mut String) {
    let _ = writeln!(out, "  victim search:");
    for (job, saw) in &search.considered {
        let why = match saw {
            VictimSaw::WithinGuarantee { queue } => {
                format!("not a candidate: queue `{queue}` borrows none of what it needs and this job holds")
            }
            VictimSaw::JustStarted => "not a candidate: it started in this cycle".to_string(),
            VictimSaw::Protected { rule, reason: Some(r) } => format!("protected by `{rule}`: {r}"),
            VictimSaw::Protected { rule, reason: None } => format!("protected by `{rule}`"),
            VictimSaw::NoRule { cross_queue: false } => "no preempt rule allows evicting it".to_string(),
            VictimSaw::NoRule { cross_queue: true } => "no reclaim or borrow rule allows evicting it".to_string(),
            VictimSaw::Candidate { place, rules, cost } => {
                let names: Vec<String> = rules.iter().map(|r| format!("`{r}`")).collect();
                let place = match place {
                    Place::Own => "in its own queue",
                    Place::Anywhere => "anywhere (the tree governs nothing it needs)",
                    Place::Other => "in a queue that borrows",
                };
                format!("candidate {place}, allowed by {}, cost {cost}", names.join(" and "))
            }
        };
        let _ = writeln!(out, "    {job}: {why}");
    }
    let candidates = search.considered.iter().filter(|(_, v)| matches!(v, VictimSaw::Candidate { .. })).count();
    match &search.chosen {
        Some(c) => {
            let names: Vec<String> =
                c.victims.iter().map(|(what, rule, cost)| format!("{what} under `{rule}` (cost {cost})")).collect();
            let _ = writeln!(
                out,
                "    chosen: evict {}; total cost {}; then start on {}",
                names.join(", "),
                c.cost,
                c.nodes.join(", ")
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

/// One line for an event of the log (`None` for submissions, which say nothing new).
pub fn describe_event(s: &Scheduler, event: &Event) -> Option<String> {
    let program = &s.facts.policy.program;
    let name = |j: &JobId| s.world.jobs()[*j].ask.name.as_str();
    let nodes =
        |ns: &[NodeId]| ns.iter().map(|n| s.world.cluster().nodes[*n].name.as_str()).collect::<Vec<_>>().join(", ");
    Some(match event {
        Event::Submitted { .. } => return None,
        Event::Placed { job, nodes: ns, .. } => format!("placed {} on {}", name(job), nodes(ns)),
        Event::Grown { job, node, .. } => {
            format!("grew {} by a replica on {}", name(job), s.world.cluster().nodes[*node].name)
        }
        Event::Rejected { job, rule, .. } => format!("rejected {} by {}", name(job), program.rule_name(*rule)),
        Event::Finished { job, .. } => format!("finished {}", name(job)),
        Event::Requeued { job, node, .. } => {
            format!("requeued {} (lost node {})", name(job), s.world.cluster().nodes[*node].name)
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
            s.world.cluster().nodes[*node].name,
            name(by),
            program.rule_name(*rule)
        ),
    })
}
