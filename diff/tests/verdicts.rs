//! Known differences and known equivalences between versions of the example policies:
//! each verdict, its direction, and that every counterexample shown replays as a test
//! that passes on NEW and fails on OLD.

use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use gpol_diff::report::{Decision, Direction, Report, Verdict};
use gpol_diff::side::Side;
use gpol_diff::{Budget, Options, diff, render};

fn example(name: &str) -> String {
    let path = format!("{}/../policies/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn side(label: &str, text: &str) -> Side {
    Side::from_text(label, text).unwrap_or_else(|e| panic!("{e}"))
}

/// `text` with `from` replaced by `to`, which must occur.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "`{from}` is not in the policy");
    text.replacen(from, to, 1)
}

/// Cases of the small-cluster domain in these tests: its first tier, and a little of the
/// second (the test of queue weights asks for more).
const BOUND: u64 = 10_000;

fn run(old: &str, new: &str, seed: u64, cases: u64) -> Report {
    let options = Options { seed, budget: Budget::Cases(cases), bound: BOUND };
    diff(&side("old.gpol", old), &side("new.gpol", new), &options)
}

fn verdict(r: &Report, d: Decision) -> &Verdict {
    &r.decisions.iter().find(|x| x.decision == d).expect("every decision is reported").verdict
}

/// Every counterexample, appended to each version, passes on NEW and fails on OLD (or
/// does not check there, naming a rule only NEW has).
fn replays(r: &Report, old: &str, new: &str) {
    for d in &r.decisions {
        for c in &d.counterexamples {
            let name = c.test.lines().next().and_then(|l| l.split('"').nth(1)).expect("a named test");
            let outcome = |policy: &str| {
                let source = format!("{policy}\n\n{}\n", c.test);
                let p = Checked::from_text("t.gpol", &source).compile(EngineKind::Interp).ok()?;
                let t = p.policy.tests.iter().find(|t| t.name == name)?;
                Some(gpol_runtime::scenario::run(&p, t))
            };
            assert!(outcome(new).is_some_and(|o| o.passed()), "fails on new:\n{}", c.test);
            let on_old = outcome(old);
            assert!(on_old.is_none_or(|o| o.error.is_none() && !o.passed()), "passes on old:\n{}", c.test);
        }
    }
}

#[test]
fn a_boundary_mutant_is_found_on_every_seed() {
    let old = example("preemption.gpol");
    let new = edit(&old, "victim.priority >= min_gap", "victim.priority > min_gap");
    for seed in 1..=4 {
        let r = run(&old, &new, seed, 1500);
        assert_eq!(
            verdict(&r, Decision::VictimEligibility),
            &Verdict::Different { direction: Direction::Less },
            "seed {seed}"
        );
        assert_eq!(r.exit_code(), gpol_diff::report::CHANGED);
        replays(&r, &old, &new);
    }
}

#[test]
fn a_stricter_admit_rule_admits_less() {
    let old = "policy p\nqueue team {}\nadmit size { job.total_gpus <= 8 gpu }\n";
    let new = "policy p\nqueue team {}\nadmit size { job.total_gpus <= 4 gpu }\n";
    let r = run(old, new, 7, 800);
    assert_eq!(verdict(&r, Decision::Admission), &Verdict::Different { direction: Direction::Less });
    let c = &r.decisions[0].counterexamples[0];
    assert_eq!(c.old_rules[0].label, "admit size");
    assert!(c.new_expectations.iter().any(|e| e.contains("rejected because size")), "{:?}", c.new_expectations);
    replays(&r, old, new);
    // And the other way round: more.
    let back = run(new, old, 7, 800);
    assert_eq!(verdict(&back, Decision::Admission), &Verdict::Different { direction: Direction::More });
}

#[test]
fn a_changed_score_weight_reorders_nodes() {
    let old = example("pack_spread.gpol");
    let new = edit(&old, "score spread_serving weight 2", "score spread_serving weight 1");
    let r = run(&old, &new, 1, 2000);
    assert_eq!(verdict(&r, Decision::Ranking), &Verdict::Different { direction: Direction::Changed });
    assert!(matches!(verdict(&r, Decision::Feasibility), Verdict::Proved { .. }));
    replays(&r, &old, &new);
}

