//! Gangs, preemption and reclaim over random clusters and event sequences, in both
//! engines: a gang is never partly placed (an elastic one runs between its minimum and
//! its count, growing and giving up replicas); every eviction names its rule and is
//! followed by its claimant starting; no two queues take from each other in a cycle, and no two
//! jobs evict each other back and forth while nothing else changes; the accounting stays
//! exact; and the JIT and the interpreter produce the same schedule.

mod support;

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::ir::{RuleId, VictimKind};
use gpol_compiler::spec::{JobSpec, MILLI, NodeSpec, Request};
use gpol_runtime::Res;
use gpol_runtime::{Event, Scheduler};
use gpol_runtime::{JobId, QueueId, State};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use std::collections::{HashMap, HashSet};
use support::{compiled, example};

/// Guarantees with borrowing and lending, gangs with topology, priority preemption,
/// reclaim and reservation all at once.
const MIXED: &str = r#"policy mixed

topology nvlink_domain, rack

queue org {
  queue a { guarantee 16 gpu; borrow_limit 16 gpu }
  queue b { guarantee 8 gpu; lend_limit 4 gpu }
  queue c { weight 2 }
}

gang {
  require same rack when job.replicas > 2
  prefer same nvlink_domain weight 2
}

settings { reserve_after 1h }

preempt by_priority {
  when claimant.priority > victim.priority and victim.runtime >= 10m
  cost victim.total_gpus * victim.since_checkpoint
}

reclaim borrowed { when victim.preemptible }

queue_order { queue.dominant_share / queue.weight asc }

job_order { job.priority desc, job.submitted asc }
"#;

fn node() -> impl Strategy<Value = NodeSpec> {
    nodes_of(1..9)
}

/// Full 8-card nodes: a fleet big enough for the example's guarantees to matter.
fn big_node() -> impl Strategy<Value = NodeSpec> {
    nodes_of(8..9)
}

fn nodes_of(cards: std::ops::Range<u32>) -> impl Strategy<Value = NodeSpec> {
    (cards, 0u8..4, any::<bool>()).prop_map(|(cards, nv, h100)| NodeSpec {
        model: if h100 { "h100".into() } else { "a100".into() },
        cards,
        cpu_milli: 128_000,
        mem: 1 << 40,
        domains: vec![(0, format!("nv{nv}")), (1, format!("rack{}", nv / 2))],
        ..NodeSpec::default()
    })
}

/// A job for one of `leaves` (by index), with a priority class from `classes` if any.
#[derive(Clone, Debug)]
struct Job {
    leaf: usize,
    cards: u32,
    fraction: Option<u32>,
    replicas: u32,
    min_replicas: u32,
    priority: i32,
    preemptible: bool,
    user: u8,
}

fn job() -> impl Strategy<Value = Job> {
    (
        0usize..3,
        1u32..9,
        prop::option::weighted(0.2, 1u32..1000),
        1u32..5,
        1u32..5,
        -1i32..4,
        prop::bool::weighted(0.8),
        0u8..3,
    )
        .prop_map(|(leaf, cards, fraction, replicas, min, priority, preemptible, user)| Job {
            leaf,
            cards,
            fraction,
            replicas,
            min_replicas: min.min(replicas),
            priority,
            preemptible,
            user,
        })
}

#[derive(Clone, Debug)]
enum Step {
    Submit(Job),
    Complete(usize),
    Fail(usize),
    Advance(u64),
    Cycle,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => job().prop_map(Step::Submit),
        2 => any::<usize>().prop_map(Step::Complete),
        1 => any::<usize>().prop_map(Step::Fail),
        3 => (60_000u64..5_400_000).prop_map(Step::Advance),
        5 => Just(Step::Cycle),
    ]
}

/// How a policy's queues and priorities are filled in from a random job.
struct Setup {
    leaves: Vec<&'static str>,
    /// Priority classes by the job's priority (clamped to the list), if the policy has them.
    classes: Vec<&'static str>,
}

