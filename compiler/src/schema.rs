//! The schema: every record a rule can read, every field, its type, unit, optionality
//! and storage class. Defined once here; the checker types field accesses from it, and
//! the interpreter, JIT and runtime lay out and fill records from it. docs/schema.md is
//! generated from this table (`schema::markdown`) and a test keeps the two equal.

use crate::units::Dim;

/// The kinds of record rules can see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Record {
    Job,
    Node,
    Card,
    Queue,
    Domain,
    Cluster,
    Shape,
    Resources,
}

impl Record {
    pub const ALL: [Record; 8] = [
        Record::Job,
        Record::Node,
        Record::Card,
        Record::Queue,
        Record::Domain,
        Record::Cluster,
        Record::Shape,
        Record::Resources,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Record::Job => "job",
            Record::Node => "node",
            Record::Card => "card",
            Record::Queue => "queue",
            Record::Domain => "domain",
            Record::Cluster => "cluster",
            Record::Shape => "shape",
            Record::Resources => "resources",
        }
    }

    pub fn from_name(s: &str) -> Option<Record> {
        Record::ALL.into_iter().find(|r| r.name() == s)
    }

    pub fn doc(self) -> &'static str {
        match self {
            Record::Job => "A job waiting to be placed (or, in preemption rules, a running job).",
            Record::Node => "A node being considered for a job.",
            Record::Card => "One GPU of a node (`node.cards_list`).",
            Record::Queue => "A queue of the policy's quota tree, with its live accounting.",
            Record::Domain => {
                "One topology domain (a rack, an NVLink domain, …) with aggregate free capacity; \
                 reached as `node.LEVEL`."
            }
            Record::Cluster => "The whole cluster, and the clock.",
            Record::Shape => "A popular request shape of the current workload (`cluster.task_shapes`).",
            Record::Resources => "An amount of each resource: a quota, an allocation.",
        }
    }

    pub fn fields(self) -> &'static [Field] {
        match self {
            Record::Job => JOB,
            Record::Node => NODE,
            Record::Card => CARD,
            Record::Queue => QUEUE,
            Record::Domain => DOMAIN,
            Record::Cluster => CLUSTER,
            Record::Shape => SHAPE,
            Record::Resources => RESOURCES,
        }
    }

    /// The field's index in [`Record::fields`], its stable identity for later stages.
    pub fn field(self, name: &str) -> Option<(u16, &'static Field)> {
        self.fields()
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)
            .map(|(i, f)| (u16::try_from(i).unwrap_or(u16::MAX), f))
    }
}

/// Closed sets of named values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EnumKind {
    /// How a node's GPUs are shared.
    Sharing,
    /// A MIG instance profile.
    MigProfile,
}

impl EnumKind {
    pub fn name(self) -> &'static str {
        match self {
            EnumKind::Sharing => "sharing",
            EnumKind::MigProfile => "mig_profile",
        }
    }

    pub fn variants(self) -> &'static [&'static str] {
        match self {
            EnumKind::Sharing => &["exclusive", "mig", "timeslice", "mps"],
            EnumKind::MigProfile => MIG_PROFILES,
        }
    }

    pub fn variant(self, name: &str) -> Option<u8> {
        self.variants().iter().position(|v| *v == name).and_then(|i| u8::try_from(i).ok())
    }
}

/// MIG profiles gpol knows (A100/H100 80GB shapes): name, compute slices of 7, memory GiB.
pub const MIG_PROFILES: &[&str] = &["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"];

/// Compute slices (of 7) of each MIG profile, in the order of [`MIG_PROFILES`].
pub const MIG_SLICES: &[u8] = &[1, 1, 2, 3, 4, 7];

/// When a field's value is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Fixed when the job is submitted or the node is registered.
    Static,
    /// Computed from static fields (e.g. `job.total_gpus`).
    Derived,
    /// Changes as the cluster runs; read fresh in every scheduling cycle.
    Cycle,
}

impl Storage {
    pub fn name(self) -> &'static str {
        match self {
            Storage::Static => "static",
            Storage::Derived => "derived",
            Storage::Cycle => "per cycle",
        }
    }
}

/// The type of a field, in a form that fits in a constant table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldTy {
    Num(Dim),
    Bool,
    Str,
    Enum(EnumKind),
    Record(Record),
    List(Record),
    StrList,
    /// `labels["key"]`: string-keyed labels; a missing key is unequal to every value.
    Labels,
    /// `free_mig[1g.10gb]`: a count per MIG profile.
    MigCounts,
}

