//! `gpolc bench`: what a policy costs — compile time, and nanoseconds per (job, node)
//! in the JIT and the interpreter on a generated cluster.

use super::{CliError, FAILED, OK};
use gpol_compiler::diag::render;
use gpol_compiler::engine::{CompiledPolicy, EngineKind, NodeResult, compile};
use gpol_compiler::limits::MAX_NODES;
use gpol_compiler::synthetic::Cluster;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
    /// Nodes in the generated cluster (1 to 100000).
    #[arg(long, default_value_t = 5000, value_parser = node_count)]
    nodes: usize,
}

/// A node count within the cluster limit: "too large, at most N", never clamped.
fn node_count(text: &str) -> Result<usize, String> {
    let n: u64 = text.parse().map_err(|_| format!("expected a whole number of nodes, found `{text}`"))?;
    match n {
        0 => Err("at least one node is needed to measure a pass".into()),
        n if n > u64::from(MAX_NODES) => Err(format!("{n} is too large, at most {MAX_NODES}")),
        n => Ok(n as usize),
    }
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    let checked = super::check_policy(&args.policy, true, color)?;
    let text = checked.sources.get(checked.file).text.clone();
    let (policy, sources) = (checked.policy, checked.sources);
    let compile_time = median(15, || {
        let _ = gpol_compiler::load::compile_text("bench.gpol", &text, EngineKind::Jit);
    });
    let engines = [EngineKind::Jit, EngineKind::Interp].map(|k| compile(policy.clone(), k));
    let mut report = format!(
        "policy {} ({} filters, {} scores)\ncompile (check + lower + JIT): {:.2} ms\n",
        policy.name,
        policy.rules.iter().filter(|r| r.kind == gpol_compiler::ir::RuleKind::Filter).count(),
        policy.rules.iter().filter(|r| r.kind == gpol_compiler::ir::RuleKind::Score).count(),
        compile_time.as_secs_f64() * 1e3
    );
    for (name, engine) in ["jit", "interp"].iter().zip(engines) {
        let engine = match engine {
            Ok(e) => e,
            Err(d) => {
                eprint!("{}", render::human(&sources, &d, color));
                return Err(CliError::reported(FAILED));
            }
        };
        let per_pass = measure(&engine, args.nodes);
        let ns = per_pass.as_secs_f64() * 1e9 / args.nodes.max(1) as f64;
        report.push_str(&format!(
            "{name:>6}: {ns:8.1} ns per (job, node), {:8.1} µs per {}-node filter+score pass\n",
            per_pass.as_secs_f64() * 1e6,
            args.nodes
        ));
    }
    super::print(&report);
    Ok(OK)
}

/// The median time of one filter+score pass over the generated cluster.
fn measure(engine: &CompiledPolicy, nodes: usize) -> Duration {
    let cluster = Cluster::generate(nodes, &engine.program, 7);
    let records = cluster.nodes();
    let ctx = cluster.ctx(&engine.program);
    let job = Cluster::job();
    let mut out = vec![NodeResult::default(); nodes];
    median(31, || engine.engine().filter_score(&ctx, &job, &records, &mut out))
}

/// Runs `f` until about 0.2 s have passed (at least `min_runs` times) and returns the
/// median duration: robust to the noise of a shared machine.
fn median(min_runs: usize, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < min_runs || (start.elapsed() < Duration::from_millis(200) && times.len() < 100_000) {
        let t = Instant::now();
        f();
        times.push(t.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}
