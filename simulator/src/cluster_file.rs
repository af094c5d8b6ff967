//! Cluster specs: the TOML format users write (node pools and timed node events), and
//! the node list every importer produces.

use crate::input::{self, InputError};
use crate::prices::Prices;
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_NODES};
use gpol_compiler::schema::{EnumKind, MIG_PROFILES};
use gpol_compiler::spec::{NodeSpec, Sharing};
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};

/// A cluster to simulate: its nodes, and what happens to them over time.
#[derive(Clone, Debug, Default)]
pub struct ClusterSpec {
    pub name: String,
    pub nodes: Vec<NodeDef>,
    pub events: Vec<NodeEvent>,
    /// What a GPU-hour of each model costs (none: the report has no cost).
    pub prices: Prices,
    /// What an importer read with a loss (a MIG instance that fits no card, a model
    /// gpol's table does not know), each naming the file, node and field.
    pub warnings: Vec<InputError>,
}

impl ClusterSpec {
    /// Sets prices per GPU-hour (`model`, price) from `origin` (`--price`); a model no
    /// node has is a warning naming `origin`.
    pub fn add_prices(&mut self, prices: &[(String, f64)], origin: &str) -> Result<(), InputError> {
        let mut added = Prices::default();
        for (model, price) in prices {
            added.set(model, *price).map_err(|m| InputError::new(origin, None, Some(model), m.to_string()))?;
            self.prices.set(model, *price).map_err(|m| InputError::new(origin, None, Some(model), m.to_string()))?;
        }
        self.warn_unmatched(&added, origin, |_| None);
        Ok(())
    }

    /// A warning for each model `prices` names that no node has.
    fn warn_unmatched(&mut self, prices: &Prices, origin: &str, line: impl Fn(&str) -> Option<usize>) {
        let models: Vec<&str> = self.nodes.iter().map(|n| n.spec.model.as_str()).collect();
        for key in prices.unmatched(&models) {
            let m = format!("no node has GPU model `{key}`: its price is not used");
            self.warnings.push(InputError::new(origin, line(key), Some(key), m));
        }
    }

    /// Adds topology levels from node labels: `(level, key)` makes each node's value of
    /// label `key` its domain at `level` (replacing what the importer gave). A key no
    /// node has is a warning naming `origin`.
    pub fn add_label_levels(&mut self, keys: &[(String, String)], origin: &str) {
        for (level, key) in keys {
            let mut found = false;
            for n in &mut self.nodes {
                if let Some((_, value)) = n.spec.labels.iter().find(|(k, _)| k == key) {
                    n.topology.retain(|(l, _)| l != level);
                    n.topology.push((level.clone(), value.clone()));
                    found = true;
                }
            }
            if !found {
                let m = format!("no node has the label `{key}`: level `{level}` is empty");
                self.warnings.push(InputError::new(origin, None, None, m));
            }
        }
    }

    /// Adds topology read from elsewhere (a Slurm `topology.conf`): each named node's
    /// domains, replacing levels of the same name. Nodes the topology leaves out, and
    /// names it has that the cluster does not, are warnings naming `file`.
    pub fn add_topology(&mut self, topology: &BTreeMap<String, Vec<(String, String)>>, file: &str) {
        let mut outside = Vec::new();
        for n in &mut self.nodes {
            match topology.get(&n.spec.name) {
                Some(domains) => {
                    n.topology.retain(|(level, _)| !domains.iter().any(|(l, _)| l == level));
                    n.topology.extend(domains.iter().cloned());
                }
                None => outside.push(n.spec.name.as_str()),
            }
        }
        let some = |names: &[&str]| {
            let shown: Vec<&str> = names.iter().take(3).copied().collect();
            let more = if names.len() > 3 { format!(" and {} more", names.len() - 3) } else { String::new() };
            format!("{}{more}", shown.join(", "))
        };
        if !outside.is_empty() {
            let m = format!(
                "{} nodes are in no domain of it (each is its own domain at every level): {}",
                outside.len(),
                some(&outside)
            );
            self.warnings.push(InputError::new(file, None, None, m));
        }
        let unknown: Vec<&str> =
            topology.keys().filter(|k| !self.nodes.iter().any(|n| &n.spec.name == *k)).map(String::as_str).collect();
        if !unknown.is_empty() {
            let m = format!("{} nodes it names are not in the cluster: {}", unknown.len(), some(&unknown));
            self.warnings.push(InputError::new(file, None, None, m));
        }
    }
}

