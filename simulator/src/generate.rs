//! Synthetic workloads (`gpolc gen-trace`), from distributions documented in
//! docs/simulator.md. Each queue follows a profile — what its jobs ask for and how long
//! they run — and when it arrives: its daily and weekly rhythm (serving by day, research
//! in office hours, training and batch around the clock), with some queues arriving in
//! bursts. Time 0 is Monday 00:00, where `gpolc sim` starts the clock. The span of the
//! trace is chosen so that the jobs offer `load` times the cluster's GPUs.

use crate::trace::TraceJob;
use gpol_compiler::spec::Request;
use rand::{RngExt, SeedableRng};
use rand_distr::{Beta, Distribution, LogNormal};
use rand_pcg::Pcg64Mcg;

/// What kind of work a queue holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Large multi-node gangs, long runs, checkpointed; a third preemptible.
    Training,
    /// Small and fractional replicas, latency-critical, short to medium runs.
    Inference,
    /// Mostly one to eight GPUs, preemptible, in bursts.
    Research,
    /// Fractional GPUs, bursty use, hours long.
    Notebook,
    /// The general mix of published GPU-cluster traces: mostly one GPU, a heavy tail of
    /// multi-node jobs.
    Batch,
}

impl Profile {
    pub const ALL: [(&'static str, Profile); 5] = [
        ("training", Profile::Training),
        ("inference", Profile::Inference),
        ("research", Profile::Research),
        ("notebook", Profile::Notebook),
        ("batch", Profile::Batch),
    ];

    pub fn parse(name: &str) -> Option<Profile> {
        Profile::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }

    /// GPUs per job, with weights: (gpus, share). Up to one node's cards a job is one
    /// replica; beyond that, replicas of a whole node each.
    fn sizes(self) -> &'static [(f64, f64)] {
        match self {
            Profile::Training => &[(8.0, 0.35), (16.0, 0.25), (32.0, 0.2), (64.0, 0.12), (128.0, 0.08)],
            Profile::Inference => &[(0.25, 0.3), (0.5, 0.3), (1.0, 0.3), (2.0, 0.1)],
            Profile::Research => &[(1.0, 0.45), (2.0, 0.2), (4.0, 0.2), (8.0, 0.12), (16.0, 0.03)],
            Profile::Notebook => &[(0.25, 0.5), (0.5, 0.35), (1.0, 0.15)],
            Profile::Batch => {
                &[(0.5, 0.1), (1.0, 0.5), (2.0, 0.1), (4.0, 0.1), (8.0, 0.12), (16.0, 0.04), (32.0, 0.03), (64.0, 0.01)]
            }
        }
    }

    /// Median run time in seconds and the log-normal's sigma.
    fn duration(self) -> (f64, f64) {
        match self {
            Profile::Training => (4.0 * 3600.0, 1.0),
            Profile::Inference => (2.0 * 3600.0, 1.2),
            Profile::Research => (40.0 * 60.0, 1.4),
            Profile::Notebook => (2.0 * 3600.0, 0.8),
            Profile::Batch => (30.0 * 60.0, 1.5),
        }
    }

    /// Share of the queue's jobs that arrive in bursts.
    fn bursty(self) -> f64 {
        match self {
            Profile::Research => 0.3,
            Profile::Notebook | Profile::Batch => 0.1,
            _ => 0.0,
        }
    }

    fn preemptible(self) -> f64 {
        match self {
            Profile::Training => 0.3,
            Profile::Research | Profile::Batch => 0.8,
            Profile::Notebook => 0.2,
            Profile::Inference => 0.0,
        }
    }

    /// Mean utilization of the allocation (Beta distributed).
    /// How busy arrivals are at `t` seconds after Monday 00:00, relative to the busiest
    /// moment (0–1): serving follows its users' day (ten times the night's rate at 14:00,
    /// half that at weekends), research and notebooks office hours on weekdays, training
    /// and batch a gentle cycle around the clock (three times the night's rate
    /// mid-afternoon).
    fn rhythm(self, t: f64) -> f64 {
        let hour = (t % DAY) / HOUR;
        let weekend = (t / DAY).floor() as u64 % 7 >= 5;
        // A smooth bump over [start, end) hours, 1 at its middle.
        let bump = |start: f64, end: f64| {
            if (start..end).contains(&hour) {
                (std::f64::consts::PI * (hour - start) / (end - start)).sin()
            } else {
                0.0
            }
        };
        match self {
            Profile::Inference => 0.1 + 0.9 * bump(7.0, 21.0) * if weekend { 0.5 } else { 1.0 },
            Profile::Research | Profile::Notebook => 0.15 + if weekend { 0.0 } else { 0.85 * bump(8.0, 19.0) },
            Profile::Training | Profile::Batch => {
                (1.0 + 0.5 * (2.0 * std::f64::consts::PI * (t / DAY - 0.375)).sin()) / 1.5
            }
        }
    }

    fn utilization(self) -> (f64, f64) {
        match self {
            Profile::Training => (8.0, 2.0),
            Profile::Inference => (2.0, 3.0),
            Profile::Research => (4.0, 3.0),
            Profile::Notebook => (1.0, 6.0),
            Profile::Batch => (5.0, 2.0),
        }
    }
}

