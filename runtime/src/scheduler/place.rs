//! The placement decision for one job (decisions D2, D4, D5, D9): admit, quota, filter
//! and score over the nodes, exact fit, and for a gang the placement of every replica.
//! Nothing changes here: the cycle binds what is decided.

use crate::fit;
use crate::gang::{self, Clause, Host, Shortfall};
use crate::jobs;
use crate::jobs::{JobId, Reason, Unschedulable};
use crate::model::NodeId;
use crate::quota::Block;
use crate::scheduler::Scheduler;
use gpol_compiler::engine::{MAX_TIERS, NodeResult};
use gpol_compiler::interp::{self, Ctx, Roots};
use gpol_compiler::ir::{GangKind, RuleId};
use gpol_compiler::schema::{JobRec, Sym};
use std::cmp::Ordering;

/// How many nodes one call of the compiled policy evaluates: the results stay in cache.
const CHUNK: usize = 256;

/// The outcome of deciding where a job goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// One node per replica.
    Place {
        replicas: Vec<NodeId>,
    },
    Wait(Reason),
    /// Turned away for good by this admit rule (it reads only what the job asks for).
    Reject(RuleId),
}

impl Scheduler {
    /// The placement decision for a job, without changing anything.
    pub fn decide(&self, job: JobId) -> Decision {
        let program = &self.facts.policy.program;
        if let Some(i) = self.first_refusing_admit(job) {
            let rule = RuleId::Admit(u16::try_from(i).unwrap_or(u16::MAX));
            return if program.admit[i].is_static {
                Decision::Reject(rule)
            } else {
                Decision::Wait(Reason::Rule(rule))
            };
        }
        match self.place(job, None) {
            Ok(replicas) => Decision::Place { replicas },
            // A job that can never fit waits as unschedulable, whatever else blocks it;
            // that is only worth working out when it does not start.
            Err(reason) => Decision::Wait(self.never_fits(job).map_or(reason, Reason::Unschedulable)),
        }
    }

    /// The first admit rule that turns the job away now, if any.
    pub(crate) fn first_refusing_admit(&self, job: JobId) -> Option<usize> {
        if self.facts.policy.program.admit.is_empty() {
            return None;
        }
        let view = self.placement_view(job);
        self.facts.policy.engine().admit(&self.ctx(&view), &self.job_rec(job))
    }

    /// Where the job's replicas would go now — quota, filters and scores, exact fit, and
    /// for a gang its topology — among `among` or every node.
    pub(crate) fn place(&self, job: JobId, among: Option<&[NodeId]>) -> Result<Vec<NodeId>, Reason> {
        let j = &self.world.jobs()[job];
        let count = self.quota_count(job)?;
        if j.ask.replicas > 1 {
            let view = self.placement_view(job);
            let ctx = self.ctx(&view);
            let rec = self.job_rec(job);
            let placements = self.gang_placements(job, among, &ctx, &rec, count, self.score_tiers())?;
            return self.first_within_model_quota(job, placements.into_iter().map(|p| p.replicas));
        }
        self.best_node(job, among, 1).map(|node| vec![node])
    }

    /// The best node (by the policy's filters and scores) for one replica of the job, on
    /// `among` or any node; `replicas` is how many the per-model quota check and the
    /// queues' `_after` fields count (the job's, or the one a growing job adds).
    pub(crate) fn best_node(&self, job: JobId, among: Option<&[NodeId]>, replicas: u32) -> Result<NodeId, Reason> {
        let j = &self.world.jobs()[job];
        let view = self.placement_view_for(job, replicas);
        let ctx = self.ctx(&view);
        let rec = self.job_rec(job);
        let program = &self.facts.policy.program;
        let tiers = self.score_tiers();
        let usable = |i: NodeId| self.usable_node(job, i);
        let rejections = vec![0usize; program.filters.len()];
        let new_choice = |rejections| Choice {
            s: self,
            ctx: &ctx,
            rec: &rec,
            job,
            replicas,
            tiers,
            best: None,
            passed_filters: false,
            rejections,
            by_model: Vec::new(),
            quota_block: None,
            fit_known: false,
        };
        // Exact fit first: only the nodes that could take the job now are worth the
        // policy's time. The best of them is the best of all nodes, as no other node can
        // be chosen; only when none is chosen does every node get looked at, for the reason.
        let ask = fit::Ask::of(j);
        let decides = fit::headroom_decides(&ask);
        let fits = |i: NodeId| {
            fit::may_fit(&self.world.cluster().headroom[i], &ask)
                && usable(i)
                && (decides || fit::fits(&self.world.cluster().nodes[i], j))
        };
        let fitting: Vec<NodeId> = match among {
            Some(ids) => ids.iter().copied().filter(|&i| i < self.world.cluster().nodes.len() && fits(i)).collect(),
            None => match j.ask.request {
                gpol_compiler::spec::Request::Whole(k) if k > 0 => self.world.cluster().with_free_cards(k),
                _ => None,
            }
            .map_or_else(
                || (0..self.world.cluster().nodes.len()).filter(|&i| fits(i)).collect(),
                |ids| ids.into_iter().filter(|&i| fits(i)).collect(),
            ),
        };
        if !fitting.is_empty() {
            let mut choice = Choice { fit_known: true, ..new_choice(vec![0; rejections.len()]) };
            self.scan(&ctx, &rec, Some(&fitting), |i, r| choice.consider(i, r));
            if let Some((node, _)) = choice.best {
                return Ok(node);
            }
        }
        let mut choice = new_choice(rejections);
        self.scan(&ctx, &rec, among, |i, r| choice.consider(i, r));
        match choice.best {
            Some((node, _)) => Ok(node),
            None if !choice.passed_filters => Err(most_rejecting(&choice.rejections)),
            None => Err(choice.quota_block.map_or(Reason::Capacity, Reason::Quota)),
        }
    }

