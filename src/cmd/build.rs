//! `gpolc build`: compile a policy to a relocatable object file with C symbols.

use super::{FAILED, OK};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
    /// Where to write the object file (default: the policy's name with `.o`).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Replace a read-only output file.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args, color: bool) -> u8 {
    let path = args.output.clone().unwrap_or_else(|| args.policy.with_extension("o"));
    let out = match super::output(&path, &[&args.policy], args.force) {
        Ok(out) => out,
        Err(code) => return code,
    };
    let program = match super::check_policy(&args.policy, true, color).and_then(|c| super::lower(&c, color)) {
        Ok(program) => program,
        Err(code) => return code,
    };
    let bytes = match gpol_compiler::jit::object::object(&program) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error[E0040]: code generation failed: {e}");
            return FAILED;
        }
    };
    if let Err(code) = super::write_output(&out, &bytes, None) {
        return code;
    }
    eprintln!("wrote {} ({} bytes)", out.path().display(), bytes.len());
    OK
}
