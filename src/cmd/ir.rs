//! `gpolc ir`: print the IR a policy lowers to.

use super::{CliError, OK};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    let checked = super::check_policy(&args.policy, true, color)?;
    super::print(&checked.analysed.program.to_string());
    Ok(OK)
}