    /// Runs the policy's filters and scores for the job over `among` (or every node), a
    /// chunk at a time into a buffer that stays in cache, showing each node's result to
    /// `visit` in the order given.
    pub(crate) fn scan(
        &self,
        ctx: &Ctx<'_>,
        rec: &JobRec<'_>,
        among: Option<&[NodeId]>,
        mut visit: impl FnMut(NodeId, &NodeResult),
    ) {
        let engine = self.facts.policy.engine();
        let nodes = self.node_records();
        let mut buffer = [NodeResult::default(); CHUNK];
        match among {
            None => {
                for (c, chunk) in nodes.chunks(CHUNK).enumerate() {
                    let results = &mut buffer[..chunk.len()];
                    engine.filter_score(ctx, rec, chunk, results);
                    for (i, r) in (c * CHUNK..).zip(results.iter()) {
                        visit(i, r);
                    }
                }
            }
            Some(ids) => {
                // One call per run of consecutive nodes (up to a chunk).
                let mut rest = ids;
                while let Some(&first) = rest.first() {
                    let run = 1 + rest.windows(2).take(CHUNK - 1).take_while(|w| w[1] == w[0] + 1).count();
                    if let Some(chunk) = nodes.get(first..first + run) {
                        let results = &mut buffer[..run];
                        engine.filter_score(ctx, rec, chunk, results);
                        for (i, r) in (first..).zip(results.iter()) {
                            visit(i, r);
                        }
                    }
                    rest = &rest[run..];
                }
            }
        }
    }

    /// How many replicas the quota admits now: all of them, or for an elastic gang as
    /// many as it can, down to `min_replicas`.
    pub(crate) fn quota_count(&self, job: JobId) -> Result<u32, Reason> {
        self.quota_replicas(job).map_err(Reason::Quota)
    }

    /// `quota_count` with the cap that blocks it, for the victim search's many trials.
    pub(crate) fn quota_replicas(&self, job: JobId) -> Result<u32, Block> {
        let j = &self.world.jobs()[job];
        let admits =
            |n: u32| self.world.quotas().admissible(j.ask.queue, j.ask.user, &jobs::replicas_demand(j, n, None));
        match admits(j.ask.replicas) {
            Ok(()) => Ok(j.ask.replicas),
            Err(why) => {
                // Demand grows with the count, so the counts the quota admits are a prefix:
                // search for its end in O(log n) trials.
                if admits(j.ask.min_replicas).is_err() {
                    return Err(why);
                }
                let (mut ok, mut too_many) = (j.ask.min_replicas, j.ask.replicas);
                while too_many - ok > 1 {
                    let mid = ok + (too_many - ok) / 2;
                    if admits(mid).is_ok() { ok = mid } else { too_many = mid }
                }
                Ok(ok)
            }
        }
    }

