//! The syntax tree produced by [`crate::parse`] and printed by [`crate::fmt`].
//!
//! It records what the author wrote (including number spellings), so the formatter can
//! reproduce it; resolution and types live in [`crate::hir`].

use crate::kinds::{CompKind, Direction, GangKind, QuotaKind, RuleKind, VictimKind};
use crate::source::Span;
use crate::units::Unit;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    pub segments: Vec<Ident>,
    pub span: Span,
}

impl Path {
    pub(crate) fn dotted(&self) -> String {
        self.segments.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(".")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    pub value: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub header: Option<Header>,
    pub items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Header {
    Policy(Ident),
    Module(Path),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Use(UseDecl),
    Const(ConstDecl),
    Fn(FnDecl),
    Queue(QueueDecl),
    PriorityClass(PriorityClass),
    Topology(Topology),
    Settings(Settings),
    Rule(Rule),
    Order(Order),
    Gang(Gang),
    Victim(VictimRule),
    Test(TestBlock),
}

impl Item {
    pub fn span(&self) -> Span {
        match self {
            Item::Use(x) => x.span,
            Item::Const(x) => x.span,
            Item::Fn(x) => x.span,
            Item::Queue(x) => x.span,
            Item::PriorityClass(x) => x.span,
            Item::Topology(x) => x.span,
            Item::Settings(x) => x.span,
            Item::Rule(x) => x.span,
            Item::Order(x) => x.span,
            Item::Gang(x) => x.span,
            Item::Victim(x) => x.span,
            Item::Test(x) => x.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct UseDecl {
    pub path: Path,
    pub alias: Option<Ident>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ConstDecl {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FnDecl {
    pub name: Ident,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    pub body: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: Ident,
    pub ty: TypeExpr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub kind: TypeKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeKind {
    /// `gpu`, `job`, `bytes/gpu`: the first name, then (`*` or `/`, name) pairs.
    Named(Ident, Vec<(UnitOp, Ident)>),
    List(Box<TypeExpr>),
    Optional(Box<TypeExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitOp {
    Mul,
    Div,
}

#[derive(Clone, Debug, PartialEq)]
pub struct QueueDecl {
    pub name: Ident,
    pub stmts: Vec<QueueStmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum QueueStmt {
    Queue(QueueDecl),
    Quota {
        kind: QuotaKind,
        values: Vec<Expr>,
        /// `from 22:00 to 07:00 on sat, sun`: when the amounts apply (always if `None`).
        window: Option<Window>,
        span: Span,
    },
    Weight(Expr, Span),
    HalfLife(Expr, Span),
    Attr {
        name: Ident,
        value: Expr,
        span: Span,
    },
    Queueing(Ident, Span),
    /// `fairshare parent`: the queue is transparent to Slurm's Fair Tree.
    Fairshare(Ident, Span),
}

impl QueueStmt {
    pub(crate) fn span(&self) -> Span {
        match self {
            QueueStmt::Queue(q) => q.span,
            QueueStmt::Quota { span, .. }
            | QueueStmt::Weight(_, span)
            | QueueStmt::HalfLife(_, span)
            | QueueStmt::Attr { span, .. }
            | QueueStmt::Queueing(_, span)
            | QueueStmt::Fairshare(_, span) => *span,
        }
    }
}

/// When a quota statement applies, as written: `from 22:00 to 07:00`, `on sat, sun`, or
/// both. The checker turns it into a [`crate::window::Window`].
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub hours: Option<(ClockTime, ClockTime)>,
    pub days: Vec<Ident>,
    pub span: Span,
}

/// A local time of day as written, `07:00`: hours and minutes, not yet checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockTime {
    pub hour: u32,
    pub minute: u32,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PriorityClass {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    pub levels: Vec<Ident>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub entries: Vec<Setting>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub name: Ident,
    pub value: Expr,
}

/// `admit`, `filter`, `score` and `card_score` rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub kind: RuleKind,
    pub name: Ident,
    pub reason: Option<StrLit>,
    pub tier: Option<Expr>,
    pub weight: Option<Expr>,
    pub body: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderTarget {
    Queue,
    Job,
    Victim,
}

impl OrderTarget {
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            OrderTarget::Queue => "queue_order",
            OrderTarget::Job => "job_order",
            OrderTarget::Victim => "victim_order",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Order {
    pub target: OrderTarget,
    pub keys: Vec<OrderKey>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderKey {
    pub expr: Expr,
    /// `None` when the author wrote no direction (ascending).
    pub dir: Option<Direction>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Gang {
    pub clauses: Vec<GangClause>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GangClause {
    pub kind: GangKind,
    pub level: Ident,
    pub weight: Option<Expr>,
    pub when: Option<Expr>,
    pub span: Span,
}

/// `preempt`, `reclaim`, `borrow` and `protect` rules.
#[derive(Clone, Debug, PartialEq)]
pub struct VictimRule {
    pub kind: VictimKind,
    pub name: Option<Ident>,
    /// Why a `protect` rule keeps a job (explain shows it).
    pub reason: Option<StrLit>,
    pub when: Expr,
    pub cost: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TestBlock {
    pub name: StrLit,
    pub stmts: Vec<TestStmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TestStmt {
    Node {
        names: Vec<NodeName>,
        props: Vec<Prop>,
        span: Span,
    },
    Submit {
        job: Ident,
        props: Vec<Prop>,
        span: Span,
    },
    Run {
        job: Ident,
        nodes: Vec<Ident>,
        props: Vec<Prop>,
        span: Span,
    },
    Advance(Expr, Span),
    Complete(Ident, Span),
    Fail(Ident, Span),
    /// Past usage of a queue, or of a user in a leaf queue.
    Usage {
        queue: Ident,
        user: Option<Ident>,
        amount: Expr,
        span: Span,
    },
    Expect(Expectation, Span),
}

impl TestStmt {
    pub(crate) fn span(&self) -> Span {
        match self {
            TestStmt::Node { span, .. }
            | TestStmt::Submit { span, .. }
            | TestStmt::Run { span, .. }
            | TestStmt::Advance(_, span)
            | TestStmt::Complete(_, span)
            | TestStmt::Fail(_, span)
            | TestStmt::Usage { span, .. }
            | TestStmt::Expect(_, span) => *span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeName {
    pub name: Ident,
    pub range: Option<(u32, u32)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expectation {
    On {
        job: Ident,
        nodes: Vec<Ident>,
    },
    Pending {
        job: Ident,
        because: Option<Ident>,
    },
    Rejected {
        job: Ident,
        because: Option<Ident>,
    },
    /// `under RULE`: the victim rule that allowed it.
    Evicted {
        job: Ident,
        by: Option<Ident>,
        under: Option<Ident>,
    },
    Running {
        job: Ident,
    },
    Holds(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Prop {
    Label { key: StrLit, value: Expr, span: Span },
    Plain { name: Ident, value: Option<Expr>, span: Span },
}

impl Prop {
    pub(crate) fn span(&self) -> Span {
        match self {
            Prop::Label { span, .. } | Prop::Plain { span, .. } => *span,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// A number as written: its spelling (kept by the formatter) and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct NumLit {
    pub text: String,
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Number(NumLit),
    Quantity { number: NumLit, unit: Unit, flavour: Option<Ident> },
    Str(String),
    Bool(bool),
    MigProfile(String),
    List(Vec<Expr>),
    Name(Ident),
    Field(Box<Expr>, Ident),
    Index(Box<Expr>, Box<Expr>),
    Call { callee: Path, args: Vec<Expr> },
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    If { cond: Box<Expr>, then: Box<Expr>, els: Box<Expr> },
    Block { lets: Vec<Let>, body: Box<Expr> },
    Comprehension { kind: CompKind, var: Ident, iter: Box<Expr>, body: Box<Expr> },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Let {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Not,
    Neg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Implies,
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Default,
    Add,
    Sub,
    Mul,
    Div,
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Implies => "implies",
            BinaryOp::Or => "or",
            BinaryOp::And => "and",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::In => "in",
            BinaryOp::NotIn => "not in",
            BinaryOp::Default => "??",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
        }
    }

    /// Binding strength, higher binds tighter. The parser and the printer share it.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            BinaryOp::Implies => 1,
            BinaryOp::Or => 2,
            BinaryOp::And => 3,
            // `not` is a prefix operator at level 4.
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge
            | BinaryOp::In
            | BinaryOp::NotIn => 5,
            BinaryOp::Default => 6,
            BinaryOp::Add | BinaryOp::Sub => 7,
            BinaryOp::Mul | BinaryOp::Div => 8,
            // Unary minus is level 9; postfix field access and indexing are above it.
        }
    }

    pub(crate) fn right_assoc(self) -> bool {
        matches!(self, BinaryOp::Implies | BinaryOp::Default)
    }

    pub fn is_comparison(self) -> bool {
        self.precedence() == 5
    }
}

pub(crate) const PREC_NOT: u8 = 4;
pub(crate) const PREC_NEG: u8 = 9;
