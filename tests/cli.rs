//! The command line, end to end: exit codes, output formats, `--explain`, `fmt`.

use assert_cmd::Command;
use std::path::Path;

fn gpolc() -> Command {
    let mut c = Command::cargo_bin("gpolc").expect("gpolc is built");
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("the file is writable");
    p.display().to_string()
}

const CLEAN: &str = "policy p\n\nfilter f { job.whole_cards > 0 gpu }\n";
const ERROR: &str = "policy p\n\nfilter f { node.gpu_mem > 40 }\n";
const WARNING: &str = "policy p\n\nconst unused = 1\n";

#[test]
fn clean_policies_exit_zero() {
    let out = gpolc().args(["check", "policies/", "stdlib/", "--color", "never"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("no problems"), "{stderr}");
}

#[test]
fn errors_exit_one_and_every_file_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.gpol", ERROR);
    let b = write(dir.path(), "b.gpol", "policy q\nfilter g { nodes.cards > 0 gpu }\n");
    let out = gpolc().args(["check", &a, &b, "--color", "never"]).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("E0009") && stderr.contains("E0004"), "{stderr}");
    assert!(stderr.contains("2 error(s)"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "no colour when asked for none");
}

#[test]
fn a_clean_file_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let c = write(dir.path(), "c.gpol", CLEAN);
    gpolc().args(["check", &c, "--deny-warnings"]).assert().success();
}

#[test]
fn warnings_fail_only_when_denied() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.gpol", WARNING);
    gpolc().args(["check", &w]).assert().success();
    gpolc().args(["check", &w, "--deny-warnings"]).assert().code(1);
}

#[test]
fn usage_and_io_errors_exit_two() {
    gpolc().args(["check", "no/such/file.gpol"]).assert().code(2);
    gpolc().args(["check", "--format", "xml", "policies/"]).assert().code(2);
    gpolc().args(["check", "--explain", "E9999"]).assert().code(2);
}

#[test]
fn json_format_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.gpol", ERROR);
    let out = gpolc().args(["check", &a, "--format", "json"]).assert().code(1);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["errors"], 1);
    let d = &v["diagnostics"][0];
    assert_eq!(d["code"], "E0009");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["line"], 3);
    assert_eq!(d["column"], 12);
    assert_eq!(d["end_line"], 3);
    assert!(d["file"].as_str().is_some_and(|f| f.ends_with("a.gpol")));
    assert!(d["labels"].as_array().is_some_and(|l| l.len() == 3));
    assert!(d["help"].as_str().is_some_and(|h| h.contains("40GiB")));
}

#[test]
fn github_format_annotates() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.gpol", ERROR);
    let out = gpolc().args(["check", &a, "--format", "github"]).assert().code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = stdout.lines().next().unwrap_or_default();
    assert!(line.starts_with("::error file="), "{line}");
    assert!(line.contains(",line=3,col=12,"), "{line}");
    assert!(line.contains("::E0009 cannot compare bytes and number"), "{line}");
}

#[test]
fn explain_prints_the_long_text() {
    let out = gpolc().args(["check", "--explain", "e0009"]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.starts_with("E0009: unit mismatch"), "{stdout}");
    assert!(stdout.contains("40GiB"), "{stdout}");
}

#[test]
fn colour_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.gpol", ERROR);
    let out = gpolc().args(["check", &a, "--color", "always"]).assert().code(1);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains('\u{1b}'));
}

#[test]
fn fmt_rewrites_in_place_and_check_reports() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.gpol", "policy p\nfilter   f {job.whole_cards>0 gpu}   // why\n");
    let out = gpolc().args(["fmt", "--check", &a]).assert().code(1);
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("a.gpol"));
    gpolc().args(["fmt", &a]).assert().success();
    let text = std::fs::read_to_string(&a).unwrap_or_default();
    assert_eq!(text, "policy p\n\nfilter f { job.whole_cards > 0 gpu }  // why\n");
    gpolc().args(["fmt", "--check", &a]).assert().success();
    gpolc().args(["fmt", "--check", "policies/", "stdlib/"]).assert().success();
}

