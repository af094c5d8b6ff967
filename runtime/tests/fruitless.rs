//! A class whose victim search found no candidate is not searched for again until what
//! could give it one happens: the scheduler decides exactly as it does when it searches
//! at every turn (the same turns, in the same order), and searches less often.

mod support;

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

/// Runs the arrivals one a minute, completing each started job after its duration;
/// returns the log and how many victim searches were made.
fn run(policy: &str, arrivals: &[Arrival], skip: bool) -> (Vec<String>, u64) {
    let mut stream = support::Stream::new(support::scheduler(policy, &[h100("n1"), h100("n2")]));
    stream.s.skip_fruitless_searches(skip);
    let leaves: Vec<String> = stream.s.quotas().queues.iter().filter(|q| q.is_leaf()).map(|q| q.name.clone()).collect();
    let mut log = Vec::new();
    for (i, &(queue, cards, minutes, high, preemptible)) in arrivals.iter().enumerate() {
        let mut spec = support::cards(&format!("job-{i}"), cards);
        spec.queue = Some(leaves[usize::from(queue) % leaves.len()].clone());
        spec.priority = Some(if high { 10.0 } else { 0.0 });
        spec.preemptible = preemptible;
        spec.duration_ms = Some(minutes * 60_000);
        for e in stream.arrive(spec) {
            log.push(render(&stream.s, &e));
        }
        stream.s.advance(60_000).expect("the clock stays within its limit");
    }
    (log, stream.s.victim_searches())
}

fn render(s: &Scheduler, e: &Event) -> String {
    let name = |j: &usize| s.job(*j).name.clone();
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn skipping_fruitless_searches_changes_no_decision(
        policy in 0..POLICIES.len(),
        arrivals in prop::collection::vec(arrival(), 1..80),
    ) {
        let (every, _) = run(POLICIES[policy], &arrivals, false);
        let (skipping, _) = run(POLICIES[policy], &arrivals, true);
        prop_assert_eq!(every, skipping);
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
    assert_eq!(every, skipping);
    assert!(every.iter().any(|l| l.contains("evicted")), "the run evicts: {every:?}");
    assert!(
        skipping_searches * 2 < every_searches,
        "{skipping_searches} searches against {every_searches}: most found no candidate"
    );
}
