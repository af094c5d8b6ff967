//! `gpolc explain`: replay one of a policy's tests and show every turn of every
//! scheduling cycle as it was decided — the order of queues, the admit rules, the quota
//! arithmetic, the first filter that turns each node away, every score, the victim
//! search, where the job went — and what each cycle did. With `--log`, show a decision
//! an adapter made, from its decision log.

use super::{CliError, OK};
use gpol_compiler::engine::EngineKind;
use gpol_runtime::decision_log::{self, Record};
use gpol_runtime::explain::{describe_event, render, state_text};
use gpol_runtime::scenario::{Moment, run_with};
use gpol_runtime::{Event, Scheduler};
use std::collections::HashSet;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file; with --log, the job: a pod's `namespace/name`, a Slurm job id, or
    /// the job's name.
    #[arg(value_name = "POLICY|JOB")]
    target: PathBuf,
    /// The name of one of the policy's tests (a scenario).
    #[arg(required_unless_present = "log")]
    scenario: Option<String>,
    /// Explain a decision from a decision log (`gpolc serve --decision-log`, `gpolc slurm
    /// run --decision-log`): the latest about the job.
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    log: Option<PathBuf>,
    /// With --log: every decision about the job, oldest first.
    #[arg(long, requires = "log")]
    all: bool,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
    let (scenario, policy) = match (args.scenario, args.log) {
        (_, Some(log)) => return from_log(&log, &args.target.to_string_lossy(), args.all),
        (Some(scenario), None) => (scenario, args.target),
        (None, None) => return Err(CliError::usage("name a test of the policy, or give --log FILE")),
    };
    let args = Scenario { policy, scenario };
    let checked = super::check_policy(&args.policy, false, color)?;
    let tests = &checked.policy.tests;
    let Some(test) = tests.iter().find(|t| t.name == args.scenario).cloned() else {
        let names: Vec<String> = tests.iter().map(|t| format!("\"{}\"", t.name)).collect();
        let names = names.join(", ");
        return Err(CliError::usage(format!(
            "the policy has no test named \"{}\"; its tests are {names}",
            args.scenario
        )));
    };
    // Explain re-runs rules in the interpreter (D10); the cycle itself runs the same way.
    let compiled = super::compile_checked(checked, EngineKind::Interp, color)?;
    let mut out = String::new();
    let played = run_with(&compiled, &test, |moment, s| match moment {
        Moment::BeforeCycle(steps) => {
            event_lines(s, steps, &mut out);
            out.push_str(&format!("== cycle at {}s\n", s.now_ms() as f64 / 1000.0));
        }
        Moment::AfterCycle { turns, decided } => {
            for account in turns {
                out.push_str(&render(account));
            }
            // Waiting jobs without a turn: their class's or queue's head had it.
            let tried: HashSet<&str> = turns.iter().map(|a| a.job.as_str()).collect();
            for (j, job) in s.jobs().with_ids().filter(|(_, j)| j.is_pending() && !tried.contains(j.ask.name.as_str()))
            {
                out.push_str(&format!("job {}: {} (no turn of its own)\n", job.ask.name, state_text(s, j)));
            }
            event_lines(s, decided, &mut out);
        }
    });
    if let Some(error) = played.outcome.error {
        // Said, and the cycles played until then still shown.
        super::show(&CliError::failed(format!("the test stops early: {error}")));
    }
    super::print(&out);
    Ok(OK)
}

/// A test of a policy to replay.
struct Scenario {
    policy: PathBuf,
    scenario: String,
}

/// The latest decision about `job` in the log (or all of them, oldest first), each under
/// a heading that says what made it, when, and from what.
fn from_log(log: &std::path::Path, job: &str, all: bool) -> Result<u8, CliError> {
    let (mut found, mut read) = (Vec::new(), 0u64);
    let scanned = decision_log::read(log, |_, record| {
        read += 1;
        if record.is_about(job) {
            if !all {
                found.clear();
            }
            found.push(record);
        }
    });
    scanned.map_err(CliError::failed)?;
    if found.is_empty() {
        return Err(CliError::failed(format!("{}: no decision about `{job}` among its {read} records", log.display())));
    }
    let mut out = String::new();
    // Names in a log come from pods and Slurm jobs: nothing in them may act on a terminal.
    for record in &found {
        let text = heading(record) + &render(&record.account);
        for line in text.lines() {
            out.push_str(&gpol_compiler::terminal::escape(line));
            out.push('\n');
        }
    }
    super::print(&out);
    Ok(OK)
}

fn heading(r: &Record) -> String {
    let job = if r.job == r.account.job { r.job.clone() } else { format!("{} (job {})", r.job, r.account.job) };
    format!(
        "== {} of {job} at {} by {} {} (policy {}, inputs {})\n",
        r.verb, r.at, r.source, r.version, r.policy, r.inputs
    )
}

/// One `-> …` line per event that says something.
fn event_lines(s: &Scheduler, events: &[Event], out: &mut String) {
    for line in events.iter().filter_map(|ev| describe_event(s, ev)) {
        out.push_str(&format!("-> {line}\n"));
    }
}
