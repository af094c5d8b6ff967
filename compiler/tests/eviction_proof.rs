//! The static no-cycle proof: policies whose victim rules always raise the claimant
//! above the victim, or only reclaim, are proved; mutations that break the argument (a
//! strict `<` turned into `<=`, a condition dropped, a gap of 0) are not.

use gpol_compiler::eviction_proof::{Argument, prove};
use gpol_compiler::load::Checked;
use std::path::Path;

fn verdict(rules: &str) -> Option<Argument> {
    verdict_under("queue a { guarantee 4 gpu }\n  queue b {}", rules)
}

/// The verdict on `rules` under a tree whose leaves are `leaves`.
fn verdict_under(leaves: &str, rules: &str) -> Option<Argument> {
    let text = format!(
        "policy cycles\n\nuse std.fair\n\nqueue org {{\n  {leaves}\n}}\n\nconst min_gap = 100\n\n\
         fn outranks(x: job, y: job) -> bool {{ x.priority > y.priority }}\n\n{rules}\n"
    );
    let checked = Checked::from_text("cycles.gpol", &text);
    let errors: Vec<String> = checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
    assert!(errors.is_empty(), "{rules}: {errors:?}");
    let policy = checked.into_policy().expect("checks").policy;
    let program = gpol_compiler::lower::lower(&policy).expect("lowers");
    prove(&policy, &program)
}

fn by_priority() -> Option<Argument> {
    Some(Argument::Order(vec![(priority(), true)]))
}

fn priority() -> u16 {
    gpol_compiler::schema::Record::Job.field("priority").map(|(i, _)| i).unwrap_or(u16::MAX)
}

fn submitted() -> u16 {
    gpol_compiler::schema::Record::Job.field("submitted").map(|(i, _)| i).unwrap_or(u16::MAX)
}

#[test]
fn strict_priority_is_proved_and_its_mutations_are_not() {
    assert_eq!(verdict("preempt p { when claimant.priority > victim.priority }"), by_priority());
    assert_eq!(verdict("preempt p { when victim.priority < claimant.priority and victim.preemptible }"), by_priority());
    assert_eq!(verdict("preempt p { when claimant.priority >= victim.priority }"), None, "`<` turned into `<=`");
    assert_eq!(verdict("preempt p { when victim.priority <= claimant.priority }"), None);
    assert_eq!(verdict("preempt p { when claimant.priority - victim.priority >= min_gap }"), by_priority());
    assert_eq!(verdict("preempt p { when claimant.priority - victim.priority >= 0 }"), None, "a gap of 0");
    assert_eq!(verdict("preempt p { when claimant.priority >= victim.priority + 1 }"), by_priority());
    assert_eq!(verdict("preempt p { when 2 * claimant.priority > 2 * victim.priority + 0 }"), by_priority());
    assert_eq!(verdict("preempt p { when outranks(claimant, victim) }"), by_priority(), "through a function");
    assert_eq!(
        verdict("preempt p { when outranks(victim, claimant) }"),
        Some(Argument::Order(vec![(priority(), false)]))
    );
}

#[test]
fn the_ping_pong_conditions_prove_nothing() {
    assert_eq!(verdict("preempt other_queue { when claimant.queue != victim.queue and victim.runtime >= 1m }"), None);
    assert_eq!(verdict("preempt anything { when true }"), None);
    // Runtime is not static: a job that has run longer is not above another for good.
    assert_eq!(verdict("preempt p { when claimant.runtime > victim.runtime }"), None);
}

#[test]
fn lower_or_newer_equal_priority_is_a_lexicographic_order() {
    let kueue = "preempt within { when victim.priority < claimant.priority
        or (victim.priority == claimant.priority and victim.submitted > claimant.submitted) }";
    assert_eq!(verdict(kueue), Some(Argument::Order(vec![(priority(), true), (submitted(), false)])));
    let dropped = "preempt within { when victim.priority < claimant.priority or victim.priority == claimant.priority }";
    assert_eq!(verdict(dropped), None, "the tie-break dropped");
}

#[test]
fn every_rule_must_share_the_order() {
    let both = "preempt p { when claimant.priority > victim.priority }\nreclaim r { when victim.priority < claimant.priority }";
    assert_eq!(verdict(both), by_priority());
    let mixed = "preempt p { when claimant.priority > victim.priority }\nreclaim r { when true }";
    assert_eq!(verdict(mixed), None, "a reclaim of any priority breaks the order");
    let other = "preempt p { when claimant.priority > victim.priority }\nborrow r { when claimant.submitted < victim.submitted }";
    assert_eq!(verdict(other), None, "two different orders");
    let never = "preempt p { when claimant.priority > victim.priority }\npreempt q { when false }";
    assert_eq!(verdict(never), by_priority(), "a rule that never holds allows nothing");
    let protect = "preempt p { when claimant.priority > victim.priority }\nprotect k { when true }";
    assert_eq!(verdict(protect), by_priority(), "vetoes only remove evictions");
}

