//! Compiling a policy from text: the compiled policy as C holds it, with the names C
//! asks for made once, and its diagnostics as data.

use crate::error::{Failure, c_string};
use crate::types::{GpolDiagnostic, GpolRuleKind, GpolSeverity, GpolStatus};
use gpol_compiler::diag::{Diagnostic, Severity, render};
use gpol_compiler::engine::{self, CompiledPolicy, EngineKind};
use gpol_compiler::load::Checked;
use gpol_compiler::source::SourceMap;
use std::ffi::{CStr, CString};

/// A compiled policy (opaque to C): immutable once made, so any number of threads may
/// use one at once. Clusters hold their own reference to the compiled policy, so a policy
/// may be freed while clusters made from it live on.
#[derive(Debug)]
pub struct GpolPolicy {
    pub compiled: CompiledPolicy,
    name: CString,
    /// Rule names and reasons per `GpolRuleKind`, in declaration order.
    rules: [Vec<(CString, Option<CString>)>; 4],
    levels: Vec<CString>,
}

impl GpolPolicy {
    pub fn new(compiled: CompiledPolicy) -> GpolPolicy {
        let program = &compiled.program;
        let names = |rules: &[gpol_compiler::ir::Rule]| {
            rules.iter().map(|r| (c_string(&r.name), r.reason.as_deref().map(c_string))).collect()
        };
        let rules =
            [names(&program.admit), names(&program.filters), names(&program.scores), names(&program.card_scores)];
        let levels = program.levels.iter().map(|l| c_string(l)).collect();
        let name = c_string(&compiled.policy.name);
        GpolPolicy { compiled, name, rules, levels }
    }

    pub fn name(&self) -> &CStr {
        &self.name
    }

    fn kind(&self, kind: u32) -> Option<&[(CString, Option<CString>)]> {
        let k = match kind {
            k if k == GpolRuleKind::Admit as u32 => 0,
            k if k == GpolRuleKind::Filter as u32 => 1,
            k if k == GpolRuleKind::Score as u32 => 2,
            k if k == GpolRuleKind::CardScore as u32 => 3,
            _ => return None,
        };
        self.rules.get(k).map(Vec::as_slice)
    }

    /// How many rules of this kind (0 for a kind that is not a `GpolRuleKind`).
    pub fn rule_count(&self, kind: u32) -> usize {
        self.kind(kind).map_or(0, <[_]>::len)
    }

    pub fn rule_name(&self, kind: u32, index: usize) -> Option<&CStr> {
        self.kind(kind)?.get(index).map(|(n, _)| n.as_c_str())
    }

    pub fn rule_reason(&self, kind: u32, index: usize) -> Option<&CStr> {
        self.kind(kind)?.get(index)?.1.as_deref()
    }

    pub fn levels(&self) -> &[CString] {
        &self.levels
    }
}

/// One diagnostic's strings, owned, and the C record pointing into them.
struct Entry {
    _strings: Vec<CString>,
    record: GpolDiagnostic,
}

/// Every diagnostic of one compilation (opaque to C), errors and warnings in the order
/// the checker found them. Immutable once made.
pub struct GpolDiagnostics {
    entries: Vec<Entry>,
    errors: usize,
}

