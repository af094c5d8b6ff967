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

/// Why a command stops: its exit code, and the `error:` line that says why, unless that
/// is already on standard error (a policy's diagnostics, an interruption).
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    message: Option<String>,
    /// The diagnostic code the line is labelled with (`error[E0040]: …`).
    label: Option<gpol_compiler::diag::Code>,
    /// A line after the error, in parentheses: what to do instead.
    hint: Option<&'static str>,
}

impl CliError {
    /// Bad arguments or inputs that cannot be read: exit code 2.
    pub fn usage(message: impl std::fmt::Display) -> CliError {
        CliError::new(USAGE, message)
    }

    /// The work failed: exit code 1.
    pub fn failed(message: impl std::fmt::Display) -> CliError {
        CliError::new(FAILED, message)
    }

    pub fn new(code: u8, message: impl std::fmt::Display) -> CliError {
        CliError { code, message: Some(message.to_string()), label: None, hint: None }
    }

    /// Exit with `code`, the reason already shown.
    pub fn reported(code: u8) -> CliError {
        CliError { code, message: None, label: None, hint: None }
    }

    /// The same error with exit code `code`.
    pub fn with_code(self, code: u8) -> CliError {
        CliError { code, ..self }
    }

    pub fn labelled(self, label: gpol_compiler::diag::Code) -> CliError {
        CliError { label: Some(label), ..self }
    }

    pub fn with_hint(self, hint: &'static str) -> CliError {
        CliError { hint: Some(hint), ..self }
    }
}

/// The one place `error:` lines are written: for the error a command stops with, and
/// for those it reports and goes on (a file of several that cannot be compared).
pub fn show(e: &CliError) {
    let Some(message) = &e.message else { return };
    match e.label {
        Some(code) => eprintln!("error[{code}]: {message}"),
        None => eprintln!("error: {message}"),
    }
    if let Some(hint) = e.hint {
        eprintln!("({hint})");
    }
}

/// A command's exit code: its own, or its error's once shown.
pub fn exit_code(result: Result<u8, CliError>) -> u8 {
    result.unwrap_or_else(|e| {
        show(&e);
        e.code
    })
}

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
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    files::gpol_files(paths).map_err(CliError::usage)
}

/// Reads a source file into a new source map, for commands that do not check it (`fmt`),
/// with what was read, to rewrite it only if it is unchanged. Invalid UTF-8 becomes a
/// diagnostic.
pub fn read_source(
    path: &Path,
) -> Result<(SourceMap, gpol_compiler::source::FileId, Option<Diagnostic>, Snapshot), CliError> {
    let snapshot = files::read_for_rewrite(path, MAX_POLICY_BYTES).map_err(CliError::usage)?;
    let mut sources = SourceMap::new();
    let (id, bad) = sources.add_bytes(path.display().to_string(), snapshot.bytes.clone());
    Ok((sources, id, bad, snapshot))
}

/// Checks an output path before the work that fills it: why it cannot be used.
pub fn output(path: &Path, inputs: &[&Path], force: bool) -> Result<Output, CliError> {
    Output::new(path, inputs, force).map_err(CliError::usage)
}

/// Writes an output checked with [`output`]: why it failed.
pub fn write_output(out: &Output, bytes: &[u8], unchanged: Option<&Snapshot>) -> Result<(), CliError> {
    out.write(bytes, unchanged).map_err(CliError::usage)
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
pub fn check_policy(path: &Path, warnings: bool, color: bool) -> Result<CheckedPolicy, CliError> {
    let checked = load::Checked::from_file(path).map_err(CliError::usage)?;
    report(&checked, warnings, color);
    checked.into_policy().map_err(|_| CliError::reported(FAILED))
}

/// Compiles a checked policy with `engine`, printing a backend failure.
pub fn compile_checked(checked: CheckedPolicy, engine: EngineKind, color: bool) -> Result<CompiledPolicy, CliError> {
    checked.compile(engine).map_err(|failed| {
        print_diagnostics(&failed.sources, &failed.diagnostics, color);
        CliError::reported(FAILED)
    })
}

/// Reads, checks and compiles a policy, printing its errors.
pub fn compile_policy(path: &Path, engine: EngineKind, color: bool) -> Result<CompiledPolicy, CliError> {
    compile_checked(check_policy(path, false, color)?, engine, color)
}

/// [`compile_policy`], with the digest of the file's bytes it compiled (what the decision
/// log names the policy by).
pub fn compile_policy_digest(
    path: &Path,
    engine: EngineKind,
    color: bool,
) -> Result<(CompiledPolicy, String), CliError> {
    let bytes = gpol_compiler::files::read(path, gpol_compiler::limits::MAX_POLICY_BYTES).map_err(CliError::usage)?;
    let digest = gpol_runtime::decision_log::digest(&bytes);
    let checked = load::Checked::from_bytes(&path.display().to_string(), bytes);
    report(&checked, false, color);
    let policy = checked.into_policy().map_err(|_| CliError::reported(FAILED))?;
    Ok((compile_checked(policy, engine, color)?, digest))
}

/// [`compile_policy`] for a policy given as text (the bundled defaults).
pub fn compile_policy_text(
    name: &str,
    text: &str,
    engine: EngineKind,
    color: bool,
) -> Result<CompiledPolicy, CliError> {
    let checked = load::Checked::from_text(name, text);
    report(&checked, false, color);
    compile_checked(checked.into_policy().map_err(|_| CliError::reported(FAILED))?, engine, color)
}
