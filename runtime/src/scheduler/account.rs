//! What a decision saw (decision D10), as data: for one job at one moment, where its
//! queue stood in the order of queues, each admit rule, the quota arithmetic along its
//! queue's path, every node's verdict with its scores, the gang placements, the outcome
//! and the victim search. A cycle records one for each turn as it decides it
//! ([`Scheduler::cycle_recorded`]); [`account`] observes one now, for the next decision.
//! Names are resolved when recorded, so an account outlives the scheduler (a decision
//! log); [`crate::explain::render`] puts it in words.

use crate::fit;
use crate::jobs;
use crate::jobs::{JobId, Reason, State};
use crate::model::NodeId;
use crate::scheduler::Scheduler;
use crate::scheduler::place::Decision;
use crate::scheduler::preempt::{Place, Verdict, VictimSearch};
use crate::scheduler::words;
use gpol_compiler::engine::clamp_score;
use gpol_compiler::interp::{self, Roots};
use gpol_compiler::ir::RuleId;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};

/// One job's decision, as it was seen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub job: String,
    pub queue: String,
    /// Its state when seen: `pending (capacity)`.
    pub state: String,
    /// What it asks for: `8 whole cards, 0 cpu, 0 GiB`.
    pub request: String,
    pub order: Option<QueueOrder>,
    pub admits: Vec<AdmitSeen>,
    pub quota: Vec<QuotaRow>,
    /// What the quota says, if it holds the job back.
    pub quota_block: Option<String>,
    pub nodes: Vec<NodeSeen>,
    pub gang: Option<GangSeen>,
    pub outcome: Outcome,
    /// The victim search made for it, if it waited and the policy evicts.
    pub victims: Option<SearchSeen>,
    /// The nodes it holds in reserve (after the decision).
    pub holds: Vec<String>,
}