#[test]
fn a_weight_that_never_changes_an_order_is_no_change() {
    // pack_batch is zero for serving work and alone for the rest: scaling it reorders nothing.
    let old = example("pack_spread.gpol");
    let new = edit(&old, "score pack_batch weight 2", "score pack_batch weight 5");
    let r = run(&old, &new, 1, 1500);
    assert_eq!(r.exit_code(), gpol_diff::report::SAME, "{:#?}", r.decisions);
    // Every pair of nodes of the grid, for every job of it, agrees.
    assert!(
        matches!(verdict(&r, Decision::Ranking), Verdict::UpToBound { cases, domain } if *cases > 1000 && domain.contains("jobs ×")),
        "{:?}",
        verdict(&r, Decision::Ranking)
    );
}

#[test]
fn a_changed_lend_limit_changes_quota_admission() {
    let old = example("borrowing.gpol");
    let new = edit(&old, "lend_limit 8 gpu", "lend_limit 12 gpu");
    let r = run(&old, &new, 1, 2500);
    assert!(verdict(&r, Decision::Quota).is_different(), "{:#?}", verdict(&r, Decision::Quota));
    let c = &r.decisions.iter().find(|d| d.decision == Decision::Quota).expect("quota").counterexamples[0];
    assert!(c.new_rules.iter().any(|x| x.label == "queue inference"), "{:?}", c.new_rules);
    replays(&r, &old, &new);
}

#[test]
fn a_night_window_on_a_lend_limit_is_found_at_night() {
    let old = example("borrowing.gpol");
    let new = edit(&old, "lend_limit 8 gpu", "lend_limit 8 gpu\n    lend_limit 12 gpu from 22:00 to 07:00 on sat");
    let r = run(&old, &new, 1, 2500);
    assert!(verdict(&r, Decision::Quota).is_different(), "{:#?}", verdict(&r, Decision::Quota));
    let c = &r.decisions.iter().find(|d| d.decision == Decision::Quota).expect("quota").counterexamples[0];
    // Saturday 22:00 is 5 days and 22 hours after a test's clock 0, Monday 00:00.
    assert!(c.test.contains("advance 5d") || c.test.contains("advance 478800"), "{}", c.test);
    replays(&r, &old, &new);
}

#[test]
fn renames_reformatting_and_rewrites_are_no_change() {
    let old = example("preemption.gpol");
    let rewrites = [
        edit(&old, "preempt by_priority", "preempt outranks"),
        edit(&old, "and victim.preemptible", "and (not victim.preemptible implies false)"),
        edit(&old, "const min_gap = 100", "const min_gap = 50 + 50"),
        edit(
            &old,
            "victim.evictions < victim.queue.attr.max_evictions",
            "victim.queue.attr.max_evictions > victim.evictions",
        ),
    ];
    for new in rewrites {
        let r = run(&old, &new, 1, 50);
        assert_eq!(r.exit_code(), gpol_diff::report::SAME, "{new}\n{:#?}", r.decisions);
        assert!(r.decisions.iter().all(|d| matches!(d.verdict, Verdict::Proved { .. })), "{:#?}", r.decisions);
        assert_eq!(r.cases, 0, "nothing left to search");
    }
    let renamed = run(&old, &edit(&old, "preempt by_priority", "preempt outranks"), 1, 50);
    assert_eq!(renamed.renames.len(), 1);
    assert_eq!((renamed.renames[0].old.as_str(), renamed.renames[0].new.as_str()), ("by_priority", "outranks"));
}

#[test]
fn membership_and_equalities_are_one_rule() {
    let old = "policy p\nqueue team {}\nfilter models { node.gpu_model in [\"h100\", \"a100\"] }\n";
    let new = "policy p\nqueue team {}\nfilter models { node.gpu_model == \"a100\" or node.gpu_model == \"h100\" }\n";
    let r = run(old, new, 1, 50);
    assert!(matches!(verdict(&r, Decision::Feasibility), Verdict::Proved { .. }));
}

