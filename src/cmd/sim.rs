//! `gpolc sim`: replays a workload trace on a cluster under one or more policies and
//! prints what happened; several policies or seeds run in parallel and print side by
//! side. Without arguments it runs the bundled default (a 128-GPU cluster, 3,000
//! synthetic jobs over about two weeks, policies/borrowing.gpol).

use super::{CliError, OK};
use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::limits::{MAX_CLUSTER_BYTES, MAX_DECISIONS_BYTES, MAX_INPUT_BYTES};
use gpol_sim::{self as sim, Config, Control, Mode, SimError, report::Report};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The bundled default: what `gpolc sim` runs without arguments.
const DEFAULT_POLICY: (&str, &str) = ("policies/borrowing.gpol", include_str!("../../policies/borrowing.gpol"));
pub(super) const DEFAULT_CLUSTER: (&str, &str) = ("samples/cluster.toml", include_str!("../../samples/cluster.toml"));
pub(super) const DEFAULT_TRACE: (&str, &str) = ("samples/trace.csv", include_str!("../../samples/trace.csv"));

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
const INTERRUPTED: u8 = 130;

#[derive(clap::Args)]
pub struct Args {
    /// The policy (default: the bundled policies/borrowing.gpol).
    policy: Option<PathBuf>,
    /// Run several policies on the same cluster, trace and seeds, side by side (after
    /// POLICY, the baseline, when one is given).
    #[arg(long, num_args = 1.., value_name = "POLICY")]
    compare: Vec<PathBuf>,
    /// The cluster: a TOML spec, `kubectl get nodes -o json` output, a Slurm node list
    /// (`sinfo --json`, slurmrestd's `/nodes`) or an openb node list (default: the
    /// bundled samples/cluster.toml).
    #[arg(long)]
    cluster: Option<PathBuf>,
    /// Slurm's `topology.conf` (topology/tree or topology/block) for the cluster's nodes:
    /// levels `switch`, `switch2`, … or `block`, `block<size>`.
    #[arg(long, value_name = "FILE")]
    slurm_topology: Option<PathBuf>,
    /// A topology level from a node label, LEVEL=KEY (`rack=example.com/rack`): each
    /// node's value of the label is its domain at LEVEL. Repeatable.
    #[arg(long, value_name = "LEVEL=KEY", value_parser = level_key)]
    topology_label: Vec<(String, String)>,
    /// What a GPU-hour of a model costs, MODEL=PRICE (`h100=2.50`), or PRICE for every
    /// model without its own: the report prices idle, unused and lost GPU-hours.
    /// Repeatable; replaces the cluster spec's `[prices]`.
    #[arg(long, value_name = "MODEL=PRICE", value_parser = sim::prices::Prices::parse_arg)]
    price: Vec<(String, f64)>,
    /// The workload: gpol's CSV or JSON Lines trace, a Slurm cluster's history
    /// (`sacct --json`), or an openb pod list (default: the bundled samples/trace.csv).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// For a Slurm history: what a job's queue is, its `account` or its `partition` (as
    /// `gpolc slurm run --queue-from` reads it).
    #[arg(long, value_name = "FIELD", default_value = "account")]
    queue_from: gpol_slurm::jobs::QueueFrom,
    /// Fill mode: jobs arrive in a shuffled order, each tried once and never leaving,
    /// until the requested GPUs reach PCT percent of capacity.
    #[arg(long, value_name = "PCT")]
    fill: Option<f64>,
    /// Fill mode: once the trace has come, `passes` sends it again in a fresh order;
    /// `replacement` tops it up with jobs drawn with replacement until the next would pass
    /// the target (or drops random jobs when the trace alone passes it), as the ATC '23
    /// simulator does.
    #[arg(long, value_enum, default_value = "passes")]
    fill_sampling: FillSampling,
    /// `cluster.task_shapes` (fragmentation-aware scores): the trace's most popular
    /// shapes until they cover PCT percent of its jobs (at most 64), as the ATC '23
    /// simulator builds its task types.
    #[arg(long, value_name = "PCT", default_value_t = 95.0)]
    shape_coverage: f64,
    /// The local date and time the trace starts at, in the policy's `timezone`
    /// (`2026-11-23T08:00`): where `cluster.time_of_day` and quota windows fall (default:
    /// a Monday, 00:00).
    #[arg(long, value_name = "DATETIME")]
    start: Option<String>,
    /// Seed of the fill order and of `hash01`.
    #[arg(long, default_value_t = 1, conflicts_with = "seeds")]
    seed: u64,
    /// Run every seed of a range, A..B (inclusive), in parallel.
    #[arg(long, value_name = "A..B")]
    seeds: Option<String>,
    /// Which engine runs the policy.
    #[arg(long, default_value = "jit")]
    engine: EngineKind,
    /// When time alone can change a waiting job's fate (victim rules, reservations), how
    /// often waiting jobs are retried.
    #[arg(long, default_value = "60s")]
    retry: String,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report with charts to FILE (written only once
    /// every run is complete).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Also write every decision (placements, evictions, requeues, finishes, rejections)
    /// to FILE as JSON Lines, one run only (docs/simulator.md).
    #[arg(long, value_name = "FILE")]
    decisions: Option<PathBuf>,
    /// Replace a read-only report file.
    #[arg(long)]
    force: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FillSampling {
    Passes,
    Replacement,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    execute(&args, color).map(|()| OK)
}

fn execute(args: &Args, color: bool) -> Result<(), CliError> {
    let seeds = match &args.seeds {
        Some(range) => parse_seeds(range).map_err(CliError::usage)?,
        None => vec![args.seed],
    };
    let retry_ms = sim::input::millis(&args.retry).map_err(|m| CliError::usage(format!("--retry: {m}")))?;
    let mode = match args.fill {
        Some(pct) if pct > 0.0 && pct.is_finite() => Mode::Fill { target: pct / 100.0 },
        Some(pct) => return Err(CliError::usage(format!("--fill takes a positive percentage, not {pct}"))),
        None => Mode::Timed,
    };
    if !(0.0..=100.0).contains(&args.shape_coverage) {
        return Err(CliError::usage(format!(
            "--shape-coverage takes a percentage from 0 to 100, not {}",
            args.shape_coverage
        )));
    }
    let shape_coverage = args.shape_coverage / 100.0;
    if let Some(start) = &args.start {
        // The format, before any work (the policy's zone is applied in the run).
        gpol_compiler::clock::Clock::default()
            .start_at_local(start)
            .map_err(|m| CliError::usage(format!("--start: {m}")))?;
    }
    // The report's path and the inputs first, so a bad one is reported before any work.
    let inputs: Vec<&std::path::Path> = [&args.policy, &args.cluster, &args.slurm_topology, &args.trace]
        .into_iter()
        .flatten()
        .chain(&args.compare)
        .map(PathBuf::as_path)
        .collect();
    let report = args.report.as_deref().map(|p| super::output(p, &inputs, args.force)).transpose()?;
    let decisions = args.decisions.as_deref().map(|p| super::output(p, &inputs, args.force)).transpose()?;
    let mut cluster = read(&args.cluster, DEFAULT_CLUSTER, MAX_CLUSTER_BYTES, sim::read_cluster)?;
    if let Some(path) = &args.slurm_topology {
        let topology = read(&Some(path.clone()), ("", ""), MAX_CLUSTER_BYTES, slurm_topology)?;
        cluster.add_topology(&topology.nodes, &path.display().to_string());
    }
    cluster.add_label_levels(&args.topology_label, "--topology-label");
    cluster.add_prices(&args.price, "--price").map_err(CliError::usage)?;
    for w in &cluster.warnings {
        eprintln!("warning: {w}");
    }
    let paths: Vec<Option<&PathBuf>> = match (&args.policy, args.compare.is_empty()) {
        (None, false) => args.compare.iter().map(Some).collect(),
        (policy, _) => std::iter::once(policy.as_ref()).chain(args.compare.iter().map(Some)).collect(),
    };
    let mut policies: Vec<(String, CompiledPolicy)> = Vec::new();
    for p in paths {
        let compiled = match p {
            Some(path) => super::compile_policy(path, args.engine, color)?,
            None => super::compile_policy_text(DEFAULT_POLICY.0, DEFAULT_POLICY.1, args.engine, color)?,
        };
        policies.push((compiled.policy.name.clone(), compiled));
    }
    // A Slurm history's QOS names a priority class when every policy run has that class.
    let classes: Vec<String> = (policies.iter().flat_map(|(_, p)| &p.policy.priority_classes))
        .map(|(c, _)| c.clone())
        .filter(|c| policies.iter().all(|(_, p)| p.policy.priority_classes.iter().any(|(d, _)| d == c)))
        .collect();
    // (Shard requests the nodes cannot turn into fractions are named by the history's reader.)
    let (reading, _) = gpol_slurm::jobs::Reading::new(classes, cluster.nodes.iter().map(|n| &n.spec), args.queue_from);
    let workload = match &args.trace {
        Some(path) => open_trace(path, &reading)?,
        None => read(&None, DEFAULT_TRACE, MAX_INPUT_BYTES, sim::read_trace)?,
    };
    for w in &workload.warnings {
        eprintln!("warning: {w}");
    }
    if mode == Mode::Timed && workload.is_openb() {
        eprintln!("warning: {}", sim::core::OPENB_TIMED);
    }
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let cancel = Arc::clone(&cancel);
        // A second handler cannot be installed (in tests that run twice): then Ctrl-C
        // simply ends the process, which has written nothing yet.
        let _ = ctrlc::set_handler(move || cancel.store(true, Ordering::Relaxed));
    }
    let runs: Vec<(usize, u64)> = (0..policies.len()).flat_map(|p| seeds.iter().map(move |&s| (p, s))).collect();
    if decisions.is_some() && runs.len() > 1 {
        return Err(CliError::usage("--decisions records one run: one policy and one seed"));
    }
    // The decisions as JSON Lines, up to a limit (the run fails beyond it).
    let lines = std::sync::Mutex::new((Vec::<u8>::new(), false));
    let record = |s: &gpol_runtime::Scheduler, e: &gpol_runtime::Event| {
        let Some(d) = sim::decisions::Decision::of(s, e) else { return };
        let mut guard = lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (text, over) = &mut *guard;
        if *over || serde_json::to_writer(&mut *text, &d).is_err() {
            return;
        }
        text.push(b'\n');
        *over = text.len() as u64 > MAX_DECISIONS_BYTES;
    };
    // Each run counts for a thousand steps of the bar.
    let bar = Progress::new(runs.len() as u64 * 1000, "simulating");
    let results: Vec<Result<Report, SimError>> = runs
        .par_iter()
        .map(|&(p, seed)| {
            let sampling = match args.fill_sampling {
                FillSampling::Passes => sim::Sampling::Passes,
                FillSampling::Replacement => sim::Sampling::Replacement,
            };
            let start = args.start.clone();
            let config = Config { mode, seed, retry_ms, shape_coverage, sampling, start, ..Config::default() };
            let seen = AtomicU64::new(0);
            let progress = |done: f64| {
                let now = (done.clamp(0.0, 1.0) * 1000.0) as u64;
                let before = seen.swap(now, Ordering::Relaxed);
                bar.inc(now.saturating_sub(before));
            };
            let mut control = Control::new(&progress, &cancel);
            if decisions.is_some() {
                control.on_event = Some(&record);
            }
            sim::run(&policies[p].1, &cluster, &workload, &config, &control)
        })
        .collect();
    bar.finish();
    let mut reports = Vec::with_capacity(results.len());
    for r in results {
        match r {
            Ok(report) => reports.push(report),
            Err(SimError::Interrupted) => {
                eprintln!("interrupted: nothing was written");
                return Err(CliError::reported(INTERRUPTED));
            }
            Err(e) => return Err(CliError::failed(e)),
        }
    }
    let grouped: Vec<(String, Vec<Report>)> = policies
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), reports[i * seeds.len()..(i + 1) * seeds.len()].to_vec()))
        .collect();
    let single = grouped.len() == 1 && seeds.len() == 1;
    let text = if args.json {
        let value = if single {
            serde_json::to_value(&grouped[0].1[0])
        } else {
            serde_json::to_value(serde_json::json!({ "runs": reports }))
        };
        let mut s = value.and_then(|v| serde_json::to_string_pretty(&v)).map_err(CliError::failed)?;
        s.push('\n');
        s
    } else if single {
        // Names from the inputs reach the terminal: escape what could drive it.
        gpol_compiler::terminal::escape(&sim::summary::render(&grouped[0].1[0])).into_owned()
    } else {
        gpol_compiler::terminal::escape(&sim::summary::compare(&grouped)).into_owned()
    };
    // The summary first: a report that cannot be written loses nothing else.
    super::print(&text);
    if let Some(out) = &report {
        let html = sim::html::render(&grouped).map_err(CliError::failed)?;
        super::write_output(out, html.as_bytes(), None)?;
    }
    if let Some(out) = &decisions {
        let (text, over) = lines.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        if over {
            let path = out.path().display();
            return Err(CliError::failed(format!(
                "the decisions pass {MAX_DECISIONS_BYTES} bytes: {path} is not written"
            )));
        }
        super::write_output(out, &text, None)?;
    }
    Ok(())
}

