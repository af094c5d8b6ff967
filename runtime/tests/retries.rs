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
    let spec = NodeSpec {
        name: "a".into(),
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
    };
    s.add_node(&spec).unwrap_or_else(|e| panic!("{e}"));
    s
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