#[test]
fn a_changed_job_order_is_found() {
    let old = example("preemption.gpol");
    let new = edit(&old, "min(job.waiting / 1h * 10, 90)", "min(job.waiting / 1h * 10, 200)");
    let r = run(&old, &new, 3, 3000);
    assert!(verdict(&r, Decision::JobOrder).is_different(), "{:#?}", r.decisions);
    replays(&r, &old, &new);
}

#[test]
fn rewritten_thresholds_are_proved_by_decision_regions() {
    let old = "policy p\nqueue team {}\nadmit size { job.total_gpus <= 8 gpu and not job.bursty }\nfilter big { node.cards >= 4 gpu or node.gpu_model == \"h100\" }\n";
    let new = "policy p\nqueue team {}\nadmit size { not (job.total_gpus > 8 gpu or job.bursty) }\nfilter big { not (node.cards < 4 gpu and node.gpu_model != \"h100\") }\n";
    let r = run(old, new, 1, 100);
    for d in [Decision::Admission, Decision::Feasibility] {
        match verdict(&r, d) {
            Verdict::Proved { reason } => assert!(reason.starts_with("decision regions"), "{reason}"),
            other => panic!("{d:?}: {other:?}"),
        }
    }
}

#[test]
fn a_threshold_moved_between_whole_gpus_is_found_at_a_fraction() {
    // `< 9` admits 8.5 GPUs (ten replicas of 0.85), `<= 8` does not.
    let old = "policy p\nqueue team {}\nadmit size { job.total_gpus <= 8 gpu }\n";
    let new = "policy p\nqueue team {}\nadmit size { job.total_gpus < 9 gpu }\n";
    let r = run(old, new, 1, 200);
    assert_eq!(verdict(&r, Decision::Admission), &Verdict::Different { direction: Direction::More });
    replays(&r, old, new);
}

#[test]
fn splitting_an_admit_rule_changes_the_reason() {
    let old = "policy p\nqueue team {}\nadmit size { job.total_gpus <= 8 gpu and not job.bursty }\n";
    let new = "policy p\nqueue team {}\nadmit size { job.total_gpus <= 8 gpu }\nadmit calm { not job.bursty }\n";
    let r = run(old, new, 1, 300);
    assert_eq!(verdict(&r, Decision::Admission), &Verdict::Different { direction: Direction::Changed });
    let c = &r.decisions[0].counterexamples[0];
    assert!(c.new_expectations.iter().any(|e| e.ends_with("because calm")), "{c:?}");
    replays(&r, old, new);
}

fn bundled() -> (gpol_sim::cluster_file::ClusterSpec, gpol_sim::Workload) {
    let dir = format!("{}/../samples", env!("CARGO_MANIFEST_DIR"));
    let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).expect("the bundled inputs");
    let cluster = gpol_sim::read_cluster(&read("cluster.toml"), "cluster.toml").expect("a cluster");
    let trace = gpol_sim::read_trace(&read("trace.csv"), "trace.csv").expect("a trace");
    (cluster, trace)
}

#[test]
fn a_replayed_trace_shows_where_a_quota_change_first_bites() {
    let (cluster, trace) = bundled();
    let old = example("borrowing.gpol");
    let new = edit(&old, "lend_limit 8 gpu", "lend_limit 12 gpu");
    let mut r = run(&old, &new, 1, 100);
    let (a, b) = (side("old.gpol", &old), side("new.gpol", &new));
    gpol_diff::add_replay(&mut r, &a, &b, &cluster, &trace, gpol_sim::Mode::Timed).expect("replays");
    let x = &r.replay[0];
    let d = x.first_divergence.as_ref().expect("the versions diverge");
    assert_ne!(d.old, d.new);
    assert!(x.ordered_differently > 0 && x.queues.len() == 3, "{x:?}");
    // A version against itself, renamed: every decision the same.
    let renamed = edit(&old, "reclaim take_back", "reclaim reclaim_guarantee");
    let mut same = run(&old, &renamed, 1, 10);
    let c = side("renamed.gpol", &renamed);
    gpol_diff::add_replay(&mut same, &a, &c, &cluster, &trace, gpol_sim::Mode::Timed).expect("replays");
    assert_eq!(same.replay[0].first_divergence, None);
    assert!(same.replay[0].queues.iter().all(|q| q.mean_gpus.old == q.mean_gpus.new));
    assert_eq!(same.exit_code(), gpol_diff::report::SAME);
}

