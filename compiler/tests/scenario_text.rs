//! The one job model round-trips through a policy's `test` block: a node or a job written
//! with `NodeSpec::test_props` / `JobSpec::test_props` and checked is the same node or
//! job, for any values — so generated scenarios and counterexamples mean exactly what
//! their specs say.

use gpol_compiler::hir::Step;
use gpol_compiler::load::Checked;
use gpol_compiler::schema::{EnumKind, MIG_PROFILES};
use gpol_compiler::spec::{JobSpec, NodeSpec, Request, Sharing};
use proptest::prelude::*;

const POLICY: &str = "policy roundtrip\n\ntopology rack\n\nqueue org {\n  queue a {}\n  queue b {}\n}\n\n\
                      priority_class low = 1\npriority_class high = 10\n";

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z][a-z0-9_]{0,7}",
        1 => "[ -~]{0,8}",
        1 => Just("quote \" back \\ tab\t".to_string()),
    ]
}

fn mig(name: &str) -> u8 {
    EnumKind::MigProfile.variant(name).expect("a MIG profile")
}

fn node() -> impl Strategy<Value = NodeSpec> {
    let layouts = vec![vec![mig("7g.80gb")], vec![mig("3g.40gb"), mig("3g.40gb")], vec![mig("1g.10gb"); 7]];
    let bytes = prop_oneof![(1u64..200).prop_map(|g| g << 30), 1u64..(1 << 40)];
    (
        text(),
        0u32..17,
        bytes.clone(),
        0usize..4,
        (prop::sample::select(layouts.clone()), any::<bool>()),
        1u32..9,
        0u64..2_000_000,
        bytes,
        prop::option::of(text()),
        prop::collection::btree_map(text(), text(), 0..3).prop_map(|m| m.into_iter().collect::<Vec<_>>()),
    )
        .prop_map(move |(model, cards, card_mem, mode, layout, max_clients, cpu_milli, mem, rack, labels)| {
            let sharing = [Sharing::Exclusive, Sharing::Mig, Sharing::Timeslice, Sharing::Mps][mode];
            NodeSpec {
                name: String::new(),
                model,
                cards,
                card_mem,
                sharing,
                // One layout for every card, or (on two cards or more) one per card.
                mig: match (sharing, layout) {
                    (Sharing::Mig, (_, true)) if cards >= 2 => {
                        (0..cards as usize).map(|i| layouts[i % layouts.len()].clone()).collect()
                    }
                    (Sharing::Mig, (l, _)) => vec![l],
                    _ => Vec::new(),
                },
                max_clients,
                cpu_milli,
                mem,
                domains: rack.map(|r| vec![(0, r)]).unwrap_or_default(),
                labels,
            }
        })
}

fn job() -> impl Strategy<Value = JobSpec> {
    let request = prop_oneof![
        Just(Request::None),
        (1u32..64).prop_map(Request::Whole),
        (1u32..1000).prop_map(Request::Fraction),
        (0..MIG_PROFILES.len()).prop_map(|i| Request::Mig(i as u8)),
    ];
    let bytes = prop_oneof![Just(0u64), (1u64..200).prop_map(|g| g << 30), 1u64..(1 << 40)];
    let flags = (any::<bool>(), any::<bool>(), any::<bool>());
    let times = (prop::option::of(1u64..10_000_000_000), prop::option::of(1u64..100_000_000));
    (
        (
            prop::sample::select(vec!["a", "b"]),
            prop::option::of(text()),
            prop::option::of(prop::sample::select(vec!["low", "high"])),
        ),
        (prop::option::of(-1e6f64..1e6), request, 1u32..9, any::<prop::sample::Index>()),
        (bytes.clone(), 0u64..500_000, bytes, prop::collection::vec(text(), 0..3)),
        (
            flags,
            times,
            0.0f64..=1.0,
            prop::collection::btree_map(text(), text(), 0..3).prop_map(|m| m.into_iter().collect::<Vec<_>>()),
        ),
    )
        .prop_map(
            |(
                (queue, user, class),
                (priority, request, replicas, min),
                (gpu_mem, cpu_milli, mem, models),
                (flags, times, utilization, labels),
            )| {
                let min_replicas = (replicas > 1).then(|| 1 + min.index(replicas as usize) as u32);
                JobSpec {
                    name: String::new(),
                    queue: Some(queue.into()),
                    user,
                    priority_class: class.map(str::to_string),
                    priority,
                    request,
                    replicas,
                    min_replicas,
                    gpu_mem,
                    cpu_milli,
                    mem,
                    models,
                    bursty: flags.0,
                    latency_critical: flags.1,
                    preemptible: flags.2,
                    duration_ms: times.0,
                    checkpoint_every_ms: times.1,
                    utilization,
                    labels,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn specs_written_as_test_props_check_back_to_themselves(
        nodes in prop::collection::vec(node(), 1..4),
        jobs in prop::collection::vec(job(), 1..4),
    ) {
        let levels = vec!["rack".to_string()];
        let mut test = String::from("test \"generated\" {\n");
        for (i, n) in nodes.iter().enumerate() {
            test.push_str(&format!("  node n{i} {{ {} }}\n", n.test_props(&levels)));
        }
        for (i, j) in jobs.iter().enumerate() {
            test.push_str(&format!("  submit j{i} {{ {} }}\n", j.test_props()));
        }
        test.push_str("}\n");
        let source = format!("{POLICY}\n{test}");
        let checked = Checked::from_text("roundtrip.gpol", &source);
        let policy = match checked.into_policy() {
            Ok(p) => p.policy,
            Err(failed) => return Err(TestCaseError::fail(format!("{source}\n{failed}"))),
        };
        let steps = &policy.tests[0].steps;
        prop_assert_eq!(steps.len(), nodes.len() + jobs.len());
        for (i, (step, want)) in steps.iter().zip(&nodes).enumerate() {
            let want = NodeSpec { name: format!("n{i}"), ..want.clone() };
            prop_assert_eq!(step, &Step::Node(want));
        }
        for (i, (step, want)) in steps[nodes.len()..].iter().zip(&jobs).enumerate() {
            let want = JobSpec { name: format!("j{i}"), ..want.clone() };
            prop_assert_eq!(step, &Step::Submit(want));
        }
    }
}
