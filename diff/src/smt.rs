//! The optional SMT back end: where the decision regions do not apply (a comparison of
//! two fields, `claimant.priority - victim.priority >= 100`; a field against a queue's
//! attribute; products), z3 — when it is on `PATH`, never required — enumerates every
//! combination of answers the rules' *atoms* (comparisons, flags, string and enum matches)
//! can take together over the reals, one model per combination, and both versions are
//! evaluated at each model by the regions' evaluator, in the engines' arithmetic.
//!
//! Over the reals is not over doubles: `cp - vp >= 100` and `vp + 100 <= cp` are one
//! condition for the reals and part where rounding bites (cp near 2^57). So a comparison
//! whose atoms add, subtract, multiply or divide is *equal over the reals*, reported as
//! equivalent up to that bound, never proved (z3's floating-point theory would decide it
//! exactly, but took 55 s to show that one subtraction is the negation of the other).
//! Atoms that only compare fields, constants (written exactly: every double is a
//! rational), attributes, negations, minima and maxima answer the same over both, so
//! agreement there is a proof. A model whose answers the engines' arithmetic does not
//! reproduce (a rational between two doubles) leaves the decision unproved.
//!
//! z3 runs as `z3 -in` on a pipe with a time limit per query and per process; symbols are
//! numbered (names never reach the solver), and an `unknown`, a combination count past
//! [`MAX_COMBINATIONS`] or anything unexpected gives no verdict from the solver.

use crate::canon::Names;
use crate::regions::{self, Observe, Regions, Rules, V, Var};
use gpol_compiler::hir::Builtin;
use gpol_compiler::ir::{AttrValue, Bin, Kind, Node, VTy};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Combinations of atom answers enumerated at most (both passes together).
pub const MAX_COMBINATIONS: usize = 4096;
/// Milliseconds one query may take.
const QUERY_MS: u32 = 5000;
/// Seconds one solver process may run (one pass of one decision kind).
const PROCESS_SECONDS: u32 = 60;
/// Differing points kept.
const KEPT_POINTS: usize = 64;