#[test]
fn a_renamed_function_is_reported_as_a_rename() {
    let old = example("pack_spread.gpol");
    let new = old.replace("is_serving", "serves");
    let r = run(&old, &new, 1, 50);
    assert_eq!(r.exit_code(), gpol_diff::report::SAME);
    let fns: Vec<(&str, &str)> =
        r.renames.iter().filter(|x| x.kind == "fn").map(|x| (x.old.as_str(), x.new.as_str())).collect();
    assert_eq!(fns, [("is_serving", "serves")]);
}

#[test]
fn a_changed_card_score_changes_the_card_and_nothing_else() {
    let old = example("gpu_sharing.gpol");
    let new = edit(&old, "else 1 - card.free / 1 gpu", "else card.free / 1 gpu");
    let r = run(&old, &new, 1, 1500);
    assert!(verdict(&r, Decision::CardChoice).is_different(), "{:#?}", r.decisions);
    let shown: Vec<Decision> =
        r.decisions.iter().filter(|d| !d.counterexamples.is_empty()).map(|d| d.decision).collect();
    assert_eq!(shown, [Decision::CardChoice]);
    let c = &r.decisions.iter().find(|d| d.decision == Decision::CardChoice).expect("card choice").counterexamples[0];
    assert!(c.new_expectations.iter().all(|e| e.contains("cards_list")), "{c:?}");
    replays(&r, &old, &new);
}

#[test]
fn proofs_never_ignore_the_declarations_a_decision_reads() {
    let proved = |r: &Report, d: Decision| matches!(verdict(r, d), Verdict::Proved { .. });
    // A priority class's value decides admission through `job.priority`.
    let old = "policy p\nqueue team {}\npriority_class high = 100\nadmit urgent { job.priority >= 80 }\n";
    let new = edit(old, "high = 100", "high = 50");
    let r = run(old, &new, 1, 600);
    assert!(!proved(&r, Decision::Admission), "{:#?}", verdict(&r, Decision::Admission));
    assert!(verdict(&r, Decision::Admission).is_different(), "{:#?}", verdict(&r, Decision::Admission));
    replays(&r, old, &new);
    // A dropped `has(label)` rule: an absent label is not there.
    let old = "policy p\nqueue team {}\nadmit needs_team { has(job.labels[\"team\"]) }\nadmit small { job.total_gpus <= 8 gpu }\n";
    let new = "policy p\nqueue team {}\nadmit small { job.total_gpus <= 8 gpu }\n";
    let r = run(old, new, 1, 600);
    assert!(verdict(&r, Decision::Admission).is_different(), "{:#?}", verdict(&r, Decision::Admission));
    // Guarantees decide which running jobs are within them, and how many replicas a gang gets.
    let old = example("kueue_classic.gpol");
    let new = edit(&old, "queue a { guarantee 4 gpu }", "queue a { guarantee 3 gpu }");
    let r = run(&old, &new, 1, 50);
    for d in [Decision::VictimEligibility, Decision::Gang, Decision::Quota, Decision::QueueOrder] {
        assert!(!proved(&r, d), "{d:?} proved");
    }
}

#[test]
fn a_queue_weight_shows_in_a_cluster_of_several_nodes() {
    // Experiments' weight doubled: where serving holds twice what experiments does, the
    // two queues' shares now tie (broken by declaration: serving) and where they held
    // the same, experiments now goes first. The one-node tier never shows it (a waiting
    // pair there leaves at most one job running); the clusters of several nodes do.
    let old = example("preemption.gpol");
    let new = edit(&old, "queue experiments { weight 1;", "queue experiments { weight 2;");
    let options = Options { seed: 1, budget: Budget::Cases(1), bound: 30_000 };
    let r = diff(&side("old.gpol", &old), &side("new.gpol", &new), &options);
    assert!(matches!(verdict(&r, Decision::QueueOrder), Verdict::Different { .. }), "{}", render::human(&r));
    let shown = &r.decisions.iter().find(|d| d.decision == Decision::QueueOrder).expect("reported").counterexamples;
    assert!(shown[0].test.matches("node ").count() >= 2, "{}", shown[0].test);
    replays(&r, &old, &new);
    // The domain is stated, with what it cut to fit the bound.
    let Verdict::UpToBound { domain, .. } = verdict(&r, Decision::VictimSet) else { panic!("{}", render::human(&r)) };
    assert!(domain.contains("one to three nodes") && domain.contains("cut to the bound"), "{domain}");
}

