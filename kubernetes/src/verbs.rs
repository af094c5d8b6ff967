//! The extender's verbs over the cluster the extender knows: filter, prioritize and
//! preempt, each from the request kube-scheduler sends to the answer it reads.
//!
//! - filter: the nodes the pod fits on now, by the policy (admit rules, quota, filters,
//!   exact fit); every node of the request once, as passed, failed (an eviction could
//!   help) or failed and unresolvable (nothing could), in the form the request used.
//! - prioritize: the policy's ranking as extender scores ([`extender_scores`]).
//! - preempt: the proposals the policy stands behind ([`Cluster::victims`]).

use crate::cluster::{Answer, Cluster, Evaluation};
use crate::extender::{
    ExtenderArgs, ExtenderFilterResult, ExtenderPreemptionArgs, ExtenderPreemptionResult, FailedNodes, HostPriority,
    MAX_EXTENDER_PRIORITY, MetaPod, MetaVictims, Victims,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// A request kube-scheduler should not have sent: answered 400 with this message.
#[derive(Clone, Debug, PartialEq)]
pub struct BadRequest(pub String);

type Answers = (Vec<(usize, Answer)>, Option<(String, bool)>, usize);

/// The nodes of a filter or prioritize request: names, and the objects when sent whole.
struct Nodes<'a> {
    names: Vec<&'a str>,
    objects: Option<Vec<&'a Value>>,
}

fn nodes_of(args: &ExtenderArgs) -> Result<Nodes<'_>, BadRequest> {
    match (&args.node_names, &args.nodes) {
        (Some(names), _) => Ok(Nodes { names: names.iter().map(String::as_str).collect(), objects: None }),
        (None, Some(list)) => {
            let items = list.get("items").map_or(Ok(&[][..]), |i| match i {
                Value::Array(items) => Ok(items.as_slice()),
                Value::Null => Ok(&[][..]),
                _ => Err(BadRequest("`Nodes.items` is not a list".into())),
            })?;
            let names = items
                .iter()
                .enumerate()
                .map(|(i, n)| crate::nodes::name(n).map_err(|e| BadRequest(format!("`Nodes.items[{i}]`: {e}"))))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Nodes { names, objects: Some(items.iter().collect()) })
        }
        (None, None) => Ok(Nodes { names: Vec::new(), objects: None }),
    }
}

fn pod_of(pod: &Option<Value>) -> Result<&Value, BadRequest> {
    pod.as_ref().ok_or_else(|| BadRequest("the request has no `Pod`".into()))
}

/// Whole Node objects in a request bring the extender's nodes up to date; a node that
/// cannot be mapped fails, unresolvable, with the reason.
fn take_nodes(cluster: &mut Cluster, nodes: &Nodes<'_>) -> BTreeMap<String, String> {
    let mut bad = BTreeMap::new();
    for object in nodes.objects.iter().flatten() {
        if let Err(e) = cluster.apply_node(object)
            && let Ok(name) = crate::nodes::name(object)
        {
            bad.insert(name.to_string(), e.to_string());
        }
    }
    bad
}

/// Each distinct node of the request with its answer (first occurrence kept), why the pod
/// cannot start anywhere if it cannot, and the policy's score tiers.
fn answers(cluster: &mut Cluster, pod: &Value, nodes: &Nodes<'_>) -> Answers {
    let unmappable = take_nodes(cluster, nodes);
    let mut seen = HashSet::new();
    let distinct: Vec<usize> = (0..nodes.names.len()).filter(|&i| seen.insert(nodes.names[i])).collect();
    let asked: Vec<&str> = distinct.iter().map(|&i| nodes.names[i]).filter(|n| !unmappable.contains_key(*n)).collect();
    let evaluation = cluster.evaluate(pod, &asked);
    let mut out = Vec::with_capacity(distinct.len());
    match evaluation {
        Err(e) => {
            let why = format!("the pod cannot be mapped: {e}");
            out.extend(distinct.iter().map(|&i| (i, Answer::Fails { why: why.clone(), for_good: true })));
            (out, None, 0)
        }
        Ok(Evaluation { closed, nodes: mut answered, tiers }) => {
            answered.reverse();
            for &i in &distinct {
                let answer = match unmappable.get(nodes.names[i]) {
                    Some(why) => Answer::Fails { why: why.clone(), for_good: true },
                    None => answered.pop().unwrap_or(Answer::Fails { why: "not evaluated".into(), for_good: false }),
                };
                out.push((i, answer));
            }
            (out, closed, tiers)
        }
    }
}

