//! Shared by the differential tests: generated records and the engine comparison.

#![allow(dead_code)]

use gpol_compiler::engine::{Engine, InterpEngine, NodeResult};
use gpol_compiler::interp::Ctx;
use gpol_compiler::ir::Program;
use gpol_compiler::schema::*;
use proptest::prelude::*;
use std::sync::Arc;

/// String literals programs may use; inputs map some of them to symbols.
pub const LITERALS: u32 = 4;

/// Numbers that find disagreements: signed zeros, infinities, NaN, huge and tiny values.
pub const SPECIAL: [f64; 14] = [
    0.0,
    -0.0,
    1.0,
    0.5,
    -1.0,
    2.0,
    3600.0,
    1e300,
    -1e300,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    f64::MIN_POSITIVE,
    1e-310,
];

fn num() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => prop::sample::select(SPECIAL.to_vec()),
        2 => -10.0f64..10.0,
        1 => any::<f64>(),
    ]
}

fn sym() -> impl Strategy<Value = Sym> {
    (0u32..7).prop_map(Sym)
}

fn mig() -> impl Strategy<Value = MigCounts> {
    // A few profiles' counts set (every profile is reachable; most are zero, as on a node).
    prop::collection::vec((0..gpol_compiler::mig::PROFILE_COUNT, num()), 0..8).prop_map(|set| {
        let mut m = MigCounts::default();
        for (i, x) in set {
            m.0[i] = x;
        }
        m
    })
}

