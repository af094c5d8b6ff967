//! A cluster's history as Slurm's accounting keeps it: `sacct --json` of Slurm 22.05 (the
//! openapi/v0.0.38 data parser; slurmrestd's `GET /slurmdb/v0.0.38/jobs` answers the same
//! document), read tolerantly as [`crate::squeue`] reads its jobs: a missing field takes
//! its default, and the `{"set", "infinite", "number"}` numbers and state lists of later
//! data parsers are read too. Each job's request, rebuilt from what accounting recorded
//! of it, goes through the one job model ([`crate::jobs::Request`]); the simulator
//! replays these jobs as a trace.
//!
//! What a record gives: the job's name, user, account, partition and QOS; its requested
//! TRES (`cpu`, `mem` in MiB over the job, `node`, `gres/gpu` over the job with
//! `gres/gpu:TYPE` when a type was asked, `gres/shard`); its time limit; when it was
//! submitted, started and ended; and its comment when Slurm keeps comments
//! (`AccountingStoreFlags=job_comment`). Job steps are not read: the job's allocation is
//! what scheduling decided.

use crate::jobs::Request;
use crate::json::{Flex, negative, number, text};
use serde::Deserialize;

/// Most jobs one document may hold (docs/limits.md): a year of a busy cluster.
pub const MAX_JOBS: usize = 10_000_000;

/// A job that ran, as accounting recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub id: u64,
    /// Seconds since the epoch it was submitted, started and ended.
    pub submitted: u64,
    pub started: u64,
    pub ended: u64,
    /// `COMPLETED`, `FAILED`, `TIMEOUT`, `CANCELLED`, …
    pub state: String,
    pub request: Request,
}

/// The jobs of a history, and the records that are not jobs to replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// In the document's order.
    pub jobs: Vec<Finished>,
    /// Records of jobs that never started (cancelled while pending) or still run (no end
    /// yet): the first few ids and how many.
    pub never_started: Skipped,
    pub running: Skipped,
}

/// Records left out for one reason.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Skipped {
    pub count: u64,
    /// The first few job ids, to name them.
    pub ids: Vec<u64>,
}

impl Skipped {
    fn add(&mut self, id: u64) {
        self.count += 1;
        if self.ids.len() < 5 {
            self.ids.push(id);
        }
    }
}

/// What is wrong with the document, naming the job and field.
#[derive(Clone, Debug, PartialEq)]
pub enum BadHistory {
    /// Not a job history: serde's message (escaped: it may quote the document).
    NotJson(String),
    /// Slurm's `errors` list instead of the history (slurmdbd down, say).
    SlurmSaid(Vec<String>),
    NoList,
    TooMany {
        count: usize,
    },
    /// A job without an id (1-based, as listed).
    NoId {
        item: usize,
    },
    NoSubmission {
        id: u64,
    },
    /// A requested TRES (`gres/gpu`) with a negative count, which Slurm never records.
    NegativeCount {
        id: u64,
        tres: String,
    },
}

impl std::fmt::Display for BadHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadHistory::NotJson(message) => write!(f, "not a job history: {message}"),
            BadHistory::SlurmSaid(said) => {
                write!(f, "Slurm answered with errors, not the history: {}", said.join("; "))
            }
            BadHistory::NoList => write!(f, "no `jobs` list"),
            BadHistory::TooMany { count } => write!(f, "{count} jobs: more than {MAX_JOBS}"),
            BadHistory::NoId { item } => write!(f, "job {item}: no `job_id`"),
            BadHistory::NoSubmission { id } => write!(f, "job {id}: no `time.submission`"),
            BadHistory::NegativeCount { id, tres } => {
                write!(f, "job {id}: `tres.requested`: `{}`: a negative count", crate::command::printable(tres))
            }
        }
    }
}

impl std::error::Error for BadHistory {}