/// A running z3.
struct Solver {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Solver {
    /// z3 reading SMT-LIB from a pipe, if it is installed.
    fn start() -> Option<Solver> {
        let mut child = Command::new("z3")
            .args(["-in", "-smt2", &format!("-T:{PROCESS_SECONDS}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let input = child.stdin.take()?;
        let output = BufReader::new(child.stdout.take()?);
        let mut s = Solver { child, input, output };
        s.send(&format!("(set-option :produce-models true)\n(set-option :timeout {QUERY_MS})\n"))?;
        Some(s)
    }

    fn send(&mut self, text: &str) -> Option<()> {
        self.input.write_all(text.as_bytes()).ok()?;
        self.input.flush().ok()
    }

    /// One balanced s-expression (or atom) of the solver's answer, as text; `None` at the
    /// end of its output (it exits at its time limit) or past 1 MiB.
    fn read(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut depth = 0i64;
        let mut quoted: Option<char> = None;
        loop {
            let mut line = String::new();
            if self.output.read_line(&mut line).ok()? == 0 {
                return None;
            }
            for c in line.chars() {
                match (quoted, c) {
                    (Some(q), c) if c == q => quoted = None,
                    (Some(_), _) => {}
                    (None, '|' | '"') => quoted = Some(c),
                    (None, '(') => depth += 1,
                    (None, ')') => depth -= 1,
                    _ => {}
                }
            }
            out.push_str(&line);
            if depth <= 0 && quoted.is_none() && !out.trim().is_empty() {
                return Some(out);
            }
            if out.len() > 1 << 20 {
                return None;
            }
        }
    }

    /// `Some(true)` sat, `Some(false)` unsat, `None` unknown or no answer.
    fn check(&mut self) -> Option<bool> {
        self.send("(check-sat)\n")?;
        match self.read()?.trim() {
            "sat" => Some(true),
            "unsat" => Some(false),
            _ => None,
        }
    }
}

impl Drop for Solver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether z3 is installed (the back end is used only then).
pub fn available() -> bool {
    Command::new("z3").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// What the translation knows: variables (numbered for the solver) and the code of each
/// string literal.
#[derive(Default)]
struct Scope {
    vars: BTreeMap<String, Var>,
    ids: BTreeMap<String, usize>,
    /// Every string literal of either version, coded from 1 (0: absent). Past the last,
    /// each string variable may take any of as many other strings as there are string
    /// variables, so that two of them can differ from every literal and from each other.
    strings: Vec<String>,
    /// The queues both versions declare, coded from 0: what a job's queue ranges over.
    queues: Vec<String>,
}

impl Scope {
    fn code(&self, s: &str) -> Option<usize> {
        self.strings.iter().position(|x| x == s).map(|i| i + 1)
    }

    fn string_codes(&self) -> usize {
        self.strings.len() + self.vars.values().filter(|v| matches!(v, Var::Str(_))).count()
    }

    /// A variable read by `n`, recorded, with its solver symbol.
    fn var(&mut self, n: &Node, names: &Names<'_>) -> Option<(String, Var, String)> {
        let (name, var) = regions::variable(n, names)?;
        if let (Var::Num { optional, .. }, Var::Num { optional: more, .. }) =
            (self.vars.entry(name.clone()).or_insert(var.clone()), &var)
        {
            *optional |= *more;
        }
        let next = self.ids.len();
        let id = *self.ids.entry(name.clone()).or_insert(next);
        Some((name, var, format!("v{id}")))
    }

    fn sym(&self, name: &str) -> Option<String> {
        self.ids.get(name).map(|id| format!("v{id}"))
    }

    fn present(&self, name: &str) -> Option<String> {
        self.ids.get(name).map(|id| format!("p{id}"))
    }
}

/// A double as the exact rational it is (`0.1` is not one tenth).
fn number(x: f64) -> Option<String> {
    if !x.is_finite() {
        return None;
    }
    let bits = x.to_bits();
    let (negative, exponent, fraction) = (bits >> 63 == 1, ((bits >> 52) & 0x7ff) as i64, bits & ((1 << 52) - 1));
    // x = mantissa · 2^power, exactly.
    let (mut mantissa, mut power) = match exponent {
        0 => (fraction, -1074),
        e => (fraction | 1 << 52, e - 1075),
    };
    // In lowest terms: `8.0`, `(/ 1.0 4.0)`.
    while mantissa != 0 && mantissa % 2 == 0 && power < 0 {
        (mantissa, power) = (mantissa / 2, power + 1);
    }
    if mantissa == 0 {
        power = 0;
    }
    let value = match power {
        p if p >= 0 => format!("{}.0", decimal_times_power_of_two(mantissa, p as u32)),
        p => format!("(/ {}.0 {}.0)", mantissa, decimal_times_power_of_two(1, p.unsigned_abs() as u32)),
    };
    Some(if negative { format!("(- {value})") } else { value })
}

/// `m · 2^p` in decimal digits (p up to 1074: beyond any machine integer).
fn decimal_times_power_of_two(m: u64, p: u32) -> String {
    // Little-endian base-10^9 limbs.
    let mut limbs: Vec<u64> = vec![m % 1_000_000_000, m / 1_000_000_000 % 1_000_000_000, m / 1_000_000_000_000_000_000];
    for _ in 0..p {
        let mut carry = 0;
        for l in limbs.iter_mut() {
            let v = *l * 2 + carry;
            (*l, carry) = (v % 1_000_000_000, v / 1_000_000_000);
        }
        if carry > 0 {
            limbs.push(carry);
        }
    }
    while limbs.len() > 1 && limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut out = limbs.last().map_or("0".into(), |l| l.to_string());
    for l in limbs.iter().rev().skip(1) {
        out.push_str(&format!("{l:09}"));
    }
    out
}

/// A term of one version's expression; `None` outside what is translated.
fn term(n: &Node, names: &Names<'_>, scope: &mut Scope) -> Option<String> {
    macro_rules! go {
        ($x:expr) => {
            term($x, names, scope)
        };
    }
    Some(match &n.kind {
        Kind::Num(x) => number(*x)?,
        Kind::Bool(b) => b.to_string(),
        Kind::Enum(e) => e.to_string(),
        Kind::Str(i) => scope.code(names.program.literals.get(*i as usize)?)?.to_string(),
        Kind::Field { .. } | Kind::Label { .. } => match scope.var(n, names)? {
            // An optional is read through `unwrap` or `has`.
            (_, Var::Num { optional: true, .. }, _) => return None,
            (_, _, sym) => sym,
        },
        Kind::Attr { queue, attr } => {
            let (_, var, sym) = scope.var(queue, names)?;
            let Var::Queue(_) = var else { return None };
            // Each queue in turn: this version's value of the attribute.
            let queues = scope.queues.clone();
            let mut out = String::new();
            for (i, q) in queues.iter().enumerate().rev() {
                let at = names.policy.queue(q)?;
                let value = match names.program.attrs.get(at)?.get(usize::from(*attr))? {
                    AttrValue::Num(x) => number(*x)?,
                    AttrValue::Bool(b) => b.to_string(),
                    _ => return None,
                };
                out = if i + 1 == queues.len() { value } else { format!("(ite (= {sym} {i}) {value} {out})") };
            }
            out
        }
        Kind::IsSome(x) => match scope.var(x, names)? {
            (name, Var::Num { .. }, _) => scope.present(&name)?,
            (_, Var::Enum { optional: true, .. }, sym) => format!("(>= {sym} 0)"),
            (_, Var::Str(_), sym) => format!("(not (= {sym} 0))"),
            _ => return None,
        },
        Kind::Unwrap(x) => match scope.var(x, names) {
            Some((name, Var::Num { optional: true, .. }, sym)) => format!("(ite {} {sym} 0.0)", scope.present(&name)?),
            _ => go!(x)?,
        },
        Kind::Not(x) => format!("(not {})", go!(x)?),
        Kind::Neg(x) => format!("(- {})", go!(x)?),
        Kind::If(c, a, b) => format!("(ite {} {} {})", go!(c)?, go!(a)?, go!(b)?),
        Kind::Call(f @ (Builtin::Min | Builtin::Max), args) if args.len() == 2 => {
            let (a, b) = (go!(&args[0])?, go!(&args[1])?);
            let op = if *f == Builtin::Min { "<=" } else { ">=" };
            format!("(ite ({op} {a} {b}) {a} {b})")
        }
        // `x / 1 gpu`, `x * 1`: exact, and no rounding to speak of.
        Kind::Bin(Bin::Mul | Bin::Div, a, b) if matches!(b.kind, Kind::Num(x) if x == 1.0) => go!(a)?,
        Kind::Bin(Bin::Mul, a, b) if matches!(a.kind, Kind::Num(x) if x == 1.0) => go!(b)?,
        Kind::Bin(op, a, b) => {
            let divisor = matches!(b.kind, Kind::Num(x) if x != 0.0 && x.is_finite());
            let (x, y) = (go!(a)?, go!(b)?);
            let op = match op {
                Bin::And => "and",
                Bin::Or => "or",
                Bin::BitEq | Bin::Eq => "=",
                Bin::BitNe | Bin::Ne => return Some(format!("(not (= {x} {y}))")),
                Bin::Add => "+",
                Bin::Sub => "-",
                Bin::Mul => "*",
                // Division by a field may be by zero, which the reals do not model.
                Bin::Div if divisor => "/",
                Bin::Lt => "<",
                Bin::Le => "<=",
                Bin::Gt => ">",
                Bin::Ge => ">=",
                _ => return None,
            };
            format!("({op} {x} {y})")
        }
        _ => return None,
    })
}

/// The atoms of a boolean expression: what its connectives combine.
fn atoms<'n>(n: &'n Node, out: &mut Vec<&'n Node>) {
    match &n.kind {
        Kind::Bool(_) => {}
        Kind::Not(x) => atoms(x, out),
        Kind::Bin(Bin::And | Bin::Or, a, b) => {
            atoms(a, out);
            atoms(b, out);
        }
        Kind::If(c, a, b) if n.ty == VTy::Bool => {
            atoms(c, out);
            atoms(a, out);
            atoms(b, out);
        }
        _ => out.push(n),
    }
}

/// Every string literal in an expression.
fn literals(n: &Node, names: &Names<'_>, out: &mut BTreeSet<String>) {
    if let Kind::Str(i) = n.kind
        && let Some(s) = names.program.literals.get(i as usize)
    {
        out.insert(s.clone());
    }
    n.any_child(&mut |c| {
        literals(c, names, out);
        false
    });
}

/// Compares two versions' rules for a decision with z3, as [`regions::compare`] does by
/// enumeration; `NotApplicable` when z3 is absent or the rules are outside the method.
pub fn compare(old: &Rules<'_>, new: &Rules<'_>, decision: Observe<'_>, shared: &dyn Fn(&str) -> bool) -> Regions {
    let inlined = |r: &Rules<'_>| -> Option<Vec<Node>> {
        r.rules.iter().map(|(_, _, n)| regions::inline(n, &mut Vec::new(), &mut { regions::MAX_INLINED })).collect()
    };
    let (Some(old_bodies), Some(new_bodies)) = (inlined(old), inlined(new)) else { return Regions::NotApplicable };
    let mut scope = Scope::default();
    let mut strings = BTreeSet::new();
    for (bodies, r) in [(&old_bodies, old), (&new_bodies, new)] {
        for b in bodies.iter() {
            literals(b, r.names, &mut strings);
        }
    }
    scope.strings = strings.into_iter().collect();
    scope.queues = (old.names.policy.queues.iter())
        .filter(|q| new.names.policy.queue(&q.name).is_some())
        .map(|q| q.name.clone())
        .collect();
    // Atoms of both versions, by their term: (node, version, term).
    let mut atoms_found: Vec<(&Node, bool, String)> = Vec::new();
    for (bodies, r, is_new) in [(&old_bodies, old, false), (&new_bodies, new, true)] {
        for b in bodies.iter() {
            let mut found = Vec::new();
            atoms(b, &mut found);
            for a in found {
                let Some(t) = term(a, r.names, &mut scope) else { return Regions::NotApplicable };
                if !atoms_found.iter().any(|(_, _, x)| *x == t) {
                    atoms_found.push((a, is_new, t));
                }
            }
        }
    }
    let no_queue = scope.queues.is_empty() && scope.vars.values().any(|v| matches!(v, Var::Queue(_)));
    if scope.vars.keys().any(|v| !shared(v)) || atoms_found.is_empty() || no_queue {
        return Regions::NotApplicable;
    }
    let run = Run {
        scope: &scope,
        atoms: &atoms_found,
        old,
        new,
        old_bodies: &old_bodies,
        new_bodies: &new_bodies,
        decision,
    };
    let mut differ = Vec::new();
    let Some(combinations) = run.enumerate(&mut differ) else {
        // The solver gave up: a point where the versions differ still stands.
        return if differ.is_empty() { Regions::NotApplicable } else { Regions::Differ(differ) };
    };
    if !differ.is_empty() {
        return Regions::Differ(differ);
    }
    if combinations == 0 {
        // Not one combination: the constraints contradict each other, which proves nothing.
        return Regions::NotApplicable;
    }
    let fields = scope.vars.keys().cloned().collect();
    let rounds = atoms_found.iter().any(|(n, _, _)| rounds(n));
    match rounds {
        false => Regions::Equal { points: combinations, fields },
        true => Regions::EqualOverReals { combinations, fields },
    }
}

/// Whether an expression does arithmetic that rounds (a sum, difference, product or
/// quotient; `x * 1` and `x / 1` are exact).
fn rounds(n: &Node) -> bool {
    let one = |x: &Node| matches!(x.kind, Kind::Num(v) if v == 1.0);
    match &n.kind {
        Kind::Bin(Bin::Mul | Bin::Div, a, b) if one(b) => rounds(a),
        Kind::Bin(Bin::Mul, a, b) if one(a) => rounds(b),
        Kind::Bin(Bin::Add | Bin::Sub | Bin::Mul | Bin::Div, _, _) => true,
        _ => n.any_child(&mut |c| rounds(c)),
    }
}

/// One comparison's solver run.
struct Run<'r, 'a> {
    scope: &'r Scope,
    atoms: &'r [(&'r Node, bool, String)],
    old: &'r Rules<'a>,
    new: &'r Rules<'a>,
    old_bodies: &'r [Node],
    new_bodies: &'r [Node],
    decision: Observe<'r>,
}

impl Run<'_, '_> {
    /// Enumerates every combination of atom answers, evaluating both versions at each
    /// model and adding the points where they differ; the number of combinations, or
    /// `None` when there is no verdict (the solver gave up, too many combinations, or a
    /// model the engines' arithmetic answers otherwise than z3).
    fn enumerate(&self, differ: &mut Vec<BTreeMap<String, V>>) -> Option<u64> {
        let scope = self.scope;
        let mut solver = Solver::start()?;
        let mut script = String::new();
        let codes = scope.string_codes();
        for (name, var) in &scope.vars {
            let s = scope.sym(name)?;
            match var {
                Var::Num { optional, .. } => {
                    script.push_str(&format!("(declare-const {s} Real)\n"));
                    if *optional {
                        script.push_str(&format!("(declare-const {} Bool)\n", scope.present(name)?));
                    }
                }
                Var::Bool => script.push_str(&format!("(declare-const {s} Bool)\n")),
                Var::Str(_) => script.push_str(&format!("(declare-const {s} Int)\n(assert (<= 0 {s} {codes}))\n")),
                Var::Enum { optional, variants } => script.push_str(&format!(
                    "(declare-const {s} Int)\n(assert (<= {} {s} {}))\n",
                    if *optional { -1 } else { 0 },
                    i64::from(*variants) - 1
                )),
                Var::Queue(_) => {
                    let last = scope.queues.len() as i64 - 1;
                    script.push_str(&format!("(declare-const {s} Int)\n(assert (<= 0 {s} {last}))\n"))
                }
            }
        }
        for (i, (_, _, t)) in self.atoms.iter().enumerate() {
            script.push_str(&format!("(define-fun a{i} () Bool {t})\n"));
        }
        solver.send(&script)?;
        let mut asked: Vec<String> = (0..self.atoms.len()).map(|i| format!("a{i}")).collect();
        for (name, var) in &scope.vars {
            asked.push(scope.sym(name)?);
            if matches!(var, Var::Num { optional: true, .. }) {
                asked.push(scope.present(name)?);
            }
        }
        let mut combinations = 0u64;
        while solver.check()? {
            combinations += 1;
            if combinations > MAX_COMBINATIONS as u64 {
                return None;
            }
            solver.send(&format!("(get-value ({}))\n", asked.join(" ")))?;
            let model = solver.read().and_then(|t| parse_model(&t))?;
            let signs: Vec<bool> =
                (0..self.atoms.len()).map(|i| model.get(&format!("a{i}"))?.as_bool()).collect::<Option<_>>()?;
            let point = point_of(&model, scope)?;
            let at: BTreeMap<&str, &V> = point.iter().map(|(k, v)| (k.as_str(), v)).collect();
            // The engines' arithmetic must answer as z3 did (a rational between two
            // doubles may not), else the combination is not checked: no verdict.
            let agrees = self.atoms.iter().zip(&signs).all(|((node, is_new, _), &sign)| {
                let names = if *is_new { self.new.names } else { self.old.names };
                regions::eval(node, &at, names) == Some(V::Bool(sign))
            });
            if !agrees {
                return None;
            }
            let answers = |bodies: &[Node], r: &Rules<'_>| -> Option<Vec<regions::Answer>> {
                (bodies.iter().zip(&r.rules))
                    .map(|(b, (name, is_static, _))| match regions::eval(b, &at, r.names)? {
                        V::Bool(x) => Some((name.clone(), *is_static, x)),
                        _ => None,
                    })
                    .collect()
            };
            let (a, b) = (answers(self.old_bodies, self.old)?, answers(self.new_bodies, self.new)?);
            if (self.decision)(&a) != (self.decision)(&b) {
                differ.push(point);
                if differ.len() >= KEPT_POINTS {
                    return Some(combinations);
                }
            }
            solver.send(&format!("(assert (not {}))\n", conjunction(&signs)))?;
        }
        Some(combinations)
    }
}

