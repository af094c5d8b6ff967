//! `gpolc fmt`: prints a syntax tree in the one canonical layout, putting comments back
//! where they were. Expressions are laid out with Wadler-style documents (`pretty`):
//! on one line when they fit in 100 columns, broken at operators when they do not.
//!
//! Comments attach to the line-level construct they precede (an item, a queue statement,
//! a `let`, a test step, ...) or trail on its last line. A comment written inside an
//! expression moves to just after that expression's line-level construct.

use crate::diag::Diagnostic;
use crate::kinds::*;
use crate::parse::{self, Comment};
use crate::source::FileId;
use crate::syntax::*;
use pretty::RcDoc;
use std::collections::VecDeque;

pub(crate) const WIDTH: usize = 100;
const INDENT: usize = 2;

/// Formats source text; a file that does not parse is returned as the parse error.
pub fn format_source(file: FileId, text: &str) -> Result<String, Diagnostic> {
    let tree = parse::parse(file, text)?;
    let comments = parse::comments(file, text);
    Ok(format(&tree, &comments))
}

/// Prints a syntax tree with its comments.
pub fn format(file: &File, comments: &[Comment]) -> String {
    let mut p = Printer { out: String::new(), indent: 0, comments: comments.iter().cloned().collect() };
    p.file(file);
    p.out
}

/// An expression on one line, as in diagnostics.
pub fn expr_text(e: &Expr) -> String {
    expr_doc(e, 0).pretty(usize::MAX).to_string()
}

/// A type annotation as written canonically.
pub(crate) fn type_text(t: &TypeExpr) -> String {
    match &t.kind {
        TypeKind::Named(first, rest) => {
            let mut s = first.name.clone();
            for (op, n) in rest {
                s.push(if *op == UnitOp::Mul { '*' } else { '/' });
                s.push_str(&n.name);
            }
            s
        }
        TypeKind::List(inner) => format!("list[{}]", type_text(inner)),
        TypeKind::Optional(inner) => format!("{}?", type_text(inner)),
    }
}

struct Printer {
    out: String,
    indent: usize,
    comments: VecDeque<Comment>,
}