#[test]
fn fmt_leaves_a_broken_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let text = "policy p\nfilter f { job.whole_cards > and }\n";
    let a = write(dir.path(), "a.gpol", text);
    gpolc().args(["fmt", &a]).assert().code(1);
    assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), text);
    let leftovers = std::fs::read_dir(dir.path()).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 1, "no temporary file is left behind");
}

#[test]
fn invalid_utf8_is_a_diagnostic_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.gpol");
    std::fs::write(&p, b"policy p\n\xff\n").unwrap();
    let out = gpolc().args(["check", &p.display().to_string(), "--color", "never"]).assert().code(1);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("E0031"));
}

#[test]
fn ir_build_and_bench() {
    let out = gpolc().args(["ir", "policies/fair_share.gpol"]).assert().success();
    let ir = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(ir.contains("score pack:") && ir.contains("node.free_gpu"), "{ir}");

    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("p.o").display().to_string();
    gpolc().args(["build", "policies/gangs.gpol", "-o", &obj]).assert().success();
    let bytes = std::fs::read(&obj).unwrap_or_default();
    assert_eq!(&bytes[..4], b"\x7fELF", "an ELF object");

    let out = gpolc().args(["bench", "policies/fair_share.gpol", "--nodes", "50"]).assert().success();
    let report = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(report.contains("ns per (job, node)") && report.contains("jit") && report.contains("interp"), "{report}");

    let bad = write(dir.path(), "bad.gpol", ERROR);
    gpolc().args(["build", &bad, "-o", &obj]).assert().code(1);
}

#[test]
fn build_writes_kueue_objects_and_names_what_kueue_cannot_enforce() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("objects.yaml").display().to_string();
    let out = gpolc()
        .args(["build", "--target", "kueue", "policies/preemption.gpol", "-o", &yaml, "--namespace", "ml"])
        .args(["--cluster", "samples/cluster.toml"])
        .assert()
        .success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("[W0010] Warning: Kueue cannot enforce preempt `by_priority`"), "{err}");
    assert!(err.contains("gpolc serve applies it when kube-scheduler preempts pods"), "{err}");
    let text = std::fs::read_to_string(&yaml).unwrap_or_default();
    assert!(text.contains("kind: ClusterQueue") && text.contains("namespace: ml"), "{text}");
    assert!(!text.contains("unset"), "the cluster gives the roots' capacity: {text}");

    let upper = write(dir.path(), "upper.gpol", "policy p\nqueue Team_A {\n  guarantee 1 gpu\n}\n");
    let out = gpolc().args(["build", "--target", "kueue", &upper, "-o", &yaml, "--force"]).assert().code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("[E0044] Error: queue `Team_A` cannot be written as a Kueue object"), "{err}");
    gpolc().args(["build", "--target", "kueue", &upper, "--namespace", "Bad_NS"]).assert().code(2);
    gpolc().args(["build", "policies/gangs.gpol", "--cluster", "samples/cluster.toml"]).assert().code(2);

    // A model's flavor selects the product its nodes carry (a recorded vGPU node list).
    let a16 = write(
        dir.path(),
        "a16.gpol",
        "policy p\nqueue root {\n  guarantee 1 gpu(a16)\n  queue a { guarantee 1 gpu(a16) }\n}\n",
    );
    let nodes = "kubernetes/tests/fixtures/recorded/edgexr-nori-vgpu-a16.nodelist.json";
    gpolc().args(["build", "--target", "kueue", &a16, "--cluster", nodes, "-o", &yaml, "--force"]).assert().success();
    let text = std::fs::read_to_string(&yaml).unwrap_or_default();
    assert!(text.contains("nvidia.com/gpu.product: NVIDIA-A16-4Q"), "{text}");

    // The objects of a quota phase: the daily tide's inference lends 16 by day, 56 at night.
    for (at, lends) in [("2026-11-25T12:00", "lendingLimit: \"16\""), ("2026-11-25T23:00", "lendingLimit: \"56\"")] {
        let tide = ["build", "--target", "kueue", "policies/daily_tide.gpol", "--at", at, "-o", &yaml, "--force"];
        gpolc().args(tide).args(["--cluster", "samples/cluster.toml"]).assert().success();
        let text = std::fs::read_to_string(&yaml).unwrap_or_default();
        assert!(text.contains(lends), "{at}: {text}");
    }
    // Or followed: a CronJob per window edge applies the phase beginning there.
    let follow = ["build", "--target", "kueue", "policies/daily_tide.gpol", "--follow-windows", "kueue-system"];
    gpolc().args(follow).args(["--cluster", "samples/cluster.toml", "-o", &yaml, "--force"]).assert().success();
    let text = std::fs::read_to_string(&yaml).unwrap_or_default();
    assert!(text.contains("schedule: 0 22 * * 0,1,2,3,4,5,6") && text.contains("timeZone: Europe/Berlin"), "{text}");
    let bad =
        gpolc().args(["build", "--target", "kueue", "policies/daily_tide.gpol", "--at", "tomorrow"]).assert().code(2);
    assert!(String::from_utf8_lossy(&bad.get_output().stderr).contains("--at: expected a local date and time"));
}

