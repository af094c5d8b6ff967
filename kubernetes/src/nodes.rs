//! A Kubernetes `Node` as gpol's node: one mapping, used by `gpolc sim`'s kubectl
//! importer and by the extender alike. It reads what NVIDIA's GPU operator publishes
//! (device plugin resources, GPU feature discovery labels):
//!
//! - GPUs: `nvidia.com/gpu`; under time-slicing or MPS (`nvidia.com/gpu.sharing-strategy`,
//!   `nvidia.com/gpu.replicas`; `nvidia.com/gpu.shared` when renamed) each card is
//!   advertised once per replica and becomes one shared card; the physical count is
//!   `nvidia.com/gpu.count`.
//! - MIG, mixed strategy: `nvidia.com/mig-<profile>` instances, laid out on the
//!   `nvidia.com/gpu.count` cards as they fit the GPU's table ([`gpol_compiler::mig`]).
//! - MIG, single strategy (`nvidia.com/mig.strategy: single`, a product ending in
//!   `-MIG-<profile>`): `nvidia.com/gpu` counts instances of that one profile, each card
//!   holding as many as fit (`nvidia.com/gpu.count` counts the instances too there).
//! - The model from `nvidia.com/gpu.product` through gpol's model table
//!   ([`gpol_compiler::models`]), the card memory from `nvidia.com/gpu.memory` (MiB; under
//!   the single strategy it is the instance's, so the GPU table gives the card's).
//! - Topology levels from label keys ([`TOPOLOGY_KEYS`] by default; adapters may pass
//!   their own), the NVLink clique included.
//! - CPU and memory as Kubernetes counts them ([`crate::quantity`]): milli-cores and
//!   bytes, finer values rounded up, with a warning.
//!
//! What cannot be mapped is a warning naming the node and the field, never dropped
//! silently, and so are labels the advertised resources contradict (a count against
//! what the device plugin advertises, a MIG strategy against the resources), naming
//! both. A cordoned node (`spec.unschedulable`) is marked so.

use crate::FieldError;
use crate::quantity::{Quantity, bytes, milli_cores, read, whole_count};
use gpol_compiler::limits::{self, MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_MEMORY_BYTES};
use gpol_compiler::spec::{NodeSpec, Sharing};
use gpol_compiler::{mig, models};
use serde_json::Value;

/// The node label that names its GPU model (GPU feature discovery's); a ResourceFlavor
/// of one model selects nodes by it.
pub const MODEL_LABEL: &str = "nvidia.com/gpu.product";

/// Topology levels and the node labels they come from, by default: the well-known zone
/// and region, GKE's blocks, NVIDIA's NVLink clique (`<cluster uuid>.<clique id>`).
pub const TOPOLOGY_KEYS: &[(&str, &str)] = &[
    ("region", "topology.kubernetes.io/region"),
    ("zone", "topology.kubernetes.io/zone"),
    ("block", "cloud.google.com/gce-topology-block"),
    ("subblock", "cloud.google.com/gce-topology-subblock"),
    ("nvlink", "nvidia.com/gpu.clique"),
];

/// A node as gpol sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct MappedNode {
    /// Without topology domains: which levels count is the policy's business.
    pub spec: NodeSpec,
    /// Its topology, by level name.
    pub topology: Vec<(String, String)>,
    /// `spec.unschedulable`: no new work goes there.
    pub cordoned: bool,
    /// What was read with a loss, each naming the node and field.
    pub warnings: Vec<FieldError>,
}

/// The node's name (`metadata.name`).
pub fn name(item: &Value) -> Result<&str, FieldError> {
    item.pointer("/metadata/name").and_then(Value::as_str).ok_or_else(|| FieldError::new("metadata.name", "missing"))
}

/// Maps one `Node` object with the default topology keys; errors name the field and the
/// node.
pub fn node(item: &Value) -> Result<MappedNode, FieldError> {
    node_with(item, TOPOLOGY_KEYS)
}

