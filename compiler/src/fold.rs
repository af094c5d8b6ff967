//! Constant folding over checked expressions: evaluates what can be known at compile
//! time (literals, constants, arithmetic, calls with constant arguments) and gives up,
//! returning `None`, at the first read of a record. Work is bounded by
//! [`MAX_CONST_EVAL_STEPS`]: calls are evaluated, not inlined, but a function that calls
//! another twice still doubles the work at each level.

use crate::hir::{Builtin, Expr, ExprKind, FnId, Function, LocalId, Value};
use crate::kinds::CompKind;
use crate::limits::MAX_CONST_EVAL_STEPS;
use crate::ops;
use crate::syntax::{BinaryOp, UnaryOp};
use std::collections::HashMap;

/// Where the folder finds the functions a call refers to.
pub(crate) trait FnLookup {
    fn function(&self, id: FnId) -> Option<&Function>;
}

impl FnLookup for [Function] {
    fn function(&self, id: FnId) -> Option<&Function> {
        self.get(id)
    }
}

impl FnLookup for HashMap<FnId, Function> {
    fn function(&self, id: FnId) -> Option<&Function> {
        self.get(&id)
    }
}

/// What folding an expression found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Folded {
    Constant(Value),
    /// It reads a record (or is erroneous): only known while scheduling.
    NotConstant,
    /// Evaluating it takes more than [`MAX_CONST_EVAL_STEPS`]; the calls being evaluated
    /// when the budget ran out, outermost first.
    OverBudget(Vec<FnId>),
}

/// Folds `e`, calling the functions `functions` holds.
pub(crate) fn fold(functions: &dyn FnLookup, e: &Expr) -> Folded {
    let mut f = Folder { functions, locals: HashMap::new(), steps: 0, calls: Vec::new(), exhausted: None };
    match (f.eval(e), f.exhausted) {
        (_, Some(chain)) => Folded::OverBudget(chain),
        (Some(v), None) => Folded::Constant(v),
        (None, None) => Folded::NotConstant,
    }
}

struct Folder<'a> {
    functions: &'a dyn FnLookup,
    locals: HashMap<LocalId, Value>,
    steps: u64,
    /// Functions being evaluated, outermost first.
    calls: Vec<FnId>,
    exhausted: Option<Vec<FnId>>,
}

