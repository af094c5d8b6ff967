//! Checked policy → IR. Functions are inlined (their parameters become `let`s), list
//! literals are expanded where they are used (membership becomes a chain of equalities,
//! a comprehension over a literal list is unrolled), optionals and label lookups become
//! explicit, and constant subtrees are folded with the interpreter's own operations.
//!
//! Public because the runtime lowers a test's `expect` conditions itself
//! ([`lower_expectation`]), and its eviction-cycle search the policies it is given.

use crate::hir::{self, Builtin, ExprKind as H, FnId, Value};
use crate::interp;
use crate::ir::*;
use crate::limits::MAX_LOWERING_STEPS;
use crate::schema::{EnumKind, FieldTy, Record};
use crate::source::Span;
use crate::syntax::{BinaryOp, UnaryOp};
use crate::types::Ty;
use std::collections::HashMap;

/// A body that grew past the lowering budget ([`MAX_LOWERING_STEPS`]) as its function
/// calls were inlined and its literal lists unrolled: where it is, and the calls being
/// inlined when the budget ran out, outermost first.
#[derive(Clone, Debug, PartialEq)]
pub struct TooLarge {
    pub span: Span,
    pub chain: Vec<FnId>,
}

impl TooLarge {
    /// E0041, naming the functions being inlined.
    pub fn diagnostic(&self, policy: &hir::Policy) -> crate::diag::Diagnostic {
        let names: Vec<&str> =
            self.chain.iter().filter_map(|f| policy.functions.get(*f)).map(|f| f.name.as_str()).collect();
        crate::budget::over_budget(self.span, "inlining the function calls of this rule", &names, MAX_LOWERING_STEPS)
    }
}

/// Lowers a checked policy. Work is bounded: a policy whose inlined bodies would grow
/// past [`MAX_LOWERING_STEPS`] is refused with the rule and the call chain responsible.
pub fn lower(p: &hir::Policy) -> Result<Program, TooLarge> {
    let mut l = Lowerer::new(p);
    let mut prog = Program { name: p.name.clone(), levels: p.levels.clone(), ..Program::default() };
    for r in &p.rules {
        let rule = Rule {
            kind: r.kind,
            name: r.name.clone(),
            reason: r.reason.clone(),
            tier: r.tier,
            weight: r.weight,
            is_static: r.is_static,
            body: l.body(&r.body, r.span)?,
        };
        match r.kind {
            RuleKind::Admit => prog.admit.push(rule),
            RuleKind::Filter => prog.filters.push(rule),
            RuleKind::Score => prog.scores.push(rule),
            RuleKind::CardScore => prog.card_scores.push(rule),
        }
    }
    let mut order: Vec<usize> = (0..prog.filters.len()).collect();
    order.sort_by_key(|&i| prog.filters[i].body.node.cost());
    prog.filter_order = order;
    let mut key = |k: &hir::OrderKey| Ok(OrderKey { body: l.body(&k.expr, k.expr.span)?, dir: k.dir });
    prog.queue_order = p.queue_order.iter().map(&mut key).collect::<Result<_, _>>()?;
    prog.job_order = p.job_order.iter().map(&mut key).collect::<Result<_, _>>()?;
    prog.victim_order = p.victim_order.iter().map(&mut key).collect::<Result<_, _>>()?;
    prog.gang = p
        .gang
        .iter()
        .map(|g| {
            let when = g.when.as_ref().map(|w| l.body(w, g.span)).transpose()?;
            Ok(GangClause { kind: g.kind, level: g.level, weight: g.weight, when })
        })
        .collect::<Result<_, _>>()?;
    prog.victims = p
        .victims
        .iter()
        .map(|v| {
            Ok(VictimRule {
                kind: v.kind,
                name: v.name.clone(),
                reason: v.reason.clone(),
                when: l.body(&v.when, v.span)?,
                cost: v.cost.as_ref().map(|c| l.body(c, v.span)).transpose()?,
            })
        })
        .collect::<Result<_, _>>()?;
    prog.attrs = p
        .attr_values
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    None => AttrValue::Absent,
                    Some(Value::Num(n)) => AttrValue::Num(*n),
                    Some(Value::Bool(b)) => AttrValue::Bool(*b),
                    Some(Value::Str(s)) => AttrValue::Str(l.literal(s)),
                    Some(Value::Enum(_, e)) => AttrValue::Enum(*e),
                    Some(Value::List(_)) => AttrValue::Absent,
                })
                .collect()
        })
        .collect();
    prog.literals = l.literals;
    prog.job_labels = l.job_labels;
    prog.node_labels = l.node_labels;
    Ok(prog)
}

