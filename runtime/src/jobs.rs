//! Jobs: what they request (decision D2), their state, and where they run.

use crate::model::NodeId;
use crate::quota::{Amounts, Block, QueueId, Res};
use gpol_compiler::ir::{Program, RuleId};
use gpol_compiler::schema::Sym;
use gpol_compiler::spec::Request;
use std::collections::HashMap;

pub type JobId = usize;

/// Why a job is waiting: data, rendered to words by [`crate::explain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// An admit rule that depends on the cluster holds it back, or this filter turned
    /// away the most nodes.
    Rule(RuleId),
    /// The job's queue (or an ancestor) has no quota left: this cap, with its numbers.
    Quota(Block),
    /// Nodes passed the filters but none has room.
    Capacity,
    /// The nodes could hold the gang, but not within one domain of a `require`d level.
    Gang,
    /// A strict queue's head job is waiting, and this job is behind it.
    Order,
    /// The job can never run as things are.
    Unschedulable(Unschedulable),
}

/// Why a job can never run as the cluster and its queue are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unschedulable {
    /// No node in service could hold one replica, even empty.
    NoNode,
    /// The nodes in service could hold only `room` replicas even if they were empty,
    /// fewer than the job's minimum.
    TooFewNodes { room: u64 },
    /// It needs more of `res` than `queue`'s limit.
    OverLimit { queue: QueueId, res: Res },
}

impl Reason {
    /// Whether a filter turned the job away (filters can read free capacity, so freeing
    /// capacity or evicting can change the answer).
    pub fn is_filter(&self) -> bool {
        matches!(self, Reason::Rule(RuleId::Filter(_)))
    }

    /// The name tests use after `because`.
    pub fn name(&self, program: &Program) -> String {
        match self {
            Reason::Rule(id) => program.rule_name(*id),
            Reason::Quota(_) => "quota".into(),
            Reason::Capacity => "capacity".into(),
            Reason::Gang => "gang".into(),
            Reason::Order => "order".into(),
            Reason::Unschedulable(_) => "unschedulable".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Pending(Option<Reason>),
    Running,
    Finished,
    /// Rejected for good by an admit rule that reads only static fields (D9).
    Rejected(RuleId),
    /// Taken back by whoever submitted it before it ran (the simulator's fill mode
    /// withdraws a job that did not place on its one attempt).
    Withdrawn,
}

/// Where one replica runs: its node and the cards (with the share of each) or the MIG
/// instance it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    pub node: NodeId,
    pub cards: Vec<(usize, u32)>,
    pub instance: Option<(usize, usize)>,
}

/// A job: what it asked for, its life so far, and what it holds while it runs. Each part
/// changes apart from the others: the ask never after submission, the life at each
/// change of state, the holding at each bind and release.
#[derive(Clone, Debug)]
pub struct Job {
    pub ask: JobAsk,
    pub life: Life,
    pub holding: Holding,
}

/// What a job asked for, as resolved at submission (its queue, priority and symbols);
/// fixed from then on.
#[derive(Clone, Debug)]
pub struct JobAsk {
    pub name: String,
    pub id: Sym,
    pub user: Sym,
    pub queue: QueueId,
    pub priority: f64,
    pub priority_class: Sym,
    pub request: Request,
    pub replicas: u32,
    pub min_replicas: u32,
    /// GPU memory per replica, bytes.
    pub gpu_mem: u64,
    pub cpu_milli: u64,
    pub mem: u64,
    pub models: Vec<Sym>,
    pub flags: Flags,
    pub duration_ms: Option<u64>,
    pub utilization: f64,
    pub labels: HashMap<Sym, Sym>,
}

/// What a job says of itself that rules may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub bursty: bool,
    pub latency_critical: bool,
    pub preemptible: bool,
}

/// Where a job stands and when it got there. Times in ms of the scheduler's clock; a job
/// that was already running when the clock started (a scenario's `run`) started before 0.
#[derive(Clone, Debug)]
pub struct Life {
    /// Where it stands. A waiting job's reason is its class's, given by
    /// `Scheduler::state`; the stored one is always `Pending(None)`.
    pub state: State,
    pub submitted_ms: i64,
    /// When the job last started waiting (submission, or requeue after an eviction).
    pub waiting_since_ms: i64,
    pub started_ms: i64,
    pub evictions: u32,
    /// The last checkpoint as of the start (a scenario's `run` may say the job last saved
    /// before it started here); later ones follow from `checkpoint_every_ms`.
    pub checkpoint_ms: i64,
    /// The job saves its work this often while running; `None`: only at `checkpoint_ms`.
    pub checkpoint_every_ms: Option<u64>,
}

