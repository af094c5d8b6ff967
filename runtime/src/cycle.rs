//! The scheduler's state and the scheduling cycle (decisions D3, D9): queues are served
//! in `queue_order`, level by level down the tree; inside a leaf, jobs in `job_order`;
//! orders are re-evaluated after every admission. Each job's turn is an attempt: the
//! placement decision (`place`), then, if it waits, the victim search (`preempt`) and
//! head-of-line reservation (`reserve`).

use crate::fit;
use crate::jobs::{Job, JobId, QueueId, Reason, Request, Shape, State};
use crate::model::{Cluster, NodeId, NodeSpec, SpecError};
use crate::preempt::Eviction;
use crate::quota::{self, Amounts, Block, Quotas, Res};
use crate::records;
use crate::symbols::Symbols;
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::hir::Queueing;
use gpol_compiler::interp::Ctx;
use gpol_compiler::ir::OrderKey;
use gpol_compiler::schema::{ClusterRec, DomainRec, JobRec, List, NodeTable, QueueRec, ShapeRec, Sym};
use gpol_compiler::syntax::Direction;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What a job asks for, before it is a `Job`.
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub name: String,
    pub queue: QueueId,
    pub user: String,
    pub priority_class: Option<String>,
    pub priority: f64,
    pub request: Request,
    pub replicas: u32,
    pub min_replicas: u32,
    pub gpu_mem: u64,
    pub cpu_milli: u64,
    pub mem: u64,
    pub models: Vec<String>,
    pub bursty: bool,
    pub latency_critical: bool,
    pub preemptible: bool,
    pub duration_ms: Option<u64>,
    /// How often the job saves its work while running (`None`: it does not).
    pub checkpoint_every_ms: Option<u64>,
    pub utilization: f64,
    pub labels: Vec<(String, String)>,
}

/// Something that happened, in order: what tests and `explain` read.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Submitted {
        job: JobId,
        at_ms: u64,
    },
    /// The job started; one node per replica.
    Placed {
        job: JobId,
        nodes: Vec<NodeId>,
        at_ms: u64,
    },
    Rejected {
        job: JobId,
        rule: String,
        at_ms: u64,
    },
    Finished {
        job: JobId,
        at_ms: u64,
    },
    /// A running job lost its node and went back to waiting, keeping `kept_ms` of the
    /// work it did since it started (up to its last checkpoint) and losing `lost_gpu_s`.
    Requeued {
        job: JobId,
        node: NodeId,
        kept_ms: u64,
        lost_gpu_s: f64,
        at_ms: u64,
    },
    /// A running job was evicted for `by` under `rule`, losing `lost_gpu_s` GPU-seconds
    /// of work (its GPUs times the time since its last checkpoint), and waits again.
    Evicted {
        job: JobId,
        by: JobId,
        rule: String,
        kept_ms: u64,
        lost_gpu_s: f64,
        at_ms: u64,
    },
    /// A job that waited past `reserve_after` holds these nodes until it starts.
    Reserved {
        job: JobId,
        nodes: Vec<NodeId>,
        at_ms: u64,
    },
}