/// Whether JSON text looks like `sacct --json`: an object with a `jobs` list whose records
/// carry accounting's `time` object (squeue's jobs carry `submit_time` instead).
pub fn is_history(text: &str) -> bool {
    let head: String = text.chars().take(16384).collect();
    let list = head.match_indices("\"jobs\"").any(|(at, key)| {
        let rest = head[at + key.len()..].trim_start();
        rest.strip_prefix(':').is_some_and(|r| r.trim_start().starts_with('['))
    });
    head.trim_start().starts_with('{') && list && head.contains("\"submission\"") && !head.contains("\"submit_time\"")
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawJob {
    job_id: Option<Flex>,
    name: Option<Flex>,
    user: Option<Flex>,
    account: Option<Flex>,
    partition: Option<Flex>,
    qos: Option<Flex>,
    allocation_nodes: Option<Flex>,
    comment: Option<RawComment>,
    time: Option<RawTime>,
    state: Option<RawState>,
    tres: Option<RawTres>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawComment {
    job: Option<Flex>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawTime {
    submission: Option<Flex>,
    start: Option<Flex>,
    end: Option<Flex>,
    /// Minutes; absent or unset when unlimited.
    limit: Option<Flex>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawState {
    current: Option<Flex>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawTres {
    requested: Vec<RawTresItem>,
    allocated: Vec<RawTresItem>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawTresItem {
    #[serde(rename = "type")]
    kind: Option<Flex>,
    name: Option<Flex>,
    count: Option<Flex>,
}

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    jobs: Option<Vec<RawJob>>,
    /// What went wrong instead (slurmdbd down, say): the job list is then not the history.
    #[serde(default)]
    errors: Vec<serde_json::Value>,
}

/// The requested TRES of one record: counts over the whole job.
#[derive(Default)]
struct Requested {
    cpu: Option<u64>,
    mem_mib: Option<u64>,
    nodes: Option<u64>,
    gpus: u64,
    /// The type of `gres/gpu:TYPE`, when the job asked for one.
    model: Option<String>,
    shards: u64,
}

/// What job `id`'s requested TRES add up to; a negative count (which Slurm never records)
/// is refused, naming the TRES.
fn requested(id: u64, items: &[RawTresItem]) -> Result<Requested, BadHistory> {
    let mut r = Requested::default();
    for item in items {
        let (kind, name, count) = (text(&item.kind), text(&item.name), number(&item.count));
        if negative(&item.count) {
            let tres = if name.is_empty() { kind } else { format!("{kind}/{name}") };
            return Err(BadHistory::NegativeCount { id, tres });
        }
        match (kind.as_str(), name.split_once(':')) {
            ("cpu", _) => r.cpu = count,
            ("mem", _) => r.mem_mib = count,
            ("node", _) => r.nodes = count,
            ("gres", None) if name == "gpu" => r.gpus = count.unwrap_or(0),
            ("gres", None) if name == "shard" => r.shards = count.unwrap_or(0),
            ("gres", Some(("gpu", model))) if r.model.is_none() && !model.is_empty() => {
                r.model = Some(model.to_string());
            }
            _ => {}
        }
    }
    Ok(r)
}

/// The jobs of a `sacct --json` document.
pub fn read(json: &str) -> Result<History, BadHistory> {
    // (serde's message may quote the document's text.)
    let doc: Document =
        serde_json::from_str(json).map_err(|e| BadHistory::NotJson(crate::command::printable(&e.to_string())))?;
    let said = crate::errors::messages(&doc.errors);
    if !said.is_empty() {
        return Err(BadHistory::SlurmSaid(said));
    }
    let raw = doc.jobs.ok_or(BadHistory::NoList)?;
    if raw.len() > MAX_JOBS {
        return Err(BadHistory::TooMany { count: raw.len() });
    }
    let mut history = History::default();
    for (i, j) in raw.into_iter().enumerate() {
        let id = number(&j.job_id).ok_or(BadHistory::NoId { item: i + 1 })?;
        let time = j.time.unwrap_or_default();
        let submitted = number(&time.submission).ok_or(BadHistory::NoSubmission { id })?;
        let (started, ended) = (number(&time.start).unwrap_or(0), number(&time.end).unwrap_or(0));
        let tres = j.tres.unwrap_or_default();
        // Slurm gives a job cancelled while it waited its cancel time as start and end;
        // what tells is that nothing was allocated to it.
        let allocated = match number(&j.allocation_nodes) {
            Some(n) => n > 0,
            None => !tres.allocated.is_empty(),
        };
        if started == 0 || !allocated {
            history.never_started.add(id);
            continue;
        }
        if ended < started {
            history.running.add(id);
            continue;
        }
        let tres = requested(id, &tres.requested)?;
        let nodes = tres.nodes.or(number(&j.allocation_nodes)).unwrap_or(1).max(1);
        // Counts as recorded (a count past the job model's limits is refused there).
        let gres = |what: &str, model: Option<&str>, n: u64| match (n, model) {
            (0, _) => String::new(),
            (n, Some(m)) => format!("gres:{what}:{m}:{n}"),
            (n, None) => format!("gres:{what}:{n}"),
        };
        let request = Request {
            name: text(&j.name),
            user: text(&j.user),
            account: text(&j.account),
            partition: text(&j.partition),
            qos: text(&j.qos),
            // Recorded over the job: GPUs as `--gpus` asks them (÷ nodes, rounded up),
            // shards per node.
            tres_per_job: gres("gpu", tres.model.as_deref(), tres.gpus),
            tres_per_node: gres("shard", None, tres.shards.div_ceil(nodes)),
            nodes: u32::try_from(nodes).unwrap_or(u32::MAX),
            cpus: tres.cpu,
            mem_per_node_mib: tres.mem_mib.map(|m| m / nodes),
            // Slurm's "unlimited" is a number past any real limit.
            time_limit_min: number(&time.limit).filter(|&t| t < u64::from(u32::MAX) - 1),
            comment: j.comment.map(|c| text(&c.job)).unwrap_or_default(),
            ..Request::default()
        };
        let state = text(&j.state.unwrap_or_default().current);
        history.jobs.push(Finished { id, submitted, started, ended, state, request });
    }
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{QueueFrom, Reading};
    use gpol_compiler::spec::Request as Cards;

    const TWO: &str = r#"{"jobs": [
        {"job_id": 7, "name": "train", "user": "alice", "account": "research", "partition": "gpu",
         "qos": "high", "allocation_nodes": 2, "comment": {"job": "team=vision,preemptible=true"},
         "time": {"submission": 100, "start": 160, "end": 3760, "limit": 120},
         "state": {"current": "COMPLETED"},
         "tres": {"requested": [{"type": "cpu", "count": 16}, {"type": "mem", "count": 4096},
                   {"type": "node", "count": 2}, {"type": "gres", "name": "gpu", "count": 16},
                   {"type": "gres", "name": "gpu:h100", "count": 16}]}},
        {"job_id": {"set": true, "number": 8}, "name": "gone", "time": {"submission": 120, "start": 0, "end": 130}},
        {"job_id": 10, "name": "cancelled", "allocation_nodes": 0, "time": {"submission": 120, "start": 125, "end": 125}},
        {"job_id": 9, "name": "on", "allocation_nodes": 1, "time": {"submission": 130, "start": 140, "end": 0,
         "limit": {"set": true, "infinite": true, "number": 0}}, "state": {"current": ["RUNNING"]}}
    ]}"#;

    #[test]
    fn a_record_is_the_job_it_asked_for() {
        assert!(is_history(TWO));
        let h = read(TWO).expect("read");
        assert_eq!((h.jobs.len(), h.never_started.ids.clone(), h.running.ids.clone()), (1, vec![8, 10], vec![9]));
        let f = &h.jobs[0];
        assert_eq!((f.id, f.submitted, f.started, f.ended, f.state.as_str()), (7, 100, 160, 3760, "COMPLETED"));
        let reading = Reading { classes: vec!["high".into()], ..Reading::default() };
        let j = f.request.job(&reading).expect("readable");
        assert_eq!((j.request, j.models.clone(), j.replicas), (Cards::Whole(8), vec!["h100".to_string()], 2));
        assert_eq!((j.cpu_milli, j.mem, j.duration_ms), (8000, 2048 << 20, Some(7_200_000)));
        assert_eq!(
            (j.queue.as_deref(), j.priority_class.as_deref(), j.preemptible),
            (Some("research"), Some("high"), true)
        );
        assert_eq!(j.labels, [("team".to_string(), "vision".to_string())]);
        let by_partition = Reading { queue_from: QueueFrom::Partition, ..reading };
        assert_eq!(f.request.job(&by_partition).expect("readable").queue.as_deref(), Some("gpu"));
    }

    #[test]
    fn bad_histories_name_the_job_and_field() {
        let said = |text: &str| read(text).expect_err("refused").to_string();
        assert!(said("[").starts_with("not a job history"));
        assert_eq!(said(r#"{"meta": {}}"#), "no `jobs` list");
        assert_eq!(said(r#"{"jobs": [{"name": "x"}]}"#), "job 1: no `job_id`");
        assert_eq!(said(r#"{"jobs": [{"job_id": 3}]}"#), "job 3: no `time.submission`");
        // Errors Slurm reported instead of the history, and counts it never records.
        let down = r#"{"errors": [{"error": "Unable to connect to database", "errno": 7000}], "jobs": []}"#;
        assert_eq!(
            said(down),
            "Slurm answered with errors, not the history: Unable to connect to database (error 7000)"
        );
        let minus = r#"{"jobs": [{"job_id": 4, "allocation_nodes": 1, "time": {"submission": 1, "start": 2, "end": 3},
                        "tres": {"requested": [{"type": "gres", "name": "gpu", "count": -1}]}}]}"#;
        assert_eq!(said(minus), "job 4: `tres.requested`: `gres/gpu`: a negative count");
        // squeue's document is not a history.
        assert!(!is_history(r#"{"jobs": [{"job_id": 1, "submit_time": 5}]}"#));
    }
}
