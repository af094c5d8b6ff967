//! The state the scheduler schedules: the cluster, the quota tree and its accounting, the
//! jobs, the clock, reservations, and the records rules read of the nodes and domains.
//! Invariants: `running` and `short_gangs` hold exactly the running jobs and the running
//! elastic gangs below their count, and the queues' counts of waiting and running jobs
//! follow the jobs' states; `reservations` and `reserved` are each other's inverse;
//! `table` and `domains` mirror the cluster's nodes and domains; a running job is charged
//! for what its slots hold. Its fields are private: others read them through accessors
//! and change them through the methods here, which keep those invariants.

use super::ClockLimit;
use super::intake::Resolved;
use crate::fit;
use crate::job_store::JobStore;
use crate::jobs;
use crate::jobs::{Flags, Holding, Job, JobAsk, JobId, Life, Shape, State};
use crate::model::{Cluster, NodeId, SpecError};
use crate::model_records;
use crate::quota::QueueId;
use crate::quota::{Amounts, Quotas, Res};
use crate::symbols::Symbols;
use crate::wall::WallClock;
use gpol_compiler::clock::Clock;
use gpol_compiler::ir::QuotaKind;
use gpol_compiler::limits::MAX_CLOCK_MS;
use gpol_compiler::schema::{DomainRec, NodeTable, ShapeTable, Sym};
use gpol_compiler::spec::NodeSpec;
use gpol_compiler::spec::{History, JobSpec};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone)]
pub(crate) struct World {
    syms: Symbols,
    cluster: Cluster,
    quotas: Quotas,
    jobs: JobStore,
    now_ms: u64,
    /// Where `now_ms` falls in real time, in the policy's time zone.
    clock: Clock,
    /// The records rules read of the nodes (and their cards) and of the domains.
    table: NodeTable,
    domains: Vec<DomainRec>,
    /// The workload's popular request shapes (`cluster.task_shapes`), set by whoever
    /// knows the workload (the simulator, from its trace).
    task_shapes: ShapeTable,
    /// Every request shape seen, numbered in order of first sight.
    shapes: HashMap<Shape, usize>,
    /// The running jobs, so nothing scans finished ones.
    running: BTreeSet<JobId>,
    /// The running elastic gangs with fewer replicas than they ask for (they may grow),
    /// so growth does not scan every running job at every cycle.
    short_gangs: BTreeSet<JobId>,
    /// Nodes held for a job that waited past `reserve_after`, by job and by node.
    reservations: BTreeMap<JobId, Vec<NodeId>>,
    reserved: HashMap<NodeId, JobId>,
    /// Whether users' usage is kept (rules read it, or a test's expectations may).
    users_tracked: bool,
}

// Reads. Small and asked at every turn: inlined, as the fields they stand for were.
impl World {
    /// An empty cluster and no jobs, under the quota tree `quotas`.
    pub(super) fn new(syms: Symbols, quotas: Quotas, cluster: Cluster, clock: Clock, users_tracked: bool) -> World {
        World {
            syms,
            cluster,
            quotas,
            jobs: JobStore::default(),
            now_ms: 0,
            clock,
            table: NodeTable::default(),
            domains: Vec::new(),
            task_shapes: ShapeTable::default(),
            shapes: HashMap::new(),
            running: BTreeSet::new(),
            short_gangs: BTreeSet::new(),
            reservations: BTreeMap::new(),
            reserved: HashMap::new(),
            users_tracked,
        }
    }

    #[inline]
    pub(crate) fn syms(&self) -> &Symbols {
        &self.syms
    }

    #[inline]
    pub(crate) fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    #[inline]
    pub(crate) fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    #[inline]
    pub(crate) fn jobs(&self) -> &JobStore {
        &self.jobs
    }

    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The clock as a signed time, to compare with jobs' times.
    #[inline]
    pub(crate) fn now(&self) -> i64 {
        i64::try_from(self.now_ms).unwrap_or(i64::MAX)
    }

    #[inline]
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    #[inline]
    pub(crate) fn table(&self) -> &NodeTable {
        &self.table
    }

    #[inline]
    pub(crate) fn domains(&self) -> &[DomainRec] {
        &self.domains
    }

    #[inline]
    pub(crate) fn task_shapes(&self) -> &ShapeTable {
        &self.task_shapes
    }

