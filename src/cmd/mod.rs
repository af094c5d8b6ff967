pub mod bench;
pub mod build;
pub mod check;
pub mod diff;
pub mod explain;
pub mod fmt;
pub mod gen_trace;
pub mod ir;
pub mod serve;
pub mod sim;
pub mod slurm;
pub mod test;

use gpol_compiler::diag::{Diagnostic, render};
use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::files::{self, Output, Snapshot};
use gpol_compiler::limits::MAX_POLICY_BYTES;
use gpol_compiler::load::{self, CheckedPolicy};
use gpol_compiler::source::SourceMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Exit codes shared by every subcommand.
pub const OK: u8 = 0;
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }
}

/// Shows on standard error the internal errors gpol's libraries log in release builds
/// (`never!`: a bug, worth a report), and nothing else, so every command's output stays
/// its own. `serve` sets up its logs instead.
pub fn log_internal_errors() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let only = tracing_subscriber::filter::Targets::new()
        .with_target(gpol_compiler::never::TARGET, tracing_subscriber::filter::LevelFilter::ERROR);
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    let _ = tracing_subscriber::registry().with(logs).with(only).try_init();
}

/// Writes to standard output; a reader that went away (`| head`) is not an error.
pub fn print(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// The `.gpol` files named by the arguments: files as given, directories searched
/// recursively, in sorted order, each file once.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    files::gpol_files(paths).map_err(|e| e.to_string())
}

/// Reads a source file into a new source map, for commands that do not check it (`fmt`),
/// with what was read, to rewrite it only if it is unchanged. Invalid UTF-8 becomes a
/// diagnostic.
pub fn read_source(
    path: &Path,
) -> Result<(SourceMap, gpol_compiler::source::FileId, Option<Diagnostic>, Snapshot), String> {
    let snapshot = files::read_for_rewrite(path, MAX_POLICY_BYTES).map_err(|e| e.to_string())?;
    let mut sources = SourceMap::new();
    let (id, bad) = sources.add_bytes(path.display().to_string(), snapshot.bytes.clone());
    Ok((sources, id, bad, snapshot))
}

/// Checks an output path before the work that fills it, printing why it cannot be used.
pub fn output(path: &Path, inputs: &[&Path], force: bool) -> Result<Output, u8> {
    Output::new(path, inputs, force).map_err(|e| {
        eprintln!("error: {e}");
        USAGE
    })
}

/// Writes an output checked with [`output`], printing why it failed.
pub fn write_output(out: &Output, bytes: &[u8], unchanged: Option<&Snapshot>) -> Result<(), u8> {
    out.write(bytes, unchanged).map_err(|e| {
        eprintln!("error: {e}");
        USAGE
    })
}

/// Prints a checked policy's errors (and, with `warnings`, its warnings).
fn report(checked: &load::Checked, warnings: bool, color: bool) {
    print_diagnostics(&checked.sources, checked.diagnostics.iter().filter(|d| warnings || d.is_error()), color);
}

/// Prints diagnostics for people, at most the default number of each code.
pub fn print_diagnostics<'d>(sources: &SourceMap, diagnostics: impl IntoIterator<Item = &'d Diagnostic>, color: bool) {
    let mut human = render::Human::new(sources, color);
    let mut shown = render::PerCode::new(gpol_compiler::limits::MAX_DIAGNOSTICS_PER_CODE);
    for d in diagnostics {
        if shown.admit(d.code) {
            eprint!("{}", human.render(d));
        }
    }
    eprint!("{}", shown.summary());
}

/// Reads and checks a policy, printing its errors (and, with `warnings`, its warnings).
/// `Err` holds the exit code to return.
pub fn check_policy(path: &Path, warnings: bool, color: bool) -> Result<CheckedPolicy, u8> {
    let checked = load::Checked::from_file(path).map_err(|e| {
        eprintln!("error: {e}");
        USAGE
    })?;
    report(&checked, warnings, color);
    checked.into_policy().map_err(|_| FAILED)
}

/// Compiles a checked policy with `engine`, printing a backend failure.
pub fn compile_checked(checked: CheckedPolicy, engine: EngineKind, color: bool) -> Result<CompiledPolicy, u8> {
    checked.compile(engine).map_err(|failed| {
        print_diagnostics(&failed.sources, &failed.diagnostics, color);
        FAILED
    })
}

/// Reads, checks and compiles a policy, printing its errors.
pub fn compile_policy(path: &Path, engine: EngineKind, color: bool) -> Result<CompiledPolicy, u8> {
    compile_checked(check_policy(path, false, color)?, engine, color)
}

/// [`compile_policy`], with the digest of the file's bytes it compiled (what the decision
/// log names the policy by).
pub fn compile_policy_digest(path: &Path, engine: EngineKind, color: bool) -> Result<(CompiledPolicy, String), u8> {
    let bytes = gpol_compiler::files::read(path, gpol_compiler::limits::MAX_POLICY_BYTES).map_err(|e| {
        eprintln!("error: {e}");
        USAGE
    })?;
    let digest = gpol_runtime::decision_log::digest(&bytes);
    let checked = load::Checked::from_bytes(&path.display().to_string(), bytes);
    report(&checked, false, color);
    let policy = checked.into_policy().map_err(|_| FAILED)?;
    Ok((compile_checked(policy, engine, color)?, digest))
}

/// [`compile_policy`] for a policy given as text (the bundled defaults).
pub fn compile_policy_text(name: &str, text: &str, engine: EngineKind, color: bool) -> Result<CompiledPolicy, u8> {
    let checked = load::Checked::from_text(name, text);
    report(&checked, false, color);
    compile_checked(checked.into_policy().map_err(|_| FAILED)?, engine, color)
}
