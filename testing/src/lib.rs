//! What gpol's tests share. A test that needs a tool this machine lacks (Chromium, z3,
//! slurmrestd, a C compiler, root for a real Slurm) cannot pass silently:
//!
//! - under CI (`CI=true`, as CI services and `.ci/run` set it) the missing tool is a
//!   failure: CI installs what the tests need, so its absence is a broken set-up;
//! - elsewhere the test returns early, says why on standard error, and adds a line to the
//!   list `tests/run` prints when the run ends (the file `GPOL_SKIPPED_DIR/skipped.txt`).
//!
//! Data that cannot be shipped (research-use traces read from beside the checkout) is
//! listed the same way but is never a failure: CI may not have it.

use std::io::Write;

/// Whether the tests run under CI.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The test cannot run here: `missing` is not on this machine, `how` says how to get it.
/// Under CI this panics; elsewhere it is recorded and the caller returns.
pub fn missing_tool(missing: &str, how: &str) {
    if let Err(failure) = skip(in_ci(), list().as_deref(), &format!("{}: {missing} ({how})", test_name())) {
        panic!("{failure}");
    }
}

/// The test has no data to read: `missing` is not here, `how` says where it is read from.
/// Recorded, never a failure.
pub fn missing_data(missing: &str, how: &str) {
    let _ = skip(false, list().as_deref(), &format!("{}: {missing} ({how})", test_name()));
}

/// The list `tests/run` prints at the end, when it asked for one.
fn list() -> Option<std::path::PathBuf> {
    std::env::var_os("GPOL_SKIPPED_DIR").map(|d| std::path::PathBuf::from(d).join("skipped.txt"))
}

/// A skip: under CI the failure's message; elsewhere said on standard error and appended
/// to `list` (one short line per write: tests running at once do not interleave).
fn skip(ci: bool, list: Option<&std::path::Path>, line: &str) -> Result<(), String> {
    if ci {
        return Err(format!("not tested: {line}; CI must provide it (.ci/run installs what the tests need)"));
    }
    eprintln!("not tested: {line}");
    if let Some(list) = list
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(list)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
    Ok(())
}

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    let thread = std::thread::current();
    thread.name().filter(|n| *n != "main").unwrap_or("a test").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_fails_under_ci_and_is_listed_elsewhere_with_the_tests_name() {
        let dir = std::env::temp_dir().join(format!("gpol-testing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let list = dir.join("skipped.txt");
        let line = format!("{}: z3 (apt-get install z3)", test_name());
        assert!(
            line.starts_with("tests::a_skip_fails_under_ci_and_is_listed_elsewhere_with_the_tests_name: "),
            "{line}"
        );
        let failure = skip(true, Some(&list), &line).expect_err("a failure under CI");
        assert!(failure.contains("CI must provide it"), "{failure}");
        assert!(!list.exists(), "a failure is not listed");
        skip(false, Some(&list), &line).expect("listed");
        skip(false, Some(&list), "other: chromium (apt-get install chromium)").expect("listed");
        let listed = std::fs::read_to_string(&list).expect("the list");
        assert_eq!(listed, format!("{line}\nother: chromium (apt-get install chromium)\n"));
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
