//! One scheduling decision for a single-node job on a 5,000-node cluster: choosing the
//! queue and the job, admit, quota, filter and score over every node, choosing cards,
//! binding and accounting. Each iteration submits a job, runs a cycle that places it, and
//! completes it again (so the cluster stays the same). Results are in
//! docs/performance.md.

use criterion::{Criterion, criterion_group, criterion_main};
#[path = "../tests/support/mod.rs"]
mod support;

use gpol_compiler::engine::{EngineKind, NodeResult};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request};
use gpol_runtime::Scheduler;

const NODES: usize = 5000;

fn scheduler(file: &str, kind: EngineKind) -> Scheduler {
    let path = format!("{}/../compiler/benches/policies/{file}", env!("CARGO_MANIFEST_DIR"));
    let policy = gpol_compiler::load::compile_file(path.as_ref(), kind).expect("the bench policy compiles");
    let mut s = Scheduler::new(policy);
    for i in 0..NODES {
        let spec = NodeSpec {
            model: "h100".into(),
            cards: 8,
            cpu_milli: 128_000,
            mem: 2 << 40,
            domains: vec![(0, format!("nv{}", i / 2)), (1, format!("rack{}", i / 16))],
            ..NodeSpec::named(format!("n{i}"))
        };
        s.add_node(&spec).expect("a valid node");
    }
    // Some nodes busy, so the scores differ.
    for i in 0..NODES / 3 {
        let j = s.submit(job(format!("warm{i}"), 1 + (i % 6) as u32)).expect("a valid job");
        s.start_on(j, &[i * 3], History::default()).expect("the job fits");
    }
    s
}

fn job(name: String, cards: u32) -> JobSpec {
    JobSpec {
        request: Request::Whole(cards),
        gpu_mem: 40 << 30,
        cpu_milli: 8000,
        mem: 64 << 30,
        preemptible: true,
        ..JobSpec::named(name)
    }
}

fn decision(c: &mut Criterion) {
    let mut g = c.benchmark_group("decision/5000_nodes");
    for (file, kind, name) in [
        ("pack.gpol", EngineKind::Jit, "pack/jit"),
        ("ten_rules.gpol", EngineKind::Jit, "ten_rules/jit"),
        ("pack.gpol", EngineKind::Interp, "pack/interp"),
    ] {
        let mut s = scheduler(file, kind);
        // The policy's filter+score pass alone over the same cluster, for the share of
        // the decision that is the scheduler's own work.
        let probe = s.submit(job("probe".into(), 2)).expect("valid");
        g.bench_function(format!("{name}/pass_only"), |b| {
            let view = s.view(Some(probe));
            let ctx = s.ctx(&view);
            let rec = s.job_rec(probe);
            let nodes = s.node_records();
            let mut out = vec![NodeResult::default(); nodes.len()];
            b.iter(|| s.policy().engine().filter_score(&ctx, &rec, nodes, &mut out));
        });
        s.cycle();
        s.complete(probe);
        let mut n = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let j = s.submit(job(format!("j{n}"), 2)).expect("valid");
                let placed = gpol_runtime::starts(&s.cycle());
                assert_eq!(placed, 1);
                s.complete(j);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
