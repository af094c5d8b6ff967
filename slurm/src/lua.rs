//! gpol expressions as Lua 5.1 expressions, for the rules `job_submit.lua` carries. Only
//! what a job carries at submission can be read (`job.*` fields Slurm's `job_desc` gives,
//! its labels, its queue's attributes), and of a node what never changes (`node.*`
//! static fields and labels, from the tables `gpolc slurm emit --cluster` writes);
//! anything else is [`Unsupported`], with why.
//!
//! Lua 5.1's numbers are IEEE doubles, as gpol's, so arithmetic and comparisons agree bit
//! for bit (NaN compares false, `~=` true); the built-ins are written in `gpol.*` helpers
//! with gpol's semantics (`min` propagates NaN, `round` halves away from zero, floored
//! `mod`). Those whose C library may round differently from gpol's (`exp2`, `log`, `pow`)
//! and `hash01` (64-bit integer mixing, which Lua 5.1 lacks) are not compiled.

use gpol_compiler::hir::{self, Builtin};
use gpol_compiler::ir::{AttrValue, Bin, CompKind, Kind, Node, Program, VTy};
use gpol_compiler::schema::{Record, Root, Storage};
use gpol_compiler::types::Ty;

/// Why an expression cannot run in `job_submit.lua`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// The job fields `job_submit.lua` knows (see [`crate::jobs`]), by schema name.
pub const SUBMIT_FIELDS: &[&str] = &[
    "name",
    "user",
    "queue",
    "priority",
    "priority_class",
    "whole_cards",
    "replicas",
    "min_replicas",
    "total_gpus",
    "allowed_models",
    "cpu",
    "mem",
    "bursty",
    "latency_critical",
    "preemptible",
    "expected_duration",
    "utilization",
    "labels",
];

/// A Lua number literal that reads back as exactly `x`.
pub fn number(x: f64) -> String {
    if x.is_nan() {
        "(0/0)".into()
    } else if x.is_infinite() {
        if x > 0.0 { "(1/0)".into() } else { "(-1/0)".into() }
    } else {
        // Rust's `{:e}` is the shortest form that reads back exactly.
        let s = format!("{x:e}");
        if x < 0.0 { format!("({s})") } else { s }
    }
}

/// Text for a comment line of a generated file: control characters (a newline would end
/// the comment) become `?`.
pub fn comment(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// A Lua string literal (every byte outside printable ASCII escaped as `\ddd`).
pub fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
    out.push('"');
    out
}

/// A compiled policy: its IR and the declarations the IR indexes into.
#[derive(Clone, Copy)]
pub struct Policy<'a> {
    pub program: &'a Program,
    pub hir: &'a hir::Policy,
}

/// Compiles an expression of `policy` into Lua over `job` (the table
/// [`crate::submit`]'s `gpol.job` builds) and `gpol` (the helpers and the policy's tables).
pub fn expr(n: &Node, policy: Policy<'_>) -> Result<String, Unsupported> {
    let text = emit(n, policy)?.0;
    match levels(&text) {
        deep if deep > MAX_LEVELS => Err(Unsupported(format!(
            "nests {deep} levels deep in Lua, more than Lua 5.1's parser takes ({MAX_LEVELS} here, 200 in all)"
        ))),
        _ => Ok(text),
    }
}

/// The parser levels an expression may take: Lua 5.1 stops at 200 ("chunk has too many
/// syntax levels"); the script around a rule takes a few, and this leaves a margin.
pub const MAX_LEVELS: usize = 180;

/// How deep Lua 5.1's parser goes in `text`, at most: a bracket or brace is a level, an
/// `if … end` one, a `function … end` two (measured: each `(function() if … end end)()`
/// takes four levels, each pair of parentheses one). String literals are skipped.
pub fn levels(text: &str) -> usize {
    // The weight of each construct open, innermost last.
    let (mut open, mut deepest): (Vec<usize>, usize) = (Vec::new(), 0);
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let weight = match bytes[i] {
            b'"' => {
                // To the closing quote, past escapes.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                0
            }
            b'(' | b'{' => 1,
            b')' | b'}' => {
                open.pop();
                0
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i + 1 < bytes.len() && (bytes[i + 1].is_ascii_alphanumeric() || bytes[i + 1] == b'_') {
                    i += 1;
                }
                match &text[start..=i] {
                    "function" => 2,
                    "if" => 1,
                    "end" => {
                        open.pop();
                        0
                    }
                    _ => 0,
                }
            }
            _ => 0,
        };
        if weight > 0 {
            open.push(weight);
            deepest = deepest.max(open.iter().sum());
        }
        i += 1;
    }
    deepest
}

