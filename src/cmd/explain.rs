//! `gpolc explain`: replay one of a policy's tests and show, before every scheduling
//! cycle, why each waiting job goes where it goes or waits — the first filter that turns
//! each node away, every score, the quota arithmetic — and then what the cycle did.

use super::{OK, USAGE};
use gpol_compiler::engine::EngineKind;
use gpol_runtime::explain::{describe_event, explain};
use gpol_runtime::scenario::{Moment, run_with};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The policy file.
    policy: PathBuf,
    /// The name of one of the policy's tests (a scenario).
    scenario: String,
}

pub fn run(args: Args, color: bool) -> u8 {
    let checked = match super::check_policy(&args.policy, false, color) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let tests = &checked.policy.tests;
    let Some(test) = tests.iter().find(|t| t.name == args.scenario).cloned() else {
        let names: Vec<String> = tests.iter().map(|t| format!("\"{}\"", t.name)).collect();
        eprintln!("error: the policy has no test named \"{}\"; its tests are {}", args.scenario, names.join(", "));
        return USAGE;
    };
    // Explain re-runs rules in the interpreter (D10); the cycle itself runs the same way.
    let compiled = match super::compile_checked(checked, EngineKind::Interp, color) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut out = String::new();
    let mut seen = 0;
    run_with(&compiled, &test, |moment, s| match moment {
        Moment::BeforeCycle => {
            out.push_str(&format!("== cycle at {}s\n", s.now_ms() as f64 / 1000.0));
            for j in (0..s.jobs().len()).filter(|&j| s.job(j).is_pending()) {
                out.push_str(&explain(s, j));
            }
        }
        Moment::AfterCycle => {
            for line in s.log()[seen..].iter().filter_map(|ev| describe_event(s, ev)) {
                out.push_str(&format!("-> {line}\n"));
            }
            seen = s.log().len();
        }
    });
    super::print(&out);
    OK
}