/// Maps one `Node` object, its topology levels read from `topology_keys` (level, label).
pub fn node_with<L: AsRef<str>, K: AsRef<str>>(
    item: &Value,
    topology_keys: &[(L, K)],
) -> Result<MappedNode, FieldError> {
    let name = name(item)?.to_string();
    let err = |field: &str, m: String| FieldError::new(field, format!("node `{name}`: {m}"));
    let labels: Vec<(String, String)> = item
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    let label = |k: &str| labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let resources = item.pointer("/status/allocatable").or_else(|| item.pointer("/status/capacity"));
    // A resource as written, for messages.
    let raw = |key: &str| {
        resources.and_then(|r| r.get(key)).map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
    };
    // A resource read as the API server reads it; `None` when the node has none.
    let amount = |key: &str| -> Result<Option<(Quantity, String)>, FieldError> {
        let Some(text) = raw(key) else { return Ok(None) };
        read(&text).map(|q| Some((q, text))).map_err(|m| err(&format!("status.allocatable.{key}"), m.to_string()))
    };
    // Counts are whole and within their limits: never rounded, never clamped.
    let counted = |key: &str, max: u64| -> Result<Option<u32>, FieldError> {
        let field = format!("status.allocatable.{key}");
        amount(key)?.map(|(q, text)| whole_count(&q, &text, max).map_err(|m| err(&field, m.to_string()))).transpose()
    };
    let labelled = |key: &str, max: u64| -> Result<Option<u32>, FieldError> {
        let field = format!("metadata.labels.{key}");
        label(key).map(|t| limits::count(t, max).map(|n| n as u32).map_err(|m| err(&field, m.to_string()))).transpose()
    };
    let mut warnings = Vec::new();
    let mut warn = |field: &str, m: String| warnings.push(FieldError::new(field, format!("node `{name}`: {m}")));
    let cpu_milli = match amount("cpu")? {
        None => 0,
        Some((q, text)) => {
            let field = "status.allocatable.cpu";
            let milli = milli_cores(&q, &text).map_err(|m| err(field, m.to_string()))?;
            if !q.is_whole_milli() {
                warn(
                    field,
                    format!("`{text}` is finer than a milli-core: Kubernetes counts it as {milli}m, and so does gpol"),
                );
            }
            milli
        }
    };
    let mem = match amount("memory")? {
        None => 0,
        Some((q, text)) => {
            let field = "status.allocatable.memory";
            let bytes = bytes(&q, &text).map_err(|m| err(field, m.to_string()))?;
            if !q.is_whole() {
                warn(
                    field,
                    format!("`{text}` is not a whole number of bytes: Kubernetes counts {bytes}, and so does gpol"),
                );
            }
            bytes
        }
    };
    let product = label(MODEL_LABEL).map(models::normalise);
    let card_mib = labelled("nvidia.com/gpu.memory", MAX_MEMORY_BYTES >> 20)?;
    // Without GPU feature discovery's memory label, the memory the product name gives.
    let named_mem = product.as_ref().and_then(|m| m.memory_gb).map_or(0, |gb| u64::from(gb) << 30);
    let mut card_mem = card_mib.map_or(named_mem, |mib| u64::from(mib) << 20);
    let count = labelled("nvidia.com/gpu.count", u64::from(MAX_CARDS_PER_NODE) * 7)?;
    // Under time-slicing the plugin advertises each card once per replica.
    let shares = u64::from(MAX_CARDS_PER_NODE) * u64::from(MAX_CLIENTS_PER_CARD);
    let whole = counted("nvidia.com/gpu", shares)?.unwrap_or(0);
    let renamed = counted("nvidia.com/gpu.shared", shares)?.unwrap_or(0);
    let model = product.as_ref().map(|m| m.name.clone());
    // MIG, mixed strategy: instances per profile, `+me` variants (`mig-1g.10gb.me`) read
    // as their base profile.
    let mut instances: Vec<(u8, u32)> = Vec::new();
    for (key, _) in resources.and_then(Value::as_object).into_iter().flatten() {
        let Some(profile) = key.strip_prefix("nvidia.com/mig-") else { continue };
        let field = format!("status.allocatable.{key}");
        let Some(n) = counted(key, 7 * u64::from(MAX_CARDS_PER_NODE))?.filter(|&n| n >= 1) else { continue };
        let base = profile.strip_suffix(".me").unwrap_or(profile);
        match mig::profile(base) {
            Some(p) => {
                if base != profile {
                    warn(&field, format!("media-extension instances are modelled as {base}"));
                }
                instances.push((p, n));
            }
            None => {
                warn(&field, format!("{n} instances of `{profile}`, a MIG profile gpol has no table for: left out"))
            }
        }
    }
    let single = product.as_ref().and_then(|m| m.mig_profile.clone());
    strategy_contradictions(label("nvidia.com/mig.strategy"), &instances, single.as_deref(), whole, &mut warn);
    let (cards, sharing, mig, max_clients) = if !instances.is_empty() {
        if whole > 0 {
            let m = format!(
                "{whole} GPUs without MIG beside MIG instances: gpol gives a node one sharing mode, so they are left out"
            );
            warn("status.allocatable.nvidia.com/gpu", m);
        }
        match mixed_layout(&instances, model.as_deref().unwrap_or("gpu"), card_mem, count, &mut warn) {
            (0, _) => (0, Sharing::Exclusive, Vec::new(), 1),
            (cards, layouts) => (cards, Sharing::Mig, layouts, 1),
        }
    } else if let Some(profile) = single.filter(|_| whole > 0) {
        // Single strategy: `nvidia.com/gpu` counts instances of the product's profile;
        // every card holds as many as fit.
        let field = format!("metadata.labels.{MODEL_LABEL}");
        let model_name = model.clone().unwrap_or_else(|| "gpu".into());
        let named_gb = product.as_ref().and_then(|m| m.memory_gb);
        match mig::profile(&profile).map(|p| (p, mig::gpu_for_profile(&model_name, named_gb, p))) {
            Some((p, Some(gpu))) => {
                let per_card = u32::from(gpu.slot(p).map_or(1, |s| s.max)).max(1);
                let cards = whole.div_ceil(per_card);
                // Under the single strategy GPU feature discovery counts the MIG devices,
                // as the device plugin does.
                if let Some(c) = count.filter(|&c| c != whole) {
                    let m = format!(
                        "{c} MIG devices by `nvidia.com/gpu.count`, but `nvidia.com/gpu` is {whole} {profile} \
                         instances: {whole} assumed, on {cards} GPUs of {per_card}"
                    );
                    warn("metadata.labels.nvidia.com/gpu.count", m);
                }
                let layouts = (0..cards).map(|c| vec![p; (whole - c * per_card).min(per_card) as usize]).collect();
                card_mem = u64::from(gpu.memory_gb) << 30;
                (cards, Sharing::Mig, one_if_alike(layouts), 1)
            }
            _ => {
                warn(
                    &field,
                    format!("the MIG profile `{profile}` has no table in gpol: its {whole} instances are left out"),
                );
                (0, Sharing::Exclusive, Vec::new(), 1)
            }
        }
    } else {
        let replicas = labelled("nvidia.com/gpu.replicas", u64::from(MAX_CLIENTS_PER_CARD))?.unwrap_or(1).max(1);
        let strategy = label("nvidia.com/gpu.sharing-strategy").unwrap_or("none");
        // Under sharing the plugin advertises `replicas` per card (as `nvidia.com/gpu.shared`
        // when it renames shared resources).
        let shared = replicas > 1 && matches!(strategy, "time-slicing" | "mps");
        let advertised = whole.max(renamed);
        let cards = if shared { count.unwrap_or(advertised / replicas) } else { whole };
        if shared && count.is_none() && advertised % replicas != 0 {
            let m = format!("{advertised} shares of {replicas} replicas each: {} cards assumed", advertised / replicas);
            warn("status.allocatable.nvidia.com/gpu", m);
        }
        // GPU feature discovery's physical count against what the device plugin
        // advertises: each card `replicas` times under sharing, once otherwise (fewer
        // when some are unhealthy, which is no contradiction).
        let key = if renamed > whole { "nvidia.com/gpu.shared" } else { "nvidia.com/gpu" };
        match count {
            Some(c) if shared && u64::from(c) * u64::from(replicas) != u64::from(advertised) => {
                let m = format!(
                    "{c} GPUs by `nvidia.com/gpu.count` × {replicas} by `nvidia.com/gpu.replicas` are {} shares, \
                     but `{key}` is {advertised}: {c} cards of {replicas} clients assumed",
                    u64::from(c) * u64::from(replicas)
                );
                warn("metadata.labels.nvidia.com/gpu.count", m);
            }
            Some(c) if !shared && whole > c => {
                let m = format!(
                    "{c} GPUs by `nvidia.com/gpu.count`, but `nvidia.com/gpu` is {whole}: more GPUs than the node \
                     has (shared without a `nvidia.com/gpu.sharing-strategy` label?); {whole} cards assumed"
                );
                warn("metadata.labels.nvidia.com/gpu.count", m);
            }
            _ => {}
        }
        if !shared && renamed > 0 {
            warn(
                "status.allocatable.nvidia.com/gpu.shared",
                format!("{renamed} shared GPUs but no sharing strategy label: left out"),
            );
        }
        let sharing = match (shared, strategy) {
            (true, "mps") => Sharing::Mps,
            (true, _) => Sharing::Timeslice,
            _ => Sharing::Exclusive,
        };
        (cards, sharing, Vec::new(), if shared { replicas } else { 1 })
    };
    if cards > MAX_CARDS_PER_NODE {
        let m = format!("{cards} cards: too large, at most {MAX_CARDS_PER_NODE}");
        return Err(err("status.allocatable.nvidia.com/gpu", m));
    }
    if let Some(m) = product.as_ref().filter(|m| !m.known) {
        let raw = label(MODEL_LABEL).unwrap_or_default();
        warn(
            &format!("metadata.labels.{MODEL_LABEL}"),
            format!("`{raw}` is not in gpol's model table: read as `{}`", m.name),
        );
    }
    let model = model.unwrap_or_else(|| if cards > 0 { "gpu".into() } else { String::new() });
    let topology: Vec<(String, String)> = topology_keys
        .iter()
        .filter_map(|(level, key)| Some((level.as_ref().to_string(), label(key.as_ref())?.to_string())))
        .collect();
    let cordoned = item.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true);
    Ok(MappedNode {
        spec: NodeSpec {
            name,
            model,
            cards,
            card_mem,
            sharing,
            mig,
            max_clients,
            cpu_milli,
            mem,
            domains: Vec::new(),
            labels,
        },
        topology,
        cordoned,
        warnings,
    })
}