/// One queue of the generated workload.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueMix {
    /// `None`: the jobs name no queue (for policies with one leaf queue).
    pub name: Option<String>,
    pub profile: Profile,
    /// Relative share of the jobs.
    pub share: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GenSpec {
    pub jobs: usize,
    pub seed: u64,
    /// GPUs of the cluster the trace is meant for, and the share of them the jobs offer.
    pub gpus: u64,
    pub load: f64,
    /// Cards per node: larger jobs are split into replicas of this many. No job asks for
    /// more than half the cluster's GPUs.
    pub node_gpus: u32,
    pub queues: Vec<QueueMix>,
}

const HOUR: f64 = 3600.0;
const DAY: f64 = 24.0 * HOUR;

/// Generates a trace; the same spec always gives the same trace.
pub fn generate(spec: &GenSpec) -> Vec<TraceJob> {
    let mut rng = Pcg64Mcg::seed_from_u64(spec.seed);
    let queues: Vec<QueueMix> = if spec.queues.is_empty() {
        vec![QueueMix { name: None, profile: Profile::Batch, share: 1.0 }]
    } else {
        spec.queues.clone()
    };
    let total_share: f64 = queues.iter().map(|q| q.share.max(0.0)).sum::<f64>().max(f64::MIN_POSITIVE);
    let node_gpus = spec.node_gpus.max(1);
    // First what each job is; then, from the work they add up to, when they arrive.
    let mut jobs: Vec<(TraceJob, usize, f64)> = Vec::with_capacity(spec.jobs);
    let mut work = 0.0;
    for i in 0..spec.jobs {
        let mut pick = rng.random_range(0.0..total_share);
        let qi = queues.iter().position(|q| {
            pick -= q.share.max(0.0);
            pick < 0.0
        });
        let qi = qi.unwrap_or(queues.len() - 1);
        let q = &queues[qi];
        let mut job = TraceJob::new(format!("job-{:0width$}", i + 1, width = digits(spec.jobs)), 0);
        job.job.queue = q.name.clone();
        // Users of a queue are few and unequal: user k submits in proportion to 1/k.
        let user = choose(&mut rng, &USERS);
        job.job.user = Some(format!("{}-user{}", q.name.as_deref().unwrap_or("team"), user as u32));
        // No job asks for more than half the cluster.
        let gpus = choose(&mut rng, q.profile.sizes()).min((spec.gpus as f64 / 2.0).max(1.0));
        (job.job.request, job.job.replicas) = if gpus < 1.0 {
            (Request::Fraction((gpus * 1000.0).round() as u32), 1)
        } else if gpus <= f64::from(node_gpus) {
            (Request::Whole(gpus as u32), 1)
        } else {
            (Request::Whole(node_gpus), (gpus / f64::from(node_gpus)).ceil() as u32)
        };
        let (median, sigma) = q.profile.duration();
        // Bigger jobs run longer: the median grows with the cube root of the size.
        let median = median * gpus.max(1.0).cbrt();
        let d = LogNormal::new(median.ln(), sigma).map_or(median, |l| l.sample(&mut rng));
        let seconds = d.clamp(60.0, 14.0 * DAY).round();
        job.job.duration_ms = Some(seconds as u64 * 1000);
        let cards = job.job.request.milli() as f64 / 1000.0 * f64::from(job.job.replicas);
        job.job.cpu_milli = (cards.max(0.25) * 8.0 * 1000.0 / f64::from(job.job.replicas)).round() as u64;
        job.job.mem = (cards.max(0.25) * 64.0 / f64::from(job.job.replicas)).round() as u64 * (1 << 30);
        job.job.preemptible = rng.random_bool(q.profile.preemptible());
        job.job.latency_critical = q.profile == Profile::Inference;
        job.job.bursty = q.profile == Profile::Notebook;
        if seconds > HOUR && q.profile != Profile::Inference && rng.random_bool(0.7) {
            job.job.checkpoint_every_ms = Some(30 * 60 * 1000);
        }
        let (a, b) = q.profile.utilization();
        job.job.utilization = Beta::new(a, b).map_or(0.7, |beta| beta.sample(&mut rng));
        job.job.utilization = (job.job.utilization * 100.0).round() / 100.0;
        work += cards * seconds;
        jobs.push((job, qi, rng.random_range(0.0..1.0)));
    }
    let span = (work / (spec.gpus.max(1) as f64 * spec.load.max(0.01))).max(HOUR);
    // Arrivals: each queue's rhythm, drawn by thinning; a bursty share of each queue
    // arrives in bursts of 5–50 jobs within ten minutes of the burst's start.
    let arrival = |rng: &mut Pcg64Mcg, profile: Profile| loop {
        let t = rng.random_range(0.0..span);
        if rng.random_range(0.0..1.0) < profile.rhythm(t) {
            break t;
        }
    };
    let mut burst: Vec<Option<(f64, u32)>> = vec![None; queues.len()];
    for (job, qi, coin) in &mut jobs {
        let t = if *coin < queues[*qi].profile.bursty() {
            let b = match burst[*qi] {
                Some((start, left)) if left > 0 => (start, left - 1),
                _ => (arrival(&mut rng, queues[*qi].profile), rng.random_range(5..=50)),
            };
            burst[*qi] = Some(b);
            b.0 + rng.random_range(0.0..600.0)
        } else {
            arrival(&mut rng, queues[*qi].profile)
        };
        job.arrival_ms = (t.min(span) * 1000.0).round() as u64;
    }
    let mut out: Vec<TraceJob> = jobs.into_iter().map(|(j, _, _)| j).collect();
    out.sort_by_key(|j| j.arrival_ms);
    out
}

