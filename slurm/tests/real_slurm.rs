//! Against a real Slurm (Debian's slurm-wlm 22.05, started by `tests/slurm/cluster.sh` in
//! a private network namespace: 16 nodes × 8 fake GPUs in two NVLink domains). `.ci/run`
//! installs Slurm; where it is absent, or not run as root, the tests say so and return.

use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use gpol_compiler::spec::{JobSpec, Request};
use gpol_slurm::jobs::{QueueFrom, Reading, Request as SlurmRequest};
use gpol_slurm::lua::Policy;
use gpol_slurm::topology::{self, Node};
use gpol_slurm::{squeue, submit};
use std::path::Path;
use std::process::Command;

/// Whether Slurm can be started here, saying why not.
fn slurm_here() -> bool {
    let has = |tool: &str| {
        Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success())
    };
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let missing: Vec<&str> =
        ["slurmctld", "slurmd", "munged", "sbatch", "unshare"].into_iter().filter(|t| !has(t)).collect();
    if !missing.is_empty() {
        gpol_testing::missing_tool(
            &format!("a real Slurm ({} missing)", missing.join(", ")),
            "apt-get install slurm-wlm munge",
        );
        return false;
    }
    if !root {
        gpol_testing::missing_tool(
            "root, to start a test Slurm (daemons, device nodes, a network namespace)",
            "run the tests as root, as CI does",
        );
        return false;
    }
    true
}

/// Runs `scenario` in a fresh test cluster given `files` (name, text); its output and
/// error output, together.
fn in_slurm(files: &[(&str, String)], scenario: &str) -> String {
    let (out, err) = in_slurm_apart(files, scenario);
    format!("{out}{err}")
}

/// [`in_slurm`], its output and error output apart.
fn in_slurm_apart(files: &[(&str, String)], scenario: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("writable");
    }
    std::fs::write(dir.path().join("scenario.sh"), scenario).expect("writable");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slurm/cluster.sh");
    let out = Command::new("bash")
        .arg(script)
        .arg(dir.path())
        .arg(dir.path().join("scenario.sh"))
        .output()
        .expect("bash runs");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    if !out.status.success() {
        let log = std::fs::read_to_string(dir.path().join("work/log/slurmctld.log")).unwrap_or_default();
        panic!("the test cluster failed:\n{stdout}{stderr}\nslurmctld.log:\n{log}");
    }
    (stdout, stderr)
}

