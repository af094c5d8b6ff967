//! What the scheduling loop changes in Slurm: Slurm's state (nodes, and the jobs `squeue`
//! reports) given to a gpol scheduler of the policy, one cycle run, and its decisions
//! turned into Slurm actions — a job placed is pinned to its nodes (`ReqNodeList`), a job an
//! admit rule or the quota holds back is held with the reason in its `AdminComment`, a job
//! evicted is requeued, a job refused for good is cancelled (the rule's message in its
//! `Comment`, where its user reads it). Idempotent by construction:
//! what Slurm already shows (a job pinned to the same nodes, held for the same reason)
//! is no action, so a plan right after its apply is empty; a job held by the loop for a
//! reason that no longer holds is released.

use crate::command::printable;
use crate::jobs::{QueueFrom, Reading};
use crate::loaded::LoadedPolicy;
use crate::marks::{CANCELLED, HELD, PLACED, WAITING};
use crate::squeue::SlurmJob;
use gpol_compiler::spec::{History, NodeSpec};
use gpol_runtime::Scheduler;
use gpol_runtime::account::Account;
use gpol_runtime::explain;
use gpol_runtime::{JobId, Reason};
use gpol_runtime::{WallClock, unix_ms_of_secs};

/// One change to make in Slurm.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Pin a waiting job to the nodes gpol places it on, and release it if it is held.
    Place { job: u64, name: String, nodes: Vec<String>, release: bool },
    /// Hold a waiting job, saying why.
    Hold { job: u64, name: String, reason: String },
    /// Release a job the loop held for a reason that no longer holds.
    Release { job: u64, name: String },
    /// Requeue a running job gpol evicts, held until gpol places it again.
    Requeue { job: u64, name: String, reason: String },
    /// Cancel a job an admit rule refuses for good, its user told why (`reason`: the
    /// rule's message, as `job_submit.lua` gives it).
    Cancel { job: u64, name: String, reason: String },
    /// Give a job Slurm may start by itself its place in gpol's order.
    Prioritize { job: u64, name: String, priority: u64 },
    /// Mend the association tree where it differs from the policy's queue tree.
    Account(crate::associations::Change),
}

/// The priority the loop gives the waiting job gpol would start first; each next job one
/// less. Slurm's priorities are 32-bit (0 means held); this is above any site factor
/// job_submit.lua gives (at most 2,000,000,000) plus Slurm's own factors at usual weights,
/// so jobs the loop has ordered come before jobs submitted since its last pass.
pub const TOP_PRIORITY: u64 = 4_000_000_000;

impl Action {
    /// The job it acts on (none for an account).
    pub fn job(&self) -> Option<u64> {
        match self {
            Action::Place { job, .. }
            | Action::Hold { job, .. }
            | Action::Release { job, .. }
            | Action::Requeue { job, .. }
            | Action::Cancel { job, .. }
            | Action::Prioritize { job, .. } => Some(*job),
            Action::Account(_) => None,
        }
    }