/// One node, with its topology by level name (the policy decides which levels it reads).
#[derive(Clone, Debug)]
pub struct NodeDef {
    pub spec: NodeSpec,
    pub topology: Vec<(String, String)>,
}

impl NodeDef {
    /// The runtime's node description for a policy with these topology `levels`.
    pub fn to_spec(&self, levels: &[String]) -> NodeSpec {
        let mut spec = self.spec.clone();
        spec.domains = gpol_compiler::spec::domains_at(&self.topology, levels);
        spec
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeEventKind {
    /// The node fails: its jobs lose their work since the last checkpoint and wait again.
    Fail,
    /// The node takes no new work; running jobs finish.
    Drain,
    /// The node is back in service.
    Restore,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeEvent {
    pub at_ms: u64,
    pub node: String,
    pub kind: NodeEventKind,
}

impl ClusterSpec {
    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.spec.cards)).sum()
    }

    /// Topology levels some node names.
    pub fn levels(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for n in &self.nodes {
            for (l, _) in &n.topology {
                if !seen.contains(l) {
                    seen.push(l.clone());
                }
            }
        }
        seen
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<String>,
    #[serde(default, rename = "pool")]
    pools: Vec<toml::Spanned<RawPool>>,
    #[serde(default, rename = "event")]
    events: Vec<toml::Spanned<RawEvent>>,
    /// Price per GPU-hour by model; `default` for every model without its own.
    #[serde(default)]
    prices: BTreeMap<toml::Spanned<String>, f64>,
}

/// A number, or a string with a unit.
#[derive(Deserialize, Clone)]
#[serde(untagged)]
enum Quantity {
    Number(f64),
    Text(String),
}

impl Quantity {
    fn text(&self) -> String {
        match self {
            Quantity::Number(n) => n.to_string(),
            Quantity::Text(t) => t.clone(),
        }
    }
}

/// How a pool's nodes group at one topology level: `n` consecutive nodes per domain, or
/// one named domain for the whole pool.
#[derive(Deserialize)]
#[serde(untagged)]
enum Grouping {
    Size(u32),
    Name(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPool {
    name: String,
    #[serde(default = "one")]
    count: u32,
    #[serde(default)]
    gpu_model: String,
    #[serde(default)]
    gpus: u32,
    gpu_mem: Option<Quantity>,
    sharing: Option<String>,
    #[serde(default)]
    mig: MigLayouts,
    max_clients: Option<u32>,
    cpu: Option<Quantity>,
    mem: Option<Quantity>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    topology: BTreeMap<String, Grouping>,
}

fn one() -> u32 {
    1
}

/// A pool's MIG instances: one layout for every card (`[3g.40gb, 3g.40gb]`) or one per
/// card (`[[3g.40gb, 3g.40gb], [7g.80gb]]`).
#[derive(Deserialize)]
#[serde(untagged)]
enum MigLayouts {
    Every(Vec<String>),
    PerCard(Vec<Vec<String>>),
}

impl Default for MigLayouts {
    fn default() -> MigLayouts {
        MigLayouts::Every(Vec::new())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: Quantity,
    node: String,
    kind: String,
}

/// Reads a TOML cluster spec; `file` names it in errors.
pub fn parse_toml(text: &str, file: &str) -> Result<ClusterSpec, InputError> {
    let raw: RawSpec = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| input::Lines::new(text).line_of(s.start));
        InputError::new(file, line, None, e.message().to_string())
    })?;
    let mut spec = ClusterSpec { name: raw.name.unwrap_or_else(|| file.to_string()), ..ClusterSpec::default() };
    let mut names = HashSet::new();
    let lines = input::Lines::new(text);
    for pool in &raw.pools {
        let line = Some(lines.line_of(pool.span().start));
        let err = |field: &str, msg: String| InputError::new(file, line, Some(field), msg);
        let p = pool.get_ref();
        let total = spec.nodes.len() as u64 + u64::from(p.count);
        if total > u64::from(MAX_NODES) {
            return Err(err("count", format!("{total} nodes in the cluster: too large, at most {MAX_NODES}")));
        }
        for node in pool_nodes(p).map_err(|(f, m)| err(f, m))? {
            if !names.insert(node.spec.name.clone()) {
                return Err(err("name", format!("node `{}` is defined twice", node.spec.name)));
            }
            spec.nodes.push(node);
        }
    }
    for event in &raw.events {
        let line = Some(lines.line_of(event.span().start));
        let err = |field: &str, msg: String| InputError::new(file, line, Some(field), msg);
        let e = event.get_ref();
        let at_ms = input::millis(&e.at.text()).map_err(|m| err("at", m.to_string()))?;
        if !names.contains(&e.node) {
            return Err(err("node", format!("no node is named `{}`", e.node)));
        }
        let kind = match e.kind.as_str() {
            "fail" => NodeEventKind::Fail,
            "drain" => NodeEventKind::Drain,
            "restore" => NodeEventKind::Restore,
            other => return Err(err("kind", format!("expected fail, drain or restore, found `{other}`"))),
        };
        spec.events.push(NodeEvent { at_ms, node: e.node.clone(), kind });
    }
    if spec.nodes.is_empty() {
        return Err(InputError::new(file, None, Some("pool"), "the cluster has no nodes: add a [[pool]]"));
    }
    for (model, &price) in &raw.prices {
        let line = Some(lines.line_of(model.span().start));
        let field = format!("prices.{}", model.get_ref());
        spec.prices
            .set(model.get_ref(), price)
            .map_err(|m| InputError::new(file, line, Some(&field), m.to_string()))?;
    }
    let prices = spec.prices.clone();
    let line_of = |key: &str| raw.prices.keys().find(|k| k.get_ref() == key).map(|k| lines.line_of(k.span().start));
    spec.warn_unmatched(&prices, file, line_of);
    Ok(spec)
}

/// The nodes of one pool, named `<pool>-<i>`.
fn pool_nodes(p: &RawPool) -> Result<Vec<NodeDef>, (&'static str, String)> {
    let sharing = match p.sharing.as_deref() {
        None => Sharing::Exclusive,
        Some(s) => match EnumKind::Sharing.variants().iter().position(|v| *v == s) {
            Some(i) => Sharing::from_enum(i as u8),
            None => {
                return Err((
                    "sharing",
                    format!("expected one of {}, found `{s}`", EnumKind::Sharing.variants().join(", ")),
                ));
            }
        },
    };
    let profile = |m: &String| {
        gpol_compiler::mig::profile(m).ok_or_else(|| {
            (
                "mig",
                format!(
                    "`{m}` is not a MIG profile; docs/schema.md lists every GPU's (e.g. {})",
                    MIG_PROFILES[..6].join(", ")
                ),
            )
        })
    };
    let layout = |l: &Vec<String>| l.iter().map(profile).collect::<Result<Vec<u8>, _>>();
    let mig = match &p.mig {
        MigLayouts::Every(l) if l.is_empty() => Vec::new(),
        MigLayouts::Every(l) => vec![layout(l)?],
        MigLayouts::PerCard(ls) => ls.iter().map(layout).collect::<Result<Vec<_>, _>>()?,
    };
    if p.gpus > MAX_CARDS_PER_NODE {
        return Err(("gpus", format!("{} is too large, at most {MAX_CARDS_PER_NODE}", p.gpus)));
    }
    if let Some(m) = p.max_clients.filter(|&m| m > MAX_CLIENTS_PER_CARD) {
        return Err(("max_clients", format!("{m} is too large, at most {MAX_CLIENTS_PER_CARD}")));
    }
    if p.gpus > 0 && p.gpu_model.is_empty() {
        return Err(("gpu_model", "a pool with GPUs needs a gpu_model".into()));
    }
    // What a pool does not say is the one node model's default.
    let defaults = NodeSpec::default();
    let quantity =
        |q: &Option<Quantity>, field: &'static str, default: u64, f: fn(&str) -> Result<u64, input::QuantityError>| {
            q.as_ref().map_or(Ok(default), |q| f(&q.text())).map_err(|m| (field, m.to_string()))
        };
    let card_mem = quantity(&p.gpu_mem, "gpu_mem", defaults.card_mem, input::bytes)?;
    let cpu_milli = quantity(&p.cpu, "cpu", defaults.cpu_milli, input::milli_cpu)?;
    let mem = quantity(&p.mem, "mem", defaults.mem, input::bytes)?;
    let probe = NodeSpec { model: p.gpu_model.clone(), cards: p.gpus, card_mem, sharing, mig: mig.clone(), ..defaults };
    probe.mig_gpu().map_err(|m| ("mig", m))?;
    for (level, g) in &p.topology {
        if matches!(g, Grouping::Size(0)) {
            return Err(("topology", format!("level `{level}`: a domain holds at least one node")));
        }
    }
    let nodes = (0..p.count)
        .map(|i| {
            let name = format!("{}-{i}", p.name);
            let topology = p
                .topology
                .iter()
                .map(|(level, g)| {
                    let domain = match g {
                        Grouping::Size(n) => format!("{}-{level}{}", p.name, i / n),
                        Grouping::Name(n) => n.clone(),
                    };
                    (level.clone(), domain)
                })
                .collect();
            NodeDef {
                spec: NodeSpec {
                    name,
                    model: p.gpu_model.clone(),
                    cards: p.gpus,
                    card_mem,
                    sharing,
                    mig: mig.clone(),
                    max_clients: p.max_clients.unwrap_or(defaults.max_clients).max(1),
                    cpu_milli,
                    mem,
                    domains: Vec::new(),
                    labels: p.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                },
                topology,
            }
        })
        .collect();
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_expand_to_named_nodes_with_topology() {
        let spec = parse_toml(
            r#"
name = "demo"
[[pool]]
name = "a100"
count = 4
gpu_model = "A100"
gpus = 8
gpu_mem = "80GiB"
cpu = 128
mem = "1TiB"
topology = { rack = 2, zone = "z1" }

[[event]]
at = "2h"
node = "a100-3"
kind = "drain"
"#,
            "c.toml",
        )
        .expect("valid spec");
        assert_eq!(spec.nodes.len(), 4);
        assert_eq!(spec.total_gpus(), 32);
        let n = &spec.nodes[3];
        assert_eq!(n.spec.name, "a100-3");
        assert_eq!(n.spec.card_mem, 80 << 30);
        assert_eq!(n.spec.cpu_milli, 128_000);
        assert_eq!(n.topology, vec![("rack".into(), "a100-rack1".into()), ("zone".into(), "z1".into())]);
        let s = n.to_spec(&["zone".into(), "rack".into()]);
        assert_eq!(s.domains, vec![(1, "a100-rack1".into()), (0, "z1".into())]);
        assert_eq!(
            spec.events,
            vec![NodeEvent { at_ms: 7_200_000, node: "a100-3".into(), kind: NodeEventKind::Drain }]
        );
    }

