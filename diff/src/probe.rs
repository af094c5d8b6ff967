//! One case, both versions, every decision kind: the case is played on each version's
//! JIT-compiled policy up to its last batch, then each decision is asked of both
//! schedulers in the same state — admission and its refusing rules, quota, every
//! (job, node) filter verdict, every pair of nodes both allow (orders, not scores), job
//! and queue order by pairs, the victim search's verdict on every running job and the
//! set it evicts — and finally the cycle runs on both and the outcomes are compared.
//! A preference that becomes a tie (or a tie a preference) is a change: the tie is then
//! broken by node or submission order, which the preference did not depend on.

use crate::outcome::Outcome;
use crate::renames::Renames;
use crate::report::{Decision, Direction};
use crate::side::Side;
use crate::world::{Invalid, World};
use gpol_compiler::engine::{MAX_TIERS, NodeResult};
use gpol_compiler::interp::{self, Roots};
use gpol_compiler::ir::RuleId;
use gpol_runtime::Decision as Placement;
use gpol_runtime::Scheduler;
use gpol_runtime::preempt::Verdict;
use gpol_runtime::{JobId, Reason, State};
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// A decision the versions took differently on a case.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub decision: Decision,
    pub direction: Direction,
    /// The jobs and nodes it concerns, by name.
    pub jobs: Vec<String>,
    pub nodes: Vec<String>,
    /// The rules of each version that decided it.
    pub old_rules: Vec<RuleId>,
    pub new_rules: Vec<RuleId>,
}

/// Decisions compared per kind (indexed as `Decision::ALL`), and (job, node) pairs.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub samples: [u64; 10],
    pub pairs: u64,
}

fn at(d: Decision) -> usize {
    Decision::ALL.iter().position(|x| *x == d).unwrap_or(0)
}

impl Tally {
    pub fn sample(&mut self, d: Decision, n: u64) {
        self.samples[at(d)] += n;
    }

    pub fn samples_of(&self, d: Decision) -> u64 {
        self.samples[at(d)]
    }

    pub fn add(&mut self, other: &Tally) {
        for i in 0..10 {
            self.samples[i] += other.samples[i];
        }
        self.pairs += other.pairs;
    }
}

/// What a probe compares with: the two versions, how names match, and which kinds need
/// no comparing (proved).
pub struct Probe<'a> {
    pub old: &'a Side,
    pub new: &'a Side,
    pub levels: &'a [String],
    pub renames: &'a Renames,
    pub proved: &'a BTreeSet<Decision>,
    /// Rules of each version that have no equal in the other, per kind: what a change
    /// of order or choice is put down to.
    pub changed: &'a (dyn Fn(Decision) -> (Vec<RuleId>, Vec<RuleId>) + Sync),
}

