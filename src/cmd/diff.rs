//! `gpolc diff`: what a change to a policy changes, decision by decision.

use super::{CliError, USAGE, print};
use gpol_diff::side::Side;
use gpol_diff::{Budget, Options, render, report};
use std::path::PathBuf;
use std::process::Command;

#[derive(clap::Args)]
pub struct Args {
    /// The old version: a file, or `REV:PATH` (a file as git revision REV holds it).
    #[arg(required_unless_present = "base")]
    old: Option<String>,
    /// The new version: a file, or `REV:PATH`.
    #[arg(required_unless_present = "base")]
    new: Option<String>,
    /// Diff every `.gpol` file changed since the branch left git revision REV against its
    /// version there (the merge base): the CI job.
    #[arg(long, value_name = "REV", conflicts_with_all = ["old", "new"])]
    base: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Seed of the cases drawn: the same seed draws the same cases.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How long to search: a number of cases (`4000`) or a time (`10s`, `2m`, `1h`).
    #[arg(long, default_value_t = Budget::Cases(gpol_diff::DEFAULT_CASES).to_string())]
    budget: String,
    /// Cases of the exhaustive small-cluster domain at most (≤ 3 nodes, ≤ 4 jobs; its
    /// palette is cut to fit, and the report says how). Played besides the budget.
    #[arg(long, default_value_t = gpol_diff::DEFAULT_BOUND, value_parser = clap::value_parser!(u64).range(1..=gpol_compiler::limits::MAX_DIFF_BOUND))]
    bound: u64,
    /// Also replay this trace on both versions (the bundled samples/trace.csv when only
    /// --cluster or --fill is given) and compare their decisions in order.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The cluster to replay on (the bundled samples/cluster.toml if not given).
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Replay in fill mode, to this percentage of capacity, instead of timed.
    #[arg(long, value_name = "PCT")]
    fill: Option<f64>,
    /// For a Slurm history (`sacct --json`) as the trace: a job's queue is its `account`
    /// or its `partition`. (Its QOS names no priority class here: one trace serves every
    /// pair of versions.)
    #[arg(long, value_name = "FIELD", default_value = "account")]
    queue_from: gpol_slurm::jobs::QueueFrom,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Human,
    Json,
    Github,
}

pub fn run(args: Args) -> Result<u8, CliError> {
    let budget: Budget = args.budget.parse().map_err(CliError::usage)?;
    let options = Options { seed: args.seed, budget, bound: args.bound };
    let pairs = match (&args.base, &args.old, &args.new) {
        (Some(base), _, _) => changed_since(base).map_err(CliError::usage)?,
        (None, Some(old), Some(new)) => {
            vec![Pair { old: old.clone(), old_label: old.clone(), new: new.clone(), new_label: new.clone() }]
        }
        _ => return Err(CliError::usage("give OLD and NEW, or --base REV")),
    };
    let replaying = args.trace.is_some() || args.cluster.is_some() || args.fill.is_some();
    let inputs = if replaying { Some(replay_inputs(&args)?) } else { None };
    let mut worst = report::SAME;
    let mut reports = Vec::new();
    let mut failed = false;
    for p in &pairs {
        let (old, new) = match (Side::load_as(&p.old, &p.old_label), Side::load_as(&p.new, &p.new_label)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                // Said, and the other files still compared.
                super::show(&CliError::usage(e));
                failed = true;
                continue;
            }
        };
        let mut r = gpol_diff::diff(&old, &new, &options);
        if let Some((cluster, workload, mode)) = &inputs
            && let Err(e) = gpol_diff::add_replay(&mut r, &old, &new, cluster, workload, *mode)
        {
            super::show(&CliError::usage(e));
            failed = true;
            continue;
        }
        worst = worse(worst, r.exit_code());
        reports.push(r);
    }
    match args.format {
        Format::Human => {
            if args.base.is_some() && pairs.is_empty() {
                print("no changed .gpol file to compare\n");
            }
            for r in &reports {
                print(&render::human(r));
            }
        }
        Format::Json => {
            let list: Vec<String> = reports.iter().map(render::json).collect();
            match args.base {
                Some(_) => print(&format!("[{}]\n", list.join(",\n"))),
                None => print(&format!("{}\n", list.join("\n"))),
            }
        }
        Format::Github => reports.iter().for_each(|r| print(&render::github(r))),
    }
    Ok(if failed { USAGE } else { worst })
}

