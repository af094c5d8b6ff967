//! `include/gpol_records.h`: the records a `gpolc build` object reads, as C structs,
//! generated from the schema's own table (`gpol_compiler::schema`: fields, offsets,
//! representations) and the JIT's ABI (`gpol_compiler::jit::abi`), with a
//! `_Static_assert` on every offset and size, and the object's entry points. A C
//! compiler that lays a struct out differently from Rust's `#[repr(C)]` fails on the
//! asserts instead of reading the wrong bytes. `tests/header.rs` keeps the checked-in
//! file equal to [`header`].

use gpol_compiler::engine::{MAX_TIERS, NodeResult};
use gpol_compiler::jit::abi::{self, CtxRepr};
use gpol_compiler::jit::codegen;
use gpol_compiler::schema::{
    CardRec, ClusterRec, DomainRec, Field, FieldTy, JobRec, LIST_LEN, LIST_PTR, MAX_LEVELS, NodeRec, Opt, QueueRec,
    Record, Repr, Resources, ShapeRec, Sym,
};
use std::fmt::Write;
use std::mem::{offset_of, size_of};

/// The C name of a record's struct.
fn struct_name(r: Record) -> &'static str {
    match r {
        Record::Job => "GpolJobRec",
        Record::Node => "GpolNodeRec",
        Record::Card => "GpolCardRec",
        Record::Queue => "GpolQueueRec",
        Record::Domain => "GpolDomainRec",
        Record::Cluster => "GpolClusterRec",
        Record::Shape => "GpolShapeRec",
        Record::Resources => "GpolResourcesRec",
    }
}

fn size(r: Record) -> usize {
    match r {
        Record::Job => size_of::<JobRec>(),
        Record::Node => size_of::<NodeRec>(),
        Record::Card => size_of::<CardRec>(),
        Record::Queue => size_of::<QueueRec>(),
        Record::Domain => size_of::<DomainRec>(),
        Record::Cluster => size_of::<ClusterRec>(),
        Record::Shape => size_of::<ShapeRec<'static>>(),
        Record::Resources => size_of::<Resources>(),
    }
}

/// Fields of the Rust struct that are not in the schema (rules do not read them by name):
/// name, C declaration, offset, what it is.
fn raw_fields(r: Record) -> Vec<(&'static str, String, usize, &'static str)> {
    match r {
        Record::Node => vec![(
            "domains",
            format!("uint32_t domains[{MAX_LEVELS}]"),
            offset_of!(NodeRec, domains),
            "The node's domain at each topology level: an index into GpolCtx.domains \
             (UINT32_MAX: none, the node is its own domain there).",
        )],
        _ => Vec::new(),
    }
}

/// A field's C declaration.
fn declaration(f: &Field) -> String {
    let name = f.name;
    match f.repr {
        Repr::F64 => format!("double {name}"),
        Repr::Bool => format!("bool {name}"),
        Repr::Sym => format!("GpolSym {name}"),
        Repr::U8 => format!("uint8_t {name}"),
        Repr::U32 => format!("uint32_t {name}"),
        Repr::Opt { value: Repr::F64, .. } => format!("GpolOptF64 {name}"),
        Repr::Opt { value: Repr::U8, .. } => format!("GpolOptU8 {name}"),
        Repr::Opt { .. } => format!("GpolOptU32 {name}"),
        Repr::Resources => format!("GpolResourcesRec {name}"),
        Repr::List => match f.ty {
            FieldTy::List(Record::Card) => format!("GpolCardList {name}"),
            FieldTy::List(_) => format!("GpolShapeList {name}"),
            _ => format!("GpolSymList {name}"),
        },
        Repr::Mig => format!("double {name}[{}]", gpol_compiler::schema::MIG_PROFILES.len()),
    }
}

