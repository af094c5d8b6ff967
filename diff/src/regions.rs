//! Equivalence proved by decision regions, the method of firewall difference tools: when
//! every comparison in a set of rules compares one field (through `k·field + m`) with a
//! constant, tests a flag, or matches a string field against a literal, the constants of
//! both versions cut each field's range into intervals on which every comparison keeps
//! its answer. One point per interval, each cut, and the floats either side of it then
//! decide the rules everywhere: evaluating both versions on every combination of those
//! points (fields taken as independent, which only adds combinations) proves them equal,
//! or finds a combination where they differ.

use crate::canon::Names;
use gpol_compiler::hir::Builtin;
use gpol_compiler::ir::{AttrValue, Bin, Kind, Local, Node, OptOf, VTy};
use gpol_compiler::schema::{FieldTy, Record};
use std::collections::{BTreeMap, BTreeSet};

/// Points enumerated at most.
pub const MAX_POINTS: u64 = 1 << 20;
/// Differing points kept (some may be values no job has, such as the float next to 8 GPUs).
const KEPT_POINTS: usize = 64;

/// A value a variable takes at a point.
#[derive(Clone, Debug, PartialEq)]
pub enum V {
    Num(f64),
    Bool(bool),
    /// A string; the empty string is an absent label.
    Str(String),
    Enum(u8),
    /// An optional number or enum that is absent.
    None,
}

/// What kind of values a variable ranges over.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Var {
    Num {
        optional: bool,
        cuts: Vec<f64>,
    },
    Bool,
    Str(BTreeSet<String>),
    Enum {
        optional: bool,
        variants: u8,
    },
    /// A job's queue, by name (attributes are looked up in each version's tree).
    Queue(BTreeSet<String>),
}

/// The result of a region proof.
#[derive(Clone, Debug, PartialEq)]
pub enum Regions {
    /// Equal at every point: how many, over which fields.
    Equal { points: u64, fields: Vec<String> },
    /// Equal at every combination of the rules' answers over the reals (the SMT back
    /// end, where the rules round): how many, over which fields. Not a proof for doubles.
    EqualOverReals { combinations: u64, fields: Vec<String> },
    /// The versions differ at these points (variable → value), the first few found.
    Differ(Vec<BTreeMap<String, V>>),
    /// The rules do not have the structure the method needs (or too many points).
    NotApplicable,
}

/// A rule's answer at a point: its name, whether it reads only static fields, its value.
pub type Answer = (String, bool, bool);

/// What is observed of a version's answers (a string, compared between versions).
pub type Observe<'a> = &'a dyn Fn(&[Answer]) -> String;

/// One version's rules for a decision: (name, is_static, body), in declaration order.
pub struct Rules<'a> {
    pub names: &'a Names<'a>,
    pub rules: Vec<(String, bool, &'a Node)>,
}

