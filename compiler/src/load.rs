//! The one way in: a policy from a file or from text, through the whole pipeline — read,
//! parsed and checked ([`check`]), lowered once and analysed ([`analyse`]: size, costs,
//! eviction cycles), then compiled for an engine ([`engine`]) from the IR the analyses
//! made. The command line, the simulator, the adapters, tests and benches all load
//! policies here, so they all see the same diagnostics for the same input.

use crate::analyse::{self, Analysed};
use crate::check;
use crate::diag::{self, Code, Diagnostic, render};
use crate::engine::{self, CompiledPolicy, EngineKind};
use crate::hir;
use crate::source::{FileId, SourceFile, SourceMap, Span};
use std::path::Path;
use std::sync::Arc;

/// A policy read, checked and analysed: every diagnostic, the sources they point into,
/// and, when there is no error, the checked policy and what the analyses found (its IR
/// among it). `policy` and `analysed` are both present or both absent.
pub struct Checked {
    pub sources: SourceMap,
    pub file: FileId,
    pub diagnostics: Vec<Diagnostic>,
    pub policy: Option<hir::Policy>,
    pub analysed: Option<Analysed>,
}

/// A policy that checked, with the sources its spans point into and what the analyses
/// found (its IR among it).
pub struct CheckedPolicy {
    pub sources: SourceMap,
    pub file: FileId,
    pub policy: hir::Policy,
    pub analysed: Analysed,
}

/// A policy that did not check or compile: its errors, with the sources they point into.
/// `Display` renders them as `gpolc check` does, without colour.
pub struct Failed {
    pub sources: SourceMap,
    pub diagnostics: Vec<Diagnostic>,
}

/// Why a policy file could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The file could not be read.
    File(crate::files::FileError),
    /// It was read, but does not check or compile.
    Failed(Failed),
}

impl Checked {
    /// Reads and checks a policy file. A file that is not UTF-8 is checked no further:
    /// its one diagnostic says where the bad byte is.
    pub fn from_file(path: &Path) -> Result<Checked, LoadError> {
        let bytes = crate::files::read(path, crate::limits::MAX_POLICY_BYTES).map_err(LoadError::File)?;
        Ok(Checked::from_bytes(&path.display().to_string(), bytes))
    }

    /// Checks a policy file's contents, already read; `name` is what diagnostics call
    /// the file.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Checked {
        let mut sources = SourceMap::new();
        let (file, bad) = sources.add_bytes(name, bytes);
        match bad {
            Some(d) => Checked { sources, file, diagnostics: vec![d], policy: None, analysed: None },
            None => Checked::from_sources(sources, file),
        }
    }

    /// Checks a policy given as text; `name` is what diagnostics call the file.
    pub fn from_text(name: &str, text: &str) -> Checked {
        let mut sources = SourceMap::new();
        let file = sources.add(SourceFile::new(name, text));
        Checked::from_sources(sources, file)
    }

    /// Checks and analyses file `file` of `sources` (library modules it imports are
    /// added).
    pub fn from_sources(mut sources: SourceMap, file: FileId) -> Checked {
        let front = on_big_stack(&mut sources, file);
        let (policy, analysed) = front.passed.unzip();
        Checked { sources, file, diagnostics: front.diagnostics, policy, analysed }
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The checked policy, or the errors that stop it.
    pub fn into_policy(self) -> Result<CheckedPolicy, Failed> {
        match (self.policy, self.analysed) {
            (Some(policy), Some(analysed)) => {
                Ok(CheckedPolicy { sources: self.sources, file: self.file, policy, analysed })
            }
            (policy, analysed) => {
                if policy.is_some() || analysed.is_some() {
                    crate::never!("a checked policy without its analyses, or analyses without a policy");
                }
                let errors = self.diagnostics.into_iter().filter(Diagnostic::is_error).collect();
                Err(Failed { sources: self.sources, diagnostics: errors })
            }
        }
    }

    /// Compiles the checked policy for `engine`.
    pub fn compile(self, engine: EngineKind) -> Result<CompiledPolicy, Failed> {
        self.into_policy()?.compile(engine)
    }
}

