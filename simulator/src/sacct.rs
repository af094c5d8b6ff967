//! A Slurm cluster's own history as a trace: `sacct --json` (Slurm 22.05; read by
//! [`gpol_slurm::sacct`]), each job through the one job model on Slurm
//! ([`gpol_slurm::jobs::Request::job`]) as the scheduling loop reads it, so a job replayed
//! here is the job `gpolc slurm run` would have seen. It arrives when it was submitted
//! (the earliest submission is the trace's 0) and runs as long as it ran; its time limit,
//! which the loop reads as `expected_duration`, gives way to that run time, as in every
//! trace. Its name is Slurm's name and job id (`train-4182`: trace jobs are named once).
//! What is not replayed (jobs that never started, jobs still running) and QOS that name
//! no priority class are warnings, never dropped silently.

use crate::input::InputError;
use crate::trace::TraceJob;
use gpol_compiler::limits::MAX_CLOCK_MS;
use gpol_slurm::jobs::Reading;
use gpol_slurm::sacct::{self, Skipped};
use std::collections::BTreeMap;

/// Whether JSON text is a `sacct --json` history.
pub fn is_history(text: &str) -> bool {
    sacct::is_history(text)
}

/// The jobs of a history, read as `reading` says, and what the reading could not keep.
pub fn parse(text: &str, file: &str, reading: &Reading) -> Result<(Vec<TraceJob>, Vec<String>), InputError> {
    let history = sacct::read(text).map_err(|e| InputError::new(file, None, None, e.to_string()))?;
    let mut warnings = Vec::new();
    let skipped = |what: &str, s: &Skipped, warnings: &mut Vec<String>| {
        if s.count > 0 {
            let ids: Vec<String> = s.ids.iter().map(u64::to_string).collect();
            warnings.push(format!("{file}: {} job(s) {what} (job {}…): not replayed", s.count, ids.join(", ")));
        }
    };
    skipped("never started", &history.never_started, &mut warnings);
    skipped("still run (no end yet)", &history.running, &mut warnings);
    let Some(first) = history.jobs.iter().map(|j| j.submitted).min() else {
        return Err(InputError::new(file, None, Some("jobs"), "no job in it ran: nothing to replay"));
    };
    let mut classless: BTreeMap<&str, u64> = BTreeMap::new();
    let mut shards = 0u64;
    let mut jobs = Vec::with_capacity(history.jobs.len());
    for f in &history.jobs {
        let r = &f.request;
        // Rebuilt from counts accounting recorded, a request always reads; one that would
        // not is an error naming the job.
        let mut job =
            r.job(reading).map_err(|e| InputError::new(file, None, Some(e.field), format!("job {}: {e}", f.id)))?;
        job.name = if r.name.is_empty() { f.id.to_string() } else { format!("{}-{}", r.name, f.id) };
        job.duration_ms = Some((f.ended - f.started).saturating_mul(1000));
        if job.priority_class.is_none() && !r.qos.is_empty() {
            *classless.entry(&r.qos).or_default() += 1;
        }
        if reading.shards_per_card.is_none() && gpol_slurm::jobs::shards(&r.tres_per_node).is_ok_and(|n| n > 0) {
            shards += 1;
        }
        let arrival_ms = (f.submitted.saturating_sub(first)).saturating_mul(1000);
        for (field, ms) in [("time.submission", arrival_ms), ("time.end", job.duration_ms.unwrap_or(0))] {
            if ms > MAX_CLOCK_MS {
                let m =
                    format!("job {}: more than {} days after the first submission", f.id, MAX_CLOCK_MS / 86_400_000);
                return Err(InputError::new(file, None, Some(field), m));
            }
        }
        jobs.push(TraceJob { line: 0, arrival_ms, job });
    }
    for (qos, n) in classless {
        warnings.push(format!("{file}: QOS `{qos}` ({n} job(s)) names no priority class of the policy: no class"));
    }
    if shards > 0 {
        warnings.push(format!(
            "{file}: {shards} job(s) ask for shards, and the cluster has no time-sliced nodes of one number of \
             shards per card: read as asking for no GPU"
        ));
    }
    if !history.jobs.iter().any(|f| !f.request.tres_per_job.is_empty() || !f.request.tres_per_node.is_empty()) {
        warnings.push(format!(
            "{file}: no job records a GPU: Slurm's accounting keeps GPUs only with \
             `AccountingStorageTRES=gres/gpu` (every job is read as asking for none)"
        ));
    }
    crate::trace::unique_names(&jobs, file)?;
    Ok((jobs, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::spec::Request as Cards;
    use gpol_slurm::jobs::QueueFrom;

    /// Captured from a real Slurm 22.05 by tests/slurm/capture_sacct.sh.
    const CAPTURED: &str = include_str!("../tests/fixtures/slurm/sacct.json");

    fn job<'a>(jobs: &'a [TraceJob], name: &str) -> &'a TraceJob {
        jobs.iter().find(|j| j.job.name == name).unwrap_or_else(|| panic!("no job {name}"))
    }

    #[test]
    fn a_captured_history_replays_what_ran() {
        assert!(is_history(CAPTURED));
        let reading = Reading { classes: vec!["high".into()], ..Reading::default() };
        let (jobs, warnings) = parse(CAPTURED, "sacct.json", &reading).expect("read");
        let names: Vec<&str> = jobs.iter().map(|j| j.job.name.as_str()).collect();
        assert_eq!(names, ["train-1", "serve-2", "gang-3", "cpuonly-4", "fails-5", "late-6"]);
        assert_eq!(
            warnings,
            [
                "sacct.json: 1 job(s) never started (job 7…): not replayed",
                "sacct.json: QOS `normal` (5 job(s)) names no priority class of the policy: no class",
            ]
        );
        // Typed GPUs per node, CPUs, memory, and the run time (not the 5-minute limit).
        let train = &job(&jobs, "train-1").job;
        assert_eq!((train.request, train.models.clone(), train.replicas), (Cards::Whole(2), vec!["h100".into()], 1));
        assert_eq!((train.cpu_milli, train.mem, train.duration_ms), (4000, 1000 << 20, Some(2000)));
        assert_eq!((train.queue.as_deref(), train.user.as_deref()), (Some("research"), Some("root")));
        // `--gpus=3` over one node, the QOS as a class, the comment's flags and labels.
        let serve = &job(&jobs, "serve-2").job;
        assert_eq!((serve.request, serve.priority_class.as_deref()), (Cards::Whole(3), Some("high")));
        assert!(serve.latency_critical && serve.labels == [("team".to_string(), "web".to_string())]);
        // A gang of two nodes: per node what it asked over the job.
        let gang = &job(&jobs, "gang-3").job;
        assert_eq!(
            (gang.request, gang.replicas, gang.mem, gang.duration_ms),
            (Cards::Whole(8), 2, 2000 << 20, Some(3000))
        );
        assert_eq!(job(&jobs, "cpuonly-4").job.request, Cards::None);
        // Arrivals from the first submission: `late` was submitted with the others.
        assert!(jobs.iter().all(|j| j.arrival_ms == 0));
        assert_eq!(job(&jobs, "late-6").job.duration_ms, Some(1000));
    }

    #[test]
    fn queues_are_partitions_when_asked() {
        let reading = Reading { queue_from: QueueFrom::Partition, ..Reading::default() };
        let (jobs, _) = parse(CAPTURED, "sacct.json", &reading).expect("read");
        assert_eq!(job(&jobs, "serve-2").job.queue.as_deref(), Some("debug"));
        assert_eq!(job(&jobs, "train-1").job.queue.as_deref(), Some("gpu"));
    }

    #[test]
    fn bad_histories_name_the_file_job_and_field() {
        let far = r#"{"jobs": [{"job_id": 1, "allocation_nodes": 1, "time": {"submission": 0, "start": 1, "end": 2}},
            {"job_id": 2, "allocation_nodes": 1, "time": {"submission": 9000000000, "start": 9000000001, "end": 9000000002}}]}"#;
        let e = parse(far, "h.json", &Reading::default()).expect_err("too far apart").to_string();
        assert!(e.contains("h.json") && e.contains("time.submission") && e.contains("job 2"), "{e}");
        let none =
            r#"{"jobs": [{"job_id": 1, "allocation_nodes": 0, "time": {"submission": 5, "start": 6, "end": 6}}]}"#;
        let e = parse(none, "h.json", &Reading::default()).expect_err("nothing ran").to_string();
        assert!(e.contains("no job in it ran"), "{e}");
        // One job twice (`sacct --duplicates`, or two clusters' ids): named twice.
        let job =
            r#"{"job_id": 4, "name": "x", "allocation_nodes": 1, "time": {"submission": 5, "start": 6, "end": 7}}"#;
        let twice = format!(r#"{{"jobs": [{job}, {job}]}}"#);
        let e = parse(&twice, "h.json", &Reading::default()).expect_err("twice").to_string();
        assert!(e.contains("job `x-4` is named twice"), "{e}");
        // Accounting without GPUs counted: said, not silently CPU-only.
        let (_, warnings) = parse(&format!(r#"{{"jobs": [{job}]}}"#), "h.json", &Reading::default()).expect("read");
        assert!(warnings.iter().any(|w| w.contains("AccountingStorageTRES=gres/gpu")), "{warnings:?}");
    }
}