    /// The commands that carry it out, in order (argv each).
    pub fn commands(&self) -> Vec<Vec<String>> {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        let comment =
            |job: u64, text: &str| v(&["scontrol", "update", &format!("JobId={job}"), &format!("AdminComment={text}")]);
        match self {
            // Pinned first, then released: Slurm starts it where gpol placed it.
            Action::Place { job, nodes, release, .. } => {
                let pin = format!("ReqNodeList={}", nodes.join(","));
                let mut c = vec![v(&["scontrol", "update", &format!("JobId={job}"), &pin]), comment(*job, PLACED)];
                if *release {
                    c.push(v(&["scontrol", "release", &job.to_string()]));
                }
                c
            }
            Action::Hold { job, reason, .. } => {
                vec![comment(*job, &format!("{HELD}{reason}")), v(&["scontrol", "hold", &job.to_string()])]
            }
            // Released first: a failure leaves the job held and marked as the loop's.
            Action::Release { job, .. } => vec![v(&["scontrol", "release", &job.to_string()]), comment(*job, "")],
            // Requeued and held: the job waits for the loop to place it again, so Slurm
            // cannot restart it on the room its eviction made for another. `requeuehold`
            // leaves a hold the job's owner may release; `hold` by root makes it the
            // administrator's.
            Action::Requeue { job, reason, .. } => vec![
                comment(*job, &format!("{WAITING} ({reason})")),
                v(&["scontrol", "requeuehold", &job.to_string()]),
                v(&["scontrol", "hold", &job.to_string()]),
            ],
            // Why, where its user reads it — the job's `Comment` (`scontrol show job`,
            // `squeue -o %k`) and its `AdminComment` (which accounting keeps: `sacct -o
            // AdminComment`) — then cancelled: scancel takes no reason. (On 22.05 both fields
            // are shown to the job's owner; tested as an unprivileged user.)
            Action::Cancel { job, reason, .. } => {
                let text = format!("{CANCELLED}{reason}");
                vec![
                    v(&["scontrol", "update", &format!("JobId={job}"), &format!("Comment={text}")]),
                    comment(*job, &text),
                    v(&["scancel", &job.to_string()]),
                ]
            }
            Action::Prioritize { job, priority, .. } => {
                vec![v(&["scontrol", "update", &format!("JobId={job}"), &format!("Priority={priority}")])]
            }
            Action::Account(change) => vec![change.command()],
        }
    }

    /// The action in words, what came from Slurm or a user (names, reasons) escaped so
    /// that it cannot act on a terminal ([`crate::command::printable`]).
    pub fn describe(&self) -> String {
        crate::command::printable(&self.words())
    }

    fn words(&self) -> String {
        match self {
            Action::Place { job, name, nodes, .. } => format!("place job {job} ({name}) on {}", nodes.join(", ")),
            Action::Hold { job, name, reason } => format!("hold job {job} ({name}): {reason}"),
            Action::Release { job, name } => format!("release job {job} ({name}): what held it no longer does"),
            Action::Requeue { job, name, reason } => format!("requeue job {job} ({name}): {reason}"),
            Action::Cancel { job, name, reason } => format!("cancel job {job} ({name}): {reason}"),
            Action::Prioritize { job, name, priority } => {
                format!("give job {job} ({name}) priority {priority}: its place in the policy's order")
            }
            Action::Account(change) => change.describe(),
        }
    }
}

/// A plan: the actions, and what of Slurm's state gpol could not take (with why).
#[derive(Debug, Default)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub skipped: Vec<String>,
    /// With [`plan_recorded`]: each turn of the cycle as it was decided, by Slurm job id.
    pub accounts: Vec<(u64, Account)>,
    /// With [`plan_recorded`]: the digest of the state planned for (`sha256:…`).
    pub inputs: String,
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
    /// Whether queues are accounts or partitions.
    pub queue_from: QueueFrom,
    /// Whether Slurm allocates memory (`scontrol show config`).
    pub memory: crate::config::Memory,
}

/// The plan for Slurm's state.
pub fn plan(loaded: &LoadedPolicy, state: &State<'_>) -> Plan {
    plan_with(loaded, state, false)
}

/// [`plan`], with the account of every turn its cycle took, as it was decided (what a
/// decision log records).
pub fn plan_recorded(loaded: &LoadedPolicy, state: &State<'_>) -> Plan {
    plan_with(loaded, state, true)
}

