//! The share argument: every eviction leaves the claimant's queue below each victim's
//! queue in one measure of what a queue holds, a measure that grows strictly with the
//! queue's holding of the one resource the quota tree governs (KAI's utilization ratio,
//! GPUs held over a fixed share of them). Victims then hold that resource, so each
//! victim's queue falls, and the claimant's rises to below where a victim's queue was:
//! the leaves' values, sorted, fall lexicographically with every eviction.
//!
//! Measures are read from the IR: `k · Q.allocated.R` (`allocated_after` on either side)
//! with `k > 0`, or that over an amount fixed while no job arrives or ends (`Q.fair_share`,
//! `Q.weight`, the written quotas, `cluster.total`, constants) guarded as `std.fair.ratio`
//! writes it: `if F > 0 then A / F else 0`. A guarded measure is 0 wherever `F ≤ 0`, where
//! it does not grow, so only a strict comparison proves anything with it.

use crate::hir::{Policy, Resource};
use crate::ir::QuotaKind;
use crate::ir::{Bin, Kind, Node};
use crate::schema::{Record, Root};
use std::collections::HashMap;

/// A measure of a queue: `k ×` its holding of resource field `res` (of the resources
/// record), over the fixed amount `over` (as text, `Q` standing for the queue) if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Measure {
    pub res: u16,
    pub k: f64,
    pub over: Option<String>,
}

impl Measure {
    /// The measure in words.
    pub(crate) fn describe(&self) -> String {
        let res = Record::Resources.fields().get(usize::from(self.res)).map_or("?", |f| f.name);
        let held =
            if self.k == 1.0 { format!("Q.allocated.{res}") } else { format!("{} × Q.allocated.{res}", self.k) };
        match &self.over {
            Some(f) => format!("{held} ÷ {f}"),
            None => held,
        }
    }
}

/// Symbolic values of the expressions a measure is built from.
#[derive(Clone, Debug)]
enum Sx {
    Num(f64),
    /// The claimant's queue (`true`) or the victim's.
    Queue(bool),
    /// A queue's `allocated` (or `allocated_after`) record.
    Held {
        side: bool,
        after: bool,
    },
    /// `k ×` a queue's holding of one resource.
    Amount(Amount),
    /// A value fixed while no job arrives or ends, as text (`Q` for the queue of `side`).
    Fixed {
        side: Option<bool>,
        text: String,
    },
    /// A resources record fixed so (a written quota, the cluster's total).
    FixedRes {
        side: Option<bool>,
        text: String,
    },
    /// An amount over a fixed value (of the queue of `side`, if any), not yet guarded
    /// against that value being ≤ 0.
    Quotient {
        amount: Amount,
        side: Option<bool>,
        fixed: String,
    },
    /// A measure of the claimant's or the victim's queue, with or without the eviction.
    Measure {
        amount: Amount,
        over: Option<String>,
    },
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Amount {
    side: bool,
    after: bool,
    res: u16,
    k: f64,
}

type Env = HashMap<u32, Sx>;

/// Queue fields fixed while no job arrives or ends (`fair_share` follows demand, which
/// counts running and waiting jobs alike).
const FIXED_QUEUE: [&str; 3] = ["fair_share", "weight", "depth"];
const FIXED_QUEUE_RES: [&str; 5] = ["guarantee", "limit", "borrow_limit", "lend_limit", "lendable"];

fn field_name(record: Record, field: u16) -> &'static str {
    record.fields().get(usize::from(field)).map_or("", |f| f.name)
}

/// Two sides of fixed values combined: the one that is set, unless they differ.
fn same_side(a: Option<bool>, b: Option<bool>) -> Option<Option<bool>> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => None,
        (x, y) => Some(x.or(y)),
    }
}