impl Folder<'_> {
    /// Counts `n` steps of work; false (and evaluation stops) once over the budget.
    fn spend(&mut self, n: u64) -> bool {
        self.steps = self.steps.saturating_add(n);
        if self.steps > MAX_CONST_EVAL_STEPS && self.exhausted.is_none() {
            self.exhausted = Some(self.calls.clone());
        }
        self.exhausted.is_none()
    }

    fn eval(&mut self, e: &Expr) -> Option<Value> {
        use ExprKind as K;
        if !self.spend(1) {
            return None;
        }
        Some(match &e.kind {
            K::Num(n) => Value::Num(*n),
            K::Bool(b) => Value::Bool(*b),
            K::Str(s) => Value::Str(s.clone()),
            K::Enum(k, v) => Value::Enum(*k, *v),
            K::List(items) => Value::List(items.iter().map(|i| self.eval(i)).collect::<Option<_>>()?),
            K::Local(id) => {
                let v = self.locals.get(id)?.clone();
                if let Value::List(items) = &v
                    && !self.spend(items.len() as u64)
                {
                    return None;
                }
                v
            }
            K::Root(_) | K::Field(..) | K::Level(..) | K::Attr(..) | K::Index(..) | K::Error => {
                return None;
            }
            K::Builtin(b, args) => self.builtin(*b, args)?,
            K::Call(f, args) => {
                let func = self.functions.function(*f)?;
                let vals = args.iter().map(|a| self.eval(a)).collect::<Option<Vec<_>>>()?;
                let params = func.params.iter().map(|(id, _)| *id).zip(vals).collect();
                let outer = std::mem::replace(&mut self.locals, params);
                self.calls.push(*f);
                let v = self.eval(&func.body);
                self.calls.pop();
                self.locals = outer;
                v?
            }
            K::Unary(UnaryOp::Not, x) => Value::Bool(!self.bool(x)?),
            K::Unary(UnaryOp::Neg, x) => Value::Num(-self.num(x)?),
            K::Binary(op, a, b) => self.binary(*op, a, b)?,
            K::If(c, t, f) => {
                if self.bool(c)? {
                    self.eval(t)?
                } else {
                    self.eval(f)?
                }
            }
            K::Let(id, v, body) => {
                let v = self.eval(v)?;
                self.locals.insert(*id, v);
                self.eval(body)?
            }
            K::Comprehension(kind, id, iter, body) => {
                let Value::List(items) = self.eval(iter)? else {
                    return None;
                };
                self.comprehension(*kind, *id, items, body)?
            }
        })
    }

    fn num(&mut self, e: &Expr) -> Option<f64> {
        self.eval(e)?.as_num()
    }

    fn bool(&mut self, e: &Expr) -> Option<bool> {
        match self.eval(e)? {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn builtin(&mut self, b: Builtin, args: &[Expr]) -> Option<Value> {
        if b == Builtin::Has {
            // `has` on a constant can only be of a present value.
            return self.eval(args.first()?).map(|_| Value::Bool(true));
        }
        let vals = args.iter().map(|a| self.eval(a)).collect::<Option<Vec<_>>>()?;
        let n = |i: usize| vals.get(i).and_then(Value::as_num);
        Some(Value::Num(match b {
            Builtin::Min => ops::min(n(0)?, n(1)?),
            Builtin::Max => ops::max(n(0)?, n(1)?),
            Builtin::Abs => n(0)?.abs(),
            Builtin::Floor => n(0)?.floor(),
            Builtin::Ceil => n(0)?.ceil(),
            Builtin::Round => ops::round(n(0)?),
            Builtin::Trunc => n(0)?.trunc(),
            Builtin::Mod => ops::modulo(n(0)?, n(1)?),
            Builtin::Clamp => ops::clamp(n(0)?, n(1)?, n(2)?),
            Builtin::Sqrt => n(0)?.sqrt(),
            Builtin::Exp2 => ops::exp2(n(0)?),
            Builtin::Log => ops::log(n(0)?),
            Builtin::Pow => ops::pow(n(0)?, n(1)?),
            Builtin::Hash01 => ops::hash01(key(vals.first()?)?, key(vals.get(1)?)?),
            Builtin::Len => match vals.first()? {
                Value::List(items) => items.len() as f64,
                _ => return None,
            },
            Builtin::Has => return None,
        }))
    }

    fn binary(&mut self, op: BinaryOp, a: &Expr, b: &Expr) -> Option<Value> {
        use BinaryOp as B;
        Some(match op {
            // Short-circuit like the engines do; a constant left side decides alone.
            B::And => Value::Bool(self.bool(a)? && self.bool(b)?),
            B::Or => Value::Bool(self.bool(a)? || self.bool(b)?),
            B::Implies => Value::Bool(!self.bool(a)? || self.bool(b)?),
            // Constants are never absent, so a constant left side is the answer.
            B::Default => return self.eval(a),
            B::In | B::NotIn => {
                let x = self.eval(a)?;
                let Value::List(items) = self.eval(b)? else {
                    return None;
                };
                let found = items.iter().any(|i| equal(i, &x));
                Value::Bool(found == (op == B::In))
            }
            B::Eq => Value::Bool(equal(&self.eval(a)?, &self.eval(b)?)),
            B::Ne => Value::Bool(!equal(&self.eval(a)?, &self.eval(b)?)),
            _ => {
                let (x, y) = (self.num(a)?, self.num(b)?);
                match op {
                    B::Lt => Value::Bool(x < y),
                    B::Le => Value::Bool(x <= y),
                    B::Gt => Value::Bool(x > y),
                    B::Ge => Value::Bool(x >= y),
                    B::Add => Value::Num(x + y),
                    B::Sub => Value::Num(x - y),
                    B::Mul => Value::Num(x * y),
                    _ => Value::Num(x / y),
                }
            }
        })
    }

    fn comprehension(&mut self, kind: CompKind, id: LocalId, items: Vec<Value>, body: &Expr) -> Option<Value> {
        let mut acc = match kind {
            CompKind::Any => Value::Bool(false),
            CompKind::All => Value::Bool(true),
            CompKind::Count | CompKind::Sum => Value::Num(0.0),
            CompKind::Min => Value::Num(f64::INFINITY),
            CompKind::Max => Value::Num(f64::NEG_INFINITY),
        };
        for item in items {
            self.locals.insert(id, item);
            let v = self.eval(body)?;
            acc = match (kind, acc, v) {
                (CompKind::Any, Value::Bool(a), Value::Bool(v)) => Value::Bool(a || v),
                (CompKind::All, Value::Bool(a), Value::Bool(v)) => Value::Bool(a && v),
                (CompKind::Count, Value::Num(a), Value::Bool(v)) => Value::Num(a + f64::from(u8::from(v))),
                (CompKind::Sum, Value::Num(a), Value::Num(v)) => Value::Num(a + v),
                (CompKind::Min, Value::Num(a), Value::Num(v)) => Value::Num(ops::min(a, v)),
                (CompKind::Max, Value::Num(a), Value::Num(v)) => Value::Num(ops::max(a, v)),
                _ => return None,
            };
        }
        Some(acc)
    }
}

/// Equality of values; numbers compare as IEEE floats (NaN is unequal to itself).
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Num(x), Value::Num(y)) => x == y,
        (Value::List(x), Value::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b)),
        _ => a == b,
    }
}

fn key(v: &Value) -> Option<u64> {
    Some(match v {
        Value::Num(n) => ops::num_key(*n),
        Value::Str(s) => ops::str_key(s),
        Value::Bool(b) => u64::from(*b),
        Value::Enum(_, i) => u64::from(*i),
        Value::List(_) => return None,
    })
}