fn plan_with(loaded: &LoadedPolicy, state: &State<'_>, record: bool) -> Plan {
    let policy = loaded.compiled();
    let State { nodes, unavailable, jobs, now, queue_from, memory } = *state;
    let mut out = Plan::default();
    if record {
        // Everything read is plain lists and values: its `Debug` text is the same for the
        // same state.
        let read = format!("{:?}", (nodes, unavailable, jobs, now, queue_from, memory));
        out.inputs = gpol_runtime::decision_log::digest(read.as_bytes());
    }
    let mut s = Scheduler::new(policy.clone());
    for n in nodes {
        if let Err(e) = s.add_node(n) {
            out.skipped.push(printable(&format!("node {}: {e}", n.name)));
        }
    }
    let classes = policy.policy.priority_classes.iter().map(|(c, _)| c.clone()).collect();
    let (mut reading, warning) = Reading::new(classes, nodes, queue_from);
    reading.memory = memory;
    out.skipped.extend(warning);
    let ours = |j: &SlurmJob| !j.held || j.admin_comment.starts_with(HELD);
    let taken: Vec<&SlurmJob> = jobs.iter().filter(|j| j.is_running() || (j.is_pending() && ours(j))).collect();
    // Placed by an earlier pass and released, not started yet: Slurm is about to start it
    // on its nodes, so it counts as started there (else the loop could change its mind
    // before Slurm acts, and place another job in its room).
    // (Not when a node it is pinned to went out of service since: it is placed afresh.)
    // A job pinned to nodes that Slurm then finds too full (its reason `Resources`) while
    // no job is ending there is not in flight: gpol's model and Slurm's count of those
    // nodes disagree, so it is planned again, and if gpol still places it there the plan
    // says what Slurm answered. (A job waiting for an evicted job to end is in flight.)
    let ending: std::collections::HashSet<&str> = (jobs.iter())
        .filter(|j| j.state == "COMPLETING" || j.admin_comment.starts_with(WAITING))
        .flat_map(|j| j.nodes.iter().map(String::as_str))
        .collect();
    let refused_by_slurm = |j: &SlurmJob| {
        j.is_pending()
            && j.admin_comment == PLACED
            && j.reason == "Resources"
            && j.required_nodes.iter().all(|n| !ending.contains(n.as_str()))
    };
    let in_flight = |j: &SlurmJob| {
        j.is_pending()
            && !j.held
            && j.admin_comment == PLACED
            && !refused_by_slurm(j)
            && !j.required_nodes.is_empty()
            && j.required_nodes.iter().all(|n| !unavailable.contains(n))
    };
    // The scheduler's clock replays Slurm's history: each job is submitted when Slurm says
    // it was and running jobs start when they did, so waiting times, submission order and
    // usage (what each queue's running jobs have used since they started) are Slurm's.
    // The clock starts at the earliest submission, within the clock's limit.
    let span_s = gpol_compiler::limits::MAX_CLOCK_MS / 1000;
    let base = taken.iter().map(|j| j.submit_time).min().unwrap_or(now).clamp(now.saturating_sub(span_s), now);
    let wall = WallClock::at_unix_secs(base);
    // A time before clock 0 reads as 0; one after `now` (clocks disagree) as `now`.
    let at_ms = |t: u64| wall.reading(unix_ms_of_secs(t.min(now)));
    s.start_wall_clock(wall);
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, j) in taken.iter().enumerate() {
        let submitted = if j.is_running() { j.submit_time.min(j.start_time) } else { j.submit_time };
        events.push((at_ms(submitted), false, i));
        if j.is_running() {
            events.push((at_ms(j.start_time), true, i));
        } else if in_flight(j) {
            events.push((at_ms(now), true, i));
        }
    }
    // Submissions before starts at the same second, each in Slurm's job order.
    events.sort_by_key(|&(t, start, i)| (t, start, taken[i].id));
    let mut ids: Vec<Option<JobId>> = vec![None; taken.len()];
    // Nodes of running jobs gpol cannot model take no new job (their room is not free).
    let mut busy: Vec<String> = Vec::new();
    for (t, start, i) in events {
        let j = taken[i];
        // Within the clock's limit by construction (`at_ms` is at most its span).
        let _ = s.advance(t.saturating_sub(s.now_ms()));
        let skip = |out: &mut Plan, busy: &mut Vec<String>, e: &dyn std::fmt::Display| {
            if j.is_running() {
                out.skipped
                    .push(printable(&format!("job {} ({}): {e}; its nodes take no new job", j.id, j.request.name)));
                busy.extend(j.nodes.iter().cloned());
            } else {
                out.skipped.push(printable(&format!("job {} ({}): {e}", j.id, j.request.name)));
            }
        };
        match (start, ids[i]) {
            // A request gpol cannot read as Slurm does (a negative count, GPUs of two types)
            // is not taken, said in the plan.
            (false, _) => match j.request.job(&reading) {
                Ok(job) => match s.submit(job) {
                    Ok(id) => ids[i] = Some(id),
                    Err(e) => skip(&mut out, &mut busy, &e),
                },
                Err(e) => skip(&mut out, &mut busy, &e),
            },
            (true, Some(id)) => {
                let on = if j.is_running() { &j.nodes } else { &j.required_nodes };
                let at: Vec<usize> = on.iter().filter_map(|n| s.cluster().node(n)).collect();
                let history = History { ran_ms: 0, since_checkpoint_ms: 0, evictions: j.restarts };
                if let Err(e) = s.start_on(id, &at, history) {
                    s.withdraw(id);
                    ids[i] = None;
                    if j.is_running() {
                        skip(&mut out, &mut busy, &e);
                    } else {
                        // Its nodes are not free yet (a job evicted for it still ends there).
                        out.skipped.push(printable(&format!(
                            "job {} ({}): waits for Slurm to start it on {}",
                            j.id,
                            j.request.name,
                            on.join(",")
                        )));
                    }
                }
            }
            (true, None) => {}
        }
    }
    let _ = s.advance(at_ms(now).saturating_sub(s.now_ms()));
    // Out of service only now: what runs there keeps its place.
    for name in unavailable.iter().chain(&busy) {
        if let Some(id) = s.cluster().node(name) {
            s.drain_node(id);
        }
    }
    let (decided, accounts) = if record { s.cycle_recorded() } else { (s.cycle(), Vec::new()) };
    // Why each evicted job was evicted: for whom, under which rule.
    let slurm_id = |id: JobId| taken.iter().zip(&ids).find(|(_, i)| **i == Some(id)).map_or(0, |(j, _)| j.id);
    if record {
        let slurm: std::collections::HashMap<JobId, u64> =
            ids.iter().zip(&taken).filter_map(|(id, j)| Some(((*id)?, j.id))).collect();
        out.accounts = s.turns().iter().map(|id| slurm.get(id).copied().unwrap_or(0)).zip(accounts).collect();
    }
    let mut evicted: std::collections::HashMap<JobId, String> = std::collections::HashMap::new();
    for e in decided {
        if let gpol_runtime::Event::Evicted { job, by, rule, .. } = e {
            let claimant = format!("job {} ({})", slurm_id(by), s.job(by).ask.name);
            evicted.insert(job, explain::eviction_text(&s, &claimant, rule));
        }
    }
    let at_submission = loaded.enforced_at_submission();
    for (id, j) in ids.iter().zip(&taken).filter_map(|(id, j)| Some(((*id)?, *j))) {
        let name = j.request.name.clone();
        let was_running = j.is_running();
        let held_by_us = j.held && j.admin_comment.starts_with(HELD);
        // A hold job_submit.lua put on is the user's kind (Slurm makes it so for a job a
        // user submits), which its owner may release: the loop makes it the administrator's.
        let user_held = j.reason == "JobHeldUser";
        // Held until the loop places it (`--hold-for-loop`, or evicted): whatever else
        // holds it back is said inside that hold, which is kept.
        let for_loop = held_by_us && j.admin_comment.starts_with(WAITING);
        let held_for = |text: String| if for_loop { format!("{} ({text})", &WAITING[HELD.len()..]) } else { text };
        match s.state(id) {
            gpol_runtime::State::Running if was_running || in_flight(j) => {}
            // Evicted before Slurm started it: held again.
            gpol_runtime::State::Pending(_) if in_flight(j) => {
                let reason = evicted.remove(&id).unwrap_or_else(|| "evicted".to_string());
                let reason = format!("{} ({reason})", &WAITING[HELD.len()..]);
                out.actions.push(Action::Hold { job: j.id, name, reason });
            }
            gpol_runtime::State::Running => {
                // Slurm pins a set of nodes (one replica each), sorted.
                let mut nodes: Vec<String> =
                    (s.job(id).holding.slots.iter()).map(|sl| s.cluster().nodes[sl.node].name.clone()).collect();
                nodes.sort();
                nodes.dedup();
                let mut pinned = j.required_nodes.clone();
                pinned.sort();
                if pinned != nodes || j.admin_comment != PLACED || held_by_us {
                    out.actions.push(Action::Place { job: j.id, name, nodes, release: held_by_us });
                } else if refused_by_slurm(j) {
                    out.skipped.push(printable(&format!(
                        "job {} ({name}): placed on {}, but Slurm does not start it there (reason: {}): \
                         Slurm counts those nodes fuller than gpol does",
                        j.id,
                        nodes.join(", "),
                        j.reason
                    )));
                }
            }
            gpol_runtime::State::Pending(_) if was_running => {
                let reason = evicted.remove(&id).unwrap_or_else(|| "evicted".to_string());
                out.actions.push(Action::Requeue { job: j.id, name, reason });
            }
            gpol_runtime::State::Pending(Some(reason @ (Reason::Rule(_) | Reason::Quota(_))))
                if !reason.is_filter() =>
            {
                let text = explain::reason_detail(&s, id, &reason).unwrap_or_else(|| explain::state_text(&s, id));
                let reason = held_for(text);
                if !(held_by_us && !user_held && j.admin_comment == format!("{HELD}{reason}")) {
                    out.actions.push(Action::Hold { job: j.id, name, reason });
                }
            }
            // Waiting for room or its turn: a job held for a reason that no longer holds is
            // released — or, held for the loop, keeps only that hold.
            gpol_runtime::State::Pending(_) => {
                if for_loop && (j.admin_comment != WAITING || user_held) {
                    out.actions.push(Action::Hold { job: j.id, name, reason: WAITING[HELD.len()..].to_string() });
                } else if held_by_us && !for_loop {
                    out.actions.push(Action::Release { job: j.id, name });
                }
            }
            // Refused for good: cancelled — unless job_submit.lua carries the rule and let the
            // job through (Slurm filled in a default after submission, say): then held, for
            // a person to look at, rather than cancelled on a disagreement.
            gpol_runtime::State::Rejected(rule) => {
                let reason = explain::refusal_text(&s, rule);
                let rule = policy.program.rule_name(rule);
                if at_submission.contains(&rule) {
                    let reason = format!("{reason}, which job_submit.lua let through");
                    if j.admin_comment != format!("{HELD}{reason}") {
                        out.actions.push(Action::Hold { job: j.id, name, reason });
                    }
                } else {
                    // The rule's message, as job_submit.lua would have given it.
                    let admit = policy.program.admit.iter().find(|a| a.name == rule);
                    let message = admit.and_then(|a| a.reason.clone()).unwrap_or(reason);
                    let reason = format!("{message} (gpol admit {rule})");
                    out.actions.push(Action::Cancel { job: j.id, name, reason });
                }
            }
            gpol_runtime::State::Finished | gpol_runtime::State::Withdrawn => {}
        }
    }
    // Jobs Slurm may start by itself (waiting, not held, not placed by the loop) are
    // ranked as gpol would start them: Slurm's scheduler then follows the policy's order.
    let by_id: std::collections::HashMap<JobId, &SlurmJob> =
        ids.iter().zip(&taken).filter_map(|(id, j)| Some(((*id)?, *j))).collect();
    let held_now: std::collections::HashSet<u64> = (out.actions.iter())
        .filter_map(|a| match a {
            Action::Hold { job, .. } | Action::Cancel { job, .. } | Action::Place { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    let free = s
        .waiting_order()
        .into_iter()
        .filter_map(|id| by_id.get(&id).copied())
        .filter(|j| j.is_pending() && !j.held && !in_flight(j) && !held_now.contains(&j.id));
    for (rank, j) in free.enumerate() {
        let priority = TOP_PRIORITY.saturating_sub(rank as u64).max(1);
        if j.priority != priority {
            out.actions.push(Action::Prioritize { job: j.id, name: j.request.name.clone(), priority });
        }
    }
    out
}
