//! What generated cases are drawn from: the names both policies know (leaf queues,
//! priority classes, topology levels, label keys, strings) and, per field rules read, the
//! values that decide comparisons — every constant a rule compares the field with, from
//! either policy, solved through a linear expression where it can be
//! (`job.waiting / 1h * 10 < 90` cuts `job.waiting` at 9 h). Around each such cut the generator tries the
//! cut itself and a point of each interval it bounds: boundary-value enumeration.

use gpol_compiler::hir::{self, Builtin};
use gpol_compiler::ir::{AttrValue, Bin, Kind, Node, Program, QuotaKind};
use gpol_compiler::schema::Record;
use std::collections::{BTreeMap, BTreeSet};

/// The names and values cases are made of.
#[derive(Clone, Debug, Default)]
pub struct Vocab {
    /// Leaf queues of both policies (empty when both take every job in one queue).
    pub leaves: Vec<String>,
    /// Priority classes both declare.
    pub classes: Vec<String>,
    /// Topology levels both declare.
    pub levels: Vec<String>,
    pub job_label_keys: Vec<String>,
    pub node_label_keys: Vec<String>,
    /// String literals of either policy (label values, models, names).
    pub strings: Vec<String>,
    /// GPU models either policy names.
    pub models: Vec<String>,
    /// Per field (`job.priority`, `queue.allocated.gpu`): the values that decide it,
    /// sorted, cuts and the points between them.
    pub values: BTreeMap<String, Vec<f64>>,
    /// Per leaf queue both policies have: GPU allocations (whole cards) where its quotas,
    /// or its ancestors', change an answer — each guarantee, limit, guarantee plus borrow
    /// limit and guarantee minus lend limit of either version, and one card either side.
    pub quota_points: BTreeMap<String, Vec<u32>>,
    /// Seconds after Monday 00:00 local where what either policy decides may change with
    /// the time of week: its quota windows' edges, the times of day rules compare
    /// `cluster.time_of_day` with, each day's start where a rule reads `cluster.weekday`
    /// (empty: the time of week decides nothing).
    pub week_points: Vec<u64>,
    /// Whether fractional, MIG and multi-replica requests matter to either policy.
    pub sharing: bool,
    pub mig: bool,
    pub gangs: bool,
    /// Whether either policy has eviction rules.
    pub victims: bool,
    /// Every name a case must not use for its jobs and nodes (queues, E0011).
    pub reserved: BTreeSet<String>,
    /// Every field either policy reads (`job.bursty`, `node.labels`, `queue.allocated.gpu`).
    pub read: BTreeSet<String>,
}

