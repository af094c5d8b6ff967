//! A `gpolc build` object linked into a C program: the object (made here by the same
//! library call `gpolc build` makes) is linked with libgpol, which provides the
//! functions it imports; the program includes `gpol_records.h` (so the C compiler checks
//! every record offset and size against gpol's), checks the object's `gpol_layout_hash`
//! against the header's and the library's, builds job and node records in C, calls the
//! object's `gpol_admit` and `gpol_filter_score` on them, and prints the results, which
//! must equal, bit for bit, what both Rust engines compute on the same records.
//!
//! Skipped, saying so, where there is no C compiler.

mod support;

use gpol_compiler::engine::{self, EngineKind, NodeResult};
use gpol_compiler::interp::Ctx;
use gpol_compiler::load::Checked;
use gpol_compiler::schema::{ClusterRec, JobRec, NodeRec};
use std::fmt::Write;
use support::Rng;

/// Numbers only (no strings, labels or queues, which need the runtime's symbol tables),
/// every helper the object imports, a score that faults on a node without cards.
const POLICY: &str = r#"policy linked

admit small "at most 32 cores" { job.cpu <= 32 cpu }
admit eight "at most 8 cards" { job.whole_cards <= 8 gpu }

filter enough_cards "not enough free cards" { node.free_cards >= job.whole_cards }
filter enough_memory { node.gpu_mem >= job.gpu_mem }

score free tier 1 { node.free_gpu / node.cards }
score cpu weight 2 { node.cpu_free / node.cpu }
score curve weight 1 {
  pow(node.free_gpu / 1 gpu, 0.5) * exp2(0 - node.mem_free / node.mem) + log(1 + node.cpu_free / 1 cpu) / 8
}
"#;

struct Records {
    jobs: Vec<JobRec<'static>>,
    nodes: Vec<NodeRec<'static>>,
}

fn generate(rng: &mut Rng) -> Records {
    let jobs = (0..6)
        .map(|_| JobRec {
            cpu: rng.range(0, 48) as f64,
            whole_cards: rng.range(0, 10) as f64,
            gpu_mem: (rng.range(0, 80) << 30) as f64,
            ..JobRec::default()
        })
        .collect();
    let nodes = (0..8)
        .map(|_| {
            let cards = rng.pick(&[0u64, 1, 2, 4, 8]);
            let free = rng.range(0, cards);
            let cpu = rng.range(1, 128);
            let mem = rng.range(1, 1024) << 30;
            NodeRec {
                cards: cards as f64,
                free_cards: free as f64,
                free_gpu: free as f64 + rng.range(0, 3) as f64 / 4.0,
                gpu_mem: (rng.range(20, 80) << 30) as f64,
                cpu: cpu as f64,
                cpu_free: rng.range(0, cpu) as f64,
                mem: mem as f64,
                mem_free: rng.range(0, mem) as f64,
                ..NodeRec::default()
            }
        })
        .collect();
    Records { jobs, nodes }
}

fn bits(x: f64) -> String {
    format!("{:016x}", x.to_bits())
}

fn result_line(r: &NodeResult) -> String {
    let t: Vec<String> = r.tiers.iter().map(|t| bits(*t)).collect();
    format!("{} {} {} {} {}", u8::from(r.feasible), r.rejected_by, t.join(" "), bits(r.score), r.faults)
}

/// What the program prints, by a Rust engine.
fn expected(kind: EngineKind, records: &Records) -> String {
    let policy = Checked::from_text("linked.gpol", POLICY).into_policy().expect("checks").policy;
    let compiled = engine::compile(policy, kind).expect("compiles");
    let cluster = ClusterRec::default();
    let ctx = Ctx {
        cluster: &cluster,
        queues: &[],
        domains: &[],
        literals: &[],
        sym_hashes: &[],
        attrs: &compiled.program.attrs,
    };
    let mut out = String::new();
    for (k, job) in records.jobs.iter().enumerate() {
        let admit = compiled.engine().admit(&ctx, job).map_or(-1, |i| i as i64);
        let _ = writeln!(out, "admit {k} {admit}");
        let mut results = vec![NodeResult::default(); records.nodes.len()];
        compiled.engine().filter_score(&ctx, job, &records.nodes, &mut results);
        for (i, r) in results.iter().enumerate() {
            let _ = writeln!(out, "fs {k} {i} {}", result_line(r));
        }
    }
    out
}

