//! The simulator (`gpolc sim`): replays a workload trace on a cluster under a compiled
//! policy and reports what happened — allocation and utilization over time, queueing
//! delay, fairness, preemptions, fragmentation (docs/simulator.md).
//!
//! Inputs come from [`cluster_file`] (clusters), [`trace`] (gpol's trace format), [`openb`]
//! (the Alibaba GPU trace) and [`generate`] (synthetic workloads); [`core`] runs the
//! discrete-event replay and fills in a [`report::Report`].

pub mod core;

pub mod cluster_file;
pub mod decisions;
pub mod generate;
pub mod html;
pub mod input;
pub mod k8s;
pub mod openb;
pub mod prices;
pub mod report;
pub mod sacct;
pub mod series;
pub mod slurm;
pub mod summary;
pub mod trace;
pub mod workload;

pub use core::{Config, Control, Mode, Sampling, SimError, run};
pub use workload::Workload;

use input::InputError;

/// Reads a cluster file in whichever format it is: a TOML spec (`.toml`), an openb
/// node list (CSV), `kubectl get nodes -o json` output, or a Slurm node list
/// (`sinfo --json`).
pub fn read_cluster(text: &str, file: &str) -> Result<cluster_file::ClusterSpec, InputError> {
    let spec = read_any_cluster(text, file)?;
    within_limits(&spec, file)?;
    Ok(spec)
}

/// Whatever a reader let through, the one node model's limits hold (docs/limits.md).
fn within_limits(spec: &cluster_file::ClusterSpec, file: &str) -> Result<(), InputError> {
    use gpol_compiler::limits::MAX_NODES;
    if spec.nodes.len() > MAX_NODES as usize {
        let m = format!("{} nodes: too large, at most {MAX_NODES}", spec.nodes.len());
        return Err(InputError::new(file, None, None, m));
    }
    for n in &spec.nodes {
        if let Some(over) = n.spec.over_limit() {
            let m = format!("node `{}`: too large, at most {}", n.spec.name, over.max);
            return Err(InputError::new(file, None, Some(over.field), m));
        }
    }
    Ok(())
}

fn read_any_cluster(text: &str, file: &str) -> Result<cluster_file::ClusterSpec, InputError> {
    if file.ends_with(".toml") {
        cluster_file::parse_toml(text, file)
    } else if openb::is_node_list(text) {
        openb::parse_nodes(text, file)
    } else if k8s::is_node_list(text) {
        k8s::parse_nodes(text, file)
    } else if slurm::is_node_list(text) {
        slurm::parse_nodes(text, file)
    } else {
        Err(InputError::new(
            file,
            None,
            None,
            "not a cluster file gpol reads: expected a TOML spec (.toml), an openb node list \
             (CSV with header `sn,cpu_milli,memory_mib,gpu,model`), `kubectl get nodes -o json` output, \
             or a Slurm node list (`sinfo --json`, slurmrestd's `/nodes`, `scontrol show nodes --json`)",
        ))
    }
}

/// Reads a trace held in memory, in whichever format it is: an openb pod list (CSV), a
/// Slurm history (`sacct --json`, its jobs read as `slurm` says), or gpol's trace format
/// (CSV or JSON Lines).
pub fn read_trace_as(text: &str, file: &str, slurm: &gpol_slurm::jobs::Reading) -> Result<Workload, InputError> {
    let openb = openb::is_pod_list(text);
    let (jobs, warnings) = if openb {
        (openb::parse_pods(text, file)?, Vec::new())
    } else if sacct::is_history(text) {
        sacct::parse(text, file, slurm)?
    } else {
        (trace::parse(text, file)?, Vec::new())
    };
    // Whatever the format, the one job model's limits hold (docs/limits.md).
    let jobs = jobs.into_iter().map(|j| workload::checked(j, file)).collect::<Result<Vec<_>, _>>()?;
    let mut workload = Workload::from_jobs(file, jobs);
    workload.warnings = warnings;
    Ok(if openb { workload.from_openb() } else { workload })
}

/// [`read_trace_as`] with Slurm's jobs read as by default (queues are accounts, no QOS
/// names a class).
pub fn read_trace(text: &str, file: &str) -> Result<Workload, InputError> {
    read_trace_as(text, file, &gpol_slurm::jobs::Reading::default())
}

/// Reads the trace at `path` (at most `max_bytes`), named `file` in errors: a native
/// trace in arrival order is checked in one pass and streamed from then on; an openb pod
/// list, or a native trace out of order, is held in memory. `progress` is told the share
/// of the file checked.
pub fn open_trace(
    path: &std::path::Path,
    file: &str,
    max_bytes: u64,
    slurm: &gpol_slurm::jobs::Reading,
    progress: &dyn Fn(f64),
) -> Result<Workload, InputError> {
    let io = |e: gpol_compiler::files::FileError| InputError::new(file, None, None, e.to_string());
    let (opened, _) = gpol_compiler::files::open(path, max_bytes).map_err(io)?;
    let mut head = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(opened, 16384), &mut head)
        .map_err(|e| InputError::new(file, None, None, format!("cannot read: {e}")))?;
    let head = String::from_utf8_lossy(&head);
    if openb::is_pod_list(&head) || sacct::is_history(&head) {
        let bytes = gpol_compiler::files::read(path, max_bytes).map_err(io)?;
        let text =
            String::from_utf8(bytes).map_err(|_| InputError::new(file, None, None, "the file is not valid UTF-8"))?;
        return read_trace_as(&text, file, slurm);
    }
    Workload::open(path, file, max_bytes, progress)
}
