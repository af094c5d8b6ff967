//! `job_submit.lua` run by a real Lua 5.1 (`lua5.1`, as Slurm embeds it) against a stub of
//! Slurm's `slurm` table: for every example policy and a few hundred generated jobs, the
//! generated script rejects exactly the jobs whose first refusing submit-time admit rule
//! the reference interpreter names, with that rule's message. Jobs reach the script as
//! `job_desc` tables written by `jobs::job_desc`, the way back of the script's own
//! `gpol.job`: the two halves of the job model are held to each other here.

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::interp::{self, Roots};
use gpol_compiler::load::Checked;
use gpol_compiler::spec::{JobSpec, Request};
use gpol_runtime::Scheduler;
use gpol_slurm::jobs::{QueueFrom, Reading};
use gpol_slurm::lua::Policy;
use gpol_slurm::{jobs, submit};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::path::Path;
use std::process::Command;

/// The examples, and a policy with a submit-time rule over every field a Slurm job carries.
const POLICIES: &[&str] = &[
    "../slurm/tests/policies/submit_rules.gpol",
    "best_fit.gpol",
    "borrowing.gpol",
    "fair_share.gpol",
    "gangs.gpol",
    "gpu_sharing.gpol",
    "kai.gpol",
    "kueue_classic.gpol",
    "pack_spread.gpol",
    "preemption.gpol",
    "slurm_multifactor.gpol",
];

fn lua_available() -> bool {
    let ok = Command::new("lua5.1").arg("-v").output().is_ok_and(|o| o.status.success());
    if !ok {
        gpol_testing::missing_tool("lua5.1, to run job_submit.lua", "apt-get install lua5.1");
    }
    ok
}

fn compile(name: &str, text: &str) -> CompiledPolicy {
    Checked::from_text(name, text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("{name} compiles"))
}

