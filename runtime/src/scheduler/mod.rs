//! The scheduler: a cluster, its quota tree and its jobs, scheduled by a compiled policy
//! (decisions D3, D9). Its state is private: changes go through methods that keep every
//! index and cache in step (`state`, `intake`), reads through accessors and read-only
//! views. Queues are served in `queue_order`, level by level down the tree; inside a
//! leaf, jobs in `job_order` (`order`); each job's turn is an attempt (`cycle`): the
//! placement decision ([`crate::scheduler::place`]), then, if it waits, the victim search
//! ([`crate::scheduler::preempt`]) and head-of-line reservation ([`crate::reserve`]). Failed jobs
//! wait to be retried until something that could change their fate happens (`retry`).
//!
//! The scheduler composes parts that each keep their own invariants and never write one
//! another's fields: `facts` (fixed per policy, shared), `world` (what is scheduled),
//! `epochs` (the counts retries wait on) and `caches`; the methods here and in `state`,
//! `intake`, `cycle` and `retry` change them together.

pub mod account;
mod caches;
mod cycle;
mod epochs;
mod event;
pub(crate) mod facts;
mod grow;
mod intake;
pub(crate) mod order;
pub(crate) mod place;
pub mod preempt;
mod rank;
mod retry;
mod state;
pub(crate) mod verdict;
mod waiting;
pub(crate) mod words;
mod world;

pub use event::{Event, starts};
pub use intake::{Resolved, StartOnError, SubmitError};
pub use order::compare_keys;

use caches::{Caches, QueueRecsKey};
use epochs::Epochs;
use facts::PolicyFacts;
use retry::Backoff;
use waiting::Waiting;
use world::World;

use crate::job_store::JobStore;
use crate::jobs;
use crate::jobs::{Job, JobId, Reason, State};
use crate::model::{Cluster, NodeId};
use crate::model_records;
use crate::quota::QueueId;
use crate::quota::{Amounts, Quotas, Res};
use crate::symbols::Symbols;
use crate::wall::WallClock;
use gpol_compiler::clock::Clock;
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::interp::Ctx;
use gpol_compiler::limits::MAX_CLOCK_MS;
use gpol_compiler::schema::{ClusterRec, JobRec, List, QueueRec, ShapeTable, Sym};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The runtime: a cluster, its quota tree and its jobs, scheduled by a compiled policy.
/// It composes four parts, each keeping its own invariants: the facts fixed per policy
/// (`facts`, shared), the state scheduled (`world`), the counts that drive retries
/// (`epochs`) and what is worked out on demand (`caches`); and the waiting jobs' classes
/// and the cycle's own bookkeeping.
#[derive(Clone)]
pub struct Scheduler {
    pub(crate) facts: Arc<PolicyFacts>,
    pub(crate) world: World,
    epochs: Epochs,
    caches: Caches,
    /// What the cycle under way has decided so far, returned when it ends (empty between
    /// calls).
    pub(crate) decided: Vec<Event>,
    /// Placement attempts so far (each one a filter+score pass over the nodes), and
    /// victim searches.
    attempts: u64,
    searches: u64,
    /// The waiting jobs, in classes the policy cannot tell apart. A class whose latest
    /// attempt failed is not tried again while nothing has changed, and then not until
    /// capacity frees (or, for jobs the quota holds back, until the cap that held them
    /// back gives) — or, when the policy can evict, until another job starts (a new
    /// victim), and when its victim rules or reservations depend on time, until the retry
    /// interval has passed.
    waiting: Waiting,
    /// Per strict leaf, the head job that stopped it at its latest failed turn: the jobs
    /// behind it wait with reason `order`.
    blocked_by: Vec<Option<JobId>>,
    /// Shapes no node in service can take now: their jobs wait until capacity frees.
    full: HashSet<usize>,
    /// With victim rules or reservations, a job whose attempt failed is retried once this
    /// much time has passed (0: whenever the clock moves), or when capacity frees.
    retry_interval_ms: u64,
    /// Whether a class whose victim search found no candidate waits until what could give
    /// it one happens (`retry`).
    skip_fruitless_searches: bool,
    /// While a cycle runs, the jobs it has started: none of them is a victim in the same
    /// cycle, so two jobs cannot evict each other back and forth without end inside one.
    pub(crate) started_this_cycle: HashSet<JobId>,
    /// The jobs the last cycle gave a turn, in order.
    pub(crate) turns: Vec<JobId>,
    /// While [`Scheduler::cycle_recorded`] runs, the account of each turn so far.
    recording: Option<Vec<crate::scheduler::account::Account>>,
    pub(crate) in_cycle: bool,
}

