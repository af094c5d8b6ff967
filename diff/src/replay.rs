//! Trace replay: both versions simulated on the same cluster, trace and seed, and their
//! decisions compared in the order they were taken — the first that differs, how many
//! jobs started elsewhere, at another time or were evicted a different number of times —
//! with each queue's queueing delay (p50, p95), mean allocation, evictions and lost
//! GPU-hours under each version.

use crate::renames::Renames;
use crate::side::Side;
use gpol_runtime::{Event, Scheduler};
use gpol_sim::cluster_file::ClusterSpec;
use gpol_sim::{Config, Control, Mode, SimError, Workload};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

/// One decision as the replay compares it.
#[derive(Clone, Debug, PartialEq)]
struct Decided {
    at_ms: u64,
    /// `start j17 on n3`, `evict j4 for j17 under by_priority`, …
    what: String,
    job: String,
    queue: String,
    kind: Kind,
    lost_gpu_s: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Start,
    Evict,
    Other,
}

/// A value under each version.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Pair<T> {
    pub old: T,
    pub new: T,
}

/// One queue under each version.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueDelta {
    pub queue: String,
    pub delay_p50_s: Pair<Option<f64>>,
    pub delay_p95_s: Pair<Option<f64>>,
    /// Time-averaged GPUs held.
    pub mean_gpus: Pair<f64>,
    pub evictions: Pair<u64>,
    pub lost_gpu_hours: Pair<f64>,
}

/// The first decision the versions took differently.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Divergence {
    /// Simulated seconds since the start.
    pub at_s: f64,
    /// What each version decided then (`nothing` when it decided nothing more).
    pub old: String,
    pub new: String,
}

/// The replay of one seed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Replay {
    pub seed: u64,
    pub mode: String,
    pub first_divergence: Option<Divergence>,
    /// Jobs both versions started, on other nodes.
    pub placed_differently: u64,
    /// Jobs that started at another time, or under one version only.
    pub ordered_differently: u64,
    /// Jobs evicted a different number of times.
    pub evicted_differently: u64,
    pub queues: Vec<QueueDelta>,
}

/// Simulates both versions on `cluster` and `workload` with `seed`, and compares them.
pub fn replay(
    old: &Side,
    new: &Side,
    renames: &Renames,
    cluster: &ClusterSpec,
    workload: &Workload,
    mode: Mode,
    seed: u64,
) -> Result<Replay, SimError> {
    let config = Config { mode, seed, ..Config::default() };
    let run = |side: &Side, rename: bool| -> Result<(gpol_sim::report::Report, Vec<Decided>), SimError> {
        let log = Mutex::new(Vec::new());
        let hook = |s: &Scheduler, e: &Event| {
            if let Some(d) = decided(s, e, if rename { Some(renames) } else { None })
                && let Ok(mut l) = log.lock()
            {
                l.push(d);
            }
        };
        let cancel = AtomicBool::new(false);
        let progress = |_: f64| {};
        let control = Control { progress: &progress, cancel: &cancel, on_event: Some(&hook) };
        let report = gpol_sim::run(&side.jit, cluster, workload, &config, &control)?;
        Ok((report, log.into_inner().unwrap_or_default()))
    };
    let (old_report, old_log) = run(old, true)?;
    let (new_report, new_log) = run(new, false)?;
    let first_divergence = (0..old_log.len().max(new_log.len())).find_map(|i| {
        let (a, b) = (old_log.get(i), new_log.get(i));
        let same = matches!((a, b), (Some(x), Some(y)) if x.at_ms == y.at_ms && x.what == y.what);
        (!same).then(|| Divergence {
            at_s: a.into_iter().chain(b).map(|d| d.at_ms).min().unwrap_or(0) as f64 / 1000.0,
            old: a.map_or("nothing".into(), |d| d.what.clone()),
            new: b.map_or("nothing".into(), |d| d.what.clone()),
        })
    });
    let starts = |log: &[Decided]| -> BTreeMap<String, (u64, String)> {
        let mut m = BTreeMap::new();
        for d in log.iter().filter(|d| d.kind == Kind::Start) {
            m.entry(d.job.clone()).or_insert((d.at_ms, d.what.clone()));
        }
        m
    };
    let evictions = |log: &[Decided]| -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for d in log.iter().filter(|d| d.kind == Kind::Evict) {
            *m.entry(d.job.clone()).or_default() += 1;
        }
        m
    };
    let (sa, sb) = (starts(&old_log), starts(&new_log));
    let placed_differently =
        sa.iter().filter(|(j, (_, w))| sb.get(*j).is_some_and(|(_, x)| nodes_of(x) != nodes_of(w))).count() as u64;
    let jobs: std::collections::BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
    let ordered_differently =
        jobs.iter().filter(|j| sa.get(**j).map(|s| s.0) != sb.get(**j).map(|s| s.0)).count() as u64;
    let (ea, eb) = (evictions(&old_log), evictions(&new_log));
    let victims: std::collections::BTreeSet<&String> = ea.keys().chain(eb.keys()).collect();
    let evicted_differently = victims.iter().filter(|j| ea.get(**j) != eb.get(**j)).count() as u64;
    let queues = old_report
        .queues
        .iter()
        .filter_map(|qa| {
            let qb = new_report.queues.iter().find(|q| q.name == qa.name)?;
            let per = |log: &[Decided]| {
                let mine = log.iter().filter(|d| d.kind == Kind::Evict && d.queue == qa.name);
                mine.fold((0u64, 0.0), |(n, lost), d| (n + 1, lost + d.lost_gpu_s / 3600.0))
            };
            let ((na, la), (nb, lb)) = (per(&old_log), per(&new_log));
            Some(QueueDelta {
                queue: qa.name.clone(),
                delay_p50_s: Pair { old: qa.delay_p50_s, new: qb.delay_p50_s },
                delay_p95_s: Pair { old: qa.delay_p95_s, new: qb.delay_p95_s },
                mean_gpus: Pair { old: qa.mean_gpus, new: qb.mean_gpus },
                evictions: Pair { old: na, new: nb },
                lost_gpu_hours: Pair { old: la, new: lb },
            })
        })
        .collect();
    Ok(Replay {
        seed,
        mode: old_report.mode.clone(),
        first_divergence,
        placed_differently,
        ordered_differently,
        evicted_differently,
        queues,
    })
}