impl Printer {
    fn line(&mut self, s: &str) {
        if s.is_empty() {
            self.out.push('\n');
            return;
        }
        for _ in 0..self.indent {
            self.out.push(' ');
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn blank(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with("\n\n") && !self.out.ends_with("{\n") {
            self.out.push('\n');
        }
    }

    /// Comments that start before `pos` go on their own lines, here.
    fn leading(&mut self, pos: u32, keep_blank_lines: bool) {
        while self.comments.front().is_some_and(|c| c.span.start < pos) {
            let Some(c) = self.comments.pop_front() else {
                break;
            };
            if keep_blank_lines && c.blank_before {
                self.blank();
            }
            for l in c.text.lines() {
                let t = l.trim_end();
                self.line(t);
            }
            if c.blank_after && self.comments.front().is_none_or(|n| n.span.start >= pos) {
                self.out.push('\n');
            }
        }
    }

    /// Comments that start before `pos` and trailed code go at the end of the last line.
    fn trailing(&mut self, pos: u32) {
        while self.comments.front().is_some_and(|c| c.span.start < pos && c.trailing && !c.text.contains('\n')) {
            let Some(c) = self.comments.pop_front() else {
                break;
            };
            if self.out.ends_with('\n') {
                self.out.pop();
            }
            self.out.push_str("  ");
            self.out.push_str(&c.text);
            self.out.push('\n');
        }
    }

    fn has_comment_before(&self, pos: u32) -> bool {
        self.comments.front().is_some_and(|c| c.span.start < pos)
    }

    fn width(&self) -> usize {
        WIDTH.saturating_sub(self.indent).max(40)
    }

    /// Renders a document and writes its lines at the current indent.
    fn doc(&mut self, d: RcDoc<'_, ()>) {
        let text = d.pretty(self.width()).to_string();
        for l in text.lines() {
            self.line(l.trim_end());
        }
    }

    fn file(&mut self, f: &File) {
        // A comment on the header's line stays there, however far from the name it starts.
        let first = f.items.first().map_or(u32::MAX, |i| i.span().start);
        match &f.header {
            Some(Header::Policy(n)) => {
                self.leading(n.span.start, false);
                self.line(&format!("policy {}", n.name));
                self.trailing(first);
            }
            Some(Header::Module(p)) => {
                self.leading(p.span.start, false);
                self.line(&format!("module {}", p.dotted()));
                self.trailing(first);
            }
            None => {}
        }
        let mut prev: Option<&Item> = None;
        for (i, item) in f.items.iter().enumerate() {
            let tight = matches!(
                (prev, item),
                (Some(Item::Use(_)), Item::Use(_))
                    | (Some(Item::Const(_)), Item::Const(_))
                    | (Some(Item::PriorityClass(_)), Item::PriorityClass(_))
            );
            if !tight {
                self.blank();
            }
            self.leading(item.span().start, true);
            self.item(item);
            let next = f.items.get(i + 1).map_or(u32::MAX, |n| n.span().start);
            self.trailing(next);
            prev = Some(item);
        }
        self.leading(u32::MAX, true);
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::Use(u) => {
                let alias = u.alias.as_ref().map(|a| format!(" as {}", a.name)).unwrap_or_default();
                self.line(&format!("use {}{alias}", u.path.dotted()));
            }
            Item::Const(c) => {
                let ty = c.ty.as_ref().map(|t| format!(": {}", type_text(t))).unwrap_or_default();
                self.doc(hanging(format!("const {}{ty} = ", c.name.name), &c.value).group());
            }
            Item::Fn(f) => {
                let params: Vec<String> =
                    f.params.iter().map(|p| format!("{}: {}", p.name.name, type_text(&p.ty))).collect();
                let ret = f.ret.as_ref().map(|t| format!(" -> {}", type_text(t))).unwrap_or_default();
                self.body(&format!("fn {}({}){ret}", f.name.name, params.join(", ")), &f.body, f.span.end, true);
            }
            Item::Queue(q) => self.queue(q),
            Item::PriorityClass(pc) => {
                self.doc(RcDoc::text(format!("priority_class {} = ", pc.name.name)).append(expr_doc(&pc.value, 0)))
            }
            Item::Topology(t) => {
                let levels: Vec<&str> = t.levels.iter().map(|l| l.name.as_str()).collect();
                self.line(&format!("topology {}", levels.join(", ")));
            }
            Item::Settings(s) => {
                let entries: Vec<(u32, String)> = s
                    .entries
                    .iter()
                    .map(|e| (e.name.span.start, format!("{} {}", e.name.name, expr_text(&e.value))))
                    .collect();
                self.block("settings", entries, s.span.end);
            }
            Item::Rule(r) => {
                let mut header = format!("{} {}", r.kind.keyword(), r.name.name);
                if let Some(reason) = &r.reason {
                    header.push(' ');
                    header.push_str(&string_literal(&reason.value));
                }
                if let Some(t) = &r.tier {
                    header.push_str(&format!(" tier {}", expr_text(t)));
                }
                if let Some(w) = &r.weight {
                    header.push_str(&format!(" weight {}", expr_text(w)));
                }
                self.body(&header, &r.body, r.span.end, false);
            }
            Item::Order(o) => {
                let kw = o.target.keyword();
                let keys: Vec<String> = o
                    .keys
                    .iter()
                    .map(|k| {
                        let dir = match k.dir {
                            Some(Direction::Asc) => " asc",
                            Some(Direction::Desc) => " desc",
                            None => "",
                        };
                        format!("{}{dir}", expr_text(&k.expr))
                    })
                    .collect();
                let one = format!("{kw} {{ {} }}", keys.join(", "));
                if one.len() + self.indent <= WIDTH && !self.has_comment_before(o.span.end) {
                    self.line(&one);
                } else {
                    self.line(&format!("{kw} {{"));
                    self.indent += INDENT;
                    for (i, k) in o.keys.iter().enumerate() {
                        self.leading(k.span.start, true);
                        let dir = match k.dir {
                            Some(Direction::Asc) => " asc",
                            Some(Direction::Desc) => " desc",
                            None => "",
                        };
                        self.doc(expr_doc(&k.expr, 0).append(RcDoc::text(format!("{dir},"))));
                        let next = o.keys.get(i + 1).map_or(o.span.end, |n| n.span.start);
                        self.trailing(next);
                    }
                    self.leading(o.span.end, true);
                    self.indent -= INDENT;
                    self.line("}");
                }
            }
            Item::Gang(g) => {
                self.line("gang {");
                self.indent += INDENT;
                for (i, c) in g.clauses.iter().enumerate() {
                    self.leading(c.span.start, true);
                    let kind = match c.kind {
                        GangKind::Require => "require",
                        GangKind::Prefer => "prefer",
                    };
                    let mut d = RcDoc::text(format!("{kind} same {}", c.level.name));
                    if let Some(w) = &c.weight {
                        d = d.append(RcDoc::text(format!(" weight {}", expr_text(w))));
                    }
                    if let Some(w) = &c.when {
                        d = d.append(hanging(" when ".to_string(), w));
                    }
                    self.doc(d.group());
                    let next = g.clauses.get(i + 1).map_or(g.span.end, |n| n.span.start);
                    self.trailing(next);
                }
                self.leading(g.span.end, true);
                self.indent -= INDENT;
                self.line("}");
            }
            Item::Victim(v) => {
                let kw = v.kind.keyword();
                let name = v.name.as_ref().map(|n| format!(" {}", n.name)).unwrap_or_default();
                let reason = v.reason.as_ref().map(|r| format!(" {}", string_literal(&r.value))).unwrap_or_default();
                self.line(&format!("{kw}{name}{reason} {{"));
                self.indent += INDENT;
                self.leading(v.when.span.start, true);
                self.doc(hanging("when ".to_string(), &v.when).group());
                if let Some(c) = &v.cost {
                    self.trailing(c.span.start);
                    self.leading(c.span.start, true);
                    self.doc(hanging("cost ".to_string(), c).group());
                }
                self.trailing(v.span.end);
                self.leading(v.span.end, true);
                self.indent -= INDENT;
                self.line("}");
            }
            Item::Test(t) => {
                self.line(&format!("test {} {{", string_literal(&t.name.value)));
                self.indent += INDENT;
                for (i, s) in t.stmts.iter().enumerate() {
                    self.leading(s.span().start, true);
                    self.test_stmt(s);
                    let next = t.stmts.get(i + 1).map_or(t.span.end, |n| n.span().start);
                    self.trailing(next);
                }
                self.leading(t.span.end, true);
                self.indent -= INDENT;
                self.line("}");
            }
        }
    }

    /// `header { body }` on one line when it fits, else the body indented; `let`s
    /// always get a line each.
    fn body(&mut self, header: &str, body: &Expr, end: u32, always_break: bool) {
        if let ExprKind::Block { lets, body: result } = &body.kind {
            self.line(&format!("{header} {{"));
            self.indent += INDENT;
            for (i, l) in lets.iter().enumerate() {
                self.leading(l.span.start, true);
                self.let_line(l);
                let next = lets.get(i + 1).map_or(result.span.start, |n| n.span.start);
                self.trailing(next);
            }
            self.leading(result.span.start, true);
            self.doc(expr_doc(result, 0));
            self.trailing(end);
            self.leading(end, true);
            self.indent -= INDENT;
            self.line("}");
            return;
        }
        let one = format!("{header} {{ {} }}", expr_text(body));
        if !always_break && one.len() + self.indent <= WIDTH && !self.has_comment_before(end) {
            self.line(&one);
            return;
        }
        self.line(&format!("{header} {{"));
        self.indent += INDENT;
        self.leading(body.span.start, true);
        self.doc(expr_doc(body, 0));
        self.trailing(end);
        self.leading(end, true);
        self.indent -= INDENT;
        self.line("}");
    }

    fn let_line(&mut self, l: &Let) {
        let ty = l.ty.as_ref().map(|t| format!(": {}", type_text(t))).unwrap_or_default();
        self.doc(hanging(format!("let {}{ty} = ", l.name.name), &l.value).append(RcDoc::text(";")).group());
    }

    /// `kw { a; b }` on one line when short and comment-free, else one entry a line.
    fn block(&mut self, kw: &str, entries: Vec<(u32, String)>, end: u32) {
        let texts: Vec<&str> = entries.iter().map(|(_, t)| t.as_str()).collect();
        let one = if entries.is_empty() { format!("{kw} {{}}") } else { format!("{kw} {{ {} }}", texts.join("; ")) };
        if one.len() + self.indent <= WIDTH && !self.has_comment_before(end) {
            self.line(&one);
            return;
        }
        self.line(&format!("{kw} {{"));
        self.indent += INDENT;
        for (i, (start, text)) in entries.iter().enumerate() {
            self.leading(*start, true);
            self.line(text);
            let next = entries.get(i + 1).map_or(end, |n| n.0);
            self.trailing(next);
        }
        self.leading(end, true);
        self.indent -= INDENT;
        self.line("}");
    }

    fn queue(&mut self, q: &QueueDecl) {
        let nested = q.stmts.iter().any(|s| matches!(s, QueueStmt::Queue(_)));
        let kw = format!("queue {}", q.name.name);
        if !nested {
            let entries = q.stmts.iter().map(|s| (s.span().start, queue_stmt_text(s))).collect();
            self.block(&kw, entries, q.span.end);
            return;
        }
        self.line(&format!("{kw} {{"));
        self.indent += INDENT;
        for (i, s) in q.stmts.iter().enumerate() {
            self.leading(s.span().start, true);
            match s {
                QueueStmt::Queue(child) => self.queue(child),
                other => self.line(&queue_stmt_text(other)),
            }
            let next = q.stmts.get(i + 1).map_or(q.span.end, |n| n.span().start);
            self.trailing(next);
        }
        self.leading(q.span.end, true);
        self.indent -= INDENT;
        self.line("}");
    }

    fn test_stmt(&mut self, s: &TestStmt) {
        match s {
            TestStmt::Node { names, props, span } => {
                let names: Vec<String> = names
                    .iter()
                    .map(|n| match n.range {
                        Some((a, b)) => format!("{}[{a}..{b}]", n.name.name),
                        None => n.name.name.clone(),
                    })
                    .collect();
                self.props(&format!("node {}", names.join(", ")), props, span.end);
            }
            TestStmt::Submit { job, props, span } => self.props(&format!("submit {}", job.name), props, span.end),
            TestStmt::Run { job, nodes, props, span } => {
                let nodes: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
                self.props(&format!("run {} on {}", job.name, nodes.join(", ")), props, span.end);
            }
            TestStmt::Advance(e, _) => self.line(&format!("advance {}", expr_text(e))),
            TestStmt::Complete(j, _) => self.line(&format!("complete {}", j.name)),
            TestStmt::Usage { queue, user, amount, .. } => {
                let user = user.as_ref().map(|u| format!(" user {}", u.name)).unwrap_or_default();
                self.line(&format!("usage {}{user} {}", queue.name, expr_text(amount)));
            }
            TestStmt::Fail(n, _) => self.line(&format!("fail {}", n.name)),
            TestStmt::Expect(e, _) => {
                let because =
                    |b: &Option<Ident>| b.as_ref().map(|r| format!(" because {}", r.name)).unwrap_or_default();
                match e {
                    Expectation::On { job, nodes } => {
                        let nodes: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
                        self.line(&format!("expect {} on {}", job.name, nodes.join(", ")));
                    }
                    Expectation::Pending { job, because: b } => {
                        self.line(&format!("expect {} pending{}", job.name, because(b)))
                    }
                    Expectation::Rejected { job, because: b } => {
                        self.line(&format!("expect {} rejected{}", job.name, because(b)))
                    }
                    Expectation::Evicted { job, by, under } => {
                        let by = by.as_ref().map(|b| format!(" by {}", b.name)).unwrap_or_default();
                        let under = under.as_ref().map(|r| format!(" under {}", r.name)).unwrap_or_default();
                        self.line(&format!("expect {} evicted{by}{under}", job.name));
                    }
                    Expectation::Running { job } => self.line(&format!("expect {} running", job.name)),
                    Expectation::Holds(x) => self.doc(hanging("expect ".to_string(), x).group()),
                }
            }
        }
    }

    fn props(&mut self, head: &str, props: &[Prop], end: u32) {
        let entries = props
            .iter()
            .map(|p| {
                let text = match p {
                    Prop::Label { key, value, .. } => {
                        format!("label {} = {}", string_literal(&key.value), expr_text(value))
                    }
                    Prop::Plain { name, value: Some(v), .. } => format!("{} {}", name.name, expr_text(v)),
                    Prop::Plain { name, value: None, .. } => name.name.clone(),
                };
                (p.span().start, text)
            })
            .collect();
        self.block(head, entries, end);
    }
}

fn queue_stmt_text(s: &QueueStmt) -> String {
    match s {
        QueueStmt::Queue(q) => format!("queue {} {{ … }}", q.name.name),
        QueueStmt::Quota { kind, values, window, .. } => {
            let vs: Vec<String> = values.iter().map(expr_text).collect();
            let mut text = format!("{} {}", kind.keyword(), vs.join(", "));
            if let Some(w) = window {
                if let Some((from, to)) = &w.hours {
                    let t = |c: &ClockTime| format!("{:02}:{:02}", c.hour, c.minute);
                    text.push_str(&format!(" from {} to {}", t(from), t(to)));
                }
                if !w.days.is_empty() {
                    let days: Vec<&str> = w.days.iter().map(|d| d.name.as_str()).collect();
                    text.push_str(&format!(" on {}", days.join(", ")));
                }
            }
            text
        }
        QueueStmt::Weight(e, _) => format!("weight {}", expr_text(e)),
        QueueStmt::HalfLife(e, _) => format!("usage_half_life {}", expr_text(e)),
        QueueStmt::Attr { name, value, .. } => format!("attr {} = {}", name.name, expr_text(value)),
        QueueStmt::Queueing(m, _) => format!("queueing {}", m.name),
        QueueStmt::Fairshare(m, _) => format!("fairshare {}", m.name),
    }
}

pub fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How tightly an expression binds, for deciding parentheses (see `BinaryOp::precedence`).
fn precedence(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, ..) => op.precedence(),
        ExprKind::Unary(UnaryOp::Not, _) => PREC_NOT,
        ExprKind::Unary(UnaryOp::Neg, _) => PREC_NEG,
        // `if` extends as far right as it can, so it needs parentheses inside any operator.
        ExprKind::If { .. } => 0,
        _ => 10,
    }
}