/// filter.
pub fn filter(cluster: &mut Cluster, args: &ExtenderArgs) -> Result<ExtenderFilterResult, BadRequest> {
    let pod = pod_of(&args.pod)?;
    let nodes = nodes_of(args)?;
    let (answers, closed, _) = answers(cluster, pod, &nodes);
    let (mut failed, mut unresolvable) = (FailedNodes::new(), FailedNodes::new());
    let mut passed = Vec::new();
    for (i, answer) in answers {
        let name = nodes.names[i].to_string();
        match (&closed, answer) {
            (Some((why, true)), _) => drop(unresolvable.insert(name, why.clone())),
            (Some((why, false)), _) => drop(failed.insert(name, why.clone())),
            (None, Answer::Fits(_)) => passed.push(i),
            (None, Answer::Fails { why, for_good: true }) => drop(unresolvable.insert(name, why)),
            (None, Answer::Fails { why, for_good: false }) => drop(failed.insert(name, why)),
        }
    }
    let mut result = ExtenderFilterResult {
        failed_nodes: Some(failed),
        failed_and_unresolvable_nodes: Some(unresolvable),
        ..ExtenderFilterResult::default()
    };
    // Answered in the form asked: kube-scheduler reads only that one.
    match &nodes.objects {
        None => result.node_names = Some(passed.iter().map(|&i| nodes.names[i].to_string()).collect()),
        Some(objects) => {
            let mut list = args.nodes.clone().unwrap_or(Value::Null);
            let items: Vec<Value> = passed.iter().map(|&i| objects[i].clone()).collect();
            match &mut list {
                Value::Object(o) => drop(o.insert("items".into(), Value::Array(items))),
                _ => list = serde_json::json!({"apiVersion": "v1", "kind": "NodeList", "items": items}),
            }
            result.nodes = Some(list);
        }
    }
    Ok(result)
}

/// prioritize: a score for every distinct node of the request.
pub fn prioritize(cluster: &mut Cluster, args: &ExtenderArgs) -> Result<Vec<HostPriority>, BadRequest> {
    let pod = pod_of(&args.pod)?;
    let nodes = nodes_of(args)?;
    let (answers, closed, tiers) = answers(cluster, pod, &nodes);
    let ranks: Vec<Option<gpol_compiler::engine::NodeResult>> = answers
        .iter()
        .map(|(_, a)| match a {
            Answer::Fits(r) if closed.is_none() => Some(r.0),
            _ => None,
        })
        .collect();
    let scores = extender_scores(&ranks, tiers);
    Ok(answers
        .iter()
        .zip(scores)
        .map(|((i, _), score)| HostPriority { host: nodes.names[*i].to_string(), score })
        .collect())
}

/// The policy's ranking of the fitting nodes as extender scores: the best (and any node
/// ranked equal to it) gets [`MAX_EXTENDER_PRIORITY`], the next rank 9, and the ranks
/// below share 8 down to 0 in order; a node that does not fit gets 0. kube-scheduler adds
/// `score × weight × 10` to its own plugins' scores (each 0–100 × the plugin's weight),
/// so gpol's choice wins whenever `10 × weight` exceeds the largest difference the
/// in-tree scores can make (docs/kubernetes.md gives the weight).
pub fn extender_scores(ranks: &[Option<gpol_compiler::engine::NodeResult>], tiers: usize) -> Vec<i64> {
    let rank = |a: &gpol_compiler::engine::NodeResult, b: &gpol_compiler::engine::NodeResult| {
        gpol_runtime::gang::rank(a, b, tiers)
    };
    let mut fitting: Vec<&gpol_compiler::engine::NodeResult> = ranks.iter().flatten().collect();
    fitting.sort_by(|a, b| rank(a, b));
    fitting.dedup_by(|a, b| rank(a, b).is_eq());
    let levels = fitting.len();
    ranks
        .iter()
        .map(|r| match r {
            None => 0,
            Some(r) => {
                let level = fitting.partition_point(|f| rank(f, r).is_lt());
                match level {
                    0 => MAX_EXTENDER_PRIORITY,
                    1 => MAX_EXTENDER_PRIORITY - 1,
                    // Levels 2.. spread over 8..0.
                    k => {
                        let below = (levels - 2).max(1) as i64;
                        8 - (k as i64 - 2) * 8 / below
                    }
                }
            }
        })
        .collect()
}

/// preempt: the proposals the policy stands behind, by UID (whatever form the request used).
pub fn preempt(cluster: &mut Cluster, args: &ExtenderPreemptionArgs) -> Result<ExtenderPreemptionResult, BadRequest> {
    let pod = pod_of(&args.pod)?;
    let uid_of = |p: &Value| p.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let proposed: BTreeMap<String, Vec<String>> = match (&args.node_name_to_meta_victims, &args.node_name_to_victims) {
        (Some(meta), _) => {
            meta.iter().map(|(n, v)| (n.clone(), v.pods.iter().flatten().map(|p| p.uid.clone()).collect())).collect()
        }
        (None, Some(full)) => full
            .iter()
            .map(|(n, v): (&String, &Victims)| (n.clone(), v.pods.iter().flatten().map(uid_of).collect()))
            .collect(),
        (None, None) => BTreeMap::new(),
    };
    let pdb = |node: &str| {
        let meta = args.node_name_to_meta_victims.as_ref().and_then(|m| m.get(node)).map(|v| v.num_pdb_violations);
        let full = args.node_name_to_victims.as_ref().and_then(|m| m.get(node)).map(|v| v.num_pdb_violations);
        meta.or(full).unwrap_or(0)
    };
    // A pod the policy cannot take is not worth evicting anything for.
    let agreed = cluster.victims(pod, &proposed).unwrap_or_default();
    let result = agreed
        .into_iter()
        .map(|(node, uids)| {
            // The PDB violations kube counted hold for its own proposal only.
            let same = proposed.get(&node).is_some_and(|p| *p == uids);
            let victims = MetaVictims {
                pods: Some(uids.into_iter().map(|uid| MetaPod { uid }).collect()),
                num_pdb_violations: if same { pdb(&node) } else { 0 },
            };
            (node, victims)
        })
        .collect();
    Ok(ExtenderPreemptionResult { node_name_to_meta_victims: Some(result) })
}