    /// The running jobs, in submission order.
    #[inline]
    pub(crate) fn running(&self) -> &BTreeSet<JobId> {
        &self.running
    }

    /// The running elastic gangs below their count.
    #[inline]
    pub(crate) fn short_gangs(&self) -> &BTreeSet<JobId> {
        &self.short_gangs
    }

    /// The nodes held for each job that waited past `reserve_after`.
    #[inline]
    pub(crate) fn reservations(&self) -> &BTreeMap<JobId, Vec<NodeId>> {
        &self.reservations
    }

    /// The job node `node` is held for, if any.
    #[inline]
    pub(crate) fn reserved_for(&self, node: NodeId) -> Option<JobId> {
        self.reserved.get(&node).copied()
    }

    /// Capacity of the nodes in service, per resource.
    pub(crate) fn totals(&self) -> Amounts {
        let c = self.cluster.capacity;
        Amounts::from([(Res::Gpu, c.gpu_milli as i64), (Res::Cpu, c.cpu_milli as i64), (Res::Mem, c.mem as i64)])
    }
}

// The clock, the seed and what drivers set.
impl World {
    /// Moves the clock `ms` forward, usage with it; refused past [`MAX_CLOCK_MS`], the
    /// clock unmoved.
    pub(super) fn advance(&mut self, ms: u64) -> Result<(), ClockLimit> {
        let to = self.now_ms.checked_add(ms).filter(|&t| t <= MAX_CLOCK_MS);
        self.now_ms = to.ok_or(ClockLimit { now_ms: self.now_ms, by_ms: ms })?;
        self.quotas.advance_usage(self.now_ms);
        Ok(())
    }

    /// Brings decayed usage up to the clock.
    #[inline]
    pub(super) fn advance_usage(&mut self) {
        self.quotas.advance_usage(self.now_ms);
    }

    /// Puts in force the quota amounts of the local time now (quota windows); whether
    /// they changed.
    pub(super) fn follow_quota_windows(&mut self) -> bool {
        if self.quotas.window_edges().is_empty() {
            return false;
        }
        let minute = self.clock.minute_of_week(self.now_ms);
        self.quotas.set_minute_of_week(minute)
    }

    pub(super) fn reseed(&mut self, seed: u64) {
        self.syms.reseed(seed);
    }

    pub(super) fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    pub(super) fn start_wall_clock(&mut self, wall: WallClock) {
        self.clock.start_at_unix_ms(wall.origin_unix_ms());
    }

    pub(super) fn set_task_shapes(&mut self, shapes: ShapeTable) {
        self.task_shapes = shapes;
    }

    pub(super) fn track_users(&mut self) {
        self.users_tracked = true;
    }
}

// Jobs: submission, state, starts, holdings.
impl World {
    /// Adds a waiting job from `spec`, resolved to `to`, waiting since `since`; its label
    /// values in the slot order of `label_keys`.
    pub(super) fn add_job(&mut self, spec: JobSpec, to: Resolved, since: i64, label_keys: &[Sym]) -> JobId {
        let Resolved { queue, priority } = to;
        // Names, users and label values can be new with every job: they are forgotten with
        // the job. Label keys, models and classes come from small sets, kept for good.
        let labels = spec.labels.iter().map(|(k, v)| (self.syms.intern(k), self.syms.intern_counted(v))).collect();
        let user = match &spec.user {
            Some(u) => self.syms.intern_counted(u),
            None => self.quotas.queues[queue].place.name_sym,
        };
        // When rules read users' usage, the quota tree keeps each user's for good (it is
        // history), and holds the name too.
        if self.users_tracked && self.quotas.join_user(queue, user) && spec.user.is_some() {
            self.syms.intern_counted(self.syms.name(user).to_string().as_str());
        }
        let ask = JobAsk {
            id: self.syms.intern_counted(&spec.name),
            user,
            queue,
            priority,
            priority_class: spec.priority_class.as_deref().map_or(Sym(0), |c| self.syms.intern(c)),
            request: spec.request,
            replicas: spec.replicas.max(1),
            min_replicas: spec.min_replicas(),
            gpu_mem: spec.gpu_mem,
            cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            models: spec.models.iter().map(|m| self.syms.intern(m)).collect(),
            flags: Flags {
                bursty: spec.bursty,
                latency_critical: spec.latency_critical,
                preemptible: spec.preemptible,
            },
            duration_ms: spec.duration_ms,
            utilization: spec.utilization,
            labels,
            name: spec.name,
        };
        let life = Life {
            state: State::Pending(None),
            submitted_ms: since,
            waiting_since_ms: since,
            started_ms: 0,
            evictions: 0,
            checkpoint_ms: 0,
            checkpoint_every_ms: spec.checkpoint_every_ms,
        };
        let job = Job { ask, life, holding: Holding::default() };
        let labels = model_records::label_slots(&job.ask.labels, label_keys);
        let next = self.shapes.len();
        let shape = *self.shapes.entry(job.shape()).or_insert(next);
        self.quotas.count(job.ask.queue, 1, 0, jobs::requested_gpu(&job));
        self.jobs.push(job, labels, shape)
    }