fn quantity_text(number: &NumLit, unit: crate::units::Unit, flavour: &Option<Ident>) -> String {
    use crate::units::Unit;
    let sep = if matches!(unit, Unit::Gpu | Unit::Cpu) { " " } else { "" };
    let flavour = flavour.as_ref().map(|f| format!("({})", f.name)).unwrap_or_default();
    format!("{}{sep}{}{flavour}", number.text, unit.symbol())
}

/// The document of an expression that needs at least precedence `min` to stand unparenthesised.
fn expr_doc(e: &Expr, min: u8) -> RcDoc<'static, ()> {
    let d = match &e.kind {
        ExprKind::Number(n) => RcDoc::text(n.text.clone()),
        ExprKind::Quantity { number, unit, flavour } => RcDoc::text(quantity_text(number, *unit, flavour)),
        ExprKind::Str(s) => RcDoc::text(string_literal(s)),
        ExprKind::Bool(b) => RcDoc::text(if *b { "true" } else { "false" }),
        ExprKind::MigProfile(p) => RcDoc::text(p.clone()),
        ExprKind::Name(n) => RcDoc::text(n.name.clone()),
        ExprKind::List(items) => bracketed("[", items.iter().map(|i| expr_doc(i, 0)), "]"),
        ExprKind::Field(base, f) => expr_doc(base, 10).append(RcDoc::text(format!(".{}", f.name))),
        ExprKind::Index(base, ix) => {
            expr_doc(base, 10).append(RcDoc::text("[")).append(expr_doc(ix, 0)).append(RcDoc::text("]"))
        }
        ExprKind::Call { callee, args } => {
            RcDoc::text(callee.dotted()).append(bracketed("(", args.iter().map(|a| expr_doc(a, 0)), ")"))
        }
        ExprKind::Unary(UnaryOp::Not, x) => RcDoc::text("not ").append(expr_doc(x, PREC_NOT)),
        ExprKind::Unary(UnaryOp::Neg, x) => RcDoc::text("-").append(expr_doc(x, PREC_NEG)),
        ExprKind::Binary(op @ (BinaryOp::And | BinaryOp::Or), ..) => {
            // A chain `a and b and c` breaks before every operator or none.
            let mut operands = Vec::new();
            chain(e, *op, &mut operands);
            let p = op.precedence();
            let mut d = expr_doc(operands[0], p);
            for x in &operands[1..] {
                d = d.append(RcDoc::line()).append(RcDoc::text(format!("{} ", op.symbol()))).append(expr_doc(x, p + 1));
            }
            d.group()
        }
        ExprKind::Binary(op, a, b) => {
            let p = op.precedence();
            let (lmin, rmin) = if op.right_assoc() { (p + 1, p) } else { (p, p + 1) };
            let logical = *op == BinaryOp::Implies;
            let rhs = RcDoc::line().append(RcDoc::text(format!("{} ", op.symbol()))).append(expr_doc(b, rmin));
            // Inside a broken `and` chain a broken comparison must not look like a new term.
            let rhs = if logical { rhs } else { rhs.nest(INDENT as isize) };
            expr_doc(a, lmin).append(rhs).group()
        }
        ExprKind::If { .. } => if_chain(e),
        ExprKind::Block { lets, body } => {
            let mut d = RcDoc::text("{");
            for l in lets {
                let ty = l.ty.as_ref().map(|t| format!(": {}", type_text(t))).unwrap_or_default();
                d = d
                    .append(RcDoc::line())
                    .append(RcDoc::text(format!("let {}{ty} = ", l.name.name)))
                    .append(expr_doc(&l.value, 0))
                    .append(RcDoc::text(";"));
            }
            d.append(RcDoc::line())
                .append(expr_doc(body, 0))
                .nest(INDENT as isize)
                .append(RcDoc::line())
                .append(RcDoc::text("}"))
                .group()
        }
        ExprKind::Comprehension { kind, var, iter, body } => {
            RcDoc::text(format!("{}({} in ", kind.keyword(), var.name))
                .append(expr_doc(iter, 0))
                .append(RcDoc::text(":"))
                .append(RcDoc::line().append(expr_doc(body, 0)).nest(INDENT as isize))
                .append(RcDoc::line_())
                .append(RcDoc::text(")"))
                .group()
        }
    };
    if precedence(e) < min { RcDoc::text("(").append(d.nest(1)).append(RcDoc::text(")")) } else { d }
}