impl Probe<'_> {
    /// Fresh schedulers of both versions, to play cases on (one pair per thread).
    pub fn fresh(&self) -> (Scheduler, Scheduler) {
        (Scheduler::new(self.old.jit.clone()), Scheduler::new(self.new.jit.clone()))
    }

    /// Both versions' findings on one case; `fresh` from
    /// [`Probe::fresh`].
    pub fn run(&self, w: &World, fresh: &(Scheduler, Scheduler), tally: &mut Tally) -> Result<Vec<Finding>, Invalid> {
        let mut a = w.play(&fresh.0, self.levels)?;
        let mut b = w.play(&fresh.1, self.levels)?;
        let mut found = Vec::new();
        let (before_a, before_b) = (Outcome::read(&a).renamed(self.renames), Outcome::read(&b));
        if before_a.jobs == before_b.jobs {
            self.decisions(&mut a.scheduler, &mut b.scheduler, tally, &mut found, true);
        }
        let (old, new) = (Outcome::after_cycle(a), Outcome::after_cycle(b));
        let (mut renamed, mut new_seen) = (old.renamed(self.renames), new.clone());
        if self.proved.contains(&Decision::Feasibility) {
            (renamed, new_seen) = (renamed.blur_filters(), new_seen.blur_filters());
        }
        let new = new_seen;
        if self.want(Decision::CardChoice) {
            // Every job on the same nodes under both: the cards it took are a decision.
            let same_nodes = new
                .jobs
                .iter()
                .filter(|(j, o)| {
                    matches!(o, crate::outcome::JobOutcome::Running { .. })
                        && renamed.jobs.contains(&(j.clone(), o.clone()))
                })
                .count();
            tally.sample(Decision::CardChoice, same_nodes as u64);
        }
        if renamed != new && found.is_empty() {
            found.push(self.put_down(&renamed, &new, tally));
        }
        Ok(found)
    }

    /// The per-job, per-node and per-pair decisions of a grid case
    /// ([`crate::grid`]): admission, quota, filters, node pairs and job order — not the
    /// victim search or the cycle, which the grid does not cover exhaustively.
    pub fn grid(&self, w: &World, fresh: &(Scheduler, Scheduler), tally: &mut Tally) -> Result<Vec<Finding>, Invalid> {
        let mut a = w.play(&fresh.0, self.levels)?;
        let mut b = w.play(&fresh.1, self.levels)?;
        let mut found = Vec::new();
        self.decisions(&mut a.scheduler, &mut b.scheduler, tally, &mut found, false);
        Ok(found)
    }

    fn want(&self, d: Decision) -> bool {
        !self.proved.contains(&d)
    }

    fn finding(&self, d: Decision, dir: Direction, jobs: Vec<String>, nodes: Vec<String>) -> Finding {
        let (old_rules, new_rules) = (self.changed)(d);
        Finding { decision: d, direction: dir, jobs, nodes, old_rules, new_rules }
    }

    /// Every per-job, per-node and per-pair decision of the pending jobs; with `full`,
    /// the victim search and queue order too.
    fn decisions(&self, a: &mut Scheduler, b: &mut Scheduler, tally: &mut Tally, found: &mut Vec<Finding>, full: bool) {
        let pending: Vec<JobId> =
            a.jobs().with_ids().filter(|(id, _)| matches!(a.state(*id), State::Pending(_))).map(|(id, _)| id).collect();
        for &id in &pending {
            let name = a.job(id).ask.name.clone();
            if b.jobs().get(id).is_none_or(|j| j.ask.name != name) {
                continue;
            }
            let (da, db) = (a.decide(id), b.decide(id));
            let (ra, rb) = (refusal(&da), refusal(&db));
            if self.want(Decision::Admission) {
                tally.sample(Decision::Admission, 1);
                if ra.is_some() != rb.is_some() {
                    let dir = if ra.is_some() { Direction::More } else { Direction::Less };
                    found.push(Finding {
                        decision: Decision::Admission,
                        direction: dir,
                        jobs: vec![name.clone()],
                        nodes: vec![],
                        old_rules: ra.into_iter().collect(),
                        new_rules: rb.into_iter().collect(),
                    });
                } else if ra.is_some() && is_reject(&da) != is_reject(&db) {
                    // Refused by both, for good by one and for now by the other.
                    found.push(Finding {
                        decision: Decision::Admission,
                        direction: Direction::Changed,
                        jobs: vec![name.clone()],
                        nodes: vec![],
                        old_rules: ra.into_iter().collect(),
                        new_rules: rb.into_iter().collect(),
                    });
                } else if ra.is_some() {
                    let (sa, sb) = (refusing_admits(a, id), refusing_admits(b, id));
                    let sa: BTreeSet<String> = sa
                        .iter()
                        .map(|&r| {
                            let n = a.policy().program.rule_name(r);
                            self.renames.old_to_new(&n).map_or(n, str::to_string)
                        })
                        .collect();
                    let sb_names: BTreeSet<String> = sb.iter().map(|&r| b.policy().program.rule_name(r)).collect();
                    if sa != sb_names {
                        found.push(Finding {
                            decision: Decision::Admission,
                            direction: Direction::Changed,
                            jobs: vec![name.clone()],
                            nodes: vec![],
                            old_rules: refusing_admits(a, id),
                            new_rules: sb,
                        });
                    }
                }
            }
            if ra.is_some() && rb.is_some() {
                continue;
            }
            let (qa, qb) = (quota_blocked(&da), quota_blocked(&db));
            if self.want(Decision::Quota) && ra.is_none() && rb.is_none() {
                tally.sample(Decision::Quota, 1);
                if qa != qb {
                    let dir = if qa { Direction::More } else { Direction::Less };
                    found.push(self.finding(Decision::Quota, dir, vec![name.clone()], vec![]));
                }
            }
            if qa && qb {
                continue;
            }
            self.nodes(a, b, id, &name, tally, found);
            if a.job(id).ask.replicas > 1 && self.want(Decision::Gang) {
                tally.sample(Decision::Gang, 1);
                if let (Placement::Place { replicas: pa }, Placement::Place { replicas: pb }) = (&da, &db)
                    && names(a, pa) != names(b, pb)
                {
                    found.push(self.finding(Decision::Gang, Direction::Changed, vec![name.clone()], names(b, pb)));
                }
            }
            if full && (self.want(Decision::VictimEligibility) || self.want(Decision::VictimSet)) {
                self.victims(a, b, id, &name, tally, found);
            }
        }
        if self.want(Decision::JobOrder) {
            self.job_order(a, b, &pending, tally, found);
        }
        if full && self.want(Decision::QueueOrder) {
            self.queue_order(a, b, tally, found);
        }
    }

    /// Filters per node, and the order of every pair of nodes both versions allow and the
    /// job fits.
    fn nodes(&self, a: &Scheduler, b: &Scheduler, id: JobId, name: &str, tally: &mut Tally, found: &mut Vec<Finding>) {
        let (na, nb) = (node_results(a, id), node_results(b, id));
        tally.pairs += na.len() as u64;
        let node_name = |i: usize| a.cluster().nodes[i].name.clone();
        if self.want(Decision::Feasibility) {
            tally.sample(Decision::Feasibility, na.len() as u64);
            let job = a.job(id);
            for (i, (x, y)) in na.iter().zip(&nb).enumerate() {
                // On a node that could not hold the job even empty, a filter's verdict
                // decides nothing any schedule shows (the job is unschedulable there).
                let could_hold = gpol_runtime::fit::capacity_when_empty(&a.cluster().nodes[i], job) > 0;
                if x.feasible != y.feasible && could_hold {
                    let dir = if y.feasible { Direction::More } else { Direction::Less };
                    let rule = |r: &NodeResult| {
                        (!r.feasible).then_some(RuleId::Filter(r.rejected_by)).into_iter().collect::<Vec<_>>()
                    };
                    found.push(Finding {
                        decision: Decision::Feasibility,
                        direction: dir,
                        jobs: vec![name.to_string()],
                        nodes: vec![node_name(i)],
                        old_rules: rule(x),
                        new_rules: rule(y),
                    });
                }
            }
        }
        // A gang's nodes are chosen as a placement (its own decision, below), not one by one.
        if !self.want(Decision::Ranking) || a.job(id).ask.replicas > 1 {
            return;
        }
        let job = a.job(id);
        let open: Vec<usize> = (0..na.len())
            .filter(|&i| {
                let node = &a.cluster().nodes[i];
                na[i].feasible
                    && nb[i].feasible
                    && node.up
                    && (job.ask.models.is_empty() || job.ask.models.contains(&node.model))
                    && gpol_runtime::fit::fits(node, job)
            })
            .collect();
        let (ta, tb) = (tiers(a), tiers(b));
        for (k, &x) in open.iter().enumerate() {
            for &y in &open[k + 1..] {
                tally.sample(Decision::Ranking, 1);
                let oa = gpol_runtime::rank(&na[x], &na[y], ta);
                let ob = gpol_runtime::rank(&nb[x], &nb[y], tb);
                if oa == ob {
                    continue;
                }
                // A preference turned into a tie (or back) is a change: the tie is then
                // broken by node order, which the preference did not depend on.
                // The node the version with a preference prefers first.
                let (best, other) = match (oa, ob) {
                    (_, Ordering::Less) | (Ordering::Greater, Ordering::Equal) => (x, y),
                    _ => (y, x),
                };
                found.push(self.finding(
                    Decision::Ranking,
                    Direction::Changed,
                    vec![name.to_string()],
                    vec![node_name(best), node_name(other)],
                ));
            }
        }
    }

    /// The victim search's verdict on each running job, and the set it evicts.
    fn victims(
        &self,
        a: &mut Scheduler,
        b: &mut Scheduler,
        id: JobId,
        name: &str,
        tally: &mut Tally,
        found: &mut Vec<Finding>,
    ) {
        if a.running().next().is_none() {
            return;
        }
        let (va, vb) = (a.victim_search_explained(id), b.victim_search_explained(id));
        if self.want(Decision::VictimEligibility) {
            for (victim, verdict) in &va.considered {
                let Some((_, other)) = vb.considered.iter().find(|(v, _)| v == victim) else { continue };
                tally.sample(Decision::VictimEligibility, 1);
                let (ea, eb) = (allowing(verdict), allowing(other));
                if ea.is_empty() != eb.is_empty() {
                    let dir = if eb.is_empty() { Direction::Less } else { Direction::More };
                    // Where the victim runs: with only those nodes, the claimant needs it gone.
                    let slots = &a.job(*victim).holding.slots;
                    let mut nodes: Vec<String> = slots.iter().map(|s| a.cluster().nodes[s.node].name.clone()).collect();
                    nodes.dedup();
                    found.push(Finding {
                        decision: Decision::VictimEligibility,
                        direction: dir,
                        jobs: vec![name.to_string(), a.job(*victim).ask.name.clone()],
                        nodes,
                        old_rules: ea,
                        new_rules: eb,
                    });
                }
            }
        }
        if self.want(Decision::VictimSet) {
            tally.sample(Decision::VictimSet, 1);
            let set = |s: &Scheduler, e: &Option<gpol_runtime::preempt::Eviction>| -> BTreeSet<String> {
                e.iter().flat_map(|e| e.victims.iter().map(|v| s.job(v.job).ask.name.clone())).collect()
            };
            let (sa, sb) = (set(a, &va.eviction), set(b, &vb.eviction));
            if sa != sb {
                let mut jobs = vec![name.to_string()];
                jobs.extend(sa.symmetric_difference(&sb).cloned());
                found.push(self.finding(Decision::VictimSet, Direction::Changed, jobs, vec![]));
            }
        }
    }

    /// Pairs of pending jobs of one queue, by `job_order`.
    fn job_order(&self, a: &Scheduler, b: &Scheduler, pending: &[JobId], tally: &mut Tally, found: &mut Vec<Finding>) {
        let keys = |s: &Scheduler, id: JobId| {
            let mut out = vec![0.0; s.policy().program.job_order.len()];
            let view = s.view(Some(id));
            s.policy().engine().job_keys(&s.ctx(&view), &s.job_rec(id), &mut out);
            out
        };
        for (k, &x) in pending.iter().enumerate() {
            for &y in &pending[k + 1..] {
                if a.job(x).ask.queue != a.job(y).ask.queue {
                    continue;
                }
                tally.sample(Decision::JobOrder, 1);
                let oa = gpol_runtime::compare_keys(&a.policy().program.job_order, &keys(a, x), &keys(a, y));
                let ob = gpol_runtime::compare_keys(&b.policy().program.job_order, &keys(b, x), &keys(b, y));
                if oa == ob {
                    continue;
                }
                // As for nodes, a preference turned into a tie is a change.
                let (first, second) = match (oa, ob) {
                    (_, Ordering::Less) | (Ordering::Greater, Ordering::Equal) => (x, y),
                    _ => (y, x),
                };
                let jobs = vec![a.job(first).ask.name.clone(), a.job(second).ask.name.clone()];
                found.push(self.finding(Decision::JobOrder, Direction::Changed, jobs, vec![]));
            }
        }
    }

    /// Pairs of sibling queues both versions have, at every level of the tree, by
    /// `queue_order`; a pair that differs is shown with a waiting job of each side.
    fn queue_order(&self, a: &Scheduler, b: &Scheduler, tally: &mut Tally, found: &mut Vec<Finding>) {
        let (qa, qb) = (&a.quotas().queues, &b.quotas().queues);
        // Queues of both versions, by index in each, with their parents' names.
        let both: Vec<(usize, usize, Option<String>)> = (qa.iter().enumerate())
            .filter_map(|(i, q)| {
                let j = qb.iter().position(|x| x.place.name == q.place.name)?;
                Some((i, j, q.place.parent.map(|p| qa[p].place.name.clone())))
            })
            .collect();
        let (view_a, view_b) = (a.view(None), b.view(None));
        // A waiting job under a queue: the cycle orders only queues that have one.
        let under = |q: usize| {
            a.jobs()
                .with_ids()
                .find(|(id, j)| {
                    matches!(a.state(*id), State::Pending(_)) && a.quotas().path(j.ask.queue).any(|p| p == q)
                })
                .map(|(_, j)| j.ask.name.clone())
        };
        for (k, x) in both.iter().enumerate() {
            for y in &both[k + 1..] {
                if x.2 != y.2 || under(x.0).is_none() || under(y.0).is_none() {
                    continue;
                }
                tally.sample(Decision::QueueOrder, 1);
                // The runtime's order: keys, then declaration order (a tie the declarations
                // break the same way is no change).
                let cmp = |s: &Scheduler, view: &gpol_runtime::View<'_>, i: usize, j: usize| {
                    let (ki, kj) = (s.queue_order_keys(view, i), s.queue_order_keys(view, j));
                    s.queue_order_cmp((i, &ki), (j, &kj))
                };
                let (oa, ob) = (cmp(a, &view_a, x.0, y.0), cmp(b, &view_b, x.1, y.1));
                if oa == ob {
                    continue;
                }
                let (first, second) = if ob == Ordering::Less { (x.0, y.0) } else { (y.0, x.0) };
                // A waiting job under each queue, the one NEW puts first first.
                let jobs = under(first).into_iter().chain(under(second)).collect();
                found.push(self.finding(Decision::QueueOrder, Direction::Changed, jobs, vec![]));
            }
        }
    }

    /// A difference only the cycle showed (after another job started first): put down
    /// to what differs in the outcome — evictions, a rejection, a job on other nodes or
    /// cards, or jobs starting in another order.
    fn put_down(&self, old: &Outcome, new: &Outcome, tally: &mut Tally) -> Finding {
        use crate::outcome::JobOutcome;
        let mut differing = Vec::new();
        let mut moved = false;
        let mut rejected = false;
        for (j, o) in &new.jobs {
            let theirs = old.jobs.iter().find(|(x, _)| x == j).map(|(_, p)| p);
            if theirs == Some(o) {
                continue;
            }
            differing.push(j.clone());
            match (theirs, o) {
                (Some(JobOutcome::Running { .. }), JobOutcome::Running { .. }) => moved = true,
                (Some(JobOutcome::Rejected { .. }), _) | (_, JobOutcome::Rejected { .. }) => rejected = true,
                _ => {}
            }
        }
        let evidence = if old.evictions != new.evictions {
            Decision::VictimSet
        } else if rejected {
            Decision::Admission
        } else if moved {
            Decision::Ranking
        } else if differing.is_empty() {
            Decision::CardChoice
        } else {
            Decision::JobOrder
        };
        // A proved kind cannot be what differs: then a kind that moves jobs the same way,
        // else the first kind not proved that can move jobs in a cycle. Every decision on
        // the state before the cycle agreed, so jobs that start in another order or on
        // other nodes most likely took each other's room: whose turn it was (or the quota).
        let related: &[Decision] = match evidence {
            Decision::JobOrder | Decision::Ranking => &[Decision::QueueOrder, Decision::JobOrder, Decision::Quota],
            _ => &[],
        };
        let fallback = [
            &[evidence][..],
            related,
            &[
                Decision::VictimSet,
                Decision::VictimEligibility,
                Decision::Ranking,
                Decision::Gang,
                Decision::CardChoice,
                Decision::JobOrder,
                Decision::QueueOrder,
                Decision::Quota,
                Decision::Feasibility,
                Decision::Admission,
            ],
        ]
        .concat();
        let decision = fallback.into_iter().find(|d| self.want(*d)).unwrap_or(evidence);
        tally.sample(decision, 0);
        self.finding(decision, Direction::Changed, differing, vec![])
    }
}

