//! Property: printing a syntax tree and parsing the text gives the same tree (spans
//! aside), and formatting is idempotent — on generated trees covering every construct.

use gpol_compiler::fmt;
use gpol_compiler::ir::{CompKind, Direction, GangKind, QuotaKind, RuleKind, VictimKind};
use gpol_compiler::parse;
use gpol_compiler::source::{FileId, Span};
use gpol_compiler::syntax::*;
use gpol_compiler::units::Unit;
use proptest::prelude::*;

const NAMES: &[&str] = &["a", "b", "x", "job", "node", "free", "cards_x", "q1", "n_2", "gpu", "m", "rack"];
const BINOPS: &[BinaryOp] = &[
    BinaryOp::Implies,
    BinaryOp::Or,
    BinaryOp::And,
    BinaryOp::Eq,
    BinaryOp::Ne,
    BinaryOp::Lt,
    BinaryOp::Le,
    BinaryOp::Gt,
    BinaryOp::Ge,
    BinaryOp::In,
    BinaryOp::NotIn,
    BinaryOp::Default,
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Div,
];

fn sp() -> Span {
    Span::default()
}

fn ident() -> impl Strategy<Value = Ident> {
    prop::sample::select(NAMES).prop_map(|n| Ident { name: n.to_string(), span: sp() })
}

fn num() -> impl Strategy<Value = NumLit> {
    ("[0-9]{1,4}", prop::option::of("[0-9]{1,3}")).prop_map(|(i, f)| {
        let text = match f {
            Some(f) => format!("{i}.{f}"),
            None => i,
        };
        let value = text.parse().unwrap_or(0.0);
        NumLit { text, value }
    })
}

fn e(kind: ExprKind) -> Expr {
    Expr { kind, span: sp() }
}

fn leaf() -> impl Strategy<Value = Expr> {
    prop_oneof![
        num().prop_map(|n| e(ExprKind::Number(n))),
        (num(), prop::sample::select(Unit::ALL.to_vec())).prop_map(|(number, unit)| e(ExprKind::Quantity {
            number,
            unit,
            flavour: None
        })),
        "[a-z \"\\\\\n\té]{0,8}".prop_map(|s| e(ExprKind::Str(s))),
        any::<bool>().prop_map(|b| e(ExprKind::Bool(b))),
        prop::sample::select(vec!["1g.10gb", "3g.40gb", "7g.80gb"]).prop_map(|p| e(ExprKind::MigProfile(p.into()))),
        ident().prop_map(|i| e(ExprKind::Name(i))),
    ]
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf().prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| e(ExprKind::List(v))),
            (inner.clone(), ident()).prop_map(|(x, f)| e(ExprKind::Field(Box::new(x), f))),
            (inner.clone(), inner.clone()).prop_map(|(x, i)| e(ExprKind::Index(Box::new(x), Box::new(i)))),
            (prop::collection::vec(ident(), 1..3), prop::collection::vec(inner.clone(), 0..3))
                .prop_map(|(segs, args)| e(ExprKind::Call { callee: Path { segments: segs, span: sp() }, args })),
            (prop::sample::select(vec![UnaryOp::Not, UnaryOp::Neg]), inner.clone())
                .prop_map(|(op, x)| e(ExprKind::Unary(op, Box::new(x)))),
            (prop::sample::select(BINOPS), inner.clone(), inner.clone()).prop_map(|(op, x, y)| e(ExprKind::Binary(
                op,
                Box::new(x),
                Box::new(y)
            ))),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, t, f)| e(ExprKind::If {
                cond: Box::new(c),
                then: Box::new(t),
                els: Box::new(f)
            })),
            (prop::collection::vec((ident(), prop::option::of(ty()), inner.clone()), 1..3), inner.clone()).prop_map(
                |(lets, body)| e(ExprKind::Block {
                    lets: lets.into_iter().map(|(name, ty, value)| Let { name, ty, value, span: sp() }).collect(),
                    body: Box::new(body)
                })
            ),
            (
                prop::sample::select(vec![
                    CompKind::Any,
                    CompKind::All,
                    CompKind::Count,
                    CompKind::Sum,
                    CompKind::Min,
                    CompKind::Max
                ]),
                ident(),
                inner.clone(),
                inner
            )
                .prop_map(|(kind, var, iter, body)| e(ExprKind::Comprehension {
                    kind,
                    var,
                    iter: Box::new(iter),
                    body: Box::new(body)
                })),
        ]
    })
}