/// Compares two versions' rule sets by regions. `decision` maps each version's list of
/// rule answers (in its order) to what is observed, with old names already renamed.
pub fn compare(old: &Rules<'_>, new: &Rules<'_>, decision: Observe<'_>, shared: &dyn Fn(&str) -> bool) -> Regions {
    let mut vars: BTreeMap<String, Var> = BTreeMap::new();
    let inlined = |r: &Rules<'_>| -> Option<Vec<Node>> {
        r.rules.iter().map(|(_, _, n)| inline(n, &mut Vec::new(), &mut { MAX_INLINED })).collect()
    };
    let (Some(old_bodies), Some(new_bodies)) = (inlined(old), inlined(new)) else { return Regions::NotApplicable };
    for (bodies, r) in [(&old_bodies, old), (&new_bodies, new)] {
        for b in bodies {
            if !shape(b, r.names, &mut vars) {
                return Regions::NotApplicable;
            }
        }
    }
    // A field both versions compute from their own declarations (a priority from its
    // class, usage from the quota tree's settings) is not one variable of both.
    if vars.keys().any(|v| !shared(v)) {
        return Regions::NotApplicable;
    }
    let axes: Vec<(String, Vec<V>)> = vars.iter().map(|(k, v)| (k.clone(), values(v))).collect();
    let points = axes.iter().try_fold(1u64, |acc, (_, v)| acc.checked_mul(v.len() as u64).filter(|n| *n <= MAX_POINTS));
    let Some(points) = points else { return Regions::NotApplicable };
    let mut index = vec![0usize; axes.len()];
    let mut point: BTreeMap<&str, &V> = BTreeMap::new();
    let mut differ = Vec::new();
    for _ in 0..points {
        point.clear();
        for ((name, vals), &i) in axes.iter().zip(&index) {
            point.insert(name, &vals[i]);
        }
        let answers = |bodies: &[Node], r: &Rules<'_>| -> Option<Vec<Answer>> {
            (bodies.iter().zip(&r.rules))
                .map(|(b, (name, is_static, _))| match eval(b, &point, r.names)? {
                    V::Bool(x) => Some((name.clone(), *is_static, x)),
                    _ => None,
                })
                .collect()
        };
        let (Some(a), Some(b)) = (answers(&old_bodies, old), answers(&new_bodies, new)) else {
            return Regions::NotApplicable;
        };
        if decision(&a) != decision(&b) {
            differ.push(point.iter().map(|(k, v)| (k.to_string(), (*v).clone())).collect());
            if differ.len() >= KEPT_POINTS {
                break;
            }
        }
        // The next combination.
        for (i, (_, vals)) in index.iter_mut().zip(&axes) {
            *i += 1;
            if *i < vals.len() {
                break;
            }
            *i = 0;
        }
    }
    if !differ.is_empty() {
        return Regions::Differ(differ);
    }
    Regions::Equal { points, fields: vars.into_keys().collect() }
}

/// Nodes substituting `let`s may copy, in all (a bound on what doubling lets can build).
pub(crate) const MAX_INLINED: usize = 1 << 16;

/// The expression with every `let` substituted (`None` past `budget` nodes copied).
pub(crate) fn inline(n: &Node, env: &mut Vec<(Local, Node)>, budget: &mut usize) -> Option<Node> {
    let mut go = |x: &Node, env: &mut Vec<(Local, Node)>| inline(x, env, budget).map(Box::new);
    let kind = match &n.kind {
        Kind::Local(l) => {
            if let Some((_, v)) = env.iter().rev().find(|(x, _)| x == l) {
                *budget = budget.checked_sub(size(v))?;
                return Some(v.clone());
            }
            n.kind.clone()
        }
        Kind::Let(l, value, body) => {
            let v = *go(value, env)?;
            env.push((*l, v));
            let out = go(body, env);
            env.pop();
            return out.map(|b| *b);
        }
        Kind::Not(x) => Kind::Not(go(x, env)?),
        Kind::Neg(x) => Kind::Neg(go(x, env)?),
        Kind::IsSome(x) => Kind::IsSome(go(x, env)?),
        Kind::Unwrap(x) => Kind::Unwrap(go(x, env)?),
        Kind::Bin(op, a, b) => Kind::Bin(*op, go(a, env)?, go(b, env)?),
        Kind::If(c, a, b) => Kind::If(go(c, env)?, go(a, env)?, go(b, env)?),
        Kind::Call(f, args) => Kind::Call(*f, args.iter().map(|a| go(a, env).map(|b| *b)).collect::<Option<_>>()?),
        other => other.clone(),
    };
    Some(Node { kind, ty: n.ty })
}

/// Nodes in an expression.
fn size(n: &Node) -> usize {
    let mut count = 1;
    n.any_child(&mut |c| {
        count += size(c);
        false
    });
    count
}

