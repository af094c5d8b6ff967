//! The scheduling loop's plan on Slurm states built by hand: placements pin jobs, quota
//! and admit holds carry their reason, refusals for good cancel, evictions requeue, and
//! a plan right after its apply is empty.

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::load::Checked;
use gpol_compiler::spec::NodeSpec;
use gpol_slurm::config::Memory;
use gpol_slurm::jobs::{QueueFrom, Request};
use gpol_slurm::loaded::LoadedPolicy;
use gpol_slurm::marks::{HELD, PLACED, WAITING};
use gpol_slurm::plan::{Action, State, TOP_PRIORITY, plan};
use gpol_slurm::squeue::SlurmJob;

const POLICY: &str = r#"policy t

queue org {
  queue a { limit 8 gpu }
  queue b { limit 8 gpu }
}

priority_class high = 100

admit small "at most 16 GPUs" { job.total_gpus <= 16 gpu }

preempt by_priority { when claimant.priority > victim.priority and victim.preemptible }
"#;

/// The plan for these jobs on the two nodes, `down` out of service.
fn plan_of(p: &CompiledPolicy, jobs: &[SlurmJob], down: &[&str], now: u64) -> gpol_slurm::plan::Plan {
    plan_counting(p, jobs, down, now, Memory::Counted)
}

/// [`plan_of`] with Slurm counting memory or not.
fn plan_counting(
    p: &CompiledPolicy,
    jobs: &[SlurmJob],
    down: &[&str],
    now: u64,
    memory: Memory,
) -> gpol_slurm::plan::Plan {
    let (nodes, unavailable) = (nodes(), down.iter().map(|d| d.to_string()).collect::<Vec<_>>());
    let state = State { nodes: &nodes, unavailable: &unavailable, jobs, now, queue_from: QueueFrom::Account, memory };
    plan(&LoadedPolicy::new(p.clone()), &state)
}

fn policy() -> CompiledPolicy {
    Checked::from_text("t.gpol", POLICY).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"))
}

fn nodes() -> Vec<NodeSpec> {
    (1..=2)
        .map(|i| {
            let mut n = NodeSpec::named(format!("n{i}"));
            (n.cards, n.cpu_milli, n.mem) = (8, 64_000, 512 << 30);
            n
        })
        .collect()
}

fn job(id: u64, account: &str, nodes: u32, gpus: u32, state: &str) -> SlurmJob {
    SlurmJob {
        id,
        state: state.into(),
        reason: String::new(),
        nodes: Vec::new(),
        required_nodes: Vec::new(),
        held: false,
        admin_comment: String::new(),
        submit_time: 1000 + id,
        start_time: 0,
        restarts: 0,
        priority: 1,
        request: Request {
            name: format!("job{id}"),
            user: "alice".into(),
            account: account.into(),
            tres_per_node: format!("gres:gpu:{gpus}"),
            nodes,
            cpus: Some(u64::from(nodes)),
            ..Request::default()
        },
    }
}

/// Carries out a plan on the hand-built state, as Slurm would show it afterwards.
fn apply(jobs: &mut Vec<SlurmJob>, actions: &[Action]) {
    for a in actions {
        match a {
            Action::Place { job, nodes, release, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.required_nodes, j.admin_comment) = (nodes.clone(), PLACED.into());
                j.held &= !release;
            }
            Action::Hold { job, reason, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.held, j.admin_comment) = (true, format!("{HELD}{reason}"));
            }
            Action::Release { job, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.held, j.admin_comment) = (false, String::new());
            }
            Action::Requeue { job, reason, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.state, j.nodes, j.restarts) = ("PENDING".into(), Vec::new(), j.restarts + 1);
                (j.held, j.admin_comment) = (true, format!("{WAITING} ({reason})"));
            }
            Action::Cancel { job, .. } => jobs.retain(|j| j.id != *job),
            Action::Prioritize { job, priority, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                j.priority = *priority;
            }
            Action::Account(_) => panic!("a job plan changes no account"),
        }
    }
}

