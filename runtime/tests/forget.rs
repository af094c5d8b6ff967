//! A driver that forgets ended jobs holds only the jobs in flight, and the scheduler
//! decides exactly as it does when it keeps every job: ids are never reused, and the
//! names, users and label values of forgotten jobs are given back.

mod support;

use gpol_compiler::spec::JobSpec;
use gpol_runtime::State;
use gpol_runtime::starts;
use gpol_runtime::{Event, Scheduler};
use proptest::prelude::*;
use support::h100;

/// Reads job names, users and labels, so that reused symbols would show.
const POLICY: &str = r#"policy forget

use std.pack

queue team {
  queue a {}
  queue b {}
}

filter tiers_apart { not has(job.labels["tier"]) or job.labels["tier"] != "slow" or node.free_cards >= 2 gpu }

score luck { std.pack.spread(job, node) + hash01(job.id, node.name) }

score same_user { if job.user == "u1" then 1 else 0 }
"#;

/// One arrival: its queue, cards, duration, user and label value, each a small choice.
type Arrival = (bool, u32, u64, u8, u8);

/// Runs the arrivals one a minute, completing each started job after its duration;
/// returns the log, rendered with names, and the most jobs and symbols held at once.
fn run(arrivals: &[Arrival], forget: bool) -> (Vec<String>, usize, usize) {
    let mut stream = support::Stream::new(support::scheduler(POLICY, &[h100("n1"), h100("n2")]));
    let mut log = Vec::new();
    let (mut most_jobs, mut most_syms) = (0, 0);
    for (i, &(in_b, cards, minutes, user, tier)) in arrivals.iter().enumerate() {
        let mut spec = support::cards(&format!("job-{i}"), cards);
        spec.queue = Some(if in_b { "b" } else { "a" }.into());
        spec.user = Some(format!("user-{user}-{i}"));
        spec.labels = vec![("tier".into(), ["slow", "fast", &format!("t{i}")][usize::from(tier % 3)].to_string())];
        spec.duration_ms = Some(minutes * 60_000);
        for e in stream.arrive(spec) {
            log.push(render(&stream.s, &e));
            if forget {
                forget_ended(&mut stream.s, &e);
            }
        }
        let s = &mut stream.s;
        most_jobs = most_jobs.max(s.jobs().live());
        most_syms = most_syms.max(s.symbols().len());
        s.advance(60_000).expect("the clock stays within its limit");
    }
    (log, most_jobs, most_syms)
}

fn render(s: &Scheduler, e: &Event) -> String {
    match e {
        Event::Placed { job, nodes, .. } => format!("{} on {nodes:?}", s.job(*job).ask.name),
        Event::Finished { job, .. } => format!("{} finished", s.job(*job).ask.name),
        other => format!("{other:?}"),
    }
}

fn forget_ended(s: &mut Scheduler, e: &Event) {
    if let Event::Finished { job, .. } | Event::Rejected { job, .. } = e {
        let name = s.job(*job).ask.name.clone();
        let record = s.forget(*job).expect("an ended job can be forgotten");
        assert_eq!((record.ask.name, record.life.state), (name, State::Finished));
        assert!(s.jobs().get(*job).is_none());
    }
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (any::<bool>(), 1..=8u32, 1..=30u64, 0..4u8, 0..3u8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn forgetting_ended_jobs_changes_no_decision(arrivals in prop::collection::vec(arrival(), 1..120)) {
        let (kept, all_jobs, _) = run(&arrivals, false);
        let (forgot, live_jobs, _) = run(&arrivals, true);
        prop_assert_eq!(kept, forgot);
        prop_assert!(live_jobs <= all_jobs);
    }
}

#[test]
fn a_long_stream_holds_only_the_jobs_in_flight() {
    // Two 8-card nodes; one-card jobs of up to 20 minutes, one a minute: at most 16 run
    // and nothing waits long, so what is held stays small however long the stream.
    let arrivals: Vec<Arrival> =
        (0..3000u64).map(|i| (i % 2 == 0, 1, 1 + i % 20, (i % 4) as u8, (i % 3) as u8)).collect();
    let (log, most_jobs, most_syms) = run(&arrivals, true);
    let finished = log.iter().filter(|l| l.ends_with("finished")).count();
    assert!(finished >= 2980, "only {finished} finished");
    assert!(most_jobs <= 32, "held {most_jobs} jobs at once");
    assert!(most_syms <= 200, "held {most_syms} strings at once");
    let (_, kept_jobs, kept_syms) = run(&arrivals, false);
    assert_eq!(kept_jobs, 3000);
    assert!(kept_syms > 7000, "each job adds a name and a user, a third a label value: {kept_syms}");
}

#[test]
fn only_ended_jobs_are_forgotten() {
    let mut s = support::scheduler("policy f\n\nqueue team {}\n", &[h100("n1")]);
    let running = s.submit(JobSpec { duration_ms: Some(1), ..support::cards("r", 8) }).expect("valid");
    let waiting = s.submit(support::cards("w", 8)).expect("valid");
    s.cycle();
    assert!(s.forget(running).is_none() && s.forget(waiting).is_none());
    s.complete(running);
    assert_eq!(s.forget(running).map(|j| j.ask.name), Some("r".to_string()));
    assert_eq!(starts(&s.cycle()), 1, "the waiting job starts on the freed node");
    assert_eq!(s.jobs().len(), 2, "ids are never reused");
}
