//! The checked policy: names resolved, types and units known, constants folded.
//! This is what the checker hands to lowering (the IR), the interpreter and the runtime.

use crate::kinds::{CompKind, Direction, GangKind, QuotaKind, RuleKind, VictimKind};
use crate::schema::{EnumKind, Record, Root};
use crate::source::Span;
use crate::spec::{History, JobSpec, NodeSpec};
use crate::syntax::{BinaryOp, UnaryOp};
use crate::types::Ty;
use crate::window::{self, Window};
use std::collections::{BTreeMap, BTreeSet};

pub type LocalId = u32;
pub type FnId = usize;
pub type QueueId = usize;

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Ty,
    pub span: Span,
}

/// A checked expression. Numbers are in base units (cards, cores, bytes, seconds).
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Num(f64),
    Bool(bool),
    Str(String),
    Enum(EnumKind, u8),
    List(Vec<Expr>),
    Local(LocalId),
    Root(Root),
    /// A schema field: the record kind and the field's index in `Record::fields`.
    Field(Box<Expr>, Record, u16),
    /// `node.LEVEL`: the index of the level in `Policy::levels`.
    Level(Box<Expr>, u8),
    /// `queue.attr.NAME`: the attribute's index in `Policy::attrs`.
    Attr(Box<Expr>, u16),
    /// `labels["k"]` or `free_mig[profile]`.
    Index(Box<Expr>, Box<Expr>),
    Builtin(Builtin, Vec<Expr>),
    Call(FnId, Vec<Expr>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Let(LocalId, Box<Expr>, Box<Expr>),
    Comprehension(CompKind, LocalId, Box<Expr>, Box<Expr>),
    /// Stands for an expression that had an error (already reported). Never folds, and a
    /// policy containing one is never handed to later stages.
    Error,
}

impl Expr {
    /// Whether any part of the expression had an error.
    pub(crate) fn has_error(&self) -> bool {
        use ExprKind as K;
        match &self.kind {
            K::Error => true,
            K::Num(_) | K::Bool(_) | K::Str(_) | K::Enum(..) | K::Local(_) | K::Root(_) => false,
            K::List(es) | K::Builtin(_, es) | K::Call(_, es) => es.iter().any(Expr::has_error),
            K::Field(b, ..) | K::Level(b, _) | K::Attr(b, _) | K::Unary(_, b) => b.has_error(),
            K::Index(a, b) | K::Binary(_, a, b) | K::Let(_, a, b) | K::Comprehension(_, _, a, b) => {
                a.has_error() || b.has_error()
            }
            K::If(a, b, c) => a.has_error() || b.has_error() || c.has_error(),
        }
    }
}

/// Functions built into the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    Min,
    Max,
    Abs,
    Clamp,
    Floor,
    Ceil,
    Round,
    Trunc,
    Mod,
    Sqrt,
    Exp2,
    Log,
    Pow,
    Hash01,
    Has,
    Len,
}

impl Builtin {
    pub(crate) const ALL: [Builtin; 16] = [
        Builtin::Min,
        Builtin::Max,
        Builtin::Abs,
        Builtin::Clamp,
        Builtin::Floor,
        Builtin::Ceil,
        Builtin::Round,
        Builtin::Trunc,
        Builtin::Mod,
        Builtin::Sqrt,
        Builtin::Exp2,
        Builtin::Log,
        Builtin::Pow,
        Builtin::Hash01,
        Builtin::Has,
        Builtin::Len,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Min => "min",
            Builtin::Max => "max",
            Builtin::Abs => "abs",
            Builtin::Clamp => "clamp",
            Builtin::Floor => "floor",
            Builtin::Ceil => "ceil",
            Builtin::Round => "round",
            Builtin::Trunc => "trunc",
            Builtin::Mod => "mod",
            Builtin::Sqrt => "sqrt",
            Builtin::Exp2 => "exp2",
            Builtin::Log => "log",
            Builtin::Pow => "pow",
            Builtin::Hash01 => "hash01",
            Builtin::Has => "has",
            Builtin::Len => "len",
        }
    }

    pub(crate) fn signature(self) -> &'static str {
        match self {
            Builtin::Min => "min(a: T, b: T) -> T",
            Builtin::Max => "max(a: T, b: T) -> T",
            Builtin::Abs => "abs(x: T) -> T",
            Builtin::Clamp => "clamp(x: T, lo: T, hi: T) -> T",
            Builtin::Floor => "floor(x: T) -> T",
            Builtin::Ceil => "ceil(x: T) -> T",
            Builtin::Round => "round(x: T) -> T",
            Builtin::Trunc => "trunc(x: T) -> T",
            Builtin::Mod => "mod(x: T, y: T) -> T",
            Builtin::Sqrt => "sqrt(x: number) -> number",
            Builtin::Exp2 => "exp2(x: number) -> number",
            Builtin::Log => "log(x: number) -> number",
            Builtin::Pow => "pow(x: number, y: number) -> number",
            Builtin::Hash01 => "hash01(a, b) -> number",
            Builtin::Has => "has(x: T?) -> bool",
            Builtin::Len => "len(xs: list[T]) -> number",
        }
    }

    pub(crate) fn from_name(s: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == s)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// Qualified name: `binpack` in a policy, `std.pack.binpack` from a library.
    pub name: String,
    pub params: Vec<(LocalId, Ty)>,
    pub ret: Ty,
    pub body: Expr,
    pub span: Span,
}