/// Warnings for a `nvidia.com/mig.strategy` label the advertised resources contradict:
/// the resources decide how the node is read, the warning names both.
fn strategy_contradictions(
    strategy: Option<&str>,
    instances: &[(u8, u32)],
    single: Option<&str>,
    whole: u32,
    warn: &mut impl FnMut(&str, String),
) {
    let field = "metadata.labels.nvidia.com/mig.strategy";
    match strategy {
        Some("single") if !instances.is_empty() => {
            let listed: Vec<String> = instances.iter().map(|(p, n)| format!("{n} {}", mig::name(*p))).collect();
            let m = format!(
                "`single`, but the node advertises MIG instances by profile ({}), as the mixed strategy does: read as mixed",
                listed.join(", ")
            );
            warn(field, m);
        }
        Some("single") if single.is_none() && whole > 0 => {
            let m = format!(
                "`single`, but `{MODEL_LABEL}` names no MIG profile: its {whole} `nvidia.com/gpu` are read as whole GPUs"
            );
            warn(field, m);
        }
        Some("mixed") if instances.is_empty() && whole > 0 => {
            if let Some(profile) = single {
                let m = format!(
                    "`mixed`, but `nvidia.com/gpu` is {whole} instances of the product's profile {profile}, as the single strategy advertises them: read as single"
                );
                warn(field, m);
            }
        }
        _ => {}
    }
}

