//! The typed IR both engines run: one expression tree per rule, with functions inlined,
//! constants folded, units erased (numbers are `f64` in base units), optionals and
//! lists explicit, label lookups turned into fixed slots, and comprehensions as bounded
//! loops over lists the records provide. [`crate::lower`] builds it from the checked
//! policy; [`crate::interp`] and the JIT evaluate it.

use crate::hir::Builtin;
pub use crate::kinds::{CompKind, Direction, GangKind, QuotaKind, RuleKind, VictimKind};
use crate::schema::{Record, Root};
use crate::source::Span;
use std::fmt;

/// The type of an IR value, as both engines represent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VTy {
    F64,
    Bool,
    /// An interned string (`0`: absent).
    Sym,
    /// An enum value (sharing mode, MIG profile).
    U8,
    /// A record: a pointer (job, node, card, shape, cluster, resources) or an index into
    /// the context's tables (queue, domain).
    Ref(Record),
    /// A list: (pointer, length) of elements of this kind.
    List(Elem),
    /// The label slots of a job's or a node's labels.
    Labels(Record),
    /// A per-MIG-profile count table.
    Mig,
    /// An optional number, enum or queue.
    Opt(OptOf),
}

/// What a list holds, and so how its elements are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// Records stored by value (a node's cards, the cluster's task shapes).
    Inline(Record),
    /// Values of a scalar type (`job.allowed_models`, list literals).
    Value(Scalar),
}

/// The element types a list literal can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    F64,
    Bool,
    Sym,
    U8,
    /// A queue or domain index, or a record pointer.
    Ref(Record),
}

impl Scalar {
    pub fn vty(self) -> VTy {
        match self {
            Scalar::F64 => VTy::F64,
            Scalar::Bool => VTy::Bool,
            Scalar::Sym => VTy::Sym,
            Scalar::U8 => VTy::U8,
            Scalar::Ref(r) => VTy::Ref(r),
        }
    }

    pub(crate) fn of(ty: VTy) -> Option<Scalar> {
        Some(match ty {
            VTy::F64 => Scalar::F64,
            VTy::Bool => Scalar::Bool,
            VTy::Sym => Scalar::Sym,
            VTy::U8 => Scalar::U8,
            VTy::Ref(r) => Scalar::Ref(r),
            _ => return None,
        })
    }
}