/// Tiers and weights are a number or a name, optionally negated.
fn scalar() -> impl Strategy<Value = Expr> {
    let base = prop_oneof![num().prop_map(|n| e(ExprKind::Number(n))), ident().prop_map(|i| e(ExprKind::Name(i)))];
    (any::<bool>(), base).prop_map(|(neg, x)| if neg { e(ExprKind::Unary(UnaryOp::Neg, Box::new(x))) } else { x })
}

fn ty() -> impl Strategy<Value = TypeExpr> {
    let named = (
        prop::sample::select(vec!["gpu", "bytes", "job", "number", "duration"]),
        prop::collection::vec(
            (prop::sample::select(vec![UnitOp::Mul, UnitOp::Div]), prop::sample::select(vec!["gpu", "duration"])),
            0..2,
        ),
    )
        .prop_map(|(first, rest)| TypeExpr {
            kind: TypeKind::Named(
                Ident { name: first.into(), span: sp() },
                rest.into_iter().map(|(op, n)| (op, Ident { name: n.into(), span: sp() })).collect(),
            ),
            span: sp(),
        });
    let lists = named.prop_recursive(2, 4, 1, |inner| {
        inner.prop_map(|t| TypeExpr { kind: TypeKind::List(Box::new(t)), span: sp() })
    });
    // `T?` is a suffix on a whole type, never doubled.
    (lists, any::<bool>())
        .prop_map(|(t, opt)| if opt { TypeExpr { kind: TypeKind::Optional(Box::new(t)), span: sp() } } else { t })
}

fn strlit() -> impl Strategy<Value = StrLit> {
    "[a-z ]{0,10}".prop_map(|value| StrLit { value, span: sp() })
}

/// `from HH:MM to HH:MM`, `on DAY, …` or both: never neither.
fn window() -> impl Strategy<Value = Window> {
    let time = (0u32..25, 0u32..60).prop_map(|(hour, minute)| ClockTime { hour, minute, span: sp() });
    let hours = prop::option::of((time.clone(), time));
    (hours, prop::collection::vec(ident(), 0..3))
        .prop_filter("a window has hours or days", |(h, d)| h.is_some() || !d.is_empty())
        .prop_map(|(hours, days)| Window { hours, days, span: sp() })
}

fn queue() -> impl Strategy<Value = QueueDecl> {
    let stmt = prop_oneof![
        (
            prop::sample::select(QuotaKind::ALL.to_vec()),
            prop::collection::vec(quota_value(), 1..3),
            prop::option::of(window())
        )
            .prop_map(|(kind, values, window)| QueueStmt::Quota { kind, values, window, span: sp() }),
        expr().prop_map(|x| QueueStmt::Weight(x, sp())),
        expr().prop_map(|x| QueueStmt::HalfLife(x, sp())),
        (ident(), expr()).prop_map(|(name, value)| QueueStmt::Attr { name, value, span: sp() }),
        ident().prop_map(|m| QueueStmt::Queueing(m, sp())),
    ];
    let leaf = (ident(), prop::collection::vec(stmt.clone(), 0..4)).prop_map(|(name, stmts)| QueueDecl {
        name,
        stmts,
        span: sp(),
    });
    leaf.prop_recursive(3, 8, 3, move |inner| {
        (ident(), prop::collection::vec(prop_oneof![stmt.clone(), inner.prop_map(QueueStmt::Queue)], 0..4))
            .prop_map(|(name, stmts)| QueueDecl { name, stmts, span: sp() })
    })
}

