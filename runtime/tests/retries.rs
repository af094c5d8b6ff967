//! A job that did not fit is not tried again until capacity frees, and once no node can
//! take a job's shape, its other waiting jobs of that shape are not tried either.

use gpol_compiler::check::check;
use gpol_compiler::engine::{EngineKind, compile};
use gpol_compiler::source::{SourceFile, SourceMap};
use gpol_runtime::cycle::{JobSpec, Scheduler};
use gpol_runtime::jobs::{Reason, Request, State};
use gpol_runtime::model::{NodeSpec, Sharing};

fn scheduler() -> Scheduler {
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("retries.gpol", "policy retries\n\nqueue team {}\n"));
    let checked = check(&mut sources, id);
    let policy = checked.policy.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    let mut s = Scheduler::new(compile(policy, EngineKind::Jit).unwrap_or_else(|d| panic!("{d:?}")));
    s.add_node(&node("a")).unwrap_or_else(|e| panic!("{e}"));
    s
}

/// An eight-card exclusive node.
fn node(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        model: "h100".into(),
        cards: 8,
        card_mem: 80 << 30,
        sharing: Sharing::Exclusive,
        mig: Vec::new(),
        max_clients: 1,
        cpu_milli: 1_000_000,
        mem: 1 << 40,
        domains: Vec::new(),
        labels: Vec::new(),
    }
}

fn job(name: &str, cards: u32) -> JobSpec {
    JobSpec {
        name: name.into(),
        queue: 0,
        user: "u".into(),
        priority_class: None,
        priority: 0.0,
        request: Request::Whole(cards),
        replicas: 1,
        min_replicas: 1,
        gpu_mem: 0,
        cpu_milli: 1000,
        mem: 0,
        models: Vec::new(),
        bursty: false,
        latency_critical: false,
        preemptible: true,
        duration_ms: None,
        checkpoint_every_ms: None,
        utilization: 1.0,
        labels: Vec::new(),
    }
}

#[test]
fn a_full_shape_is_tried_once_per_capacity_change() {
    let mut s = scheduler();
    let big = s.submit(job("big", 5)).unwrap_or_else(|e| panic!("{e}"));
    let y = s.submit(job("y", 1)).unwrap_or_else(|e| panic!("{e}"));
    let z = s.submit(job("z", 1)).unwrap_or_else(|e| panic!("{e}"));
    for j in [big, y, z] {
        s.start_on(j, &[0], 0, 0).unwrap_or_else(|e| panic!("{e}"));
    }
    // One card free; fifty jobs of two cards each.
    let waiting: Vec<usize> =
        (0..50).map(|i| s.submit(job(&format!("w{i}"), 2)).unwrap_or_else(|e| panic!("{e}"))).collect();
    s.cycle();
    assert_eq!(s.attempts, 50, "each new job is tried once");
    assert!(waiting.iter().all(|&j| s.jobs[j].state == State::Pending(Some(Reason::Capacity))));
    s.cycle();
    assert_eq!(s.attempts, 50, "nothing freed, nothing retried");

    // Two cards free: the first waiting job starts, the next finds the node full again,
    // and the other 48 of the same shape are not tried.
    s.complete(y);
    assert_eq!(s.cycle(), 1);
    assert_eq!(s.attempts, 52);
    assert_eq!(s.jobs[waiting[0]].state, State::Running);
    assert!(waiting[1..].iter().all(|&j| s.jobs[j].state == State::Pending(Some(Reason::Capacity))));

    // One card frees: not enough for the shape, found out with one attempt.
    s.complete(z);
    assert_eq!(s.cycle(), 0);
    assert_eq!(s.attempts, 53);
}

#[test]
fn a_different_shape_is_still_tried() {
    let mut s = scheduler();
    let big = s.submit(job("big", 7)).unwrap_or_else(|e| panic!("{e}"));
    s.start_on(big, &[0], 0, 0).unwrap_or_else(|e| panic!("{e}"));
    let two = s.submit(job("two", 2)).unwrap_or_else(|e| panic!("{e}"));
    let one = s.submit(job("one", 1)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.cycle(), 1);
    assert_eq!(s.jobs[two].state, State::Pending(Some(Reason::Capacity)));
    assert_eq!(s.jobs[one].state, State::Running);
}

