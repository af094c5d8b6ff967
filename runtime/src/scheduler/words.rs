//! A scheduler's decisions in words, with names looked up: a job's request, a quota
//! block, why a job waits, a closed gate, a node's verdict, an eviction, a refusal, a
//! job's state. Accounts record these at decision time, so the scheduler's words live
//! beside it; [`crate::explain`] offers them and renders whole accounts.

use crate::jobs::{JobId, Reason, State, Unschedulable};
use crate::quota::Block;
use crate::scheduler::Scheduler;
use crate::scheduler::verdict::{Closed, NodeVerdict};
use gpol_compiler::ir::RuleId;
use gpol_compiler::spec::Request;

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