/// A combination of atom answers as one conjunction.
fn conjunction(signs: &[bool]) -> String {
    let parts: Vec<String> =
        signs.iter().enumerate().map(|(i, &s)| if s { format!("a{i}") } else { format!("(not a{i})") }).collect();
    format!("(and true {})", parts.join(" "))
}

/// A value of z3's model.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Bool(bool),
    Num(f64),
}

impl Value {
    fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Num(_) => None,
        }
    }

    fn as_num(&self) -> Option<f64> {
        match self {
            Value::Num(x) => Some(*x),
            Value::Bool(_) => None,
        }
    }
}

/// An s-expression.
#[derive(Debug)]
enum Sexp {
    Atom(String),
    List(Vec<Sexp>),
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '(' | ')' => out.push(c.to_string()),
            '|' => {
                let mut s = String::from("|");
                for d in chars.by_ref() {
                    s.push(d);
                    if d == '|' {
                        break;
                    }
                }
                out.push(s);
            }
            c if c.is_whitespace() => {}
            c => {
                let mut s = c.to_string();
                while let Some(&d) = chars.peek() {
                    if d == '(' || d == ')' || d.is_whitespace() {
                        break;
                    }
                    s.push(d);
                    chars.next();
                }
                out.push(s);
            }
        }
    }
    out
}

