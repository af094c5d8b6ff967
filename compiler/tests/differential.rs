//! The interpreter is the oracle: on generated programs and generated records, the JIT
//! must give exactly the same results at every entry point (NaN compared by class).
//!
//! Programs are decoded from a sequence of choices (as Hypothesis does), so proptest's
//! shrinking of the sequence shrinks the program. Each case builds one program with
//! `BODIES` bodies of every rule kind, compiles it once, and compares every entry point on
//! every generated input.

use gpol_compiler::engine::{Engine, InterpEngine, NodeResult};
use gpol_compiler::hir::Builtin;
use gpol_compiler::interp::Ctx;
use gpol_compiler::ir::*;
use gpol_compiler::schema::*;
use gpol_compiler::syntax::{CompKind, Direction, GangKind, RuleKind, VictimKind};
use proptest::prelude::*;
use std::sync::Arc;

const BODIES: usize = 16;
const ATTR_NUM: u16 = 0;
const ATTR_STR: u16 = 1;
const ATTR_BOOL: u16 = 2;
const LITERALS: u32 = 4;

// ---------------------------------------------------------------- program generation

struct Gen<'c> {
    choices: &'c [u32],
    pos: usize,
    roots: &'static [Root],
    locals: Vec<(Local, VTy)>,
    next_local: u32,
}

fn n(kind: Kind, ty: VTy) -> Node {
    Node::new(kind, ty)
}

fn b(x: Node) -> Box<Node> {
    Box::new(x)
}

const SPECIAL: [f64; 14] = [
    0.0,
    -0.0,
    1.0,
    0.5,
    -1.0,
    2.0,
    3600.0,
    1e300,
    -1e300,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    f64::MIN_POSITIVE,
    1e-310,
];

