//! `gpolc slurm emit` and `gpolc check --target slurm` end to end.

use assert_cmd::Command;

mod support;
use support::slurm::{SIXTEEN_NODES, in_test_cluster, slurm_here, write};

fn gpolc() -> Command {
    Command::cargo_bin("gpolc").expect("gpolc is built")
}

#[test]
fn emit_writes_job_submit_lua_and_says_what_it_enforces() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("slurm");
    let assert = gpolc().args(["slurm", "emit", "policies/gangs.gpol", "--out"]).arg(&out).assert().code(0);
    let said = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(said.contains("2 rule(s) enforced at submission"), "{said}");
    let lua = std::fs::read_to_string(out.join("job_submit.lua")).expect("written");
    assert!(lua.contains("function slurm_job_submit(job_desc, part_list, submit_uid)"));
    assert!(lua.contains("name = \"whole_node_replicas\""));
    let accounts = std::fs::read_to_string(out.join("accounts.sh")).expect("written");
    assert!(accounts.contains("sacctmgr -i add account pretraining Parent=cluster Fairshare=3"), "{accounts}");
    // A second run replaces its own output; a policy that does not check writes nothing.
    gpolc().args(["slurm", "emit", "policies/gangs.gpol", "--out"]).arg(&out).assert().code(0);
    let bad = write(dir.path(), "bad.gpol", "policy bad\nadmit x { job.nothing }\n");
    let other = dir.path().join("other");
    gpolc().args(["slurm", "emit"]).arg(&bad).arg("--out").arg(&other).assert().code(1);
    assert!(!other.join("job_submit.lua").exists());
}

#[test]
fn with_partitions_as_queues_emit_writes_no_accounts_and_plan_mends_none() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("slurm");
    let assert = gpolc()
        .args(["slurm", "emit", "policies/gangs.gpol", "--queue-from", "partition", "--out"])
        .arg(&out)
        .assert()
        .code(0);
    let said = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(said.contains("queues are partitions: accounts.sh is not written"), "{said}");
    let lua = std::fs::read_to_string(out.join("job_submit.lua")).expect("written");
    assert!(lua.contains("gpol.queue_from = \"partition\""), "{lua}");
    assert!(!out.join("accounts.sh").exists());
    let squeue = write(dir.path(), "squeue.json", r#"{"jobs": []}"#);
    let sinfo = write(dir.path(), "sinfo.json", r#"{"nodes": []}"#);
    let plan = ["slurm", "plan", "policies/gangs.gpol", "--queue-from", "partition", "--accounts=none"];
    let assert = gpolc().args(plan).arg("--squeue").arg(&squeue).arg("--sinfo").arg(&sinfo).assert().code(2);
    let said = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(said.contains("with --queue-from partition the queues are partitions"), "{said}");
    let bad = gpolc().args(["slurm", "emit", "policies/gangs.gpol", "--queue-from", "qos", "--out"]).arg(&out).assert();
    let said = String::from_utf8_lossy(&bad.code(2).get_output().stderr).into_owned();
    assert!(said.contains("expected `account` or `partition`, not `qos`"), "{said}");
}

#[test]
fn check_lists_what_slurm_cannot_enforce_at_submission() {
    let assert = gpolc().args(["check", "policies/preemption.gpol", "--target", "slurm"]).assert().code(0);
    let said = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(said.contains("slurm enforces 0 rule(s) at submission"), "{said}");
    assert!(said.contains("not at submission: eviction by_priority"), "{said}");
}

#[test]
fn with_a_cluster_emit_writes_the_topology_as_switches() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("slurm");
    gpolc()
        .args(["slurm", "emit", "policies/gangs.gpol", "--cluster", "samples/cluster.toml", "--out"])
        .arg(&out)
        .assert()
        .code(0);
    let topology = std::fs::read_to_string(out.join("topology.conf")).expect("written");
    assert!(topology.contains("SwitchName=h100-rack0 Nodes=h100-0,h100-1,h100-2,h100-3\n"), "{topology}");
    assert!(topology.contains("SwitchName=gpol-top Switches=h100-rack0,h100-rack1,"), "{topology}");
    // The bundled cluster has no `block`: no topology/block form unless a level is named.
    assert!(!out.join("topology-block.conf").exists());
    gpolc()
        .args([
            "slurm",
            "emit",
            "policies/gangs.gpol",
            "--cluster",
            "samples/cluster.toml",
            "--block-level",
            "rack",
            "--out",
        ])
        .arg(&out)
        .assert()
        .code(0);
    let blocks = std::fs::read_to_string(out.join("topology-block.conf")).expect("written");
    assert!(blocks.contains("\nBlockName=h100-rack0 Nodes=h100-0,h100-1,h100-2,h100-3\n"), "{blocks}");
    assert!(blocks.ends_with("\nBlockSizes=4,8,16\n"), "{blocks}");
    let unknown = ["slurm", "emit", "policies/gangs.gpol", "--cluster", "samples/cluster.toml", "--block-level", "row"];
    gpolc().args(unknown).arg("--out").arg(dir.path().join("row")).assert().code(2);
    // A cluster that cannot be read is an error, and nothing of it is written.
    let other = dir.path().join("other");
    let bad = write(dir.path(), "bad.toml", "[[pool]]\nname = 3\n");
    gpolc()
        .args(["slurm", "emit", "policies/gangs.gpol", "--cluster"])
        .arg(&bad)
        .arg("--out")
        .arg(&other)
        .assert()
        .code(2);
    assert!(!other.join("topology.conf").exists());
}

/// A policy with two accounts' GPU limits, a cluster file of the test cluster's 16 nodes,
/// and the policy's `job_submit.lua --hold-for-loop`, in a temporary directory.
fn quota_cluster() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(
        dir.path(),
        "quota.gpol",
        "policy quota\n\nqueue org {\n  queue a { limit 8 gpu }\n  queue b { limit 16 gpu }\n}\n",
    );
    let cluster = write(dir.path(), "cluster.toml", SIXTEEN_NODES);
    // The policy's job_submit.lua, holding every admitted job for the loop.
    gpolc().args(["slurm", "emit", "--hold-for-loop", "--out"]).arg(dir.path()).arg(&policy).assert().code(0);
    (dir, policy, cluster)
}

