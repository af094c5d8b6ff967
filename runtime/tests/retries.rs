//! A job that did not fit is not tried again until capacity frees; jobs the policy cannot
//! tell apart are tried once for all of them; and once no node can take a job's shape,
//! its other waiting jobs of that shape are not tried either.

mod support;

use gpol_compiler::spec::{History, JobSpec};
use gpol_runtime::Scheduler;
use gpol_runtime::starts;
use gpol_runtime::{Reason, State};
use support::{h100 as node, queued};

/// A preemptible job of `cards` whole cards and one core.
fn job(name: &str, cards: u32) -> JobSpec {
    JobSpec { preemptible: true, cpu_milli: 1000, ..support::cards(name, cards) }
}

fn scheduler() -> Scheduler {
    support::scheduler("policy retries\n\nqueue team {}\n", &[node("a")])
}

#[test]
fn jobs_the_policy_cannot_tell_apart_are_tried_once_per_change() {
    let mut s = scheduler();
    let big = s.submit(job("big", 5)).unwrap();
    let y = s.submit(job("y", 1)).unwrap();
    let z = s.submit(job("z", 1)).unwrap();
    for j in [big, y, z] {
        s.start_on(j, &[0], History::default()).unwrap();
    }
    // One card free; fifty jobs of two cards each, alike but for their names.
    let waiting: Vec<usize> = (0..50).map(|i| s.submit(job(&format!("w{i}"), 2)).unwrap()).collect();
    s.cycle();
    assert_eq!(s.attempts(), 1, "one attempt answers for all fifty");
    assert!(waiting.iter().all(|&j| s.state(j) == State::Pending(Some(Reason::Capacity))));
    s.cycle();
    assert_eq!(s.attempts(), 1, "nothing freed, nothing retried");
    // A newcomer like them learns their reason without an attempt.
    let late = s.submit(job("late", 2)).unwrap();
    s.cycle();
    assert_eq!(s.attempts(), 1);
    assert_eq!(s.state(late), State::Pending(Some(Reason::Capacity)));

    // Two cards free: the first waiting job starts, the next finds the node full again,
    // and the other 48 are not tried.
    s.complete(y);
    assert_eq!(starts(&s.cycle()), 1);
    assert_eq!(s.attempts(), 3);
    assert_eq!(s.state(waiting[0]), State::Running);
    assert!(waiting[1..].iter().all(|&j| s.state(j) == State::Pending(Some(Reason::Capacity))));

    // One card frees: not enough for them, found out with one attempt.
    s.complete(z);
    assert_eq!(starts(&s.cycle()), 0);
    assert_eq!(s.attempts(), 4);
}

#[test]
fn jobs_that_differ_in_what_rules_read_are_tried_apart() {
    // The filter reads `job.bursty`: bursty and steady jobs are told apart.
    let text = "policy apart\n\nqueue team {}\n\nfilter steady_only { not job.bursty or node.free_cards >= 4 gpu }\n";
    let mut s = support::scheduler(text, &[node("a")]);
    let big = s.submit(job("big", 6)).unwrap();
    s.start_on(big, &[0], History::default()).unwrap();
    // Two cards free: the bursty ones are turned away by the filter, the steady ones fit.
    let bursty: Vec<usize> =
        (0..5).map(|i| s.submit(JobSpec { bursty: true, ..job(&format!("b{i}"), 1) }).unwrap()).collect();
    let steady: Vec<usize> = (0..5).map(|i| s.submit(job(&format!("s{i}"), 1)).unwrap()).collect();
    assert_eq!(starts(&s.cycle()), 2);
    assert!(bursty.iter().all(|&j| matches!(s.state(j), State::Pending(Some(Reason::Rule(_))))));
    assert_eq!(s.state(steady[0]), State::Running);
    assert_eq!(s.state(steady[1]), State::Running);
    assert!(steady[2..].iter().all(|&j| s.state(j) == State::Pending(Some(Reason::Capacity))));
    // One attempt for the bursty class, three for the steady one (two starts, one miss).
    assert_eq!(s.attempts(), 4);
}

#[test]
fn a_different_shape_is_still_tried() {
    let mut s = scheduler();
    let big = s.submit(job("big", 7)).unwrap();
    s.start_on(big, &[0], History::default()).unwrap();
    let two = s.submit(job("two", 2)).unwrap();
    let one = s.submit(job("one", 1)).unwrap();
    assert_eq!(starts(&s.cycle()), 1);
    assert_eq!(s.state(two), State::Pending(Some(Reason::Capacity)));
    assert_eq!(s.state(one), State::Running);
}

/// Two nodes of eight cards; queue `a` guarantees 8, `b` and `c` 4 each; reclaim reads
/// only the victim.
fn cohort() -> Scheduler {
    let text = "policy cohort\n\nqueue org {\n  queue a { guarantee 8 gpu }\n  queue b { guarantee 4 gpu }\n  \
                queue c { guarantee 4 gpu }\n}\n\nreclaim take_back { when victim.preemptible }\n";
    support::scheduler(text, &[node("n1"), node("n2")])
}