/// The runtime: a cluster, its quota tree and its jobs, scheduled by a compiled policy.
#[derive(Clone)]
pub struct Scheduler {
    pub policy: CompiledPolicy,
    pub syms: Symbols,
    pub cluster: Cluster,
    pub quotas: Quotas,
    pub jobs: Vec<Job>,
    pub now_ms: u64,
    pub log: Vec<Event>,
    /// Placement attempts so far (each one a filter+score pass over the nodes).
    pub attempts: u64,
    /// The runtime symbol of each of the policy's string literals.
    literals: Vec<Sym>,
    job_label_keys: Vec<Sym>,
    node_label_keys: Vec<Sym>,
    /// Each job's label values in slot order.
    job_labels: Vec<Vec<Sym>>,
    table: NodeTable,
    domains: Vec<DomainRec>,
    /// Jobs whose last attempt failed: not retried until capacity frees (or, for a job
    /// the quota holds back, until the cap that held it back gives) — or, when the policy
    /// can evict, until another job starts (a new victim), and when its victim rules or
    /// reservations depend on time, until the retry interval has passed.
    backoff: HashMap<JobId, Backoff>,
    /// Jobs started so far.
    starts: u64,
    /// Per queue, the value of `starts` after its latest start.
    last_start: Vec<u64>,
    /// Whether victim rules read nothing but the two jobs: then only a start in a queue
    /// whose jobs could be victims can change a failed victim search.
    victims_read_jobs: bool,
    /// Whether victim rules read a time-varying field, or the policy reserves.
    time_matters: bool,
    /// Each job's shape, as an index into `shapes`.
    job_shapes: Vec<usize>,
    shapes: HashMap<Shape, usize>,
    /// Shapes no node in service can take now: their jobs wait until capacity frees.
    full: HashSet<usize>,
    /// The pending jobs of each queue, and the running jobs, so a cycle never scans
    /// finished ones.
    waiting: Vec<BTreeSet<JobId>>,
    pub(crate) running: BTreeSet<JobId>,
    /// Nodes held for a job that waited past `reserve_after`, by job and by node.
    pub(crate) reservations: BTreeMap<JobId, Vec<NodeId>>,
    pub(crate) reserved: HashMap<NodeId, JobId>,
    /// With victim rules or reservations, a job whose attempt failed is retried once this
    /// much time has passed (0: whenever the clock moves), or when capacity frees.
    pub retry_interval_ms: u64,
    /// Whether `job_order` keys read only the job (so they hold still within a cycle:
    /// nothing a job reads of itself changes while it waits), and this cycle's order of
    /// each leaf's jobs by them, built at the cycle's first turn.
    job_keys_stable: bool,
    cycle_order: Option<CycleOrder>,
    /// The queue records of the last view, and the quota version and capacity they were
    /// computed for: most views between two changes are of the same state.
    queue_cache: std::cell::RefCell<Option<(CacheKey, Vec<QueueRec>)>>,
    /// The workload's popular request shapes (`cluster.task_shapes`), set by whoever
    /// knows the workload (the simulator, from its trace).
    task_shapes: Vec<ShapeRec>,
    /// How many replicas of each shape the nodes in service could hold if they were
    /// empty: it changes only when a node joins, leaves or returns to service.
    room_when_empty: std::cell::RefCell<HashMap<usize, u64>>,
}

/// A failed job's wait: when it failed, how many jobs had started by then, and if the
/// quota held it back, the cap that did and the room that cap had left.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    at_ms: u64,
    starts: u64,
    quota: Option<(Block, i64)>,
}

/// What cached queue records depend on: the quota tree's version and the capacity.
type CacheKey = (u64, crate::model::Capacity);

/// The cluster and queue records rules read, as of one moment.
pub struct View<'a> {
    pub cluster: ClusterRec<'a>,
    pub queues: Vec<QueueRec>,
}

/// Each leaf's waiting jobs in `job_order`, sorted once per cycle, with a cursor past the
/// jobs already passed over: a job passed over (tried, or not eligible) stays so until
/// capacity frees, and freeing capacity drops the order so it is built afresh.
#[derive(Clone)]
struct CycleOrder {
    lists: Vec<Vec<JobId>>,
    cursor: Vec<usize>,
}

/// How one placement attempt ended.
enum Attempt {
    Placed,
    Waiting(Reason),
    Rejected(String),
}

impl Scheduler {
    pub fn new(policy: CompiledPolicy) -> Scheduler {
        let mut syms = Symbols::default();
        let literals = policy.program.literals.iter().map(|l| syms.intern(l)).collect();
        let job_label_keys = policy.program.job_labels.iter().map(|k| syms.intern(k)).collect();
        let node_label_keys = policy.program.node_labels.iter().map(|k| syms.intern(k)).collect();
        let quotas = Quotas::new(&policy.policy, &mut syms);
        let cluster = Cluster::new(policy.policy.levels.clone());
        let waiting = vec![BTreeSet::new(); quotas.queues.len()];
        let time_matters = policy.policy.settings.reserve_after.is_some()
            || policy
                .program
                .victims
                .iter()
                .any(|v| std::iter::once(&v.when).chain(v.cost.as_ref()).any(|b| reads_time(&b.node)));
        let victims_read_jobs = policy
            .program
            .victims
            .iter()
            .all(|v| std::iter::once(&v.when).chain(v.cost.as_ref()).all(|b| !reads_beyond_job(&b.node)));
        let job_keys_stable = policy.program.job_order.iter().all(|k| {
            !k.body.node.any(&|n| {
                matches!(n.kind, gpol_compiler::ir::Kind::Domain { .. })
                    || matches!(n.kind, gpol_compiler::ir::Kind::Field { record, .. } if record != gpol_compiler::schema::Record::Job)
            })
        });
        Scheduler {
            policy,
            syms,
            cluster,
            quotas,
            jobs: Vec::new(),
            now_ms: 0,
            log: Vec::new(),
            attempts: 0,
            literals,
            job_label_keys,
            node_label_keys,
            job_labels: Vec::new(),
            table: NodeTable::default(),
            domains: Vec::new(),
            backoff: HashMap::new(),
            starts: 0,
            last_start: vec![0; waiting.len()],
            victims_read_jobs,
            time_matters,
            job_shapes: Vec::new(),
            shapes: HashMap::new(),
            full: HashSet::new(),
            waiting,
            running: BTreeSet::new(),
            reservations: BTreeMap::new(),
            reserved: HashMap::new(),
            task_shapes: Vec::new(),
            retry_interval_ms: 0,
            job_keys_stable,
            cycle_order: None,
            queue_cache: std::cell::RefCell::new(None),
            room_when_empty: std::cell::RefCell::new(HashMap::new()),
        }
    }

