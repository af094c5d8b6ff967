//! The discrete-event core: arrivals, completions, evictions and node events drive the
//! scheduler, which runs one cycle per moment something happened (never by polling each
//! job each tick). Fill mode replays a shuffled trace with no departures instead.

use crate::cluster_file::{ClusterSpec, NodeEventKind};
use crate::input::InputError;
use crate::report::{
    self, Delay, FillCurve, GpuHours, JobCounts, NeverScheduled, Preemption, QueueSummary, Report, Stats,
};
use crate::series::Series;
use crate::trace::TraceJob;
use crate::workload::Workload;
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::spec::MILLI;
use gpol_runtime::NodeId;
use gpol_runtime::Res;
use gpol_runtime::explain;
use gpol_runtime::fit::Ask;
use gpol_runtime::frag::{self, TaskShape};
use gpol_runtime::water_fill;
use gpol_runtime::{Event, Scheduler};
use gpol_runtime::{JobId, QueueId, State};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Jobs arrive and depart over time, as the trace says.
    Timed,
    /// Jobs arrive in a shuffled order, each tried once and never leaving, until the
    /// requested GPUs reach `target` times the capacity.
    Fill { target: f64 },
}

/// The note on a timed replay of an openb pod list.
pub const OPENB_TIMED: &str = "the trace is an openb pod list, a snapshot of a cluster's pods without usable run times: replayed in time, nearly nothing runs. Run it in fill mode (`--fill 130`), as the ATC '23 study does";

/// How fill mode reaches its target once the trace's jobs have all come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sampling {
    /// The whole trace again in a fresh order, pass after pass, until the target.
    #[default]
    Passes,
    /// As the ATC '23 simulator tunes its workload: the shuffled trace topped up with jobs
    /// drawn with replacement until the next would pass the target, or, when the trace
    /// alone passes it, random jobs removed until it does not.
    Replacement,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    /// Seeds the fill order and the policy's `hash01` draws.
    pub seed: u64,
    /// When time alone can change a waiting job's fate (victim rules, reservations,
    /// admit rules that read the clock), waiting jobs are retried this often.
    pub retry_ms: u64,
    /// Chart resolution: the series keep between this many and twice as many points.
    pub points: usize,
    /// The share of the workload's jobs its most popular shapes, `cluster.task_shapes`,
    /// cover (at most `MAX_TASK_SHAPES` of them).
    pub shape_coverage: f64,
    /// Fill mode: how the workload reaches its target.
    pub sampling: Sampling,
    /// The local date and time of the trace's time 0 in the policy's time zone
    /// (`2026-11-23T08:00`); `None`: Monday 00:00 ([`gpol_compiler::clock::DEFAULT_START`]).
    pub start: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mode: Mode::Timed,
            seed: 1,
            retry_ms: 60_000,
            points: 300,
            shape_coverage: frag::DEFAULT_COVERAGE,
            sampling: Sampling::Passes,
            start: None,
        }
    }
}

/// What a caller can see and do while a run goes on.
pub struct Control<'a> {
    /// Called now and then with the share of the run done, from 0 to 1.
    pub progress: &'a (dyn Fn(f64) + Sync),
    /// Set to stop the run early; it then returns [`SimError::Interrupted`].
    pub cancel: &'a AtomicBool,
    /// Shown every event the scheduler logs, after the cycle that logged it, with the
    /// scheduler as of then (to read job and node names from); `None` when only the
    /// report is wanted.
    pub on_event: Option<&'a EventHook<'a>>,
}

/// What [`Control::on_event`] calls.
pub type EventHook<'a> = dyn Fn(&Scheduler, &Event) + Sync + 'a;

impl<'a> Control<'a> {
    /// Progress reports and cancellation, no event hook.
    pub fn new(progress: &'a (dyn Fn(f64) + Sync), cancel: &'a AtomicBool) -> Control<'a> {
        Control { progress, cancel, on_event: None }
    }
}

#[derive(Debug)]
pub enum SimError {
    Input(InputError),
    /// The trace runs the clock past its limit.
    Clock(gpol_runtime::ClockLimit),
    Interrupted,
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Input(e) => e.fmt(f),
            SimError::Clock(e) => e.fmt(f),
            SimError::Interrupted => f.write_str("the run was interrupted; no results were written"),
        }
    }
}

impl std::error::Error for SimError {}

impl From<InputError> for SimError {
    fn from(e: InputError) -> SimError {
        SimError::Input(e)
    }
}

/// Runs one simulation.
pub fn run(
    policy: &CompiledPolicy,
    cluster: &ClusterSpec,
    workload: &Workload,
    config: &Config,
    control: &Control,
) -> Result<Report, SimError> {
    let mut sim = Sim::new(policy, cluster, workload, config)?;
    match config.mode {
        Mode::Timed => sim.timed(control)?,
        Mode::Fill { target } => sim.fill(target, control)?,
    }
    Ok(sim.report())
}

/// What the simulator tracks of each job in flight.
#[derive(Clone, Debug, Default)]
struct Run {
    arrival_ms: u64,
    /// An index into the workload's priority classes.
    class: Option<u32>,
    remaining_ms: Option<u64>,
    /// The node of each replica it runs, while it runs.
    placed: Vec<NodeId>,
    /// Bumped at every stop, so a completion scheduled before it is recognised as stale.
    epoch: u32,
    first_start_ms: Option<u64>,
}