#[test]
fn test_command_runs_scenarios() {
    let out = gpolc().args(["test", "runtime/tests/scenarios/drf.gpol"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("A submits first ... ok") && text.contains("2 passed; 0 failed"), "{text}");

    let out = gpolc()
        .args(["test", "runtime/tests/scenarios/cohort.gpol", "--format", "junit", "--engine", "interp"])
        .assert()
        .success();
    let xml = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(xml.contains("<testsuites") && xml.contains("A alone can use 21"), "{xml}");

    let dir = tempfile::tempdir().unwrap();
    let wrong = write(
        dir.path(),
        "wrong.gpol",
        "policy wrong\n\nqueue q {}\n\ntest \"too optimistic\" {\n  node a { cards 1 }\n  submit j { queue q; cards 2 }\n  expect j on a\n}\n",
    );
    let out = gpolc().args(["test", &wrong]).assert().code(1);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("expected j on a") && text.contains("but pending because unschedulable"), "{text}");
}

#[test]
fn explain_replays_a_scenario() {
    let out = gpolc()
        .args(["explain", "policies/gpu_sharing.gpol", "whole-card jobs never land on shared cards"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("node t1: rejected by filter whole_cards_not_partitioned"), "{text}");
    assert!(text.contains("-> placed train on e1"), "{text}");
    gpolc().args(["explain", "policies/gpu_sharing.gpol", "no such test"]).assert().code(2);
}

#[test]
fn explain_shows_the_victim_search() {
    let out = gpolc()
        .args([
            "explain",
            "policies/preemption.gpol",
            "unsaved work protects a run from batch jobs but not from serving",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    insta::assert_snapshot!(text);
}

#[test]
fn sim_runs_the_bundled_default() {
    let out = gpolc().args(["sim"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    insta::assert_snapshot!(text);
}

#[test]
fn sim_json_is_the_same_for_both_engines() {
    let run = |engine: &str| {
        let trace = "name,arrival,duration,gpus,queue\na,0,100,8,training\nb,10,50,4,research\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, trace).unwrap();
        let out = gpolc().args(["sim", "--json", "--engine", engine, "--trace"]).arg(&path).assert().success();
        String::from_utf8_lossy(&out.get_output().stdout).replace(&path.display().to_string(), "t.csv")
    };
    let jit = run("jit");
    assert!(jit.contains("\"finished\": 2"), "{jit}");
    assert_eq!(jit, run("interp"));
}

#[test]
fn sim_compares_policies_over_seeds_side_by_side() {
    let out = gpolc()
        .args([
            "sim",
            "policies/best_fit.gpol",
            "--compare",
            "policies/random.gpol",
            "--fill",
            "100",
            "--seeds",
            "1..3",
        ])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let header = text.lines().next().unwrap_or_default();
    for column in ["3 seeds", "best_fit", "random", "Δ"] {
        assert!(header.contains(column), "{header}");
    }
    // Random placement strands capacity that best fit uses: its delta is a loss.
    let allocated = text.lines().find(|l| l.starts_with("allocated")).unwrap_or_default();
    assert!(allocated.contains(" -"), "{allocated}");
    // The baseline alone is the plain summary of one policy.
    let out = gpolc().args(["sim", "--compare", "policies/best_fit.gpol", "--fill", "100"]).assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("fill"));
}

#[test]
fn sim_compare_shows_each_queues_delays_and_gpus() {
    // One 8-GPU node, two 8-GPU jobs of one hour: whichever queue goes first waits 0s,
    // the other 1h. The queues tie on share, so declaration order decides, and the two
    // policies declare them in opposite orders.
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "c.toml", "[[pool]]\nname = \"n\"\ngpu_model = \"h100\"\ngpus = 8\n");
    let trace = write(dir.path(), "t.csv", "name,arrival,duration,gpus,queue\na,0,3600,8,a\nb,0,3600,8,b\n");
    let first = write(dir.path(), "p1.gpol", "policy first\nqueue all {\n  queue a {}\n  queue b {}\n}\n");
    let second = write(dir.path(), "p2.gpol", "policy second\nqueue all {\n  queue b {}\n  queue a {}\n}\n");
    let out = gpolc()
        .args(["sim", &first, "--compare", &second, "--cluster", &cluster, "--trace", &trace])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let row = |name: &str| {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_default();
        line[name.len()..].split_whitespace().map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(row("queue a delay p95"), ["0s", "1h", "+1h"], "{text}");
    assert_eq!(row("queue b delay p50"), ["1h", "0s", "-1h"], "{text}");
    assert_eq!(row("queue a mean GPUs"), ["4.0", "4.0", "0.0"], "{text}");
    assert_eq!(row("queue a evictions"), ["0", "0", "0"], "{text}");
    assert_eq!(row("queue b GPU-hours lost"), ["0.0", "0.0", "0.0"], "{text}");
}

#[test]
fn sim_prices_idle_unused_and_lost_gpu_hours() {
    // The bundled cluster: 64 H100 and 64 A100 cards. H100s at 2.50 an hour, the rest at
    // 1.00: the summary, the JSON and the comparison carry the cost.
    let out = gpolc().args(["sim", "--price", "h100=2.50", "--price", "1", "--json"]).assert().success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let cost = &report["cost"];
    assert_eq!(cost["price_per_gpu_hour"], serde_json::json!({ "a100": 1.0, "h100": 2.5 }));
    let hours = |model: &str, field: &str| report["gpu_hours_by_model"][model][field].as_f64().unwrap_or(f64::NAN);
    let idle = hours("h100", "idle") * 2.5 + hours("a100", "idle");
    assert!((cost["idle"].as_f64().unwrap_or(0.0) - idle).abs() < 1e-6 * idle, "{cost}");
    assert!(idle > 0.0);
    let out = gpolc().args(["sim", "--price", "h100=2.50"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("cost")).unwrap_or_default();
    assert!(line.contains("idle ") && line.contains("(per GPU-hour: h100 2.50)"), "{text}");
    assert!(text.contains("no price for GPU model a100: its GPU-hours are not in the cost"), "{text}");
    let out = gpolc()
        .args(["sim", "--compare", "policies/borrowing.gpol", "policies/best_fit.gpol", "--price", "2"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.lines().any(|l| l.starts_with("cost of idle GPUs")), "{text}");
    let out = gpolc().args(["sim", "--price", "h100=cheap"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("expected MODEL=PRICE (h100=2.50) or PRICE, found `h100=cheap`"), "{stderr}");
    let out = gpolc().args(["sim", "--price", "b200=4"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("warning: --price: field `b200`: no node has GPU model `b200`"), "{stderr}");
}

#[test]
fn sim_names_the_file_line_and_field_of_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.csv");
    std::fs::write(&trace, "arrival,gpus,queue\n0,1,training\n5,two,training\n").unwrap();
    let out = gpolc().args(["sim", "--trace"]).arg(&trace).assert().code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("bad.csv:3: field `gpus`: expected a whole number, found `two`"), "{err}");
    let cluster = dir.path().join("c.toml");
    std::fs::write(&cluster, "[[pool]]\nname = \"a\"\ngpus = 8\n").unwrap();
    let out = gpolc().args(["sim", "--cluster"]).arg(&cluster).assert().code(1);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("c.toml:1: field `gpu_model`"), "{err}");
}

#[test]
fn sim_writes_a_self_contained_report_with_charts() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("out.html");
    let trace = dir.path().join("t.csv");
    std::fs::write(&trace, "name,arrival,duration,gpus,queue\na,0,3600,8,training\nb,60,7200,4,research\n").unwrap();
    gpolc().args(["sim", "--trace"]).arg(&trace).arg("--report").arg(&report).assert().success();
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    for title in [
        "Allocation vs utilization",
        "Waiting demand",
        "Queue GPUs vs guarantees",
        "Queueing delay",
        "Fragmentation over time",
    ] {
        assert!(html.contains(title), "missing {title}");
    }
    // No eviction, no eviction timeline.
    assert!(!html.contains("Evictions over time"));
    assert_eq!(html.matches("<svg").count(), 5);
    // Self-contained: no scripts, nothing loaded from elsewhere.
    assert!(!html.contains("<script") && !html.contains("href=") && !html.contains("src="));
    // A failed run writes no report.
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "arrival,gpus\nsoon,1\n").unwrap();
    let missing = dir.path().join("never.html");
    gpolc().args(["sim", "--trace"]).arg(&bad).arg("--report").arg(&missing).assert().code(1);
    assert!(!missing.exists());
}

#[test]
fn sim_reads_a_slurm_node_list() {
    // Real `sinfo --json` of Slurm 22.05 (simulator/tests/slurm/capture.sh): 6 nodes, 22 GPUs.
    // a100-1 takes `a`; `b` takes 2 of h100-1's 4 cards; a100-2 is drained and gpu-1 is
    // draining, so `c` (4 GPUs) waits for `b` to finish: 540 s.
    let dir = tempfile::tempdir().unwrap();
    let trace = write(
        dir.path(),
        "t.csv",
        "name,arrival,duration,gpus,queue\na,0,3600,8,training\nb,60,600,2,research\nc,120,600,4,research\n",
    );
    let out = gpolc()
        .args(["sim", "--json", "--cluster", "simulator/tests/fixtures/slurm/sinfo.json", "--trace", &trace])
        .assert()
        .success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!((report["nodes"].as_u64(), report["gpus"].as_f64()), (Some(6), Some(22.0)), "{report}");
    assert_eq!(report["jobs"]["finished"].as_u64(), Some(3), "{report}");
    assert_eq!(report["queueing_delay"][0]["max"].as_f64(), Some(540.0), "{report}");
}

#[test]
fn sim_replays_a_slurm_history_with_queues_from_accounts_or_partitions() {
    // Real `sacct --json` of Slurm 22.05 (simulator/tests/slurm/capture_sacct.sh): six jobs
    // ran in accounts research and inference, partitions gpu and debug; one never started.
    let history = "simulator/tests/fixtures/slurm/sacct.json";
    let out = gpolc().args(["sim", "policies/daily_tide.gpol", "--json", "--trace", history]).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        err.contains("warning: simulator/tests/fixtures/slurm/sacct.json: 1 job(s) never started (job 7…)"),
        "{err}"
    );
    assert!(err.contains("QOS `high` (1 job(s)) names no priority class of the policy"), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["jobs"]["finished"].as_u64(), Some(6), "{report}");
    assert!(report["notes"].to_string().contains("never started"), "{report}");
    // Partitions as queues: a policy of partitions takes the same history.
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "partitions.gpol",
        "policy partitions\nqueue root {\n  queue gpu { weight 3 }\n  queue debug { weight 1 }\n}\npriority_class high = 100\n",
    );
    let by_partition = ["sim", &policy, "--json", "--trace", history, "--queue-from", "partition"];
    let out = gpolc().args(by_partition).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!err.contains("QOS `high`") && err.contains("QOS `normal` (5 job(s))"), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["jobs"]["finished"].as_u64(), Some(6), "{report}");
    // Read as accounts, the history names queues this policy does not have.
    let out = gpolc().args(["sim", &policy, "--trace", history]).assert().code(1);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("research"));
}