/// Jobs Slurm can express exactly, over the names and values the policy uses.
fn jobs(policy: &CompiledPolicy, n: usize) -> Vec<JobSpec> {
    let p = &policy.policy;
    let mut queues: Vec<String> = p.queues.iter().filter(|q| q.children.is_empty()).map(|q| q.name.clone()).collect();
    queues.push("nobody".into());
    let mut classes: Vec<Option<String>> = p.priority_classes.iter().map(|(c, _)| Some(c.clone())).collect();
    classes.push(None);
    let mut strings: Vec<String> = policy.program.literals.clone();
    strings.push("other".into());
    let keys: Vec<String> = policy.program.job_labels.clone();
    let job = (
        prop::sample::select(queues),
        prop::sample::select(classes),
        prop::sample::select(vec![0u32, 1, 2, 4, 7, 8, 9, 16, 32, 64]),
        prop::sample::select(vec![1u32, 2, 3, 4, 8, 16]),
        (0u64..=256, prop::sample::select(vec![0u64, 1, 64, 512, 2048])),
        prop::option::of(prop::sample::select(vec![1u64, 30, 59, 60, 61, 600, 1440])),
        prop::option::of(prop::sample::select(strings.clone())),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        prop::collection::vec(prop::option::of(prop::sample::select(strings)), keys.len()),
    );
    let mut runner = TestRunner::new_with_rng(Config::default(), TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    (0..n)
        .filter_map(|i| {
            let (queue, class, cards, replicas, (cpu, mem_gib), minutes, model, flags, labels) =
                job.new_tree(&mut runner).ok()?.current();
            let mut j = JobSpec::named(format!("j{i}"));
            j.user = Some("alice".into());
            j.queue = Some(queue);
            j.priority_class = class;
            j.request = if cards == 0 { Request::None } else { Request::Whole(cards) };
            j.models = if cards > 0 { model.into_iter().collect() } else { Vec::new() };
            j.replicas = replicas;
            j.cpu_milli = cpu * 1000;
            j.mem = mem_gib << 30;
            j.duration_ms = minutes.map(|m| m * 60_000);
            (j.bursty, j.latency_critical, j.preemptible) = flags;
            j.labels = keys.iter().zip(labels).filter_map(|(k, v)| Some((k.clone(), v?))).collect();
            Some(j)
        })
        .collect()
}

/// Each submit-time admit rule's answer for the job in the reference interpreter, by
/// name in declaration order, or `Err` when the runtime does not take the job at all.
fn interpreter(policy: &CompiledPolicy, job: &JobSpec) -> Result<Vec<(String, bool)>, String> {
    let mut s = Scheduler::new(policy.clone());
    let id = s.submit(job.clone()).map_err(|e| format!("{e:?}"))?;
    let view = s.view(Some(id));
    let ctx = s.ctx(&view);
    let rec = s.job_rec(id);
    let roots = Roots { job: Some(&rec), ..Roots::default() };
    Ok(policy
        .program
        .admit
        .iter()
        .filter(|r| r.is_static)
        .map(|r| (r.name.clone(), interp::eval(&r.body, &ctx, &roots).b()))
        .collect())
}

/// What the script says of one job: each compiled rule's answer, the rule that refused
/// it (`-`: none) and the message the user sees.
#[derive(Debug)]
struct Said {
    answers: Vec<(String, bool)>,
    refused: String,
    message: String,
}

/// Runs `harness` (Lua: `arg[1]` is the script, `arg[2]` the file returning the
/// `job_desc` tables) with a stub of Slurm's `slurm` table; what it printed.
fn run_harness(script: &str, descs: &[String], harness: &str, dir: &Path) -> String {
    let (script_path, jobs_path, harness_path) =
        (dir.join("job_submit.lua"), dir.join("jobs.lua"), dir.join("harness.lua"));
    std::fs::write(&script_path, script).expect("writable");
    std::fs::write(&jobs_path, format!("return {{\n{}\n}}\n", descs.join(",\n"))).expect("writable");
    let stub = "slurm = { SUCCESS = 0, ERROR = -1 }\nfunction slurm.log_user(fmt, ...) slurm.message = string.format(fmt, ...) end\n";
    std::fs::write(&harness_path, format!("{stub}{harness}")).expect("writable");
    let out =
        Command::new("lua5.1").arg(&harness_path).arg(&script_path).arg(&jobs_path).output().expect("lua5.1 runs");
    assert!(out.status.success(), "lua5.1 failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the script on the jobs.
fn lua(script: &str, descs: &[String], dir: &Path) -> Vec<Said> {
    let harness = r#"
dofile(arg[1])
for _, desc in ipairs(dofile(arg[2])) do
  slurm.message = nil
  local job = gpol.job(desc)
  local answers = {}
  for _, rule in ipairs(gpol.rules) do
    table.insert(answers, rule.name .. "=" .. (rule.check(job) and "1" or "0"))
  end
  local rc = slurm_job_submit(desc, {}, 0)
  if (rc == slurm.ERROR) ~= (gpol.refused ~= nil) then error("return code and refusal disagree") end
  io.write(table.concat(answers, ",") .. "\t" .. (gpol.refused or "-") .. "\t" .. (slurm.message or "") .. "\n")
end
"#;
    run_harness(script, descs, harness, dir)
        .lines()
        .map(|l| {
            let mut parts = l.split('\t');
            let answers = (parts.next().unwrap_or_default().split(','))
                .filter(|a| !a.is_empty())
                .map(|a| {
                    let (name, v) = a.split_once('=').unwrap_or((a, ""));
                    (name.to_string(), v == "1")
                })
                .collect();
            let refused = parts.next().unwrap_or_default().to_string();
            Said { answers, refused, message: parts.next().unwrap_or_default().to_string() }
        })
        .collect()
}

#[test]
fn the_script_refuses_what_the_interpreter_refuses_with_the_rules_message() {
    if !lua_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut refused_somewhere, mut answered) = (0, 0);
    for name in POLICIES {
        let text = std::fs::read_to_string(Path::new("../policies").join(name)).expect("the example exists");
        let policy = compile(name, &text);
        let view = Policy { program: &policy.program, hir: &policy.policy };
        let emitted = submit::emit(view, name, false, None, QueueFrom::Account);
        let compiled: Vec<String> =
            emitted.rules.iter().filter(|r| r.kind == "admit" && r.condition.is_ok()).map(|r| r.name.clone()).collect();
        let script = emitted.lua;
        let (mut descs, mut expected) = (Vec::new(), Vec::new());
        for job in jobs(&policy, 300) {
            let Ok(desc) = jobs::job_desc(&job, &Reading::default()) else { continue };
            let Ok(verdict) = interpreter(&policy, &job) else { continue };
            descs.push(desc);
            expected.push((job, verdict));
        }
        assert!(descs.len() > 100, "{name}: only {} jobs", descs.len());
        let got = lua(&script, &descs, dir.path());
        assert_eq!(got.len(), expected.len(), "{name}");
        for (i, ((job, want), said)) in expected.iter().zip(&got).enumerate() {
            // Every compiled rule answers as the interpreter does, and the first refusal
            // rejects the job with its rule's message.
            // (Submit-time rules over what Slurm's job model lacks — card fractions, MIG —
            // are not compiled: the header lists them.)
            let want: Vec<(String, bool)> = want.iter().filter(|(r, _)| compiled.contains(r)).cloned().collect();
            assert_eq!(said.answers, want, "{name}: {job:?}\n{}", descs[i]);
            let first = want.iter().find(|(_, ok)| !ok).map(|(r, _)| r.clone());
            assert_eq!(said.refused, first.clone().unwrap_or_else(|| "-".into()), "{name}");
            if let Some(r) = first {
                refused_somewhere += 1;
                let reason = policy.program.admit.iter().find(|a| a.name == r).and_then(|a| a.reason.clone());
                let text = reason.unwrap_or_else(|| format!("refused by admit rule {r}"));
                assert_eq!(said.message, format!("{text} (gpol admit {r})"), "{name}");
            }
            answered += want.len();
        }
    }
    assert!(refused_somewhere > 50, "only {refused_somewhere} refusals: the jobs do not reach the rules");
    assert!(answered > 2000, "only {answered} rule answers compared");
}

#[test]
fn the_lua_built_ins_compute_what_gpols_do() {
    if !lua_available() {
        return;
    }
    use gpol_compiler::ops;
    let values =
        [-2.5, -0.5, -0.0, 0.0, 0.49999999999999994, 0.5, 1.5, 2.5, -3.7, 7.0, 1e300, -1e-300, f64::INFINITY, f64::NAN];
    let policy = compile("t.gpol", "policy t\n");
    let script = submit::emit(
        Policy { program: &policy.program, hir: &policy.policy },
        "t.gpol",
        false,
        None,
        QueueFrom::Account,
    )
    .lua;
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("job_submit.lua"), script).expect("writable");
    let list: Vec<String> = values.iter().map(|&x| gpol_slurm::lua::number(x)).collect();
    let harness = format!(
        r#"slurm = {{ SUCCESS = 0, ERROR = -1 }}
dofile(arg[1])
local v = {{ {} }}
local function show(x) if x ~= x then return "nan" end return string.format("%.17g", x) end
for _, x in ipairs(v) do
  io.write(show(gpol.round(x)), " ", show(gpol.trunc(x)), " ", show(gpol.clamp(x, -1, 2)), "\n")
  for _, y in ipairs(v) do io.write(show(gpol.min(x, y)), " ", show(gpol.max(x, y)), " ", show(gpol.mod(x, y)), "\n") end
end
"#,
        list.join(", ")
    );
    std::fs::write(dir.path().join("h.lua"), harness).expect("writable");
    let out = Command::new("lua5.1").arg(dir.path().join("h.lua")).arg(dir.path().join("job_submit.lua")).output();
    let out = out.expect("lua5.1 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let show = |x: f64| if x.is_nan() { "nan".to_string() } else { format!("{x:e}") };
    let parse = |s: &str| if s == "nan" { f64::NAN } else { s.parse::<f64>().unwrap_or(f64::NAN) };
    let mut lines = text.lines();
    for &x in &values {
        let got: Vec<f64> = lines.next().unwrap_or_default().split(' ').map(parse).collect();
        let want = [ops::round(x), x.trunc(), ops::clamp(x, -1.0, 2.0)];
        for (g, w) in got.iter().zip(want) {
            assert!(
                g.to_bits() == w.to_bits() || (g == &w && *g == 0.0) || (g.is_nan() && w.is_nan()),
                "{x}: {} vs {}",
                show(*g),
                show(w)
            );
        }
        for &y in &values {
            let got: Vec<f64> = lines.next().unwrap_or_default().split(' ').map(parse).collect();
            let want = [ops::min(x, y), ops::max(x, y), ops::modulo(x, y)];
            for (g, w) in got.iter().zip(want) {
                assert!(g == &w || (g.is_nan() && w.is_nan()), "{x}, {y}: {} vs {}", show(*g), show(w));
            }
        }
    }
}

/// Filters over the job and what never changes of a node, of every kind the node table
/// carries: model, labels, memory, CPUs, sharing.
const NODE_FILTERS: &str = r#"policy node_filters

filter big_jobs_on_h100 "jobs of 8 cards run on H100" { job.whole_cards < 8 gpu or node.gpu_model == "h100" }
filter own_zone "a job labelled with a zone runs there" {
  not has(job.labels["zone"]) or node.labels["zone"] == job.labels["zone"]
}
filter memory { job.mem <= node.mem }
filter cores { job.cpu <= node.cpu }
filter latency_critical_not_timesliced { not (job.latency_critical and node.sharing == timeslice) }
"#;

/// Nodes of every sort the filters tell apart.
fn filter_nodes() -> Vec<gpol_compiler::spec::NodeSpec> {
    use gpol_compiler::spec::{NodeSpec, Sharing};
    let node = |name: &str, model: &str, zone: Option<&str>, cpu: u64, mem_gib: u64, sharing: Sharing| {
        let mut n = NodeSpec::named(name);
        (n.model, n.cards, n.cpu_milli, n.mem, n.sharing) = (model.into(), 8, cpu * 1000, mem_gib << 30, sharing);
        if sharing == Sharing::Timeslice {
            n.max_clients = 4;
        }
        n.labels = zone.map(|z| vec![("zone".to_string(), z.to_string())]).unwrap_or_default();
        n
    };
    vec![
        node("h1", "h100", Some("a"), 128, 2048, Sharing::Exclusive),
        node("h2", "h100", Some("b"), 64, 512, Sharing::Timeslice),
        node("a1", "a100", Some("a"), 256, 1024, Sharing::Exclusive),
        node("a2", "a100", None, 32, 256, Sharing::Exclusive),
        // Alike to h1 and a2 but in name: the script asks each class of nodes once.
        node("h3", "h100", Some("a"), 128, 2048, Sharing::Exclusive),
        node("a3", "a100", None, 32, 256, Sharing::Exclusive),
    ]
}

/// Whether some node could ever hold the job, empty (its model, cards, CPUs and memory per
/// node): the reference for `gpol.misfit`.
fn some_node_holds(job: &JobSpec, nodes: &[gpol_compiler::spec::NodeSpec]) -> bool {
    let cards = match job.request {
        Request::Whole(n) => n,
        _ => 0,
    };
    nodes.iter().any(|n| {
        let gpus = cards == 0 || (n.cards >= cards && job.models.first().is_none_or(|m| *m == n.model));
        gpus && job.cpu_milli <= n.cpu_milli && job.mem <= n.mem
    })
}

#[test]
fn static_filters_exclude_the_nodes_the_interpreter_refuses() {
    if !lua_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let nodes = filter_nodes();
    let (mut excluded_somewhere, mut compared, mut misfits) = (0, 0, 0);
    for (name, text) in [
        ("node_filters.gpol", NODE_FILTERS.to_string()),
        // A filter over node names: every node is a class of its own.
        ("by_name.gpol", format!("{NODE_FILTERS}filter not_h3 {{ job.whole_cards < 2 gpu or node.name != \"h3\" }}\n")),
        ("gpu_sharing.gpol", std::fs::read_to_string("../policies/gpu_sharing.gpol").expect("exists")),
    ] {
        let policy = compile(name, &text);
        let view = Policy { program: &policy.program, hir: &policy.policy };
        let table = submit::node_table(&policy, &nodes).expect("a table");
        let by_name =
            (policy.program.filters.iter()).any(|f| f.body.node.reads(gpol_compiler::schema::Record::Node, "name"));
        assert_eq!(table.matches("hosts = ").count(), if by_name { 6 } else { 4 }, "{name}: {table}");
        let emitted = submit::emit(view, name, false, Some(&table), QueueFrom::Account);
        let compiled: Vec<&str> = emitted
            .rules
            .iter()
            .filter(|r| r.kind == "filter" && r.condition.is_ok())
            .map(|r| r.name.as_str())
            .collect();
        assert!(!compiled.is_empty(), "{name}: no filter compiled");
        let (mut descs, mut expected, mut fits) = (Vec::new(), Vec::new(), Vec::new());
        for mut job in jobs(&policy, 300) {
            // The zones the nodes have, for the labels the filters read.
            if let Some(l) = job.labels.iter_mut().find(|(k, _)| k == "zone") {
                l.1 = if l.1.len() % 2 == 0 { "a".into() } else { "b".into() };
            }
            let Ok(desc) = jobs::job_desc(&job, &Reading::default()) else { continue };
            // The reference: each node, refused when a compiled filter refuses it.
            let mut s = Scheduler::new(policy.clone());
            for n in &nodes {
                s.add_node(n).expect("a node");
            }
            let Ok(id) = s.submit(job.clone()) else { continue };
            let view = s.view(Some(id));
            let ctx = s.ctx(&view);
            let rec = s.job_rec(id);
            let refused: Vec<String> = (s.node_records().iter().zip(&nodes))
                .filter(|(node, _)| {
                    let roots = Roots { job: Some(&rec), node: Some(node), ..Roots::default() };
                    (policy.program.filters.iter())
                        .filter(|f| compiled.contains(&f.name.as_str()))
                        .any(|f| !interp::eval(&f.body, &ctx, &roots).b())
                })
                .map(|(_, n)| n.name.clone())
                .collect();
            descs.push(desc);
            expected.push(refused);
            fits.push(some_node_holds(&job, &nodes));
        }
        assert!(descs.len() > 100, "{name}: only {} jobs", descs.len());
        let harness = r#"dofile(arg[1])
for _, desc in ipairs(dofile(arg[2])) do
  slurm.message = nil
  local excluded = gpol.excluded(gpol.job(desc))
  desc.exc_nodes = "x9"
  local rc = slurm_job_submit(desc, {}, 0)
  io.write(table.concat(excluded, ","), "\t", rc, "\t", desc.exc_nodes or "", "\t", slurm.message or "", "\n")
end
"#;
        let text = run_harness(&emitted.lua, &descs, harness, dir.path());
        assert_eq!(text.lines().count(), expected.len(), "{name}");
        for (((line, want), desc), fits) in text.lines().zip(&expected).zip(&descs).zip(&fits) {
            let fields: Vec<&str> = line.split('\t').collect();
            // The same nodes (the script lists them as hostlists, class by class).
            let sorted = |list: &str| {
                let mut v = gpol_slurm::hostlist::expand(list).expect("a hostlist");
                v.sort();
                v
            };
            assert_eq!(sorted(fields[0]), sorted(&want.join(",")), "{name}: {desc}");
            compared += nodes.len();
            if !fits {
                // No node could ever hold it: refused before the filters, as Slurm would.
                misfits += 1;
                assert_eq!(fields[1], "2014", "{name}: {line}");
                assert!(fields[3].starts_with("gpol: no node of the cluster can ever hold this job: "), "{line}");
            } else if want.len() == nodes.len() {
                // No node takes it: rejected, naming a filter.
                assert_eq!(fields[1], "-1", "{name}: {line}");
                assert!(
                    fields[3].starts_with("no node of the cluster passes the policy's filters (gpol filter "),
                    "{line}"
                );
            } else if want.is_empty() {
                assert_eq!((fields[1], fields[2]), ("0", "x9"), "{name}: the user's own exclusions kept");
            } else {
                excluded_somewhere += 1;
                assert_eq!(fields[1], "0", "{name}");
                assert_eq!(sorted(fields[2]), sorted(&format!("{},x9", want.join(","))), "{name}");
            }
        }
    }
    assert!(excluded_somewhere > 50, "only {excluded_somewhere} jobs had nodes excluded");
    assert!(misfits > 20, "only {misfits} jobs no node could hold");
    assert!(compared > 1000, "only {compared} node answers compared");
}

#[test]
fn the_site_factor_is_the_leading_job_order_key_as_the_interpreter_computes_it() {
    if !lua_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut compared = 0;
    for (name, text) in [
        (
            "desc.gpol",
            "policy desc\npriority_class urgent = 100\npriority_class normal = 10\n\
             job_order { job.priority desc, job.submitted asc }\n"
                .to_string(),
        ),
        (
            "asc.gpol",
            "policy asc\npriority_class urgent = 100\npriority_class normal = 10\n\
             job_order { job.total_gpus / 1 gpu + job.cpu / 1000 cpu - job.priority / 3 asc, job.submitted asc }\n"
                .to_string(),
        ),
    ] {
        let policy = compile(name, &text);
        let view = Policy { program: &policy.program, hir: &policy.policy };
        let emitted = submit::emit(view, name, false, None, QueueFrom::Account);
        assert!(emitted.rules.iter().any(|r| r.name == submit::SITE_FACTOR && r.condition.is_ok()), "{name}");
        let key = &policy.program.job_order[0];
        let sign = if key.dir == gpol_compiler::ir::Direction::Desc { 1.0 } else { -1.0 };
        let (mut descs, mut expected) = (Vec::new(), Vec::new());
        for job in jobs(&policy, 300) {
            let Ok(desc) = jobs::job_desc(&job, &Reading::default()) else { continue };
            let mut s = Scheduler::new(policy.clone());
            let Ok(id) = s.submit(job.clone()) else { continue };
            let view = s.view(Some(id));
            let ctx = s.ctx(&view);
            let rec = s.job_rec(id);
            let roots = Roots { job: Some(&rec), ..Roots::default() };
            let value = interp::eval(&key.body, &ctx, &roots).f();
            // 1e9 plus or minus thousandths, rounded half away from zero, within 0..2e9.
            expected.push((1e9 + sign * value * 1000.0).round().clamp(0.0, 2e9));
            descs.push(desc);
        }
        assert!(descs.len() > 100, "{name}: only {} jobs", descs.len());
        let harness = "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do\n  slurm_job_submit(desc, {}, 0)\n  io.write(string.format('%.17g', desc.site_factor or -1), '\\n')\nend\n";
        let text = run_harness(&emitted.lua, &descs, harness, dir.path());
        let got: Vec<f64> = text.lines().map(|l| l.parse().expect("a number")).collect();
        assert_eq!(got.len(), expected.len(), "{name}");
        for ((g, want), desc) in got.iter().zip(&expected).zip(&descs) {
            assert_eq!(g, want, "{name}: {desc}");
        }
        let distinct: std::collections::BTreeSet<u64> = got.iter().map(|&x| x as u64).collect();
        assert!(distinct.len() > 1, "{name}: the jobs differ in their factor");
        compared += got.len();
    }
    assert!(compared > 200);
}

#[test]
fn gpus_per_task_read_alike_in_lua_and_rust() {
    if !lua_available() {
        return;
    }
    use gpol_slurm::jobs::Request;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = compile("t.gpol", "policy t\n");
    let view = Policy { program: &policy.program, hir: &policy.policy };
    let script = submit::emit(view, "t.gpol", false, None, QueueFrom::Account).lua;
    let request = |nodes: u32, per_task: &str, tasks: Option<u64>, per_node: Option<u64>| Request {
        name: "t".into(),
        nodes,
        tres_per_task: per_task.into(),
        tasks,
        tasks_per_node: per_node,
        ..Request::default()
    };
    // (request, the cards per node and the model gpol reads)
    let cases = [
        (request(1, "gres:gpu:2", Some(4), None), 8, None),
        (request(2, "gres:gpu:1", Some(4), Some(2)), 2, None),
        (request(2, "gres:gpu:1", Some(5), None), 3, None),
        (request(4, "gres:gpu:h100:2", None, None), 1, Some("h100")),
        (request(2, "", Some(4), Some(2)), 0, None),
    ];
    let descs: Vec<String> = cases.iter().map(|(r, _, _)| r.lua_table()).collect();
    let harness = "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do\n  local job = gpol.job(desc)\n  io.write(job.whole_cards, '\\t', job.allowed_models[1] or '-', '\\n')\nend\n";
    let text = run_harness(&script, &descs, harness, dir.path());
    assert_eq!(text.lines().count(), cases.len());
    for (line, (r, cards, model)) in text.lines().zip(&cases) {
        let job = r.job(&Reading::default()).expect("readable");
        let rust = match job.request {
            gpol_compiler::spec::Request::Whole(n) => n,
            _ => 0,
        };
        assert_eq!((rust, job.models.first().map(String::as_str)), (*cards, *model), "Rust: {r:?}");
        assert_eq!(line, format!("{cards}\t{}", model.unwrap_or("-")), "Lua: {r:?}");
    }
}

#[test]
fn partitions_as_queues_read_alike_in_lua_and_rust() {
    if !lua_available() {
        return;
    }
    use gpol_slurm::jobs::Request;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = compile("t.gpol", "policy t\n");
    let view = Policy { program: &policy.program, hir: &policy.policy };
    let script = submit::emit(view, "t.gpol", false, None, QueueFrom::Partition).lua;
    let request = |partition: &str| Request {
        name: "t".into(),
        account: "acct".into(),
        partition: partition.into(),
        nodes: 1,
        ..Request::default()
    };
    // (partition asked for, the queue gpol reads); a job naming none is in the default
    // partition, which only Slurm's partition list (absent here) names.
    let cases = [("gpu", "gpu"), (" debug ", "debug"), (",gpu", "gpu"), ("", "")];
    let descs: Vec<String> = cases.iter().map(|(p, _)| request(p).lua_table()).collect();
    let harness = "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do\n  io.write(gpol.job(desc).queue or '<refused>', '\\n')\nend\n";
    let text = run_harness(&script, &descs, harness, dir.path());
    let reading = Reading { queue_from: QueueFrom::Partition, ..Reading::default() };
    assert_eq!(text.lines().count(), cases.len(), "{text}");
    for (line, (p, queue)) in text.lines().zip(&cases) {
        assert_eq!(line, *queue, "Lua: {p:?}");
        assert_eq!(request(p).job(&reading).expect("readable").queue.unwrap_or_default(), *queue, "Rust: {p:?}");
    }
    // Several partitions: no queue in Lua, where job_submit.lua refuses the job.
    let text = run_harness(&script, &[request("gpu,debug").lua_table()], harness, dir.path());
    assert_eq!(text.trim(), "<refused>");
    assert!(script.contains("submit to one partition"));
}

#[test]
fn deep_expressions_compile_only_as_deep_as_lua_parses_them() {
    if !lua_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut compiled, mut refused) = (0, 0);
    // Nested `if`s (four parser levels each), and long chains that must stay flat: a sum
    // and a list membership (an `or` chain) as long as gpol allows.
    let mut policies: Vec<String> = (1..=60)
        .step_by(3)
        .map(|depth| {
            let mut e = "1".to_string();
            for i in 0..depth {
                e = format!("if job.cpu > {i} cpu then {e} else {i}");
            }
            format!("policy deep\nadmit nested \"n\" {{ ({e}) >= 0 }}\n")
        })
        .collect();
    policies.push(format!("policy sum\nadmit sum \"s\" {{ {} >= 0 cpu }}\n", vec!["job.cpu"; 84].join(" + ")));
    let teams: Vec<String> = (0..200).map(|i| format!("\"t{i}\"")).collect();
    policies.push(format!("policy teams\nadmit teams \"t\" {{ job.labels[\"team\"] in [{}] }}\n", teams.join(", ")));
    for text in &policies {
        // Past gpol's own limits: not a policy.
        let Ok(policy) = Checked::from_text("deep.gpol", text).compile(EngineKind::Interp) else { continue };
        let view = Policy { program: &policy.program, hir: &policy.policy };
        let emitted = submit::emit(view, "deep.gpol", false, None, QueueFrom::Account);
        let rule = &emitted.rules[0];
        match &rule.condition {
            Ok(lua) => {
                assert!(gpol_slurm::lua::levels(lua) <= gpol_slurm::lua::MAX_LEVELS);
                compiled += 1;
            }
            Err(why) => {
                assert!(why.0.contains("more than Lua 5.1's parser takes"), "{}", why.0);
                refused += 1;
            }
        }
        // Whatever was compiled, Slurm's Lua loads the script and runs it.
        let desc = "{ name = \"x\", user_name = \"u\", min_cpus = 2, comment = \"team=t7\" }".to_string();
        let harness = "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do io.write(slurm_job_submit(desc, {}, 0), '\\n') end\n";
        let said = run_harness(&emitted.lua, &[desc], harness, dir.path());
        assert_eq!(said.trim(), "0", "{text}");
    }
    assert!(compiled >= 10 && refused >= 1, "compiled {compiled}, refused {refused}");
}

/// The script for a policy without rules, with `nodes` as its node table (or none).
fn plain_script(nodes: Option<&[gpol_compiler::spec::NodeSpec]>) -> String {
    let policy = compile("t.gpol", "policy t\n");
    let table = nodes.map(|n| submit::node_table(&policy, n).expect("a table"));
    let view = Policy { program: &policy.program, hir: &policy.policy };
    submit::emit(view, "t.gpol", false, table.as_deref(), QueueFrom::Account).lua
}

/// TRES lists: as sbatch writes them, as Slurm 22.05 counted them (measured), and each
/// way Slurm refuses one or gpol cannot read one.
const GRES_LISTS: &[&str] = &[
    "",
    "gres:gpu",
    "gres:gpu:4",
    "gres/gpu:h100:4",
    "gres:gpu:4,gres:gpu:2",
    "gres:gpu:2,gres:gpu:4",
    "gres:gpu:1,gres:gpu:1,gres:gpu:3",
    "gres:gpu:h100:2,gres:gpu:h100:4",
    "gres:gpu:4,gres:gpu:0",
    "gres:gpu:h100",
    "gres:gpu:h100:0",
    "gres:gpu:1k",
    "gres:gpu:2KiB",
    "gres:gpu:1MB",
    "gres:gpu:k",
    "gres:gpu:+2",
    "gres:gpu: 3",
    "gres:gpu:007",
    "gres:gpu:1g.5gb",
    "gres:gpu:1g.5gb:2",
    "gres:gpu:a100_80g:2",
    "gres:gpu:nvidia_h100_80gb_hbm3:8",
    "gres:gpu:NVIDIA-A100-SXM4-40GB-MIG-1g.5gb:1",
    "gres:shard:4,gres:gpu:2,,",
    "gres:nic:2,gres:gpu:h100:1",
    "gres:gpu:-2",
    "gres/gpu:-1",
    "gres:gpu:h100:-1",
    "gres:shard:-4",
    "gres:gpu:",
    "gres:gpu::1",
    "gres:gpu:h100:",
    "gres:gpu:h100:x",
    "gres:gpu:h100:2:1",
    "gres:gpu:a100:2,gres:gpu:h100:4",
    "gres:gpu:h100:4,gres:gpu:2",
    "gres:shard:a:4,gres:shard:b:4",
];

#[test]
fn gres_lists_read_alike_in_lua_and_rust() {
    if !lua_available() {
        return;
    }
    use gpol_slurm::jobs::Request as SlurmRequest;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = plain_script(None);
    // Each list asked per node, per job and per task, and also made of random items.
    let items = [
        "gres:gpu",
        "gres:gpu:2",
        "gres:gpu:0",
        "gres:gpu:h100",
        "gres:gpu:h100:3",
        "gres:gpu:a100:1",
        "gres/gpu:-1",
        "gres:gpu:1k",
        "gres:shard:2",
        "gres:shard:h100:8",
        "gres:gpu::1",
        "gres:nic:4",
        "gres:gpu:x:y",
        "",
    ];
    let mut lists: Vec<String> = GRES_LISTS.iter().map(|s| s.to_string()).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..300 {
        let n = (x % 4) as usize + 1;
        let list: Vec<&str> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                items[(x % items.len() as u64) as usize]
            })
            .collect();
        lists.push(list.join(","));
    }
    let mut descs = Vec::new();
    let mut requests = Vec::new();
    for list in &lists {
        for field in 0..3 {
            let mut r = SlurmRequest { name: "t".into(), nodes: 1, ..SlurmRequest::default() };
            match field {
                0 => r.tres_per_node = list.clone(),
                1 => r.tres_per_job = list.clone(),
                _ => r.tres_per_task = list.clone(),
            }
            descs.push(r.lua_table());
            requests.push(r);
        }
    }
    let harness = "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do\n  local job = gpol.job(desc)\n  io.write(job.whole_cards, '\\t', job.allowed_models[1] or '-', '\\t', job.unreadable or '-', '\\n')\nend\n";
    let text = run_harness(&script, &descs, harness, dir.path());
    assert_eq!(text.lines().count(), requests.len());
    let (mut refused, mut read) = (0, 0);
    for (line, r) in text.lines().zip(&requests) {
        let want = match r.job(&Reading::default()) {
            Ok(job) => {
                read += 1;
                let cards = match job.request {
                    Request::Whole(n) => n,
                    _ => 0,
                };
                format!("{cards}\t{}\t-", job.models.first().map_or("-", String::as_str))
            }
            Err(e) => {
                refused += 1;
                let option = match e.field {
                    "tres_per_node" => "--gres",
                    "tres_per_job" => "--gpus",
                    _ => "--gpus-per-task",
                };
                // What the Lua read of the cards is not used: the job is refused.
                let lua_why = line.rsplit('\t').next().unwrap_or_default();
                assert_eq!(lua_why, format!("{} ({option})", e.problem), "{r:?}");
                continue;
            }
        };
        assert_eq!(line, want, "{r:?}");
    }
    assert!(refused > 100 && read > 300, "refused {refused}, read {read}");
}

