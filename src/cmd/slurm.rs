//! `gpolc slurm`: a policy in a real Slurm. `emit` writes what Slurm takes from a policy
//! at configuration time: `job_submit.lua` (the submit-time rules) and `accounts.sh` (the
//! queue tree as `sacctmgr` commands) and, given a cluster, `topology.conf`.

use super::{FAILED, OK, USAGE};
use gpol_compiler::engine::EngineKind;
use gpol_compiler::limits::MAX_CLUSTER_BYTES;
use gpol_slurm::lua::Policy;
use gpol_slurm::topology::{self, Node};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Write a policy's Slurm artefacts into a directory: job_submit.lua, accounts.sh and,
    /// with --cluster, topology.conf.
    Emit(EmitArgs),
}

#[derive(clap::Args)]
pub struct EmitArgs {
    /// The policy file.
    policy: PathBuf,
    /// The directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// The cluster (a cluster file, `sinfo --json`, `kubectl get nodes -o json`): also
    /// write topology.conf, the policy's topology levels over its nodes.
    #[arg(long, value_name = "FILE")]
    cluster: Option<PathBuf>,
    /// Replace read-only output files.
    #[arg(long)]
    force: bool,
}

pub fn run(command: Command, color: bool) -> u8 {
    match command {
        Command::Emit(args) => emit(args, color),
    }
}

fn emit(args: EmitArgs, color: bool) -> u8 {
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        eprintln!("error: cannot create {}: {e}", args.out.display());
        return USAGE;
    }
    // Every output checked before the work that fills them.
    let mut outs = Vec::new();
    let names: &[&str] = match args.cluster {
        Some(_) => &["job_submit.lua", "accounts.sh", "topology.conf"],
        None => &["job_submit.lua", "accounts.sh"],
    };
    for name in names {
        match super::output(&args.out.join(name), &[&args.policy], args.force) {
            Ok(out) => outs.push(out),
            Err(code) => return code,
        }
    }
    let compiled = match super::compile_policy(&args.policy, EngineKind::Interp, color) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let file = args.policy.display().to_string();
    let policy = Policy { program: &compiled.program, hir: &compiled.policy };
    let submit = gpol_slurm::submit::emit(policy, &file);
    let accounts = gpol_slurm::accounts::emit(&compiled.policy, &file);
    let mut texts = vec![submit.lua.clone(), accounts.script.clone()];
    if args.cluster.is_some() {
        let cluster =
            super::sim::read(&args.cluster, super::sim::DEFAULT_CLUSTER, MAX_CLUSTER_BYTES, gpol_sim::read_cluster)
                .map_err(|_| USAGE);
        let cluster = match cluster {
            Ok(c) => c,
            Err(code) => return code,
        };
        let nodes: Vec<Node> =
            cluster.nodes.iter().map(|n| Node { name: n.spec.name.clone(), topology: n.topology.clone() }).collect();
        let place = args.cluster.as_ref().map_or(String::new(), |p| p.display().to_string());
        match topology::emit(&compiled.policy.name, &compiled.policy.levels, &nodes, &place) {
            Ok(Some(text)) => texts.push(text),
            Ok(None) => {
                eprintln!("note: the cluster has none of the policy's topology levels: topology.conf is not written");
                outs.pop();
            }
            Err(e) => {
                eprintln!("error: {place}: {}", e.0);
                return FAILED;
            }
        }
    }
    for (out, text) in outs.iter().zip(&texts) {
        let bytes = text.as_bytes();
        if let Err(code) = super::write_output(out, bytes, None) {
            return code;
        }
    }
    let enforced = submit.rules.iter().filter(|r| r.condition.is_ok()).count();
    eprintln!(
        "wrote {}: {enforced} rule(s) enforced at submission, {} left to the scheduling loop",
        outs[0].path().display(),
        submit.rules.len() - enforced
    );
    eprintln!(
        "wrote {}: {} account(s), {} thing(s) Slurm's associations cannot express",
        outs[1].path().display(),
        accounts.script.lines().filter(|l| l.starts_with("sacctmgr")).count(),
        accounts.unexpressed.len()
    );
    if let Some(t) = outs.get(2) {
        eprintln!("wrote {}", t.path().display());
    }
    OK
}
