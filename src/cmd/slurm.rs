//! `gpolc slurm`: a policy in a real Slurm. `emit` writes what Slurm takes from a policy
//! at configuration time: `job_submit.lua` (the submit-time rules) and `accounts.sh` (the
//! queue tree as `sacctmgr` commands).

use super::{OK, USAGE};
use gpol_compiler::engine::EngineKind;
use gpol_slurm::lua::Policy;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Write a policy's Slurm artefacts into a directory: job_submit.lua, accounts.sh.
    Emit(EmitArgs),
}

#[derive(clap::Args)]
pub struct EmitArgs {
    /// The policy file.
    policy: PathBuf,
    /// The directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
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
    for name in ["job_submit.lua", "accounts.sh"] {
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
    for (out, bytes) in outs.iter().zip([submit.lua.as_bytes(), accounts.script.as_bytes()]) {
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
    OK
}