/// The cluster, trace and mode of a replay.
fn replay_inputs(
    args: &Args,
) -> Result<(gpol_sim::cluster_file::ClusterSpec, gpol_sim::Workload, gpol_sim::Mode), CliError> {
    use gpol_compiler::limits::{MAX_CLUSTER_BYTES, MAX_INPUT_BYTES};
    let mode = match args.fill {
        Some(pct) if pct > 0.0 && pct.is_finite() => gpol_sim::Mode::Fill { target: pct / 100.0 },
        Some(pct) => return Err(CliError::usage(format!("--fill takes a positive percentage, not {pct}"))),
        None => gpol_sim::Mode::Timed,
    };
    // A cluster or trace that cannot be read is an error (2), never a change.
    let cluster =
        super::sim::read(&args.cluster, super::sim::DEFAULT_CLUSTER, MAX_CLUSTER_BYTES, gpol_sim::read_cluster)
            .map_err(|e| e.with_code(USAGE))?;
    let (reading, _) =
        gpol_slurm::jobs::Reading::new(Vec::new(), cluster.nodes.iter().map(|n| &n.spec), args.queue_from);
    let workload = match &args.trace {
        Some(path) => super::sim::open_trace(path, &reading),
        None => super::sim::read(&None, super::sim::DEFAULT_TRACE, MAX_INPUT_BYTES, gpol_sim::read_trace),
    }
    .map_err(|e| e.with_code(USAGE))?;
    for w in &workload.warnings {
        eprintln!("warning: {w}");
    }
    Ok((cluster, workload, mode))
}

/// The exit code of several diffs: changed over inconclusive over the same.
fn worse(a: u8, b: u8) -> u8 {
    let rank = |c| match c {
        report::CHANGED => 2,
        report::INCONCLUSIVE => 1,
        _ => 0,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// The two sides of one diff, where to read each and what to call it.
struct Pair {
    old: String,
    old_label: String,
    new: String,
    new_label: String,
}

/// The sides of every `.gpol` file changed between `base` and the working
/// tree: the file as it was where the branch left `base` (their merge base, so that
/// changes made on `base` since are not counted as this branch's), and the file now.
/// Files added since have no old version and files deleted no new one: both are said,
/// not diffed.
fn changed_since(base: &str) -> Result<Vec<Pair>, String> {
    let git = |args: &[&str]| -> Result<Vec<u8>, String> {
        let out = Command::new("git").args(args).output().map_err(|e| format!("cannot run git: {e}"))?;
        if !out.status.success() {
            return Err(format!("git {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(out.stdout)
    };
    let text =
        |bytes: Vec<u8>| String::from_utf8(bytes).map_err(|_| "git printed a path that is not UTF-8".to_string());
    let top = text(git(&["rev-parse", "--show-toplevel"])?)?;
    let top = std::path::Path::new(top.trim());
    let fork = match git(&["merge-base", "--end-of-options", base, "HEAD"]) {
        Ok(out) => text(out)?.trim().to_string(),
        Err(_) => base.to_string(),
    };
    // NUL-separated, so that no path is quoted or cut.
    let listing = git(&["diff", "--name-status", "--no-renames", "-z", "--end-of-options", &fork, "--", "*.gpol"])?;
    let fields: Vec<String> =
        listing.split(|&b| b == 0).filter(|f| !f.is_empty()).map(|f| String::from_utf8_lossy(f).into_owned()).collect();
    let mut pairs = Vec::new();
    for pair in fields.chunks(2) {
        let [status, path] = pair else { continue };
        match status.as_str() {
            "A" => eprintln!("{path}: added since {base} (nothing to compare with)"),
            "D" => eprintln!("{path}: deleted since {base}"),
            _ => pairs.push(Pair {
                old: format!("{fork}:{path}"),
                old_label: format!("{base}:{path}"),
                new: top.join(path).display().to_string(),
                new_label: path.clone(),
            }),
        }
    }
    Ok(pairs)
}
