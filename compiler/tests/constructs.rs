//! Known answers for each construct of the language, in both engines. Each case is an
//! expression used as a `job_order` key (booleans read as 0 or 1) over fixed records.

use gpol_compiler::engine::{EngineKind, compile};
use gpol_compiler::interp::Ctx;
use gpol_compiler::load::Checked;
use gpol_compiler::schema::{
    CardRec, ClusterRec, DomainRec, EnumKind, JobRec, List, NodeRec, Opt, QueueRec, Resources, ShapeRec, Sym,
};

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

/// (expression, expected value): evaluated with `job` and `cluster` in scope.
const CASES: &[(&str, f64)] = &[
    // numbers, units, arithmetic (IEEE, D1)
    ("1 + 2 * 3", 7.0),
    ("(1 + 2) * 3", 9.0),
    ("10 - 4 - 3", 3.0),
    ("80GiB / 1GiB", 80.0),
    ("90m / 1h", 1.5),
    ("50% * 4", 2.0),
    ("job.whole_cards / 1 gpu", 2.0),
    ("1 / 0", INF),
    ("-1 / 0", -INF),
    ("0 / 0", NAN),
    ("-(0 / 0)", NAN),
    // comparisons: false with NaN, except !=
    ("if 0 / 0 < 1 then 1 else 0", 0.0),
    ("if 0 / 0 == 0 / 0 then 1 else 0", 0.0),
    ("if 0 / 0 != 0 / 0 then 1 else 0", 1.0),
    ("if -0.0 == 0 then 1 else 0", 1.0),
    // built-ins
    ("min(3, 2)", 2.0),
    ("max(3, 2)", 3.0),
    ("min(1, 0 / 0)", NAN),
    ("max(0 / 0, 1)", NAN),
    ("1 / min(-0.0, 0)", -INF),
    ("1 / min(0, -0.0)", INF),
    ("abs(-2.5)", 2.5),
    ("clamp(5, 0, 1)", 1.0),
    ("clamp(-5, 0, 1)", 0.0),
    ("floor(2.7)", 2.0),
    ("floor(-2.2)", -3.0),
    ("ceil(2.2)", 3.0),
    ("ceil(-2.7)", -2.0),
    ("1 / ceil(-0.5)", -INF),
    ("trunc(-2.7)", -2.0),
    ("trunc(2.7)", 2.0),
    ("round(2.5)", 3.0),
    ("round(-2.5)", -3.0),
    ("round(0.49999999999999994)", 0.0),
    ("1 / round(-0.4)", -INF),
    ("round(4503599627370497)", 4503599627370497.0),
    ("round(1 / 0)", INF),
    ("round(0 / 0)", NAN),
    ("floor(90m / 1h)", 1.0),
    ("floor(job.waiting / 1h)", 2.0),
    ("round(job.priority / 2)", 3.0),
    ("round(-job.priority / 2)", -3.0),
    ("floor(-job.priority / 2)", -3.0),
    ("ceil(job.priority / 2)", 3.0),
    ("trunc(-job.priority / 2)", -2.0),
    ("mod(-job.priority, 3)", 1.0),
    ("mod(job.waiting, 1h) / 1m", 30.0),
    ("mod(7, 3)", 1.0),
    ("mod(-1, 3)", 2.0),
    ("mod(7, -3)", -2.0),
    ("mod(-1h, 1d) / 1h", 23.0),
    ("mod(1, 0)", NAN),
    ("sqrt(16)", 4.0),
    ("sqrt(-1)", NAN),
    ("exp2(10)", 1024.0),
    ("log(0)", -INF),
    ("pow(2, 0.5) * pow(2, 0.5)", 2.0000000000000004),
    ("if hash01(job.priority, \"x\") >= 0 and hash01(job.priority, \"x\") < 1 then 1 else 0", 1.0),
    ("hash01(1, 2) - hash01(1, 2)", 0.0),
    // if, let, functions
    ("if job.bursty then 1 else 2", 1.0),
    ("{ let a = 2; let b = a * a; b + a }", 6.0),
    ("double(job.priority)", 10.0),
    // booleans
    ("not job.bursty", 0.0),
    ("job.bursty and job.latency_critical", 0.0),
    ("job.bursty or job.latency_critical", 1.0),
    ("job.latency_critical implies 1 / 0 > 0", 1.0),
    // comprehensions, including over empty lists
    ("sum(c in cluster.task_shapes: c.whole_cards) / 1 gpu", 3.0),
    ("count(c in cluster.task_shapes: c.weight > 0.25)", 1.0),
    ("min(s in cluster.task_shapes: s.weight)", 0.25),
    ("max(s in cluster.task_shapes: s.weight)", 0.75),
    ("if any(m in job.allowed_models: m == \"h100\") then 1 else 0", 1.0),
    ("if all(m in job.allowed_models: m == \"h100\") then 1 else 0", 0.0),
    ("len(job.allowed_models)", 2.0),
    ("sum(m in no_models(): 1)", 0.0),
    // membership
    ("if \"a100\" in job.allowed_models then 1 else 0", 1.0),
    ("if \"t4\" not in job.allowed_models then 1 else 0", 1.0),
    ("if job.priority in [1, 5, 9] then 1 else 0", 1.0),
    ("if job.priority in [] then 1 else 0", 0.0),
    // optionals and labels (D8)
    ("job.expected_duration ?? 1h", 7200.0),
    ("if has(job.mig_profile) then 1 else 0", 0.0),
    ("if (job.mig_profile ?? 3g.40gb) == 3g.40gb then 1 else 0", 1.0),
    ("if job.labels[\"team\"] == \"ml\" then 1 else 0", 1.0),
    ("if job.labels[\"missing\"] == \"ml\" then 1 else 0", 0.0),
    ("if job.labels[\"missing\"] != \"ml\" then 1 else 0", 1.0),
    ("if has(job.labels[\"missing\"]) then 1 else 0", 0.0),
    // records reached through others
    ("job.queue.weight", 3.0),
    ("job.queue.attr.boost", 2.0),
    ("if job.queue.name == \"team\" then 1 else 0", 1.0),
    ("cluster.total.gpu / 1 gpu", 64.0),
    ("cluster.free.mem / 1GiB", 16.0),
];

