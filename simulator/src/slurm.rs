//! Clusters from Slurm: a node list (`sinfo --json`, slurmrestd's `/nodes`, `scontrol
//! show nodes --json`) read by gpol-slurm's node reader ([`gpol_slurm::sinfo`], the one
//! the scheduling loop reads Slurm with), as a cluster: a drained node starts drained, a
//! down or unresponsive one starts failed. The node JSON carries no topology.
//! simulator/tests/slurm/capture.sh captures the test fixture from a real Slurm.

use crate::cluster_file::{ClusterSpec, NodeDef, NodeEvent, NodeEventKind};
use crate::input::InputError;
use gpol_slurm::sinfo::{self, Service};

pub use gpol_slurm::sinfo::is_node_list;

/// Reads a Slurm node list; `file` names it in errors.
pub fn parse_nodes(text: &str, file: &str) -> Result<ClusterSpec, InputError> {
    let nodes = sinfo::read(text).map_err(|e| InputError::new(file, e.line(), e.field(), e.to_string()))?;
    let mut spec = ClusterSpec { name: file.to_string(), ..ClusterSpec::default() };
    for n in nodes {
        let kind = match n.service {
            Service::InService => None,
            Service::Drained => Some(NodeEventKind::Drain),
            Service::Down => Some(NodeEventKind::Fail),
        };
        if let Some(kind) = kind {
            spec.events.push(NodeEvent { at_ms: 0, node: n.spec.name.clone(), kind });
        }
        spec.nodes.push(NodeDef { spec: n.spec, topology: Vec::new() });
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::spec::Sharing;

    #[test]
    fn errors_name_the_file_line_and_field() {
        let e = parse_nodes("{\"nodes\": [", "n.json").expect_err("not json");
        assert_eq!(e.line, Some(1));
        assert!(e.message.starts_with("not JSON"), "{e}");
        // As `sinfo --json` of Slurm 22.05 prints it while slurmctld is down (and exits 0).
        let down = r#"{"meta": {}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}"#;
        assert_eq!(
            parse_nodes(down, "`sinfo --json`").expect_err("errors").to_string(),
            "`sinfo --json`: field `errors`: Slurm answered with errors, not the nodes: Unspecified error (error -1)"
        );
        let e = parse_nodes(r#"{"nodes": [{"name": "x", "cpus": "many", "real_memory": 1}]}"#, "n.json")
            .expect_err("bad cpus");
        assert_eq!(e.to_string(), "n.json: field `cpus`: node `x`: expected a whole number, found \"many\"");
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
