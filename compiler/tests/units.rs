//! Known answers for types and units: what checks, what does not, and the types the
//! checker gives. (Rejections are also snapshot-tested in tests/diagnostics.)

use gpol_compiler::check::check;
use gpol_compiler::diag::Code;
use gpol_compiler::source::{SourceFile, SourceMap};
use gpol_compiler::types::Ty;
use gpol_compiler::units::Dim;

/// The codes reported for a policy made of `body`.
fn codes(body: &str) -> Vec<Code> {
    let text = format!("policy p\n\n{body}\n");
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("t.gpol", text));
    check(&mut sources, id).diagnostics.into_iter().map(|d| d.code).collect()
}

fn score_type(expr: &str) -> Ty {
    let text = format!("policy p\n\nfilter f {{ {expr} == {expr} }}\n");
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("t.gpol", text));
    let checked = check(&mut sources, id);
    assert!(checked.diagnostics.is_empty(), "{expr}: {:?}", checked.diagnostics);
    let policy = checked.policy.expect("the policy checks");
    match &policy.rules[0].body.kind {
        gpol_compiler::hir::ExprKind::Binary(_, lhs, _) => lhs.ty.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unit_algebra() {
    assert_eq!(score_type("node.gpu_mem / job.gpu_mem"), Ty::NUMBER, "bytes / bytes is a fraction");
    assert_eq!(score_type("node.gpu_mem * 50%"), Ty::Num(Dim::BYTES), "bytes * fraction is bytes");
    assert_eq!(score_type("job.total_gpus * job.runtime"), Ty::Num(Dim::GPU.times(Dim::TIME)), "GPU-time");
    assert_eq!(score_type("node.free_cards / node.cards"), Ty::NUMBER);
    assert_eq!(score_type("80GiB / node.cards"), Ty::Num(Dim::BYTES.per(Dim::GPU)));
    assert_eq!(score_type("-job.waiting"), Ty::Num(Dim::TIME));
    assert_eq!(score_type("min(job.waiting / 1h, 10)"), Ty::NUMBER);
    assert_eq!(score_type("sum(c in node.cards_list: c.free)"), Ty::Num(Dim::GPU));
    assert_eq!(score_type("job.expected_duration ?? 1h"), Ty::Num(Dim::TIME));
    assert_eq!(score_type("floor(job.waiting)"), Ty::Num(Dim::TIME), "rounding keeps the unit");
    assert_eq!(score_type("round(node.free_gpu)"), Ty::Num(Dim::GPU));
    assert_eq!(score_type("mod(cluster.time, 1d)"), Ty::Num(Dim::TIME));
}

#[test]
fn unit_mismatches_are_errors() {
    assert_eq!(codes("filter f { node.gpu_mem > 40 }"), vec![Code::UnitMismatch], "bytes vs a bare number");
    assert_eq!(codes("filter f { node.gpu_mem > 40GiB }"), vec![]);
    assert_eq!(codes("filter f { job.whole_cards + job.runtime > 0 gpu }"), vec![Code::UnitMismatch]);
    assert_eq!(codes("filter f { job.waiting > 1 gpu }"), vec![Code::UnitMismatch]);
    assert_eq!(codes("score s { node.free_cards }"), vec![Code::NotNumeric], "a score has no unit");
    assert_eq!(codes("filter f { sqrt(node.gpu_mem) > 1 }"), vec![Code::UnitMismatch]);
    assert_eq!(codes("filter f { mod(cluster.time, 1 gpu) > 0s }"), vec![Code::UnitMismatch]);
    assert_eq!(codes("filter f { ceil(job.waiting) > 1 }"), vec![Code::UnitMismatch]);
}

#[test]
fn literals_convert_to_base_units() {
    for (a, b) in [
        ("1GiB", "1024MiB"),
        ("1KB", "1000B"),
        ("1h", "60m"),
        ("1d", "24h"),
        ("1w", "7d"),
        ("1s", "1000ms"),
        ("50%", "0.5"),
    ] {
        let c = codes(&format!("filter f {{ job.gpu_mem >= 0B and {a} == {b} }}"));
        // Equal constants fold: the comparison is constant, but the rule is not.
        assert_eq!(c, vec![], "{a} == {b}");
        let text = format!("policy p\n\nconst _x = {a} == {b}\n");
        let mut sources = SourceMap::new();
        let id = sources.add(SourceFile::new("t.gpol", text));
        assert!(check(&mut sources, id).diagnostics.is_empty(), "{a} == {b}");
    }
    assert_eq!(codes("filter f { 1 gpu > 0 gpu }"), vec![Code::ConstantRule]);
}

#[test]
fn strings_support_only_equality_and_membership() {
    assert_eq!(codes("filter f { node.gpu_model == \"h100\" }"), vec![]);
    assert_eq!(codes("filter f { node.gpu_model in [\"h100\", \"a100\"] }"), vec![]);
    assert_eq!(codes("filter f { node.gpu_model not in job.allowed_models }"), vec![]);
    assert_eq!(codes("filter f { node.labels[\"zone\"] != \"a\" }"), vec![]);
    assert_eq!(codes("filter f { node.gpu_model < \"h100\" }"), vec![Code::StringOp]);
    assert_eq!(codes("filter f { node.gpu_model + \"x\" == \"y\" }"), vec![Code::StringOp]);
}

#[test]
fn enums_and_optionals() {
    assert_eq!(codes("filter f { node.sharing == mig }"), vec![]);
    assert_eq!(codes("filter f { node.sharing == migg }"), vec![Code::UnknownName]);
    assert_eq!(codes("filter f { (job.mig_profile ?? 1g.10gb) == 1g.10gb }"), vec![]);
    assert_eq!(codes("filter f { has(job.mig_profile) }"), vec![]);
    assert_eq!(codes("filter f { job.mig_profile == 1g.10gb }"), vec![Code::OptionalMisuse]);
    assert_eq!(codes("filter f { node.free_mig[3g.40gb] > 0 }"), vec![]);
    assert_eq!(codes("filter f { node.sharing == 1g.10gb }"), vec![Code::TypeMismatch]);
}
