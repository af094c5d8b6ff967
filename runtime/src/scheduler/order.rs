//! The order of turns (D3): `queue_order` picks a queue at each level of the tree,
//! `job_order` a job in the leaf. A leaf's candidate is the best-ranked untried job of
//! its classes that may take a turn (`waiting`, `retry`); a strict leaf offers only its
//! best-ranked job, and nothing while that one cannot go.

use super::Scheduler;
use super::rank::{ClassId, job_of};
use crate::jobs::JobId;
use crate::quota::QueueId;
use gpol_compiler::hir::Queueing;
use gpol_compiler::ir::{Direction, OrderKey};
use std::cmp::Ordering;

impl Scheduler {
    /// A leaf's classes that may take a turn now (a strict leaf's: all of them, for its
    /// head), ranked.
    pub(super) fn leaf_classes(&mut self, leaf: QueueId) -> Vec<ClassId> {
        let strict = self.world.quotas().queues[leaf].place.queueing == Queueing::Strict;
        let classes: Vec<ClassId> = self.waiting.in_leaf(leaf).filter(|&c| strict || self.eligible(c)).collect();
        self.rerank_stale(&classes);
        classes
    }

    /// A leaf's candidate for the next turn among `classes` (from `leaf_classes`): their
    /// best first member (members that failed this cycle are parked). A strict leaf
    /// offers its best job, and nothing while that one cannot go.
    pub(super) fn leaf_candidate(&self, leaf: QueueId, classes: &[ClassId]) -> Option<JobId> {
        let best = classes.iter().filter_map(|c| self.waiting.class(*c).members.first()).min().map(job_of)?;
        match self.waiting.class_of(best) {
            Some(c) if self.world.quotas().queues[leaf].place.queueing == Queueing::Strict && !self.eligible(c) => None,
            _ => Some(best),
        }
    }
}

impl Scheduler {
    /// Queue `q`'s place in the order of queues in `view`: its `queue_order` keys, or
    /// without one the built-in key, its weighted dominant share (NaN, 0 ÷ 0, as
    /// infinity: last).
    pub fn queue_order_keys(&self, view: &super::View, q: QueueId) -> Vec<f64> {
        let program = &self.facts.policy.program;
        if program.queue_order.is_empty() {
            let rec = &view.queues[q];
            let w = rec.dominant_share / rec.weight;
            return vec![if w.is_nan() { f64::INFINITY } else { w }];
        }
        let mut keys = vec![0.0; program.queue_order.len()];
        self.facts.policy.engine().queue_keys(&self.ctx(view), q as u32, &mut keys);
        keys
    }

    /// Orders two queues by their [`Scheduler::queue_order_keys`], ties to the first
    /// declared.
    pub fn queue_order_cmp(&self, a: (QueueId, &[f64]), b: (QueueId, &[f64])) -> Ordering {
        let keys = &self.facts.policy.program.queue_order;
        let by_keys = if keys.is_empty() { a.1[0].total_cmp(&b.1[0]) } else { compare_keys(keys, a.1, b.1) };
        by_keys.then(a.0.cmp(&b.0))
    }
}

/// Compares two items' order keys: lexicographic, each ascending or descending, NaN last.
pub fn compare_keys(keys: &[OrderKey], ka: &[f64], kb: &[f64]) -> Ordering {
    for ((x, y), key) in ka.iter().zip(kb).zip(keys) {
        let o = match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => match key.dir {
                Direction::Asc => x.total_cmp(y),
                Direction::Desc => y.total_cmp(x),
            },
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}