/// What a running job holds: one slot per replica, and the quota it is charged for them
/// (refunded exactly when it stops). Empty while it does not run.
#[derive(Clone, Debug, Default)]
pub struct Holding {
    pub slots: Vec<Slot>,
    pub charged: crate::quota::Amounts,
}

/// Milliseconds from `at` to `now` (0 if `at` is later).
pub(crate) fn since(now_ms: u64, at_ms: i64) -> u64 {
    u64::try_from(i64::try_from(now_ms).unwrap_or(i64::MAX).saturating_sub(at_ms)).unwrap_or(0)
}

impl Job {
    /// GPU quota charge of the whole job, milli-GPU.
    pub fn total_milli(&self) -> u64 {
        self.ask.request.milli() * u64::from(self.ask.replicas)
    }

    /// When the running job last saved its work, as of `now_ms`.
    pub(crate) fn last_checkpoint_ms(&self, now_ms: u64) -> i64 {
        let life = &self.life;
        match life.checkpoint_every_ms {
            Some(every) if every > 0 => {
                let ran = since(now_ms, life.started_ms);
                let saved = i64::try_from(ran / every * every).unwrap_or(i64::MAX);
                life.checkpoint_ms.max(life.started_ms.saturating_add(saved))
            }
            _ => life.checkpoint_ms,
        }
    }

    /// Work since the running job started that a stop now would keep (up to its last
    /// checkpoint), and work it would lose, in ms.
    pub(crate) fn progress_ms(&self, now_ms: u64) -> (u64, u64) {
        let checkpoint = self.last_checkpoint_ms(now_ms);
        let kept = u64::try_from(checkpoint.saturating_sub(self.life.started_ms)).unwrap_or(0);
        (kept, since(now_ms, checkpoint.max(self.life.started_ms)))
    }

    pub fn is_pending(&self) -> bool {
        matches!(self.life.state, State::Pending(_))
    }

    pub(crate) fn shape(&self) -> Shape {
        let a = &self.ask;
        let mut models = a.models.clone();
        models.sort();
        models.dedup();
        Shape { request: a.request, gpu_mem: a.gpu_mem, cpu_milli: a.cpu_milli, mem: a.mem, models }
    }
}

/// What exact fit reads of a job: jobs of one shape fit on the same nodes, so when no
/// node can take one of them, none of the others needs trying until capacity frees.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    pub request: Request,
    pub gpu_mem: u64,
    pub cpu_milli: u64,
    pub mem: u64,
    pub models: Vec<Sym>,
}

/// What a job would take from its queue with all its replicas, per resource (and of GPU
/// model `model`, if it is known).
pub(crate) fn demand(job: &Job, model: Option<Sym>) -> Amounts {
    replicas_demand(job, job.ask.replicas, model)
}

/// What `n` replicas of a job take, all on GPUs of `model` if given.
pub(crate) fn replicas_demand(job: &Job, n: u32, model: Option<Sym>) -> Amounts {
    let n = i64::from(n);
    let gpu = job.ask.request.milli() as i64 * n;
    let mut d = Amounts::new();
    d.insert(Res::Gpu, gpu);
    d.insert(Res::Cpu, job.ask.cpu_milli as i64 * n);
    d.insert(Res::Mem, job.ask.mem as i64 * n);
    if let Some(m) = model {
        d.insert(Res::Model(m), gpu);
    }
    d
}

/// GPU (milli) a job asks for, all its replicas: what it adds to its queue's request.
pub(crate) fn requested_gpu(job: &Job) -> i64 {
    job.ask.request.milli() as i64 * i64::from(job.ask.replicas)
}

/// What a placement takes: one replica on a GPU of each model listed.
pub(crate) fn placement_demand(job: &Job, models: &[Sym]) -> Amounts {
    let mut d = replicas_demand(job, models.len() as u32, None);
    let milli = job.ask.request.milli() as i64;
    for &m in models {
        *d.entry(Res::Model(m)).or_insert(0) += milli;
    }
    d
}