/// The nodes of a `start j on a, b` decision.
fn nodes_of(what: &str) -> &str {
    what.split_once(" on ").map_or("", |(_, n)| n)
}

/// A decision the scheduler logged, in words both versions share (rules by NEW's names).
fn decided(s: &Scheduler, e: &Event, renames: Option<&Renames>) -> Option<Decided> {
    let program = &s.policy().program;
    let rule = |r| {
        let name = program.rule_name(r);
        renames.and_then(|x| x.old_to_new(&name)).map_or(name.clone(), str::to_string)
    };
    let name = |j: usize| s.jobs().get(j).map_or_else(|| format!("#{j}"), |x| x.ask.name.clone());
    let queue = |j: usize| {
        s.jobs().get(j).and_then(|x| s.quotas().queues.get(x.ask.queue)).map_or(String::new(), |q| q.place.name.clone())
    };
    let node = |n: usize| s.cluster().nodes.get(n).map_or_else(|| format!("#{n}"), |x| x.name.clone());
    let (at_ms, job, what, kind, lost) = match e {
        Event::Placed { job, nodes, at_ms } => {
            let on: Vec<String> = nodes.iter().map(|&n| node(n)).collect();
            (*at_ms, *job, format!("start {} on {}", name(*job), on.join(", ")), Kind::Start, 0.0)
        }
        Event::Evicted { job, by, rule: r, lost_gpu_s, at_ms, .. } => {
            let what = format!("evict {} for {} under {}", name(*job), name(*by), rule(*r));
            (*at_ms, *job, what, Kind::Evict, *lost_gpu_s)
        }
        Event::Shrunk { job, by, rule: r, node: n, lost_gpu_s, at_ms } => {
            let what = format!("shrink {} on {} for {} under {}", name(*job), node(*n), name(*by), rule(*r));
            (*at_ms, *job, what, Kind::Evict, *lost_gpu_s)
        }
        Event::Grown { job, node: n, at_ms } => {
            (*at_ms, *job, format!("grow {} on {}", name(*job), node(*n)), Kind::Other, 0.0)
        }
        Event::Rejected { job, rule: r, at_ms } => {
            (*at_ms, *job, format!("reject {} under {}", name(*job), rule(*r)), Kind::Other, 0.0)
        }
        Event::Reserved { job, nodes, at_ms } => {
            let on: Vec<String> = nodes.iter().map(|&n| node(n)).collect();
            (*at_ms, *job, format!("reserve {} on {}", name(*job), on.join(", ")), Kind::Other, 0.0)
        }
        _ => return None,
    };
    Some(Decided { at_ms, what, job: name(job), queue: queue(job), kind, lost_gpu_s: lost })
}