/// Lowers a test expectation: `names[i]` (the checked local of a queue, job or node the
/// expectation names) becomes `Kind::Input(i)`, supplied when it is evaluated.
pub fn lower_expectation(p: &hir::Policy, e: &hir::Expr, names: &[(hir::LocalId, VTy)]) -> Result<Body, TooLarge> {
    let mut l = Lowerer::new(p);
    let mut env = Env { bindings: HashMap::new() };
    for (i, (local, ty)) in names.iter().enumerate() {
        env.bindings.insert(*local, Binding::Value(Node::new(Kind::Input(i as u16), *ty)));
    }
    let mut counter = Counter(0);
    let node = l.expr(e, &mut env, &mut counter);
    l.finish(e.span)?;
    Ok(Body { node, locals: counter.0 })
}

struct Lowerer<'p> {
    policy: &'p hir::Policy,
    literals: Vec<String>,
    literal_ids: HashMap<String, u32>,
    job_labels: Vec<String>,
    node_labels: Vec<String>,
    /// Expressions lowered so far, across every body: the work done.
    steps: u64,
    /// Functions being inlined, outermost first.
    calls: Vec<FnId>,
    /// The calls being inlined when the budget ran out; lowering then stops at once.
    exhausted: Option<Vec<FnId>>,
}

/// What a checked local stands for in the body being lowered.
#[derive(Clone)]
enum Binding {
    Local(Local),
    /// A list literal, expanded where it is used.
    List(Vec<hir::Expr>),
    /// A trivial value (a record root, a local, a constant) substituted where it is used.
    Value(Node),
}

/// Locals of one body: each function inlined into it gets its own environment.
struct Env {
    bindings: HashMap<hir::LocalId, Binding>,
}

struct Counter(u32);

impl Counter {
    fn fresh(&mut self) -> Local {
        let l = self.0;
        self.0 += 1;
        l
    }
}

fn vty(t: &Ty) -> VTy {
    match t {
        Ty::Num(_) => VTy::F64,
        Ty::Bool => VTy::Bool,
        Ty::Str => VTy::Sym,
        Ty::Enum(_) => VTy::U8,
        Ty::Record(r) => VTy::Ref(*r),
        Ty::List(e) => VTy::List(match &**e {
            // Record lists come from fields, which store their records by value.
            Ty::Record(r @ (Record::Card | Record::Shape)) => Elem::Inline(*r),
            other => Elem::Value(Scalar::of(vty(other)).unwrap_or(Scalar::F64)),
        }),
        Ty::Map(k, _) if **k == Ty::Enum(EnumKind::MigProfile) => VTy::Mig,
        Ty::Map(..) => VTy::Labels(Record::Node),
        Ty::Optional(inner) => VTy::Opt(match &**inner {
            Ty::Num(_) => OptOf::F64,
            Ty::Record(_) => OptOf::Queue,
            _ => OptOf::U8,
        }),
        Ty::Attrs | Ty::Error => VTy::F64,
    }
}

