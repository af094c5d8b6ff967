//! The schema: every record a rule can read, every field, its type, unit, optionality
//! and storage class. Defined once here; the checker types field accesses from it, and
//! the interpreter, JIT and runtime lay out and fill records from it. docs/schema.md is
//! generated from this table (`schema::markdown`) and a test keeps the two equal.

mod records;

use crate::units::Dim;

pub use records::{
    CardRec, ClusterRec, DomainRec, FieldValue, JobRec, LIST_LEN, LIST_PTR, List, MAX_LEVELS, MigCounts, NodeRec,
    NodeTable, Opt, QueueRec, Repr, Resources, ShapeRec, ShapeTable, Sym,
};

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

    pub(crate) fn from_name(s: &str) -> Option<Record> {
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
        records::table(self)
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

/// MIG profiles gpol knows, every data-centre GPU's ([`crate::mig`]).
pub const MIG_PROFILES: &[&str] = crate::mig::PROFILES;

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
    pub(crate) fn name(self) -> &'static str {
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

impl FieldTy {
    /// The most elements a list field holds: its documented input limit.
    pub(crate) fn max_len(self) -> Option<u32> {
        use crate::limits::{MAX_ALLOWED_MODELS, MAX_CARDS_PER_NODE, MAX_TASK_SHAPES};
        match self {
            FieldTy::List(Record::Shape) => Some(MAX_TASK_SHAPES),
            FieldTy::List(_) => Some(MAX_CARDS_PER_NODE),
            FieldTy::StrList => Some(MAX_ALLOWED_MODELS),
            _ => None,
        }
    }
}

#[derive(Debug)]
pub struct Field {
    pub name: &'static str,
    pub ty: FieldTy,
    /// Whether the value may be absent (`T?`): read only through `??` or `has`.
    pub optional: bool,
    pub storage: Storage,
    pub doc: &'static str,
    /// Byte offset in the record's `#[repr(C)]` struct.
    pub offset: usize,
    /// How the value is stored there.
    pub repr: Repr,
}

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

    pub(crate) const ALL: [Root; 7] =
        [Root::Job, Root::Node, Root::Card, Root::Queue, Root::Cluster, Root::Claimant, Root::Victim];
}

impl Context {
    pub(crate) fn roots(self) -> &'static [Root] {
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

    pub(crate) fn describe(self) -> &'static str {
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
            Context::Victim => "a preempt, reclaim, borrow or protect rule, or victim_order",
            Context::Test => "a test expectation",
        }
    }
}

/// A hash of the record layout (names, offsets, representations, sizes). Stamped into
/// object files so code compiled against another layout is refused.
pub fn layout_hash() -> u64 {
    use std::mem::size_of;
    let mut text = format!(
        "job {} node {} card {} queue {} domain {} cluster {} shape {} resources {};",
        size_of::<JobRec>(),
        size_of::<NodeRec>(),
        size_of::<CardRec>(),
        size_of::<QueueRec>(),
        size_of::<DomainRec>(),
        size_of::<ClusterRec>(),
        size_of::<ShapeRec<'static>>(),
        size_of::<Resources>()
    );
    for r in Record::ALL {
        for f in r.fields() {
            text.push_str(&format!("{}.{}@{}:{:?};", r.name(), f.name, f.offset, f.repr));
        }
    }
    crate::ops::str_key(&text)
}

/// Topology levels when a policy declares none, smallest first.
pub(crate) const DEFAULT_LEVELS: &[&str] = &["nvlink_domain", "rack", "block", "zone"];

fn ty_name(ty: FieldTy) -> String {
    use FieldTy::*;
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
    out.push_str(&mig_tables());
    out.push_str(&model_table());
    out
}

/// The GPU models section: [`crate::models::TABLE`].
fn model_table() -> String {
    let mut out = String::from(
        "\n## GPU models\n\n\
         Importers read a GPU's product name (GPU feature discovery's `nvidia.com/gpu.product`, \
         `nvidia-smi`'s name) as gpol's model name: lower case, without an `NVIDIA`/`Tesla` prefix, a \
         `-SHARED` suffix or a `-MIG-<profile>` part, then the first stem below that the name is or \
         starts (followed by `-`): `NVIDIA-H100-80GB-HBM3` is `h100`. A name matching no stem is kept \
         (cleaned) with a warning. Kubernetes nodes and pods' model pins and Slurm GRES types go \
         through it; traces and cluster files name models as gpol does already.\n\n\
         | product stem | model |\n|---|---|\n",
    );
    for (stem, model) in crate::models::TABLE {
        out.push_str(&format!("| `{stem}` | `{model}` |\n"));
    }
    out
}

/// The MIG section: each GPU's profiles, from [`crate::mig::GPUS`].
fn mig_tables() -> String {
    let mut out = String::from(
        "\n## MIG\n\n\
         A MIG node's cards follow its GPU's table: the node's model and card memory pick it (the \
         variant nearest the card memory); a node of a model with no table (a test's default `gpu`) \
         follows the first GPU below that has every profile of its layout. A layout fits when each \
         profile is the GPU's, within its count, the compute slices add up to at most the GPU's and \
         the memory slices do not overlap, each instance starting where NVIDIA's placement rules \
         allow. An instance is charged its compute slices of the card's (`3g` of 7: 0.429 gpu; `2g` of \
         4: 0.5); a job asking for a profile is charged as on the first GPU below that has it. Sources: \
         NVIDIA's MIG user guide, \"Supported MIG Profiles\" (A30, A100, H100, H100 NVL, H100 on \
         GH200, H200, B200, RTX PRO 6000) and, for GPUs it does not table (GH200 144 GB, H20, GB200, \
         B300, GB300), the default configuration of NVIDIA's mig-parted. Media-extension variants \
         (`+me`) are read as their base profile.\n\n\
         | model | memory | compute slices | profiles (instances at most) |\n|---|---|---|---|\n",
    );
    for g in crate::mig::GPUS {
        let profiles: Vec<String> = g.slots.iter().map(|s| format!("`{}` ×{}", s.profile, s.max)).collect();
        out.push_str(&format!(
            "| `{}` | {} GB | {} | {} |\n",
            g.model,
            g.memory_gb,
            g.compute_slices,
            profiles.join(", ")
        ));
    }
    out
}
