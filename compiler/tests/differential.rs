//! The interpreter is the oracle: on generated programs and generated records, the JIT
//! must give exactly the same results at every entry point (NaN compared by class).
//!
//! Programs are decoded from a sequence of choices (as Hypothesis does), so proptest's
//! shrinking of the sequence shrinks the program. Each case builds one program with
//! `BODIES` bodies of every rule kind, compiles it once, and compares every entry point on
//! every generated input.

use gpol_compiler::engine::InterpEngine;
use gpol_compiler::hir::Builtin;
use gpol_compiler::ir::*;
use gpol_compiler::schema::*;
use proptest::prelude::*;
use std::sync::Arc;

mod support;
use support::{LITERALS, SPECIAL, compare, inputs};

const BODIES: usize = 16;
const ATTR_NUM: u16 = 0;
const ATTR_STR: u16 = 1;
const ATTR_BOOL: u16 = 2;

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
        let (idx, f) = record.field(name).expect(".");
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
        match self.pick(4) {
            3 => {
                // A list built at run time from generated elements.
                let elem = [Scalar::F64, Scalar::Sym, Scalar::Bool, Scalar::U8][self.pick(4)];
                let len = self.pick(4);
                let items = (0..len).map(|_| self.expr(elem.vty(), 1)).collect();
                Some((n(Kind::ListLit(items), VTy::List(Elem::Value(elem))), elem.vty()))
            }
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
                ][self.pick(14)];
                let arity = match f {
                    Builtin::Min | Builtin::Max | Builtin::Pow | Builtin::Mod => 2,
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
        FieldTy::List(r) => VTy::List(Elem::Inline(r)),
        FieldTy::StrList => VTy::List(Elem::Value(Scalar::Sym)),
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

/// Bodies per program: `BODIES` of each of the nine kinds (victim rules have two).
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
        p.victim_order.push(OrderKey { body: body(&mut g, VICTIM, key_ty), dir: Direction::Asc });
        let when = if i % 5 == 4 { None } else { Some(body(&mut g, JOB, VTy::Bool)) };
        p.gang.push(GangClause { kind: GangKind::Prefer, level: 0, weight: 1.0, when });
        let cost = if i % 3 == 2 { None } else { Some(body(&mut g, VICTIM, VTy::F64)) };
        p.victims.push(VictimRule {
            kind: VictimKind::Preempt,
            name: format!("v{i}"),
            reason: None,
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

/// Every example policy, compiled once by both engines.
fn example_engines() -> Vec<(String, Arc<Program>, InterpEngine, gpol_compiler::jit::JitEngine)> {
    // policies/ and its folders (policies/atc23/).
    let mut folders = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies")];
    let mut paths = Vec::new();
    while let Some(dir) = folders.pop() {
        for path in std::fs::read_dir(&dir).expect("the examples").filter_map(|e| e.ok().map(|e| e.path())) {
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "gpol") {
                paths.push(path);
            }
        }
    }
    assert!(paths.iter().any(|p| p.ends_with("atc23/fgd.gpol")), "the reference policies are found");
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let checked = gpol_compiler::load::Checked::from_file(&path).expect("the policy is readable");
            let policy = checked.into_policy().expect("the policy checks").policy;
            let program = Arc::new(gpol_compiler::lower::lower(&policy).expect("lowers"));
            let interp = InterpEngine { program: Arc::clone(&program) };
            let jit = gpol_compiler::jit::compile(Arc::clone(&program)).expect("the policy checks");
            (path.display().to_string(), program, interp, jit)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases() * 2, ..ProptestConfig::default() })]

    #[test]
    fn example_policies_agree_on_generated_inputs(inputs in inputs()) {
        thread_local! {
            static ENGINES: Vec<(String, Arc<Program>, InterpEngine, gpol_compiler::jit::JitEngine)> = example_engines();
        }
        ENGINES.with(|engines| -> Result<(), TestCaseError> {
            for (name, program, interp, jit) in engines {
                support::check_engines(program, interp, jit, &inputs).map_err(|e| TestCaseError::fail(format!("{name}: {e}")))?;
            }
            Ok(())
        })?;
    }
}
