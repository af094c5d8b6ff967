//! What a policy's declarations mean, apart from how they are written: the kinds of
//! rule, quota, gang clause and victim rule, an order key's direction and a
//! comprehension's kind. The parser makes them, the checked policy ([`crate::hir`]) and
//! the IR carry them, and the runtime acts on them. A leaf, so that the syntax tree need
//! not depend on the IR; other crates name them through [`crate::ir`].

/// A rule over jobs and nodes: `admit`, `filter`, `score` or `card_score`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleKind {
    Admit,
    Filter,
    Score,
    CardScore,
}

impl RuleKind {
    pub fn keyword(self) -> &'static str {
        match self {
            RuleKind::Admit => "admit",
            RuleKind::Filter => "filter",
            RuleKind::Score => "score",
            RuleKind::CardScore => "card_score",
        }
    }
}

/// What a queue's quota statement bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Guarantee,
    Limit,
    BorrowLimit,
    LendLimit,
    UserLimit,
}

impl QuotaKind {
    pub const ALL: [QuotaKind; 5] =
        [QuotaKind::Guarantee, QuotaKind::Limit, QuotaKind::BorrowLimit, QuotaKind::LendLimit, QuotaKind::UserLimit];

    pub fn keyword(self) -> &'static str {
        match self {
            QuotaKind::Guarantee => "guarantee",
            QuotaKind::Limit => "limit",
            QuotaKind::BorrowLimit => "borrow_limit",
            QuotaKind::LendLimit => "lend_limit",
            QuotaKind::UserLimit => "user_limit",
        }
    }
}

/// How an order key sorts: ascending unless written `desc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Asc,
    Desc,
}

/// Whether a gang clause requires its replicas in one domain or prefers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GangKind {
    Require,
    Prefer,
}

/// What a victim rule allows or forbids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimKind {
    /// May evict a job of the claimant's own queue (or any job, where the quota tree
    /// governs nothing the claimant needs).
    Preempt,
    /// May evict a job of a queue that borrows, when the claimant's side ends within
    /// its guarantee.
    Reclaim,
    /// May evict a job of a queue that borrows, when the claimant's side ends borrowing.
    Borrow,
    /// Forbids evicting a job, whatever the other rules allow.
    Protect,
}

impl VictimKind {
    pub fn keyword(self) -> &'static str {
        match self {
            VictimKind::Preempt => "preempt",
            VictimKind::Reclaim => "reclaim",
            VictimKind::Borrow => "borrow",
            VictimKind::Protect => "protect",
        }
    }
}

/// What a comprehension computes over its list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompKind {
    Any,
    All,
    Count,
    Sum,
    Min,
    Max,
}

impl CompKind {
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            CompKind::Any => "any",
            CompKind::All => "all",
            CompKind::Count => "count",
            CompKind::Sum => "sum",
            CompKind::Min => "min",
            CompKind::Max => "max",
        }
    }
}
