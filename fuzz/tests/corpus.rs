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
        "trace" => &["samples", "tests/hostile/traces"],
        "cluster" => &["samples", "tests/hostile/clusters", "simulator/tests/fixtures/slurm"],
        "slurm" => &["tests/hostile/slurm", "simulator/tests/fixtures/slurm"],
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

#[test]
fn slurm_corpus() {
    assert!(replay("slurm", gpol_fuzz::slurm) >= 5);
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

/// A fixed number of byte-level mutations of a target's inputs: the in-process smoke run
/// CI gives every target on each `cargo test` (AFL++'s coverage-guided campaigns are
/// `fuzz/run SECONDS`, docs/fuzzing.md). Deterministic: a failure names the round, and
/// the same round fails again.
fn mutated(target: &str, run: fn(&[u8]), rounds: u64) {
    let seeds: Vec<Vec<u8>> = inputs(target)
        .iter()
        .filter_map(|f| std::fs::read(f).ok())
        .filter(|b| b.len() < 64 * 1024)
        .chain((0..8).filter(|_| target == "engines").map(choices))
        .collect();
    for round in 0..rounds {
        let mut rng = Xorshift(round.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let mut data = seeds[rng.below(seeds.len())].clone();
        for _ in 0..=rng.below(4) {
            let other = &seeds[rng.below(seeds.len())];
            mutate(&mut data, other, &mut rng);
        }
        if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
            let file = std::env::temp_dir().join(format!("gpol-fuzz-{target}-{round}"));
            let _ = std::fs::write(&file, &data);
            std::panic::resume_unwind(Box::new(format!(
                "{target}: mutation round {round} failed (input saved to {}; copy it into \
                 fuzz/findings/{target}/ to keep it): {panic:?}",
                file.display()
            )));
        }
    }
}

struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in 0..n (0 when n is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

/// One of AFL's havoc steps: flip a bit, write a telling byte, delete, duplicate or
/// splice in a piece of another input, or cut the end off.
fn mutate(data: &mut Vec<u8>, other: &[u8], rng: &mut Xorshift) {
    const TELLING: &[u8] = b"\0\xff\n\r\t ,;:{}[]()\"'#=-.0123456789e|";
    let at = rng.below(data.len() + 1);
    let len = 1 + rng.below(32);
    let end = (at + len).min(data.len());
    match rng.below(6) {
        0 if !data.is_empty() => {
            let i = at.min(data.len() - 1);
            data[i] ^= 1 << rng.below(8);
        }
        1 if !data.is_empty() => {
            let i = at.min(data.len() - 1);
            data[i] = TELLING[rng.below(TELLING.len())];
        }
        2 => {
            data.drain(at..end);
        }
        3 => {
            let piece = data[at..end].to_vec();
            data.splice(at..at, piece.iter().copied().cycle().take(piece.len() * (1 + rng.below(8))));
        }
        4 if !other.is_empty() => {
            let from = rng.below(other.len());
            let to = (from + 1 + rng.below(256)).min(other.len());
            data.splice(at..at, other[from..to].iter().copied());
        }
        _ => data.truncate(at),
    }
}

#[test]
fn check_mutations() {
    mutated("check", gpol_fuzz::check, 3000);
}

#[test]
fn engines_mutations() {
    mutated("engines", gpol_fuzz::engines, 300);
}

#[test]
fn trace_mutations() {
    mutated("trace", gpol_fuzz::trace, 3000);
}

#[test]
fn cluster_mutations() {
    mutated("cluster", gpol_fuzz::cluster, 3000);
}

#[test]
fn slurm_mutations() {
    mutated("slurm", gpol_fuzz::slurm, 3000);
}

/// The smoke run reaches inputs the corpus does not hold: a bug planted behind a byte no
/// seed policy contains (NUL) is found.
#[test]
#[should_panic(expected = "mutation round")]
fn mutations_find_a_planted_bug() {
    fn planted(data: &[u8]) {
        assert!(!data.contains(&0), "planted");
    }
    assert!(inputs("check").iter().all(|f| !std::fs::read(f).unwrap_or_default().contains(&0)));
    mutated("check", planted, 3000);
}