#[test]
fn sim_takes_slurms_topology_conf_for_a_slurm_node_list() {
    // Three replicas of 4 GPUs need a100-1 (8) and h100-1 (4), the only GPU nodes up; the
    // gang must stay under one switch. Under one leaf switch it starts; under two, never.
    let dir = tempfile::tempdir().unwrap();
    let policy =
        write(dir.path(), "p.gpol", "policy switches\ntopology switch\nqueue team {}\ngang { require same switch }\n");
    let trace = write(dir.path(), "t.csv", "name,arrival,duration,gpus,replicas\ng,0,600,4,3\n");
    let run = |conf: &str| {
        let topology = write(dir.path(), "topology.conf", conf);
        let out = gpolc()
            .args([
                "sim",
                &policy,
                "--json",
                "--cluster",
                "simulator/tests/fixtures/slurm/sinfo.json",
                "--trace",
                &trace,
            ])
            .args(["--slurm-topology", &topology])
            .assert()
            .success();
        let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        (report["jobs"]["finished"].as_u64(), String::from_utf8_lossy(&out.get_output().stderr).into_owned())
    };
    let (finished, stderr) = run("SwitchName=leaf Nodes=a100-[1-2],cpu-[1-2],gpu-1,h100-1\n");
    assert_eq!(finished, Some(1), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let (finished, stderr) = run(
        "SwitchName=s1 Nodes=a100-[1-2],cpu-[1-2],gpu-1\nSwitchName=s2 Nodes=h100-1,h100-9\nSwitchName=top Switches=s[1-2]\n",
    );
    assert_eq!(finished, Some(0), "{stderr}");
    assert!(stderr.contains("1 nodes it names are not in the cluster: h100-9"), "{stderr}");
    // A mistake names the file, line and key.
    let bad = write(dir.path(), "bad.conf", "SwitchName=s1 Nodes=a100-1\nSwitchName=s2 Nodes=a100-1\n");
    let out = gpolc()
        .args(["sim", "--cluster", "simulator/tests/fixtures/slurm/sinfo.json", "--slurm-topology", &bad])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("bad.conf:2: field `Nodes`: node `a100-1` is already under switch `s1`"), "{stderr}");
}

