pub mod bench;
pub mod build;
pub mod check;
pub mod explain;
pub mod fmt;
pub mod gen_trace;
pub mod ir;
pub mod sim;
pub mod test;

use gpol_compiler::diag::{Diagnostic, render};
use gpol_compiler::engine::{CompiledPolicy, EngineKind};
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

/// Writes to standard output; a reader that went away (`| head`) is not an error.
pub fn print(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// The `.gpol` files named by the arguments: files as given, directories searched
/// recursively, in sorted order.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out).map_err(|e| format!("{}: {e}", p.display()))?;
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    entries.sort();
    for e in entries {
        if e.is_dir() {
            walk(&e, out)?;
        } else if e.extension().is_some_and(|x| x == "gpol") {
            out.push(e);
        }
    }
    Ok(())
}

/// Reads a source file into a new source map, for commands that do not check it (`fmt`).
/// Invalid UTF-8 becomes a diagnostic.
pub fn read_source(path: &Path) -> Result<(SourceMap, gpol_compiler::source::FileId, Option<Diagnostic>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut sources = SourceMap::new();
    let (id, bad) = sources.add_bytes(path.display().to_string(), bytes);
    Ok((sources, id, bad))
}

/// Writes through a temporary file in the same directory and renames it into place, so
/// an interrupted run never leaves a half-written file. A file that already exists keeps
/// its permissions.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::metadata(path) {
        tmp.as_file().set_permissions(meta.permissions())?;
    } else {
        // A temporary file is private; the new file gets the usual permissions.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
        }
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
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

/// Lowers a checked policy to IR, printing the error of one too large to lower.
pub fn lower(checked: &CheckedPolicy, color: bool) -> Result<gpol_compiler::ir::Program, u8> {
    gpol_compiler::lower::lower(&checked.policy).map_err(|e| {
        eprint!("{}", render::human(&checked.sources, &e.diagnostic(&checked.policy), color));
        FAILED
    })
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

/// [`compile_policy`] for a policy given as text (the bundled defaults).
pub fn compile_policy_text(name: &str, text: &str, engine: EngineKind, color: bool) -> Result<CompiledPolicy, u8> {
    let checked = load::Checked::from_text(name, text);
    report(&checked, false, color);
    compile_checked(checked.into_policy().map_err(|_| FAILED)?, engine, color)
}
