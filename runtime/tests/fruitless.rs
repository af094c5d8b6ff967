//! A class whose victim search found no candidate waits until what could give it one
//! happens (or its quota cap gives): no job it holds back could have started, and it
//! searches far less often than retrying after every start.

mod support;

use gpol_runtime::Decision;
use gpol_runtime::{Event, Scheduler};
use proptest::prelude::*;
use support::h100;

/// Rules of each kind the watch follows: `preempt` reading only the jobs, `reclaim` and
/// `borrow` reading the jobs' queues (`share_after`, `allocated`), a `protect` too.
const POLICIES: [&str; 3] = [
    r#"policy shares

queue org {
  queue a { guarantee 8 gpu }
  queue b { guarantee 4 gpu }
  queue c { guarantee 4 gpu; weight 2 }
}

queue_order { queue.dominant_share / queue.weight asc }

reclaim take_back {
  when victim.preemptible and claimant.queue.share_after <= victim.queue.share_after
}

borrow fair { when claimant.priority > victim.priority and victim.queue.allocated.gpu > 6 gpu }
"#,
    r#"policy priorities

queue org {
  queue a { guarantee 12 gpu }
  queue b { guarantee 4 gpu }
}

preempt urgent { when claimant.priority > victim.priority }

reclaim back { when victim.preemptible }

protect big "big jobs stay" { when victim.total_gpus >= 6 gpu }
"#,
    r#"policy deep

queue root {
  queue dept {
    guarantee 8 gpu
    queue a { guarantee 4 gpu }
    queue b { guarantee 4 gpu }
  }
  queue c { guarantee 8 gpu }
}

reclaim within { when victim.preemptible and claimant.queue.allocated.gpu < 6 gpu }
"#,
];

/// One arrival: its queue, cards, duration in minutes, priority and whether it may be
/// evicted.
type Arrival = (u8, u32, u64, bool, bool);

/// Two 8-card nodes under `policy`, fruitless searches skipped if `skip`; the leaves.
fn start(policy: &str, skip: bool) -> (support::Stream, Vec<String>) {
    let mut stream = support::Stream::new(support::scheduler(policy, &[h100("n1"), h100("n2")]));
    stream.s.skip_fruitless_searches(skip);
    let leaves = stream.s.quotas().queues.iter().filter(|q| q.is_leaf()).map(|q| q.place.name.clone()).collect();
    (stream, leaves)
}

/// The `i`-th arrival as a job.
fn job(
    i: usize,
    &(queue, cards, minutes, high, preemptible): &Arrival,
    leaves: &[String],
) -> gpol_compiler::spec::JobSpec {
    let mut spec = support::cards(&format!("job-{i}"), cards);
    spec.queue = Some(leaves[usize::from(queue) % leaves.len()].clone());
    spec.priority = Some(if high { 10.0 } else { 0.0 });
    spec.preemptible = preemptible;
    spec.duration_ms = Some(minutes * 60_000);
    spec
}

/// Runs the arrivals one a minute, completing each started job after its duration;
/// returns the log and how many victim searches were made.
fn run(policy: &str, arrivals: &[Arrival], skip: bool) -> (Vec<String>, u64) {
    let (mut stream, leaves) = start(policy, skip);
    let mut log = Vec::new();
    for (i, arrival) in arrivals.iter().enumerate() {
        let spec = job(i, arrival, &leaves);
        for e in stream.arrive(spec) {
            log.push(render(&stream.s, &e));
        }
        stream.s.advance(60_000).expect("the clock stays within its limit");
    }
    (log, stream.s.victim_searches())
}

fn render(s: &Scheduler, e: &Event) -> String {
    let name = |j: &usize| s.job(*j).ask.name.clone();
    match e {
        Event::Placed { job, nodes, .. } => format!("{} on {nodes:?}", name(job)),
        Event::Finished { job, .. } => format!("{} finished", name(job)),
        Event::Evicted { job, by, rule, .. } => format!("{} evicted by {} under {rule:?}", name(job), name(by)),
        other => format!("{other:?}"),
    }
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (0..4u8, 1..=8u32, 1..=40u64, any::<bool>(), any::<bool>())
}

/// Runs the arrivals one a minute; after each, runs cycles until one starts nothing, and
/// then asks of every waiting job whether it could start now, by placement or by evicting:
/// none may (what the retry rules and the watch hold back could not have started). A
/// state that does not settle within 50 cycles is not asked about.
fn settled(policy: &str, arrivals: &[Arrival], skip: bool) -> Result<(), String> {
    let (mut stream, leaves) = start(policy, skip);
    for (i, arrival) in arrivals.iter().enumerate() {
        let spec = job(i, arrival, &leaves);
        stream.arrive(spec);
        let s = &mut stream.s;
        // Evictions may go on cycle after cycle (some of these policies let jobs evict
        // each other back and forth): only a settled state says anything.
        if !(0..50).any(|_| gpol_runtime::starts(&s.cycle()) == 0) {
            s.advance(60_000).expect("the clock stays within its limit");
            continue;
        }
        for j in 0..=i {
            if !s.job(j).is_pending() {
                continue;
            }
            if let Decision::Place { replicas } = s.decide(j) {
                return Err(format!("after arrival {i}: job-{j} could start on {replicas:?}"));
            }
            if let Some(e) = s.victim_search(j) {
                return Err(format!("after arrival {i}: job-{j} could start by evicting {:?}", e.victims));
            }
        }
        s.advance(60_000).expect("the clock stays within its limit");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_job_held_back_could_have_started(
        policy in 0..POLICIES.len(),
        arrivals in prop::collection::vec(arrival(), 1..60),
    ) {
        prop_assert_eq!(settled(POLICIES[policy], &arrivals, true), Ok(()));
        prop_assert_eq!(settled(POLICIES[policy], &arrivals, false), Ok(()));
    }
}

#[test]
fn a_backlog_that_can_evict_no_one_costs_fewer_searches() {
    // Queue `a` borrows the whole cluster first; then jobs of `a` (which can take from no
    // one: `a` borrows) and of `b` (which reclaims) keep arriving.
    let arrivals: Vec<Arrival> = (0..200u64)
        .map(|i| if i < 4 { (0, 4, 500, false, true) } else { ((i % 2) as u8, 1 + (i % 3) as u32, 30, false, true) })
        .collect();
    let (every, every_searches) = run(POLICIES[0], &arrivals, false);
    let (skipping, skipping_searches) = run(POLICIES[0], &arrivals, true);
    assert!(every.iter().any(|l| l.contains("evicted")), "the run evicts: {every:?}");
    assert_eq!(
        every.iter().filter(|l| l.ends_with("finished")).count(),
        skipping.iter().filter(|l| l.ends_with("finished")).count(),
        "as many jobs finish"
    );
    assert!(
        skipping_searches * 2 < every_searches,
        "{skipping_searches} searches against {every_searches}: most found no candidate"
    );
}
