//! The reference interpreter: evaluates IR over records, reading fields through the
//! records' safe accessors (not by offset), so it checks the JIT's layout as well as its
//! arithmetic. Its results define the language; the JIT must agree bit for bit.

use crate::eval::{Engine, NONE, NodeResult, add_score, canonical, clamp_score};
use crate::hir::Builtin;
use crate::ir::{AttrValue, Bin, Body, CompKind, Kind, Node, Program, VTy};
use crate::never;
use crate::ops;
use crate::schema::{
    CardRec, ClusterRec, DomainRec, FieldValue, JobRec, MigCounts, NodeRec, Opt, QueueRec, Record, Resources, Root,
    ShapeRec, Sym,
};
use std::sync::Arc;

/// What every engine sees, defined with the [`Engine`] trait; named here too, where the
/// interpreter's callers have always found it.
pub use crate::eval::Ctx;

/// The records a rule body is evaluated against; those its kind does not see are `None`.
#[derive(Clone, Copy, Default)]
pub struct Roots<'a> {
    pub job: Option<&'a JobRec<'a>>,
    pub node: Option<&'a NodeRec<'a>>,
    pub card: Option<&'a CardRec>,
    pub queue: Option<u32>,
    pub claimant: Option<&'a JobRec<'a>>,
    pub victim: Option<&'a JobRec<'a>>,
}

/// A runtime value.
#[derive(Clone, Copy, Debug)]
pub enum Val<'a> {
    F(f64),
    B(bool),
    S(Sym),
    U(u8),
    Job(&'a JobRec<'a>),
    Node(&'a NodeRec<'a>),
    Card(&'a CardRec),
    Shape(&'a ShapeRec<'a>),
    Cluster(&'a ClusterRec<'a>),
    Res(&'a Resources),
    Queue(u32),
    Domain(u32),
    Cards(&'a [CardRec]),
    Shapes(&'a [ShapeRec<'a>]),
    Syms(&'a [Sym]),
    Mig(&'a MigCounts),
    OptF(Opt<f64>),
    OptU(Opt<u8>),
    OptQ(Opt<u32>),
    /// A list built at run time: its index in the evaluation's arena.
    Lit(u32),
}

impl<'a> Val<'a> {
    pub fn f(self) -> f64 {
        match self {
            Val::F(x) => x,
            _ => f64::NAN,
        }
    }

    pub fn b(self) -> bool {
        matches!(self, Val::B(true))
    }
}

impl<'a> From<FieldValue<'a, 'a>> for Val<'a> {
    fn from(v: FieldValue<'a, 'a>) -> Val<'a> {
        match v {
            FieldValue::Num(x) => Val::F(x),
            FieldValue::Bool(b) => Val::B(b),
            FieldValue::Sym(s) => Val::S(s),
            FieldValue::Enum(e) => Val::U(e),
            FieldValue::Queue(q) => Val::Queue(q),
            FieldValue::OptNum(o) => Val::OptF(o),
            FieldValue::OptEnum(o) => Val::OptU(o),
            FieldValue::OptQueue(o) => Val::OptQ(o),
            FieldValue::Resources(r) => Val::Res(r),
            FieldValue::Cards(c) => Val::Cards(c),
            FieldValue::Shapes(s) => Val::Shapes(s),
            FieldValue::Syms(s) | FieldValue::Labels(s) => Val::Syms(s),
            FieldValue::Mig(m) => Val::Mig(m),
        }
    }
}

/// A record that stands in for an index out of a table's bounds: every field zero.
static EMPTY_QUEUE: QueueRec = QueueRec {
    name: Sym(0),
    parent: Opt { value: 0, present: false },
    depth: 0.0,
    guarantee: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    limit: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    borrow_limit: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    lend_limit: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    weight: 0.0,
    allocated: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    borrowed: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    usage: 0.0,
    dominant_share: 0.0,
    fair_share: 0.0,
    share_after: 0.0,
    allocated_after: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    borrowed_after: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    lendable: Resources { gpu: 0.0, cpu: 0.0, mem: 0.0 },
    head_waiting: 0.0,
    head_gpus: 0.0,
    head_priority: 0.0,
    head_fits_guarantee: false,
    pending: 0.0,
    running: 0.0,
};
static EMPTY_DOMAIN: DomainRec =
    DomainRec { name: Sym(0), nodes: 0.0, cards: 0.0, free_cards: 0.0, free_gpu: 0.0, max_free_cards: 0.0 };

/// Evaluates a rule body.
pub fn eval<'a>(body: &Body, ctx: &Ctx<'a>, roots: &Roots<'a>) -> Val<'a> {
    eval_with_inputs(body, ctx, roots, &[])
}

/// Evaluates a body that reads caller-supplied values (`Kind::Input`), as test
/// expectations do.
pub fn eval_with_inputs<'a>(body: &Body, ctx: &Ctx<'a>, roots: &Roots<'a>, inputs: &[Val<'a>]) -> Val<'a> {
    let mut locals: Vec<Val<'a>> = vec![Val::F(0.0); body.locals as usize];
    let mut lists = Vec::new();
    Interp { ctx, roots, locals: &mut locals, lists: &mut lists, inputs }.eval(&body.node)
}

