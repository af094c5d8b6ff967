//! What is fixed per policy: facts worked out once from the compiled policy — what its
//! rules read, what that lets the runtime skip — shared behind an `Arc` by every clone of
//! a scheduler (and `gpolc diff`'s threads). Invariant: nothing here changes after
//! [`PolicyFacts::of`]; whatever a run or a driver can change lives in the other parts.

use crate::symbols::Symbols;
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::ir::{Body, Kind, Node, Program, RuleId};
use gpol_compiler::schema::{Record, Sym};

/// The facts about one policy the scheduler consults at every turn.
pub(crate) struct PolicyFacts {
    pub(crate) policy: CompiledPolicy,
    /// `Program::filters_declared_before_but_run_after`, worked out once.
    pub(crate) recheck_filters: Vec<Vec<usize>>,
    /// The runtime symbol of each of the policy's string literals, and of the job and
    /// node label keys rules read: interned first, so the same in every scheduler.
    pub(crate) literals: Vec<Sym>,
    pub(crate) job_label_keys: Vec<Sym>,
    pub(crate) node_label_keys: Vec<Sym>,
    /// The job fields rules other than `job_order` read, which tell waiting jobs apart.
    pub(crate) distinguishing: Vec<u16>,
    /// How often waiting jobs must be ranked again.
    pub(super) ranking: Ranking,
    /// Whether victim rules read nothing but the two jobs: then only a start in a queue
    /// whose jobs could be victims can change a failed victim search.
    pub(crate) victims_read_jobs: bool,
    /// Whether a failed attempt's answer can change with time alone because filters, gang
    /// clauses or victim rules read a time-varying field: then a failed class is retried
    /// once the retry interval has passed.
    pub(crate) retry_on_time: bool,
    /// Whether time alone can change a waiting job's fate: `retry_on_time`, or the policy
    /// reserves (a job reserves at its first attempt after it has waited `reserve_after`).
    pub(crate) time_matters: bool,
    /// Which of the user's fields (beyond the job) rules read.
    pub(crate) user_reads: UserReads,
    /// What the victim rules read that a victim search must follow.
    pub(crate) victim_reads: VictimReads,
    /// Whether `queue_order` reads the queues' next jobs (`queue.head_*`).
    pub(crate) queue_order_reads_head: bool,
    /// Whether admit, filter, score, card score or gang rules read a queue.
    pub(crate) placement_reads_queues: bool,
    /// Whether any rule reads `queue.fair_share` (worked out only then).
    pub(crate) reads_fair_share: bool,
}

/// Which of the user's fields rules read: its usage, and Fair Tree's factor (each worked
/// out only when read).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct UserReads {
    pub(crate) usage: bool,
    pub(crate) fair_tree: bool,
}

impl PolicyFacts {
    /// The facts of `policy`; its literals and label keys are interned in `syms` (a fresh
    /// table: they are its first symbols).
    pub(crate) fn of(policy: CompiledPolicy, syms: &mut Symbols) -> PolicyFacts {
        let program = &policy.program;
        let literals = program.literals.iter().map(|l| syms.intern(l)).collect();
        let job_label_keys = program.job_labels.iter().map(|k| syms.intern(k)).collect();
        let node_label_keys = program.node_labels.iter().map(|k| syms.intern(k)).collect();
        let retry_on_time = program.bodies().iter().any(|(id, _, body)| {
            matches!(id, RuleId::Filter(_) | RuleId::Gang(_) | RuleId::Victim(_)) && reads_time(&body.node)
        });
        let time_matters = retry_on_time || policy.policy.settings.reserve_after.is_some();
        let placement_reads_queues = program.bodies().iter().any(|(id, _, body)| {
            matches!(
                id,
                RuleId::Admit(_) | RuleId::Filter(_) | RuleId::Score(_) | RuleId::CardScore(_) | RuleId::Gang(_)
            ) && body.node.any(&|n| matches!(n.kind, Kind::Field { record: Record::Queue, .. }))
        });
        let victims_read_jobs = program
            .victims
            .iter()
            .all(|v| std::iter::once(&v.when).chain(v.cost.as_ref()).all(|b| !reads_beyond_job(&b.node)));
        let reads = |field: &str| program.bodies().iter().any(|(_, _, b)| b.node.reads(Record::Job, field));
        let user_reads = UserReads { usage: reads("user_usage"), fair_tree: reads("fair_tree") };
        let reads_fair_share = program.bodies().iter().any(|(_, _, b)| b.node.reads(Record::Queue, "fair_share"));
        let queue_order_reads_head = program.queue_order.iter().any(|k| {
            ["head_waiting", "head_gpus", "head_priority", "head_fits_guarantee"]
                .iter()
                .any(|f| k.body.node.reads(Record::Queue, f))
        });
        PolicyFacts {
            recheck_filters: program.filters_declared_before_but_run_after(),
            literals,
            job_label_keys,
            node_label_keys,
            distinguishing: distinguishing_fields(program),
            ranking: Ranking::of(program),
            victims_read_jobs,
            retry_on_time,
            time_matters,
            user_reads,
            victim_reads: VictimReads::of(program),
            queue_order_reads_head,
            placement_reads_queues,
            reads_fair_share,
            policy,
        }
    }
}

/// Whether a rule body reads anything but job fields (queues, the cluster, domains).
pub(crate) fn reads_beyond_job(node: &Node) -> bool {
    node.any(&|n| {
        matches!(n.kind, Kind::Domain { .. }) || matches!(n.kind, Kind::Field { record, .. } if record != Record::Job)
    })
}

