//! A C program compiled with the system `cc` against `gpol.h` and libgpol gets the same
//! answers as the Rust API. Cases are generated from a seed: clusters of nodes of a few
//! models and sharing modes (MIG layouts, time-slicing, MPS, cordoned nodes, labels,
//! racks), jobs started on them, the clock moved, and probe jobs of every request kind
//! asked about (`gpol_cluster_admit`, `gpol_cluster_filter_score`), under three policies
//! of policies/ and one written here (quota limits per model, admit rules that read the
//! job and the cluster, filters on labels, tiered and weighted scores, scores that fault,
//! `pow`, `exp2` and `log`), in both engines. The C program is written with every case
//! as C records, built once, run once; its output is compared line by line with the same
//! calls made on `gpol_runtime::Scheduler` in this process. Numbers are compared as
//! their bits (printed in hex), so they must be exactly equal.
//!
//! Skipped, saying so, where there is no C compiler.

mod support;

use gpol_compiler::engine::EngineKind;
use gpol_compiler::ir::RuleId;
use gpol_compiler::load::Checked;
use gpol_compiler::schema::EnumKind;
use gpol_compiler::spec::domains_at;
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use gpol_runtime::NodeVerdict;
use gpol_runtime::Reason;
use gpol_runtime::{Found, Scheduler};
use std::fmt::Write;
use support::{Rng, c_str};

/// Quotas per model, admit rules that read the job and the cluster, filters on labels
/// and models, tiers, weights, faults and the imported helpers.
const INLINE: &str = r#"policy capi_inline

use std.pack

topology rack, zone

queue org {
  queue a { limit 4 gpu, 1 gpu(h100) }
  queue b { }
}

admit at_most_sixteen "at most 16 GPUs a job" { job.total_gpus <= 16 gpu }
admit room_left "the cluster is nearly full" { cluster.free.gpu >= 1 gpu }

filter no_fractions_on_h100 "fractions stay off H100s" {
  job.gpu_fraction == 0 gpu or node.gpu_model != "h100"
}
filter reserved_pool "the reserved pool is for infra" {
  node.labels["pool"] != "reserved" or job.labels["team"] == "infra"
}

score a100_first tier 1 { if node.gpu_model == "a100" then 1 else 0 }
score fit tier 2 { std.pack.best_fit(job, node) }
score host_memory weight 0.5 { node.mem_free / node.mem }
score overshoot weight 1 { pow(node.free_gpu / 1 gpu, 2) - 1 }
score rack_room weight 2 {
  if node.rack.free_cards >= 4 gpu then exp2(0 - node.free_cards / 1 gpu) else log(1 + node.cpu_free / 64 cpu)
}
"#;