#[test]
fn plan_and_apply_against_a_real_slurm_hold_with_the_quota_and_are_idempotent() {
    if !slurm_here() {
        return;
    }
    let (dir, policy, cluster) = quota_cluster();
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let loop_ = format!("{} slurm", gpolc.display());
    let p = policy.display();
    let c = cluster.display();
    // Jobs submitted as users do; the script holds them for the loop. Queue a asks for
    // more than its limit.
    let scenario = format!(
        "for spec in 'a 8' 'a 4' 'b 8'; do set -- $spec\n\
           sbatch --parsable -A $1 -N 1 --gres=gpu:$2 -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         done\n\
         echo '== held'; squeue -h -o '%i %T %R'\n\
         echo '== plan'; {loop_} plan {p} --cluster {c}\n\
         echo '== apply'; {loop_} apply {p} --cluster {c} >/dev/null; echo \"apply rc=$?\"\n\
         for _ in $(seq 80); do [ \"$(squeue -h -t R | wc -l)\" -ge 2 ] && break; sleep 0.25; done\n\
         echo '== plan again'; {loop_} plan {p} --cluster {c} 2>&1\n\
         echo '== squeue'; squeue -h -o '%i %a %T %R %N'\n"
    );
    let said = in_test_cluster(dir.path(), &scenario);
    // Nothing ran before the loop said so.
    let held = said.split("== held").nth(1).and_then(|t| t.split("== plan").next()).unwrap_or_default();
    assert_eq!(held.lines().filter(|l| l.contains("PENDING (JobHeldUser)")).count(), 3, "{said}");
    let plan = said.split("== apply").next().unwrap_or_default();
    // Job 1 fits queue a's limit and is placed; job 2 would take a past it and is held with
    // the arithmetic; job 3 (queue b) is placed.
    assert!(plan.contains("place job 1 (wrap) on gpu-"), "{said}");
    assert!(
        plan.contains(
            "hold job 2 (wrap): waiting for the scheduling loop (queue `a` would exceed its gpu limit (holds 8, needs 4, limit 8))"
        ),
        "{said}"
    );
    assert!(plan.contains("place job 3 (wrap) on gpu-"), "{said}");
    assert!(said.contains("apply rc=0"), "{said}");
    // Applied: the placed jobs run where gpol put them, and a second plan changes nothing.
    let again = said.split("== plan again").nth(1).unwrap_or_default();
    assert!(again.contains("nothing to change"), "{said}");
    let queue = said.split("== squeue").nth(1).unwrap_or_default();
    assert!(queue.lines().any(|l| l.starts_with("1 a RUNNING")), "{said}");
    assert!(queue.lines().any(|l| l.starts_with("3 b RUNNING")), "{said}");
    assert!(queue.lines().any(|l| l.starts_with("2 a PENDING (JobHeldAdmin)")), "{said}");
}

#[test]
fn an_unprivileged_user_cannot_get_around_the_loop() {
    if !slurm_here() {
        return;
    }
    let (dir, policy, cluster) = quota_cluster();
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let (g, p, c) = (gpolc.display(), policy.display(), cluster.display());
    // Jobs of user `nobody`, who tries to start them by hand: releasing them, reordering
    // them, pinning them elsewhere, moving them to another queue. Each try is refused,
    // before and after the loop's pass; the loop then holds what it does not place as root.
    let scenario = format!(
        "U='setpriv --reuid=65534 --regid=65534 --clear-groups'\n\
         for spec in 'a 8' 'a 4'; do set -- $spec\n\
           $U sbatch --parsable -A $1 -N 1 --gres=gpu:$2 --chdir=/tmp -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         done\n\
         try() {{ if $U scontrol \"$@\" >/dev/null 2>&1; then echo \"allowed: $*\"; else echo \"refused: $*\"; fi; }}\n\
         try release 2; try top 2; try update jobid=2 priority=9; try update jobid=2 nodelist=gpu-3\n\
         try update jobid=2 account=b; try update jobid=2 comment=mine\n\
         echo '== before'; squeue -h -o '%i %T %r'\n\
         {g} slurm apply {p} --cluster {c} >/dev/null 2>&1; echo \"apply rc=$?\"\n\
         try release 2\n\
         echo '== after'; squeue -h -o '%i %T %r'\n\
         echo '== plan'; {g} slurm plan {p} --cluster {c} 2>&1\n"
    );
    let said = in_test_cluster(dir.path(), &scenario);
    for refused in [
        "refused: release 2",
        "refused: top 2",
        "refused: update jobid=2 priority=9",
        "refused: update jobid=2 nodelist=gpu-3",
        "refused: update jobid=2 account=b",
    ] {
        assert!(said.lines().any(|l| l == refused), "{refused}\n{said}");
    }
    // A change the policy does not read is the user's to make.
    assert!(said.lines().any(|l| l == "allowed: update jobid=2 comment=mine"), "{said}");
    let before = said.split("== before\n").nth(1).and_then(|t| t.split("apply rc").next()).unwrap_or_default();
    assert_eq!(before.lines().filter(|l| l.ends_with("PENDING JobHeldUser")).count(), 2, "{said}");
    assert!(said.contains("apply rc=0"), "{said}");
    // Job 2 would take queue a past its limit: held by root now, and still refused.
    let after = said.split("== after\n").nth(1).and_then(|t| t.split("== plan").next()).unwrap_or_default();
    assert!(after.lines().any(|l| l == "2 PENDING JobHeldAdmin"), "{said}");
    assert_eq!(said.lines().filter(|l| *l == "refused: release 2").count(), 2, "{said}");
    assert!(said.split("== plan\n").nth(1).unwrap_or_default().contains("nothing to change"), "{said}");
}

