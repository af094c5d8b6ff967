//! Regenerates docs/reproductions/atc23.md's tables: the six policies of
//! `policies/atc23/` on every openb trace the ATC '23 study plots, fill mode to 130 %
//! with its sampling with replacement, seeds 42–51, as medians of the allocated share of
//! the cluster's GPUs when the arrived request reaches 100 % and 130 % of them.
//!
//! ```sh
//! cargo run --release -p gpol-sim --example atc23 -- ../shared/data/alibaba-gpu-2023 \
//!     [--reference analysis_allo_discrete.csv] [--traces default,cpu050] [--seeds 42..51] \
//!     [--baselines fgd,best_fit] [--policy my.gpol] [--threads 2]
//! ```
//!
//! `--reference` reads the study's own results (its repository's
//! `experiments/analysis/expected_results/analysis_allo_discrete.csv`) and adds its
//! medians beside gpol's. `--baselines` runs only some of the six; `--policy` adds a
//! policy of one's own, and with the reference FGD among the baselines a last table
//! shows each added policy's median against it, trace by trace. Runs go in parallel on
//! every core unless `--threads` says otherwise.

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_sim::report::Report;
use gpol_sim::{self as sim, Config, Control, Mode, Sampling, Workload, cluster_file::ClusterSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The traces of the study's figures 7 and 9 to 14, in its order.
const TRACES: &[&str] = &[
    "default",
    "cpu050",
    "cpu100",
    "cpu200",
    "cpu250",
    "gpushare40",
    "gpushare60",
    "gpushare80",
    "gpushare100",
    "gpuspec10",
    "gpuspec20",
    "gpuspec25",
    "gpuspec33",
    "multigpu20",
    "multigpu30",
    "multigpu40",
    "multigpu50",
];

/// gpol's policy file and the study's name for it.
const POLICIES: &[(&str, &str)] = &[
    ("random", "01-Random"),
    ("dot_product", "02-DotProd"),
    ("gpu_clustering", "03-GpuClustering"),
    ("gpu_packing", "04-GpuPacking"),
    ("best_fit", "05-BestFit"),
    ("fgd", "06-FGD"),
];

struct Args {
    data: PathBuf,
    reference: Option<PathBuf>,
    traces: Vec<String>,
    seeds: (u64, u64),
    extra: Vec<PathBuf>,
    baselines: Vec<String>,
    threads: Option<usize>,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        data: PathBuf::new(),
        reference: None,
        traces: TRACES.iter().map(|t| t.to_string()).collect(),
        seeds: (42, 51),
        extra: Vec::new(),
        baselines: POLICIES.iter().map(|(f, _)| f.to_string()).collect(),
        threads: None,
    };
    let mut data = None;
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--reference" => args.reference = Some(value()?.into()),
            "--traces" => args.traces = value()?.split(',').map(str::to_string).collect(),
            "--policy" => args.extra.push(value()?.into()),
            "--baselines" => args.baselines = value()?.split(',').map(str::to_string).collect(),
            "--threads" => args.threads = Some(value()?.parse().map_err(|_| "--threads N")?),
            "--seeds" => {
                let v = value()?;
                let (a, b) = v.split_once("..").ok_or("--seeds A..B")?;
                args.seeds = (a.parse().map_err(|_| "--seeds A..B")?, b.parse().map_err(|_| "--seeds A..B")?);
            }
            _ if data.is_none() => data = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a}")),
        }
    }
    args.data = data.ok_or(
        "usage: atc23 DATA_DIR [--reference CSV] [--traces a,b] [--seeds A..B] [--baselines a,b] [--policy P] [--threads N]",
    )?;
    if let Some(b) = args.baselines.iter().find(|b| !POLICIES.iter().any(|(f, _)| f == b)) {
        return Err(format!(
            "--baselines: no study policy {b} (one of random, dot_product, gpu_clustering, gpu_packing, best_fit, fgd)"
        ));
    }
    Ok(args)
}

