//! Canonical forms of rule bodies: two bodies with the same form compute the same value
//! on every input, whatever their names, declaration order or spelling. The form is the
//! IR (functions inlined, constants folded) written as an s-expression with: every `let`
//! substituted (gpol is pure, so this is exact); loop variables named by depth; literals,
//! label keys, attributes and levels by name rather than by slot; `and`/`or` chains
//! flattened, deduplicated and sorted; the operands of `+ * == !=` sorted; `a > b` written
//! `b < a`; `not not x` written `x`. Floating-point sums are not reassociated: that could
//! change a last bit, and so a tie.

use gpol_compiler::hir;
use gpol_compiler::ir::{Bin, Kind, Local, Node, Program, VTy};
use gpol_compiler::schema::Record;
use std::fmt::Write;

/// Forms longer than this are not worth comparing (substituting `let`s can multiply size).
const MAX_FORM: usize = 1 << 20;

/// What names mean in one policy.
pub struct Names<'a> {
    pub policy: &'a hir::Policy,
    pub program: &'a Program,
}

enum Binding {
    Inline(String),
    Var(usize),
}

/// The bindings in scope, and how many bytes substituting them has copied so far: the
/// only way a form can grow faster than the IR it comes from, so bounding it bounds all.
struct Env {
    bindings: Vec<(Local, Binding)>,
    copied: usize,
}

/// The canonical form of an expression, or `None` when it would be unreasonably large.
pub fn form(node: &Node, names: &Names<'_>) -> Option<String> {
    let mut env = Env { bindings: Vec::new(), copied: 0 };
    let f = write(node, names, &mut env);
    (f.len() <= MAX_FORM && env.copied <= MAX_FORM).then_some(f)
}

fn write(node: &Node, n: &Names<'_>, env: &mut Env) -> String {
    let sub = |x: &Node, env: &mut Env| write(x, n, env);
    match &node.kind {
        Kind::Num(x) => format!("{x:?}"),
        Kind::Bool(b) => b.to_string(),
        Kind::Str(i) => format!("{:?}", n.program.literals.get(*i as usize).map_or("?", String::as_str)),
        Kind::Enum(e) => format!("enum{e}"),
        Kind::Local(l) => match env.bindings.iter().rev().find(|(x, _)| x == l).map(|(_, b)| b) {
            Some(Binding::Inline(s)) => {
                env.copied += s.len();
                if env.copied > MAX_FORM {
                    return String::new();
                }
                s.clone()
            }
            Some(Binding::Var(d)) => format!("v{d}"),
            None => format!("free{l}"),
        },
        Kind::Root(r) => r.name().to_string(),
        Kind::Input(i) => format!("input{i}"),
        Kind::Field { base, record, field } => {
            let name = record.fields().get(usize::from(*field)).map_or("?", |f| f.name);
            format!("{}.{name}", sub(base, env))
        }
        Kind::Domain { node, level } => {
            let name = n.program.levels.get(usize::from(*level)).map_or("?", String::as_str);
            format!("{}.{name}", sub(node, env))
        }
        Kind::Attr { queue, attr } => {
            let name = n.policy.attrs.get(usize::from(*attr)).map_or("?", |a| a.name.as_str());
            format!("{}.attr.{name}", sub(queue, env))
        }
        Kind::Label { labels, slot } => {
            let keys = match labels.ty {
                VTy::Labels(Record::Node) => &n.program.node_labels,
                _ => &n.program.job_labels,
            };
            let key = keys.get(usize::from(*slot)).map_or("?", String::as_str);
            format!("{}[{key:?}]", sub(labels, env))
        }
        Kind::Mig { counts, profile } => format!("{}[{}]", sub(counts, env), sub(profile, env)),
        Kind::Not(x) => match &x.kind {
            Kind::Not(inner) => sub(inner, env),
            _ => format!("(not {})", sub(x, env)),
        },
        Kind::Neg(x) => format!("(neg {})", sub(x, env)),
        Kind::IsSome(x) => format!("(has {})", sub(x, env)),
        Kind::Unwrap(x) => format!("(unwrap {})", sub(x, env)),
        Kind::Len(x) => format!("(len {})", sub(x, env)),
        Kind::ListLit(items) => {
            let items: Vec<String> = items.iter().map(|i| sub(i, env)).collect();
            format!("[{}]", items.join(" "))
        }
        Kind::If(c, a, b) => format!("(if {} {} {})", sub(c, env), sub(a, env), sub(b, env)),
        Kind::Let(l, value, body) => {
            let v = sub(value, env);
            env.bindings.push((*l, Binding::Inline(v)));
            let out = sub(body, env);
            env.bindings.pop();
            out
        }
        Kind::Loop { kind, var, list, body } => {
            let list = sub(list, env);
            let depth = env.bindings.iter().filter(|(_, b)| matches!(b, Binding::Var(_))).count();
            env.bindings.push((*var, Binding::Var(depth)));
            let body = sub(body, env);
            env.bindings.pop();
            format!("({kind:?} v{depth} {list} {body})")
        }
        Kind::Call(b, args) => {
            let args: Vec<String> = args.iter().map(|a| sub(a, env)).collect();
            format!("({b:?} {})", args.join(" "))
        }
        Kind::Bin(op @ (Bin::And | Bin::Or), _, _) => {
            let mut parts = Vec::new();
            chain(node, *op, &mut parts);
            let mut forms: Vec<String> = parts.iter().map(|p| sub(p, env)).collect();
            // `x or false` is `x`, `x or true` is `true` (and the same for `and`).
            let (unit, zero) = if *op == Bin::And { ("true", "false") } else { ("false", "true") };
            if forms.iter().any(|f| f == zero) {
                return zero.to_string();
            }
            forms.retain(|f| f != unit);
            if forms.is_empty() {
                return unit.to_string();
            }
            forms.sort();
            forms.dedup();
            if forms.len() == 1 {
                return forms.pop().unwrap_or_default();
            }
            let mut out = format!("({op:?}");
            for f in forms {
                let _ = write!(out, " {f}");
            }
            out.push(')');
            out
        }
        Kind::Bin(op, a, b) => {
            let (mut x, mut y) = (sub(a, env), sub(b, env));
            let op = match op {
                Bin::Gt => {
                    std::mem::swap(&mut x, &mut y);
                    Bin::Lt
                }
                Bin::Ge => {
                    std::mem::swap(&mut x, &mut y);
                    Bin::Le
                }
                Bin::Add | Bin::Mul | Bin::Eq | Bin::Ne | Bin::BitEq | Bin::BitNe => {
                    if y < x {
                        std::mem::swap(&mut x, &mut y);
                    }
                    *op
                }
                other => *other,
            };
            format!("({op:?} {x} {y})")
        }
    }
}