#[test]
fn a_job_without_memory_holds_what_slurm_gives_it_and_nothing_waits_forever() {
    if !slurm_here() {
        return;
    }
    let (dir, policy, cluster) = quota_cluster();
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let (g, p, c) = (gpolc.display(), policy.display(), cluster.display());
    // Under CR_Core_Memory with no DefMemPerCPU/Node/GPU (the test cluster's), a job that
    // asks for no memory gets the whole node's: two such one-GPU jobs cannot share a node,
    // however many GPUs it has free. gpol reads Slurm's configuration and the memory Slurm
    // counts for each job, and places them on two nodes.
    let scenario = format!(
        "for _ in 1 2; do sbatch --parsable -A b -N 1 --gres=gpu:1 -o /dev/null --wrap 'sleep 600' >/dev/null; done\n\
         {g} slurm apply {p} --cluster {c} >/dev/null 2>&1; echo \"apply rc=$?\"\n\
         for _ in $(seq 80); do [ \"$(squeue -h -t R | wc -l)\" -ge 2 ] && break; sleep 0.25; done\n\
         echo '== squeue'; squeue -h -o '%i %T %N'\n\
         echo '== plan'; {g} slurm plan {p} --cluster {c} 2>&1\n"
    );
    let said = in_test_cluster(dir.path(), &scenario);
    assert!(said.contains("apply rc=0"), "{said}");
    let queue = said.split("== squeue\n").nth(1).and_then(|t| t.split("== plan").next()).unwrap_or_default();
    let running: Vec<&str> =
        queue.lines().filter(|l| l.contains(" RUNNING ")).filter_map(|l| l.split(' ').nth(2)).collect();
    assert_eq!(running.len(), 2, "both jobs run:\n{said}");
    assert_ne!(running[0], running[1], "on two nodes:\n{said}");
    assert!(said.split("== plan\n").nth(1).unwrap_or_default().contains("nothing to change"), "{said}");
}

#[test]
fn the_loop_survives_a_slurmctld_restart_and_places_what_waits() {
    if !slurm_here() {
        return;
    }
    let (dir, policy, cluster) = quota_cluster();
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    // slurmctld goes down before the loop starts and comes back a moment later: the loop
    // keeps going, places the waiting job, and later passes change nothing.
    let scenario = format!(
        "WORK=$(dirname \"$(dirname \"$SLURM_CONF\")\")\n\
         sbatch --parsable -A b -N 1 --gres=gpu:8 -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         ctld=$(cat \"$WORK/run/slurmctld.pid\"); kill $ctld\n\
         for _ in $(seq 100); do [ -e /proc/$ctld ] || break; sleep 0.1; done\n\
         {g} slurm run {p} --cluster {c} --every 1 --passes 6 2>&1 &\n\
         sleep 1.5; slurmctld\n\
         wait\n\
         for _ in $(seq 80); do [ \"$(squeue -h -t R | wc -l)\" -ge 1 ] && break; sleep 0.25; done\n\
         echo '== squeue'; squeue -h -o '%i %a %T %R'\n",
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display()
    );
    let said = in_test_cluster(dir.path(), &scenario);
    // (Slurm's commands wait for slurmctld to come back, so a pass spans the restart.)
    assert!(said.contains("pass 6: done"), "{said}");
    assert!(said.contains("place job 1 (wrap) on gpu-"), "{said}");
    assert_eq!(said.matches("place job 1").count(), 1, "{said}");
    let queue = said.split("== squeue").nth(1).unwrap_or_default();
    assert!(queue.lines().any(|l| l.starts_with("1 b RUNNING")), "{said}");
}

#[test]
fn node_lines_carry_the_policys_static_scores_as_weights_and_slurm_takes_them() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(
        dir.path(),
        "weights.gpol",
        "policy weights\n\n\
         score prefer_h100 weight 2 { if node.gpu_model == \"h100\" then 1 else 0 }\n\
         score zone_a weight 1 { if node.labels[\"zone\"] == \"a\" then 1 else 0 }\n\
         score pack weight 1 { 1 - node.free_cards / max(node.cards, 1 gpu) }\n",
    );
    let cluster = write(
        dir.path(),
        "cluster.toml",
        "name = \"t\"\n\n\
         [[pool]]\nname = \"a\"\ncount = 2\ngpu_model = \"a100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\nlabels = { zone = \"a\" }\n\n\
         [[pool]]\nname = \"h\"\ncount = 2\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\nsharing = \"timeslice\"\nmax_clients = 4\n\n\
         [[pool]]\nname = \"b\"\ncount = 1\ngpu_model = \"a100\"\ngpus = 4\ncpu = 32\nmem = \"250GiB\"\nlabels = { zone = \"b\" }\n",
    );
    gpolc()
        .args(["slurm", "emit"])
        .arg(&policy)
        .arg("--cluster")
        .arg(&cluster)
        .arg("--out")
        .arg(dir.path())
        .assert()
        .code(0);
    let lines = std::fs::read_to_string(dir.path().join("slurm-nodes.conf")).expect("written");
    // h100 scores 2, a100 in zone a 1, the a100 in zone b 0: weights 1, 2, 3. `pack` reads
    // free cards, which change: not a weight.
    assert!(lines.contains("static scores\n# (Slurm fills the lowest weight first): prefer_h100, zone_a."), "{lines}");
    assert!(lines.contains("applies: pack."), "{lines}");
    let expected = [
        "NodeName=a-0 CPUs=64 RealMemory=512000 Weight=2 Features=a100,zone-a Gres=gpu:a100:8",
        "NodeName=a-1 CPUs=64 RealMemory=512000 Weight=2 Features=a100,zone-a Gres=gpu:a100:8",
        "NodeName=h-0 CPUs=64 RealMemory=512000 Weight=1 Features=h100 Gres=gpu:h100:8,shard:32",
        "NodeName=h-1 CPUs=64 RealMemory=512000 Weight=1 Features=h100 Gres=gpu:h100:8,shard:32",
        "NodeName=b-0 CPUs=32 RealMemory=256000 Weight=3 Features=a100,zone-b Gres=gpu:a100:4",
    ];
    assert_eq!(lines.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(), expected);
    if !slurm_here() {
        return;
    }
    // A real slurmctld takes the lines as they are (cluster.sh adds only each node's
    // address), and a job Slurm places by itself goes to the lightest node.
    std::fs::remove_file(dir.path().join("job_submit.lua")).expect("written");
    let said = in_test_cluster(
        dir.path(),
        "sinfo -N -h -o '%N %w %f %G'\n\
         sbatch --parsable -N 1 --gres=gpu:1 -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         for _ in $(seq 40); do [ -n \"$(squeue -h -t R)\" ] && break; sleep 0.25; done\n\
         echo \"== ran on $(squeue -h -o %N)\"\n",
    );
    for want in ["a-0 2 a100,zone-a gpu:a100:8", "h-0 1 h100 gpu:h100:8,shard:h100:32", "b-0 3 a100,zone-b gpu:a100:4"]
    {
        assert!(said.lines().any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == want), "{want}\n{said}");
    }
    assert!(said.contains("== ran on h-0"), "{said}");
}