    /// Capacity freed up: every waiting job may fit now, except those the quota holds
    /// back (`eligible` asks whether their cap gave).
    fn capacity_changed(&mut self) {
        self.backoff.retain(|_, b| b.quota.is_some());
        self.full.clear();
        self.cycle_order = None;
    }

    /// A node joined, left or returned to service: capacity changed, and so did what the
    /// cluster could ever hold.
    fn service_changed(&mut self) {
        self.room_when_empty.get_mut().clear();
        self.capacity_changed();
    }

    /// How many replicas of the job the nodes in service (of its models) could hold if
    /// they were empty; 0 when none could hold even one.
    pub(crate) fn room_when_empty(&self, job: JobId) -> u64 {
        let shape = self.job_shapes[job];
        if let Some(&room) = self.room_when_empty.borrow().get(&shape) {
            return room;
        }
        let j = &self.jobs[job];
        let room = self
            .cluster
            .nodes
            .iter()
            .filter(|n| n.up && (j.models.is_empty() || j.models.contains(&n.model)))
            .fold(0u64, |sum, n| sum.saturating_add(u64::from(fit::capacity_when_empty(n, j))));
        self.room_when_empty.borrow_mut().insert(shape, room);
        room
    }

    /// Changes a job's state, keeping the indexes of waiting and running jobs.
    pub(crate) fn set_state(&mut self, job: JobId, state: State) {
        let j = &mut self.jobs[job];
        let (was_pending, was_running) = (j.is_pending(), j.state == State::Running);
        let (now_pending, now_running) = (matches!(state, State::Pending(_)), state == State::Running);
        if was_pending != now_pending
            && let Some(set) = self.waiting.get_mut(j.queue)
        {
            if now_pending {
                set.insert(job);
            } else {
                set.remove(&job);
            }
        }
        if was_running != now_running {
            if now_running {
                self.running.insert(job);
            } else {
                self.running.remove(&job);
            }
        }
        j.state = state;
        if !now_pending {
            self.unreserve(job);
        }
    }