impl Elem {
    /// The type of one element as an IR value (an inline record is read by reference).
    pub(crate) fn vty(self) -> VTy {
        match self {
            Elem::Inline(r) => VTy::Ref(r),
            Elem::Value(s) => s.vty(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OptOf {
    F64,
    U8,
    Queue,
}

impl OptOf {
    pub fn inner(self) -> VTy {
        match self {
            OptOf::F64 => VTy::F64,
            OptOf::U8 => VTy::U8,
            OptOf::Queue => VTy::Ref(Record::Queue),
        }
    }
}

/// A local variable: a `let`, an inlined parameter or a loop variable.
pub type Local = u32;

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub kind: Kind,
    pub ty: VTy,
}

/// Binary operations, resolved by operand type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    /// IEEE comparisons: false when either side is NaN (except `Ne`, which is true).
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    /// Equality of `Bool`, `Sym`, `U8` or record references.
    BitEq,
    BitNe,
    /// Short-circuit boolean operators.
    And,
    Or,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Num(f64),
    Bool(bool),
    /// The policy's string literal with this index (the runtime interns it).
    Str(u32),
    Enum(u8),
    Local(Local),
    Root(Root),
    Field {
        base: Box<Node>,
        record: Record,
        field: u16,
    },
    /// `node.LEVEL`: the node's domain at a topology level.
    Domain {
        node: Box<Node>,
        level: u8,
    },
    /// `queue.attr.NAME`: the policy's value for that queue.
    Attr {
        queue: Box<Node>,
        attr: u16,
    },
    /// `labels[key]` for a key with this slot; `Sym(0)` when the label is absent.
    Label {
        labels: Box<Node>,
        slot: u16,
    },
    /// `free_mig[profile]`.
    Mig {
        counts: Box<Node>,
        profile: Box<Node>,
    },
    Not(Box<Node>),
    Neg(Box<Node>),
    Bin(Bin, Box<Node>, Box<Node>),
    If(Box<Node>, Box<Node>, Box<Node>),
    Let(Local, Box<Node>, Box<Node>),
    /// Whether an optional value is present, and its value.
    IsSome(Box<Node>),
    Unwrap(Box<Node>),
    /// Length of a list.
    Len(Box<Node>),
    /// A list built at run time from its elements (a list literal that is not expanded
    /// in place).
    ListLit(Vec<Node>),
    /// A value the caller supplies: the queues, jobs and nodes a test expectation names.
    /// Only the interpreter evaluates expectations; policies never contain it.
    Input(u16),
    /// A comprehension: a loop binding `var` to each element of `list`.
    Loop {
        kind: CompKind,
        var: Local,
        list: Box<Node>,
        body: Box<Node>,
    },
    /// Numeric built-ins (not `has`/`len`, which are `IsSome`/`Len`).
    Call(Builtin, Vec<Node>),
}

impl Node {
    pub fn new(kind: Kind, ty: VTy) -> Node {
        Node { kind, ty }
    }

    pub fn num(n: f64) -> Node {
        Node::new(Kind::Num(n), VTy::F64)
    }

    pub fn boolean(b: bool) -> Node {
        Node::new(Kind::Bool(b), VTy::Bool)
    }
}

impl Node {
    /// The node's operands.
    pub fn children(&self) -> Vec<&Node> {
        let mut out = Vec::new();
        self.any_child(&mut |c| {
            out.push(c);
            false
        });
        out
    }

    /// Whether `pred` holds for this node or any node below it.
    pub fn any(&self, pred: &dyn Fn(&Node) -> bool) -> bool {
        pred(self) || self.any_child(&mut |c| c.any(pred))
    }

    /// Whether `f` holds for any of the node's operands (in order, stopping at the first):
    /// `children` without building a list, for walks that run often.
    pub fn any_child<'a>(&'a self, f: &mut dyn FnMut(&'a Node) -> bool) -> bool {
        match &self.kind {
            Kind::Num(_)
            | Kind::Bool(_)
            | Kind::Str(_)
            | Kind::Enum(_)
            | Kind::Local(_)
            | Kind::Root(_)
            | Kind::Input(_) => false,
            Kind::Field { base, .. } | Kind::Domain { node: base, .. } | Kind::Attr { queue: base, .. } => f(base),
            Kind::Label { labels, .. } => f(labels),
            Kind::Not(x) | Kind::Neg(x) | Kind::IsSome(x) | Kind::Unwrap(x) | Kind::Len(x) => f(x),
            Kind::Mig { counts: a, profile: b } | Kind::Bin(_, a, b) | Kind::Let(_, a, b) => f(a) || f(b),
            Kind::Loop { list: a, body: b, .. } => f(a) || f(b),
            Kind::If(a, b, c) => f(a) || f(b) || f(c),
            Kind::Call(_, args) | Kind::ListLit(args) => args.iter().any(f),
        }
    }

    /// Whether the expression reads `field` of a `record`.
    pub fn reads(&self, record: Record, field: &str) -> bool {
        let Some((index, _)) = record.field(field) else { return false };
        self.any(&|n| matches!(n.kind, Kind::Field { record: r, field: f, .. } if r == record && f == index))
    }
}

/// Comprehensions over lists the records provide cost this many times a plain operation
/// when ordering filters cheapest first.
const LOOP_COST: u32 = 16;

impl Node {
    /// A rough evaluation cost, for running cheap filters first.
    pub fn cost(&self) -> u32 {
        let sub = |n: &Node| n.cost();
        1 + match &self.kind {
            Kind::Num(_)
            | Kind::Bool(_)
            | Kind::Str(_)
            | Kind::Enum(_)
            | Kind::Local(_)
            | Kind::Root(_)
            | Kind::Input(_) => 0,
            Kind::Field { base, .. } | Kind::Domain { node: base, .. } | Kind::Attr { queue: base, .. } => sub(base),
            Kind::Label { labels, .. } => sub(labels),
            Kind::Not(x) | Kind::Neg(x) | Kind::IsSome(x) | Kind::Unwrap(x) | Kind::Len(x) => sub(x),
            Kind::Mig { counts: a, profile: b } | Kind::Bin(_, a, b) | Kind::Let(_, a, b) => sub(a) + sub(b),
            Kind::If(a, b, c) => sub(a) + sub(b).max(sub(c)),
            Kind::Loop { list, body, .. } => sub(list) + LOOP_COST * sub(body),
            Kind::Call(_, args) => args.iter().map(Node::cost).sum::<u32>() + 4,
            Kind::ListLit(items) => items.iter().map(Node::cost).sum::<u32>(),
        }
    }
}

/// One rule body: the expression and how many locals it uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    pub node: Node,
    pub locals: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub kind: RuleKind,
    pub name: String,
    pub reason: Option<String>,
    pub tier: Option<u8>,
    pub weight: f64,
    pub is_static: bool,
    pub body: Body,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderKey {
    pub body: Body,
    pub dir: Direction,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GangClause {
    pub kind: GangKind,
    pub level: u8,
    pub weight: f64,
    pub when: Option<Body>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct VictimRule {
    pub kind: VictimKind,
    pub name: String,
    /// A `protect` rule's reason.
    pub reason: Option<String>,
    pub when: Body,
    pub cost: Option<Body>,
}

/// A queue attribute's value for one queue, as the engines read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttrValue {
    Absent,
    Num(f64),
    Bool(bool),
    Str(u32),
    Enum(u8),
}

/// The whole policy in IR form.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub name: String,
    pub admit: Vec<Rule>,
    /// Filters in declaration order (explain reports the first that rejects).
    pub filters: Vec<Rule>,
    /// Indices into `filters`, cheapest first: the order the fused call evaluates them.
    pub filter_order: Vec<usize>,
    pub scores: Vec<Rule>,
    pub card_scores: Vec<Rule>,
    pub queue_order: Vec<OrderKey>,
    pub job_order: Vec<OrderKey>,
    pub victim_order: Vec<OrderKey>,
    pub gang: Vec<GangClause>,
    pub victims: Vec<VictimRule>,
    /// String literals; `Kind::Str(i)` is `literals[i]`.
    pub literals: Vec<String>,
    /// Label keys the policy reads, by slot, for job and node labels.
    pub job_labels: Vec<String>,
    pub node_labels: Vec<String>,
    /// `attrs[queue][attr]`.
    pub attrs: Vec<Vec<AttrValue>>,
    pub levels: Vec<String>,
}

/// Which rule of a program: its kind and its index among the program's rules of that
/// kind. Decisions carry these; names are looked up only when a decision is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleId {
    Admit(u16),
    Filter(u16),
    Score(u16),
    CardScore(u16),
    QueueOrder(u16),
    JobOrder(u16),
    Gang(u16),
    /// A `preempt`, `reclaim`, `borrow` or `protect` rule.
    Victim(u16),
    VictimOrder(u16),
}

impl Program {
    /// A rule's name as policies write it (`queue_order key 2`, `gang clause 1` for the
    /// unnamed ones); empty for an index the program does not have.
    pub fn rule_name(&self, id: RuleId) -> String {
        let named = |rules: &[Rule], i: u16| rules.get(usize::from(i)).map(|r| r.name.clone());
        let numbered = |what: &str, len: usize, i: u16| (usize::from(i) < len).then(|| format!("{what} {}", i + 1));
        let name = match id {
            RuleId::Admit(i) => named(&self.admit, i),
            RuleId::Filter(i) => named(&self.filters, i),
            RuleId::Score(i) => named(&self.scores, i),
            RuleId::CardScore(i) => named(&self.card_scores, i),
            RuleId::QueueOrder(i) => numbered("queue_order key", self.queue_order.len(), i),
            RuleId::JobOrder(i) => numbered("job_order key", self.job_order.len(), i),
            RuleId::VictimOrder(i) => numbered("victim_order key", self.victim_order.len(), i),
            RuleId::Gang(i) => numbered("gang clause", self.gang.len(), i),
            RuleId::Victim(i) => self.victims.get(usize::from(i)).map(|v| v.name.clone()),
        };
        name.unwrap_or_else(|| {
            crate::never!("{id:?} is not a rule of policy `{}`", self.name);
            String::new()
        })
    }

