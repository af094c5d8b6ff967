//! The scheduling loop's plan on Slurm states built by hand: placements pin jobs, quota
//! and admit holds carry their reason, refusals for good cancel, evictions requeue, and
//! a plan right after its apply is empty.

use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::load::Checked;
use gpol_compiler::spec::NodeSpec;
use gpol_slurm::jobs::Request;
use gpol_slurm::plan::{Action, HELD, State, WAITING, plan};
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
    let (nodes, unavailable) = (nodes(), down.iter().map(|d| d.to_string()).collect::<Vec<_>>());
    plan(p, &State { nodes: &nodes, unavailable: &unavailable, jobs, now })
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
            Action::Place { job, nodes, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                j.required_nodes = nodes.clone();
            }
            Action::Hold { job, reason, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.held, j.admin_comment) = (true, format!("{HELD}{reason}"));
            }
            Action::Release { job, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.held, j.admin_comment) = (false, String::new());
            }
            Action::Requeue { job, .. } => {
                let j = jobs.iter_mut().find(|j| j.id == *job).expect("the job");
                (j.state, j.nodes, j.restarts) = ("PENDING".into(), Vec::new(), j.restarts + 1);
            }
            Action::Cancel { job, .. } => jobs.retain(|j| j.id != *job),
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
        first.actions.contains(&Action::Place { job: 3, name: "job3".into(), nodes: vec!["n2".into()] }),
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
    assert!(later.actions.contains(&Action::Release { job: 2, name: "job2".into() }), "{:#?}", later.actions);
    assert!(
        later.actions.iter().any(|a| matches!(a, Action::Place { job: 2, nodes, .. } if nodes == &["n1"])),
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
    match a {
        Action::Place { job, .. }
        | Action::Hold { job, .. }
        | Action::Release { job, .. }
        | Action::Requeue { job, .. }
        | Action::Cancel { job, .. } => *job,
    }
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
    // Queue a's limit is full with the low job: the high one evicts it (same queue).
    let first = plan_of(&p, &jobs, &[], 5000);
    assert!(first.actions.iter().any(|a| matches!(a, Action::Requeue { job: 1, .. })), "{:#?}", first.actions);
    assert!(
        first.actions.iter().any(|a| matches!(a, Action::Place { job: 3, nodes, .. } if nodes == &["n1"])),
        "{:#?}",
        first.actions
    );
    apply(&mut jobs, &first.actions);
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
    assert_eq!(drained.actions, [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n2".into()] }]);
    let both = plan_of(&p, &jobs, &[], 100);
    assert_eq!(both.actions, [Action::Place { job: 2, name: "job2".into(), nodes: vec!["n1".into()] }]);
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
    assert!(
        matches!(&room.actions[..], [Action::Place { job: 2, .. }, Action::Release { job: 2, .. }]),
        "{:#?}",
        room.actions
    );
    // A release clears the mark only once the job is released.
    let commands = room.actions[1].commands();
    assert_eq!(commands[0], ["scontrol", "release", "2"]);
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