const MODELS: [&str; 3] = ["a100", "h100", "l4"];
const MIG_LAYOUTS: [&[&str]; 4] = [
    &["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
    &["7g.80gb"],
    &["1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"],
    &["4g.40gb", "3g.40gb"],
];
const PROFILES: [&str; 4] = ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"];

#[derive(Clone, Debug)]
struct Node {
    name: String,
    model: String,
    cards: u32,
    card_mem: u64,
    sharing: Sharing,
    mig: Vec<&'static str>,
    max_clients: u32,
    cpu_milli: u64,
    mem: u64,
    topology: Vec<(String, String)>,
    labels: Vec<(String, String)>,
    cordoned: bool,
}

#[derive(Clone, Debug)]
enum Req {
    None,
    Whole(u32),
    Fraction(u32),
    Mig(&'static str),
}

#[derive(Clone, Debug)]
struct Job {
    name: String,
    queue: Option<String>,
    user: Option<String>,
    priority: Option<f64>,
    request: Req,
    replicas: u32,
    gpu_mem: u64,
    cpu_milli: u64,
    mem: u64,
    models: Vec<String>,
    bursty: bool,
    latency_critical: bool,
    preemptible: bool,
    utilization: f64,
    labels: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
struct Running {
    job: Job,
    nodes: Vec<String>,
    ran_ms: u64,
}

struct Case {
    file: String,
    text: String,
    engine: EngineKind,
    nodes: Vec<Node>,
    running: Vec<Running>,
    clock_ms: u64,
    probes: Vec<Job>,
}

fn gen_node(rng: &mut Rng, i: usize) -> Node {
    let sharing = rng.pick(&[Sharing::Exclusive, Sharing::Exclusive, Sharing::Mig, Sharing::Timeslice, Sharing::Mps]);
    let mig = match sharing {
        Sharing::Mig => rng.pick(&MIG_LAYOUTS).to_vec(),
        _ => Vec::new(),
    };
    let mut labels = Vec::new();
    if rng.chance(40) {
        labels.push(("pool".to_string(), rng.pick(&["reserved", "general"]).to_string()));
    }
    if rng.chance(30) {
        labels.push(("workload".to_string(), "serving".to_string()));
    }
    let mut topology = vec![("rack".to_string(), format!("r{}", rng.range(0, 2)))];
    if rng.chance(50) {
        topology.push(("zone".to_string(), format!("z{}", rng.range(0, 1))));
    }
    if rng.chance(20) {
        // A level no policy here declares: ignored, as every adapter does.
        topology.push(("row".to_string(), "x".to_string()));
    }
    Node {
        name: format!("n{i}"),
        model: rng.pick(&MODELS).to_string(),
        cards: rng.pick(&[1, 2, 4, 8]),
        card_mem: rng.pick(&[40u64 << 30, 80 << 30]),
        sharing,
        mig,
        max_clients: match sharing {
            Sharing::Timeslice | Sharing::Mps => rng.range(2, 8) as u32,
            _ => 1,
        },
        cpu_milli: rng.range(16, 128) * 1000,
        mem: rng.range(64, 1024) << 30,
        topology,
        labels,
        cordoned: rng.chance(10),
    }
}

fn gen_job(rng: &mut Rng, name: String, queues: &[&str]) -> Job {
    let request = match rng.range(0, 9) {
        0 => Req::None,
        1..=4 => Req::Whole(rng.pick(&[1, 1, 2, 4, 8, 16])),
        5..=6 => Req::Fraction(rng.range(1, 999) as u32),
        _ => Req::Mig(rng.pick(&PROFILES)),
    };
    // Now and then a queue the policy does not have: refused on both sides.
    let queue = if rng.chance(5) { Some("nowhere".to_string()) } else { Some(rng.pick(queues).to_string()) };
    let mut labels = Vec::new();
    if rng.chance(30) {
        labels.push(("team".to_string(), rng.pick(&["infra", "ml"]).to_string()));
    }
    if rng.chance(20) {
        labels.push(("workload".to_string(), "serving".to_string()));
    }
    let models = if rng.chance(25) { vec![rng.pick(&MODELS).to_string()] } else { Vec::new() };
    Job {
        name,
        queue,
        user: rng.chance(30).then(|| format!("u{}", rng.range(0, 3))),
        priority: rng.chance(30).then(|| rng.range(0, 100) as f64 / 4.0),
        replicas: if rng.chance(15) { 2 } else { 1 },
        request,
        gpu_mem: if rng.chance(30) { rng.range(1, 80) << 30 } else { 0 },
        cpu_milli: rng.range(0, 32) * 500,
        mem: rng.range(0, 256) << 30,
        models,
        bursty: rng.chance(30),
        latency_critical: rng.chance(20),
        preemptible: rng.chance(50),
        utilization: rng.range(1, 4) as f64 / 4.0,
        labels,
    }
}

fn gen_case(rng: &mut Rng, file: &str, text: String, engine: EngineKind, queues: &[&str]) -> Case {
    let nodes: Vec<Node> = (0..rng.range(6, 10) as usize).map(|i| gen_node(rng, i)).collect();
    let running = (0..rng.range(3, 6))
        .map(|k| {
            // A job shaped for its node, so that most start (some find it full).
            let node = rng.pick(&nodes);
            let mut job = gen_job(rng, format!("run{k}"), queues);
            job.queue = Some(rng.pick(queues).to_string());
            job.replicas = 1;
            job.models.clear();
            job.gpu_mem = 0;
            job.cpu_milli = rng.range(0, 8) * 1000;
            job.mem = rng.range(0, 32) << 30;
            job.request = match node.sharing {
                Sharing::Exclusive => Req::Whole(rng.range(1, u64::from(node.cards)) as u32),
                Sharing::Mig => Req::Mig(rng.pick(&node.mig)),
                Sharing::Timeslice | Sharing::Mps => Req::Fraction(rng.range(100, 900) as u32),
            };
            Running { job, nodes: vec![node.name], ran_ms: rng.range(0, 3_600_000) }
        })
        .collect();
    let probes = (0..12).map(|k| gen_job(rng, format!("probe{k}"), queues)).collect();
    Case { file: file.to_string(), text, engine, nodes, running, clock_ms: rng.range(0, 7_200_000), probes }
}

/// Queue `a` of the inline policy holding 3 of its 4 GPUs, its one H100 among them, and
/// jobs asking for more: quota refusals, of the queue and of the model.
fn with_quota_at_its_limit(case: &mut Case, rng: &mut Rng) {
    for (name, model) in [("fixed_a100", "a100"), ("fixed_h100", "h100")] {
        let mut n = gen_node(rng, 0);
        n.name = name.to_string();
        n.model = model.to_string();
        (n.cards, n.sharing, n.mig, n.max_clients, n.cordoned) = (8, Sharing::Exclusive, Vec::new(), 1, false);
        n.labels.clear();
        case.nodes.push(n);
    }
    let job = |rng: &mut Rng, name: &str, cards: u32| Job {
        queue: Some("a".into()),
        request: Req::Whole(cards),
        replicas: 1,
        models: Vec::new(),
        gpu_mem: 0,
        labels: Vec::new(),
        ..gen_job(rng, name.to_string(), &["a"])
    };
    case.running.push(Running { job: job(rng, "held_a100", 2), nodes: vec!["fixed_a100".into()], ran_ms: 1000 });
    case.running.push(Running { job: job(rng, "held_h100", 1), nodes: vec!["fixed_h100".into()], ran_ms: 1000 });
    case.probes.push(job(rng, "over_quota", 2));
    case.probes.push(job(rng, "last_gpu", 1));
}

// ---------------------------------------------------------------- the Rust side

fn node_spec(n: &Node, levels: &[String]) -> NodeSpec {
    NodeSpec {
        name: n.name.clone(),
        model: n.model.clone(),
        cards: n.cards,
        card_mem: n.card_mem,
        sharing: n.sharing,
        mig: if n.mig.is_empty() {
            Vec::new()
        } else {
            vec![n.mig.iter().map(|m| EnumKind::MigProfile.variant(m).expect("a profile")).collect()]
        },
        max_clients: n.max_clients,
        cpu_milli: n.cpu_milli,
        mem: n.mem,
        domains: domains_at(&n.topology, levels),
        labels: n.labels.clone(),
    }
}

fn job_spec(j: &Job) -> JobSpec {
    JobSpec {
        name: j.name.clone(),
        queue: j.queue.clone(),
        user: j.user.clone(),
        priority_class: None,
        priority: j.priority,
        request: match j.request {
            Req::None => Request::None,
            Req::Whole(k) => Request::Whole(k),
            Req::Fraction(m) => Request::Fraction(m),
            Req::Mig(p) => Request::Mig(EnumKind::MigProfile.variant(p).expect("a profile")),
        },
        replicas: j.replicas,
        min_replicas: None,
        gpu_mem: j.gpu_mem,
        cpu_milli: j.cpu_milli,
        mem: j.mem,
        models: j.models.clone(),
        bursty: j.bursty,
        latency_critical: j.latency_critical,
        preemptible: j.preemptible,
        duration_ms: None,
        checkpoint_every_ms: None,
        utilization: j.utilization,
        labels: j.labels.clone(),
    }
}

fn bits(x: f64) -> String {
    format!("{:016x}", x.to_bits())
}

fn verdict_code(v: &NodeVerdict) -> (u32, i32) {
    match v {
        NodeVerdict::Fits(_) => (0, -1),
        NodeVerdict::Filtered(RuleId::Filter(i)) => (1, i32::from(*i)),
        NodeVerdict::Filtered(_) => (1, -1),
        NodeVerdict::Full => (2, -1),
        NodeVerdict::TooSmall => (3, -1),
        NodeVerdict::Down => (4, -1),
        NodeVerdict::Model => (5, -1),
        NodeVerdict::Reserved => (6, -1),
        NodeVerdict::Quota(_) => (7, -1),
    }
}

/// What the C program prints for a case, worked out with the Rust API.
fn expected(case: &Case, out: &mut String) {
    let checked = Checked::from_text(&case.file, &case.text);
    let policy = checked.compile(case.engine).expect("the case's policy compiles");
    let _ = writeln!(out, "compile 0 0");
    let levels = policy.program.levels.clone();
    let mut s = Scheduler::new(policy);
    for n in &case.nodes {
        let id = s.add_node(&node_spec(n, &levels)).expect("a valid node");
        if n.cordoned {
            s.drain_node(id);
        }
    }
    let _ = writeln!(out, "cluster 0 {}", case.nodes.len());
    for (k, r) in case.running.iter().enumerate() {
        let ids: Vec<usize> = r.nodes.iter().map(|n| s.cluster().node(n).expect("a node of the case")).collect();
        let history = History { ran_ms: r.ran_ms, since_checkpoint_ms: 0, evictions: 0 };
        let status = match s.start_found(job_spec(&r.job), 0, Found::Nodes(&ids), history) {
            Ok(_) => 0,
            Err(_) => 6,
        };
        let _ = writeln!(out, "start {k} {status}");
    }
    s.advance(case.clock_ms).expect("within the clock's limit");
    let _ = writeln!(out, "clock 0");
    for (k, j) in case.probes.iter().enumerate() {
        match s.ask(job_spec(j), 0, |asked| asked.gate()) {
            Err(_) => {
                let _ = writeln!(out, "admit {k} 6");
            }
            Ok(gate) => {
                let (admitted, rule, reason, for_good) = match gate {
                    Ok(()) => (1, -1, 0, 0),
                    Err(c) => {
                        let (reason, rule) = match c.reason {
                            Reason::Rule(RuleId::Admit(i)) => (1, i32::from(i)),
                            Reason::Rule(_) => (7, -1),
                            Reason::Quota(_) => (2, -1),
                            Reason::Unschedulable(_) => (3, -1),
                            Reason::Capacity => (4, -1),
                            Reason::Gang => (5, -1),
                            Reason::Order => (6, -1),
                        };
                        (0, rule, reason, i32::from(c.for_good))
                    }
                };
                let _ = writeln!(out, "admit {k} 0 {admitted} {rule} {reason} {for_good}");
            }
        }
        let all: Vec<usize> = (0..case.nodes.len()).collect();
        match s.ask(job_spec(j), 0, |asked| asked.node_verdicts_with_results(&all)) {
            Err(_) => {
                let _ = writeln!(out, "fs {k} 6");
            }
            Ok(results) => {
                let _ = writeln!(out, "fs {k} 0");
                let mut fits: Vec<usize> =
                    all.iter().copied().filter(|&i| matches!(results[i].0, NodeVerdict::Fits(_))).collect();
                fits.sort_by(|&a, &b| s.rank_nodes(&results[a].1, &results[b].1).then(a.cmp(&b)));
                for (i, (v, r)) in results.iter().enumerate() {
                    let (verdict, filter) = verdict_code(v);
                    let rank = fits.iter().position(|&f| f == i).map_or(-1, |p| p as i64);
                    let _ = writeln!(
                        out,
                        "node {i} {verdict} {filter} {rank} {} {} {} {} {} {} {} {}",
                        u8::from(r.feasible),
                        r.rejected_by,
                        bits(r.tiers[0]),
                        bits(r.tiers[1]),
                        bits(r.tiers[2]),
                        bits(r.tiers[3]),
                        bits(r.score),
                        r.faults
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------- the C side

fn c_opt(s: &Option<String>) -> String {
    s.as_deref().map_or_else(|| "NULL".to_string(), c_str)
}

fn c_labels(out: &mut String, var: &str, labels: &[(String, String)]) {
    if labels.is_empty() {
        return;
    }
    let items: Vec<String> = labels.iter().map(|(k, v)| format!("{{{}, {}}}", c_str(k), c_str(v))).collect();
    let _ = writeln!(out, "    static const GpolLabel {var}_labels[] = {{{}}};", items.join(", "));
    let _ = writeln!(out, "    {var}.labels = {var}_labels;\n    {var}.n_labels = {};", labels.len());
}

fn c_strings(out: &mut String, var: &str, field: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let items: Vec<String> = items.iter().map(|s| c_str(s)).collect();
    let _ = writeln!(out, "    static const char *const {var}_{field}[] = {{{}}};", items.join(", "));
    let _ = writeln!(out, "    {var}.{field} = {var}_{field};\n    {var}.n_{field} = {};", items.len());
}

fn c_job(out: &mut String, var: &str, j: &Job) {
    let _ = writeln!(out, "    GpolJob {var} = gpol_job_defaults();");
    let _ = writeln!(out, "    {var}.name = {};", c_str(&j.name));
    let _ = writeln!(out, "    {var}.queue = {};", c_opt(&j.queue));
    let _ = writeln!(out, "    {var}.user = {};", c_opt(&j.user));
    if let Some(p) = j.priority {
        let _ = writeln!(out, "    {var}.has_priority = 1;\n    {var}.priority = {p:?};");
    }
    let (kind, amount, profile) = match j.request {
        Req::None => ("GPOL_REQUEST_KIND_NONE", 0, None),
        Req::Whole(k) => ("GPOL_REQUEST_KIND_WHOLE", k, None),
        Req::Fraction(m) => ("GPOL_REQUEST_KIND_FRACTION", m, None),
        Req::Mig(p) => ("GPOL_REQUEST_KIND_MIG", 0, Some(p.to_string())),
    };
    let _ = writeln!(out, "    {var}.request = {kind};\n    {var}.amount = {amount};");
    let _ = writeln!(out, "    {var}.mig_profile = {};", c_opt(&profile));
    let _ = writeln!(out, "    {var}.replicas = {};", j.replicas);
    let _ = writeln!(out, "    {var}.gpu_mem = {}ULL;", j.gpu_mem);
    let _ = writeln!(out, "    {var}.cpu_milli = {}ULL;", j.cpu_milli);
    let _ = writeln!(out, "    {var}.mem = {}ULL;", j.mem);
    c_strings(out, var, "models", &j.models);
    let _ = writeln!(out, "    {var}.bursty = {};", u8::from(j.bursty));
    let _ = writeln!(out, "    {var}.latency_critical = {};", u8::from(j.latency_critical));
    let _ = writeln!(out, "    {var}.preemptible = {};", u8::from(j.preemptible));
    let _ = writeln!(out, "    {var}.utilization = {:?};", j.utilization);
    c_labels(out, var, &j.labels);
}

fn c_case(out: &mut String, index: usize, case: &Case) {
    let _ = writeln!(out, "static void case_{index}(void) {{");
    let _ = writeln!(out, "    static const char text[] = {};", c_str(&case.text));
    let engine = match case.engine {
        EngineKind::Jit => "GPOL_ENGINE_JIT",
        EngineKind::Interp => "GPOL_ENGINE_INTERP",
    };
    let _ = writeln!(
        out,
        "    GpolPolicy *policy = NULL;\n    GpolDiagnostics *diags = NULL;\n    \
         GpolStatus st = gpol_policy_compile(text, sizeof text - 1, {}, {engine}, &policy, &diags, NULL);\n    \
         printf(\"compile %d %zu\\n\", (int)st, gpol_diagnostics_error_count(diags));\n    \
         gpol_diagnostics_free(diags);\n    if (st != GPOL_STATUS_OK) return;",
        c_str(&case.file)
    );
    let _ = writeln!(out, "    GpolNode nodes[{}];", case.nodes.len());
    for (i, n) in case.nodes.iter().enumerate() {
        let var = format!("n{i}");
        let _ = writeln!(out, "    GpolNode {var} = gpol_node_defaults();");
        let _ = writeln!(out, "    {var}.name = {};\n    {var}.model = {};", c_str(&n.name), c_str(&n.model));
        let _ = writeln!(out, "    {var}.cards = {};\n    {var}.card_mem = {}ULL;", n.cards, n.card_mem);
        let sharing = match n.sharing {
            Sharing::Exclusive => "GPOL_SHARING_EXCLUSIVE",
            Sharing::Mig => "GPOL_SHARING_MIG",
            Sharing::Timeslice => "GPOL_SHARING_TIMESLICE",
            Sharing::Mps => "GPOL_SHARING_MPS",
        };
        let _ = writeln!(out, "    {var}.sharing = {sharing};\n    {var}.max_clients = {};", n.max_clients);
        let mig: Vec<String> = n.mig.iter().map(|m| m.to_string()).collect();
        c_strings(out, &var, "mig", &mig);
        let _ = writeln!(out, "    {var}.cpu_milli = {}ULL;\n    {var}.mem = {}ULL;", n.cpu_milli, n.mem);
        let topo: Vec<String> = n.topology.iter().map(|(l, d)| format!("{{{}, {}}}", c_str(l), c_str(d))).collect();
        if !topo.is_empty() {
            let _ = writeln!(out, "    static const GpolDomain {var}_topology[] = {{{}}};", topo.join(", "));
            let _ = writeln!(out, "    {var}.topology = {var}_topology;\n    {var}.n_topology = {};", topo.len());
        }
        c_labels(out, &var, &n.labels);
        let _ = writeln!(out, "    {var}.cordoned = {};\n    nodes[{i}] = {var};", u8::from(n.cordoned));
    }
    let _ = writeln!(
        out,
        "    GpolCluster *cluster = NULL;\n    \
         st = gpol_cluster_new(policy, nodes, {n}, &cluster, NULL);\n    \
         printf(\"cluster %d %zu\\n\", (int)st, gpol_cluster_node_count(cluster));\n    \
         /* The cluster keeps its own reference to the compiled policy. */\n    \
         gpol_policy_free(policy);\n    if (st != GPOL_STATUS_OK) return;",
        n = case.nodes.len()
    );
    for (k, r) in case.running.iter().enumerate() {
        let var = format!("r{k}");
        c_job(out, &var, &r.job);
        let names: Vec<String> = r.nodes.iter().map(|n| c_str(n)).collect();
        let _ = writeln!(out, "    static const char *const {var}_on[] = {{{}}};", names.join(", "));
        let _ = writeln!(out, "    GpolHistory {var}_h = {{{}ULL, 0, 0}};", r.ran_ms);
        let _ = writeln!(
            out,
            "    st = gpol_cluster_start(cluster, &{var}, {var}_on, {}, &{var}_h, NULL, NULL);\n    \
             printf(\"start {k} %d\\n\", (int)st);",
            r.nodes.len()
        );
    }
    let _ = writeln!(
        out,
        "    st = gpol_cluster_set_clock(cluster, {}ULL, NULL);\n    printf(\"clock %d\\n\", (int)st);",
        case.clock_ms
    );
    for (k, j) in case.probes.iter().enumerate() {
        let var = format!("p{k}");
        c_job(out, &var, j);
        let _ = writeln!(out, "    probe(cluster, {k}, &{var}, nodes_out, {});", case.nodes.len());
    }
    let _ = writeln!(out, "    gpol_cluster_free(cluster);\n}}\n");
}

const PRELUDE: &str = r#"#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gpol.h"

static GpolNodeResult nodes_out[64];

static void bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    printf(" %016" PRIx64, b);
}

/* Asks about one job: admission, then every node's result. */
static void probe(const GpolCluster *cluster, int k, const GpolJob *job, GpolNodeResult *out, size_t n) {
    GpolAdmit a;
    GpolError *err = NULL;
    GpolStatus st = gpol_cluster_admit(cluster, job, &a, &err);
    if (st == GPOL_STATUS_OK) {
        printf("admit %d 0 %d %d %d %d\n", k, (int)a.admitted, (int)a.admit_rule, (int)a.reason, (int)a.for_good);
    } else {
        printf("admit %d %d\n", k, (int)st);
        if (gpol_error_status(err) != st || gpol_error_message(err) == NULL) printf("bad error\n");
    }
    gpol_error_free(err);
    st = gpol_cluster_filter_score(cluster, job, out, n, NULL);
    printf("fs %d %d\n", k, (int)st);
    if (st != GPOL_STATUS_OK) return;
    for (size_t i = 0; i < n; i++) {
        const GpolNodeResult *r = &out[i];
        printf("node %zu %d %d %d %d %u", i, (int)r->verdict, (int)r->filter, (int)r->rank, (int)r->feasible,
               (unsigned)r->rejected_by);
        for (int t = 0; t < GPOL_MAX_TIERS; t++) bits(r->tiers[t]);
        bits(r->score);
        printf(" %u\n", (unsigned)r->faults);
    }
}

"#;

fn policy_file(name: &str) -> String {
    let path = format!("{}/../policies/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

#[test]
fn a_c_program_gets_the_rust_apis_answers() {
    let Some(cc) = support::cc() else { return };
    let mut rng = Rng::new(0x6770_6f6c);
    let cases = [
        ("gpu_sharing.gpol", policy_file("gpu_sharing.gpol"), EngineKind::Jit, vec!["serving", "research"]),
        (
            "pack_spread.gpol",
            policy_file("pack_spread.gpol"),
            EngineKind::Jit,
            vec!["training", "inference", "notebooks"],
        ),
        ("kai.gpol", policy_file("kai.gpol"), EngineKind::Interp, vec!["a", "b"]),
        ("inline.gpol", INLINE.to_string(), EngineKind::Jit, vec!["a", "b"]),
        ("inline_interp.gpol", INLINE.to_string(), EngineKind::Interp, vec!["a", "b"]),
    ];
    let mut cases: Vec<Case> =
        cases.into_iter().map(|(file, text, engine, queues)| gen_case(&mut rng, file, text, engine, &queues)).collect();
    for case in cases.iter_mut().filter(|c| c.file.starts_with("inline")) {
        with_quota_at_its_limit(case, &mut rng);
    }
    let mut source = String::from(PRELUDE);
    let mut want = String::new();
    for (i, case) in cases.iter().enumerate() {
        c_case(&mut source, i, case);
        let _ = writeln!(want, "case {i}");
        expected(case, &mut want);
    }
    source.push_str("int main(void) {\n");
    for i in 0..cases.len() {
        let _ = writeln!(source, "    printf(\"case {i}\\n\");\n    case_{i}();");
    }
    source.push_str("    return 0;\n}\n");
    let dir = support::Scratch::new("c-program");
    let exe = support::build_c(&cc, &dir.0, &source, &[]);
    let got = support::run(&exe);
    for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {} of the C program's output differs from the Rust API's", n + 1);
    }
    assert_eq!(got.lines().count(), want.lines().count(), "the C program printed:\n{got}");
    // The cases exercise what they are meant to: every verdict the clusters can give,
    // refusals, admit rules, ranks and faults.
    for (what, needle) in [("a node that fits", "node 0 0 "), ("a refused job", " 6\n")] {
        assert!(want.contains(needle) || got.contains(needle), "no case has {what}");
    }
    assert!(want.lines().any(|l| l.starts_with("admit ") && l.split(' ').nth(5) == Some("2")), "quota refuses");
    for verdict in [0, 1, 2, 3, 4, 5, 7] {
        assert!(
            want.lines().any(|l| l.starts_with("node ") && l.split(' ').nth(2) == Some(&verdict.to_string())),
            "no node has verdict {verdict}"
        );
    }
    assert!(want.lines().any(|l| l.starts_with("admit ") && l.split(' ').nth(4) == Some("0")), "an admit rule refuses");
    assert!(want.lines().any(|l| l.starts_with("node ") && l.split(' ').nth(4) == Some("0")), "a node ranked first");
    assert!(want.lines().any(|l| l.starts_with("node ") && !l.ends_with(" 0")), "a score faulted");
}