/// A compile-time value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Num(f64),
    Bool(bool),
    Str(String),
    Enum(EnumKind, u8),
    List(Vec<Value>),
}

impl Value {
    pub(crate) fn as_num(&self) -> Option<f64> {
        match self {
            Value::Num(n) => Some(*n),
            _ => None,
        }
    }
}

/// What a quota amount is of.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// GPUs; `Some(model)` for a quota scoped to one GPU model.
    Gpu(Option<String>),
    Cpu,
    Mem,
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Gpu(None) => f.write_str("gpu"),
            Resource::Gpu(Some(m)) => write!(f, "gpu({m})"),
            Resource::Cpu => f.write_str("cpu"),
            Resource::Mem => f.write_str("memory"),
        }
    }
}

/// Amounts per resource, in base units.
pub type Quota = BTreeMap<Resource, f64>;

#[derive(Clone, Debug, PartialEq)]
pub struct Queue {
    pub name: String,
    pub parent: Option<QueueId>,
    pub children: Vec<QueueId>,
    /// Guarantee, limit, borrow_limit, lend_limit and user_limit as written; a parent's
    /// unset guarantee of a resource its children are guaranteed is their sum.
    pub quotas: BTreeMap<QuotaKindKey, Quota>,
    /// Amounts that apply only in their window of the week, over `quotas`
    /// ([`Policy::quotas_at`]), in the order written: where two windows setting one kind
    /// and resource overlap, the later one's amount is in force.
    pub windows: Vec<QuotaWindow>,
    /// The resources whose guarantee was not written (a parent's is its children's sum).
    /// At a root, the runtime lets the tree hold up to the cluster's capacity of them.
    pub unset_guarantee: BTreeSet<Resource>,
    /// `fairshare parent`: transparent to Slurm's Fair Tree.
    pub fairshare_parent: bool,
    pub weight: f64,
    /// Seconds; `None` keeps usage undecayed.
    pub usage_half_life: Option<f64>,
    pub queueing: Option<Queueing>,
    /// Attributes set on this queue itself (inherited values are resolved in `attr_values`).
    pub attrs: BTreeMap<u16, Value>,
    pub span: Span,
}

impl Queue {
    /// Whether the checker made it up: `default`, the one queue of a policy without a
    /// tree. (Spans compare equal whatever their place, so the place is read.)
    pub fn is_implicit(&self) -> bool {
        (self.span.start, self.span.end) == (0, 0)
    }

    pub fn quota(&self, kind: QuotaKind) -> Option<&Quota> {
        self.quotas.get(&QuotaKindKey(kind))
    }
}

/// A windowed quota statement: `lend_limit 24 gpu from 22:00 to 07:00`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaWindow {
    pub kind: QuotaKind,
    pub amounts: Quota,
    pub window: Window,
    pub span: Span,
}

/// One queue's amounts of every quota kind.
pub type Quotas = BTreeMap<QuotaKindKey, Quota>;

/// `QuotaKind` as an ordered map key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QuotaKindKey(pub QuotaKind);

