//! `explain` (decision D10): why a job goes where it goes, or waits. Re-runs the rules
//! with the interpreter in declaration order: each admit rule, the quota arithmetic, the
//! first filter that rejects each node, every score of the nodes that pass, and the
//! choice. This is where decisions — reasons, quota blocks, victim verdicts, events,
//! which carry rule identities and numbers — become words.

use crate::jobs::JobId;
use crate::model::NodeId;
use crate::scheduler::account::{self, Account, GangSeen, NodeSaw, Outcome, QueueOrder, SearchSeen, VictimSaw};
use crate::scheduler::preempt::Place;
use crate::scheduler::{Event, Scheduler};
use std::fmt::Write;

pub use crate::scheduler::words::{closed_text, eviction_text, reason_detail, refusal_text, state_text, verdict_text};

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
