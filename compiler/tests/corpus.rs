//! Every shipped policy and library module checks clean, with no warnings, and is
//! formatted canonically. docs/schema.md is the schema table, generated.

use gpol_compiler::analyse::analyse;
use gpol_compiler::check::check;
use gpol_compiler::source::{SourceFile, SourceMap};
use std::path::{Path, PathBuf};

fn gpol_files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the folder is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gpol"))
        .collect();
    files.sort();
    files
}

fn assert_clean(path: &Path) {
    let text = std::fs::read_to_string(path).expect("the file is readable");
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new(path.display().to_string(), text.clone()));
    let mut checked = check(&mut sources, id);
    // Within the size and cost budgets as well, which the analyses hold it to.
    if let Some(policy) = &checked.policy
        && let Err(errors) = analyse(policy)
    {
        checked.diagnostics.extend(errors);
    }
    let rendered: String =
        checked.diagnostics.iter().map(|d| gpol_compiler::diag::render::human(&sources, d, false)).collect();
    assert!(checked.diagnostics.is_empty(), "{} has diagnostics:\n{rendered}", path.display());
    let formatted = gpol_compiler::fmt::format_source(id, &text).expect("it compiles");
    assert_eq!(formatted, text, "{} is not formatted canonically (run `gpolc fmt`)", path.display());
}

#[test]
fn example_policies_check_clean() {
    let files = gpol_files("policies");
    assert!(!files.is_empty());
    for f in files {
        assert_clean(&f);
    }
}

#[test]
fn stdlib_checks_clean() {
    // That each file is a module of the library, embedded, is the stdlib module's test.
    let files = gpol_files("stdlib");
    assert!(!files.is_empty());
    for f in files {
        assert_clean(&f);
    }
}

#[test]
fn schema_doc() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema.md");
    let generated = gpol_compiler::schema::markdown();
    if std::env::var_os("GPOL_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(on_disk, generated, "docs/schema.md is stale: run GPOL_BLESS=1 cargo test -p gpol-compiler schema_doc");
}

#[test]
fn diagnostics_doc() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/diagnostics.md");
    let generated = gpol_compiler::diag::markdown();
    if std::env::var_os("GPOL_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        on_disk, generated,
        "docs/diagnostics.md is stale: run GPOL_BLESS=1 cargo test -p gpol-compiler diagnostics_doc"
    );
}

/// Code blocks of docs/language.md that start with `policy` or `module` are complete
/// files: they must check clean and be formatted canonically, so the reference cannot
/// drift from the language.
#[test]
fn language_reference_examples_check_clean() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/language.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let mut examples = 0;
    for (i, block) in doc.split("```gpol\n").skip(1).enumerate() {
        let code = block.split("```").next().unwrap_or_default();
        if !(code.starts_with("policy ") || code.starts_with("module ")) {
            continue;
        }
        examples += 1;
        let dir = std::env::temp_dir().join(format!("gpol-doc-{}-{i}.gpol", std::process::id()));
        std::fs::write(&dir, code).unwrap();
        assert_clean(&dir);
        let _ = std::fs::remove_file(&dir);
    }
    assert!(examples >= 5, "docs/language.md has only {examples} complete examples");
}
