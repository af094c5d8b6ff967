//! How fast policies run: the JIT's fused filter+score pass against the interpreter and
//! hand-written Rust of the same rules; and how fast a policy compiles. (The comparison
//! with `cel` and `regorus` is the `gpol-comparison` crate's.) Results, and the command to
//! reproduce them, are in docs/performance.md.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use gpol_compiler::check::check;
use gpol_compiler::engine::{CompiledPolicy, EngineKind, NONE, NodeResult, clamp_score, compile};
use gpol_compiler::schema::{EnumKind, JobRec, NodeRec};
use gpol_compiler::source::{SourceFile, SourceMap};
use gpol_compiler::synthetic::Cluster;
use std::hint::black_box;

const NODES: usize = 5000;

fn source(name: &str) -> String {
    let path = format!("{}/benches/policies/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).expect("the file is readable")
}

fn policy_text(text: &str) -> gpol_compiler::hir::Policy {
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("bench.gpol", text));
    let checked = check(&mut sources, id);
    checked.policy.expect("the policy checks")
}

fn compiled(text: &str, kind: EngineKind) -> CompiledPolicy {
    compile(policy_text(text), kind).expect("the policy checks")
}

fn reject(index: u16) -> NodeResult {
    NodeResult { feasible: false, rejected_by: index, ..NodeResult::default() }
}

fn binpack(n: &NodeRec<'_>) -> f64 {
    if n.cards > 0.0 { 1.0 - n.free_gpu / n.cards } else { 0.0 }
}

/// The pack policy, written by hand.
fn rust_pack(job: &JobRec<'_>, nodes: &[NodeRec<'_>], out: &mut [NodeResult]) {
    for (n, r) in nodes.iter().zip(out.iter_mut()) {
        if job.whole_cards > n.free_cards {
            *r = reject(0);
            continue;
        }
        if n.gpu_mem < job.gpu_mem {
            *r = reject(1);
            continue;
        }
        let (s, faults) = clamp_score(binpack(n));
        *r = NodeResult { feasible: true, rejected_by: NONE, tiers: [0.0; 4], score: 0.0 + s, faults };
    }
}

/// The ten-rule policy, written by hand.
fn rust_ten(cluster: &Cluster, job: &JobRec<'_>, nodes: &[NodeRec<'_>], out: &mut [NodeResult]) {
    let exclusive = EnumKind::Sharing.variant("exclusive").unwrap_or(0);
    let mig = EnumKind::Sharing.variant("mig").unwrap_or(1);
    for (n, r) in nodes.iter().zip(out.iter_mut()) {
        let rejected = if job.whole_cards > n.free_cards {
            Some(0)
        } else if n.gpu_mem < job.gpu_mem {
            Some(1)
        } else if job.whole_cards > 0.0 && n.sharing != exclusive {
            Some(2)
        } else if n.cpu_free < job.cpu {
            Some(3)
        } else if n.mem_free < job.mem {
            Some(4)
        } else if job.bursty && n.sharing == mig {
            Some(5)
        } else {
            None
        };
        if let Some(i) = rejected {
            *r = reject(i);
            continue;
        }
        let domain = cluster.domains.get(n.domains[0] as usize).copied().unwrap_or_default();
        let scores = [
            (2.0, binpack(n)),
            (1.0, n.cpu_free / n.cpu),
            (1.0, domain.free_cards / domain.cards),
            (1.0, (1.0 - (n.gpu_mem - job.gpu_mem) / n.gpu_mem).clamp(0.0, 1.0)),
        ];
        let mut score = 0.0;
        let mut faults = 0;
        for (w, raw) in scores {
            let (s, f) = clamp_score(raw);
            score += w * s;
            faults += f;
        }
        *r = NodeResult { feasible: true, rejected_by: NONE, tiers: [0.0; 4], score, faults };
    }
}

fn pass(
    c: &mut Criterion,
    name: &str,
    file: &str,
    rust: impl Fn(&Cluster, &JobRec<'_>, &[NodeRec<'_>], &mut [NodeResult]),
) {
    let text = source(file);
    let jit = compiled(&text, EngineKind::Jit);
    let interp = compiled(&text, EngineKind::Interp);
    let cluster = Cluster::generate(NODES, &jit.program, 7);
    let nodes = cluster.nodes();
    let job = Cluster::job();
    let ctx = cluster.ctx(&jit.program);
    let mut out = vec![NodeResult::default(); NODES];
    // The hand-written version must compute the same thing, or the comparison means nothing.
    let mut check = vec![NodeResult::default(); NODES];
    jit.engine().filter_score(&ctx, &job, &nodes, &mut out);
    rust(&cluster, &job, &nodes, &mut check);
    for (a, b) in out.iter().zip(&check) {
        assert_eq!((a.feasible, a.score.to_bits(), a.faults), (b.feasible, b.score.to_bits(), b.faults), "{name}");
    }
    // `GPOL_BENCH_PASSES=N`: run each pass N times and stop, for an instruction count
    // under callgrind (docs/performance.md): machines here are too noisy for the timings
    // of two passes within a few percent of each other to rank them.
    if let Some(passes) = std::env::var("GPOL_BENCH_PASSES").ok().and_then(|n| n.parse::<usize>().ok()) {
        if std::env::var("GPOL_BENCH_POLICY").is_ok_and(|p| p != name) {
            return;
        }
        counted_jit(passes, &mut || jit.engine().filter_score(&ctx, black_box(&job), &nodes, &mut out));
        counted_rust(passes, &mut || rust(&cluster, black_box(&job), &nodes, &mut out));
        return;
    }
    let mut g = c.benchmark_group(format!("{name}/{NODES}_nodes"));
    g.throughput(Throughput::Elements(NODES as u64));
    g.bench_function("jit", |b| b.iter(|| jit.engine().filter_score(&ctx, black_box(&job), &nodes, &mut out)));
    g.bench_function("rust", |b| b.iter(|| rust(&cluster, black_box(&job), &nodes, &mut out)));
    g.bench_function("interp", |b| b.iter(|| interp.engine().filter_score(&ctx, black_box(&job), &nodes, &mut out)));
    g.finish();
}

/// `passes` JIT passes, in a function of its own so that callgrind counts them apart.
#[inline(never)]
fn counted_jit(passes: usize, pass: &mut dyn FnMut()) {
    for _ in 0..passes {
        pass();
    }
}

/// `passes` hand-written passes, likewise (its body differs from `counted_jit`'s, so the
/// compiler cannot fold the two into one function).
#[inline(never)]
fn counted_rust(passes: usize, pass: &mut dyn FnMut()) {
    for i in 0..passes {
        pass();
        black_box(i);
    }
}

fn compile_time(c: &mut Criterion) {
    let path = format!("{}/../policies/gpu_sharing.gpol", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("it compiles");
    let mut g = c.benchmark_group("compile");
    g.bench_function(BenchmarkId::new("check+lower+jit", "gpu_sharing"), |b| {
        b.iter(|| compiled(black_box(&text), EngineKind::Jit))
    });
    g.bench_function(BenchmarkId::new("check+lower", "gpu_sharing"), |b| {
        b.iter(|| compiled(black_box(&text), EngineKind::Interp))
    });
    g.finish();
}

fn engines(c: &mut Criterion) {
    pass(c, "pack", "pack.gpol", |_, job, nodes, out| rust_pack(job, nodes, out));
    pass(c, "ten_rules", "ten_rules.gpol", rust_ten);
    if std::env::var_os("GPOL_BENCH_PASSES").is_none() {
        compile_time(c);
    }
}

criterion_group!(benches, engines);
criterion_main!(benches);
