//! What a simulation reports: the numbers (`--json` prints this whole structure) and the
//! series the charts are drawn from. Every field is deterministic for a given policy,
//! cluster, trace, mode and seed: no wall-clock time, no hash-map order.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// Version of this structure, for tools that read it.
    pub format: u32,
    pub policy: String,
    pub cluster: String,
    pub trace: String,
    pub mode: String,
    pub seed: u64,
    pub gpus: f64,
    pub nodes: usize,
    pub jobs: JobCounts,
    /// Simulated time from the first arrival to the last event, seconds.
    pub makespan_s: f64,
    pub gpu_hours: GpuHours,
    /// The same GPU-hours per GPU model (as the nodes name it).
    pub gpu_hours_by_model: BTreeMap<String, GpuHours>,
    /// What those GPU-hours cost at the cluster's prices; `None` when it has none.
    pub cost: Option<Cost>,
    /// Time-averaged shares of the GPU capacity.
    pub allocation: f64,
    pub utilization: f64,
    /// Time-averaged free GPU capacity no waiting job's shape can use, as a share of
    /// capacity (timed mode); the workload-weighted measure of the ATC '23 paper at the
    /// end of the run (fill mode).
    pub fragmentation: f64,
    /// Time-averaged fair-share deviation: half the summed gap between each leaf queue's
    /// share and its demand-capped fair share (0 = perfectly fair, 1 = all misplaced).
    pub fair_share_deviation: f64,
    pub queueing_delay: Vec<Delay>,
    /// The delay distribution of every job that started: percentiles 0, 1, …, 100
    /// (seconds; empty when no job started).
    pub delay_percentiles: Vec<f64>,
    pub completion_time: Option<Stats>,
    pub preemption: Preemption,
    pub queues: Vec<QueueSummary>,
    pub never_scheduled: Vec<NeverScheduled>,
    pub series: Series,
    pub fill: Option<FillCurve>,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct JobCounts {
    pub total: u64,
    pub finished: u64,
    pub running: u64,
    pub pending: u64,
    pub rejected: u64,
    pub withdrawn: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct GpuHours {
    pub capacity: f64,
    pub allocated: f64,
    /// Allocated × each job's utilization.
    pub used: f64,
    /// Capacity nobody had allocated.
    pub idle: f64,
    /// Allocated but not used: the gap between allocation and utilization.
    pub allocated_unused: f64,
    /// Work lost to evictions and node failures (since the jobs' last checkpoints).
    pub lost: f64,
}

/// GPU-hours turned into money: each model's hours times its price per GPU-hour, in
/// whatever currency the prices are in.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Cost {
    /// The price per GPU-hour of each model of the cluster that has one.
    pub price_per_gpu_hour: BTreeMap<String, f64>,
    pub capacity: f64,
    pub allocated: f64,
    /// Capacity nobody had allocated.
    pub idle: f64,
    /// Allocated but not used.
    pub allocated_unused: f64,
    /// Work lost to evictions and node failures.
    pub lost: f64,
    /// Models of the cluster without a price: their hours are in none of these sums.
    pub unpriced: Vec<String>,
}

/// Distribution of a duration, seconds (nearest-rank percentiles).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// Percentiles 0, 1, …, 100 of `values` (nearest rank; sorts them).
pub fn percentiles(values: &mut [f64]) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    percentiles_sorted(values.iter().copied())
}

/// [`percentiles`] of values already in ascending order, read twice and never copied.
pub fn percentiles_sorted(values: impl Iterator<Item = f64> + Clone) -> Vec<f64> {
    let n = values.clone().count();
    let ranks: Vec<usize> = (0..=100).map(|p| nearest_rank(f64::from(p) / 100.0, n)).collect();
    if n == 0 { Vec::new() } else { at_ranks(values, &ranks) }
}

/// The 0-based index of the nearest-rank `p` percentile of `n` values.
fn nearest_rank(p: f64, n: usize) -> usize {
    ((p * n as f64).ceil() as usize).clamp(1, n.max(1)) - 1
}

/// The values at ascending 0-based `ranks`, in one pass.
fn at_ranks(values: impl Iterator<Item = f64>, ranks: &[usize]) -> Vec<f64> {
    let mut out = Vec::with_capacity(ranks.len());
    let mut next = ranks.iter().peekable();
    for (i, v) in values.enumerate() {
        while next.next_if(|&&r| r == i).is_some() {
            out.push(v);
        }
        if next.peek().is_none() {
            break;
        }
    }
    out
}

impl Stats {
    pub fn of(values: &mut [f64]) -> Option<Stats> {
        values.sort_by(f64::total_cmp);
        Stats::of_sorted(values.iter().copied())
    }