impl Vocab {
    /// The vocabulary of two policies.
    pub fn of(old: (&hir::Policy, &Program), new: (&hir::Policy, &Program)) -> Vocab {
        let both = [old, new];
        let leaves = |p: &hir::Policy| -> BTreeSet<String> {
            if p.has_implicit_queue() {
                return BTreeSet::new();
            }
            p.queues.iter().filter(|q| q.children.is_empty()).map(|q| q.name.clone()).collect()
        };
        let common = |f: &dyn Fn(&hir::Policy) -> BTreeSet<String>| -> Vec<String> {
            f(old.0).intersection(&f(new.0)).cloned().collect()
        };
        let mut cuts: BTreeMap<String, BTreeSet<Cut>> = BTreeMap::new();
        let mut strings = BTreeSet::new();
        let mut models = BTreeSet::from(["gpu".to_string()]);
        for (policy, program) in both {
            for (_, _, body) in program.bodies() {
                collect(&body.node, program, &mut cuts);
            }
            // An order key is a sum of terms over several fields (`job.priority +
            // min(job.waiting / 1h * 10, 90)`): each constant in it may be where two jobs
            // trade places, so every field of the key takes them all.
            for key in program.job_order.iter().chain(&program.queue_order).chain(&program.victim_order) {
                let mut read = BTreeSet::new();
                fields(&key.body.node, &mut read);
                let mut values = Vec::new();
                constants(&key.body.node, program, &mut values);
                for f in &read {
                    for &v in &values {
                        add(&mut cuts, f, v);
                    }
                }
            }
            strings.extend(program.literals.iter().cloned());
            for q in &policy.queues {
                for quota in q.quotas.values() {
                    for (res, amount) in quota {
                        if let hir::Resource::Gpu(Some(model)) = res {
                            models.insert(model.clone());
                        }
                        let field = match res {
                            hir::Resource::Gpu(_) => "job.total_gpus",
                            hir::Resource::Cpu => "job.cpu",
                            hir::Resource::Mem => "job.mem",
                        };
                        add(&mut cuts, field, *amount);
                        add(&mut cuts, "queue.allocated.gpu", *amount);
                    }
                }
                for (kind, quota) in &q.quotas {
                    if kind.0 == QuotaKind::Guarantee
                        && let Some(g) = quota.get(&hir::Resource::Gpu(None))
                    {
                        add(&mut cuts, "job.total_gpus", (g / 2.0).floor());
                    }
                }
            }
            for (_, value) in &policy.priority_classes {
                add(&mut cuts, "job.priority", *value);
            }
        }
        // Literals that name models are the ones rules compare models with; any may be.
        models.extend(strings.iter().filter(|s| looks_like_model(s)).cloned());
        let values: BTreeMap<String, Vec<f64>> = cuts.into_iter().map(|(field, cuts)| (field, points(&cuts))).collect();
        let mut read = BTreeSet::new();
        for (_, program) in both {
            for (_, _, body) in program.bodies() {
                fields(&body.node, &mut read);
            }
        }
        let reads = |pred: &dyn Fn(&Node) -> bool| {
            both.iter().any(|(_, p)| p.bodies().iter().any(|(_, _, b)| b.node.any(pred)))
        };
        let field_read = |record: Record, name: &'static str| {
            let index = record.field(name).map(|(i, _)| i);
            move |n: &Node| matches!(n.kind, Kind::Field { record: r, field, .. } if r == record && Some(field) == index)
        };
        let sharing = reads(&field_read(Record::Job, "gpu_fraction"))
            || reads(&field_read(Record::Node, "sharing"))
            || reads(&field_read(Record::Node, "largest_free_fraction"))
            || both.iter().any(|(_, p)| !p.card_scores.is_empty());
        let mig = reads(&field_read(Record::Job, "mig_profile")) || reads(&|n| matches!(n.kind, Kind::Mig { .. }));
        let gangs = both.iter().any(|(_, p)| !p.gang.is_empty()) || reads(&field_read(Record::Job, "replicas"));
        let reserved = both
            .iter()
            .flat_map(|(p, _)| p.queues.iter().map(|q| q.name.clone()).chain(["cluster".to_string()]))
            .collect();
        // A policy without a tree takes every job whatever queue it names: then the
        // other's leaves are the ones to use.
        let leaves = match (old.0.has_implicit_queue(), new.0.has_implicit_queue()) {
            (true, false) => leaves(new.0).into_iter().collect(),
            (false, true) => leaves(old.0).into_iter().collect(),
            _ => common(&leaves),
        };
        let quota_points = leaves.iter().map(|l| (l.clone(), quota_points(l, &[old.0, new.0]))).collect();
        let mut week_points: BTreeSet<u64> =
            both.iter().flat_map(|(p, _)| p.quota_edges()).map(|m| u64::from(m) * 60).collect();
        let day = |t: &f64| (t.is_finite() && *t >= 0.0 && *t < 86_400.0).then_some(t.round() as u64);
        week_points.extend(values.get("cluster.time_of_day").into_iter().flatten().filter_map(day));
        if read.contains("cluster.weekday") {
            week_points.extend((0..7).map(|d| d * 86_400));
        }
        Vocab {
            quota_points,
            week_points: week_points.into_iter().collect(),
            leaves,
            classes: common(&|p| p.priority_classes.iter().map(|(n, _)| n.clone()).collect()),
            levels: common(&|p| p.levels.iter().cloned().collect()),
            job_label_keys: union(both.iter().map(|(_, p)| &p.job_labels)),
            node_label_keys: union(both.iter().map(|(_, p)| &p.node_labels)),
            strings: strings.into_iter().collect(),
            models: models.into_iter().collect(),
            values,
            sharing,
            mig,
            gangs,
            victims: both.iter().any(|(_, p)| !p.victims.is_empty()),
            reserved,
            read,
        }
    }

    /// The deciding values of a field (empty if no rule compares it with a constant).
    pub fn values(&self, field: &str) -> &[f64] {
        self.values.get(field).map_or(&[], Vec::as_slice)
    }
}

