//! The one way in: a policy from a file or from text, read, checked and compiled. The
//! command line, the simulator, the adapters, tests and benches all load policies here,
//! so they all see the same diagnostics for the same input.

use crate::check;
use crate::diag::{Code, Diagnostic, render};
use crate::engine::{self, CompiledPolicy, EngineKind};
use crate::hir;
use crate::source::{FileId, SourceFile, SourceMap, Span};
use std::path::Path;

/// A policy read and checked: every diagnostic, the sources they point into, and the
/// checked policy when there is no error.
pub struct Checked {
    pub sources: SourceMap,
    pub file: FileId,
    pub diagnostics: Vec<Diagnostic>,
    pub policy: Option<hir::Policy>,
}

/// A policy that checked, with the sources its spans point into.
pub struct CheckedPolicy {
    pub sources: SourceMap,
    pub file: FileId,
    pub policy: hir::Policy,
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
            Some(d) => Checked { sources, file, diagnostics: vec![d], policy: None },
            None => Checked::from_sources(sources, file),
        }
    }

    /// Checks a policy given as text; `name` is what diagnostics call the file.
    pub fn from_text(name: &str, text: &str) -> Checked {
        let mut sources = SourceMap::new();
        let file = sources.add(SourceFile::new(name, text));
        Checked::from_sources(sources, file)
    }

    /// Checks file `file` of `sources` (library modules it imports are added).
    pub fn from_sources(mut sources: SourceMap, file: FileId) -> Checked {
        let mut checked = on_big_stack(&mut sources, file);
        // Eviction rules with no proof that they cannot cycle: W0009.
        if let Some(policy) = &checked.policy
            && !policy.victims.is_empty()
            && let Ok(program) = crate::lower::lower(policy)
            && crate::cycles::prove(policy, &program).is_none()
        {
            checked.diagnostics.push(crate::cycles::not_proved(policy));
        }
        Checked { sources, file, diagnostics: checked.diagnostics, policy: checked.policy }
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The checked policy, or the errors that stop it.
    pub fn into_policy(self) -> Result<CheckedPolicy, Failed> {
        match self.policy {
            Some(policy) => Ok(CheckedPolicy { sources: self.sources, file: self.file, policy }),
            None => {
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
    /// Compiles the policy for `engine`.
    pub fn compile(self, engine: EngineKind) -> Result<CompiledPolicy, Failed> {
        let CheckedPolicy { sources, policy, .. } = self;
        engine::compile(policy, engine).map_err(|d| Failed { sources, diagnostics: vec![d] })
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

/// Checks on a thread with a generous stack: nesting is bounded by the parser, but the
/// margin keeps even pathological input far from the limit.
fn on_big_stack(sources: &mut SourceMap, file: FileId) -> check::Checked {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new().stack_size(64 << 20).spawn_scoped(s, || check::check(sources, file));
        match handle.map(|h| h.join()) {
            Ok(Ok(checked)) => checked,
            _ => check::Checked {
                policy: None,
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
