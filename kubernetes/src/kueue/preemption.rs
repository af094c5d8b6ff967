//! Victim rules as a ClusterQueue's `preemption` settings. Kueue's settings are a few
//! fixed conditions; a rule that states one exactly becomes it. Any other rule becomes the
//! widest setting that allows no eviction the rule forbids (often `Never`), with a
//! finding: Kueue must never evict a job the policy keeps. Rules of one kind add up, as
//! in gpol (a victim any of them allows may go), and a `protect` rule, which Kueue cannot
//! state, turns every setting to `Never`.

use super::conditions::{self, Condition};
use super::objects::{BorrowPolicy, BorrowWithinCohort, Preemption, ReclaimWithinCohort, WithinClusterQueue};
use super::{Enforcer, Finding, whole_i32};
use gpol_compiler::hir::{Policy, VictimRule};
use gpol_compiler::syntax::VictimKind;

/// Kueue's fair-sharing strategies, in the order Kueue requires them.
const STRATEGIES: [(Condition, &str); 2] =
    [(Condition::FinalShare, "LessThanOrEqualToFinalShare"), (Condition::InitialShare, "LessThanInitialShare")];

/// The settings every ClusterQueue of the policy gets.
pub fn settings(policy: &Policy, findings: &mut Vec<Finding>, configuration: &mut Vec<String>) -> Preemption {
    let mut p = Preemption::default();
    let mut shares = Vec::new();
    for rule in &policy.victims {
        let c = conditions::condition(policy, &rule.when);
        match rule.kind {
            VictimKind::Preempt => p.within_cluster_queue = p.within_cluster_queue.max(within(rule, c, findings)),
            VictimKind::Reclaim | VictimKind::Borrow
                if matches!(c, Condition::FinalShare | Condition::InitialShare) =>
            {
                shares.push(c);
                if rule.kind == VictimKind::Reclaim {
                    p.reclaim_within_cohort = ReclaimWithinCohort::Any;
                }
            }
            VictimKind::Reclaim => p.reclaim_within_cohort = p.reclaim_within_cohort.max(reclaim(rule, c, findings)),
            VictimKind::Borrow => p.borrow_within_cohort = widest(&p.borrow_within_cohort, &borrow(rule, c, findings)),
            VictimKind::Protect => {}
        }
    }
    if !shares.is_empty() {
        fair_sharing(policy, &shares, &mut p, findings, configuration);
    }
    if p.reclaim_within_cohort == ReclaimWithinCohort::Never && p.borrow_within_cohort.policy != BorrowPolicy::Never {
        if let Some(rule) = policy.victims.iter().find(|v| v.kind == VictimKind::Borrow) {
            let m = "Kueue lets a borrowing claimant evict only where it may also reclaim (no `reclaim` rule here), so the ClusterQueues do not";
            findings.push(unstated(rule, m));
        }
        p.borrow_within_cohort = BorrowWithinCohort::default();
    }
    let protect: Vec<&VictimRule> = policy.victims.iter().filter(|v| v.kind == VictimKind::Protect).collect();
    if !protect.is_empty() && p != Preemption::default() {
        for rule in protect {
            let m = "Kueue cannot exempt jobs from preemption, so that it never evicts a job this rule keeps, the ClusterQueues preempt nothing";
            findings.push(unstated(rule, m));
        }
        p = Preemption::default();
    }
    p
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

/// Kueue's preemption-based fair sharing: a Configuration block, not a ClusterQueue
/// field. It ignores `borrowWithinCohort`, which must then stay `Never`.
fn fair_sharing(
    policy: &Policy,
    shares: &[Condition],
    p: &mut Preemption,
    findings: &mut Vec<Finding>,
    configuration: &mut Vec<String>,
) {
    configuration.push("# the policy's share rules: victims by fair-sharing share".into());
    configuration.push("fairSharing:".into());
    configuration.push("  preemptionStrategies:".into());
    for (c, name) in STRATEGIES {
        if shares.contains(&c) {
            configuration.push(format!("  - {name}"));
        }
    }
    if p.borrow_within_cohort.policy != BorrowPolicy::Never {
        for rule in policy.victims.iter().filter(|v| v.kind == VictimKind::Borrow) {
            let c = conditions::condition(policy, &rule.when);
            if !matches!(c, Condition::FinalShare | Condition::InitialShare) {
                let m = "with fair sharing Kueue ignores `borrowWithinCohort`, so this rule is not Kueue's";
                findings.push(unstated(rule, m));
            }
        }
        p.borrow_within_cohort = BorrowWithinCohort::default();
    }
}
