//! `gpolc build`: compile a policy to a relocatable object file with C symbols.

use super::{FAILED, OK, USAGE};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
    /// Where to write the object file (default: the policy's name with `.o`).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn run(args: Args, color: bool) -> u8 {
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
    let out = args.output.unwrap_or_else(|| args.policy.with_extension("o"));
    if let Err(e) = super::write_atomically(&out, &bytes) {
        eprintln!("error: {}: {e}", out.display());
        return USAGE;
    }
    eprintln!("wrote {} ({} bytes)", out.display(), bytes.len());
    OK
}
