//! The static half of the no-cycle analysis: a proof, from the victim rules alone, that
//! no sequence of evictions can return the running jobs to an earlier state.
//!
//! Two arguments are tried, each a measure every allowed eviction strictly changes in
//! one direction:
//!
//! - **Order.** Every `preempt`, `reclaim` and `borrow` rule's condition implies that the
//!   claimant is above the victim in one lexicographic order of static job fields (say
//!   `claimant.priority > victim.priority`, or Kueue's `LowerOrNewerEqualPriority`: a
//!   higher priority, or an equal one and an earlier submission). Then every eviction
//!   replaces running jobs by one above all of them, and every start adds one: the
//!   running jobs' keys, sorted, rise lexicographically with every start and eviction, so
//!   no sequence of them without a job ending can come back to where it was.
//! - **Share.** Every rule is a `reclaim` or `borrow` rule whose condition puts the
//!   claimant's queue, with it admitted, below the victim's queue in one measure of the
//!   one resource the quota tree governs (KAI's utilization ratio): see `eviction_proof/share.rs`.
//! - **Reclaim.** The only rules are `reclaim` rules. Every eviction then leaves the
//!   claimant's queue within its guarantee of what it needs and takes a job holding a
//!   resource its queue borrows: the leaves' borrowed amounts fall, none rises, so no
//!   sequence of evictions comes back to where it was.
//!
//! Conditions are read from the IR (functions inlined, constants folded): comparisons
//! of linear forms over the two jobs' static numeric fields, under `and`, `or`, `if` and
//! `let`. Anything else proves nothing (the analysis is sound, not complete); the runtime's
//! bounded search then looks for a cycle.
//!
//! Public for the [`Argument`] the analyses give (`gpolc check` shows it) and for this
//! crate's tests of [`prove`].

mod share;

pub use share::Measure;

use crate::ir::VictimKind;
use crate::ir::{Bin, Kind, Node, Program};
use crate::schema::{Record, Root, Storage};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One key of an order: a static job field, larger (`true`) or smaller (`false`) first.
pub type Key = (u16, bool);

/// Why evictions cannot cycle.
#[derive(Clone, Debug, PartialEq)]
pub enum Argument {
    /// Every eviction rule puts the claimant above the victim in this order.
    Order(Vec<Key>),
    /// Every rule puts the claimant's queue below the victim's in this measure.
    Share(Measure),
    /// Only `reclaim` rules: borrowing falls with every eviction.
    Reclaim,
    /// No rule allows any eviction.
    NoEvictions,
}

impl Argument {
    /// The argument in words, naming the order's fields.
    pub fn describe(&self) -> String {
        match self {
            Argument::Order(keys) => {
                let fields = Record::Job.fields();
                let names: Vec<String> = keys
                    .iter()
                    .map(|&(f, up)| {
                        let name = fields.get(usize::from(f)).map_or("?", |x| x.name);
                        format!("{name} {}", if up { "higher" } else { "lower" })
                    })
                    .collect();
                format!(
                    "every eviction puts a claimant above each of its victims ({}), so the running jobs only ever rise in that order",
                    names.join(", then ")
                )
            }
            Argument::Share(m) => format!(
                "every eviction leaves the claimant's queue below each victim's queue in {}, which grows strictly with what the queue holds of the one resource the quota tree governs: the queues' values, sorted, only ever fall",
                m.describe()
            ),
            Argument::Reclaim => {
                "every eviction is a reclaim: the claimant's queue ends within its guarantee and borrowing falls".into()
            }
            Argument::NoEvictions => "no rule allows an eviction".into(),
        }
    }
}

/// W0009 at the policy's eviction rules: no argument shows that they cannot cycle.
pub(crate) fn not_proved(policy: &crate::hir::Policy) -> crate::diag::Diagnostic {
    use crate::diag::{Code, Diagnostic};
    let mut rules = policy.victims.iter().filter(|v| v.kind != VictimKind::Protect);
    let first = rules.next();
    let mut d = Diagnostic::new(
        Code::EvictionsNotProved,
        first.map(|r| r.span).unwrap_or_default(),
        "nothing shows that these evictions cannot cycle",
    )
    .label("no order of static job fields puts every claimant above its victims")
    .help("require a strictly higher priority in every eviction rule, or evict across queues only by `reclaim`");
    for r in rules {
        d = d.with_secondary(r.span, format!("{} {}", r.kind.keyword(), r.name));
    }
    d
}

