//! Nodes as Slurm reports them: the node list of `sinfo --json` in Slurm 22.05
//! (`{"meta", "errors", "nodes": [...]}`, written by the openapi/v0.0.38 plugin;
//! slurmrestd's `GET /slurm/v0.0.38/nodes` answers the same document). 22.05's scontrol
//! has no `--json`. The `scontrol show nodes --json` of later releases keeps the `nodes`
//! list but writes `state` as a list of flags and some numbers as `{"set", "number"}`
//! objects; those are read too (the `json` module), and slurm/tests/openapi.rs holds the
//! reader to every later data parser's shapes.
//!
//! Per node: `cpus`, `real_memory` (MiB), GPUs from `gres` (`gpu:a100:8(S:0-1)`, read by
//! [`crate::gres::configured`]; the model is the GRES type through gpol's model table,
//! `a100_80g` and `nvidia_h100` as `a100` and `h100`, or `gpu` when untyped), sharing from
//! `shard` (time-slicing) or `mps` GRES, `features` and `partitions` as labels, and
//! whether it is in service. The node JSON carries no topology (topology/tree switches
//! are not in it) and no GPU memory. The scheduling loop and the simulator (a cluster file
//! that is a Slurm node list) both read nodes here.

use crate::gres::{self, GresError};
use crate::json::{self, Flex};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_CPU_CORES, MAX_MEMORY_BYTES, MAX_NODES};
use gpol_compiler::spec::{NodeSpec, OverLimit, Sharing};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// The label a node feature becomes: `slurm.feature/<name>` = `true`.
pub const FEATURE_LABEL: &str = "slurm.feature/";
/// The label a node's partition becomes: `slurm.partition/<name>` = `true`.
pub const PARTITION_LABEL: &str = "slurm.partition/";

/// A node Slurm knows.
#[derive(Clone, Debug, PartialEq)]
pub struct SlurmNode {
    pub spec: NodeSpec,
    pub service: Service,
}

/// Whether a node takes work, as its Slurm states say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    InService,
    /// Takes no new job; the jobs there run on (`DRAIN`, `DRAINING`, `FAIL`, …).
    Drained,
    /// Runs nothing (`DOWN`, `NOT_RESPONDING`, `FUTURE`, …).
    Down,
}

/// What is wrong with a node list. [`BadNodes::line`] and [`BadNodes::field`] say where;
/// the message names the node.
#[derive(Clone, Debug, PartialEq)]
pub enum BadNodes {
    /// Not JSON: serde's message (escaped: it may quote the document).
    NotJson { line: usize, message: String },
    /// Slurm's `errors` list instead of the nodes (slurmctld not answering).
    SlurmSaid(Vec<String>),
    /// No `nodes` list.
    NoList,
    /// A `nodes` list with no nodes.
    NoNodes,
    /// An item of the list without a name (0-based, as listed).
    Unnamed { item: usize },
    /// More nodes than a cluster may have.
    TooMany { count: usize },
    /// A field of a node.
    Node { node: String, field: &'static str, problem: NodeProblem },
}

/// What is wrong with one field of a node.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeProblem {
    Missing,
    /// Not a whole number (the value as written).
    NotWholeNumber(String),
    NotAString(String),
    NotStrings(String),
    NotAStringOrStrings(String),
    TooManyCpus(u64),
    TooMuchMemoryMib(u64),
    Gres(GresError),
    /// GPUs of more than one type, each as `(type, cards)` (`""`: untyped).
    GpuTypes(Vec<(String, u64)>),
    TooManyGpus(u64),
    /// More shares (`what`: `shard`, `mps share`) per card than a card may have clients.
    TooManyShares {
        what: &'static str,
        shares: u64,
        per_card: u64,
    },
    BothShardsAndMps,
    /// Over a limit of the node model (docs/limits.md); the field is the model's.
    OverLimit(OverLimit),
}

