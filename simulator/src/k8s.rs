//! Clusters from Kubernetes: the output of `kubectl get nodes -o json` (a `List` of
//! `Node`s), each node mapped by `gpol_kubernetes::nodes` — the mapping the extender
//! uses too, with its warnings. A cordoned node starts drained.

use crate::cluster_file::{ClusterSpec, NodeDef, NodeEvent, NodeEventKind};
use crate::input::InputError;
use serde_json::Value;

/// Whether JSON text looks like `kubectl get nodes -o json` output.
pub fn is_node_list(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.contains("\"kind\"")
        && (head.contains("\"NodeList\"") || head.contains("\"List\"") || head.contains("\"Node\""))
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
        let node = gpol_kubernetes::nodes::node(item).map_err(|e| {
            let message = if e.field == "metadata.name" { format!("item {i}: {}", e.message) } else { e.message };
            InputError::new(file, None, Some(&e.field), message)
        })?;
        for w in node.warnings {
            spec.warnings.push(InputError::new(file, None, Some(&w.field), w.message));
        }
        if node.cordoned {
            spec.events.push(NodeEvent { at_ms: 0, node: node.spec.name.clone(), kind: NodeEventKind::Drain });
        }
        spec.nodes.push(NodeDef { spec: node.spec, topology: node.topology });
    }
    if spec.nodes.is_empty() {
        return Err(InputError::new(file, None, Some("items"), "the node list has no nodes"));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::spec::Sharing;

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
    fn kubectl_nodes_become_a_cluster() {
        assert!(is_node_list(NODES));
        let spec = parse_nodes(NODES, "nodes.json").expect("node list");
        assert_eq!(spec.nodes.len(), 4);
        let a = &spec.nodes[0];
        assert_eq!((a.spec.cards, a.spec.cpu_milli, a.spec.sharing), (8, 191_500, Sharing::Exclusive));
        assert_eq!(a.spec.model, "h100", "the product through gpol's model table");
        assert_eq!(a.spec.card_mem, 81_559 << 20);
        assert_eq!(a.spec.mem, 2_113_442_540 * 1024);
        assert_eq!(a.topology, vec![("zone".to_string(), "us-east-1a".to_string())]);
        let b = &spec.nodes[1];
        assert_eq!((b.spec.cards, b.spec.sharing, b.spec.max_clients), (2, Sharing::Timeslice, 4));
        assert_eq!(spec.events, vec![NodeEvent { at_ms: 0, node: "gpu-b".into(), kind: NodeEventKind::Drain }]);
        let c = &spec.nodes[2];
        assert_eq!((c.spec.cards, c.spec.sharing), (2, Sharing::Mig));
        // Two 3g.40gb fill a card's eight memory slices: the 1g.10gb instances the node
        // advertises cannot be there, and the warning says so.
        assert_eq!(c.spec.mig, vec![vec![3, 3]]);
        let warnings: Vec<String> = spec.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "nodes.json: field `status.allocatable.nvidia.com/mig-1g.10gb`: node `mig-c`: 2 of 2 1g.10gb instances do not fit on 2 a100 80 GB cards: left out"
            ]
        );
        assert_eq!((spec.nodes[3].spec.cards, spec.nodes[3].spec.model.as_str()), (0, ""));
    }

    #[test]
    fn labels_the_resources_contradict_are_warnings_of_the_import() {
        // Time-slicing: 4 cards × 4 replicas are 16 shares, but the plugin advertises 12.
        let nodes = r#"{"kind": "List", "items": [
            {"kind": "Node", "metadata": {"name": "ts", "labels": {
                "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "4",
                "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}},
             "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "12"}}}]}"#;
        let spec = parse_nodes(nodes, "nodes.json").expect("node list");
        assert_eq!((spec.nodes[0].spec.cards, spec.nodes[0].spec.max_clients), (4, 4));
        let warnings: Vec<String> = spec.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            warnings,
            [
                "nodes.json: field `metadata.labels.nvidia.com/gpu.count`: node `ts`: 4 GPUs by `nvidia.com/gpu.count` × 4 by `nvidia.com/gpu.replicas` are 16 shares, but `nvidia.com/gpu` is 12: 4 cards of 4 clients assumed"
            ]
        );
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
}