/// A proof that evictions cannot cycle, if one of the arguments applies (`program` is
/// `policy` lowered).
pub fn prove(policy: &crate::hir::Policy, program: &Program) -> Option<Argument> {
    let rules: Vec<_> = program.victims.iter().filter(|r| r.kind != VictimKind::Protect).collect();
    if rules.is_empty() {
        return Some(Argument::NoEvictions);
    }
    // The orders every rule implies; a rule that never holds implies every order.
    let mut common: Option<BTreeSet<Vec<Key>>> = None;
    for r in &rules {
        let Facts { strict, .. } = facts(&r.when.node, &HashMap::new());
        let strict = match strict {
            Strict::Never => continue,
            Strict::Keys(k) => k,
        };
        common = Some(match common {
            None => strict,
            Some(c) => meet(&c, &strict),
        });
    }
    match common {
        None => Some(Argument::NoEvictions),
        Some(c) if !c.is_empty() => c.into_iter().min_by_key(Vec::len).map(Argument::Order),
        Some(_) if let Some(m) = share::prove(policy, &rules) => Some(Argument::Share(m)),
        Some(_) if rules.iter().all(|r| r.kind == VictimKind::Reclaim) => Some(Argument::Reclaim),
        Some(_) => None,
    }
}

/// The orders that hold whenever both sets' do: an order implied on each side, or, where
/// one side's order is a prefix of the other's, the longer (above in a prefix is above in
/// any extension).
fn meet(a: &BTreeSet<Vec<Key>>, b: &BTreeSet<Vec<Key>>) -> BTreeSet<Vec<Key>> {
    let mut out = BTreeSet::new();
    for x in a {
        for y in b {
            if y.starts_with(x) {
                out.insert(y.clone());
            } else if x.starts_with(y) {
                out.insert(x.clone());
            }
        }
    }
    out
}

/// What a condition implies when it holds.
#[derive(Clone, Debug)]
struct Facts {
    /// Orders in which the claimant is strictly above the victim.
    strict: Strict,
    /// Fields on which the two are equal.
    equal: BTreeSet<u16>,
}

#[derive(Clone, Debug)]
enum Strict {
    /// The condition never holds: it implies everything.
    Never,
    Keys(BTreeSet<Vec<Key>>),
}

impl Facts {
    fn nothing() -> Facts {
        Facts { strict: Strict::Keys(BTreeSet::new()), equal: BTreeSet::new() }
    }
}

/// A linear form over the two jobs' static numeric fields: `Σ coeff · term + constant`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Linear {
    terms: BTreeMap<(bool, u16), f64>,
    constant: f64,
}

impl Linear {
    fn scale(mut self, k: f64) -> Linear {
        for v in self.terms.values_mut() {
            *v *= k;
        }
        self.constant *= k;
        self
    }

    fn add(mut self, other: Linear) -> Linear {
        for (t, v) in other.terms {
            *self.terms.entry(t).or_insert(0.0) += v;
        }
        self.constant += other.constant;
        self.terms.retain(|_, v| *v != 0.0);
        self
    }

    /// `k · (claimant.F − victim.F) + c` with `k ≠ 0`: `(F, k, c)`.
    fn difference(&self) -> Option<(u16, f64, f64)> {
        let mut it = self.terms.iter();
        let (&(side_a, fa), &ka) = it.next()?;
        let (&(side_b, fb), &kb) = it.next()?;
        if it.next().is_some() || fa != fb || side_a == side_b || ka != -kb || !self.constant.is_finite() {
            return None;
        }
        // `side` is true for the claimant.
        let k = if side_a { ka } else { kb };
        Some((fa, k, self.constant))
    }
}

/// What is known of the values of `let`-bound locals (inlined functions bind their
/// arguments so): a linear form, or a record root.
#[derive(Clone, Debug)]
enum Bound {
    Linear(Linear),
    Root(Root),
    Unknown,
}

type Env = HashMap<u32, Bound>;

fn bind(v: &Node, env: &Env) -> Bound {
    match (&v.kind, linear(v, env)) {
        (_, Some(l)) => Bound::Linear(l),
        (Kind::Root(r), None) => Bound::Root(*r),
        (Kind::Local(l), None) => env.get(l).cloned().unwrap_or(Bound::Unknown),
        _ => Bound::Unknown,
    }
}