fn eval(n: &Node, env: &Env) -> Sx {
    match &n.kind {
        Kind::Num(x) if x.is_finite() => Sx::Num(*x),
        Kind::Local(l) => env.get(l).cloned().unwrap_or(Sx::Unknown),
        Kind::Let(l, v, body) => {
            let mut inner = env.clone();
            inner.insert(*l, eval(v, env));
            eval(body, &inner)
        }
        Kind::Field { base, record, field } => {
            let name = field_name(*record, *field);
            match (record, &base.kind, eval(base, env)) {
                (Record::Job, Kind::Root(Root::Claimant), _) if name == "queue" => Sx::Queue(true),
                (Record::Job, Kind::Root(Root::Victim), _) if name == "queue" => Sx::Queue(false),
                (Record::Queue, _, Sx::Queue(side)) => match name {
                    "allocated" => Sx::Held { side, after: false },
                    "allocated_after" => Sx::Held { side, after: true },
                    f if FIXED_QUEUE.contains(&f) => Sx::Fixed { side: Some(side), text: format!("Q.{f}") },
                    f if FIXED_QUEUE_RES.contains(&f) => Sx::FixedRes { side: Some(side), text: format!("Q.{f}") },
                    _ => Sx::Unknown,
                },
                (Record::Resources, _, Sx::Held { side, after }) => {
                    Sx::Amount(Amount { side, after, res: *field, k: 1.0 })
                }
                (Record::Resources, _, Sx::FixedRes { side, text }) => {
                    Sx::Fixed { side, text: format!("{text}.{name}") }
                }
                (Record::Cluster, Kind::Root(Root::Cluster), _) if name == "total" => {
                    Sx::FixedRes { side: None, text: "cluster.total".into() }
                }
                _ => Sx::Unknown,
            }
        }
        Kind::Bin(op, a, b) => arith(*op, eval(a, env), eval(b, env)),
        Kind::If(cond, then, otherwise) => guarded(cond, eval(then, env), eval(otherwise, env), env),
        _ => Sx::Unknown,
    }
}

fn arith(op: Bin, a: Sx, b: Sx) -> Sx {
    let text = |x: &Sx| match x {
        Sx::Num(v) => Some((None, format!("{v}"))),
        Sx::Fixed { side, text } => Some((*side, text.clone())),
        _ => None,
    };
    let symbol = match op {
        Bin::Add => "+",
        Bin::Sub => "−",
        Bin::Mul => "×",
        Bin::Div => "÷",
        _ => return Sx::Unknown,
    };
    match (op, &a, &b) {
        // `x × 1` and `x ÷ 1` (units divided out) are `x`.
        (Bin::Mul | Bin::Div, _, Sx::Num(one)) if *one == 1.0 => a,
        (_, Sx::Num(x), Sx::Num(y)) => {
            let v = match op {
                Bin::Add => x + y,
                Bin::Sub => x - y,
                Bin::Mul => x * y,
                _ => x / y,
            };
            if v.is_finite() { Sx::Num(v) } else { Sx::Unknown }
        }
        (Bin::Mul, Sx::Amount(m), Sx::Num(k)) | (Bin::Mul, Sx::Num(k), Sx::Amount(m)) if *k > 0.0 => {
            Sx::Amount(Amount { k: m.k * k, ..*m })
        }
        (Bin::Div, Sx::Amount(m), Sx::Num(k)) if *k > 0.0 => Sx::Amount(Amount { k: m.k / k, ..*m }),
        (Bin::Div, Sx::Amount(m), Sx::Fixed { side, text }) if same_side(Some(m.side), *side).is_some() => {
            Sx::Quotient { amount: *m, side: *side, fixed: text.clone() }
        }
        _ => match (text(&a), text(&b)) {
            (Some((sa, ta)), Some((sb, tb))) => match same_side(sa, sb) {
                Some(side) => Sx::Fixed { side, text: format!("({ta} {symbol} {tb})") },
                None => Sx::Unknown,
            },
            _ => Sx::Unknown,
        },
    }
}

/// `if F > 0 then A / F else 0`: a measure.
fn guarded(cond: &Node, then: Sx, otherwise: Sx, env: &Env) -> Sx {
    let Kind::Bin(Bin::Gt, f, zero) = &cond.kind else { return Sx::Unknown };
    let (Sx::Fixed { side: guard_side, text }, Sx::Num(z)) = (eval(f, env), eval(zero, env)) else {
        return Sx::Unknown;
    };
    match (then, otherwise) {
        // The guard must be on the very value divided by: the same text of the same queue.
        (Sx::Quotient { amount, side, fixed }, Sx::Num(o))
            if fixed == text && side == guard_side && z == 0.0 && o == 0.0 =>
        {
            Sx::Measure { amount, over: Some(fixed) }
        }
        _ => Sx::Unknown,
    }
}