#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: FieldTy,
    /// Whether the value may be absent (`T?`): read only through `??` or `has`.
    pub optional: bool,
    pub storage: Storage,
    pub doc: &'static str,
}

const fn f(name: &'static str, ty: FieldTy, storage: Storage, doc: &'static str) -> Field {
    Field { name, ty, optional: false, storage, doc }
}

const fn opt(name: &'static str, ty: FieldTy, storage: Storage, doc: &'static str) -> Field {
    Field { name, ty, optional: true, storage, doc }
}

use FieldTy::*;
use Storage::*;

const GPU: FieldTy = Num(Dim::GPU);
const CPU: FieldTy = Num(Dim::CPU);
const BYTES: FieldTy = Num(Dim::BYTES);
const TIME: FieldTy = Num(Dim::TIME);
const NUMBER: FieldTy = Num(Dim::NONE);

static JOB: &[Field] = &[
    f("id", Str, Static, "Unique job id."),
    f("name", Str, Static, "The job's name."),
    f("user", Str, Static, "The submitting user."),
    f("queue", Record(Record::Queue), Static, "The leaf queue the job was submitted to."),
    f("priority", NUMBER, Static, "Numeric priority (from its priority class unless set)."),
    f("priority_class", Str, Static, "Name of the job's priority class."),
    f("whole_cards", GPU, Static, "Whole cards per replica (0 for fractional or MIG jobs)."),
    f("gpu_fraction", GPU, Static, "Fraction of one card per replica (0 unless fractional)."),
    opt("mig_profile", Enum(EnumKind::MigProfile), Static, "The MIG profile requested per replica, if any."),
    f("replicas", NUMBER, Static, "Replicas of a gang (1 for a single-node job)."),
    f("min_replicas", NUMBER, Static, "Fewest replicas the job can start with (elastic gangs)."),
    f("total_gpus", GPU, Derived, "GPUs over all replicas (a MIG profile counts slices/7)."),
    f("gpu_mem", BYTES, Static, "GPU memory needed per replica on its card(s)."),
    f("allowed_models", StrList, Static, "GPU models the job may run on (empty: any)."),
    f("cpu", CPU, Static, "CPU cores per replica."),
    f("mem", BYTES, Static, "Host memory per replica."),
    f("bursty", Bool, Static, "The job's GPU use comes in bursts (a poor fit for hard MIG slices)."),
    f("latency_critical", Bool, Static, "Serving work that must not be time-sliced."),
    f("preemptible", Bool, Static, "Whether the job may be evicted at all."),
    f("submitted", TIME, Static, "Submission time (seconds on the cluster clock)."),
    f("waiting", TIME, Cycle, "Time since submission, or since requeue after an eviction."),
    f("runtime", TIME, Cycle, "Time since the job started (0 while pending)."),
    f("since_checkpoint", TIME, Cycle, "Work that an eviction now would lose."),
    opt("expected_duration", TIME, Static, "The user's runtime estimate, if given."),
    f("utilization", NUMBER, Static, "Fraction of its allocation the job really uses (default 1.0)."),
    f("evictions", NUMBER, Cycle, "How many times the job has been evicted."),
    f("labels", Labels, Static, "The job's labels: `job.labels[\"team\"]`."),
];

static NODE: &[Field] = &[
    f("name", Str, Static, "The node's name."),
    f("labels", Labels, Static, "The node's labels: `node.labels[\"nvidia.com/gpu.product\"]`."),
    f("gpu_model", Str, Static, "GPU model, e.g. \"h100\"."),
    f("cards", GPU, Static, "GPUs on the node."),
    f("free_cards", GPU, Cycle, "Wholly free cards."),
    f("free_gpu", GPU, Cycle, "Free GPU capacity including partly used cards."),
    f("largest_free_fraction", GPU, Cycle, "The largest free fraction on any single card."),
    f("free_mig", MigCounts, Cycle, "Free MIG instances per profile: `node.free_mig[1g.10gb]`."),
    f("gpu_mem", BYTES, Static, "Memory per card."),
    f("sharing", Enum(EnumKind::Sharing), Static, "How the node's cards are shared."),
    f("max_clients", NUMBER, Static, "Clients per card under time-slicing or MPS (1 otherwise)."),
    f("cpu", CPU, Static, "CPU cores."),
    f("cpu_free", CPU, Cycle, "Unallocated CPU cores."),
    f("mem", BYTES, Static, "Host memory."),
    f("mem_free", BYTES, Cycle, "Unallocated host memory."),
    f("cards_list", List(Record::Card), Cycle, "The node's cards, for comprehensions."),
];