/// `if a then x else if b then y else z`: on one line when it fits, else each branch
/// indented under its own `if … then` / `else` line, with an `else if` chain kept flat.
fn if_chain(mut e: &Expr) -> RcDoc<'static, ()> {
    let branch = |x: &Expr| -> RcDoc<'static, ()> {
        match x.kind {
            // A block's braces already indent its body.
            ExprKind::Block { .. } => RcDoc::text(" ").append(expr_doc(x, 0)),
            _ => RcDoc::line().append(expr_doc(x, 0)).nest(INDENT as isize),
        }
    };
    let mut d = RcDoc::nil();
    let mut first = true;
    while let ExprKind::If { cond, then, els } = &e.kind {
        let head = if first { "if " } else { "else if " };
        if !first {
            d = d.append(RcDoc::line());
        }
        d = d.append(RcDoc::text(head)).append(expr_doc(cond, 0).nest(INDENT as isize));
        d = d.append(RcDoc::text(" then")).append(branch(then));
        first = false;
        e = els;
    }
    d.append(RcDoc::line()).append(RcDoc::text("else")).append(branch(e)).group()
}

/// The operands of a left-associative chain of one operator, in order.
fn chain<'e>(e: &'e Expr, op: BinaryOp, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Binary(o, a, b) if *o == op => {
            chain(a, op, out);
            out.push(b);
        }
        _ => out.push(e),
    }
}