/// Reads an input file (or the bundled default) with `parse`, reporting errors.
/// `--topology-label LEVEL=KEY`.
fn level_key(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((level, key)) if !level.is_empty() && !key.is_empty() => Ok((level.to_string(), key.to_string())),
        _ => Err(format!("expected LEVEL=KEY (rack=example.com/rack), found `{text}`")),
    }
}

/// Slurm's `topology.conf`, its errors as the simulator's input errors.
fn slurm_topology(text: &str, file: &str) -> Result<gpol_slurm::topology::read::Topology, sim::input::InputError> {
    gpol_slurm::topology::read::read(text).map_err(|e| {
        let line = Some(e.line).filter(|&l| l > 0);
        sim::input::InputError::new(file, line, Some(e.key.as_str()).filter(|k| !k.is_empty()), e.message)
    })
}

pub(super) fn read<T>(
    path: &Option<PathBuf>,
    default: (&str, &str),
    max_bytes: u64,
    parse: fn(&str, &str) -> Result<T, sim::input::InputError>,
) -> Result<T, CliError> {
    let (name, text) = match path {
        Some(p) => {
            let bytes = gpol_compiler::files::read(p, max_bytes).map_err(CliError::usage)?;
            let text = String::from_utf8(bytes).map_err(|e| {
                CliError::failed(format!("{}: not UTF-8 text (byte {})", p.display(), e.utf8_error().valid_up_to()))
            })?;
            (p.display().to_string(), text)
        }
        None => (default.0.to_string(), default.1.to_string()),
    };
    parse(&text, &name).map_err(CliError::failed)
}