impl BadNodes {
    /// The document's 1-based line, when it is known.
    pub fn line(&self) -> Option<usize> {
        match self {
            BadNodes::NotJson { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// The field the error is in.
    pub fn field(&self) -> Option<&str> {
        match self {
            BadNodes::SlurmSaid(_) => Some("errors"),
            BadNodes::NoList | BadNodes::NoNodes => Some("nodes"),
            BadNodes::Unnamed { .. } => Some("name"),
            BadNodes::Node { field, .. } => Some(field),
            BadNodes::NotJson { .. } | BadNodes::TooMany { .. } => None,
        }
    }
}

/// The message, without the line and field ([`BadNodes::line`], [`BadNodes::field`]).
impl fmt::Display for BadNodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadNodes::NotJson { message, .. } => write!(f, "not JSON: {message}"),
            BadNodes::SlurmSaid(said) => write!(f, "Slurm answered with errors, not the nodes: {}", said.join("; ")),
            BadNodes::NoList => write!(f, "expected a list of nodes (`sinfo --json` output)"),
            BadNodes::NoNodes => write!(f, "the node list has no nodes"),
            BadNodes::Unnamed { item } => write!(f, "item {item}: missing or not a string"),
            BadNodes::TooMany { count } => write!(f, "{count} nodes: too large, at most {MAX_NODES}"),
            BadNodes::Node { node, problem, .. } => write!(f, "node `{node}`: {problem}"),
        }
    }
}

impl fmt::Display for NodeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeProblem::Missing => write!(f, "missing"),
            NodeProblem::NotWholeNumber(v) => write!(f, "expected a whole number, found {v}"),
            NodeProblem::NotAString(v) => write!(f, "expected a string, found {v}"),
            NodeProblem::NotStrings(v) => write!(f, "expected strings, found {v}"),
            NodeProblem::NotAStringOrStrings(v) => write!(f, "expected a string or a list of strings, found {v}"),
            NodeProblem::TooManyCpus(n) => write!(f, "{n} is too large, at most {MAX_CPU_CORES}"),
            NodeProblem::TooMuchMemoryMib(n) => {
                write!(f, "{n} MiB is too large, at most {} MiB", MAX_MEMORY_BYTES >> 20)
            }
            NodeProblem::Gres(e) => write!(f, "{e}"),
            NodeProblem::GpuTypes(types) => {
                let list: Vec<String> =
                    types.iter().map(|(t, n)| format!("{n} {}", if t.is_empty() { "untyped" } else { t })).collect();
                write!(
                    f,
                    "GPUs of more than one type ({}): gpol models one GPU model per node; \
                     describe this node in a TOML cluster spec instead",
                    list.join(", ")
                )
            }
            NodeProblem::TooManyGpus(n) => write!(f, "{n} GPUs: too large, at most {MAX_CARDS_PER_NODE}"),
            NodeProblem::TooManyShares { what, shares, per_card } => {
                write!(f, "{shares} {what}s: {per_card} per GPU is too large, at most {MAX_CLIENTS_PER_CARD}")
            }
            NodeProblem::BothShardsAndMps => {
                write!(f, "both shard and mps GRES: gpol models one way of sharing a node's GPUs")
            }
            NodeProblem::OverLimit(over) => write!(f, "too large, at most {}", over.max),
        }
    }
}

impl std::error::Error for BadNodes {}

/// Whether JSON text looks like a Slurm node list (`sinfo --json`, slurmrestd's nodes,
/// `scontrol show nodes --json`): an object with a `nodes` key near the top.
pub fn is_node_list(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.trim_start().starts_with('{') && head.contains("\"nodes\"")
}