/// How tightly Lua 5.1 binds a binary operator (higher binds tighter; all of these are
/// left-associative), and [`SELF_DELIMITED`] for what needs no parentheses anywhere.
fn binding(op: &str) -> u8 {
    match op {
        "or" => 1,
        "and" => 2,
        "+" | "-" => 6,
        "*" | "/" => 7,
        _ => 3, // comparisons
    }
}
const SELF_DELIMITED: u8 = u8::MAX;

/// An expression and how tightly it binds. Operators are parenthesized only where Lua's
/// precedence needs it: a chain such as `a + b + … + z` stays flat, since every pair of
/// parentheses is a level of Lua 5.1's parser, which stops at 200 ("chunk has too many
/// syntax levels") — well within gpol's limit of 256 operands per expression.
fn emit(n: &Node, policy: Policy<'_>) -> Result<(String, u8), Unsupported> {
    let program = policy.program;
    let no = |why: String| Err(Unsupported(why));
    let go = |x: &Node| expr(x, policy);
    // Where an operator could bind to its neighbours: parenthesized unless self-delimited.
    let atom = |x: &Node| emit(x, policy).map(|(s, b)| if b == SELF_DELIMITED { s } else { format!("({s})") });
    Ok((
        match &n.kind {
            Kind::Num(x) => number(*x),
            Kind::Bool(b) => b.to_string(),
            Kind::Enum(e) => e.to_string(),
            Kind::Str(i) => string(program.literals.get(*i as usize).map_or("", String::as_str)),
            Kind::Local(l) => format!("l{l}"),
            Kind::Root(Root::Job) => "job".into(),
            Kind::Root(Root::Node) => "node".into(),
            Kind::Root(r) => return no(format!("reads `{}`, which a job does not carry at submission", r.name())),
            Kind::Field { base, record, field } => {
                let f =
                    record.fields().get(usize::from(*field)).ok_or_else(|| Unsupported("an unknown field".into()))?;
                match (&base.kind, record) {
                    (Kind::Root(Root::Job), Record::Job) if SUBMIT_FIELDS.contains(&f.name) => {
                        format!("job.{}", f.name)
                    }
                    (Kind::Root(Root::Job), Record::Job) => {
                        return no(format!(
                            "reads `job.{}`, which Slurm does not know when the job is submitted",
                            f.name
                        ));
                    }
                    // `job.queue.name`.
                    (_, Record::Queue) if f.name == "name" => atom(base)?,
                    (Kind::Root(Root::Node), Record::Node) if f.storage == Storage::Static => {
                        format!("node.{}", f.name)
                    }
                    (Kind::Root(Root::Node), Record::Node) => {
                        return no(format!("reads `node.{}`, which changes while the cluster runs", f.name));
                    }
                    _ => {
                        return no(format!(
                            "reads `{}.{}`, which a job does not carry at submission",
                            record.name(),
                            f.name
                        ));
                    }
                }
            }
            Kind::Attr { queue, attr } => {
                let a = policy
                    .hir
                    .attrs
                    .get(usize::from(*attr))
                    .ok_or_else(|| Unsupported("an unknown attribute".into()))?;
                format!("gpol.attr({}, {})", string(&a.name), go(queue)?)
            }
            Kind::Label { labels, slot } => {
                let key = program.job_labels.get(usize::from(*slot));
                match (&labels.kind, key) {
                    (Kind::Field { base, record: Record::Job, .. }, Some(key))
                        if matches!(base.kind, Kind::Root(Root::Job)) =>
                    {
                        format!("(job.labels[{}] or \"\")", string(key))
                    }
                    _ => match (&labels.kind, program.node_labels.get(usize::from(*slot))) {
                        (Kind::Field { base, record: Record::Node, .. }, Some(key))
                            if matches!(base.kind, Kind::Root(Root::Node)) =>
                        {
                            format!("(node.labels[{}] or \"\")", string(key))
                        }
                        _ => return no("reads labels a job does not carry at submission".into()),
                    },
                }
            }
            Kind::Not(x) => format!("(not {})", atom(x)?),
            Kind::Neg(x) => format!("(-({}))", go(x)?),
            Kind::Bin(op, a, b) => return binary(*op, a, b, policy),
            // Lua has no conditional expression: a function called at once evaluates only
            // the branch taken.
            Kind::If(c, a, b) => {
                format!("(function() if {} then return {} else return {} end end)()", go(c)?, go(a)?, go(b)?)
            }
            Kind::Let(l, value, body) => format!("(function(l{l}) return {} end)({})", go(body)?, go(value)?),
            Kind::IsSome(x) => match x.ty {
                VTy::Sym => format!("({} ~= \"\")", atom(x)?),
                _ => format!("({} ~= nil)", atom(x)?),
            },
            Kind::Unwrap(x) => format!("({} or 0)", atom(x)?),
            Kind::Len(x) => format!("#{}", atom(x)?),
            Kind::ListLit(items) => {
                let items: Vec<String> = items.iter().map(go).collect::<Result<_, _>>()?;
                format!("{{{}}}", items.join(", "))
            }
            Kind::Loop { kind, var, list, body } => {
                let helper = match kind {
                    CompKind::Any => "any",
                    CompKind::All => "all",
                    CompKind::Count => "count",
                    CompKind::Sum => "sum",
                    CompKind::Min => "min_of",
                    CompKind::Max => "max_of",
                };
                format!("gpol.{helper}({}, function(l{var}) return {} end)", go(list)?, go(body)?)
            }
            Kind::Call(f, args) => {
                let args: Vec<String> = args.iter().map(go).collect::<Result<_, _>>()?;
                let helper = match f {
                    Builtin::Min => "gpol.min",
                    Builtin::Max => "gpol.max",
                    Builtin::Abs => "math.abs",
                    Builtin::Clamp => "gpol.clamp",
                    Builtin::Floor => "math.floor",
                    Builtin::Ceil => "math.ceil",
                    Builtin::Round => "gpol.round",
                    Builtin::Trunc => "gpol.trunc",
                    Builtin::Mod => "gpol.mod",
                    Builtin::Sqrt => "math.sqrt",
                    other => {
                        return no(format!(
                            "calls `{}`, which Lua's math library may round differently (or cannot compute)",
                            other.name()
                        ));
                    }
                };
                format!("{helper}({})", args.join(", "))
            }
            Kind::Domain { .. } | Kind::Mig { .. } => {
                return no(
                    "reads a node's topology domain or free MIG instances, which job_submit.lua does not model".into()
                );
            }
            Kind::Input(_) => return no("reads a test's input".into()),
        },
        SELF_DELIMITED,
    ))
}

