//! Clusters from Slurm: the node list of `sinfo --json` in Slurm 22.05
//! (`{"meta", "errors", "nodes": [...]}`, written by the openapi/v0.0.38 plugin;
//! slurmrestd's `GET /slurm/v0.0.38/nodes` answers the same document). 22.05's scontrol
//! has no `--json`. The `scontrol show nodes --json` of later releases keeps the `nodes`
//! list but writes `state` as a list of flags and some numbers as `{"set", "number"}`
//! objects; those are accepted, but only 22.05 output was tested against a real Slurm.
//!
//! Per node: `cpus`, `real_memory` (MiB), GPUs from `gres` (`gpu:a100:8(S:0-1)`; the model
//! is the GRES type through gpol's model table, `a100_80g` and `nvidia_h100` as `a100` and
//! `h100`, or `gpu` when untyped), sharing from `shard` (time-slicing) or `mps`
//! GRES, `features` and `partitions` as labels, and the state: a drained node starts
//! drained, a down or unresponsive one starts failed. The node JSON carries no topology
//! (topology/tree switches are not in it) and no GPU memory.
//! simulator/tests/slurm/capture.sh captures the test fixture from a real Slurm.

use crate::input::InputError;
use crate::spec::{ClusterSpec, NodeDef, NodeEvent, NodeEventKind};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_CPU_CORES, MAX_MEMORY_BYTES};
use gpol_runtime::model::{NodeSpec, Sharing};
use serde_json::Value;
use std::collections::HashMap;

/// The label a node feature becomes: `slurm.feature/<name>` = `true`.
pub const FEATURE_LABEL: &str = "slurm.feature/";
/// The label a node's partition becomes: `slurm.partition/<name>` = `true`.
pub const PARTITION_LABEL: &str = "slurm.partition/";

/// Whether JSON text looks like a Slurm node list (`sinfo --json`, slurmrestd's nodes,
/// `scontrol show nodes --json`): an object with a `nodes` key near the top.
pub fn is_node_list(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.trim_start().starts_with('{') && head.contains("\"nodes\"")
}

/// What is wrong with one field of a node.
#[derive(Debug, PartialEq)]
struct Bad {
    field: String,
    message: String,
}

fn bad(field: &str, message: impl Into<String>) -> Bad {
    Bad { field: field.to_string(), message: message.into() }
}

/// Reads a Slurm node list; `file` names it in errors. Nodes listed twice (once per
/// partition, as some tools do) are read once, with the labels of every listing.
pub fn parse_nodes(text: &str, file: &str) -> Result<ClusterSpec, InputError> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| InputError::new(file, Some(e.line()), None, format!("not JSON: {e}")))?;
    // slurmctld not answering still gives a document (and `sinfo --json` exits 0): its
    // errors, and no nodes. They are the message, not "no nodes".
    let said = gpol_slurm::errors::messages(root.get("errors").and_then(Value::as_array).map_or(&[], Vec::as_slice));
    if !said.is_empty() {
        let m = format!("Slurm answered with errors, not the nodes: {}", said.join("; "));
        return Err(InputError::new(file, None, Some("errors"), m));
    }
    let items = root.get("nodes").and_then(Value::as_array).ok_or_else(|| {
        InputError::new(file, None, Some("nodes"), "expected a list of nodes (`sinfo --json` output)")
    })?;
    let mut spec = ClusterSpec { name: file.to_string(), ..ClusterSpec::default() };
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let name = match item.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => return Err(InputError::new(file, None, Some("name"), format!("item {i}: missing or not a string"))),
        };
        let (node, event) = read_node(item, &name)
            .map_err(|b| InputError::new(file, None, Some(&b.field), format!("node `{name}`: {}", b.message)))?;
        if let Some(&seen) = index.get(&name) {
            let seen = &mut spec.nodes[seen];
            for label in node.spec.labels {
                if !seen.spec.labels.contains(&label) {
                    seen.spec.labels.push(label);
                }
            }
            continue;
        }
        if let Some(kind) = event {
            spec.events.push(NodeEvent { at_ms: 0, node: name.clone(), kind });
        }
        index.insert(name, spec.nodes.len());
        spec.nodes.push(node);
    }
    if spec.nodes.is_empty() {
        return Err(InputError::new(file, None, Some("nodes"), "the node list has no nodes"));
    }
    Ok(spec)
}