#[test]
fn gpu_types_read_through_the_model_table_alike_in_lua_and_rust() {
    if !lua_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let script = plain_script(None);
    let mut names: Vec<String> = Vec::new();
    for (stem, _) in gpol_compiler::models::TABLE {
        for form in [
            stem.to_string(),
            stem.to_uppercase(),
            format!("nvidia_{stem}_80gb_hbm3"),
            format!("NVIDIA-{}-SXM4-40GB-MIG-1g.5gb-SHARED", stem.to_uppercase()),
            format!("Tesla {stem}"),
            format!("{stem}x"),
            format!("geforce-nvidia-{stem}"),
        ] {
            names.push(form);
        }
    }
    names.extend(["1g.5gb", "quantum-x1", "a10", "h200-nvl", " h100 ", "-MIG-", "x-SHARED"].map(String::from));
    let descs: Vec<String> = names.iter().map(|n| format!("{{ name = {} }}", gpol_slurm::lua::string(n))).collect();
    let harness =
        "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do io.write(gpol.model_name(desc.name), '\\n') end\n";
    let text = run_harness(&script, &descs, harness, dir.path());
    assert_eq!(text.lines().count(), names.len());
    for (line, n) in text.lines().zip(&names) {
        assert_eq!(line, gpol_compiler::models::name(n), "{n:?}");
    }
}