/// Reads a Slurm node list, within the node model's limits (docs/limits.md). Nodes listed
/// twice (once per partition, as some tools do) are read once, with the labels of every
/// listing.
pub fn read(text: &str) -> Result<Vec<SlurmNode>, BadNodes> {
    // (serde's message may quote the document's text.)
    let root: Value = serde_json::from_str(text)
        .map_err(|e| BadNodes::NotJson { line: e.line(), message: crate::command::printable(&e.to_string()) })?;
    // slurmctld not answering still gives a document (and `sinfo --json` exits 0): its
    // errors, and no nodes. They are the message, not "no nodes".
    let said = crate::errors::messages(root.get("errors").and_then(Value::as_array).map_or(&[], Vec::as_slice));
    if !said.is_empty() {
        return Err(BadNodes::SlurmSaid(said));
    }
    let items = root.get("nodes").and_then(Value::as_array).ok_or(BadNodes::NoList)?;
    let mut nodes: Vec<SlurmNode> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let name = match item.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => return Err(BadNodes::Unnamed { item: i }),
        };
        let node =
            read_node(item, &name).map_err(|(field, problem)| BadNodes::Node { node: name.clone(), field, problem })?;
        if let Some(&seen) = index.get(&name) {
            let seen = &mut nodes[seen].spec;
            for label in node.spec.labels {
                if !seen.labels.contains(&label) {
                    seen.labels.push(label);
                }
            }
            continue;
        }
        index.insert(name, nodes.len());
        nodes.push(node);
    }
    if nodes.is_empty() {
        return Err(BadNodes::NoNodes);
    }
    if nodes.len() > MAX_NODES as usize {
        return Err(BadNodes::TooMany { count: nodes.len() });
    }
    if let Some((n, over)) = nodes.iter().find_map(|n| Some((n, n.spec.over_limit()?))) {
        let field = over.field;
        return Err(BadNodes::Node { node: n.spec.name.clone(), field, problem: NodeProblem::OverLimit(over) });
    }
    Ok(nodes)
}

/// A field of a node that is wrong, and what is wrong with it.
type Bad = (&'static str, NodeProblem);

/// One node.
fn read_node(item: &Value, name: &str) -> Result<SlurmNode, Bad> {
    let cpus = required_count(item, "cpus")?;
    if cpus > MAX_CPU_CORES {
        return Err(("cpus", NodeProblem::TooManyCpus(cpus)));
    }
    let mem_mib = required_count(item, "real_memory")?;
    let mem = (mem_mib.checked_mul(1 << 20).filter(|&b| b <= MAX_MEMORY_BYTES))
        .ok_or(("real_memory", NodeProblem::TooMuchMemoryMib(mem_mib)))?;
    let gres_text = match item.get("gres") {
        None | Some(Value::Null) => "",
        Some(v) => v.as_str().ok_or_else(|| ("gres", NodeProblem::NotAString(v.to_string())))?,
    };
    let configured = gres::configured(gres_text).map_err(|e| ("gres", NodeProblem::Gres(e)))?;
    let gpus = gpus(&configured).map_err(|p| ("gres", p))?;
    let mut labels: Vec<(String, String)> = Vec::new();
    for feature in strings(item, "features")? {
        labels.push((format!("{FEATURE_LABEL}{feature}"), "true".into()));
    }
    for partition in strings(item, "partitions")? {
        labels.push((format!("{PARTITION_LABEL}{partition}"), "true".into()));
    }
    let service = service(&states(item)?);
    let spec = NodeSpec {
        name: name.to_string(),
        model: gpus.model,
        cards: gpus.cards,
        card_mem: 0,
        sharing: gpus.sharing,
        mig: Vec::new(),
        max_clients: gpus.max_clients,
        cpu_milli: cpus.saturating_mul(1000),
        mem,
        domains: Vec::new(),
        labels,
    };
    Ok(SlurmNode { spec, service })
}

fn required_count(item: &Value, key: &'static str) -> Result<u64, Bad> {
    let v = item.get(key).ok_or((key, NodeProblem::Missing))?;
    json::number(&Flex::of(v)).ok_or_else(|| (key, NodeProblem::NotWholeNumber(v.to_string())))
}

/// A list of names: a JSON list, or one comma-separated string (22.05's `features`).
/// Absent or null is empty.
fn strings(item: &Value, key: &'static str) -> Result<Vec<String>, Bad> {
    let names: Vec<&str> = match item.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split(',').collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().ok_or_else(|| (key, NodeProblem::NotStrings(v.to_string()))))
            .collect::<Result<_, _>>()?,
        Some(v) => return Err((key, NodeProblem::NotAStringOrStrings(v.to_string()))),
    };
    Ok(names.into_iter().map(str::trim).filter(|s| !s.is_empty() && *s != "(null)").map(str::to_string).collect())
}

