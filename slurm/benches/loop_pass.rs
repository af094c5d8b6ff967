//! One pass of `gpolc slurm run` on a busy 16-node cluster, Slurm's own time left out:
//! read `sinfo --json` and `squeue --json` (16 running jobs filling the nodes, 1,000
//! waiting), run the gpol cycle on that state, and write the commands of the plan.
//! Target (issue 16): under 100 ms. Results are in docs/performance.md.

use criterion::{Criterion, criterion_group, criterion_main};
use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::spec::NodeSpec;
use gpol_slurm::loaded::LoadedPolicy;
use serde_json::{Value, json};

const NODES: usize = 16;
const WAITING: usize = 1000;
const NOW: u64 = 1_800_000_000;

/// `sinfo --json` of Slurm 22.05 for 16 nodes of 8 H100s in two NVLink blocks.
fn sinfo() -> String {
    let nodes: Vec<Value> = (1..=NODES)
        .map(|i| {
            json!({
                "name": format!("gpu-{i:02}"), "state": "idle", "state_flags": [],
                "cpus": 96, "real_memory": 1_048_576, "gres": "gpu:h100:8",
                "features": format!("h100,block{}", (i - 1) / 8), "partitions": ["gpu"],
            })
        })
        .collect();
    json!({ "meta": {}, "errors": [], "nodes": nodes }).to_string()
}

/// `squeue --json`: one 8-card job running on each node, then 1,000 waiting jobs of
/// mixed shapes (1 to 8 cards, two-node gangs) across two accounts and two QOS.
fn squeue([first, second]: [&str; 2]) -> String {
    let job = |id: usize, state: &str, nodes: u32, gpus: u32| {
        json!({
            "job_id": id, "name": format!("job{id}"), "user_name": format!("user{}", id % 7),
            "account": if id.is_multiple_of(3) { second } else { first },
            "qos": if id.is_multiple_of(10) { "high" } else { "normal" },
            "job_state": state, "state_reason": if state == "PENDING" { "Priority" } else { "None" },
            "tres_per_node": format!("gres:gpu:{gpus}"), "node_count": nodes, "cpus": 4 * gpus * nodes,
            "memory_per_node": 65_536, "time_limit": 240, "priority": 1000 + id,
            "submit_time": NOW - 7200 + id as u64, "start_time": if state == "RUNNING" { NOW - 3600 } else { 0 },
            "nodes": if state == "RUNNING" { format!("gpu-{id:02}") } else { String::new() },
            "required_nodes": "", "admin_comment": "", "restart_cnt": 0,
        })
    };
    let running = (1..=NODES).map(|i| job(i, "RUNNING", 1, 8));
    let waiting = (NODES + 1..=NODES + WAITING).map(|i| {
        let (nodes, gpus) = [(1, 1), (1, 2), (1, 4), (1, 8), (2, 8)][i % 5];
        job(i, "PENDING", nodes, gpus)
    });
    json!({ "meta": {}, "errors": [], "jobs": running.chain(waiting).collect::<Vec<_>>() }).to_string()
}

fn policy(file: &str, engine: EngineKind) -> CompiledPolicy {
    let path = format!("{}/../policies/{file}", env!("CARGO_MANIFEST_DIR"));
    gpol_compiler::load::compile_file(path.as_ref(), engine).expect("the policy compiles")
}

/// The pass: both documents read, the plan made, its commands written out.
fn pass(policy: &LoadedPolicy, sinfo: &str, squeue: &str) -> usize {
    let nodes: Vec<NodeSpec> =
        gpol_slurm::sinfo::read(sinfo).expect("sinfo reads").into_iter().map(|n| n.spec).collect();
    let jobs = gpol_slurm::squeue::read(squeue).expect("squeue reads");
    let state = gpol_slurm::plan::State {
        nodes: &nodes,
        unavailable: &[],
        jobs: &jobs,
        now: NOW,
        queue_from: gpol_slurm::jobs::QueueFrom::Account,
        memory: gpol_slurm::config::Memory::Counted,
    };
    let plan = gpol_slurm::plan::plan(policy, &state);
    plan.actions.iter().map(|a| a.commands().len()).sum()
}

fn bench(c: &mut Criterion) {
    let sinfo = sinfo();
    for (file, accounts) in [("slurm_multifactor.gpol", ["physics", "biology"]), ("kai.gpol", ["a", "b"])] {
        let squeue = squeue(accounts);
        for engine in [EngineKind::Jit, EngineKind::Interp] {
            // Loaded once, as the loop loads it: its Lua translation is not part of a pass.
            let p = LoadedPolicy::new(policy(file, engine));
            // The plan gives the waiting jobs Slurm's priorities: work that a real pass does.
            assert!(pass(&p, &sinfo, &squeue) >= WAITING, "every waiting job gets its priority");
            c.bench_function(&format!("slurm pass, 16 nodes, 1000 waiting, {file}, {engine:?}"), |b| {
                b.iter(|| pass(&p, &sinfo, &squeue))
            });
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