/// One node, and how it starts if not in service.
fn read_node(item: &Value, name: &str) -> Result<(NodeDef, Option<NodeEventKind>), Bad> {
    let cpus = required_count(item, "cpus")?;
    if cpus > MAX_CPU_CORES {
        return Err(bad("cpus", format!("{cpus} is too large, at most {MAX_CPU_CORES}")));
    }
    let mem_mib = required_count(item, "real_memory")?;
    let mem = mem_mib.checked_mul(1 << 20).filter(|&b| b <= MAX_MEMORY_BYTES).ok_or_else(|| {
        bad("real_memory", format!("{mem_mib} MiB is too large, at most {} MiB", MAX_MEMORY_BYTES >> 20))
    })?;
    let gres_text = match item.get("gres") {
        None | Some(Value::Null) => "",
        Some(v) => v.as_str().ok_or_else(|| bad("gres", format!("expected a string, found {v}")))?,
    };
    let gpus = parse_gres(gres_text).and_then(|g| g.gpus()).map_err(|m| bad("gres", m))?;
    let mut labels: Vec<(String, String)> = Vec::new();
    for feature in strings(item, "features")? {
        labels.push((format!("{FEATURE_LABEL}{feature}"), "true".into()));
    }
    for partition in strings(item, "partitions")? {
        labels.push((format!("{PARTITION_LABEL}{partition}"), "true".into()));
    }
    let event = availability(&states(item)?);
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
    Ok((NodeDef { spec, topology: Vec::new() }, event))
}

/// A whole number: plain (22.05), or `{"set": true, "number": n}` (later releases).
fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Object(o) if o.get("set").and_then(Value::as_bool) != Some(false) => o.get("number")?.as_u64(),
        _ => v.as_u64(),
    }
}

fn required_count(item: &Value, key: &str) -> Result<u64, Bad> {
    let v = item.get(key).ok_or_else(|| bad(key, "missing"))?;
    count(v).ok_or_else(|| bad(key, format!("expected a whole number, found {v}")))
}

/// A list of names: a JSON list, or one comma-separated string (22.05's `features`).
/// Absent or null is empty.
fn strings(item: &Value, key: &str) -> Result<Vec<String>, Bad> {
    let names: Vec<&str> = match item.get(key) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s.split(',').collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().ok_or_else(|| bad(key, format!("expected strings, found {v}"))))
            .collect::<Result<_, _>>()?,
        Some(v) => return Err(bad(key, format!("expected a string or a list of strings, found {v}"))),
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

/// How a node in these states starts: unusable (failed) when Slurm would run nothing on
/// it, drained when it takes no new jobs, else in service. Power saving, reservations
/// and reboots leave it in service.
fn availability(states: &[String]) -> Option<NodeEventKind> {
    let any = |names: &[&str]| states.iter().any(|s| names.contains(&s.as_str()));
    if any(&["DOWN", "NOT_RESPONDING", "FUTURE", "INVAL", "INVALID", "INVALID_REG"]) {
        Some(NodeEventKind::Fail)
    } else if any(&["DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING"]) {
        Some(NodeEventKind::Drain)
    } else {
        None
    }
}

/// The GRES of a node that gpol models.
#[derive(Debug, Default, PartialEq)]
struct Gres {
    /// Cards per GPU type (`""` when untyped), in the order listed.
    gpus: Vec<(String, u64)>,
    shards: u64,
    mps: u64,
}

/// What a node's GRES make of its cards.
#[derive(Debug, PartialEq)]
struct Gpus {
    model: String,
    cards: u32,
    sharing: Sharing,
    max_clients: u32,
}

