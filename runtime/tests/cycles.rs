//! The bounded search for eviction cycles: the ping-pong policies are caught with a
//! scenario that, pasted into the policy, passes as a test; a strict priority order is
//! not; a strict `>` turned into `>=` is.

use gpol_compiler::load::Checked;
use gpol_runtime::cycles::{Found, search};

const TREE: &str = "policy cycles\n\nqueue org {\n  queue a {}\n  queue b {}\n}\n\n";

fn found(rules: &str) -> Found {
    let policy = Checked::from_text("cycles.gpol", &format!("{TREE}{rules}\n")).into_policy().expect("checks").policy;
    search(&policy)
}

/// The policy with the scenario pasted in checks and its test passes in both engines.
fn passes_as_pasted(rules: &str, test: &str) {
    let text = format!("{TREE}{rules}\n\n{test}\n");
    let policy = Checked::from_text("pasted.gpol", &text).into_policy().expect("the pasted test checks").policy;
    for kind in [gpol_compiler::engine::EngineKind::Interp, gpol_compiler::engine::EngineKind::Jit] {
        let compiled = gpol_compiler::engine::compile(policy.clone(), kind).expect("compiles");
        for outcome in gpol_runtime::scenario::run_all(&compiled) {
            assert!(outcome.failures.is_empty() && outcome.error.is_none(), "{kind:?}: {text}\n{:?}", outcome.failures);
        }
    }
}

#[test]
fn the_ping_pong_policies_are_caught_with_a_scenario() {
    for rules in [
        "preempt other_queue { when claimant.queue != victim.queue and victim.runtime >= 1m }",
        "preempt anything { when true }",
    ] {
        match found(rules) {
            Found::Cycle(test) => passes_as_pasted(rules, &test),
            other => panic!("{rules}: {other:?}"),
        }
    }
}

#[test]
fn a_strict_order_has_no_cycle_and_its_mutation_does() {
    let strict = "preempt p { when claimant.priority > victim.priority }";
    assert!(matches!(found(strict), Found::Nothing { scenarios } if scenarios > 1000));
    match found(&strict.replace('>', ">=")) {
        Found::Cycle(test) => passes_as_pasted(&strict.replace('>', ">="), &test),
        other => panic!("`>=` lets equal priorities swap: {other:?}"),
    }
}
