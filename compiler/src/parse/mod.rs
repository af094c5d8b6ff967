//! Source text to syntax tree: pest does the recognising, this module builds the
//! [`crate::syntax`] tree from pest's pairs and turns pest's errors into diagnostics.
//!
//! Public for the tests that edit syntax trees and print them back: the formatter's
//! round trips here, gpol-diff's mutations of the shipped policies.

mod comments;
mod errors;
mod prescan;
mod recover;

pub use comments::{Comment, comments};

use crate::diag::{Code, Diagnostic};
use crate::kinds::*;
use crate::source::{FileId, Span};
use crate::syntax::*;
use crate::units::Unit;
use pest::Parser;
use pest::iterators::{Pair, Pairs};
use pest::pratt_parser::{Assoc, Op, PrattParser};
use std::sync::LazyLock;

#[derive(pest_derive::Parser)]
#[grammar = "../../grammar/gpol.pest"]
struct GpolParser;

use crate::limits::MAX_EXPR_DEPTH;

type R<T> = Result<T, Diagnostic>;

/// Parses one file. Never panics; a syntax error yields one diagnostic.
pub fn parse(file: FileId, text: &str) -> R<File> {
    prescan::prescan(file, text)?;
    let pairs = match GpolParser::parse(Rule::file, text) {
        Ok(p) => p,
        Err(_) => {
            // Re-parse with pest's detailed tracking of expected tokens, so the message
            // can name literals such as `{`. It costs time, so only on the error path.
            pest::set_error_detail(true);
            let err = match GpolParser::parse(Rule::file, text) {
                Err(e) => e,
                Ok(_) => return Err(errors::internal(file)),
            };
            return Err(errors::humanize(file, text, err));
        }
    };
    let b = Builder { file, offset: 0 };
    let file_pair = pairs.into_iter().next().ok_or_else(|| errors::internal(file))?;
    b.file(file_pair)
}

/// Parses a file, and after a syntax error recovers at each top-level declaration: the
/// declarations that parse, and an error for each that does not.
pub(crate) fn parse_recovering(file: FileId, text: &str) -> (File, Vec<Diagnostic>) {
    let first = match parse(file, text) {
        Ok(f) => return (f, Vec::new()),
        Err(d) => d,
    };
    let mut whole = File { header: None, items: Vec::new() };
    let mut errors = Vec::new();
    for range in recover::declarations(text) {
        match parse_piece(file, text, range) {
            Ok(piece) => {
                whole.header = whole.header.or(piece.header);
                whole.items.extend(piece.items);
            }
            Err(d) => errors.push(d),
        }
    }
    if errors.is_empty() {
        // Every piece parses but the whole does not (say, a header in the wrong place).
        errors.push(first);
    }
    (whole, errors)
}

/// Parses `text[range]` as a file of its own, with spans in the whole file.
fn parse_piece(file: FileId, text: &str, range: std::ops::Range<usize>) -> R<File> {
    let piece = &text[range.clone()];
    let shift = |mut d: Diagnostic| {
        let at = |s: &mut Span| {
            s.start += range.start as u32;
            s.end += range.start as u32;
        };
        at(&mut d.primary.span);
        d.secondary.iter_mut().for_each(|l| at(&mut l.span));
        d
    };
    prescan::prescan(file, piece).map_err(shift)?;
    let pairs = match GpolParser::parse(Rule::file, piece) {
        Ok(p) => p,
        Err(_) => {
            pest::set_error_detail(true);
            return Err(shift(match GpolParser::parse(Rule::file, piece) {
                Err(e) => errors::humanize(file, piece, e),
                Ok(_) => errors::internal(file),
            }));
        }
    };
    let b = Builder { file, offset: range.start };
    b.file(pairs.into_iter().next().ok_or_else(|| errors::internal(file))?)
}

/// Parses a standalone expression (used by tests and tools).
pub fn parse_expr(file: FileId, text: &str) -> R<Expr> {
    prescan::prescan(file, text)?;
    let wrapped = format!("const __expr = {text}");
    let f = parse(file, &wrapped).map_err(|mut d| {
        // Shift spans back to the unwrapped text.
        let shift = |s: &mut Span| {
            s.start = s.start.saturating_sub(15);
            s.end = s.end.saturating_sub(15);
        };
        shift(&mut d.primary.span);
        d.secondary.iter_mut().for_each(|l| shift(&mut l.span));
        d
    })?;
    match f.items.into_iter().next() {
        Some(Item::Const(c)) => Ok(c.value),
        _ => Err(errors::internal(file)),
    }
}

