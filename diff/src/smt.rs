//! The optional SMT back end: where the decision regions do not apply (a comparison of
//! two fields, `claimant.priority - victim.priority >= 100`; a field against a queue's
//! attribute; products), z3 — when it is on `PATH`, never required — enumerates every
//! combination of answers the rules' comparisons can take together (each a sign vector
//! of the *atoms*: comparisons, flags, string and enum matches, over the reals), one
//! model per combination. Both versions are then evaluated at each model with the
//! engines' floating-point arithmetic: all agree, the decision is proved (over the reals:
//! rounding at a boundary is not modelled); one differs, it is a concrete point. A
//! model whose floating-point answers are not the combination z3 found makes no proof.
//!
//! z3 is driven through SMT-LIB 2 on a pipe (`z3 -in`), one query per combination,
//! each with a time limit; a combination count past [`MAX_COMBINATIONS`], an `unknown`
//! or anything unexpected from the solver gives up (no verdict from it).

use crate::canon::Names;
use crate::regions::{self, Observe, Regions, Rules, V, Var};
use gpol_compiler::hir::Builtin;
use gpol_compiler::ir::{AttrValue, Bin, Kind, Node, VTy};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// Combinations of atom answers enumerated at most.
pub const MAX_COMBINATIONS: usize = 4096;
/// Milliseconds one query may take.
const QUERY_MS: u32 = 5000;
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
            .args(["-in", "-smt2"])
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

    /// One balanced s-expression (or atom) of the solver's answer, as text.
    fn read(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut depth = 0i64;
        loop {
            let mut line = String::new();
            if self.output.read_line(&mut line).ok()? == 0 {
                return None;
            }
            depth += line.matches('(').count() as i64 - line.matches(')').count() as i64;
            out.push_str(&line);
            if depth <= 0 && !out.trim().is_empty() {
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

/// What the translation knows: variables, and the code of each string literal.
#[derive(Default)]
struct Scope {
    vars: BTreeMap<String, Var>,
    /// Every string literal of either version, coded from 1 (0: absent; past the last: any other).
    strings: Vec<String>,
    /// The queues both versions declare, coded from 0: what a job's queue ranges over.
    queues: Vec<String>,
}

impl Scope {
    fn code(&self, s: &str) -> Option<usize> {
        self.strings.iter().position(|x| x == s).map(|i| i + 1)
    }

    fn other(&self) -> usize {
        self.strings.len() + 1
    }

    /// A variable read by `n`, recorded.
    fn var(&mut self, n: &Node, names: &Names<'_>) -> Option<(String, Var)> {
        let (name, var) = regions::variable(n, names)?;
        if let (Var::Num { optional, .. }, Var::Num { optional: more, .. }) =
            (self.vars.entry(name.clone()).or_insert(var.clone()), &var)
        {
            *optional |= *more;
        }
        Some((name, var))
    }
}

fn sym(name: &str) -> String {
    format!("|{name}|")
}

fn present(name: &str) -> String {
    format!("|{name}?|")
}

fn real(x: f64) -> Option<String> {
    if !x.is_finite() {
        return None;
    }
    // Display never uses an exponent: a decimal literal SMT-LIB reads exactly.
    let digits = format!("{}", x.abs());
    let digits = if digits.contains('.') { digits } else { format!("{digits}.0") };
    Some(if x < 0.0 { format!("(- {digits})") } else { digits })
}

/// A term of one version's expression; `None` outside what is translated.
fn term(n: &Node, names: &Names<'_>, scope: &mut Scope) -> Option<String> {
    macro_rules! go {
        ($x:expr) => {
            term($x, names, scope)
        };
    }
    Some(match &n.kind {
        Kind::Num(x) => real(*x)?,
        Kind::Bool(b) => b.to_string(),
        Kind::Enum(e) => e.to_string(),
        Kind::Str(i) => scope.code(names.program.literals.get(*i as usize)?)?.to_string(),
        Kind::Field { .. } | Kind::Label { .. } => {
            let (name, var) = scope.var(n, names)?;
            match var {
                // An optional is read through `unwrap` or `has`.
                Var::Num { optional: true, .. } => return None,
                _ => sym(&name),
            }
        }
        Kind::Attr { queue, attr } => {
            let (name, var) = scope.var(queue, names)?;
            let Var::Queue(_) = var else { return None };
            // Each queue in turn: this version's value of the attribute.
            let queues = scope.queues.clone();
            let mut out = String::new();
            for (i, q) in queues.iter().enumerate().rev() {
                let at = names.policy.queue(q)?;
                let value = match names.program.attrs.get(at)?.get(usize::from(*attr))? {
                    AttrValue::Num(x) => real(*x)?,
                    AttrValue::Bool(b) => b.to_string(),
                    _ => return None,
                };
                out = if i + 1 == queues.len() { value } else { format!("(ite (= {} {i}) {value} {out})", sym(&name)) };
            }
            out
        }
        Kind::IsSome(x) => {
            let (name, var) = scope.var(x, names)?;
            match var {
                Var::Num { .. } => present(&name),
                Var::Enum { optional: true, .. } => format!("(>= {} 0)", sym(&name)),
                Var::Str(_) => format!("(not (= {} 0))", sym(&name)),
                _ => return None,
            }
        }
        Kind::Unwrap(x) => match scope.var(x, names) {
            Some((name, Var::Num { optional: true, .. })) => format!("(ite {} {} 0.0)", present(&name), sym(&name)),
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
        Kind::Bin(op, a, b) => {
            let divisor = matches!(b.kind, Kind::Num(x) if x != 0.0 && x.is_finite());
            let (x, y) = (go!(a)?, go!(b)?);
            match op {
                Bin::And => format!("(and {x} {y})"),
                Bin::Or => format!("(or {x} {y})"),
                Bin::BitEq | Bin::Eq => format!("(= {x} {y})"),
                Bin::BitNe | Bin::Ne => format!("(not (= {x} {y}))"),
                Bin::Add => format!("(+ {x} {y})"),
                Bin::Sub => format!("(- {x} {y})"),
                Bin::Mul => format!("(* {x} {y})"),
                // Division by a field may be by zero, which the reals do not model.
                Bin::Div if divisor => format!("(/ {x} {y})"),
                Bin::Lt => format!("(< {x} {y})"),
                Bin::Le => format!("(<= {x} {y})"),
                Bin::Gt => format!("(> {x} {y})"),
                Bin::Ge => format!("(>= {x} {y})"),
                _ => return None,
            }
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
    // Atoms of both versions, by their term: (term, node, which version's names).
    let mut atom_terms: Vec<String> = Vec::new();
    let mut atom_nodes: Vec<(&Node, bool)> = Vec::new();
    for (bodies, r, is_new) in [(&old_bodies, old, false), (&new_bodies, new, true)] {
        for b in bodies.iter() {
            let mut found = Vec::new();
            atoms(b, &mut found);
            for a in found {
                let Some(t) = term(a, r.names, &mut scope) else { return Regions::NotApplicable };
                if !atom_terms.contains(&t) {
                    atom_terms.push(t);
                    atom_nodes.push((a, is_new));
                }
            }
        }
    }
    let no_queue = scope.queues.is_empty() && scope.vars.values().any(|v| matches!(v, Var::Queue(_)));
    if scope.vars.keys().any(|v| !shared(v)) || atom_terms.is_empty() || no_queue {
        return Regions::NotApplicable;
    }
    let Some(mut solver) = Solver::start() else { return Regions::NotApplicable };
    let mut script = String::new();
    for (name, var) in &scope.vars {
        let s = sym(name);
        match var {
            Var::Num { optional, .. } => {
                script.push_str(&format!("(declare-const {s} Real)\n"));
                if *optional {
                    script.push_str(&format!("(declare-const {} Bool)\n", present(name)));
                }
            }
            Var::Bool => script.push_str(&format!("(declare-const {s} Bool)\n")),
            Var::Str(_) => {
                script.push_str(&format!("(declare-const {s} Int)\n(assert (<= 0 {s} {}))\n", scope.other()));
            }
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
    for (i, t) in atom_terms.iter().enumerate() {
        script.push_str(&format!("(define-fun a{i} () Bool {t})\n"));
    }
    if solver.send(&script).is_none() {
        return Regions::NotApplicable;
    }
    let var_names: Vec<String> = scope.vars.keys().cloned().collect();
    let mut asked: Vec<String> = (0..atom_terms.len()).map(|i| format!("a{i}")).collect();
    for (name, var) in &scope.vars {
        asked.push(sym(name));
        if matches!(var, Var::Num { optional: true, .. }) {
            asked.push(present(name));
        }
    }
    let mut differ = Vec::new();
    let mut combinations = 0usize;
    loop {
        match solver.check() {
            Some(false) => break,
            Some(true) => {}
            None => return Regions::NotApplicable,
        }
        combinations += 1;
        if combinations > MAX_COMBINATIONS || solver.send(&format!("(get-value ({}))\n", asked.join(" "))).is_none() {
            return Regions::NotApplicable;
        }
        let Some(model) = solver.read().and_then(|t| parse_model(&t)) else { return Regions::NotApplicable };
        let signs: Option<Vec<bool>> = (0..atom_terms.len()).map(|i| model.get(&format!("a{i}"))?.as_bool()).collect();
        let Some(signs) = signs else { return Regions::NotApplicable };
        let Some(point) = point_of(&model, &scope, &var_names) else { return Regions::NotApplicable };
        let at: BTreeMap<&str, &V> = point.iter().map(|(k, v)| (k.as_str(), v)).collect();
        // The engines' arithmetic must see the combination z3 found, else no proof.
        for ((node, is_new), &sign) in atom_nodes.iter().zip(&signs) {
            let names = if *is_new { new.names } else { old.names };
            if regions::eval(node, &at, names) != Some(V::Bool(sign)) {
                return Regions::NotApplicable;
            }
        }
        let answers = |bodies: &[Node], r: &Rules<'_>| -> Option<Vec<regions::Answer>> {
            (bodies.iter().zip(&r.rules))
                .map(|(b, (name, is_static, _))| match regions::eval(b, &at, r.names)? {
                    V::Bool(x) => Some((name.clone(), *is_static, x)),
                    _ => None,
                })
                .collect()
        };
        let (Some(a), Some(b)) = (answers(&old_bodies, old), answers(&new_bodies, new)) else {
            return Regions::NotApplicable;
        };
        if decision(&a) != decision(&b) {
            differ.push(point.clone());
            if differ.len() >= KEPT_POINTS {
                break;
            }
        }
        let block: Vec<String> =
            signs.iter().enumerate().map(|(i, &s)| if s { format!("a{i}") } else { format!("(not a{i})") }).collect();
        if solver.send(&format!("(assert (not (and {})))\n", block.join(" "))).is_none() {
            return Regions::NotApplicable;
        }
    }
    if !differ.is_empty() {
        return Regions::Differ(differ);
    }
    Regions::Equal { points: combinations as u64, fields: var_names }
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

/// A value: `true`, `3.0`, `(- 2.0)`, `(/ 1.0 3.0)`, `(- 1)`.
fn value(e: &Sexp) -> Option<Value> {
    match e {
        Sexp::Atom(a) if a == "true" => Some(Value::Bool(true)),
        Sexp::Atom(a) if a == "false" => Some(Value::Bool(false)),
        Sexp::Atom(a) => a.parse::<f64>().ok().map(Value::Num),
        Sexp::List(items) => match items.as_slice() {
            [Sexp::Atom(op), x] if op == "-" => Some(Value::Num(-value(x)?.as_num()?)),
            [Sexp::Atom(op), x, y] if op == "/" => Some(Value::Num(value(x)?.as_num()? / value(y)?.as_num()?)),
            _ => None,
        },
    }
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
fn point_of(model: &BTreeMap<String, Value>, scope: &Scope, names: &[String]) -> Option<BTreeMap<String, V>> {
    let mut out = BTreeMap::new();
    for name in names {
        let var = scope.vars.get(name)?;
        let x = model.get(name)?;
        let v = match var {
            Var::Num { optional, .. } => {
                let here = !optional || model.get(&format!("{name}?"))?.as_bool()?;
                if here { V::Num(x.as_num()?) } else { V::None }
            }
            Var::Bool => V::Bool(x.as_bool()?),
            Var::Str(_) => {
                let code = x.as_num()? as usize;
                V::Str(match code {
                    0 => String::new(),
                    c if c <= scope.strings.len() => scope.strings[c - 1].clone(),
                    _ => "\u{1}another".into(),
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
        let m = parse_model("((a0 true) (|job.priority| (- 2.5)) (|x| (/ 1.0 4.0)) (|q| 3))").expect("a model");
        assert_eq!(m["a0"], Value::Bool(true));
        assert_eq!(m["job.priority"], Value::Num(-2.5));
        assert_eq!(m["x"], Value::Num(0.25));
        assert_eq!(m["q"], Value::Num(3.0));
        assert!(parse_model("((a0 true)").is_none());
        assert!(parse_model(&"(".repeat(100)).is_none());
    }

    #[test]
    fn reals_are_written_as_exact_decimals() {
        assert_eq!(real(8.0).as_deref(), Some("8.0"));
        assert_eq!(real(-0.25).as_deref(), Some("(- 0.25)"));
        assert_eq!(real(1e-7).as_deref(), Some("0.0000001"));
        assert_eq!(real(f64::NAN), None);
    }
}