/// Whether an expression reads something that changes with time alone: how long a job
/// has waited or run, its unsaved work, the clock, or decayed usage.
pub(crate) fn reads_time(node: &Node) -> bool {
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

/// Whether a body reads queue or cluster state, which evictions change.
fn reads_state(body: &Body) -> bool {
    body.node.any(&|n| matches!(n.kind, Kind::Field { record: Record::Queue | Record::Cluster, .. }))
}

/// What a victim rule reads that picks change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reads {
    /// Only the two jobs.
    Jobs,
    /// Also their queues, not their parents nor the cluster: only the claimant's and the
    /// victim's leaves (in a victim rule, queues are reached only through the jobs).
    Leaves,
    /// The cluster, or queues above the leaves.
    Anything,
}

impl Reads {
    fn of(body: &Body) -> Reads {
        let n = &body.node;
        if !reads_state(body) {
            Reads::Jobs
        } else if n.any(&|x| matches!(x.kind, Kind::Field { record: Record::Cluster, .. }))
            || n.reads(Record::Queue, "parent")
        {
            Reads::Anything
        } else {
            Reads::Leaves
        }
    }
}

/// What the victim rules and `victim_order` read that a victim search must follow.
#[derive(Clone, Debug, Default)]
pub(crate) struct VictimReads {
    /// Per victim rule, what it reads that picks change.
    pub(crate) rules: Vec<Reads>,
    /// Whether `victim_order` reads queue or cluster state.
    pub(crate) order: bool,
    /// Whether any of them reads the queues' `_after` fields.
    pub(crate) after: bool,
    /// Whether a search that finds no candidate can say what would give it one (a
    /// [`crate::scheduler::preempt::Watch`]): the rules' conditions read nothing beyond the two jobs
    /// and their leaves, and of those nothing that changes with time, with waiting jobs or
    /// with other queues.
    pub(crate) watchable: bool,
    /// Whether some rule's condition reads the jobs' queues.
    pub(crate) leaves: bool,
}

impl VictimReads {
    pub(crate) fn of(program: &Program) -> VictimReads {
        VictimReads {
            rules: program
                .victims
                .iter()
                .map(|r| Reads::of(&r.when).max(r.cost.as_ref().map_or(Reads::Jobs, Reads::of)))
                .collect(),
            order: program.victim_order.iter().any(|k| reads_state(&k.body)),
            after: reads_after(program),
            watchable: program.victims.iter().all(|r| watchable(&r.when)),
            leaves: program.victims.iter().any(|r| Reads::of(&r.when) == Reads::Leaves),
        }
    }
}

/// Whether what a victim rule's condition says of two jobs can change only as the jobs'
/// leaves' allocation does (see [`crate::scheduler::preempt::Watch`]).
fn watchable(body: &Body) -> bool {
    // Queue fields that follow anything but the queue's own allocation.
    const UNWATCHED: [&str; 8] = [
        "usage",
        "fair_share",
        "lendable",
        "pending",
        "head_waiting",
        "head_gpus",
        "head_priority",
        "head_fits_guarantee",
    ];
    Reads::of(body) != Reads::Anything
        && !reads_time(&body.node)
        && !body.node.any(&|n| matches!(n.kind, Kind::Domain { .. }))
        && !UNWATCHED.iter().any(|f| body.node.reads(Record::Queue, f))
}

/// Whether the victim rules or `victim_order` read the `_after` fields of queues.
fn reads_after(program: &Program) -> bool {
    let reads =
        |b: &Body| ["share_after", "allocated_after", "borrowed_after"].iter().any(|f| b.node.reads(Record::Queue, f));
    program.victims.iter().any(|r| reads(&r.when) || r.cost.as_ref().is_some_and(reads))
        || program.victim_order.iter().any(|k| reads(&k.body))
}

/// How often waiting jobs' ranks need working out again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ranking {
    /// `job_order` reads only what a job keeps while it waits: ranked once, on joining.
    Fixed,
    /// It reads `job.waiting`: ranked again when the clock has moved.
    Clock,
    /// It reads queues, the cluster, domains or the user's usage: ranked again whenever
    /// anything changed or the clock moved.
    State,
}

impl Ranking {
    pub(super) fn of(program: &Program) -> Ranking {
        let keys = || program.job_order.iter().map(|k| &k.body.node);
        let user =
            |n: &gpol_compiler::ir::Node| n.reads(Record::Job, "user_usage") || n.reads(Record::Job, "fair_tree");
        if keys().any(reads_beyond_job) || keys().any(user) {
            Ranking::State
        } else if keys().any(|n| n.reads(Record::Job, "waiting")) {
            Ranking::Clock
        } else {
            Ranking::Fixed
        }
    }
}

/// The job fields that tell waiting jobs apart: those read by any rule but `job_order`.
pub(super) fn distinguishing_fields(program: &Program) -> Vec<u16> {
    let bodies: Vec<&Node> = program
        .bodies()
        .into_iter()
        .filter(|(id, _, _)| !matches!(id, RuleId::JobOrder(_)))
        .map(|(_, _, body)| &body.node)
        .collect();
    (0..Record::Job.fields().len())
        .filter_map(|i| u16::try_from(i).ok())
        .filter(|&f| {
            bodies
                .iter()
                .any(|b| b.any(&|n| matches!(n.kind, Kind::Field { record: Record::Job, field, .. } if field == f)))
        })
        .collect()
}