fn quota_value() -> impl Strategy<Value = Expr> {
    prop_oneof![
        (num(), prop::option::of(ident())).prop_map(|(number, flavour)| e(ExprKind::Quantity {
            number,
            unit: Unit::Gpu,
            flavour
        })),
        expr(),
    ]
}

fn prop_() -> impl Strategy<Value = Prop> {
    prop_oneof![
        (strlit(), leaf()).prop_map(|(key, value)| Prop::Label { key, value, span: sp() }),
        (ident(), prop::option::of(leaf())).prop_map(|(name, value)| Prop::Plain { name, value, span: sp() }),
    ]
}

fn test_stmt() -> impl Strategy<Value = TestStmt> {
    let props = || prop::collection::vec(prop_(), 0..4);
    let names = || prop::collection::vec(ident(), 1..3);
    prop_oneof![
        (prop::collection::vec((ident(), prop::option::of((0u32..5, 5u32..9))), 1..3), props()).prop_map(
            |(ns, props)| {
                TestStmt::Node {
                    names: ns.into_iter().map(|(name, range)| NodeName { name, range }).collect(),
                    props,
                    span: sp(),
                }
            }
        ),
        (ident(), props()).prop_map(|(job, props)| TestStmt::Submit { job, props, span: sp() }),
        (ident(), names(), props()).prop_map(|(job, nodes, props)| TestStmt::Run { job, nodes, props, span: sp() }),
        expr().prop_map(|x| TestStmt::Advance(x, sp())),
        ident().prop_map(|j| TestStmt::Complete(j, sp())),
        ident().prop_map(|n| TestStmt::Fail(n, sp())),
        (ident(), prop::option::of(ident()), expr()).prop_map(|(queue, user, amount)| TestStmt::Usage {
            queue,
            user,
            amount,
            span: sp()
        }),
        (ident(), names()).prop_map(|(job, nodes)| TestStmt::Expect(Expectation::On { job, nodes }, sp())),
        (ident(), prop::option::of(ident()))
            .prop_map(|(job, because)| TestStmt::Expect(Expectation::Pending { job, because }, sp())),
        (ident(), prop::option::of(ident()))
            .prop_map(|(job, because)| TestStmt::Expect(Expectation::Rejected { job, because }, sp())),
        (ident(), prop::option::of(ident()), prop::option::of(ident()))
            .prop_map(|(job, by, under)| TestStmt::Expect(Expectation::Evicted { job, by, under }, sp())),
        ident().prop_map(|job| TestStmt::Expect(Expectation::Running { job }, sp())),
        expr()
            .prop_filter("a bare name followed by a keyword reads as another expectation", |x| !matches!(
                x.kind,
                ExprKind::Name(_)
            ))
            .prop_map(|x| TestStmt::Expect(Expectation::Holds(x), sp())),
    ]
}