#[test]
fn a_job_no_node_can_hold_is_refused_saying_why() {
    if !lua_available() {
        return;
    }
    use gpol_slurm::jobs::Request as SlurmRequest;
    let dir = tempfile::tempdir().expect("a temporary directory");
    // h100 nodes of 128 and 64 CPUs, a100 nodes of 256 and 32; 8 cards each; at most
    // 2,048 GiB.
    let nodes = filter_nodes();
    let script = plain_script(Some(&nodes));
    let r = |tres: &str, cpus: Option<u64>, mem_gib: Option<u64>| SlurmRequest {
        name: "t".into(),
        nodes: 1,
        tres_per_node: tres.into(),
        cpus,
        mem_per_node_mib: mem_gib.map(|g| g << 10),
        ..SlurmRequest::default()
    };
    let held = "gpol: no node of the cluster can ever hold this job: ";
    let cases = [
        (
            r("gres:gpu:h10:1", None, None),
            2014,
            format!("{held}no node has GPUs of type h10 (the nodes have h100, a100)"),
        ),
        (r("gres:gpu:9", None, None), 2014, format!("{held}9 GPUs per node, more than any node has (8)")),
        (
            r("gres:gpu:h100:9", None, None),
            2014,
            format!("{held}9 h100 GPUs per node, more than any node with h100 GPUs has (8)"),
        ),
        (r("", Some(300), None), 2014, format!("{held}300 CPUs per node, more than any node has (256)")),
        (
            r("gres:gpu:h100:8", Some(200), None),
            2014,
            format!("{held}200 CPUs per node, more than any node with h100 GPUs has (128)"),
        ),
        (
            r("", None, Some(3000)),
            2014,
            format!("{held}3072000 MiB of memory per node, more than any node has (2097152 MiB)"),
        ),
        (r("", Some(200), Some(2000)), 2014, format!("{held}no node has 200 CPUs, 2048000 MiB of memory at once")),
        (
            r("gres:gpu:-2", None, None),
            2072,
            "gpol: the job's GRES cannot be read: `gpu:-2`: a negative count (--gres)".into(),
        ),
        (
            r("gres:gpu:a100:2,gres:gpu:h100:4", None, None),
            2072,
            "gpol: the job's GRES cannot be read: gpu of more than one type (a100, h100): gpol reads one (--gres)"
                .into(),
        ),
        // What some node holds passes: a type as the model table reads it, the most of each.
        (r("gres:gpu:a100_80g:8", Some(256), Some(1024)), 0, String::new()),
        (r("gres:gpu:8", Some(128), Some(2048)), 0, String::new()),
        (r("", None, None), 0, String::new()),
    ];
    let descs: Vec<String> = cases.iter().map(|(r, _, _)| r.lua_table()).collect();
    let harness = "dofile(arg[1])\nfor _, desc in ipairs(dofile(arg[2])) do\n  slurm.message = nil\n  local rc = slurm_job_submit(desc, {}, 0)\n  io.write(rc, '\\t', slurm.message or '', '\\n')\nend\n";
    let text = run_harness(&script, &descs, harness, dir.path());
    assert_eq!(text.lines().count(), cases.len(), "{text}");
    for (line, (r, rc, message)) in text.lines().zip(&cases) {
        assert_eq!(line, format!("{rc}\t{message}"), "{r:?}");
    }
    // Without the nodes nothing is checked against them, and the header says so.
    let bare = plain_script(None);
    assert!(bare.contains("-- Not checked (no nodes: `gpolc slurm emit --cluster` adds them)"), "{bare}");
    let text = run_harness(&bare, &descs[..1], harness, dir.path());
    assert_eq!(text, "0\t\n");
}