fn parse(tokens: &[String], at: &mut usize, depth: usize) -> Option<Sexp> {
    let t = tokens.get(*at)?;
    *at += 1;
    match t.as_str() {
        "(" if depth < 64 => {
            let mut items = Vec::new();
            while tokens.get(*at)? != ")" {
                items.push(parse(tokens, at, depth + 1)?);
            }
            *at += 1;
            Some(Sexp::List(items))
        }
        "(" | ")" => None,
        _ => Some(Sexp::Atom(t.clone())),
    }
}

/// A value: `true`, `3.0`, `(- 2.0)`, `(/ 1.0 3.0)`, `(- 1)`, a double
/// `(fp #b0 #b10000000010 #x0000000000000)` or `(_ +zero 11 53)`.
fn value(e: &Sexp) -> Option<Value> {
    let atom = |x: &Sexp| match x {
        Sexp::Atom(a) => Some(a.clone()),
        Sexp::List(_) => None,
    };
    match e {
        Sexp::Atom(a) if a == "true" => Some(Value::Bool(true)),
        Sexp::Atom(a) if a == "false" => Some(Value::Bool(false)),
        Sexp::Atom(a) => a.parse::<f64>().ok().map(Value::Num),
        Sexp::List(items) => match items.as_slice() {
            [Sexp::Atom(op), x] if op == "-" => Some(Value::Num(-value(x)?.as_num()?)),
            [Sexp::Atom(op), Sexp::Atom(x), Sexp::Atom(y)] if op == "/" => ratio(x, y).map(Value::Num),
            [Sexp::Atom(op), x, y] if op == "/" => Some(Value::Num(value(x)?.as_num()? / value(y)?.as_num()?)),
            [Sexp::Atom(op), s, e, m] if op == "fp" => {
                let (s, e, m) = (bits(&atom(s)?)?, bits(&atom(e)?)?, bits(&atom(m)?)?);
                (s.1 == 1 && e.1 == 11 && m.1 == 52).then(|| Value::Num(f64::from_bits(s.0 << 63 | e.0 << 52 | m.0)))
            }
            [Sexp::Atom(u), Sexp::Atom(k), ..] if u == "_" => match k.as_str() {
                "+zero" => Some(Value::Num(0.0)),
                "-zero" => Some(Value::Num(-0.0)),
                _ => None,
            },
            _ => None,
        },
    }
}

