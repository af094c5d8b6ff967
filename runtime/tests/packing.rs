//! The fragmentation-aware scores of `std.pack`, written in gpol, agree with the
//! simulator's own measure of fragmentation (`gpol_runtime::frag`, the ATC '23 definition): for
//! random nodes, workloads and jobs, `fgd_growth` is exactly the growth of the node's
//! expected fragmentation that the placement causes, in both engines.

mod support;

use gpol_compiler::engine::{CompiledPolicy, EngineKind, NodeResult};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use gpol_runtime::Cluster;
use gpol_runtime::Scheduler;
use gpol_runtime::fit::{self, Ask};
use gpol_runtime::frag::{self, TaskShape};
use proptest::prelude::*;

/// The growth is read back from a score: `0.5 − growth / SCALE`.
const SCALE: f64 = 64.0;

const POLICY: &str = r#"policy growth

use std.pack

score growth { clamp(0.5 - std.pack.fgd_growth(job, node, cluster) / 64 gpu, 0, 1) }

card_score card_growth { clamp(0.5 - std.pack.fgd_card_growth(job, node, card, cluster) / 64 gpu, 0, 1) }
"#;

fn compiled(kind: EngineKind) -> CompiledPolicy {
    support::compiled("growth.gpol", POLICY, kind)
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (1u32..=4).prop_map(Request::Whole),
        // Multiples of 0.05 make exact fits (0.5 left for a 0.5 shape) common.
        (1u32..20).prop_map(|k| Request::Fraction(k * 50)),
        (1u32..1000).prop_map(Request::Fraction),
    ]
}

fn shape() -> impl Strategy<Value = TaskShape> {
    let request = prop_oneof![8 => request(), 1 => Just(Request::None)];
    (request, 0u64..6, 1u32..10).prop_map(|(request, cpu, weight)| TaskShape {
        ask: Ask { request, gpu_mem: 0, cpu_milli: cpu * 1000, mem: 0 },
        models: vec![],
        weight: f64::from(weight),
    })
}

fn job(request: Request, cpu: u64) -> JobSpec {
    JobSpec { request, cpu_milli: cpu * 1000, ..JobSpec::default() }
}

/// A time-sliced node of `cards` cards without card memory or host memory.
fn node(name: String, cards: u32, clients: u32, cores: u64) -> NodeSpec {
    NodeSpec {
        model: "g".into(),
        cards,
        card_mem: 0,
        sharing: Sharing::Timeslice,
        max_clients: clients,
        cpu_milli: cores * 1000,
        mem: 0,
        ..NodeSpec::named(name)
    }
}

/// A scenario: nodes (cards, clients per card, cores), running jobs (request, cores,
/// node), the workload's shapes, and the job to place (request, cores).
type Case = (Vec<(u32, u32, u64)>, Vec<(Request, u64, usize)>, Vec<TaskShape>, (Request, u64));

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((1u32..=8, 1u32..=4, 2u64..=24), 1..5),
        prop::collection::vec((request(), 0u64..4, 0usize..8), 0..16),
        prop::collection::vec(shape(), 0..8),
        // Jobs of no GPU too: the CPU they take can leave a shape no room.
        (prop_oneof![6 => request(), 1 => Just(Request::None)], 0u64..8),
    )
}

/// Expected fragmentation growth (GPUs) of node `n` if the job takes `chosen` there.
fn oracle(
    cluster: &Cluster,
    n: usize,
    job: &gpol_runtime::Job,
    chosen: &[(usize, Option<usize>)],
    shapes: &[TaskShape],
) -> f64 {
    let mut after = cluster.clone();
    fit::bind(&mut after, n, job, chosen);
    let before = frag::expected(std::slice::from_ref(&cluster.nodes[n]), shapes);
    let after = frag::expected(std::slice::from_ref(&after.nodes[n]), shapes);
    (after - before) / 1000.0
}