/// A file's text, within gpolc's input limit and refusing what is not a regular file.
fn read(path: &Path) -> Result<String, String> {
    let bytes = gpol_compiler::files::read(path, gpol_compiler::limits::MAX_INPUT_BYTES).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

/// The allocated share when the arrived request first reaches `share` of capacity.
fn allocated_at(r: &Report, share: f64) -> f64 {
    let Some(fill) = &r.fill else { return f64::NAN };
    let i = fill.arrived.iter().position(|a| *a >= share - 1e-9);
    match i {
        Some(i) => fill.allocated[i],
        None => 1.0 - fill.unallocated,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Medians at 100 % and 130 % arrived, by (trace, the study's policy name).
type StudyMedians = BTreeMap<(String, String), (f64, f64)>;

/// The study's medians at 100 % and 130 % arrived, for its 130 % runs (tune 1.3).
fn reference(path: &Path) -> Result<StudyMedians, String> {
    let text = read(path)?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("an empty reference file")?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).ok_or(format!("no column {name}"));
    let (w, p, t, c100, c130) = (col("workload")?, col("sc_policy")?, col("tune")?, col("100")?, col("130")?);
    let mut runs: BTreeMap<(String, String), (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        if f.get(t) != Some(&"1.3") {
            continue;
        }
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN) / 100.0;
        let trace = f.get(w).unwrap_or(&"").trim_start_matches("openb_pod_list_").to_string();
        let e = runs.entry((trace, f.get(p).unwrap_or(&"").to_string())).or_default();
        e.0.push(num(c100));
        e.1.push(num(c130));
    }
    Ok(runs.into_iter().map(|(k, (a, b))| (k, (median(a), median(b)))).collect())
}

struct Task {
    trace: usize,
    policy: usize,
    seed: u64,
}

fn main() -> Result<(), String> {
    let args = args()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut policies: Vec<(String, Option<&str>, CompiledPolicy)> = Vec::new();
    let files = POLICIES
        .iter()
        .filter(|(f, _)| args.baselines.iter().any(|b| b == f))
        .map(|(f, r)| (root.join(format!("policies/atc23/{f}.gpol")), Some(*r)))
        .chain(args.extra.iter().map(|p| (p.clone(), None)));
    for (path, study) in files {
        let p = gpol_compiler::load::compile_file(&path, EngineKind::Jit)
            .map_err(|_| format!("{}: does not compile (gpolc check says why)", path.display()))?;
        policies.push((p.policy.name.clone(), study, p));
    }
    let cluster_path = args.data.join("openb_node_list_gpu_node.csv");
    let cluster: ClusterSpec =
        sim::read_cluster(&read(&cluster_path)?, &cluster_path.display().to_string()).map_err(|e| e.to_string())?;
    let mut workloads: Vec<Workload> = Vec::new();
    for t in &args.traces {
        let path = args.data.join(format!("openb_pod_list_{t}.csv"));
        workloads.push(sim::read_trace(&read(&path)?, &path.display().to_string()).map_err(|e| e.to_string())?);
    }
    let mut tasks = Vec::new();
    for trace in 0..workloads.len() {
        for policy in 0..policies.len() {
            for seed in args.seeds.0..=args.seeds.1 {
                tasks.push(Task { trace, policy, seed });
            }
        }
    }
    let study = match &args.reference {
        Some(p) => reference(p)?,
        None => BTreeMap::new(),
    };
    let per_trace = policies.len() * (args.seeds.0..=args.seeds.1).count();
    let next = AtomicUsize::new(0);
    let results: Mutex<BTreeMap<(usize, usize), Vec<Report>>> = Mutex::new(BTreeMap::new());
    let cancel = AtomicBool::new(false);
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let control = Control::new(&|_| {}, &cancel);
                while let Some(t) = tasks.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let config = Config {
                        mode: Mode::Fill { target: 1.3 },
                        seed: t.seed,
                        sampling: Sampling::Replacement,
                        ..Config::default()
                    };
                    match sim::run(&policies[t.policy].2, &cluster, &workloads[t.trace], &config, &control) {
                        Ok(r) => {
                            eprintln!("{} {} seed {}", args.traces[t.trace], policies[t.policy].0, t.seed);
                            let mut all = results.lock().unwrap_or_else(|e| e.into_inner());
                            all.entry((t.trace, t.policy)).or_default().push(r);
                            // A finished trace's rows go to standard error at once, so a
                            // long run interrupted keeps what it has.
                            let done: usize =
                                (0..policies.len()).map(|p| all.get(&(t.trace, p)).map_or(0, Vec::len)).sum();
                            if done == per_trace {
                                eprint!("{}", trace_rows(&args, &policies, &all, &study, t.trace));
                            }
                        }
                        Err(e) => eprintln!("{} {} seed {}: {e}", args.traces[t.trace], policies[t.policy].0, t.seed),
                    }
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    print_allocation(&args, &policies, &results, &study);
    print_fragmentation(&args, &policies, &results);
    print_versus_fgd(&args, &policies, &results);
    Ok(())
}

type Policies = [(String, Option<&'static str>, CompiledPolicy)];

fn print_allocation(
    args: &Args,
    policies: &Policies,
    results: &BTreeMap<(usize, usize), Vec<Report>>,
    study: &StudyMedians,
) {
    println!("| trace | policy | gpol 100 % | study 100 % | gpol 130 % | study 130 % | Δ 130 % |");
    println!("|---|---|---|---|---|---|---|");
    for ti in 0..args.traces.len() {
        print!("{}", trace_rows(args, policies, results, study, ti));
    }
}

/// One trace's rows of the allocation table.
fn trace_rows(
    args: &Args,
    policies: &Policies,
    results: &BTreeMap<(usize, usize), Vec<Report>>,
    study: &StudyMedians,
    ti: usize,
) -> String {
    let trace = &args.traces[ti];
    let mut out = String::new();
    for (pi, (name, key, _)) in policies.iter().enumerate() {
        let runs = results.get(&(ti, pi)).map_or(&[][..], Vec::as_slice);
        let g100 = median(runs.iter().map(|r| allocated_at(r, 1.0)).collect());
        let g130 = median(runs.iter().map(|r| allocated_at(r, 1.3)).collect());
        let s = key.and_then(|k| study.get(&(trace.clone(), k.to_string())));
        let pct = |v: f64| if v.is_nan() { "–".to_string() } else { format!("{:.2}", v * 100.0) };
        let (s100, s130) = s.map_or(("–".into(), "–".into()), |(a, b)| (pct(*a), pct(*b)));
        let delta = s.map_or("–".into(), |(_, b)| format!("{:+.2}", (g130 - b) * 100.0));
        out.push_str(&format!("| {trace} | {name} | {} | {s100} | {} | {s130} | {delta} |\n", pct(g100), pct(g130)));
    }
    out
}

/// The median expected fragmentation (share of capacity) at every tenth of capacity
/// arrived, for the first trace.
fn print_fragmentation(args: &Args, policies: &Policies, results: &BTreeMap<(usize, usize), Vec<Report>>) {
    let Some(trace) = args.traces.first() else { return };
    println!("\nExpected fragmentation on `{trace}` (% of the GPUs), by arrived request:\n");
    let steps: Vec<u32> = (1..=13).map(|i| i * 10).collect();
    let head: Vec<String> = steps.iter().map(|s| format!("{s} %")).collect();
    println!("| policy | {} |", head.join(" | "));
    println!("|---|{}", "---|".repeat(steps.len()));
    for (pi, (name, _, _)) in policies.iter().enumerate() {
        let runs = results.get(&(0, pi)).map_or(&[][..], Vec::as_slice);
        let cells: Vec<String> = steps
            .iter()
            .map(|s| {
                let share = f64::from(*s) / 100.0;
                let v = median(
                    runs.iter()
                        .filter_map(|r| {
                            let f = r.fill.as_ref()?;
                            let i = f
                                .arrived
                                .iter()
                                .position(|a| *a >= share - 1e-9)
                                .unwrap_or(f.arrived.len().checked_sub(1)?);
                            f.fragmented.get(i).copied()
                        })
                        .collect(),
                );
                format!("{:.1}", v * 100.0)
            })
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
}

/// Each added policy's median allocation at 130 % arrived against the reference FGD's,
/// trace by trace, when both ran.
fn print_versus_fgd(args: &Args, policies: &Policies, results: &BTreeMap<(usize, usize), Vec<Report>>) {
    let Some(fgd) = policies.iter().position(|(_, key, _)| *key == Some("06-FGD")) else { return };
    for (pi, (name, key, _)) in policies.iter().enumerate() {
        if key.is_some() {
            continue;
        }
        println!("\nMedian allocation at 130 % arrived (% of the GPUs), `{name}` against the reference FGD:\n");
        println!("| trace | reference FGD | {name} | Δ |");
        println!("|---|---|---|---|");
        let (mut ahead, mut behind) = (0, 0);
        for (ti, trace) in args.traces.iter().enumerate() {
            let at = |p: usize| {
                let runs = results.get(&(ti, p)).map_or(&[][..], Vec::as_slice);
                median(runs.iter().map(|r| allocated_at(r, 1.3)).collect()) * 100.0
            };
            let (base, ours) = (at(fgd), at(pi));
            let delta = ours - base;
            // Medians print to two places: a difference below half a hundredth is level.
            if delta >= 0.005 {
                ahead += 1;
            } else if delta <= -0.005 {
                behind += 1;
            }
            println!("| {trace} | {base:.2} | {ours:.2} | {delta:+.2} |");
        }
        let level = args.traces.len() - ahead - behind;
        println!("\nAhead on {ahead}, level on {level}, behind on {behind} of {} traces.", args.traces.len());
    }
}
