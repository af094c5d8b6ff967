//! Mutants of a policy, made at every applicable point of its syntax: each number ±1 and
//! ×2 (constants, weights, tiers, quotas, priority classes, attributes), each comparison
//! flipped or made strict, each `and`/`or` with one side dropped or the operator swapped,
//! each `not` dropped, each rule dropped, each order key's direction turned round, each
//! gang clause's `require`/`prefer` swapped; and rewrites that keep behaviour: rules
//! renamed, rules in reverse order, the formatter's output, constants inlined, `implies`
//! and `in [..]` spelt out.

use gpol_compiler::ir::GangKind;
use gpol_compiler::source::FileId;
use gpol_compiler::syntax::{BinaryOp, Expr, ExprKind, Item, QueueDecl, QueueStmt, UnaryOp};

/// A version of a policy's text, and what was changed.
#[derive(Clone, Debug)]
pub struct Mutant {
    pub label: String,
    pub text: String,
}

/// An edit: replace bytes `start..end` by `with`.
struct Edit {
    label: String,
    start: usize,
    end: usize,
    with: String,
}

fn items(text: &str) -> Vec<Item> {
    gpol_compiler::parse::parse(FileId(0), text).map(|f| f.items).unwrap_or_default()
}

fn slice(text: &str, e: &Expr) -> String {
    text.get(e.span.start as usize..e.span.end as usize).unwrap_or("").to_string()
}

/// The text without its `test` blocks.
pub fn without_tests(text: &str) -> String {
    let mut t = text.to_string();
    let mut tests: Vec<(usize, usize)> = items(text)
        .iter()
        .filter(|i| matches!(i, Item::Test(_)))
        .map(|i| (i.span().start as usize, i.span().end as usize))
        .collect();
    tests.sort_by_key(|x| std::cmp::Reverse(x.0));
    for (s, e) in tests {
        t.replace_range(s..e, "");
    }
    t
}

/// Every mutant of `text` (some may not check; callers skip those).
pub fn mutants(text: &str) -> Vec<Mutant> {
    let mut edits = Vec::new();
    for item in items(text) {
        match &item {
            Item::Const(c) => expr(text, &c.value, &mut edits),
            Item::Fn(f) => expr(text, &f.body, &mut edits),
            Item::Queue(q) => queue(text, q, &mut edits),
            Item::PriorityClass(p) => expr(text, &p.value, &mut edits),
            Item::Rule(r) => {
                for e in r.tier.iter().chain(&r.weight).chain([&r.body]) {
                    expr(text, e, &mut edits);
                }
                drop_item(&item, &format!("drop {} {}", r.kind.keyword(), r.name.name), &mut edits);
            }
            Item::Order(o) => {
                for k in &o.keys {
                    expr(text, &k.expr, &mut edits);
                    let key = &text[k.span.start as usize..k.span.end as usize];
                    let turned = if key.trim_end().ends_with("desc") {
                        key.trim_end().trim_end_matches("desc").to_string() + "asc"
                    } else if key.trim_end().ends_with("asc") {
                        key.trim_end().trim_end_matches("asc").to_string() + "desc"
                    } else {
                        format!("{key} desc")
                    };
                    edits.push(Edit {
                        label: format!("turn round `{}`", key.trim()),
                        start: k.span.start as usize,
                        end: k.span.end as usize,
                        with: turned,
                    });
                }
            }
            Item::Gang(g) => {
                for c in &g.clauses {
                    for e in c.weight.iter().chain(&c.when) {
                        expr(text, e, &mut edits);
                    }
                    let (from, to) = match c.kind {
                        GangKind::Require => ("require", "prefer"),
                        GangKind::Prefer => ("prefer", "require"),
                    };
                    let at = c.span.start as usize;
                    if text[at..].starts_with(from) {
                        edits.push(Edit {
                            label: format!("{from} → {to}"),
                            start: at,
                            end: at + from.len(),
                            with: to.into(),
                        });
                    }
                }
            }
            Item::Victim(v) => {
                for e in std::iter::once(&v.when).chain(&v.cost) {
                    expr(text, e, &mut edits);
                }
                let name = v.name.as_ref().map_or("", |n| n.name.as_str());
                drop_item(&item, &format!("drop {} {name}", v.kind.keyword()), &mut edits);
            }
            _ => {}
        }
    }
    edits
        .into_iter()
        .map(|e| {
            let mut t = text.to_string();
            let line = text[..e.start].matches('\n').count() + 1;
            t.replace_range(e.start..e.end, &e.with);
            Mutant { label: format!("line {line}: {}", e.label), text: t }
        })
        .collect()
}

fn drop_item(item: &Item, label: &str, edits: &mut Vec<Edit>) {
    let s = item.span();
    edits.push(Edit { label: label.into(), start: s.start as usize, end: s.end as usize, with: String::new() });
}

