//! `cel` and `regorus` against gpol's JIT on the pack policy's logic, one (job, node) at
//! a time: `cargo bench -p gpol-comparison`. Results are in docs/performance.md.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpol_compiler::engine::{CompiledPolicy, EngineKind, NodeResult};
use gpol_compiler::synthetic::Cluster;
use std::hint::black_box;

fn compiled(file: &str, kind: EngineKind) -> CompiledPolicy {
    let path = format!("{}/../../compiler/benches/policies/{file}", env!("CARGO_MANIFEST_DIR"));
    gpol_compiler::load::compile_file(path.as_ref(), kind).expect("the bench policy compiles")
}

/// `cel` and `regorus` on the pack policy's logic, one node at a time.
fn baselines(c: &mut Criterion) {
    let jit = compiled("pack.gpol", EngineKind::Jit);
    let cluster = Cluster::generate(100, &jit.program, 7);
    let nodes = cluster.nodes();
    let job = Cluster::job();
    let mut g = c.benchmark_group("pack/one_node");
    g.throughput(Throughput::Elements(1));

    let ctx = cluster.ctx(&jit.program);
    let mut out = [NodeResult::default()];
    let mut i = 0;
    g.bench_function("jit", |b| {
        b.iter(|| {
            i = (i + 1) % nodes.len();
            jit.engine().filter_score(&ctx, black_box(&job), &nodes[i..=i], &mut out);
        })
    });

    let program = cel::Program::compile(
        "job.whole_cards <= node.free_cards && node.gpu_mem >= job.gpu_mem \
         ? (node.cards > 0.0 ? 1.0 - node.free_gpu / node.cards : 0.0) : -1.0",
    )
    .expect("the CEL program compiles");
    let mut root = cel::Context::default();
    let job_value = std::collections::HashMap::from([("whole_cards", job.whole_cards), ("gpu_mem", job.gpu_mem)]);
    root.add_variable("job", job_value).expect("the variable is added");
    let cel_nodes: Vec<cel::Value> = nodes
        .iter()
        .map(|n| {
            let m = std::collections::HashMap::from([
                ("free_cards", n.free_cards),
                ("gpu_mem", n.gpu_mem),
                ("cards", n.cards),
                ("free_gpu", n.free_gpu),
            ]);
            cel::to_value(m).expect("the value converts")
        })
        .collect();
    let mut i = 0;
    g.bench_function("cel", |b| {
        b.iter(|| {
            i = (i + 1) % cel_nodes.len();
            let mut scope = root.new_inner_scope();
            scope.add_variable_from_value("node", cel_nodes[i].clone());
            black_box(program.execute(&scope).ok())
        })
    });

    let mut engine = regorus::Engine::new();
    engine
        .add_policy(
            "bench.rego".into(),
            "package bench
default score := -1
score := s if {
  input.job.whole_cards <= input.node.free_cards
  input.node.gpu_mem >= input.job.gpu_mem
  s := pack
}
pack := 1 - (input.node.free_gpu / input.node.cards) if input.node.cards > 0
pack := 0 if input.node.cards <= 0
"
            .into(),
        )
        .expect("the Rego policy parses");
    let rule: std::sync::Arc<str> = "data.bench.score".into();
    let compiled_rego = engine.compile_with_entrypoint(&rule).expect("it compiles");
    let inputs: Vec<regorus::Value> = nodes
        .iter()
        .map(|n| {
            let json = format!(
                r#"{{"job": {{"whole_cards": {}, "gpu_mem": {}}}, "node": {{"free_cards": {}, "gpu_mem": {}, "cards": {}, "free_gpu": {}}}}}"#,
                job.whole_cards, job.gpu_mem, n.free_cards, n.gpu_mem, n.cards, n.free_gpu
            );
            regorus::Value::from_json_str(&json).expect("regorus accepts it")
        })
        .collect();
    let mut i = 0;
    g.bench_function("regorus", |b| {
        b.iter(|| {
            i = (i + 1) % inputs.len();
            black_box(compiled_rego.eval_with_input(inputs[i].clone()).ok())
        })
    });
    g.finish();
}

criterion_group!(benches, baselines);
criterion_main!(benches);