/// Opens a trace file: checked in one pass, then streamed by each run when its rows are
/// in arrival order (docs/simulator.md).
pub(super) fn open_trace(path: &std::path::Path, slurm: &gpol_slurm::jobs::Reading) -> Result<sim::Workload, CliError> {
    gpol_compiler::files::open(path, MAX_INPUT_BYTES).map_err(CliError::usage)?;
    let bar = Progress::new(1000, "checking the trace");
    let seen = AtomicU64::new(0);
    let progress = |done: f64| {
        let now = (done.clamp(0.0, 1.0) * 1000.0) as u64;
        bar.inc(now.saturating_sub(seen.swap(now, Ordering::Relaxed)));
    };
    let workload = sim::open_trace(path, &path.display().to_string(), MAX_INPUT_BYTES, slurm, &progress);
    bar.finish();
    workload.map_err(CliError::failed)
}

/// `A..B` (inclusive), or a single seed.
fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("--seeds takes a range like 1..10, not `{text}`");
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (a.trim().parse::<u64>().map_err(|_| bad())?, b.trim().parse::<u64>().map_err(|_| bad())?),
        None => {
            let s = text.trim().parse::<u64>().map_err(|_| bad())?;
            (s, s)
        }
    };
    if a > b || b - a >= 10_000 {
        return Err(bad());
    }
    Ok((a..=b).collect())
}

