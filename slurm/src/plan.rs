//! What the scheduling loop changes in Slurm: Slurm's state (nodes, and the jobs `squeue`
//! reports) given to a gpol scheduler of the policy, one cycle run, and its decisions
//! turned into Slurm actions — a job placed is pinned to its nodes (`ReqNodeList`), a job an
//! admit rule or the quota holds back is held with the reason in its `AdminComment`, a job
//! evicted is requeued, a job refused for good is cancelled. Idempotent by construction:
//! what Slurm already shows (a job pinned to the same nodes, held for the same reason)
//! is no action, so a plan right after its apply is empty; a job held by the loop for a
//! reason that no longer holds is released.

use crate::squeue::SlurmJob;
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::spec::{History, NodeSpec};
use gpol_runtime::Scheduler;
use gpol_runtime::explain;
use gpol_runtime::jobs::{self, JobId, Reason};

/// What the loop writes in a job's `AdminComment` when it holds it.
pub const HELD: &str = "gpol: held: ";
/// The hold `job_submit.lua --hold-for-loop` puts on every job: kept until gpol places it.
pub const WAITING: &str = "gpol: held: waiting for the scheduling loop";

/// One change to make in Slurm.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Pin a waiting job to the nodes gpol places it on.
    Place { job: u64, name: String, nodes: Vec<String> },
    /// Hold a waiting job, saying why.
    Hold { job: u64, name: String, reason: String },
    /// Release a job the loop held for a reason that no longer holds.
    Release { job: u64, name: String },
    /// Requeue a running job gpol evicts.
    Requeue { job: u64, name: String, reason: String },
    /// Cancel a job an admit rule refuses for good.
    Cancel { job: u64, name: String, reason: String },
}

impl Action {
    /// The commands that carry it out, in order (argv each).
    pub fn commands(&self) -> Vec<Vec<String>> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        let comment =
            |job: u64, text: &str| v(&["scontrol", "update", &format!("JobId={job}"), &format!("AdminComment={text}")]);
        match self {
            Action::Place { job, nodes, .. } => {
                vec![v(&["scontrol", "update", &format!("JobId={job}"), &format!("ReqNodeList={}", nodes.join(","))])]
            }
            Action::Hold { job, reason, .. } => {
                vec![comment(*job, &format!("{HELD}{reason}")), v(&["scontrol", "hold", &job.to_string()])]
            }
            // Released first: a failure leaves the job held and marked as the loop's.
            Action::Release { job, .. } => vec![v(&["scontrol", "release", &job.to_string()]), comment(*job, "")],
            Action::Requeue { job, reason, .. } => {
                vec![comment(*job, &format!("gpol: requeued: {reason}")), v(&["scontrol", "requeue", &job.to_string()])]
            }
            Action::Cancel { job, reason, .. } => {
                vec![comment(*job, &format!("gpol: cancelled: {reason}")), v(&["scancel", &job.to_string()])]
            }
        }
    }

    /// The action in words.
    pub fn describe(&self) -> String {
        match self {
            Action::Place { job, name, nodes } => format!("place job {job} ({name}) on {}", nodes.join(", ")),
            Action::Hold { job, name, reason } => format!("hold job {job} ({name}): {reason}"),
            Action::Release { job, name } => format!("release job {job} ({name}): what held it no longer does"),
            Action::Requeue { job, name, reason } => format!("requeue job {job} ({name}): {reason}"),
            Action::Cancel { job, name, reason } => format!("cancel job {job} ({name}): {reason}"),
        }
    }
}

/// A plan: the actions, and what of Slurm's state gpol could not take (with why).
#[derive(Debug, Default)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub skipped: Vec<String>,
}

/// Slurm's state as the loop reads it.
pub struct State<'a> {
    /// Nodes, with their domains at the policy's levels.
    pub nodes: &'a [NodeSpec],
    /// Nodes that take no new job (drained, down, not responding): their jobs run on.
    pub unavailable: &'a [String],
    pub jobs: &'a [SlurmJob],
    /// Seconds since the epoch, as Slurm's times.
    pub now: u64,
}

