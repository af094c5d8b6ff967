//! The order of turns (D3): `queue_order` picks a queue at each level of the tree,
//! `job_order` a job in the leaf. When the job keys read only the job, each leaf's jobs
//! are sorted once per cycle and a cursor moves past those passed over.

use super::Scheduler;
use crate::jobs::{JobId, QueueId};
use gpol_compiler::hir::Queueing;
use gpol_compiler::ir::OrderKey;
use gpol_compiler::syntax::Direction;
use std::cmp::Ordering;
use std::collections::HashSet;

/// Each leaf's waiting jobs in `job_order`, sorted once per cycle, with a cursor past the
/// jobs already passed over: a job passed over (tried, or not eligible) stays so until
/// capacity frees, and freeing capacity drops the order so it is built afresh.
#[derive(Clone)]
pub(super) struct CycleOrder {
    lists: Vec<Vec<JobId>>,
    cursor: Vec<usize>,
}

impl Scheduler {
    /// Each leaf's candidate: its best eligible job (a strict leaf offers only its head,
    /// and nothing while the head cannot go), by keys evaluated now.
    pub(super) fn candidates_by_keys(&self, tried: &HashSet<JobId>, blocked: &HashSet<QueueId>) -> Vec<Option<JobId>> {
        let view = self.view(None);
        let ctx = self.ctx(&view);
        let engine = self.policy.engine();
        let mut candidate: Vec<Option<JobId>> = vec![None; self.quotas.queues.len()];
        for (q, jobs) in self.waiting.iter().enumerate() {
            if jobs.is_empty() || blocked.contains(&q) {
                continue;
            }
            let strict = self.quotas.queues[q].queueing == Queueing::Strict;
            let pool: Vec<JobId> = jobs.iter().copied().filter(|&j| strict || self.eligible(j, tried)).collect();
            let best = self.best_by(
                &pool,
                &self.policy.program.job_order,
                |j, out| {
                    let rec = self.job_rec(j);
                    engine.job_keys(&ctx, &rec, out);
                },
                |a, b| (self.jobs[a].submitted_ms, a).cmp(&(self.jobs[b].submitted_ms, b)),
            );
            candidate[q] = best.filter(|&j| self.eligible(j, tried));
        }
        candidate
    }

    /// [`Self::candidates_by_keys`] when the keys hold still within a cycle: each leaf's
    /// jobs are sorted once, and each turn moves a cursor past the jobs passed over.
    pub(super) fn candidates_in_order(
        &mut self,
        tried: &HashSet<JobId>,
        blocked: &HashSet<QueueId>,
    ) -> Vec<Option<JobId>> {
        let mut order = match self.cycle_order.take() {
            Some(o) => o,
            None => self.build_order(tried),
        };
        let mut candidate: Vec<Option<JobId>> = vec![None; self.quotas.queues.len()];
        for (q, list) in order.lists.iter().enumerate() {
            if list.is_empty() || blocked.contains(&q) {
                continue;
            }
            let strict = self.quotas.queues[q].queueing == Queueing::Strict;
            let cursor = &mut order.cursor[q];
            if strict {
                while list.get(*cursor).is_some_and(|&j| !self.jobs[j].is_pending()) {
                    *cursor += 1;
                }
                candidate[q] = list.get(*cursor).copied().filter(|&j| self.eligible(j, tried));
            } else {
                while list.get(*cursor).is_some_and(|&j| !self.eligible(j, tried)) {
                    *cursor += 1;
                }
                candidate[q] = list.get(*cursor).copied();
            }
        }
        self.cycle_order = Some(order);
        candidate
    }

    /// Sorts each leaf's waiting jobs by `job_order` (strict leaves: all of them; the
    /// others: those eligible now).
    pub(super) fn build_order(&self, tried: &HashSet<JobId>) -> CycleOrder {
        let view = self.view(None);
        let ctx = self.ctx(&view);
        let engine = self.policy.engine();
        let nkeys = self.policy.program.job_order.len();
        let lists = self
            .waiting
            .iter()
            .enumerate()
            .map(|(q, jobs)| {
                let strict = self.quotas.queues[q].queueing == Queueing::Strict;
                let mut keyed: Vec<(JobId, Vec<f64>)> = jobs
                    .iter()
                    .copied()
                    .filter(|&j| strict || self.eligible(j, tried))
                    .map(|j| {
                        let mut k = vec![0.0; nkeys];
                        engine.job_keys(&ctx, &self.job_rec(j), &mut k);
                        (j, k)
                    })
                    .collect();
                keyed.sort_by(|(a, ka), (b, kb)| {
                    compare_keys(&self.policy.program.job_order, ka, kb)
                        .then_with(|| (self.jobs[*a].submitted_ms, a).cmp(&(self.jobs[*b].submitted_ms, b)))
                });
                keyed.into_iter().map(|(j, _)| j).collect()
            })
            .collect();
        CycleOrder { lists, cursor: vec![0; self.waiting.len()] }
    }

    /// The best of `items` by order keys (lexicographic, each ascending or descending;
    /// NaN last), ties broken by `tie`.
    pub(super) fn best_by(
        &self,
        items: &[usize],
        keys: &[OrderKey],
        eval: impl Fn(usize, &mut [f64]),
        tie: impl Fn(usize, usize) -> Ordering,
    ) -> Option<usize> {
        let mut scored: Vec<(usize, Vec<f64>)> = items
            .iter()
            .map(|&i| {
                let mut k = vec![0.0; keys.len()];
                eval(i, &mut k);
                (i, k)
            })
            .collect();
        scored.sort_by(|(a, ka), (b, kb)| compare_keys(keys, ka, kb).then_with(|| tie(*a, *b)));
        scored.first().map(|(i, _)| *i)
    }
}

/// Compares two items' order keys: lexicographic, each ascending or descending, NaN last.
fn compare_keys(keys: &[OrderKey], ka: &[f64], kb: &[f64]) -> Ordering {
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