/// Parses a GRES string: comma-separated `name[:type][:count][(S:sockets)]` entries
/// (`gpu:a100:8(S:0-1),shard:a100:32`); counts may carry K/M/G suffixes. GRES other than
/// `gpu`, `shard` and `mps` are ignored.
fn parse_gres(text: &str) -> Result<Gres, String> {
    let mut gres = Gres::default();
    for entry in split_outside_parens(text) {
        let entry = entry.split('(').next().unwrap_or("").trim();
        if entry.is_empty() || entry == "N/A" {
            continue;
        }
        let parts: Vec<&str> = entry.split(':').collect();
        let (kind, kind_type, n) = match parts.as_slice() {
            [kind] => (*kind, "", 1),
            // `gpu:8` counts, `gpu:a100` names a type; a count too large for 64 bits is
            // still a count (`gpu:99999P`), never a type.
            [kind, last] if looks_like_count(last) => {
                (*kind, "", gres_count(last).ok_or_else(|| format!("`{entry}`: `{last}` is too large a count"))?)
            }
            [kind, last] => (*kind, *last, 1),
            [kind, kind_type, last] => {
                (*kind, *kind_type, gres_count(last).ok_or_else(|| format!("`{entry}`: `{last}` is not a count"))?)
            }
            _ => return Err(format!("`{entry}` is not `name[:type]:count`")),
        };
        match kind {
            "gpu" => match gres.gpus.iter_mut().find(|(t, _)| t == kind_type) {
                Some((_, total)) => *total = total.saturating_add(n),
                None => gres.gpus.push((kind_type.to_string(), n)),
            },
            "shard" => gres.shards = gres.shards.saturating_add(n),
            "mps" => gres.mps = gres.mps.saturating_add(n),
            _ => {}
        }
    }
    Ok(gres)
}

/// Splits on commas that are not inside parentheses (`gpu:4(S:0,2),shard:8`).
fn split_outside_parens(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Whether a GRES field is written as a count: digits and at most one suffix letter.
fn looks_like_count(text: &str) -> bool {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && text.len() - digits.len() <= 1
}

/// A GRES count: digits with an optional binary K/M/G/T/P suffix, as slurm.conf takes.
fn gres_count(text: &str) -> Option<u64> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let power = match &text[digits.len()..] {
        "" => 0,
        "K" | "k" => 1,
        "M" | "m" => 2,
        "G" | "g" => 3,
        "T" | "t" => 4,
        "P" | "p" => 5,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64.checked_shl(10 * power)?)
}

impl Gres {
    /// One GPU model per node, as gpol's nodes have: a node with cards of two types is
    /// an error (dropping either would misstate the cluster). Shards are time-slicing
    /// and MPS shares are MPS, both with `max_clients` = shares per card.
    fn gpus(&self) -> Result<Gpus, String> {
        let typed: Vec<&(String, u64)> = self.gpus.iter().filter(|(_, n)| *n > 0).collect();
        let (model, cards) = match typed.as_slice() {
            [] => return Ok(Gpus { model: String::new(), cards: 0, sharing: Sharing::Exclusive, max_clients: 1 }),
            [(t, n)] => (if t.is_empty() { "gpu".to_string() } else { gpol_compiler::models::name(t) }, *n),
            several => {
                let list: Vec<String> =
                    several.iter().map(|(t, n)| format!("{n} {}", if t.is_empty() { "untyped" } else { t })).collect();
                return Err(format!(
                    "GPUs of more than one type ({}): gpol models one GPU model per node; \
                     describe this node in a TOML cluster spec instead",
                    list.join(", ")
                ));
            }
        };
        if cards > u64::from(MAX_CARDS_PER_NODE) {
            return Err(format!("{cards} GPUs: too large, at most {MAX_CARDS_PER_NODE}"));
        }
        let cards = cards as u32;
        let per_card = |what: &str, shares: u64| {
            let n = (shares / u64::from(cards)).max(1);
            u32::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_CLIENTS_PER_CARD)
                .ok_or_else(|| format!("{shares} {what}s: {n} per GPU is too large, at most {MAX_CLIENTS_PER_CARD}"))
        };
        let (sharing, max_clients) = match (self.shards, self.mps) {
            (0, 0) => (Sharing::Exclusive, 1),
            (shards, 0) => (Sharing::Timeslice, per_card("shard", shards)?),
            (0, mps) => (Sharing::Mps, per_card("mps share", mps)?),
            _ => return Err("both shard and mps GRES: gpol models one way of sharing a node's GPUs".into()),
        };
        Ok(Gpus { model, cards, sharing, max_clients })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(gres: &str) -> Result<Gpus, String> {
        parse_gres(gres)?.gpus()
    }

