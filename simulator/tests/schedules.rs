//! One job model: the same generated jobs, given once as a policy's `test` scenario and
//! once as a trace the simulator replays, produce the same schedule, event for event —
//! so `gpolc test` and `gpolc sim` mean the same thing by the same job.
//!
//! The policy's decisions do not depend on time alone (its victim rules read only the
//! two jobs, it reserves nothing), so both sides run a cycle exactly when jobs arrive.
//! Every job runs longer than the trace's span, so no job finishes before the last
//! arrival; the schedules are compared up to it.

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::schema::EnumKind;
use gpol_compiler::spec::{JobSpec, NodeSpec, Request, Sharing};
use gpol_runtime::{Event, scenario};
use gpol_sim::cluster_file::{ClusterSpec, NodeDef};
use gpol_sim::trace::{self, TraceJob};
use gpol_sim::{Config, Control, Workload};
use proptest::prelude::*;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

const POLICY: &str = r#"policy schedules

use std.pack

topology rack

queue org {
  queue a { guarantee 8 gpu; borrow_limit 8 gpu }
  queue b { guarantee 8 gpu }
}

priority_class low = 0
priority_class high = 100

filter whole_cards_unshared { job.whole_cards > 0 gpu implies node.sharing == exclusive }

filter bursty_off_mig { not (job.bursty and node.sharing == mig) }

score pack weight 2 { std.pack.binpack(job, node) }

score roomy weight 1 { if node.mem_free >= 2 * job.mem then 1 else 0 }

card_score emptiest { card.free / 1 gpu }

gang {
  require same rack when job.replicas > 2
}

preempt by_priority {
  when claimant.priority > victim.priority and victim.preemptible
  cost victim.total_gpus
}

reclaim borrowed { when victim.preemptible }

queue_order { queue.dominant_share asc }

job_order { job.priority desc, job.expected_duration ?? 0s asc, job.submitted asc }
"#;

/// Jobs arrive within this span (ms); each runs longer.
const SPAN_MS: u64 = 600_000;

fn mig(name: &str) -> u8 {
    EnumKind::MigProfile.variant(name).expect("a MIG profile")
}

fn node() -> impl Strategy<Value = NodeSpec> {
    (1u32..9, 0usize..3, 0u8..2, any::<bool>()).prop_map(|(cards, mode, rack, h100)| {
        let sharing = [Sharing::Exclusive, Sharing::Timeslice, Sharing::Mig][mode];
        NodeSpec {
            model: if h100 { "h100".into() } else { "a100".into() },
            cards,
            sharing,
            mig: if sharing == Sharing::Mig { vec![vec![mig("3g.40gb"), mig("3g.40gb")]] } else { Vec::new() },
            max_clients: if sharing == Sharing::Timeslice { 4 } else { 1 },
            domains: vec![(0, format!("r{rack}"))],
            ..NodeSpec::default()
        }
    })
}

fn job() -> impl Strategy<Value = TraceJob> {
    let request = prop_oneof![
        4 => (1u32..5).prop_map(Request::Whole),
        2 => (1u32..1000).prop_map(Request::Fraction),
        1 => Just(Request::Mig(mig("3g.40gb"))),
        1 => Just(Request::None),
    ];
    (
        (
            0..SPAN_MS / 1000,
            prop::sample::select(vec!["a", "b"]),
            prop::option::of(prop::sample::select(vec!["low", "high"])),
        ),
        (request, 1u32..4, any::<bool>(), any::<bool>(), any::<bool>()),
        (0u64..17, prop::sample::select(vec![0u64, 8 << 30, 200 << 30]), SPAN_MS + 1..2 * SPAN_MS),
        (prop::option::of(1u64..600_000), prop::sample::select(vec![0.25, 0.5, 1.0]), prop::option::of("[a-c]")),
    )
        .prop_map(
            |(
                (arrival_s, queue, class),
                (request, replicas, elastic, preemptible, bursty),
                (cores, mem, duration),
                (checkpoint, utilization, user),
            )| {
                let replicas = if matches!(request, Request::Whole(_)) { replicas } else { 1 };
                let job = JobSpec {
                    queue: Some(queue.into()),
                    user,
                    priority_class: class.map(str::to_string),
                    request,
                    replicas,
                    min_replicas: (elastic && replicas > 1).then_some(1),
                    cpu_milli: cores * 1000,
                    mem,
                    preemptible,
                    bursty,
                    duration_ms: Some(duration),
                    checkpoint_every_ms: checkpoint,
                    utilization,
                    ..JobSpec::default()
                };
                TraceJob { line: 0, arrival_ms: arrival_s * 1000, job }
            },
        )
}

/// The jobs as a `test` block: nodes, then each arrival's jobs after advancing to it.
fn test_block(nodes: &[NodeSpec], jobs: &[TraceJob]) -> String {
    let levels = vec!["rack".to_string()];
    let mut t = String::from("test \"generated\" {\n");
    for n in nodes {
        t.push_str(&format!("  node {} {{ {} }}\n", n.name, n.test_props(&levels)));
    }
    let mut now = 0;
    for j in jobs {
        if j.arrival_ms > now {
            t.push_str(&format!("  advance {}ms\n", j.arrival_ms - now));
            now = j.arrival_ms;
        }
        t.push_str(&format!("  submit {} {{ {} }}\n", j.job.name, j.job.test_props()));
    }
    // A last cycle for the last arrivals.
    t.push_str("  advance 0ms\n}\n");
    t
}

