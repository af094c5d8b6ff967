//! Head-of-line reservation (decision D9): a job that has waited past the policy's
//! `reserve_after` and still cannot start holds the nodes of its best domain, so a stream
//! of smaller jobs cannot keep taking the capacity it waits for. Other jobs are not
//! placed on held nodes; the hold ends when the job starts, is rejected or finishes.

use crate::fit;
use crate::jobs::JobId;
use crate::model::{DomainId, NodeId};
use crate::scheduler::{Event, Scheduler};
use std::collections::BTreeMap;

impl Scheduler {
    /// Reserves for `job` if it has waited long enough and holds nothing yet.
    pub(crate) fn reserve_if_due(&mut self, job: JobId) {
        let Some(after_s) = self.facts.policy.policy.settings.reserve_after else { return };
        let waited_ms = crate::jobs::since(self.world.now_ms(), self.world.jobs()[job].life.waiting_since_ms);
        if self.world.reservations().contains_key(&job) || (waited_ms as f64) < after_s * 1000.0 {
            return;
        }
        let Some(nodes) = self.best_domain(job) else { return };
        self.world.reserve(job, nodes.clone());
        self.touch();
        self.decided.push(Event::Reserved { job, nodes, at_ms: self.world.now_ms() });
    }

    /// The nodes to hold: among the nodes that pass the filters now and could hold a
    /// replica if empty, grouped by the domains the job's `require` clauses name, the
    /// group that can hold every replica once empty and has the most free GPU now; in it,
    /// the nodes with the most free GPU, as many as the job needs.
    fn best_domain(&self, job: JobId) -> Option<Vec<NodeId>> {
        let j = &self.world.jobs()[job];
        let view = self.placement_view(job);
        let ctx = self.ctx(&view);
        let rec = self.job_rec(job);
        let mut usable: Vec<NodeId> = Vec::new();
        self.scan(&ctx, &rec, None, |i, r| {
            let node = &self.world.cluster().nodes[i];
            if r.feasible
                && node.up
                && (j.ask.models.is_empty() || j.ask.models.contains(&node.model))
                && !self.reserved_for_other(i, job)
                && fit::capacity_when_empty(node, j) > 0
            {
                usable.push(i);
            }
        });
        let mut levels: Vec<u8> = if j.ask.replicas > 1 {
            self.gang_clauses(&ctx, &rec).iter().filter(|c| c.require).map(|c| c.level).collect()
        } else {
            Vec::new()
        };
        levels.sort_unstable();
        levels.dedup();
        let mut scopes: BTreeMap<Vec<DomainId>, Vec<NodeId>> = BTreeMap::new();
        for n in usable {
            let key = levels
                .iter()
                .map(|&l| self.world.cluster().nodes[n].domains.get(usize::from(l)).copied().unwrap_or(DomainId::MAX))
                .collect();
            scopes.entry(key).or_default().push(n);
        }
        let mut best: Option<(u64, Vec<NodeId>)> = None;
        for mut nodes in scopes.into_values() {
            nodes.sort_by_key(|&n| (std::cmp::Reverse(self.world.cluster().nodes[n].free_milli()), n));
            let (mut room, mut free, mut taken) = (0u64, 0u64, Vec::new());
            for n in nodes {
                if room >= u64::from(j.ask.replicas) {
                    break;
                }
                room += u64::from(fit::capacity_when_empty(&self.world.cluster().nodes[n], j));
                free += self.world.cluster().nodes[n].free_milli();
                taken.push(n);
            }
            if room >= u64::from(j.ask.replicas) && best.as_ref().is_none_or(|(f, _)| free > *f) {
                taken.sort_unstable();
                best = Some((free, taken));
            }
        }
        best.map(|(_, nodes)| nodes)
    }
}
