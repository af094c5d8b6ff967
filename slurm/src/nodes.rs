//! `slurm-nodes.conf`: the cluster's nodes as `slurm.conf` node lines carrying what the
//! policy says of them — `Weight=` from its static scores (Slurm fills the lowest weight
//! first, so the nodes the policy scores best come first whenever Slurm places a job by
//! itself), `Features=` from GPU models and labels (for `--constraint`), and each node's
//! CPUs, memory and GPUs (`gpu`, and `shard`/`mps` for shared cards) as gpol models them.
//!
//! A score is static when it reads the node alone and only what does not change while
//! the cluster runs (no job, no free cards, no queue): its value is the node's for every
//! job. Scores that read anything else are listed, not used.

use gpol_compiler::engine::{CompiledPolicy, NodeResult, add_score};
use gpol_compiler::interp::{self, Roots};
use gpol_compiler::ir::{Kind, Node};
use gpol_compiler::schema::{Root, Storage};
use gpol_compiler::spec::{NodeSpec, Sharing};
use gpol_runtime::Scheduler;
use gpol_runtime::SpecError;
use std::cmp::Ordering;

/// The fragment, and what went into the weights.
pub struct Fragment {
    pub text: String,
    /// Scores the weights come from.
    pub static_scores: Vec<String>,
    /// Scores that depend on the job or the cluster's state (the loop applies them).
    pub other_scores: Vec<String>,
}

/// Why the nodes cannot be written as node lines.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeLinesError {
    /// A name slurm.conf cannot hold.
    Unwritable { node: String },
    /// A node gpol's model refuses (a field past its limits).
    Unmodelled { node: String, error: SpecError },
}

impl std::fmt::Display for NodeLinesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeLinesError::Unwritable { node } => write!(f, "node name {node:?} cannot be written in slurm.conf"),
            NodeLinesError::Unmodelled { node, error } => write!(f, "node {node}: {error}"),
        }
    }
}

impl std::error::Error for NodeLinesError {}

/// Whether a rule body reads only the node, and only what does not change as it runs.
pub fn node_static(n: &Node) -> bool {
    match &n.kind {
        Kind::Num(_) | Kind::Bool(_) | Kind::Str(_) | Kind::Enum(_) | Kind::Local(_) => true,
        Kind::Root(r) => *r == Root::Node,
        Kind::Field { base, record, field } => {
            let storage = record.fields().get(usize::from(*field)).map(|f| f.storage);
            matches!(storage, Some(Storage::Static | Storage::Derived)) && node_static(base)
        }
        Kind::Domain { node, .. } => node_static(node),
        Kind::Label { labels, .. } => node_static(labels),
        Kind::Mig { counts, profile } => node_static(counts) && node_static(profile),
        Kind::Not(a) | Kind::Neg(a) | Kind::IsSome(a) | Kind::Unwrap(a) | Kind::Len(a) => node_static(a),
        Kind::Bin(_, a, b) | Kind::Let(_, a, b) => node_static(a) && node_static(b),
        Kind::If(a, b, c) => node_static(a) && node_static(b) && node_static(c),
        Kind::ListLit(items) | Kind::Call(_, items) => items.iter().all(node_static),
        Kind::Loop { list, body, .. } => node_static(list) && node_static(body),
        Kind::Attr { .. } | Kind::Input(_) => false,
    }
}

/// A word Slurm reads as one feature or name: letters, digits, `_`, `-` and `.`.
fn word(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).collect()
}

/// The node lines for `nodes` under `policy`; `file` is where the nodes were read.
pub fn emit(policy: &CompiledPolicy, nodes: &[NodeSpec], file: &str) -> Result<Fragment, NodeLinesError> {
    if let Some(n) = nodes.iter().find(|n| n.name.is_empty() || word(&n.name) != n.name) {
        return Err(NodeLinesError::Unwritable { node: n.name.clone() });
    }
    let program = &policy.program;
    let (fixed, other): (Vec<_>, Vec<_>) = program.scores.iter().partition(|r| node_static(&r.body.node));
    let mut s = Scheduler::new(policy.clone());
    for n in nodes {
        s.add_node(n).map_err(|error| NodeLinesError::Unmodelled { node: n.name.clone(), error })?;
    }
    let view = s.view(None);
    let ctx = s.ctx(&view);
    let results: Vec<NodeResult> = s
        .node_records()
        .iter()
        .map(|rec| {
            let roots = Roots { node: Some(rec), ..Roots::default() };
            let mut r = NodeResult::default();
            for rule in &fixed {
                add_score(rule, interp::eval(&rule.body, &ctx, &roots).f(), &mut r);
            }
            r
        })
        .collect();
    // Best first: higher tiers, then the higher weighted sum; equal nodes share a weight.
    let better = |a: &NodeResult, b: &NodeResult| {
        let key = |r: &NodeResult| r.tiers.iter().copied().chain([r.score]).collect::<Vec<f64>>();
        key(b).partial_cmp(&key(a)).unwrap_or(Ordering::Equal)
    };
    let mut order: Vec<usize> = (0..results.len()).collect();
    order.sort_by(|&a, &b| better(&results[a], &results[b]));
    let mut weight = vec![1u32; results.len()];
    for w in order.windows(2) {
        let next = weight[w[0]] + u32::from(better(&results[w[0]], &results[w[1]]) != Ordering::Equal);
        weight[w[1]] = next;
    }
    let names = |rules: &[&gpol_compiler::ir::Rule]| rules.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    let (static_scores, other_scores) = (names(&fixed), names(&other));
    let mut text = format!(
        "# Node lines for slurm.conf (`Include` this file) for policy {}, generated by `gpolc slurm emit`\n\
         # from {}. Do not edit: regenerate. Weight= ranks the nodes by the policy's static scores\n\
         # (Slurm fills the lowest weight first): {}.\n",
        policy.policy.name,
        crate::lua::comment(file),
        if static_scores.is_empty() { "none, so every node weighs 1".to_string() } else { static_scores.join(", ") }
    );
    if !other_scores.is_empty() {
        text.push_str(&format!(
            "# Scores that read the job or the cluster's state, which `gpolc slurm run` applies: {}.\n",
            other_scores.join(", ")
        ));
    }
    for (n, w) in nodes.iter().zip(&weight) {
        let model = word(&n.model);
        let mut gres = vec![format!("gpu:{model}:{}", n.cards)];
        match n.sharing {
            Sharing::Timeslice => gres.push(format!("shard:{}", n.cards * n.max_clients)),
            Sharing::Mps => gres.push(format!("mps:{}", n.cards * n.max_clients)),
            Sharing::Exclusive | Sharing::Mig => {}
        }
        if n.cards == 0 {
            gres.clear();
        }
        let mut features = vec![model];
        for (k, v) in &n.labels {
            match k.strip_prefix("slurm.feature/") {
                Some(f) => features.push(word(f)),
                None if k.starts_with("slurm.partition/") => {}
                None => features.push(word(&format!("{k}-{v}"))),
            }
        }
        features.dedup();
        let mut line = format!(
            "NodeName={} CPUs={} RealMemory={} Weight={w} Features={}",
            n.name,
            n.cpu_milli / 1000,
            n.mem >> 20,
            features.join(",")
        );
        if !gres.is_empty() {
            line.push_str(&format!(" Gres={}", gres.join(",")));
        }
        text.push_str(&line);
        text.push('\n');
    }
    Ok(Fragment { text, static_scores, other_scores })
}
