//! When a job that failed is tried again: not until something that could change its fate
//! happens — capacity frees, the quota cap that held it back gives, a job starts that
//! could be its victim, or (when time matters) the retry interval passes.

use super::Scheduler;
use crate::fit;
use crate::jobs::{JobId, QueueId, Reason, State};
use crate::quota::{self, Block};
use std::collections::HashSet;

/// A failed job's wait: when it failed, how many jobs had started by then, and if the
/// quota held it back, the cap that did and the room that cap had left.
#[derive(Clone, Copy, Debug)]
pub(super) struct Backoff {
    pub(super) at_ms: u64,
    pub(super) starts: u64,
    pub(super) quota: Option<(Block, i64)>,
}

impl Scheduler {
    /// A job that failed while the policy can evict is retried once another job starts —
    /// but only a start in a queue whose jobs could be its victims can change the answer
    /// when victim rules read nothing but the jobs (`eligible` asks); here the others are
    /// forgotten, so they are not looked at again. (Conservative: a queue counts when its
    /// side borrows anything the tree governs, whatever the guards and the claimant's own
    /// side say.)
    pub(super) fn forget_irrelevant_starts(&mut self) {
        if !self.victims_read_jobs || self.policy.program.victims.is_empty() {
            return;
        }
        let now = self.starts;
        let mut backoff = std::mem::take(&mut self.backoff);
        for (&job, b) in backoff.iter_mut().filter(|(_, b)| b.starts < now) {
            if !self.new_victims_since(job, b.starts) {
                b.starts = now;
            }
        }
        self.backoff = backoff;
    }

    /// For a job the quota holds back whatever the nodes, the cap that does and the room
    /// it has left: until that room grows, freed capacity cannot help it. Not when the
    /// policy can evict (freed nodes can complete a set of victims that satisfies the
    /// quota), nor for an elastic gang (a smaller count meets other caps).
    pub(super) fn quota_cap(&self, job: JobId, reason: &Reason) -> Option<(Block, i64)> {
        let j = &self.jobs[job];
        if !matches!(reason, Reason::Quota(_))
            || j.min_replicas != j.replicas
            || !self.policy.program.victims.is_empty()
        {
            return None;
        }
        let block = self.quota_replicas(job).err()?;
        Some((block, self.quotas.room(block, j.user)))
    }

    /// Whether a job started, after the `starts`-th start, in a queue whose jobs could be
    /// victims for `job`.
    pub(super) fn new_victims_since(&self, job: JobId, starts: u64) -> bool {
        if !self.victims_read_jobs {
            return true;
        }
        let cq = self.jobs[job].queue;
        // A claimant that needs nothing the tree governs may preempt in any queue.
        let governed =
            quota::demand(&self.jobs[job], None).iter().any(|(&r, &a)| a > 0 && self.quotas.is_constrained(r));
        (0..self.last_start.len())
            .filter(|&q| self.last_start[q] > starts)
            .any(|q| !governed || self.may_hold_victims(cq, q))
    }

    /// Whether jobs of queue `vq` could ever be victims for a claimant of `cq` as the
    /// quotas stand: its own queue, or a queue whose side borrows.
    pub(super) fn may_hold_victims(&self, cq: QueueId, vq: QueueId) -> bool {
        let quotas = &self.quotas;
        if cq == vq {
            return true;
        }
        let top = quotas.common_ancestor(cq, vq);
        quotas.path_below(vq, top).last().is_none_or(|&side| {
            let q = &quotas.queues[side];
            q.alloc.iter().any(|(&r, &a)| quotas.is_constrained(r) && a > q.get(&q.guarantee, r))
        })
    }

    /// Whether a job is not tried because no node can take its shape. A job is always
    /// tried once, so it learns its own reason; one found unschedulable keeps that reason.
    pub(super) fn skipped_as_full(&self, j: JobId) -> bool {
        // Evictions could make room for a shape no node can take as things are.
        !self.time_matters
            && self.policy.program.victims.is_empty()
            && self.full.contains(&self.job_shapes[j])
            && matches!(&self.jobs[j].state, State::Pending(Some(r)) if !matches!(r, Reason::Unschedulable(_)))
    }

    /// Marks the job's shape full if no node in service could take one replica now.
    pub(super) fn note_if_full(&mut self, job: JobId) {
        let j = &self.jobs[job];
        let takes = |n: &crate::model::Node| (j.models.is_empty() || j.models.contains(&n.model)) && fit::fits(n, j);
        if !self.cluster.nodes.iter().any(takes) {
            self.full.insert(self.job_shapes[job]);
        }
    }

    /// Whether a job can take a turn this cycle.
    pub(super) fn eligible(&self, j: JobId, tried: &HashSet<JobId>) -> bool {
        let retry = |at: u64| self.now_ms > at && self.now_ms >= at.saturating_add(self.retry_interval_ms);
        let evicts = !self.policy.program.victims.is_empty();
        let backed_off = self.backoff.get(&j).is_some_and(|b| {
            let cap_gave = b.quota.is_some_and(|(block, room)| self.quotas.room(block, self.jobs[j].user) > room);
            !(cap_gave
                || (self.time_matters && retry(b.at_ms))
                || (evicts && self.starts > b.starts && self.new_victims_since(j, b.starts)))
        });
        self.jobs[j].is_pending() && !tried.contains(&j) && !backed_off && !self.skipped_as_full(j)
    }
}