/// `a op b`, each side parenthesized only where Lua would bind it otherwise.
fn binary(op: Bin, a: &Node, b: &Node, policy: Policy<'_>) -> Result<(String, u8), Unsupported> {
    // Arithmetic and ordering are spelt as gpol's IR spells them; equality and the
    // connectives as Lua does.
    let op = match op {
        Bin::Eq | Bin::BitEq => "==",
        Bin::Ne | Bin::BitNe => "~=",
        Bin::And => "and",
        Bin::Or => "or",
        other => other.symbol(),
    };
    let strength = binding(op);
    let ((x, left), (y, right)) = (emit(a, policy)?, emit(b, policy)?);
    // Left-associative: the left operand may bind as tightly, the right must bind tighter.
    let x = if left < strength { format!("({x})") } else { x };
    let y = if right <= strength { format!("({y})") } else { y };
    Ok((format!("{x} {op} {y}"), strength))
}

/// The policy's attribute values per queue, as a Lua table `{[attr] = {[queue] = value}}`.
pub fn attr_table(policy: Policy<'_>) -> String {
    let program = policy.program;
    let mut out = String::from("{\n");
    for (a, attr) in policy.hir.attrs.iter().enumerate() {
        out.push_str(&format!("    [{}] = {{", string(&attr.name)));
        for (q, queue) in policy.hir.queues.iter().map(|q| &q.name).enumerate() {
            // Absent: the zero of its type, as the engines read it.
            let value = match program.attrs.get(q).and_then(|row| row.get(a)) {
                Some(AttrValue::Num(x)) => number(*x),
                Some(AttrValue::Bool(b)) => b.to_string(),
                Some(AttrValue::Str(i)) => string(program.literals.get(*i as usize).map_or("", String::as_str)),
                Some(AttrValue::Enum(e)) => e.to_string(),
                Some(AttrValue::Absent) | None => match attr.ty {
                    Ty::Bool => "false".into(),
                    Ty::Str => "\"\"".into(),
                    _ => "0".into(),
                },
            };
            out.push_str(&format!(" [{}] = {value},", string(queue)));
        }
        out.push_str(" },\n");
    }
    out.push_str("  }");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_levels_count_brackets_blocks_and_functions_not_strings() {
        assert_eq!(levels("job.cpu + 1"), 0);
        assert_eq!(levels("((a + b) * c)"), 2);
        assert_eq!(levels("(function() if x then return (y) else return 1 end end)()"), 5);
        assert_eq!(levels("\"((((\\\"((\" == x"), 0);
        assert_eq!(levels("{ (a), (b) }"), 2);
    }

    #[test]
    fn numbers_and_strings_are_exact_lua_literals() {
        assert_eq!(number(0.1), "1e-1");
        assert_eq!(number(-2.5), "(-2.5e0)");
        assert_eq!(number(f64::INFINITY), "(1/0)");
        assert_eq!(string("a\"b\\c\nd"), "\"a\\\"b\\\\c\\010d\"");
        assert_eq!(string("é"), "\"\\195\\169\"");
    }
}