static CARD: &[Field] = &[
    f("index", NUMBER, Static, "Position of the card in its node, from 0."),
    f("model", Str, Static, "GPU model."),
    f("mem", BYTES, Static, "Card memory."),
    f("free_mem", BYTES, Cycle, "Unallocated card memory."),
    f("free", GPU, Cycle, "Unallocated share of the card (1 gpu when idle)."),
    f("clients", NUMBER, Cycle, "Jobs sharing the card."),
    f("max_clients", NUMBER, Static, "Most jobs that may share the card."),
    f("free_mig", MigCounts, Cycle, "Free MIG instances per profile on this card."),
];

static QUEUE: &[Field] = &[
    f("name", Str, Static, "The queue's name."),
    opt("parent", Record(Record::Queue), Static, "The parent queue (absent at the root)."),
    f("depth", NUMBER, Static, "Depth in the tree; the root is 0."),
    f("guarantee", Record(Record::Resources), Static, "Guaranteed (nominal) quota."),
    f("limit", Record(Record::Resources), Static, "Maximum allocation (infinite when unset)."),
    f("borrow_limit", Record(Record::Resources), Static, "Most it may borrow above its guarantee."),
    f("lend_limit", Record(Record::Resources), Static, "Most of its unused guarantee others may borrow."),
    f("weight", NUMBER, Static, "Fair-share weight (default 1)."),
    f("allocated", Record(Record::Resources), Cycle, "Resources its running jobs hold."),
    f("borrowed", Record(Record::Resources), Cycle, "max(0, allocated − guarantee) per resource."),
    f("usage", Num(Dim { gpu: 1, cpu: 0, bytes: 0, time: 1 }), Cycle, "Decayed GPU-time used."),
    f("dominant_share", NUMBER, Cycle, "max over resources of allocated / cluster total."),
    f("fair_share", NUMBER, Cycle, "Guarantee plus surplus split by weight, as a share of the cluster."),
    f("share_after", NUMBER, Cycle, "Dominant share if the job in scope were admitted or the victim evicted."),
    f("pending", NUMBER, Cycle, "Jobs waiting in the queue (and its descendants)."),
    f("running", NUMBER, Cycle, "Jobs running in the queue (and its descendants)."),
];

static DOMAIN: &[Field] = &[
    f("name", Str, Static, "The domain's name, e.g. \"rack-12\"."),
    f("nodes", NUMBER, Static, "Nodes in the domain."),
    f("cards", GPU, Static, "GPUs in the domain."),
    f("free_cards", GPU, Cycle, "Wholly free cards in the domain."),
    f("free_gpu", GPU, Cycle, "Free GPU capacity including partly used cards."),
    f("max_free_cards", GPU, Cycle, "The most wholly free cards on any one node of the domain."),
];

static CLUSTER: &[Field] = &[
    f("time", TIME, Cycle, "The clock: seconds since the start of the run."),
    f("nodes", NUMBER, Static, "Nodes in the cluster."),
    f("total", Record(Record::Resources), Static, "Capacity of the whole cluster."),
    f("free", Record(Record::Resources), Cycle, "Unallocated capacity."),
    f("task_shapes", List(Record::Shape), Cycle, "Popular request shapes of the workload."),
];

static SHAPE: &[Field] = &[
    f("whole_cards", GPU, Static, "Whole cards per replica."),
    f("gpu_fraction", GPU, Static, "Fraction of one card per replica."),
    opt("mig_profile", Enum(EnumKind::MigProfile), Static, "MIG profile, if any."),
    f("cpu", CPU, Static, "CPU cores per replica."),
    f("mem", BYTES, Static, "Host memory per replica."),
    f("weight", NUMBER, Static, "Share of the workload with this shape; weights sum to 1."),
];

static RESOURCES: &[Field] = &[
    f("gpu", GPU, Static, "GPUs (any model)."),
    f("cpu", CPU, Static, "CPU cores."),
    f("mem", BYTES, Static, "Memory."),
];

/// The records in scope in each kind of rule, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    Const,
    Function,
    Admit,
    Filter,
    Score,
    CardScore,
    QueueOrder,
    JobOrder,
    Gang,
    Victim,
    /// `expect` conditions in tests: queues, jobs and nodes by their names.
    Test,
}

/// A record a rule body can name directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Root {
    Job,
    Node,
    Card,
    Queue,
    Cluster,
    Claimant,
    Victim,
}