fn union<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    lists.flatten().cloned().collect::<BTreeSet<_>>().into_iter().collect()
}

/// A leaf's deciding GPU allocations (see [`Vocab::quota_points`]).
fn quota_points(leaf: &str, policies: &[&hir::Policy]) -> Vec<u32> {
    let mut cuts = BTreeSet::new();
    // The amounts in force in every phase of the week (quota windows).
    let phases = policies.iter().flat_map(|p| {
        std::iter::once(None).chain(p.quota_edges().into_iter().map(Some)).map(move |m| (p, p.quotas_at(m)))
    });
    for (p, quotas) in phases {
        let mut at = p.queue(leaf);
        while let Some(i) = at.filter(|&i| i < p.queues.len()) {
            let gpu = |k: QuotaKind| {
                quotas[i].get(&hir::QuotaKindKey(k)).and_then(|x| x.get(&hir::Resource::Gpu(None))).copied()
            };
            let g = gpu(QuotaKind::Guarantee).unwrap_or(0.0);
            let values = [
                Some(g),
                gpu(QuotaKind::Limit),
                gpu(QuotaKind::BorrowLimit).map(|b| g + b),
                gpu(QuotaKind::LendLimit).map(|l| g - l),
            ];
            for v in values.into_iter().flatten().filter(|v| v.is_finite() && *v >= 0.0 && *v <= 4096.0) {
                let v = v.round() as u32;
                cuts.extend([v.saturating_sub(1), v, v + 1]);
            }
            at = p.queues[i].parent;
        }
    }
    cuts.into_iter().collect()
}