/// The cluster and queue records rules read, as of one moment.
pub struct View<'a> {
    pub cluster: ClusterRec<'a>,
    pub queues: Vec<QueueRec>,
}

impl Scheduler {
    pub fn new(policy: CompiledPolicy) -> Scheduler {
        let mut syms = Symbols::default();
        let facts = PolicyFacts::of(policy, &mut syms);
        let quotas = Quotas::new(&facts.policy.policy, &mut syms);
        let cluster = Cluster::new(facts.policy.policy.levels.clone());
        let nq = quotas.queues.len();
        let clock = Clock::of_zone(facts.policy.policy.settings.timezone.as_deref());
        let users_tracked = facts.user_reads.usage || facts.user_reads.fair_tree;
        let mut s = Scheduler {
            facts: Arc::new(facts),
            world: World::new(syms, quotas, cluster, clock, users_tracked),
            epochs: Epochs::new(nq),
            caches: Caches::default(),
            decided: Vec::new(),
            attempts: 0,
            searches: 0,
            waiting: Waiting::new(nq),
            blocked_by: vec![None; nq],
            full: HashSet::new(),
            retry_interval_ms: 0,
            skip_fruitless_searches: true,
            started_this_cycle: HashSet::new(),
            turns: Vec::new(),
            recording: None,
            in_cycle: false,
        };
        s.follow_quota_windows();
        s
    }

    /// Puts in force the quota amounts of the local time now (quota windows), noting a
    /// change of phase as a change to what the runtime reads.
    fn follow_quota_windows(&mut self) {
        if self.world.follow_quota_windows() {
            self.touch();
        }
    }

    /// When the quota amounts in force change next (a quota window opens or closes), on
    /// the scheduler's clock; `None` if no quota has a window. Drivers that skip idle time
    /// (the simulator) wake then.
    pub fn next_quota_change_ms(&self) -> Option<u64> {
        let edges = self.world.quotas().window_edges();
        if edges.is_empty() {
            // The simulator asks at every step: no local time to work out without windows.
            return None;
        }
        let minute = self.world.clock().minute_of_week(self.world.now_ms());
        let wait = gpol_compiler::window::next_edge(edges, minute)?;
        self.world.clock().after_local_minutes(self.world.now_ms(), wait)
    }

    /// The policy it runs.
    pub fn policy(&self) -> &CompiledPolicy {
        &self.facts.policy
    }

    /// The cluster as it stands.
    pub fn cluster(&self) -> &Cluster {
        self.world.cluster()
    }

    /// The quota tree and its accounting.
    pub fn quotas(&self) -> &Quotas {
        self.world.quotas()
    }

    /// The jobs submitted so far and not forgotten, by id.
    pub fn jobs(&self) -> &JobStore {
        self.world.jobs()
    }

    pub fn job(&self, id: JobId) -> &Job {
        &self.world.jobs()[id]
    }

    /// The strings jobs, nodes and queues were interned as.
    pub fn symbols(&self) -> &Symbols {
        self.world.syms()
    }

    /// The scheduler's clock, ms.
    pub fn now_ms(&self) -> u64 {
        self.world.now_ms()
    }

    /// Placement attempts so far (each one a filter and score pass over the nodes).
    pub fn attempts(&self) -> u64 {
        self.attempts
    }