#[test]
fn slurm_rejects_at_submission_what_the_policy_rejects_with_its_message_and_takes_its_topology() {
    if !slurm_here() {
        return;
    }
    let text = std::fs::read_to_string("../policies/gangs.gpol").expect("the example");
    let policy =
        Checked::from_text("gangs.gpol", &text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
    let lua = submit::emit(
        Policy { program: &policy.program, hir: &policy.policy },
        "gangs.gpol",
        false,
        None,
        QueueFrom::Account,
    )
    .lua;
    // Two NVLink domains of eight nodes.
    let nodes: Vec<Node> = (0..16)
        .map(|i| Node { name: format!("gpu-{i}"), topology: vec![("nvlink_domain".into(), format!("nvl{}", i / 8))] })
        .collect();
    let topology = topology::emit("gangs", &policy.policy.levels, &nodes, "test").expect("a tree").expect("levels");
    let said = in_slurm(
        &[("job_submit.lua", lua), ("topology.conf", topology)],
        "scontrol show topology\n\
         sbatch -N 2 --gres=gpu:4 -o /dev/null --wrap 'sleep 1'; echo \"half nodes: rc=$?\"\n\
         sbatch -N 2 --gres=gpu:8 -o /dev/null --wrap 'sleep 1'; echo \"whole nodes: rc=$?\"\n\
         sbatch -N 1 --gres=gpu:2 -o /dev/null --wrap 'sleep 1'; echo \"one node: rc=$?\"\n\
         sbatch -N 2 --ntasks-per-node=2 --gpus-per-task=2 -o /dev/null --wrap 'sleep 1'; echo \"half by task: rc=$?\"\n\
         sbatch -N 2 --ntasks-per-node=2 --gpus-per-task=4 -o /dev/null --wrap 'sleep 1'; echo \"whole by task: rc=$?\"\n",
    );
    // The policy's admit rule: multi-node jobs take whole nodes. The user sees its message.
    assert!(said.contains("half nodes: rc=1"), "{said}");
    assert!(
        said.contains("sbatch: error: multi-node jobs request 8 cards per replica (gpol admit whole_node_replicas)"),
        "{said}"
    );
    assert!(said.contains("whole nodes: rc=0") && said.contains("one node: rc=0"), "{said}");
    // GPUs asked per task count per node: two tasks of 2 on a node is half of it.
    assert!(said.contains("half by task: rc=1") && said.contains("whole by task: rc=0"), "{said}");
    // Slurm took the topology: a switch per NVLink domain, one above them.
    assert!(said.contains("SwitchName=nvlink_domain-nvl0 Level=0"), "{said}");
    assert!(said.contains("SwitchName=gpol-top Level=1"), "{said}");
}

/// Single quotes for the shell.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn jobs_come_back_from_squeue_as_they_were_submitted() {
    if !slurm_here() {
        return;
    }
    // Jobs of every shape the job model carries, submitted with `sbatch` from their
    // requests; `squeue --json` read back through the same model gives the same jobs.
    let mut jobs = Vec::new();
    for (i, (cards, model, nodes, cpus, mem_gib, minutes, labels)) in [
        (0, None, 1, 4, 0, None, vec![]),
        (2, None, 1, 8, 16, Some(60), vec![("team", "vision")]),
        (8, Some("h100"), 2, 32, 64, None, vec![("preemptible", "true")]),
        (8, None, 16, 1, 0, Some(1440), vec![("bursty", "true"), ("tier", "gold")]),
        (1, None, 3, 2, 1, Some(5), vec![("latency_critical", "true")]),
    ]
    .into_iter()
    .enumerate()
    {
        let mut j = JobSpec::named(format!("job{i}"));
        (j.user, j.queue) = (Some("root".into()), Some(format!("acct{}", i % 2)));
        j.request = if cards > 0 { Request::Whole(cards) } else { Request::None };
        j.models = model.into_iter().map(str::to_string).collect();
        (j.replicas, j.cpu_milli, j.mem, j.duration_ms) =
            (nodes, cpus * 1000, mem_gib << 30, minutes.map(|m| m * 60_000));
        for (k, v) in labels {
            match k {
                "preemptible" => j.preemptible = true,
                "bursty" => j.bursty = true,
                "latency_critical" => j.latency_critical = true,
                _ => j.labels.push((k.into(), v.into())),
            }
        }
        jobs.push(j);
    }
    let mut scenario = String::new();
    for j in &jobs {
        let args: Vec<String> = SlurmRequest::of(j, &Reading::default())
            .expect("expressible")
            .sbatch_args()
            .iter()
            .map(|a| quoted(a))
            .collect();
        scenario
            .push_str(&format!("sbatch --parsable -o /dev/null {} --wrap 'sleep 300' >/dev/null\n", args.join(" ")));
    }
    scenario.push_str("squeue --json\n");
    let (out, err) = in_slurm_apart(&[], &scenario);
    let found = squeue::read(&out).unwrap_or_else(|e| panic!("{e:?}\n{out}\n{err}"));
    assert_eq!(found.len(), jobs.len(), "{err}");
    for (want, got) in jobs.iter().zip(&found) {
        // A job that asks for no memory gets the whole node's under the test cluster's
        // CR_Core_Memory (no DefMemPerCPU/Node/GPU), and is read as holding it.
        let mut want = want.clone();
        if want.mem == 0 {
            want.mem = 512_000 << 20;
        }
        assert_eq!(got.request.job(&Reading::default()), Ok(want), "{:?}", got.request);
    }
}

