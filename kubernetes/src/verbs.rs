//! The extender's verbs over the cluster the extender knows: filter, prioritize and
//! preempt, each from the request kube-scheduler sends to the answer it reads.
//!
//! - filter: the nodes the pod fits on now, by the policy (admit rules, quota, filters,
//!   exact fit); every node of the request once, as passed, failed (an eviction could
//!   help) or failed and unresolvable (nothing could), in the form the request used.
//! - prioritize: the policy's ranking as extender scores ([`extender_scores`]).
//! - preempt: the proposals the policy stands behind ([`Cluster::victims`]).

use crate::cluster::{Answer, Cluster, Evaluation, MAX_NODES};
use crate::extender::{
    ExtenderArgs, ExtenderFilterResult, ExtenderPreemptionArgs, ExtenderPreemptionResult, FailedNodes, HostPriority,
    MAX_EXTENDER_PRIORITY, MetaPod, MetaVictims, Victims,
};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A request kube-scheduler should not have sent: answered 400 with this message.
#[derive(Clone, Debug, PartialEq)]
pub struct BadRequest(pub String);

/// The nodes of a filter or prioritize request: names (taken from the request, to be
/// given back in the answer), and the objects when sent whole.
struct Nodes {
    names: Vec<String>,
    objects: Option<Vec<Value>>,
    /// The rest of a sent `NodeList` (its kind, metadata), for the answer.
    list: Option<serde_json::Map<String, Value>>,
}

