//! Jobs as Slurm reports them: `squeue --json` of Slurm 22.05 (the openapi/v0.0.38
//! data parser; slurmrestd's `GET /slurm/v0.0.38/jobs` answers the same document), read
//! tolerantly: a field that is missing takes its default, and numbers written as the
//! `{"set", "infinite", "number"}` objects of later data parsers are read too. Each job's
//! request goes through the one job model ([`crate::jobs::Request`]).

use crate::command::printable;
use crate::hostlist::{self, HostlistError};
use crate::jobs::Request;
use crate::json::{Flex, number, text};
use serde::Deserialize;
use serde_json::Value;

/// A job Slurm knows.
#[derive(Clone, Debug, PartialEq)]
pub struct SlurmJob {
    pub id: u64,
    /// `PENDING`, `RUNNING`, `COMPLETED`, …
    pub state: String,
    /// Why it waits (`Priority`, `Resources`, `JobHeldAdmin`, …).
    pub reason: String,
    /// The nodes it runs on, expanded.
    pub nodes: Vec<String>,
    /// The nodes it is pinned to (`ReqNodeList`), expanded.
    pub required_nodes: Vec<String>,
    /// Held (priority 0): by an administrator, or by `gpolc slurm run`.
    pub held: bool,
    /// The administrator's comment: where `gpolc slurm run` says why it holds a job.
    pub admin_comment: String,
    /// Seconds since the epoch it was submitted and started (0: not yet).
    pub submit_time: u64,
    pub start_time: u64,
    /// How often it was requeued (evictions, to gpol).
    pub restarts: u32,
    /// Its priority in Slurm (0: held).
    pub priority: u64,
    pub request: Request,
}

impl SlurmJob {
    /// The base state (later data parsers list flags: `PENDING,REQUEUED`).
    fn base(&self) -> &str {
        self.state.split(',').next().unwrap_or_default()
    }

    /// Running, or on its way in or out (its nodes are taken).
    pub fn is_running(&self) -> bool {
        matches!(self.base(), "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED")
    }

    pub fn is_pending(&self) -> bool {
        self.base() == "PENDING"
    }
}

/// What is wrong with the document, naming the job and field.
#[derive(Clone, Debug, PartialEq)]
pub enum BadJobs {
    /// Not a job list: serde's message (escaped: it may quote the document).
    NotJson(String),
    /// Slurm's `errors` list instead of the jobs (slurmctld not answering).
    SlurmSaid(Vec<String>),
    NoList,
    /// A job without an id (1-based, as listed).
    NoId {
        item: usize,
    },
    Twice {
        id: u64,
    },
    /// A hostlist field (`nodes`, `required_nodes`) that cannot be expanded.
    Hostlist {
        id: u64,
        field: &'static str,
        error: HostlistError,
    },
}

impl std::fmt::Display for BadJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadJobs::NotJson(message) => write!(f, "not a job list: {message}"),
            BadJobs::SlurmSaid(said) => write!(f, "Slurm answered with errors, not the jobs: {}", said.join("; ")),
            BadJobs::NoList => write!(f, "no `jobs` list"),
            BadJobs::NoId { item } => write!(f, "job {item}: no `job_id`"),
            BadJobs::Twice { id } => write!(f, "job {id} is listed twice (`job_id`)"),
            BadJobs::Hostlist { id, field, error } => write!(f, "job {id}: `{field}`: {error}"),
        }
    }
}

impl std::error::Error for BadJobs {}

/// The fields of a job the loop reads; every other field is skipped unread, so a pass
/// holds the document's text and these, not a tree of all of it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RawJob {
    job_id: Option<Flex>,
    name: Option<Flex>,
    user_name: Option<Flex>,
    account: Option<Flex>,
    partition: Option<Flex>,
    qos: Option<Flex>,
    tres_per_node: Option<Flex>,
    tres_per_job: Option<Flex>,
    tres_per_task: Option<Flex>,
    tasks: Option<Flex>,
    tasks_per_node: Option<Flex>,
    node_count: Option<Flex>,
    cpus: Option<Flex>,
    memory_per_node: Option<Flex>,
    memory_per_cpu: Option<Flex>,
    tres_req_str: Option<Flex>,
    time_limit: Option<Flex>,
    comment: Option<Flex>,
    job_state: Option<Flex>,
    state_reason: Option<Flex>,
    nodes: Option<Flex>,
    required_nodes: Option<Flex>,
    admin_comment: Option<Flex>,
    submit_time: Option<Flex>,
    start_time: Option<Flex>,
    restart_cnt: Option<Flex>,
    priority: Option<Flex>,
}

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    jobs: Option<Vec<RawJob>>,
    /// What went wrong instead (slurmctld down: `squeue --json` exits 0 with an error
    /// here and no jobs).
    #[serde(default)]
    errors: Vec<Value>,
}

/// The jobs of a `squeue --json` document: refused when Slurm reported errors in it (its
/// job list is then not the queue), when a job is listed twice, and when its hostlists
/// together name more hosts than one document may ([`hostlist::Budget::per_document`]).
pub fn read(json: &str) -> Result<Vec<SlurmJob>, BadJobs> {
    // (serde's message may quote the document's text.)
    let doc: Document = serde_json::from_str(json).map_err(|e| BadJobs::NotJson(printable(&e.to_string())))?;
    let said = crate::errors::messages(&doc.errors);
    if !said.is_empty() {
        return Err(BadJobs::SlurmSaid(said));
    }
    let jobs = doc.jobs.ok_or(BadJobs::NoList)?;
    let mut budget = hostlist::Budget::per_document();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.into_iter().enumerate() {
        let id = number(&j.job_id).ok_or(BadJobs::NoId { item: i + 1 })?;
        if !seen.insert(id) {
            return Err(BadJobs::Twice { id });
        }
        out.push(job(id, j, &mut budget)?);
    }
    Ok(out)
}