static PRATT: LazyLock<PrattParser<Rule>> = LazyLock::new(|| {
    // Lowest precedence first; keep in step with `BinaryOp::precedence`.
    PrattParser::new()
        .op(Op::infix(Rule::op_implies, Assoc::Right))
        .op(Op::infix(Rule::op_or, Assoc::Left))
        .op(Op::infix(Rule::op_and, Assoc::Left))
        .op(Op::prefix(Rule::op_not))
        .op(Op::infix(Rule::op_eq, Assoc::Left)
            | Op::infix(Rule::op_ne, Assoc::Left)
            | Op::infix(Rule::op_lt, Assoc::Left)
            | Op::infix(Rule::op_le, Assoc::Left)
            | Op::infix(Rule::op_gt, Assoc::Left)
            | Op::infix(Rule::op_ge, Assoc::Left)
            | Op::infix(Rule::op_in, Assoc::Left)
            | Op::infix(Rule::op_not_in, Assoc::Left))
        .op(Op::infix(Rule::op_default, Assoc::Right))
        .op(Op::infix(Rule::op_add, Assoc::Left) | Op::infix(Rule::op_sub, Assoc::Left))
        .op(Op::infix(Rule::op_mul, Assoc::Left) | Op::infix(Rule::op_div, Assoc::Left))
        .op(Op::prefix(Rule::op_neg))
        .op(Op::postfix(Rule::field_access) | Op::postfix(Rule::index) | Op::postfix(Rule::call_args))
});

struct Builder {
    file: FileId,
    /// Where the text parsed starts in the file (a declaration parsed on its own).
    offset: usize,
}

/// Takes the next child pair; the grammar guarantees it exists, so a missing one is an
/// internal error reported as a diagnostic rather than a panic.
fn next<'i>(file: FileId, it: &mut Pairs<'i, Rule>) -> R<Pair<'i, Rule>> {
    it.next().ok_or_else(|| errors::internal(file))
}

impl Builder {
    /// The pair's span without trailing white space (pest includes the white space it
    /// skipped while trying an optional part that then failed).
    fn span(&self, p: &Pair<'_, Rule>) -> Span {
        let s = p.as_span();
        let trimmed = s.as_str().trim_end_matches([' ', '\t', '\r', '\n']).len();
        Span::new(self.file, self.offset + s.start(), self.offset + s.start() + trimmed)
    }

    fn ident(&self, p: Pair<'_, Rule>) -> Ident {
        Ident { name: p.as_str().to_string(), span: self.span(&p) }
    }

    fn path(&self, p: Pair<'_, Rule>) -> Path {
        let span = self.span(&p);
        Path { segments: p.into_inner().map(|i| self.ident(i)).collect(), span }
    }