/// The operands of a chain of one associative boolean operator.
fn chain<'n>(node: &'n Node, op: Bin, out: &mut Vec<&'n Node>) {
    match &node.kind {
        Kind::Bin(o, a, b) if *o == op => {
            chain(a, op, out);
            chain(b, op, out);
        }
        _ => out.push(node),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::engine::EngineKind;

    fn admit_form(body: &str) -> String {
        let text = format!("policy p\nadmit a {{ {body} }}\n");
        let p = gpol_compiler::load::compile_text("t.gpol", &text, EngineKind::Interp).expect("compiles");
        let names = Names { policy: &p.policy, program: &p.program };
        form(&p.program.admit[0].body.node, &names).expect("small")
    }

    #[test]
    fn rewrites_that_compute_the_same_have_one_form() {
        let same = [
            ("job.bursty implies job.preemptible", "not job.bursty or job.preemptible"),
            ("job.priority in [1, 2]", "job.priority == 1 or job.priority == 2"),
            ("job.priority > 3 and job.bursty", "job.bursty and 3 < job.priority"),
            ("let p = job.priority; p * 2 > 8", "job.priority * 2 > 8"),
            ("not not job.bursty", "job.bursty"),
        ];
        for (a, b) in same {
            assert_eq!(admit_form(a), admit_form(b), "{a} / {b}");
        }
    }

    #[test]
    fn lets_that_double_at_every_level_give_up_rather_than_grow() {
        let mut body = String::from("let a0 = job.priority; ");
        for i in 1..40 {
            body.push_str(&format!("let a{i} = a{} + a{}; ", i - 1, i - 1));
        }
        body.push_str("a39 > 1");
        let text = format!("policy p\nadmit a {{ {body} }}\n");
        let p = gpol_compiler::load::compile_text("t.gpol", &text, EngineKind::Interp).expect("compiles");
        let names = Names { policy: &p.policy, program: &p.program };
        assert_eq!(form(&p.program.admit[0].body.node, &names), None);
    }

    #[test]
    fn different_computations_have_different_forms() {
        let different = [
            ("job.priority > 3", "job.priority >= 3"),
            ("job.priority > 3", "job.priority > 4"),
            ("job.priority - 1 > 3", "1 - job.priority > 3"),
            ("job.bursty and job.preemptible", "job.bursty or job.preemptible"),
        ];
        for (a, b) in different {
            assert_ne!(admit_form(a), admit_form(b), "{a} / {b}");
        }
    }
}
