//! The scheduler: a cluster, its quota tree and its jobs, scheduled by a compiled policy
//! (decisions D3, D9). Its state is private: changes go through methods that keep every
//! index and cache in step (`state`, `intake`), reads through accessors and read-only
//! views. Queues are served in `queue_order`, level by level down the tree; inside a
//! leaf, jobs in `job_order` (`order`); each job's turn is an attempt (`cycle`): the
//! placement decision ([`crate::place`]), then, if it waits, the victim search
//! ([`crate::preempt`]) and head-of-line reservation ([`crate::reserve`]). Failed jobs
//! wait to be retried until something that could change their fate happens (`retry`).

mod cycle;
mod event;
mod grow;
mod intake;
pub(crate) mod order;
mod retry;
mod state;
mod waiting;

pub use event::{Event, starts};
pub use intake::{Resolved, SubmitError};
pub use order::compare_keys;

use retry::Backoff;
use waiting::{Ranking, Waiting};

use crate::job_store::JobStore;
use crate::jobs::{Job, JobId, QueueId, Reason, Shape, State};
use crate::model::{Cluster, NodeId};
use crate::quota::{self, Amounts, Quotas, Res};
use crate::records;
use crate::symbols::Symbols;
use crate::wall::WallClock;
use gpol_compiler::clock::Clock;
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::interp::Ctx;
use gpol_compiler::ir::RuleId;
use gpol_compiler::limits::MAX_CLOCK_MS;
use gpol_compiler::schema::{ClusterRec, DomainRec, JobRec, List, NodeTable, QueueRec, ShapeTable, Sym};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The runtime: a cluster, its quota tree and its jobs, scheduled by a compiled policy.
#[derive(Clone)]
pub struct Scheduler {
    /// `Program::filters_declared_before_but_run_after`, worked out once.
    pub(crate) recheck_filters: Vec<Vec<usize>>,
    pub(crate) policy: CompiledPolicy,
    pub(crate) syms: Symbols,
    pub(crate) cluster: Cluster,
    pub(crate) quotas: Quotas,
    pub(crate) jobs: JobStore,
    pub(crate) now_ms: u64,
    /// Where `now_ms` falls in real time, in the policy's time zone.
    clock: Clock,
    /// What the cycle under way has decided so far, returned when it ends (empty between
    /// calls).
    pub(crate) decided: Vec<Event>,
    /// Placement attempts so far (each one a filter+score pass over the nodes), and
    /// victim searches.
    attempts: u64,
    searches: u64,
    /// The runtime symbol of each of the policy's string literals.
    literals: Vec<Sym>,
    job_label_keys: Vec<Sym>,
    node_label_keys: Vec<Sym>,
    table: NodeTable,
    domains: Vec<DomainRec>,
    /// The waiting jobs, in classes the policy cannot tell apart. A class whose latest
    /// attempt failed is not tried again while nothing has changed, and then not until
    /// capacity frees (or, for jobs the quota holds back, until the cap that held them
    /// back gives) — or, when the policy can evict, until another job starts (a new
    /// victim), and when its victim rules or reservations depend on time, until the retry
    /// interval has passed.
    waiting: Waiting,
    /// Counts every change to what rules or the runtime read (the cluster, the quotas,
    /// the jobs, the clock): a class that failed at this version would fail again.
    version: u64,
    /// The job fields rules other than `job_order` read, which tell waiting jobs apart.
    distinguishing: Vec<u16>,
    /// How often waiting jobs must be ranked again.
    ranking: Ranking,
    /// Per strict leaf, the head job that stopped it at its latest failed turn: the jobs
    /// behind it wait with reason `order`.
    blocked_by: Vec<Option<JobId>>,
    /// Jobs started so far, and the count when the current cycle began (the jobs started
    /// since were not judged as victims).
    starts: u64,
    cycle_starts: u64,
    /// Per queue, the value of `starts` after the latest start in its subtree.
    started_under: Vec<u64>,
    /// Changes of allocation (starts, finishes, evictions) so far, and per leaf the count
    /// after its latest.
    alloc_changes: u64,
    changed_at: Vec<u64>,
    /// Jobs that have stopped holding what they held (ended or evicted) so far.
    releases: u64,
    /// Whether victim rules read nothing but the two jobs: then only a start in a queue
    /// whose jobs could be victims can change a failed victim search.
    victims_read_jobs: bool,
    /// Whether a failed attempt's answer can change with time alone because filters, gang
    /// clauses or victim rules read a time-varying field: then a failed class is retried
    /// once the retry interval has passed.
    retry_on_time: bool,
    /// Whether time alone can change a waiting job's fate: `retry_on_time`, or the policy
    /// reserves (a job reserves at its first attempt after it has waited `reserve_after`).
    time_matters: bool,
    shapes: HashMap<Shape, usize>,
    /// Shapes no node in service can take now: their jobs wait until capacity frees.
    full: HashSet<usize>,
    /// The running jobs, so nothing scans finished ones.
    pub(crate) running: BTreeSet<JobId>,
    /// The running elastic gangs with fewer replicas than they ask for (they may grow),
    /// so growth does not scan every running job at every cycle.
    pub(crate) short_gangs: BTreeSet<JobId>,
    /// Nodes held for a job that waited past `reserve_after`, by job and by node.
    pub(crate) reservations: BTreeMap<JobId, Vec<NodeId>>,
    pub(crate) reserved: HashMap<NodeId, JobId>,
    /// With victim rules or reservations, a job whose attempt failed is retried once this
    /// much time has passed (0: whenever the clock moves), or when capacity frees.
    retry_interval_ms: u64,
    /// The queue records of the last view, and the quota version and capacity they were
    /// computed for: most views between two changes are of the same state.
    queue_cache: std::cell::RefCell<Option<(CacheKey, Vec<QueueRec>)>>,
    /// The workload's popular request shapes (`cluster.task_shapes`), set by whoever
    /// knows the workload (the simulator, from its trace).
    task_shapes: ShapeTable,
    /// How many replicas of each shape the nodes in service could hold if they were
    /// empty: it changes only when a node joins, leaves or returns to service.
    room_when_empty: std::cell::RefCell<HashMap<usize, u64>>,
    /// What job records carry of the job's user beyond the job: its usage, and Fair
    /// Tree's factors (worked out when rules read them, cached for one quota version and
    /// time).
    pub(super) user_fields: UserFields,
    /// What the victim rules read that a victim search must follow.
    pub(crate) victim_reads: crate::preempt::VictimReads,
    /// Whether `queue_order` reads the queues' next jobs (`queue.head_*`).
    pub(super) queue_order_reads_head: bool,
    /// While a cycle runs, the jobs it has started: none of them is a victim in the same
    /// cycle, so two jobs cannot evict each other back and forth without end inside one.
    pub(crate) started_this_cycle: HashSet<JobId>,
    /// The jobs the last cycle gave a turn, in order.
    pub(crate) turns: Vec<JobId>,
    /// While [`Scheduler::cycle_recorded`] runs, the account of each turn so far.
    recording: Option<Vec<crate::account::Account>>,
    pub(crate) in_cycle: bool,
    fair_tree: std::cell::RefCell<Option<FairTreeCache>>,
    /// Per queue, whether it borrows something the tree governs, and the quota version
    /// that is of.
    borrowing: std::cell::RefCell<Option<(u64, Vec<bool>)>>,
    /// Whether a class whose victim search found no candidate waits until what could give
    /// it one happens (`retry`).
    skip_fruitless_searches: bool,
    /// Whether admit, filter, score, card score or gang rules read a queue.
    placement_reads_queues: bool,
    /// Whether any rule reads `queue.fair_share` (worked out only then).
    reads_fair_share: bool,
    /// The room each cohort cap has, and the quota version that is of.
    cohort_room: std::cell::RefCell<(u64, CohortRoom)>,
}