impl Gen<'_> {
    fn pick(&mut self, n: usize) -> usize {
        let c = self.choices.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        c as usize % n.max(1)
    }

    fn local_of(&mut self, ty: VTy) -> Option<Node> {
        let candidates: Vec<Local> = self.locals.iter().filter(|(_, t)| *t == ty).map(|(l, _)| *l).collect();
        if candidates.is_empty() {
            return None;
        }
        let l = candidates[self.pick(candidates.len())];
        Some(n(Kind::Local(l), ty))
    }

    fn root_of(&mut self, record: Record) -> Option<Node> {
        let roots: Vec<Root> = self.roots.iter().copied().filter(|r| r.record() == record).collect();
        if roots.is_empty() {
            return None;
        }
        let r = roots[self.pick(roots.len())];
        Some(n(Kind::Root(r), VTy::Ref(record)))
    }

    /// An expression for a record of this kind, if one can be reached.
    fn record(&mut self, record: Record) -> Option<Node> {
        if let Some(l) = self.local_of(VTy::Ref(record))
            && self.pick(2) == 0
        {
            return Some(l);
        }
        match record {
            Record::Queue => {
                if let Some(r) = self.root_of(Record::Queue)
                    && self.pick(2) == 0
                {
                    return Some(r);
                }
                let job = self.record(Record::Job)?;
                Some(self.field(job, Record::Job, "queue"))
            }
            Record::Domain => {
                let node = self.record(Record::Node)?;
                let level = self.pick(3) as u8;
                Some(n(Kind::Domain { node: b(node), level }, VTy::Ref(Record::Domain)))
            }
            Record::Resources => {
                let (owner, names): (Record, &[&str]) = match self.pick(2) {
                    0 => (Record::Cluster, &["total", "free"]),
                    _ => (Record::Queue, &["guarantee", "limit", "allocated", "borrowed"]),
                };
                let base = self.record(owner)?;
                let name = names[self.pick(names.len())];
                Some(self.field(base, owner, name))
            }
            _ => self.root_of(record),
        }
    }

    fn field(&mut self, base: Node, record: Record, name: &str) -> Node {
        let (idx, f) = record.field(name).unwrap_or_else(|| panic!("{}.{name}", record.name()));
        let ty = field_ty(f);
        n(Kind::Field { base: b(base), record, field: idx }, ty)
    }

    /// A field of some record of the wanted type.
    fn some_field(&mut self, want: VTy) -> Option<Node> {
        let mut options = Vec::new();
        for r in [
            Record::Job,
            Record::Node,
            Record::Card,
            Record::Queue,
            Record::Domain,
            Record::Cluster,
            Record::Shape,
            Record::Resources,
        ] {
            for f in r.fields() {
                if field_ty(f) == want {
                    options.push((r, f.name));
                }
            }
        }
        for _ in 0..4 {
            let (r, name) = options[self.pick(options.len())];
            if let Some(base) = self.record(r) {
                return Some(self.field(base, r, name));
            }
        }
        None
    }

    fn let_in(&mut self, d: u32, body_ty: VTy) -> Node {
        let tys = [VTy::F64, VTy::Bool, VTy::Sym, VTy::U8, VTy::Ref(Record::Queue)];
        let ty = tys[self.pick(tys.len())];
        let value = self.expr(ty, d - 1);
        let l = self.next_local;
        self.next_local += 1;
        self.locals.push((l, ty));
        let body = self.expr(body_ty, d - 1);
        self.locals.pop();
        n(Kind::Let(l, b(value), b(body)), body_ty)
    }

    fn list(&mut self) -> Option<(Node, VTy)> {
        match self.pick(3) {
            0 => {
                let node = self.record(Record::Node)?;
                Some((self.field(node, Record::Node, "cards_list"), VTy::Ref(Record::Card)))
            }
            1 => {
                let c = self.record(Record::Cluster)?;
                Some((self.field(c, Record::Cluster, "task_shapes"), VTy::Ref(Record::Shape)))
            }
            _ => {
                let job = self.record(Record::Job)?;
                Some((self.field(job, Record::Job, "allowed_models"), VTy::Sym))
            }
        }
    }

    fn comprehension(&mut self, kind: CompKind, d: u32) -> Option<Node> {
        let (list, elem) = self.list()?;
        let var = self.next_local;
        self.next_local += 1;
        self.locals.push((var, elem));
        let body_ty =
            if matches!(kind, CompKind::Any | CompKind::All | CompKind::Count) { VTy::Bool } else { VTy::F64 };
        let body = self.expr(body_ty, d - 1);
        self.locals.pop();
        let ty = if matches!(kind, CompKind::Any | CompKind::All) { VTy::Bool } else { VTy::F64 };
        Some(n(Kind::Loop { kind, var, list: b(list), body: b(body) }, ty))
    }

    fn optional(&mut self) -> Option<(Node, OptOf)> {
        Some(match self.pick(4) {
            0 => (self.record(Record::Job).map(|j| self.field(j, Record::Job, "expected_duration"))?, OptOf::F64),
            1 => (self.record(Record::Job).map(|j| self.field(j, Record::Job, "mig_profile"))?, OptOf::U8),
            2 => (self.record(Record::Shape).map(|s| self.field(s, Record::Shape, "mig_profile"))?, OptOf::U8),
            _ => (self.record(Record::Queue).map(|q| self.field(q, Record::Queue, "parent"))?, OptOf::Queue),
        })
    }

    /// `opt ?? default`, the way lowering writes it.
    fn default(&mut self, opt: Node, of: OptOf, d: u32) -> Node {
        let t = self.next_local;
        self.next_local += 1;
        let ty = of.inner();
        let dflt = self.expr(ty, d - 1);
        let local = || n(Kind::Local(t), VTy::Opt(of));
        let choose =
            n(Kind::If(b(n(Kind::IsSome(b(local())), VTy::Bool)), b(n(Kind::Unwrap(b(local())), ty)), b(dflt)), ty);
        n(Kind::Let(t, b(opt), b(choose)), ty)
    }

    fn leaf(&mut self, ty: VTy) -> Node {
        match ty {
            VTy::F64 => Node::num(SPECIAL[self.pick(SPECIAL.len())]),
            VTy::Bool => Node::boolean(self.pick(2) == 1),
            VTy::Sym => n(Kind::Str(self.pick(LITERALS as usize + 1) as u32), VTy::Sym),
            VTy::U8 => n(Kind::Enum(self.pick(7) as u8), VTy::U8),
            VTy::Ref(Record::Queue) => self
                .root_of(Record::Queue)
                .or_else(|| self.record(Record::Job).map(|j| self.field(j, Record::Job, "queue")))
                .unwrap_or_else(|| Node::num(0.0)),
            _ => Node::num(0.0),
        }
    }

    fn expr(&mut self, ty: VTy, d: u32) -> Node {
        if d == 0 {
            return self.leaf(ty);
        }
        let got = match ty {
            VTy::F64 => self.f64(d),
            VTy::Bool => self.boolean(d),
            VTy::Sym => self.sym(),
            VTy::U8 => self.enumeration(d),
            VTy::Ref(Record::Queue) => self.record(Record::Queue),
            _ => None,
        };
        match got {
            Some(e) if e.ty == ty => e,
            _ => self.leaf(ty),
        }
    }

    fn f64(&mut self, d: u32) -> Option<Node> {
        Some(match self.pick(16) {
            0 => return Some(self.leaf(VTy::F64)),
            1 | 2 => return self.some_field(VTy::F64),
            3 => return self.local_of(VTy::F64),
            4 => n(Kind::Neg(b(self.expr(VTy::F64, d - 1))), VTy::F64),
            5 | 6 => {
                let op = [Bin::Add, Bin::Sub, Bin::Mul, Bin::Div][self.pick(4)];
                n(Kind::Bin(op, b(self.expr(VTy::F64, d - 1)), b(self.expr(VTy::F64, d - 1))), VTy::F64)
            }
            7 => n(
                Kind::If(b(self.expr(VTy::Bool, d - 1)), b(self.expr(VTy::F64, d - 1)), b(self.expr(VTy::F64, d - 1))),
                VTy::F64,
            ),
            8 => self.let_in(d, VTy::F64),
            9 => {
                let f = [
                    Builtin::Min,
                    Builtin::Max,
                    Builtin::Abs,
                    Builtin::Clamp,
                    Builtin::Sqrt,
                    Builtin::Exp2,
                    Builtin::Log,
                    Builtin::Pow,
                    Builtin::Hash01,
                ][self.pick(9)];
                let arity = match f {
                    Builtin::Min | Builtin::Max | Builtin::Pow => 2,
                    Builtin::Clamp => 3,
                    Builtin::Hash01 => 2,
                    _ => 1,
                };
                let args = (0..arity)
                    .map(|_| {
                        if f == Builtin::Hash01 {
                            let tys = [VTy::F64, VTy::Sym, VTy::Bool, VTy::U8];
                            let t = tys[self.pick(tys.len())];
                            self.expr(t, d - 1)
                        } else {
                            self.expr(VTy::F64, d - 1)
                        }
                    })
                    .collect();
                n(Kind::Call(f, args), VTy::F64)
            }
            10 => {
                let kind = [CompKind::Count, CompKind::Sum, CompKind::Min, CompKind::Max][self.pick(4)];
                return self.comprehension(kind, d);
            }
            11 => {
                let owner = [Record::Node, Record::Card][self.pick(2)];
                let base = self.record(owner)?;
                let counts = self.field(base, owner, "free_mig");
                let profile = self.expr(VTy::U8, d - 1);
                n(Kind::Mig { counts: b(counts), profile: b(profile) }, VTy::F64)
            }
            12 => {
                let (list, _) = self.list()?;
                n(Kind::Len(b(list)), VTy::F64)
            }
            13 => {
                let (opt, of) = self.optional()?;
                if of != OptOf::F64 {
                    return None;
                }
                self.default(opt, of, d)
            }
            _ => {
                let q = self.record(Record::Queue)?;
                n(Kind::Attr { queue: b(q), attr: ATTR_NUM }, VTy::F64)
            }
        })
    }

    fn boolean(&mut self, d: u32) -> Option<Node> {
        Some(match self.pick(15) {
            0 => return Some(self.leaf(VTy::Bool)),
            1 => return self.some_field(VTy::Bool),
            2 => return self.local_of(VTy::Bool),
            3 => n(Kind::Not(b(self.expr(VTy::Bool, d - 1))), VTy::Bool),
            4 | 5 => {
                let op = [Bin::Lt, Bin::Le, Bin::Gt, Bin::Ge, Bin::Eq, Bin::Ne][self.pick(6)];
                n(Kind::Bin(op, b(self.expr(VTy::F64, d - 1)), b(self.expr(VTy::F64, d - 1))), VTy::Bool)
            }
            6 => {
                let tys = [VTy::Bool, VTy::Sym, VTy::U8, VTy::Ref(Record::Queue)];
                let t = tys[self.pick(tys.len())];
                let op = [Bin::BitEq, Bin::BitNe][self.pick(2)];
                n(Kind::Bin(op, b(self.expr(t, d - 1)), b(self.expr(t, d - 1))), VTy::Bool)
            }
            7 | 8 => {
                let op = [Bin::And, Bin::Or][self.pick(2)];
                n(Kind::Bin(op, b(self.expr(VTy::Bool, d - 1)), b(self.expr(VTy::Bool, d - 1))), VTy::Bool)
            }
            9 => n(
                Kind::If(
                    b(self.expr(VTy::Bool, d - 1)),
                    b(self.expr(VTy::Bool, d - 1)),
                    b(self.expr(VTy::Bool, d - 1)),
                ),
                VTy::Bool,
            ),
            10 => {
                let kind = [CompKind::Any, CompKind::All][self.pick(2)];
                return self.comprehension(kind, d);
            }
            11 => {
                let (opt, _) = self.optional()?;
                n(Kind::IsSome(b(opt)), VTy::Bool)
            }
            12 => {
                let s = self.sym()?;
                n(Kind::IsSome(b(s)), VTy::Bool)
            }
            13 => {
                let q = self.record(Record::Queue)?;
                n(Kind::Attr { queue: b(q), attr: ATTR_BOOL }, VTy::Bool)
            }
            _ => self.let_in(d, VTy::Bool),
        })
    }

    fn sym(&mut self) -> Option<Node> {
        Some(match self.pick(5) {
            0 => return Some(self.leaf(VTy::Sym)),
            1 => return self.some_field(VTy::Sym),
            2 => return self.local_of(VTy::Sym),
            3 => {
                let owner = [Record::Job, Record::Node][self.pick(2)];
                let base = self.record(owner)?;
                let labels = self.field(base, owner, "labels");
                n(Kind::Label { labels: b(labels), slot: self.pick(4) as u16 }, VTy::Sym)
            }
            _ => {
                let q = self.record(Record::Queue)?;
                n(Kind::Attr { queue: b(q), attr: ATTR_STR }, VTy::Sym)
            }
        })
    }

    fn enumeration(&mut self, d: u32) -> Option<Node> {
        Some(match self.pick(4) {
            0 => return Some(self.leaf(VTy::U8)),
            1 => return self.some_field(VTy::U8),
            2 => return self.local_of(VTy::U8),
            _ => {
                let (opt, of) = self.optional()?;
                if of != OptOf::U8 {
                    return None;
                }
                self.default(opt, of, d)
            }
        })
    }

    fn body(&mut self, ty: VTy, depth: u32) -> Body {
        self.locals.clear();
        self.next_local = 0;
        let node = self.expr(ty, depth);
        Body { node, locals: self.next_local }
    }
}