fn agrees(kind: EngineKind, case: &Case) -> Result<(), TestCaseError> {
    let (nodes, running, shapes, (request, cpu)) = case;
    let mut s = Scheduler::new(compiled(kind));
    for (i, &(cards, clients, cores)) in nodes.iter().enumerate() {
        s.add_node(&node(format!("n{i}"), cards, clients, cores)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    for &(request, cores, node) in running {
        let id = s.submit(job(request, cores)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Jobs that do not fit stay pending; they change nothing.
        let _ = s.start_on(id, &[node % nodes.len()], History::default());
    }
    let total: f64 = shapes.iter().map(|t| t.weight).sum();
    let shapes: Vec<TaskShape> = shapes.iter().map(|t| TaskShape { weight: t.weight / total, ..t.clone() }).collect();
    s.set_task_shapes(frag::shape_records(&shapes));
    let id = s.submit(job(*request, *cpu)).map_err(|e| TestCaseError::fail(e.to_string()))?;

    let view = s.view(Some(id));
    let ctx = s.ctx(&view);
    let job_rec = s.job_rec(id);
    let records = s.node_records();
    let mut out = vec![NodeResult::default(); records.len()];
    s.policy().engine().filter_score(&ctx, &job_rec, records, &mut out);
    let job = &s.job(id);
    for (n, node) in s.cluster().nodes.iter().enumerate() {
        if !fit::fits(node, job) {
            continue;
        }
        let expected = match job.ask.request {
            Request::None => oracle(s.cluster(), n, job, &[], &shapes),
            Request::Whole(_) => {
                let chosen = fit::choose(node, job, None).ok_or_else(|| TestCaseError::fail("fits but no cards"))?;
                oracle(s.cluster(), n, job, &chosen, &shapes)
            }
            _ => {
                let mut best = f64::INFINITY;
                for cand in fit::candidates(node, job) {
                    let growth = oracle(s.cluster(), n, job, &[cand], &shapes);
                    let card = &records[n].cards_list.as_slice()[cand.0];
                    let (score, _) = s.policy().engine().card_score(&ctx, &job_rec, &records[n], card);
                    let got = (0.5 - score) * SCALE;
                    prop_assert!((got - growth).abs() < 1e-6, "node n{n} card {}: gpol {got}, frag {growth}", cand.0);
                    best = best.min(growth);
                }
                best
            }
        };
        let got = (0.5 - out[n].score) * SCALE;
        prop_assert!((got - expected).abs() < 1e-6, "node n{n}: gpol {got}, frag {expected}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fgd_growth_is_the_growth_of_expected_fragmentation(case in case()) {
        agrees(EngineKind::Jit, &case)?;
        agrees(EngineKind::Interp, &case)?;
    }
}

/// A hand-computed case: the paper's example of a share that strands a card's remainder.
#[test]
fn a_share_that_strands_a_remainder_grows_fragmentation() {
    let ask = Ask { request: Request::Fraction(500), gpu_mem: 0, cpu_milli: 0, mem: 0 };
    let shapes = vec![TaskShape { ask, models: vec![], weight: 1.0 }];
    // One card with 0.5 free: a 0.2 share leaves 0.3, which no half-card job can use.
    let case: Case = (vec![(1, 4, 8)], vec![(Request::Fraction(500), 0, 0)], shapes, (Request::Fraction(200), 0));
    agrees(EngineKind::Jit, &case).expect("agrees");
    let mut s = Scheduler::new(compiled(EngineKind::Jit));
    s.add_node(&node("n".into(), 1, 4, 8)).expect("node");
    let warm = s.submit(job(Request::Fraction(500), 0)).expect("submit");
    s.start_on(warm, &[0], History::default()).expect("start");
    s.set_task_shapes(frag::shape_records(&case.2));
    let id = s.submit(job(Request::Fraction(200), 0)).expect("submit");
    let view = s.view(Some(id));
    let mut out = vec![NodeResult::default(); 1];
    s.policy().engine().filter_score(&s.ctx(&view), &s.job_rec(id), s.node_records(), &mut out);
    // Before: 0.5 free, all usable: 0. After: 0.3 free, none usable: 0.3.
    assert!(((0.5 - out[0].score) * SCALE - 0.3).abs() < 1e-9, "score {}", out[0].score);
}

/// A hand-computed case: a job of no GPU takes the CPU a one-card shape needed, so the
/// node's two free cards are stranded.
#[test]
fn a_cpu_only_job_that_takes_a_shapes_cores_strands_the_cards() {
    let ask = Ask { request: Request::Whole(1), gpu_mem: 0, cpu_milli: 4000, mem: 0 };
    let shapes = vec![TaskShape { ask, models: vec![], weight: 1.0 }];
    let case: Case = (vec![(2, 1, 6)], vec![], shapes.clone(), (Request::None, 3));
    agrees(EngineKind::Jit, &case).expect("agrees");
    agrees(EngineKind::Interp, &case).expect("agrees");
    let mut s = Scheduler::new(compiled(EngineKind::Jit));
    s.add_node(&node("n".into(), 2, 1, 6)).expect("node");
    s.set_task_shapes(frag::shape_records(&shapes));
    let id = s.submit(job(Request::None, 3)).expect("submit");
    let view = s.view(Some(id));
    let mut out = vec![NodeResult::default(); 1];
    s.policy().engine().filter_score(&s.ctx(&view), &s.job_rec(id), s.node_records(), &mut out);
    // Before: 6 cores and two free cards, all usable: 0. After: 3 cores, no shape fits: 2.
    assert!(((0.5 - out[0].score) * SCALE - 2.0).abs() < 1e-9, "score {}", out[0].score);
}

/// `std.pack.node_order` is the ATC '23 simulator's tie-break: one fixed random order of
/// the nodes per seed, the same in both engines.
#[test]
fn node_order_is_a_fixed_random_order_per_seed() {
    let text = "policy order\n\nuse std.pack\n\nscore order tier 1 { std.pack.node_order(node) }\n";
    let first = |seed: u64, kind: EngineKind| {
        let mut s = Scheduler::new(support::compiled("order.gpol", text, kind));
        s.set_seed(seed);
        for i in 0..16 {
            s.add_node(&node(format!("n{i}"), 1, 1, 8)).expect("node");
        }
        let id = s.submit(job(Request::Whole(1), 0)).expect("submit");
        match s.decide(id) {
            gpol_runtime::Decision::Place { replicas } => replicas[0],
            other => panic!("placed nowhere: {other:?}"),
        }
    };
    let picks: Vec<usize> = (1..=10).map(|seed| first(seed, EngineKind::Jit)).collect();
    for (seed, &pick) in (1..=10).zip(&picks) {
        assert_eq!(first(seed, EngineKind::Jit), pick, "seed {seed}: the same order again");
        assert_eq!(first(seed, EngineKind::Interp), pick, "seed {seed}: both engines");
    }
    let distinct: std::collections::BTreeSet<usize> = picks.iter().copied().collect();
    assert!(distinct.len() >= 4, "seeds draw different orders: {picks:?}");
}