impl CheckedPolicy {
    /// Compiles the policy for `engine`, from the IR the analyses made.
    pub fn compile(self, engine: EngineKind) -> Result<CompiledPolicy, Failed> {
        let CheckedPolicy { sources, policy, analysed, .. } = self;
        engine::compile_lowered(Arc::new(policy), analysed.program, engine)
            .map_err(|d| Failed { sources, diagnostics: vec![d] })
    }
}

/// Reads, checks and compiles a policy file.
pub fn compile_file(path: &Path, engine: EngineKind) -> Result<CompiledPolicy, LoadError> {
    Checked::from_file(path)?.compile(engine).map_err(LoadError::Failed)
}

/// Checks and compiles a policy given as text.
pub fn compile_text(name: &str, text: &str, engine: EngineKind) -> Result<CompiledPolicy, Failed> {
    Checked::from_text(name, text).compile(engine)
}

/// What the stages before the engines give: every diagnostic, and the policy with what
/// the analyses found when nothing stops it.
struct Front {
    diagnostics: Vec<Diagnostic>,
    passed: Option<(hir::Policy, Analysed)>,
}

/// Checks, then lowers and analyses a policy that checked clean: nothing is lowered or
/// costed after a syntax or type error.
fn front(sources: &mut SourceMap, file: FileId) -> Front {
    let checked = check::check(sources, file);
    let mut diagnostics = checked.diagnostics;
    let Some(policy) = checked.policy else { return Front { diagnostics, passed: None } };
    match analyse::analyse(&policy) {
        Ok(analysed) => {
            // After the checker's, where W0009 has always been reported.
            diagnostics.extend(analyse::warnings(&policy, &analysed));
            Front { diagnostics, passed: Some((policy, analysed)) }
        }
        Err(errors) => {
            // In source order among the checker's (all warnings, as it found no error).
            diagnostics.extend(errors);
            diag::sort(&mut diagnostics);
            Front { diagnostics, passed: None }
        }
    }
}

/// Checks and analyses on a thread with a generous stack: nesting is bounded by the
/// parser, but the margin keeps even pathological input far from the limit, in the
/// checker and in lowering alike.
fn on_big_stack(sources: &mut SourceMap, file: FileId) -> Front {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new().stack_size(64 << 20).spawn_scoped(s, || front(sources, file));
        match handle.map(|h| h.join()) {
            Ok(Ok(front)) => front,
            _ => Front {
                passed: None,
                diagnostics: vec![
                    Diagnostic::new(Code::Syntax, Span::new(file, 0, 0), "internal error while checking")
                        .help("this is a bug in gpolc; please report it with the file"),
                ],
            },
        }
    })
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut human = render::Human::new(&self.sources, false);
        for d in &self.diagnostics {
            f.write_str(&human.render(d))?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the policy does not check:\n{self}")
    }
}

impl std::error::Error for Failed {}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::File(e) => e.fmt(f),
            LoadError::Failed(failed) => failed.fmt(f),
        }
    }
}

impl std::error::Error for LoadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_checks_compiles_in_both_engines() {
        for engine in [EngineKind::Jit, EngineKind::Interp] {
            let p = compile_text("ok.gpol", "policy ok\n\nqueue team {}\n", engine).expect("compiles");
            assert_eq!(p.policy.name, "ok");
        }
    }

    #[test]
    fn errors_render_with_file_and_code() {
        let failed = compile_text("bad.gpol", "policy bad\n\nfilter f { node.gpu_mem > 40 }\n", EngineKind::Jit)
            .expect_err("does not check");
        assert!(failed.diagnostics.iter().all(Diagnostic::is_error));
        let text = failed.to_string();
        assert!(text.contains("bad.gpol:3") && text.contains("E0009"), "{text}");
    }

    #[test]
    fn missing_and_non_utf8_files_are_errors() {
        let missing = compile_file(Path::new("/nonexistent/p.gpol"), EngineKind::Interp).expect_err("missing");
        assert!(matches!(missing, LoadError::File(_)), "{missing}");
        let dir = std::env::temp_dir().join(format!("gpol-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("latin1.gpol");
        std::fs::write(&path, b"policy p\n# caf\xe9\n").expect("write");
        let checked = Checked::from_file(&path).expect("readable");
        assert_eq!(checked.diagnostics.len(), 1);
        assert_eq!(checked.diagnostics[0].code, Code::InvalidUtf8);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