    /// Drops an ended job's record and the symbols only it held, and returns it; `None`
    /// (and nothing changes) for a waiting or running job.
    pub(super) fn forget(&mut self, job: JobId) -> Option<Job> {
        let ended = self.jobs.get(job).is_some_and(|j| !matches!(j.life.state, State::Pending(_) | State::Running));
        let j = if ended { self.jobs.remove(job)? } else { return None };
        self.syms.release(j.ask.id);
        self.syms.release(j.ask.user);
        for &v in j.ask.labels.values() {
            self.syms.release(v);
        }
        Some(j)
    }

    /// Sets a job's state (a waiting job's without its reason: that is its class's),
    /// keeping `running`, `short_gangs` and its queues' counts of waiting and running
    /// jobs; whether it was waiting before.
    #[inline]
    pub(super) fn set_job_state(&mut self, job: JobId, state: State) -> bool {
        let j = &mut self.jobs[job];
        let (was_pending, was_running) = (j.is_pending(), j.life.state == State::Running);
        let (now_pending, now_running) = (matches!(state, State::Pending(_)), state == State::Running);
        if (was_pending, was_running) != (now_pending, now_running) {
            let delta = |was: bool, now: bool| i32::from(now) - i32::from(was);
            let (pending, running) = (delta(was_pending, now_pending), delta(was_running, now_running));
            self.quotas.count(j.ask.queue, pending, running, jobs::requested_gpu(j));
        }
        if was_running != now_running {
            if now_running {
                self.running.insert(job);
            } else {
                self.running.remove(&job);
            }
        }
        // Running elastic gangs below their count, which may grow.
        if now_running && j.ask.min_replicas < j.ask.replicas && j.holding.slots.len() < j.ask.replicas as usize {
            self.short_gangs.insert(job);
        } else {
            self.short_gangs.remove(&job);
        }
        j.life.state = if now_pending { State::Pending(None) } else { state };
        was_pending
    }

    /// Notes that a job the scheduler placed has just started.
    pub(super) fn note_started(&mut self, job: JobId) {
        let now = self.now();
        let life = &mut self.jobs[job].life;
        life.started_ms = now;
        life.checkpoint_ms = now;
    }

    /// Notes the history of a job found running: it started `ran_ms` ago.
    pub(super) fn note_found_running(&mut self, job: JobId, start: i64, history: History) {
        let History { ran_ms, since_checkpoint_ms, evictions } = history;
        let now = self.now();
        let life = &mut self.jobs[job].life;
        life.started_ms = start;
        life.waiting_since_ms = life.waiting_since_ms.min(start);
        life.submitted_ms = life.submitted_ms.min(start);
        life.checkpoint_ms = now - i64::try_from(since_checkpoint_ms.min(ran_ms)).unwrap_or(i64::MAX);
        life.evictions = evictions;
    }

    /// Notes that a stopped job waits again: one more eviction, waiting from now.
    pub(super) fn note_requeued(&mut self, job: JobId) {
        let now = self.now();
        let life = &mut self.jobs[job].life;
        life.evictions += 1;
        life.waiting_since_ms = now;
    }

    /// Binds one replica of `job` on `node`, on `cards` (which must be free for it).
    pub(super) fn bind(&mut self, job: JobId, node: NodeId, cards: &[(usize, Option<usize>)]) {
        let slot = fit::bind(&mut self.cluster, node, &self.jobs[job], cards);
        self.jobs[job].holding.slots.push(slot);
        self.refresh_node(node);
    }

