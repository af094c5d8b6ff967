//! Victim rules as a ClusterQueue's `preemption` settings. Kueue's settings are a few
//! fixed conditions; a rule that states one exactly becomes it. Any other rule becomes the
//! widest setting that allows no eviction the rule forbids (often `Never`), with a
//! finding: Kueue must never evict a job the policy keeps. Rules of one kind add up, as
//! in gpol (a victim any of them allows may go), and a `protect` rule, which Kueue cannot
//! state, turns every setting to `Never`.
//!
//! `borrow` rules by fair-sharing share are Kueue's preemption-based fair sharing, a
//! Configuration block rather than a ClusterQueue field, and exact only where Kueue and
//! gpol compare the same queues' shares: every ClusterQueue directly under its root.

use super::conditions::{self, Condition};
use super::objects::{BorrowPolicy, BorrowWithinCohort, Preemption, ReclaimWithinCohort, WithinClusterQueue};
use super::{Enforcer, Finding, whole_i32};
use gpol_compiler::hir::{Policy, VictimRule};
use gpol_compiler::ir::VictimKind;

/// Kueue's fair-sharing strategies, in the order Kueue requires them.
const STRATEGIES: [(Condition, &str); 2] =
    [(Condition::FinalShare, "LessThanOrEqualToFinalShare"), (Condition::InitialShare, "LessThanInitialShare")];

/// Kueue's default strategies, for a Configuration that turns fair sharing on for its
/// admission order alone (no ClusterQueue reclaims, so none preempts by share).
pub const DEFAULT_STRATEGIES: [&str; 2] = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"];

/// The settings every ClusterQueue gets, and Kueue's fair-sharing strategies when the
/// policy's `borrow` rules are them.
pub struct Settings {
    pub preemption: Preemption,
    pub strategies: Vec<&'static str>,
}

pub fn settings(policy: &Policy, findings: &mut Vec<Finding>) -> Settings {
    let mut p = Preemption::default();
    let mut shares = Vec::new();
    let flat = is_flat(policy);
    for rule in &policy.victims {
        let c = conditions::condition(policy, &rule.when);
        let by_share = matches!(c, Condition::FinalShare | Condition::InitialShare);
        match rule.kind {
            VictimKind::Preempt => p.within_cluster_queue = p.within_cluster_queue.max(within(rule, c, findings)),
            VictimKind::Reclaim if by_share => {
                let m = "Kueue's fair sharing reclaims for a claimant within its nominal quota whatever the shares (only borrowing claimants are held to them), so this rule stays `Never`";
                findings.push(unstated(rule, m));
            }
            VictimKind::Reclaim => p.reclaim_within_cohort = p.reclaim_within_cohort.max(reclaim(rule, c, findings)),
            VictimKind::Borrow if by_share && flat => shares.push((rule, c)),
            VictimKind::Borrow if by_share => {
                let m = "Kueue compares the shares of the subtrees just below the two queues' common Cohort, gpol those of the queues themselves: the same only when every ClusterQueue sits directly under its root, so this rule stays `Never`";
                findings.push(unstated(rule, m));
            }
            VictimKind::Borrow => p.borrow_within_cohort = widest(&p.borrow_within_cohort, &borrow(rule, c, findings)),
            VictimKind::Protect => {}
        }
    }
    if p.reclaim_within_cohort != ReclaimWithinCohort::Never && !flat {
        for rule in policy.victims.iter().filter(|v| v.kind == VictimKind::Reclaim) {
            let m = "in nested Cohorts Kueue also reclaims for a claimant whose own ClusterQueue borrows, once its sub-cohort is within its quota, where gpol requires every queue on the claimant's side to end within its guarantee, so `reclaimWithinCohort` stays `Never`";
            findings.push(unstated(rule, m));
        }
        p.reclaim_within_cohort = ReclaimWithinCohort::Never;
    }
    let needs_reclaim = |p: &Preemption| p.reclaim_within_cohort == ReclaimWithinCohort::Never;
    if needs_reclaim(&p) {
        for (rule, _) in shares.drain(..) {
            let m = "Kueue's fair sharing evicts across ClusterQueues only where they may reclaim (no `reclaim` rule Kueue states here), so this rule is not Kueue's";
            findings.push(unstated(rule, m));
        }
    }
    if !shares.is_empty() && p.borrow_within_cohort.policy != BorrowPolicy::Never {
        for rule in policy.victims.iter().filter(|v| v.kind == VictimKind::Borrow) {
            if !shares.iter().any(|(r, _)| std::ptr::eq(*r, rule)) {
                let m = "with fair sharing Kueue ignores `borrowWithinCohort`, so this rule is not Kueue's";
                findings.push(unstated(rule, m));
            }
        }
        p.borrow_within_cohort = BorrowWithinCohort::default();
    }
    if needs_reclaim(&p) && p.borrow_within_cohort.policy != BorrowPolicy::Never {
        for rule in policy.victims.iter().filter(|v| v.kind == VictimKind::Borrow) {
            let m = "Kueue lets a borrowing claimant evict only where it may also reclaim (no `reclaim` rule Kueue states here), so `borrowWithinCohort` stays `Never`";
            findings.push(unstated(rule, m));
        }
        p.borrow_within_cohort = BorrowWithinCohort::default();
    }
    let mut strategies: Vec<&'static str> =
        STRATEGIES.iter().filter(|(c, _)| shares.iter().any(|(_, s)| s == c)).map(|(_, name)| *name).collect();
    let protect: Vec<&VictimRule> = policy.victims.iter().filter(|v| v.kind == VictimKind::Protect).collect();
    if !protect.is_empty() && (p != Preemption::default() || !strategies.is_empty()) {
        for rule in protect {
            let m = "Kueue cannot exempt jobs from preemption, so that it never evicts a job this rule keeps, the ClusterQueues preempt nothing";
            findings.push(unstated(rule, m));
        }
        p = Preemption::default();
        strategies.clear();
    }
    Settings { preemption: p, strategies }
}