    /// A rule's kind and name, as reports introduce it (`filter no_mig`).
    pub fn rule_label(&self, id: RuleId) -> String {
        let kind = match id {
            RuleId::Admit(_) => "admit ",
            RuleId::Filter(_) => "filter ",
            RuleId::Score(_) => "score ",
            RuleId::CardScore(_) => "card_score ",
            RuleId::Victim(i) => match self.victims.get(usize::from(i)).map(|v| v.kind) {
                Some(VictimKind::Reclaim) => "reclaim ",
                Some(VictimKind::Borrow) => "borrow ",
                Some(VictimKind::Protect) => "protect ",
                _ => "preempt ",
            },
            RuleId::QueueOrder(_) | RuleId::JobOrder(_) | RuleId::VictimOrder(_) | RuleId::Gang(_) => "",
        };
        format!("{kind}{}", self.rule_name(id))
    }

    /// Where a rule of the program is written in `policy`, the policy it was lowered from.
    pub fn rule_span(&self, policy: &crate::hir::Policy, id: RuleId) -> Option<Span> {
        let i = |k: u16| usize::from(k);
        let named = |kind: RuleKind| {
            let name = self.rule_name(id);
            policy.rules.iter().find(|r| r.kind == kind && r.name == name).map(|r| r.span)
        };
        match id {
            RuleId::Admit(_) => named(RuleKind::Admit),
            RuleId::Filter(_) => named(RuleKind::Filter),
            RuleId::Score(_) => named(RuleKind::Score),
            RuleId::CardScore(_) => named(RuleKind::CardScore),
            RuleId::QueueOrder(k) => policy.queue_order.get(i(k)).map(|o| o.expr.span),
            RuleId::JobOrder(k) => policy.job_order.get(i(k)).map(|o| o.expr.span),
            RuleId::VictimOrder(k) => policy.victim_order.get(i(k)).map(|o| o.expr.span),
            RuleId::Gang(k) => policy.gang.get(i(k)).map(|g| g.span),
            RuleId::Victim(k) => policy.victims.get(i(k)).map(|v| v.span),
        }
    }