fn spec(setup: &Setup, j: &Job, name: String) -> JobSpec {
    // With priority classes, the job's priority is its class's.
    let (priority_class, priority) = if setup.classes.is_empty() {
        (None, Some(f64::from(j.priority)))
    } else {
        let c = setup.classes[(j.priority.max(0) as usize).min(setup.classes.len() - 1)];
        (Some(c.to_string()), None)
    };
    JobSpec {
        queue: Some(setup.leaves[j.leaf % setup.leaves.len()].to_string()),
        user: Some(format!("user{}", j.user)),
        priority_class,
        priority,
        request: match j.fraction {
            Some(m) => Request::Fraction(m),
            None => Request::Whole(j.cards),
        },
        replicas: if j.fraction.is_some() { 1 } else { j.replicas },
        min_replicas: Some(j.min_replicas),
        cpu_milli: 1000,
        mem: 1 << 30,
        preemptible: j.preemptible,
        ..JobSpec::named(name)
    }
}

/// Checks the state: cards and quota accounting, whole gangs.
fn state_invariants(s: &Scheduler) -> Result<(), String> {
    let mut held: HashMap<(usize, usize), u32> = HashMap::new();
    let mut gpu = vec![0i64; s.quotas().queues.len()];
    for j in s.jobs() {
        if j.life.state != State::Running {
            if !j.holding.slots.is_empty() || !j.holding.charged.is_empty() {
                return Err(format!("job {} is {:?} but holds resources", j.ask.name, j.life.state));
            }
            continue;
        }
        let n = j.holding.slots.len() as u32;
        if n < j.ask.min_replicas || n > j.ask.replicas {
            return Err(format!(
                "gang {} runs {n} replicas of {} (at least {})",
                j.ask.name, j.ask.replicas, j.ask.min_replicas
            ));
        }
        for slot in &j.holding.slots {
            for &(card, milli) in &slot.cards {
                *held.entry((slot.node, card)).or_insert(0) += milli;
            }
        }
        for q in s.quotas().path(j.ask.queue) {
            gpu[q] += j.holding.charged.get(&Res::Gpu).copied().unwrap_or(0);
        }
        if j.holding.charged.get(&Res::Gpu).copied().unwrap_or(0) != (j.ask.request.milli() * u64::from(n)) as i64 {
            return Err(format!("job {} is charged {:?} for {n} replicas", j.ask.name, j.holding.charged));
        }
    }
    for (ni, node) in s.cluster().nodes.iter().enumerate() {
        for (ci, c) in node.cards.iter().enumerate() {
            if c.free_milli + held.get(&(ni, ci)).copied().unwrap_or(0) != MILLI {
                return Err(format!("node {} card {ci} does not add up", node.name));
            }
        }
    }
    for (qi, q) in s.quotas().queues.iter().enumerate() {
        if q.get(&q.load.alloc, Res::Gpu) != gpu[qi] {
            return Err(format!(
                "queue {} accounts {} but its jobs hold {}",
                q.place.name,
                q.get(&q.load.alloc, Res::Gpu),
                gpu[qi]
            ));
        }
    }
    Ok(())
}