/// Model names are short lower-case words with a digit (`h100`, `a100-80gb`).
fn looks_like_model(s: &str) -> bool {
    s.len() <= 24
        && s.chars().any(|c| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// A value where a comparison changes its answer, kept exactly (`f64` ordered by bits of
/// its total order).
#[derive(Clone, Copy, Debug)]
struct Cut(f64);

impl PartialEq for Cut {
    fn eq(&self, other: &Cut) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Cut {}

impl PartialOrd for Cut {
    fn partial_cmp(&self, other: &Cut) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cut {
    fn cmp(&self, other: &Cut) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

fn add(cuts: &mut BTreeMap<String, BTreeSet<Cut>>, field: &str, value: f64) {
    if value.is_finite() {
        cuts.entry(field.to_string()).or_default().insert(Cut(value));
    }
}

/// The cuts and one point inside each interval they bound (a unit beyond each end).
fn points(cuts: &BTreeSet<Cut>) -> Vec<f64> {
    let cuts: Vec<f64> = cuts.iter().map(|c| c.0).collect();
    let mut out = Vec::with_capacity(cuts.len() * 2 + 1);
    for (i, &c) in cuts.iter().enumerate() {
        if i == 0 {
            out.push(c - step(c));
        }
        out.push(c);
        out.push(match cuts.get(i + 1) {
            Some(&next) => c + (next - c) / 2.0,
            None => c + step(c),
        });
    }
    out
}

/// A step beyond the outermost cuts: one unit (a card, a second, a byte, a point of
/// priority), or a hundredth for a fraction.
fn step(c: f64) -> f64 {
    if c.fract() == 0.0 || c.abs() >= 10.0 { 1.0 } else { 0.01 }
}

/// The path of a field read (`job.priority`, `queue.allocated.gpu`), if the node is one.
pub fn field_path(node: &Node) -> Option<String> {
    match &node.kind {
        Kind::Field { base, record, field } => {
            let name = record.fields().get(usize::from(*field))?.name;
            match record {
                Record::Resources => Some(format!("{}.{name}", field_path(base)?)),
                r => Some(format!("{}.{name}", r.name())),
            }
        }
        _ => None,
    }
}

/// `k·field + m` for an expression linear in one field.
fn linear(node: &Node) -> Option<(String, f64, f64)> {
    match &node.kind {
        Kind::Field { .. } => field_path(node).map(|f| (f, 1.0, 0.0)),
        Kind::Neg(x) => linear(x).map(|(f, k, m)| (f, -k, -m)),
        Kind::Unwrap(x) => linear(x),
        Kind::Bin(op, a, b) => {
            let (num_a, num_b) = (constant(a), constant(b));
            match (op, num_a, num_b) {
                (Bin::Add, Some(c), None) => linear(b).map(|(f, k, m)| (f, k, m + c)),
                (Bin::Add, None, Some(c)) => linear(a).map(|(f, k, m)| (f, k, m + c)),
                (Bin::Sub, None, Some(c)) => linear(a).map(|(f, k, m)| (f, k, m - c)),
                (Bin::Sub, Some(c), None) => linear(b).map(|(f, k, m)| (f, -k, c - m)),
                (Bin::Mul, Some(c), None) => linear(b).map(|(f, k, m)| (f, k * c, m * c)),
                (Bin::Mul, None, Some(c)) => linear(a).map(|(f, k, m)| (f, k * c, m * c)),
                (Bin::Div, None, Some(c)) if c != 0.0 => linear(a).map(|(f, k, m)| (f, k / c, m / c)),
                _ => None,
            }
        }
        _ => None,
    }
}

fn constant(node: &Node) -> Option<f64> {
    match node.kind {
        Kind::Num(x) => Some(x),
        _ => None,
    }
}

/// Every field an expression reads (labels as `job.labels`).
fn fields(node: &Node, out: &mut BTreeSet<String>) {
    if let Some(f) = field_path(node) {
        out.insert(f);
    }
    for c in node.children() {
        fields(c, out);
    }
}

/// Every constant in an expression, and the numeric values of the queue attributes it reads.
fn constants(node: &Node, program: &Program, out: &mut Vec<f64>) {
    match &node.kind {
        Kind::Num(x) => out.push(*x),
        Kind::Attr { attr, .. } => {
            for per_queue in &program.attrs {
                if let Some(AttrValue::Num(x)) = per_queue.get(usize::from(*attr)) {
                    out.push(*x);
                }
            }
        }
        _ => {}
    }
    for c in node.children() {
        constants(c, program, out);
    }
}

/// The cuts comparisons (and `min`/`max`/`clamp`) make in an expression.
fn collect(node: &Node, program: &Program, cuts: &mut BTreeMap<String, BTreeSet<Cut>>) {
    let compares = matches!(
        node.kind,
        Kind::Bin(Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge | Bin::Eq | Bin::Ne, _, _)
            | Kind::Call(Builtin::Min | Builtin::Max | Builtin::Clamp, _)
    );
    if compares {
        let mut read = BTreeSet::new();
        fields(node, &mut read);
        let mut values = Vec::new();
        constants(node, program, &mut values);
        for f in &read {
            for &v in &values {
                add(cuts, f, v);
            }
        }
        // `lhs op c` with lhs linear in one field: the field's own cut.
        let sides: Vec<&Node> = node.children();
        for (i, side) in sides.iter().enumerate() {
            let Some((f, k, m)) = linear(side) else { continue };
            if k == 0.0 {
                continue;
            }
            for (j, other) in sides.iter().enumerate() {
                if i == j {
                    continue;
                }
                let mut vals = Vec::new();
                constants(other, program, &mut vals);
                for c in vals {
                    add(cuts, &f, (c - m) / k);
                }
            }
        }
    }
    for c in node.children() {
        collect(c, program, cuts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(text: &str) -> Vocab {
        let p = gpol_compiler::load::compile_text("t.gpol", text, gpol_compiler::engine::EngineKind::Interp)
            .expect("compiles");
        Vocab::of((&p.policy, &p.program), (&p.policy, &p.program))
    }

    #[test]
    fn a_comparison_with_a_constant_cuts_its_field_there() {
        let v = vocab("policy p\nadmit small { job.total_gpus <= 8 gpu }\n");
        assert_eq!(v.values("job.total_gpus"), &[7.0, 8.0, 9.0]);
    }

    #[test]
    fn linear_expressions_are_solved_for_their_field() {
        let v = vocab("policy p\njob_order { min(job.waiting / 1h * 10, 90) desc }\n");
        let waiting = v.values("job.waiting");
        assert!(waiting.contains(&(9.0 * 3600.0)), "{waiting:?}");
    }

    #[test]
    fn points_lie_between_cuts() {
        let cuts: BTreeSet<Cut> = [Cut(4.0), Cut(8.0)].into();
        assert_eq!(points(&cuts), vec![3.0, 4.0, 6.0, 8.0, 9.0]);
    }
}