fn field_ty(f: &gpol_compiler::schema::Field) -> VTy {
    let base = match f.ty {
        FieldTy::Num(_) => VTy::F64,
        FieldTy::Bool => VTy::Bool,
        FieldTy::Str => VTy::Sym,
        FieldTy::Enum(_) => VTy::U8,
        FieldTy::Record(r) => VTy::Ref(r),
        FieldTy::List(r) => VTy::List(Some(r)),
        FieldTy::StrList => VTy::List(None),
        FieldTy::Labels => VTy::Labels(Record::Job),
        FieldTy::MigCounts => VTy::Mig,
    };
    if !f.optional {
        return base;
    }
    VTy::Opt(match base {
        VTy::F64 => OptOf::F64,
        VTy::Ref(_) => OptOf::Queue,
        _ => OptOf::U8,
    })
}

/// Bodies per program: `BODIES` of each of the eight kinds (victim rules have two).
const BODY_SLOTS: usize = BODIES * 9;

/// A program with `BODIES` bodies of every kind; body `i` is decoded from `choices[i]`.
fn program(choices: &[Vec<u32>], depth: u32) -> Program {
    let mut next = 0;
    let mut body = |_: &mut (), roots: &'static [Root], ty: VTy| {
        let c = choices.get(next).map_or(&[][..], Vec::as_slice);
        next += 1;
        let mut g = Gen { choices: c, pos: 0, roots, locals: Vec::new(), next_local: 0 };
        g.body(ty, depth)
    };
    let mut g = ();
    let rule = |kind: RuleKind, i: usize, body: Body, tier: Option<u8>| Rule {
        kind,
        name: format!("r{i}"),
        reason: None,
        tier,
        weight: 0.5 + i as f64,
        is_static: false,
        body,
    };
    const JOB: &[Root] = &[Root::Job, Root::Cluster];
    const NODE: &[Root] = &[Root::Job, Root::Node, Root::Cluster];
    const CARD: &[Root] = &[Root::Job, Root::Node, Root::Card, Root::Cluster];
    const QUEUE: &[Root] = &[Root::Queue, Root::Cluster];
    const VICTIM: &[Root] = &[Root::Claimant, Root::Victim, Root::Cluster];
    let mut p =
        Program { name: "generated".into(), levels: vec!["a".into(), "b".into(), "c".into()], ..Program::default() };
    for i in 0..BODIES {
        p.admit.push(rule(RuleKind::Admit, i, body(&mut g, JOB, VTy::Bool), None));
        p.filters.push(rule(RuleKind::Filter, i, body(&mut g, NODE, VTy::Bool), None));
        let tier = if i % 3 == 0 { Some((i % 4) as u8 + 1) } else { None };
        p.scores.push(rule(RuleKind::Score, i, body(&mut g, NODE, VTy::F64), tier));
        p.card_scores.push(rule(RuleKind::CardScore, i, body(&mut g, CARD, VTy::F64), None));
        let key_ty = if i % 4 == 3 { VTy::Bool } else { VTy::F64 };
        p.queue_order.push(OrderKey { body: body(&mut g, QUEUE, key_ty), dir: Direction::Asc });
        p.job_order.push(OrderKey { body: body(&mut g, JOB, key_ty), dir: Direction::Desc });
        let when = if i % 5 == 4 { None } else { Some(body(&mut g, JOB, VTy::Bool)) };
        p.gang.push(GangClause { kind: GangKind::Prefer, level: 0, weight: 1.0, when });
        let cost = if i % 3 == 2 { None } else { Some(body(&mut g, VICTIM, VTy::F64)) };
        p.victims.push(VictimRule {
            kind: VictimKind::Preempt,
            name: format!("v{i}"),
            when: body(&mut g, VICTIM, VTy::Bool),
            cost,
        });
    }
    // Cheapest first, like lowering, but from a generated permutation.
    let mut order: Vec<usize> = (0..BODIES).collect();
    order.rotate_left(choices.first().and_then(|c| c.first()).copied().unwrap_or(0) as usize % BODIES);
    p.filter_order = order;
    p.literals = (0..LITERALS).map(|i| format!("lit{i}")).collect();
    // One column per type (ATTR_NUM, ATTR_STR, ATTR_BOOL); each column absent for one queue.
    p.attrs = (0..3)
        .map(|q| {
            vec![
                if q == 0 { AttrValue::Absent } else { AttrValue::Num(SPECIAL[q * 5 % SPECIAL.len()]) },
                if q == 1 { AttrValue::Absent } else { AttrValue::Str(q as u32) },
                if q == 2 { AttrValue::Absent } else { AttrValue::Bool(q == 1) },
            ]
        })
        .collect();
    p
}