/// Progress on standard error: a bar on a terminal; elsewhere (a CI log, a pipe) one
/// line every few seconds, so that a long run shows it is alive.
struct Progress {
    bar: ProgressBar,
    /// What is in progress: `simulating`.
    label: &'static str,
    total: u64,
    done: AtomicU64,
    start: std::time::Instant,
    /// When the last line was printed (`None` on a terminal, where the bar shows).
    last_line: Option<std::sync::Mutex<std::time::Instant>>,
    every: std::time::Duration,
}

/// How often a progress line is printed when standard error is not a terminal: every
/// `GPOLC_PROGRESS_EVERY` seconds, 5 by default.
fn progress_every() -> std::time::Duration {
    let seconds = std::env::var("GPOLC_PROGRESS_EVERY").ok().and_then(|s| s.parse::<f64>().ok());
    std::time::Duration::from_secs_f64(seconds.filter(|s| s.is_finite() && *s >= 0.0).unwrap_or(5.0))
}

impl Progress {
    fn new(total: u64, label: &'static str) -> Progress {
        let start = std::time::Instant::now();
        let terminal = std::io::stderr().is_terminal();
        let bar = if terminal {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let template = format!("{{spinner}} {label} {{bar:40}} {{percent}}% · {{eta}} left");
            if let Ok(style) = ProgressStyle::with_template(&template) {
                bar.set_style(style);
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        let last_line = (!terminal).then(|| std::sync::Mutex::new(start));
        Progress { bar, label, total, done: AtomicU64::new(0), start, last_line, every: progress_every() }
    }

    fn inc(&self, n: u64) {
        self.bar.inc(n);
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        let Some(last) = &self.last_line else { return };
        let Ok(mut last) = last.try_lock() else { return };
        if last.elapsed() >= self.every {
            *last = std::time::Instant::now();
            let pct = 100.0 * done as f64 / self.total.max(1) as f64;
            eprintln!("{}: {pct:.0}% after {:.0} s", self.label, self.start.elapsed().as_secs_f64());
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