fn linear(n: &Node, env: &Env) -> Option<Linear> {
    match &n.kind {
        Kind::Num(x) if x.is_finite() => Some(Linear { terms: BTreeMap::new(), constant: *x }),
        Kind::Field { base, record: Record::Job, field } => {
            let root = match &base.kind {
                Kind::Root(r) => *r,
                Kind::Local(l) => match env.get(l) {
                    Some(Bound::Root(r)) => *r,
                    _ => return None,
                },
                _ => return None,
            };
            let side = match root {
                Root::Claimant => true,
                Root::Victim => false,
                _ => return None,
            };
            let f = Record::Job.fields().get(usize::from(*field))?;
            let numeric = matches!(f.ty, crate::schema::FieldTy::Num(_)) && !f.optional;
            (numeric && matches!(f.storage, Storage::Static | Storage::Derived))
                .then(|| Linear { terms: BTreeMap::from([((side, *field), 1.0)]), constant: 0.0 })
        }
        Kind::Local(l) => match env.get(l) {
            Some(Bound::Linear(x)) => Some(x.clone()),
            _ => None,
        },
        Kind::Neg(x) => Some(linear(x, env)?.scale(-1.0)),
        Kind::Bin(Bin::Add, a, b) => Some(linear(a, env)?.add(linear(b, env)?)),
        Kind::Bin(Bin::Sub, a, b) => Some(linear(a, env)?.add(linear(b, env)?.scale(-1.0))),
        Kind::Bin(Bin::Mul, a, b) => {
            let (a, b) = (linear(a, env)?, linear(b, env)?);
            match (a.terms.is_empty(), b.terms.is_empty()) {
                (true, _) => Some(b.scale(a.constant)),
                (_, true) => Some(a.scale(b.constant)),
                _ => None,
            }
        }
        Kind::Bin(Bin::Div, a, b) => {
            let b = linear(b, env)?;
            (b.terms.is_empty() && b.constant != 0.0).then(|| linear(a, env).map(|a| a.scale(1.0 / b.constant)))?
        }
        Kind::Let(l, v, body) => {
            let mut inner = env.clone();
            inner.insert(*l, bind(v, env));
            linear(body, &inner)
        }
        _ => None,
    }
}

fn facts(n: &Node, env: &Env) -> Facts {
    match &n.kind {
        Kind::Bool(false) => Facts { strict: Strict::Never, equal: BTreeSet::new() },
        Kind::Bin(Bin::And, a, b) => {
            let (a, b) = (facts(a, env), facts(b, env));
            let equal: BTreeSet<u16> = a.equal.union(&b.equal).copied().collect();
            let strict = match (a.strict, b.strict) {
                (Strict::Never, _) | (_, Strict::Never) => Strict::Never,
                (Strict::Keys(x), Strict::Keys(y)) => {
                    let mut keys: BTreeSet<Vec<Key>> = x.union(&y).cloned().collect();
                    // Equal on `e` and above on `s`: above on `(e, s)`, either way up.
                    let extended: Vec<Vec<Key>> = keys
                        .iter()
                        .flat_map(|s| {
                            equal.iter().filter(|e| !s.iter().any(|(f, _)| f == *e)).flat_map(move |&e| {
                                [true, false].map(|up| std::iter::once((e, up)).chain(s.iter().copied()).collect())
                            })
                        })
                        .collect();
                    keys.extend(extended);
                    Strict::Keys(keys)
                }
            };
            Facts { strict, equal }
        }
        Kind::Bin(Bin::Or, a, b) => either(facts(a, env), facts(b, env)),
        Kind::If(_, a, b) => either(facts(a, env), facts(b, env)),
        Kind::Let(l, v, body) => {
            let mut inner = env.clone();
            inner.insert(*l, bind(v, env));
            facts(body, &inner)
        }
        Kind::Bin(op @ (Bin::Gt | Bin::Ge | Bin::Lt | Bin::Le | Bin::Eq), a, b) => {
            let (Some(a), Some(b)) = (linear(a, env), linear(b, env)) else { return Facts::nothing() };
            // `e op' 0` with op' one of >, >=, ==.
            let (e, op) = match op {
                Bin::Lt => (b.add(a.scale(-1.0)), Bin::Gt),
                Bin::Le => (b.add(a.scale(-1.0)), Bin::Ge),
                op => (a.add(b.scale(-1.0)), *op),
            };
            let Some((field, k, c)) = e.difference() else { return Facts::nothing() };
            match op {
                Bin::Eq if c == 0.0 => Facts { strict: Strict::Keys(BTreeSet::new()), equal: BTreeSet::from([field]) },
                // k·d + c > 0 gives d > −c/k: strictly above when −c/k ≥ 0; with >=, > 0.
                Bin::Gt | Bin::Ge => {
                    let bound = -c / k;
                    let strict = if op == Bin::Gt { bound >= 0.0 } else { bound > 0.0 };
                    let flipped_strict = if op == Bin::Gt { bound <= 0.0 } else { bound < 0.0 };
                    // With k > 0 the claimant's field is larger; with k < 0, smaller.
                    let key = if k > 0.0 && strict {
                        Some((field, true))
                    } else if k < 0.0 && flipped_strict {
                        Some((field, false))
                    } else {
                        None
                    };
                    Facts { strict: Strict::Keys(key.map(|k| vec![k]).into_iter().collect()), equal: BTreeSet::new() }
                }
                _ => Facts::nothing(),
            }
        }
        _ => Facts::nothing(),
    }
}

/// What holds whichever of two conditions does.
fn either(a: Facts, b: Facts) -> Facts {
    let equal = a.equal.intersection(&b.equal).copied().collect();
    let strict = match (a.strict, b.strict) {
        (Strict::Never, s) | (s, Strict::Never) => s,
        (Strict::Keys(x), Strict::Keys(y)) => Strict::Keys(meet(&x, &y)),
    };
    Facts { strict, equal }
}