/// Two nodes of eight cards; queue `a` guarantees 8, `b` and `c` 4 each; reclaim reads
/// only the victim.
fn cohort() -> Scheduler {
    let text = "policy cohort\n\nqueue org {\n  queue a { guarantee 8 gpu }\n  queue b { guarantee 4 gpu }\n  \
                queue c { guarantee 4 gpu }\n}\n\nreclaim take_back { when victim.preemptible }\n";
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("cohort.gpol", text));
    let checked = check(&mut sources, id);
    let policy = checked.policy.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    let mut s = Scheduler::new(compile(policy, EngineKind::Jit).unwrap_or_else(|d| panic!("{d:?}")));
    for name in ["n1", "n2"] {
        s.add_node(&node(name)).unwrap_or_else(|e| panic!("{e}"));
    }
    s
}

#[test]
fn a_claimant_is_retried_only_after_starts_that_could_give_it_victims() {
    let mut s = cohort();
    let (a, b, c) = (1, 2, 3);
    let held = s.submit(JobSpec { queue: b, ..job("held", 4) }).unwrap_or_else(|e| panic!("{e}"));
    s.start_on(held, &[0], 0, 0).unwrap_or_else(|e| panic!("{e}"));
    let filler = s.submit(JobSpec { queue: a, ..job("filler", 6) }).unwrap_or_else(|e| panic!("{e}"));
    s.start_on(filler, &[1], 0, 0).unwrap_or_else(|e| panic!("{e}"));
    // `a` asks for 8 more cards with 6 free, and `b` is within its guarantee: no
    // victims, and none until some other queue borrows.
    let claimant = s.submit(JobSpec { queue: a, ..job("claimant", 8) }).unwrap_or_else(|e| panic!("{e}"));
    s.cycle();
    let before = s.attempts;
    assert!(s.jobs[claimant].is_pending(), "{:?}", s.jobs[claimant].state);
    // A start in `c`, within its guarantee: no new victim, no retry.
    s.submit(JobSpec { queue: c, ..job("small", 3) }).unwrap_or_else(|e| panic!("{e}"));
    s.cycle();
    assert_eq!(s.attempts, before + 1, "only the new job is tried");
    s.cycle();
    assert_eq!(s.attempts, before + 1);
    // A start that makes `c` borrow: its preemptible jobs are now victims; retried.
    s.submit(JobSpec { queue: c, ..job("more", 2) }).unwrap_or_else(|e| panic!("{e}"));
    s.cycle();
    s.cycle();
    assert!(s.attempts >= before + 3, "the claimant is tried again: {} vs {before}", s.attempts);
}

/// Queue `a` may hold 2 cards, `b` anything; no victim rules.
fn capped() -> Scheduler {
    let text = "policy capped\n\nqueue org {\n  queue a { limit 2 gpu }\n  queue b {}\n}\n";
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("capped.gpol", text));
    let checked = check(&mut sources, id);
    let policy = checked.policy.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    let mut s = Scheduler::new(compile(policy, EngineKind::Jit).unwrap_or_else(|d| panic!("{d:?}")));
    s.add_node(&node("n1")).unwrap_or_else(|e| panic!("{e}"));
    s
}

#[test]
fn a_job_the_quota_holds_back_waits_for_its_cap_not_for_capacity() {
    let mut s = capped();
    let (a, b) = (1, 2);
    let first = s.submit(JobSpec { queue: a, ..job("first", 2) }).unwrap_or_else(|e| panic!("{e}"));
    let other = s.submit(JobSpec { queue: b, ..job("other", 2) }).unwrap_or_else(|e| panic!("{e}"));
    let held = s.submit(JobSpec { queue: a, ..job("held", 1) }).unwrap_or_else(|e| panic!("{e}"));
    s.cycle();
    assert_eq!(s.jobs[first].state, State::Running);
    assert!(matches!(&s.jobs[held].state, State::Pending(Some(Reason::Quota(_)))), "{:?}", s.jobs[held].state);
    let before = s.attempts;
    // Capacity frees in `b`: `a`'s cap is as full as before, so `held` is not tried.
    s.complete(other);
    s.cycle();
    assert_eq!(s.attempts, before, "freed capacity elsewhere does not retry a capped job");
    // `a`'s own job ends: its cap gives, and `held` starts.
    s.complete(first);
    s.cycle();
    assert_eq!(s.attempts, before + 1);
    assert_eq!(s.jobs[held].state, State::Running);
}