    /// The stats of values already in ascending order, read in two passes and never
    /// copied (a report over millions of jobs keeps one list of them).
    pub fn of_sorted(values: impl Iterator<Item = f64> + Clone) -> Option<Stats> {
        let (n, sum) = (values.clone().count(), values.clone().sum::<f64>());
        if n == 0 {
            return None;
        }
        let picked = at_ranks(values, &[nearest_rank(0.50, n), nearest_rank(0.95, n), nearest_rank(0.99, n), n - 1]);
        let &[p50, p95, p99, max] = picked.as_slice() else { return None };
        Some(Stats { count: n as u64, mean: sum / n as f64, p50, p95, p99, max })
    }
}

/// Queueing delay (arrival to first start) of the jobs of one group that started.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Delay {
    /// `all`, `queue <name>` or `class <name>`.
    pub group: String,
    #[serde(flatten)]
    pub stats: Stats,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Preemption {
    pub evictions: u64,
    /// Jobs stopped by node failures.
    pub requeues: u64,
    pub gpu_hours_lost: f64,
    /// Evictions by the rule that chose the victim.
    pub by_rule: BTreeMap<String, u64>,
    pub reservations: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QueueSummary {
    pub name: String,
    pub jobs: u64,
    pub finished: u64,
    pub guarantee_gpus: f64,
    /// Time-averaged GPUs held.
    pub mean_gpus: f64,
    /// Time-averaged share of capacity held, and fair (demand-capped) share.
    pub mean_share: f64,
    pub mean_fair_share: f64,
    /// GPU-hours held above the guarantee, and guarantee lent to queues that borrowed;
    /// `None` for a queue with no guarantee, which neither borrows nor lends: all it
    /// holds is what others leave.
    pub borrowed_gpu_hours: Option<f64>,
    pub lent_gpu_hours: Option<f64>,
    pub delay_p50_s: Option<f64>,
    pub delay_p95_s: Option<f64>,
    /// The queue's delay distribution: percentiles 0, 1, …, 100 (seconds; empty when
    /// none of its jobs started).
    pub delay_percentiles: Vec<f64>,
    /// Evictions of the queue's jobs (a shrunk elastic gang counts once per replica).
    pub evictions: u64,
    /// Work its jobs lost to evictions and node failures.
    pub lost_gpu_hours: f64,
}

/// Jobs that never started, grouped by why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NeverScheduled {
    /// `pending: capacity`, `rejected: <rule>`, `withdrawn`, …
    pub reason: String,
    pub jobs: u64,
    pub gpus: f64,
    /// One such job, and what the scheduler said of it.
    pub example: String,
}

/// Time series, one value per bucket (time-weighted averages over the bucket).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Series {
    pub bucket_s: f64,
    pub time_s: Vec<f64>,
    pub capacity: Vec<f64>,
    pub allocated: Vec<f64>,
    pub used: Vec<f64>,
    pub pending_gpus: Vec<f64>,
    pub fragmented: Vec<f64>,
    pub fair_share_deviation: Vec<f64>,
    /// Evictions (and shrunk replicas) per hour.
    pub evictions_per_hour: Vec<f64>,
    /// Per leaf queue: GPUs held, guarantee, and demand-capped fair amount.
    pub queues: BTreeMap<String, QueueSeries>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct QueueSeries {
    pub allocated: Vec<f64>,
    pub guarantee: Vec<f64>,
    pub fair: Vec<f64>,
}

/// Fill mode: how allocation and fragmentation grow as jobs arrive.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FillCurve {
    /// The requested total the run stopped at, as a share of capacity.
    pub target: f64,
    /// Requested GPUs of the jobs that arrived so far, as a share of capacity.
    pub arrived: Vec<f64>,
    /// Allocated GPUs, as a share of capacity.
    pub allocated: Vec<f64>,
    /// Expected fragmented GPUs (workload-weighted), as a share of capacity.
    pub fragmented: Vec<f64>,
    /// Share of capacity left unallocated at the end.
    pub unallocated: f64,
    /// Share of the arrived GPU request that did not fit.
    pub failed: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Stats::of(&mut v).expect("stats");
        assert_eq!((s.p50, s.p95, s.p99, s.max, s.mean), (50.0, 95.0, 99.0, 100.0, 50.5));
        assert_eq!(Stats::of(&mut [3.0]).map(|s| s.p99), Some(3.0));
        assert_eq!(Stats::of(&mut []), None);
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(Stats::of_sorted(sorted.iter().copied()), Some(s));
        assert_eq!(percentiles_sorted(sorted.iter().copied()), percentiles(&mut v));
        assert_eq!(percentiles(&mut [7.0])[100], 7.0);
    }
}
