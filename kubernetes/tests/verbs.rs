//! The extender's verbs on random clusters: filter answers every node of the request once
//! (passed, failed or unresolvable) and passes only nodes it was asked about, in the form
//! asked; prioritize scores every node within the extender's range; gpol's choice is the
//! runtime's own decision on the same snapshot, and survives kube-scheduler's score merge
//! at the documented weight; preempt stands behind only what the policy's rules allow.

use gpol_compiler::engine::EngineKind;
use gpol_compiler::spec::History;
use gpol_kubernetes::cluster::Cluster;
use gpol_kubernetes::extender::{ExtenderArgs, ExtenderPreemptionArgs, MetaPod, MetaVictims};
use gpol_kubernetes::verbs;
use gpol_runtime::Decision;
use gpol_runtime::NodeVerdict;
use gpol_runtime::Scheduler;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const POLICY: &str = r#"policy extender

use std.pack

queue org {
  queue training { limit 24 gpu }
  queue serving { }
}

priority_class high = 1000
priority_class low = 0

admit not_huge "at most 8 cards per pod" { job.whole_cards <= 8 gpu }

filter serving_off_h100 "serving stays off H100s" {
  job.queue.name != "serving" or node.gpu_model != "h100"
}

score a100_for_serving tier 1 {
  if job.queue.name == "serving" and node.gpu_model == "NVIDIA-A100-SXM4-80GB" then 1 else 0
}
score fit tier 2 { std.pack.best_fit(job, node) }

preempt by_priority { when claimant.priority > victim.priority and victim.preemptible }
"#;

/// The weight docs/kubernetes.md gives: 10 × weight beats the in-tree scores' largest
/// difference (13 weight units of 0–100 with kube-scheduler's default plugins).
const WEIGHT: i64 = 131;
const IN_TREE_WEIGHTS: i64 = 13;

fn cluster() -> Cluster {
    Cluster::new(gpol_compiler::load::compile_text("extender.gpol", POLICY, EngineKind::Jit).expect("policy"))
}

fn node(name: &str, cards: u32, h100: bool, cordoned: bool) -> Value {
    let product = if h100 { "NVIDIA-H100-80GB-HBM3" } else { "NVIDIA-A100-SXM4-80GB" };
    json!({"kind": "Node", "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "spec": {"unschedulable": cordoned},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": cards.to_string()}}})
}

fn pod(name: &str, cards: u32, queue: &str, node: Option<&str>, class: &str, preemptible: bool) -> Value {
    json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "labels": {"gpol.dev/queue": queue, "gpol.dev/preemptible": preemptible.to_string()}},
        "spec": {"nodeName": node, "priorityClassName": class, "containers": [{"resources": {
            "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": cards.to_string()}}}]},
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}})
}

#[derive(Clone, Debug)]
struct World {
    nodes: Vec<(u32, bool, bool)>,
    bound: Vec<(u32, bool, usize)>,
    ask: (u32, bool),
    /// Indices into `nodes` the request names, each once.
    asked: Vec<usize>,
    whole_objects: bool,
}

fn world() -> impl Strategy<Value = World> {
    prop::collection::vec((1u32..9, any::<bool>(), prop::bool::weighted(0.1)), 1..10)
        .prop_flat_map(|nodes| {
            let n = nodes.len();
            (
                Just(nodes),
                prop::collection::vec((1u32..5, any::<bool>(), 0..n), 0..8),
                (1u32..10, any::<bool>()),
                prop::collection::vec(0..n, 0..(2 * n)),
                any::<bool>(),
            )
        })
        .prop_map(|(nodes, bound, ask, mut asked, whole_objects)| {
            let mut seen = BTreeSet::new();
            asked.retain(|i| seen.insert(*i));
            World { nodes, bound, ask, asked, whole_objects }
        })
}

fn queue(serving: bool) -> &'static str {
    if serving { "serving" } else { "training" }
}

