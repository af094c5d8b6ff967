//! When a class of waiting jobs that failed is tried again: not while nothing has changed,
//! and then not until something that could change its answer happens — capacity frees,
//! the quota cap that held it back gives, a job starts that could be its victim, or (when
//! time matters) the retry interval passes. A class whose victim search found no
//! candidate at all waits, as in a policy without victim rules, until what could give it
//! one happens or its quota cap gives.

use super::Scheduler;
use super::rank::ClassId;
use crate::fit;
use crate::jobs::{JobId, Reason};
use crate::quota::Block;
use crate::quota::QueueId;
use crate::scheduler::preempt::Watch;
use gpol_compiler::schema::Sym;

/// A victim search that found no candidate (or none enough for the quota): what could
/// give one, and the counts of starts, allocation changes and releases it saw.
#[derive(Clone, Debug)]
pub(super) struct NoVictims {
    watch: Watch,
    starts: u64,
    changes: u64,
    releases: u64,
}

/// A failed class's wait: when it failed, how many jobs had started by then, and if the
/// quota held it back, the cap that did and the room that cap had left.
#[derive(Clone, Copy, Debug)]
pub(super) struct Backoff {
    pub(super) at_ms: u64,
    pub(super) starts: u64,
    pub(super) quota: Option<(Block, i64)>,
}

impl Scheduler {
    /// A class that failed while the policy can evict is retried once another job starts —
    /// but only a start in a queue whose jobs could be its victims can change the answer
    /// when victim rules read nothing but the jobs (`eligible` asks); here the others are
    /// forgotten, so they are not looked at again. (Conservative: a queue counts when its
    /// side borrows anything the tree governs, whatever the guards and the claimant's own
    /// side say.)
    pub(super) fn forget_irrelevant_starts(&mut self) {
        if !self.facts.victims_read_jobs || self.facts.policy.program.victims.is_empty() {
            return;
        }
        let now = self.epochs.starts();
        let waiting: Vec<(ClassId, u64)> = self
            .waiting
            .all()
            .filter_map(|c| self.waiting.class(c).backoff.map(|b| (c, b.starts)))
            .filter(|&(c, starts)| starts < now && !self.new_victims_since(c, starts))
            .collect();
        for (c, _) in waiting {
            if let Some(b) = &mut self.waiting.class_mut(c).backoff {
                b.starts = now;
            }
        }
    }

    /// For a job the quota holds back whatever the nodes, the cap that does and the room
    /// it has left: until that room grows, freed capacity cannot help it. Not when
    /// evictions could help (freed nodes can complete a set of victims that satisfies the
    /// quota) — unless its class's latest victim search found no candidate and nothing
    /// that could give one has happened — nor for an elastic gang (a smaller count meets
    /// other caps).
    pub(super) fn quota_cap(&self, job: JobId, reason: &Reason) -> Option<(Block, i64)> {
        let j = &self.world.jobs()[job];
        // Evictions cannot help while the class's latest search found no candidate and
        // nothing that could give it one has happened.
        let evicts = !self.facts.policy.program.victims.is_empty() && !self.still_no_victims(job);
        if !matches!(reason, Reason::Quota(_)) || j.ask.min_replicas != j.ask.replicas || evicts {
            return None;
        }
        let block = self.quota_replicas(job).err()?;
        Some((block, self.world.quotas().room(block, j.ask.user)))
    }

    /// Whether a job started, after the `starts`-th start, in a queue whose jobs could be
    /// victims for class `c`.
    pub(super) fn new_victims_since(&self, c: ClassId, starts: u64) -> bool {
        if !self.facts.victims_read_jobs {
            return true;
        }
        let class = self.waiting.class(c);
        // A claimant that needs nothing the tree governs may preempt in any queue.
        (0..self.epochs.queues())
            .filter(|&q| {
                self.world.quotas().queues[q].place.children.is_empty() && self.epochs.started_under(q) > starts
            })
            .any(|q| !class.governed || self.may_hold_victims(class.queue, q))
    }

    /// Counts a start: the job's queues have new jobs to judge as victims.
    pub(super) fn note_start(&mut self, job: JobId) {
        self.epochs.note_start(self.world.quotas().path(self.world.jobs()[job].ask.queue));
    }

    /// Counts a change of the allocation of the job's leaf.
    pub(super) fn note_alloc_change(&mut self, job: JobId) {
        self.epochs.note_alloc_change(self.world.jobs()[job].ask.queue);
    }

    /// Records, for a job's class, that a victim search found no candidate, and what could
    /// give it one (if that can be said).
    pub(super) fn note_no_victims(&mut self, job: JobId, watch: Option<Watch>) {
        let watch = watch.filter(|_| self.skip_fruitless_searches);
        let no_victims = watch.map(|watch| NoVictims {
            watch,
            // Jobs this cycle started were not judged: they count as new.
            starts: if self.in_cycle { self.epochs.cycle_starts() } else { self.epochs.starts() },
            changes: self.epochs.alloc_changes(),
            releases: self.epochs.releases(),
        });
        if let Some(c) = self.waiting.class_of(job) {
            self.waiting.class_mut(c).no_victims = no_victims;
        }
    }

    /// Whether a job's class found no candidate at its latest victim search and nothing
    /// that could give it one has happened since.
    pub(super) fn still_no_victims(&self, job: JobId) -> bool {
        self.waiting
            .class_of(job)
            .and_then(|c| self.waiting.class(c).no_victims.as_ref())
            .is_some_and(|nv| !self.watch_fired(nv))
    }