/// `prefix expr`, with the expression's continuation lines indented — except a block,
/// whose braces already indent its body.
fn hanging(prefix: String, e: &Expr) -> RcDoc<'static, ()> {
    let d = expr_doc(e, 0);
    let d = if matches!(e.kind, ExprKind::Block { .. }) { d } else { d.nest(INDENT as isize) };
    RcDoc::text(prefix).append(d).group()
}

fn bracketed(
    open: &'static str,
    items: impl Iterator<Item = RcDoc<'static, ()>>,
    close: &'static str,
) -> RcDoc<'static, ()> {
    let items: Vec<_> = items.collect();
    if items.is_empty() {
        return RcDoc::text(open).append(RcDoc::text(close));
    }
    RcDoc::text(open)
        .append(
            RcDoc::line_()
                .append(RcDoc::intersperse(items, RcDoc::text(",").append(RcDoc::line())))
                .nest(INDENT as isize),
        )
        .append(RcDoc::line_())
        .append(RcDoc::text(close))
        .group()
}

#[cfg(test)]
mod tests {
    use super::format_source;
    use crate::source::FileId;

    /// Found by the `check` fuzz target: a comment on the header's line moved below it on
    /// the second run when the first had put two spaces before it.
    #[test]
    fn a_comment_on_the_header_line_stays_there() {
        for text in ["policy p// note\n\nconst c = 1\n", "policy p    // note\nconst c = 1\n"] {
            let once = format_source(FileId(0), text).expect("parses");
            assert_eq!(once, "policy p  // note\n\nconst c = 1\n");
            assert_eq!(format_source(FileId(0), &once).expect("parses"), once);
        }
    }
}