impl Root {
    pub fn name(self) -> &'static str {
        match self {
            Root::Job => "job",
            Root::Node => "node",
            Root::Card => "card",
            Root::Queue => "queue",
            Root::Cluster => "cluster",
            Root::Claimant => "claimant",
            Root::Victim => "victim",
        }
    }

    pub fn record(self) -> Record {
        match self {
            Root::Job | Root::Claimant | Root::Victim => Record::Job,
            Root::Node => Record::Node,
            Root::Card => Record::Card,
            Root::Queue => Record::Queue,
            Root::Cluster => Record::Cluster,
        }
    }

    pub const ALL: [Root; 7] =
        [Root::Job, Root::Node, Root::Card, Root::Queue, Root::Cluster, Root::Claimant, Root::Victim];
}

impl Context {
    pub fn roots(self) -> &'static [Root] {
        use Root::*;
        match self {
            Context::Const | Context::Function => &[],
            Context::Admit | Context::JobOrder | Context::Gang => &[Job, Cluster],
            Context::Filter | Context::Score => &[Job, Node, Cluster],
            Context::CardScore => &[Job, Node, Card, Cluster],
            Context::QueueOrder => &[Queue, Cluster],
            Context::Victim => &[Claimant, Victim, Cluster],
            Context::Test => &[Cluster],
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Context::Const => "a constant",
            Context::Function => "a function",
            Context::Admit => "an admit rule",
            Context::Filter => "a filter rule",
            Context::Score => "a score rule",
            Context::CardScore => "a card_score rule",
            Context::QueueOrder => "queue_order",
            Context::JobOrder => "job_order",
            Context::Gang => "a gang clause",
            Context::Victim => "a preempt or reclaim rule",
            Context::Test => "a test expectation",
        }
    }
}

/// Topology levels when a policy declares none, smallest first.
pub const DEFAULT_LEVELS: &[&str] = &["nvlink_domain", "rack", "block", "zone"];

fn ty_name(ty: FieldTy) -> String {
    match ty {
        Num(d) => d.to_string(),
        Bool => "bool".into(),
        Str => "string".into(),
        Enum(e) => e.name().into(),
        FieldTy::Record(r) => r.name().into(),
        List(r) => format!("list[{}]", r.name()),
        StrList => "list[string]".into(),
        Labels => "labels".into(),
        MigCounts => "mig counts".into(),
    }
}

/// The schema as Markdown: docs/schema.md is exactly this text.
pub fn markdown() -> String {
    let mut out = String::from(
        "# The gpol schema\n\n\
         What rules can see: every record, field, type and unit. This file is generated from \
         `compiler/src/schema.rs` (the one definition used by the checker, interpreter, JIT and \
         runtime); regenerate it with `GPOL_BLESS=1 cargo test -p gpol-compiler schema_doc`.\n\n\
         Types: `number` has no unit (counts, fractions); `gpu`, `cpu`, `bytes` and `duration` \
         are units; `T?` is optional (read it with `??` or `has`). Storage: *static* fields are \
         fixed at submission or registration, *derived* ones are computed from them, *per cycle* \
         ones change as the cluster runs.\n\n\
         ## Records in scope\n\n\
         | rule | records |\n|---|---|\n",
    );
    for c in [
        Context::Admit,
        Context::Filter,
        Context::Score,
        Context::CardScore,
        Context::QueueOrder,
        Context::JobOrder,
        Context::Gang,
        Context::Victim,
    ] {
        let names: Vec<String> = c.roots().iter().map(|r| format!("`{}`", r.name())).collect();
        out.push_str(&format!("| {} | {} |\n", c.describe(), names.join(", ")));
    }
    for r in Record::ALL {
        out.push_str(&format!(
            "\n## `{}`\n\n{}\n\n| field | type | storage | meaning |\n|---|---|---|---|\n",
            r.name(),
            r.doc()
        ));
        for fld in r.fields() {
            let q = if fld.optional { "?" } else { "" };
            out.push_str(&format!(
                "| `{}` | `{}{q}` | {} | {} |\n",
                fld.name,
                ty_name(fld.ty),
                fld.storage.name(),
                fld.doc
            ));
        }
        if r == Record::Node {
            out.push_str(
                "| `LEVEL` | `domain` | per cycle | One field per topology level (`node.rack`, `node.nvlink_domain`, …). |\n",
            );
        }
        if r == Record::Queue {
            out.push_str("| `attr.NAME` | declared | static | Custom attributes set with `attr NAME = value`, inherited down the tree. |\n");
        }
    }
    out.push_str("\n## Enumerations\n\n");
    for e in [EnumKind::Sharing, EnumKind::MigProfile] {
        let vs: Vec<String> = e.variants().iter().map(|v| format!("`{v}`")).collect();
        out.push_str(&format!("- `{}`: {}\n", e.name(), vs.join(", ")));
    }
    out
}