/// The plan for Slurm's state.
pub fn plan(policy: &CompiledPolicy, state: &State<'_>) -> Plan {
    let State { nodes, unavailable, jobs, now } = *state;
    let mut out = Plan::default();
    let mut s = Scheduler::new(policy.clone());
    for n in nodes {
        if let Err(e) = s.add_node(n) {
            out.skipped.push(format!("node {}: {e}", n.name));
        }
    }
    let classes = policy.policy.priority_classes.clone();
    let ours = |j: &SlurmJob| !j.held || j.admin_comment.starts_with(HELD);
    // Running jobs first, where they run; then the waiting ones, in Slurm's order.
    let mut ids: Vec<(JobId, &SlurmJob)> = Vec::new();
    // Nodes of running jobs gpol cannot model take no new job (their room is not free).
    let mut busy: Vec<String> = Vec::new();
    for j in jobs.iter().filter(|j| j.is_running()) {
        let spec = j.request.job(&classes);
        let id = match s.submit(spec) {
            Ok(id) => id,
            Err(e) => {
                out.skipped.push(format!("job {} ({}): {e}; its nodes take no new job", j.id, j.request.name));
                busy.extend(j.nodes.iter().cloned());
                continue;
            }
        };
        let at: Vec<usize> = j.nodes.iter().filter_map(|n| s.cluster().node(n)).collect();
        let ran = now.saturating_sub(j.start_time).saturating_mul(1000);
        let history = History { ran_ms: ran, since_checkpoint_ms: ran, evictions: j.restarts };
        match s.start_on(id, &at, history) {
            Ok(()) => ids.push((id, j)),
            Err(e) => {
                out.skipped.push(format!("job {} ({}): {e}; its nodes take no new job", j.id, j.request.name));
                busy.extend(j.nodes.iter().cloned());
            }
        }
    }
    // Out of service only now: what runs there keeps its place.
    for name in unavailable.iter().chain(&busy) {
        if let Some(id) = s.cluster().node(name) {
            s.drain_node(id);
        }
    }
    for j in jobs.iter().filter(|j| j.is_pending() && ours(j)) {
        match s.submit(j.request.job(&classes)) {
            Ok(id) => ids.push((id, j)),
            Err(e) => out.skipped.push(format!("job {} ({}): {e}", j.id, j.request.name)),
        }
    }
    s.cycle();
    let view = crate::lua::Policy { program: &policy.program, hir: &policy.policy };
    let at_submission: Vec<String> = crate::submit::rules(view)
        .into_iter()
        .filter(|r| r.kind == "admit" && r.condition.is_ok())
        .map(|r| r.name)
        .collect();
    for (id, j) in ids {
        let name = j.request.name.clone();
        let was_running = j.is_running();
        let held_by_us = j.held && j.admin_comment.starts_with(HELD);
        match s.state(id) {
            jobs::State::Running if was_running => {}
            jobs::State::Running => {
                // Slurm pins a set of nodes (one replica each), sorted.
                let mut nodes: Vec<String> =
                    (s.job(id).slots.iter()).map(|sl| s.cluster().nodes[sl.node].name.clone()).collect();
                nodes.sort();
                nodes.dedup();
                let mut pinned = j.required_nodes.clone();
                pinned.sort();
                // Pinned first, then released: Slurm starts it where gpol placed it.
                if pinned != nodes {
                    out.actions.push(Action::Place { job: j.id, name: name.clone(), nodes });
                }
                if held_by_us {
                    out.actions.push(Action::Release { job: j.id, name });
                }
            }
            jobs::State::Pending(_) if was_running => {
                let reason = "evicted for a job the policy puts first".to_string();
                out.actions.push(Action::Requeue { job: j.id, name, reason });
            }
            jobs::State::Pending(Some(reason @ (Reason::Rule(_) | Reason::Quota(_)))) if !reason.is_filter() => {
                let text = explain::reason_detail(&s, id, &reason).unwrap_or_else(|| explain::state_text(&s, id));
                if !(held_by_us && j.admin_comment == format!("{HELD}{text}")) {
                    out.actions.push(Action::Hold { job: j.id, name, reason: text });
                }
            }
            // Waiting for room or its turn: a job held for a reason that no longer holds is
            // released — unless it waits for the loop to place it (`--hold-for-loop`).
            jobs::State::Pending(_) => {
                if held_by_us && j.admin_comment != WAITING {
                    out.actions.push(Action::Release { job: j.id, name });
                }
            }
            // Refused for good: cancelled — unless job_submit.lua carries the rule and let the
            // job through (Slurm filled in a default after submission, say): then held, for
            // a person to look at, rather than cancelled on a disagreement.
            jobs::State::Rejected(rule) => {
                let rule = policy.program.rule_name(rule);
                let reason = format!("refused by admit rule {rule}");
                if at_submission.contains(&rule) {
                    let reason = format!("{reason}, which job_submit.lua let through");
                    if j.admin_comment != format!("{HELD}{reason}") {
                        out.actions.push(Action::Hold { job: j.id, name, reason });
                    }
                } else {
                    out.actions.push(Action::Cancel { job: j.id, name, reason });
                }
            }
            jobs::State::Finished | jobs::State::Withdrawn => {}
        }
    }
    out
}
