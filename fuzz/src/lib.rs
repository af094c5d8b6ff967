//! The fuzz targets, as plain functions of the fuzzer's bytes: each panics only on a bug
//! (a panic in gpol, the engines disagreeing, `fmt` not idempotent). The AFL++ binaries in
//! `src/bin` call them; `tests/corpus.rs` replays every seed and every past finding
//! through them on each `cargo test`.

pub mod policy;

use gpol_compiler::engine::{CompiledPolicy, EngineKind, NodeResult, compile_lowered};
use gpol_compiler::load::Checked;
use gpol_compiler::synthetic::Cluster;
use std::sync::Arc;

/// Source text → parse and check; a file that parses is formatted, and formatting the
/// result changes nothing and checks the same.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let checked = Checked::from_text("fuzz.gpol", text);
    let Ok(formatted) = gpol_compiler::fmt::format_source(checked.file, text) else { return };
    let again = gpol_compiler::fmt::format_source(checked.file, &formatted).expect("formatted text parses");
    assert_eq!(formatted, again, "fmt is not idempotent");
    let codes = |c: &Checked| c.diagnostics.iter().map(|d| d.code).collect::<Vec<_>>();
    let reformatted = Checked::from_text("fuzz.gpol", &formatted);
    assert_eq!(codes(&checked), codes(&reformatted), "formatting changed what checking finds:\n{formatted}");
}

/// Bytes → a generated policy that checks clean → compiled by both engines, which must
/// agree bit for bit on every node of generated clusters.
pub fn engines(data: &[u8]) {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(text) = policy::policy(&mut u) else { return };
    let seed = u.arbitrary::<u64>().unwrap_or(0);
    let checked = Checked::from_text("generated.gpol", &text);
    let errors: Vec<String> =
        checked.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
    // Budgets (E0041, E0042) may refuse a large generated policy; anything else is a
    // generator bug.
    let budget = |e: &String| e.starts_with("E0041") || e.starts_with("E0042");
    assert!(errors.iter().all(budget), "a generated policy does not check:\n{text}\n{errors:?}");
    let Ok(checked) = checked.into_policy() else { return };
    let (policy, program) = (Arc::new(checked.policy), checked.analysed.program);
    let compile = |kind| compile_lowered(Arc::clone(&policy), Arc::clone(&program), kind);
    let jit = compile(EngineKind::Jit).expect("the JIT compiles what checks");
    let interp = compile(EngineKind::Interp).expect("the interpreter takes what checks");
    agree(&jit, &interp, seed, &text);
}

fn agree(jit: &CompiledPolicy, interp: &CompiledPolicy, seed: u64, text: &str) {
    let cluster = Cluster::generate(16, &jit.program, seed);
    let nodes = cluster.nodes();
    let ctx = cluster.ctx(&jit.program);
    let job = Cluster::job();
    let run = |p: &CompiledPolicy| {
        let mut out = vec![NodeResult::default(); nodes.len()];
        p.engine().filter_score(&ctx, &job, &nodes, &mut out);
        let admit = p.engine().admit(&ctx, &job);
        let mut keys = vec![0.0; p.program.job_order.len()];
        p.engine().job_keys(&ctx, &job, &mut keys);
        let cards: Vec<(u64, u32)> = nodes
            .iter()
            .flat_map(|n| n.cards_list.as_slice().iter().map(move |c| (n, c)))
            .map(|(n, c)| p.engine().card_score(&ctx, &job, n, c))
            .map(|(s, f)| (s.to_bits(), f))
            .collect();
        let results: Vec<_> = out
            .iter()
            .map(|r| (r.feasible, r.rejected_by, r.tiers.map(f64::to_bits), r.score.to_bits(), r.faults))
            .collect();
        // The job as both claimant and victim: every victim rule and victim_order key.
        let victims: Vec<(bool, u64)> = (0..p.program.victims.len())
            .map(|r| p.engine().victim(&ctx, r, &job, &job))
            .map(|(ok, cost)| (ok, cost.to_bits()))
            .collect();
        let mut victim_keys = vec![0.0; p.program.victim_order.len()];
        p.engine().victim_keys(&ctx, &job, &job, &mut victim_keys);
        let victim_keys: Vec<u64> = victim_keys.iter().map(|k| k.to_bits()).collect();
        (admit, results, keys.iter().map(|k| k.to_bits()).collect::<Vec<_>>(), cards, victims, victim_keys)
    };
    assert_eq!(run(jit), run(interp), "the JIT and the interpreter disagree on:\n{text}");
}

/// Bytes → a trace, as CSV and as JSON Lines.
pub fn trace(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for name in ["fuzz.csv", "fuzz.jsonl"] {
        if let Ok(w) = gpol_sim::read_trace(text, name) {
            let jobs = w.held().expect("a trace read from text is held");
            assert!(!jobs.is_empty());
            assert!(jobs.iter().all(|j| j.job.over_limit().is_none()), "a job over its limits was read");
        }
        // Streamed through a tiny buffer, the rows are what they are read whole.
        let rows = |r: &mut dyn std::io::BufRead| {
            gpol_sim::trace::Rows::new(r, name).and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        };
        let mut small = std::io::BufReader::with_capacity(7, text.as_bytes());
        assert_eq!(rows(&mut text.as_bytes()), rows(&mut small), "streaming changed what was read");
    }
}

/// Bytes → a cluster: a TOML spec, or whichever JSON or CSV node list it looks like.
pub fn cluster(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for name in ["fuzz.toml", "fuzz.json"] {
        if let Ok(c) = gpol_sim::read_cluster(text, name) {
            assert!(c.nodes.iter().all(|n| n.spec.over_limit().is_none()), "a node over its limits was read");
        }
    }
}

/// Bytes → Slurm's documents as the scheduling loop reads them: `sinfo --json`, `squeue
/// --json` (each job's request through the job model), `sacct --json`, `topology.conf`, and
/// every word as a TRES list, a node's GRES and a hostlist. Read or refused, never a panic; the hostlists of one input
/// share one document's budget, so no input expands past it.
pub fn slurm(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(nodes) = gpol_slurm::sinfo::read(text) {
        assert!(nodes.iter().all(|n| n.spec.over_limit().is_none()), "a node over its limits was read");
    }
    if let Ok(jobs) = gpol_slurm::squeue::read(text) {
        let mut ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), jobs.len(), "a job listed twice was read");
        for j in &jobs {
            let _ = j.request.job(&gpol_slurm::jobs::Reading::default());
        }
    }
    let _ = gpol_slurm::sacct::read(text);
    let _ = gpol_slurm::topology::read::read(text);
    let mut budget = gpol_slurm::hostlist::Budget::new(1 << 20);
    for word in text.split(['\n', ' ', '"', '=']) {
        let _ = gpol_slurm::jobs::gpus(word);
        let _ = gpol_slurm::gres::configured(word);
        if let Ok(names) = gpol_slurm::hostlist::expand_within(word, &mut budget) {
            assert!(names.len() <= gpol_slurm::hostlist::MAX_HOSTS, "a hostlist past its limit was read");
        }
    }
}
