//! `gpolc ir`: print the IR a policy lowers to.

use super::OK;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
}

pub fn run(args: Args, color: bool) -> u8 {
    match super::check_policy(&args.policy, true, color).and_then(|c| super::lower(&c, color)) {
        Ok(program) => {
            super::print(&program.to_string());
            OK
        }
        Err(code) => code,
    }
}