    /// For each filter, the filters declared before it that the compiled pass evaluates
    /// after it (it runs filters cheapest first), in declaration order: a node it rejects
    /// counts against the first of those that rejects it too, so that a reason names the
    /// filter declared first whatever the evaluation order.
    pub fn filters_declared_before_but_run_after(&self) -> Vec<Vec<usize>> {
        let mut position = vec![0; self.filters.len()];
        for (at, &f) in self.filter_order.iter().enumerate() {
            if let Some(p) = position.get_mut(f) {
                *p = at;
            }
        }
        (0..self.filters.len()).map(|f| (0..f).filter(|&g| position[g] > position[f]).collect()).collect()
    }

    /// Every rule body, with the rule it belongs to and a name for reports.
    pub fn bodies(&self) -> Vec<(RuleId, String, &Body)> {
        let mut out = Vec::new();
        let index = |i: usize| u16::try_from(i).unwrap_or(u16::MAX);
        let rules = [
            (&self.admit, RuleId::Admit as fn(u16) -> RuleId),
            (&self.filters, RuleId::Filter),
            (&self.scores, RuleId::Score),
            (&self.card_scores, RuleId::CardScore),
        ];
        for (list, id) in rules {
            for (i, r) in list.iter().enumerate() {
                out.push((id(index(i)), format!("{} {}", r.kind.keyword(), r.name), &r.body));
            }
        }
        for (i, k) in self.queue_order.iter().enumerate() {
            out.push((RuleId::QueueOrder(index(i)), format!("queue_order key {}", i + 1), &k.body));
        }
        for (i, k) in self.job_order.iter().enumerate() {
            out.push((RuleId::JobOrder(index(i)), format!("job_order key {}", i + 1), &k.body));
        }
        for (i, k) in self.victim_order.iter().enumerate() {
            out.push((RuleId::VictimOrder(index(i)), format!("victim_order key {}", i + 1), &k.body));
        }
        for (i, g) in self.gang.iter().enumerate() {
            if let Some(w) = &g.when {
                out.push((RuleId::Gang(index(i)), format!("gang clause {} when", i + 1), w));
            }
        }
        for (i, v) in self.victims.iter().enumerate() {
            out.push((RuleId::Victim(index(i)), format!("{} when", v.name), &v.when));
            if let Some(c) = &v.cost {
                out.push((RuleId::Victim(index(i)), format!("{} cost", v.name), c));
            }
        }
        out
    }
}

// ---------------------------------------------------------------- dump

impl fmt::Display for VTy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VTy::F64 => f.write_str("f64"),
            VTy::Bool => f.write_str("bool"),
            VTy::Sym => f.write_str("sym"),
            VTy::U8 => f.write_str("u8"),
            VTy::Ref(r) => write!(f, "&{}", r.name()),
            VTy::List(e) => write!(f, "[{}]", e.vty()),
            VTy::Labels(r) => write!(f, "labels of {}", r.name()),
            VTy::Mig => f.write_str("mig"),
            VTy::Opt(o) => write!(f, "{}?", o.inner()),
        }
    }
}