    /// The running jobs, in submission order.
    pub fn running(&self) -> impl Iterator<Item = JobId> + '_ {
        self.running.iter().copied()
    }

    // ------------------------------------------------------------ changes

    pub fn add_node(&mut self, spec: &NodeSpec) -> Result<NodeId, SpecError> {
        let id = self.cluster.add_node(spec, &mut self.syms)?;
        let node = &self.cluster.nodes[id];
        let labels = records::label_slots(&node.labels, &self.node_label_keys);
        self.table.push(records::node_rec(node), records::node_cards(node), labels);
        // New domains get their records from the refresh, like the node's other domains.
        self.domains.resize(self.cluster.domains.len(), DomainRec::default());
        self.refresh_node(id);
        self.service_changed();
        Ok(id)
    }

    /// Brings node `id`'s record and its domains' records up to date.
    pub(crate) fn refresh_node(&mut self, id: NodeId) {
        let node = &self.cluster.nodes[id];
        self.table.set(id, records::node_rec(node));
        for (slot, c) in self.table.cards_mut(id).iter_mut().zip(records::node_cards(node)) {
            *slot = c;
        }
        for d in node.domains.iter().filter(|d| **d != u32::MAX) {
            if let Some(rec) = self.domains.get_mut(*d as usize) {
                *rec = records::domain_rec(&self.cluster.domains[*d as usize]);
            }
        }
    }

    /// Adds a waiting job. Jobs go to leaf queues; a job naming any other queue is refused.
    pub fn submit(&mut self, spec: JobSpec) -> Result<JobId, String> {
        match self.quotas.queues.get(spec.queue) {
            None => return Err(format!("job `{}` names queue #{}, which does not exist", spec.name, spec.queue)),
            Some(q) if !q.is_leaf() => {
                return Err(format!("job `{}` names queue `{}`, which is not a leaf queue", spec.name, q.name));
            }
            Some(_) => {}
        }
        let id = self.jobs.len();
        let labels = spec.labels.iter().map(|(k, v)| (self.syms.intern(k), self.syms.intern(v))).collect();
        let job = Job {
            id: self.syms.intern(&spec.name),
            name: spec.name,
            user: self.syms.intern(&spec.user),
            queue: spec.queue,
            priority: spec.priority,
            priority_class: spec.priority_class.as_deref().map_or(Sym(0), |c| self.syms.intern(c)),
            request: spec.request,
            replicas: spec.replicas.max(1),
            min_replicas: spec.min_replicas.clamp(1, spec.replicas.max(1)),
            gpu_mem: spec.gpu_mem,
            cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            models: spec.models.iter().map(|m| self.syms.intern(m)).collect(),
            bursty: spec.bursty,
            latency_critical: spec.latency_critical,
            preemptible: spec.preemptible,
            submitted_ms: self.now(),
            waiting_since_ms: self.now(),
            duration_ms: spec.duration_ms,
            utilization: spec.utilization,
            labels,
            state: State::Pending(None),
            evictions: 0,
            started_ms: 0,
            checkpoint_ms: 0,
            checkpoint_every_ms: spec.checkpoint_every_ms,
            slots: Vec::new(),
            charged: Amounts::new(),
        };
        self.job_labels.push(records::label_slots(&job.labels, &self.job_label_keys));
        let next = self.shapes.len();
        self.job_shapes.push(*self.shapes.entry(job.shape()).or_insert(next));
        self.quotas.count(job.queue, 1, 0);
        self.waiting[job.queue].insert(id);
        self.jobs.push(job);
        self.log.push(Event::Submitted { job: id, at_ms: self.now_ms });
        Ok(id)
    }

    /// Places a job directly, as already running (a scenario's `run`): one replica per
    /// listed node, cards by built-in best fit, quota charged without checks.
    pub fn start_on(
        &mut self,
        job: JobId,
        nodes: &[NodeId],
        ran_ms: u64,
        since_checkpoint_ms: u64,
    ) -> Result<(), String> {
        for &n in nodes {
            let node = &self.cluster.nodes[n];
            if fit::choose(node, &self.jobs[job], None).is_none() {
                return Err(format!("job `{}` does not fit on node `{}`", self.jobs[job].name, node.name));
            }
            self.bind_replica(job, n, false);
        }
        self.charge(job);
        let start = self.now() - i64::try_from(ran_ms).unwrap_or(i64::MAX);
        self.set_state(job, State::Running);
        let now = self.now();
        let j = &mut self.jobs[job];
        j.started_ms = start;
        j.waiting_since_ms = j.waiting_since_ms.min(start);
        j.submitted_ms = j.submitted_ms.min(start);
        j.checkpoint_ms = now - i64::try_from(since_checkpoint_ms.min(ran_ms)).unwrap_or(i64::MAX);
        self.log.push(Event::Placed { job, nodes: nodes.to_vec(), at_ms: self.now_ms });
        Ok(())
    }

    /// Binds one replica on `node`, its cards chosen by the policy's `card_score` rules
    /// (if `scored` and it has any) or by built-in best fit.
    fn bind_replica(&mut self, job: JobId, node: NodeId, scored: bool) {
        let cards = if scored {
            self.choose_cards(job, node)
        } else {
            fit::choose(&self.cluster.nodes[node], &self.jobs[job], None)
        };
        let Some(cards) = cards else { return };
        let slot = fit::bind(&mut self.cluster, node, &self.jobs[job], &cards);
        self.jobs[job].slots.push(slot);
        self.refresh_node(node);
    }

    /// Charges a job that just started with what its replicas hold.
    fn charge(&mut self, job: JobId) {
        let models: Vec<Sym> = self.jobs[job].slots.iter().map(|s| self.cluster.nodes[s.node].model).collect();
        let j = &self.jobs[job];
        let charged = quota::placement_demand(j, &models);
        self.quotas.charge(j.queue, j.user, &charged, 1);
        self.quotas.count(j.queue, -1, 1);
        self.jobs[job].charged = charged;
    }

    /// Frees what a running job holds and refunds its quota; its state is the caller's.
    fn release(&mut self, job: JobId) {
        self.lift(job);
        self.jobs[job].slots.clear();
        self.jobs[job].charged.clear();
        self.capacity_changed();
    }

    /// Gives back what a running job holds, keeping its slots so `restore` can take
    /// them again exactly (the victim search tries evictions this way).
    pub(crate) fn lift(&mut self, job: JobId) {
        let slots = std::mem::take(&mut self.jobs[job].slots);
        for s in &slots {
            fit::apply(&mut self.cluster, &self.jobs[job], s, false);
            self.refresh_node(s.node);
        }
        self.jobs[job].slots = slots;
        let j = &self.jobs[job];
        self.quotas.charge(j.queue, j.user, &j.charged, -1);
    }

    /// Undoes `lift`.
    pub(crate) fn restore(&mut self, job: JobId) {
        let slots = std::mem::take(&mut self.jobs[job].slots);
        for s in &slots {
            fit::apply(&mut self.cluster, &self.jobs[job], s, true);
            self.refresh_node(s.node);
        }
        self.jobs[job].slots = slots;
        let j = &self.jobs[job];
        self.quotas.charge(j.queue, j.user, &j.charged, 1);
    }

    /// A running job finishes and frees what it held.
    pub fn complete(&mut self, job: JobId) {
        if self.jobs[job].state != State::Running {
            return;
        }
        self.quotas.advance_usage(self.now_ms);
        self.release(job);
        self.quotas.count(self.jobs[job].queue, 0, -1);
        self.set_state(job, State::Finished);
        self.log.push(Event::Finished { job, at_ms: self.now_ms });
    }

    /// Stops a running job and puts it back in its queue.
    fn requeue(&mut self, job: JobId) {
        self.release(job);
        self.quotas.count(self.jobs[job].queue, 1, -1);
        self.set_state(job, State::Pending(None));
        let now = self.now();
        let j = &mut self.jobs[job];
        j.evictions += 1;
        j.waiting_since_ms = now;
    }

    /// A node fails: its jobs lose their work since the last checkpoint and wait again.
    pub fn fail_node(&mut self, node: NodeId) {
        self.quotas.advance_usage(self.now_ms);
        let victims: Vec<JobId> =
            self.running().filter(|&j| self.jobs[j].slots.iter().any(|s| s.node == node)).collect();
        for j in victims {
            let (kept_ms, lost_gpu_s) = self.stop_progress(j);
            self.requeue(j);
            self.log.push(Event::Requeued { job: j, node, kept_ms, lost_gpu_s, at_ms: self.now_ms });
        }
        self.cluster.set_up(node, false);
        self.refresh_node(node);
        self.service_changed();
        // A reservation that lost a node is given up; its job reserves afresh.
        if let Some(&owner) = self.reserved.get(&node) {
            self.unreserve(owner);
        }
    }

    /// Takes a node out of service without stopping its jobs: they run to the end, and
    /// nothing new lands there.
    pub fn drain_node(&mut self, node: NodeId) {
        self.cluster.set_up(node, false);
        self.refresh_node(node);
        self.service_changed();
        if let Some(&owner) = self.reserved.get(&node) {
            self.unreserve(owner);
        }
    }

    /// Puts a failed or drained node back in service.
    pub fn restore_node(&mut self, node: NodeId) {
        self.cluster.set_up(node, true);
        self.refresh_node(node);
        self.service_changed();
    }

    /// Takes back a job that has not started; a running or ended job stays as it is.
    pub fn withdraw(&mut self, job: JobId) {
        if self.jobs[job].is_pending() {
            self.quotas.count(self.jobs[job].queue, -1, 0);
            self.set_state(job, State::Withdrawn);
            self.backoff.remove(&job);
        }
    }

    /// Hands over the events logged so far, leaving the log empty (long runs read it as
    /// they go instead of keeping it all).
    pub fn take_log(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.log)
    }

    /// Changes a queue's quota; waiting jobs are tried again.
    pub fn set_quota(&mut self, q: QueueId, kind: gpol_compiler::syntax::QuotaKind, r: Res, value: Option<i64>) {
        self.quotas.set(q, kind, r, value);
        self.backoff.clear();
        self.capacity_changed();
    }

    /// The clock as a signed time, to compare with jobs' times.
    fn now(&self) -> i64 {
        i64::try_from(self.now_ms).unwrap_or(i64::MAX)
    }

    pub fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
        self.quotas.advance_usage(self.now_ms);
    }

    // ------------------------------------------------------------ evaluation context

    /// Capacity of the nodes in service, per resource.
    pub fn totals(&self) -> Amounts {
        let c = self.cluster.capacity;
        Amounts::from([(Res::Gpu, c.gpu_milli as i64), (Res::Cpu, c.cpu_milli as i64), (Res::Mem, c.mem as i64)])
    }

    pub fn cluster_rec(&self) -> ClusterRec<'_> {
        let res = |c: crate::model::Capacity| gpol_compiler::schema::Resources {
            gpu: records::gpus(c.gpu_milli),
            cpu: c.cpu_milli as f64 / 1000.0,
            mem: c.mem as f64,
        };
        ClusterRec {
            time: records::seconds(self.now_ms),
            nodes: self.cluster.capacity.nodes as f64,
            total: res(self.cluster.capacity),
            free: res(self.cluster.free),
            task_shapes: List::new(&self.task_shapes),
        }
    }

    /// What rules see of the cluster and the queues now. `changes` are jobs to count as
    /// admitted (+1) or evicted (-1) in the queues' `share_after`.
    pub fn view_with(&self, changes: &[(QueueId, &Amounts, i64)]) -> View<'_> {
        let totals = self.totals();
        let key = (self.quotas.version(), self.cluster.capacity);
        let mut cache = self.queue_cache.borrow_mut();
        let mut queues = match cache.as_ref() {
            Some((k, recs)) if *k == key => recs.clone(),
            _ => {
                let fair = self.quotas.fair_shares(totals.get(&Res::Gpu).copied().unwrap_or(0));
                let recs = records::queue_recs(&self.quotas, &totals, &fair, &[]);
                *cache = Some((key, recs.clone()));
                recs
            }
        };
        // Only the queues above a changed leaf see a different `share_after`.
        for (leaf, _, _) in changes {
            for q in self.quotas.path(*leaf) {
                queues[q].share_after = records::share_after(&self.quotas, &totals, q, changes);
            }
        }
        View { cluster: self.cluster_rec(), queues }
    }

    /// What rules see now; `job` is the job in scope, for its queues' `share_after`.
    pub fn view(&self, job: Option<JobId>) -> View<'_> {
        match job {
            Some(j) => {
                let demand = quota::demand(&self.jobs[j], None);
                self.view_with(&[(self.jobs[j].queue, &demand, 1)])
            }
            None => self.view_with(&[]),
        }
    }

    /// The evaluation context for rules, over a `view`.
    pub fn ctx<'a>(&'a self, view: &'a View<'a>) -> Ctx<'a> {
        Ctx {
            cluster: &view.cluster,
            queues: &view.queues,
            domains: &self.domains,
            literals: &self.literals,
            sym_hashes: self.syms.hashes(),
            attrs: &self.policy.program.attrs,
        }
    }

    /// Seeds the pseudo-random draws of `hash01` (runs with different seeds draw
    /// differently; 0 is the default).
    pub fn set_seed(&mut self, seed: u64) {
        self.syms.reseed(seed);
    }

    /// Sets the popular request shapes rules see as `cluster.task_shapes`.
    pub fn set_task_shapes(&mut self, shapes: Vec<ShapeRec>) {
        self.task_shapes = shapes;
    }

    pub fn node_records(&self) -> &[gpol_compiler::schema::NodeRec<'_>] {
        self.table.records()
    }

    pub fn job_rec(&self, job: JobId) -> JobRec<'_> {
        records::job_rec(&self.jobs[job], &self.job_labels[job], self.now_ms)
    }

    // ------------------------------------------------------------ the cycle

    /// Runs one scheduling cycle: places every job that can be placed now, in order.
    /// Returns how many were placed.
    pub fn cycle(&mut self) -> usize {
        self.quotas.advance_usage(self.now_ms);
        self.forget_irrelevant_starts();
        let mut tried: HashSet<JobId> = HashSet::new();
        let mut blocked: HashSet<QueueId> = HashSet::new();
        let mut placed = 0;
        self.cycle_order = None;
        while let Some(job) = self.next_job(&tried, &blocked) {
            tried.insert(job);
            match self.attempt(job) {
                Attempt::Placed => placed += 1,
                Attempt::Rejected(rule) => {
                    self.quotas.count(self.jobs[job].queue, -1, 0);
                    self.set_state(job, State::Rejected(rule.clone()));
                    self.log.push(Event::Rejected { job, rule, at_ms: self.now_ms });
                }
                Attempt::Waiting(reason) => {
                    let leaf = self.jobs[job].queue;
                    if self.quotas.queues[leaf].queueing == Queueing::Strict {
                        blocked.insert(leaf);
                    }
                    if !matches!(reason, Reason::Rule(_)) || self.is_filter(&reason) {
                        let quota = self.quota_cap(job, &reason);
                        self.backoff.insert(job, Backoff { at_ms: self.now_ms, starts: self.starts, quota });
                    }
                    if matches!(reason, Reason::Capacity) || self.is_filter(&reason) {
                        self.note_if_full(job);
                    }
                    self.set_state(job, State::Pending(Some(reason)));
                }
            }
        }
        self.cycle_order = None;
        // Jobs that did not get a turn: behind a strict queue's waiting head, or of a
        // shape no node can take.
        for (q, waiting) in self.waiting.iter().enumerate() {
            for &j in waiting.iter().filter(|j| !tried.contains(j)) {
                if blocked.contains(&q) {
                    self.jobs[j].state = State::Pending(Some(Reason::Order));
                } else if self.skipped_as_full(j) {
                    self.jobs[j].state = State::Pending(Some(Reason::Capacity));
                }
            }
        }
        placed
    }

    /// A job that failed while the policy can evict is retried once another job starts —
    /// but only a start in a queue whose jobs could be its victims can change the answer
    /// when victim rules read nothing but the jobs (`eligible` asks); here the others are
    /// forgotten, so they are not looked at again. (Conservative: a queue counts when its
    /// side borrows anything the tree governs, whatever the guards and the claimant's own
    /// side say.)
    fn forget_irrelevant_starts(&mut self) {
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
    fn quota_cap(&self, job: JobId, reason: &Reason) -> Option<(Block, i64)> {
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
    fn new_victims_since(&self, job: JobId, starts: u64) -> bool {
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
    fn may_hold_victims(&self, cq: QueueId, vq: QueueId) -> bool {
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

    /// Whether a waiting job's fate can change with time alone — victim rules, reservations,
    /// or admit rules that read the cluster or the clock — so that a driver with nothing
    /// else happening should still run a cycle now and then.
    pub fn waits_on_time(&self) -> bool {
        self.time_matters || self.policy.program.admit.iter().any(|r| !r.is_static)
    }

    /// How many jobs wait.
    pub fn pending(&self) -> usize {
        self.waiting.iter().map(BTreeSet::len).sum()
    }

    /// Whether a job is not tried because no node can take its shape. A job is always
    /// tried once, so it learns its own reason; one found unschedulable keeps that reason.
    fn skipped_as_full(&self, j: JobId) -> bool {
        // Evictions could make room for a shape no node can take as things are.
        !self.time_matters
            && self.policy.program.victims.is_empty()
            && self.full.contains(&self.job_shapes[j])
            && matches!(&self.jobs[j].state, State::Pending(Some(r)) if !matches!(r, Reason::Unschedulable(_)))
    }

    /// Marks the job's shape full if no node in service could take one replica now.
    fn note_if_full(&mut self, job: JobId) {
        let j = &self.jobs[job];
        let takes = |n: &crate::model::Node| (j.models.is_empty() || j.models.contains(&n.model)) && fit::fits(n, j);
        if !self.cluster.nodes.iter().any(takes) {
            self.full.insert(self.job_shapes[job]);
        }
    }

    pub(crate) fn is_filter(&self, reason: &Reason) -> bool {
        matches!(reason, Reason::Rule(r) if self.policy.program.filters.iter().any(|f| &f.name == r))
    }

    /// Whether a job can take a turn this cycle.
    fn eligible(&self, j: JobId, tried: &HashSet<JobId>) -> bool {
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

    /// The next job to try: the best queue at each level of the tree, then the best job
    /// of that leaf (D3). `None` when no queue has a job that can take a turn.
    fn next_job(&mut self, tried: &HashSet<JobId>, blocked: &HashSet<QueueId>) -> Option<JobId> {
        let nq = self.quotas.queues.len();
        let candidate = if self.job_keys_stable {
            self.candidates_in_order(tried, blocked)
        } else {
            self.candidates_by_keys(tried, blocked)
        };
        let view = self.view(None);
        let ctx = self.ctx(&view);
        let engine = self.policy.engine();
        // A queue is live if some leaf below it has a candidate.
        let mut live = vec![false; nq];
        for q in (0..nq).rev() {
            live[q] = candidate[q].is_some() || self.quotas.queues[q].children.iter().any(|&c| live[c]);
        }
        let roots: Vec<QueueId> = (0..nq).filter(|&q| self.quotas.queues[q].parent.is_none() && live[q]).collect();
        let rank = |qs: &[QueueId]| {
            self.best_by(
                qs,
                &self.policy.program.queue_order,
                |q, out| engine.queue_keys(&ctx, q as u32, out),
                |a, b| a.cmp(&b),
            )
        };
        let mut q = rank(&roots)?;
        loop {
            let children: Vec<QueueId> = self.quotas.queues[q].children.iter().copied().filter(|&c| live[c]).collect();
            if children.is_empty() {
                return candidate[q];
            }
            q = rank(&children)?;
        }
    }

    /// Each leaf's candidate: its best eligible job (a strict leaf offers only its head,
    /// and nothing while the head cannot go), by keys evaluated now.
    fn candidates_by_keys(&self, tried: &HashSet<JobId>, blocked: &HashSet<QueueId>) -> Vec<Option<JobId>> {
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
    fn candidates_in_order(&mut self, tried: &HashSet<JobId>, blocked: &HashSet<QueueId>) -> Vec<Option<JobId>> {
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
    fn build_order(&self, tried: &HashSet<JobId>) -> CycleOrder {
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
    fn best_by(
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

    /// One job's turn: place it; failing that, evict for it (if the policy allows and it
    /// would then start), or reserve for it (if it has waited long enough).
    fn attempt(&mut self, job: JobId) -> Attempt {
        self.attempts += 1;
        let reason = match self.decide(job) {
            crate::place::Decision::Place { replicas } => {
                self.start(job, &replicas);
                return Attempt::Placed;
            }
            crate::place::Decision::Reject(rule) => return Attempt::Rejected(rule),
            crate::place::Decision::Wait(reason) => reason,
        };
        if self.may_evict_for(&reason)
            && let Some(eviction) = self.victim_search(job, None)
        {
            self.evict(job, &eviction);
            self.start(job, &eviction.replicas);
            return Attempt::Placed;
        }
        if matches!(reason, Reason::Capacity | Reason::Gang) {
            self.reserve_if_due(job);
        }
        Attempt::Waiting(reason)
    }

    /// Whether evicting running jobs could help a job that waits for `reason`: capacity,
    /// quota, topology, or a filter (filters can read free capacity).
    fn may_evict_for(&self, reason: &Reason) -> bool {
        !self.policy.program.victims.is_empty()
            && (matches!(reason, Reason::Capacity | Reason::Quota(_) | Reason::Gang) || self.is_filter(reason))
    }

    /// Starts a job with one replica on each listed node.
    fn start(&mut self, job: JobId, replicas: &[NodeId]) {
        for &node in replicas {
            self.bind_replica(job, node, true);
        }
        self.charge(job);
        self.backoff.remove(&job);
        self.set_state(job, State::Running);
        let now = self.now();
        self.starts += 1;
        self.last_start[self.jobs[job].queue] = self.starts;
        let j = &mut self.jobs[job];
        j.started_ms = now;
        j.checkpoint_ms = now;
        self.log.push(Event::Placed { job, nodes: replicas.to_vec(), at_ms: self.now_ms });
    }

    /// Carries out an eviction: the victims stop, lose their work since their last
    /// checkpoint, and wait again.
    fn evict(&mut self, claimant: JobId, eviction: &Eviction) {
        self.quotas.advance_usage(self.now_ms);
        for v in &eviction.victims {
            let (kept_ms, lost_gpu_s) = self.stop_progress(v.job);
            self.requeue(v.job);
            self.log.push(Event::Evicted {
                job: v.job,
                by: claimant,
                rule: v.rule.clone(),
                kept_ms,
                lost_gpu_s,
                at_ms: self.now_ms,
            });
        }
    }

    /// What stopping a running job now keeps of its work (ms since it started) and loses
    /// (GPU-seconds: its GPUs times the time since its last checkpoint).
    fn stop_progress(&self, job: JobId) -> (u64, f64) {
        let j = &self.jobs[job];
        let (kept, lost) = j.progress_ms(self.now_ms);
        (kept, records::gpus(j.request.milli() * j.slots.len() as u64) * records::seconds(lost))
    }

    /// Releases the nodes a job holds in reserve.
    fn unreserve(&mut self, job: JobId) {
        if let Some(nodes) = self.reservations.remove(&job) {
            for n in nodes {
                self.reserved.remove(&n);
            }
        }
    }

    /// Whether `node` is held for a job other than `job`.
    pub(crate) fn reserved_for_other(&self, node: NodeId, job: JobId) -> bool {
        self.reserved.get(&node).is_some_and(|&owner| owner != job)
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

/// Whether a rule body reads anything but job fields (queues, the cluster, domains).
fn reads_beyond_job(node: &gpol_compiler::ir::Node) -> bool {
    use gpol_compiler::ir::Kind;
    node.any(&|n| {
        matches!(n.kind, Kind::Domain { .. })
            || matches!(n.kind, Kind::Field { record, .. } if record != gpol_compiler::schema::Record::Job)
    })
}

/// Whether an expression reads something that changes with time alone: how long a job
/// has waited or run, its unsaved work, the clock, or decayed usage.
fn reads_time(node: &gpol_compiler::ir::Node) -> bool {
    use gpol_compiler::schema::Record;
    [(Record::Job, "waiting"), (Record::Job, "runtime"), (Record::Job, "since_checkpoint")]
        .into_iter()
        .chain([(Record::Cluster, "time"), (Record::Queue, "usage")])
        .any(|(record, field)| node.reads(record, field))
}