/// The room of cohort caps, by leaf and resource.
/// Hashed with Fx: looked up by every waiting class after every change.
type CohortRoom = rustc_hash::FxHashMap<(QueueId, Res), i64>;

/// Fair Tree's factors by leaf and user, and the quota version and time they are of.
type FairTreeCache = ((u64, u64), HashMap<(QueueId, Sym), f64>);

/// Which of the user's fields rules read.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct UserFields {
    pub(super) usage: bool,
    pub(super) fair_tree: bool,
    /// Whether users' usage is kept (rules read it, or a test's expectations may).
    pub(super) tracked: bool,
}

/// What cached queue records depend on: the quota tree's version and the capacity.
/// What the cached queue records were worked out for.
#[derive(Clone, Copy, PartialEq)]
struct CacheKey {
    version: u64,
    shape: u64,
    capacity: crate::model::Capacity,
}

/// The cluster and queue records rules read, as of one moment.
pub struct View<'a> {
    pub cluster: ClusterRec<'a>,
    pub queues: Vec<QueueRec>,
}

impl Scheduler {
    pub fn new(policy: CompiledPolicy) -> Scheduler {
        let mut syms = Symbols::default();
        let literals = policy.program.literals.iter().map(|l| syms.intern(l)).collect();
        let job_label_keys = policy.program.job_labels.iter().map(|k| syms.intern(k)).collect();
        let node_label_keys = policy.program.node_labels.iter().map(|k| syms.intern(k)).collect();
        let quotas = Quotas::new(&policy.policy, &mut syms);
        let cluster = Cluster::new(policy.policy.levels.clone());
        let nq = quotas.queues.len();
        let retry_on_time = policy.program.bodies().iter().any(|(id, _, body)| {
            matches!(id, RuleId::Filter(_) | RuleId::Gang(_) | RuleId::Victim(_)) && reads_time(&body.node)
        });
        let time_matters = retry_on_time || policy.policy.settings.reserve_after.is_some();
        let placement_reads_queues = policy.program.bodies().iter().any(|(id, _, body)| {
            matches!(
                id,
                RuleId::Admit(_) | RuleId::Filter(_) | RuleId::Score(_) | RuleId::CardScore(_) | RuleId::Gang(_)
            ) && body.node.any(&|n| {
                matches!(n.kind, gpol_compiler::ir::Kind::Field { record: gpol_compiler::schema::Record::Queue, .. })
            })
        });
        let victims_read_jobs = policy
            .program
            .victims
            .iter()
            .all(|v| std::iter::once(&v.when).chain(v.cost.as_ref()).all(|b| !reads_beyond_job(&b.node)));
        let ranking = Ranking::of(&policy.program);
        let distinguishing = waiting::distinguishing_fields(&policy.program);
        let recheck_filters = policy.program.filters_declared_before_but_run_after();
        let reads = |field: &str| {
            policy.program.bodies().iter().any(|(_, _, b)| b.node.reads(gpol_compiler::schema::Record::Job, field))
        };
        let (usage, fair_tree) = (reads("user_usage"), reads("fair_tree"));
        let user_fields = UserFields { usage, fair_tree, tracked: usage || fair_tree };
        let victim_reads = crate::preempt::VictimReads::of(&policy.program);
        let reads_fair_share = policy
            .program
            .bodies()
            .iter()
            .any(|(_, _, b)| b.node.reads(gpol_compiler::schema::Record::Queue, "fair_share"));
        let queue_order_reads_head = policy.program.queue_order.iter().any(|k| {
            ["head_waiting", "head_gpus", "head_priority", "head_fits_guarantee"]
                .iter()
                .any(|f| k.body.node.reads(gpol_compiler::schema::Record::Queue, f))
        });
        let clock = Clock::of_zone(policy.policy.settings.timezone.as_deref());
        let mut s = Scheduler {
            recheck_filters,
            policy,
            syms,
            cluster,
            quotas,
            jobs: JobStore::default(),
            now_ms: 0,
            clock,
            decided: Vec::new(),
            attempts: 0,
            searches: 0,
            literals,
            job_label_keys,
            node_label_keys,
            table: NodeTable::default(),
            domains: Vec::new(),
            waiting: Waiting::new(nq),
            version: 0,
            distinguishing,
            ranking,
            blocked_by: vec![None; nq],
            starts: 0,
            cycle_starts: 0,
            started_under: vec![0; nq],
            alloc_changes: 0,
            releases: 0,
            changed_at: vec![0; nq],
            victims_read_jobs,
            retry_on_time,
            time_matters,
            shapes: HashMap::new(),
            full: HashSet::new(),
            running: BTreeSet::new(),
            short_gangs: BTreeSet::new(),
            reservations: BTreeMap::new(),
            reserved: HashMap::new(),
            task_shapes: ShapeTable::default(),
            retry_interval_ms: 0,
            queue_cache: std::cell::RefCell::new(None),
            room_when_empty: std::cell::RefCell::new(HashMap::new()),
            user_fields,
            victim_reads,
            queue_order_reads_head,
            started_this_cycle: HashSet::new(),
            turns: Vec::new(),
            recording: None,
            in_cycle: false,
            fair_tree: std::cell::RefCell::new(None),
            borrowing: std::cell::RefCell::new(None),
            skip_fruitless_searches: true,
            placement_reads_queues,
            reads_fair_share,
            cohort_room: std::cell::RefCell::new((u64::MAX, CohortRoom::default())),
        };
        s.follow_quota_windows();
        s
    }