impl Bin {
    /// How the IR is printed (`gpolc ir`): `+`, `<=`, `===` (bit equality), `&&`.
    pub fn symbol(self) -> &'static str {
        match self {
            Bin::Add => "+",
            Bin::Sub => "-",
            Bin::Mul => "*",
            Bin::Div => "/",
            Bin::Lt => "<",
            Bin::Le => "<=",
            Bin::Gt => ">",
            Bin::Ge => ">=",
            Bin::Eq => "==",
            Bin::Ne => "!=",
            Bin::BitEq => "===",
            Bin::BitNe => "!==",
            Bin::And => "&&",
            Bin::Or => "||",
        }
    }
}

/// An expression as an S-expression: on one line when short, else one child a line.
pub(crate) fn dump(p: &Program, n: &Node, indent: usize, out: &mut String) {
    let text = sexpr(p, n, indent);
    out.push_str(&"  ".repeat(indent));
    out.push_str(&text);
    out.push('\n');
}

const DUMP_WIDTH: usize = 90;

fn sexpr(p: &Program, n: &Node, indent: usize) -> String {
    let leaf = |s: String| s;
    let (head, children): (String, Vec<&Node>) = match &n.kind {
        Kind::Num(x) => return leaf(format!("{x:?}")),
        Kind::Bool(b) => return leaf(b.to_string()),
        Kind::Str(i) => return leaf(format!("{:?}", p.literals.get(*i as usize).map_or("?", String::as_str))),
        Kind::Enum(v) => return leaf(format!("#{v}")),
        Kind::Local(l) => return leaf(format!("${l}")),
        Kind::Input(i) => return leaf(format!("input#{i}")),
        Kind::Root(r) => return leaf(r.name().to_string()),
        Kind::Field { base, record, field } => {
            let name = record.fields().get(usize::from(*field)).map_or("?", |f| f.name);
            let inner = sexpr(p, base, indent);
            if !inner.contains(['(', '\n']) {
                return format!("{inner}.{name}");
            }
            (format!(".{name}"), vec![&**base])
        }
        Kind::Domain { node, level } => {
            let name = p.levels.get(usize::from(*level)).map_or("?", String::as_str);
            let inner = sexpr(p, node, indent);
            if !inner.contains(['(', '\n']) {
                return format!("{inner}.{name}");
            }
            (format!(".{name}"), vec![&**node])
        }
        Kind::Attr { queue, attr } => (format!("attr#{attr}"), vec![&**queue]),
        Kind::Label { labels, slot } => (format!("label#{slot}"), vec![&**labels]),
        Kind::Mig { counts, profile } => ("mig".into(), vec![&**counts, &**profile]),
        Kind::Not(x) => ("not".into(), vec![&**x]),
        Kind::Neg(x) => ("neg".into(), vec![&**x]),
        Kind::Bin(op, a, b) => (op.symbol().into(), vec![&**a, &**b]),
        Kind::If(c, t, e) => ("if".into(), vec![&**c, &**t, &**e]),
        Kind::Let(l, v, b) => (format!("let ${l}"), vec![&**v, &**b]),
        Kind::IsSome(x) => ("is_some".into(), vec![&**x]),
        Kind::Unwrap(x) => ("unwrap".into(), vec![&**x]),
        Kind::Len(x) => ("len".into(), vec![&**x]),
        Kind::Loop { kind, var, list, body } => (format!("{} ${var} in", kind.keyword()), vec![&**list, &**body]),
        Kind::Call(b, args) => (b.name().into(), args.iter().collect()),
        Kind::ListLit(items) => ("list".into(), items.iter().collect()),
    };
    let parts: Vec<String> = children.iter().map(|c| sexpr(p, c, indent + 1)).collect();
    let one = format!("({head} {})", parts.join(" "));
    if one.len() + indent * 2 <= DUMP_WIDTH && !one.contains('\n') {
        return one;
    }
    let pad = "  ".repeat(indent + 1);
    let mut s = format!("({head}");
    for part in parts {
        s.push('\n');
        s.push_str(&pad);
        s.push_str(&part);
    }
    s.push(')');
    s
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "program {}", self.name)?;
        if !self.literals.is_empty() {
            writeln!(f, "literals {:?}", self.literals)?;
        }
        if !self.job_labels.is_empty() || !self.node_labels.is_empty() {
            writeln!(f, "label slots: job {:?}, node {:?}", self.job_labels, self.node_labels)?;
        }
        for (_, name, body) in self.bodies() {
            let mut s = String::new();
            dump(self, &body.node, 1, &mut s);
            writeln!(f, "\n{name}:\n{s}",)?;
        }
        Ok(())
    }
}