fn item() -> impl Strategy<Value = Item> {
    let rule_kind = prop::sample::select(vec![RuleKind::Admit, RuleKind::Filter, RuleKind::Score, RuleKind::CardScore]);
    prop_oneof![
        (prop::collection::vec(ident(), 1..3), prop::option::of(ident())).prop_map(|(segs, alias)| Item::Use(
            UseDecl { path: Path { segments: segs, span: sp() }, alias, span: sp() }
        )),
        (ident(), prop::option::of(ty()), expr()).prop_map(|(name, ty, value)| Item::Const(ConstDecl {
            name,
            ty,
            value,
            span: sp()
        })),
        (ident(), prop::collection::vec((ident(), ty()), 0..3), prop::option::of(ty()), expr()).prop_map(
            |(name, ps, ret, body)| {
                Item::Fn(FnDecl {
                    name,
                    params: ps.into_iter().map(|(name, ty)| Param { name, ty }).collect(),
                    ret,
                    body,
                    span: sp(),
                })
            }
        ),
        queue().prop_map(Item::Queue),
        (ident(), expr()).prop_map(|(name, value)| Item::PriorityClass(PriorityClass { name, value, span: sp() })),
        prop::collection::vec(ident(), 1..4).prop_map(|levels| Item::Topology(Topology { levels, span: sp() })),
        prop::collection::vec((ident(), expr()), 0..3).prop_map(|es| Item::Settings(Settings {
            entries: es.into_iter().map(|(name, value)| Setting { name, value }).collect(),
            span: sp()
        })),
        (
            rule_kind,
            ident(),
            prop::option::of(strlit()),
            prop::option::of(scalar()),
            prop::option::of(scalar()),
            expr()
        )
            .prop_map(|(kind, name, reason, tier, weight, body)| {
                // Admit and filter rules have a reason; scores have a tier and a weight.
                let gate = matches!(kind, RuleKind::Admit | RuleKind::Filter);
                let (reason, tier, weight) = if gate { (reason, None, None) } else { (None, tier, weight) };
                Item::Rule(Rule { kind, name, reason, tier, weight, body, span: sp() })
            }),
        (
            prop::sample::select(vec![OrderTarget::Queue, OrderTarget::Job, OrderTarget::Victim]),
            prop::collection::vec(
                (expr(), prop::option::of(prop::sample::select(vec![Direction::Asc, Direction::Desc]))),
                1..3
            )
        )
            .prop_map(|(target, keys)| Item::Order(Order {
                target,
                keys: keys.into_iter().map(|(expr, dir)| OrderKey { expr, dir, span: sp() }).collect(),
                span: sp()
            })),
        prop::collection::vec(
            (
                prop::sample::select(vec![GangKind::Require, GangKind::Prefer]),
                ident(),
                prop::option::of(scalar()),
                prop::option::of(expr())
            ),
            0..3
        )
        .prop_map(|cs| Item::Gang(Gang {
            clauses: cs
                .into_iter()
                .map(|(kind, level, weight, when)| GangClause { kind, level, weight, when, span: sp() })
                .collect(),
            span: sp()
        })),
        (0..4u8, prop::option::of(ident()), prop::option::of(strlit()), expr(), prop::option::of(expr())).prop_map(
            |(k, name, reason, when, cost)| {
                let kind =
                    [VictimKind::Preempt, VictimKind::Reclaim, VictimKind::Borrow, VictimKind::Protect][usize::from(k)];
                let preempt = kind == VictimKind::Preempt;
                // Only a preempt rule has a cost, only a protect rule a reason.
                let reason = if kind == VictimKind::Protect { reason } else { None };
                Item::Victim(VictimRule {
                    kind,
                    name,
                    reason,
                    when,
                    cost: if preempt { cost } else { None },
                    span: sp(),
                })
            }
        ),
        (strlit(), prop::collection::vec(test_stmt(), 0..5)).prop_map(|(name, stmts)| Item::Test(TestBlock {
            name,
            stmts,
            span: sp()
        })),
    ]
}

fn file() -> impl Strategy<Value = File> {
    (ident(), prop::collection::vec(item(), 0..6))
        .prop_map(|(name, items)| File { header: Some(Header::Policy(name)), items })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn print_then_parse_is_identity(tree in file()) {
        let text = fmt::format(&tree, &[]);
        let reparsed = parse::parse(FileId(0), &text);
        prop_assert!(reparsed.is_ok(), "printed text does not parse: {:?}\n{text}", reparsed.err());
        let reparsed = reparsed.unwrap_or_else(|_| unreachable!());
        prop_assert_eq!(&reparsed, &tree, "\n{}", text);
        let again = fmt::format(&reparsed, &parse::comments(FileId(0), &text));
        prop_assert_eq!(again, text);
    }

    #[test]
    fn expression_round_trip(x in expr()) {
        let text = fmt::expr_text(&x);
        let back = parse::parse_expr(FileId(0), &text);
        prop_assert!(back.is_ok(), "{text}: {:?}", back.err());
        prop_assert_eq!(back.unwrap_or_else(|_| unreachable!()), x, "{}", text);
    }
}