    /// Puts in force the quota amounts of the local time now (quota windows), noting a
    /// change of phase as a change to what the runtime reads.
    fn follow_quota_windows(&mut self) {
        if !self.quotas.window_edges().is_empty() {
            let minute = self.clock.minute_of_week(self.now_ms);
            if self.quotas.set_minute_of_week(minute) {
                self.touch();
            }
        }
    }

    /// When the quota amounts in force change next (a quota window opens or closes), on
    /// the scheduler's clock; `None` if no quota has a window. Drivers that skip idle time
    /// (the simulator) wake then.
    pub fn next_quota_change_ms(&self) -> Option<u64> {
        let edges = self.quotas.window_edges();
        if edges.is_empty() {
            // The simulator asks at every step: no local time to work out without windows.
            return None;
        }
        let minute = self.clock.minute_of_week(self.now_ms);
        let wait = gpol_compiler::window::next_edge(edges, minute)?;
        self.clock.after_local_minutes(self.now_ms, wait)
    }

    /// The policy it runs.
    pub fn policy(&self) -> &CompiledPolicy {
        &self.policy
    }

    /// The cluster as it stands.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The quota tree and its accounting.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// The jobs submitted so far and not forgotten, by id.
    pub fn jobs(&self) -> &JobStore {
        &self.jobs
    }

