//! `gpolc test`: run the `test` blocks of policies against the runtime.

use super::{CliError, FAILED, OK, collect_files};
use gpol_compiler::engine::EngineKind;
use gpol_compiler::load;
use gpol_compiler::source::SourceMap;
use gpol_runtime::scenario::{self, Outcome};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Policy files or directories (searched for *.gpol).
    #[arg(default_value = "policies")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Which engine runs the policy.
    #[arg(long, default_value = "jit")]
    engine: EngineKind,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Human,
    Junit,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    let files = collect_files(&args.paths)?;
    let mut report = quick_junit::Report::new("gpolc test");
    let (mut passed, mut failed) = (0, 0);
    let mut human = String::new();
    for path in &files {
        let checked = load::Checked::from_file(path).map_err(CliError::usage)?;
        let mut suite = quick_junit::TestSuite::new(path.display().to_string());
        let (compiled, sources) = match checked.into_policy() {
            Ok(policy) => {
                let sources = policy.sources.clone();
                (policy.compile(args.engine), sources)
            }
            Err(errors) => (Err(errors), SourceMap::new()),
        };
        let compiled = match compiled {
            Ok(c) => c,
            Err(errors) => {
                super::print_diagnostics(&errors.sources, &errors.diagnostics, color);
                human.push_str(&format!("{}: does not check\n", path.display()));
                let mut case = quick_junit::TestCase::new(
                    "check",
                    quick_junit::TestCaseStatus::non_success(quick_junit::NonSuccessKind::Error),
                );
                case.status.set_message("the policy does not check");
                suite.add_test_case(case);
                report.add_test_suite(suite);
                failed += 1;
                continue;
            }
        };
        for outcome in scenario::run_all(&compiled) {
            let name = format!("{} :: {}", path.display(), outcome.name);
            if outcome.passed() {
                passed += 1;
                human.push_str(&format!("test {name} ... ok\n"));
                suite.add_test_case(quick_junit::TestCase::new(
                    outcome.name.clone(),
                    quick_junit::TestCaseStatus::success(),
                ));
            } else {
                failed += 1;
                let text = failure_text(&sources, &outcome);
                human.push_str(&format!("test {name} ... FAILED\n{text}"));
                let mut status = quick_junit::TestCaseStatus::non_success(quick_junit::NonSuccessKind::Failure);
                status.set_message(first_line(&outcome));
                status.set_description(text);
                suite.add_test_case(quick_junit::TestCase::new(outcome.name.clone(), status));
            }
        }
        report.add_test_suite(suite);
    }
    match args.format {
        Format::Human => {
            super::print(&human);
            let verdict = if failed == 0 { "ok" } else { "FAILED" };
            super::print(&format!("\ntest result: {verdict}. {passed} passed; {failed} failed\n"));
        }
        Format::Junit => super::print(&report.to_string().unwrap_or_default()),
    }
    Ok(if failed == 0 { OK } else { FAILED })
}

fn first_line(o: &Outcome) -> String {
    if let Some(e) = &o.error {
        return e.to_string();
    }
    o.failures.first().map_or(String::new(), |f| format!("expected {}, but {}", f.expected, f.actual))
}

fn failure_text(sources: &SourceMap, o: &Outcome) -> String {
    let mut out = String::new();
    if let Some(e) = &o.error {
        out.push_str(&format!("  the scenario cannot be set up: {e}\n"));
    }
    for f in &o.failures {
        let file = sources.get(f.span.file);
        let (line, _) = file.line_col(f.span.start as usize);
        out.push_str(&format!("  {}:{line}: expected {}\n    but {}\n", file.name, f.expected, f.actual));
        for l in f.explain.lines() {
            out.push_str(&format!("    | {l}\n"));
        }
    }
    out
}
