//! Gangs and preemption at scale (results in docs/performance.md):
//! - placing a 64-GPU gang (8 replicas × 8 cards) on a 1,000-node cluster with four
//!   topology levels, a fifth of it busy: order, filter and score, the gang search,
//!   binding and accounting;
//! - one preemption decision on a 5,000-node cluster running 20,000 jobs: the failed
//!   placement and the victim search that finds who to evict.

use criterion::{Criterion, criterion_group, criterion_main};
#[path = "../tests/support/mod.rs"]
mod support;

use gpol_compiler::engine::EngineKind;
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request};
use gpol_runtime::Scheduler;

const GANGS: &str = r#"policy bench_gangs
use std.pack
topology nvlink_domain, rack, block, zone
queue team {}
filter fits "enough free cards" { job.whole_cards <= node.free_cards }
gang {
  require same block
  prefer same nvlink_domain weight 4
  prefer same rack weight 1
}
score pack weight 1 { std.pack.binpack(job, node) }
"#;

const PREEMPT: &str = r#"policy bench_preempt
use std.pack
queue team {}
filter fits "enough free cards" { job.whole_cards <= node.free_cards }
score pack weight 1 { std.pack.binpack(job, node) }
preempt by_priority {
  when claimant.priority > victim.priority and victim.runtime >= 10m
  cost victim.total_gpus * victim.since_checkpoint
}
"#;

fn scheduler(text: &str, nodes: usize, kind: EngineKind) -> Scheduler {
    let mut s = Scheduler::new(support::compiled("bench.gpol", text, kind));
    for i in 0..nodes {
        let spec = NodeSpec {
            model: "h100".into(),
            cards: 8,
            cpu_milli: 128_000,
            mem: 2 << 40,
            domains: vec![
                (0, format!("nv{}", i / 2)),
                (1, format!("rack{}", i / 16)),
                (2, format!("block{}", i / 128)),
                (3, format!("zone{}", i / 512)),
            ],
            ..NodeSpec::named(format!("n{i}"))
        };
        s.add_node(&spec).expect("a valid node");
    }
    s
}

fn job(name: String, cards: u32, replicas: u32, priority: f64) -> JobSpec {
    JobSpec {
        priority: Some(priority),
        request: Request::Whole(cards),
        replicas,
        gpu_mem: 40 << 30,
        cpu_milli: 4000,
        mem: 64 << 30,
        preemptible: true,
        ..JobSpec::named(name)
    }
}

fn gang(c: &mut Criterion) {
    let mut s = scheduler(GANGS, 1000, EngineKind::Jit);
    // A fifth of the nodes partly busy, spread over the blocks.
    for i in 0..200 {
        let j = s.submit(job(format!("warm{i}"), 1 + (i % 7) as u32, 1, 0.0)).expect("valid");
        s.start_on(j, &[i * 5], History::default()).expect("valid");
    }
    let mut n = 0u64;
    c.bench_function("gang/64_gpus_on_1000_nodes/jit", |b| {
        b.iter(|| {
            n += 1;
            let j = s.submit(job(format!("g{n}"), 8, 8, 0.0)).expect("valid");
            assert_eq!(gpol_runtime::starts(&s.cycle()), 1);
            s.complete(j);
        })
    });
}

fn preemption(c: &mut Criterion) {
    let mut s = scheduler(PREEMPT, 5000, EngineKind::Jit);
    // 20,000 running 2-card jobs fill every node; half may be evicted (priority 0), half
    // not (priority 200); work since the last checkpoint varies.
    s.advance(4 * 3_600_000).expect("four hours is within the clock limit");
    for i in 0..20_000usize {
        let priority = if (i / 4 + i) % 2 == 0 { 0.0 } else { 200.0 };
        let j = s.submit(job(format!("r{i}"), 2, 1, priority)).expect("valid");
        let since = ((i * 7919) % 3600) as u64 * 1000;
        s.start_on(j, &[i / 4], History { ran_ms: 3_600_000, since_checkpoint_ms: since, evictions: 0 })
            .expect("valid");
    }
    let claimant = s.submit(job("claimant".into(), 4, 1, 100.0)).expect("valid");
    c.bench_function("preemption/5000_nodes_20000_jobs/jit", |b| {
        b.iter(|| {
            let decision = s.decide(claimant);
            assert!(matches!(decision, gpol_runtime::Decision::Wait(_)));
            let eviction = s.victim_search(claimant).expect("victims");
            assert_eq!(eviction.victims.len(), 2);
        })
    });
}

criterion_group!(benches, gang, preemption);
criterion_main!(benches);