#[test]
fn the_loop_keeps_off_a_drained_node_and_pins_again_a_job_whose_node_went_down() {
    if !slurm_here() {
        return;
    }
    let (dir, policy, cluster) = quota_cluster();
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    // The nodes' specs come from the cluster file, their states from Slurm, live. gpu-1
    // fails (its slurmd dies, Slurm marks it down): Slurm requeues the job, to be eligible
    // again a little later, and the loop pins it to another node.
    let scenario = format!(
        "WORK=$(dirname \"$(dirname \"$SLURM_CONF\")\")\n\
         scontrol update nodename=gpu-0 state=drain reason=maintenance\n\
         sbatch --parsable -A b -N 1 --gres=gpu:8 -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         {g} slurm apply {p} --cluster {c}\n\
         for _ in $(seq 80); do [ -n \"$(squeue -h -t R)\" ] && break; sleep 0.25; done\n\
         echo \"== first on $(squeue -h -o %N)\"\n\
         kill \"$(cat \"$WORK/run/slurmd-gpu-1.pid\")\"\n\
         scontrol update nodename=gpu-1 state=down reason=broken\n\
         for _ in $(seq 80); do [ -n \"$(squeue -h -t PD)\" ] && break; sleep 0.25; done\n\
         {g} slurm apply {p} --cluster {c}\n\
         echo \"== then $(scontrol show job 1 | grep -o 'ReqNodeList=[^ ]*')\"\n\
         {g} slurm plan {p} --cluster {c}\n",
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display()
    );
    let said = in_test_cluster(dir.path(), &scenario);
    assert!(said.contains("place job 1 (wrap) on gpu-1\n"), "{said}");
    assert!(said.contains("== first on gpu-1"), "{said}");
    assert!(said.contains("place job 1 (wrap) on gpu-2\n"), "{said}");
    assert!(said.contains("== then ReqNodeList=gpu-2"), "{said}");
    // Pinned there and not yet started (Slurm's delay after a failure): no second thought.
    assert!(said.trim_end().ends_with("nothing to change: Slurm already does what the policy decides"), "{said}");
}

#[test]
fn without_holds_slurm_starts_waiting_jobs_in_the_policys_order() {
    if !slurm_here() {
        return;
    }
    // No job is held for the loop: Slurm starts jobs itself. Account a has used more, so
    // when a node frees, b's waiting job must start first though a's came first — which
    // Slurm does only because the loop gave the two their priorities.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(
        dir.path(),
        "usage.gpol",
        "policy usage\n\nqueue org {\n  queue a { }\n  queue b { }\n}\n\nqueue_order { queue.usage asc }\n",
    );
    let cluster = write(dir.path(), "cluster.toml", SIXTEEN_NODES);
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "run() {{ sbatch --parsable -J \"$1\" -A \"$2\" -N 1 --gres=gpu:8 --mem=1G -o /dev/null --wrap 'sleep 600' >/dev/null; }}\n\
         for i in $(seq 0 11); do run a-$i a; done\n\
         for _ in $(seq 80); do [ \"$(squeue -h -t R | wc -l)\" -ge 12 ] && break; sleep 0.25; done\n\
         sleep 1; for i in 0 1 2 3; do run b-$i b; done\n\
         for _ in $(seq 80); do [ \"$(squeue -h -t R | wc -l)\" -ge 16 ] && break; sleep 0.25; done\n\
         sleep 1; run x a; run y b\n\
         {g} slurm apply {p} --cluster {c}\n\
         scancel -n a-0\n\
         for _ in $(seq 120); do [ \"$(squeue -h -t R | wc -l)\" -ge 16 ] && break; sleep 0.25; done\n\
         echo \"== running: $(squeue -h -t R -o %j | grep -E '^(x|y)$')\"\n\
         echo \"== waiting: $(squeue -h -t PD -o %j)\"\n",
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display()
    );
    let said = in_test_cluster(dir.path(), &scenario);
    assert!(said.contains("give job 18 (y) priority 4000000000"), "{said}");
    assert!(said.contains("give job 17 (x) priority 3999999999"), "{said}");
    assert!(said.contains("== running: y\n"), "{said}");
    assert!(said.contains("== waiting: x\n"), "{said}");
}