    /// Victim searches the cycles have made so far.
    pub fn victim_searches(&self) -> u64 {
        self.searches
    }

    /// The nodes held for each job that waited past `reserve_after`.
    pub fn reservations(&self) -> &BTreeMap<JobId, Vec<NodeId>> {
        self.world.reservations()
    }

    /// The job node `node` is held for, if any.
    pub fn reserved_for(&self, node: NodeId) -> Option<JobId> {
        self.world.reserved_for(node)
    }

    /// With victim rules or reservations, a job whose attempt failed is retried once this
    /// much time has passed (0, the default: whenever the clock moves), or sooner when
    /// capacity frees.
    pub fn set_retry_interval(&mut self, ms: u64) {
        self.retry_interval_ms = ms;
    }

    /// The running jobs, in submission order.
    pub fn running(&self) -> impl Iterator<Item = JobId> + '_ {
        self.world.running().iter().copied()
    }

    /// How many jobs wait.
    pub fn pending(&self) -> usize {
        self.waiting.len()
    }

    /// A job's state; a waiting job's with the reason it waits (its class's latest failed
    /// attempt, or `order` behind a strict queue's waiting head).
    pub fn state(&self, job: JobId) -> State {
        match &self.world.jobs()[job].life.state {
            State::Pending(_) => State::Pending(self.reason(job)),
            other => other.clone(),
        }
    }

    /// Why a waiting job waits; `None` before any job of its class was tried.
    fn reason(&self, job: JobId) -> Option<Reason> {
        let leaf = self.world.jobs()[job].ask.queue;
        let behind = self
            .blocked_by
            .get(leaf)
            .copied()
            .flatten()
            .filter(|&h| h != job && self.world.jobs().get(h).is_some_and(Job::is_pending));
        if behind.is_some() && self.world.quotas().queues[leaf].place.queueing == gpol_compiler::hir::Queueing::Strict {
            return Some(Reason::Order);
        }
        self.waiting.class_of(job).and_then(|c| self.waiting.class(c).reason)
    }

    /// Notes a change to what rules or the runtime read: every failed class may be asked
    /// again (`retry` says when it is worth it).
    pub(crate) fn touch(&mut self) {
        self.epochs.touch();
    }

    /// Whether a waiting job's fate can change with time alone — victim rules, reservations,
    /// or admit rules that read the cluster or the clock — so that a driver with nothing
    /// else happening should still run a cycle now and then.
    pub fn waits_on_time(&self) -> bool {
        self.facts.time_matters || self.facts.policy.program.admit.iter().any(|r| !r.is_static)
    }

    /// Whether some rule reads the time of day or the weekday, or some quota has a
    /// window: what time alone changes then repeats every week.
    pub fn reads_local_time(&self) -> bool {
        use gpol_compiler::schema::Record;
        !self.world.quotas().window_edges().is_empty()
            || self.facts.policy.program.bodies().iter().any(|(_, _, b)| {
                b.node.reads(Record::Cluster, "time_of_day") || b.node.reads(Record::Cluster, "weekday")
            })
    }

    /// The clock as a signed time, to compare with jobs' times.
    pub(super) fn now(&self) -> i64 {
        self.world.now()
    }

    /// Every waiting job, best placed first: in the order the last cycle gave turns, each
    /// job followed by the jobs it stands for (its class: waiting jobs the policy cannot
    /// tell apart, which wait behind it in `job_order`), then the classes that had no turn.
    /// What a scheduler that starts jobs by itself should follow (`gpolc slurm`'s
    /// priorities).
    pub fn waiting_order(&self) -> Vec<JobId> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let classes = self.turns.iter().filter_map(|&j| self.waiting.class_of(j)).chain(self.waiting.all());
        for c in classes {
            for rank in &self.waiting.class(c).members {
                let job = rank::job_of(rank);
                if seen.insert(job) {
                    out.push(job);
                }
            }
        }
        out
    }

    /// Moves the clock `ms` forward. It never passes [`MAX_CLOCK_MS`]: inputs are checked
    /// against it when they are read, and a step past it is refused, the clock unmoved.
    pub fn advance(&mut self, ms: u64) -> Result<(), ClockLimit> {
        self.world.advance(ms)?;
        if ms > 0 {
            self.touch();
            self.follow_quota_windows();
        }
        Ok(())
    }

    /// Seeds the pseudo-random draws of `hash01` (runs with different seeds draw
    /// differently; 0 is the default).
    pub fn set_seed(&mut self, seed: u64) {
        self.world.reseed(seed);
        self.touch();
    }

    /// The cluster clock: the policy's time zone, and the real time of clock 0
    /// ([`gpol_compiler::clock::DEFAULT_START`] local unless set).
    pub fn clock(&self) -> &Clock {
        self.world.clock()
    }

    /// Sets the cluster clock (a simulation's: its zone, clock 0 at the trace's start).
    pub fn set_clock(&mut self, clock: Clock) {
        self.world.set_clock(clock);
        self.touch();
        self.follow_quota_windows();
    }

    /// Ties clock 0 to real time (adapters, whose clocks replay a real scheduler's; they
    /// read wall times with the same [`WallClock`]).
    pub fn start_wall_clock(&mut self, wall: WallClock) {
        self.world.start_wall_clock(wall);
        self.touch();
        self.follow_quota_windows();
    }

    /// Sets the popular request shapes rules see as `cluster.task_shapes`.
    pub fn set_task_shapes(&mut self, shapes: ShapeTable) {
        self.world.set_task_shapes(shapes);
        self.touch();
    }

    /// Capacity of the nodes in service, per resource.
    pub(crate) fn totals(&self) -> Amounts {
        self.world.totals()
    }

    pub(crate) fn cluster_rec(&self) -> ClusterRec<'_> {
        let res = |c: crate::model::Capacity| gpol_compiler::schema::Resources {
            gpu: model_records::gpus(c.gpu_milli),
            cpu: c.cpu_milli as f64 / 1000.0,
            mem: c.mem as f64,
        };
        let local = self.world.clock().local(self.world.now_ms());
        ClusterRec {
            time: model_records::seconds(self.world.now_ms()),
            time_of_day: local.seconds_of_day,
            weekday: f64::from(local.weekday),
            nodes: self.world.cluster().capacity.nodes as f64,
            total: res(self.world.cluster().capacity),
            free: res(self.world.cluster().free),
            task_shapes: List::new(self.world.task_shapes().records()),
        }
    }

    /// What rules see of the cluster and the queues now. `changes` are jobs to count as
    /// admitted (+1) or evicted (-1) in the queues' `share_after`.
    pub(crate) fn view_with(&self, changes: &[(QueueId, &Amounts, i64)]) -> View<'_> {
        let totals = self.totals();
        let key = QueueRecsKey {
            version: self.world.quotas().version(),
            shape: self.world.quotas().shape_version(),
            capacity: self.world.cluster().capacity,
        };
        let fair = || match self.facts.reads_fair_share {
            true => crate::fair_share::fair_shares(self.world.quotas(), totals.get(&Res::Gpu).copied().unwrap_or(0)),
            false => Vec::new(),
        };
        // Between changes to the written quotas only allocation, usage and counts move.
        let mut queues = self.caches.queue_recs(
            key,
            |recs| model_records::refresh_queue_recs(self.world.quotas(), &totals, &fair(), recs),
            || model_records::queue_recs(self.world.quotas(), &totals, &fair()),
        );
        // Only the queues above a changed leaf see different `_after` fields.
        for (leaf, _, _) in changes {
            for q in self.world.quotas().path(*leaf) {
                model_records::apply_after(self.world.quotas(), &totals, q, changes, &mut queues[q]);
            }
        }
        View { cluster: self.cluster_rec(), queues }
    }

    /// What admission and placement rules see: [`Scheduler::view`], but when none of them
    /// reads a queue, the queue records are the last ones worked out (as many, and never
    /// read) rather than worked out anew after every change.
    pub(crate) fn placement_view(&self, job: JobId) -> View<'_> {
        self.placement_view_for(job, self.world.jobs()[job].ask.replicas)
    }

    /// [`Scheduler::placement_view`] with `replicas` of the job admitted (a growing gang
    /// adds one).
    pub(crate) fn placement_view_for(&self, job: JobId, replicas: u32) -> View<'_> {
        if !self.facts.placement_reads_queues
            && let Some(queues) = self.caches.last_queue_recs()
        {
            return View { cluster: self.cluster_rec(), queues };
        }
        let j = &self.world.jobs()[job];
        let demand = jobs::replicas_demand(j, replicas, None);
        self.view_with(&[(j.ask.queue, &demand, 1)])
    }

    /// What rules see now; `job` is the job in scope, for its queues' `share_after`.
    pub fn view(&self, job: Option<JobId>) -> View<'_> {
        match job {
            Some(j) => {
                let demand = jobs::demand(&self.world.jobs()[j], None);
                self.view_with(&[(self.world.jobs()[j].ask.queue, &demand, 1)])
            }
            None => self.view_with(&[]),
        }
    }

    /// The evaluation context for rules, over a `view`.
    pub fn ctx<'a>(&'a self, view: &'a View<'a>) -> Ctx<'a> {
        Ctx {
            cluster: &view.cluster,
            queues: &view.queues,
            domains: self.world.domains(),
            literals: &self.facts.literals,
            sym_hashes: self.world.syms().hashes(),
            attrs: &self.facts.policy.program.attrs,
        }
    }

    pub fn node_records(&self) -> &[gpol_compiler::schema::NodeRec<'_>] {
        self.world.table().records()
    }

    pub fn job_rec(&self, job: JobId) -> JobRec<'_> {
        let j = &self.world.jobs()[job];
        let mut rec = model_records::job_rec(j, self.world.jobs().labels(job), self.world.now_ms());
        if self.facts.user_reads.usage {
            rec.user_usage = self.world.quotas().user_usage(j.ask.queue, j.ask.user, self.world.now_ms());
        }
        if self.facts.user_reads.fair_tree {
            rec.fair_tree = self.fair_tree_factor(j.ask.queue, j.ask.user);
        }
        rec
    }

    /// Keeps every user's usage from now on, whatever rules read: a test's expectations
    /// may read `job.user_usage` and `job.fair_tree`. Call before jobs are submitted.
    pub(crate) fn track_users(&mut self) {
        self.world.track_users();
    }

    /// The job's record with every field filled in, even those no rule reads (the user's
    /// usage and Fair Tree factor): for tests' expectations and explanations.
    pub(crate) fn job_rec_in_full(&self, job: JobId) -> JobRec<'_> {
        let j = &self.world.jobs()[job];
        let mut rec = self.job_rec(job);
        rec.user_usage = self.world.quotas().user_usage(j.ask.queue, j.ask.user, self.world.now_ms());
        rec.fair_tree = self.fair_tree_factor(j.ask.queue, j.ask.user);
        rec
    }

    /// Slurm Fair Tree's factor of `user` in leaf `queue` (0 for a user it does not know).
    pub(crate) fn fair_tree_factor(&self, queue: QueueId, user: Sym) -> f64 {
        let key = (self.world.quotas().version(), self.world.now_ms());
        let compute = || crate::fair_tree::factors(self.world.quotas(), self.world.now_ms());
        self.caches.fair_tree_factor(key, compute, queue, user)
    }
}

/// A step of the clock that would take it past [`MAX_CLOCK_MS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockLimit {
    pub now_ms: u64,
    pub by_ms: u64,
}

impl std::fmt::Display for ClockLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "time too large: advancing the clock from {} s by {} s passes its limit of {} s (100 years)",
            self.now_ms / 1000,
            self.by_ms / 1000,
            MAX_CLOCK_MS / 1000
        )
    }
}

impl std::error::Error for ClockLimit {}
