//! A Kubernetes `Node` as gpol's node: one mapping, used by `gpolc sim`'s kubectl
//! importer and by the extender alike. GPUs are the allocatable `nvidia.com/gpu` (or,
//! under the MIG "mixed" strategy, `nvidia.com/mig-<profile>` instances); the model and
//! card memory come from GPU feature discovery's `nvidia.com/gpu.product` and
//! `nvidia.com/gpu.memory` labels, time-slicing or MPS from
//! `nvidia.com/gpu.sharing-strategy` and `nvidia.com/gpu.replicas`, the zone from
//! `topology.kubernetes.io/zone`. A cordoned node (`spec.unschedulable`) is marked so.

use crate::FieldError;
use crate::quantity::quantity;
use gpol_compiler::limits::{self, MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_MEMORY_BYTES};
use gpol_compiler::schema::MIG_PROFILES;
use gpol_compiler::spec::{NodeSpec, Sharing};
use serde_json::Value;

/// The node label that names its GPU model (GPU feature discovery's); a ResourceFlavor
/// of one model selects nodes by it.
pub const MODEL_LABEL: &str = "nvidia.com/gpu.product";

/// A node as gpol sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct MappedNode {
    /// Without topology domains: which levels count is the policy's business.
    pub spec: NodeSpec,
    /// Its topology, by level name.
    pub topology: Vec<(String, String)>,
    /// `spec.unschedulable`: no new work goes there.
    pub cordoned: bool,
}

/// The node's name (`metadata.name`).
pub fn name(item: &Value) -> Result<&str, FieldError> {
    item.pointer("/metadata/name").and_then(Value::as_str).ok_or_else(|| FieldError::new("metadata.name", "missing"))
}

/// Maps one `Node` object; errors name the field and the node.
pub fn node(item: &Value) -> Result<MappedNode, FieldError> {
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
    let amount = |key: &str| -> Result<Option<f64>, FieldError> {
        match raw(key) {
            None => Ok(None),
            Some(text) => quantity(&text)
                .map(Some)
                .ok_or_else(|| err(&format!("status.allocatable.{key}"), format!("`{text}` is not a quantity"))),
        }
    };
    // Counts are whole and within their limits: never rounded, never clamped.
    let counted = |key: &str, max: u64| -> Result<Option<u32>, FieldError> {
        let field = format!("status.allocatable.{key}");
        match amount(key)? {
            None => Ok(None),
            Some(v) => {
                limits::whole(v, &raw(key).unwrap_or_default(), max).map(|n| Some(n as u32)).map_err(|m| err(&field, m))
            }
        }
    };
    let labelled = |key: &str, max: u64| -> Result<Option<u32>, FieldError> {
        let field = format!("metadata.labels.{key}");
        label(key).map(|t| limits::count(t, max).map(|n| n as u32).map_err(|m| err(&field, m))).transpose()
    };
    let cpu = amount("cpu")?.unwrap_or(0.0);
    let cpu_milli =
        limits::within_cores(cpu, &raw("cpu").unwrap_or_default()).map_err(|m| err("status.allocatable.cpu", m))?;
    let mem = amount("memory")?.unwrap_or(0.0).round();
    let mem = limits::within_bytes(mem, &raw("memory").unwrap_or_default())
        .map_err(|m| err("status.allocatable.memory", m))?;
    // Under time-slicing the plugin advertises each card once per replica.
    let shares = u64::from(MAX_CARDS_PER_NODE) * u64::from(MAX_CLIENTS_PER_CARD);
    let whole = counted("nvidia.com/gpu", shares)?.unwrap_or(0);
    // MIG (mixed strategy): each card's instances, from the per-profile totals (at most
    // seven per card).
    let mut instances: Vec<(u8, u32)> = Vec::new();
    for (p, profile) in MIG_PROFILES.iter().enumerate() {
        let key = format!("nvidia.com/mig-{profile}");
        if let Some(n) = counted(&key, 7 * u64::from(MAX_CARDS_PER_NODE))?.filter(|&n| n >= 1) {
            instances.push((p as u8, n));
        }
    }
    let count = labelled("nvidia.com/gpu.count", u64::from(MAX_CARDS_PER_NODE))?;
    let (cards, sharing, mig, max_clients) = if !instances.is_empty() {
        let cards = count.unwrap_or(1).max(1);
        let layout: Vec<u8> =
            instances.iter().flat_map(|&(p, n)| std::iter::repeat_n(p, (n / cards) as usize)).collect();
        (cards, Sharing::Mig, vec![layout], 1)
    } else {
        let replicas = labelled("nvidia.com/gpu.replicas", u64::from(MAX_CLIENTS_PER_CARD))?.unwrap_or(1).max(1);
        let strategy = label("nvidia.com/gpu.sharing-strategy").unwrap_or("none");
        // Under sharing the plugin advertises `replicas` per card.
        let shared = replicas > 1 && matches!(strategy, "time-slicing" | "mps");
        let cards = if shared { count.unwrap_or(whole / replicas) } else { whole };
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
    let model = label(MODEL_LABEL).unwrap_or(if cards > 0 { "gpu" } else { "" }).to_string();
    let card_mib = labelled("nvidia.com/gpu.memory", MAX_MEMORY_BYTES >> 20)?;
    let card_mem = card_mib.map_or(0, |mib| u64::from(mib) << 20);
    let topology =
        label("topology.kubernetes.io/zone").map(|z| vec![("zone".to_string(), z.to_string())]).unwrap_or_default();
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
    })
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