const POLICY: &str = "policy constructs

queue team { weight 3; attr boost = 2 }

fn double(x: number) -> number { x * 2 }

fn no_models() -> list[string] { [] }

job_order { EXPR }
";

fn records_and_check(expr: &str, expected: f64) {
    let text = POLICY.replace("EXPR", expr);
    let policy = Checked::from_text("constructs.gpol", &text).into_policy().expect("the policy checks").policy;
    for kind in [EngineKind::Interp, EngineKind::Jit] {
        let p = compile(policy.clone(), kind).expect("the policy checks");
        let lit = |s: &str| Sym(p.program.literals.iter().position(|l| l == s).map_or(0, |i| i as u32 + 1));
        let literals: Vec<Sym> = (1..=p.program.literals.len() as u32).map(Sym).collect();
        let hashes: Vec<u64> = (0..=p.program.literals.len() as u64).map(|i| i * 7919).collect();
        let labels: Vec<Sym> =
            p.program.job_labels.iter().map(|k| if k == "team" { lit("ml") } else { Sym(0) }).collect();
        let models = [lit("h100"), lit("a100")];
        let shapes = [
            ShapeRec { whole_cards: 1.0, weight: 0.25, ..ShapeRec::default() },
            ShapeRec { whole_cards: 2.0, weight: 0.75, mig_profile: Opt::default(), ..ShapeRec::default() },
        ];
        let cluster = ClusterRec {
            total: Resources { gpu: 64.0, cpu: 512.0, mem: 0.0 },
            free: Resources { gpu: 8.0, cpu: 8.0, mem: 16.0 * 1024.0 * 1024.0 * 1024.0 },
            task_shapes: List::new(&shapes),
            ..ClusterRec::default()
        };
        let queues = [QueueRec { name: lit("team"), weight: 3.0, ..QueueRec::default() }];
        let job = JobRec {
            priority: 5.0,
            waiting: 9000.0,
            whole_cards: 2.0,
            bursty: true,
            expected_duration: Opt::some(7200.0),
            allowed_models: List::new(&models),
            labels: List::new(&labels),
            ..JobRec::default()
        };
        let ctx = Ctx {
            cluster: &cluster,
            queues: &queues,
            domains: &[] as &[DomainRec],
            literals: &literals,
            sym_hashes: &hashes,
            attrs: &p.program.attrs,
        };
        let mut key = [0.0];
        p.engine().job_keys(&ctx, &job, &mut key);
        let ok = key[0].to_bits() == expected.to_bits() || (key[0].is_nan() && expected.is_nan());
        assert!(ok, "{kind:?}: `{expr}` is {:?}, expected {expected:?}", key[0]);
    }
}

#[test]
fn every_construct_in_both_engines() {
    for (expr, expected) in CASES {
        records_and_check(expr, *expected);
    }
}

#[test]
fn node_card_domain_and_mig_reads() {
    let policy = "policy nodes

filter mig_free { node.free_mig[1g.10gb] >= 2 }

score rack_room weight 2 { node.rack.free_cards / node.rack.cards }

score cards weight 1 { count(c in node.cards_list: c.free >= 0.5 gpu) / len(node.cards_list) }

card_score emptiest { card.free / 1 gpu }
";
    let policy = Checked::from_text("nodes.gpol", policy).into_policy().unwrap().policy;
    let profile = usize::from(EnumKind::MigProfile.variant("1g.10gb").unwrap_or(0));
    for kind in [EngineKind::Interp, EngineKind::Jit] {
        let p = compile(policy.clone(), kind).unwrap();
        let cards = [CardRec { free: 1.0, ..CardRec::default() }, CardRec { free: 0.25, ..CardRec::default() }];
        let mut free_mig = gpol_compiler::schema::MigCounts::default();
        free_mig.0[profile] = 2.0;
        let rack = p.program.levels.iter().position(|l| l == "rack").unwrap_or(0);
        let mut domains = [0u32; 8];
        domains[rack] = 1;
        let node = NodeRec { free_mig, cards_list: List::new(&cards), domains, ..NodeRec::default() };
        let starved = NodeRec { cards_list: List::new(&cards), domains, ..NodeRec::default() };
        let racks = [DomainRec::default(), DomainRec { free_cards: 6.0, cards: 8.0, ..DomainRec::default() }];
        let cluster = ClusterRec::default();
        let ctx = Ctx { cluster: &cluster, queues: &[], domains: &racks, literals: &[], sym_hashes: &[], attrs: &[] };
        let job = JobRec::default();
        let mut out = [Default::default(); 2];
        p.engine().filter_score(&ctx, &job, &[node, starved], &mut out);
        assert!(out[0].feasible && !out[1].feasible, "{kind:?}");
        assert_eq!(out[0].score, 2.0 * 0.75 + 0.5, "{kind:?}: rack 6/8 weighted 2, half the cards free");
        let (s, faults) = p.engine().card_score(&ctx, &job, &node, &cards[1]);
        assert_eq!((s, faults), (0.25, 0), "{kind:?}");
    }
}
