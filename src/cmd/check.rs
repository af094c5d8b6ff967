//! `gpolc check`: report errors and warnings in policies.

use super::{CliError, FAILED, OK, collect_files};
use gpol_compiler::cost::{self, RuleCost};
use gpol_compiler::diag::{Code, Diagnostic, render};
use gpol_compiler::load;
use gpol_compiler::source::SourceMap;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Files or directories (searched for *.gpol).
    #[arg(required_unless_present = "explain")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    deny_warnings: bool,
    /// Also print each rule's worst-case cost per evaluation (operations, loops counted at
    /// their lists' limits), on standard output.
    #[arg(long)]
    costs: bool,
    /// Show at most this many diagnostics of each code, then one line for the rest
    /// (0: all). JSON output always has them all.
    #[arg(long, value_name = "N", default_value_t = gpol_compiler::limits::MAX_DIAGNOSTICS_PER_CODE)]
    max_diagnostics: usize,
    /// Print the long explanation of a diagnostic code, e.g. E0007.
    #[arg(long, value_name = "CODE")]
    explain: Option<String>,
    /// Also say, for a scheduler the policy is compiled for, which rules it enforces
    /// itself and which it cannot (`slurm`: at submission, in job_submit.lua).
    #[arg(long, value_enum)]
    target: Option<Target>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Target {
    Slurm,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Human,
    Json,
    Github,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    if let Some(code) = &args.explain {
        let Some(c) = Code::parse(code) else {
            return Err(CliError::usage(format!(
                "no diagnostic code `{code}`; codes are E0001–E{:04} and W0001–W{:04}",
                errors(),
                warnings()
            )));
        };
        super::print(&format!("{c}: {}\n\n{}\n", c.title(), c.explanation()));
        return Ok(OK);
    }
    let files = collect_files(&args.paths)?;
    let mut all: Vec<(SourceMap, Vec<Diagnostic>)> = Vec::new();
    let mut costs: Vec<(&PathBuf, Vec<RuleCost>)> = Vec::new();
    let mut proofs: Vec<(&PathBuf, String)> = Vec::new();
    let mut targets: Vec<(&PathBuf, String)> = Vec::new();
    for path in &files {
        match load::Checked::from_file(path) {
            Ok(mut checked) => {
                // Rules nothing proves safe: look for a cycle to show.
                gpol_runtime::eviction_search::check(&mut checked);
                // What the analyses found, as the pipeline carries it: the IR, its costs
                // and the proof of evictions (unproved policies carry W0009 already).
                if let Some(analysed) = checked.analysed.take() {
                    if let Some(argument) = &analysed.evictions {
                        proofs.push((path, argument.describe()));
                    }
                    if let (Some(Target::Slurm), Some(policy)) = (args.target, &checked.policy) {
                        let view = gpol_slurm::lua::Policy { program: &analysed.program, hir: policy };
                        targets.push((path, slurm_summary(&gpol_slurm::submit::rules(view, false))));
                    }
                    if args.costs {
                        costs.push((path, analysed.costs));
                    }
                }
                all.push((checked.sources, checked.diagnostics));
            }
            Err(e) => return Err(CliError::usage(e)),
        }
    }
    let (mut n_err, mut n_warn) = (0, 0);
    let mut json = Vec::new();
    let mut shown = render::PerCode::new(args.max_diagnostics);
    for (sources, diags) in &all {
        let mut human = render::Human::new(sources, color);
        for d in diags {
            if d.is_error() {
                n_err += 1;
            } else {
                n_warn += 1;
            }
            match args.format {
                Format::Json => json.push(render::json(sources, d)),
                _ if !shown.admit(d.code) => {}
                Format::Human => eprint!("{}", human.render(d)),
                Format::Github => super::print(&format!("{}\n", render::github(sources, d))),
            }
        }
    }
    if args.format == Format::Human {
        eprint!("{}", shown.summary());
        for (path, argument) in &proofs {
            eprintln!("note: {}: evictions cannot cycle: {argument}", path.display());
        }
        for (path, summary) in &targets {
            eprint!("note: {}: {summary}", path.display());
        }
    }
    match args.format {
        Format::Json => {
            let mut out = serde_json::json!({
                "version": 1,
                "files": files.len(),
                "errors": n_err,
                "warnings": n_warn,
                "diagnostics": json,
            });
            if args.costs {
                out["costs"] = costs_json(&costs);
            }
            super::print(&format!("{}\n", serde_json::to_string_pretty(&out).unwrap_or_default()));
        }
        Format::Human | Format::Github if args.costs => super::print(&costs_table(&costs)),
        _ => {}
    }
    match args.format {
        Format::Human => {
            let files_word = if files.len() == 1 { "file" } else { "files" };
            if n_err + n_warn == 0 {
                eprintln!("checked {} {files_word}: no problems", files.len());
            } else {
                eprintln!("checked {} {files_word}: {n_err} error(s), {n_warn} warning(s)", files.len());
            }
        }
        Format::Github | Format::Json => {}
    }
    Ok(if n_err > 0 || (args.deny_warnings && n_warn > 0) { FAILED } else { OK })
}

fn errors() -> usize {
    Code::ALL.iter().filter(|c| !c.is_warning()).count()
}

fn warnings() -> usize {
    Code::ALL.iter().filter(|c| c.is_warning()).count()
}

/// Each file's rules and their worst-case costs, aligned, the dearest loops named.
fn costs_table(costs: &[(&PathBuf, Vec<RuleCost>)]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for (path, rules) in costs {
        let _ = writeln!(out, "{}", path.display());
        let width = rules.iter().map(|r| r.name.chars().count()).max().unwrap_or(0);
        for r in rules {
            let name = gpol_compiler::terminal::escape(&r.name);
            let _ = write!(out, "  {name:<width$}  {:>9} ops", cost::display(r.ops));
            if !r.loops.is_empty() {
                let loops: Vec<String> = r.loops.iter().map(|l| format!("{} ({})", l.over, l.max_len)).collect();
                let _ = write!(out, "  loops: {}", loops.join(" × "));
            }
            if r.over_budget() {
                out.push_str("  over budget");
            }
            out.push('\n');
        }
    }
    out
}

fn costs_json(costs: &[(&PathBuf, Vec<RuleCost>)]) -> serde_json::Value {
    let files = costs.iter().map(|(path, rules)| {
        let rules: Vec<_> = rules
            .iter()
            .map(|r| {
                let loops: Vec<_> =
                    r.loops.iter().map(|l| serde_json::json!({"over": l.over, "max_len": l.max_len})).collect();
                serde_json::json!({"rule": r.name, "ops": r.ops, "over_budget": r.over_budget(), "loops": loops})
            })
            .collect();
        serde_json::json!({"file": path.display().to_string(), "rules": rules})
    });
    serde_json::Value::Array(files.collect())
}

/// What Slurm enforces of a policy at submission, and what it cannot, in words.
fn slurm_summary(rules: &[gpol_slurm::submit::Compiled]) -> String {
    let enforced: Vec<String> =
        rules.iter().filter(|r| r.condition.is_ok()).map(|r| format!("{} {}", r.kind, r.name)).collect();
    let mut out = format!(
        "slurm enforces {} rule(s) at submission{}\n",
        enforced.len(),
        if enforced.is_empty() { String::new() } else { format!(" ({})", enforced.join(", ")) }
    );
    for r in rules {
        if let Err(why) = &r.condition {
            out.push_str(&format!("  not at submission: {} {}: {}\n", r.kind, r.name, why.0));
        }
    }
    out
}