#[test]
fn a_claimant_is_retried_only_after_starts_that_could_give_it_victims() {
    let mut s = cohort();
    let held = s.submit(queued("b", job("held", 4))).unwrap();
    s.start_on(held, &[0], History::default()).unwrap();
    let filler = s.submit(queued("c", job("filler", 2))).unwrap();
    s.start_on(filler, &[1], History::default()).unwrap();
    // `a` asks for 8 cards, within its guarantee, with at most 6 free on a node, and no
    // other queue borrows: no victims, and none until some other queue borrows.
    let claimant = s.submit(queued("a", job("claimant", 8))).unwrap();
    s.cycle();
    let before = s.attempts();
    assert!(s.job(claimant).is_pending(), "{:?}", s.state(claimant));
    // A start in `c`, within its guarantee: no new victim, no retry.
    s.submit(queued("c", job("small", 2))).unwrap();
    s.cycle();
    assert_eq!(s.attempts(), before + 1, "only the new job is tried");
    s.cycle();
    assert_eq!(s.attempts(), before + 1);
    // A start that makes `c` borrow: its preemptible jobs are now victims; retried.
    s.submit(queued("c", job("more", 1))).unwrap();
    s.cycle();
    s.cycle();
    assert!(s.attempts() >= before + 3, "the claimant is tried again: {} vs {before}", s.attempts());
}

#[test]
fn a_claimant_whose_queue_would_end_borrowing_waits_for_its_queue_to_hold_less() {
    // Only reclaims: `a`'s claimant takes from borrowers only if `a` then ends within
    // its guarantee of 4.
    let text = "policy watched\n\nqueue org {\n  queue a { guarantee 4 gpu }\n  queue b { guarantee 4 gpu }\n  \
                queue c { guarantee 4 gpu }\n}\n\nreclaim take_back { when victim.preemptible }\n";
    let mut s = support::scheduler(text, &[node("n1"), node("n2")]);
    let run = |s: &mut Scheduler, queue: &str, name: &str, cards: u32, node: usize| {
        let j = s.submit(queued(queue, job(name, cards))).unwrap();
        s.start_on(j, &[node], History::default()).unwrap();
        j
    };
    let mine = run(&mut s, "a", "mine", 2, 0);
    run(&mut s, "b", "theirs", 4, 0);
    run(&mut s, "c", "wide", 8, 1);
    // Two cards free; `a` would end at 6, above its guarantee: no candidate anywhere.
    let claimant = s.submit(queued("a", job("claimant", 4))).unwrap();
    s.cycle();
    let searches = s.victim_searches();
    assert_eq!(searches, 1);
    assert!(s.job(claimant).is_pending(), "{:?}", s.state(claimant));
    // `a` grows, `b` starts to borrow, `a` falls but not far enough: no search.
    let small = s.submit(queued("a", job("small", 1))).unwrap();
    s.cycle();
    assert_eq!(s.state(small), State::Running);
    let extra = s.submit(queued("b", job("extra", 1))).unwrap();
    s.cycle();
    assert_eq!(s.state(extra), State::Running, "`b` now borrows");
    s.complete(mine);
    s.cycle();
    assert_eq!(s.victim_searches(), searches, "`a` holds 1: with 4 more it would still borrow");
    assert!(s.job(claimant).is_pending());
    // `a` holds nothing: the claimant would end at its guarantee; searched, and it
    // reclaims from a borrower.
    s.complete(small);
    s.cycle();
    assert_eq!(s.state(claimant), State::Running);
    assert!(s.job(extra).is_pending(), "`extra` was taken back");
    // The claimant's search, then the evicted job's own (`b` would end borrowing: none).
    assert_eq!(s.victim_searches(), searches + 2);
}

/// Queue `a` may hold 2 cards, `b` anything; no victim rules.
fn capped() -> Scheduler {
    support::scheduler("policy capped\n\nqueue org {\n  queue a { limit 2 gpu }\n  queue b {}\n}\n", &[node("n1")])
}

#[test]
fn a_job_the_quota_holds_back_waits_for_its_cap_not_for_capacity() {
    let mut s = capped();
    let first = s.submit(queued("a", job("first", 2))).unwrap();
    let other = s.submit(queued("b", job("other", 2))).unwrap();
    let held = s.submit(queued("a", job("held", 1))).unwrap();
    s.cycle();
    assert_eq!(s.state(first), State::Running);
    assert!(matches!(&s.state(held), State::Pending(Some(Reason::Quota(_)))), "{:?}", s.state(held));
    let before = s.attempts();
    // Capacity frees in `b`: `a`'s cap is as full as before, so `held` is not tried.
    s.complete(other);
    s.cycle();
    assert_eq!(s.attempts(), before, "freed capacity elsewhere does not retry a capped job");
    // `a`'s own job ends: its cap gives, and `held` starts.
    s.complete(first);
    s.cycle();
    assert_eq!(s.attempts(), before + 1);
    assert_eq!(s.state(held), State::Running);
}