/// A variable's name (`job.priority`, `node.labels["zone"]`, `job.queue`), if the
/// expression reads one directly from a record in scope.
pub(crate) fn variable(n: &Node, names: &Names<'_>) -> Option<(String, Var)> {
    match &n.kind {
        Kind::Field { base, record, field } => {
            let Kind::Root(root) = base.kind else {
                // `job.queue.name`: a field of the job's queue.
                let (b, _) = variable(base, names)?;
                let f = record.fields().get(usize::from(*field))?;
                return match (f.ty, n.ty) {
                    (FieldTy::Str, VTy::Sym) => Some((format!("{b}.{}", f.name), Var::Str(BTreeSet::new()))),
                    _ => None,
                };
            };
            let f = record.fields().get(usize::from(*field))?;
            let name = format!("{}.{}", root.name(), f.name);
            let var = match (n.ty, f.ty) {
                (VTy::F64, _) => Var::Num { optional: false, cuts: Vec::new() },
                (VTy::Opt(OptOf::F64), _) => Var::Num { optional: true, cuts: Vec::new() },
                (VTy::Bool, _) => Var::Bool,
                (VTy::Sym, _) => Var::Str(BTreeSet::new()),
                (VTy::U8, FieldTy::Enum(k)) => Var::Enum { optional: false, variants: k.variants().len() as u8 },
                (VTy::Opt(OptOf::U8), FieldTy::Enum(k)) => {
                    Var::Enum { optional: true, variants: k.variants().len() as u8 }
                }
                (VTy::Ref(Record::Queue), _) if *record == Record::Job => {
                    let queues = names.policy.queues.iter().map(|q| q.name.clone()).collect();
                    Var::Queue(queues)
                }
                _ => return None,
            };
            Some((name, var))
        }
        Kind::Label { labels, slot } => {
            let (base, _) = variable_labels(labels)?;
            let keys = match labels.ty {
                VTy::Labels(Record::Node) => &names.program.node_labels,
                _ => &names.program.job_labels,
            };
            Some((format!("{base}[{:?}]", keys.get(usize::from(*slot))?), Var::Str(BTreeSet::new())))
        }
        _ => None,
    }
}

fn variable_labels(n: &Node) -> Option<(String, ())> {
    match &n.kind {
        Kind::Field { base, record, field } => {
            let Kind::Root(root) = base.kind else { return None };
            Some((format!("{}.{}", root.name(), record.fields().get(usize::from(*field))?.name), ()))
        }
        _ => None,
    }
}

/// `k·x + m` with `x` one numeric variable.
fn linear(n: &Node, names: &Names<'_>) -> Option<(String, f64, f64)> {
    match &n.kind {
        Kind::Field { .. } => match variable(n, names)? {
            (name, Var::Num { .. }) => Some((name, 1.0, 0.0)),
            _ => None,
        },
        Kind::Unwrap(x) => linear(x, names),
        Kind::Neg(x) => linear(x, names).map(|(v, k, m)| (v, -k, -m)),
        Kind::Bin(op, a, b) => {
            let (ca, cb) = (constant(a), constant(b));
            match (op, ca, cb) {
                (Bin::Add, Some(c), None) => linear(b, names).map(|(v, k, m)| (v, k, m + c)),
                (Bin::Add, None, Some(c)) => linear(a, names).map(|(v, k, m)| (v, k, m + c)),
                (Bin::Sub, None, Some(c)) => linear(a, names).map(|(v, k, m)| (v, k, m - c)),
                (Bin::Sub, Some(c), None) => linear(b, names).map(|(v, k, m)| (v, -k, c - m)),
                (Bin::Mul, Some(c), None) => linear(b, names).map(|(v, k, m)| (v, k * c, m * c)),
                (Bin::Mul, None, Some(c)) => linear(a, names).map(|(v, k, m)| (v, k * c, m * c)),
                (Bin::Div, None, Some(c)) if c != 0.0 => linear(a, names).map(|(v, k, m)| (v, k / c, m / c)),
                _ => None,
            }
        }
        _ => None,
    }
}

fn constant(n: &Node) -> Option<f64> {
    match n.kind {
        Kind::Num(x) => Some(x),
        _ => None,
    }
}

