//! The bounded search for eviction cycles: the ping-pong policies are caught with a
//! scenario that, pasted into the policy, passes as a test; a strict priority order is
//! not; a strict `>` turned into `>=` is; borrowers that take from each other are, in
//! scenarios sized to their guarantees.

use gpol_compiler::load::Checked;
use gpol_runtime::eviction_search::{Found, search};

const TREE: &str = "policy cycles\n\nqueue org {\n  queue a {}\n  queue b {}\n}\n\n";
/// Both queues guarantee four cards: nodes of one or two never take them past that.
const GUARANTEED: &str =
    "policy cycles\n\nqueue org {\n  queue a { guarantee 4 gpu }\n  queue b { guarantee 4 gpu }\n}\n\n";

fn found(rules: &str) -> Found {
    found_under(TREE, rules)
}

fn found_under(tree: &str, rules: &str) -> Found {
    let policy = Checked::from_text("cycles.gpol", &format!("{tree}{rules}\n")).into_policy().expect("checks").policy;
    search(&policy)
}

/// The policy with the scenario pasted in checks and its test passes in both engines.
fn passes_as_pasted(rules: &str, test: &str) {
    passes_as_pasted_under(TREE, rules, test);
}

fn passes_as_pasted_under(tree: &str, rules: &str, test: &str) {
    let text = format!("{tree}{rules}\n\n{test}\n");
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
    assert!(matches!(found(strict), Found::Nothing { scenarios, sized: 0 } if scenarios > 1000));
    match found(&strict.replace('>', ">=")) {
        Found::Cycle(test) => passes_as_pasted(&strict.replace('>', ">="), &test),
        other => panic!("`>=` lets equal priorities swap: {other:?}"),
    }
}

#[test]
fn borrowers_taking_from_each_other_show_only_beyond_the_guarantees() {
    let rules = "borrow any { when true }";
    match found_under(GUARANTEED, rules) {
        Found::Cycle(test) => {
            passes_as_pasted_under(GUARANTEED, rules, &test);
            // Shrunk: three jobs are enough.
            assert_eq!(test.matches("submit j").count(), 3, "{test}");
            assert!(!test.contains("node n1 { cards 1 }") && !test.contains("node n1 { cards 2 }"), "{test}");
        }
        other => panic!("{rules}: {other:?}"),
    }
    // A strict order under the same tree: the sized scenarios find nothing either.
    let strict = "borrow p { when claimant.priority > victim.priority }";
    assert!(matches!(found_under(GUARANTEED, strict), Found::Nothing { sized: 3000, .. }));
}