/// The measure a value is, with its side and whether it counts the eviction.
fn measure(x: Sx) -> Option<(Amount, Option<String>)> {
    match x {
        Sx::Amount(a) => Some((a, None)),
        Sx::Measure { amount, over } => Some((amount, over)),
        _ => None,
    }
}

/// What a condition implies: the measures in which it puts the claimant's queue, with
/// the claimant admitted, below the victim's; `None` when it never holds.
fn implied(n: &Node, env: &Env) -> Option<Vec<Measure>> {
    match &n.kind {
        Kind::Bool(false) => None,
        Kind::Bin(Bin::And, a, b) => match (implied(a, env), implied(b, env)) {
            (None, _) | (_, None) => None,
            (Some(mut x), Some(y)) => {
                x.extend(y);
                Some(x)
            }
        },
        Kind::Bin(Bin::Or, a, b) | Kind::If(_, a, b) => match (implied(a, env), implied(b, env)) {
            (None, s) | (s, None) => s,
            (Some(x), Some(y)) => Some(x.into_iter().filter(|m| y.contains(m)).collect()),
        },
        Kind::Let(l, v, body) => {
            let mut inner = env.clone();
            inner.insert(*l, eval(v, env));
            implied(body, &inner)
        }
        Kind::Bin(op @ (Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge), a, b) => {
            let (low, high) = match op {
                Bin::Lt | Bin::Le => (a, b),
                _ => (b, a),
            };
            let strict = matches!(op, Bin::Lt | Bin::Gt);
            Some(below(measure(eval(low, env)), measure(eval(high, env)), strict).into_iter().collect())
        }
        _ => Some(Vec::new()),
    }
}

/// The measure `low < high` (or `<=`, not `strict`) proves the claimant's queue below the
/// victim's in: the claimant's side counting it admitted, the same measure on both sides,
/// and a comparison that forces the victim's queue to fall (strict, unless the victim's
/// side counts the eviction and the measure is unguarded, so that it falls whatever).
fn below(
    low: Option<(Amount, Option<String>)>,
    high: Option<(Amount, Option<String>)>,
    strict: bool,
) -> Option<Measure> {
    let ((c, over_c), (v, over_v)) = (low?, high?);
    let same = c.side && !v.side && c.after && c.res == v.res && c.k == v.k && over_c == over_v;
    (same && (strict || (v.after && over_v.is_none()))).then_some(Measure { res: c.res, k: c.k, over: over_c })
}

/// The measure every rule puts the claimant below the victim in, if the policy's rules
/// are all `reclaim` and `borrow` rules (victims of other queues) and its quota tree
/// governs only the resource that measure counts.
pub(crate) fn prove(policy: &Policy, rules: &[&crate::ir::VictimRule]) -> Option<Measure> {
    use crate::ir::VictimKind;
    if rules.iter().any(|r| r.kind == VictimKind::Preempt) {
        return None;
    }
    let mut common: Option<Vec<Measure>> = None;
    for r in rules {
        let Some(measures) = implied(&r.when.node, &Env::new()) else { continue };
        common = Some(match common {
            None => measures,
            Some(c) => c.into_iter().filter(|m| measures.contains(m)).collect(),
        });
    }
    // Every resource some queue guarantees in some phase of the week (quota windows).
    let windowed = policy.queues.iter().flat_map(|q| &q.windows).filter(|w| w.kind == QuotaKind::Guarantee);
    let governed: Vec<&'static str> = policy
        .queues
        .iter()
        .filter_map(|q| q.quota(QuotaKind::Guarantee))
        .chain(windowed.map(|w| &w.amounts))
        .flat_map(|g| g.keys())
        .map(|r| match r {
            Resource::Gpu(_) => "gpu",
            Resource::Cpu => "cpu",
            Resource::Mem => "mem",
        })
        .collect();
    common?.into_iter().find(|m| {
        let res = field_name(Record::Resources, m.res);
        !governed.is_empty() && governed.iter().all(|g| *g == res)
    })
}