/// One job of the document, its hostlists expanded within the document's `budget`.
fn job(id: u64, j: RawJob, budget: &mut hostlist::Budget) -> Result<SlurmJob, BadJobs> {
    // Slurm's "unlimited" time is a number past any real limit.
    let time = number(&j.time_limit).filter(|&t| t < u64::from(u32::MAX) - 1);
    let request = Request {
        name: text(&j.name),
        user: text(&j.user_name),
        account: text(&j.account),
        partition: text(&j.partition),
        qos: text(&j.qos),
        tres_per_node: text(&j.tres_per_node),
        tres_per_job: text(&j.tres_per_job),
        tres_per_task: text(&j.tres_per_task),
        tasks: number(&j.tasks),
        // 0 when not given.
        tasks_per_node: number(&j.tasks_per_node).filter(|&t| t > 0),
        nodes: number(&j.node_count).map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        cpus: number(&j.cpus),
        mem_per_node_mib: number(&j.memory_per_node),
        mem_per_cpu_mib: number(&j.memory_per_cpu),
        mem_counted_mib: crate::config::tres_mem_mib(&text(&j.tres_req_str)),
        time_limit_min: time,
        comment: text(&j.comment),
    };
    let mut list = |field: &'static str, v: &Option<Flex>| {
        hostlist::expand_within(&text(v), budget).map_err(|error| BadJobs::Hostlist { id, field, error })
    };
    let (nodes, required_nodes) = (list("nodes", &j.nodes)?, list("required_nodes", &j.required_nodes)?);
    let reason = text(&j.state_reason);
    Ok(SlurmJob {
        id,
        state: text(&j.job_state),
        // `scontrol requeuehold` leaves "job requeued in held state".
        held: number(&j.priority) == Some(0) || reason.starts_with("JobHeld") || reason.ends_with("held state"),
        reason,
        nodes,
        required_nodes,
        admin_comment: text(&j.admin_comment),
        submit_time: number(&j.submit_time).unwrap_or(0),
        start_time: number(&j.start_time).unwrap_or(0),
        restarts: number(&j.restart_cnt).map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        priority: number(&j.priority).unwrap_or(0),
        request,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_of_later_data_parsers_are_read() {
        let doc = r#"{"jobs": [{"job_id": {"set": true, "number": 7}, "time_limit": {"set": true, "infinite": true, "number": 0}, "node_count": {"set": true, "number": 2}, "job_state": ["PENDING"], "nodes": ""}]}"#;
        let jobs = read(doc).expect("read");
        assert_eq!((jobs[0].id, jobs[0].request.time_limit_min, jobs[0].request.nodes), (7, None, 2));
        assert_eq!(jobs[0].state, "PENDING");
        assert!(read(r#"{"jobs": [{"name": "x"}]}"#).expect_err("no id").to_string().contains("job 1: no `job_id`"));
        assert!(read("[]").is_err());
    }

    #[test]
    fn errors_slurm_reported_are_the_answer_not_an_empty_queue() {
        // `squeue --json` of Slurm 22.05 with slurmctld stopped: exit status 0.
        let down = r#"{"meta": {}, "errors": [{"description": "Failed while looking for jobs", "error_number": -1,
                        "error": "Unspecified error", "source": "slurm_load_jobs"}], "jobs": []}"#;
        assert_eq!(
            read(down).expect_err("errors").to_string(),
            "Slurm answered with errors, not the jobs: Failed while looking for jobs: Unspecified error: \
             slurm_load_jobs (error -1)"
        );
        assert!(read(r#"{"errors": [], "jobs": []}"#).expect("no errors").is_empty());
    }

    #[test]
    fn a_job_listed_twice_is_refused() {
        let doc = r#"{"jobs": [{"job_id": 4}, {"job_id": 5}, {"job_id": {"set": true, "number": 4}}]}"#;
        assert_eq!(read(doc).expect_err("twice").to_string(), "job 4 is listed twice (`job_id`)");
    }

    #[test]
    fn hostlists_share_one_budget_per_document() {
        // Each job alone names 100,000 nodes, within one list's limit; 41 of them pass
        // the document's 4,000,000 names, and the job past it is named.
        let job = |id: u32| format!(r#"{{"job_id": {id}, "job_state": "RUNNING", "nodes": "n[0-99999]"}}"#);
        let jobs: Vec<String> = (1..=2000).map(job).collect();
        let doc = format!(r#"{{"jobs": [{}]}}"#, jobs.join(","));
        assert!(doc.len() < 200_000);
        let e = read(&doc).expect_err("past the budget").to_string();
        assert_eq!(
            e,
            "job 41: `nodes`: `n[0-99999]`: the document's hostlists name more than 4000000 hosts in all \
             (docs/limits.md)"
        );
        // A bad hostlist names the job, the field and what is wrong.
        let bad = r#"{"jobs": [{"job_id": 7, "required_nodes": "gpu-[3-1]"}]}"#;
        assert_eq!(
            read(bad).expect_err("backwards").to_string(),
            "job 7: `required_nodes`: `gpu-[3-1]`: the range `3-1` runs backwards"
        );
    }

    #[test]
    fn a_job_requeued_and_held_reads_as_held() {
        let doc = r#"{"jobs": [{"job_id": 1, "job_state": "PENDING", "priority": 5, "state_reason": "job requeued in held state"},
                               {"job_id": 2, "job_state": "PENDING", "priority": 5, "state_reason": "Resources"}]}"#;
        let jobs = read(doc).expect("read");
        assert_eq!((jobs[0].held, jobs[1].held), (true, false));
    }
}