/// Checks the events one step caused (`log`) and the evictions since anything but a
/// cycle last happened (`pairs`, claimant → victim).
fn cycle_invariants(s: &Scheduler, log: &[Event], pairs: &mut HashSet<(JobId, JobId)>) -> Result<(), String> {
    let victims = &s.policy().program.victims;
    let mut queue_pairs: HashSet<(QueueId, QueueId)> = HashSet::new();
    for (i, ev) in log.iter().enumerate() {
        match ev {
            Event::Placed { job, nodes, .. } => {
                let j = &s.job(*job);
                if (nodes.len() as u32) < j.ask.min_replicas || nodes.len() as u32 > j.ask.replicas {
                    return Err(format!("{} placed with {} replicas", j.ask.name, nodes.len()));
                }
            }
            Event::Evicted { job, by, rule, .. } => {
                let victim_rule = match rule {
                    RuleId::Victim(i) => victims.get(usize::from(*i)),
                    _ => None,
                };
                let Some(victim_rule) = victim_rule.filter(|_| job != by) else {
                    return Err(format!(
                        "eviction of {} for {} under {rule:?}, not a victim rule",
                        s.job(*job).ask.name,
                        s.job(*by).ask.name
                    ));
                };
                // The run of evictions for one claimant ends with the claimant starting.
                starts_next(s, &log[i + 1..], *job, *by)?;
                if pairs.contains(&(*job, *by)) {
                    return Err(format!("{} and {} evicted each other", s.job(*job).ask.name, s.job(*by).ask.name));
                }
                pairs.insert((*by, *job));
                // Queues that take from each other by guarantees: reclaim, or any eviction
                // across queues when the tree governs GPUs. (Without guarantees, eviction
                // across queues is by the rules alone, e.g. by priority, in both directions.)
                let reclaim = victim_rule.kind == VictimKind::Reclaim;
                let (cq, vq) = (s.job(*by).ask.queue, s.job(*job).ask.queue);
                if cq != vq && (reclaim || s.quotas().is_constrained(Res::Gpu)) {
                    if queue_pairs.contains(&(vq, cq)) {
                        return Err(format!(
                            "queues {} and {} took from each other in one cycle",
                            s.quotas().queues[cq].place.name,
                            s.quotas().queues[vq].place.name
                        ));
                    }
                    queue_pairs.insert((cq, vq));
                }
            }
            Event::Shrunk { job, by, .. } => {
                // A replica taken (its gang runs on: `state_invariants`); its claimant
                // starts next.
                starts_next(s, &log[i + 1..], *job, *by)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `claimant`, for which `victim` (or its replica) went, is the next job to start
/// in `rest` once its other victims have gone.
fn starts_next(s: &Scheduler, rest: &[Event], victim: JobId, claimant: JobId) -> Result<(), String> {
    match rest.iter().find(|e| !evicted_for(e, claimant)) {
        Some(Event::Placed { job, .. }) if *job == claimant => Ok(()),
        _ => {
            Err(format!("{} was evicted for {}, which did not start", s.job(victim).ask.name, s.job(claimant).ask.name))
        }
    }
}

/// Whether an event is a whole job or a replica evicted for `claimant`.
fn evicted_for(e: &Event, claimant: JobId) -> bool {
    matches!(e, Event::Evicted { by, .. } | Event::Shrunk { by, .. } if *by == claimant)
}

fn play(
    policy: &CompiledPolicy,
    setup: &Setup,
    nodes: &[NodeSpec],
    steps: &[Step],
) -> Result<(Scheduler, Vec<Event>), TestCaseError> {
    let mut s = Scheduler::new(policy.clone());
    let mut history = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        s.add_node(&NodeSpec { name: format!("n{i}"), ..n.clone() }).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    let mut pairs = HashSet::new();
    for (k, st) in steps.iter().enumerate() {
        let from = history.len();
        match st {
            Step::Submit(j) => {
                s.submit(spec(setup, j, format!("j{k}"))).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            Step::Complete(i) => {
                let running: Vec<JobId> = s.running().collect();
                if !running.is_empty() {
                    s.complete(running[i % running.len()]);
                }
            }
            Step::Fail(i) => history.extend(s.fail_node(i % s.cluster().nodes.len())),
            Step::Advance(ms) => s.advance(*ms).expect("the scenario stays within the clock limit"),
            Step::Cycle => history.extend(s.cycle()),
        }
        if !matches!(st, Step::Cycle) {
            pairs.clear();
        }
        state_invariants(&s).map_err(|e| TestCaseError::fail(format!("after {st:?}: {e}")))?;
        cycle_invariants(&s, &history[from..], &mut pairs)
            .map_err(|e| TestCaseError::fail(format!("after {st:?}: {e}")))?;
    }
    Ok((s, history))
}

fn check_both(
    policies: &(CompiledPolicy, CompiledPolicy),
    setup: &Setup,
    nodes: &[NodeSpec],
    steps: &[Step],
) -> Result<Counts, TestCaseError> {
    let (_, a) = play(&policies.0, setup, nodes, steps)?;
    let (_, b) = play(&policies.1, setup, nodes, steps)?;
    prop_assert_eq!(&a, &b, "the engines scheduled differently");
    let count = |f: fn(&Event) -> bool| a.iter().filter(|e| f(e)).count();
    Ok(Counts {
        evicted: count(|e| matches!(e, Event::Evicted { .. })),
        shrunk: count(|e| matches!(e, Event::Shrunk { .. })),
        grown: count(|e| matches!(e, Event::Grown { .. })),
    })
}

/// Whole jobs evicted, replicas taken and replicas added in a run.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    evicted: usize,
    shrunk: usize,
    grown: usize,
}

impl std::iter::Sum for Counts {
    fn sum<I: Iterator<Item = Counts>>(iter: I) -> Counts {
        iter.fold(Counts::default(), |a, b| Counts {
            evicted: a.evicted + b.evicted,
            shrunk: a.shrunk + b.shrunk,
            grown: a.grown + b.grown,
        })
    }
}

thread_local! {
    static MIXED_POLICIES: (CompiledPolicy, CompiledPolicy) =
        (compiled("mixed.gpol", MIXED, EngineKind::Jit), compiled("mixed.gpol", MIXED, EngineKind::Interp));
    static PREEMPTION: (CompiledPolicy, CompiledPolicy) = {
        let text = example("preemption.gpol");
        (compiled("preemption.gpol", &text, EngineKind::Jit), compiled("preemption.gpol", &text, EngineKind::Interp))
    };
    static BORROWING: (CompiledPolicy, CompiledPolicy) = {
        let text = example("borrowing.gpol");
        (compiled("borrowing.gpol", &text, EngineKind::Jit), compiled("borrowing.gpol", &text, EngineKind::Interp))
    };
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn mixed_policy(nodes in prop::collection::vec(node(), 1..9), steps in prop::collection::vec(step(), 1..60)) {
        MIXED_POLICIES.with(|p| -> Result<(), TestCaseError> {
            let setup = Setup { leaves: vec!["a", "b", "c"], classes: Vec::new() };
            check_both(p, &setup, &nodes, &steps).map(|_| ())
        })?;
    }

    #[test]
    fn example_preemption_policy(nodes in prop::collection::vec(node(), 1..6), steps in prop::collection::vec(step(), 1..60)) {
        PREEMPTION.with(|p| -> Result<(), TestCaseError> {
            let setup = Setup {
                leaves: vec!["serving", "training", "experiments"],
                classes: vec!["scavenger", "standard", "critical"],
            };
            check_both(p, &setup, &nodes, &steps).map(|_| ())
        })?;
    }

    #[test]
    fn example_borrowing_policy(nodes in prop::collection::vec(big_node(), 8..17), steps in prop::collection::vec(step(), 1..60)) {
        BORROWING.with(|p| -> Result<(), TestCaseError> {
            let setup = Setup { leaves: vec!["training", "inference", "research"], classes: Vec::new() };
            check_both(p, &setup, &nodes, &steps).map(|_| ())
        })?;
    }
}

/// The generated cases do evict under each policy: the properties are not vacuous.
#[test]
fn random_cases_exercise_evictions() {
    let count = |policies: &'static std::thread::LocalKey<(CompiledPolicy, CompiledPolicy)>,
                 leaves: Vec<&'static str>,
                 classes: Vec<&'static str>,
                 nodes: BoxedStrategy<Vec<NodeSpec>>| {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = (nodes, prop::collection::vec(step(), 20..80));
        policies.with(|p| {
            let setup = Setup { leaves: leaves.clone(), classes: classes.clone() };
            (0..64)
                .map(|_| {
                    let (nodes, steps) = strategy.new_tree(&mut runner).map(|t| t.current()).unwrap_or_default();
                    check_both(p, &setup, &nodes, &steps).unwrap()
                })
                .sum::<Counts>()
        })
    };
    let mixed = count(&MIXED_POLICIES, vec!["a", "b", "c"], Vec::new(), prop::collection::vec(node(), 2..6).boxed());
    let preemption = count(
        &PREEMPTION,
        vec!["serving", "training", "experiments"],
        vec!["scavenger", "standard", "critical"],
        prop::collection::vec(node(), 1..6).boxed(),
    );
    let borrowing = count(
        &BORROWING,
        vec!["training", "inference", "research"],
        Vec::new(),
        prop::collection::vec(big_node(), 8..17).boxed(),
    );
    eprintln!("mixed {mixed:?}, preemption {preemption:?}, borrowing {borrowing:?}");
    assert!(mixed.evicted > 10 && preemption.evicted > 10 && borrowing.evicted > 0);
    // Elastic gangs give up replicas and grow again.
    let all = [mixed, preemption, borrowing].into_iter().sum::<Counts>();
    assert!(all.shrunk > 0 && all.grown > 0, "{all:?}");
}
