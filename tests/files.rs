//! Outputs written safely and inputs read safely, through the real `gpolc`: symbolic
//! links written through, devices and inputs never replaced, read-only files refused
//! unless forced, output paths checked before any work, FIFOs and loops in folders
//! handled. Every message names the path the user gave.

use assert_cmd::Command;
use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::Path;

fn gpolc() -> Command {
    let mut c = Command::cargo_bin("gpolc").expect("gpolc is built");
    c.current_dir(env!("CARGO_MANIFEST_DIR")).args(["--color", "never"]);
    c
}

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

const UNFORMATTED: &str = "policy p\nfilter f {job.whole_cards>0 gpu}\n";
const FORMATTED: &str = "policy p\n\nfilter f { job.whole_cards > 0 gpu }\n";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("writable");
    p.display().to_string()
}

#[test]
fn fmt_writes_through_a_symlink_and_keeps_it() {
    let d = tempfile::tempdir().expect("temp");
    let real = write(d.path(), "real.gpol", UNFORMATTED);
    let link = d.path().join("link.gpol");
    symlink(&real, &link).expect("symlink");
    gpolc().args(["fmt", &link.display().to_string()]).assert().success();
    assert!(std::fs::symlink_metadata(&link).expect("link").file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&real).expect("read"), FORMATTED);
}

#[test]
fn fmt_refuses_a_read_only_file_unless_forced() {
    let d = tempfile::tempdir().expect("temp");
    let p = write(d.path(), "ro.gpol", UNFORMATTED);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    let out = gpolc().args(["fmt", &p]).assert().code(2);
    assert!(stderr(&out).contains(&format!("{p}: is read-only")), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&p).expect("read"), UNFORMATTED);
    gpolc().args(["fmt", "--force", &p]).assert().success();
    assert_eq!(std::fs::read_to_string(&p).expect("read"), FORMATTED);
    assert_eq!(std::fs::metadata(&p).expect("meta").permissions().mode() & 0o777, 0o444);
}

#[test]
fn build_never_overwrites_its_input() {
    let d = tempfile::tempdir().expect("temp");
    let p = write(d.path(), "p.gpol", FORMATTED);
    let out = gpolc().args(["build", &p, "-o", &p]).assert().code(2);
    assert!(stderr(&out).contains(&format!("{p}: is also an input")), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&p).expect("read"), FORMATTED);
}

#[test]
fn build_to_dev_full_reports_the_error_and_keeps_the_device() {
    let d = tempfile::tempdir().expect("temp");
    let p = write(d.path(), "p.gpol", FORMATTED);
    let out = gpolc().args(["build", &p, "-o", "/dev/full"]).assert().code(2);
    assert!(stderr(&out).contains("/dev/full: "), "{}", stderr(&out));
    assert!(std::fs::metadata("/dev/full").expect("there").file_type().is_char_device());
}

#[test]
fn gen_trace_writes_a_regular_file_with_the_usual_mode() {
    let d = tempfile::tempdir().expect("temp");
    let p = d.path().join("t.csv");
    gpolc().args(["gen-trace", "--jobs", "10", "-o", &p.display().to_string()]).assert().success();
    let mode = std::fs::metadata(&p).expect("written").permissions().mode() & 0o777;
    assert_eq!(mode & 0o022, 0, "not group- or world-writable: {mode:o}");
    assert!(mode & 0o600 == 0o600);
}

#[test]
fn a_report_path_that_cannot_be_used_fails_before_the_run() {
    let out = gpolc().args(["sim", "--report", "/missing/dir/x.html"]).assert().code(2);
    let err = stderr(&out);
    assert!(err.contains("/missing/dir/x.html: "), "{err}");
    assert!(!err.contains(".tmp") && !err.contains(".gpolc-"), "{err}");
    assert!(out.get_output().stdout.is_empty(), "nothing was simulated");
}

#[test]
fn a_fifo_is_refused_not_waited_on() {
    let d = tempfile::tempdir().expect("temp");
    let fifo = d.path().join("p.gpol");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let f = fifo.display().to_string();
    let out = gpolc().timeout(std::time::Duration::from_secs(30)).args(["check", &f]).assert().code(2);
    assert!(stderr(&out).contains(&format!("{f}: is a FIFO")), "{}", stderr(&out));
    let out = gpolc().timeout(std::time::Duration::from_secs(30)).args(["sim", "--trace", &f]).assert().code(2);
    assert!(stderr(&out).contains(&format!("{f}: is a FIFO")), "{}", stderr(&out));
}

#[test]
fn a_folder_with_symlink_loops_is_checked_once_per_file() {
    let d = tempfile::tempdir().expect("temp");
    write(d.path(), "p.gpol", FORMATTED);
    symlink(d.path(), d.path().join("self")).expect("symlink");
    symlink(d.path(), d.path().join("again")).expect("symlink");
    let out = gpolc().args(["check", &d.path().display().to_string()]).assert().success();
    assert!(stderr(&out).contains("checked 1 file: no problems"), "{}", stderr(&out));
}

#[test]
fn a_fifo_nobody_reads_is_refused_before_any_work() {
    let d = tempfile::tempdir().expect("temp");
    let p = write(d.path(), "p.gpol", FORMATTED);
    let fifo = d.path().join("out.o");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo").success());
    let f = fifo.display().to_string();
    let out = gpolc().timeout(std::time::Duration::from_secs(30)).args(["build", &p, "-o", &f]).assert().code(2);
    assert!(stderr(&out).contains(&format!("{f}: a FIFO that nothing reads")), "{}", stderr(&out));
}

#[test]
fn a_folder_that_takes_no_files_fails_before_the_run_naming_the_users_path() {
    let out = gpolc().args(["sim", "--report", "/proc/gpol-report.html"]).assert().code(2);
    let err = stderr(&out);
    assert!(err.contains("/proc/gpol-report.html: "), "{err}");
    assert!(!err.contains(".gpolc-") && !err.contains(".tmp"), "{err}");
    assert!(out.get_output().stdout.is_empty(), "nothing was simulated");
}

#[test]
fn a_dangling_policy_link_in_a_folder_is_an_error() {
    let d = tempfile::tempdir().expect("temp");
    write(d.path(), "a.gpol", FORMATTED);
    symlink(d.path().join("missing.gpol"), d.path().join("b.gpol")).expect("symlink");
    let out = gpolc().args(["check", &d.path().display().to_string()]).assert().code(2);
    assert!(stderr(&out).contains("b.gpol: "), "{}", stderr(&out));
}

/// Rewriting a file owned by someone else keeps its owner (run as root, as CI is; a
/// user who cannot give files away cannot set this case up, and the test says so).
#[test]
fn fmt_keeps_the_owner_of_a_file() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().expect("temp");
    let p = write(d.path(), "u.gpol", UNFORMATTED);
    if std::os::unix::fs::chown(&p, Some(65534), Some(65534)).is_err() {
        gpol_testing::missing_tool("root (to give a file away)", "run the tests as root, as CI does");
        return;
    }
    gpolc().args(["fmt", &p]).assert().success();
    let meta = std::fs::metadata(&p).expect("meta");
    assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    assert_eq!(std::fs::read_to_string(&p).expect("read"), FORMATTED);
}
