//! Elastic growth: a gang that started with fewer replicas than it asks for (between
//! `min_replicas` and `replicas`) takes more as capacity frees, one replica at a time, on
//! the best node its filters and scores allow, within its quota and within the domains
//! its `require` clauses hold its replicas to. Growth comes after every waiting job has
//! had its turn in a cycle, and only while none of them waits for capacity: freed
//! capacity goes to waiting jobs first (a grown replica can be taken back only where a
//! victim rule allows it).

use super::{Event, Scheduler};
use crate::jobs;
use crate::jobs::{JobId, Reason};
use crate::model::NodeId;
use std::cmp::Reverse;

impl Scheduler {
    /// Adds replicas to running elastic gangs where capacity, quota and the policy allow
    /// (highest priority, then earliest started, first); how many were added.
    pub(super) fn grow(&mut self) -> usize {
        if self.world.short_gangs().is_empty() || self.waits_for_capacity() {
            return 0;
        }
        let short =
            |s: &Scheduler, j: JobId| s.world.jobs()[j].holding.slots.len() < s.world.jobs()[j].ask.replicas as usize;
        let mut growing: Vec<JobId> = self.world.short_gangs().iter().copied().collect();
        if growing.is_empty() {
            return 0;
        }
        growing.sort_by_key(|&j| {
            (
                Reverse(crate::scheduler::rank::ordered(self.world.jobs()[j].ask.priority)),
                self.world.jobs()[j].life.started_ms,
                j,
            )
        });
        let mut added = 0;
        for job in growing {
            while short(self, job) {
                let j = &self.world.jobs()[job];
                if self.world.quotas().admissible(j.ask.queue, j.ask.user, &jobs::replicas_demand(j, 1, None)).is_err()
                {
                    break;
                }
                let among = self.growth_nodes(job);
                let Ok(node) = self.best_node(job, among.as_deref(), 1) else { break };
                self.add_replica(job, node);
                self.decided.push(Event::Grown { job, node, at_ms: self.world.now_ms() });
                added += 1;
            }
        }
        added
    }

    /// Whether some waiting job's latest turn failed for want of capacity.
    fn waits_for_capacity(&self) -> bool {
        self.waiting.all().any(|c| matches!(self.waiting.class(c).reason, Some(Reason::Capacity | Reason::Gang)))
    }

    /// The nodes a new replica may take: those sharing, at every level a `require`
    /// clause names, the domain the job's replicas are in (`None`: any node).
    fn growth_nodes(&self, job: JobId) -> Option<Vec<NodeId>> {
        let view = self.placement_view_for(job, 1);
        let ctx = self.ctx(&view);
        let clauses = self.gang_clauses(&ctx, &self.job_rec(job));
        let first = self.world.jobs()[job].holding.slots.first()?.node;
        let domain = |n: NodeId, level: u8| self.world.cluster().nodes[n].domains.get(usize::from(level)).copied();
        let levels: Vec<(u8, Option<u32>)> =
            clauses.iter().filter(|c| c.require).map(|c| (c.level, domain(first, c.level))).collect();
        if levels.is_empty() {
            return None;
        }
        let mut nodes: Option<Vec<NodeId>> = None;
        for (level, d) in levels {
            // Nodes outside every domain of a level make one scope of their own, as when
            // the gang was placed.
            let members: Vec<NodeId> = match d.and_then(|d| self.world.cluster().domains.get(d as usize)) {
                Some(d) => d.nodes.clone(),
                None => (0..self.world.cluster().nodes.len()).filter(|&n| domain(n, level) == d).collect(),
            };
            nodes = Some(match nodes {
                None => members,
                Some(n) => n.into_iter().filter(|x| members.contains(x)).collect(),
            });
        }
        nodes.map(|mut n| {
            n.sort_unstable();
            n
        })
    }
}