fn c_program(records: &Records) -> String {
    let mut c = String::from(
        r#"#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gpol.h"
#include "gpol_records.h"

static void bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    printf(" %016" PRIx64, b);
}

int main(void) {
    if (gpol_layout_hash != GPOL_RECORDS_LAYOUT_HASH || gpol_layout_hash != gpol_schema_layout_hash()) {
        printf("layout hash mismatch: object %016" PRIx64 ", header %016" PRIx64 ", library %016" PRIx64 "\n",
               gpol_layout_hash, (uint64_t)GPOL_RECORDS_LAYOUT_HASH, gpol_schema_layout_hash());
        return 1;
    }
    printf("layout %016" PRIx64 "\n", gpol_layout_hash);
    static const GpolClusterRec cluster;
    static const GpolQueueRec zero_queue;
    static const GpolDomainRec zero_domain;
    GpolCtx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.cluster = &cluster;
    ctx.zero_queue = &zero_queue;
    ctx.zero_domain = &zero_domain;
"#,
    );
    let _ = writeln!(c, "    static GpolJobRec jobs[{}];", records.jobs.len());
    for (k, j) in records.jobs.iter().enumerate() {
        let _ = writeln!(
            c,
            "    jobs[{k}].cpu = {:?};\n    jobs[{k}].whole_cards = {:?};\n    jobs[{k}].gpu_mem = {:?};",
            j.cpu, j.whole_cards, j.gpu_mem
        );
    }
    let _ = writeln!(c, "    static GpolNodeRec nodes[{}];", records.nodes.len());
    for (i, n) in records.nodes.iter().enumerate() {
        for (field, value) in [
            ("cards", n.cards),
            ("free_cards", n.free_cards),
            ("free_gpu", n.free_gpu),
            ("gpu_mem", n.gpu_mem),
            ("cpu", n.cpu),
            ("cpu_free", n.cpu_free),
            ("mem", n.mem),
            ("mem_free", n.mem_free),
        ] {
            let _ = writeln!(c, "    nodes[{i}].{field} = {value:?};");
        }
    }
    let _ = write!(
        c,
        r#"    GpolEngineResult out[{n}];
    for (int k = 0; k < {jobs}; k++) {{
        printf("admit %d %d\n", k, (int)gpol_admit(&ctx, &jobs[k]));
        gpol_filter_score(&ctx, &jobs[k], nodes, {n}, out);
        for (int i = 0; i < {n}; i++) {{
            printf("fs %d %d %d %u", k, i, (int)out[i].feasible, (unsigned)out[i].rejected_by);
            for (int t = 0; t < GPOL_RECORDS_MAX_TIERS; t++) bits(out[i].tiers[t]);
            bits(out[i].score);
            printf(" %u\n", (unsigned)out[i].faults);
        }}
    }}
    return 0;
}}
"#,
        n = records.nodes.len(),
        jobs = records.jobs.len()
    );
    c
}

#[test]
fn a_gpolc_build_object_links_with_libgpol_and_agrees_with_the_engines() {
    let Some(cc) = support::cc() else { return };
    let policy = Checked::from_text("linked.gpol", POLICY).into_policy().expect("checks").policy;
    let program = gpol_compiler::lower::lower(&policy).expect("lowers");
    let object = gpol_compiler::jit::object::object(&program).expect("an object");
    let dir = support::Scratch::new("records");
    let object_path = dir.0.join("linked.o");
    std::fs::write(&object_path, object).expect("writing the object");

    let records = generate(&mut Rng::new(17));
    let exe = support::build_c(&cc, &dir.0, &c_program(&records), &[&object_path]);
    let got = support::run(&exe);
    let want = format!("layout {:016x}\n{}", gpol_compiler::schema::layout_hash(), expected(EngineKind::Jit, &records));
    assert_eq!(expected(EngineKind::Interp, &records), expected(EngineKind::Jit, &records), "the engines agree");
    for (n, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "line {} of the C program's output differs from the engines'", n + 1);
    }
    assert_eq!(got.lines().count(), want.lines().count(), "the C program printed:\n{got}");
    // The records exercise what they are meant to.
    assert!(want.lines().any(|l| l.starts_with("admit") && !l.ends_with("-1")), "an admit rule refuses");
    assert!(want.lines().any(|l| l.starts_with("admit") && l.ends_with("-1")), "a job is admitted");
    assert!(want.lines().any(|l| l.starts_with("fs") && l.split(' ').nth(3) == Some("1")), "a node passes");
    assert!(want.lines().any(|l| l.starts_with("fs") && l.split(' ').nth(3) == Some("0")), "a node is filtered");
    assert!(want.lines().any(|l| l.starts_with("fs") && !l.ends_with(" 0")), "a score faults");
}
