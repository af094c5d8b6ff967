//! Traces read from files: checked in one pass before any run (every error names its
//! line), streamed when their rows are in arrival order, and refused if they change
//! between the check and a run.

use gpol_compiler::engine::EngineKind;
use gpol_sim::cluster_file::parse_toml;
use gpol_sim::input::InputError;
use gpol_sim::{Config, Control, SimError, Workload, open_trace, run};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

const MAX: u64 = 1 << 30;

fn file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("t.csv");
    std::fs::write(&path, text).expect("the trace is written");
    path
}

fn open(text: &str) -> Result<Workload, InputError> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    open_trace(&file(&dir, text), "t.csv", MAX, &Default::default(), &|_| {})
}

fn simulate(policy: &str, w: &Workload) -> Result<gpol_sim::report::Report, SimError> {
    let p = gpol_compiler::load::compile_text("p.gpol", policy, EngineKind::Jit).expect("the policy compiles");
    let c =
        parse_toml("[[pool]]\nname = \"n\"\ngpu_model = \"a100\"\ngpus = 8\ncpu = 64\nmem = \"256GiB\"\n", "c.toml")
            .expect("valid");
    let cancel = AtomicBool::new(false);
    run(&p, &c, w, &Config::default(), &Control::new(&|_| {}, &cancel))
}

#[test]
fn a_name_used_twice_is_found_with_both_lines() {
    let mut text = String::from("name,arrival\n");
    for i in 0..1000 {
        text.push_str(&format!("job-{i},{i}\n"));
    }
    text.push_str("job-17,2000\n");
    let e = open(&text).expect_err("a name twice");
    assert_eq!(e.to_string(), "t.csv:1002: field `name`: job `job-17` is named twice (first on line 19)");
}

#[test]
fn rows_out_of_order_are_held_and_sorted() {
    let w = open("name,arrival,duration,gpus\nlate,60,10,8\nearly,0,10,8\n").expect("valid");
    let names: Vec<String> = w.held().expect("held").iter().map(|j| j.job.name.clone()).collect();
    assert_eq!(names, ["early", "late"]);
    let r = simulate("policy p\n", &w).expect("runs");
    assert_eq!((r.jobs.finished, r.makespan_s), (2, 70.0));
}

#[test]
fn every_row_is_checked_before_any_run() {
    // The last row names a queue the policy lacks: the run refuses before it starts.
    let policy = "policy p\n\nqueue team {\n  queue a {}\n  queue b {}\n}\n";
    let w = open("name,arrival,queue\nx,0,a\ny,1,b\nz,2,c\n").expect("the trace itself is valid");
    let e = simulate(policy, &w).expect_err("an unknown queue");
    assert!(e.to_string().starts_with("t.csv:4: field `queue`: job `z`: the policy has no queue `c`"), "{e}");
    let e = open("name,arrival,gpus\nx,0,1\ny,1,100\n").expect_err("too many cards");
    assert_eq!(e.line, Some(3));
}

#[test]
fn a_trace_changed_after_its_check_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = file(&dir, "name,arrival,duration,gpus\na,0,10,1\nb,5,10,1\n");
    let w = open_trace(&path, "t.csv", MAX, &Default::default(), &|_| {}).expect("valid");
    assert_eq!(simulate("policy p\n", &w).expect("runs").jobs.finished, 2);
    std::fs::write(&path, "name,arrival,duration,gpus\na,0,10,1\nb,5,10,1\nc,6,10,1\n").expect("rewritten");
    let e = simulate("policy p\n", &w).expect_err("the file changed");
    assert!(e.to_string().contains("the trace changed while it was being read"), "{e}");
}