#[test]
fn queues_are_partitions_when_asked_at_submission_and_in_squeue() {
    if !slurm_here() {
        return;
    }
    let text = "policy partitions\n\
                queue root {\n  queue gpu { weight 3 }\n  queue debug { weight 1 }\n}\n\
                admit small_gpu \"gpu jobs take at most 4 GPUs\" {\n  job.queue.name != \"gpu\" or job.total_gpus <= 4 gpu\n}\n";
    let policy =
        Checked::from_text("partitions.gpol", text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
    let view = Policy { program: &policy.program, hir: &policy.policy };
    let lua = submit::emit(view, "partitions.gpol", false, None, QueueFrom::Partition).lua;
    let extra = "PartitionName=debug Nodes=gpu-[0-3] MaxTime=60 State=UP\n".to_string();
    let (out, err) = in_slurm_apart(
        &[("job_submit.lua", lua), ("slurm-extra.conf", extra)],
        "sbatch -p debug --gres=gpu:8 -J big -o /dev/null --wrap 'sleep 300' >/dev/null; echo \"debug 8: rc=$?\" >&2\n\
         sbatch -p gpu,debug --gres=gpu:8 -o /dev/null --wrap 'sleep 300' >/dev/null; echo \"several: rc=$?\" >&2\n\
         sbatch --gres=gpu:8 -o /dev/null --wrap 'sleep 300' >/dev/null; echo \"default 8: rc=$?\" >&2\n\
         sbatch --gres=gpu:2 -J small -o /dev/null --wrap 'sleep 300' >/dev/null; echo \"default 2: rc=$?\" >&2\n\
         squeue --json\n",
    );
    // The partition asked for is the queue; without one, the default partition (gpu),
    // found in Slurm's partition list, is. A job asking for several is refused: its
    // queue would be whichever it starts in.
    assert!(err.contains("debug 8: rc=0") && err.contains("default 2: rc=0"), "{err}");
    assert!(err.contains("default 8: rc=1"), "{err}");
    assert!(
        err.contains("several: rc=1") && err.contains("gpol: queues are partitions here: submit to one partition"),
        "{err}"
    );
    assert!(err.contains("gpu jobs take at most 4 GPUs (gpol admit small_gpu)"), "{err}");
    // squeue's jobs read back with the same queues.
    let jobs = squeue::read(&out).unwrap_or_else(|e| panic!("{e:?}\n{out}\n{err}"));
    let reading = Reading { queue_from: QueueFrom::Partition, ..Reading::default() };
    let queues: Vec<(String, Option<String>)> =
        jobs.iter().map(|j| (j.request.name.clone(), j.request.job(&reading).ok().and_then(|j| j.queue))).collect();
    assert_eq!(queues, [("big".into(), Some("debug".into())), ("small".into(), Some("gpu".into()))]);
}

#[test]
fn gres_requests_count_as_slurm_allocates_them() {
    if !slurm_here() {
        return;
    }
    // Each request submitted with sbatch; once Slurm has started them, the GPUs it
    // allocated (`gres_detail`, `gpu:h100:2(IDX:0-1)`) are what the job model reads of
    // the request squeue shows. Requests Slurm refuses at submission are refused by the
    // job model too.
    let accepted = [
        "--gres=gpu:4,gpu:2",
        "--gres=gpu:2,gpu:4",
        "--gres=gpu:1,gpu:1,gpu:3",
        "--gres=gpu:h100:2,gpu:h100:4",
        "--gres=gpu:h100",
        "--gres=gpu:h100:0",
        "--gres=gpu:4,gpu:0",
        "--gpus-per-node=4 --gres=gpu:2",
        "--gres=gpu",
    ];
    let refused = ["gpu:-2", "gpu:h100:-1", "gpu:h100:4,gpu:2"];
    let mut scenario = String::new();
    for (i, options) in accepted.iter().enumerate() {
        scenario.push_str(&format!("sbatch -J ok{i} -N 1 {options} -o /dev/null --wrap 'sleep 300' >/dev/null\n"));
    }
    for (i, gres) in refused.iter().enumerate() {
        scenario.push_str(&format!(
            "sbatch -J no{i} -N 1 --gres={gres} -o /dev/null --wrap 'sleep 300' >/dev/null 2>&1\n\
             echo \"refused {gres}: rc=$?\" >&2\n"
        ));
    }
    scenario.push_str(&format!(
        "for _ in $(seq 80); do [ \"$(squeue -h -t R | wc -l)\" -ge {} ] && break; sleep 0.25; done\nsqueue --json\n",
        accepted.len()
    ));
    let (out, err) = in_slurm_apart(&[], &scenario);
    for gres in refused {
        assert!(err.contains(&format!("refused {gres}: rc=1")), "{gres}: {err}");
        let r = SlurmRequest {
            name: "x".into(),
            nodes: 1,
            tres_per_node: format!("gres:{gres}"),
            ..SlurmRequest::default()
        };
        assert!(r.job(&Reading::default()).is_err(), "{gres}");
    }
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}\n{err}"));
    let jobs = squeue::read(&out).unwrap_or_else(|e| panic!("{e:?}\n{out}\n{err}"));
    let mut compared = 0;
    for (j, raw) in jobs.iter().zip(doc["jobs"].as_array().expect("jobs")) {
        if !j.request.name.starts_with("ok") {
            continue;
        }
        assert!(j.is_running(), "{} has not started: {err}", j.request.name);
        // `gpu:h100:2(IDX:0-1)`: the count after the last colon, before the parenthesis.
        let allocated: u32 = (raw["gres_detail"].as_array().expect("gres_detail").iter())
            .filter_map(|g| g.as_str()?.split('(').next()?.rsplit(':').next()?.parse::<u32>().ok())
            .sum();
        let job = j.request.job(&Reading::default()).expect("readable");
        let read = match job.request {
            Request::Whole(n) => n,
            _ => 0,
        };
        assert_eq!(read, allocated, "{}: {:?} ({raw})", j.request.name, j.request.tres_per_node);
        compared += 1;
    }
    assert_eq!(compared, accepted.len(), "{out}");
}
