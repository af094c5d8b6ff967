//! Which of Kueue's fixed conditions a gpol expression states exactly. Recognition is by
//! form, after the checker's constant folding, so it never claims an equivalence it has
//! not seen: `victim.priority < claimant.priority` and `claimant.priority > victim.priority`
//! are Kueue's `LowerPriority`; anything it does not know is [`Condition::Other`].

use gpol_compiler::hir::{Expr, ExprKind, Policy};
use gpol_compiler::ir::Direction;
use gpol_compiler::schema::{Record, Root};
use gpol_compiler::syntax::BinaryOp;

/// A victim rule's condition, as far as Kueue can state it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Condition {
    /// `true`.
    Always,
    /// `victim.priority < claimant.priority`.
    LowerPriority,
    /// `victim.priority < claimant.priority or (victim.priority == claimant.priority and
    /// victim.submitted > claimant.submitted)`.
    LowerOrNewerEqualPriority,
    /// `victim.priority < claimant.priority and victim.priority <= K`.
    LowerPriorityUpTo(f64),
    /// `std.fair.kueue_share_after(claimant.queue) <= std.fair.kueue_share_after(victim.queue)`.
    FinalShare,
    /// `std.fair.kueue_share_after(claimant.queue) < std.fair.kueue_share(victim.queue)`.
    InitialShare,
    Other,
}

/// What a victim rule's `when` states.
pub fn condition(policy: &Policy, e: &Expr) -> Condition {
    let r = Reader { policy };
    if matches!(e.kind, ExprKind::Bool(true)) {
        Condition::Always
    } else if r.lower_priority(e) {
        Condition::LowerPriority
    } else if let Some(k) = r.lower_priority_up_to(e) {
        Condition::LowerPriorityUpTo(k)
    } else if r.lower_or_newer_equal(e) {
        Condition::LowerOrNewerEqualPriority
    } else if r.share(e, true) {
        Condition::FinalShare
    } else if r.share(e, false) {
        Condition::InitialShare
    } else {
        Condition::Other
    }
}

/// Whether an order is Kueue's within a ClusterQueue: higher priority first (then, as
/// gpol breaks ties anyway, the earlier submission).
pub fn is_kueue_job_order(keys: &[gpol_compiler::hir::OrderKey]) -> bool {
    let is = |k: &gpol_compiler::hir::OrderKey, root: Root, field: &str, dir: Direction| {
        k.dir == dir && field_of(&k.expr, root) == Some(field)
    };
    match keys {
        [p] => is(p, Root::Job, "priority", Direction::Desc),
        [p, s] => is(p, Root::Job, "priority", Direction::Desc) && is(s, Root::Job, "submitted", Direction::Asc),
        _ => false,
    }
}

/// Whether a queue order is Kueue's fair-sharing admission order: the smallest share first.
pub fn is_kueue_share_order(policy: &Policy, keys: &[gpol_compiler::hir::OrderKey]) -> bool {
    let r = Reader { policy };
    matches!(keys, [k] if k.dir == Direction::Asc && r.share_of(&k.expr, "std.fair.kueue_share", Root::Queue))
}

struct Reader<'p> {
    policy: &'p Policy,
}