/// Ten users per queue, user k weighted 1/k.
const USERS: [(f64, f64); 10] = [
    (1.0, 1.0),
    (2.0, 0.5),
    (3.0, 1.0 / 3.0),
    (4.0, 0.25),
    (5.0, 0.2),
    (6.0, 1.0 / 6.0),
    (7.0, 1.0 / 7.0),
    (8.0, 0.125),
    (9.0, 1.0 / 9.0),
    (10.0, 0.1),
];

fn choose(rng: &mut Pcg64Mcg, weighted: &[(f64, f64)]) -> f64 {
    let total: f64 = weighted.iter().map(|(_, w)| w).sum();
    let mut pick = rng.random_range(0.0..total);
    for (v, w) in weighted {
        pick -= w;
        if pick < 0.0 {
            return *v;
        }
    }
    weighted.last().map_or(1.0, |(v, _)| *v)
}

fn digits(n: usize) -> usize {
    n.max(1).to_string().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64) -> GenSpec {
        GenSpec {
            jobs: 2000,
            seed,
            gpus: 128,
            load: 0.8,
            node_gpus: 8,
            queues: vec![
                QueueMix { name: Some("training".into()), profile: Profile::Training, share: 1.0 },
                QueueMix { name: Some("research".into()), profile: Profile::Research, share: 3.0 },
            ],
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        assert_eq!(generate(&spec(7)), generate(&spec(7)));
        assert_ne!(generate(&spec(7)), generate(&spec(8)));
    }

    #[test]
    fn generated_jobs_follow_the_spec() {
        let jobs = generate(&spec(3));
        assert_eq!(jobs.len(), 2000);
        assert!(jobs.windows(2).all(|w| w[0].arrival_ms <= w[1].arrival_ms));
        let training = jobs.iter().filter(|j| j.job.queue.as_deref() == Some("training")).count();
        // One job in four is training's (2000 draws: well within five standard deviations).
        assert!((400..600).contains(&training), "{training}");
        for j in &jobs {
            assert!(
                matches!(j.job.request, Request::Whole(k) if k <= 8) || matches!(j.job.request, Request::Fraction(_))
            );
            let d = j.job.duration_ms.expect("every generated job ends");
            assert!((60_000..=14 * 86_400_000).contains(&d));
            assert!((0.0..=1.0).contains(&j.job.utilization));
        }
        // The offered load matches the target: GPU-time over capacity × span.
        let work: f64 = jobs.iter().map(|j| j.milli() as f64 / 1000.0 * j.job.duration_ms.unwrap_or(0) as f64).sum();
        let span = jobs.last().map_or(0, |j| j.arrival_ms) as f64;
        let load = work / (128.0 * span);
        assert!((0.7..0.95).contains(&load), "offered load {load}");
    }

    #[test]
    fn serving_arrives_by_day_and_research_in_office_hours() {
        let spec = GenSpec {
            jobs: 20_000,
            queues: vec![
                QueueMix { name: Some("inference".into()), profile: Profile::Inference, share: 1.0 },
                QueueMix { name: Some("research".into()), profile: Profile::Research, share: 1.0 },
                QueueMix { name: Some("batch".into()), profile: Profile::Batch, share: 1.0 },
            ],
            ..spec(5)
        };
        let jobs = generate(&spec);
        // Weekday arrivals of each queue 10:00–18:00 and 22:00–06:00 (eight hours each).
        let count = |queue: &str, from: f64, to: f64| {
            let t = |j: &TraceJob| j.arrival_ms as f64 / 1000.0;
            let weekday = |j: &TraceJob| (t(j) / DAY).floor() as u64 % 7 < 5;
            let at = |j: &TraceJob| {
                let h = (t(j) % DAY) / HOUR;
                if from < to { (from..to).contains(&h) } else { h >= from || h < to }
            };
            jobs.iter().filter(|j| j.job.queue.as_deref() == Some(queue) && weekday(j) && at(j)).count() as f64
        };
        let ratio = |q: &str| count(q, 10.0, 18.0) / count(q, 22.0, 6.0).max(1.0);
        // Expected: serving ≈ 7×, research ≈ 5.7×, batch ≈ 2× (the rhythms' means).
        assert!(ratio("inference") > 5.0, "serving day/night {}", ratio("inference"));
        assert!(ratio("research") > 4.0, "research day/night {}", ratio("research"));
        assert!((1.5..3.0).contains(&ratio("batch")), "batch day/night {}", ratio("batch"));
    }
}