/// Whether a boolean expression has the structure the method needs, recording each
/// variable and the cuts and literals it is compared with.
fn shape(n: &Node, names: &Names<'_>, vars: &mut BTreeMap<String, Var>) -> bool {
    let note = |vars: &mut BTreeMap<String, Var>, name: String, var: Var, cut: Option<f64>, literal: Option<String>| {
        let entry = vars.entry(name).or_insert(var.clone());
        match (entry, cut, literal) {
            (Var::Num { cuts, .. }, Some(c), _) => cuts.push(c),
            (Var::Str(lits), _, Some(l)) | (Var::Queue(lits), _, Some(l)) => {
                lits.insert(l);
            }
            (Var::Queue(qs), _, None) => {
                if let Var::Queue(more) = var {
                    qs.extend(more);
                }
            }
            _ => {}
        }
        true
    };
    match &n.kind {
        Kind::Bool(_) => true,
        Kind::Not(x) => shape(x, names, vars),
        Kind::Bin(Bin::And | Bin::Or, a, b) => shape(a, names, vars) && shape(b, names, vars),
        Kind::If(c, a, b) => {
            n.ty == VTy::Bool && shape(c, names, vars) && shape(a, names, vars) && shape(b, names, vars)
        }
        Kind::Field { .. } => match variable(n, names) {
            Some((name, var @ Var::Bool)) => note(vars, name, var, None, None),
            _ => false,
        },
        Kind::IsSome(x) => match variable(x, names) {
            Some((name, var)) => note(vars, name, var, None, None),
            None => false,
        },
        Kind::Bin(op @ (Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge | Bin::Eq | Bin::Ne), a, b) => {
            let _ = op;
            let (lin, c) = match (constant(a), constant(b)) {
                (Some(c), None) => (linear(b, names), c),
                (None, Some(c)) => (linear(a, names), c),
                (Some(_), Some(_)) => return true,
                _ => return false,
            };
            match lin {
                Some((v, k, m)) if k != 0.0 && k.is_finite() => {
                    let optional = matches!(vars.get(&v), Some(Var::Num { optional: true, .. }));
                    let var = Var::Num { optional, cuts: Vec::new() };
                    note(vars, v, var, Some((c - m) / k), None)
                }
                _ => false,
            }
        }
        Kind::Bin(Bin::BitEq | Bin::BitNe, a, b) => {
            let literal = |x: &Node| match x.kind {
                Kind::Str(i) => names.program.literals.get(i as usize).cloned(),
                _ => None,
            };
            let (var, lit) = match (literal(a), literal(b)) {
                (Some(l), None) => (variable(b, names), Some(l)),
                (None, Some(l)) => (variable(a, names), Some(l)),
                _ => match (&a.kind, &b.kind) {
                    (Kind::Enum(_), _) => (variable(b, names), None),
                    (_, Kind::Enum(_)) => (variable(a, names), None),
                    _ => return false,
                },
            };
            match var {
                Some((name, v @ (Var::Str(_) | Var::Enum { .. } | Var::Bool))) => note(vars, name, v, None, lit),
                _ => false,
            }
        }
        _ => false,
    }
}

/// The points of a variable's axis.
fn values(v: &Var) -> Vec<V> {
    match v {
        Var::Num { optional, cuts } => {
            let mut c: Vec<f64> = cuts.iter().copied().filter(|x| x.is_finite()).collect();
            c.sort_by(f64::total_cmp);
            c.dedup();
            let mut out: Vec<f64> = Vec::new();
            for (i, &x) in c.iter().enumerate() {
                if i == 0 {
                    out.push(x - 1.0);
                }
                out.extend([x.next_down(), x, x.next_up()]);
                out.push(c.get(i + 1).map_or(x + 1.0, |&y| x + (y - x) / 2.0));
            }
            if out.is_empty() {
                out.push(0.0);
            }
            let mut vals: Vec<V> = out.into_iter().map(V::Num).collect();
            if *optional {
                vals.push(V::None);
            }
            vals
        }
        Var::Bool => vec![V::Bool(false), V::Bool(true)],
        Var::Str(lits) => {
            let mut vals: Vec<V> = lits.iter().cloned().map(V::Str).collect();
            vals.extend([V::Str(String::new()), V::Str("\u{1}another".into())]);
            vals
        }
        Var::Queue(queues) => queues.iter().cloned().map(V::Str).collect(),
        Var::Enum { optional, variants } => {
            let mut vals: Vec<V> = (0..*variants).map(V::Enum).collect();
            if *optional {
                vals.push(V::None);
            }
            vals
        }
    }
}