    fn node(fields: &str) -> String {
        format!(r#"{{"nodes": [{{"name": "n1", "cpus": 8, "real_memory": 1024{fields}}}]}}"#)
    }

    #[test]
    fn gres_strings_give_cards_and_model() {
        let g = gpus("gpu:a100:8(S:0-1)").expect("typed");
        assert_eq!((g.model.as_str(), g.cards, g.sharing, g.max_clients), ("a100", 8, Sharing::Exclusive, 1));
        assert_eq!(gpus("gpu:8").expect("untyped").model, "gpu");
        assert_eq!(gpus("gpu").expect("bare").cards, 1);
        assert_eq!(gpus("gpu:H100").expect("type, no count").model, "h100");
        assert_eq!(gpus("gpu:a100_80g:4").expect("a site's own type").model, "a100", "through the model table");
        assert_eq!(gpus("gpu:nvidia_h100_80gb_hbm3:8").expect("the product as a type").model, "h100");
        // The same type bound to two sockets, and commas inside the socket list.
        assert_eq!(gpus("gpu:a100:4(S:0),gpu:a100:4(S:1)").expect("split").cards, 8);
        assert_eq!(gpus("gpu:4(S:0,2),nic:2").expect("parens").cards, 4);
        assert_eq!(gpus("gpu:8,shard:1K").expect("suffix").max_clients, 128);
        assert_eq!(gpus("gpu:1g.5gb").expect("a type that starts with a digit").model, "1g.5gb");
        for none in ["", "(null)", "nic:2", "gpu:0"] {
            assert_eq!(gpus(none).expect("no gpus").cards, 0, "{none}");
        }
    }

    #[test]
    fn counts_over_their_limits_are_refused_never_read_as_types() {
        assert_eq!(gpus("gpu:1G").expect_err("too many"), "1073741824 GPUs: too large, at most 64");
        assert_eq!(gpus("gpu:99999P").expect_err("overflows"), "`gpu:99999P`: `99999P` is too large a count");
        assert_eq!(gpus("gpu:65").expect_err("too many"), "65 GPUs: too large, at most 64");
        assert!(gpus("gpu:1,shard:1G").expect_err("shares").contains("per GPU is too large, at most 1024"));
        let e = parse_nodes(&node(r#", "gres": "gpu:1G""#), "n.json").expect_err("gres");
        assert_eq!(e.field.as_deref(), Some("gres"));
        let e = parse_nodes(r#"{"nodes": [{"name": "n1", "cpus": 100000000, "real_memory": 1}]}"#, "n.json")
            .expect_err("cpus");
        assert_eq!(e.field.as_deref(), Some("cpus"));
        assert!(e.message.contains("too large, at most 100000"), "{e}");
    }

    #[test]
    fn shards_time_slice_and_mps_shares_cards() {
        // As Slurm 22.05 prints them (simulator/tests/slurm/capture.sh).
        let g = gpus("gpu:h100:4,shard:h100:16").expect("shards");
        assert_eq!((g.cards, g.sharing, g.max_clients), (4, Sharing::Timeslice, 4));
        let g = gpus("gpu:2,mps:200").expect("mps");
        assert_eq!((g.cards, g.sharing, g.max_clients), (2, Sharing::Mps, 100));
        assert!(gpus("gpu:2,shard:4,mps:200").expect_err("both").contains("one way of sharing"));
    }

    #[test]
    fn bad_gres_says_why() {
        // Slurm 22.05 prints a node with two types like this.
        let e = gpus("gpu:a100:2,gpu:h100:2,shard:a100:4,shard:h100:4").expect_err("two types");
        assert!(e.contains("more than one type (2 a100, 2 h100)"), "{e}");
        assert!(gpus("gpu:a100:eight").expect_err("count").contains("`eight` is not a count"));
        assert!(gpus("gpu:a:b:1").is_err());
        assert!(gpus("gpu:99999999999").expect_err("too many").contains("too large, at most 64"));
    }

    #[test]
    fn states_decide_how_nodes_start() {
        let start = |fields: &str| parse_nodes(&node(fields), "n.json").expect("node").events;
        let one = |kind| vec![NodeEvent { at_ms: 0, node: "n1".into(), kind }];
        assert_eq!(start(r#", "state": "idle", "state_flags": []"#), vec![]);
        assert_eq!(start(r#", "state": "idle", "state_flags": ["DRAIN"]"#), one(NodeEventKind::Drain));
        assert_eq!(start(r#", "state": "mixed", "state_flags": ["DRAIN"]"#), one(NodeEventKind::Drain));
        assert_eq!(start(r#", "state": "down", "state_flags": ["DRAIN"]"#), one(NodeEventKind::Fail));
        assert_eq!(start(r#", "state": "unknown", "state_flags": ["NOT_RESPONDING"]"#), one(NodeEventKind::Fail));
        assert_eq!(start(r#", "state": "idle", "state_flags": ["POWERED_DOWN"]"#), vec![]);
        // Later releases: one list; text output: `+`.
        assert_eq!(start(r#", "state": ["IDLE", "DRAIN"]"#), one(NodeEventKind::Drain));
        assert_eq!(start(r#", "state": "DOWN+NOT_RESPONDING""#), one(NodeEventKind::Fail));
        assert_eq!(start(r#", "state": "future""#), one(NodeEventKind::Fail));
    }

    #[test]
    fn nodes_map_cpus_memory_and_labels() {
        let text = node(r#", "gres": "gpu:a100:8", "features": "a100,nvlink", "partitions": ["gpu", "all"]"#);
        assert!(is_node_list(&text));
        let spec = parse_nodes(&text, "n.json").expect("node");
        let n = &spec.nodes[0].spec;
        assert_eq!((n.cpu_milli, n.mem, n.cards, n.model.as_str()), (8000, 1024 << 20, 8, "a100"));
        let label = |k: &str| n.labels.iter().any(|(key, v)| key == k && v == "true");
        assert!(label("slurm.feature/nvlink") && label("slurm.partition/all"), "{:?}", n.labels);
        // Later releases' numbers and feature lists.
        let text = r#"{"nodes": [{"name": "n1", "cpus": {"set": true, "number": 4},
            "real_memory": {"set": true, "number": 2}, "features": ["x"]}]}"#;
        let n = &parse_nodes(text, "n.json").expect("node").nodes[0].spec;
        assert_eq!((n.cpu_milli, n.mem, n.labels.len()), (4000, 2 << 20, 1));
    }

    #[test]
    fn nodes_listed_twice_are_read_once() {
        let text = r#"{"nodes": [
            {"name": "a", "cpus": 1, "real_memory": 1, "partitions": ["p1"], "state": "down"},
            {"name": "a", "cpus": 1, "real_memory": 1, "partitions": ["p2"], "state": "down"},
            {"name": "b", "cpus": 1, "real_memory": 1}]}"#;
        let spec = parse_nodes(text, "n.json").expect("nodes");
        assert_eq!(spec.nodes.len(), 2);
        assert_eq!(spec.nodes[0].spec.labels.len(), 2);
        assert_eq!(spec.events.len(), 1);
    }

    #[test]
    fn bad_node_lists_name_the_file_node_and_field() {
        let e = parse_nodes("{\"nodes\": [", "n.json").expect_err("not json");
        assert_eq!(e.line, Some(1));
        assert!(e.message.starts_with("not JSON"), "{e}");
        let e = parse_nodes("{\"meta\": {}}", "n.json").expect_err("no nodes");
        assert_eq!(e.field.as_deref(), Some("nodes"));
        assert!(parse_nodes("{\"nodes\": []}", "n.json").expect_err("empty").message.contains("no nodes"));
        // As `sinfo --json` of Slurm 22.05 prints it while slurmctld is down (and exits 0).
        let down = r#"{"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}"#;
        assert_eq!(
            parse_nodes(down, "`sinfo --json`").expect_err("errors").to_string(),
            "`sinfo --json`: field `errors`: Slurm answered with errors, not the nodes: Unspecified error (error -1)"
        );
        let e = parse_nodes(r#"{"nodes": [{"cpus": 1}]}"#, "n.json").expect_err("no name");
        assert_eq!(e.to_string(), "n.json: field `name`: item 0: missing or not a string");
        let e = parse_nodes(r#"{"nodes": [{"name": "x", "cpus": "many", "real_memory": 1}]}"#, "n.json")
            .expect_err("bad cpus");
        assert_eq!(e.to_string(), "n.json: field `cpus`: node `x`: expected a whole number, found \"many\"");
        let e =
            parse_nodes(r#"{"nodes": [{"name": "x", "cpus": -1, "real_memory": 1}]}"#, "n.json").expect_err("negative");
        assert_eq!(e.field.as_deref(), Some("cpus"));
        let e = parse_nodes(r#"{"nodes": [{"name": "x", "cpus": 1}]}"#, "n.json").expect_err("no memory");
        assert_eq!(e.to_string(), "n.json: field `real_memory`: node `x`: missing");
        let e = parse_nodes(&node(r#", "gres": 8"#), "n.json").expect_err("gres type");
        assert_eq!(e.field.as_deref(), Some("gres"));
        let e = parse_nodes(&node(r#", "features": [1]"#), "n.json").expect_err("features");
        assert_eq!(e.field.as_deref(), Some("features"));
        let e = parse_nodes(r#"{"nodes": [{"name": "x", "cpus": 1, "real_memory": 18446744073709551615}]}"#, "n.json")
            .expect_err("overflow");
        assert!(e.message.contains("too large"), "{e}");
    }

    #[test]
    fn captured_sinfo_json_becomes_a_cluster() {
        // Real `sinfo --json` of Slurm 22.05.8 (simulator/tests/slurm/capture.sh).
        let text = include_str!("../tests/fixtures/slurm/sinfo.json");
        assert!(is_node_list(text));
        let spec = parse_nodes(text, "sinfo.json").expect("fixture");
        let names: Vec<&str> = spec.nodes.iter().map(|n| n.spec.name.as_str()).collect();
        assert_eq!(names, ["a100-1", "a100-2", "cpu-1", "cpu-2", "gpu-1", "h100-1"]);
        assert_eq!(spec.total_gpus(), 8 + 8 + 2 + 4);
        let node = |name: &str| &spec.nodes.iter().find(|n| n.spec.name == name).expect("node").spec;
        let a = node("a100-1");
        assert_eq!((a.model.as_str(), a.cards, a.cpu_milli, a.mem), ("a100", 8, 64_000, 512_000 << 20));
        let h = node("h100-1");
        assert_eq!((h.model.as_str(), h.cards, h.sharing, h.max_clients), ("h100", 4, Sharing::Timeslice, 4));
        assert_eq!((node("gpu-1").model.as_str(), node("gpu-1").cards), ("gpu", 2));
        assert_eq!((node("cpu-1").cards, node("cpu-1").model.as_str()), (0, ""));
        let labels: Vec<&str> = h.labels.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            labels,
            [
                "slurm.feature/h100",
                "slurm.feature/nvlink",
                "slurm.feature/ib",
                "slurm.partition/gpu",
                "slurm.partition/all"
            ]
        );
        let events: Vec<(&str, NodeEventKind)> = spec.events.iter().map(|e| (e.node.as_str(), e.kind)).collect();
        // a100-2 drained idle, cpu-2 down and not responding, gpu-1 draining a job.
        assert_eq!(
            events,
            [("a100-2", NodeEventKind::Drain), ("cpu-2", NodeEventKind::Fail), ("gpu-1", NodeEventKind::Drain)]
        );
        assert!(spec.events.iter().all(|e| e.at_ms == 0));
        assert!(spec.nodes.iter().all(|n| n.topology.is_empty()));
    }
}