// ---------------------------------------------------------------- inputs

fn num() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => prop::sample::select(SPECIAL.to_vec()),
        2 => -10.0f64..10.0,
        1 => any::<f64>(),
    ]
}

fn sym() -> impl Strategy<Value = Sym> {
    (0u32..7).prop_map(Sym)
}

fn mig() -> impl Strategy<Value = MigCounts> {
    prop::array::uniform6(num())
}

#[derive(Debug, Clone)]
struct Inputs {
    jobs: Vec<OwnedJob>,
    nodes: Vec<OwnedNode>,
    shapes: Vec<ShapeRec>,
    queues: Vec<QueueRec>,
    domains: Vec<DomainRec>,
    cluster: (f64, f64, Resources, Resources),
    literals: Vec<Sym>,
    hashes: Vec<u64>,
}

#[derive(Debug, Clone)]
struct OwnedJob {
    rec: JobRec<'static>,
    models: Vec<Sym>,
    labels: Vec<Sym>,
}

#[derive(Debug, Clone)]
struct OwnedNode {
    rec: NodeRec<'static>,
    cards: Vec<CardRec>,
    labels: Vec<Sym>,
}

fn resources() -> impl Strategy<Value = Resources> {
    (num(), num(), num()).prop_map(|(gpu, cpu, mem)| Resources { gpu, cpu, mem })
}