    /// Charges a job that just started with what its replicas hold.
    pub(super) fn charge(&mut self, job: JobId) {
        let charged = jobs::placement_demand(&self.jobs[job], &self.slot_models(job));
        let j = &self.jobs[job];
        self.quotas.charge(j.ask.queue, j.ask.user, &charged, 1);
        self.jobs[job].holding.charged = charged;
    }

    /// The GPU model of each node the job's replicas are on.
    fn slot_models(&self, job: JobId) -> Vec<Sym> {
        self.jobs[job].holding.slots.iter().map(|s| self.cluster.nodes[s.node].model).collect()
    }

    /// Charges a running job whose replicas changed for what they hold now, refunding
    /// what it was charged before.
    fn recharge(&mut self, job: JobId) {
        let models = self.slot_models(job);
        let j = &self.jobs[job];
        let (before, after) = (j.holding.charged.clone(), jobs::placement_demand(j, &models));
        self.quotas.charge(j.ask.queue, j.ask.user, &before, -1);
        self.quotas.charge(j.ask.queue, j.ask.user, &after, 1);
        self.jobs[job].holding.charged = after;
    }

    /// A running gang has just been bound one more replica: it is charged for it, and
    /// stops being short once it has them all.
    pub(super) fn grew(&mut self, job: JobId) {
        self.recharge(job);
        if self.jobs[job].holding.slots.len() >= self.jobs[job].ask.replicas as usize {
            self.short_gangs.remove(&job);
        }
    }

    /// Takes replica `k` from a running elastic gang, usage brought up to date first; the
    /// gang keeps running with the rest (and may grow again). Returns the node it was on and the work it loses (ms since the
    /// job's last checkpoint). `None` if it has no replica `k`.
    pub(super) fn remove_replica(&mut self, job: JobId, k: usize) -> Option<(NodeId, u64)> {
        if k >= self.jobs[job].holding.slots.len() {
            return None;
        }
        self.advance_usage();
        let (_, lost) = self.jobs[job].progress_ms(self.now_ms);
        let slot = self.jobs[job].holding.slots.remove(k);
        fit::apply(&mut self.cluster, &self.jobs[job], &slot, false);
        self.refresh_node(slot.node);
        self.recharge(job);
        self.short_gangs.insert(job);
        Some((slot.node, lost))
    }

    /// Charges (`sign` 1) or refunds (-1) what a running job is charged, its slots as
    /// they are: a trial, undone with the other sign.
    pub(crate) fn charge_held(&mut self, job: JobId, sign: i64) {
        let j = &self.jobs[job];
        self.quotas.charge(j.ask.queue, j.ask.user, &j.holding.charged, sign);
    }

    /// Gives back what a running job holds (its nodes' capacity and its quota), keeping
    /// its slots and charge so `restore` can take them again exactly (the victim search
    /// tries evictions this way).
    pub(crate) fn lift(&mut self, job: JobId) {
        self.apply_slots(job, false);
        self.charge_held(job, -1);
    }

    /// Undoes `lift`.
    pub(crate) fn restore(&mut self, job: JobId) {
        self.apply_slots(job, true);
        self.charge_held(job, 1);
    }

    /// Takes (`take`) or gives back what each of the job's slots holds on its node.
    fn apply_slots(&mut self, job: JobId, take: bool) {
        let slots = std::mem::take(&mut self.jobs[job].holding.slots);
        for s in &slots {
            fit::apply(&mut self.cluster, &self.jobs[job], s, take);
            self.refresh_node(s.node);
        }
        self.jobs[job].holding.slots = slots;
    }

    /// Gives back what one replica (slot `k`) of a running job holds, charged `demand`,
    /// keeping the slot so `restore_slot` can take it again.
    pub(crate) fn lift_slot(&mut self, job: JobId, k: usize, demand: &Amounts) {
        self.apply_slot(job, k, demand, false);
    }

    /// Undoes `lift_slot`.
    pub(crate) fn restore_slot(&mut self, job: JobId, k: usize, demand: &Amounts) {
        self.apply_slot(job, k, demand, true);
    }