    /// The gang clauses that apply to the job.
    /// Every placement of `count` replicas (down to the gang's minimum) of a gang on
    /// `among` or every node, best first, with its value; or why there is none.
    pub(crate) fn gang_placements(
        &self,
        job: JobId,
        among: Option<&[NodeId]>,
        ctx: &Ctx<'_>,
        rec: &JobRec<'_>,
        count: u32,
        tiers: usize,
    ) -> Result<Vec<gang::Placement>, Reason> {
        let j = &self.world.jobs()[job];
        let mut rejections = vec![0usize; self.facts.policy.program.filters.len()];
        let mut passed_filters = false;
        let mut hosts: Vec<Host> = Vec::new();
        self.scan(ctx, rec, among, |i, r| {
            if !r.feasible {
                count_rejection(&mut rejections, self.rejecting_filter(ctx, rec, i, r));
            } else if self.world.cluster().nodes[i].up {
                passed_filters = true;
                let capacity =
                    if self.usable_node(job, i) { fit::capacity(&self.world.cluster().nodes[i], j) } else { 0 };
                if capacity > 0 {
                    hosts.push(Host { node: i, result: *r, capacity });
                }
            }
        });
        if !passed_filters {
            return Err(most_rejecting(&rejections));
        }
        let clauses = self.gang_clauses(ctx, rec);
        gang::place(self.world.cluster(), &hosts, count, j.ask.min_replicas, &clauses, tiers).map_err(|short| {
            match short {
                Shortfall::Capacity => Reason::Capacity,
                Shortfall::Topology => Reason::Gang,
            }
        })
    }

    /// Whether the job may use node `i` at all: in service, of an allowed model, not held
    /// for another job.
    fn usable_node(&self, job: JobId, i: NodeId) -> bool {
        let (node, j) = (&self.world.cluster().nodes[i], &self.world.jobs()[job]);
        node.up && (j.ask.models.is_empty() || j.ask.models.contains(&node.model)) && !self.reserved_for_other(i, job)
    }

    /// The tiers the policy's scores use (0 without tiers).
    pub(crate) fn score_tiers(&self) -> usize {
        let program = &self.facts.policy.program;
        program.scores.iter().filter_map(|s| s.tier).max().map_or(0, |t| usize::from(t).clamp(1, MAX_TIERS))
    }

    pub(crate) fn gang_clauses(&self, ctx: &Ctx<'_>, rec: &JobRec<'_>) -> Vec<Clause> {
        let engine = self.facts.policy.engine();
        let gang = &self.facts.policy.program.gang;
        (0..gang.len())
            .filter(|&i| engine.gang_applies(ctx, rec, i))
            .map(|i| Clause {
                require: gang[i].kind == GangKind::Require,
                level: gang[i].level,
                weight: gang[i].weight,
            })
            .collect()
    }

    /// The first placement (best first) whose per-model quota holds.
    fn first_within_model_quota(
        &self,
        job: JobId,
        placements: impl Iterator<Item = Vec<NodeId>>,
    ) -> Result<Vec<NodeId>, Reason> {
        let j = &self.world.jobs()[job];
        let mut first_block = None;
        for replicas in placements {
            if !self.world.quotas().limits_models() {
                return Ok(replicas);
            }
            let models: Vec<Sym> = replicas.iter().map(|&n| self.world.cluster().nodes[n].model).collect();
            match self.world.quotas().admissible(j.ask.queue, j.ask.user, &jobs::placement_demand(j, &models)) {
                Ok(()) => return Ok(replicas),
                Err(why) => {
                    first_block.get_or_insert(why);
                }
            }
        }
        Err(first_block.map_or(Reason::Capacity, Reason::Quota))
    }

    /// The cards one replica takes on `node`: by the policy's `card_score` rules if it
    /// has any, else by built-in best fit.
    pub(crate) fn choose_cards(&self, job: JobId, node: NodeId) -> Option<Vec<(usize, Option<usize>)>> {
        let n = &self.world.cluster().nodes[node];
        let j = &self.world.jobs()[job];
        if self.facts.policy.program.card_scores.is_empty() {
            return fit::choose(n, j, None);
        }
        let view = self.placement_view(job);
        let ctx = self.ctx(&view);
        let rec = self.job_rec(job);
        let node_rec = self.node_records().get(node)?;
        let cards = node_rec.cards_list.as_slice();
        let engine = self.facts.policy.engine();
        let score = |card: usize| match cards.get(card) {
            Some(c) => engine.card_score(&ctx, &rec, node_rec, c).0,
            None => {
                gpol_compiler::never!("card {card} of node {node} has no record");
                0.0
            }
        };
        fit::choose(n, j, Some(&score))
    }