#[derive(Debug, Clone)]
pub struct Inputs {
    pub jobs: Vec<OwnedJob>,
    pub nodes: Vec<OwnedNode>,
    pub shapes: Vec<OwnedShape>,
    pub queues: Vec<QueueRec>,
    pub domains: Vec<DomainRec>,
    pub cluster: (f64, f64, Resources, Resources),
    pub literals: Vec<Sym>,
    pub hashes: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct OwnedJob {
    rec: JobRec<'static>,
    models: Vec<Sym>,
    labels: Vec<Sym>,
}

#[derive(Debug, Clone)]
pub struct OwnedShape {
    rec: ShapeRec<'static>,
    models: Vec<Sym>,
}

#[derive(Debug, Clone)]
pub struct OwnedNode {
    rec: NodeRec<'static>,
    cards: Vec<CardRec>,
    labels: Vec<Sym>,
}

fn resources() -> impl Strategy<Value = Resources> {
    (num(), num(), num()).prop_map(|(gpu, cpu, mem)| Resources { gpu, cpu, mem })
}

fn job() -> impl Strategy<Value = OwnedJob> {
    (
        (sym(), 0u32..5, num(), num(), num(), (any::<bool>(), 0u8..7)),
        (num(), num(), any::<bool>(), any::<bool>(), (any::<bool>(), num()), num()),
        (prop::collection::vec(sym(), 0..3), prop::collection::vec(sym(), 0..4)),
    )
        .prop_map(
            |(
                (id, queue, priority, whole, frac, (has_mig, profile)),
                (waiting, runtime, bursty, lc, (has_dur, dur), evictions),
                (models, labels),
            )| OwnedJob {
                rec: JobRec {
                    id,
                    name: id,
                    user: id,
                    queue,
                    priority,
                    whole_cards: whole,
                    gpu_fraction: frac,
                    mig_profile: Opt { value: profile, present: has_mig },
                    total_gpus: whole * 2.0,
                    waiting,
                    runtime,
                    since_checkpoint: runtime / 2.0,
                    bursty,
                    latency_critical: lc,
                    preemptible: !bursty,
                    expected_duration: Opt { value: dur, present: has_dur },
                    evictions,
                    ..JobRec::default()
                },
                models,
                labels,
            },
        )
}

fn card() -> impl Strategy<Value = CardRec> {
    (num(), num(), num(), mig(), sym()).prop_map(|(free, mem, clients, free_mig, model)| CardRec {
        index: clients.abs().floor(),
        model,
        mem,
        free_mem: mem / 2.0,
        free,
        clients,
        holder_cards: clients.abs().floor(),
        max_clients: 4.0,
        free_mig,
    })
}

fn node() -> impl Strategy<Value = OwnedNode> {
    (
        (num(), num(), num(), 0u8..5, mig(), sym()),
        (prop::array::uniform8(0u32..5), prop::collection::vec(card(), 0..3), prop::collection::vec(sym(), 0..4)),
    )
        .prop_map(|((cards_n, free, largest, sharing, free_mig, model), (domains, cards, labels))| OwnedNode {
            rec: NodeRec {
                name: model,
                gpu_model: model,
                cards: cards_n,
                free_cards: free,
                free_gpu: free,
                largest_free_fraction: largest,
                free_mig,
                sharing,
                domains,
                ..NodeRec::default()
            },
            cards,
            labels,
        })
}

fn queue() -> impl Strategy<Value = QueueRec> {
    ((sym(), (any::<bool>(), 0u32..5), num(), resources(), resources()), (num(), num(), num())).prop_map(
        |((name, (has_parent, parent), weight, guarantee, allocated), (usage, share, after))| QueueRec {
            name,
            parent: Opt { value: parent, present: has_parent },
            weight,
            guarantee,
            limit: guarantee,
            allocated,
            borrowed: allocated,
            usage,
            dominant_share: share,
            share_after: after,
            ..QueueRec::default()
        },
    )
}

pub fn inputs() -> impl Strategy<Value = Inputs> {
    (
        prop::collection::vec(job(), 1..4),
        prop::collection::vec(node(), 0..4),
        prop::collection::vec(
            (num(), num(), (any::<bool>(), 0u8..7), num(), prop::collection::vec(sym(), 0..3)).prop_map(
                |(w, f, (m, p), weight, models)| OwnedShape {
                    rec: ShapeRec {
                        whole_cards: w,
                        gpu_fraction: f,
                        mig_profile: Opt { value: p, present: m },
                        weight,
                        ..ShapeRec::default()
                    },
                    models,
                },
            ),
            0..3,
        ),
        prop::collection::vec(queue(), 0..4),
        prop::collection::vec(
            (num(), num()).prop_map(|(free, cards)| DomainRec { free_cards: free, cards, ..DomainRec::default() }),
            0..4,
        ),
        (num(), num(), resources(), resources()),
        prop::collection::vec(sym(), 0..(LITERALS as usize + 1)),
        prop::collection::vec(any::<u64>(), 0..8),
    )
        .prop_map(|(jobs, nodes, shapes, queues, domains, cluster, literals, hashes)| Inputs {
            jobs,
            nodes,
            shapes,
            queues,
            domains,
            cluster,
            literals,
            hashes,
        })
}

// ---------------------------------------------------------------- comparison

/// Equal as bits, or both NaN.
pub fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same_result(a: &NodeResult, b: &NodeResult) -> bool {
    a.feasible == b.feasible
        && a.rejected_by == b.rejected_by
        && a.faults == b.faults
        && same(a.score, b.score)
        && a.tiers.iter().zip(&b.tiers).all(|(x, y)| same(*x, *y))
}

pub fn compare(program: Program, inputs: &Inputs) -> Result<(), TestCaseError> {
    let program = Arc::new(program);
    if std::env::var_os("GPOL_DIFF_SIZES").is_some() {
        let total: u32 = program.bodies().iter().map(|(_, _, b)| b.node.cost()).sum();
        let max = program.bodies().iter().map(|(_, _, b)| b.node.cost()).max().unwrap_or(0);
        eprintln!("program cost: total {total}, largest body {max}");
    }
    let interp = InterpEngine { program: Arc::clone(&program) };
    let jit = gpol_compiler::jit::compile(Arc::clone(&program)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    check_engines(&program, &interp, &jit, inputs).map_err(|e| TestCaseError::fail(format!("{e}\n{program}")))
}

pub fn check_engines(p: &Program, interp: &dyn Engine, jit: &dyn Engine, inputs: &Inputs) -> Result<(), TestCaseError> {
    // Records with their lists, borrowed from the inputs.
    let jobs: Vec<JobRec<'_>> = inputs
        .jobs
        .iter()
        .map(|j| JobRec { allowed_models: List::new(&j.models), labels: List::new(&j.labels), ..j.rec })
        .collect();
    let nodes: Vec<NodeRec<'_>> = inputs
        .nodes
        .iter()
        .map(|n| NodeRec { cards_list: List::new(&n.cards), labels: List::new(&n.labels), ..n.rec })
        .collect();
    let shapes: Vec<ShapeRec<'_>> =
        inputs.shapes.iter().map(|s| ShapeRec { allowed_models: List::new(&s.models), ..s.rec }).collect();
    let (time, count, total, free) = inputs.cluster;
    // The clock starts on a Monday at midnight (UTC).
    let (time_of_day, weekday) = (time.rem_euclid(86_400.0), 1.0 + (time / 86_400.0).floor().rem_euclid(7.0));
    let cluster = ClusterRec { time, time_of_day, weekday, nodes: count, total, free, task_shapes: List::new(&shapes) };
    let ctx = Ctx {
        cluster: &cluster,
        queues: &inputs.queues,
        domains: &inputs.domains,
        literals: &inputs.literals,
        sym_hashes: &inputs.hashes,
        attrs: &p.attrs,
    };
    for job in &jobs {
        prop_assert_eq!(interp.admit(&ctx, job), jit.admit(&ctx, job), "admit");
        let mut a = vec![NodeResult::default(); nodes.len()];
        let mut b = vec![NodeResult::default(); nodes.len()];
        interp.filter_score(&ctx, job, &nodes, &mut a);
        jit.filter_score(&ctx, job, &nodes, &mut b);
        for (x, y) in a.iter().zip(&b) {
            prop_assert!(same_result(x, y), "filter_score: interp {x:?} jit {y:?}");
        }
        for node in &nodes {
            for card in node.cards_list.as_slice() {
                let (x, fx) = interp.card_score(&ctx, job, node, card);
                let (y, fy) = jit.card_score(&ctx, job, node, card);
                prop_assert!(same(x, y) && fx == fy, "card_score: interp {x} ({fx}) jit {y} ({fy})");
            }
        }
        let mut ka = vec![0.0; p.job_order.len()];
        let mut kb = vec![0.0; p.job_order.len()];
        interp.job_keys(&ctx, job, &mut ka);
        jit.job_keys(&ctx, job, &mut kb);
        for (i, (x, y)) in ka.iter().zip(&kb).enumerate() {
            prop_assert!(same(*x, *y), "job key {i}: interp {x} jit {y}");
        }
        for c in 0..=p.gang.len() {
            prop_assert_eq!(interp.gang_applies(&ctx, job, c), jit.gang_applies(&ctx, job, c), "gang clause {}", c);
        }
        for victim in &jobs {
            for r in 0..=p.victims.len() {
                let (oa, ca) = interp.victim(&ctx, r, job, victim);
                let (ob, cb) = jit.victim(&ctx, r, job, victim);
                prop_assert!(oa == ob && same(ca, cb), "victim rule {r}: interp {oa} {ca} jit {ob} {cb}");
            }
            let mut ka = vec![0.0; p.victim_order.len()];
            let mut kb = vec![0.0; p.victim_order.len()];
            interp.victim_keys(&ctx, job, victim, &mut ka);
            jit.victim_keys(&ctx, job, victim, &mut kb);
            for (i, (x, y)) in ka.iter().zip(&kb).enumerate() {
                prop_assert!(same(*x, *y), "victim key {i}: interp {x} jit {y}");
            }
        }
    }
    for q in 0..=inputs.queues.len() as u32 {
        let mut ka = vec![0.0; p.queue_order.len()];
        let mut kb = vec![0.0; p.queue_order.len()];
        interp.queue_keys(&ctx, q, &mut ka);
        jit.queue_keys(&ctx, q, &mut kb);
        for (i, (x, y)) in ka.iter().zip(&kb).enumerate() {
            prop_assert!(same(*x, *y), "queue {q} key {i}: interp {x} jit {y}");
        }
    }
    Ok(())
}
