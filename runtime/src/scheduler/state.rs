//! Changes to the cluster and the jobs' state, each keeping the indexes of waiting and
//! running jobs, the node and domain records, the quota accounting and the retry caches
//! in step.

use super::{Event, Scheduler};
use crate::fit;
use crate::jobs::{JobId, QueueId, State};
use crate::model::{NodeId, NodeSpec, SpecError};
use crate::quota::{self, Amounts, Res};
use crate::records;
use gpol_compiler::schema::{DomainRec, Sym};

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
        let capacity = self.governed_capacity();
        self.world.quotas.set_capacity(capacity);
        self.capacity_changed();
    }

    /// The capacity of the nodes in service of each resource the quota tree governs
    /// (per GPU model too): what a root's unset guarantee stands for.
    fn governed_capacity(&self) -> Amounts {
        let totals = self.totals();
        let mut capacity = Amounts::new();
        for r in self.world.quotas.governed() {
            let amount = match r {
                Res::Model(m) => self
                    .world
                    .cluster
                    .nodes
                    .iter()
                    .filter(|n| n.up && n.model == m)
                    .map(|n| n.cards.len() as i64 * i64::from(crate::model::MILLI))
                    .sum(),
                r => totals.get(&r).copied().unwrap_or(0),
            };
            capacity.insert(r, amount);
        }
        capacity
    }

    /// How many replicas of the job the nodes in service (of its models) could hold if
    /// they were empty; 0 when none could hold even one.
    pub(crate) fn room_when_empty(&self, job: JobId) -> u64 {
        let j = &self.world.jobs[job];
        self.caches.room_when_empty(self.world.jobs.shape(job), || {
            self.world
                .cluster
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
        let id = self.world.cluster.add_node(spec, &mut self.world.syms)?;
        let node = &self.world.cluster.nodes[id];
        let labels = records::label_slots(&node.labels, &self.facts.node_label_keys);
        self.world.table.push(records::node_rec(node), records::node_cards(node), labels);
        // New domains get their records from the refresh, like the node's other domains.
        self.world.domains.resize(self.world.cluster.domains.len(), DomainRec::default());
        self.refresh_node(id);
        self.service_changed();
        Ok(id)
    }

    /// Brings node `id`'s record and its domains' records up to date.
    pub(crate) fn refresh_node(&mut self, id: NodeId) {
        let node = &self.world.cluster.nodes[id];
        self.world.table.set(id, records::node_rec(node));
        for (slot, c) in self.world.table.cards_mut(id).iter_mut().zip(records::node_cards(node)) {
            *slot = c;
        }
        for d in node.domains.iter().filter(|d| **d != u32::MAX) {
            if let Some(rec) = self.world.domains.get_mut(*d as usize) {
                *rec = records::domain_rec(&self.world.cluster.domains[*d as usize]);
            }
        }
    }

    /// Binds one replica on `node`, its cards chosen by the policy's `card_score` rules
    /// (if `scored` and it has any) or by built-in best fit.
    pub(super) fn bind_replica(&mut self, job: JobId, node: NodeId, scored: bool) {
        let cards = if scored {
            self.choose_cards(job, node)
        } else {
            fit::choose(&self.world.cluster.nodes[node], &self.world.jobs[job], None)
        };
        let Some(cards) = cards else {
            // Placement and `start_on` only bind where the replica fits.
            gpol_compiler::never!("job {job} bound to node {node}, where it does not fit");
            return;
        };
        let slot = fit::bind(&mut self.world.cluster, node, &self.world.jobs[job], &cards);
        self.world.jobs[job].holding.slots.push(slot);
        self.refresh_node(node);
    }

    /// Charges a running job whose replicas changed for what they hold now, refunding
    /// what it was charged before.
    fn recharge(&mut self, job: JobId) {
        let models: Vec<Sym> =
            self.world.jobs[job].holding.slots.iter().map(|s| self.world.cluster.nodes[s.node].model).collect();
        let j = &self.world.jobs[job];
        let (before, after) = (j.holding.charged.clone(), quota::placement_demand(j, &models));
        self.world.quotas.charge(j.ask.queue, j.ask.user, &before, -1);
        self.world.quotas.charge(j.ask.queue, j.ask.user, &after, 1);
        self.world.jobs[job].holding.charged = after;
    }

    /// Adds one replica of a running job on `node`, charged for what it then holds.
    pub(super) fn add_replica(&mut self, job: JobId, node: NodeId) {
        self.world.quotas.advance_usage(self.world.now_ms);
        self.bind_replica(job, node, true);
        self.recharge(job);
        if self.world.jobs[job].holding.slots.len() >= self.world.jobs[job].ask.replicas as usize {
            self.world.short_gangs.remove(&job);
        }
        self.note_alloc_change(job);
        // A victim holding more may now be enough for a claimant that found too little:
        // for the searches that wait on it, a replica is a start.
        self.note_start(job);
    }

    /// Charges a job that just started with what its replicas hold.
    pub(super) fn charge(&mut self, job: JobId) {
        let models: Vec<Sym> =
            self.world.jobs[job].holding.slots.iter().map(|s| self.world.cluster.nodes[s.node].model).collect();
        let j = &self.world.jobs[job];
        let charged = quota::placement_demand(j, &models);
        self.world.quotas.charge(j.ask.queue, j.ask.user, &charged, 1);
        self.world.quotas.count(j.ask.queue, -1, 1, quota::requested_gpu(j));
        self.world.jobs[job].holding.charged = charged;
        self.note_alloc_change(job);
    }

    /// Frees what a running job holds and refunds its quota; its state is the caller's.
    pub(super) fn release(&mut self, job: JobId) {
        self.lift(job);
        self.epochs.note_release();
        self.note_alloc_change(job);
        self.world.jobs[job].holding.slots.clear();
        self.world.jobs[job].holding.charged.clear();
        self.capacity_changed();
    }

    /// Gives back what a running job holds, keeping its slots so `restore` can take
    /// them again exactly (the victim search tries evictions this way).
    pub(crate) fn lift(&mut self, job: JobId) {
        let slots = std::mem::take(&mut self.world.jobs[job].holding.slots);
        for s in &slots {
            fit::apply(&mut self.world.cluster, &self.world.jobs[job], s, false);
            self.refresh_node(s.node);
        }
        self.world.jobs[job].holding.slots = slots;
        let j = &self.world.jobs[job];
        self.world.quotas.charge(j.ask.queue, j.ask.user, &j.holding.charged, -1);
    }

    /// Gives back what one replica (slot `k`) of a running job holds, charged `demand`,
    /// keeping the slot so `restore_slot` can take it again.
    pub(crate) fn lift_slot(&mut self, job: JobId, k: usize, demand: &quota::Amounts) {
        let Some(slot) = self.world.jobs[job].holding.slots.get(k).cloned() else { return };
        fit::apply(&mut self.world.cluster, &self.world.jobs[job], &slot, false);
        self.refresh_node(slot.node);
        let j = &self.world.jobs[job];
        self.world.quotas.charge(j.ask.queue, j.ask.user, demand, -1);
    }

    /// Undoes `lift_slot`.
    pub(crate) fn restore_slot(&mut self, job: JobId, k: usize, demand: &quota::Amounts) {
        let Some(slot) = self.world.jobs[job].holding.slots.get(k).cloned() else { return };
        fit::apply(&mut self.world.cluster, &self.world.jobs[job], &slot, true);
        self.refresh_node(slot.node);
        let j = &self.world.jobs[job];
        self.world.quotas.charge(j.ask.queue, j.ask.user, demand, 1);
    }

    /// Takes replica `k` from a running elastic gang, which keeps running with the rest;
    /// the GPU-seconds that replica loses (its GPUs × the time since the job's last
    /// checkpoint).
    pub(super) fn remove_replica(&mut self, job: JobId, k: usize) -> Option<(NodeId, f64)> {
        if k >= self.world.jobs[job].holding.slots.len() {
            return None;
        }
        self.world.quotas.advance_usage(self.world.now_ms);
        let (_, lost) = self.world.jobs[job].progress_ms(self.world.now_ms);
        let slot = self.world.jobs[job].holding.slots.remove(k);
        fit::apply(&mut self.world.cluster, &self.world.jobs[job], &slot, false);
        self.refresh_node(slot.node);
        self.recharge(job);
        self.world.short_gangs.insert(job);
        self.epochs.note_release();
        self.note_alloc_change(job);
        self.capacity_changed();
        Some((slot.node, records::gpus(self.world.jobs[job].ask.request.milli()) * records::seconds(lost)))
    }

    /// Undoes `lift`.
    pub(crate) fn restore(&mut self, job: JobId) {
        let slots = std::mem::take(&mut self.world.jobs[job].holding.slots);
        for s in &slots {
            fit::apply(&mut self.world.cluster, &self.world.jobs[job], s, true);
            self.refresh_node(s.node);
        }
        self.world.jobs[job].holding.slots = slots;
        let j = &self.world.jobs[job];
        self.world.quotas.charge(j.ask.queue, j.ask.user, &j.holding.charged, 1);
    }

    /// A running job finishes and frees what it held; false (and nothing changes) if it
    /// was not running.
    pub fn complete(&mut self, job: JobId) -> bool {
        if self.world.jobs[job].life.state != State::Running {
            return false;
        }
        self.world.quotas.advance_usage(self.world.now_ms);
        self.release(job);
        self.world.quotas.count(self.world.jobs[job].ask.queue, 0, -1, quota::requested_gpu(&self.world.jobs[job]));
        self.set_state(job, State::Finished);
        true
    }

    /// Stops a running job and puts it back in its queue.
    pub(super) fn requeue(&mut self, job: JobId) {
        self.release(job);
        self.world.quotas.count(self.world.jobs[job].ask.queue, 1, -1, quota::requested_gpu(&self.world.jobs[job]));
        // Before it joins a class: what it counts as while it waits.
        let now = self.now();
        let j = &mut self.world.jobs[job];
        j.life.evictions += 1;
        j.life.waiting_since_ms = now;
        self.set_state(job, State::Pending(None));
    }

    /// A node fails: its jobs lose their work since the last checkpoint and wait again
    /// (returned, as `Requeued` events).
    pub fn fail_node(&mut self, node: NodeId) -> Vec<Event> {
        self.world.quotas.advance_usage(self.world.now_ms);
        let victims: Vec<JobId> =
            self.running().filter(|&j| self.world.jobs[j].holding.slots.iter().any(|s| s.node == node)).collect();
        let mut requeued = Vec::with_capacity(victims.len());
        for j in victims {
            let (kept_ms, lost_gpu_s) = self.stop_progress(j);
            self.requeue(j);
            requeued.push(Event::Requeued { job: j, node, kept_ms, lost_gpu_s, at_ms: self.world.now_ms });
        }
        self.world.cluster.set_up(node, false);
        self.refresh_node(node);
        self.service_changed();
        // A reservation that lost a node is given up; its job reserves afresh.
        if let Some(&owner) = self.world.reserved.get(&node) {
            self.unreserve(owner);
        }
        requeued
    }

    /// Takes a node out of service without stopping its jobs: they run to the end, and
    /// nothing new lands there.
    pub fn drain_node(&mut self, node: NodeId) {
        self.world.cluster.set_up(node, false);
        self.refresh_node(node);
        self.service_changed();
        if let Some(&owner) = self.world.reserved.get(&node) {
            self.unreserve(owner);
        }
    }

    /// Puts a failed or drained node back in service.
    pub fn restore_node(&mut self, node: NodeId) {
        self.world.cluster.set_up(node, true);
        self.refresh_node(node);
        self.service_changed();
    }

    /// Sets past usage as of now: queue `q`'s, or with `user`, that user's in leaf `q`
    /// (a test's `usage` step; an adapter restoring history).
    pub fn set_usage(&mut self, q: QueueId, user: Option<&str>, amount: f64) {
        self.world.quotas.advance_usage(self.world.now_ms);
        match user {
            Some(name) => {
                let sym = self.world.syms.intern_counted(name);
                if !self.world.quotas.join_user(q, sym) {
                    // Already known (and held): this intern was one too many.
                    self.world.syms.release(sym);
                }
                self.world.quotas.set_user_usage(q, sym, amount);
            }
            None => self.world.quotas.set_usage(q, amount),
        }
        self.touch();
    }

    /// Changes a queue's quota; waiting jobs are tried again.
    pub fn set_quota(&mut self, q: QueueId, kind: gpol_compiler::syntax::QuotaKind, r: Res, value: Option<i64>) {
        self.world.quotas.set(q, kind, r, value);
        let capacity = self.governed_capacity();
        self.world.quotas.set_capacity(capacity);
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
        let j = &self.world.jobs[job];
        let (kept, lost) = j.progress_ms(self.world.now_ms);
        (kept, records::gpus(j.ask.request.milli() * j.holding.slots.len() as u64) * records::seconds(lost))
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
        self.world.reserved.get(&node).is_some_and(|&owner| owner != job)
    }
}
