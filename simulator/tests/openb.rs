//! The real Alibaba GPU trace (openb), read from ../shared/data/alibaba-gpu-2023 beside
//! the checkout (or `GPOL_OPENB_DIR`) when it is there; it is research-use data and is
//! never copied into the repository. Without it these tests have nothing to read and say
//! so on standard error.

use gpol_compiler::engine::EngineKind;
use gpol_sim::{self as sim, Config, Control, Mode};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

fn data_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("GPOL_OPENB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/alibaba-gpu-2023"));
    if dir.is_dir() {
        Some(dir)
    } else {
        gpol_testing::missing_data(
            &format!("the openb trace at {}", dir.display()),
            "research-use data, read from beside the checkout or GPOL_OPENB_DIR",
        );
        None
    }
}

fn read(dir: &std::path::Path, file: &str) -> (String, String) {
    let path = dir.join(file);
    (path.display().to_string(), std::fs::read_to_string(&path).expect("the file is readable"))
}

/// The study's cluster (every GPU node) and its default pod list.
fn default_trace(dir: &std::path::Path) -> (sim::cluster_file::ClusterSpec, sim::Workload) {
    let (cname, ctext) = read(dir, "openb_node_list_gpu_node.csv");
    let (tname, ttext) = read(dir, "openb_pod_list_default.csv");
    let cluster = sim::read_cluster(&ctext, &cname).expect("the cluster imports");
    (cluster, sim::read_trace(&ttext, &tname).expect("the trace imports"))
}

#[test]
fn every_openb_file_imports() {
    let Some(dir) = data_dir() else { return };
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".csv"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 26);
    for f in files {
        let (name, text) = read(&dir, &f);
        if f.starts_with("openb_node_list") {
            let spec = sim::read_cluster(&text, &name).unwrap();
            if f == "openb_node_list_gpu_node.csv" {
                assert_eq!((spec.nodes.len(), spec.total_gpus()), (1213, 6212));
            }
        } else {
            let w = sim::read_trace(&text, &name).unwrap();
            assert!(w.len() > 7000, "{f}: {} jobs", w.len());
            if f == "openb_pod_list_default.csv" {
                assert_eq!(w.len(), 8152);
                let gpus: u64 = w.held().expect("held").iter().map(|j| j.milli()).sum();
                // The README: 6086.8 GPUs requested in all.
                assert_eq!(gpus, 6_086_800);
            }
        }
    }
}

#[test]
fn best_fit_fills_the_openb_cluster_to_130_percent() {
    let Some(dir) = data_dir() else { return };
    let (cluster, workload) = default_trace(&dir);
    let text = include_str!("../../policies/best_fit.gpol");
    let compiled = gpol_compiler::load::compile_text("best_fit.gpol", text, EngineKind::Jit).unwrap();
    let cancel = AtomicBool::new(false);
    let control = Control::new(&|_| {}, &cancel);
    let config = Config { mode: Mode::Fill { target: 1.3 }, ..Config::default() };
    let r = sim::run(&compiled, &cluster, &workload, &config, &control).unwrap();
    let fill = r.fill.as_ref().expect("a fill curve");
    assert!((1.3..1.32).contains(fill.arrived.last().unwrap_or(&0.0)), "{:?}", fill.arrived.last());
    // Packing leaves a few percent unallocated once arrivals pass capacity, all of it
    // fragments (the paper's best-fit baseline sits in this range).
    assert!((0.02..0.15).contains(&fill.unallocated), "unallocated {}", fill.unallocated);
    assert!(r.fragmentation > 0.0 && r.fragmentation <= fill.unallocated + 1e-9);
    assert!(fill.arrived.windows(2).all(|w| w[0] < w[1]));
    assert!(fill.allocated.windows(2).all(|w| w[0] <= w[1] + 1e-12));
}

#[test]
fn the_default_traces_task_shapes_are_the_reference_simulators() {
    let Some(dir) = data_dir() else { return };
    let (name, text) = read(&dir, "openb_pod_list_default.csv");
    let w = sim::read_trace(&text, &name).unwrap();
    let counted = w.summary().shapes.iter().map(|(k, n)| (k.clone(), *n));
    let shapes = gpol_runtime::frag::popular_shapes(counted, 0.95, 64, |_| gpol_compiler::schema::Sym(1));
    // The ATC '23 simulator's log for this trace: 35 task types covering 95.3 % of pods.
    let total = w.len() as f64;
    let covered: u64 = w
        .summary()
        .shapes
        .iter()
        .filter(|(k, _)| shapes.iter().any(|s| s.ask == k.ask && s.models.is_empty() == k.models.is_empty()))
        .map(|(_, n)| n)
        .sum();
    eprintln!("{} shapes, {:.1} % of {total} jobs", shapes.len(), covered as f64 / total * 100.0);
    assert_eq!(shapes.len(), 35);
    assert!((covered as f64 / total - 0.953).abs() < 0.0005, "{covered} of {total}");
    assert!(shapes.iter().any(|s| s.ask.request == gpol_compiler::spec::Request::None), "CPU-only jobs are a shape");
}

/// The reproduction in CI's size (docs/reproductions/atc23.md has all 17 traces × 10
/// seeds): the six policies of policies/atc23/ on the default trace, seed 42, filled to
/// 130 % as the study fills. Known answers are the study's own medians over its seeds 42–51
/// (its repository's experiments/analysis/expected_results/analysis_allo_discrete.csv at
/// 130 % arrived); one seed of gpol's lands within a point of each, and the policies come
/// in the study's order but for GPU packing and GPU clustering, which it separates by a
/// quarter of a point.
#[test]
fn the_atc23_policies_allocate_as_the_study_reports() {
    let Some(dir) = data_dir() else { return };
    let (cluster, workload) = default_trace(&dir);
    let study = [
        ("random", 0.8739),
        ("dot_product", 0.9080),
        ("gpu_clustering", 0.9180),
        ("gpu_packing", 0.9206),
        ("best_fit", 0.9311),
        ("fgd", 0.9540),
    ];
    let cancel = AtomicBool::new(false);
    let control = Control::new(&|_| {}, &cancel);
    let config = Config {
        mode: Mode::Fill { target: 1.3 },
        seed: 42,
        sampling: sim::Sampling::Replacement,
        ..Config::default()
    };
    let mut got = Vec::new();
    for (name, expected) in study {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../policies/atc23/{name}.gpol"));
        let compiled = gpol_compiler::load::compile_file(&path, EngineKind::Jit).unwrap();
        let r = sim::run(&compiled, &cluster, &workload, &config, &control).unwrap();
        let allocated = 1.0 - r.fill.as_ref().expect("a fill curve").unallocated;
        eprintln!("{name}: {:.2} % (the study: {:.2} %)", allocated * 100.0, expected * 100.0);
        assert!((allocated - expected).abs() < 0.01, "{name}: {allocated} against the study's {expected}");
        got.push(allocated);
    }
    // random < dot product < {clustering, packing} < best fit < FGD.
    assert!(
        got[0] < got[1] && got[1] < got[2].min(got[3]) && got[2].max(got[3]) < got[4] && got[4] < got[5],
        "{got:?}"
    );
}
