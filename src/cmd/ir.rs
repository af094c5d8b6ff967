//! `gpolc ir`: print the IR a policy lowers to.

use super::OK;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
}

pub fn run(args: Args, color: bool) -> u8 {
    match super::check_policy(&args.policy, true, color) {
        Ok(checked) => {
            super::print(&checked.analysed.program.to_string());
            OK
        }
        Err(code) => code,
    }
}