impl PartialOrd for QuotaKindKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for QuotaKindKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let pos = |k: QuotaKind| QuotaKind::ALL.iter().position(|x| *x == k);
        pos(self.0).cmp(&pos(other.0))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queueing {
    Strict,
    BestEffort,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub kind: RuleKind,
    pub name: String,
    pub reason: Option<String>,
    /// 1–4 for tiered scores.
    pub tier: Option<u8>,
    pub weight: f64,
    pub body: Expr,
    /// Whether an admit rule reads only static job fields (its rejection is permanent).
    pub is_static: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderKey {
    pub expr: Expr,
    pub dir: Direction,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GangClause {
    pub kind: GangKind,
    pub level: u8,
    pub weight: f64,
    pub when: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VictimRule {
    pub kind: VictimKind,
    pub name: String,
    /// A `protect` rule's reason.
    pub reason: Option<String>,
    pub when: Expr,
    pub cost: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub queueing: Queueing,
    /// Seconds a job waits before it may reserve its best domain; `None`: never.
    pub reserve_after: Option<f64>,
    /// How usage is counted.
    pub billing: Billing,
    /// The time zone rules read the time of day in (an IANA name); `None`: UTC.
    pub timezone: Option<String>,
}

/// What a second of holding resources adds to usage (Slurm's `TRESBillingWeights`): the
/// weighted sum of GPUs, cores and GiB held, or with `max` their largest term
/// (`PriorityFlags=MAX_TRES`). By default one unit per GPU: usage is GPU-seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Billing {
    pub gpu: f64,
    pub cpu: f64,
    pub mem_gib: f64,
    pub max: bool,
}

impl Default for Billing {
    fn default() -> Billing {
        Billing { gpu: 1.0, cpu: 0.0, mem_gib: 0.0, max: false }
    }
}

impl Billing {
    /// The billed amount of holding `gpus`, `cores` and `gib`.
    pub fn of(&self, gpus: f64, cores: f64, gib: f64) -> f64 {
        let terms = [self.gpu * gpus, self.cpu * cores, self.mem_gib * gib];
        if self.max { terms.into_iter().fold(0.0, f64::max) } else { terms.iter().sum() }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: String,
    pub ty: Ty,
}

/// A checked policy: everything later stages need, nothing they must re-derive.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    pub name: String,
    /// Every function the policy can call, its own and its libraries'.
    pub functions: Vec<Function>,
    pub queues: Vec<Queue>,
    /// Value of every attribute for every queue, after inheritance (`None`: undefined).
    pub attr_values: Vec<Vec<Option<Value>>>,
    pub attrs: Vec<Attr>,
    pub priority_classes: Vec<(String, f64)>,
    pub levels: Vec<String>,
    pub settings: Settings,
    pub rules: Vec<Rule>,
    pub queue_order: Vec<OrderKey>,
    pub job_order: Vec<OrderKey>,
    /// The order victims are taken in (`claimant`, `victim` in scope); empty: cheapest
    /// cost first, then lowest priority, then the most recently started.
    pub victim_order: Vec<OrderKey>,
    pub gang: Vec<GangClause>,
    pub victims: Vec<VictimRule>,
    pub tests: Vec<Test>,
}

impl Policy {
    pub fn queue(&self, name: &str) -> Option<QueueId> {
        self.queues.iter().position(|q| q.name == name)
    }

    /// Whether the policy declares no queues: its one queue, `default`, then takes every
    /// job, whatever queue the job names (so placement policies run on any workload).
    pub fn has_implicit_queue(&self) -> bool {
        matches!(self.queues.as_slice(), [q] if q.is_implicit())
    }

    /// The minutes of the week at which some quota window opens or closes: where the
    /// week's phases start (none if no quota has a window).
    pub fn quota_edges(&self) -> Vec<u16> {
        window::edges(self.queues.iter().flat_map(|q| q.windows.iter().map(|w| w.window)))
    }

    /// Every queue's amounts in force at `minute` of the local week (`None`: with no
    /// window open, what consumers that know no time apply): the written amounts, each
    /// open window's laid over them per kind and resource in the order written (the
    /// last open window that sets an amount wins), and a parent's unwritten
    /// guarantee of a resource the sum of its children's.
    pub fn quotas_at(&self, minute: Option<u16>) -> Vec<Quotas> {
        let mut out: Vec<Quotas> = self
            .queues
            .iter()
            .map(|q| {
                let mut quotas = q.quotas.clone();
                if let Some(g) = quotas.get_mut(&QuotaKindKey(QuotaKind::Guarantee)) {
                    g.retain(|r, _| !q.unset_guarantee.contains(r));
                }
                for w in q.windows.iter().filter(|w| minute.is_some_and(|m| w.window.contains(m))) {
                    let slot = quotas.entry(QuotaKindKey(w.kind)).or_default();
                    slot.extend(w.amounts.iter().map(|(r, v)| (r.clone(), *v)));
                }
                quotas
            })
            .collect();
        // Children come after their parents: sum bottom-up.
        let guarantee = QuotaKindKey(QuotaKind::Guarantee);
        for i in (0..self.queues.len()).rev() {
            for r in &self.queues[i].unset_guarantee {
                if out[i].get(&guarantee).is_some_and(|g| g.contains_key(r)) {
                    continue;
                }
                let given: Vec<f64> = self.queues[i]
                    .children
                    .iter()
                    .filter_map(|&c| out[c].get(&guarantee).and_then(|g| g.get(r)).copied())
                    .collect();
                if !given.is_empty() {
                    out[i].entry(guarantee).or_default().insert(r.clone(), given.iter().sum());
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------- tests

#[derive(Clone, Debug, PartialEq)]
pub struct Test {
    pub name: String,
    pub steps: Vec<Step>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Node(NodeSpec),
    Submit(JobSpec),
    /// A job already running on these nodes (one per replica), with its history.
    Run(JobSpec, Vec<String>, History),
    Advance(f64),
    Complete(String),
    Fail(String),
    /// Past usage, as of the test's clock: of a queue, or of a user in a leaf queue.
    Usage {
        queue: QueueId,
        user: Option<String>,
        amount: f64,
    },
    Expect(Expect, Span),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    On(String, Vec<String>),
    Pending(String, Option<String>),
    Rejected(String, Option<String>),
    /// The victim, the claimant and the name of the rule that allowed it, if given.
    Evicted(String, Option<String>, Option<String>),
    Running(String),
    /// A condition over `cluster` and the test's queues, jobs and nodes by name.
    /// Names resolve to roots of the test context in `names`.
    Holds(Expr, Vec<TestName>),
}

/// A name bound in a test expectation: local id → what it denotes.
#[derive(Clone, Debug, PartialEq)]
pub enum TestName {
    Queue(LocalId, QueueId),
    Job(LocalId, String),
    Node(LocalId, String),
}
