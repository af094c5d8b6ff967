//! `gpolc diff` end to end: exit codes, the three formats, `REV:PATH` sides and the CI
//! job (`--base`) in a temporary git repository.

use assert_cmd::Command;
use std::path::Path;

const OLD: &str = "policy p\n\nqueue team {}\n\nadmit size { job.total_gpus <= 8 gpu }\n";
const NEW: &str = "policy p\n\nqueue team {}\n\nadmit size { job.total_gpus <= 4 gpu }\n";
const RENAMED: &str = "policy p\n\nqueue team {}\n\nadmit small_enough { 8 gpu >= job.total_gpus }\n";

fn gpolc(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("gpolc").expect("gpolc is built");
    c.current_dir(dir);
    c
}

fn files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, text) in [("old.gpol", OLD), ("new.gpol", NEW), ("renamed.gpol", RENAMED)] {
        std::fs::write(dir.path().join(name), text).expect("writable");
    }
    dir
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

#[test]
fn a_change_exits_one_and_shows_a_test() {
    let dir = files();
    let out = gpolc(dir.path()).args(["diff", "old.gpol", "new.gpol", "--budget", "300"]).assert().code(1);
    insta::assert_snapshot!("diff_human", stdout(&out));
}

#[test]
fn json_carries_the_same_verdicts() {
    let dir = files();
    let out = gpolc(dir.path())
        .args(["diff", "old.gpol", "new.gpol", "--budget", "300", "--format", "json"])
        .assert()
        .code(1);
    let text = stdout(&out);
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    // The budget's cases, and the exhaustive grid on top.
    assert!(v["cases"].as_u64().is_some_and(|n| n > 300), "{}", v["cases"]);
    insta::assert_snapshot!("diff_json", text);
}

#[test]
fn github_annotations_point_at_the_deciding_rule() {
    let dir = files();
    let out = gpolc(dir.path())
        .args(["diff", "old.gpol", "new.gpol", "--budget", "300", "--format", "github"])
        .assert()
        .code(1);
    let text = stdout(&out);
    assert!(
        text.starts_with("::notice title=gpolc diff%3A old.gpol → new.gpol::behaviour changed; 301 cases"),
        "{text}"
    );
    assert!(text.contains("\n::warning file=new.gpol,line=5,col=1,title=gpolc diff%3A admission::"), "{text}");
}

#[test]
fn a_rename_is_no_change() {
    let dir = files();
    let out = gpolc(dir.path()).args(["diff", "old.gpol", "renamed.gpol"]).assert().code(0);
    let text = stdout(&out);
    assert!(text.contains("renamed: admit size → small_enough"), "{text}");
    assert!(text.contains("searched 0 cases"), "{text}");
}

#[test]
fn bad_sides_and_budgets_exit_two() {
    let dir = files();
    gpolc(dir.path()).args(["diff", "old.gpol", "missing.gpol"]).assert().code(2);
    std::fs::write(dir.path().join("broken.gpol"), "policy p\nfilter f { node.gpu_mem > 40 }\n").expect("writable");
    let out = gpolc(dir.path()).args(["diff", "old.gpol", "broken.gpol"]).assert().code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("E0009"));
    gpolc(dir.path()).args(["diff", "old.gpol", "new.gpol", "--budget", "soon"]).assert().code(2);
    gpolc(dir.path()).args(["diff", "old.gpol", "new.gpol", "--bound", "0"]).assert().code(2);
    gpolc(dir.path()).args(["diff", "old.gpol", "new.gpol", "--bound", "2000001"]).assert().code(2);
    gpolc(dir.path()).args(["diff", "old.gpol", "new.gpol", "--trace", "missing.csv"]).assert().code(2);
    std::fs::write(dir.path().join("bad.csv"), "not,a\ntrace\n").expect("writable");
    gpolc(dir.path()).args(["diff", "old.gpol", "new.gpol", "--trace", "bad.csv"]).assert().code(2);
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git runs")
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn the_ci_job_diffs_every_changed_policy_against_a_base() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(d.join("policies")).expect("mkdir");
    std::fs::write(d.join("policies/prod.gpol"), OLD).expect("writable");
    std::fs::write(d.join("policies/other.gpol"), OLD).expect("writable");
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "base"]);
    // Nothing changed yet.
    let out = gpolc(d).args(["diff", "--base", "main"]).assert().code(0);
    assert!(stdout(&out).contains("no changed .gpol file to compare"));
    // A changed policy, a renamed rule, and a side read from a revision.
    std::fs::write(d.join("policies/prod.gpol"), NEW).expect("writable");
    std::fs::write(d.join("policies/other.gpol"), RENAMED).expect("writable");
    let out = gpolc(d).args(["diff", "--base", "main", "--budget", "200"]).assert().code(1);
    let text = stdout(&out);
    assert!(text.contains("main:policies/prod.gpol →") && text.contains("behaviour changed"), "{text}");
    assert!(
        text.contains("main:policies/other.gpol →") && text.contains("renamed: admit size → small_enough"),
        "{text}"
    );
    gpolc(d).args(["diff", "main:policies/prod.gpol", "policies/prod.gpol", "--budget", "200"]).assert().code(1);
    gpolc(d).args(["diff", "main:policies/nothing.gpol", "policies/prod.gpol"]).assert().code(2);
    // A folder at a revision is not a policy: refused before anything is read of it.
    let out = gpolc(d).args(["diff", "main:policies", "policies/prod.gpol"]).assert().code(2);
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("not a file"));
}

#[test]
fn a_slurm_history_replays_on_both_versions_with_queues_from_partitions() {
    // The real `sacct --json` fixture: six jobs in partitions gpu and debug.
    let history = Path::new(env!("CARGO_MANIFEST_DIR")).join("simulator/tests/fixtures/slurm/sacct.json");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let policy = "policy p\nqueue root {\n  queue gpu {}\n  queue debug {}\n}\n";
    std::fs::write(dir.path().join("p.gpol"), policy).expect("writable");
    let out = gpolc(dir.path())
        .args(["diff", "p.gpol", "p.gpol", "--budget", "50", "--queue-from", "partition", "--trace"])
        .arg(&history)
        .assert()
        .code(0);
    let (said, err) = (stdout(&out), String::from_utf8_lossy(&out.get_output().stderr).into_owned());
    assert!(said.contains("every decision the same") && said.contains("debug"), "{said}");
    assert!(err.contains("1 job(s) never started"), "{err}");
}
