//! Whole simulations. `openb_fill_130`: the real Alibaba openb default pod list on its
//! 1,213-node GPU cluster, fill mode to 130% of capacity, one run per placement policy
//! of policies/ (read from ../shared/data/alibaba-gpu-2023 or `GPOL_OPENB_DIR` when
//! present; skipped otherwise). `timed_10k_gpus`: a synthetic timed trace of
//! `GPOL_SCALE_JOBS` jobs (default 100,000) on samples/scale-10k.toml's 10,000 GPUs, under
//! best fit and under samples/fleet-10k.gpol (quotas, borrowing and reclaim).
//! Results are in docs/performance.md.

use criterion::{Criterion, criterion_group, criterion_main};
use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_sim::generate::{self, GenSpec, Profile, QueueMix};
use gpol_sim::{self as sim, Config, Control, Mode, Workload, cluster_file};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const PLACEMENT: &[&str] = &["best_fit", "fgd", "dot_product", "gpu_packing", "gpu_clustering", "random"];

/// A policy of the repository, by its path from the root (`policies/best_fit.gpol`).
fn policy(file: &str) -> CompiledPolicy {
    let path = format!("{}/../{file}", env!("CARGO_MANIFEST_DIR"));
    gpol_compiler::load::compile_file(path.as_ref(), EngineKind::Jit).expect("the policy compiles")
}

fn openb_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GPOL_OPENB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/alibaba-gpu-2023"));
    dir.is_dir().then_some(dir)
}

fn read(path: PathBuf) -> (String, String) {
    let text = std::fs::read_to_string(&path).expect("the file is readable");
    (path.display().to_string(), text)
}

fn run(policy: &CompiledPolicy, cluster: &cluster_file::ClusterSpec, workload: &Workload, config: &Config) -> f64 {
    let cancel = AtomicBool::new(false);
    let control = Control::new(&|_| {}, &cancel);
    let report = sim::run(policy, cluster, workload, config, &control).expect("the policy checks");
    report.fragmentation
}

fn openb_fill(c: &mut Criterion) {
    let Some(dir) = openb_dir() else {
        eprintln!("no openb data (set GPOL_OPENB_DIR): openb_fill_130 skipped");
        return;
    };
    let (cname, ctext) = read(dir.join("openb_node_list_gpu_node.csv"));
    let (tname, ttext) = read(dir.join("openb_pod_list_default.csv"));
    let cluster = sim::read_cluster(&ctext, &cname).expect("the cluster imports");
    let workload = sim::read_trace(&ttext, &tname).expect("the trace imports");
    let config = Config { mode: Mode::Fill { target: 1.3 }, ..Config::default() };
    let mut group = c.benchmark_group("openb_fill_130");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    for name in PLACEMENT {
        let p = policy(&format!("policies/{name}.gpol"));
        group.bench_function(*name, |b| b.iter(|| run(&p, &cluster, &workload, &config)));
    }
    group.finish();
}

fn timed_scale(c: &mut Criterion) {
    let jobs: usize = std::env::var("GPOL_SCALE_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let (cname, ctext) = read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../samples/scale-10k.toml"));
    let cluster = cluster_file::parse_toml(&ctext, &cname).expect("the cluster spec is valid");
    let trace = generate::generate(&GenSpec {
        jobs,
        seed: 1,
        gpus: 10_000,
        load: 0.8,
        node_gpus: 8,
        queues: vec![
            QueueMix { name: None, profile: Profile::Training, share: 1.0 },
            QueueMix { name: None, profile: Profile::Inference, share: 30.0 },
            QueueMix { name: None, profile: Profile::Research, share: 69.0 },
        ],
    });
    let workload = Workload::from_jobs("scale", trace);
    let mut group = c.benchmark_group("timed_10k_gpus");
    group.sample_size(10).measurement_time(Duration::from_secs(60));
    for file in ["policies/best_fit.gpol", "samples/fleet-10k.gpol"] {
        let p = policy(file);
        let name = format!("{}/{jobs}_jobs", p.policy.name);
        group.bench_function(name, |b| b.iter(|| run(&p, &cluster, &workload, &Config::default())));
    }
    group.finish();
}

criterion_group!(benches, openb_fill, timed_scale);
criterion_main!(benches);