/// Whether every leaf queue sits directly under a root (or is one).
pub fn is_flat(policy: &Policy) -> bool {
    policy
        .queues
        .iter()
        .filter(|q| q.children.is_empty())
        .all(|q| q.parent.is_none_or(|p| policy.queues[p].parent.is_none()))
}

fn unstated(rule: &VictimRule, message: &str) -> Finding {
    let construct = format!("{} `{}`", rule.kind.keyword(), rule.name);
    Finding::unenforced(rule.span, construct, message, Enforcer::ServePreempt)
}

fn within(rule: &VictimRule, c: Condition, findings: &mut Vec<Finding>) -> WithinClusterQueue {
    match c {
        Condition::LowerPriority => WithinClusterQueue::LowerPriority,
        Condition::LowerOrNewerEqualPriority => WithinClusterQueue::LowerOrNewerEqualPriority,
        Condition::Always => {
            let m = "Kueue evicts within a ClusterQueue only by priority: `withinClusterQueue: LowerOrNewerEqualPriority`, part of what the rule allows";
            findings.push(unstated(rule, m));
            WithinClusterQueue::LowerOrNewerEqualPriority
        }
        Condition::LowerPriorityUpTo(_) | Condition::FinalShare | Condition::InitialShare | Condition::Other => {
            let m = "Kueue's `withinClusterQueue` cannot state this condition, so it stays `Never`";
            findings.push(unstated(rule, m));
            WithinClusterQueue::Never
        }
    }
}

fn reclaim(rule: &VictimRule, c: Condition, findings: &mut Vec<Finding>) -> ReclaimWithinCohort {
    match c {
        Condition::Always => ReclaimWithinCohort::Any,
        Condition::LowerPriority => ReclaimWithinCohort::LowerPriority,
        Condition::LowerOrNewerEqualPriority => {
            let m = "Kueue's `reclaimWithinCohort` has no equal-priority case: `LowerPriority`, part of what the rule allows";
            findings.push(unstated(rule, m));
            ReclaimWithinCohort::LowerPriority
        }
        Condition::LowerPriorityUpTo(_) | Condition::FinalShare | Condition::InitialShare | Condition::Other => {
            let m = "Kueue's `reclaimWithinCohort` cannot state this condition, so it stays `Never`";
            findings.push(unstated(rule, m));
            ReclaimWithinCohort::Never
        }
    }
}

fn borrow(rule: &VictimRule, c: Condition, findings: &mut Vec<Finding>) -> BorrowWithinCohort {
    let lower =
        |threshold| BorrowWithinCohort { policy: BorrowPolicy::LowerPriority, max_priority_threshold: threshold };
    match c {
        Condition::LowerPriority => lower(None),
        Condition::LowerPriorityUpTo(k) => match whole_i32(k.floor()) {
            Some(t) => lower(Some(t)),
            None => {
                let m =
                    "the priority threshold is beyond Kueue's 32-bit priorities, so `borrowWithinCohort` stays `Never`";
                findings.push(unstated(rule, m));
                BorrowWithinCohort::default()
            }
        },
        Condition::Always | Condition::LowerOrNewerEqualPriority => {
            let m = "Kueue's `borrowWithinCohort` evicts only lower priorities: `LowerPriority`, part of what the rule allows";
            findings.push(unstated(rule, m));
            lower(None)
        }
        Condition::FinalShare | Condition::InitialShare | Condition::Other => {
            let m = "Kueue's `borrowWithinCohort` cannot state this condition, so it stays `Never`";
            findings.push(unstated(rule, m));
            BorrowWithinCohort::default()
        }
    }
}

/// What two borrow settings allow together.
fn widest(a: &BorrowWithinCohort, b: &BorrowWithinCohort) -> BorrowWithinCohort {
    match (a.policy, b.policy) {
        (BorrowPolicy::Never, _) => b.clone(),
        (_, BorrowPolicy::Never) => a.clone(),
        _ => BorrowWithinCohort {
            policy: BorrowPolicy::LowerPriority,
            max_priority_threshold: a.max_priority_threshold.zip(b.max_priority_threshold).map(|(x, y)| x.max(y)),
        },
    }
}