    #[test]
    fn what_a_pool_leaves_out_is_the_node_models_default() {
        let spec = parse_toml("[[pool]]\nname = \"p\"\ngpu_model = \"t4\"\ngpus = 2\n", "c.toml").expect("valid spec");
        let n = &spec.nodes[0].spec;
        let d = NodeSpec::default();
        assert_eq!((n.card_mem, n.cpu_milli, n.mem, n.max_clients), (d.card_mem, d.cpu_milli, d.mem, d.max_clients));
        assert_eq!((n.model.as_str(), n.cards, n.sharing), ("t4", 2, Sharing::Exclusive));
    }

    #[test]
    fn mig_pools_take_one_layout_or_one_per_card_of_their_gpus_profiles() {
        let pool = |mig: &str| {
            format!(
                "[[pool]]\nname = \"m\"\ngpu_model = \"a100\"\ngpu_mem = \"40GiB\"\ngpus = 2\nsharing = \"mig\"\nmig = {mig}\n"
            )
        };
        let p = |name: &str| gpol_compiler::mig::profile(name).expect("a profile");
        let every = parse_toml(&pool(r#"["3g.20gb", "3g.20gb"]"#), "c.toml").expect("valid spec");
        assert_eq!(every.nodes[0].spec.mig, vec![vec![p("3g.20gb"), p("3g.20gb")]]);
        let per_card = parse_toml(&pool(r#"[["7g.40gb"], ["1g.5gb", "2g.10gb"]]"#), "c.toml").expect("valid spec");
        assert_eq!(per_card.nodes[0].spec.mig, vec![vec![p("7g.40gb")], vec![p("1g.5gb"), p("2g.10gb")]]);
        let e = parse_toml(&pool(r#"["3g.40gb"]"#), "c.toml").expect_err("an 80 GB profile on a 40 GB A100");
        assert_eq!((e.line, e.field.as_deref()), (Some(1), Some("mig")));
        assert!(e.message.contains("a100 (40 GB) has no MIG profile 3g.40gb"), "{e}");
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let text =
            "[[pool]]\nname = \"a\"\ngpus = 2\ngpu_model = \"T4\"\n\n[[pool]]\nname = \"b\"\nsharing = \"magic\"\n";
        let e = parse_toml(text, "c.toml").expect_err("bad input");
        assert_eq!((e.line, e.field.as_deref()), (Some(6), Some("sharing")));
        assert!(e.to_string().starts_with("c.toml:6: field `sharing`: expected one of"), "{e}");
        let e = parse_toml("[[pool]]\nname = \"a\"\ncolour = 1\n", "c.toml").expect_err("bad input");
        assert!(e.to_string().contains("c.toml:3") && e.message.contains("colour"), "{e}");
        let e =
            parse_toml("[[pool]]\nname = \"a\"\ncount = 2\n[[pool]]\nname = \"a\"\n", "c.toml").expect_err("bad input");
        assert!(e.message.contains("defined twice"), "{e}");
        let e = parse_toml("[[pool]]\nname = \"a\"\n[[event]]\nat = 5\nnode = \"b-0\"\nkind = \"fail\"\n", "c.toml")
            .expect_err("bad input");
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("node")));
        assert!(parse_toml("", "c.toml").expect_err("bad input").message.contains("no nodes"));
    }

    #[test]
    fn counts_over_their_limits_are_refused() {
        let pool = |fields: &str| format!("[[pool]]\nname = \"p\"\ngpu_model = \"a100\"\n{fields}\n");
        let cases = [
            ("count = 4294967295", "count", "4294967295 nodes in the cluster: too large, at most 100000"),
            ("gpus = 4294967295", "gpus", "4294967295 is too large, at most 64"),
            ("gpus = 1\nmax_clients = 100000", "max_clients", "100000 is too large, at most 1024"),
            ("cpu = \"1e300\"", "cpu", "is too large, at most 100000 cores"),
        ];
        for (fields, field, message) in cases {
            let e = parse_toml(&pool(fields), "c.toml").expect_err(fields);
            assert_eq!((e.line, e.field.as_deref()), (Some(1), Some(field)), "{e}");
            assert!(e.message.contains(message), "{fields}: {e}");
        }
        let two = format!("{}{}", pool("count = 60000"), pool("count = 60000").replace("\"p\"", "\"q\""));
        let e = parse_toml(&two, "c.toml").expect_err("too many in all");
        assert_eq!(e.line, Some(5), "{e}");
    }
}
