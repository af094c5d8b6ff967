//! `gpolc slurm emit` and `gpolc check --target slurm` end to end.

use assert_cmd::Command;

fn gpolc() -> Command {
    Command::cargo_bin("gpolc").expect("gpolc is built")
}

#[test]
fn emit_writes_job_submit_lua_and_says_what_it_enforces() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("slurm");
    let assert = gpolc().args(["slurm", "emit", "policies/gangs.gpol", "--out"]).arg(&out).assert().code(0);
    let said = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(said.contains("1 rule(s) enforced at submission"), "{said}");
    let lua = std::fs::read_to_string(out.join("job_submit.lua")).expect("written");
    assert!(lua.contains("function slurm_job_submit(job_desc, part_list, submit_uid)"));
    assert!(lua.contains("name = \"whole_node_replicas\""));
    let accounts = std::fs::read_to_string(out.join("accounts.sh")).expect("written");
    assert!(accounts.contains("sacctmgr -i add account pretraining Parent=cluster Fairshare=3"), "{accounts}");
    // A second run replaces its own output; a policy that does not check writes nothing.
    gpolc().args(["slurm", "emit", "policies/gangs.gpol", "--out"]).arg(&out).assert().code(0);
    let bad = dir.path().join("bad.gpol");
    std::fs::write(&bad, "policy bad\nadmit x { job.nothing }\n").expect("writable");
    let other = dir.path().join("other");
    gpolc().args(["slurm", "emit"]).arg(&bad).arg("--out").arg(&other).assert().code(1);
    assert!(!other.join("job_submit.lua").exists());
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
        .args(["slurm", "emit", "policies/gangs.gpol", "--cluster", "sim/cluster.toml", "--out"])
        .arg(&out)
        .assert()
        .code(0);
    let topology = std::fs::read_to_string(out.join("topology.conf")).expect("written");
    assert!(topology.contains("SwitchName=h100-rack0 Nodes=h100-0,h100-1,h100-2,h100-3\n"), "{topology}");
    assert!(topology.contains("SwitchName=gpol-top Switches=h100-rack0,h100-rack1,"), "{topology}");
    // A cluster that cannot be read is an error, and nothing of it is written.
    let other = dir.path().join("other");
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[pool]]\nname = 3\n").expect("writable");
    gpolc()
        .args(["slurm", "emit", "policies/gangs.gpol", "--cluster"])
        .arg(&bad)
        .arg("--out")
        .arg(&other)
        .assert()
        .code(2);
    assert!(!other.join("topology.conf").exists());
}