/// Where the job's queue stands among its siblings, level by level from its leaf up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueOrder {
    /// What orders queues: the policy's `queue_order` keys, or the built-in.
    pub by: String,
    /// Whether the keys read the queues' next jobs, which a cycle fills in.
    pub reads_heads: bool,
    pub levels: Vec<OrderLevel>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OrderLevel {
    /// `in training`, or `at the top`.
    pub parent: Option<String>,
    /// The siblings, best first.
    pub queues: Vec<QueueRank>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueRank {
    pub name: String,
    #[serde(with = "num::list")]
    pub keys: Vec<f64>,
    pub waiting: bool,
    /// The job's own queue (or the one above it at this level).
    pub its: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdmitSeen {
    pub rule: String,
    pub passed: bool,
    /// A failing static rule turns the job away for good; others hold it back.
    pub for_good: bool,
    pub reason: Option<String>,
}

/// One queue's arithmetic for one resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaRow {
    pub queue: String,
    pub resource: String,
    pub allocated: String,
    pub guarantee: Option<String>,
    pub limit: Option<String>,
    pub borrow_limit: Option<String>,
    pub lend_limit: Option<String>,
    pub borrowed: String,
    /// In the job's own leaf: what is available to it, and what it needs.
    pub available_needs: Option<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSeen {
    pub name: String,
    pub verdict: NodeSaw,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NodeSaw {
    OutOfService,
    Filtered {
        rule: String,
        reason: Option<String>,
    },
    HeldFor {
        job: String,
    },
    Passes {
        #[serde(with = "num::one")]
        total: f64,
        #[serde(with = "num::tiers")]
        tiers: Option<[f64; 4]>,
        scores: Vec<ScoreSeen>,
        fits: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreSeen {
    pub rule: String,
    /// The value used (clamped), and the raw value when that was a fault.
    #[serde(with = "num::one")]
    pub value: f64,
    #[serde(with = "num::maybe")]
    pub fault: Option<f64>,
    /// Its tier, or its weight in the sum.
    pub tier: Option<u8>,
    #[serde(with = "num::one")]
    pub weight: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GangSeen {
    Placements { found: usize, best: Vec<GangPlacement> },
    None { reason: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangPlacement {
    pub nodes: Vec<String>,
    #[serde(with = "num::one")]
    pub value: f64,
    #[serde(with = "num::tiers")]
    pub tiers: Option<[f64; 4]>,
}

/// How the decision came out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// Seen before it was made: where the job would go.
    WouldPlace {
        nodes: Vec<String>,
    },
    /// It started there (after evictions, if the victim search chose some).
    Placed {
        nodes: Vec<String>,
    },
    Waits {
        reason: String,
        detail: Option<String>,
    },
    Rejected {
        rule: String,
    },
}

/// A victim search: the verdict on every running job, and the set chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchSeen {
    pub considered: Vec<(String, VictimSaw)>,
    pub chosen: Option<Chosen>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VictimSaw {
    WithinGuarantee {
        queue: String,
    },
    JustStarted,
    Protected {
        rule: String,
        reason: Option<String>,
    },
    NoRule {
        cross_queue: bool,
    },
    Candidate {
        place: Place,
        rules: Vec<String>,
        #[serde(with = "num::one")]
        cost: f64,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chosen {
    /// Each victim (`j`, or `j's replica on n1`), its rule and cost.
    #[serde(with = "num::victims")]
    pub victims: Vec<(String, String, f64)>,
    #[serde(with = "num::one")]
    pub cost: f64,
    pub nodes: Vec<String>,
}

/// What `job`'s next decision sees now, and where it would go (its victim search tried
/// on a copy of the scheduler).
pub fn account(s: &Scheduler, job: JobId) -> Account {
    let a = seen(s, job);
    let decision = s.decide(job);
    let search = searches(s, job, &decision).then(|| s.clone().victim_search_explained(job));
    next(s, job, a, decision, search)
}

/// [`account`] of a job asked about ([`crate::Asked::account`]), its node verdicts kept
/// for the nodes in `among`; with `search`, the victim search runs on the scheduler
/// itself (it undoes what it tries).
pub(crate) fn asked(s: &mut Scheduler, job: JobId, among: &[NodeId], search: bool) -> Account {
    let mut a = seen(s, job);
    let nodes = &s.world.cluster().nodes;
    let keep: FxHashSet<&str> = among.iter().filter_map(|&n| nodes.get(n)).map(|n| n.name.as_str()).collect();
    a.nodes.retain(|n| keep.contains(n.name.as_str()));
    let decision = s.decide(job);
    let search = (search && searches(s, job, &decision)).then(|| s.victim_search_explained(job));
    next(s, job, a, decision, search)
}

/// Whether the next decision would search for victims: it waits, and the policy evicts.
fn searches(s: &Scheduler, job: JobId, decision: &Decision) -> bool {
    matches!(decision, Decision::Wait(_))
        && !s.facts.policy.program.victims.is_empty()
        && s.world.jobs()[job].is_pending()
}

/// The account `a` with the next decision's outcome and victim search.
fn next(s: &Scheduler, job: JobId, mut a: Account, decision: Decision, search: Option<VictimSearch>) -> Account {
    a.victims = search.map(|search| search_seen(s, &search));
    a.outcome = match decision {
        Decision::Place { replicas } => Outcome::WouldPlace { nodes: node_names(s, &replicas) },
        Decision::Wait(r) => waits(s, job, &r),
        Decision::Reject(r) => Outcome::Rejected { rule: s.facts.policy.program.rule_name(r) },
    };
    a.holds = holds(s, job);
    a
}

/// What the job's turn sees as it begins, its outcome not yet known.
pub(crate) fn seen(s: &Scheduler, job: JobId) -> Account {
    let j = &s.world.jobs()[job];
    let program = &s.facts.policy.program;
    let state = match &s.state(job) {
        State::Pending(Some(r)) => format!("pending ({})", r.name(program)),
        State::Pending(None) => "pending".into(),
        State::Running => "running".into(),
        State::Finished => "finished".into(),
        State::Rejected(r) => format!("rejected by {}", program.rule_name(*r)),
        State::Withdrawn => "withdrawn".to_string(),
    };
    let view = s.view(Some(job));
    let ctx = s.ctx(&view);
    let rec = s.job_rec(job);
    let roots = Roots { job: Some(&rec), ..Roots::default() };
    let admits = program
        .admit
        .iter()
        .map(|r| AdmitSeen {
            rule: r.name.clone(),
            passed: interp::eval(&r.body, &ctx, &roots).b(),
            for_good: r.is_static,
            reason: r.reason.clone(),
        })
        .collect();
    let demand = jobs::demand(j, None);
    let quota_block =
        s.world.quotas().admissible(j.ask.queue, j.ask.user, &demand).err().map(|b| words::block_text(s, b));
    let nodes = s
        .node_records()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let node = &s.world.cluster().nodes[i];
            let roots = Roots { job: Some(&rec), node: Some(n), ..Roots::default() };
            let verdict = if !node.up {
                NodeSaw::OutOfService
            } else if let Some(f) = program.filters.iter().find(|f| !interp::eval(&f.body, &ctx, &roots).b()) {
                NodeSaw::Filtered { rule: f.name.clone(), reason: f.reason.clone() }
            } else if let Some(owner) = s.world.reserved_for(i)
                && owner != job
            {
                NodeSaw::HeldFor { job: s.world.jobs()[owner].ask.name.clone() }
            } else {
                let (mut total, mut tiers) = (0.0, [0.0f64; 4]);
                let scores = program
                    .scores
                    .iter()
                    .map(|sc| {
                        let raw = interp::eval(&sc.body, &ctx, &roots).f();
                        let (value, fault) = clamp_score(raw);
                        match sc.tier {
                            Some(t) => tiers[usize::from(t).saturating_sub(1).min(3)] += value,
                            None => total += sc.weight * value,
                        }
                        let fault = (fault > 0).then_some(raw);
                        ScoreSeen { rule: sc.name.clone(), value, fault, tier: sc.tier, weight: sc.weight }
                    })
                    .collect();
                let tiers = program.scores.iter().any(|s| s.tier.is_some()).then_some(tiers);
                NodeSaw::Passes { total, tiers, scores, fits: fit::fits(node, j) }
            };
            NodeSeen { name: node.name.clone(), verdict }
        })
        .collect();
    Account {
        job: j.ask.name.clone(),
        queue: s.world.quotas().queues[j.ask.queue].place.name.clone(),
        state,
        request: words::request_text(s, job),
        order: queue_order(s, job),
        admits,
        quota: quota_rows(s, job),
        quota_block,
        nodes,
        gang: (j.ask.replicas > 1 && j.is_pending()).then(|| gang(s, job)).flatten(),
        outcome: Outcome::Waits { reason: String::new(), detail: None },
        victims: None,
        holds: Vec::new(),
    }
}

/// How a turn ended.
pub(crate) enum Turned<'a> {
    Placed,
    Waits(&'a Reason),
    Rejected(RuleId),
}

/// How a turn that began as `a` ended, with the victim search it made, if any.
pub(crate) fn decided(
    s: &Scheduler,
    job: JobId,
    mut a: Account,
    turned: Turned,
    search: Option<SearchSeen>,
) -> Account {
    a.victims = search;
    a.outcome = match turned {
        Turned::Placed => {
            let nodes: Vec<usize> = s.world.jobs()[job].holding.slots.iter().map(|slot| slot.node).collect();
            Outcome::Placed { nodes: node_names(s, &nodes) }
        }
        Turned::Waits(r) => waits(s, job, r),
        Turned::Rejected(r) => Outcome::Rejected { rule: s.facts.policy.program.rule_name(r) },
    };
    a.holds = holds(s, job);
    a
}

fn waits(s: &Scheduler, job: JobId, r: &Reason) -> Outcome {
    Outcome::Waits { reason: r.name(&s.facts.policy.program), detail: words::reason_detail(s, job, r) }
}

fn holds(s: &Scheduler, job: JobId) -> Vec<String> {
    s.world.reservations().get(&job).map(|nodes| node_names(s, nodes)).unwrap_or_default()
}

fn node_names(s: &Scheduler, nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|&n| s.world.cluster().nodes[n].name.clone()).collect()
}

/// The quota arithmetic along the job's queue's path, for the resources it asks for that
/// some quota governs.
fn quota_rows(s: &Scheduler, job: JobId) -> Vec<QuotaRow> {
    let j = &s.world.jobs()[job];
    let mut rows = Vec::new();
    for (&r, &need) in jobs::demand(j, None).iter().filter(|(_, a)| **a > 0) {
        let limited = s.world.quotas().available(j.ask.queue, r) != i64::MAX
            || std::iter::successors(Some(j.ask.queue), |&q| s.world.quotas().queues[q].place.parent)
                .any(|q| s.world.quotas().queues[q].quota.limit.contains_key(&r));
        if !limited {
            continue;
        }
        let mut p = Some(j.ask.queue);
        while let Some(qi) = p {
            let node = &s.world.quotas().queues[qi];
            let g = node.quota.guarantee.get(&r).copied();
            let alloc = node.get(&node.load.alloc, r);
            rows.push(QuotaRow {
                queue: node.place.name.clone(),
                resource: r.name(s.world.syms()).to_string(),
                allocated: r.show(alloc),
                guarantee: g.map(|v| r.show(v)),
                limit: node.quota.limit.get(&r).map(|&v| r.show(v)),
                borrow_limit: node.quota.borrow_limit.get(&r).map(|&v| r.show(v)),
                lend_limit: node.quota.lend_limit.get(&r).map(|&v| r.show(v)),
                borrowed: r.show((alloc - g.unwrap_or(0)).max(0)),
                available_needs: (qi == j.ask.queue).then(|| (r.show(s.world.quotas().available(qi, r)), r.show(need))),
            });
            p = node.place.parent;
        }
    }
    rows
}

/// How many of a gang's placements an account keeps.
const GANG_PLACEMENTS_KEPT: usize = 5;

/// A gang's placements as the quota admits it now, best first, with their values.
fn gang(s: &Scheduler, job: JobId) -> Option<GangSeen> {
    let count = s.quota_count(job).ok()?;
    let view = s.placement_view(job);
    let (ctx, rec) = (s.ctx(&view), s.job_rec(job));
    let tiered = s.score_tiers() > 0;
    Some(match s.gang_placements(job, None, &ctx, &rec, count, s.score_tiers()) {
        Ok(placements) => GangSeen::Placements {
            found: placements.len(),
            best: placements
                .iter()
                .take(GANG_PLACEMENTS_KEPT)
                .map(|p| GangPlacement {
                    nodes: node_names(s, &p.replicas),
                    value: p.value,
                    tiers: tiered.then_some(p.tiers),
                })
                .collect(),
        },
        Err(reason) => GangSeen::None { reason: reason.name(&s.facts.policy.program) },
    })
}

/// Where the job's queue stands in the order of queues, level by level from the root.
fn queue_order(s: &Scheduler, job: JobId) -> Option<QueueOrder> {
    let quotas = &s.world.quotas();
    if quotas.queues.len() < 2 {
        return None;
    }
    let program = &s.facts.policy.program;
    let view = s.view(None);
    let by = if program.queue_order.is_empty() {
        "weighted dominant share, least first".to_string()
    } else {
        let keys: Vec<String> = (0..program.queue_order.len())
            .map(|k| program.rule_name(RuleId::QueueOrder(u16::try_from(k).unwrap_or(u16::MAX))))
            .collect();
        keys.join(", then ")
    };
    let reads_heads = s.facts.queue_order_reads_head;
    let path: Vec<usize> = quotas.path(s.world.jobs()[job].ask.queue).collect();
    let mut levels = Vec::new();
    for &q in path.iter().rev() {
        let siblings: Vec<usize> = match quotas.queues[q].place.parent {
            Some(p) => quotas.queues[p].place.children.clone(),
            None => (0..quotas.queues.len()).filter(|&r| quotas.queues[r].place.parent.is_none()).collect(),
        };
        if siblings.len() < 2 {
            continue;
        }
        let mut ranked: Vec<(usize, Vec<f64>)> = siblings.iter().map(|&c| (c, s.queue_order_keys(&view, c))).collect();
        ranked.sort_by(|a, b| s.queue_order_cmp((a.0, &a.1), (b.0, &b.1)));
        let queues = ranked
            .into_iter()
            .map(|(c, keys)| QueueRank {
                name: quotas.queues[c].place.name.clone(),
                keys,
                waiting: quotas.queues[c].load.pending > 0,
                its: c == q,
            })
            .collect();
        levels.push(OrderLevel {
            parent: quotas.queues[q].place.parent.map(|p| quotas.queues[p].place.name.clone()),
            queues,
        });
    }
    Some(QueueOrder { by, reads_heads, levels })
}

/// A victim search with names (before its evictions are carried out: a replica is named
/// by its node).
pub(crate) fn search_seen(s: &Scheduler, search: &VictimSearch) -> SearchSeen {
    let program = &s.facts.policy.program;
    let considered = search
        .considered
        .iter()
        .map(|(job, verdict)| {
            let saw = match verdict {
                Verdict::WithinGuarantee { queue } => {
                    VictimSaw::WithinGuarantee { queue: s.world.quotas().queues[*queue].place.name.clone() }
                }
                Verdict::JustStarted => VictimSaw::JustStarted,
                Verdict::Protected { rule } => {
                    let reason = match rule {
                        RuleId::Victim(i) => program.victims.get(usize::from(*i)).and_then(|r| r.reason.clone()),
                        _ => None,
                    };
                    VictimSaw::Protected { rule: program.rule_name(*rule), reason }
                }
                Verdict::NoRule { place } => VictimSaw::NoRule { cross_queue: *place == Place::Other },
                Verdict::Candidate { place, rules, cost } => VictimSaw::Candidate {
                    place: *place,
                    rules: rules.iter().map(|r| program.rule_label(*r)).collect(),
                    cost: *cost,
                },
            };
            (s.world.jobs()[*job].ask.name.clone(), saw)
        })
        .collect();
    let chosen = search.eviction.as_ref().map(|e| Chosen {
        victims: e
            .victims
            .iter()
            .map(|v| {
                let what = match v.replica.and_then(|k| s.world.jobs()[v.job].holding.slots.get(k)) {
                    Some(slot) => {
                        format!(
                            "{}'s replica on {}",
                            s.world.jobs()[v.job].ask.name,
                            s.world.cluster().nodes[slot.node].name
                        )
                    }
                    None => s.world.jobs()[v.job].ask.name.clone(),
                };
                (what, program.rule_label(v.rule), v.cost)
            })
            .collect(),
        cost: e.cost,
        nodes: node_names(s, &e.replicas),
    });
    SearchSeen { considered, chosen }
}

/// Numbers in JSON: a rule may compute an infinity or NaN (a score's fault, a queue key,
/// a cost), which JSON has no literal for; those are written as the strings `inf`, `-inf`
/// and `NaN`, so that an account read back is the account written.
mod num {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Num {
        Finite(f64),
        Named(String),
    }

    fn to(x: f64) -> Num {
        match x {
            x if x.is_finite() => Num::Finite(x),
            x if x.is_nan() => Num::Named("NaN".into()),
            x if x > 0.0 => Num::Named("inf".into()),
            _ => Num::Named("-inf".into()),
        }
    }

    fn from<E: Error>(n: Num) -> Result<f64, E> {
        match n {
            Num::Finite(x) => Ok(x),
            Num::Named(s) => match s.as_str() {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "NaN" => Ok(f64::NAN),
                other => Err(E::custom(format!("expected a number, `inf`, `-inf` or `NaN`, found `{other}`"))),
            },
        }
    }

    pub(super) mod one {
        use super::*;
        pub(crate) fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
            to(*x).serialize(s)
        }
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
            from(Num::deserialize(d)?)
        }
    }

    pub(super) mod maybe {
        use super::*;
        pub(crate) fn serialize<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
            x.map(to).serialize(s)
        }
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
            Option::<Num>::deserialize(d)?.map(from).transpose()
        }
    }

    pub(super) mod list {
        use super::*;
        pub(crate) fn serialize<S: Serializer>(x: &[f64], s: S) -> Result<S::Ok, S::Error> {
            x.iter().map(|&v| to(v)).collect::<Vec<_>>().serialize(s)
        }
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
            Vec::<Num>::deserialize(d)?.into_iter().map(from).collect()
        }
    }

    pub(super) mod tiers {
        use super::*;
        pub(crate) fn serialize<S: Serializer>(x: &Option<[f64; 4]>, s: S) -> Result<S::Ok, S::Error> {
            x.map(|t| t.map(to)).serialize(s)
        }
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[f64; 4]>, D::Error> {
            let Some(t) = Option::<[Num; 4]>::deserialize(d)? else { return Ok(None) };
            let [a, b, c, e] = t;
            Ok(Some([from(a)?, from(b)?, from(c)?, from(e)?]))
        }
    }

    pub(super) mod victims {
        use super::*;
        pub(crate) fn serialize<S: Serializer>(x: &[(String, String, f64)], s: S) -> Result<S::Ok, S::Error> {
            x.iter().map(|(w, r, c)| (w, r, to(*c))).collect::<Vec<_>>().serialize(s)
        }
        pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String, f64)>, D::Error> {
            Vec::<(String, String, Num)>::deserialize(d)?.into_iter().map(|(w, r, c)| Ok((w, r, from(c)?))).collect()
        }
    }
}
