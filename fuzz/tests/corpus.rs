//! Every seed input and every past finding of each fuzz target, replayed through the
//! target on each `cargo test` (no fuzzer needed): a finding stays fixed. Seeds are the
//! repository's own inputs (policies, traces, cluster files, the hostile corpus);
//! findings live in `fuzz/findings/<target>/`. And the structure-aware generator's
//! promise: what it generates checks clean.

use std::path::{Path, PathBuf};

/// The seed folders of each target, as `fuzz/run` gives them to AFL++, and its findings.
fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let folders: &[&str] = match target {
        "check" => &["policies", "stdlib", "tests/diagnostics", "tests/hostile/policies"],
        "trace" => &["sim", "tests/hostile/traces"],
        "cluster" => &["sim", "tests/hostile/clusters", "simulator/tests/fixtures/slurm"],
        _ => &[],
    };
    let mut files = Vec::new();
    for folder in folders.iter().map(|f| root.join(f)).chain([root.join("fuzz/findings").join(target)]) {
        if let Ok(entries) = std::fs::read_dir(&folder) {
            files.extend(entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    files.sort();
    files
}

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let files = inputs(target);
    for f in &files {
        run(&std::fs::read(f).expect("an input file"));
    }
    files.len()
}

/// Bytes for the engines target: it reads them as choices, so any bytes make a policy.
fn choices(seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn check_corpus() {
    assert!(replay("check", gpol_fuzz::check) >= 100);
}

#[test]
fn engines_corpus() {
    replay("engines", gpol_fuzz::engines);
    for seed in 0..64 {
        gpol_fuzz::engines(&choices(seed));
    }
}

#[test]
fn trace_corpus() {
    assert!(replay("trace", gpol_fuzz::trace) >= 10);
}

#[test]
fn cluster_corpus() {
    assert!(replay("cluster", gpol_fuzz::cluster) >= 10);
}

/// Nearly every generated policy checks clean (the budgets may refuse a huge one), and
/// they are not all trivial: most have filters or several scores.
#[test]
fn generated_policies_check_clean() {
    let mut clean = 0;
    let mut rich = 0;
    for seed in 0..300u64 {
        let bytes = choices(seed);
        let mut u = arbitrary::Unstructured::new(&bytes);
        let text = gpol_fuzz::policy::policy(&mut u).expect("enough bytes");
        let checked = gpol_compiler::load::Checked::from_text("g.gpol", &text);
        let errors: Vec<String> =
            checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.message.clone()).collect();
        assert!(errors.is_empty(), "{text}\n{errors:?}");
        clean += 1;
        if text.matches("\nfilter ").count() + text.matches("\nscore ").count() >= 2 {
            rich += 1;
        }
    }
    assert_eq!(clean, 300);
    assert!(rich > 150, "{rich} of 300 have two rules or more");
}
