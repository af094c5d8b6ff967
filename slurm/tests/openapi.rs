//! gpol's Slurm readers against the JSON of later Slurm releases: the slurmrestd OpenAPI
//! specifications of data parsers v0.0.40 to v0.0.45 (v0.0.41 on as SchedMD publishes
//! them, v0.0.40 as slurmrestd 25.05 generates it; the shape of every job and node field,
//! extracted by openapi/extract.py into openapi/fields.json, which names each source).
//! For each version, every field the readers use must exist, and a document built to
//! that version's shapes — its numbers as `{set, infinite, number}` structs, its states
//! and features as lists — must read as the same job and node as 22.05's. (`squeue
//! --json`, `scontrol show nodes --json` and slurmrestd's `/jobs` and `/nodes` answer the
//! same documents in each release.)

use gpol_compiler::spec::{Request as Cards, Sharing};
use gpol_slurm::jobs::Reading;
use gpol_slurm::sinfo::{self, Service};
use gpol_slurm::squeue;
use serde_json::{Value, json};

fn fields() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openapi/fields.json"))
        .expect("the fixture");
    serde_json::from_str(&text).expect("JSON")
}

/// `value` written as a field of this shape is.
fn as_shape(shape: &str, value: &Value) -> Value {
    match (shape, value) {
        ("no_val", Value::Null) => json!({"set": false, "infinite": false, "number": 0}),
        ("no_val", v) => json!({"set": true, "infinite": false, "number": v}),
        ("string_list", Value::String(s)) => json!(s.split(',').collect::<Vec<_>>()),
        (_, v) => v.clone(),
    }
}

/// A record of `values`, each written as `version`'s `record` says; every field must be
/// in the specification.
fn record(spec: &Value, version: &str, record: &str, values: &[(&str, Value)]) -> Value {
    let shapes = &spec["versions"][version][record];
    let mut out = serde_json::Map::new();
    for (field, value) in values {
        let shape = shapes[field].as_str().unwrap_or_else(|| panic!("{version}: a {record} has no field `{field}`"));
        assert_ne!(shape, "other", "{version}: {record} field `{field}` has a shape the readers do not take");
        out.insert(field.to_string(), as_shape(shape, value));
    }
    Value::Object(out)
}

#[test]
fn jobs_of_every_later_data_parser_read_as_in_22_05() {
    let spec = fields();
    let versions: Vec<String> = spec["versions"].as_object().expect("versions").keys().cloned().collect();
    assert_eq!(versions, ["v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]);
    for version in &versions {
        let job = record(
            &spec,
            version,
            "job",
            &[
                ("job_id", json!(7)),
                ("name", json!("train")),
                ("user_name", json!("alice")),
                ("account", json!("research")),
                ("qos", json!("normal")),
                ("tres_per_node", json!("gres/gpu:h100:4")),
                ("tres_per_job", json!("")),
                ("node_count", json!(2)),
                ("cpus", json!(16)),
                ("memory_per_node", json!(65536)),
                ("memory_per_cpu", Value::Null),
                ("time_limit", json!(60)),
                ("comment", json!("team=vision,preemptible=true")),
                ("job_state", json!("PENDING,REQUEUED")),
                ("priority", json!(0)),
                ("state_reason", json!("JobHeldAdmin")),
                ("nodes", json!("")),
                ("required_nodes", json!("gpu-[1-2]")),
                ("admin_comment", json!("gpol: placed")),
                ("submit_time", json!(1000)),
                ("start_time", json!(0)),
                ("restart_cnt", json!(1)),
            ],
        );
        let jobs = squeue::read(&json!({ "jobs": [job] }).to_string()).unwrap_or_else(|e| panic!("{version}: {e:?}"));
        let j = &jobs[0];
        assert_eq!((j.id, j.is_pending(), j.held, j.restarts, j.submit_time), (7, true, true, 1, 1000), "{version}");
        assert_eq!(j.required_nodes, ["gpu-1", "gpu-2"], "{version}");
        assert_eq!(j.admin_comment, "gpol: placed", "{version}");
        let spec_job = j.request.job(&Reading::default()).expect("readable");
        assert_eq!(
            (spec_job.request, spec_job.models.clone()),
            (Cards::Whole(4), vec!["h100".to_string()]),
            "{version}"
        );
        assert_eq!((spec_job.replicas, spec_job.cpu_milli, spec_job.mem), (2, 8000, 64 << 30), "{version}");
        assert_eq!(spec_job.duration_ms, Some(3_600_000), "{version}");
        assert!(spec_job.preemptible && spec_job.labels == [("team".to_string(), "vision".to_string())], "{version}");
        assert_eq!(spec_job.queue.as_deref(), Some("research"), "{version}");
        // `--gpus-per-task=2 --ntasks=8 --ntasks-per-node=4` on two nodes: 8 cards a node.
        let per_task = record(
            &spec,
            version,
            "job",
            &[
                ("job_id", json!(8)),
                ("tres_per_node", json!("")),
                ("tres_per_task", json!("gres/gpu:2")),
                ("tasks", json!(8)),
                ("tasks_per_node", json!(4)),
                ("node_count", json!(2)),
                ("job_state", json!("PENDING")),
            ],
        );
        let jobs =
            squeue::read(&json!({ "jobs": [per_task] }).to_string()).unwrap_or_else(|e| panic!("{version}: {e:?}"));
        assert_eq!(jobs[0].request.job(&Reading::default()).expect("readable").request, Cards::Whole(8), "{version}");
    }
}

#[test]
fn nodes_of_every_later_data_parser_read_as_in_22_05() {
    let spec = fields();
    for version in spec["versions"].as_object().expect("versions").keys() {
        let node = record(
            &spec,
            version,
            "node",
            &[
                ("name", json!("gpu-1")),
                ("gres", json!("gpu:h100:8(S:0-1),shard:h100:64")),
                ("cpus", json!(64)),
                ("real_memory", json!(512000)),
                ("features", json!("nvlink")),
                ("partitions", json!("gpu")),
                ("state", json!("IDLE,DRAIN")),
            ],
        );
        let text = json!({ "nodes": [node] }).to_string();
        let nodes = sinfo::read(&text).unwrap_or_else(|e| panic!("{version}: {e}"));
        let n = &nodes[0].spec;
        assert_eq!((n.name.as_str(), n.model.as_str(), n.cards), ("gpu-1", "h100", 8), "{version}");
        assert_eq!((n.sharing, n.max_clients), (Sharing::Timeslice, 8), "{version}");
        assert_eq!((n.cpu_milli, n.mem), (64_000, 512_000 << 20), "{version}");
        for label in ["slurm.feature/nvlink", "slurm.partition/gpu"] {
            assert!(n.labels.iter().any(|(k, v)| k == label && v == "true"), "{version}: {label} in {:?}", n.labels);
        }
        assert_eq!(nodes.iter().map(|n| n.service).collect::<Vec<_>>(), [Service::Drained], "{version}");
    }
}
