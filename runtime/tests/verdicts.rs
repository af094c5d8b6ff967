//! Node-by-node verdicts (`Scheduler::gate`, `node_verdicts`) agree with the scheduler's
//! own decision on random clusters, in both engines: when the gate is open and some node
//! fits, `decide` places the job on the best-ranked such node (the lowest id among
//! equals); when none fits, or the gate is closed, the job waits, for the same reason.

mod support;

use gpol_compiler::engine::EngineKind;
use gpol_compiler::spec::{JobSpec, NodeSpec, Request};
use gpol_runtime::Decision;
use gpol_runtime::NodeVerdict;
use gpol_runtime::Scheduler;
use proptest::prelude::*;
use std::cmp::Ordering;
use support::compiled;

/// A quota limit, an admit rule that reads the cluster, a filter, tiered scores.
const POLICY: &str = r#"policy verdicts

use std.pack

queue org {
  queue a { limit 12 gpu }
  queue b { }
}

admit cluster_not_full "the cluster is nearly full" { cluster.free.gpu >= 1 gpu }

filter no_fractions_on_h100 "fractions stay off H100s" {
  job.gpu_fraction == 0 gpu or node.gpu_model != "h100"
}

score a100_first tier 1 { if node.gpu_model == "a100" then 1 else 0 }
score fit tier 2 { std.pack.best_fit(job, node) }
"#;

fn node() -> impl Strategy<Value = (NodeSpec, bool)> {
    (1u32..9, any::<bool>(), prop::bool::weighted(0.1)).prop_map(|(cards, h100, down)| {
        let spec = NodeSpec {
            model: if h100 { "h100".into() } else { "a100".into() },
            cards,
            cpu_milli: 64_000,
            mem: 1 << 40,
            ..NodeSpec::default()
        };
        (spec, down)
    })
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        3 => (1u32..9).prop_map(Request::Whole),
        1 => (1u32..1000).prop_map(Request::Fraction),
        1 => Just(Request::None),
    ]
}

fn job(name: String, request: Request, queue_a: bool, model: Option<bool>) -> JobSpec {
    JobSpec {
        queue: Some(if queue_a { "a" } else { "b" }.into()),
        request,
        cpu_milli: 1000,
        models: model.map(|h| vec![if h { "h100" } else { "a100" }.to_string()]).unwrap_or_default(),
        ..JobSpec::named(&name)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn verdicts_agree_with_the_decision(
        nodes in prop::collection::vec(node(), 1..12),
        running in prop::collection::vec((request(), any::<bool>()), 0..10),
        ask in (request(), any::<bool>(), prop::option::of(any::<bool>())),
        interp in any::<bool>(),
    ) {
        let engine = if interp { EngineKind::Interp } else { EngineKind::Jit };
        let mut s = Scheduler::new(compiled("verdicts.gpol", POLICY, engine));
        for (i, (n, _)) in nodes.iter().enumerate() {
            s.add_node(&NodeSpec { name: format!("n{i}"), ..n.clone() }).expect("valid node");
        }
        for (i, (request, a)) in running.iter().enumerate() {
            s.submit(job(format!("r{i}"), *request, *a, None)).expect("valid job");
            s.cycle();
        }
        for (i, (_, down)) in nodes.iter().enumerate() {
            if *down {
                s.drain_node(i);
            }
        }
        let (request, a, model) = ask;
        let id = s.submit(job("new".into(), request, a, model)).expect("valid job");
        let all: Vec<usize> = (0..nodes.len()).collect();
        let verdicts = s.node_verdicts(id, &all);
        prop_assert_eq!(verdicts.len(), nodes.len());
        // With the engine's results: the same verdicts, a fit's result the engine's own.
        let with_results = s.node_verdicts_with_results(id, &all);
        prop_assert_eq!(with_results.iter().map(|(v, _)| *v).collect::<Vec<_>>(), verdicts.clone());
        for (v, r) in &with_results {
            match v {
                NodeVerdict::Fits(fit) => prop_assert_eq!(fit, r),
                NodeVerdict::Filtered(_) => prop_assert!(!r.feasible),
                _ => prop_assert!(r.feasible),
            }
        }
        let decision = s.decide(id);
        match s.gate(id) {
            Err(closed) => match decision {
                Decision::Wait(reason) => prop_assert_eq!(reason, closed.reason),
                Decision::Reject(rule) => {
                    prop_assert!(closed.for_good);
                    prop_assert_eq!(gpol_runtime::Reason::Rule(rule), closed.reason);
                }
                Decision::Place { .. } => prop_assert!(false, "placed although the gate is closed: {closed:?}"),
            },
            Ok(()) => {
                let fitting: Vec<_> = verdicts
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| match v { NodeVerdict::Fits(r) => Some((i, *r)), _ => None })
                    .collect();
                let best = fitting.iter().min_by(|a, b| s.rank_nodes(&a.1, &b.1).then(a.0.cmp(&b.0)));
                match (best, decision) {
                    (Some((n, _)), Decision::Place { replicas }) => prop_assert_eq!(replicas, vec![*n]),
                    (None, Decision::Wait(_)) => {}
                    (best, decision) => prop_assert!(false, "best {best:?} but decided {decision:?}"),
                }
            }
        }
        // A down node is never said to fit, nor a node of a model the job may not use.
        for (i, v) in verdicts.iter().enumerate() {
            if matches!(v, NodeVerdict::Fits(_)) {
                prop_assert!(!nodes[i].1);
                if let Some(h) = model {
                    prop_assert_eq!(nodes[i].0.model == "h100", h);
                }
            }
        }
    }
}

#[test]
fn each_kind_of_verdict_is_given() {
    let mut s = Scheduler::new(compiled("verdicts.gpol", POLICY, EngineKind::Jit));
    for (name, model, cards) in [("h", "h100", 8), ("a", "a100", 2), ("x", "a100", 4), ("full", "a100", 1)] {
        s.add_node(&NodeSpec { model: model.into(), cards, cpu_milli: 64_000, mem: 1 << 40, ..NodeSpec::named(name) })
            .expect("valid node");
    }
    s.submit(job("r".into(), Request::Whole(1), false, Some(false))).expect("valid job");
    s.cycle();
    s.drain_node(2);
    // "r" took the A100 node's only card where best fit sends it: "full".
    let frac = s.submit(job("f".into(), Request::Fraction(500), false, None)).expect("valid job");
    let v = s.node_verdicts(frac, &[0, 1, 2, 3]);
    assert!(matches!(v[0], NodeVerdict::Filtered(_)), "{v:?}");
    assert!(matches!(v[1], NodeVerdict::Fits(_)), "{v:?}");
    assert_eq!((v[2], v[3]), (NodeVerdict::Down, NodeVerdict::Full));
    let a100 = s.submit(job("m".into(), Request::Whole(2), false, Some(false))).expect("valid job");
    assert_eq!(s.node_verdicts(a100, &[0])[0], NodeVerdict::Model);
    // Over the queue's limit: the gate closes, for good (no node could ever change that).
    let big = s.submit(job("big".into(), Request::Whole(13), true, None)).expect("valid job");
    let closed = s.gate(big).expect_err("over the limit");
    assert!(closed.for_good);
    assert_eq!(s.rank_nodes(&Default::default(), &Default::default()), Ordering::Equal);
}
