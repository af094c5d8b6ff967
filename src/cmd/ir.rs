//! `gpolc ir`: print the IR a policy lowers to.

use super::{FAILED, OK, USAGE, load};
use gpol_compiler::diag::render;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
}

pub fn run(args: Args, color: bool) -> u8 {
    let (mut sources, id, bad) = match load(&args.policy) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE;
        }
    };
    let checked = match bad {
        Some(d) => {
            eprint!("{}", render::human(&sources, &d, color));
            return FAILED;
        }
        None => gpol_compiler::check::check(&mut sources, id),
    };
    for d in &checked.diagnostics {
        eprint!("{}", render::human(&sources, d, color));
    }
    let Some(policy) = checked.policy else {
        return FAILED;
    };
    super::print(&gpol_compiler::lower::lower(&policy).to_string());
    OK
}