fn queue(text: &str, q: &QueueDecl, edits: &mut Vec<Edit>) {
    for s in &q.stmts {
        match s {
            QueueStmt::Queue(child) => queue(text, child, edits),
            QueueStmt::Quota { values, .. } => values.iter().for_each(|e| expr(text, e, edits)),
            QueueStmt::Weight(e, _) | QueueStmt::HalfLife(e, _) | QueueStmt::Attr { value: e, .. } => {
                expr(text, e, edits)
            }
            _ => {}
        }
    }
}

/// Mutations of an expression and everything in it.
fn expr(text: &str, e: &Expr, edits: &mut Vec<Edit>) {
    let (start, end) = (e.span.start as usize, e.span.end as usize);
    match &e.kind {
        ExprKind::Number(n) | ExprKind::Quantity { number: n, .. } => {
            let source = &text[start..end];
            let digits = source.len() - source.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.').len();
            let v = n.value;
            for (label, x) in [("+1", v + 1.0), ("-1", v - 1.0), ("×2", v * 2.0)] {
                if x < 0.0 || x == v {
                    continue;
                }
                let with = if x.fract() == 0.0 { format!("{}", x as i64) } else { format!("{x}") };
                edits.push(Edit { label: format!("{source} {label}"), start, end: start + digits, with });
            }
        }
        ExprKind::Binary(op, a, b) => {
            let between = (a.span.end as usize, b.span.start as usize);
            let gap = &text[between.0..between.1];
            let sym = op.symbol();
            if let Some(at) = gap.find(sym) {
                let (s, t) = (between.0 + at, between.0 + at + sym.len());
                let mut swap = |to: &str| {
                    edits.push(Edit {
                        label: format!("`{sym}` → `{to}` in `{}`", slice(text, e)),
                        start: s,
                        end: t,
                        with: to.into(),
                    })
                };
                match op {
                    BinaryOp::Lt => ["<=", ">"].iter().for_each(|x| swap(x)),
                    BinaryOp::Le => ["<", ">="].iter().for_each(|x| swap(x)),
                    BinaryOp::Gt => [">=", "<"].iter().for_each(|x| swap(x)),
                    BinaryOp::Ge => [">", "<="].iter().for_each(|x| swap(x)),
                    BinaryOp::Eq => swap("!="),
                    BinaryOp::Ne => swap("=="),
                    BinaryOp::And => swap("or"),
                    BinaryOp::Or => swap("and"),
                    _ => {}
                }
            }
            if matches!(op, BinaryOp::And | BinaryOp::Or | BinaryOp::Implies) {
                for (keep, side) in [(a, "left"), (b, "right")] {
                    edits.push(Edit {
                        label: format!("keep the {side} of `{}`", slice(text, e)),
                        start,
                        end,
                        with: format!("({})", slice(text, keep)),
                    });
                }
            }
            expr(text, a, edits);
            expr(text, b, edits);
        }
        ExprKind::Unary(UnaryOp::Not, x) => {
            edits.push(Edit {
                label: format!("drop `not` in `{}`", slice(text, e)),
                start,
                end,
                with: format!("({})", slice(text, x)),
            });
            expr(text, x, edits);
        }
        ExprKind::Unary(_, x) | ExprKind::Field(x, _) => expr(text, x, edits),
        ExprKind::Index(a, b) => {
            expr(text, a, edits);
            expr(text, b, edits);
        }
        ExprKind::Call { args, .. } | ExprKind::List(args) => args.iter().for_each(|x| expr(text, x, edits)),
        ExprKind::If { cond, then, els } => [cond, then, els].iter().for_each(|x| expr(text, x, edits)),
        ExprKind::Block { lets, body } => {
            lets.iter().for_each(|l| expr(text, &l.value, edits));
            expr(text, body, edits);
        }
        ExprKind::Comprehension { iter, body, .. } => {
            expr(text, iter, edits);
            expr(text, body, edits);
        }
        _ => {}
    }
}