    pub fn job(&self, id: JobId) -> &Job {
        &self.jobs[id]
    }

    /// The strings jobs, nodes and queues were interned as.
    pub fn symbols(&self) -> &Symbols {
        &self.syms
    }

    /// The scheduler's clock, ms.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
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
        &self.reservations
    }

    /// The job node `node` is held for, if any.
    pub fn reserved_for(&self, node: NodeId) -> Option<JobId> {
        self.reserved.get(&node).copied()
    }

    /// With victim rules or reservations, a job whose attempt failed is retried once this
    /// much time has passed (0, the default: whenever the clock moves), or sooner when
    /// capacity frees.
    pub fn set_retry_interval(&mut self, ms: u64) {
        self.retry_interval_ms = ms;
    }

    /// The running jobs, in submission order.
    pub fn running(&self) -> impl Iterator<Item = JobId> + '_ {
        self.running.iter().copied()
    }

    /// How many jobs wait.
    pub fn pending(&self) -> usize {
        self.waiting.len()
    }

    /// A job's state; a waiting job's with the reason it waits (its class's latest failed
    /// attempt, or `order` behind a strict queue's waiting head).
    pub fn state(&self, job: JobId) -> State {
        match &self.jobs[job].state {
            State::Pending(_) => State::Pending(self.reason(job)),
            other => other.clone(),
        }
    }

    /// Why a waiting job waits; `None` before any job of its class was tried.
    fn reason(&self, job: JobId) -> Option<Reason> {
        let leaf = self.jobs[job].queue;
        let behind = self
            .blocked_by
            .get(leaf)
            .copied()
            .flatten()
            .filter(|&h| h != job && self.jobs.get(h).is_some_and(Job::is_pending));
        if behind.is_some() && self.quotas.queues[leaf].queueing == gpol_compiler::hir::Queueing::Strict {
            return Some(Reason::Order);
        }
        self.waiting.class_of(job).and_then(|c| self.waiting.class(c).reason)
    }

    /// Notes a change to what rules or the runtime read: every failed class may be asked
    /// again (`retry` says when it is worth it).
    pub(crate) fn touch(&mut self) {
        self.version += 1;
    }

    /// Whether a waiting job's fate can change with time alone — victim rules, reservations,
    /// or admit rules that read the cluster or the clock — so that a driver with nothing
    /// else happening should still run a cycle now and then.
    pub fn waits_on_time(&self) -> bool {
        self.time_matters || self.policy.program.admit.iter().any(|r| !r.is_static)
    }

    /// Whether some rule reads the time of day or the weekday, or some quota has a
    /// window: what time alone changes then repeats every week.
    pub fn reads_local_time(&self) -> bool {
        use gpol_compiler::schema::Record;
        !self.quotas.window_edges().is_empty()
            || self.policy.program.bodies().iter().any(|(_, _, b)| {
                b.node.reads(Record::Cluster, "time_of_day") || b.node.reads(Record::Cluster, "weekday")
            })
    }

    /// The clock as a signed time, to compare with jobs' times.
    pub(super) fn now(&self) -> i64 {
        i64::try_from(self.now_ms).unwrap_or(i64::MAX)
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
                let job = waiting::job_of(rank);
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
        let to = self.now_ms.checked_add(ms).filter(|&t| t <= MAX_CLOCK_MS);
        self.now_ms = to.ok_or(ClockLimit { now_ms: self.now_ms, by_ms: ms })?;
        self.quotas.advance_usage(self.now_ms);
        if ms > 0 {
            self.touch();
            self.follow_quota_windows();
        }
        Ok(())
    }

    /// Seeds the pseudo-random draws of `hash01` (runs with different seeds draw
    /// differently; 0 is the default).
    pub fn set_seed(&mut self, seed: u64) {
        self.syms.reseed(seed);
        self.touch();
    }

    /// The cluster clock: the policy's time zone, and the real time of clock 0
    /// ([`gpol_compiler::clock::DEFAULT_START`] local unless set).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Sets the cluster clock (a simulation's: its zone, clock 0 at the trace's start).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
        self.touch();
        self.follow_quota_windows();
    }

    /// Ties clock 0 to real time (adapters, whose clocks replay a real scheduler's; they
    /// read wall times with the same [`WallClock`]).
    pub fn start_wall_clock(&mut self, wall: WallClock) {
        self.clock.start_at_unix_ms(wall.origin_unix_ms());
        self.touch();
        self.follow_quota_windows();
    }

    /// Sets the popular request shapes rules see as `cluster.task_shapes`.
    pub fn set_task_shapes(&mut self, shapes: ShapeTable) {
        self.task_shapes = shapes;
        self.touch();
    }

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
        let local = self.clock.local(self.now_ms);
        ClusterRec {
            time: records::seconds(self.now_ms),
            time_of_day: local.seconds_of_day,
            weekday: f64::from(local.weekday),
            nodes: self.cluster.capacity.nodes as f64,
            total: res(self.cluster.capacity),
            free: res(self.cluster.free),
            task_shapes: List::new(self.task_shapes.records()),
        }
    }

    /// What rules see of the cluster and the queues now. `changes` are jobs to count as
    /// admitted (+1) or evicted (-1) in the queues' `share_after`.
    pub fn view_with(&self, changes: &[(QueueId, &Amounts, i64)]) -> View<'_> {
        let totals = self.totals();
        let key = CacheKey {
            version: self.quotas.version(),
            shape: self.quotas.shape_version(),
            capacity: self.cluster.capacity,
        };
        let mut cache = self.queue_cache.borrow_mut();
        let fair = || match self.reads_fair_share {
            true => crate::fair_share::fair_shares(&self.quotas, totals.get(&Res::Gpu).copied().unwrap_or(0)),
            false => Vec::new(),
        };
        let mut queues = match cache.as_mut() {
            Some((k, recs)) if *k == key => recs.clone(),
            // Between changes to the written quotas only allocation, usage and counts move.
            Some((k, recs)) if (k.shape, k.capacity) == (key.shape, key.capacity) => {
                records::refresh_queue_recs(&self.quotas, &totals, &fair(), recs);
                *k = key;
                recs.clone()
            }
            _ => {
                let recs = records::queue_recs(&self.quotas, &totals, &fair());
                *cache = Some((key, recs.clone()));
                recs
            }
        };
        // Only the queues above a changed leaf see different `_after` fields.
        for (leaf, _, _) in changes {
            for q in self.quotas.path(*leaf) {
                records::apply_after(&self.quotas, &totals, q, changes, &mut queues[q]);
            }
        }
        View { cluster: self.cluster_rec(), queues }
    }

    /// What admission and placement rules see: [`Scheduler::view`], but when none of them
    /// reads a queue, the queue records are the last ones worked out (as many, and never
    /// read) rather than worked out anew after every change.
    pub(crate) fn placement_view(&self, job: JobId) -> View<'_> {
        self.placement_view_for(job, self.jobs[job].replicas)
    }

    /// [`Scheduler::placement_view`] with `replicas` of the job admitted (a growing gang
    /// adds one).
    pub(crate) fn placement_view_for(&self, job: JobId, replicas: u32) -> View<'_> {
        if !self.placement_reads_queues
            && let Some((_, recs)) = self.queue_cache.borrow().as_ref()
        {
            return View { cluster: self.cluster_rec(), queues: recs.clone() };
        }
        let j = &self.jobs[job];
        let demand = quota::replicas_demand(j, replicas, None);
        self.view_with(&[(j.queue, &demand, 1)])
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

    pub fn node_records(&self) -> &[gpol_compiler::schema::NodeRec<'_>] {
        self.table.records()
    }

    pub fn job_rec(&self, job: JobId) -> JobRec<'_> {
        let j = &self.jobs[job];
        let mut rec = records::job_rec(j, self.jobs.labels(job), self.now_ms);
        if self.user_fields.usage {
            rec.user_usage = self.quotas.user_usage(j.queue, j.user, self.now_ms);
        }
        if self.user_fields.fair_tree {
            rec.fair_tree = self.fair_tree_factor(j.queue, j.user);
        }
        rec
    }

    /// Keeps every user's usage from now on, whatever rules read: a test's expectations
    /// may read `job.user_usage` and `job.fair_tree`. Call before jobs are submitted.
    pub fn track_users(&mut self) {
        self.user_fields.tracked = true;
    }

    /// The job's record with every field filled in, even those no rule reads (the user's
    /// usage and Fair Tree factor): for tests' expectations and explanations.
    pub fn job_rec_in_full(&self, job: JobId) -> JobRec<'_> {
        let j = &self.jobs[job];
        let mut rec = self.job_rec(job);
        rec.user_usage = self.quotas.user_usage(j.queue, j.user, self.now_ms);
        rec.fair_tree = self.fair_tree_factor(j.queue, j.user);
        rec
    }

    /// Slurm Fair Tree's factor of `user` in leaf `queue` (0 for a user it does not know).
    pub fn fair_tree_factor(&self, queue: QueueId, user: Sym) -> f64 {
        let key = (self.quotas.version(), self.now_ms);
        let mut cache = self.fair_tree.borrow_mut();
        if cache.as_ref().is_none_or(|(k, _)| *k != key) {
            *cache = Some((key, crate::fair_tree::factors(&self.quotas, self.now_ms)));
        }
        cache.as_ref().and_then(|(_, f)| f.get(&(queue, user)).copied()).unwrap_or(0.0)
    }
}

/// Whether a rule body reads anything but job fields (queues, the cluster, domains).
pub(super) fn reads_beyond_job(node: &gpol_compiler::ir::Node) -> bool {
    use gpol_compiler::ir::Kind;
    node.any(&|n| {
        matches!(n.kind, Kind::Domain { .. })
            || matches!(n.kind, Kind::Field { record, .. } if record != gpol_compiler::schema::Record::Job)
    })
}

/// Whether an expression reads something that changes with time alone: how long a job
/// has waited or run, its unsaved work, the clock, or decayed usage.
pub(crate) fn reads_time(node: &gpol_compiler::ir::Node) -> bool {
    use gpol_compiler::schema::Record;
    [
        (Record::Job, "waiting"),
        (Record::Job, "runtime"),
        (Record::Job, "since_checkpoint"),
        (Record::Job, "user_usage"),
        (Record::Job, "fair_tree"),
        (Record::Cluster, "time"),
        (Record::Cluster, "time_of_day"),
        (Record::Cluster, "weekday"),
        (Record::Queue, "usage"),
    ]
    .into_iter()
    .any(|(record, field)| node.reads(record, field))
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