/// What the report keeps of every job, in a few bytes each: the scheduler and the
/// simulator forget a job once it has ended.
#[derive(Debug, Default)]
struct Outcomes {
    /// One per job that started.
    starts: Vec<Start>,
    /// Per finished job, arrival to finish, ms.
    completions: Vec<u64>,
    /// Jobs that ended, by how.
    finished: u64,
    rejected: u64,
    withdrawn: u64,
    /// Per queue, jobs submitted and jobs finished.
    submitted_in: Vec<u64>,
    finished_in: Vec<u64>,
    /// Per queue, evictions of its jobs and GPU-seconds of work they lost.
    evicted_in: Vec<u64>,
    lost_gpu_s_in: Vec<f64>,
    /// Jobs that ended without starting, by reason.
    never: BTreeMap<String, NeverScheduled>,
}

#[derive(Clone, Copy, Debug)]
struct Start {
    delay_ms: u64,
    queue: u32,
    class: Option<u32>,
}

impl Outcomes {
    fn never_started(&mut self, reason: String, example: impl FnOnce() -> String, milli: u64) {
        let g = self.never.entry(reason.clone()).or_insert_with(|| NeverScheduled {
            reason,
            jobs: 0,
            gpus: 0.0,
            example: example(),
        });
        g.jobs += 1;
        g.gpus += milli as f64 / 1000.0;
    }
}

struct Sim<'a> {
    s: Scheduler,
    /// What happened since it was last read: the scheduler's decisions, with the
    /// submissions and finishes the simulator made, in order.
    journal: Vec<Event>,
    workload: &'a Workload,
    cluster: &'a ClusterSpec,
    config: &'a Config,
    runs: HashMap<JobId, Run>,
    outcomes: Outcomes,
    leaves: Vec<QueueId>,
    shapes: Vec<TaskShape>,
    failed: Vec<bool>,
    // The state the series integrate, as of the last event.
    capacity_milli: u64,
    allocated_milli: u64,
    used_milli: f64,
    /// The same per GPU model: each node's model (an index into `models`), and per model
    /// the capacity, allocation and use, and the GPU-seconds of work lost.
    node_model: Vec<usize>,
    models: Vec<String>,
    model_capacity_milli: Vec<u64>,
    model_allocated_milli: Vec<u64>,
    model_used_milli: Vec<f64>,
    model_lost_gpu_s: Vec<f64>,
    pending_milli: Vec<u64>,
    pending_asks: HashMap<Ask, u32>,
    fragmented_milli: u64,
    fragmented_at_ms: Option<u64>,
    unusable: frag::UnusableCache,
    fair: Vec<f64>,
    /// The quota shape `fair` was worked out for (quota windows change it with time).
    fair_shape: u64,
    series: Series,
    start_ms: u64,
    // Counters.
    preemption: Preemption,
    lost_gpu_s: f64,
    fill: Option<FillCurve>,
    notes: Vec<String>,
}

const WEEK_MS: u64 = 7 * 86_400_000;

/// Signals of the series before the per-queue ones.
const CAPACITY: usize = 0;
const ALLOCATED: usize = 1;
const USED: usize = 2;
const PENDING: usize = 3;
const FRAGMENTED: usize = 4;
const DEVIATION: usize = 5;
/// Counted, not sampled: evictions per second of each bucket.
const EVICTIONS: usize = 6;
const FIXED: usize = 7;
/// Per leaf queue: allocated, guarantee, fair, borrowed, lent.
const PER_QUEUE: usize = 5;
/// Per GPU model, after the queues': capacity, allocated, used.
const PER_MODEL: usize = 3;