#[test]
fn job_submit_lua_keeps_slurm_off_the_nodes_a_static_filter_refuses() {
    if !slurm_here() {
        return;
    }
    // policies/gpu_sharing.gpol: jobs of whole cards need unshared cards. With the cluster
    // given, job_submit.lua excludes the time-sliced nodes from such a job, so Slurm — on
    // its own, no loop running — never starts one there: the second whole-node job waits.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = write(
        dir.path(),
        "cluster.toml",
        "name = \"t\"\n\n[[pool]]\nname = \"gpu\"\ncount = 1\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\n\n\
         [[pool]]\nname = \"ts\"\ncount = 2\ngpu_model = \"h100\"\ngpus = 8\ncpu = 64\nmem = \"500GiB\"\nsharing = \"timeslice\"\nmax_clients = 8\n",
    );
    gpolc()
        .args(["slurm", "emit", "policies/gpu_sharing.gpol", "--cluster"])
        .arg(&cluster)
        .arg("--out")
        .arg(dir.path())
        .assert()
        .code(0);
    let said = in_test_cluster(
        dir.path(),
        "for j in w1 w2; do sbatch --parsable -J $j -A research -N 1 --gres=gpu:8 -o /dev/null --wrap 'sleep 600' >/dev/null; done\n\
         for _ in $(seq 40); do [ -n \"$(squeue -h -t R)\" ] && break; sleep 0.25; done; sleep 2\n\
         echo \"== $(squeue -h -o '%j %T %N' | sort | tr '\\n' ';')\"\n\
         echo \"== $(scontrol show job 2 | grep -o 'ExcNodeList=[^ ]*')\"\n",
    );
    assert!(said.contains("== w1 RUNNING gpu-0;w2 PENDING ;"), "{said}");
    assert!(said.contains("== ExcNodeList=ts-[0-1]"), "{said}");
}

/// A temporary directory asking for a test Slurm with accounting (slurmdbd), and the
/// test cluster's nodes as a cluster file in it.
fn accounting_cluster() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    write(dir.path(), "accounting", "");
    let cluster = write(dir.path(), "cluster.toml", SIXTEEN_NODES);
    (dir, cluster)
}

#[test]
fn plan_mends_the_live_association_tree_and_then_has_nothing_to_change() {
    if !support::slurm::accounting_here() {
        return;
    }
    let (dir, cluster) = accounting_cluster();
    let before = write(
        dir.path(),
        "before.gpol",
        "policy tree\npriority_class urgent = 100\npriority_class normal = 10\n\
         queue org {\n  queue a { weight 2; limit 16 gpu, 64 cpu, 256GiB }\n  queue b { weight 1 }\n}\n",
    );
    // a: more shares, fewer GPUs, no CPU or memory limit; b: a child queue c.
    let after = write(
        dir.path(),
        "after.gpol",
        "policy tree\npriority_class urgent = 200\npriority_class normal = 10\n\
         queue org {\n  queue a { weight 3; limit 8 gpu }\n  queue b { weight 1\n    queue c { limit 4 gpu(h100) }\n  }\n}\n",
    );
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "g() {{ {g} slurm \"$1\" \"$2\" --cluster {c} --accounts 2>&1; }}\n\
         show() {{ sacctmgr -n -P show associations format=Cluster,Account,ParentName,User,Share,GrpTRES; }}\n\
         echo '== plan before'; g plan {before}\n\
         echo '== apply before'; g apply {before}\n\
         echo '== plan before again'; g plan {before}\n\
         echo '== tree before'; show\n\
         echo '== plan after'; g plan {after}\n\
         echo '== apply after'; g apply {after}\n\
         sacctmgr -i modify account where name=a set GrpTRES=node=2 >/dev/null\n\
         echo '== plan after again'; g plan {after}\n\
         echo '== tree after'; show; show >{dir}/tree.txt\n\
         sacctmgr -n -P show qos format=Name,Priority >{dir}/qos.txt\n",
        g = gpolc.display(),
        c = cluster.display(),
        before = before.display(),
        after = after.display(),
        dir = dir.path().display(),
    );
    let said = in_test_cluster(dir.path(), &scenario);
    let part = |name: &str| {
        said.split(&format!("== {name}\n")).nth(1).and_then(|s| s.split("\n== ").next()).unwrap_or_default()
    };
    let first = part("plan before");
    for line in [
        // Slurm's own QOS `normal` (priority 0) takes the class's value; `urgent` is new.
        "change QOS normal: priority 0 → 10 (priority class normal)",
        "add QOS urgent with priority 100 (priority class urgent)",
        "add account org under root in cluster gpol: Fairshare=1",
        "add account a under org in cluster gpol: Fairshare=2, GrpTRES=gres/gpu=16,cpu=64,mem=262144",
        "add account b under org in cluster gpol: Fairshare=1",
    ] {
        assert!(first.lines().any(|l| l == line), "{line}\n{said}");
    }
    assert!(part("apply before").contains("sacctmgr -i add account a Cluster=gpol Parent=org Fairshare=2"), "{said}");
    assert!(part("plan before again").contains("nothing to change"), "{said}");
    let tree = part("tree before");
    assert!(tree.lines().any(|l| l == "gpol|a|org||2|cpu=64,gres/gpu=16,mem=256G"), "{said}");
    let second = part("plan after");
    assert!(
        second.lines().any(|l| l == "change account a in cluster gpol: Fairshare 2 → 3, GrpTRES cpu=64,gres/gpu=16,mem=262144 → gres/gpu=8,cpu=-1,mem=-1"),
        "{said}"
    );
    assert!(
        second.lines().any(|l| l == "add account c under b in cluster gpol: Fairshare=1, GrpTRES=gres/gpu:h100=4"),
        "{said}"
    );
    assert!(second.lines().any(|l| l == "change QOS urgent: priority 100 → 200 (priority class urgent)"), "{said}");
    // Applied, the tree is the policy's; a limit the policy cannot name stays the administrator's.
    assert!(part("plan after again").contains("nothing to change"), "{said}");
    let tree = std::fs::read_to_string(dir.path().join("tree.txt")).expect("written");
    let live = gpol_slurm::associations::read(&tree).expect("sacctmgr's output reads");
    let a = live.iter().find(|x| x.account == "a").expect("account a");
    assert_eq!(a.shares, "3");
    assert_eq!(a.limits, [("gres/gpu".to_string(), 8), ("node".to_string(), 2)].into_iter().collect());
    let c = live.iter().find(|x| x.account == "c").expect("account c");
    assert_eq!((c.parent.as_str(), c.limits.get("gres/gpu:h100")), ("b", Some(&4)));
    let qos = std::fs::read_to_string(dir.path().join("qos.txt")).expect("written");
    let qos = gpol_slurm::associations::read_qos(&qos).expect("sacctmgr's QOS read");
    assert!(qos.contains(&("urgent".to_string(), 200)) && qos.contains(&("normal".to_string(), 10)), "{said}");
}