impl Reader<'_> {
    /// `victim.priority < claimant.priority`, either way round.
    fn lower_priority(&self, e: &Expr) -> bool {
        let p = |e: &Expr, root| field_of(e, root) == Some("priority");
        compare(e).is_some_and(|(op, a, b)| match op {
            BinaryOp::Lt => p(a, Root::Victim) && p(b, Root::Claimant),
            BinaryOp::Gt => p(a, Root::Claimant) && p(b, Root::Victim),
            _ => false,
        })
    }

    /// `lower_priority and victim.priority <= K` (either order): `Some(K)`.
    fn lower_priority_up_to(&self, e: &Expr) -> Option<f64> {
        let (a, b) = both(e, BinaryOp::And)?;
        let threshold = |e: &Expr| {
            let (op, x, y) = compare(e)?;
            let victim = |e: &Expr| field_of(e, Root::Victim) == Some("priority");
            match (op, &x.kind, &y.kind) {
                (BinaryOp::Le, _, ExprKind::Num(k)) if victim(x) => Some(*k),
                (BinaryOp::Ge, ExprKind::Num(k), _) if victim(y) => Some(*k),
                _ => None,
            }
        };
        if self.lower_priority(a) {
            threshold(b)
        } else if self.lower_priority(b) {
            threshold(a)
        } else {
            None
        }
    }

    /// `lower_priority or (equal priority and victim newer)`, in any operand order.
    fn lower_or_newer_equal(&self, e: &Expr) -> bool {
        let Some((a, b)) = both(e, BinaryOp::Or) else { return false };
        let equal_and_newer = |e: &Expr| {
            let Some((x, y)) = both(e, BinaryOp::And) else { return false };
            (self.equal_priority(x) && self.newer(y)) || (self.equal_priority(y) && self.newer(x))
        };
        (self.lower_priority(a) && equal_and_newer(b)) || (self.lower_priority(b) && equal_and_newer(a))
    }

    fn equal_priority(&self, e: &Expr) -> bool {
        let p = |e: &Expr, root| field_of(e, root) == Some("priority");
        compare(e).is_some_and(|(op, a, b)| {
            op == BinaryOp::Eq
                && ((p(a, Root::Victim) && p(b, Root::Claimant)) || (p(a, Root::Claimant) && p(b, Root::Victim)))
        })
    }

    /// `victim.submitted > claimant.submitted`, either way round.
    fn newer(&self, e: &Expr) -> bool {
        let s = |e: &Expr, root| field_of(e, root) == Some("submitted");
        compare(e).is_some_and(|(op, a, b)| match op {
            BinaryOp::Gt => s(a, Root::Victim) && s(b, Root::Claimant),
            BinaryOp::Lt => s(a, Root::Claimant) && s(b, Root::Victim),
            _ => false,
        })
    }

    /// Kueue's fair-sharing strategies: `final` is `LessThanOrEqualToFinalShare`, else
    /// `LessThanInitialShare`.
    fn share(&self, e: &Expr, last: bool) -> bool {
        let (want, victim_fn) =
            if last { (BinaryOp::Le, "std.fair.kueue_share_after") } else { (BinaryOp::Lt, "std.fair.kueue_share") };
        let claimant = |e: &Expr| self.share_of(e, "std.fair.kueue_share_after", Root::Claimant);
        let victim = |e: &Expr| self.share_of(e, victim_fn, Root::Victim);
        let flipped = if last { BinaryOp::Ge } else { BinaryOp::Gt };
        compare(e).is_some_and(|(op, a, b)| {
            (op == want && claimant(a) && victim(b)) || (op == flipped && victim(a) && claimant(b))
        })
    }

    /// `function(ROOT.queue)` (or `function(queue)` for the queue itself).
    fn share_of(&self, e: &Expr, function: &str, root: Root) -> bool {
        let ExprKind::Call(id, args) = &e.kind else { return false };
        let named = self.policy.functions.get(*id).is_some_and(|f| f.name == function);
        let of_root = match (root, args.as_slice()) {
            (Root::Queue, [q]) => matches!(q.kind, ExprKind::Root(Root::Queue)),
            (_, [q]) => field_of(q, root) == Some("queue"),
            _ => false,
        };
        named && of_root
    }
}

/// `ROOT.field`: the field's name.
fn field_of(e: &Expr, root: Root) -> Option<&'static str> {
    let ExprKind::Field(base, record, index) = &e.kind else { return None };
    let of_root = matches!(base.kind, ExprKind::Root(r) if r == root);
    let job_record = matches!(record, Record::Job);
    (of_root && job_record).then(|| record.fields().get(usize::from(*index)).map(|f| f.name)).flatten()
}

fn compare(e: &Expr) -> Option<(BinaryOp, &Expr, &Expr)> {
    match &e.kind {
        ExprKind::Binary(op, a, b) => Some((*op, a, b)),
        _ => None,
    }
}

fn both(e: &Expr, want: BinaryOp) -> Option<(&Expr, &Expr)> {
    compare(e).filter(|(op, ..)| *op == want).map(|(_, a, b)| (a, b))
}