impl<'a> Sim<'a> {
    fn new(
        policy: &CompiledPolicy,
        cluster: &'a ClusterSpec,
        workload: &'a Workload,
        config: &'a Config,
    ) -> Result<Sim<'a>, SimError> {
        let mut s = Scheduler::new(policy.clone());
        s.set_seed(config.seed);
        s.set_retry_interval(config.retry_ms);
        if let Some(start) = &config.start {
            let mut clock = s.clock().clone();
            clock.start_at_local(start).map_err(|m| InputError::new("--start", None, None, m.to_string()))?;
            s.set_clock(clock);
        }
        let mut notes = vec![
            "utilization is each job's allocation times its `utilization` from the trace (1.0 when not given)"
                .to_string(),
        ];
        let levels = policy.policy.levels.clone();
        let known = cluster.levels();
        let program = &policy.program;
        let reads_topology = !program.gang.is_empty()
            || program
                .bodies()
                .iter()
                .any(|(_, _, b)| b.node.any(&|n| matches!(n.kind, gpol_compiler::ir::Kind::Domain { .. })));
        for level in levels.iter().filter(|l| reads_topology && !known.contains(l)) {
            notes.push(format!(
                "the cluster spec gives no `{level}` topology: each node is a `{level}` domain of its own"
            ));
        }
        if config.mode == Mode::Timed && workload.is_openb() {
            notes.push(OPENB_TIMED.to_string());
        }
        notes.extend(workload.warnings.iter().cloned());
        for def in &cluster.nodes {
            s.add_node(&def.to_spec(&levels)).map_err(|e| {
                InputError::new(&cluster.name, None, Some(e.field), format!("node `{}`: {}", e.node, e.message))
            })?;
        }
        resolve_all(&s, workload)?;
        let summary = workload.summary();
        let max = gpol_compiler::limits::MAX_TASK_SHAPES as usize;
        // A model no node has matches none: `Sym(0)` names nothing.
        let known = |m: &str| s.symbols().get(m).unwrap_or(gpol_compiler::schema::Sym(0));
        let counted = summary.shapes.iter().map(|(k, n)| (k.clone(), *n));
        let shapes = frag::popular_shapes(counted, config.shape_coverage, max, known);
        s.set_task_shapes(frag::shape_records(&shapes));
        let leaves: Vec<QueueId> = (0..s.quotas().queues.len()).filter(|&q| s.quotas().queues[q].is_leaf()).collect();
        let capacity_milli = cluster.total_gpus() * u64::from(MILLI);
        let mut models: Vec<String> = Vec::new();
        let node_model: Vec<usize> = cluster
            .nodes
            .iter()
            .map(|n| match models.iter().position(|m| *m == n.spec.model) {
                Some(i) => i,
                None => {
                    models.push(n.spec.model.clone());
                    models.len() - 1
                }
            })
            .collect();
        let mut model_capacity_milli = vec![0; models.len()];
        for (n, &m) in cluster.nodes.iter().zip(&node_model) {
            model_capacity_milli[m] += u64::from(n.spec.cards) * u64::from(MILLI);
        }
        let nq = s.quotas().queues.len();
        let signals = FIXED + PER_QUEUE * leaves.len() + PER_MODEL * models.len();
        let start_ms = summary.first_arrival_ms;
        let mut sim = Sim {
            journal: Vec::new(),
            workload,
            cluster,
            config,
            runs: HashMap::new(),
            outcomes: Outcomes {
                // Sized once: the trace's length is known, and doubling would leave a
                // third of the largest allocation unused on average.
                starts: Vec::with_capacity(usize::try_from(workload.len()).unwrap_or(0)),
                completions: Vec::with_capacity(usize::try_from(workload.len()).unwrap_or(0)),
                submitted_in: vec![0; nq],
                finished_in: vec![0; nq],
                evicted_in: vec![0; nq],
                lost_gpu_s_in: vec![0.0; nq],
                ..Outcomes::default()
            },
            leaves,
            shapes,
            failed: vec![false; cluster.nodes.len()],
            capacity_milli,
            allocated_milli: 0,
            used_milli: 0.0,
            model_allocated_milli: vec![0; models.len()],
            model_used_milli: vec![0.0; models.len()],
            model_lost_gpu_s: vec![0.0; models.len()],
            model_capacity_milli,
            node_model,
            models,
            pending_milli: vec![0; nq],
            pending_asks: HashMap::new(),
            fragmented_milli: 0,
            fragmented_at_ms: None,
            unusable: frag::UnusableCache::default(),
            fair: Vec::new(),
            fair_shape: 0,
            series: Series::new(signals, config.points),
            start_ms,
            preemption: Preemption::default(),
            lost_gpu_s: 0.0,
            fill: None,
            notes,
            s,
        };
        sim.refresh_fair();
        Ok(sim)
    }

    // ------------------------------------------------------------ timed replay

    fn timed(&mut self, control: &Control) -> Result<(), SimError> {
        let (workload, cluster) = (self.workload, self.cluster);
        let total = workload.len();
        let mut rows = workload.jobs()?;
        let mut next = rows.next().transpose()?;
        let mut read = 0u64;
        let mut node_events: Vec<_> = cluster.events.iter().collect();
        node_events.sort_by_key(|e| e.at_ms);
        let mut next_node_event = 0;
        let mut completions: BinaryHeap<Reverse<(u64, JobId, u32)>> = BinaryHeap::new();
        let mut retry_at: Option<u64> = None;
        let mut idle_since: Option<u64> = None;
        self.s.advance(self.start_ms).map_err(SimError::Clock)?;
        let mut steps = 0u64;
        loop {
            // Quota windows change what waiting jobs may take: wake where one opens or
            // closes while jobs wait (and the week of retries has not settled them).
            let settled = idle_since.is_some_and(|since| self.s.now_ms() >= since.saturating_add(WEEK_MS));
            let quota_change = (self.s.pending() > 0 && !settled).then(|| self.s.next_quota_change_ms()).flatten();
            let t = [
                next.as_ref().map(|j| j.arrival_ms),
                node_events.get(next_node_event).map(|e| e.at_ms),
                completions.peek().map(|Reverse((t, _, _))| *t),
                retry_at,
                quota_change,
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(t) = t else { break };
            steps += 1;
            if steps.is_multiple_of(256) {
                if control.cancel.load(Ordering::Relaxed) {
                    return Err(SimError::Interrupted);
                }
                (control.progress)(read as f64 / total.max(1) as f64);
            }
            self.advance_to(t)?;
            let retrying = retry_at == Some(t) || quota_change == Some(t);
            if retrying {
                retry_at = None;
            }
            while let Some(j) = next.take_if(|j| j.arrival_ms == t) {
                self.submit(&j, 0)?;
                read += 1;
                next = rows.next().transpose()?;
                if next.as_ref().is_some_and(|n| n.arrival_ms < t) {
                    let m = "the trace changed while it was being read: its rows are no longer in arrival order";
                    return Err(InputError::new(&workload.name, None, None, m).into());
                }
            }
            while let Some(&Reverse((at, job, epoch))) = completions.peek() {
                if at != t {
                    break;
                }
                completions.pop();
                if self.runs.get(&job).is_some_and(|r| r.epoch == epoch) && self.s.complete(job) {
                    self.journal.push(Event::Finished { job, at_ms: self.s.now_ms() });
                }
            }
            while let Some(e) = node_events.get(next_node_event).filter(|e| e.at_ms == t) {
                self.node_event(&e.node, e.kind);
                next_node_event += 1;
            }
            let decided = self.s.cycle();
            self.journal.extend(decided);
            let progress = self.absorb_log(control, &mut |job, at| completions.push(Reverse((at, job.0, job.1))));
            let quiet = next.is_none() && next_node_event == node_events.len() && completions.is_empty();
            // Nothing left to happen and a retry changed nothing: the waiting jobs wait for
            // good, unless the policy reads the time of day or week, whose fate a week of
            // retries settles.
            let idle = quiet && retrying && !progress;
            idle_since = if idle { idle_since.or(Some(t)) } else { None };
            let settled =
                idle_since.is_some_and(|since| !self.s.reads_local_time() || t >= since.saturating_add(WEEK_MS));
            if retry_at.is_none() && self.s.pending() > 0 && self.s.waits_on_time() && !settled {
                retry_at = Some(t.saturating_add(self.config.retry_ms.max(1)));
            }
        }
        if read != total {
            let m = "the trace changed while it was being read: it has a different number of rows";
            return Err(InputError::new(&workload.name, None, None, m).into());
        }
        (control.progress)(1.0);
        Ok(())
    }

    /// Submits a trace job; `pass` > 0 marks a repeat of it (fill mode samples the trace
    /// again once it has used every job).
    fn submit(&mut self, j: &TraceJob, pass: usize) -> Result<JobId, SimError> {
        let mut spec = j.job.clone();
        if pass > 0 {
            spec.name = format!("{}#{}", spec.name, pass + 1);
        }
        // Where a job goes was checked for every queue and class up front; a job refused
        // here comes from a trace that changed since.
        let id = self.s.submit(spec).map_err(|e| {
            InputError::new(&self.workload.name, (j.line > 0).then_some(j.line), Some(e.field()), e.to_string())
        })?;
        let class =
            j.job.priority_class.as_ref().and_then(|c| {
                self.workload.summary().classes.binary_search(c).ok().and_then(|i| u32::try_from(i).ok())
            });
        self.journal.push(Event::Submitted { job: id, at_ms: self.s.now_ms() });
        self.runs
            .insert(id, Run { arrival_ms: j.arrival_ms, class, remaining_ms: j.job.duration_ms, ..Run::default() });
        self.outcomes.submitted_in[self.s.job(id).ask.queue] += 1;
        Ok(id)
    }

    fn node_event(&mut self, name: &str, kind: NodeEventKind) {
        let Some(node) = self.s.cluster().node(name) else { return };
        let cards = self.s.cluster().nodes[node].cards.len() as u64 * u64::from(MILLI);
        match kind {
            NodeEventKind::Fail => {
                let requeued = self.s.fail_node(node);
                self.journal.extend(requeued);
                if !std::mem::replace(&mut self.failed[node], true) {
                    self.capacity_milli -= cards;
                    self.model_capacity_milli[self.node_model[node]] -= cards;
                }
            }
            NodeEventKind::Drain => self.s.drain_node(node),
            NodeEventKind::Restore => {
                self.s.restore_node(node);
                if std::mem::replace(&mut self.failed[node], false) {
                    self.capacity_milli += cards;
                    self.model_capacity_milli[self.node_model[node]] += cards;
                }
            }
        }
        self.refresh_fair();
        self.fragmented_at_ms = None;
    }

    /// Reads what the scheduler did since the last call. `completion` is told when each
    /// started job would finish. Returns whether any job started or stopped.
    fn absorb_log(&mut self, control: &Control, completion: &mut dyn FnMut((JobId, u32), u64)) -> bool {
        let now = self.s.now_ms();
        let mut progress = false;
        let mut ended = Vec::new();
        for event in std::mem::take(&mut self.journal) {
            if let Some(observe) = control.on_event {
                observe(&self.s, &event);
            }
            match event {
                Event::Submitted { job, .. } => self.wait(job, 1),
                Event::Placed { job, nodes, .. } => {
                    progress = true;
                    self.wait(job, -1);
                    for &node in &nodes {
                        self.hold(job, node, 1);
                    }
                    let queue = u32::try_from(self.s.jobs()[job].ask.queue).unwrap_or(u32::MAX);
                    let Some(run) = self.runs.get_mut(&job) else { continue };
                    run.placed = nodes;
                    if run.first_start_ms.is_none() {
                        run.first_start_ms = Some(now);
                        let delay_ms = now.saturating_sub(run.arrival_ms);
                        self.outcomes.starts.push(Start { delay_ms, queue, class: run.class });
                    }
                    if let Some(rest) = run.remaining_ms {
                        completion((job, run.epoch), now + rest);
                    }
                }
                Event::Grown { job, node, .. } => {
                    progress = true;
                    self.hold(job, node, 1);
                    if let Some(run) = self.runs.get_mut(&job) {
                        run.placed.push(node);
                    }
                }
                Event::Finished { job, .. } => {
                    self.stopped(job);
                    ended.push(job);
                }
                Event::Requeued { job, kept_ms, lost_gpu_s, .. } => {
                    progress = true;
                    self.lose(job, None, lost_gpu_s);
                    self.stopped(job);
                    self.requeued(job, kept_ms, lost_gpu_s);
                    self.preemption.requeues += 1;
                }
                Event::Evicted { job, rule, kept_ms, lost_gpu_s, .. } => {
                    progress = true;
                    self.lose(job, None, lost_gpu_s);
                    self.stopped(job);
                    self.requeued(job, kept_ms, lost_gpu_s);
                    self.preemption.evictions += 1;
                    self.outcomes.evicted_in[self.s.jobs()[job].ask.queue] += 1;
                    self.series.count(now, EVICTIONS);
                    *self.preemption.by_rule.entry(self.s.policy().program.rule_name(rule)).or_default() += 1;
                }
                Event::Rejected { job, .. } => {
                    self.wait(job, -1);
                    ended.push(job);
                }
                Event::Reserved { .. } => self.preemption.reservations += 1,
                Event::Shrunk { job, rule, node, lost_gpu_s, .. } => {
                    progress = true;
                    self.lose(job, Some(node), lost_gpu_s);
                    let released = self.runs.get_mut(&job).and_then(|r| {
                        let i = r.placed.iter().position(|&n| n == node)?;
                        Some(r.placed.swap_remove(i))
                    });
                    if released.is_some() {
                        self.hold(job, node, -1);
                    }
                    self.lost_gpu_s += lost_gpu_s;
                    self.preemption.evictions += 1;
                    self.outcomes.evicted_in[self.s.jobs()[job].ask.queue] += 1;
                    self.series.count(now, EVICTIONS);
                    *self.preemption.by_rule.entry(self.s.policy().program.rule_name(rule)).or_default() += 1;
                }
            }
        }
        for job in ended {
            self.retire(job);
        }
        if progress {
            self.fragmented_at_ms = None;
        }
        progress
    }

    /// Keeps what the report needs of a job that has ended, and forgets the rest.
    fn retire(&mut self, job: JobId) {
        let Some(run) = self.runs.remove(&job) else { return };
        let Some(j) = self.s.forget(job) else { return };
        let o = &mut self.outcomes;
        match &j.life.state {
            State::Finished => {
                o.finished += 1;
                o.finished_in[j.ask.queue] += 1;
                o.completions.push(self.s.now_ms().saturating_sub(run.arrival_ms));
            }
            State::Rejected(rule) => {
                o.rejected += 1;
                let program = &self.s.policy().program;
                o.never_started(
                    format!("rejected: {}", program.rule_name(*rule)),
                    || j.ask.name.clone(),
                    j.total_milli(),
                );
            }
            State::Withdrawn => {
                o.withdrawn += 1;
                o.never_started("withdrawn: did not fit on arrival".into(), || j.ask.name.clone(), j.total_milli());
            }
            State::Pending(_) | State::Running => {}
        }
    }

    /// Counts a job into (`sign` 1) or out of (-1) the waiting totals.
    fn wait(&mut self, job: JobId, sign: i64) {
        let j = &self.s.jobs()[job];
        let milli = j.total_milli();
        let q = &mut self.pending_milli[j.ask.queue];
        *q = (*q as i64 + sign * milli as i64).max(0) as u64;
        let ask = Ask::of(j);
        let n = self.pending_asks.entry(ask).or_default();
        *n = (i64::from(*n) + sign).max(0) as u32;
        if *n == 0 {
            self.pending_asks.remove(&ask);
        }
    }

    /// A running job stopped: it no longer holds its GPUs.
    fn stopped(&mut self, job: JobId) {
        let Some(run) = self.runs.get_mut(&job) else { return };
        let nodes = std::mem::take(&mut run.placed);
        run.epoch += 1;
        for node in nodes {
            self.hold(job, node, -1);
        }
    }

    /// One replica of `job` starts (`sign` 1) or stops (-1) holding its request on `node`.
    fn hold(&mut self, job: JobId, node: NodeId, sign: i8) {
        let j = &self.s.jobs()[job];
        let (milli, utilization) = (j.ask.request.milli(), j.ask.utilization);
        let m = self.node_model.get(node).copied().unwrap_or(0);
        let (total, by_model) = (&mut self.allocated_milli, &mut self.model_allocated_milli[m]);
        let (used, used_by_model) = (&mut self.used_milli, &mut self.model_used_milli[m]);
        if sign > 0 {
            *total += milli;
            *by_model += milli;
            *used += milli as f64 * utilization;
            *used_by_model += milli as f64 * utilization;
        } else {
            *total = total.saturating_sub(milli);
            *by_model = by_model.saturating_sub(milli);
            *used = (*used - milli as f64 * utilization).max(0.0);
            *used_by_model = (*used_by_model - milli as f64 * utilization).max(0.0);
        }
    }

    /// Books `lost_gpu_s` of `job`'s work to its queue and to the models it ran on: the
    /// replica on `node`'s, or all its replicas' in proportion.
    fn lose(&mut self, job: JobId, node: Option<NodeId>, lost_gpu_s: f64) {
        self.outcomes.lost_gpu_s_in[self.s.jobs()[job].ask.queue] += lost_gpu_s;
        let nodes = match (node, self.runs.get(&job)) {
            (Some(n), _) => vec![n],
            (None, Some(run)) => run.placed.clone(),
            (None, None) => Vec::new(),
        };
        for n in &nodes {
            let m = self.node_model.get(*n).copied().unwrap_or(0);
            self.model_lost_gpu_s[m] += lost_gpu_s / nodes.len() as f64;
        }
    }

    /// A stopped job waits again with the work it kept.
    fn requeued(&mut self, job: JobId, kept_ms: u64, lost_gpu_s: f64) {
        if let Some(run) = self.runs.get_mut(&job) {
            run.remaining_ms = run.remaining_ms.map(|r| r.saturating_sub(kept_ms));
        }
        self.lost_gpu_s += lost_gpu_s;
        self.wait(job, 1);
    }

    /// Integrates the state since the last event up to `t`, then moves the clock.
    fn advance_to(&mut self, t: u64) -> Result<(), SimError> {
        let now = self.s.now_ms();
        if t > now {
            let values = self.sample(now);
            self.series.add(now, t, &values);
            self.s.advance(t - now).map_err(SimError::Clock)?;
            if self.s.quotas().shape_version() != self.fair_shape {
                self.refresh_fair();
            }
        }
        Ok(())
    }

    /// Each queue's entitlement, worked out again after the capacity or the quotas in
    /// force changed.
    fn refresh_fair(&mut self) {
        self.fair = self.s.quotas().entitlements(self.capacity_milli as i64);
        self.fair_shape = self.s.quotas().shape_version();
    }

    /// The series' signals now.
    fn sample(&mut self, now: u64) -> Vec<f64> {
        let refresh = self.fragment_every_ms();
        if self.fragmented_at_ms.is_none_or(|at| now >= at + refresh) {
            let asks: Vec<Ask> = self.pending_asks.keys().copied().collect();
            self.fragmented_milli = self.unusable.measure(&self.s.cluster().nodes, &asks);
            self.fragmented_at_ms = Some(now);
        }
        let gpus = |milli: u64| milli as f64 / f64::from(MILLI);
        let mut v = vec![0.0; FIXED + PER_QUEUE * self.leaves.len() + PER_MODEL * self.models.len()];
        v[CAPACITY] = gpus(self.capacity_milli);
        v[ALLOCATED] = gpus(self.allocated_milli);
        v[USED] = self.used_milli / f64::from(MILLI);
        v[PENDING] = gpus(self.pending_milli.iter().sum());
        v[FRAGMENTED] = gpus(self.fragmented_milli);
        let held: Vec<f64> = self
            .leaves
            .iter()
            .map(|&q| self.s.quotas().queues[q].load.alloc.get(&Res::Gpu).copied().unwrap_or(0) as f64)
            .collect();
        let demand: Vec<f64> = self.leaves.iter().zip(&held).map(|(&q, h)| h + self.pending_milli[q] as f64).collect();
        let weights: Vec<f64> = self.leaves.iter().map(|&q| self.fair[q]).collect();
        let target = water_fill(self.capacity_milli as f64, &demand, &weights);
        let capacity = (self.capacity_milli as f64).max(1.0);
        v[DEVIATION] = held.iter().zip(&target).map(|(h, t)| (h - t).abs()).sum::<f64>() / (2.0 * capacity);
        let guarantees: Vec<f64> = self
            .leaves
            .iter()
            .map(|&q| {
                let queue = &self.s.quotas().queues[q];
                queue.get(&queue.quota.guarantee, Res::Gpu) as f64
            })
            .collect();
        let borrowed: Vec<f64> = held.iter().zip(&guarantees).map(|(h, g)| (h - g).max(0.0)).collect();
        let unused: Vec<f64> = held.iter().zip(&guarantees).map(|(h, g)| (g - h).max(0.0)).collect();
        let (total_borrowed, total_unused) = (borrowed.iter().sum::<f64>(), unused.iter().sum::<f64>());
        let lent_ratio = if total_unused > 0.0 { (total_borrowed / total_unused).min(1.0) } else { 0.0 };
        for i in 0..self.leaves.len() {
            let base = FIXED + PER_QUEUE * i;
            v[base] = held[i] / 1000.0;
            v[base + 1] = guarantees[i] / 1000.0;
            v[base + 2] = target[i] / 1000.0;
            v[base + 3] = borrowed[i] / 1000.0;
            v[base + 4] = unused[i] * lent_ratio / 1000.0;
        }
        for m in 0..self.models.len() {
            let base = self.model_signals() + PER_MODEL * m;
            v[base] = gpus(self.model_capacity_milli[m]);
            v[base + 1] = gpus(self.model_allocated_milli[m]);
            v[base + 2] = self.model_used_milli[m] / f64::from(MILLI);
        }
        v
    }

    /// The first of the per-model signals.
    fn model_signals(&self) -> usize {
        FIXED + PER_QUEUE * self.leaves.len()
    }

    /// How long a fragmentation measurement stands: it costs a pass over every node,
    /// so it is taken about a thousand times over the trace's span, not at every event.
    fn fragment_every_ms(&self) -> u64 {
        let span = self.workload.summary().last_arrival_ms.saturating_sub(self.start_ms);
        (span / 1000).max(1000)
    }

    // ------------------------------------------------------------ fill mode

    fn fill(&mut self, target: f64, control: &Control) -> Result<(), SimError> {
        let workload = self.workload;
        let jobs = workload.held()?;
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(self.config.seed);
        let capacity = self.capacity_milli as f64;
        let goal = target * capacity;
        let mut curve = FillCurve { target, ..FillCurve::default() };
        let (mut arrived, mut failed) = (0u64, 0u64);
        let mut next_point = 0.0;
        // Jobs in a shuffled order; once every job has come, the trace is sampled again
        // in a fresh order (a pass that asks for no GPU at all ends the run).
        let mut pass = 0;
        let mut n = 0usize;
        let sampled = self.config.sampling == Sampling::Replacement;
        let mut drawn = vec![0usize; jobs.len()];
        'fill: loop {
            order.shuffle(&mut rng);
            if sampled {
                order = tuned(order, &jobs, goal, &mut rng);
            }
            let before = arrived;
            for &index in &order {
                if arrived as f64 >= goal && !sampled {
                    break 'fill;
                }
                n += 1;
                if n.is_multiple_of(256) {
                    if control.cancel.load(Ordering::Relaxed) {
                        return Err(SimError::Interrupted);
                    }
                    (control.progress)(arrived as f64 / goal.max(1.0));
                }
                // A job drawn again is a repeat of the trace's job, as a later pass's is.
                let repeat = if sampled {
                    drawn[index] += 1;
                    drawn[index] - 1
                } else {
                    pass
                };
                self.fill_one(&jobs[index], repeat, &mut arrived, &mut failed, control)?;
                let share = arrived as f64 / capacity.max(1.0);
                if share >= next_point {
                    curve.arrived.push(share);
                    curve.allocated.push(self.allocated_milli as f64 / capacity.max(1.0));
                    curve.fragmented.push(frag::expected(&self.s.cluster().nodes, &self.shapes) / capacity.max(1.0));
                    next_point = share + 0.01;
                }
            }
            if arrived == before || sampled {
                break;
            }
            pass += 1;
        }
        let share = arrived as f64 / capacity.max(1.0);
        if curve.arrived.last() != Some(&share) {
            curve.arrived.push(share);
            curve.allocated.push(self.allocated_milli as f64 / capacity.max(1.0));
            curve.fragmented.push(frag::expected(&self.s.cluster().nodes, &self.shapes) / capacity.max(1.0));
        }
        curve.unallocated = 1.0 - self.allocated_milli as f64 / capacity.max(1.0);
        curve.failed = if arrived > 0 { failed as f64 / arrived as f64 } else { 0.0 };
        self.fill = Some(curve);
        (control.progress)(1.0);
        Ok(())
    }

    /// One fill-mode arrival: the job gets one attempt, and is withdrawn if it fails.
    fn fill_one(
        &mut self,
        job: &TraceJob,
        pass: usize,
        arrived: &mut u64,
        failed: &mut u64,
        control: &Control,
    ) -> Result<(), SimError> {
        // No departures: completions are never scheduled.
        let id = self.submit(job, pass)?;
        let milli = self.s.job(id).total_milli();
        *arrived += milli;
        let decided = self.s.cycle();
        self.journal.extend(decided);
        self.absorb_log(control, &mut |_, _| {});
        if self.s.jobs().get(id).is_some_and(|j| j.is_pending()) {
            *failed += milli;
            self.s.withdraw(id);
            self.wait(id, -1);
            self.retire(id);
        }
        Ok(())
    }

    // ------------------------------------------------------------ the report

    fn report(mut self) -> Report {
        let end = self.s.now_ms();
        let points = self.series.points();
        let integral = |i: usize| self.series.integral(i) / 1000.0 / 3600.0;
        let gpu_hours = GpuHours {
            capacity: integral(CAPACITY),
            allocated: integral(ALLOCATED),
            used: integral(USED),
            idle: integral(CAPACITY) - integral(ALLOCATED),
            allocated_unused: integral(ALLOCATED) - integral(USED),
            lost: self.lost_gpu_s / 3600.0,
        };
        self.preemption.gpu_hours_lost = gpu_hours.lost;
        let gpu_hours_by_model: BTreeMap<String, GpuHours> = self
            .models
            .iter()
            .enumerate()
            .map(|(m, name)| {
                let base = self.model_signals() + PER_MODEL * m;
                let (capacity, allocated, used) = (integral(base), integral(base + 1), integral(base + 2));
                let lost = self.model_lost_gpu_s[m] / 3600.0;
                let h = GpuHours {
                    capacity,
                    allocated,
                    used,
                    idle: capacity - allocated,
                    allocated_unused: allocated - used,
                    lost,
                };
                (name.clone(), h)
            })
            .collect();
        let cost = self.cluster.prices.cost(&gpu_hours_by_model);
        let share = |x: f64| if gpu_hours.capacity > 0.0 { x / gpu_hours.capacity } else { 0.0 };
        let span_ms = self.series.integral(CAPACITY) / (self.capacity_milli as f64 / 1000.0).max(1e-9);
        let mean = |i: usize| if span_ms > 0.0 { self.series.integral(i) / span_ms } else { 0.0 };
        let gpus = self.cluster.total_gpus() as f64;
        let fragmentation = match &self.fill {
            Some(f) => f.fragmented.last().copied().unwrap_or(0.0),
            None => mean(FRAGMENTED) / gpus.max(1.0),
        };
        let o = &self.outcomes;
        let mut counts = JobCounts {
            total: self.s.jobs().len() as u64,
            finished: o.finished,
            rejected: o.rejected,
            withdrawn: o.withdrawn,
            ..JobCounts::default()
        };
        for j in self.s.jobs() {
            match &j.life.state {
                State::Finished => counts.finished += 1,
                State::Running => counts.running += 1,
                State::Pending(_) => counts.pending += 1,
                State::Rejected(_) => counts.rejected += 1,
                State::Withdrawn => counts.withdrawn += 1,
            }
        }
        let seconds = |ms: u64| ms as f64 / 1000.0;
        // Sorted once, so every group's delays are read in order, never copied.
        self.outcomes.starts.sort_unstable_by_key(|s| s.delay_ms);
        self.outcomes.completions.sort_unstable();
        let o = &self.outcomes;
        fn delays<'s>(starts: &'s [Start], keep: &'s dyn Fn(&Start) -> bool) -> impl Iterator<Item = f64> + Clone + 's {
            starts.iter().filter(move |s| keep(s)).map(|s| s.delay_ms as f64 / 1000.0)
        }
        let mut queueing_delay = Vec::new();
        let mut group = |name: String, keep: &dyn Fn(&Start) -> bool| {
            if let Some(stats) = Stats::of_sorted(delays(&o.starts, keep)) {
                queueing_delay.push(Delay { group: name, stats });
            }
        };
        group("all".into(), &|_| true);
        for &q in &self.leaves {
            group(format!("queue {}", self.s.quotas().queues[q].place.name), &|s| s.queue as usize == q);
        }
        for (c, name) in self.workload.summary().classes.iter().enumerate() {
            group(format!("class {name}"), &|s| s.class.is_some_and(|k| k as usize == c));
        }
        let delay_percentiles = report::percentiles_sorted(delays(&o.starts, &|_| true));
        let completion_time = Stats::of_sorted(o.completions.iter().map(|&ms| seconds(ms)));
        let queues = self
            .leaves
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let base = FIXED + PER_QUEUE * i;
                let queue = &self.s.quotas().queues[q];
                let stats = Stats::of_sorted(delays(&o.starts, &|s| s.queue as usize == q));
                let held = self.s.jobs().iter().filter(|j| j.ask.queue == q);
                let guarantee_gpus = queue.get(&queue.quota.guarantee, Res::Gpu) as f64 / 1000.0;
                let guaranteed = |v: f64| (guarantee_gpus > 0.0).then_some(v);
                QueueSummary {
                    name: queue.place.name.clone(),
                    jobs: o.submitted_in[q],
                    finished: o.finished_in[q] + held.filter(|j| j.life.state == State::Finished).count() as u64,
                    guarantee_gpus,
                    mean_gpus: mean(base),
                    mean_share: mean(base) / gpus.max(1.0),
                    mean_fair_share: mean(base + 2) / gpus.max(1.0),
                    borrowed_gpu_hours: guaranteed(integral(base + 3)),
                    lent_gpu_hours: guaranteed(integral(base + 4)),
                    delay_p50_s: stats.as_ref().map(|s| s.p50),
                    delay_p95_s: stats.as_ref().map(|s| s.p95),
                    delay_percentiles: report::percentiles_sorted(delays(&o.starts, &|s| s.queue as usize == q)),
                    evictions: o.evicted_in[q],
                    lost_gpu_hours: o.lost_gpu_s_in[q] / 3600.0,
                }
            })
            .collect();
        let mut series = report::Series { bucket_s: self.series.width_ms() as f64 / 1000.0, ..Default::default() };
        for (t, v) in &points {
            series.time_s.push(*t);
            series.capacity.push(v[CAPACITY]);
            series.allocated.push(v[ALLOCATED]);
            series.used.push(v[USED]);
            series.pending_gpus.push(v[PENDING]);
            series.fragmented.push(v[FRAGMENTED]);
            series.fair_share_deviation.push(v[DEVIATION]);
            series.evictions_per_hour.push(v[EVICTIONS] * 3600.0);
            for (i, &q) in self.leaves.iter().enumerate() {
                let base = FIXED + PER_QUEUE * i;
                let qs = series.queues.entry(self.s.quotas().queues[q].place.name.clone()).or_default();
                qs.allocated.push(v[base]);
                qs.guarantee.push(v[base + 1]);
                qs.fair.push(v[base + 2]);
            }
        }
        Report {
            format: 1,
            policy: self.s.policy().policy.name.clone(),
            cluster: self.cluster.name.clone(),
            trace: self.workload.name.clone(),
            mode: match self.config.mode {
                Mode::Timed => "timed".into(),
                Mode::Fill { .. } => "fill".into(),
            },
            seed: self.config.seed,
            gpus,
            nodes: self.cluster.nodes.len(),
            jobs: counts,
            makespan_s: seconds(end.saturating_sub(self.start_ms)),
            allocation: share(gpu_hours.allocated),
            utilization: share(gpu_hours.used),
            gpu_hours,
            gpu_hours_by_model,
            cost,
            fragmentation,
            fair_share_deviation: mean(DEVIATION),
            queueing_delay,
            delay_percentiles,
            completion_time,
            preemption: self.preemption.clone(),
            queues,
            never_scheduled: self.never_scheduled(),
            series,
            fill: self.fill.clone(),
            notes: self.notes.clone(),
        }
    }

    /// Jobs that never started, grouped by their state and reason: those that ended
    /// (rejected, withdrawn) as they were retired, and those still waiting.
    fn never_scheduled(&self) -> Vec<NeverScheduled> {
        let mut outcomes = Outcomes { never: self.outcomes.never.clone(), ..Outcomes::default() };
        let program = &self.s.policy().program;
        for (id, j) in self.s.jobs().with_ids() {
            if self.runs.get(&id).is_none_or(|r| r.first_start_ms.is_some()) {
                continue;
            }
            let (reason, detail) = match &self.s.state(id) {
                State::Pending(None) => ("pending: not tried".to_string(), String::new()),
                State::Pending(Some(r)) => {
                    let detail = explain::reason_detail(&self.s, id, r).unwrap_or_default();
                    (format!("pending: {}", r.name(program)), detail)
                }
                State::Rejected(rule) => (format!("rejected: {}", program.rule_name(*rule)), String::new()),
                State::Withdrawn => ("withdrawn: did not fit on arrival".to_string(), String::new()),
                State::Running | State::Finished => continue,
            };
            let example = || if detail.is_empty() { j.ask.name.clone() } else { format!("{}: {detail}", j.ask.name) };
            outcomes.never_started(reason, example, j.total_milli());
        }
        let mut out: Vec<NeverScheduled> = outcomes.never.into_values().collect();
        out.sort_by(|a, b| b.jobs.cmp(&a.jobs).then_with(|| a.reason.cmp(&b.reason)));
        out
    }
}