/// `a / b` of two decimal numerals, either of which may be far beyond a double (z3
/// writes 2^1049 out in full): from their leading digits and lengths.
fn ratio(a: &str, b: &str) -> Option<f64> {
    let scaled = |t: &str| -> Option<(f64, i32)> {
        let t = t.strip_suffix(".0").unwrap_or(t);
        if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let lead = &t[..t.len().min(17)];
        Some((lead.parse::<f64>().ok()?, (t.len() - lead.len()) as i32))
    };
    let ((x, ex), (y, ey)) = (scaled(a)?, scaled(b)?);
    if y == 0.0 {
        return None;
    }
    format!("{}e{}", x / y, ex - ey).parse::<f64>().ok()
}

/// A bit-vector literal (`#b101`, `#x1f`): its value and width.
fn bits(a: &str) -> Option<(u64, u32)> {
    if let Some(b) = a.strip_prefix("#b") {
        return (b.len() <= 64).then(|| Some((u64::from_str_radix(b, 2).ok()?, b.len() as u32))).flatten();
    }
    let h = a.strip_prefix("#x")?;
    (h.len() <= 16).then(|| Some((u64::from_str_radix(h, 16).ok()?, 4 * h.len() as u32))).flatten()
}

/// `((name value) …)` from `get-value`, by name (bars removed).
fn parse_model(text: &str) -> Option<BTreeMap<String, Value>> {
    let tokens = tokens(text);
    let Sexp::List(pairs) = parse(&tokens, &mut 0, 0)? else { return None };
    pairs
        .iter()
        .map(|p| match p {
            Sexp::List(kv) if kv.len() == 2 => {
                let Sexp::Atom(k) = &kv[0] else { return None };
                Some((k.trim_matches('|').to_string(), value(&kv[1])?))
            }
            _ => None,
        })
        .collect()
}

