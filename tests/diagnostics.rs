//! Snapshot tests of rendered diagnostics: every file in tests/diagnostics/ is a small
//! invalid policy; its snapshot records the source and what `gpolc check` reports
//! (colour off). Together the files exercise every diagnostic code.

use gpol_compiler::diag::{Code, Diagnostic, render};
use gpol_compiler::load::Checked;
use gpol_compiler::source::SourceMap;
use std::collections::BTreeSet;
use std::path::Path;

/// What checking a file's bytes reports, as `gpolc check` does (invalid UTF-8 included).
fn checked(name: String, bytes: Vec<u8>) -> (SourceMap, Vec<Diagnostic>) {
    let mut sources = SourceMap::new();
    let (id, bad) = sources.add_bytes(name, bytes);
    match bad {
        Some(d) => (sources, vec![d]),
        None => {
            // As `gpolc check` does: rules nothing proves safe are searched for a cycle.
            let mut checked = Checked::from_sources(sources, id);
            gpol_runtime::eviction_search::check(&mut checked);
            (checked.sources, checked.diagnostics)
        }
    }
}

fn report(path: &Path) -> (String, Vec<Code>) {
    let bytes = std::fs::read(path).expect("the corpus file is readable");
    let name = format!("tests/diagnostics/{}", path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
    let (sources, diagnostics) = checked(name, bytes);
    let text: String = diagnostics.iter().map(|d| render::human(&sources, d, false)).collect();
    (text, diagnostics.iter().map(|d| d.code).collect())
}

#[test]
fn rendered_diagnostics() {
    insta::glob!("diagnostics/*.gpol", |path| {
        let (text, codes) = report(path);
        assert!(!codes.is_empty(), "{} produces no diagnostics", path.display());
        let source = String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
        insta::with_settings!({ description => source, omit_expression => true }, {
            insta::assert_snapshot!(text);
        });
    });
}

#[test]
fn every_code_is_exercised() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diagnostics");
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.map(|e| e.path()).unwrap_or_default();
        if path.extension().is_some_and(|x| x == "gpol") {
            seen.extend(report(&path).1);
        }
    }
    // E0040 reports a bug in the code generator; no policy can provoke it on purpose.
    // E0044 and W0010 are `gpolc build --target kueue`'s, not `gpolc check`'s: tests/cli.rs
    // and kubernetes/tests/kueue.rs exercise them.
    let internal = [Code::Backend, Code::KueueInvalid, Code::KueueUnenforced];
    let missing: Vec<&str> =
        Code::ALL.iter().filter(|c| !seen.contains(c) && !internal.contains(c)).map(|c| c.as_str()).collect();
    assert!(missing.is_empty(), "no file in tests/diagnostics/ exercises {missing:?}");
}

#[test]
fn every_code_is_documented() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/diagnostics.md")).unwrap_or_default();
    for c in Code::ALL {
        assert!(doc.contains(&format!("## {}:", c.as_str())), "docs/diagnostics.md does not list {c}");
    }
}

#[test]
fn every_diagnostic_has_a_help_line() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/diagnostics");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.map(|e| e.path()).unwrap_or_default();
        if path.extension().is_none_or(|x| x != "gpol") {
            continue;
        }
        let (_, diagnostics) = checked("f.gpol".into(), std::fs::read(&path).unwrap_or_default());
        for d in diagnostics {
            assert!(d.help.is_some(), "{}: {} `{}` has no help", path.display(), d.code, d.message);
            assert!(!d.primary.message.is_empty(), "{}: {} has no primary label text", path.display(), d.code);
        }
    }
}