#[test]
fn accounts_sh_runs_on_a_default_slurm_and_again_changing_nothing() {
    if !support::slurm::accounting_here() {
        return;
    }
    let (dir, cluster) = accounting_cluster();
    // Class `normal` is a QOS every Slurm has already.
    let policy = write(
        dir.path(),
        "tree.gpol",
        "policy tree\npriority_class urgent = 100\npriority_class normal = 10\n\
         queue org {\n  queue a { weight 2; limit 16 gpu }\n  queue b { weight 1 }\n}\n",
    );
    let out = dir.path().join("emitted");
    gpolc().args(["slurm", "emit"]).arg(&policy).arg("--out").arg(&out).assert().code(0);
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "sh {out}/accounts.sh >/dev/null; echo \"== first $?\"\n\
         sh {out}/accounts.sh >/dev/null; echo \"== second $?\"\n\
         sacctmgr -i modify account where name=b set Parent=root Fairshare=7 >/dev/null\n\
         sh {out}/accounts.sh >/dev/null; echo \"== third $?\"\n\
         echo '== plan'; {g} slurm plan {p} --cluster {c} --accounts 2>&1\n\
         echo '== end'\n",
        out = out.display(),
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display(),
    );
    let said = in_test_cluster(dir.path(), &scenario);
    assert!(said.contains("== first 0\n"), "{said}");
    assert!(said.contains("== second 0\n"), "{said}");
    // Moved and reweighed by hand, account b is mended by a third run.
    assert!(said.contains("== third 0\n"), "{said}");
    let plan = said.split("== plan\n").nth(1).and_then(|s| s.split("== end").next()).unwrap_or_default();
    assert!(plan.contains("nothing to change"), "{said}");
}

#[test]
fn a_saved_association_tree_is_planned_against_and_a_bad_one_named() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(dir.path(), "t.gpol", "policy t\nqueue a { weight 2 }\nqueue b {}\n");
    let cluster = write(dir.path(), "cluster.toml", SIXTEEN_NODES);
    let squeue = write(dir.path(), "squeue.json", "{\"jobs\": []}");
    let plan = |tree: &str| {
        let tree = write(dir.path(), "tree.txt", tree);
        let mut c = gpolc();
        c.args(["slurm", "plan"]).arg(&policy).arg("--cluster").arg(&cluster).arg("--squeue").arg(&squeue);
        c.arg(format!("--accounts={}", tree.display()));
        c
    };
    let out = plan("gpol|root|||1|\ngpol|b|root||1|\n").assert().code(0);
    let said = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(
        said.lines().filter(|l| !l.starts_with(' ')).collect::<Vec<_>>(),
        ["add account a under root in cluster gpol: Fairshare=2"],
        "{said}"
    );
    let out = plan("gpol|root|||1|\ngpol|b|root|1|\n").assert().code(2);
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(said.contains("tree.txt: line 2: 5 fields, not the 6 of"), "{said}");
}

#[test]
fn the_leading_job_order_key_orders_jobs_slurm_starts_by_itself() {
    if !slurm_here() {
        return;
    }
    // Without the loop: the site factor job_submit.lua gives is each job's priority under
    // priority/multifactor (Slurm's own weights set to zero here, so it alone shows).
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy =
        write(dir.path(), "t.gpol", "policy t\njob_order { job.total_gpus / 1 gpu desc, job.submitted asc }\n");
    gpolc().args(["slurm", "emit"]).arg(&policy).arg("--out").arg(dir.path()).assert().code(0);
    write(
        dir.path(),
        "slurm-extra.conf",
        "PriorityType=priority/multifactor\nPriorityWeightAge=0\nPriorityWeightFairshare=0\n\
         PriorityWeightJobSize=0\nPriorityWeightPartition=0\nPriorityWeightQOS=0\n",
    );
    let scenario = "for g in 1 4 2; do sbatch --parsable --begin=now+1hour -N 1 --gres=gpu:$g -o /dev/null --wrap true >/dev/null; done\n\
                    echo '== squeue'; squeue -h -o '%i %Q' | sort -n\n";
    let said = in_test_cluster(dir.path(), scenario);
    let queue = said.split("== squeue\n").nth(1).unwrap_or_default();
    assert_eq!(queue.lines().collect::<Vec<_>>(), ["1 1000001000", "2 1000004000", "3 1000002000"], "{said}");
}