/// Lays MIG instances (profile, count) out on a node's cards: largest first, the cards
/// taken in turn, each instance on the first from there where it still fits the GPU's
/// table; on `count` cards when GPU feature discovery gives it (else as few as hold
/// them). What fits nowhere is a warning.
fn mixed_layout(
    instances: &[(u8, u32)],
    model: &str,
    card_mem: u64,
    count: Option<u32>,
    warn: &mut impl FnMut(&str, String),
) -> (u32, Vec<Vec<u8>>) {
    let field = "status.allocatable";
    let profiles: Vec<u8> = instances.iter().map(|(p, _)| *p).collect();
    let gpu = match mig::gpu_for(model, card_mem, &profiles) {
        Ok(g) => g,
        Err(m) => {
            warn(field, format!("{m}: its MIG instances are left out"));
            return (0, Vec::new());
        }
    };
    let mut order: Vec<(u8, u32)> = instances.to_vec();
    order.sort_by_key(|(p, _)| std::cmp::Reverse(gpu.slot(*p).map_or(0, |s| s.memory)));
    let limit = count.unwrap_or(MAX_CARDS_PER_NODE) as usize;
    let mut cards: Vec<Vec<u8>> = vec![Vec::new(); count.unwrap_or(0) as usize];
    // Round the cards (MIG manager gives every card the same layout): instance k of a
    // profile tries card k first, then the next ones.
    let mut next = 0;
    for (p, n) in order {
        let mut left_out = 0;
        for _ in 0..n {
            let k = cards.len().max(1);
            let fits =
                (0..cards.len()).map(|i| (next + i) % k).find(|&i| gpu.fits(&[cards[i].as_slice(), &[p]].concat()));
            next = fits.map_or(next, |i| i + 1);
            match fits {
                Some(i) => cards[i].push(p),
                None if cards.len() < limit => cards.push(vec![p]),
                None => left_out += 1,
            }
        }
        if left_out > 0 {
            let m = format!(
                "{left_out} of {n} {} instances do not fit on {} {} {} GB cards: left out",
                mig::name(p),
                cards.len(),
                gpu.model,
                gpu.memory_gb
            );
            warn(&format!("{field}.nvidia.com/mig-{}", mig::name(p)), m);
        }
    }
    // Cards GPU feature discovery counts but no instance was found on: MIG-enabled and
    // empty, they take no job.
    let empty = cards.iter().filter(|c| c.is_empty()).count();
    if empty > 0 {
        warn(
            "metadata.labels.nvidia.com/gpu.count",
            format!("{empty} cards have no MIG instance advertised: left out"),
        );
        cards.retain(|c| !c.is_empty());
    }
    (cards.len() as u32, one_if_alike(cards))
}