struct Interp<'c, 'a> {
    ctx: &'c Ctx<'a>,
    roots: &'c Roots<'a>,
    locals: &'c mut Vec<Val<'a>>,
    /// Lists built by list literals during this evaluation.
    lists: &'c mut Vec<Vec<Val<'a>>>,
    inputs: &'c [Val<'a>],
}

impl<'a> Interp<'_, 'a> {
    fn eval(&mut self, n: &Node) -> Val<'a> {
        match &n.kind {
            Kind::Num(x) => Val::F(*x),
            Kind::Bool(b) => Val::B(*b),
            Kind::Str(i) => Val::S(self.ctx.literals.get(*i as usize).copied().unwrap_or(Sym(0))),
            Kind::Enum(e) => Val::U(*e),
            Kind::Local(l) => self.locals.get(*l as usize).copied().unwrap_or_else(|| {
                never!("local {l} beyond the body's {} locals", self.locals.len());
                Val::F(f64::NAN)
            }),
            Kind::Input(i) => self.inputs.get(usize::from(*i)).copied().unwrap_or_else(|| {
                never!("input {i} beyond the {} given", self.inputs.len());
                Val::F(f64::NAN)
            }),
            Kind::Root(r) => self.root(*r),
            Kind::Field { base, record, field } => {
                let base = self.eval(base);
                self.field(base, *record, *field).unwrap_or_else(|| {
                    never!("field {field} of {} read from {base:?}", record.name());
                    Val::F(f64::NAN)
                })
            }
            Kind::Domain { node, level } => match self.eval(node) {
                Val::Node(n) => Val::Domain(n.domains.get(usize::from(*level)).copied().unwrap_or(u32::MAX)),
                other => {
                    never!("the domain of {other:?}, which is not a node");
                    Val::Domain(u32::MAX)
                }
            },
            Kind::Attr { queue, attr } => {
                let q = match self.eval(queue) {
                    Val::Queue(q) => q as usize,
                    other => {
                        never!("an attribute of {other:?}, which is not a queue");
                        usize::MAX
                    }
                };
                let v = self.ctx.attrs.get(q).and_then(|row| row.get(usize::from(*attr))).copied();
                match (v.unwrap_or(AttrValue::Absent), n.ty) {
                    (AttrValue::Num(x), _) => Val::F(x),
                    (AttrValue::Bool(b), _) => Val::B(b),
                    (AttrValue::Str(i), _) => Val::S(self.ctx.literals.get(i as usize).copied().unwrap_or(Sym(0))),
                    (AttrValue::Enum(e), _) => Val::U(e),
                    (AttrValue::Absent, ty) => zero(ty),
                }
            }
            Kind::Label { labels, slot } => match self.eval(labels) {
                Val::Syms(s) => Val::S(s.get(usize::from(*slot)).copied().unwrap_or(Sym(0))),
                other => {
                    never!("a label of {other:?}, which is not a label list");
                    Val::S(Sym(0))
                }
            },
            Kind::Mig { counts, profile } => {
                let counts = self.eval(counts);
                let profile = self.eval(profile);
                match (counts, profile) {
                    (Val::Mig(m), Val::U(p)) => Val::F(m.get(usize::from(p))),
                    (counts, profile) => {
                        never!("MIG counts {counts:?} indexed by {profile:?}");
                        Val::F(0.0)
                    }
                }
            }
            Kind::Not(x) => Val::B(!self.eval(x).b()),
            Kind::Neg(x) => Val::F(-self.eval(x).f()),
            Kind::Bin(Bin::And, a, b) => Val::B(self.eval(a).b() && self.eval(b).b()),
            Kind::Bin(Bin::Or, a, b) => Val::B(self.eval(a).b() || self.eval(b).b()),
            Kind::Bin(op, a, b) => {
                let x = self.eval(a);
                let y = self.eval(b);
                binary(*op, x, y)
            }
            Kind::If(c, t, f) => {
                if self.eval(c).b() {
                    self.eval(t)
                } else {
                    self.eval(f)
                }
            }
            Kind::Let(l, v, body) => {
                let v = self.eval(v);
                if let Some(slot) = self.locals.get_mut(*l as usize) {
                    *slot = v;
                }
                self.eval(body)
            }
            Kind::IsSome(x) => Val::B(match self.eval(x) {
                Val::OptF(o) => o.present,
                Val::OptU(o) => o.present,
                Val::OptQ(o) => o.present,
                Val::S(s) => s != Sym(0),
                _ => true,
            }),
            Kind::Unwrap(x) => match self.eval(x) {
                Val::OptF(o) => Val::F(o.value),
                Val::OptU(o) => Val::U(o.value),
                Val::OptQ(o) => Val::Queue(o.value),
                other => other,
            },
            Kind::Len(x) => Val::F(match self.eval(x) {
                Val::Cards(c) => c.len() as f64,
                Val::Shapes(s) => s.len() as f64,
                Val::Syms(s) => s.len() as f64,
                Val::Lit(i) => self.lists.get(i as usize).map_or(0.0, |l| l.len() as f64),
                other => {
                    never!("the length of {other:?}, which is not a list");
                    0.0
                }
            }),
            Kind::ListLit(items) => {
                let vals = items.iter().map(|i| self.eval(i)).collect();
                self.lists.push(vals);
                Val::Lit(u32::try_from(self.lists.len() - 1).unwrap_or(u32::MAX))
            }
            Kind::Loop { kind, var, list, body } => {
                let list = self.eval(list);
                let items: Vec<Val<'a>> = match list {
                    Val::Cards(c) => c.iter().map(Val::Card).collect(),
                    Val::Shapes(s) => s.iter().map(Val::Shape).collect(),
                    Val::Syms(s) => s.iter().map(|s| Val::S(*s)).collect(),
                    Val::Lit(i) => self.lists.get(i as usize).cloned().unwrap_or_default(),
                    other => {
                        never!("a comprehension over {other:?}, which is not a list");
                        Vec::new()
                    }
                };
                self.comprehension(*kind, *var, &items, body)
            }
            Kind::Call(b, args) => {
                let vals: Vec<Val<'a>> = args.iter().map(|a| self.eval(a)).collect();
                Val::F(call(*b, &vals, self.ctx.sym_hashes))
            }
        }
    }

    fn comprehension(&mut self, kind: CompKind, var: u32, items: &[Val<'a>], body: &Node) -> Val<'a> {
        let mut acc = match kind {
            CompKind::Any => return Val::B(items.iter().any(|i| self.bind_eval(var, *i, body).b())),
            CompKind::All => return Val::B(items.iter().all(|i| self.bind_eval(var, *i, body).b())),
            CompKind::Count | CompKind::Sum => 0.0,
            CompKind::Min => f64::INFINITY,
            CompKind::Max => f64::NEG_INFINITY,
        };
        for item in items {
            let v = self.bind_eval(var, *item, body);
            acc = match kind {
                CompKind::Count => acc + if v.b() { 1.0 } else { 0.0 },
                CompKind::Sum => acc + v.f(),
                CompKind::Min => ops::min(acc, v.f()),
                _ => ops::max(acc, v.f()),
            };
        }
        Val::F(acc)
    }

    fn bind_eval(&mut self, var: u32, item: Val<'a>, body: &Node) -> Val<'a> {
        if let Some(slot) = self.locals.get_mut(var as usize) {
            *slot = item;
        }
        self.eval(body)
    }

    fn root(&self, r: Root) -> Val<'a> {
        match_root(self.ctx, self.roots, r).unwrap_or_else(|| {
            never!("{r:?} read where the rule has no such root");
            Val::F(f64::NAN)
        })
    }

    fn field(&self, base: Val<'a>, record: Record, field: u16) -> Option<Val<'a>> {
        let v: FieldValue<'a, 'a> = match (base, record) {
            (Val::Job(j), Record::Job) => j.field(field)?,
            (Val::Node(n), Record::Node) => n.field(field)?,
            (Val::Card(c), Record::Card) => c.field(field)?,
            (Val::Shape(s), Record::Shape) => s.field(field)?,
            (Val::Cluster(c), Record::Cluster) => c.field(field)?,
            (Val::Res(r), Record::Resources) => r.field(field)?,
            (Val::Queue(q), Record::Queue) => self.ctx.queues.get(q as usize).unwrap_or(&EMPTY_QUEUE).field(field)?,
            (Val::Domain(d), Record::Domain) => {
                self.ctx.domains.get(d as usize).unwrap_or(&EMPTY_DOMAIN).field(field)?
            }
            _ => return None,
        };
        Some(v.into())
    }
}

fn match_root<'a>(ctx: &Ctx<'a>, roots: &Roots<'a>, r: Root) -> Option<Val<'a>> {
    Some(match r {
        Root::Job => Val::Job(roots.job?),
        Root::Node => Val::Node(roots.node?),
        Root::Card => Val::Card(roots.card?),
        Root::Queue => Val::Queue(roots.queue?),
        Root::Cluster => Val::Cluster(ctx.cluster),
        Root::Claimant => Val::Job(roots.claimant?),
        Root::Victim => Val::Job(roots.victim?),
    })
}

/// The value an absent attribute reads as.
fn zero<'a>(ty: VTy) -> Val<'a> {
    match ty {
        VTy::Bool => Val::B(false),
        VTy::Sym => Val::S(Sym(0)),
        VTy::U8 => Val::U(0),
        _ => Val::F(0.0),
    }
}

/// A binary operation on evaluated operands (`and`/`or` short-circuit before this).
pub(crate) fn binary<'a>(op: Bin, x: Val<'a>, y: Val<'a>) -> Val<'a> {
    match op {
        Bin::Add => Val::F(x.f() + y.f()),
        Bin::Sub => Val::F(x.f() - y.f()),
        Bin::Mul => Val::F(x.f() * y.f()),
        Bin::Div => Val::F(x.f() / y.f()),
        Bin::Lt => Val::B(x.f() < y.f()),
        Bin::Le => Val::B(x.f() <= y.f()),
        Bin::Gt => Val::B(x.f() > y.f()),
        Bin::Ge => Val::B(x.f() >= y.f()),
        Bin::Eq => Val::B(x.f() == y.f()),
        Bin::Ne => Val::B(x.f() != y.f()),
        Bin::BitEq => Val::B(same(x, y)),
        Bin::BitNe => Val::B(!same(x, y)),
        Bin::And => Val::B(x.b() && y.b()),
        Bin::Or => Val::B(x.b() || y.b()),
    }
}

/// Identity of booleans, symbols, enum values and records.
fn same(x: Val<'_>, y: Val<'_>) -> bool {
    match (x, y) {
        (Val::B(a), Val::B(b)) => a == b,
        (Val::S(a), Val::S(b)) => a == b,
        (Val::U(a), Val::U(b)) => a == b,
        (Val::Queue(a), Val::Queue(b)) | (Val::Domain(a), Val::Domain(b)) => a == b,
        (Val::Job(a), Val::Job(b)) => std::ptr::eq(a, b),
        (Val::Node(a), Val::Node(b)) => std::ptr::eq(a, b),
        (Val::Card(a), Val::Card(b)) => std::ptr::eq(a, b),
        (Val::Shape(a), Val::Shape(b)) => std::ptr::eq(a, b),
        _ => false,
    }
}

/// The key a value contributes to `hash01`.
fn hash_key(v: Val<'_>, sym_hashes: &[u64]) -> u64 {
    match v {
        Val::F(x) => ops::num_key(x),
        Val::B(b) => u64::from(b),
        Val::U(e) => u64::from(e),
        Val::S(s) => sym_hashes.get(s.0 as usize).copied().unwrap_or(0),
        _ => 0,
    }
}

/// A numeric built-in.
pub(crate) fn call(b: Builtin, args: &[Val<'_>], sym_hashes: &[u64]) -> f64 {
    let n = |i: usize| args.get(i).map_or(f64::NAN, |v| v.f());
    match b {
        Builtin::Min => ops::min(n(0), n(1)),
        Builtin::Max => ops::max(n(0), n(1)),
        Builtin::Abs => n(0).abs(),
        Builtin::Floor => n(0).floor(),
        Builtin::Ceil => n(0).ceil(),
        Builtin::Round => ops::round(n(0)),
        Builtin::Trunc => n(0).trunc(),
        Builtin::Mod => ops::modulo(n(0), n(1)),
        Builtin::Clamp => ops::clamp(n(0), n(1), n(2)),
        Builtin::Sqrt => n(0).sqrt(),
        Builtin::Exp2 => ops::exp2(n(0)),
        Builtin::Log => ops::log(n(0)),
        Builtin::Pow => ops::pow(n(0), n(1)),
        Builtin::Hash01 => {
            let key = |i: usize| args.get(i).map_or(0, |v| hash_key(*v, sym_hashes));
            ops::hash01(key(0), key(1))
        }
        Builtin::Has | Builtin::Len => f64::NAN,
    }
}

/// Evaluates a node whose operands are constants, for folding; `None` if it needs more.
pub(crate) fn eval_constant(n: &Node) -> Option<Node> {
    let lit = |n: &Node| -> Option<Val<'static>> {
        match n.kind {
            Kind::Num(x) => Some(Val::F(x)),
            Kind::Bool(b) => Some(Val::B(b)),
            Kind::Enum(e) => Some(Val::U(e)),
            _ => None,
        }
    };
    let v = match &n.kind {
        Kind::Not(x) => Val::B(!lit(x)?.b()),
        Kind::Neg(x) => Val::F(-lit(x)?.f()),
        Kind::Bin(Bin::And, a, b) => match lit(a)? {
            Val::B(false) => Val::B(false),
            _ => lit(b)?,
        },
        Kind::Bin(Bin::Or, a, b) => match lit(a)? {
            Val::B(true) => Val::B(true),
            _ => lit(b)?,
        },
        Kind::Bin(op, a, b) => binary(*op, lit(a)?, lit(b)?),
        Kind::Call(Builtin::Hash01, _) => return None,
        Kind::Call(b, args) => {
            let vals = args.iter().map(lit).collect::<Option<Vec<_>>>()?;
            Val::F(call(*b, &vals, &[]))
        }
        _ => return None,
    };
    Some(match v {
        Val::F(x) => Node::num(x),
        Val::B(b) => Node::boolean(b),
        Val::U(e) => Node::new(Kind::Enum(e), VTy::U8),
        _ => return None,
    })
}

/// The reference engine.
pub struct InterpEngine {
    pub program: Arc<Program>,
}

impl InterpEngine {
    fn num(v: Val<'_>) -> f64 {
        match v {
            Val::F(x) => x,
            Val::B(b) => f64::from(u8::from(b)),
            _ => f64::NAN,
        }
    }
}

impl Engine for InterpEngine {
    fn admit(&self, ctx: &Ctx<'_>, job: &JobRec<'_>) -> Option<usize> {
        let roots = Roots { job: Some(job), ..Roots::default() };
        self.program.admit.iter().position(|r| !eval(&r.body, ctx, &roots).b())
    }

    fn filter_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, nodes: &[NodeRec<'_>], out: &mut [NodeResult]) {
        let p = &*self.program;
        for (node, res) in nodes.iter().zip(out.iter_mut()) {
            *res = NodeResult { feasible: true, rejected_by: NONE, ..NodeResult::default() };
            let roots = Roots { job: Some(job), node: Some(node), ..Roots::default() };
            for &i in &p.filter_order {
                if !eval(&p.filters[i].body, ctx, &roots).b() {
                    res.feasible = false;
                    res.rejected_by = u16::try_from(i).unwrap_or(NONE);
                    break;
                }
            }
            if !res.feasible {
                continue;
            }
            for r in &p.scores {
                add_score(r, eval(&r.body, ctx, &roots).f(), res);
            }
        }
    }

    fn card_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, node: &NodeRec<'_>, card: &CardRec) -> (f64, u32) {
        let roots = Roots { job: Some(job), node: Some(node), card: Some(card), ..Roots::default() };
        let mut total = 0.0;
        let mut faults = 0;
        for r in &self.program.card_scores {
            let (s, f) = clamp_score(eval(&r.body, ctx, &roots).f());
            total += r.weight * s;
            faults += f;
        }
        (total, faults)
    }

    fn queue_keys(&self, ctx: &Ctx<'_>, queue: u32, out: &mut [f64]) {
        let roots = Roots { queue: Some(queue), ..Roots::default() };
        for (k, slot) in self.program.queue_order.iter().zip(out.iter_mut()) {
            *slot = canonical(Self::num(eval(&k.body, ctx, &roots)));
        }
    }

    fn job_keys(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, out: &mut [f64]) {
        let roots = Roots { job: Some(job), ..Roots::default() };
        for (k, slot) in self.program.job_order.iter().zip(out.iter_mut()) {
            *slot = canonical(Self::num(eval(&k.body, ctx, &roots)));
        }
    }

    fn gang_applies(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, clause: usize) -> bool {
        let roots = Roots { job: Some(job), ..Roots::default() };
        match self.program.gang.get(clause).map(|g| &g.when) {
            Some(Some(w)) => eval(w, ctx, &roots).b(),
            Some(None) => true,
            None => false,
        }
    }

    fn victim(&self, ctx: &Ctx<'_>, rule: usize, claimant: &JobRec<'_>, victim: &JobRec<'_>) -> (bool, f64) {
        let Some(r) = self.program.victims.get(rule) else { return (false, 0.0) };
        let roots = Roots { claimant: Some(claimant), victim: Some(victim), ..Roots::default() };
        let ok = eval(&r.when, ctx, &roots).b();
        let cost = r.cost.as_ref().map_or(0.0, |c| canonical(eval(c, ctx, &roots).f()));
        (ok, cost)
    }

    fn victim_keys(&self, ctx: &Ctx<'_>, claimant: &JobRec<'_>, victim: &JobRec<'_>, out: &mut [f64]) {
        let roots = Roots { claimant: Some(claimant), victim: Some(victim), ..Roots::default() };
        for (k, slot) in self.program.victim_order.iter().zip(out.iter_mut()) {
            *slot = canonical(Self::num(eval(&k.body, ctx, &roots)));
        }
    }
}