    /// Why a job can never run as the cluster and its queue are, if it cannot.
    pub(crate) fn never_fits(&self, job: JobId) -> Option<Unschedulable> {
        let j = &self.world.jobs()[job];
        let room = self.room_when_empty(job);
        if room == 0 {
            return Some(Unschedulable::NoNode);
        }
        if room < u64::from(j.ask.min_replicas) {
            return Some(Unschedulable::TooFewNodes { room });
        }
        let demand = jobs::replicas_demand(j, j.ask.min_replicas, None);
        self.world.quotas().path(j.ask.queue).find_map(|queue| {
            let node = &self.world.quotas().queues[queue];
            node.quota
                .limit
                .iter()
                .find(|(r, limit)| demand.get(r).copied().unwrap_or(0) > **limit)
                .map(|(&res, _)| Unschedulable::OverLimit { queue, res })
        })
    }
}

/// The filter that turned away the most nodes (ties: the one declared first), given how
/// many each turned away; capacity when none turned any away (no node is in service).
fn most_rejecting(rejections: &[usize]) -> Reason {
    let best = (0..rejections.len()).max_by(|&a, &b| rejections[a].cmp(&rejections[b]).then(b.cmp(&a)));
    match best {
        Some(i) if rejections[i] > 0 => Reason::Rule(RuleId::Filter(u16::try_from(i).unwrap_or(u16::MAX))),
        _ => Reason::Capacity,
    }
}

fn count_rejection(rejections: &mut [usize], filter: usize) {
    if let Some(n) = rejections.get_mut(filter) {
        *n += 1;
    }
}

impl Scheduler {
    /// The filter a node the compiled pass rejected counts against: the first declared
    /// that rejects it (the pass stops at the cheapest), as `explain` reports it.
    pub(crate) fn rejecting_filter(&self, ctx: &Ctx<'_>, rec: &JobRec<'_>, node: NodeId, r: &NodeResult) -> usize {
        let first = usize::from(r.rejected_by);
        let earlier = match self.facts.recheck_filters.get(first) {
            Some(e) if !e.is_empty() => e,
            _ => return first,
        };
        let filters = &self.facts.policy.program.filters;
        let roots = Roots { job: Some(rec), node: self.node_records().get(node), ..Roots::default() };
        earlier.iter().copied().find(|&g| !interp::eval(&filters[g].body, ctx, &roots).b()).unwrap_or(first)
    }
}

/// The single-node choice as the scan goes: the best node so far, and why others failed.
struct Choice<'s> {
    s: &'s Scheduler,
    ctx: &'s Ctx<'s>,
    rec: &'s JobRec<'s>,
    job: JobId,
    /// Replicas the per-model quota check counts.
    replicas: u32,
    tiers: usize,
    best: Option<(NodeId, NodeResult)>,
    passed_filters: bool,
    rejections: Vec<usize>,
    /// The quota check per GPU model, worked out once per model seen.
    by_model: Vec<(Sym, Result<(), Block>)>,
    quota_block: Option<Block>,
    /// Whether every node shown is known to be usable by the job and to fit it.
    fit_known: bool,
}

impl Choice<'_> {
    // Inlined into the scan's loop: it runs for every node of every decision.
    #[inline(always)]
    fn consider(&mut self, i: NodeId, r: &NodeResult) {
        if !r.feasible {
            let filter = self.s.rejecting_filter(self.ctx, self.rec, i, r);
            count_rejection(&mut self.rejections, filter);
            return;
        }
        // A node that would not win need not be looked at (and once there is a best
        // node, some node has passed the filters).
        if self.best.as_ref().is_some_and(|(_, b)| gang::rank(r, b, self.tiers) != Ordering::Less) {
            return;
        }
        let s = self.s;
        let (node, j) = (&s.world.cluster().nodes[i], &s.world.jobs()[self.job]);
        if !node.up {
            return;
        }
        self.passed_filters = true;
        if !self.fit_known {
            let usable =
                (j.ask.models.is_empty() || j.ask.models.contains(&node.model)) && !s.reserved_for_other(i, self.job);
            if !usable || !fit::fits(node, j) {
                return;
            }
        }
        if s.world.quotas().limits_models() {
            let verdict = match self.by_model.iter().find(|(m, _)| *m == node.model) {
                Some((_, v)) => v,
                None => {
                    let demand = jobs::replicas_demand(j, self.replicas, Some(node.model));
                    self.by_model.push((node.model, s.world.quotas().admissible(j.ask.queue, j.ask.user, &demand)));
                    &self.by_model[self.by_model.len() - 1].1
                }
            };
            if let Err(why) = verdict {
                self.quota_block.get_or_insert(*why);
                return;
            }
        }
        self.best = Some((i, *r));
    }
}
