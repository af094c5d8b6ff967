//! Changes to the cluster and the jobs' state: the world's own change (which keeps its
//! indexes, records and quota accounting), with the waiting jobs' classes, the epochs and
//! the caches kept in step.

use super::{Event, Scheduler};
use crate::fit;
use crate::jobs::{JobId, State};
use crate::model::{NodeId, SpecError};
use crate::model_records;
use crate::quota::QueueId;
use crate::quota::Res;
use gpol_compiler::spec::NodeSpec;

impl Scheduler {
    /// Capacity freed up: every waiting job may fit now, except those the quota holds
    /// back (`eligible` asks whether their cap gave).
    pub(super) fn capacity_changed(&mut self) {
        let held: Vec<_> = self.waiting.all().filter(|&c| self.waiting.class(c).backoff.is_some()).collect();
        for c in held {
            let backoff = &mut self.waiting.class_mut(c).backoff;
            if backoff.is_some_and(|b| b.quota.is_none()) {
                *backoff = None;
            }
        }
        self.full.clear();
        self.touch();
    }

    /// A node joined, left or returned to service: capacity changed, and so did what the
    /// cluster could ever hold.
    pub(super) fn service_changed(&mut self) {
        self.caches.forget_room_when_empty();
        // Capacity is what an unset root guarantee stands for: who borrows may change.
        self.forget_no_victims();
        self.world.follow_capacity();
        self.capacity_changed();
    }

    /// How many replicas of the job the nodes in service (of its models) could hold if
    /// they were empty; 0 when none could hold even one.
    pub(crate) fn room_when_empty(&self, job: JobId) -> u64 {
        let j = &self.world.jobs()[job];
        self.caches.room_when_empty(self.world.jobs().shape(job), || {
            self.world
                .cluster()
                .nodes
                .iter()
                .filter(|n| n.up && (j.ask.models.is_empty() || j.ask.models.contains(&n.model)))
                .fold(0u64, |sum, n| sum.saturating_add(u64::from(fit::capacity_when_empty(n, j))))
        })
    }

    /// Changes a job's state, keeping the indexes of waiting and running jobs. A waiting
    /// job's reason is its class's (`Scheduler::state`), so it is not stored here.
    pub(crate) fn set_state(&mut self, job: JobId, state: State) {
        let now_pending = matches!(state, State::Pending(_));
        let was_pending = self.world.set_job_state(job, state);
        if was_pending && !now_pending {
            self.waiting.leave(job);
        }
        self.touch();
        if now_pending && !was_pending {
            self.enqueue(job);
        }
        if !now_pending {
            self.unreserve(job);
        }
    }

    pub fn add_node(&mut self, spec: &NodeSpec) -> Result<NodeId, SpecError> {
        let id = self.world.add_node(spec, &self.facts.node_label_keys)?;
        self.service_changed();
        Ok(id)
    }

    /// Binds one replica on `node`, its cards chosen by the policy's `card_score` rules
    /// (if `scored` and it has any) or by built-in best fit.
    pub(super) fn bind_replica(&mut self, job: JobId, node: NodeId, scored: bool) {
        let cards = if scored {
            self.choose_cards(job, node)
        } else {
            fit::choose(&self.world.cluster().nodes[node], &self.world.jobs()[job], None)
        };
        let Some(cards) = cards else {
            // Placement and `start_on` only bind where the replica fits.
            gpol_compiler::never!("job {job} bound to node {node}, where it does not fit");
            return;
        };
        self.world.bind(job, node, &cards);
    }

    /// Adds one replica of a running job on `node`, charged for what it then holds.
    pub(super) fn add_replica(&mut self, job: JobId, node: NodeId) {
        self.world.advance_usage();
        self.bind_replica(job, node, true);
        self.world.grew(job);
        self.note_alloc_change(job);
        // A victim holding more may now be enough for a claimant that found too little:
        // for the searches that wait on it, a replica is a start.
        self.note_start(job);
    }

    /// Charges a job that just started with what its replicas hold.
    pub(super) fn charge(&mut self, job: JobId) {
        self.world.charge(job);
        self.note_alloc_change(job);
    }

    /// Frees what a running job holds and refunds its quota; its state is the caller's.
    pub(super) fn release(&mut self, job: JobId) {
        self.world.lift(job);
        self.epochs.note_release();
        self.note_alloc_change(job);
        self.world.clear_holding(job);
        self.capacity_changed();
    }