#[test]
fn a_plan_places_holds_and_cancels_and_is_empty_once_applied() {
    let p = policy();
    let mut running = job(1, "a", 1, 8, "RUNNING");
    running.nodes = vec!["n1".into()];
    let mut jobs =
        vec![running, job(2, "a", 1, 1, "PENDING"), job(3, "b", 1, 4, "PENDING"), job(4, "b", 4, 8, "PENDING")];
    let first = plan_of(&p, &jobs, &[], 2000);
    assert!(first.skipped.is_empty(), "{:?}", first.skipped);
    let words: Vec<String> = first.actions.iter().map(Action::describe).collect();
    // Queue a is at its limit: job 2 is held, with the quota arithmetic.
    assert!(
        matches!(&first.actions[..], [Action::Hold { job: 2, reason, .. }, ..] if reason.contains("limit")),
        "{words:#?}"
    );
    assert!(
        first.actions.contains(&Action::Place {
            job: 3,
            name: "job3".into(),
            nodes: vec!["n2".into()],
            release: false
        }),
        "{words:#?}"
    );
    // `small` is in job_submit.lua, which let job 4 through (it was built by hand here):
    // held for a person to look at, not cancelled on the disagreement.
    assert!(
        first.actions.iter().any(|a| matches!(a, Action::Hold { job: 4, reason, .. }
            if reason.contains("small, which job_submit.lua let through"))),
        "{words:#?}"
    );
    apply(&mut jobs, &first.actions);
    let again = plan_of(&p, &jobs, &[], 2010);
    assert!(again.actions.is_empty(), "{:#?}", again.actions);
    // Job 1 finishes: job 2 is no longer held back, and the loop releases and places it.
    jobs.retain(|j| j.id != 1);
    let later = plan_of(&p, &jobs, &[], 2020);
    assert!(
        later
            .actions
            .iter()
            .any(|a| matches!(a, Action::Place { job: 2, nodes, release: true, .. } if nodes == &["n1"])),
        "{:#?}",
        later.actions
    );
    // Every action is carried out by scontrol or scancel on the job's id.
    for a in first.actions.iter().chain(&later.actions) {
        for c in a.commands() {
            assert!(c[0] == "scontrol" || c[0] == "scancel");
            assert!(c.iter().any(|w| w.contains(&a_id(a).to_string())));
        }
    }
}

fn a_id(a: &Action) -> u64 {
    a.job().expect("a job plan acts on jobs")
}

#[test]
fn a_higher_priority_job_requeues_a_preemptible_one() {
    let p = policy();
    let mut low = job(1, "a", 1, 8, "RUNNING");
    (low.nodes, low.start_time, low.request.comment) = (vec!["n1".into()], 100, "preemptible=true".into());
    let mut other = job(2, "b", 1, 8, "RUNNING");
    other.nodes = vec!["n2".into()];
    let mut high = job(3, "a", 1, 8, "PENDING");
    high.request.qos = "high".into();
    let mut jobs = vec![low, other, high];
    // Queue a's limit is full with the low job: the high one evicts it (same queue), and
    // the requeue says for whom and under which rule.
    let first = plan_of(&p, &jobs, &[], 5000);
    let requeue = first.actions.iter().find(|a| matches!(a, Action::Requeue { job: 1, .. })).expect("a requeue");
    assert_eq!(
        requeue,
        &Action::Requeue { job: 1, name: "job1".into(), reason: "evicted for job 3 (job3) under by_priority".into() }
    );
    assert!(
        first.actions.iter().any(|a| matches!(a, Action::Place { job: 3, nodes, .. } if nodes == &["n1"])),
        "{:#?}",
        first.actions
    );
    // Requeued and held for the loop, so Slurm cannot restart it in the room it made.
    let commands = requeue.commands();
    assert_eq!(commands[1], ["scontrol", "requeuehold", "1"]);
    // And held by root: the job's owner cannot release it.
    assert_eq!(commands[2], ["scontrol", "hold", "1"]);
    assert!(commands[0][3].starts_with(&format!("AdminComment={WAITING} (evicted for job 3")), "{commands:?}");
    apply(&mut jobs, &first.actions);
    // It waits for the loop, and now says why: job 3 takes queue a's limit.
    let again = plan_of(&p, &jobs, &[], 5010);
    assert_eq!(
        again.actions,
        [Action::Hold {
            job: 1,
            name: "job1".into(),
            reason:
                "waiting for the scheduling loop (queue `a` would exceed its gpu limit (holds 8, needs 8, limit 8))"
                    .into()
        }]
    );
    apply(&mut jobs, &again.actions);
    assert!(plan_of(&p, &jobs, &[], 5020).actions.is_empty());
    // Job 3 ends: the quota no longer holds job 1 back, and the loop places it.
    jobs.retain(|j| j.id != 3);
    let room = plan_of(&p, &jobs, &[], 5030);
    assert!(matches!(&room.actions[..], [Action::Place { job: 1, release: true, .. }]), "{:#?}", room.actions);
}

