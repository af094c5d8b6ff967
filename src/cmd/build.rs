//! `gpolc build`: compile a policy to a relocatable object file with C symbols.

use super::{FAILED, OK, USAGE, load};
use gpol_compiler::diag::render;
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
    let (mut sources, id, bad) = match load(&args.policy) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    if let Some(d) = bad {
        eprint!("{}", render::human(&sources, &d, color));
        return FAILED;
    }
    let checked = gpol_compiler::check::check(&mut sources, id);
    for d in &checked.diagnostics {
        eprint!("{}", render::human(&sources, d, color));
    }
    let Some(policy) = checked.policy else {
        return FAILED;
    };
    let program = gpol_compiler::lower::lower(&policy);
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