impl GpolDiagnostics {
    pub fn new(sources: &SourceMap, diagnostics: &[Diagnostic]) -> GpolDiagnostics {
        let mut human = render::Human::new(sources, false);
        let entries = diagnostics
            .iter()
            .map(|d| {
                let span = d.primary.span;
                let file = sources.iter().find(|(id, _)| *id == span.file).map(|(_, f)| f);
                let at = |offset: u32| file.map_or((0, 0), |f| f.line_col(offset as usize));
                let ((line, column), (end_line, end_column)) = (at(span.start), at(span.end));
                let strings = vec![
                    c_string(d.code.as_str()),
                    c_string(file.map_or("", |f| f.name.as_str())),
                    c_string(&d.message),
                    c_string(&human.render(d)),
                ];
                let help = d.help.as_deref().map(c_string);
                let record = GpolDiagnostic {
                    code: strings[0].as_ptr(),
                    severity: match d.severity {
                        Severity::Error => GpolSeverity::Error,
                        Severity::Warning => GpolSeverity::Warning,
                    },
                    file: strings[1].as_ptr(),
                    line: u32::try_from(line).unwrap_or(u32::MAX),
                    column: u32::try_from(column).unwrap_or(u32::MAX),
                    end_line: u32::try_from(end_line).unwrap_or(u32::MAX),
                    end_column: u32::try_from(end_column).unwrap_or(u32::MAX),
                    message: strings[2].as_ptr(),
                    help: help.as_ref().map_or(std::ptr::null(), |h| h.as_ptr()),
                    rendered: strings[3].as_ptr(),
                };
                // The record points into the strings' heap buffers, which stay where they
                // are while the `CString`s live (moving a `CString` does not move them).
                let mut strings = strings;
                strings.extend(help);
                Entry { _strings: strings, record }
            })
            .collect();
        GpolDiagnostics { entries, errors: diagnostics.iter().filter(|d| d.is_error()).count() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn errors(&self) -> usize {
        self.errors
    }

    pub fn get(&self, i: usize) -> Option<&GpolDiagnostic> {
        self.entries.get(i).map(|e| &e.record)
    }
}

/// Checks and compiles a policy's text (`name` is what diagnostics call the file): the
/// compiled policy when it has no error, and every diagnostic either way.
pub fn compile(name: &str, text: Vec<u8>, engine: EngineKind) -> (Result<GpolPolicy, Failure>, GpolDiagnostics) {
    // The way every consumer loads a policy (`load::Checked`), the stages kept apart only
    // so that the warnings of a policy that compiles are returned too.
    let Checked { sources, mut diagnostics, policy, analysed, .. } = Checked::from_bytes(name, text);
    // Lowered once, by the checking pipeline, when it could be.
    let compiled = policy.map(|policy| match analysed {
        Some(a) => engine::compile_lowered(std::sync::Arc::new(policy), a.program, engine),
        None => engine::compile(policy, engine),
    });
    let result = match compiled {
        Some(compiled) => match compiled {
            Ok(compiled) => Ok(GpolPolicy::new(compiled)),
            Err(d) => {
                diagnostics.push(d);
                Err(())
            }
        },
        None => Err(()),
    };
    let diags = GpolDiagnostics::new(&sources, &diagnostics);
    let result = result.map_err(|()| {
        let first = diagnostics.iter().find(|d| d.is_error());
        let what = match first {
            Some(d) => {
                format!("the policy does not compile: {} error(s), the first {}: {}", diags.errors, d.code, d.message)
            }
            None => "the policy does not compile".to_string(),
        };
        Failure::new(GpolStatus::CompileError, what)
    });
    (result, diags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_come_back_as_data_with_positions() {
        let text = b"policy bad\n\nfilter f { node.gpu_mem > 40 }\n".to_vec();
        let (result, diags) = compile("bad.gpol", text, EngineKind::Interp);
        let failure = result.expect_err("does not compile");
        assert_eq!(failure.status, GpolStatus::CompileError);
        assert!(diags.errors() >= 1);
        let d = diags.get(0).expect("one diagnostic");
        assert_eq!(d.severity, GpolSeverity::Error);
        assert_eq!(d.line, 3);
        assert!(d.column > 1);
    }

    #[test]
    fn rule_names_by_kind_and_index() {
        let text = b"policy p\n\nadmit small { job.cpu <= 8 cpu }\nfilter a { true }\nfilter b \"why\" { true }\n";
        let (result, diags) = compile("p.gpol", text.to_vec(), EngineKind::Interp);
        let p = result.expect("compiles");
        assert_eq!(diags.errors(), 0);
        assert_eq!(p.rule_count(GpolRuleKind::Filter as u32), 2);
        assert_eq!(p.rule_name(GpolRuleKind::Filter as u32, 1).unwrap().to_str().unwrap(), "b");
        assert_eq!(p.rule_reason(GpolRuleKind::Filter as u32, 1).unwrap().to_str().unwrap(), "why");
        assert!(p.rule_reason(GpolRuleKind::Filter as u32, 0).is_none());
        assert_eq!(p.rule_name(GpolRuleKind::Admit as u32, 0).unwrap().to_str().unwrap(), "small");
        assert!(p.rule_name(GpolRuleKind::Admit as u32, 1).is_none());
        assert_eq!(p.rule_count(99), 0);
        assert_eq!(p.name().to_str().unwrap(), "p");
    }
}