#[test]
fn jobs_wait_in_the_order_slurm_received_them() {
    // One node, room for one of two 8-card jobs of the same queue: the one submitted
    // first goes first, whatever order squeue lists them in.
    let p = policy();
    let mut later = job(2, "a", 1, 8, "PENDING");
    let mut earlier = job(3, "a", 1, 8, "PENDING");
    (later.submit_time, earlier.submit_time) = (1500, 1200);
    let placed = |jobs: &[SlurmJob]| {
        let out = plan_of(&p, jobs, &["n2"], 2000);
        let placed: Vec<u64> = (out.actions.iter())
            .filter_map(|a| match a {
                Action::Place { job, .. } => Some(*job),
                _ => None,
            })
            .collect();
        placed
    };
    assert_eq!(placed(&[later.clone(), earlier.clone()]), [3]);
    (later.submit_time, earlier.submit_time) = (1200, 1500);
    assert_eq!(placed(&[later, earlier]), [2]);
}

#[test]
fn queues_are_served_by_the_usage_their_running_jobs_have_accrued() {
    // Two queues each run 4 cards on n1 and wait with 4 more; n2 has room for one. The
    // queue whose job started later has used less, and goes first.
    let text = "policy t\n\nqueue org {\n  queue a { }\n  queue b { }\n}\n\nqueue_order { queue.usage asc }\n";
    let p = Checked::from_text("t.gpol", text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
    let state = |a_started: u64, b_started: u64| {
        let mut a = job(1, "a", 1, 4, "RUNNING");
        (a.nodes, a.submit_time, a.start_time) = (vec!["n1".into()], 100, a_started);
        let mut b = job(2, "b", 1, 4, "RUNNING");
        (b.nodes, b.submit_time, b.start_time) = (vec!["n1".into()], 100, b_started);
        let (mut a2, mut b2) = (job(3, "a", 1, 8, "PENDING"), job(4, "b", 1, 8, "PENDING"));
        (a2.submit_time, b2.submit_time) = (1900, 1900);
        vec![a, b, a2, b2]
    };
    // The other waits, first in line for Slurm.
    let first = |jobs: &[SlurmJob]| match &plan_of(&p, jobs, &[], 2000).actions[..] {
        [Action::Place { job, .. }, Action::Prioritize { priority: TOP_PRIORITY, .. }] => *job,
        other => panic!("{other:#?}"),
    };
    assert_eq!(first(&state(200, 1800)), 4, "b has run 200 s, a 1,800 s");
    assert_eq!(first(&state(1800, 200)), 3, "a has run 200 s, b 1,800 s");
}

#[test]
fn a_node_out_of_service_takes_no_new_job_and_keeps_its_running_ones() {
    let p = policy();
    let mut running = job(1, "a", 1, 4, "RUNNING");
    running.nodes = vec!["n1".into()];
    let jobs = vec![running, job(2, "b", 1, 4, "PENDING")];
    // With n1 drained, job 2 goes to n2 (it would share n1 otherwise: n1 comes first).
    let drained = plan_of(&p, &jobs, &["n1"], 100);
    assert!(drained.skipped.is_empty(), "{:?}", drained.skipped);
    assert_eq!(
        drained.actions,
        [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n2".into()], release: false }]
    );
    let both = plan_of(&p, &jobs, &[], 100);
    assert_eq!(both.actions, [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n1".into()], release: false }]);
}

#[test]
fn a_job_waiting_for_the_loop_stays_held_until_it_is_placed() {
    let p = policy();
    let mut full = job(1, "b", 2, 8, "RUNNING");
    full.nodes = vec!["n1".into(), "n2".into()];
    let mut waiting = job(2, "a", 1, 8, "PENDING");
    (waiting.held, waiting.admin_comment) = (true, WAITING.to_string());
    let mut jobs = vec![full, waiting];
    // No room: it waits, still held for the loop (Slurm must not start it by itself).
    let busy = plan_of(&p, &jobs, &[], 100);
    assert!(busy.actions.is_empty(), "{:#?}", busy.actions);
    // Room: pinned, then released.
    jobs.retain(|j| j.id != 1);
    let room = plan_of(&p, &jobs, &[], 110);
    assert!(matches!(&room.actions[..], [Action::Place { job: 2, release: true, .. }]), "{:#?}", room.actions);
    // Pinned and marked as placed before it is released: Slurm can only start it there.
    let commands = room.actions[0].commands();
    assert!(commands[0][3].starts_with("ReqNodeList="), "{commands:?}");
    assert_eq!(commands[1][3], format!("AdminComment={PLACED}"));
    assert_eq!(commands[2], ["scontrol", "release", "2"]);
}

#[test]
fn a_job_refused_for_good_by_a_rule_slurm_cannot_check_is_cancelled() {
    // A rule over what a Slurm request cannot carry (a MIG profile) is not in
    // job_submit.lua: the loop is where it refuses, for good.
    let text = "policy t\n\nadmit mig_only \"MIG jobs only\" { has(job.mig_profile) }\n";
    let p = Checked::from_text("t.gpol", text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
    let mut j = job(1, "", 1, 1, "PENDING");
    j.request.account.clear();
    let out = plan_of(&p, &[j], &[], 100);
    assert!(
        matches!(&out.actions[..], [Action::Cancel { job: 1, reason, .. }] if reason.contains("mig_only")),
        "{:#?}",
        out.actions
    );
}

#[test]
fn a_placed_job_waiting_for_its_nodes_to_empty_is_left_where_it_is() {
    // Job 1 was evicted for job 3 and is still ending on n1; job 3 is pinned there,
    // released, not started yet. The loop neither moves job 3 nor evicts job 1 again.
    let p = policy();
    let mut ending = job(1, "a", 1, 8, "COMPLETING");
    (ending.nodes, ending.admin_comment) = (vec!["n1".into()], format!("{WAITING} (evicted for job 3)"));
    let mut placed = job(3, "a", 1, 8, "PENDING");
    (placed.required_nodes, placed.admin_comment) = (vec!["n1".into()], PLACED.into());
    placed.request.qos = "high".into();
    let out = plan_of(&p, &[ending, placed], &[], 3000);
    assert!(out.actions.is_empty(), "{:#?}", out.actions);
    assert!(
        out.skipped.iter().any(|s| s.contains("job 3 (job3): waits for Slurm to start it on n1")),
        "{:?}",
        out.skipped
    );
}

#[test]
fn a_placed_job_whose_node_went_down_is_placed_afresh() {
    // Placed on n1 by an earlier pass; n1 went down before Slurm started it.
    let p = policy();
    let mut placed = job(1, "a", 1, 8, "PENDING");
    (placed.required_nodes, placed.admin_comment) = (vec!["n1".into()], PLACED.into());
    let out = plan_of(&p, &[placed.clone()], &["n1"], 100);
    assert_eq!(out.actions, [Action::Place { job: 1, name: "job1".into(), nodes: vec!["n2".into()], release: false }]);
    // With n1 in service it is left where it is.
    assert!(plan_of(&p, &[placed], &[], 100).actions.is_empty());
}

#[test]
fn jobs_slurm_may_start_itself_get_priorities_in_the_policys_order() {
    // Both nodes full. Queue a has run longer than b: b's waiting job comes first, then
    // a's two in the order they came.
    let text = "policy t\n\nqueue org {\n  queue a { }\n  queue b { }\n}\n\nqueue_order { queue.usage asc }\n";
    let p = Checked::from_text("t.gpol", text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
    let mut a = job(1, "a", 1, 8, "RUNNING");
    (a.nodes, a.start_time) = (vec!["n1".into()], 100);
    let mut b = job(2, "b", 1, 8, "RUNNING");
    (b.nodes, b.start_time) = (vec!["n2".into()], 1500);
    let mut jobs = vec![a, b, job(3, "a", 1, 8, "PENDING"), job(4, "a", 1, 8, "PENDING"), job(5, "b", 1, 8, "PENDING")];
    let out = plan_of(&p, &jobs, &[], 2000);
    let given: Vec<(u64, u64)> = (out.actions.iter())
        .map(|a| match a {
            Action::Prioritize { job, priority, .. } => (*job, *priority),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(given, [(5, TOP_PRIORITY), (3, TOP_PRIORITY - 1), (4, TOP_PRIORITY - 2)]);
    assert_eq!(out.actions[0].commands(), [["scontrol", "update", "JobId=5", "Priority=4000000000"]]);
    apply(&mut jobs, &out.actions);
    assert!(plan_of(&p, &jobs, &[], 2010).actions.is_empty());
}

#[test]
fn a_cancelled_job_is_told_why_where_its_user_reads_it() {
    // The rule's message, as job_submit.lua gives it, in the job's Comment (which its user
    // reads in `scontrol show job` and `squeue -o %k`) and AdminComment (which accounting
    // keeps), before the job is cancelled: scancel takes no reason.
    let text = "policy t\n\nadmit mig_only \"MIG jobs only\" { has(job.mig_profile) }\n";
    let p = Checked::from_text("t.gpol", text).compile(EngineKind::Interp).unwrap_or_else(|_| panic!("compiles"));
    let out = plan_of(&p, &[job(1, "a", 1, 1, "PENDING")], &[], 100);
    let [cancel @ Action::Cancel { reason, .. }] = &out.actions[..] else { panic!("{:#?}", out.actions) };
    assert_eq!(reason, "MIG jobs only (gpol admit mig_only)");
    let why = "gpol: cancelled: MIG jobs only (gpol admit mig_only)";
    assert_eq!(
        cancel.commands(),
        [
            vec!["scontrol", "update", "JobId=1", &format!("Comment={why}")],
            vec!["scontrol", "update", "JobId=1", &format!("AdminComment={why}")],
            vec!["scancel", "1"],
        ]
    );
    assert_eq!(cancel.describe(), "cancel job 1 (job1): MIG jobs only (gpol admit mig_only)");
}

#[test]
fn names_that_would_act_on_a_terminal_are_escaped_in_what_the_plan_says() {
    // A job whose name clears the screen and forges a line of the plan.
    let p = policy();
    let mut evil = job(2, "a", 1, 1, "PENDING");
    evil.request.name = "x\u{1b}[2J\nplace job 9 (root) on n1\u{202e}".into();
    let out = plan_of(&p, &[evil], &[], 100);
    assert!(!out.actions.is_empty(), "{:#?}", out.actions);
    for a in &out.actions {
        let words = a.describe();
        assert!(!words.chars().any(|c| c.is_control() || c == '\u{202e}'), "{words:?}");
        assert!(words.contains("(x\\u{1b}[2J\\u{a}place job 9 (root) on n1\\u{202e})"), "{words}");
        for c in a.commands() {
            let line: Vec<String> = c.iter().map(|w| gpol_slurm::command::shell_word(w)).collect();
            assert!(!line.concat().chars().any(char::is_control), "{line:?}");
        }
    }
    // A note about a job names it escaped too.
    let mut bad = job(3, "a", 1, 1, "PENDING");
    (bad.request.name, bad.request.tres_per_node) = ("y\n".into(), "gres:gpu:-2".into());
    let out = plan_of(&p, &[bad], &[], 100);
    assert_eq!(out.skipped, ["job 3 (y\\u{a}): `tres_per_node`: `gpu:-2`: a negative count"]);
}

#[test]
fn a_request_gpol_cannot_read_as_slurm_does_is_not_taken_and_said() {
    // GPUs of two types on each node (Slurm wants both on one node), and a negative count
    // (which Slurm reads as 2^64 less it): neither is read as some other request.
    let p = policy();
    let mut two = job(4, "a", 1, 1, "PENDING");
    two.request.tres_per_node = "gres:gpu:a100:2,gres:gpu:h100:4".into();
    let mut running = job(5, "b", 1, 1, "RUNNING");
    (running.nodes, running.request.tres_per_job) = (vec!["n2".into()], "gres:gpu:-1".into());
    let out = plan_of(&p, &[two, running, job(6, "b", 1, 8, "PENDING")], &[], 100);
    assert_eq!(
        out.skipped,
        [
            "job 4 (job4): `tres_per_node`: gpu of more than one type (a100, h100): gpol reads one",
            "job 5 (job5): `tres_per_job`: `gpu:-1`: a negative count; its nodes take no new job",
        ]
    );
    // The running job's node takes no new job: job 6 goes to n1.
    assert!(
        out.actions.iter().any(|a| matches!(a, Action::Place { job: 6, nodes, .. } if nodes == &["n1".to_string()])),
        "{:#?}",
        out.actions
    );
    assert!(out.actions.iter().all(|a| a.job() == Some(6)), "{:#?}", out.actions);
}

/// A 1-GPU job that asked for no memory: Slurm counts the whole node's (512 GiB) for it,
/// as it does under CR_Core_Memory with no DefMemPerCPU/Node/GPU.
fn whole_node_job(id: u64, state: &str) -> SlurmJob {
    let mut j = job(id, "a", 1, 1, state);
    j.request.mem_counted_mib = Some(512 << 10);
    j
}

#[test]
fn a_job_without_memory_counts_the_memory_slurm_gives_it() {
    let p = policy();
    let mut running = whole_node_job(1, "RUNNING");
    running.nodes = vec!["n1".into()];
    let waiting = whole_node_job(2, "PENDING");
    // Slurm gave job 1 all of n1's memory: job 2 cannot start beside it.
    let out = plan_of(&p, &[running.clone(), waiting.clone()], &[], 100);
    assert_eq!(out.actions, [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n2".into()], release: false }]);
    // Where Slurm allocates no memory, nothing holds n1's: job 2 may go beside job 1.
    let out = plan_counting(&p, &[running, waiting], &[], 100, Memory::NotCounted);
    assert_eq!(out.actions, [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n1".into()], release: false }]);
}

#[test]
fn a_placed_job_slurm_does_not_start_is_planned_again_and_says_why() {
    let p = policy();
    let mut running = whole_node_job(1, "RUNNING");
    running.nodes = vec!["n1".into()];
    // Pinned beside job 1 by a loop that did not count memory; Slurm keeps it waiting.
    let mut pinned = whole_node_job(2, "PENDING");
    (pinned.required_nodes, pinned.admin_comment, pinned.reason) =
        (vec!["n1".into()], PLACED.into(), "Resources".into());
    let out = plan_of(&p, &[running.clone(), pinned.clone()], &[], 100);
    assert_eq!(out.actions, [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n2".into()], release: false }]);
    // Where gpol still finds it fits, it stays, and the plan says what Slurm answered.
    let out = plan_counting(&p, &[running, pinned], &[], 100, Memory::NotCounted);
    assert!(out.actions.is_empty(), "{:#?}", out.actions);
    assert!(
        out.skipped
            .iter()
            .any(|s| s.contains("job 2 (job2): placed on n1, but Slurm does not start it there (reason: Resources)")),
        "{:?}",
        out.skipped
    );
}

/// A recorded plan keeps, by Slurm job id, the account of every turn its cycle took, as
/// decided: the actions are the same as unrecorded, and the same state has the same digest.
#[test]
fn a_recorded_plan_keeps_every_turn_by_slurm_job_id() {
    use gpol_runtime::account::Outcome;
    let p = policy();
    let mut running = job(1, "a", 1, 8, "RUNNING");
    running.nodes = vec!["n1".into()];
    let jobs = vec![running, job(2, "a", 1, 1, "PENDING"), job(3, "b", 1, 4, "PENDING")];
    let (nodes, unavailable) = (nodes(), Vec::new());
    let state = |now| State {
        nodes: &nodes,
        unavailable: &unavailable,
        jobs: &jobs,
        now,
        queue_from: QueueFrom::Account,
        memory: Memory::Counted,
    };
    let loaded = LoadedPolicy::new(p);
    let recorded = gpol_slurm::plan::plan_recorded(&loaded, &state(2000));
    let plain = plan(&loaded, &state(2000));
    assert_eq!(recorded.actions, plain.actions);
    assert!(plain.accounts.is_empty() && plain.inputs.is_empty());
    let turns: Vec<(u64, &Outcome)> = recorded.accounts.iter().map(|(id, a)| (*id, &a.outcome)).collect();
    // Queue b, holding nothing, comes first: job 3 starts on the free node; job 2's queue
    // is at its limit.
    assert!(
        matches!(&turns[..], [(3, Outcome::Placed { nodes }), (2, Outcome::Waits { reason, detail: Some(d) })]
            if nodes == &["n2"] && reason == "quota" && d.contains("limit 8")),
        "{turns:#?}"
    );
    assert!(recorded.inputs.starts_with("sha256:"));
    assert_eq!(gpol_slurm::plan::plan_recorded(&loaded, &state(2000)).inputs, recorded.inputs);
    assert_ne!(gpol_slurm::plan::plan_recorded(&loaded, &state(2001)).inputs, recorded.inputs);
}