/// The admit rule that refuses a placement decision, if one does.
fn refusal(d: &Placement) -> Option<RuleId> {
    match d {
        Placement::Reject(r) => Some(*r),
        Placement::Wait(Reason::Rule(r @ RuleId::Admit(_))) => Some(*r),
        _ => None,
    }
}

fn is_reject(d: &Placement) -> bool {
    matches!(d, Placement::Reject(_))
}

fn quota_blocked(d: &Placement) -> bool {
    matches!(d, Placement::Wait(Reason::Quota(_)))
}

/// Every admit rule that refuses the job now (not only the first).
fn refusing_admits(s: &Scheduler, id: JobId) -> Vec<RuleId> {
    let view = s.view(Some(id));
    let ctx = s.ctx(&view);
    let rec = s.job_rec(id);
    let roots = Roots { job: Some(&rec), ..Roots::default() };
    (s.policy().program.admit.iter().enumerate())
        .filter(|(_, r)| !interp::eval(&r.body, &ctx, &roots).b())
        .map(|(i, _)| RuleId::Admit(u16::try_from(i).unwrap_or(u16::MAX)))
        .collect()
}

/// Every node's filter verdict and scores for the job.
fn node_results(s: &Scheduler, id: JobId) -> Vec<NodeResult> {
    let view = s.view(Some(id));
    let ctx = s.ctx(&view);
    let rec = s.job_rec(id);
    let nodes = s.node_records();
    let mut out = vec![NodeResult::default(); nodes.len()];
    s.policy().engine().filter_score(&ctx, &rec, nodes, &mut out);
    out
}

fn tiers(s: &Scheduler) -> usize {
    let scores = &s.policy().program.scores;
    scores.iter().filter_map(|r| r.tier).max().map_or(0, |t| usize::from(t).clamp(1, MAX_TIERS))
}

fn names(s: &Scheduler, nodes: &[usize]) -> Vec<String> {
    let mut n: Vec<String> = nodes.iter().map(|&i| s.cluster().nodes[i].name.clone()).collect();
    n.sort();
    n
}

/// The rules that make a running job a candidate victim (none: it is not one).
fn allowing(v: &Verdict) -> Vec<RuleId> {
    match v {
        Verdict::Candidate { rules, .. } => rules.clone(),
        _ => Vec::new(),
    }
}
