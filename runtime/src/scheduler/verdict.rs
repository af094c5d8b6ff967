//! Each node's verdict for one job, for adapters that are asked node by node
//! (kube-scheduler's extender): the same admit rules, quota, filters, exact fit and
//! scores that [`Scheduler::decide`] applies, with every node's answer kept instead of
//! only the best.

use crate::fit;
use crate::gang;
use crate::jobs;
use crate::jobs::{JobId, Reason};
use crate::model::NodeId;
use crate::quota::Block;
use crate::scheduler::Scheduler;
use gpol_compiler::engine::NodeResult;
use gpol_compiler::ir::RuleId;
use std::cmp::Ordering;

/// Why the job cannot start anywhere now, whatever the node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Closed {
    pub reason: Reason,
    /// Nothing the cluster does changes it: a static admit rule turned the job away, or
    /// it can never fit (no node could hold it even empty, or it asks for more than a
    /// queue's limit). Evicting other work cannot help.
    pub for_good: bool,
}

/// One node's answer for the job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NodeVerdict {
    /// The job fits there now; how the policy's scores rate the node.
    Fits(NodeResult),
    /// This filter rule turned the node away (the first declared that does).
    Filtered(RuleId),
    /// The node passes the filters but has too little free capacity now.
    Full,
    /// The node could not hold the job even if it were empty.
    TooSmall,
    /// The node is out of service.
    Down,
    /// The job may not run on the node's GPU model.
    Model,
    /// The node is held for another job's reservation.
    Reserved,
    /// The quota for the node's GPU model would be exceeded.
    Quota(Block),
}

impl NodeVerdict {
    /// Whether nothing running on the node, evicted, would let the job start there: the
    /// node is too small, out of service or of a model the job may not use.
    pub fn for_good(&self) -> bool {
        matches!(self, NodeVerdict::TooSmall | NodeVerdict::Down | NodeVerdict::Model)
    }
}

impl Scheduler {
    /// Whether the job may start at all now: its admit rules and its queue's quota.
    pub fn gate(&self, job: JobId) -> Result<(), Closed> {
        let program = &self.facts.policy.program;
        if let Some(i) = self.first_refusing_admit(job) {
            let rule = RuleId::Admit(u16::try_from(i).unwrap_or(u16::MAX));
            return Err(Closed { reason: Reason::Rule(rule), for_good: program.admit[i].is_static });
        }
        if let Some(never) = self.never_fits(job) {
            return Err(Closed { reason: Reason::Unschedulable(never), for_good: true });
        }
        self.quota_count(job).map(|_| ()).map_err(|reason| Closed { reason, for_good: false })
    }

    /// Each node's verdict for one replica of the job, in the order of `among`; an id
    /// that names no node is `Down`.
    pub fn node_verdicts(&self, job: JobId, among: &[NodeId]) -> Vec<NodeVerdict> {
        let mut verdicts = vec![NodeVerdict::Down; among.len()];
        self.each_verdict(job, among, |at, v, _| verdicts[at] = v);
        verdicts
    }

    /// [`Scheduler::node_verdicts`] with the engine's result on each node too (whether
    /// it passed the filters and its scores, whatever the verdict), for adapters that
    /// hand both on (the C ABI). An id that names no node is `Down` with a default result.
    pub fn node_verdicts_with_results(&self, job: JobId, among: &[NodeId]) -> Vec<(NodeVerdict, NodeResult)> {
        let mut out = vec![(NodeVerdict::Down, NodeResult::default()); among.len()];
        self.each_verdict(job, among, |at, v, r| out[at] = (v, *r));
        out
    }

    /// Calls `put(position in among, verdict, engine result)` for each node of `among`
    /// that names a node.
    fn each_verdict(&self, job: JobId, among: &[NodeId], mut put: impl FnMut(usize, NodeVerdict, &NodeResult)) {
        let view = self.placement_view(job);
        let ctx = self.ctx(&view);
        let rec = self.job_rec(job);
        let j = &self.world.jobs()[job];
        let mut by_model: Vec<(gpol_compiler::schema::Sym, Result<(), Block>)> = Vec::new();
        // The nodes' free-capacity summaries decide most fits without walking cards.
        let ask = fit::Ask::of(j);
        let decides = fit::headroom_decides(&ask);
        let fits = |i: NodeId| {
            fit::may_fit(&self.world.cluster().headroom[i], &ask)
                && (decides || fit::fits(&self.world.cluster().nodes[i], j))
        };
        let mut at = 0;
        self.scan(&ctx, &rec, Some(among), |i, r| {
            // The scan shows the nodes in the order given, skipping ids that name none.
            while among.get(at).is_some_and(|&n| n != i) {
                at += 1;
            }
            if at >= among.len() {
                return;
            }
            let here = at;
            at += 1;
            let node = &self.world.cluster().nodes[i];
            let verdict = if !r.feasible {
                NodeVerdict::Filtered(RuleId::Filter(
                    u16::try_from(self.rejecting_filter(&ctx, &rec, i, r)).unwrap_or(u16::MAX),
                ))
            } else if !node.up {
                NodeVerdict::Down
            } else if !(j.ask.models.is_empty() || j.ask.models.contains(&node.model)) {
                NodeVerdict::Model
            } else if self.reserved_for_other(i, job) {
                NodeVerdict::Reserved
            } else if !fits(i) {
                if fit::could_ever_fit(node, j) { NodeVerdict::Full } else { NodeVerdict::TooSmall }
            } else if self.world.quotas().limits_models() {
                let verdict = match by_model.iter().find(|(m, _)| *m == node.model) {
                    Some((_, v)) => *v,
                    None => {
                        let demand = jobs::replicas_demand(j, 1, Some(node.model));
                        let v = self.world.quotas().admissible(j.ask.queue, j.ask.user, &demand);
                        by_model.push((node.model, v));
                        v
                    }
                };
                match verdict {
                    Ok(()) => NodeVerdict::Fits(*r),
                    Err(block) => NodeVerdict::Quota(block),
                }
            } else {
                NodeVerdict::Fits(*r)
            };
            put(here, verdict, r);
        });
    }

    /// How two nodes that fit compare for the policy: `Less` when `a` is the better.
    pub fn rank_nodes(&self, a: &NodeResult, b: &NodeResult) -> Ordering {
        gang::rank(a, b, self.score_tiers())
    }

    /// How many score tiers the policy ranks nodes by (0 without tiers), for
    /// [`crate::gang::rank`].
    pub fn score_tier_count(&self) -> usize {
        self.score_tiers()
    }

    /// The cards (and MIG instances) one replica of the job takes on `node`: by the
    /// policy's `card_score` rules, else by best fit; `None` when it does not fit.
    pub(crate) fn cards_for(&self, job: JobId, node: NodeId) -> Option<Vec<(usize, Option<usize>)>> {
        self.choose_cards(job, node)
    }
}