/// The scenario's events, as `gpolc test` schedules it.
fn as_test(nodes: &[NodeSpec], jobs: &[TraceJob]) -> Result<Vec<Event>, TestCaseError> {
    let text = format!("{POLICY}\n{}", test_block(nodes, jobs));
    let policy = gpol_compiler::load::compile_text("schedules.gpol", &text, EngineKind::Jit)
        .map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
    let played = scenario::run_with(&policy, &policy.policy.tests[0], |_, _| {});
    prop_assert!(played.outcome.error.is_none(), "{:?}", played.outcome.error);
    Ok(played.events)
}

/// The trace's events, as `gpolc sim` schedules it (the trace written and read back).
fn as_trace(policy: &CompiledPolicy, nodes: &[NodeSpec], jobs: &[TraceJob]) -> Result<Vec<Event>, TestCaseError> {
    let cluster = ClusterSpec {
        name: "generated".into(),
        nodes: nodes
            .iter()
            .map(|n| NodeDef {
                spec: NodeSpec { domains: Vec::new(), ..n.clone() },
                topology: n.domains.iter().map(|(_, d)| ("rack".to_string(), d.clone())).collect(),
            })
            .collect(),
        ..ClusterSpec::default()
    };
    let read = trace::parse(&trace::to_csv(jobs), "generated.csv").map_err(|e| TestCaseError::fail(e.to_string()))?;
    let workload = Workload::from_jobs("generated.csv", read);
    let events = Mutex::new(Vec::new());
    let record = |_: &gpol_runtime::Scheduler, e: &Event| events.lock().expect("not poisoned").push(e.clone());
    let cancel = AtomicBool::new(false);
    let control = Control { on_event: Some(&record), ..Control::new(&|_| {}, &cancel) };
    let config = Config { seed: 0, ..Config::default() };
    gpol_sim::run(policy, &cluster, &workload, &config, &control).map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok(events.into_inner().expect("not poisoned"))
}

fn at_ms(e: &Event) -> u64 {
    match e {
        Event::Submitted { at_ms, .. }
        | Event::Placed { at_ms, .. }
        | Event::Grown { at_ms, .. }
        | Event::Shrunk { at_ms, .. }
        | Event::Rejected { at_ms, .. }
        | Event::Finished { at_ms, .. }
        | Event::Requeued { at_ms, .. }
        | Event::Evicted { at_ms, .. }
        | Event::Reserved { at_ms, .. } => *at_ms,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_scenario_and_a_trace_of_the_same_jobs_schedule_alike(
        nodes in prop::collection::vec(node(), 1..6),
        jobs in prop::collection::vec(job(), 1..25),
    ) {
        thread_local! {
            static POLICY_JIT: CompiledPolicy =
                gpol_compiler::load::compile_text("schedules.gpol", POLICY, EngineKind::Jit).expect("the policy compiles");
        }
        let nodes: Vec<NodeSpec> = nodes.into_iter().enumerate().map(|(i, n)| NodeSpec { name: format!("n{i}"), ..n }).collect();
        let mut jobs = jobs;
        jobs.sort_by_key(|j| j.arrival_ms);
        for (i, j) in jobs.iter_mut().enumerate() {
            j.job.name = format!("j{i}");
        }
        let last = jobs.last().map_or(0, |j| j.arrival_ms);
        let test = as_test(&nodes, &jobs)?;
        let sim = POLICY_JIT.with(|p| as_trace(p, &nodes, &jobs))?;
        let sim: Vec<Event> = sim.into_iter().filter(|e| at_ms(e) <= last).collect();
        prop_assert!(test.iter().all(|e| at_ms(e) <= last));
        prop_assert_eq!(test, sim);
    }
}

/// The generated cases place, evict and leave jobs waiting: the property is not vacuous.
#[test]
fn generated_cases_place_and_evict() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (prop::collection::vec(node(), 2..5), prop::collection::vec(job(), 10..25));
    let (mut placed, mut evicted, mut waiting) = (0, 0, 0);
    for _ in 0..32 {
        let (nodes, mut jobs) = strategy.new_tree(&mut runner).expect("a case").current();
        let nodes: Vec<NodeSpec> =
            nodes.into_iter().enumerate().map(|(i, n)| NodeSpec { name: format!("n{i}"), ..n }).collect();
        jobs.sort_by_key(|j| j.arrival_ms);
        for (i, j) in jobs.iter_mut().enumerate() {
            j.job.name = format!("j{i}");
        }
        let events = as_test(&nodes, &jobs).expect("the scenario runs");
        let count = |f: fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
        placed += count(|e| matches!(e, Event::Placed { .. }));
        evicted += count(|e| matches!(e, Event::Evicted { .. }));
        waiting += jobs.len() - count(|e| matches!(e, Event::Placed { .. })).min(jobs.len());
    }
    assert!(placed > 100 && evicted > 5 && waiting > 10, "placed {placed}, evicted {evicted}, waiting {waiting}");
}