    fn watch_fired(&self, nv: &NoVictims) -> bool {
        let w = &nv.watch;
        let epochs = &self.epochs;
        w.starts.iter().any(|&q| epochs.started_under(q) > nv.starts)
            || w.borrowers.iter().any(|&q| epochs.started_under(q) > nv.starts && self.borrows_governed(q))
            || w.changes.iter().any(|&q| epochs.changed_at(q) > nv.changes)
            || (w.releases && epochs.releases() > nv.releases)
            || w.within.as_ref().is_some_and(|(q, needs)| {
                let leaf = &self.world.quotas().queues[*q];
                needs.iter().all(|&(r, a)| leaf.get(&leaf.load.alloc, r) + a <= leaf.get(&leaf.quota.guarantee, r))
            })
    }

    /// [`crate::quota::Quotas::room`]; a cohort's, which walks the tree, worked out once
    /// per quota version and queue (waiting classes ask after every change).
    fn room(&self, block: Block, user: Sym) -> i64 {
        let Block::Cohort { queue, res, .. } = block else { return self.world.quotas().room(block, user) };
        let version = self.world.quotas().version();
        self.caches.cohort_room(version, queue, res, || self.world.quotas().room(block, user))
    }

    /// Whether queue `q` holds more than its guarantee of something the tree governs.
    /// Worked out for every queue once per quota version: waiting classes ask it of the
    /// same few queues after every change.
    fn borrows_governed(&self, q: QueueId) -> bool {
        let quotas = &self.world.quotas();
        self.caches.borrows(quotas.version(), q, || {
            quotas
                .queues
                .iter()
                .map(|queue| {
                    queue
                        .load
                        .alloc
                        .iter()
                        .any(|(&r, &a)| quotas.is_constrained(r) && a > queue.get(&queue.quota.guarantee, r))
                })
                .collect()
        })
    }

    /// Whether a class whose victim search found no candidate waits until something that
    /// could give it one happens (on by default; off, it is retried after every start, as
    /// when victim rules read what the watch cannot follow).
    pub fn skip_fruitless_searches(&mut self, on: bool) {
        self.skip_fruitless_searches = on;
        if !on {
            self.forget_no_victims();
        }
    }

    /// Forgets what every class's latest victim search found: the quotas changed.
    pub(super) fn forget_no_victims(&mut self) {
        let classes: Vec<ClassId> = self.waiting.all().collect();
        for c in classes {
            self.waiting.class_mut(c).no_victims = None;
        }
    }

    /// Whether jobs of queue `vq` could ever be victims for a claimant of `cq` as the
    /// quotas stand: its own queue, or a queue whose side borrows.
    pub(super) fn may_hold_victims(&self, cq: QueueId, vq: QueueId) -> bool {
        let quotas = &self.world.quotas();
        if cq == vq {
            return true;
        }
        let top = quotas.common_ancestor(cq, vq);
        quotas.path_below(vq, top).last().is_none_or(|&side| self.borrows_governed(side))
    }

    /// Whether a class is not tried because no node can take its shape. A class is always
    /// tried once, so it learns its own reason; one found unschedulable keeps that reason.
    pub(super) fn skipped_as_full(&self, c: ClassId) -> bool {
        let class = self.waiting.class(c);
        // Evictions could make room for a shape no node can take as things are.
        !self.facts.time_matters
            && self.facts.policy.program.victims.is_empty()
            && self.full.contains(&class.shape)
            && matches!(class.reason, Some(r) if !matches!(r, Reason::Unschedulable(_)))
    }

    /// Marks the job's shape full if no node in service could take one replica now.
    pub(super) fn note_if_full(&mut self, job: JobId) {
        let j = &self.world.jobs()[job];
        let takes =
            |n: &crate::model::Node| (j.ask.models.is_empty() || j.ask.models.contains(&n.model)) && fit::fits(n, j);
        if !self.world.cluster().nodes.iter().any(takes) {
            self.full.insert(self.world.jobs().shape(job));
        }
    }

    /// Whether a class's job, holding no reservation, has waited `reserve_after` since
    /// `failed_ms` (its failed attempt came before it could reserve; the next one may).
    /// With `reserve_after` each job is a class of its own.
    fn came_due_since(&self, c: ClassId, failed_ms: u64) -> bool {
        let Some(after_s) = self.facts.policy.policy.settings.reserve_after else { return false };
        let Some(job) = self.waiting.class(c).members.first().map(super::rank::job_of) else { return false };
        // The first whole ms at which `reserve_if_due` reserves.
        let due = self.world.jobs()[job].life.waiting_since_ms.saturating_add((after_s * 1000.0).ceil() as i64);
        let failed = i64::try_from(failed_ms).unwrap_or(i64::MAX);
        !self.world.reservations().contains_key(&job) && failed < due && self.now() >= due
    }

    /// Whether a class's jobs can take a turn: not while the state its latest attempt
    /// failed in stands, nor while its backoff holds, nor while its shape is full.
    pub(super) fn eligible(&self, c: ClassId) -> bool {
        let class = self.waiting.class(c);
        if class.failed_at == Some(self.epochs.version()) {
            return false;
        }
        let retry =
            |at: u64| self.world.now_ms() > at && self.world.now_ms() >= at.saturating_add(self.retry_interval_ms);
        let evicts = !self.facts.policy.program.victims.is_empty();
        let backed_off = class.backoff.is_some_and(|b| {
            let cap_gave = b.quota.is_some_and(|(block, room)| self.room(block, class.user) > room);
            !(cap_gave
                || (self.facts.retry_on_time && retry(b.at_ms))
                || self.came_due_since(c, b.at_ms)
                || match &class.no_victims {
                    Some(nv) => self.watch_fired(nv),
                    None => evicts && self.epochs.starts() > b.starts && self.new_victims_since(c, b.starts),
                })
        });
        !backed_off && !self.skipped_as_full(c)
    }
}