/// Per-card layouts as one for every card when they are all alike.
fn one_if_alike(mut layouts: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    if layouts.windows(2).all(|w| w[0] == w[1]) {
        layouts.truncate(1);
    }
    layouts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One node whose allocatable resources are `resources` (JSON members).
    fn one(resources: &str) -> Value {
        let text =
            format!(r#"{{"kind": "Node", "metadata": {{"name": "n"}}, "status": {{"allocatable": {{{resources}}}}}}}"#);
        serde_json::from_str(&text).expect("test node")
    }

    /// A node with these labels and allocatable resources (JSON members).
    fn labelled(labels: &str, resources: &str) -> Value {
        let text = format!(
            r#"{{"kind": "Node", "metadata": {{"name": "n", "labels": {{{labels}}}}}, "status": {{"allocatable": {{"cpu": "64", {resources}}}}}}}"#
        );
        serde_json::from_str(&text).expect("test node")
    }

    fn p(name: &str) -> u8 {
        mig::profile(name).expect("a profile")
    }

    fn messages(n: &MappedNode) -> Vec<String> {
        n.warnings.iter().map(|w| format!("{}: {}", w.field, w.message)).collect()
    }

    #[test]
    fn mig_single_strategy_counts_instances_of_the_products_profile_on_physical_cards() {
        // 8 H100s with MIG manager's all-1g.10gb, as GPU feature discovery labels them.
        let n = node(&labelled(
            r#""nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
               "nvidia.com/gpu.count": "56", "nvidia.com/gpu.memory": "9984""#,
            r#""nvidia.com/gpu": "56""#,
        ))
        .expect("maps");
        let s = &n.spec;
        assert_eq!((s.model.as_str(), s.cards, s.sharing, s.card_mem), ("h100", 8, Sharing::Mig, 80 << 30));
        assert_eq!(s.mig, vec![vec![p("1g.10gb"); 7]]);
        assert!(n.warnings.is_empty(), "{:?}", messages(&n));
        // An A100 40 GB's 1g.10gb spans two memory slices: four to a card.
        let a = node(&labelled(
            r#""nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.10gb""#,
            r#""nvidia.com/gpu": "8""#,
        ))
        .expect("maps");
        assert_eq!((a.spec.cards, a.spec.mig.clone(), a.spec.card_mem), (2, vec![vec![p("1g.10gb"); 4]], 40 << 30));
    }

    #[test]
    fn mig_mixed_strategy_lays_every_instance_out_on_the_cards() {
        // 8 A100 40 GB with all-balanced: 2×1g.5gb, 2g.10gb, 3g.20gb per card.
        let n = node(&labelled(
            r#""nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
               "nvidia.com/gpu.count": "8", "nvidia.com/gpu.memory": "40960""#,
            r#""nvidia.com/mig-1g.5gb": "16", "nvidia.com/mig-2g.10gb": "8", "nvidia.com/mig-3g.20gb": "8""#,
        ))
        .expect("maps");
        assert_eq!((n.spec.model.as_str(), n.spec.cards), ("a100", 8));
        assert_eq!(n.spec.mig, vec![vec![p("3g.20gb"), p("2g.10gb"), p("1g.5gb"), p("1g.5gb")]]);
        assert!(n.warnings.is_empty(), "{:?}", messages(&n));
        // Three 3g.40gb on two H100s: two on one card, one on the other (not two in all).
        let h100 = r#""nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.memory": "81559""#;
        let three = node(&labelled(h100, r#""nvidia.com/mig-3g.40gb": "3""#)).expect("maps");
        assert_eq!(three.spec.mig, vec![vec![p("3g.40gb"), p("3g.40gb")], vec![p("3g.40gb")]]);
        assert!(three.warnings.is_empty(), "{:?}", messages(&three));
        // What cannot fit is said, not dropped silently; so are media extensions.
        let five = node(&labelled(h100, r#""nvidia.com/mig-3g.40gb": "5""#)).expect("maps");
        assert_eq!(
            messages(&five),
            [
                "status.allocatable.nvidia.com/mig-3g.40gb: node `n`: 1 of 5 3g.40gb instances do not fit on 2 h100 80 GB cards: left out"
            ]
        );
        let me =
            node(&labelled(h100, r#""nvidia.com/mig-3g.40gb": "3", "nvidia.com/mig-1g.10gb.me": "1""#)).expect("maps");
        assert_eq!(me.spec.mig, vec![vec![p("3g.40gb"), p("3g.40gb")], vec![p("3g.40gb"), p("1g.10gb")]]);
        assert_eq!(
            messages(&me),
            [
                "status.allocatable.nvidia.com/mig-1g.10gb.me: node `n`: media-extension instances are modelled as 1g.10gb"
            ]
        );
    }

    #[test]
    fn shared_cards_come_from_replicas_and_topology_from_label_keys() {
        let labels = r#""nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED", "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "topology.kubernetes.io/zone": "z1", "nvidia.com/gpu.clique": "7b968a6d.1", "example.com/rack": "r7""#;
        let n = node(&labelled(labels, r#""nvidia.com/gpu": "32""#)).expect("maps");
        let s = &n.spec;
        assert_eq!((s.model.as_str(), s.cards, s.sharing, s.max_clients), ("h100", 8, Sharing::Timeslice, 4));
        assert_eq!(
            n.topology,
            [("zone".to_string(), "z1".to_string()), ("nvlink".to_string(), "7b968a6d.1".to_string())]
        );
        let racked =
            node_with(&labelled(labels, r#""nvidia.com/gpu": "32""#), &[("rack", "example.com/rack")]).expect("maps");
        assert_eq!(racked.topology, [("rack".to_string(), "r7".to_string())]);
        // renameByDefault: the shares are `nvidia.com/gpu.shared`, under MPS here.
        let renamed = node(&labelled(
            r#""nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps""#,
            r#""nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "16""#,
        ))
        .expect("maps");
        assert_eq!((renamed.spec.model.as_str(), renamed.spec.cards, renamed.spec.sharing), ("l4", 4, Sharing::Mps));
        let odd = node(&labelled(r#""nvidia.com/gpu.product": "Acme-X9""#, r#""nvidia.com/gpu": "2""#)).expect("maps");
        assert_eq!(
            messages(&odd),
            [
                "metadata.labels.nvidia.com/gpu.product: node `n`: `Acme-X9` is not in gpol's model table: read as `acme-x9`"
            ]
        );
    }

    #[test]
    fn count_labels_that_contradict_the_advertised_gpus_are_warnings_naming_both() {
        let l4 = r#""nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "time-slicing""#;
        // Time-slicing: 8 cards of 4 replicas are 32 shares; the plugin advertises 30.
        let ts = node(&labelled(&format!(r#"{l4}, "nvidia.com/gpu.count": "8""#), r#""nvidia.com/gpu": "30""#))
            .expect("maps");
        assert_eq!((ts.spec.cards, ts.spec.max_clients, ts.spec.sharing), (8, 4, Sharing::Timeslice));
        assert_eq!(
            messages(&ts),
            [
                "metadata.labels.nvidia.com/gpu.count: node `n`: 8 GPUs by `nvidia.com/gpu.count` × 4 by `nvidia.com/gpu.replicas` are 32 shares, but `nvidia.com/gpu` is 30: 8 cards of 4 clients assumed"
            ]
        );
        let agreed = node(&labelled(&format!(r#"{l4}, "nvidia.com/gpu.count": "8""#), r#""nvidia.com/gpu": "32""#))
            .expect("maps");
        assert!(agreed.warnings.is_empty(), "{:?}", messages(&agreed));
        // Renamed shares are counted against the count too.
        let renamed = node(&labelled(
            &format!(r#"{l4}, "nvidia.com/gpu.count": "2""#),
            r#""nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "12""#,
        ))
        .expect("maps");
        assert_eq!(
            messages(&renamed),
            [
                "metadata.labels.nvidia.com/gpu.count: node `n`: 2 GPUs by `nvidia.com/gpu.count` × 4 by `nvidia.com/gpu.replicas` are 8 shares, but `nvidia.com/gpu.shared` is 12: 2 cards of 4 clients assumed"
            ]
        );
        // MIG single: GPU feature discovery counts the MIG devices, the plugin advertises 28.
        let single = node(&labelled(
            r#""nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
               "nvidia.com/gpu.count": "56""#,
            r#""nvidia.com/gpu": "28""#,
        ))
        .expect("maps");
        assert_eq!((single.spec.cards, single.spec.sharing), (4, Sharing::Mig));
        assert_eq!(
            messages(&single),
            [
                "metadata.labels.nvidia.com/gpu.count: node `n`: 56 MIG devices by `nvidia.com/gpu.count`, but `nvidia.com/gpu` is 28 1g.10gb instances: 28 assumed, on 4 GPUs of 7"
            ]
        );
        // Whole GPUs: more advertised than the node has.
        let more = node(&labelled(
            r#""nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2""#,
            r#""nvidia.com/gpu": "8""#,
        ))
        .expect("maps");
        assert_eq!(more.spec.cards, 8);
        assert_eq!(
            messages(&more),
            [
                "metadata.labels.nvidia.com/gpu.count: node `n`: 2 GPUs by `nvidia.com/gpu.count`, but `nvidia.com/gpu` is 8: more GPUs than the node has (shared without a `nvidia.com/gpu.sharing-strategy` label?); 8 cards assumed"
            ]
        );
        // Fewer advertised than counted is an unhealthy GPU, not a contradiction.
        let fewer = node(&labelled(
            r#""nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8""#,
            r#""nvidia.com/gpu": "7""#,
        ))
        .expect("maps");
        assert!(fewer.warnings.is_empty(), "{:?}", messages(&fewer));
    }

    #[test]
    fn a_mig_strategy_label_the_resources_contradict_is_a_warning() {
        let single_but_mixed = node(&labelled(
            r#""nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
               "nvidia.com/gpu.count": "1""#,
            r#""nvidia.com/mig-3g.20gb": "2""#,
        ))
        .expect("maps");
        assert_eq!(single_but_mixed.spec.mig, vec![vec![p("3g.20gb"), p("3g.20gb")]]);
        assert_eq!(
            messages(&single_but_mixed),
            [
                "metadata.labels.nvidia.com/mig.strategy: node `n`: `single`, but the node advertises MIG instances by profile (2 3g.20gb), as the mixed strategy does: read as mixed"
            ]
        );
        let mixed_but_single = node(&labelled(
            r#""nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb""#,
            r#""nvidia.com/gpu": "7""#,
        ))
        .expect("maps");
        assert_eq!((mixed_but_single.spec.cards, mixed_but_single.spec.sharing), (1, Sharing::Mig));
        assert_eq!(
            messages(&mixed_but_single),
            [
                "metadata.labels.nvidia.com/mig.strategy: node `n`: `mixed`, but `nvidia.com/gpu` is 7 instances of the product's profile 1g.10gb, as the single strategy advertises them: read as single"
            ]
        );
        let single_without_profile = node(&labelled(
            r#""nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3""#,
            r#""nvidia.com/gpu": "8""#,
        ))
        .expect("maps");
        assert_eq!((single_without_profile.spec.cards, single_without_profile.spec.sharing), (8, Sharing::Exclusive));
        assert_eq!(
            messages(&single_without_profile),
            [
                "metadata.labels.nvidia.com/mig.strategy: node `n`: `single`, but `nvidia.com/gpu.product` names no MIG profile: its 8 `nvidia.com/gpu` are read as whole GPUs"
            ]
        );
    }

    #[test]
    fn cpu_and_memory_finer_than_kubernetes_counts_round_up_as_it_does_and_say_so() {
        let n = node(&one(r#""cpu": "1.0001", "memory": "1.1Gi""#)).expect("maps");
        // Kubernetes' MilliValue and Value round up: 1001m, and 1.1 × 2^30 = 1181116006.4 bytes.
        assert_eq!((n.spec.cpu_milli, n.spec.mem), (1001, 1_181_116_007));
        assert_eq!(
            messages(&n),
            [
                "status.allocatable.cpu: node `n`: `1.0001` is finer than a milli-core: Kubernetes counts it as 1001m, and so does gpol",
                "status.allocatable.memory: node `n`: `1.1Gi` is not a whole number of bytes: Kubernetes counts 1181116007, and so does gpol",
            ]
        );
        let micro = node(&one(r#""cpu": "100u""#)).expect("maps");
        assert_eq!(micro.spec.cpu_milli, 1, "100u is 0.1m: counted as 1m");
        let exact = node(&one(r#""cpu": "191500m", "memory": "2113442540Ki""#)).expect("maps");
        assert_eq!((exact.spec.cpu_milli, exact.spec.mem), (191_500, 2_113_442_540 * 1024));
        assert!(exact.warnings.is_empty(), "{:?}", messages(&exact));
        // `1E` is exa, `1E3` a thousand: the first is far too many cores.
        assert_eq!(node(&one(r#""cpu": "1E3""#)).expect("maps").spec.cpu_milli, 1_000_000);
        let e = node(&one(r#""cpu": "1E""#)).expect_err("10^18 cores");
        assert!(e.message.contains("`1E` is too large, at most 100000 cores"), "{e}");
        let e = node(&one(r#""memory": "-1Gi""#)).expect_err("negative");
        assert_eq!(e.message, "node `n`: `-1Gi` is negative");
    }

    #[test]
    fn oversized_and_fractional_counts_are_refused_not_clamped() {
        let cases = [
            (r#""nvidia.com/gpu": "1e12""#, "status.allocatable.nvidia.com/gpu", "is too large, at most 65536"),
            (r#""nvidia.com/gpu": "2.7""#, "status.allocatable.nvidia.com/gpu", "expected a whole number"),
            (r#""nvidia.com/gpu": "100""#, "status.allocatable.nvidia.com/gpu", "too large, at most 64"),
            (r#""cpu": "1e300""#, "status.allocatable.cpu", "is too large, at most 100000 cores"),
            (r#""memory": "1e30""#, "status.allocatable.memory", "is too large, at most 64TiB"),
            (r#""nvidia.com/mig-1g.10gb": "1e18""#, "status.allocatable.nvidia.com/mig-1g.10gb", "is too large"),
            (r#""cpu": "many""#, "status.allocatable.cpu", "`many` is not a quantity"),
            (r#""cpu": "1e400""#, "status.allocatable.cpu", "`1e400` is too large, at most 100000 cores"),
            (r#""nvidia.com/gpu": "1.0000000001""#, "status.allocatable.nvidia.com/gpu", "expected a whole number"),
        ];
        for (resources, field, message) in cases {
            let e = node(&one(resources)).expect_err(resources);
            assert_eq!(e.field, field, "{e}");
            assert!(e.message.contains(message), "{resources}: {e}");
            assert!(e.message.starts_with("node `n`: "), "{e}");
        }
        let ok = node(&one(r#""nvidia.com/gpu": "8", "cpu": "64""#)).expect("a valid node");
        assert_eq!((ok.spec.cards, ok.spec.cpu_milli), (8, 64_000));
        let e = node(&serde_json::json!({"kind": "Node"})).expect_err("no name");
        assert_eq!(e.field, "metadata.name");
    }
}