fn field_vty(record: Record, field: u16) -> VTy {
    let Some(f) = record.fields().get(usize::from(field)) else { return VTy::F64 };
    let base = match f.ty {
        FieldTy::Num(_) => VTy::F64,
        FieldTy::Bool => VTy::Bool,
        FieldTy::Str => VTy::Sym,
        FieldTy::Enum(_) => VTy::U8,
        FieldTy::Record(r) => VTy::Ref(r),
        FieldTy::List(r) => VTy::List(Elem::Inline(r)),
        FieldTy::StrList => VTy::List(Elem::Value(Scalar::Sym)),
        FieldTy::Labels => VTy::Labels(record),
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

fn boxed(n: Node) -> Box<Node> {
    Box::new(n)
}

impl<'p> Lowerer<'p> {
    fn new(policy: &'p hir::Policy) -> Lowerer<'p> {
        Lowerer {
            policy,
            literals: Vec::new(),
            literal_ids: HashMap::new(),
            job_labels: Vec::new(),
            node_labels: Vec::new(),
            steps: 0,
            calls: Vec::new(),
            exhausted: None,
        }
    }

    fn literal(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.literal_ids.get(s) {
            return i;
        }
        let i = u32::try_from(self.literals.len()).unwrap_or(u32::MAX);
        self.literals.push(s.to_string());
        self.literal_ids.insert(s.to_string(), i);
        i
    }

    fn label_slot(&mut self, record: Record, key: &str) -> u16 {
        let slots = if record == Record::Job { &mut self.job_labels } else { &mut self.node_labels };
        let i = slots.iter().position(|k| k == key).unwrap_or_else(|| {
            slots.push(key.to_string());
            slots.len() - 1
        });
        u16::try_from(i).unwrap_or(u16::MAX)
    }

    fn body(&mut self, e: &hir::Expr, span: Span) -> Result<Body, TooLarge> {
        let mut counter = Counter(0);
        let mut env = Env { bindings: HashMap::new() };
        let node = self.expr(e, &mut env, &mut counter);
        self.finish(span)?;
        Ok(Body { node, locals: counter.0 })
    }

    /// The error for the body at `span` if the budget ran out while lowering it.
    fn finish(&mut self, span: Span) -> Result<(), TooLarge> {
        match self.exhausted.take() {
            Some(chain) => Err(TooLarge { span, chain }),
            None => Ok(()),
        }
    }

    fn expr(&mut self, e: &hir::Expr, env: &mut Env, c: &mut Counter) -> Node {
        // Inlining copies a function's body at every call, so calls that call twice
        // grow exponentially with depth: count the work and stop at the budget.
        self.steps += 1;
        if self.exhausted.is_some() || self.steps > MAX_LOWERING_STEPS {
            if self.exhausted.is_none() {
                self.exhausted = Some(self.calls.clone());
            }
            return Node::num(f64::NAN);
        }
        let ty = vty(&e.ty);
        let n = match &e.kind {
            H::Num(x) => Node::num(*x),
            H::Bool(b) => Node::boolean(*b),
            H::Str(s) => Node::new(Kind::Str(self.literal(s)), VTy::Sym),
            H::Enum(_, v) => Node::new(Kind::Enum(*v), VTy::U8),
            // A list literal where it cannot be expanded in place (returned from a
            // function, chosen by an `if`): built at run time.
            H::List(items) => self.list_literal(items, ty, env, c),
            H::Local(id) => match env.bindings.get(id).cloned() {
                Some(Binding::Local(l)) => Node::new(Kind::Local(l), ty),
                Some(Binding::List(items)) => self.list_literal(&items, ty, env, c),
                Some(Binding::Value(n)) => n,
                None => Node::num(f64::NAN),
            },
            H::Root(r) => Node::new(Kind::Root(*r), ty),
            H::Field(base, record, field) => {
                let base = self.expr(base, env, c);
                Node::new(Kind::Field { base: boxed(base), record: *record, field: *field }, field_vty(*record, *field))
            }
            H::Level(node, level) => {
                let node = self.expr(node, env, c);
                Node::new(Kind::Domain { node: boxed(node), level: *level }, VTy::Ref(Record::Domain))
            }
            H::Attr(queue, attr) => {
                let queue = self.expr(queue, env, c);
                Node::new(Kind::Attr { queue: boxed(queue), attr: *attr }, ty)
            }
            H::Index(map, key) => {
                let map = self.expr(map, env, c);
                match (map.ty, &key.kind) {
                    (VTy::Labels(record), H::Str(k)) => {
                        let slot = self.label_slot(record, k);
                        Node::new(Kind::Label { labels: boxed(map), slot }, VTy::Sym)
                    }
                    _ => {
                        let profile = self.expr(key, env, c);
                        Node::new(Kind::Mig { counts: boxed(map), profile: boxed(profile) }, VTy::F64)
                    }
                }
            }
            H::Builtin(b, args) => self.builtin(*b, args, env, c),
            H::Call(f, args) => self.inline(*f, args, env, c),
            H::Unary(UnaryOp::Not, x) => Node::new(Kind::Not(boxed(self.expr(x, env, c))), VTy::Bool),
            H::Unary(UnaryOp::Neg, x) => Node::new(Kind::Neg(boxed(self.expr(x, env, c))), VTy::F64),
            H::Binary(op, a, b) => self.binary(*op, a, b, env, c),
            H::If(cond, t, f) => {
                let cond = self.expr(cond, env, c);
                let t = self.expr(t, env, c);
                let f = self.expr(f, env, c);
                Node::new(Kind::If(boxed(cond), boxed(t), boxed(f)), ty)
            }
            H::Let(id, v, body) => {
                if let H::List(items) = &v.kind {
                    env.bindings.insert(*id, Binding::List(items.clone()));
                    return self.expr(body, env, c);
                }
                let v = self.expr(v, env, c);
                let l = c.fresh();
                env.bindings.insert(*id, Binding::Local(l));
                let body = self.expr(body, env, c);
                Node::new(Kind::Let(l, boxed(v), boxed(body)), ty)
            }
            H::Comprehension(kind, id, iter, body) => self.comprehension(*kind, *id, iter, body, ty, env, c),
            H::Error => Node::num(f64::NAN),
        };
        fold(n)
    }

    fn list_literal(&mut self, items: &[hir::Expr], ty: VTy, env: &mut Env, c: &mut Counter) -> Node {
        let items = items.iter().map(|i| self.expr(i, env, c)).collect();
        Node::new(Kind::ListLit(items), ty)
    }

    /// The elements of a list literal, directly or through a `let`-bound name.
    fn literal_list<'e>(&self, e: &'e hir::Expr, env: &'e Env) -> Option<&'e [hir::Expr]> {
        match &e.kind {
            H::List(items) => Some(items),
            H::Local(id) => match env.bindings.get(id) {
                Some(Binding::List(items)) => Some(items),
                _ => None,
            },
            _ => None,
        }
    }

    fn builtin(&mut self, b: Builtin, args: &[hir::Expr], env: &mut Env, c: &mut Counter) -> Node {
        match b {
            Builtin::Has => {
                let x = self.expr(&args[0], env, c);
                Node::new(Kind::IsSome(boxed(x)), VTy::Bool)
            }
            Builtin::Len => {
                if let Some(items) = self.literal_list(&args[0], env) {
                    return Node::num(items.len() as f64);
                }
                let x = self.expr(&args[0], env, c);
                Node::new(Kind::Len(boxed(x)), VTy::F64)
            }
            _ => {
                let args = args.iter().map(|a| self.expr(a, env, c)).collect();
                Node::new(Kind::Call(b, args), VTy::F64)
            }
        }
    }

    /// A call becomes its body, with each parameter bound once by a `let`.
    fn inline(&mut self, f: hir::FnId, args: &[hir::Expr], env: &mut Env, c: &mut Counter) -> Node {
        let Some(func) = self.policy.functions.get(f) else { return Node::num(f64::NAN) };
        let mut inner = Env { bindings: HashMap::new() };
        let mut lets = Vec::new();
        for ((param, _), arg) in func.params.iter().zip(args) {
            if let Some(items) = self.literal_list(arg, env) {
                inner.bindings.insert(*param, Binding::List(items.to_vec()));
                continue;
            }
            let value = self.expr(arg, env, c);
            if matches!(
                value.kind,
                Kind::Root(_) | Kind::Local(_) | Kind::Num(_) | Kind::Bool(_) | Kind::Enum(_) | Kind::Str(_)
            ) {
                inner.bindings.insert(*param, Binding::Value(value));
                continue;
            }
            let l = c.fresh();
            inner.bindings.insert(*param, Binding::Local(l));
            lets.push((l, value));
        }
        self.calls.push(f);
        let mut body = self.expr(&func.body, &mut inner, c);
        self.calls.pop();
        for (l, value) in lets.into_iter().rev() {
            let ty = body.ty;
            body = Node::new(Kind::Let(l, boxed(value), boxed(body)), ty);
        }
        body
    }

    fn binary(&mut self, op: BinaryOp, a: &hir::Expr, b: &hir::Expr, env: &mut Env, c: &mut Counter) -> Node {
        use BinaryOp as B;
        if matches!(op, B::In | B::NotIn) {
            let found = self.membership(a, b, env, c);
            return if op == B::In { found } else { fold(Node::new(Kind::Not(boxed(found)), VTy::Bool)) };
        }
        let x = self.expr(a, env, c);
        let y = self.expr(b, env, c);
        let bin = |op: Bin, ty: VTy, x: Node, y: Node| Node::new(Kind::Bin(op, boxed(x), boxed(y)), ty);
        match op {
            B::And => bin(Bin::And, VTy::Bool, x, y),
            B::Or => bin(Bin::Or, VTy::Bool, x, y),
            B::Implies => bin(Bin::Or, VTy::Bool, fold(Node::new(Kind::Not(boxed(x)), VTy::Bool)), y),
            B::Eq | B::Ne => {
                let numeric = x.ty == VTy::F64;
                let op = match (op, numeric) {
                    (B::Eq, true) => Bin::Eq,
                    (B::Eq, false) => Bin::BitEq,
                    (_, true) => Bin::Ne,
                    (_, false) => Bin::BitNe,
                };
                bin(op, VTy::Bool, x, y)
            }
            B::Lt => bin(Bin::Lt, VTy::Bool, x, y),
            B::Le => bin(Bin::Le, VTy::Bool, x, y),
            B::Gt => bin(Bin::Gt, VTy::Bool, x, y),
            B::Ge => bin(Bin::Ge, VTy::Bool, x, y),
            B::Add => bin(Bin::Add, VTy::F64, x, y),
            B::Sub => bin(Bin::Sub, VTy::F64, x, y),
            B::Mul => bin(Bin::Mul, VTy::F64, x, y),
            B::Div => bin(Bin::Div, VTy::F64, x, y),
            B::Default => {
                let inner = y.ty;
                let t = c.fresh();
                let opt_ty = x.ty;
                let local = || Node::new(Kind::Local(t), opt_ty);
                let choose = Node::new(
                    Kind::If(
                        boxed(Node::new(Kind::IsSome(boxed(local())), VTy::Bool)),
                        boxed(Node::new(Kind::Unwrap(boxed(local())), inner)),
                        boxed(y),
                    ),
                    inner,
                );
                Node::new(Kind::Let(t, boxed(x), boxed(choose)), inner)
            }
            B::In | B::NotIn => Node::boolean(false),
        }
    }

    /// `x in list`: a chain of equalities for a literal list, a loop for a list field.
    fn membership(&mut self, a: &hir::Expr, b: &hir::Expr, env: &mut Env, c: &mut Counter) -> Node {
        let x = self.expr(a, env, c);
        let eq = if x.ty == VTy::F64 { Bin::Eq } else { Bin::BitEq };
        let t = c.fresh();
        let xt = x.ty;
        let item_eq =
            |item: Node| Node::new(Kind::Bin(eq, boxed(Node::new(Kind::Local(t), xt)), boxed(item)), VTy::Bool);
        let test = if let Some(items) = self.literal_list(b, env).map(<[hir::Expr]>::to_vec) {
            let mut acc: Option<Node> = None;
            for item in &items {
                let e = item_eq(self.expr(item, env, c));
                acc = Some(match acc {
                    None => e,
                    Some(prev) => Node::new(Kind::Bin(Bin::Or, boxed(prev), boxed(e)), VTy::Bool),
                });
            }
            acc.unwrap_or_else(|| Node::boolean(false))
        } else {
            let list = self.expr(b, env, c);
            let var = c.fresh();
            let elem = match list.ty {
                VTy::List(e) => e.vty(),
                _ => xt,
            };
            let body = item_eq(Node::new(Kind::Local(var), elem));
            Node::new(Kind::Loop { kind: CompKind::Any, var, list: boxed(list), body: boxed(body) }, VTy::Bool)
        };
        fold(Node::new(Kind::Let(t, boxed(x), boxed(test)), VTy::Bool))
    }

    #[allow(clippy::too_many_arguments)]
    fn comprehension(
        &mut self,
        kind: CompKind,
        id: hir::LocalId,
        iter: &hir::Expr,
        body: &hir::Expr,
        ty: VTy,
        env: &mut Env,
        c: &mut Counter,
    ) -> Node {
        if let Some(items) = self.literal_list(iter, env).map(<[hir::Expr]>::to_vec) {
            // Unrolled with the loop's own accumulation, so both agree bit for bit.
            let mut acc = match kind {
                CompKind::Any => Node::boolean(false),
                CompKind::All => Node::boolean(true),
                CompKind::Count | CompKind::Sum => Node::num(0.0),
                CompKind::Min => Node::num(f64::INFINITY),
                CompKind::Max => Node::num(f64::NEG_INFINITY),
            };
            for item in &items {
                let value = self.expr(item, env, c);
                let l = c.fresh();
                env.bindings.insert(id, Binding::Local(l));
                let b = self.expr(body, env, c);
                let step = match kind {
                    CompKind::Any => Node::new(Kind::Bin(Bin::Or, boxed(acc), boxed(b)), VTy::Bool),
                    CompKind::All => Node::new(Kind::Bin(Bin::And, boxed(acc), boxed(b)), VTy::Bool),
                    CompKind::Count => {
                        let one = Node::new(Kind::If(boxed(b), boxed(Node::num(1.0)), boxed(Node::num(0.0))), VTy::F64);
                        Node::new(Kind::Bin(Bin::Add, boxed(acc), boxed(one)), VTy::F64)
                    }
                    CompKind::Sum => Node::new(Kind::Bin(Bin::Add, boxed(acc), boxed(b)), VTy::F64),
                    CompKind::Min => Node::new(Kind::Call(Builtin::Min, vec![acc, b]), VTy::F64),
                    CompKind::Max => Node::new(Kind::Call(Builtin::Max, vec![acc, b]), VTy::F64),
                };
                acc = fold(Node::new(Kind::Let(l, boxed(value), boxed(step)), ty));
            }
            return acc;
        }
        let list = self.expr(iter, env, c);
        let var = c.fresh();
        env.bindings.insert(id, Binding::Local(var));
        let body = self.expr(body, env, c);
        Node::new(Kind::Loop { kind, var, list: boxed(list), body: boxed(body) }, ty)
    }
}

/// Folds a node whose operands are constants, with the interpreter's operations (never
/// reassociating), so a folded value is exactly what either engine would compute.
fn fold(n: Node) -> Node {
    let constant = |n: &Node| matches!(n.kind, Kind::Num(_) | Kind::Bool(_) | Kind::Enum(_));
    let all_constant = match &n.kind {
        Kind::Not(x) | Kind::Neg(x) => constant(x),
        Kind::Bin(op, a, b) => {
            // A constant left side decides `and`/`or` alone.
            let short = matches!((op, &a.kind), (Bin::And, Kind::Bool(false)) | (Bin::Or, Kind::Bool(true)));
            short || (constant(a) && constant(b))
        }
        Kind::If(c, ..) => constant(c),
        Kind::Call(_, args) => args.iter().all(constant),
        Kind::Let(_, _, body) => constant(body),
        _ => false,
    };
    if !all_constant {
        return n;
    }
    if let Kind::If(c, t, f) = n.kind {
        return if matches!(c.kind, Kind::Bool(true)) { *t } else { *f };
    }
    if let Kind::Let(_, _, body) = n.kind {
        // The bound value is pure and unused by a constant body.
        return *body;
    }
    match interp::eval_constant(&n) {
        Some(v) => v,
        None => n,
    }
}