#[test]
fn reclaim_alone_is_proved_by_borrowing() {
    assert_eq!(verdict("reclaim r { when true }"), Some(Argument::Reclaim));
    assert_eq!(verdict("reclaim r { when victim.queue.borrowed.gpu > 0 gpu }"), Some(Argument::Reclaim));
    assert_eq!(verdict("reclaim r { when true }\npreempt p { when true }"), None, "a preempt rule added");
    assert_eq!(verdict("reclaim r { when true }\nborrow p { when true }"), None, "a borrow rule added");
}

fn share(rules: &str) -> Option<Argument> {
    verdict_under("queue a { guarantee 4 gpu }\n  queue b { guarantee 4 gpu }", rules)
}

fn is_share(a: Option<Argument>) -> bool {
    matches!(a, Some(Argument::Share(_)))
}

#[test]
fn a_utilization_below_the_victims_is_proved_and_its_mutations_are_not() {
    let kai = |claimant: &str, op: &str, victim: &str| {
        format!(
            "reclaim r {{ when std.fair.kai_utilization_after(claimant.queue, cluster) <= 1\n  \
             and std.fair.{claimant}(claimant.queue, cluster) {op} std.fair.{victim}(victim.queue, cluster) }}\n\
             borrow b {{ when std.fair.{claimant}(claimant.queue, cluster) {op} std.fair.{victim}(victim.queue, cluster) }}"
        )
    };
    let after = "kai_utilization_after";
    let before = "kai_utilization";
    assert!(is_share(share(&kai(after, "<", after))), "KAI's: below the victim's queue after");
    assert!(is_share(share(&kai(after, "<", before))), "below the victim's queue before");
    assert_eq!(share(&kai(after, "<=", after)), None, "`<` turned into `<=`: both queues at 0 may swap");
    assert_eq!(share(&kai(after, "<=", before)), None);
    assert_eq!(share(&kai(before, "<", after)), None, "the claimant's queue without it");
    assert_eq!(share(&kai(after, ">", after)), None, "the comparison turned around");
    // A condition dropped from one rule.
    let dropped = format!("{}\nborrow c {{ when victim.preemptible }}", kai(after, "<", after));
    assert_eq!(share(&dropped), None, "a rule without the comparison");
    let preempt = format!("{}\npreempt p {{ when true }}", kai(after, "<", after));
    assert_eq!(share(&preempt), None, "a preempt rule added");
    // A tree that governs CPUs too: a victim holding only CPUs leaves the GPU ratio as it is.
    let cpu = "queue a { guarantee 4 gpu, 8 cpu }\n  queue b { guarantee 4 gpu }";
    assert_eq!(verdict_under(cpu, &kai(after, "<", after)), None, "a second governed resource");
    // Unguarded holdings fall with any victim: `<=` against the victim's queue after will do.
    let held = "borrow b { when claimant.queue.allocated_after.gpu <= victim.queue.allocated_after.gpu }";
    assert!(is_share(share(held)));
    // A guard on the other queue's amount: the claimant's queue may divide by 0.
    let cross = "fn e(q: queue, other: queue) -> number {\n  \
                 if other.fair_share > 0 then q.allocated_after.gpu / 1 gpu / q.fair_share else 0\n}\n\
                 borrow b { when e(claimant.queue, victim.queue) < e(victim.queue, claimant.queue) }";
    assert_eq!(share(cross), None, "a guard on the other queue");
    let held_before = "borrow b { when claimant.queue.allocated_after.gpu <= victim.queue.allocated.gpu }";
    assert_eq!(share(held_before), None, "`<=` against the victim's queue before");
}

#[test]
fn every_example_policy_is_proved() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["policies", "samples"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("the folder is readable") {
            let path = entry.expect("an entry").path();
            if path.extension().is_none_or(|x| x != "gpol") {
                continue;
            }
            let policy = Checked::from_file(&path).expect("readable").into_policy().expect("checks").policy;
            let program = gpol_compiler::lower::lower(&policy).expect("lowers");
            assert!(prove(&policy, &program).is_some(), "{} is not proved", path.display());
        }
    }
}