/// Rewrites of `text` that keep its behaviour.
pub fn rewrites(text: &str) -> Vec<Mutant> {
    let mut out = Vec::new();
    let items = items(text);
    // Every named rule renamed.
    let mut renamed = text.to_string();
    let mut names: Vec<(usize, usize, String)> = items
        .iter()
        .filter_map(|i| match i {
            Item::Rule(r) => Some((r.name.span.start as usize, r.name.span.end as usize, r.name.name.clone())),
            Item::Victim(v) => v.name.as_ref().map(|n| (n.span.start as usize, n.span.end as usize, n.name.clone())),
            _ => None,
        })
        .collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.0));
    for (s, e, n) in &names {
        renamed.replace_range(*s..*e, &format!("{n}_renamed"));
    }
    if !names.is_empty() {
        out.push(Mutant { label: "rules renamed".into(), text: renamed });
    }
    // Rules (not queues or classes, whose order breaks ties) in reverse order.
    let rules: Vec<(usize, usize)> = items
        .iter()
        .filter(|i| matches!(i, Item::Rule(_) | Item::Victim(_)))
        .map(|i| (i.span().start as usize, i.span().end as usize))
        .collect();
    if rules.len() > 1 {
        let mut reversed = text.to_string();
        let texts: Vec<String> = rules.iter().rev().map(|(s, e)| text[*s..*e].to_string()).collect();
        for ((s, e), t) in rules.iter().zip(texts).rev() {
            reversed.replace_range(*s..*e, &t);
        }
        out.push(Mutant { label: "rules in reverse order".into(), text: reversed });
    }
    if let Ok(f) = gpol_compiler::fmt::format_source(FileId(0), &text.replace("  ", "   ")) {
        out.push(Mutant { label: "reformatted".into(), text: f });
    }
    // Each constant inlined where it is used (by word).
    for item in &items {
        if let Item::Const(c) = item {
            let value = format!("({})", gpol_compiler::fmt::expr_text(&c.value));
            let (s, e) = (c.span.start as usize, c.span.end as usize);
            let mut t = format!("{}{}", &text[..s], &text[e..]);
            let word = regex_word(&c.name.name);
            t = word.replace_all(&t, value.as_str()).into_owned();
            out.push(Mutant { label: format!("const {} inlined", c.name.name), text: t });
        }
    }
    // `a implies b` spelt out, `x in [p, q]` as equalities.
    let mut spelt = Vec::new();
    for item in &items {
        let body: Vec<&Expr> = match item {
            Item::Rule(r) => vec![&r.body],
            Item::Victim(v) => vec![&v.when],
            Item::Fn(f) => vec![&f.body],
            _ => vec![],
        };
        for b in body {
            spell(text, b, &mut spelt);
        }
    }
    for e in spelt {
        let mut t = text.to_string();
        t.replace_range(e.start..e.end, &e.with);
        out.push(Mutant { label: e.label, text: t });
    }
    out
}

fn regex_word(name: &str) -> Word {
    Word(name.to_string())
}

/// Replaces whole-word occurrences of a name (outside strings and comments is not
/// checked: the example policies do not reuse constant names there).
struct Word(String);

impl Word {
    fn replace_all<'t>(&self, text: &'t str, with: &str) -> std::borrow::Cow<'t, str> {
        let mut out = String::with_capacity(text.len());
        let bytes = text.as_bytes();
        let mut i = 0;
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
        while i < text.len() {
            let rest = &text[i..];
            let before_ok = i == 0 || !word(bytes[i - 1]);
            if before_ok && rest.starts_with(&self.0) {
                let after = i + self.0.len();
                if after >= text.len() || !word(bytes[after]) {
                    out.push_str(with);
                    i = after;
                    continue;
                }
            }
            let ch = rest.chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
        std::borrow::Cow::Owned(out)
    }
}

fn spell(text: &str, e: &Expr, edits: &mut Vec<Edit>) {
    let (start, end) = (e.span.start as usize, e.span.end as usize);
    match &e.kind {
        ExprKind::Binary(BinaryOp::Implies, a, b) => edits.push(Edit {
            label: format!("`{}` spelt with `or`", slice(text, e)),
            start,
            end,
            with: format!("(not ({}) or ({}))", slice(text, a), slice(text, b)),
        }),
        ExprKind::Binary(BinaryOp::In, x, list) => {
            if let ExprKind::List(items) = &list.kind
                && !items.is_empty()
            {
                let eqs: Vec<String> =
                    items.iter().map(|i| format!("{} == {}", slice(text, x), slice(text, i))).collect();
                edits.push(Edit {
                    label: format!("`{}` as equalities", slice(text, e)),
                    start,
                    end,
                    with: format!("({})", eqs.join(" or ")),
                });
            }
        }
        _ => {}
    }
    match &e.kind {
        ExprKind::Binary(_, a, b) => {
            spell(text, a, edits);
            spell(text, b, edits);
        }
        ExprKind::Unary(_, x) => spell(text, x, edits),
        ExprKind::If { cond, then, els } => [cond, then, els].iter().for_each(|x| spell(text, x, edits)),
        ExprKind::Call { args, .. } => args.iter().for_each(|x| spell(text, x, edits)),
        ExprKind::Block { lets, body } => {
            lets.iter().for_each(|l| spell(text, &l.value, edits));
            spell(text, body, edits);
        }
        _ => {}
    }
}
