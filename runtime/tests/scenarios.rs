//! Known answers written as `.gpol` tests (tests/scenarios/) and the example policies'
//! tests, run by the runtime in both engines: every expectation holds, and the JIT and
//! the interpreter produce the same schedule, event for event.

mod support;

use gpol_compiler::engine::{EngineKind, compile};
use gpol_compiler::hir;
use gpol_compiler::load::Checked;
use gpol_compiler::source::SourceMap;
use gpol_runtime::Event;
use gpol_runtime::scenario;
use std::path::{Path, PathBuf};

fn files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("the scenario folder is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gpol"))
        .collect();
    v.sort();
    v
}

fn policy(path: &Path) -> (hir::Policy, SourceMap) {
    let checked = Checked::from_file(path).expect("the policy is readable").into_policy().expect("the policy checks");
    (checked.policy, checked.sources)
}

fn run_dir(dir: &str) -> usize {
    let mut ran = 0;
    for path in files(dir) {
        let (p, sources) = policy(&path);
        for kind in [EngineKind::Jit, EngineKind::Interp] {
            let compiled = compile(p.clone(), kind).expect("the policy compiles");
            for test in &compiled.policy.tests {
                if kind == EngineKind::Jit {
                    scenario::engines_agree(&compiled, test).expect("the engines agree");
                }
                let outcome = scenario::run(&compiled, test);
                let failures: Vec<String> = outcome
                    .failures
                    .iter()
                    .map(|f| {
                        let (line, _) = sources.get(f.span.file).line_col(f.span.start as usize);
                        format!("line {line}: expected {}, but {}\n{}", f.expected, f.actual, f.explain)
                    })
                    .collect();
                assert!(
                    outcome.passed(),
                    "{} :: {} ({kind:?}): {:?}\n{}",
                    path.display(),
                    test.name,
                    outcome.error,
                    failures.join("\n")
                );
                ran += 1;
            }
        }
    }
    ran
}

#[test]
fn known_answers() {
    assert!(run_dir("tests/scenarios") >= 12);
}

#[test]
fn example_policies() {
    assert!(run_dir("../policies") >= 12);
}

/// An eviction records its rule, its claimant and the work lost: the victim's GPUs times
/// the time since its last checkpoint (8 cards × 10 minutes here).
#[test]
fn evictions_record_rule_claimant_and_lost_work() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/preemption.gpol");
    let (p, _) = policy(&path);
    let test = p.tests.iter().find(|t| t.name.starts_with("a serving job evicts")).cloned();
    let test = test.expect("the test is there");
    let compiled = compile(p, EngineKind::Jit).expect("the policy compiles");
    let played = scenario::run_with(&compiled, &test, |_, _| {});
    let (outcome, s) = (&played.outcome, &played.scheduler);
    assert!(outcome.passed(), "{outcome:?}");
    let evictions: Vec<(String, String, String, f64)> = played
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Evicted { job, by, rule, lost_gpu_s, .. } => {
                let rule = s.policy().program.rule_name(*rule);
                Some((s.job(*job).ask.name.clone(), s.job(*by).ask.name.clone(), rule, *lost_gpu_s))
            }
            _ => None,
        })
        .collect();
    assert_eq!(evictions, vec![("s1".into(), "web".into(), "by_priority".into(), 8.0 * 600.0)]);
}

/// A failed `expect J on N` shows the trace of the decision that placed the job, not the
/// decision it would take now that it holds cards: "running on a" with "→ started on a".
#[test]
fn a_failure_shows_the_trace_of_the_decision_that_placed_the_job() {
    let text = "policy trace\n\nqueue team {}\n\nscore emptiest { node.free_gpu / 1 gpu }\n\n\
                test \"goes to the emptiest\" {\n  node a { cards 4 }\n  node b { cards 3 }\n  \
                submit j { queue team; cards 2 }\n  expect j on b\n}\n";
    let compiled = gpol_compiler::load::compile_text("trace.gpol", text, EngineKind::Jit).expect("compiles");
    let outcome = scenario::run(&compiled, &compiled.policy.tests[0]);
    let failure = outcome.failures.first().expect("the expectation fails: j goes to a");
    assert_eq!(failure.actual, "running on a");
    assert!(failure.explain.starts_with("decided as follows when it started:"), "{}", failure.explain);
    assert!(failure.explain.contains("→ started on a"), "{}", failure.explain);
    assert!(!failure.explain.contains("→ would go to b"), "{}", failure.explain);
}

/// Two jobs started in one cycle: the second's account is what its turn saw — the first
/// already on the node it would have taken, the queue's GPUs counted — not a snapshot
/// from before the cycle.
#[test]
fn a_recorded_turn_sees_the_starts_before_it_in_the_same_cycle() {
    use gpol_runtime::account::{NodeSaw, Outcome};
    let policy =
        "policy two\n\nuse std.pack\n\nqueue team { limit 16 gpu }\n\nscore fit { std.pack.best_fit(job, node) }\n";
    let mut s = support::scheduler(policy, &[support::h100("n1"), support::h100("n2")]);
    s.submit(support::cards("a", 6)).expect("valid");
    let b = s.submit(support::cards("b", 5)).expect("valid");
    // Before the cycle, b would take n1 and the queue holds nothing.
    let before = gpol_runtime::account::account(&s, b);
    assert_eq!(before.outcome, Outcome::WouldPlace { nodes: vec!["n1".into()] });
    assert_eq!(before.quota[0].allocated, before.quota[0].borrowed);
    let (decided, turns) = s.cycle_recorded();
    assert_eq!(gpol_runtime::starts(&decided), 2);
    let names: Vec<&str> = turns.iter().map(|t| t.job.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let seen = &turns[1];
    assert_eq!(seen.outcome, Outcome::Placed { nodes: vec!["n2".into()] });
    assert!(matches!(seen.nodes[0].verdict, NodeSaw::Passes { fits: false, .. }), "{:?}", seen.nodes[0]);
    assert!(matches!(seen.nodes[1].verdict, NodeSaw::Passes { fits: true, .. }), "{:?}", seen.nodes[1]);
    let team = &seen.quota[0];
    assert_eq!((team.queue.as_str(), team.allocated.as_str()), ("team", "6"), "{team:?}");
    assert_ne!(team.allocated, before.quota[0].allocated);
    // In words, as `gpolc explain` shows it.
    let text = gpol_runtime::explain::render(seen);
    assert!(text.contains("→ started on n2") && text.contains("quota team gpu: allocated 6"), "{text}");
}
