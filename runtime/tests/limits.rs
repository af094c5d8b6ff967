//! The runtime, used as a library, refuses what is over the documented limits
//! (docs/limits.md) rather than allocating it or wrapping around, and finds how many
//! replicas of an elastic gang the quota admits by bisection.

mod support;

use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLOCK_MS, MAX_REPLICAS};
use gpol_compiler::spec::{JobSpec, NodeSpec};
use gpol_runtime::State;
use gpol_runtime::{ClockLimit, SubmitError};
use support::{h100, queued};

fn policy(quota: &str) -> String {
    format!("policy limits\n\nqueue team {{ {quota} }}\n")
}

#[test]
fn a_node_over_the_card_limit_is_refused_by_field() {
    let mut s = support::scheduler(&policy(""), &[]);
    let big = NodeSpec { cards: MAX_CARDS_PER_NODE + 1, ..h100("big") };
    let e = s.add_node(&big).expect_err("too many cards");
    assert_eq!(e.field, "cards");
    assert_eq!(e.to_string(), "node `big`, field `cards`: too large, at most 64");
    let most = NodeSpec { cards: MAX_CARDS_PER_NODE, ..h100("most") };
    assert!(s.add_node(&most).is_ok());
}

#[test]
fn a_job_over_the_replica_limit_is_refused_by_field() {
    let mut s = support::scheduler(&policy(""), &[h100("a")]);
    let job = JobSpec { replicas: 4_000_000_000, min_replicas: Some(1), ..support::cards("g", 1) };
    let e = s.submit(job).expect_err("too many replicas");
    assert_eq!(e.field(), "replicas");
    assert!(matches!(&e, SubmitError::TooLarge { job, .. } if job == "g"));
    assert_eq!(e.to_string(), "job `g`: `replicas` is too large, at most 100000");
}

#[test]
fn the_clock_stops_at_its_limit_instead_of_wrapping() {
    let mut s = support::scheduler(&policy(""), &[h100("a")]);
    s.advance(MAX_CLOCK_MS - 1).expect("within the limit");
    assert_eq!(s.advance(2), Err(ClockLimit { now_ms: MAX_CLOCK_MS - 1, by_ms: 2 }));
    assert_eq!(s.now_ms(), MAX_CLOCK_MS - 1, "a refused step leaves the clock where it was");
    assert_eq!(s.advance(u64::MAX), Err(ClockLimit { now_ms: MAX_CLOCK_MS - 1, by_ms: u64::MAX }));
    s.advance(1).expect("exactly at the limit");
    assert_eq!(s.now_ms(), MAX_CLOCK_MS);
}

/// The largest elastic gang at the limit, under quotas of every size from 0 to 20 cards:
/// it starts with exactly as many replicas as the quota admits (bisection finds the same
/// count as trying each one), or waits when that is below its minimum.
#[test]
fn an_elastic_gang_takes_exactly_what_the_quota_admits() {
    for limit in 0..=20u32 {
        for min in [1, 3, 8] {
            let nodes: Vec<NodeSpec> = (0..3).map(|i| h100(&format!("n{i}"))).collect();
            let mut s = support::scheduler(&policy(&format!("limit {limit} gpu")), &nodes);
            let job = JobSpec { replicas: MAX_REPLICAS, min_replicas: Some(min), ..support::cards("g", 1) };
            let g = s.submit(queued("team", job)).expect("within the limits");
            s.cycle();
            let j = &s.jobs()[g];
            if limit >= min {
                assert_eq!(j.life.state, State::Running, "limit {limit}, min {min}");
                assert_eq!(j.holding.slots.len(), limit as usize, "limit {limit}, min {min}");
            } else {
                assert_ne!(j.life.state, State::Running, "limit {limit}, min {min}");
            }
        }
    }
}
