//! The hostile corpus: inputs written to break gpol — deep nesting, exponential
//! functions, huge numbers, non-regular files, malformed traces — each run through the
//! real `gpolc` binary under a CPU, memory and wall-clock limit. Every case must end in a
//! handled exit status (never a signal, a panic or a limit) with a message that names the
//! input (or, for a plan that succeeds, says what it must of the input's content). The
//! cases are listed in `tests/hostile/cases.toml`; inputs too big to commit are generated
//! here.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Limits every case runs under. They are a safety net for a regression (a hang, an
/// allocation storm), far above what a handled case needs, not a timing test.
const CPU_SECONDS: u32 = 60;
const WALL_SECONDS: u32 = 120;
const MEMORY_BYTES: u64 = 4 << 30;

#[derive(Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    /// What the input tries to break.
    name: String,
    /// The input: a path under tests/hostile/, or the name of a generator below.
    #[serde(default)]
    file: Option<String>,
    #[serde(default)]
    generate: Option<String>,
    /// gpolc's arguments; `{file}` is the input's path.
    run: Vec<String>,
    /// The exit status expected.
    exit: i32,
    /// Text that must appear in stdout or stderr.
    #[serde(default)]
    expect: Vec<String>,
    /// Whether the output must name the input: always, but for a run that succeeds and
    /// whose output is about the input's content (a plan of a job list).
    #[serde(default = "named")]
    named: bool,
    /// Text that must not appear (raw control characters, say).
    #[serde(default)]
    absent: Vec<String>,
}

fn named() -> bool {
    true
}

/// Inputs too large to commit, made from a few lines of text.
fn generate(kind: &str, dir: &Path) -> PathBuf {
    let (name, text) = match kind {
        "inline_40_levels" => {
            let mut t = String::from("policy p\n\nfn f0(x: number) -> number { x + 1 }\n");
            for i in 1..=40 {
                t += &format!("fn f{i}(x: number) -> number {{ f{}(x) + f{}(x) }}\n", i - 1, i - 1);
            }
            t += "score s { f40(job.priority) }\n";
            ("inline_40_levels.gpol", t)
        }
        "const_40_levels" => {
            let mut t = String::from("policy p\n\nfn f0(x: number) -> number { x + 1 }\n");
            for i in 1..=40 {
                t += &format!("fn f{i}(x: number) -> number {{ f{}(x) + f{}(x) }}\n", i - 1, i - 1);
            }
            t += "const c = f40(1)\nscore s { c }\n";
            ("const_40_levels.gpol", t)
        }
        "sibling_queues" => {
            let mut t = String::from("policy p\n\nqueue root {\n");
            for i in 0..100_000 {
                t += &format!("  queue q{i} {{ guarantee 1 gpu }}\n");
            }
            t += "}\n";
            ("sibling_queues.gpol", t)
        }
        "long_error_line" => {
            let rules: String = (0..1_000).map(|i| format!("filter f{i} {{ node.gpu_mem > 40 }} ")).collect();
            ("long_error_line.gpol", format!("policy p\n{rules}\n"))
        }
        "endless_line" => {
            // One 8 MiB line: a streamed trace reads lines of at most 1 MiB.
            let row = format!("name,arrival\n{},0\n", "x".repeat(8 << 20));
            ("endless_line.csv", row)
        }
        "squeue_hostlist_bomb" => {
            // 2,000 running jobs, each on `n[0-99999]`: 600 KB of `squeue --json` that would
            // expand to 200 million host names.
            let job = |i: u32| {
                format!(
                    r#"{{"job_id": {i}, "name": "bomb-{i}", "user_name": "mallory", "account": "a",
 "partition": "gpu", "job_state": "RUNNING", "state_reason": "None", "nodes": "n[0-99999]",
 "required_nodes": "", "node_count": 100000, "tres_per_node": "gres:gpu:8", "cpus": 100000,
 "submit_time": 1000, "start_time": 1001, "priority": 1, "comment": "", "admin_comment": ""}}"#
                )
            };
            let jobs: Vec<String> = (1..=2000).map(job).collect();
            ("squeue_hostlist_bomb.json", format!("{{\"errors\": [], \"jobs\": [\n{}\n]}}\n", jobs.join(",\n")))
        }
        "topology_hostlist_bomb" => {
            // 100 switches of 100,000 nodes each, every name new: 10 million names.
            let lines: Vec<String> = (0..100).map(|i| format!("SwitchName=s{i} Nodes=r{i}n[0-99999]")).collect();
            ("topology_hostlist_bomb.conf", lines.join("\n") + "\n")
        }
        other => panic!("no generator named {other}"),
    };
    let path = dir.join(name);
    std::fs::write(&path, text).expect("the temporary directory is writable");
    path
}

fn run(case: &Case, root: &Path, tmp: &Path) -> Result<(), String> {
    let input = match (&case.file, &case.generate) {
        (Some(f), None) => root.join(f),
        (None, Some(g)) => generate(g, tmp),
        _ => return Err("give exactly one of file and generate".into()),
    };
    let shown = input.file_name().and_then(|n| n.to_str()).ok_or("the input has a name")?.to_owned();
    let args: Vec<String> = case.run.iter().map(|a| a.replace("{file}", &input.display().to_string())).collect();
    let out = Command::new("timeout")
        .args(["-s", "KILL", &WALL_SECONDS.to_string()])
        .arg("prlimit")
        .arg(format!("--cpu={CPU_SECONDS}"))
        .arg(format!("--as={MEMORY_BYTES}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_gpolc"))
        .args(&args)
        .args(["--color", "never"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| format!("cannot run gpolc: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let short: String = text.chars().take(2_000).collect();
    match out.status.code() {
        Some(c) if c == case.exit => {}
        Some(c) => return Err(format!("exit {c}, expected {}:\n{short}", case.exit)),
        None => return Err(format!("killed by a signal or a limit ({:?}):\n{short}", out.status)),
    }
    let name = case.named.then_some(&shown);
    for want in name.into_iter().chain(&case.expect) {
        if !text.contains(want.as_str()) {
            return Err(format!("output lacks {want:?}:\n{short}"));
        }
    }
    for unwanted in &case.absent {
        if text.contains(unwanted.as_str()) {
            return Err(format!("output holds {unwanted:?}:\n{short}"));
        }
    }
    Ok(())
}

#[test]
fn every_hostile_input_is_handled_and_named() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile");
    let manifest = std::fs::read_to_string(root.join("cases.toml")).expect("tests/hostile/cases.toml");
    let cases: Cases = toml::from_str(&manifest).expect("cases.toml parses");
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let failures: Vec<String> =
        cases.case.iter().filter_map(|c| run(c, &root, tmp.path()).err().map(|e| format!("{}: {e}", c.name))).collect();
    assert!(
        failures.is_empty(),
        "{} of {} hostile cases failed:\n\n{}",
        failures.len(),
        cases.case.len(),
        failures.join("\n\n")
    );
}
