//! The mutation suite: every example policy mutated at every applicable point
//! (`mutate`). A mutant changes behaviour when an independent judge — the simulator
//! replaying generated workloads on both versions — sees a decision diverge, or when
//! `gpolc diff` shows a counterexample (each is confirmed by the interpreter, and replayed
//! here). `gpolc diff` with its defaults must report at least 95% of the mutants that
//! change behaviour, and nothing for rewrites that keep it.
//!
//! CI plays a fixed sample (every policy, a few mutants each); `GPOL_MUTANTS=all` plays
//! every mutant and adds a long search (another seed, three times the budget) to the judge:
//! docs/diff.md records that run.

mod mutate;

use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use gpol_diff::report::Report;
use gpol_diff::side::Side;
use gpol_diff::{Budget, Options};
use gpol_sim::generate::{GenSpec, Profile, QueueMix, generate};

const POLICIES: [&str; 15] = [
    "best_fit.gpol",
    "borrowing.gpol",
    "dot_product.gpol",
    "fair_share.gpol",
    "fgd.gpol",
    "gangs.gpol",
    "gpu_clustering.gpol",
    "gpu_packing.gpol",
    "gpu_sharing.gpol",
    "kai.gpol",
    "kueue_classic.gpol",
    "pack_spread.gpol",
    "preemption.gpol",
    "random.gpol",
    "slurm_multifactor.gpol",
];

/// Mutants per policy in the CI sample.
const SAMPLE: usize = 3;

/// An example policy without its `test` blocks (they name rules, and do not decide).
fn example(name: &str) -> String {
    let path = format!("{}/../policies/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    mutate::without_tests(&text)
}

fn all() -> bool {
    std::env::var("GPOL_MUTANTS").is_ok_and(|v| v == "all")
}

/// Whether replaying generated workloads shows the versions deciding differently.
fn replay_diverges(old: &Side, new: &Side) -> bool {
    let dir = format!("{}/../samples", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(format!("{dir}/cluster.toml")).expect("the bundled cluster");
    let cluster = gpol_sim::read_cluster(&text, "cluster.toml").expect("a cluster");
    let policy = old.policy();
    let leaves: Vec<Option<String>> = match policy.has_implicit_queue() {
        true => vec![None],
        false => policy.queues.iter().filter(|q| q.children.is_empty()).map(|q| Some(q.name.clone())).collect(),
    };
    let profiles = [Profile::Training, Profile::Inference, Profile::Research, Profile::Notebook, Profile::Batch];
    let queues = leaves
        .into_iter()
        .enumerate()
        .map(|(i, name)| QueueMix { name, profile: profiles[i % profiles.len()], share: 1.0 })
        .collect();
    let spec = GenSpec { jobs: 300, seed: 5, gpus: 128, load: 1.2, node_gpus: 8, queues };
    let workload = gpol_sim::Workload::from_jobs("generated", generate(&spec));
    let mut report = gpol_diff::diff(old, new, &options(1, Budget::Cases(1)));
    for mode in [gpol_sim::Mode::Timed, gpol_sim::Mode::Fill { target: 1.3 }] {
        if gpol_diff::add_replay(&mut report, old, new, &cluster, &workload, mode).is_err() {
            return false;
        }
    }
    report.replay.iter().any(|r| r.first_divergence.is_some())
}

/// The sampled run (CI) plays the small-cluster domain's first tier; the full run all of it.
fn options(seed: u64, budget: Budget) -> Options {
    let bound = if all() { gpol_diff::DEFAULT_BOUND } else { 10_000 };
    Options { seed, budget, bound }
}

fn changed(r: &Report) -> bool {
    r.decisions.iter().any(|d| d.verdict.is_different())
}

/// Every counterexample passes on NEW and fails (or does not check) on OLD.
fn replays(r: &Report, old: &str, new: &str) -> Result<(), String> {
    for d in &r.decisions {
        for c in &d.counterexamples {
            let name = c.test.lines().next().and_then(|l| l.split('"').nth(1)).unwrap_or_default();
            let outcome = |policy: &str| {
                let source = format!("{policy}\n\n{}\n", c.test);
                let p = Checked::from_text("t.gpol", &source).compile(EngineKind::Interp).ok()?;
                let t = p.policy.tests.iter().find(|t| t.name == name)?;
                Some(gpol_runtime::scenario::run(&p, t))
            };
            if !outcome(new).is_some_and(|o| o.passed()) {
                return Err(format!("fails on new:\n{}", c.test));
            }
            if outcome(old).is_some_and(|o| o.passed()) {
                return Err(format!("passes on old:\n{}", c.test));
            }
        }
    }
    Ok(())
}

#[test]
fn mutants_that_change_behaviour_are_found() {
    let (mut changing, mut found, mut missed) = (0usize, 0usize, Vec::new());
    for policy in POLICIES {
        let text = example(policy);
        let old = Side::from_text(policy, &text).expect("the example checks");
        let mutants: Vec<(mutate::Mutant, Side)> = mutate::mutants(&text)
            .into_iter()
            .filter(|m| m.text != text)
            .filter_map(|m| Side::from_text(policy, &m.text).ok().map(|s| (m, s)))
            .collect();
        assert!(!mutants.is_empty(), "{policy}: no mutant checks");
        let stride = if all() { 1 } else { mutants.len().div_ceil(SAMPLE) };
        for (m, new) in mutants.iter().step_by(stride) {
            let r = gpol_diff::diff(&old, new, &options(1, Budget::Cases(gpol_diff::DEFAULT_CASES)));
            if let Err(e) = replays(&r, &text, &m.text) {
                panic!("{policy}, {}: {e}", m.label);
            }
            let long = || {
                let more = options(99, Budget::Cases(3 * gpol_diff::DEFAULT_CASES));
                all() && changed(&gpol_diff::diff(&old, new, &more))
            };
            let reported = changed(&r);
            if reported || replay_diverges(&old, new) || long() {
                changing += 1;
                if reported {
                    found += 1;
                } else {
                    missed.push(format!("{policy}: {}", m.label));
                }
            }
        }
    }
    eprintln!("mutants that change behaviour: {changing}; reported by gpolc diff: {found}; missed: {missed:#?}");
    assert!(changing >= 20, "only {changing} mutants change behaviour: the sample is too small to judge");
    assert!(found * 100 >= changing * 95, "gpolc diff reported {found} of {changing}; missed {missed:#?}");
}

#[test]
fn rewrites_that_keep_behaviour_report_no_change() {
    let mut rewrites = 0;
    for policy in POLICIES {
        let text = example(policy);
        let old = Side::from_text(policy, &text).expect("the example checks");
        for m in mutate::rewrites(&text) {
            let new = Side::from_text(policy, &m.text).unwrap_or_else(|e| panic!("{policy}, {}: {e}", m.label));
            let r = gpol_diff::diff(&old, &new, &options(1, Budget::Cases(300)));
            assert_eq!(
                r.exit_code(),
                gpol_diff::report::SAME,
                "{policy}, {}:\n{}",
                m.label,
                gpol_diff::render::human(&r)
            );
            rewrites += 1;
        }
    }
    assert!(rewrites >= 30, "only {rewrites} rewrites");
}