fn job() -> impl Strategy<Value = OwnedJob> {
    (
        (sym(), 0u32..5, num(), num(), num(), (any::<bool>(), 0u8..7)),
        (num(), num(), any::<bool>(), any::<bool>(), (any::<bool>(), num()), num()),
        (prop::collection::vec(sym(), 0..3), prop::collection::vec(sym(), 0..4)),
    )
        .prop_map(
            |(
                (id, queue, priority, whole, frac, (has_mig, profile)),
                (waiting, runtime, bursty, lc, (has_dur, dur), evictions),
                (models, labels),
            )| OwnedJob {
                rec: JobRec {
                    id,
                    name: id,
                    user: id,
                    queue,
                    priority,
                    whole_cards: whole,
                    gpu_fraction: frac,
                    mig_profile: Opt { value: profile, present: has_mig },
                    total_gpus: whole * 2.0,
                    waiting,
                    runtime,
                    since_checkpoint: runtime / 2.0,
                    bursty,
                    latency_critical: lc,
                    preemptible: !bursty,
                    expected_duration: Opt { value: dur, present: has_dur },
                    evictions,
                    ..JobRec::default()
                },
                models,
                labels,
            },
        )
}

fn card() -> impl Strategy<Value = CardRec> {
    (num(), num(), num(), mig(), sym()).prop_map(|(free, mem, clients, free_mig, model)| CardRec {
        index: clients.abs().floor(),
        model,
        mem,
        free_mem: mem / 2.0,
        free,
        clients,
        max_clients: 4.0,
        free_mig,
    })
}