/// The node's state words, upper-case: 22.05 writes the base state (`idle`) in `state`
/// and flags (`DRAIN`, `NOT_RESPONDING`) in `state_flags`; later releases write one
/// list in `state`; text output joins them with `+`.
fn states(item: &Value) -> Result<Vec<String>, Bad> {
    let mut words = strings(item, "state")?;
    words.extend(strings(item, "state_flags")?);
    Ok(words.iter().flat_map(|w| w.split('+')).map(str::to_ascii_uppercase).collect())
}

/// Whether a node in these states takes work: not when Slurm would run nothing on it
/// (down), not new jobs when it drains. Power saving, reservations and reboots leave it in
/// service.
fn service(states: &[String]) -> Service {
    let any = |names: &[&str]| states.iter().any(|s| names.contains(&s.as_str()));
    if any(&["DOWN", "NOT_RESPONDING", "FUTURE", "INVAL", "INVALID", "INVALID_REG"]) {
        Service::Down
    } else if any(&["DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"]) {
        Service::Drained
    } else {
        Service::InService
    }
}

/// What a node's GRES make of its cards.
#[derive(Debug, PartialEq)]
struct Gpus {
    model: String,
    cards: u32,
    sharing: Sharing,
    max_clients: u32,
}

/// One GPU model per node, as gpol's nodes have: a node with cards of two types is an
/// error (dropping either would misstate the cluster). Shards are time-slicing and MPS
/// shares are MPS, both with `max_clients` = shares per card.
fn gpus(gres: &gres::Configured) -> Result<Gpus, NodeProblem> {
    let typed: Vec<&(String, u64)> = gres.gpus.iter().filter(|(_, n)| *n > 0).collect();
    let (model, cards) = match typed.as_slice() {
        [] => return Ok(Gpus { model: String::new(), cards: 0, sharing: Sharing::Exclusive, max_clients: 1 }),
        [(t, n)] => (if t.is_empty() { "gpu".to_string() } else { gpol_compiler::models::name(t) }, *n),
        several => return Err(NodeProblem::GpuTypes(several.iter().map(|&t| t.clone()).collect())),
    };
    let cards =
        u32::try_from(cards).ok().filter(|&c| c <= MAX_CARDS_PER_NODE).ok_or(NodeProblem::TooManyGpus(cards))?;
    let per_card = |what: &'static str, shares: u64| {
        let n = (shares / u64::from(cards)).max(1);
        (u32::try_from(n).ok().filter(|&n| n <= MAX_CLIENTS_PER_CARD)).ok_or(NodeProblem::TooManyShares {
            what,
            shares,
            per_card: n,
        })
    };
    let (sharing, max_clients) = match (gres.shards, gres.mps) {
        (0, 0) => (Sharing::Exclusive, 1),
        (shards, 0) => (Sharing::Timeslice, per_card("shard", shards)?),
        (0, mps) => (Sharing::Mps, per_card("mps share", mps)?),
        _ => return Err(NodeProblem::BothShardsAndMps),
    };
    Ok(Gpus { model, cards, sharing, max_clients })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus_of(text: &str) -> Result<Gpus, String> {
        let configured = gres::configured(text).map_err(|e| e.to_string())?;
        gpus(&configured).map_err(|e| e.to_string())
    }

    fn node(fields: &str) -> String {
        format!(r#"{{"nodes": [{{"name": "n1", "cpus": 8, "real_memory": 1024{fields}}}]}}"#)
    }

    /// An error as the simulator and the loop print it: where, then what.
    fn said(e: &BadNodes) -> String {
        let field = e.field().map_or(String::new(), |f| format!("field `{f}`: "));
        format!("{field}{e}")
    }

    #[test]
    fn gres_strings_give_cards_and_model() {
        let g = gpus_of("gpu:a100:8(S:0-1)").expect("typed");
        assert_eq!((g.model.as_str(), g.cards, g.sharing, g.max_clients), ("a100", 8, Sharing::Exclusive, 1));
        assert_eq!(gpus_of("gpu:8").expect("untyped").model, "gpu");
        assert_eq!(gpus_of("gpu").expect("bare").cards, 1);
        assert_eq!(gpus_of("gpu:H100").expect("type, no count").model, "h100");
        assert_eq!(gpus_of("gpu:a100_80g:4").expect("a site's own type").model, "a100", "through the model table");
        assert_eq!(gpus_of("gpu:nvidia_h100_80gb_hbm3:8").expect("the product as a type").model, "h100");
        // The same type bound to two sockets, and commas inside the socket list.
        assert_eq!(gpus_of("gpu:a100:4(S:0),gpu:a100:4(S:1)").expect("split").cards, 8);
        assert_eq!(gpus_of("gpu:4(S:0,2),nic:2").expect("parens").cards, 4);
        assert_eq!(gpus_of("gpu:8,shard:1K").expect("suffix").max_clients, 128);
        assert_eq!(gpus_of("gpu:1g.5gb").expect("a type that starts with a digit").model, "1g.5gb");
        for none in ["", "(null)", "nic:2", "gpu:0"] {
            assert_eq!(gpus_of(none).expect("no gpus").cards, 0, "{none}");
        }
    }

    #[test]
    fn counts_over_their_limits_are_refused_never_read_as_types() {
        assert_eq!(gpus_of("gpu:1G").expect_err("too many"), "1073741824 GPUs: too large, at most 64");
        assert_eq!(gpus_of("gpu:99999P").expect_err("overflows"), "`gpu:99999P`: `99999P` is too large a count");
        assert_eq!(gpus_of("gpu:65").expect_err("too many"), "65 GPUs: too large, at most 64");
        assert!(gpus_of("gpu:1,shard:1G").expect_err("shares").contains("per GPU is too large, at most 1024"));
        let e = read(&node(r#", "gres": "gpu:1G""#)).expect_err("gres");
        assert_eq!(e.field(), Some("gres"));
        let e = read(r#"{"nodes": [{"name": "n1", "cpus": 100000000, "real_memory": 1}]}"#).expect_err("cpus");
        assert_eq!(e.field(), Some("cpus"));
        assert!(e.to_string().contains("too large, at most 100000"), "{e}");
    }

    #[test]
    fn shards_time_slice_and_mps_shares_cards() {
        // As Slurm 22.05 prints them (simulator/tests/slurm/capture.sh).
        let g = gpus_of("gpu:h100:4,shard:h100:16").expect("shards");
        assert_eq!((g.cards, g.sharing, g.max_clients), (4, Sharing::Timeslice, 4));
        let g = gpus_of("gpu:2,mps:200").expect("mps");
        assert_eq!((g.cards, g.sharing, g.max_clients), (2, Sharing::Mps, 100));
        assert!(gpus_of("gpu:2,shard:4,mps:200").expect_err("both").contains("one way of sharing"));
    }

    #[test]
    fn bad_gres_says_why() {
        // Slurm 22.05 prints a node with two types like this.
        let e = gpus_of("gpu:a100:2,gpu:h100:2,shard:a100:4,shard:h100:4").expect_err("two types");
        assert!(e.contains("more than one type (2 a100, 2 h100)"), "{e}");
        assert!(gpus_of("gpu:a100:eight").expect_err("count").contains("`eight` is not a count"));
        assert!(gpus_of("gpu:a:b:1").is_err());
        assert!(gpus_of("gpu:99999999999").expect_err("too many").contains("too large, at most 64"));
    }

    #[test]
    fn states_decide_whether_nodes_take_work() {
        let service = |fields: &str| read(&node(fields)).expect("node")[0].service;
        assert_eq!(service(r#", "state": "idle", "state_flags": []"#), Service::InService);
        assert_eq!(service(r#", "state": "idle", "state_flags": ["DRAIN"]"#), Service::Drained);
        assert_eq!(service(r#", "state": "mixed", "state_flags": ["DRAIN"]"#), Service::Drained);
        assert_eq!(service(r#", "state": "down", "state_flags": ["DRAIN"]"#), Service::Down);
        assert_eq!(service(r#", "state": "unknown", "state_flags": ["NOT_RESPONDING"]"#), Service::Down);
        assert_eq!(service(r#", "state": "idle", "state_flags": ["POWERED_DOWN"]"#), Service::InService);
        // Later releases: one list; text output: `+`.
        assert_eq!(service(r#", "state": ["IDLE", "DRAIN"]"#), Service::Drained);
        assert_eq!(service(r#", "state": "DOWN+NOT_RESPONDING""#), Service::Down);
        assert_eq!(service(r#", "state": "future""#), Service::Down);
    }

    #[test]
    fn nodes_map_cpus_memory_and_labels() {
        let text = node(r#", "gres": "gpu:a100:8", "features": "a100,nvlink", "partitions": ["gpu", "all"]"#);
        assert!(is_node_list(&text));
        let nodes = read(&text).expect("node");
        let n = &nodes[0].spec;
        assert_eq!((n.cpu_milli, n.mem, n.cards, n.model.as_str()), (8000, 1024 << 20, 8, "a100"));
        let label = |k: &str| n.labels.iter().any(|(key, v)| key == k && v == "true");
        assert!(label("slurm.feature/nvlink") && label("slurm.partition/all"), "{:?}", n.labels);
        // Later releases' numbers and feature lists.
        let text = r#"{"nodes": [{"name": "n1", "cpus": {"set": true, "number": 4},
            "real_memory": {"set": true, "number": 2}, "features": ["x"]}]}"#;
        let n = &read(text).expect("node")[0].spec;
        assert_eq!((n.cpu_milli, n.mem, n.labels.len()), (4000, 2 << 20, 1));
    }

    #[test]
    fn nodes_listed_twice_are_read_once() {
        let text = r#"{"nodes": [
            {"name": "a", "cpus": 1, "real_memory": 1, "partitions": ["p1"], "state": "down"},
            {"name": "a", "cpus": 1, "real_memory": 1, "partitions": ["p2"], "state": "down"},
            {"name": "b", "cpus": 1, "real_memory": 1}]}"#;
        let nodes = read(text).expect("nodes");
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].spec.labels.len(), 2);
        assert_eq!(nodes.iter().filter(|n| n.service != Service::InService).count(), 1);
    }

    #[test]
    fn bad_node_lists_name_the_line_node_and_field() {
        let e = read("{\"nodes\": [").expect_err("not json");
        assert_eq!(e.line(), Some(1));
        assert!(e.to_string().starts_with("not JSON"), "{e}");
        let e = read("{\"meta\": {}}").expect_err("no nodes");
        assert_eq!(e.field(), Some("nodes"));
        assert!(read("{\"nodes\": []}").expect_err("empty").to_string().contains("no nodes"));
        // As `sinfo --json` of Slurm 22.05 prints it while slurmctld is down (and exits 0).
        let down = r#"{"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}"#;
        assert_eq!(
            said(&read(down).expect_err("errors")),
            "field `errors`: Slurm answered with errors, not the nodes: Unspecified error (error -1)"
        );
        let e = read(r#"{"nodes": [{"cpus": 1}]}"#).expect_err("no name");
        assert_eq!(said(&e), "field `name`: item 0: missing or not a string");
        let e = read(r#"{"nodes": [{"name": "x", "cpus": "many", "real_memory": 1}]}"#).expect_err("bad cpus");
        assert_eq!(said(&e), "field `cpus`: node `x`: expected a whole number, found \"many\"");
        let e = read(r#"{"nodes": [{"name": "x", "cpus": -1, "real_memory": 1}]}"#).expect_err("negative");
        assert_eq!(e.field(), Some("cpus"));
        let e = read(r#"{"nodes": [{"name": "x", "cpus": 1}]}"#).expect_err("no memory");
        assert_eq!(said(&e), "field `real_memory`: node `x`: missing");
        let e = read(&node(r#", "gres": 8"#)).expect_err("gres type");
        assert_eq!(e.field(), Some("gres"));
        let e = read(&node(r#", "features": [1]"#)).expect_err("features");
        assert_eq!(e.field(), Some("features"));
        let e = read(r#"{"nodes": [{"name": "x", "cpus": 1, "real_memory": 18446744073709551615}]}"#)
            .expect_err("overflow");
        assert!(e.to_string().contains("too large"), "{e}");
    }
}
