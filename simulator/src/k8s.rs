//! Clusters from Kubernetes: the output of `kubectl get nodes -o json` (a `List` of
//! `Node`s). GPUs are the allocatable `nvidia.com/gpu` (or, under the MIG "mixed"
//! strategy, `nvidia.com/mig-<profile>` instances); the model and card memory come from
//! GPU feature discovery's `nvidia.com/gpu.product` and `nvidia.com/gpu.memory` labels,
//! time-slicing or MPS from `nvidia.com/gpu.sharing-strategy` and
//! `nvidia.com/gpu.replicas`, the zone from `topology.kubernetes.io/zone`. A cordoned
//! node (`spec.unschedulable`) starts drained.

use crate::input::{self, InputError};
use crate::spec::{ClusterSpec, NodeDef, NodeEvent, NodeEventKind};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD, MAX_MEMORY_BYTES};
use gpol_compiler::schema::MIG_PROFILES;
use gpol_runtime::model::{NodeSpec, Sharing};
use serde_json::Value;

/// Whether JSON text looks like `kubectl get nodes -o json` output.
pub fn is_node_list(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.contains("\"kind\"")
        && (head.contains("\"NodeList\"") || head.contains("\"List\"") || head.contains("\"Node\""))
}

/// A Kubernetes quantity (`64`, `500m`, `256Gi`, `1e9`, `263567868Ki`) as a number.
pub fn quantity(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E').unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    let v = value * factor;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// Reads `kubectl get nodes -o json` output.
pub fn parse_nodes(text: &str, file: &str) -> Result<ClusterSpec, InputError> {
    let root: Value = serde_json::from_str(text)
        .map_err(|e| InputError::new(file, Some(e.line()), None, format!("not JSON: {e}")))?;
    let items: Vec<&Value> = match root.get("kind").and_then(Value::as_str) {
        Some("Node") => vec![&root],
        _ => root
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                InputError::new(file, None, Some("items"), "expected a list of nodes (`kubectl get nodes -o json`)")
            })?
            .iter()
            .collect(),
    };
    let mut spec = ClusterSpec { name: file.to_string(), ..ClusterSpec::default() };
    for (i, item) in items.iter().enumerate() {
        let err = |field: &str, m: String| InputError::new(file, None, Some(field), format!("item {i}: {m}"));
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| err("metadata.name", "missing".into()))?
            .to_string();
        let err = |field: &str, m: String| InputError::new(file, None, Some(field), format!("node `{name}`: {m}"));
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
        let amount = |key: &str| -> Result<Option<f64>, InputError> {
            match raw(key) {
                None => Ok(None),
                Some(text) => quantity(&text)
                    .map(Some)
                    .ok_or_else(|| err(&format!("status.allocatable.{key}"), format!("`{text}` is not a quantity"))),
            }
        };
        // Counts are whole and within their limits: never rounded, never clamped.
        let counted = |key: &str, max: u64| -> Result<Option<u32>, InputError> {
            let field = format!("status.allocatable.{key}");
            match amount(key)? {
                None => Ok(None),
                Some(v) => input::whole(v, &raw(key).unwrap_or_default(), max)
                    .map(|n| Some(n as u32))
                    .map_err(|m| err(&field, m)),
            }
        };
        let labelled = |key: &str, max: u64| -> Result<Option<u32>, InputError> {
            let field = format!("metadata.labels.{key}");
            label(key).map(|t| input::count(t, max).map(|n| n as u32).map_err(|m| err(&field, m))).transpose()
        };
        let cpu = amount("cpu")?.unwrap_or(0.0);
        let cpu_milli =
            input::within_cores(cpu, &raw("cpu").unwrap_or_default()).map_err(|m| err("status.allocatable.cpu", m))?;
        let mem = amount("memory")?.unwrap_or(0.0).round();
        let mem = input::within_bytes(mem, &raw("memory").unwrap_or_default())
            .map_err(|m| err("status.allocatable.memory", m))?;
        // Under time-slicing the plugin advertises each card once per replica.
        let shares = u64::from(MAX_CARDS_PER_NODE) * u64::from(MAX_CLIENTS_PER_CARD);
        let whole = counted("nvidia.com/gpu", shares)?.unwrap_or(0);
        // MIG (mixed strategy): each card's instances, from the per-profile totals (at
        // most seven per card).
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
            (cards, Sharing::Mig, layout, 1)
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
        let model = label("nvidia.com/gpu.product").unwrap_or(if cards > 0 { "gpu" } else { "" }).to_string();
        let card_mib = labelled("nvidia.com/gpu.memory", MAX_MEMORY_BYTES >> 20)?;
        let card_mem = card_mib.map_or(0, |mib| u64::from(mib) << 20);
        let topology =
            label("topology.kubernetes.io/zone").map(|z| vec![("zone".to_string(), z.to_string())]).unwrap_or_default();
        if item.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
            spec.events.push(NodeEvent { at_ms: 0, node: name.clone(), kind: NodeEventKind::Drain });
        }
        spec.nodes.push(NodeDef {
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
        });
    }
    if spec.nodes.is_empty() {
        return Err(InputError::new(file, None, Some("items"), "the node list has no nodes"));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A node list in the shape `kubectl get nodes -o json` prints, written for this test.
    const NODES: &str = r#"{
      "apiVersion": "v1", "kind": "List",
      "items": [
        {"kind": "Node", "metadata": {"name": "gpu-a", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
            "topology.kubernetes.io/zone": "us-east-1a"}},
         "spec": {},
         "status": {"allocatable": {"cpu": "191500m", "memory": "2113442540Ki", "nvidia.com/gpu": "8"}}},
        {"kind": "Node", "metadata": {"name": "gpu-b", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "2",
            "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}},
         "spec": {"unschedulable": true},
         "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "8"}}},
        {"kind": "Node", "metadata": {"name": "mig-c", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "2",
            "nvidia.com/mig.strategy": "mixed"}},
         "status": {"allocatable": {"cpu": "64", "memory": "512Gi",
            "nvidia.com/mig-3g.40gb": "4", "nvidia.com/mig-1g.10gb": "2"}}},
        {"kind": "Node", "metadata": {"name": "cpu-d"}, "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}}
      ]}"#;

    #[test]
    fn quantities_follow_kubernetes_suffixes() {
        assert_eq!(quantity("500m"), Some(0.5));
        assert_eq!(quantity("2Ki"), Some(2048.0));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("3G"), Some(3e9));
        assert_eq!(quantity("12"), Some(12.0));
        assert_eq!(quantity("lots"), None);
        assert_eq!(quantity("5Zi"), None);
    }

    #[test]
    fn kubectl_nodes_become_a_cluster() {
        assert!(is_node_list(NODES));
        let spec = parse_nodes(NODES, "nodes.json").expect("node list");
        assert_eq!(spec.nodes.len(), 4);
        let a = &spec.nodes[0];
        assert_eq!((a.spec.cards, a.spec.cpu_milli, a.spec.sharing), (8, 191_500, Sharing::Exclusive));
        assert_eq!(a.spec.model, "NVIDIA-H100-80GB-HBM3");
        assert_eq!(a.spec.card_mem, 81_559 << 20);
        assert_eq!(a.spec.mem, 2_113_442_540 * 1024);
        assert_eq!(a.topology, vec![("zone".to_string(), "us-east-1a".to_string())]);
        let b = &spec.nodes[1];
        assert_eq!((b.spec.cards, b.spec.sharing, b.spec.max_clients), (2, Sharing::Timeslice, 4));
        assert_eq!(spec.events, vec![NodeEvent { at_ms: 0, node: "gpu-b".into(), kind: NodeEventKind::Drain }]);
        let c = &spec.nodes[2];
        assert_eq!((c.spec.cards, c.spec.sharing), (2, Sharing::Mig));
        // Per card: two 3g.40gb and one 1g.10gb.
        assert_eq!(c.spec.mig, vec![0, 3, 3]);
        assert_eq!((spec.nodes[3].spec.cards, spec.nodes[3].spec.model.as_str()), (0, ""));
    }

    #[test]
    fn bad_node_lists_say_what_is_wrong() {
        let e = parse_nodes("{\"kind\": \"List\"}", "n.json").expect_err("no items");
        assert_eq!(e.field.as_deref(), Some("items"));
        let e = parse_nodes(
            r#"{"kind":"List","items":[{"metadata":{"name":"x"},"status":{"allocatable":{"cpu":"many"}}}]}"#,
            "n.json",
        )
        .expect_err("bad cpu");
        assert_eq!(e.to_string(), "n.json: field `status.allocatable.cpu`: node `x`: `many` is not a quantity");
        let e = parse_nodes("{\"kind\": ", "n.json").expect_err("not json");
        assert_eq!(e.line, Some(1));
    }

    /// One node whose allocatable resources are `resources` (JSON members).
    fn one(resources: &str) -> String {
        format!(
            r#"{{"kind": "List", "items": [{{"kind": "Node", "metadata": {{"name": "n"}},
            "status": {{"allocatable": {{{resources}}}}}}}]}}"#
        )
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
        ];
        for (resources, field, message) in cases {
            let e = parse_nodes(&one(resources), "nodes.json").expect_err(resources);
            assert_eq!(e.field.as_deref(), Some(field), "{e}");
            assert!(e.message.contains(message), "{resources}: {e}");
            assert!(e.message.starts_with("node `n`: "), "{e}");
        }
        let ok = parse_nodes(&one(r#""nvidia.com/gpu": "8", "cpu": "64""#), "nodes.json").expect("a valid node");
        assert_eq!((ok.nodes[0].spec.cards, ok.nodes[0].spec.cpu_milli), (8, 64_000));
    }
}