/// The world as the extender's cluster, and the request for the asked pod.
fn setup(w: &World) -> (Cluster, ExtenderArgs, Vec<String>) {
    let mut c = cluster();
    let objects: Vec<Value> = w
        .nodes
        .iter()
        .enumerate()
        .map(|(i, &(cards, h100, cordoned))| node(&format!("n{i}"), cards, h100, cordoned))
        .collect();
    for o in &objects {
        c.apply_node(o).expect("valid node");
    }
    for (i, &(cards, serving, on)) in w.bound.iter().enumerate() {
        c.apply_pod(&pod(&format!("b{i}"), cards, queue(serving), Some(&format!("n{on}")), "low", true))
            .expect("valid pod");
    }
    let names: Vec<String> = w.asked.iter().map(|&i| format!("n{i}")).collect();
    let p = pod("new", w.ask.0, queue(w.ask.1), None, "high", false);
    let args = if w.whole_objects {
        let items: Vec<Value> = w.asked.iter().map(|&i| objects[i].clone()).collect();
        ExtenderArgs { pod: Some(p), nodes: Some(json!({"kind": "NodeList", "items": items})), node_names: None }
    } else {
        ExtenderArgs { pod: Some(p), nodes: None, node_names: Some(names.clone()) }
    };
    (c, args, names)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_node_answered_once_and_only_those_asked(w in world()) {
        let (mut c, args, names) = setup(&w);
        let r = verbs::filter(&mut c, args.clone()).expect("a valid request");
        let passed: Vec<String> = match (&r.node_names, &r.nodes) {
            (Some(n), None) => { prop_assert!(!w.whole_objects); n.clone() }
            (None, Some(list)) => {
                prop_assert!(w.whole_objects);
                list["items"].as_array().expect("items").iter()
                    .map(|n| n["metadata"]["name"].as_str().expect("name").to_string()).collect()
            }
            other => { prop_assert!(false, "answered in neither or both forms: {other:?}"); unreachable!() }
        };
        let failed = r.failed_nodes.clone().unwrap_or_default();
        let unresolvable = r.failed_and_unresolvable_nodes.clone().unwrap_or_default();
        let asked: BTreeSet<&String> = names.iter().collect();
        let mut all: Vec<&String> = passed.iter().chain(failed.keys()).chain(unresolvable.keys()).collect();
        all.sort();
        let distinct: Vec<&String> = asked.iter().copied().collect();
        prop_assert_eq!(all, distinct, "each node once among passed, failed and unresolvable");

        let scores = verbs::prioritize(&mut c, args.clone()).expect("a valid request");
        let scored: Vec<&String> = scores.iter().map(|h| &h.host).collect::<BTreeSet<_>>().into_iter().collect();
        prop_assert_eq!(scores.len(), asked.len());
        prop_assert_eq!(scored, asked.iter().copied().collect::<Vec<_>>());
        for h in &scores {
            prop_assert!((0..=10).contains(&h.score), "{h:?}");
            // Only nodes that pass get a score above 0; some passing node gets 10.
            if h.score > 0 { prop_assert!(passed.contains(&h.host), "{h:?} scored but filtered"); }
        }
        if !passed.is_empty() {
            prop_assert!(scores.iter().any(|h| h.score == 10));
        }
    }

    #[test]
    fn gpol_choice_is_the_runtimes_and_survives_kubes_merge(
        w in world(),
        in_tree in prop::collection::vec(0i64..=100 * IN_TREE_WEIGHTS, 10),
    ) {
        // Every node asked about, once, by name.
        let w = World { asked: (0..w.nodes.len()).collect(), whole_objects: false, ..w };
        let (mut c, args, names) = setup(&w);
        let scores = verbs::prioritize(&mut c, args.clone()).expect("a valid request");
        let best: BTreeSet<&str> = scores.iter().filter(|h| h.score == 10).map(|h| h.host.as_str()).collect();

        // The same snapshot in the runtime, directly.
        let mut s = Scheduler::new(gpol_compiler::load::compile_text("extender.gpol", POLICY, EngineKind::Jit).expect("policy"));
        for (i, &(cards, h100, cordoned)) in w.nodes.iter().enumerate() {
            let m = gpol_kubernetes::nodes::node(&node(&format!("n{i}"), cards, h100, cordoned)).expect("node");
            let id = s.add_node(&m.spec).expect("node");
            if cordoned { s.drain_node(id); }
        }
        // The cluster starts pods in (node, uid) order; so does this.
        let mut bound: Vec<(String, String, &(u32, bool, usize))> =
            w.bound.iter().enumerate().map(|(i, b)| (format!("n{}", b.2), format!("uid-b{i}"), b)).collect();
        bound.sort();
        let classes = |c: &str| c == "high" || c == "low";
        for (node_name, uid, &(cards, serving, on)) in bound {
            let name = uid.trim_start_matches("uid-");
            let m = gpol_kubernetes::pods::pod(&pod(name, cards, queue(serving), Some(&node_name), "low", true), &classes).expect("pod");
            let id = s.submit(m.job).expect("job");
            if s.start_on(id, &[on], History::default()).is_err() { s.withdraw(id); }
        }
        let m = gpol_kubernetes::pods::pod(args.pod.as_ref().expect("pod"), &classes).expect("pod");
        let id = s.submit(m.job).expect("job");
        match s.decide(id) {
            Decision::Place { replicas } => {
                let chosen = names[replicas[0]].as_str();
                // The extender's best are exactly the nodes the policy ranks equal to the
                // runtime's choice.
                let all: Vec<usize> = (0..names.len()).collect();
                let verdicts = s.node_verdicts(id, &all);
                let NodeVerdict::Fits(top) = verdicts[replicas[0]] else { panic!("the chosen node does not fit") };
                let equal: BTreeSet<&str> = verdicts.iter().enumerate()
                    .filter(|(_, v)| matches!(v, NodeVerdict::Fits(r) if s.rank_nodes(r, &top).is_eq()))
                    .map(|(i, _)| names[i].as_str())
                    .collect();
                prop_assert_eq!(&best, &equal, "runtime chose {}", chosen);
                // kube-scheduler's merge: in-tree scores plus score × weight × 10.
                let total = |h: &gpol_kubernetes::extender::HostPriority, i: usize| in_tree[i] + h.score * WEIGHT * 10;
                let top = scores.iter().enumerate().map(|(i, h)| total(h, i)).max().expect("nodes");
                for (i, h) in scores.iter().enumerate() {
                    if total(h, i) == top { prop_assert!(best.contains(h.host.as_str()), "kube would pick {}", h.host); }
                }
            }
            _ => prop_assert!(best.is_empty(), "the runtime waits, the extender ranks {best:?} best"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn preemption_answers_only_proposed_nodes_with_victims(
        w in world(),
        proposals in prop::collection::btree_map(0usize..10, prop::collection::vec(0usize..8, 1..4), 0..5),
        high in any::<bool>(),
    ) {
        let (mut c, args, _) = setup(&w);
        let mut pod = args.pod.clone().expect("pod");
        pod["spec"]["priorityClassName"] = json!(if high { "high" } else { "low" });
        let on_node = |node: usize| -> Vec<String> {
            w.bound.iter().enumerate().filter(|(_, b)| b.2 == node).map(|(i, _)| format!("uid-b{i}")).collect()
        };
        let proposed: BTreeMap<String, MetaVictims> = proposals
            .iter()
            .filter(|(n, _)| **n < w.nodes.len())
            .map(|(n, picks)| {
                let here = on_node(*n);
                let uids: Vec<MetaPod> = picks.iter().filter_map(|p| here.get(*p % here.len().max(1)).cloned()).map(|uid| MetaPod { uid }).collect();
                (format!("n{n}"), MetaVictims { pods: Some(uids), num_pdb_violations: 0 })
            })
            .filter(|(_, v)| v.pods.as_ref().is_some_and(|p| !p.is_empty()))
            .collect();
        let r = verbs::preempt(&mut c, &ExtenderPreemptionArgs {
            pod: Some(pod), node_name_to_victims: None, node_name_to_meta_victims: Some(proposed.clone()),
        }).expect("a valid request");
        for (node, victims) in r.node_name_to_meta_victims.unwrap_or_default() {
            // Only nodes kube-scheduler proposed, each with victims, all running there.
            prop_assert!(proposed.contains_key(&node), "{node} was not proposed");
            let pods = victims.pods.unwrap_or_default();
            prop_assert!(!pods.is_empty(), "{node} answered without victims");
            let n: usize = node[1..].parse().expect("node index");
            let here = on_node(n);
            for p in &pods {
                prop_assert!(here.contains(&p.uid), "{} does not run on {node}", p.uid);
                // The policy evicts only preemptible pods of lower priority: every bound
                // pod is `low` and preemptible, so only a `high` claimant gets any.
                prop_assert!(high, "a `low` pod may not preempt `low` pods");
            }
        }
    }
}

#[test]
fn known_answers_name_the_rule_and_the_reason() {
    let mut c = cluster();
    for n in [node("h", 8, true, false), node("a", 2, false, false), node("off", 8, false, true)] {
        c.apply_node(&n).expect("valid node");
    }
    let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let serving = ExtenderArgs {
        pod: Some(pod("s", 1, "serving", None, "high", false)),
        nodes: None,
        node_names: names(&["h", "a", "off", "ghost"]),
    };
    let r = verbs::filter(&mut c, serving.clone()).expect("valid");
    assert_eq!(r.node_names, names(&["a"]));
    let failed = r.failed_nodes.expect("failed");
    assert_eq!(&*failed["h"], "filter serving_off_h100 (serving stays off H100s)");
    assert_eq!(&*failed["ghost"], "the extender does not know this node");
    assert_eq!(&*r.failed_and_unresolvable_nodes.expect("unresolvable")["off"], "cordoned or out of service");
    // A pod no admit rule lets in fails everywhere, for good.
    let huge = ExtenderArgs {
        pod: Some(pod("x", 9, "training", None, "high", false)),
        nodes: None,
        node_names: names(&["h", "a"]),
    };
    let r = verbs::filter(&mut c, huge).expect("valid");
    assert_eq!(r.node_names, names(&[]));
    assert_eq!(&*r.failed_and_unresolvable_nodes.expect("unresolvable")["h"], "not_huge (at most 8 cards per pod)");
    // A pod that names no queue, in a policy of several leaves, is a mapping error.
    let mut nameless = pod("q", 1, "training", None, "high", false);
    nameless["metadata"]["labels"] = json!({});
    let r = verbs::filter(&mut c, ExtenderArgs { pod: Some(nameless), nodes: None, node_names: names(&["a"]) })
        .expect("valid");
    assert!(r.failed_and_unresolvable_nodes.expect("unresolvable")["a"].contains("no queue given"));
    // No pod: a bad request.
    assert!(verbs::filter(&mut c, ExtenderArgs::default()).is_err());
    // Scores: a serving pod prefers the A100 node (tier 1).
    let scores = verbs::prioritize(&mut c, ExtenderArgs { node_names: names(&["h", "a"]), ..serving }).expect("valid");
    assert_eq!(scores.iter().map(|h| (h.host.as_str(), h.score)).collect::<Vec<_>>(), vec![("h", 0), ("a", 10)]);
}

#[test]
fn preemption_follows_the_policys_victim_rules() {
    let mut c = cluster();
    c.apply_node(&node("a", 4, false, false)).expect("node");
    c.apply_node(&node("b", 4, false, false)).expect("node");
    c.apply_pod(&pod("cheap", 4, "training", Some("a"), "low", true)).expect("pod");
    c.apply_pod(&pod("kept", 4, "training", Some("b"), "low", false)).expect("pod");
    let meta = |uids: &[&str]| MetaVictims {
        pods: Some(uids.iter().map(|u| MetaPod { uid: u.to_string() }).collect()),
        num_pdb_violations: 0,
    };
    let args = ExtenderPreemptionArgs {
        pod: Some(pod("urgent", 4, "training", None, "high", false)),
        node_name_to_victims: None,
        node_name_to_meta_victims: Some(BTreeMap::from([
            ("a".to_string(), meta(&["uid-cheap"])),
            ("b".to_string(), meta(&["uid-kept"])),
        ])),
    };
    let r = verbs::preempt(&mut c, &args).expect("valid");
    // `kept` is not preemptible: node b is not offered; a is, with gpol's own victim.
    let victims = r.node_name_to_meta_victims.expect("victims");
    assert_eq!(victims.keys().collect::<Vec<_>>(), vec!["a"]);
    assert_eq!(victims["a"].pods, Some(vec![MetaPod { uid: "uid-cheap".into() }]));
    // A claimant of the same class may evict nobody.
    let peer = ExtenderPreemptionArgs { pod: Some(pod("peer", 4, "training", None, "low", false)), ..args };
    assert_eq!(verbs::preempt(&mut c, &peer).expect("valid").node_name_to_meta_victims, Some(BTreeMap::new()));
}

#[test]
fn pods_run_since_their_start_time_and_wait_since_their_creation() {
    let policy = "policy aging
preempt settled { when victim.runtime >= 10m and claimant.waiting >= 5m }
";
    let mut c = Cluster::new(gpol_compiler::load::compile_text("aging.gpol", policy, EngineKind::Jit).expect("policy"));
    // Clock zero at 12:00; the extender has run for a minute.
    let noon = 1_795_000_000_000_i64 - 1_795_000_000_000_i64 % 86_400_000 + 12 * 3_600_000;
    c.set_origin(noon);
    c.set_clock(60_000);
    let at = |ms: i64| {
        let t = jiff::Timestamp::from_millisecond(ms).expect("a time");
        t.to_string()
    };
    c.apply_node(&node("a", 4, false, false)).expect("node");
    c.apply_node(&node("b", 4, false, false)).expect("node");
    let started = |name: &str, node: &str, minutes_before: i64| {
        let mut p = pod(name, 4, "default", Some(node), "", false);
        p["status"]["startTime"] = at(noon + 60_000 - minutes_before * 60_000).into();
        p
    };
    // Started an hour before the extender did, and one started just now.
    c.apply_pod(&started("old", "a", 60)).expect("pod");
    c.apply_pod(&started("new", "b", 2)).expect("pod");
    let meta = |uids: &[&str]| MetaVictims {
        pods: Some(uids.iter().map(|u| MetaPod { uid: u.to_string() }).collect()),
        num_pdb_violations: 0,
    };
    let claimant = |minutes_waiting: i64| {
        let mut p = pod("claimant", 4, "default", None, "", false);
        p["metadata"]["creationTimestamp"] = at(noon + 60_000 - minutes_waiting * 60_000).into();
        ExtenderPreemptionArgs {
            pod: Some(p),
            node_name_to_victims: None,
            node_name_to_meta_victims: Some(BTreeMap::from([
                ("a".to_string(), meta(&["uid-old"])),
                ("b".to_string(), meta(&["uid-new"])),
            ])),
        }
    };
    // Waited 30 minutes: may evict the pod that ran an hour, not the one that ran 2 minutes.
    let r = verbs::preempt(&mut c, &claimant(30)).expect("valid");
    assert_eq!(r.node_name_to_meta_victims.expect("victims").keys().collect::<Vec<_>>(), vec!["a"]);
    // Created a minute ago: it has not waited long enough to evict anyone.
    let r = verbs::preempt(&mut c, &claimant(1)).expect("valid");
    assert_eq!(r.node_name_to_meta_victims, Some(BTreeMap::new()));
    // A malformed time is an error naming the field.
    let mut bad = pod("bad", 1, "default", Some("a"), "", false);
    bad["status"]["startTime"] = "yesterday".into();
    let e = c.apply_pod(&bad).expect_err("refused");
    assert_eq!(e.field, "status.startTime");
}

#[test]
fn recorded_card_assignments_hold_and_new_ones_follow_best_fit() {
    let mut c = cluster();
    // Four time-sliced cards, each shared by up to four pods.
    let mut shared = node("a", 16, false, false);
    shared["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = json!("time-slicing");
    shared["metadata"]["labels"]["nvidia.com/gpu.replicas"] = json!("4");
    shared["metadata"]["labels"]["nvidia.com/gpu.count"] = json!("4");
    c.apply_node(&shared).expect("node");
    // A half-card pod bound on card 3, as `bind` recorded it.
    let mut half = pod("half", 1, "serving", Some("a"), "low", true);
    half["metadata"]["annotations"] = json!({"gpol.dev/gpu-fraction": "0.5", "gpol.dev/cards": "3"});
    c.apply_pod(&half).expect("pod");
    assert_eq!(c.unplaced(), 0);
    // Another half card packs onto card 3 (best fit); two whole cards take 0 and 1.
    // Each reservation is given back before the next, as after a failed bind.
    let try_on = |c: &mut gpol_kubernetes::cluster::Cluster, p: &serde_json::Value| {
        let cards = c.reserve(p, "a");
        c.release(p["metadata"]["uid"].as_str().expect("uid"));
        cards
    };
    let mut other = pod("other", 1, "serving", None, "low", true);
    other["metadata"]["annotations"] = json!({"gpol.dev/gpu-fraction": "0.5"});
    assert_eq!(try_on(&mut c, &other).expect("fits"), "3");
    assert_eq!(try_on(&mut c, &pod("two", 2, "training", None, "low", true)).expect("fits"), "0,1");
    // Four whole cards do not fit beside the half-used card; three do.
    let e = try_on(&mut c, &pod("four", 4, "training", None, "low", true)).expect_err("no room");
    assert!(e.message.contains("may not start on `a` now: not enough free capacity"), "{e}");
    assert_eq!(try_on(&mut c, &pod("three", 3, "training", None, "low", true)).expect("fits"), "0,1,2");
    // Reserved and kept: the next pod sees the cards taken.
    assert_eq!(c.reserve(&pod("two", 2, "training", None, "low", true), "a").expect("fits"), "0,1");
    assert_eq!(c.reserve(&pod("one", 1, "training", None, "low", true), "a").expect("fits"), "2");
    assert!(c.reserve(&pod("more", 1, "training", None, "low", true), "a").is_err());
    c.release("uid-two");
    c.release("missing");
    assert_eq!(c.reserve(&pod("more", 2, "training", None, "low", true), "a").expect("fits"), "0,1");
    c.release("uid-one");
    c.release("uid-more");
    // A recorded assignment that cannot hold (card 3 is half taken) leaves the pod unplaced.
    let mut clash = pod("clash", 1, "training", Some("a"), "low", true);
    clash["metadata"]["annotations"] = json!({"gpol.dev/cards": "3"});
    c.apply_pod(&clash).expect("pod");
    c.warm();
    assert_eq!(c.unplaced(), 1);
}

#[test]
fn a_node_named_twice_is_a_bad_request() {
    let mut c = cluster();
    c.apply_node(&node("a", 8, false, false)).expect("node");
    let p = pod("new", 1, "training", None, "high", false);
    let by_name = ExtenderArgs { pod: Some(p.clone()), nodes: None, node_names: Some(vec!["a".into(), "a".into()]) };
    let e = verbs::filter(&mut c, by_name.clone()).expect_err("refused");
    assert_eq!(e.0, "node `a` is named twice in the request");
    assert!(verbs::prioritize(&mut c, by_name).is_err());
    let items = json!({"items": [node("b", 8, false, false), node("b", 8, false, false)]});
    let whole = ExtenderArgs { pod: Some(p), nodes: Some(items), node_names: None };
    assert_eq!(verbs::filter(&mut c, whole).expect_err("refused").0, "node `b` is named twice in the request");
    // Nothing of the refused request was kept.
    assert_eq!(c.node_count(), 1);
}

#[test]
fn with_the_api_server_connected_request_bodies_change_nothing() {
    let mut c = cluster();
    c.watch_nodes();
    assert!(!c.nodes_from_requests());
    c.apply_node(&node("a", 8, false, false)).expect("node");
    // A client sends node `a` as empty of GPUs and a node `ghost` that does not exist.
    let items = json!({"items": [node("a", 0, false, false), node("ghost", 8, false, false)]});
    let args = ExtenderArgs {
        pod: Some(pod("new", 4, "training", None, "high", false)),
        nodes: Some(items),
        node_names: None,
    };
    let r = verbs::filter(&mut c, args).expect("answered");
    let passed: Vec<&str> = r.nodes.as_ref().expect("nodes")["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| n["metadata"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(passed, vec!["a"], "the watched node `a` has 8 GPUs whatever the request says");
    let failed = r.failed_nodes.expect("failed");
    assert_eq!(failed.get("ghost").map(|w| w.as_ref()), Some("the extender does not know this node"));
    assert_eq!(c.node_count(), 1);
}

#[test]
fn nodes_sent_in_requests_expire_and_make_room() {
    let mut c = cluster();
    let p = || pod("new", 1, "training", None, "high", false);
    let send = |c: &mut Cluster, names: &[&str]| {
        let items: Vec<Value> = names.iter().map(|n| node(n, 8, false, false)).collect();
        let args = ExtenderArgs { pod: Some(p()), nodes: Some(json!({"items": items})), node_names: None };
        verbs::filter(c, args).expect("answered")
    };
    send(&mut c, &["a", "b"]);
    assert_eq!(c.node_count(), 2);
    // Five minutes later `b` is sent again; six more and `a`, unsent for eleven, is gone.
    c.set_clock(5 * 60_000);
    send(&mut c, &["b"]);
    c.set_clock(11 * 60_000);
    send(&mut c, &["c"]);
    assert_eq!(c.node_count(), 2, "`a` expired, `b` and `c` kept");
    let r = verbs::filter(
        &mut c,
        ExtenderArgs { pod: Some(p()), nodes: None, node_names: Some(vec!["a".into(), "b".into()]) },
    )
    .expect("answered");
    assert_eq!(r.node_names, Some(vec!["b".to_string()]));
}

#[test]
fn at_the_node_limit_the_nodes_sent_longest_ago_make_room() {
    let mut c = cluster();
    c.set_max_nodes(3);
    let p = || pod("new", 1, "training", None, "high", false);
    let send = |c: &mut Cluster, names: &[&str], at: u64| {
        c.set_clock(at);
        let items: Vec<Value> = names.iter().map(|n| node(n, 8, false, false)).collect();
        let args = ExtenderArgs { pod: Some(p()), nodes: Some(json!({"items": items})), node_names: None };
        verbs::filter(c, args).expect("answered")
    };
    // A client fills the extender with names it never sends again.
    send(&mut c, &["x1", "x2", "x3"], 0);
    // A real node sent later is taken, in place of a name sent longest ago; so is the next.
    let r = send(&mut c, &["real"], 1000);
    assert_eq!(r.node_names.as_deref(), None);
    assert_eq!(r.nodes.as_ref().map(|n| n["items"].as_array().map_or(0, Vec::len)), Some(1), "{r:?}");
    assert_eq!(c.node_count(), 3);
    send(&mut c, &["real", "other"], 2000);
    assert_eq!(c.node_count(), 3);
    let known = verbs::filter(
        &mut c,
        ExtenderArgs {
            pod: Some(p()),
            nodes: None,
            node_names: Some(vec!["real".into(), "other".into(), "x1".into()]),
        },
    )
    .expect("answered");
    assert_eq!(known.node_names, Some(vec!["real".to_string(), "other".to_string()]));
}