/// Whether z3 is installed; tests of the optional SMT back end say so where it is not.
fn solver() -> bool {
    let ok = gpol_diff::smt::available();
    if !ok {
        gpol_testing::missing_tool("z3, the SMT back end", "apt-get install z3");
    }
    ok
}

fn reason(r: &Report, d: Decision) -> String {
    match verdict(r, d) {
        Verdict::Proved { reason } => reason.clone(),
        v => panic!("{d:?} is {v:?}:\n{}", render::human(r)),
    }
}

#[test]
fn comparisons_of_two_fields_are_proved_or_shown_by_the_solver() {
    if !solver() {
        return;
    }
    // Rules that only compare (a maximum, a default): z3's combinations prove them.
    let old = "policy t\n\nadmit patient \"waits no longer than it runs\" {\n  max(job.waiting, 1h) <= job.expected_duration ?? 2h\n}\n";
    let split = edit(
        old,
        "max(job.waiting, 1h) <= job.expected_duration ?? 2h",
        "job.waiting <= job.expected_duration ?? 2h and 1h <= job.expected_duration ?? 2h",
    );
    let r = run(old, &split, 1, 100);
    assert!(reason(&r, Decision::Admission).starts_with("z3:"), "{}", render::human(&r));
    // Made strict: a point z3 finds becomes a confirmed counterexample.
    let strict = edit(&split, "job.waiting <=", "job.waiting <");
    let r = run(old, &strict, 1, 300);
    assert!(
        matches!(verdict(&r, Decision::Admission), Verdict::Different { direction: Direction::Less }),
        "{}",
        render::human(&r)
    );
    replays(&r, old, &strict);
    // Arithmetic rounds: `cp - vp >= 100` and `vp + 100 <= cp` agree over the reals but
    // part for doubles (cp near 2^57), so the eviction condition rearranged is equal up
    // to that bound, never proved, and the victim set is not proved from it.
    let old = example("preemption.gpol");
    let new =
        edit(&old, "claimant.priority - victim.priority >= min_gap", "victim.priority + min_gap <= claimant.priority");
    let r = run(&old, &new, 1, 100);
    let Verdict::UpToBound { domain, .. } = verdict(&r, Decision::VictimEligibility) else {
        panic!("{}", render::human(&r))
    };
    assert!(domain.contains("every real value of claimant.priority"), "{domain}");
    assert!(!matches!(verdict(&r, Decision::VictimSet), Verdict::Proved { .. }), "{}", render::human(&r));
    // The gap moved by one: found.
    let new = edit(&old, "const min_gap = 100", "const min_gap = 101");
    let r = run(&old, &new, 1, 2000);
    assert!(matches!(verdict(&r, Decision::VictimEligibility), Verdict::Different { .. }), "{}", render::human(&r));
    replays(&r, &old, &new);
}

#[test]
fn a_victim_set_is_proved_from_eviction_conditions_that_only_compare() {
    if !solver() {
        return;
    }
    // A protection written with a maximum, the comparison turned round: the conditions
    // agree everywhere and nothing else changed, so the victim set is proved too.
    let old = "policy t\n\npreempt by_priority {\n  when claimant.priority > victim.priority and victim.runtime >= 15m\n  cost victim.total_gpus\n}\n";
    let new = edit(
        old,
        "claimant.priority > victim.priority and victim.runtime >= 15m",
        "victim.priority < claimant.priority and max(victim.runtime, 15m) == victim.runtime",
    );
    let r = run(old, &new, 1, 100);
    assert!(reason(&r, Decision::VictimEligibility).starts_with("z3:"), "{}", render::human(&r));
    assert!(reason(&r, Decision::VictimSet).contains("eviction rules' conditions agree"), "{}", render::human(&r));
    assert_eq!(r.exit_code(), gpol_diff::report::SAME);
}