/// What a field's number is measured in, for its comment.
fn unit(f: &Field) -> String {
    match f.ty {
        FieldTy::Num(d) if !d.is_none() => {
            let d = d.to_string();
            let base = d.replace("duration", "seconds").replace("gpu", "GPUs").replace("cpu", "cores");
            format!(" [{base}]")
        }
        FieldTy::Enum(e) => format!(" [{}: {}]", e.name(), e.variants().join(", ")),
        FieldTy::Labels => " [values by the policy's label slots; GpolSym 0: absent]".into(),
        FieldTy::MigCounts => " [per MIG profile, in the order of gpol's mig_profile enum]".into(),
        _ => String::new(),
    }
}

/// Records in an order where each is declared before it is used.
const ORDER: [Record; 8] = [
    Record::Resources,
    Record::Card,
    Record::Shape,
    Record::Domain,
    Record::Queue,
    Record::Cluster,
    Record::Node,
    Record::Job,
];

/// The text of `include/gpol_records.h`.
pub fn header() -> String {
    let mut h = String::new();
    let hash = gpol_compiler::schema::layout_hash();
    h.push_str(&format!(
        "/* gpol_records.h: the records a `gpolc build` object reads, and its entry points.
 *
 * Generated from gpol's schema (compiler/src/schema) by the gpol-capi crate; do not
 * edit. Regenerate with `GPOL_BLESS=1 cargo test -p gpol-capi --test header`.
 *
 * Every value is in base units as a double (cards, cores, bytes, seconds); strings are
 * interned symbols (GpolSym, 0 for \"no value\"), enumerations uint8_t, references to
 * queues and domains indices into the context's tables, lists a pointer and a length.
 * The object's code bounds-checks every table and list read against the lengths given,
 * and writes only through its out-pointers. docs/capi.md shows how to link an object.
 */

#ifndef GPOL_RECORDS_H
#define GPOL_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern \"C\" {{
#endif

/* The layout of the records below: an object's `gpol_layout_hash` must equal it. */
#define GPOL_RECORDS_LAYOUT_HASH UINT64_C({hash:#018x})

/* Topology levels a node record holds a domain for. */
#define GPOL_RECORDS_MAX_LEVELS {MAX_LEVELS}

/* Score tiers in GpolEngineResult. */
#define GPOL_RECORDS_MAX_TIERS {MAX_TIERS}

/* An interned string: the runtime's symbol; 0 is \"no value\" (a missing label). */
typedef uint32_t GpolSym;

/* A value that may be absent. */
typedef struct GpolOptF64 {{ double value; bool present; }} GpolOptF64;
typedef struct GpolOptU8 {{ uint8_t value; bool present; }} GpolOptU8;
typedef struct GpolOptU32 {{ uint32_t value; bool present; }} GpolOptU32;

struct GpolCardRec;
struct GpolShapeRec;

/* Lists: a pointer and a length. */
typedef struct GpolCardList {{ const struct GpolCardRec *ptr; size_t len; }} GpolCardList;
typedef struct GpolShapeList {{ const struct GpolShapeRec *ptr; size_t len; }} GpolShapeList;
typedef struct GpolSymList {{ const GpolSym *ptr; size_t len; }} GpolSymList;
"
    ));
    let mut asserts = String::new();
    let mut check = |ty: &str, field: Option<&str>, at: usize| {
        let line = match field {
            Some(f) => format!("_Static_assert(offsetof({ty}, {f}) == {at}, \"{ty}.{f} is at byte {at} in gpol\");\n"),
            None => format!("_Static_assert(sizeof({ty}) == {at}, \"{ty} is {at} bytes in gpol\");\n"),
        };
        asserts.push_str(&line);
    };
    for (ty, value, present, size) in [
        ("GpolOptF64", offset_of!(Opt<f64>, value), offset_of!(Opt<f64>, present), size_of::<Opt<f64>>()),
        ("GpolOptU8", offset_of!(Opt<u8>, value), offset_of!(Opt<u8>, present), size_of::<Opt<u8>>()),
        ("GpolOptU32", offset_of!(Opt<u32>, value), offset_of!(Opt<u32>, present), size_of::<Opt<u32>>()),
    ] {
        check(ty, Some("value"), value);
        check(ty, Some("present"), present);
        check(ty, None, size);
    }
    for ty in ["GpolCardList", "GpolShapeList", "GpolSymList"] {
        check(ty, Some("ptr"), LIST_PTR);
        check(ty, Some("len"), LIST_LEN);
        check(ty, None, size_of::<gpol_compiler::schema::List<'static, u8>>());
    }
    check("GpolSym", None, size_of::<Sym>());
    for r in ORDER {
        let name = struct_name(r);
        let _ = write!(h, "\n/* {} */\ntypedef struct {name} {{\n", r.doc());
        let mut fields: Vec<(usize, String, String)> =
            r.fields().iter().map(|f| (f.offset, declaration(f), format!("{}{}", f.doc, unit(f)))).collect();
        fields.extend(raw_fields(r).into_iter().map(|(_, decl, at, doc)| (at, decl, doc.to_string())));
        fields.sort_by_key(|(at, ..)| *at);
        for (at, decl, doc) in &fields {
            let _ = writeln!(h, "    /* {} */", doc.replace("*/", "* /"));
            let _ = writeln!(h, "    {decl};");
            let field = decl.rsplit(' ').next().unwrap_or_default();
            let field = field.split('[').next().unwrap_or_default();
            check(name, Some(field), *at);
        }
        let _ = writeln!(h, "}} {name};");
        check(name, None, size(r));
    }
    h.push_str(
        "
/* The evaluation context of one call: the cluster record and the tables rules reach
 * through it. `literals` holds the runtime symbol of each of the policy's string
 * literals, `sym_hashes` a 64-bit hash of each symbol's text (indexed by symbol, for
 * hash01), `attrs` the queues' attribute values as bits (attrs[queue * n_attrs + attr]).
 * A table may be empty (its pointer NULL, its length 0): reads out of range give zero,
 * or the all-zero record `zero_queue` / `zero_domain` point to (required). */
typedef struct GpolCtx {
    const GpolClusterRec *cluster;
    const GpolQueueRec *queues;
    size_t n_queues;
    const GpolDomainRec *domains;
    size_t n_domains;
    const GpolSym *literals;
    size_t n_literals;
    const uint64_t *sym_hashes;
    size_t n_hashes;
    const uint64_t *attrs;
    size_t n_attr_rows;
    size_t n_attrs;
    const GpolQueueRec *zero_queue;
    const GpolDomainRec *zero_domain;
} GpolCtx;

/* What the fused filter and score call writes for each node. */
typedef struct GpolEngineResult {
    /* The node passed every filter. */
    bool feasible;
    /* The filter that rejected it (an index in declaration order; the first that failed
     * in the order the code runs them, cheapest first), 65535 if feasible. */
    uint16_t rejected_by;
    /* The sum of clamped scores per tier, tier 1 first. */
    double tiers[GPOL_RECORDS_MAX_TIERS];
    /* The weighted sum of the untiered clamped scores. */
    double score;
    /* Scores that were NaN or outside [0, 1] (clamped; NaN counts as 0). */
    uint32_t faults;
} GpolEngineResult;
",
    );
    for (field, at) in [
        ("cluster", abi::CTX_CLUSTER),
        ("queues", abi::CTX_QUEUES),
        ("n_queues", abi::CTX_N_QUEUES),
        ("domains", abi::CTX_DOMAINS),
        ("n_domains", abi::CTX_N_DOMAINS),
        ("literals", abi::CTX_LITERALS),
        ("n_literals", abi::CTX_N_LITERALS),
        ("sym_hashes", abi::CTX_SYM_HASHES),
        ("n_hashes", abi::CTX_N_HASHES),
        ("attrs", abi::CTX_ATTRS),
        ("n_attr_rows", abi::CTX_N_ATTR_ROWS),
        ("n_attrs", abi::CTX_N_ATTRS),
        ("zero_queue", abi::CTX_ZERO_QUEUE),
        ("zero_domain", abi::CTX_ZERO_DOMAIN),
    ] {
        check("GpolCtx", Some(field), usize::try_from(at).unwrap_or(usize::MAX));
    }
    check("GpolCtx", None, size_of::<CtxRepr>());
    for (field, at) in [
        ("feasible", abi::OUT_FEASIBLE),
        ("rejected_by", abi::OUT_REJECTED_BY),
        ("tiers", abi::OUT_TIERS),
        ("score", abi::OUT_SCORE),
        ("faults", abi::OUT_FAULTS),
    ] {
        check("GpolEngineResult", Some(field), usize::try_from(at).unwrap_or(usize::MAX));
    }
    check("GpolEngineResult", None, size_of::<NodeResult>());
    h.push_str("\n/* The layout checks: a C compiler that lays a record out otherwise stops here. */\n");
    h.push_str(&asserts);
    let _ = write!(
        h,
        "
/* The object's entry points (one policy each). */

/* The first admit rule (index in declaration order) that refuses the job, or -1. */
int32_t {admit}(const GpolCtx *ctx, const GpolJobRec *job);

/* Every filter and score of the policy on `n` nodes for one job: out[i] for nodes[i]. */
void {filter_score}(const GpolCtx *ctx, const GpolJobRec *job, const GpolNodeRec *nodes, size_t n,
                       GpolEngineResult *out);

/* The weighted sum of the card_score rules for one card; clamping faults are added to *faults. */
double {card_score}(const GpolCtx *ctx, const GpolJobRec *job, const GpolNodeRec *node,
                       const GpolCardRec *card, uint32_t *faults);

/* The queue_order keys of queue `queue` (an index into ctx->queues), one per key. */
void {queue_keys}(const GpolCtx *ctx, uint32_t queue, double *keys);

/* The job_order keys of a job, one per key. */
void {job_keys}(const GpolCtx *ctx, const GpolJobRec *job, double *keys);

/* Whether gang clause `clause` applies to the job (1) or not (0). */
uint8_t {gang}(const GpolCtx *ctx, const GpolJobRec *job, uint32_t clause);

/* Whether victim rule `rule` allows evicting `victim` for `claimant` (1) or not (0), and its cost. */
uint8_t {victim}(const GpolCtx *ctx, uint32_t rule, const GpolJobRec *claimant, const GpolJobRec *victim,
                    double *cost);

/* The victim_order keys of `victim` for `claimant`, one per key. */
void {victim_keys}(const GpolCtx *ctx, const GpolJobRec *claimant, const GpolJobRec *victim, double *keys);

/* The layout the object was compiled against: compare with GPOL_RECORDS_LAYOUT_HASH (or
 * libgpol's gpol_schema_layout_hash()) before calling anything. */
extern const uint64_t {hash_symbol};

/* The functions the object imports, exported by libgpol (declared in gpol.h too). */
double {exp2}(double x);
double {log}(double x);
double {pow}(double x, double y);

#ifdef __cplusplus
}}  /* extern \"C\" */
#endif

#endif  /* GPOL_RECORDS_H */
",
        admit = codegen::ADMIT,
        filter_score = codegen::FILTER_SCORE,
        card_score = codegen::CARD_SCORE,
        queue_keys = codegen::QUEUE_KEYS,
        job_keys = codegen::JOB_KEYS,
        gang = codegen::GANG,
        victim = codegen::VICTIM,
        victim_keys = codegen::VICTIM_KEYS,
        hash_symbol = gpol_compiler::jit::object::LAYOUT_HASH_SYMBOL,
        exp2 = codegen::HELPERS[0],
        log = codegen::HELPERS[1],
        pow = codegen::HELPERS[2],
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_every_record_is_declared_and_checked() {
        let h = header();
        for r in Record::ALL {
            for f in r.fields() {
                let assert = format!("offsetof({}, {}) == {}", struct_name(r), f.name, f.offset);
                assert!(h.contains(&assert), "missing: {assert}");
            }
            assert!(h.contains(&format!("sizeof({}) == {}", struct_name(r), size(r))));
        }
        assert!(h.contains(&format!("offsetof(GpolNodeRec, domains) == {}", offset_of!(NodeRec, domains))));
    }
}