#[test]
fn slurmrestd_gives_the_loop_the_same_state_as_slurms_commands() {
    if !slurm_here() {
        return;
    }
    if std::process::Command::new("sh")
        .args(["-c", "command -v slurmrestd"])
        .output()
        .is_ok_and(|o| !o.status.success())
    {
        gpol_testing::missing_tool("slurmrestd", "apt-get install slurmrestd");
        return;
    }
    let (dir, policy, cluster) = quota_cluster();
    // slurmrestd will not run as root, and its local authentication serves only its own
    // user: it and the loop that reads it run as nobody, who must reach these files.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "RUN=$(dirname \"$(dirname \"$SLURM_CONF\")\")/run; chmod 777 \"$RUN\"; SOCK=$RUN/rest.sock\n\
         nobody() {{ setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"; }}\n\
         setsid setpriv --reuid=65534 --regid=65534 --clear-groups slurmrestd -s openapi/v0.0.38 -a rest_auth/local \"unix:$SOCK\" </dev/null >\"$RUN/rest.log\" 2>&1 &\n\
         for _ in $(seq 50); do [ -S \"$SOCK\" ] && break; sleep 0.1; done\n\
         for i in 1 2; do sbatch --parsable -A a -N 1 --gres=gpu:8 -o /dev/null --wrap 'sleep 600' >/dev/null; done\n\
         sbatch --parsable -A b -N 2 --gres=gpu:8 -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         echo '== commands'; {g} slurm plan {p} --cluster {c} 2>&1\n\
         echo '== slurmrestd'; nobody {g} slurm plan {p} --cluster {c} --slurmrestd \"unix:$SOCK\" 2>&1\n\
         echo '== nothing there'; nobody {g} slurm plan {p} --cluster {c} --slurmrestd \"unix:$RUN/none.sock\" 2>&1; echo \"rc $?\"\n\
         echo '== end'\n",
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display()
    );
    let said = in_test_cluster(dir.path(), &scenario);
    let part = |name: &str| {
        said.split(&format!("== {name}\n")).nth(1).and_then(|s| s.split("\n== ").next()).unwrap_or_default()
    };
    let (commands, rest) = (part("commands"), part("slurmrestd"));
    // The three jobs, placed or held by the quota, the same from either source.
    assert!(commands.contains("place job 1 (wrap) on gpu-"), "{said}");
    assert!(commands.contains("hold job 2 (wrap)"), "{said}");
    assert!(commands.contains("place job 3 (wrap) on gpu-"), "{said}");
    assert_eq!(rest, commands, "{said}");
    let missing = part("nothing there");
    assert!(missing.contains("error: http://localhost/slurm/v0.0.38/nodes (over "), "{said}");
    assert!(missing.contains("rc 2"), "{said}");
}

#[test]
fn job_submit_lua_refuses_a_job_no_node_can_hold_as_slurm_does_and_says_why() {
    if !slurm_here() {
        return;
    }
    // Measured on Slurm 22.05 without gpol: sbatch refuses each of these ("Requested node
    // configuration is not available") — but takes it when job_submit.lua holds it at
    // submission (`--hold-for-loop`), and then it waits for ever. With the cluster's nodes
    // the script refuses it itself, saying why; without them it cannot, and emit says so.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = write(dir.path(), "quota.gpol", "policy quota\n\nqueue org {\n  queue a { limit 64 gpu }\n}\n");
    let cluster = write(dir.path(), "cluster.toml", SIXTEEN_NODES);
    gpolc()
        .args(["slurm", "emit", "--hold-for-loop", "--cluster"])
        .arg(&cluster)
        .arg("--out")
        .arg(dir.path())
        .arg(&policy)
        .assert()
        .code(0);
    let bare = dir.path().join("bare");
    let emitted = gpolc().args(["slurm", "emit", "--hold-for-loop", "--out"]).arg(&bare).arg(&policy).assert().code(0);
    let note = String::from_utf8_lossy(&emitted.get_output().stderr).into_owned();
    assert!(note.contains("note: without --cluster, job_submit.lua cannot refuse a job no node can hold"), "{note}");
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "try() {{ name=$1; shift; sbatch -J \"$name\" -A a -N 1 \"$@\" -o /dev/null --wrap 'sleep 600' >/dev/null 2>\"$TMPDIR/err\"; \
           echo \"== $name rc=$?\"; cat \"$TMPDIR/err\"; }}\n\
         export TMPDIR=$(mktemp -d)\n\
         try type --gres=gpu:h10:1\n\
         try gpus --gres=gpu:9\n\
         try cpus -c 100\n\
         try memory --mem=600000\n\
         try negative --gres=gpu:-2\n\
         try two-types --gres=gpu:a100:2,gpu:h100:4\n\
         sbatch -J \"$(printf 'x\\033[2J\\nplace job 99 (root) on gpu-0')\" -A a -N 1 --gres=gpu:2 -o /dev/null --wrap 'sleep 600' >/dev/null\n\
         echo '== plan'; {g} slurm plan {p} --cluster {c} 2>&1\n\
         # Slurm reloads the script when its time is past the last load's: a time ahead.\n\
         LUA=\"$(dirname \"$SLURM_CONF\")/job_submit.lua\"; cp {bare}/job_submit.lua \"$LUA\"; touch -d \"@$(($(date +%s) + 2))\" \"$LUA\"\n\
         try bare-type --gres=gpu:h10:1\n\
         echo '== squeue'; squeue -h -o '%j %T %r' | grep bare || true\n",
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display(),
        bare = bare.display()
    );
    let said = in_test_cluster(dir.path(), &scenario);
    let part =
        |name: &str| said.split(&format!("== {name}")).nth(1).and_then(|s| s.split("\n== ").next()).unwrap_or_default();
    let held = "sbatch: error: gpol: no node of the cluster can ever hold this job: ";
    let config = "sbatch: error: Batch job submission failed: Requested node configuration is not available";
    for (name, why) in [
        ("type", "no node has GPUs of type h10 (the nodes have h100)"),
        ("gpus", "9 GPUs per node, more than any node has (8)"),
        ("cpus", "100 CPUs per node, more than any node has (64)"),
        ("memory", "600000 MiB of memory per node, more than any node has (512000 MiB)"),
    ] {
        let out = part(name);
        assert!(
            out.starts_with(" rc=1\n") && out.contains(&format!("{held}{why}")) && out.contains(config),
            "{name}:\n{said}"
        );
    }
    let gres = "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification";
    let negative = part("negative");
    assert!(negative.contains("gpol: the job's GRES cannot be read: `gpu:-2`: a negative count (--gres)"), "{said}");
    assert!(negative.starts_with(" rc=1\n") && negative.contains(gres), "{said}");
    let two = part("two-types");
    assert!(
        two.contains("gpu of more than one type (a100, h100): gpol reads one (--gres)") && two.contains(gres),
        "{said}"
    );
    // A job some node holds is taken; its name, which would clear the screen and forge a
    // line of the plan, is printed escaped.
    let plan = part("plan");
    assert!(plan.contains("place job 1 (x\\u{1b}[2J\\u{a}place job 99 (root) on gpu-0) on gpu-"), "{said}");
    assert!(!plan.contains('\u{1b}') && !plan.contains("\nplace job 99"), "{said}");
    // Without the nodes the script takes the job, held: it would wait until cancelled.
    assert!(part("bare-type").starts_with(" rc=0"), "{said}");
    assert!(part("squeue").contains("bare-type PENDING JobHeldUser"), "{said}");
}