    /// Takes replica `k` from a running elastic gang, which keeps running with the rest;
    /// the GPU-seconds that replica loses (its GPUs × the time since the job's last
    /// checkpoint).
    pub(super) fn remove_replica(&mut self, job: JobId, k: usize) -> Option<(NodeId, f64)> {
        let (node, lost) = self.world.remove_replica(job, k)?;
        self.epochs.note_release();
        self.note_alloc_change(job);
        self.capacity_changed();
        Some((node, model_records::gpus(self.world.jobs()[job].ask.request.milli()) * model_records::seconds(lost)))
    }

    /// A running job finishes and frees what it held; false (and nothing changes) if it
    /// was not running.
    pub fn complete(&mut self, job: JobId) -> bool {
        if self.world.jobs()[job].life.state != State::Running {
            return false;
        }
        self.world.advance_usage();
        self.release(job);
        self.set_state(job, State::Finished);
        true
    }

    /// Stops a running job and puts it back in its queue.
    pub(super) fn requeue(&mut self, job: JobId) {
        self.release(job);
        // Before it joins a class: what it counts as while it waits.
        self.world.note_requeued(job);
        self.set_state(job, State::Pending(None));
    }

    /// A node fails: its jobs lose their work since the last checkpoint and wait again
    /// (returned, as `Requeued` events).
    pub fn fail_node(&mut self, node: NodeId) -> Vec<Event> {
        self.world.advance_usage();
        let victims: Vec<JobId> =
            self.running().filter(|&j| self.world.jobs()[j].holding.slots.iter().any(|s| s.node == node)).collect();
        let mut requeued = Vec::with_capacity(victims.len());
        for j in victims {
            let (kept_ms, lost_gpu_s) = self.stop_progress(j);
            self.requeue(j);
            requeued.push(Event::Requeued { job: j, node, kept_ms, lost_gpu_s, at_ms: self.world.now_ms() });
        }
        self.world.set_node_up(node, false);
        self.service_changed();
        // A reservation that lost a node is given up; its job reserves afresh.
        if let Some(owner) = self.world.reserved_for(node) {
            self.unreserve(owner);
        }
        requeued
    }

    /// Takes a node out of service without stopping its jobs: they run to the end, and
    /// nothing new lands there.
    pub fn drain_node(&mut self, node: NodeId) {
        self.world.set_node_up(node, false);
        self.service_changed();
        if let Some(owner) = self.world.reserved_for(node) {
            self.unreserve(owner);
        }
    }

    /// Puts a failed or drained node back in service.
    pub fn restore_node(&mut self, node: NodeId) {
        self.world.set_node_up(node, true);
        self.service_changed();
    }

    /// Sets past usage as of now: queue `q`'s, or with `user`, that user's in leaf `q`
    /// (a test's `usage` step; an adapter restoring history).
    pub(crate) fn set_usage(&mut self, q: QueueId, user: Option<&str>, amount: f64) {
        self.world.set_usage(q, user, amount);
        self.touch();
    }

    /// Changes a queue's quota; waiting jobs are tried again.
    pub fn set_quota(&mut self, q: QueueId, kind: gpol_compiler::ir::QuotaKind, r: Res, value: Option<i64>) {
        self.world.set_quota(q, kind, r, value);
        let classes: Vec<_> = self.waiting.all().collect();
        for c in classes {
            self.waiting.class_mut(c).backoff = None;
        }
        self.forget_no_victims();
        self.capacity_changed();
    }

    /// What stopping a running job now keeps of its work (ms since it started) and loses
    /// (GPU-seconds: its GPUs times the time since its last checkpoint).
    pub(super) fn stop_progress(&self, job: JobId) -> (u64, f64) {
        let j = &self.world.jobs()[job];
        let (kept, lost) = j.progress_ms(self.world.now_ms());
        (kept, model_records::gpus(j.ask.request.milli() * j.holding.slots.len() as u64) * model_records::seconds(lost))
    }

    /// Releases the nodes a job holds in reserve.
    pub(super) fn unreserve(&mut self, job: JobId) {
        if self.world.unreserve(job) {
            // Nodes held for one job are free for the others again, even for jobs that
            // already failed their turn in this cycle.
            self.capacity_changed();
            self.waiting.unpark();
        }
    }

    /// Whether `node` is held for a job other than `job`.
    pub(crate) fn reserved_for_other(&self, node: NodeId, job: JobId) -> bool {
        self.world.reserved_for(node).is_some_and(|owner| owner != job)
    }
}