#[test]
fn sim_takes_topology_levels_from_node_labels() {
    // Two 4-GPU nodes from `kubectl get nodes -o json`; a gang of two 4-GPU replicas must
    // stay in one rack, which only the nodes' own label says.
    let dir = tempfile::tempdir().unwrap();
    let node = |name: &str, rack: &str| {
        format!(
            r#"{{"kind": "Node", "metadata": {{"name": "{name}", "labels": {{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "example.com/rack": "{rack}"}}}},
               "status": {{"allocatable": {{"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "4"}}}}}}"#
        )
    };
    let policy =
        write(dir.path(), "p.gpol", "policy racks\ntopology rack\nqueue team {}\ngang { require same rack }\n");
    let trace = write(dir.path(), "t.csv", "name,arrival,duration,gpus,replicas\ng,0,600,4,2\n");
    let run = |racks: (&str, &str), key: &str| {
        let nodes = format!(r#"{{"kind": "List", "items": [{}, {}]}}"#, node("n1", racks.0), node("n2", racks.1));
        let cluster = write(dir.path(), "nodes.json", &nodes);
        let out = gpolc()
            .args(["sim", &policy, "--json", "--cluster", &cluster, "--trace", &trace])
            .args(["--topology-label", &format!("rack={key}")])
            .assert()
            .success();
        let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        (report["jobs"]["finished"].as_u64(), String::from_utf8_lossy(&out.get_output().stderr).into_owned())
    };
    assert_eq!(run(("r1", "r1"), "example.com/rack").0, Some(1));
    assert_eq!(run(("r1", "r2"), "example.com/rack").0, Some(0));
    let (finished, stderr) = run(("r1", "r1"), "example.com/row");
    assert_eq!(finished, Some(0), "no label, every node its own rack");
    assert!(stderr.contains("warning: --topology-label: no node has the label `example.com/row`"), "{stderr}");
    gpolc().args(["sim", "--topology-label", "rack"]).assert().code(2);
}

#[test]
fn a_queue_without_a_guarantee_neither_borrows_nor_lends() {
    // `free` has no guarantee: what it holds is not "borrowed" (null in JSON, – in the
    // table); `owned`, guaranteed 4 GPUs, borrows what it holds above them.
    let dir = tempfile::tempdir().unwrap();
    let policy =
        write(dir.path(), "p.gpol", "policy p\nqueue all {\n  queue owned { guarantee 4 gpu }\n  queue free {}\n}\n");
    let trace = write(dir.path(), "t.csv", "name,arrival,duration,gpus,queue\na,0,3600,8,owned\nb,0,3600,8,free\n");
    let out = gpolc().args(["sim", &policy, "--json", "--trace", &trace]).assert().success();
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let queue = |name: &str| {
        report["queues"].as_array().and_then(|qs| qs.iter().find(|q| q["name"] == name)).cloned().unwrap_or_default()
    };
    assert_eq!(queue("free")["borrowed_gpu_hours"], serde_json::Value::Null, "{report}");
    assert_eq!(queue("free")["lent_gpu_hours"], serde_json::Value::Null, "{report}");
    assert_eq!(queue("owned")["borrowed_gpu_hours"].as_f64(), Some(4.0), "{report}");
    let out = gpolc().args(["sim", &policy, "--trace", &trace]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // Right-aligned like the numbers above it.
    let line = |start: &str| stdout.lines().find(|l| l.starts_with(start)).unwrap_or_default().to_string();
    let (head, free) = (line("queue "), line("free "));
    let cells: Vec<&str> = free.split_whitespace().collect();
    assert_eq!(cells.get(7..9), Some(&["–", "–"][..]), "{stdout}");
    let lent_end = head.find("lent GPU-h").map(|i| head[..i].chars().count() + "lent GPU-h".len());
    let dash_end = free.rfind('–').map(|i| free[..i].chars().count() + 1);
    assert_eq!(dash_end, lent_end, "{stdout}");
}

/// `bench --nodes` takes 1 to the cluster limit: more is "too large", none measures
/// nothing; neither is clamped.
#[test]
fn bench_node_counts_are_within_the_cluster_limit() {
    let out = gpolc().args(["bench", "policies/fgd.gpol", "--nodes", "100000000"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("100000000 is too large, at most 100000"), "{stderr}");
    let out = gpolc().args(["bench", "policies/fgd.gpol", "--nodes", "0"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("at least one node"), "{stderr}");
}

/// When standard error is not a terminal (CI logs), a long simulation prints a progress
/// line every few seconds (here every 0 s, so every report of progress shows).
#[test]
fn sim_prints_progress_lines_when_stderr_is_not_a_terminal() {
    let out = gpolc().env("GPOLC_PROGRESS_EVERY", "0").args(["sim"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.lines().any(|l| l.starts_with("simulating: ") && l.contains("% after ")), "{stderr}");
    // A trace file is checked in a pass of its own before the run, with its own lines.
    let out = gpolc().env("GPOLC_PROGRESS_EVERY", "0").args(["sim", "--trace", "samples/trace.csv"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let checking = stderr.lines().position(|l| l.starts_with("checking the trace: "));
    let simulating = stderr.lines().position(|l| l.starts_with("simulating: "));
    assert!(checking.is_some() && checking < simulating, "{stderr}");
}

/// The two ping-pong policies of the preemption issue: two queues without guarantees
/// whose rules let each take from the other.
const PING_PONG_RUNTIME: &str = "policy ping_pong\n\nqueue org {\n  queue a {}\n  queue b {}\n}\n\n\
    preempt other_queue { when claimant.queue != victim.queue and victim.runtime >= 1m }\n";
const PING_PONG_ALWAYS: &str =
    "policy ping_pong\n\nqueue org {\n  queue a {}\n  queue b {}\n}\n\npreempt anything { when true }\n";

#[test]
fn check_shows_eviction_cycles_and_names_the_proof_when_there_is_one() {
    let dir = tempfile::tempdir().unwrap();
    for text in [PING_PONG_RUNTIME, PING_PONG_ALWAYS] {
        let p = write(dir.path(), "pp.gpol", text);
        let out = gpolc().args(["check", &p, "--color", "never", "--deny-warnings"]).assert().code(1);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains("E0043") && stderr.contains("test \"evictions cycle\""), "{stderr}");
    }
    // A strict priority order is proved, and check says by what.
    let proved = PING_PONG_ALWAYS.replace("when true", "when claimant.priority > victim.priority");
    let p = write(dir.path(), "proved.gpol", &proved);
    let out = gpolc().args(["check", &p, "--color", "never", "--deny-warnings"]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("evictions cannot cycle: every eviction puts a claimant above"), "{stderr}");
    // Turning the strict `>` into `>=` flips the verdict.
    let mutated = proved.replace('>', ">=");
    let p = write(dir.path(), "mutated.gpol", &mutated);
    gpolc().args(["check", &p, "--color", "never", "--deny-warnings"]).assert().code(1);
}

#[test]
fn sim_decisions_are_the_runs_own_record_job_by_job() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("decisions.jsonl");
    let assert = gpolc().args(["sim", "--json", "--decisions"]).arg(&file).assert().code(0);
    let report: serde_json::Value = serde_json::from_slice(&assert.get_output().stdout).expect("JSON");
    let text = std::fs::read_to_string(&file).expect("written");
    let decisions: Vec<gpol_sim::decisions::Decision> =
        text.lines().map(|l| serde_json::from_str(l).expect("one decision per line")).collect();
    let count = |kind: &str| decisions.iter().filter(|d| d.kind == kind).count() as u64;
    // The same run the report sums up: every job finishes, each eviction is one line
    // naming the job it made room for and the rule, and every start is a placement.
    assert_eq!(Some(count("finished")), report["jobs"]["finished"].as_u64());
    assert_eq!(Some(count("evicted")), report["preemption"]["evictions"].as_u64());
    assert!(count("evicted") > 0, "the bundled run evicts");
    assert_eq!(count("placed"), count("finished") + count("evicted"));
    let evicted = decisions.iter().find(|d| d.kind == "evicted").expect("one");
    assert!(evicted.by.is_some() && evicted.rule.as_deref() == Some("take_back"), "{evicted:?}");
    assert!(decisions.iter().filter(|d| d.kind == "placed").all(|d| !d.nodes.is_empty()));
    assert!(decisions.windows(2).all(|w| w[0].at_s <= w[1].at_s), "in the order they were made");
    // One run only.
    gpolc().args(["sim", "--seeds", "1..2", "--decisions"]).arg(dir.path().join("two.jsonl")).assert().code(2);
}

#[test]
fn a_timed_replay_of_an_openb_pod_list_warns() {
    let dir = tempfile::tempdir().unwrap();
    let pods = write(
        dir.path(),
        "pods.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p-0,1000,1024,1,1000,,LS,Running,100,1100,200\n",
    );
    let out = gpolc().args(["sim", "policies/best_fit.gpol", "--trace", &pods]).assert().success();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("warning: the trace is an openb pod list") && err.contains("--fill 130"), "{err}");
    let out = gpolc().args(["sim", "policies/best_fit.gpol", "--trace", &pods, "--fill", "130"]).assert().success();
    assert!(!String::from_utf8_lossy(&out.get_output().stderr).contains("openb pod list"));
}
