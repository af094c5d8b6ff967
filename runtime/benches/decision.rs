//! One scheduling decision for a single-node job on a 5,000-node cluster: choosing the
//! queue and the job, admit, quota, filter and score over every node, choosing cards,
//! binding and accounting. Each iteration submits a job, runs a cycle that places it, and
//! completes it again (so the cluster stays the same). Results are in
//! docs/performance.md.

use criterion::{Criterion, criterion_group, criterion_main};
use gpol_compiler::check::check;
use gpol_compiler::engine::{EngineKind, NodeResult, compile};
use gpol_compiler::source::{SourceFile, SourceMap};
use gpol_runtime::cycle::{JobSpec, Scheduler};
use gpol_runtime::jobs::Request;
use gpol_runtime::model::{NodeSpec, Sharing};

const NODES: usize = 5000;

fn scheduler(file: &str, kind: EngineKind) -> Scheduler {
    let path = format!("{}/../compiler/benches/policies/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new(path, text));
    let policy = check(&mut sources, id).policy.unwrap_or_else(|| panic!("policy"));
    let mut s = Scheduler::new(compile(policy, kind).unwrap_or_else(|d| panic!("{d:?}")));
    for i in 0..NODES {
        let spec = NodeSpec {
            name: format!("n{i}"),
            model: "h100".into(),
            cards: 8,
            card_mem: 80 << 30,
            sharing: Sharing::Exclusive,
            mig: Vec::new(),
            max_clients: 1,
            cpu_milli: 128_000,
            mem: 2 << 40,
            domains: vec![(0, format!("nv{}", i / 2)), (1, format!("rack{}", i / 16))],
            labels: Vec::new(),
        };
        s.add_node(&spec).unwrap_or_else(|e| panic!("{e}"));
    }
    // Some nodes busy, so the scores differ.
    for i in 0..NODES / 3 {
        let j = s.submit(job(format!("warm{i}"), 1 + (i % 6) as u32)).unwrap_or_else(|e| panic!("{e}"));
        s.start_on(j, &[i * 3], 0, 0).unwrap_or_else(|e| panic!("{e}"));
    }
    s
}

fn job(name: String, cards: u32) -> JobSpec {
    JobSpec {
        name,
        queue: 0,
        user: "u".into(),
        priority_class: None,
        priority: 0.0,
        request: Request::Whole(cards),
        replicas: 1,
        min_replicas: 1,
        gpu_mem: 40 << 30,
        cpu_milli: 8000,
        mem: 64 << 30,
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
        let probe = s.submit(job("probe".into(), 2)).unwrap_or_else(|e| panic!("{e}"));
        g.bench_function(format!("{name}/pass_only"), |b| {
            let view = s.view(Some(probe));
            let ctx = s.ctx(&view);
            let rec = s.job_rec(probe);
            let nodes = s.node_records();
            let mut out = vec![NodeResult::default(); nodes.len()];
            b.iter(|| s.policy.engine().filter_score(&ctx, &rec, nodes, &mut out));
        });
        s.cycle();
        s.complete(probe);
        let mut n = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                n += 1;
                let j = s.submit(job(format!("j{n}"), 2)).unwrap_or_else(|e| panic!("{e}"));
                let placed = s.cycle();
                assert_eq!(placed, 1);
                s.complete(j);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