/// Evaluates an inlined expression at a point (`None`: outside the method).
pub(crate) fn eval(n: &Node, point: &BTreeMap<&str, &V>, names: &Names<'_>) -> Option<V> {
    let num = |x: &Node| match eval(x, point, names)? {
        V::Num(v) => Some(v),
        _ => None,
    };
    Some(match &n.kind {
        Kind::Num(x) => V::Num(*x),
        Kind::Bool(b) => V::Bool(*b),
        Kind::Enum(e) => V::Enum(*e),
        Kind::Str(i) => V::Str(names.program.literals.get(*i as usize)?.clone()),
        Kind::Field { .. } | Kind::Label { .. } => {
            let (name, _) = variable(n, names)?;
            (*point.get(name.as_str())?).clone()
        }
        Kind::Attr { queue, attr } => {
            let (name, _) = variable(queue, names)?;
            let V::Str(q) = point.get(name.as_str())? else { return None };
            let at = names.policy.queue(q)?;
            match names.program.attrs.get(at)?.get(usize::from(*attr))? {
                AttrValue::Num(x) => V::Num(*x),
                AttrValue::Bool(b) => V::Bool(*b),
                _ => return None,
            }
        }
        // An absent label is the empty string: `has` is false for it, as in the engines.
        Kind::IsSome(x) => V::Bool(match eval(x, point, names)? {
            V::None => false,
            V::Str(s) => !s.is_empty(),
            _ => true,
        }),
        Kind::Unwrap(x) => match eval(x, point, names)? {
            V::None => V::Num(0.0),
            v => v,
        },
        Kind::Not(x) => match eval(x, point, names)? {
            V::Bool(b) => V::Bool(!b),
            _ => return None,
        },
        Kind::Neg(x) => V::Num(-num(x)?),
        Kind::If(c, a, b) => match eval(c, point, names)? {
            V::Bool(true) => eval(a, point, names)?,
            V::Bool(false) => eval(b, point, names)?,
            _ => return None,
        },
        Kind::Bin(op, a, b) => match op {
            Bin::And | Bin::Or => {
                let (V::Bool(x), V::Bool(y)) = (eval(a, point, names)?, eval(b, point, names)?) else { return None };
                V::Bool(if *op == Bin::And { x && y } else { x || y })
            }
            Bin::BitEq | Bin::BitNe => {
                let (x, y) = (eval(a, point, names)?, eval(b, point, names)?);
                V::Bool((x == y) == (*op == Bin::BitEq))
            }
            _ => {
                let (x, y) = (num(a)?, num(b)?);
                match op {
                    Bin::Add => V::Num(x + y),
                    Bin::Sub => V::Num(x - y),
                    Bin::Mul => V::Num(x * y),
                    Bin::Div => V::Num(x / y),
                    Bin::Lt => V::Bool(x < y),
                    Bin::Le => V::Bool(x <= y),
                    Bin::Gt => V::Bool(x > y),
                    Bin::Ge => V::Bool(x >= y),
                    Bin::Eq => V::Bool(x == y),
                    Bin::Ne => V::Bool(x != y),
                    _ => return None,
                }
            }
        },
        Kind::Call(Builtin::Min | Builtin::Max, args) if args.len() == 2 => {
            let (x, y) = (num(&args[0])?, num(&args[1])?);
            V::Num(if matches!(n.kind, Kind::Call(Builtin::Min, _)) {
                gpol_compiler::ops::min(x, y)
            } else {
                gpol_compiler::ops::max(x, y)
            })
        }
        _ => return None,
    })
}