    fn apply_slot(&mut self, job: JobId, k: usize, demand: &Amounts, take: bool) {
        let Some(slot) = self.jobs[job].holding.slots.get(k).cloned() else { return };
        fit::apply(&mut self.cluster, &self.jobs[job], &slot, take);
        self.refresh_node(slot.node);
        let j = &self.jobs[job];
        self.quotas.charge(j.ask.queue, j.ask.user, demand, if take { 1 } else { -1 });
    }

    /// Forgets what a lifted job held: it holds nothing now.
    pub(super) fn clear_holding(&mut self, job: JobId) {
        let holding = &mut self.jobs[job].holding;
        holding.slots.clear();
        holding.charged.clear();
    }
}

// Reservations.
impl World {
    /// Holds `nodes` for `job`.
    pub(crate) fn reserve(&mut self, job: JobId, nodes: Vec<NodeId>) {
        for &n in &nodes {
            self.reserved.insert(n, job);
        }
        self.reservations.insert(job, nodes);
    }

    /// Releases the nodes `job` holds in reserve; whether it held any.
    pub(super) fn unreserve(&mut self, job: JobId) -> bool {
        let Some(nodes) = self.reservations.remove(&job) else { return false };
        for n in nodes {
            self.reserved.remove(&n);
        }
        true
    }
}

// Nodes and quotas.
impl World {
    /// Adds a node, with its record (its label values in the slot order of `label_keys`)
    /// and its new domains'.
    pub(super) fn add_node(&mut self, spec: &NodeSpec, label_keys: &[Sym]) -> Result<NodeId, SpecError> {
        let id = self.cluster.add_node(spec, &mut self.syms)?;
        let node = &self.cluster.nodes[id];
        let labels = model_records::label_slots(&node.labels, label_keys);
        self.table.push(model_records::node_rec(node), model_records::node_cards(node), labels);
        // New domains get their records from the refresh, like the node's other domains.
        self.domains.resize(self.cluster.domains.len(), DomainRec::default());
        self.refresh_node(id);
        Ok(id)
    }

    /// Puts node `node` in service or takes it out.
    pub(super) fn set_node_up(&mut self, node: NodeId, up: bool) {
        self.cluster.set_up(node, up);
        self.refresh_node(node);
    }

    /// Brings node `id`'s record and its domains' records up to date.
    fn refresh_node(&mut self, id: NodeId) {
        let node = &self.cluster.nodes[id];
        self.table.set(id, model_records::node_rec(node));
        for (slot, c) in self.table.cards_mut(id).iter_mut().zip(model_records::node_cards(node)) {
            *slot = c;
        }
        for d in node.domains.iter().filter(|d| **d != u32::MAX) {
            if let Some(rec) = self.domains.get_mut(*d as usize) {
                *rec = model_records::domain_rec(&self.cluster.domains[*d as usize]);
            }
        }
    }

    /// Gives the quota tree the capacity of the nodes in service of each resource it
    /// governs (per GPU model too): what a root's unset guarantee stands for.
    pub(super) fn follow_capacity(&mut self) {
        let totals = self.totals();
        let mut capacity = Amounts::new();
        for r in self.quotas.governed() {
            let amount = match r {
                Res::Model(m) => self
                    .cluster
                    .nodes
                    .iter()
                    .filter(|n| n.up && n.model == m)
                    .map(|n| n.cards.len() as i64 * i64::from(gpol_compiler::spec::MILLI))
                    .sum(),
                r => totals.get(&r).copied().unwrap_or(0),
            };
            capacity.insert(r, amount);
        }
        self.quotas.set_capacity(capacity);
    }

    /// Changes a queue's quota, and what the capacity stands for under the new amounts.
    pub(super) fn set_quota(&mut self, q: QueueId, kind: QuotaKind, r: Res, value: Option<i64>) {
        self.quotas.set(q, kind, r, value);
        self.follow_capacity();
    }

    /// Sets past usage as of now: queue `q`'s, or with `user`, that user's in leaf `q`.
    pub(super) fn set_usage(&mut self, q: QueueId, user: Option<&str>, amount: f64) {
        self.quotas.advance_usage(self.now_ms);
        match user {
            Some(name) => {
                let sym = self.syms.intern_counted(name);
                if !self.quotas.join_user(q, sym) {
                    // Already known (and held): this intern was one too many.
                    self.syms.release(sym);
                }
                self.quotas.set_user_usage(q, sym, amount);
            }
            None => self.quotas.set_usage(q, amount),
        }
    }
}
