//! `gpolc slurm`: a policy in a real Slurm. `emit` writes what Slurm takes from a policy
//! at configuration time: `job_submit.lua` (the submit-time rules).

use super::{OK, USAGE};
use gpol_compiler::engine::EngineKind;
use gpol_slurm::lua::Policy;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Write a policy's Slurm artefacts into a directory: job_submit.lua.
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
    let path = args.out.join("job_submit.lua");
    let out = match super::output(&path, &[&args.policy], args.force) {
        Ok(out) => out,
        Err(code) => return code,
    };
    let compiled = match super::compile_policy(&args.policy, EngineKind::Interp, color) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let policy = Policy { program: &compiled.program, hir: &compiled.policy };
    let submit = gpol_slurm::submit::emit(policy, &args.policy.display().to_string());
    if let Err(code) = super::write_output(&out, submit.lua.as_bytes(), None) {
        return code;
    }
    let compiled_rules = submit.rules.iter().filter(|r| r.condition.is_ok()).count();
    eprintln!(
        "wrote {}: {compiled_rules} rule(s) enforced at submission, {} left to the scheduling loop",
        out.path().display(),
        submit.rules.len() - compiled_rules
    );
    OK
}