    fn string(&self, p: Pair<'_, Rule>) -> R<StrLit> {
        let span = self.span(&p);
        let raw = p.as_str();
        let inner = &raw[1..raw.len() - 1];
        let mut value = String::with_capacity(inner.len());
        let mut chars = inner.char_indices();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                value.push(c);
                continue;
            }
            let esc = chars.next().map(|(_, e)| e);
            value.push(match esc {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('\\') => '\\',
                Some('"') => '"',
                other => {
                    let at = span.start as usize + 1 + i;
                    let shown = other.map(|c| c.to_string()).unwrap_or_default();
                    return Err(Diagnostic::new(
                        Code::BadLiteral,
                        Span::new(self.file, at, at + 1 + shown.len()),
                        format!("unknown escape `\\{shown}` in string"),
                    )
                    .label("not a valid escape")
                    .help("valid escapes are `\\n`, `\\t`, `\\\\` and `\\\"`"));
                }
            });
        }
        Ok(StrLit { value, span })
    }

    fn number(&self, p: &Pair<'_, Rule>) -> R<NumLit> {
        let text = p.as_str().to_string();
        let value: f64 = text.replace('_', "").parse().unwrap_or(f64::INFINITY);
        if !value.is_finite() {
            return Err(Diagnostic::new(Code::BadLiteral, self.span(p), "number too large")
                .label("this does not fit in a 64-bit float")
                .help("gpol numbers are IEEE doubles: at most about 1.8e308"));
        }
        Ok(NumLit { text, value })
    }

    fn file(&self, p: Pair<'_, Rule>) -> R<File> {
        let mut header = None;
        let mut items = Vec::new();
        for p in p.into_inner() {
            match p.as_rule() {
                Rule::policy_header => header = Some(Header::Policy(self.ident(next(self.file, &mut p.into_inner())?))),
                Rule::module_header => header = Some(Header::Module(self.path(next(self.file, &mut p.into_inner())?))),
                Rule::EOI => {}
                _ => items.push(self.item(p)?),
            }
        }
        Ok(File { header, items })
    }

    fn item(&self, p: Pair<'_, Rule>) -> R<Item> {
        let span = self.span(&p);
        let rule = p.as_rule();
        let mut it = p.into_inner();
        Ok(match rule {
            Rule::use_decl => {
                let path = self.path(next(self.file, &mut it)?);
                let alias = it.next().map(|a| self.ident(a));
                Item::Use(UseDecl { path, alias, span })
            }
            Rule::const_decl => {
                let name = self.ident(next(self.file, &mut it)?);
                let mut ty = None;
                let mut value = None;
                for p in it {
                    match p.as_rule() {
                        Rule::ty => ty = Some(self.ty(p)?),
                        _ => value = Some(self.expr(p)?),
                    }
                }
                let value = value.ok_or_else(|| errors::internal(self.file))?;
                Item::Const(ConstDecl { name, ty, value, span })
            }
            Rule::fn_decl => {
                let name = self.ident(next(self.file, &mut it)?);
                let params = next(self.file, &mut it)?
                    .into_inner()
                    .map(|param| {
                        let mut pi = param.into_inner();
                        let name = self.ident(next(self.file, &mut pi)?);
                        let ty = self.ty(next(self.file, &mut pi)?)?;
                        Ok(Param { name, ty })
                    })
                    .collect::<R<Vec<_>>>()?;
                let mut ret = None;
                let mut body = None;
                for p in it {
                    match p.as_rule() {
                        Rule::ty => ret = Some(self.ty(p)?),
                        _ => body = Some(self.primary(p)?),
                    }
                }
                let body = body.ok_or_else(|| errors::internal(self.file))?;
                Item::Fn(FnDecl { name, params, ret, body, span })
            }
            Rule::queue_decl => Item::Queue(self.queue(span, it)?),
            Rule::priority_class => {
                let name = self.ident(next(self.file, &mut it)?);
                let value = self.expr(next(self.file, &mut it)?)?;
                Item::PriorityClass(PriorityClass { name, value, span })
            }
            Rule::topology_decl => Item::Topology(Topology { levels: it.map(|i| self.ident(i)).collect(), span }),
            Rule::settings => {
                let entries = it
                    .map(|s| {
                        let mut si = s.into_inner();
                        let name = self.ident(next(self.file, &mut si)?);
                        let value = self.expr(next(self.file, &mut si)?)?;
                        Ok(Setting { name, value })
                    })
                    .collect::<R<Vec<_>>>()?;
                Item::Settings(Settings { entries, span })
            }
            Rule::admit_rule | Rule::filter_rule | Rule::score_rule | Rule::card_score_rule => {
                let kind = match rule {
                    Rule::admit_rule => RuleKind::Admit,
                    Rule::filter_rule => RuleKind::Filter,
                    Rule::score_rule => RuleKind::Score,
                    _ => RuleKind::CardScore,
                };
                let name = self.ident(next(self.file, &mut it)?);
                let (mut reason, mut tier, mut weight, mut body) = (None, None, None, None);
                for p in it {
                    match p.as_rule() {
                        Rule::reason => reason = Some(self.string(next(self.file, &mut p.into_inner())?)?),
                        Rule::tier_opt => tier = Some(self.scalar(next(self.file, &mut p.into_inner())?)?),
                        Rule::weight_opt => weight = Some(self.scalar(next(self.file, &mut p.into_inner())?)?),
                        _ => body = Some(self.primary(p)?),
                    }
                }
                let body = body.ok_or_else(|| errors::internal(self.file))?;
                Item::Rule(Rule_ { kind, name, reason, tier, weight, body, span })
            }
            Rule::queue_order | Rule::job_order | Rule::victim_order => {
                let target = match rule {
                    Rule::queue_order => OrderTarget::Queue,
                    Rule::job_order => OrderTarget::Job,
                    _ => OrderTarget::Victim,
                };
                let keys = it
                    .map(|k| {
                        let span = self.span(&k);
                        let mut ki = k.into_inner();
                        let expr = self.expr(next(self.file, &mut ki)?)?;
                        let dir =
                            ki.next().map(|d| if d.as_str() == "desc" { Direction::Desc } else { Direction::Asc });
                        Ok(OrderKey { expr, dir, span })
                    })
                    .collect::<R<Vec<_>>>()?;
                Item::Order(Order { target, keys, span })
            }
            Rule::gang => {
                let clauses = it
                    .map(|c| {
                        let span = self.span(&c);
                        let mut ci = c.into_inner();
                        let kind = if next(self.file, &mut ci)?.as_str() == "require" {
                            GangKind::Require
                        } else {
                            GangKind::Prefer
                        };
                        let level = self.ident(next(self.file, &mut ci)?);
                        let (mut weight, mut when) = (None, None);
                        for p in ci {
                            let rule = p.as_rule();
                            let inner = next(self.file, &mut p.into_inner())?;
                            let e = if rule == Rule::weight_opt { self.scalar(inner)? } else { self.expr(inner)? };
                            if rule == Rule::weight_opt { weight = Some(e) } else { when = Some(e) }
                        }
                        Ok(GangClause { kind, level, weight, when, span })
                    })
                    .collect::<R<Vec<_>>>()?;
                Item::Gang(Gang { clauses, span })
            }
            Rule::preempt_rule | Rule::reclaim_rule | Rule::borrow_rule | Rule::protect_rule => {
                let kind = match rule {
                    Rule::preempt_rule => VictimKind::Preempt,
                    Rule::reclaim_rule => VictimKind::Reclaim,
                    Rule::borrow_rule => VictimKind::Borrow,
                    _ => VictimKind::Protect,
                };
                let (mut name, mut reason, mut when, mut cost) = (None, None, None, None);
                for p in it {
                    match p.as_rule() {
                        Rule::kw_borrow | Rule::kw_protect => {}
                        Rule::ident => name = Some(self.ident(p)),
                        Rule::reason => reason = Some(self.string(next(self.file, &mut p.into_inner())?)?),
                        Rule::when_clause => when = Some(self.expr(next(self.file, &mut p.into_inner())?)?),
                        _ => cost = Some(self.expr(next(self.file, &mut p.into_inner())?)?),
                    }
                }
                let when = when.ok_or_else(|| errors::internal(self.file))?;
                Item::Victim(VictimRule { kind, name, reason, when, cost, span })
            }
            Rule::test_block => {
                let name = self.string(next(self.file, &mut it)?)?;
                let stmts = it.map(|s| self.test_stmt(s)).collect::<R<Vec<_>>>()?;
                Item::Test(TestBlock { name, stmts, span })
            }
            _ => return Err(errors::internal(self.file)),
        })
    }

    /// `2`, `-1`, `big`: the value of a `tier` or `weight`.
    fn scalar(&self, p: Pair<'_, Rule>) -> R<Expr> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let first = next(self.file, &mut it)?;
        if first.as_rule() == Rule::op_neg {
            let inner = self.primary(next(self.file, &mut it)?)?;
            return Ok(Expr { kind: ExprKind::Unary(UnaryOp::Neg, Box::new(inner)), span });
        }
        self.primary(first)
    }

    /// `from HH:MM to HH:MM`, `on DAY, …`, or both.
    fn window(&self, p: Pair<'_, Rule>) -> Window {
        let span = self.span(&p);
        let mut hours = None;
        let mut days = Vec::new();
        for part in p.into_inner() {
            match part.as_rule() {
                Rule::window_hours => {
                    let mut times = part.into_inner().map(|t| self.clock_time(t));
                    if let (Some(from), Some(to)) = (times.next(), times.next()) {
                        hours = Some((from, to));
                    }
                }
                _ => days.extend(part.into_inner().map(|d| self.ident(d))),
            }
        }
        Window { hours, days, span }
    }

    /// `07:00`: the grammar took one or two digits, a colon and two digits.
    fn clock_time(&self, p: Pair<'_, Rule>) -> ClockTime {
        let span = self.span(&p);
        let (h, m) = p.as_str().split_once(':').unwrap_or((p.as_str(), "0"));
        ClockTime { hour: h.parse().unwrap_or(0), minute: m.parse().unwrap_or(0), span }
    }

    fn queue(&self, span: Span, mut it: Pairs<'_, Rule>) -> R<QueueDecl> {
        let _kw = next(self.file, &mut it)?;
        let name = self.ident(next(self.file, &mut it)?);
        let mut stmts = Vec::new();
        for s in it {
            let sspan = self.span(&s);
            let rule = s.as_rule();
            let mut si = s.into_inner();
            stmts.push(match rule {
                Rule::queue_decl => QueueStmt::Queue(self.queue(sspan, si)?),
                Rule::quota_stmt => {
                    let kind = match next(self.file, &mut si)?.as_str() {
                        "guarantee" => QuotaKind::Guarantee,
                        "limit" => QuotaKind::Limit,
                        "borrow_limit" => QuotaKind::BorrowLimit,
                        "lend_limit" => QuotaKind::LendLimit,
                        _ => QuotaKind::UserLimit,
                    };
                    let mut values = Vec::new();
                    let mut window = None;
                    for v in si {
                        if v.as_rule() == Rule::window {
                            window = Some(self.window(v));
                        } else {
                            values.push(self.expr(v)?);
                        }
                    }
                    QueueStmt::Quota { kind, values, window, span: sspan }
                }
                Rule::weight_stmt => QueueStmt::Weight(self.expr(next(self.file, &mut si)?)?, sspan),
                Rule::half_life_stmt => QueueStmt::HalfLife(self.expr(next(self.file, &mut si)?)?, sspan),
                Rule::attr_stmt => {
                    let name = self.ident(next(self.file, &mut si)?);
                    let value = self.expr(next(self.file, &mut si)?)?;
                    QueueStmt::Attr { name, value, span: sspan }
                }
                Rule::queueing_stmt => QueueStmt::Queueing(self.ident(next(self.file, &mut si)?), sspan),
                Rule::fairshare_stmt => QueueStmt::Fairshare(self.ident(next(self.file, &mut si)?), sspan),
                _ => return Err(errors::internal(self.file)),
            });
        }
        Ok(QueueDecl { name, stmts, span })
    }

    fn ty(&self, p: Pair<'_, Rule>) -> R<TypeExpr> {
        let span = self.span(&p);
        let mut it = p.into_inner();
        let atom = next(self.file, &mut it)?;
        let atom_span = self.span(&atom);
        let base = match atom.as_rule() {
            Rule::list_ty => TypeKind::List(Box::new(self.ty(next(self.file, &mut atom.into_inner())?)?)),
            _ => {
                let mut ai = atom.into_inner();
                let first = self.ident(next(self.file, &mut ai)?);
                let mut rest = Vec::new();
                while let Some(op) = ai.next() {
                    let op = if op.as_str() == "*" { UnitOp::Mul } else { UnitOp::Div };
                    rest.push((op, self.ident(next(self.file, &mut ai)?)));
                }
                TypeKind::Named(first, rest)
            }
        };
        let base = TypeExpr { kind: base, span: atom_span };
        Ok(if it.next().is_some() { TypeExpr { kind: TypeKind::Optional(Box::new(base)), span } } else { base })
    }

    fn test_stmt(&self, p: Pair<'_, Rule>) -> R<TestStmt> {
        let span = self.span(&p);
        let rule = p.as_rule();
        let mut it = p.into_inner();
        Ok(match rule {
            Rule::node_stmt => {
                let mut names = Vec::new();
                let mut props = Vec::new();
                for p in it {
                    match p.as_rule() {
                        Rule::node_name => names.push(self.node_name(p)?),
                        _ => props = self.props(p)?,
                    }
                }
                TestStmt::Node { names, props, span }
            }
            Rule::submit_stmt => {
                let job = self.ident(next(self.file, &mut it)?);
                let props = self.props(next(self.file, &mut it)?)?;
                TestStmt::Submit { job, props, span }
            }
            Rule::run_stmt => {
                let job = self.ident(next(self.file, &mut it)?);
                let nodes = self.name_list(next(self.file, &mut it)?);
                let props = self.props(next(self.file, &mut it)?)?;
                TestStmt::Run { job, nodes, props, span }
            }
            Rule::advance_stmt => TestStmt::Advance(self.expr(next(self.file, &mut it)?)?, span),
            Rule::complete_stmt => TestStmt::Complete(self.ident(next(self.file, &mut it)?), span),
            Rule::usage_stmt => {
                let queue = self.ident(next(self.file, &mut it)?);
                let mut user = None;
                let mut amount = None;
                for p in it {
                    match p.as_rule() {
                        Rule::kw_user => {}
                        Rule::ident => user = Some(self.ident(p)),
                        _ => amount = Some(self.expr(p)?),
                    }
                }
                let amount = amount.ok_or_else(|| errors::internal(self.file))?;
                TestStmt::Usage { queue, user, amount, span }
            }
            Rule::fail_stmt => TestStmt::Fail(self.ident(next(self.file, &mut it)?), span),
            Rule::expect_stmt => {
                let e = next(self.file, &mut it)?;
                let erule = e.as_rule();
                let mut ei = e.into_inner();
                let exp = match erule {
                    Rule::expect_holds => Expectation::Holds(self.expr(next(self.file, &mut ei)?)?),
                    _ => {
                        let job = self.ident(next(self.file, &mut ei)?);
                        let rest = ei.next();
                        let named = |p: Option<Pair<'_, Rule>>| -> R<Option<Ident>> {
                            match p {
                                Some(p) if p.as_rule() == Rule::because => {
                                    Ok(Some(self.ident(next(self.file, &mut p.into_inner())?)))
                                }
                                Some(p) => Ok(Some(self.ident(p))),
                                None => Ok(None),
                            }
                        };
                        match erule {
                            Rule::expect_on => Expectation::On {
                                job,
                                nodes: self.name_list(rest.ok_or_else(|| errors::internal(self.file))?),
                            },
                            Rule::expect_pending => Expectation::Pending { job, because: named(rest)? },
                            Rule::expect_rejected => Expectation::Rejected { job, because: named(rest)? },
                            Rule::expect_evicted => {
                                let (mut by, mut under) = (None, None);
                                for p in rest.into_iter().chain(ei) {
                                    if p.as_rule() == Rule::under {
                                        under = Some(self.ident(next(self.file, &mut p.into_inner())?));
                                    } else {
                                        by = Some(self.ident(p));
                                    }
                                }
                                Expectation::Evicted { job, by, under }
                            }
                            _ => Expectation::Running { job },
                        }
                    }
                };
                TestStmt::Expect(exp, span)
            }
            _ => return Err(errors::internal(self.file)),
        })
    }

    fn node_name(&self, p: Pair<'_, Rule>) -> R<NodeName> {
        let mut it = p.into_inner();
        let name = self.ident(next(self.file, &mut it)?);
        let range = match it.next() {
            None => None,
            Some(r) => {
                let rspan = self.span(&r);
                let mut ri = r.into_inner();
                let mut bound = || -> R<u32> {
                    let p = next(self.file, &mut ri)?;
                    p.as_str().parse::<u32>().ok().filter(|n| *n <= crate::limits::MAX_RANGE_NODES).ok_or_else(|| {
                        Diagnostic::new(Code::BadLiteral, self.span(&p), "node range bound too large")
                            .label("at most 100000")
                            .help("a test declares at most 100000 nodes in a range")
                    })
                };
                let (a, b) = (bound()?, bound()?);
                if b < a {
                    return Err(Diagnostic::new(Code::BadLiteral, rspan, "empty node name range")
                        .label(format!("{b} is before {a}"))
                        .help("write the range low to high, e.g. `n[1..8]`"));
                }
                Some((a, b))
            }
        };
        Ok(NodeName { name, range })
    }

    fn name_list(&self, p: Pair<'_, Rule>) -> Vec<Ident> {
        p.into_inner().map(|i| self.ident(i)).collect()
    }

    fn props(&self, p: Pair<'_, Rule>) -> R<Vec<Prop>> {
        p.into_inner()
            .map(|prop| {
                let span = self.span(&prop);
                let rule = prop.as_rule();
                let mut it = prop.into_inner();
                Ok(match rule {
                    Rule::label_prop => {
                        let key = self.string(next(self.file, &mut it)?)?;
                        let value = self.expr(next(self.file, &mut it)?)?;
                        Prop::Label { key, value, span }
                    }
                    _ => {
                        let name = self.ident(next(self.file, &mut it)?);
                        let value = match it.next() {
                            Some(v) => Some(self.expr(next(self.file, &mut v.into_inner())?)?),
                            None => None,
                        };
                        Prop::Plain { name, value, span }
                    }
                })
            })
            .collect()
    }

    // ------------------------------------------------------------ expressions

    fn expr(&self, p: Pair<'_, Rule>) -> R<Expr> {
        self.expr_depth(p).map(|(e, _)| e)
    }

    /// Builds an expression and returns its depth, refusing trees deeper than
    /// [`MAX_EXPR_DEPTH`] so that every later recursive pass has bounded stack use.
    fn expr_depth(&self, p: Pair<'_, Rule>) -> R<(Expr, u32)> {
        let span = self.span(&p);
        let pairs = p.into_inner();
        // The Pratt parser recurses once per prefix and right-associative operator.
        if pairs.len() > MAX_EXPR_DEPTH as usize {
            return Err(Diagnostic::new(Code::TooDeep, span, "expression too long")
                .label(format!("more than {MAX_EXPR_DEPTH} operators and operands in one expression"))
                .help("split the expression with `let` bindings or a helper `fn`"));
        }
        let deep = |d: u32, span: Span| -> R<u32> {
            if d > MAX_EXPR_DEPTH {
                Err(Diagnostic::new(Code::TooDeep, span, "expression nested too deeply")
                    .label(format!("more than {MAX_EXPR_DEPTH} levels"))
                    .help("split the expression with `let` bindings or a helper `fn`"))
            } else {
                Ok(d)
            }
        };
        PRATT
            .map_primary(|p| self.primary_depth(p))
            .map_prefix(|op, rhs| {
                let (rhs, d) = rhs?;
                let span = self.span(&op).to(rhs.span);
                let unop = if op.as_rule() == Rule::op_not { UnaryOp::Not } else { UnaryOp::Neg };
                Ok((Expr { kind: ExprKind::Unary(unop, Box::new(rhs)), span }, deep(d + 1, span)?))
            })
            .map_postfix(|lhs, op| {
                let (lhs, d) = lhs?;
                let span = lhs.span.to(self.span(&op));
                let (kind, d2) = match op.as_rule() {
                    Rule::call_args => {
                        let Some(callee) = callee_path(&lhs) else {
                            return Err(Diagnostic::new(Code::UnknownFunction, lhs.span, "this cannot be called")
                                .label("not a function name")
                                .help("call a function by its name: `min(a, b)` or `std.pack.binpack(job, node)`"));
                        };
                        let mut d = 0;
                        let mut args = Vec::new();
                        for a in op.into_inner() {
                            let (e, da) = self.expr_depth(a)?;
                            d = d.max(da);
                            args.push(e);
                        }
                        (ExprKind::Call { callee, args }, d)
                    }
                    Rule::field_access => {
                        let name = self.ident(next(self.file, &mut op.into_inner())?);
                        (ExprKind::Field(Box::new(lhs), name), d)
                    }
                    _ => {
                        let (ix, di) = self.expr_depth(next(self.file, &mut op.into_inner())?)?;
                        (ExprKind::Index(Box::new(lhs), Box::new(ix)), d.max(di))
                    }
                };
                Ok((Expr { kind, span }, deep(d2 + 1, span)?))
            })
            .map_infix(|lhs, op, rhs| {
                let (lhs, dl) = lhs?;
                let (rhs, dr) = rhs?;
                let bop = match op.as_rule() {
                    Rule::op_implies => BinaryOp::Implies,
                    Rule::op_or => BinaryOp::Or,
                    Rule::op_and => BinaryOp::And,
                    Rule::op_eq => BinaryOp::Eq,
                    Rule::op_ne => BinaryOp::Ne,
                    Rule::op_lt => BinaryOp::Lt,
                    Rule::op_le => BinaryOp::Le,
                    Rule::op_gt => BinaryOp::Gt,
                    Rule::op_ge => BinaryOp::Ge,
                    Rule::op_in => BinaryOp::In,
                    Rule::op_not_in => BinaryOp::NotIn,
                    Rule::op_default => BinaryOp::Default,
                    Rule::op_add => BinaryOp::Add,
                    Rule::op_sub => BinaryOp::Sub,
                    Rule::op_mul => BinaryOp::Mul,
                    _ => BinaryOp::Div,
                };
                let span = lhs.span.to(rhs.span);
                let d = deep(dl.max(dr) + 1, span)?;
                Ok((Expr { kind: ExprKind::Binary(bop, Box::new(lhs), Box::new(rhs)), span }, d))
            })
            .parse(pairs)
            .map(|(mut e, d)| {
                // Parentheses and operators widen the span to what the author wrote.
                if e.span.start > span.start || e.span.end < span.end {
                    e.span = span;
                }
                (e, d)
            })
    }

    fn primary(&self, p: Pair<'_, Rule>) -> R<Expr> {
        self.primary_depth(p).map(|(e, _)| e)
    }

    fn primary_depth(&self, p: Pair<'_, Rule>) -> R<(Expr, u32)> {
        let span = self.span(&p);
        let rule = p.as_rule();
        let leaf = |kind| Ok((Expr { kind, span }, 1));
        match rule {
            Rule::number => leaf(ExprKind::Number(self.number(&p)?)),
            Rule::quantity => {
                let mut it = p.into_inner();
                let number = self.number(&next(self.file, &mut it)?)?;
                let unit_pair = next(self.file, &mut it)?;
                let unit = Unit::from_symbol(unit_pair.as_str()).ok_or_else(|| errors::internal(self.file))?;
                let flavour = match it.next() {
                    Some(f) => Some(self.ident(next(self.file, &mut f.into_inner())?)),
                    None => None,
                };
                if !unit.to_base(number.value).is_finite() {
                    return Err(Diagnostic::new(Code::BadLiteral, span, "quantity too large")
                        .label("this does not fit in a 64-bit float in base units")
                        .help("gpol numbers are IEEE doubles: use a smaller amount or a larger unit"));
                }
                leaf(ExprKind::Quantity { number, unit, flavour })
            }
            Rule::string => leaf(ExprKind::Str(self.string(p)?.value)),
            Rule::boolean => leaf(ExprKind::Bool(p.as_str() == "true")),
            Rule::mig_profile => leaf(ExprKind::MigProfile(p.as_str().to_string())),
            Rule::ident => leaf(ExprKind::Name(self.ident(p))),
            Rule::paren => {
                let (mut e, d) = self.expr_depth(next(self.file, &mut p.into_inner())?)?;
                e.span = span;
                Ok((e, d))
            }
            Rule::list => {
                let mut d = 0;
                let mut items = Vec::new();
                for i in p.into_inner() {
                    let (e, di) = self.expr_depth(i)?;
                    d = d.max(di);
                    items.push(e);
                }
                Ok((Expr { kind: ExprKind::List(items), span }, d + 1))
            }
            Rule::if_expr => {
                let mut it = p.into_inner().filter(|p| p.as_rule() == Rule::expr);
                let (cond, d1) = self.expr_depth(next_of(self.file, &mut it)?)?;
                let (then, d2) = self.expr_depth(next_of(self.file, &mut it)?)?;
                let (els, d3) = self.expr_depth(next_of(self.file, &mut it)?)?;
                let kind = ExprKind::If { cond: Box::new(cond), then: Box::new(then), els: Box::new(els) };
                Ok((Expr { kind, span }, d1.max(d2).max(d3) + 1))
            }
            Rule::block => {
                let mut lets = Vec::new();
                let mut d = 0;
                let mut body = None;
                for p in p.into_inner() {
                    if p.as_rule() == Rule::let_stmt {
                        let lspan = self.span(&p);
                        let mut li = p.into_inner().filter(|p| p.as_rule() != Rule::kw_let);
                        let name = self.ident(next_of(self.file, &mut li)?);
                        let mut ty = None;
                        let mut value = None;
                        for p in li {
                            if p.as_rule() == Rule::ty {
                                ty = Some(self.ty(p)?);
                            } else {
                                let (e, dv) = self.expr_depth(p)?;
                                d = d.max(dv);
                                value = Some(e);
                            }
                        }
                        let value = value.ok_or_else(|| errors::internal(self.file))?;
                        lets.push(Let { name, ty, value, span: lspan });
                    } else {
                        let (e, db) = self.expr_depth(p)?;
                        d = d.max(db);
                        body = Some(e);
                    }
                }
                let body = body.ok_or_else(|| errors::internal(self.file))?;
                if lets.is_empty() {
                    // `{ e }` is just `e`.
                    return Ok((body, d));
                }
                Ok((Expr { kind: ExprKind::Block { lets, body: Box::new(body) }, span }, d + 1))
            }
            Rule::comprehension => {
                let mut it = p.into_inner().filter(|p| p.as_rule() != Rule::kw_in);
                let kind = match next_of(self.file, &mut it)?.as_str() {
                    "any" => CompKind::Any,
                    "all" => CompKind::All,
                    "count" => CompKind::Count,
                    "sum" => CompKind::Sum,
                    "min" => CompKind::Min,
                    _ => CompKind::Max,
                };
                let var = self.ident(next_of(self.file, &mut it)?);
                let (iter, d1) = self.expr_depth(next_of(self.file, &mut it)?)?;
                let (body, d2) = self.expr_depth(next_of(self.file, &mut it)?)?;
                let kind = ExprKind::Comprehension { kind, var, iter: Box::new(iter), body: Box::new(body) };
                Ok((Expr { kind, span }, d1.max(d2) + 1))
            }
            Rule::expr => self.expr_depth(p),
            _ => Err(errors::internal(self.file)),
        }
    }
}

/// `a.b.c` as a call path; `None` for anything that is not a dotted name.
fn callee_path(e: &Expr) -> Option<Path> {
    match &e.kind {
        ExprKind::Name(n) => Some(Path { segments: vec![n.clone()], span: e.span }),
        ExprKind::Field(base, f) => {
            let mut p = callee_path(base)?;
            p.segments.push(f.clone());
            p.span = e.span;
            Some(p)
        }
        _ => None,
    }
}

fn next_of<'i>(file: FileId, it: &mut impl Iterator<Item = Pair<'i, Rule>>) -> R<Pair<'i, Rule>> {
    it.next().ok_or_else(|| errors::internal(file))
}

// `Rule` is pest's generated enum; the syntax tree's rule type is re-exported under an
// alias inside this module to avoid the clash.
use crate::syntax::Rule as Rule_;
