//! One side of a diff: a policy file, or a file as a git revision holds it
//! (`main:policies/prod.gpol`), read, checked and compiled for both engines.

use gpol_compiler::engine::{self, CompiledPolicy, EngineKind};
use gpol_compiler::files;
use gpol_compiler::limits::MAX_POLICY_BYTES;
use gpol_compiler::load::{Checked, Failed};
use gpol_compiler::source::{FileId, SourceMap};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// A policy to compare: where it came from, its text, and the policy compiled for the
/// JIT (the search) and for the reference interpreter (which re-checks counterexamples).
pub struct Side {
    /// The file or `REV:PATH` as given.
    pub label: String,
    pub text: String,
    pub sources: SourceMap,
    pub file: FileId,
    pub jit: CompiledPolicy,
    pub interp: CompiledPolicy,
}

/// Why a side could not be loaded.
#[derive(Debug)]
pub enum SideError {
    /// The file or the revision could not be read.
    Read(String),
    /// It was read but does not check or compile.
    Failed(String, Failed),
}

impl std::fmt::Display for SideError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SideError::Read(why) => f.write_str(why),
            SideError::Failed(label, failed) => write!(f, "{label} does not check:\n{failed}"),
        }
    }
}

impl std::error::Error for SideError {}

impl Side {
    /// Loads `spec`: an existing file, else `REV:PATH` read with `git show` from the
    /// repository of the current directory (`PATH` from the repository's top, or from the
    /// current directory when it starts with `./`).
    pub fn load(spec: &str) -> Result<Side, SideError> {
        Side::load_as(spec, spec)
    }

    /// [`Side::load`], called `label` in reports (a file found from elsewhere, named as
    /// the repository names it).
    pub fn load_as(spec: &str, label: &str) -> Result<Side, SideError> {
        let path = Path::new(spec);
        let text = match spec.split_once(':') {
            Some((rev, file)) if !path.exists() && !rev.is_empty() && !file.is_empty() => git_show(rev, file)?,
            _ => {
                let bytes = files::read(path, MAX_POLICY_BYTES).map_err(|e| SideError::Read(e.to_string()))?;
                String::from_utf8(bytes).map_err(|e| {
                    SideError::Read(format!(
                        "{spec}: not UTF-8 (invalid byte at offset {})",
                        e.utf8_error().valid_up_to()
                    ))
                })?
            }
        };
        Side::from_text(label, &text)
    }

    /// A side from text; `label` is what reports and diagnostics call it.
    pub fn from_text(label: &str, text: &str) -> Result<Side, SideError> {
        let checked = Checked::from_text(label, text).into_policy().map_err(|f| SideError::Failed(label.into(), f))?;
        // Both engines from the one IR the pipeline made, sharing the policy.
        let policy = Arc::new(checked.policy);
        let compile = |kind| {
            engine::compile_lowered(Arc::clone(&policy), Arc::clone(&checked.analysed.program), kind).map_err(|d| {
                let failed = Failed { sources: checked.sources.clone(), diagnostics: vec![d] };
                SideError::Failed(label.into(), failed)
            })
        };
        let (jit, interp) = (compile(EngineKind::Jit)?, compile(EngineKind::Interp)?);
        Ok(Side { label: label.into(), text: text.into(), sources: checked.sources, file: checked.file, jit, interp })
    }

    /// The checked policy.
    pub fn policy(&self) -> &gpol_compiler::hir::Policy {
        &self.interp.policy
    }

    /// The IR both engines run.
    pub fn program(&self) -> &gpol_compiler::ir::Program {
        &self.interp.program
    }
}

/// The text of `file` at revision `rev`, from git.
fn git_show(rev: &str, file: &str) -> Result<String, SideError> {
    // A blob, and within the policy limit, before anything is read of it.
    let object = format!("{rev}:{file}");
    let ask = |what: &str| -> Result<String, SideError> {
        let out = Command::new("git")
            .args(["cat-file", what, &object])
            .output()
            .map_err(|e| SideError::Read(format!("{object}: cannot run git: {e}")))?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            false => Err(SideError::Read(format!("{object}: {}", String::from_utf8_lossy(&out.stderr).trim()))),
        }
    };
    if ask("-t")? != "blob" {
        return Err(SideError::Read(format!("{object}: not a file")));
    }
    if ask("-s")?.parse::<u64>().map_or(true, |n| n > MAX_POLICY_BYTES) {
        return Err(SideError::Read(format!("{object}: larger than {MAX_POLICY_BYTES} bytes")));
    }
    let out = Command::new("git")
        .args(["show", "--no-textconv", "--end-of-options", &format!("{rev}:{file}")])
        .output()
        .map_err(|e| SideError::Read(format!("{rev}:{file}: cannot run git: {e}")))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(SideError::Read(format!("{rev}:{file}: {}", why.trim())));
    }
    if out.stdout.len() as u64 > MAX_POLICY_BYTES {
        return Err(SideError::Read(format!("{rev}:{file}: larger than {MAX_POLICY_BYTES} bytes")));
    }
    String::from_utf8(out.stdout).map_err(|e| {
        SideError::Read(format!("{rev}:{file}: not UTF-8 (invalid byte at offset {})", e.utf8_error().valid_up_to()))
    })
}