/// Checks that the scheduler takes every trace job, or says which row is wrong: where a
/// job goes depends only on its queue and priority class, so the first job of each pair
/// answers for all.
fn resolve_all(s: &Scheduler, workload: &Workload) -> Result<(), InputError> {
    for j in &workload.summary().routes {
        s.resolve(&j.job).map_err(|e| {
            InputError::new(&workload.name, (j.line > 0).then_some(j.line), Some(e.field()), e.to_string())
        })?;
    }
    Ok(())
}

/// The shuffled trace tuned to `goal` milli-GPU as the ATC '23 simulator tunes it: topped
/// up with jobs drawn with replacement until the next would pass the goal (jobs of no GPU
/// never do), or, when the trace alone passes it, random jobs removed until it does not.
fn tuned(mut order: Vec<usize>, jobs: &[TraceJob], goal: f64, rng: &mut rand_pcg::Pcg64Mcg) -> Vec<usize> {
    use rand::RngExt;
    let milli = |i: usize| jobs[i].milli() as f64;
    let mut total: f64 = order.iter().map(|&i| milli(i)).sum();
    if jobs.is_empty() || jobs.iter().all(|j| j.milli() == 0) {
        return order;
    }
    if total <= goal {
        loop {
            let i = rng.random_range(0..jobs.len());
            if total + milli(i) > goal {
                return order;
            }
            total += milli(i);
            order.push(i);
        }
    }
    while total > goal && !order.is_empty() {
        let at = rng.random_range(0..order.len());
        total -= milli(order.remove(at));
    }
    order
}