fn node() -> impl Strategy<Value = OwnedNode> {
    (
        (num(), num(), num(), 0u8..5, mig(), sym()),
        (prop::array::uniform8(0u32..5), prop::collection::vec(card(), 0..3), prop::collection::vec(sym(), 0..4)),
    )
        .prop_map(|((cards_n, free, largest, sharing, free_mig, model), (domains, cards, labels))| OwnedNode {
            rec: NodeRec {
                name: model,
                gpu_model: model,
                cards: cards_n,
                free_cards: free,
                free_gpu: free,
                largest_free_fraction: largest,
                free_mig,
                sharing,
                domains,
                ..NodeRec::default()
            },
            cards,
            labels,
        })
}

fn queue() -> impl Strategy<Value = QueueRec> {
    ((sym(), (any::<bool>(), 0u32..5), num(), resources(), resources()), (num(), num(), num())).prop_map(
        |((name, (has_parent, parent), weight, guarantee, allocated), (usage, share, after))| QueueRec {
            name,
            parent: Opt { value: parent, present: has_parent },
            weight,
            guarantee,
            limit: guarantee,
            allocated,
            borrowed: allocated,
            usage,
            dominant_share: share,
            share_after: after,
            ..QueueRec::default()
        },
    )
}

fn inputs() -> impl Strategy<Value = Inputs> {
    (
        prop::collection::vec(job(), 1..4),
        prop::collection::vec(node(), 0..4),
        prop::collection::vec(
            (num(), num(), (any::<bool>(), 0u8..7), num()).prop_map(|(w, f, (m, p), weight)| ShapeRec {
                whole_cards: w,
                gpu_fraction: f,
                mig_profile: Opt { value: p, present: m },
                weight,
                ..ShapeRec::default()
            }),
            0..3,
        ),
        prop::collection::vec(queue(), 0..4),
        prop::collection::vec(
            (num(), num()).prop_map(|(free, cards)| DomainRec { free_cards: free, cards, ..DomainRec::default() }),
            0..4,
        ),
        (num(), num(), resources(), resources()),
        prop::collection::vec(sym(), 0..(LITERALS as usize + 1)),
        prop::collection::vec(any::<u64>(), 0..8),
    )
        .prop_map(|(jobs, nodes, shapes, queues, domains, cluster, literals, hashes)| Inputs {
            jobs,
            nodes,
            shapes,
            queues,
            domains,
            cluster,
            literals,
            hashes,
        })
}

// ---------------------------------------------------------------- comparison

/// Equal as bits, or both NaN.
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same_result(a: &NodeResult, b: &NodeResult) -> bool {
    a.feasible == b.feasible
        && a.rejected_by == b.rejected_by
        && a.faults == b.faults
        && same(a.score, b.score)
        && a.tiers.iter().zip(&b.tiers).all(|(x, y)| same(*x, *y))
}