#[test]
fn a_job_the_loop_cancels_shows_its_user_why() {
    if !support::slurm::accounting_here() {
        return;
    }
    // A rule Slurm's Lua cannot check (a MIG profile, which a Slurm request never carries)
    // refuses the job for good in the loop, which cancels it. Its user, unprivileged, reads
    // the rule's message in scontrol, squeue and, once the job has left the queue, sacct.
    let dir = tempfile::tempdir().expect("a temporary directory");
    write(dir.path(), "accounting", "");
    let policy = write(
        dir.path(),
        "mig.gpol",
        "policy mig\n\nqueue org {\n  queue research { }\n}\n\nadmit mig_only \"only MIG jobs run here\" { has(job.mig_profile) }\n",
    );
    let cluster = write(dir.path(), "cluster.toml", SIXTEEN_NODES);
    gpolc().args(["slurm", "emit", "--hold-for-loop", "--out"]).arg(dir.path()).arg(&policy).assert().code(0);
    std::fs::remove_file(dir.path().join("accounts.sh")).expect("written");
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "U='setpriv --reuid=65534 --regid=65534 --clear-groups'\n\
         sacctmgr -i add account research >/dev/null; sacctmgr -i add user nobody account=research >/dev/null\n\
         J=$($U sbatch --parsable -A research -N 1 --gres=gpu:1 --chdir=/tmp -o /dev/null --comment team=vision --wrap 'sleep 600')\n\
         echo '== apply'; {g} slurm apply {p} --cluster {c} 2>&1; echo \"rc=$?\"\n\
         echo '== scontrol'; $U scontrol show job $J | grep -E 'JobState|Comment'\n\
         echo '== squeue'; $U squeue -h -t all -j $J -o '%T|%k'\n\
         for _ in $(seq 40); do $U sacct -n -X -P -j $J -o State | grep -q CANCELLED && break; sleep 0.25; done\n\
         echo '== sacct'; $U sacct -n -X -P -j $J -o State,AdminComment\n\
         echo '== end'\n",
        g = gpolc.display(),
        p = policy.display(),
        c = cluster.display()
    );
    let said = in_test_cluster(dir.path(), &scenario);
    let part = |name: &str| {
        said.split(&format!("== {name}\n")).nth(1).and_then(|s| s.split("\n== ").next()).unwrap_or_default()
    };
    let why = "gpol: cancelled: only MIG jobs run here (gpol admit mig_only)";
    let apply = part("apply");
    assert!(apply.contains("cancel job 1 (wrap): only MIG jobs run here (gpol admit mig_only)"), "{said}");
    assert!(apply.contains(&format!("scontrol update JobId=1 'Comment={why}'")), "{said}");
    assert!(apply.contains("scancel 1") && apply.contains("rc=0"), "{said}");
    let scontrol = part("scontrol");
    assert!(scontrol.contains("JobState=CANCELLED"), "{said}");
    assert!(scontrol.contains(&format!("   Comment={why}")), "{said}");
    assert!(scontrol.contains(&format!("AdminComment={why}")), "{said}");
    assert_eq!(part("squeue").trim(), format!("CANCELLED|{why}"), "{said}");
    assert!(part("sacct").starts_with(&format!("CANCELLED by 0|{why}")), "{said}");
}

#[test]
fn a_slurmctld_that_does_not_answer_is_reported_as_such() {
    if !slurm_here() {
        return;
    }
    // With slurmctld stopped, `sinfo --json` and `squeue --json` of Slurm 22.05 exit 0
    // after a few seconds, printing an `errors` list and no nodes or jobs: the pass fails
    // with what they said, not as an empty cluster or queue.
    let (dir, policy, _) = quota_cluster();
    let gpolc = assert_cmd::cargo::cargo_bin("gpolc");
    let scenario = format!(
        "WORK=$(dirname \"$(dirname \"$SLURM_CONF\")\")\n\
         sinfo --json >\"$WORK/sinfo.json\"\n\
         kill $(cat \"$WORK/run/slurmctld.pid\"); sleep 1\n\
         echo '== nodes'; {g} slurm plan {p} 2>&1; echo \"rc=$?\"\n\
         echo '== jobs'; {g} slurm plan {p} --sinfo \"$WORK/sinfo.json\" 2>&1; echo \"rc=$?\"\n\
         echo '== end'\n",
        g = gpolc.display(),
        p = policy.display(),
    );
    let said = in_test_cluster(dir.path(), &scenario);
    assert!(
        said.contains(
            "error: `sinfo --json`: field `errors`: Slurm answered with errors, not the nodes: Unspecified error (error -1)\nrc=2"
        ),
        "{said}"
    );
    assert!(
        said.contains(
            "error: `squeue --json`: Slurm answered with errors, not the jobs: Failed while looking for jobs: \
             Unspecified error: slurm_load_jobs (error -1)\nrc=2"
        ),
        "{said}"
    );
    assert!(!said.contains("no nodes") && !said.contains(".json.json"), "{said}");
}
