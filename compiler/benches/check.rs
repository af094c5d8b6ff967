//! How long `gpolc check` takes — the pipeline up to the engines: parse, check, lower,
//! analyses — on a typical ~200-line policy, three shipped ones and a generated
//! 20,000-rule one; and how long compiling them for the JIT takes on top. Results and the
//! command to reproduce them are in docs/performance.md.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::{self, Checked};
use std::fmt::Write;
use std::hint::black_box;

/// A policy with a queue tree and `rules` rules drawn from realistic shapes.
fn generated(rules: usize) -> String {
    let mut s = String::from("policy generated\n\nuse std.pack\n\nconst big_job = 8 gpu\n\nqueue org {\n");
    for t in 0..8 {
        writeln!(
            s,
            "  queue team{t} {{ guarantee 16 gpu, 128 cpu; limit 64 gpu; weight {}; attr min_runtime = 30m }}",
            t % 3 + 1
        )
        .ok();
    }
    s.push_str("}\n\nfn free_share(n: node) -> number {\n  if n.cards > 0 gpu then n.free_gpu / n.cards else 0\n}\n\n");
    for i in 0..rules {
        match i % 5 {
            0 => writeln!(
                s,
                "filter fits_{i} \"the job fits\" {{\n  job.whole_cards <= node.free_cards and node.gpu_mem >= job.gpu_mem\n}}\n"
            ),
            1 => writeln!(
                s,
                "filter sharing_{i} \"sharing mode\" {{\n  job.whole_cards > 0 gpu implies node.sharing == exclusive\n}}\n"
            ),
            2 => writeln!(
                s,
                "score pack_{i} weight 2 {{\n  let used = 1 - free_share(node);\n  if job.total_gpus >= big_job then used else std.pack.binpack(job, node)\n}}\n"
            ),
            3 => writeln!(
                s,
                "score cards_{i} weight 1 {{\n  count(c in node.cards_list: c.free >= job.gpu_fraction) / max(len(node.cards_list), 1)\n}}\n"
            ),
            _ => writeln!(
                s,
                "admit size_{i} \"at most 64 GPUs\" {{\n  job.queue.name != \"team1\" or job.total_gpus <= 64 gpu\n}}\n"
            ),
        }
        .ok();
    }
    s.push_str("job_order { job.priority + min(job.waiting / 1h, 10) desc, job.submitted asc }\n");
    s.push_str("preempt {\n  when claimant.priority > victim.priority and victim.runtime > victim.queue.attr.min_runtime\n  cost victim.total_gpus * victim.since_checkpoint\n}\n");
    s
}

fn run(text: &str) -> usize {
    let checked = Checked::from_text("bench.gpol", text);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics.first());
    checked.policy.map_or(0, |p| p.rules.len())
}

fn compile(text: &str) -> usize {
    let compiled = load::compile_text("bench.gpol", text, EngineKind::Jit).expect("the policy compiles");
    compiled.policy.rules.len()
}

fn bench(c: &mut Criterion) {
    let typical = generated(40);
    assert!((180..=260).contains(&typical.lines().count()), "{} lines", typical.lines().count());
    let typical_id = format!("{}_lines", typical.lines().count());
    let shipped: Vec<(&str, String)> = ["gpu_sharing", "preemption", "gangs"]
        .into_iter()
        .map(|name| {
            let path = format!("{}/../policies/{name}.gpol", env!("CARGO_MANIFEST_DIR"));
            (name, std::fs::read_to_string(&path).expect("the file is readable"))
        })
        .collect();
    let mut g = c.benchmark_group("check");
    g.bench_function(BenchmarkId::new("typical", &typical_id), |b| b.iter(|| run(black_box(&typical))));
    for (name, text) in &shipped {
        g.bench_function(BenchmarkId::new("policy", name), |b| b.iter(|| run(black_box(text))));
    }
    let huge = generated(20_000);
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("generated", "20000_rules"), |b| b.iter(|| run(black_box(&huge))));
    g.finish();
    let mut g = c.benchmark_group("compile");
    g.bench_function(BenchmarkId::new("typical", &typical_id), |b| b.iter(|| compile(black_box(&typical))));
    for (name, text) in &shipped {
        g.bench_function(BenchmarkId::new("policy", name), |b| b.iter(|| compile(black_box(text))));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