/// The model as a point of the regions' evaluator.
fn point_of(model: &BTreeMap<String, Value>, scope: &Scope) -> Option<BTreeMap<String, V>> {
    let mut out = BTreeMap::new();
    for (name, var) in &scope.vars {
        let x = model.get(&scope.sym(name)?)?;
        let v = match var {
            Var::Num { optional, .. } => {
                let here = !optional || model.get(&scope.present(name)?)?.as_bool()?;
                if here { V::Num(x.as_num()?) } else { V::None }
            }
            Var::Bool => V::Bool(x.as_bool()?),
            Var::Str(_) => {
                let code = x.as_num()? as usize;
                V::Str(match code {
                    0 => String::new(),
                    c if c <= scope.strings.len() => scope.strings[c - 1].clone(),
                    c => format!("\u{1}another {}", c - scope.strings.len()),
                })
            }
            Var::Enum { .. } => match x.as_num()? {
                c if c < 0.0 => V::None,
                c => V::Enum(c as u8),
            },
            Var::Queue(_) => V::Str(scope.queues.get(x.as_num()? as usize)?.clone()),
        };
        out.insert(name.clone(), v);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_read_as_values() {
        let m = parse_model("((a0 true) (v0 (- 2.5)) (|x| (/ 1.0 4.0)) (|q| 3))").expect("a model");
        assert_eq!(m["a0"], Value::Bool(true));
        assert_eq!(m["v0"], Value::Num(-2.5));
        assert_eq!(m["x"], Value::Num(0.25));
        assert_eq!(m["q"], Value::Num(3.0));
        assert!(parse_model("((a0 true)").is_none());
        assert!(parse_model(&"(".repeat(100)).is_none());
    }

    #[test]
    fn doubles_are_written_as_the_exact_rationals_they_are() {
        assert_eq!(number(8.0).as_deref(), Some("8.0"));
        assert_eq!(number(-0.25).as_deref(), Some("(- (/ 1.0 4.0))"));
        assert_eq!(number(0.0).as_deref(), Some("0.0"));
        assert_eq!(number(3.0).as_deref(), Some("3.0"));
        // 0.1 is 3602879701896397 / 2^55, not one tenth.
        assert_eq!(number(0.1).as_deref(), Some("(/ 3602879701896397.0 36028797018963968.0)"));
        assert_eq!(number(f64::NAN), None);
        assert_eq!(decimal_times_power_of_two(3, 70), "3541774862152233910272");
        assert!(number(f64::MAX).is_some_and(|t| t.len() > 300 && !t.contains('/')));
        assert!(number(5e-324).is_some_and(|t| t.starts_with("(/ 1.0 ")));
        for x in [100.0, -0.1, 1025.1, 2.0f64.powi(60)] {
            let t = number(x).expect("finite");
            let m = parse_model(&format!("((v0 {t}))")).expect("a model");
            assert_eq!(m["v0"], Value::Num(x), "{t}");
        }
        // Beyond a double's range, the numerals are read from their leading digits.
        let t = number(1e-300).expect("finite");
        let back = parse_model(&format!("((v0 {t}))")).and_then(|m| m["v0"].as_num()).expect("a number");
        assert!((back / 1e-300 - 1.0).abs() < 1e-12, "{t} read as {back}");
    }
}