#[test]
fn a_filter_that_time_can_satisfy_is_asked_again_as_time_passes() {
    let text =
        "policy patient\n\nqueue team {}\n\nfilter big_jobs_wait { job.whole_cards <= 2 gpu or job.waiting >= 20m }\n";
    let mut s = support::scheduler(text, &[node("a")]);
    let big = s.submit(job("big", 4)).unwrap();
    s.cycle();
    assert!(matches!(s.state(big), State::Pending(Some(Reason::Rule(_)))), "{:?}", s.state(big));
    // Nothing frees; only the clock moves.
    s.advance(10 * 60_000).unwrap();
    s.cycle();
    assert!(s.job(big).is_pending());
    s.advance(10 * 60_000).unwrap();
    assert_eq!(starts(&s.cycle()), 1, "twenty minutes on, the filter lets it through");
}

#[test]
fn a_job_that_may_reserve_is_asked_again_when_it_comes_due_not_at_every_tick() {
    let text = "policy hold\n\nqueue team {}\n\nsettings { reserve_after 30m }\n";
    let mut s = support::scheduler(text, &[node("a"), node("b")]);
    let filler = s.submit(job("filler", 5)).unwrap();
    s.start_on(filler, &[0], History::default()).unwrap();
    let other = s.submit(job("other", 5)).unwrap();
    s.start_on(other, &[1], History::default()).unwrap();
    let wide = s.submit(job("wide", 8)).unwrap();
    s.cycle();
    let tried = s.attempts();
    // Every minute for 29 minutes, nothing frees: no attempt.
    for _ in 0..29 {
        s.advance(60_000).unwrap();
        s.cycle();
    }
    assert_eq!(s.attempts(), tried, "a job not yet due is not asked as the clock moves");
    assert!(s.reservations().is_empty());
    s.advance(60_000).unwrap();
    s.cycle();
    assert_eq!(s.attempts(), tried + 1, "due: asked once, and it reserves");
    assert_eq!(s.reservations().get(&wide).map(Vec::len), Some(1));
    s.advance(60_000).unwrap();
    s.cycle();
    assert_eq!(s.attempts(), tried + 1, "holding its reservation, it waits for capacity");
    s.complete(other);
    assert_eq!(starts(&s.cycle()), 1);
    assert_eq!(s.state(wide), State::Running);
}

#[test]
fn a_job_started_in_the_cycle_a_claimant_failed_in_is_its_victim_at_the_next() {
    let text = "policy urgent\n\nqueue team {}\n\njob_order { job.submitted asc }\n\n\
                preempt urgent { when claimant.priority > victim.priority }\n";
    let mut s = support::scheduler(text, &[node("a")]);
    let low = s.submit(job("low", 8)).unwrap();
    let high = s.submit(JobSpec { priority: Some(5.0), ..job("high", 8) }).unwrap();
    // `low` starts first; in the same cycle it is no victim, so `high` waits.
    assert_eq!(starts(&s.cycle()), 1);
    assert_eq!(s.state(low), State::Running);
    assert!(s.job(high).is_pending());
    // Nothing happens between the cycles, yet at the next `low` has become a victim.
    assert_eq!(starts(&s.cycle()), 1);
    assert_eq!(s.state(high), State::Running);
    assert!(s.job(low).is_pending());
}

#[test]
fn a_claimant_with_no_candidates_is_not_searched_for_again_until_one_could_appear() {
    // `b` borrows nothing, so `a`'s claimant has no victim; `a` is held by its limit too.
    let text = "policy watched\n\nqueue org {\n  queue a { guarantee 4 gpu\n limit 4 gpu }\n  \
                queue b { guarantee 4 gpu }\n}\n\nreclaim take_back { when victim.preemptible }\n";
    let mut s = support::scheduler(text, &[node("n1"), node("n2")]);
    let mine = s.submit(queued("a", job("mine", 2))).unwrap();
    s.start_on(mine, &[0], History::default()).unwrap();
    let theirs = s.submit(queued("b", job("theirs", 4))).unwrap();
    s.start_on(theirs, &[1], History::default()).unwrap();
    let busy = s.submit(queued("a", job("busy", 2))).unwrap();
    s.start_on(busy, &[0], History::default()).unwrap();
    let claimant = s.submit(queued("a", job("claimant", 2))).unwrap();
    s.cycle();
    let (attempts, searches) = (s.attempts(), s.victim_searches());
    assert_eq!(searches, 1);
    assert!(matches!(s.state(claimant), State::Pending(Some(Reason::Quota(_)))), "{:?}", s.state(claimant));
    // A job of `b` finishes: capacity frees, but neither its cap nor its victims change:
    // no turn, no search.
    s.complete(theirs);
    s.cycle();
    assert_eq!((s.attempts(), s.victim_searches()), (attempts, searches));
    // `b` starts to borrow: its jobs may be victims now, yet `a` would end above its
    // guarantee with the claimant; `a` falls to 2: searched again.
    let wide = s.submit(queued("b", job("wide", 6))).unwrap();
    s.cycle();
    assert_eq!(s.state(wide), State::Running);
    assert_eq!(s.victim_searches(), searches, "`a` would still end above its guarantee");
    s.complete(mine);
    s.cycle();
    assert_eq!(s.state(claimant), State::Running, "its own job ended: the cap gives");
}
