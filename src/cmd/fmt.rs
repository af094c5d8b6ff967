//! `gpolc fmt`: rewrite policies in the canonical layout.

use super::{CliError, FAILED, OK, collect_files, read_source};
use gpol_compiler::diag::render;
use gpol_compiler::fmt::format_source;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Files or directories (searched for *.gpol).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Do not write; list files that are not formatted and exit 1 if there are any.
    #[arg(long)]
    check: bool,
    /// Rewrite read-only files too.
    #[arg(long)]
    force: bool,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    let files = collect_files(&args.paths)?;
    let mut status = OK;
    for path in &files {
        let (sources, id, bad, snapshot) = read_source(path)?;
        if let Some(d) = bad {
            eprint!("{}", render::human(&sources, &d, color));
            status = FAILED;
            continue;
        }
        let text = &sources.get(id).text;
        let formatted = match format_source(id, text) {
            Ok(f) => f,
            Err(d) => {
                eprint!("{}", render::human(&sources, &d, color));
                status = FAILED;
                continue;
            }
        };
        // Compare with the file as read (a byte-order mark was blanked by the loader).
        if formatted.as_bytes() == snapshot.bytes.as_slice() {
            continue;
        }
        if args.check {
            super::print(&format!("{}\n", path.display()));
            status = FAILED;
            continue;
        }
        let out = super::output(path, &[], args.force)?;
        super::write_output(&out, formatted.as_bytes(), Some(&snapshot))?;
    }
    Ok(status)
}