fn compare(program: Program, inputs: &Inputs) -> Result<(), TestCaseError> {
    let program = Arc::new(program);
    if std::env::var_os("GPOL_DIFF_SIZES").is_some() {
        let total: u32 = program.bodies().iter().map(|(_, b)| b.node.cost()).sum();
        let max = program.bodies().iter().map(|(_, b)| b.node.cost()).max().unwrap_or(0);
        eprintln!("program cost: total {total}, largest body {max}");
    }
    let interp = InterpEngine { program: Arc::clone(&program) };
    let jit = gpol_compiler::jit::compile(Arc::clone(&program)).map_err(TestCaseError::fail)?;
    check_engines(&program, &interp, &jit, inputs).map_err(|e| TestCaseError::fail(format!("{e}\n{program}")))
}

fn check_engines(p: &Program, interp: &dyn Engine, jit: &dyn Engine, inputs: &Inputs) -> Result<(), TestCaseError> {
    // Records with their lists, borrowed from the inputs.
    let jobs: Vec<JobRec<'_>> = inputs
        .jobs
        .iter()
        .map(|j| JobRec { allowed_models: List::new(&j.models), labels: List::new(&j.labels), ..j.rec })
        .collect();
    let nodes: Vec<NodeRec<'_>> = inputs
        .nodes
        .iter()
        .map(|n| NodeRec { cards_list: List::new(&n.cards), labels: List::new(&n.labels), ..n.rec })
        .collect();
    let (time, count, total, free) = inputs.cluster;
    let cluster = ClusterRec { time, nodes: count, total, free, task_shapes: List::new(&inputs.shapes) };
    let ctx = Ctx {
        cluster: &cluster,
        queues: &inputs.queues,
        domains: &inputs.domains,
        literals: &inputs.literals,
        sym_hashes: &inputs.hashes,
        attrs: &p.attrs,
    };
    for job in &jobs {
        prop_assert_eq!(interp.admit(&ctx, job), jit.admit(&ctx, job), "admit");
        let mut a = vec![NodeResult::default(); nodes.len()];
        let mut b = vec![NodeResult::default(); nodes.len()];
        interp.filter_score(&ctx, job, &nodes, &mut a);
        jit.filter_score(&ctx, job, &nodes, &mut b);
        for (x, y) in a.iter().zip(&b) {
            prop_assert!(same_result(x, y), "filter_score: interp {x:?} jit {y:?}");
        }
        for node in &nodes {
            for card in node.cards_list.as_slice() {
                let (x, fx) = interp.card_score(&ctx, job, node, card);
                let (y, fy) = jit.card_score(&ctx, job, node, card);
                prop_assert!(same(x, y) && fx == fy, "card_score: interp {x} ({fx}) jit {y} ({fy})");
            }
        }
        let mut ka = vec![0.0; p.job_order.len()];
        let mut kb = vec![0.0; p.job_order.len()];
        interp.job_keys(&ctx, job, &mut ka);
        jit.job_keys(&ctx, job, &mut kb);
        for (i, (x, y)) in ka.iter().zip(&kb).enumerate() {
            prop_assert!(same(*x, *y), "job key {i}: interp {x} jit {y}");
        }
        for c in 0..=p.gang.len() {
            prop_assert_eq!(interp.gang_applies(&ctx, job, c), jit.gang_applies(&ctx, job, c), "gang clause {}", c);
        }
        for victim in &jobs {
            for r in 0..=p.victims.len() {
                let (oa, ca) = interp.victim(&ctx, r, job, victim);
                let (ob, cb) = jit.victim(&ctx, r, job, victim);
                prop_assert!(oa == ob && same(ca, cb), "victim rule {r}: interp {oa} {ca} jit {ob} {cb}");
            }
        }
    }
    for q in 0..=inputs.queues.len() as u32 {
        let mut ka = vec![0.0; p.queue_order.len()];
        let mut kb = vec![0.0; p.queue_order.len()];
        interp.queue_keys(&ctx, q, &mut ka);
        jit.queue_keys(&ctx, q, &mut kb);
        for (i, (x, y)) in ka.iter().zip(&kb).enumerate() {
            prop_assert!(same(*x, *y), "queue {q} key {i}: interp {x} jit {y}");
        }
    }
    Ok(())
}

fn cases() -> u32 {
    // BODIES expressions of every rule kind per case: 640 cases give 10,240 per kind.
    std::env::var("GPOL_DIFF_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(640)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]

    #[test]
        fn jit_agrees_with_the_interpreter(
        choices in prop::collection::vec(prop::collection::vec(any::<u32>(), 0..40), BODY_SLOTS),
        depth in 1u32..6,
        inputs in inputs(),
    ) {
        compare(program(&choices, depth), &inputs)?;
    }
}
