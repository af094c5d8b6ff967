//! `gpolc gen-trace`: writes a synthetic workload in gpol's trace format.

use super::{CliError, OK};
use gpol_sim::generate::{GenSpec, Profile, QueueMix, generate};
use gpol_sim::trace::to_csv;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// How many jobs.
    #[arg(long, default_value_t = 5000)]
    jobs: usize,
    /// GPUs of the cluster the trace is for.
    #[arg(long, default_value_t = 128)]
    gpus: u64,
    /// Offered load: the jobs' GPU-time over the cluster's capacity across the trace.
    #[arg(long, default_value_t = 0.85)]
    load: f64,
    /// Cards per node: larger jobs become replicas of this many cards.
    #[arg(long, default_value_t = 8)]
    node_gpus: u32,
    #[arg(
        long = "queue",
        value_name = "NAME[:PROFILE][=SHARE]",
        help = "A queue of the workload, as NAME[:PROFILE][=SHARE] (repeatable). Profiles: training, inference, \
                research, notebook, batch (the default). Without any, jobs name no queue and follow the batch profile."
    )]
    queues: Vec<String>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where to write the trace (CSV); standard output if not given.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace a read-only output file.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args) -> Result<u8, CliError> {
    let queues = args.queues.iter().map(|q| parse_queue(q)).collect::<Result<Vec<_>, _>>().map_err(CliError::usage)?;
    if !(args.load > 0.0 && args.load.is_finite()) || args.gpus == 0 || args.jobs == 0 {
        return Err(CliError::usage("--jobs and --gpus must be positive, and --load a positive number"));
    }
    let spec = GenSpec {
        jobs: args.jobs,
        seed: args.seed,
        gpus: args.gpus,
        load: args.load,
        node_gpus: args.node_gpus,
        queues,
    };
    let out = args.output.as_deref().map(|p| super::output(p, &[], args.force)).transpose()?;
    let csv = to_csv(&generate(&spec));
    match &out {
        Some(out) => super::write_output(out, csv.as_bytes(), None)?,
        None => super::print(&csv),
    }
    Ok(OK)
}

/// `NAME[:PROFILE][=SHARE]`.
fn parse_queue(text: &str) -> Result<QueueMix, String> {
    let (rest, share) = match text.split_once('=') {
        Some((r, s)) => (r, s.parse::<f64>().map_err(|_| format!("--queue {text}: `{s}` is not a number"))?),
        None => (text, 1.0),
    };
    let (name, profile) = match rest.split_once(':') {
        Some((n, p)) => (
            n,
            Profile::parse(p).ok_or_else(|| {
                let names: Vec<&str> = Profile::ALL.iter().map(|(n, _)| *n).collect();
                format!("--queue {text}: unknown profile `{p}`; expected one of {}", names.join(", "))
            })?,
        ),
        None => (rest, Profile::parse(rest).unwrap_or(Profile::Batch)),
    };
    if name.is_empty() || !(share > 0.0 && share.is_finite()) {
        return Err(format!("--queue {text}: expected NAME[:PROFILE][=SHARE] with a positive share"));
    }
    Ok(QueueMix { name: Some(name.to_string()), profile, share })
}
