//! `gpolc explain`: replay one of a policy's tests and show every turn of every
//! scheduling cycle as it was decided — the order of queues, the admit rules, the quota
//! arithmetic, the first filter that turns each node away, every score, the victim
//! search, where the job went — and what each cycle did.

use super::{CliError, OK};
use gpol_compiler::engine::EngineKind;
use gpol_runtime::explain::{describe_event, render, state_text};
use gpol_runtime::scenario::{Moment, run_with};
use gpol_runtime::{Event, Scheduler};
use std::collections::HashSet;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
    /// The name of one of the policy's tests (a scenario).
    scenario: String,
}

pub fn run(args: Args, color: bool) -> Result<u8, CliError> {
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
            for (j, job) in s.jobs().with_ids().filter(|(_, j)| j.is_pending() && !tried.contains(j.name.as_str())) {
                out.push_str(&format!("job {}: {} (no turn of its own)\n", job.name, state_text(s, j)));
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

/// One `-> …` line per event that says something.
fn event_lines(s: &Scheduler, events: &[Event], out: &mut String) {
    for line in events.iter().filter_map(|ev| describe_event(s, ev)) {
        out.push_str(&format!("-> {line}\n"));
    }
}