fn nodes_of(args: &mut ExtenderArgs) -> Result<Nodes, BadRequest> {
    let nodes = if let Some(names) = args.node_names.take() {
        Nodes { names, objects: None, list: None }
    } else {
        let Some(list) = args.nodes.take() else { return Ok(Nodes { names: Vec::new(), objects: None, list: None }) };
        let Value::Object(mut list) = list else { return Err(BadRequest("`Nodes` is not a NodeList".into())) };
        let items = match list.remove("items") {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(BadRequest("`Nodes.items` is not a list".into())),
        };
        let names = items
            .iter()
            .enumerate()
            .map(|(i, n)| {
                crate::nodes::name(n).map(str::to_string).map_err(|e| BadRequest(format!("`Nodes.items[{i}]`: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Nodes { names, objects: Some(items), list: Some(list) }
    };
    if nodes.names.len() > MAX_NODES {
        return Err(BadRequest(format!("the request names {} nodes; the limit is {MAX_NODES}", nodes.names.len())));
    }
    // kube-scheduler names each node once: a name given twice would get two answers.
    let mut seen = FxHashSet::default();
    if let Some(twice) = nodes.names.iter().find(|n| !seen.insert(n.as_str())) {
        return Err(BadRequest(format!("node `{twice}` is named twice in the request")));
    }
    Ok(nodes)
}

/// The names of the nodes a filter or prioritize request asks about, in its order (for
/// the decision log).
pub fn asked_names(args: &ExtenderArgs) -> Vec<String> {
    if let Some(names) = &args.node_names {
        return names.clone();
    }
    let items = args.nodes.as_ref().and_then(|l| l.get("items")).and_then(Value::as_array);
    items.into_iter().flatten().filter_map(|n| crate::nodes::name(n).ok().map(str::to_string)).collect()
}

/// The nodes a preempt request proposes evictions on.
pub fn proposed_nodes(args: &ExtenderPreemptionArgs) -> Vec<String> {
    match (&args.node_name_to_meta_victims, &args.node_name_to_victims) {
        (Some(meta), _) => meta.keys().cloned().collect(),
        (None, Some(full)) => full.keys().cloned().collect(),
        (None, None) => Vec::new(),
    }
}

fn pod_of(pod: &Option<Value>) -> Result<&Value, BadRequest> {
    pod.as_ref().ok_or_else(|| BadRequest("the request has no `Pod`".into()))
}

fn take_pod(args: &mut ExtenderArgs) -> Result<Value, BadRequest> {
    args.pod.take().ok_or_else(|| BadRequest("the request has no `Pod`".into()))
}

/// Whole Node objects in a request bring the extender's nodes up to date when nodes
/// come from requests (`--no-api`; with the API server connected they change nothing);
/// a node that cannot be mapped fails, unresolvable, with the reason.
fn take_nodes(cluster: &mut Cluster, nodes: &Nodes) -> FxHashMap<String, Arc<str>> {
    match &nodes.objects {
        Some(objects) => cluster.apply_sent_nodes(objects),
        None => FxHashMap::default(),
    }
}

/// Each node's answer, `None` for a repeated name; why the pod cannot start anywhere if
/// it cannot; and the policy's score tiers.
struct Answers {
    nodes: Vec<Option<Answer>>,
    closed: Option<(Arc<str>, bool)>,
    tiers: usize,
}

fn answers(cluster: &mut Cluster, pod: &Value, nodes: &Nodes) -> Answers {
    let unmappable = take_nodes(cluster, nodes);
    let names: Vec<&str> = nodes.names.iter().map(String::as_str).collect();
    match cluster.evaluate(pod, &names) {
        Err(e) => {
            let why: Arc<str> = Arc::from(format!("the pod cannot be mapped: {e}"));
            let mut seen = FxHashSet::default();
            let nodes = names
                .iter()
                .map(|n| seen.insert(*n).then(|| Answer::Fails { why: Arc::clone(&why), for_good: true }))
                .collect();
            Answers { nodes, closed: None, tiers: 0 }
        }
        Ok(Evaluation { closed, mut nodes, tiers }) => {
            if !unmappable.is_empty() {
                for (answer, name) in nodes.iter_mut().zip(&names) {
                    if let (Some(a), Some(why)) = (answer.as_mut(), unmappable.get(*name)) {
                        *a = Answer::Fails { why: Arc::clone(why), for_good: true };
                    }
                }
            }
            Answers { nodes, closed, tiers }
        }
    }
}

/// filter.
pub fn filter(cluster: &mut Cluster, mut args: ExtenderArgs) -> Result<ExtenderFilterResult, BadRequest> {
    let pod = take_pod(&mut args)?;
    let nodes = nodes_of(&mut args)?;
    let Answers { nodes: answers, closed, .. } = answers(cluster, &pod, &nodes);
    let n = answers.len();
    let (mut failed, mut unresolvable) = (FailedNodes::with_capacity(n), FailedNodes::with_capacity(n));
    let mut passed = Vec::with_capacity(n);
    let Nodes { names, objects, list } = nodes;
    let mut objects = objects.map(|o| o.into_iter().map(Some).collect::<Vec<_>>());
    for (i, (answer, name)) in answers.into_iter().zip(names).enumerate() {
        let Some(answer) = answer else { continue };
        match (&closed, answer) {
            (Some((why, true)), _) => drop(unresolvable.insert(name, Arc::clone(why))),
            (Some((why, false)), _) => drop(failed.insert(name, Arc::clone(why))),
            (None, Answer::Fits(_)) => passed.push((i, name)),
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
    match objects.as_mut() {
        None => result.node_names = Some(passed.into_iter().map(|(_, name)| name).collect()),
        Some(objects) => {
            let items: Vec<Value> =
                passed.iter().filter_map(|&(i, _)| objects.get_mut(i).and_then(Option::take)).collect();
            let mut list = list.unwrap_or_default();
            list.insert("items".into(), Value::Array(items));
            result.nodes = Some(Value::Object(list));
        }
    }
    Ok(result)
}

/// prioritize: a score for every distinct node of the request.
pub fn prioritize(cluster: &mut Cluster, mut args: ExtenderArgs) -> Result<Vec<HostPriority>, BadRequest> {
    let pod = take_pod(&mut args)?;
    let nodes = nodes_of(&mut args)?;
    let Answers { nodes: answers, closed, tiers } = answers(cluster, &pod, &nodes);
    let ranks: Vec<Option<gpol_compiler::engine::NodeResult>> = answers
        .iter()
        .flatten()
        .map(|a| match a {
            Answer::Fits(r) if closed.is_none() => Some(r.0),
            _ => None,
        })
        .collect();
    let mut scores = extender_scores(&ranks, tiers).into_iter();
    Ok(answers
        .iter()
        .zip(nodes.names)
        .filter(|(a, _)| a.is_some())
        .map(|(_, host)| HostPriority { host, score: scores.next().unwrap_or(0) })
        .collect())
}

/// The policy's ranking of the fitting nodes as extender scores: the best (and any node
/// ranked equal to it) gets [`MAX_EXTENDER_PRIORITY`], the next rank 9, and the ranks
/// below share 8 down to 0 in order; a node that does not fit gets 0. kube-scheduler adds
/// `score × weight × 10` to its own plugins' scores (each 0–100 × the plugin's weight),
/// so gpol's choice wins whenever `10 × weight` exceeds the largest difference the
/// in-tree scores can make (docs/kubernetes.md gives the weight).
pub fn extender_scores(ranks: &[Option<gpol_compiler::engine::NodeResult>], tiers: usize) -> Vec<i64> {
    let rank =
        |a: &gpol_compiler::engine::NodeResult, b: &gpol_compiler::engine::NodeResult| gpol_runtime::rank(a, b, tiers);
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
