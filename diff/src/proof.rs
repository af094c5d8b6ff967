//! Equivalence proved from structure: a decision kind is decided the same way by both
//! versions when the rules it runs have the same canonical forms (as a set where their
//! order cannot matter, as a list where it can) and the declarations those rules and
//! the runtime read for it are equal. Then no input can tell the versions apart.

use crate::canon::{self, Names};
use crate::report::Decision;
use gpol_compiler::hir;
use gpol_compiler::ir::{Body, Kind, Node, Rule};
use gpol_compiler::schema::Record;

/// What decides one kind, in a form that is equal exactly when the versions agree.
/// `rename` gives each rule's name as the new version calls it (reasons and evictions name
/// rules, so which rule decides is part of the decision).
pub fn fingerprint(decision: Decision, n: &Names<'_>, rename: &dyn Fn(&str) -> String) -> Option<String> {
    fingerprint_of(decision, n, rename, true)
}

/// The victim set's fingerprint without the eviction rules' conditions: equal in both
/// versions, with victim eligibility proved equal otherwise (which rules' conditions
/// hold, in order, at every point), the victim set is proved too.
pub fn victim_set_beyond_conditions(n: &Names<'_>, rename: &dyn Fn(&str) -> String) -> Option<String> {
    fingerprint_of(Decision::VictimSet, n, rename, false)
}

fn fingerprint_of(
    decision: Decision,
    n: &Names<'_>,
    rename: &dyn Fn(&str) -> String,
    conditions: bool,
) -> Option<String> {
    let p = n.program;
    let evicts = p.victims.iter().any(|v| v.kind != gpol_compiler::ir::VictimKind::Protect);
    if matches!(decision, Decision::VictimEligibility | Decision::VictimSet) && !evicts {
        // A version with no rule that evicts never evicts.
        return Some("never evicts".into());
    }
    // Admit rules and filters: a set (a conjunction), each with the name reasons give it.
    let set = |rules: &[Rule]| -> Option<Vec<String>> {
        let mut forms = rules
            .iter()
            .map(|r| canon::form(&r.body.node, n).map(|f| format!("{} {f}", rename(&r.name))))
            .collect::<Option<Vec<String>>>()?;
        forms.sort();
        Some(forms)
    };
    // Scores: a list, as the engines add them up in declaration order (a float sum in
    // another order can differ in its last bit, and so break a tie differently).
    let sum = |rules: &[Rule]| -> Option<Vec<String>> {
        rules
            .iter()
            .map(|r| canon::form(&r.body.node, n).map(|f| format!("tier {:?} weight {:?} {f}", r.tier, r.weight)))
            .collect()
    };
    let keys = |keys: &[gpol_compiler::ir::OrderKey]| -> Option<Vec<String>> {
        keys.iter().map(|k| canon::form(&k.body.node, n).map(|f| format!("{:?} {f}", k.dir))).collect()
    };
    // Eviction rules: a list (the first that allows names the eviction), with names.
    let victims = |with_cost: bool| -> Option<Vec<String>> {
        p.victims
            .iter()
            .map(|v| {
                let when = if conditions { canon::form(&v.when.node, n)? } else { "…".into() };
                let cost = match (&v.cost, with_cost) {
                    (Some(c), true) => Some(canon::form(&c.node, n)?),
                    _ => None,
                };
                Some(format!("{:?} {} {when} cost {cost:?}", v.kind, rename(&v.name)))
            })
            .collect()
    };
    let gang = || -> Option<Vec<String>> {
        p.gang
            .iter()
            .map(|g| {
                let when = match &g.when {
                    Some(w) => Some(canon::form(&w.node, n)?),
                    None => None,
                };
                let level = p.levels.get(usize::from(g.level)).cloned().unwrap_or_default();
                Some(format!("{:?} {level} {:?} {when:?}", g.kind, g.weight))
            })
            .collect()
    };
    let mut parts: Vec<String> = Vec::new();
    let mut bodies: Vec<&Body> = Vec::new();
    let mut push = |label: &str, forms: Option<Vec<String>>| -> Option<()> {
        parts.push(format!("{label}: {}", forms?.join(" | ")));
        Some(())
    };
    match decision {
        Decision::Admission => {
            // The first refusing rule decides whether a refusal is for good: with rules of
            // both kinds, their order matters.
            let mixed = p.admit.iter().any(|r| r.is_static) && p.admit.iter().any(|r| !r.is_static);
            let mut forms = set(&p.admit)?;
            if mixed {
                forms = p
                    .admit
                    .iter()
                    .map(|r| {
                        canon::form(&r.body.node, n).map(|f| format!("static {} {} {f}", r.is_static, rename(&r.name)))
                    })
                    .collect::<Option<Vec<String>>>()?;
            }
            push("admit", Some(forms))?;
            bodies.extend(p.admit.iter().map(|r| &r.body));
        }
        Decision::Feasibility => {
            push("filter", set(&p.filters))?;
            bodies.extend(p.filters.iter().map(|r| &r.body));
        }
        Decision::Ranking => {
            push("score", sum(&p.scores))?;
            bodies.extend(p.scores.iter().map(|r| &r.body));
        }
        Decision::CardChoice => {
            push("card_score", sum(&p.card_scores))?;
            bodies.extend(p.card_scores.iter().map(|r| &r.body));
        }
        Decision::QueueOrder => {
            // A queue's `head_*` fields are its next job's: job order and classes decide it.
            push("queue_order", keys(&p.queue_order))?;
            push("job_order", keys(&p.job_order))?;
            bodies.extend(p.queue_order.iter().chain(&p.job_order).map(|k| &k.body));
            parts.push(tree(n.policy));
            parts.push(classes(n.policy));
        }
        Decision::JobOrder => {
            push("job_order", keys(&p.job_order))?;
            bodies.extend(p.job_order.iter().map(|k| &k.body));
            parts.push(classes(n.policy));
        }
        Decision::Gang => {
            // The quota decides how many replicas an elastic gang takes, and per-model quotas where.
            push("gang", gang())?;
            push("filter", set(&p.filters))?;
            push("score", sum(&p.scores))?;
            parts.push(tree(n.policy));
            bodies.extend(p.gang.iter().filter_map(|g| g.when.as_ref()));
            bodies.extend(p.filters.iter().chain(&p.scores).map(|r| &r.body));
        }
        Decision::Quota => parts.push(tree(n.policy)),
        Decision::VictimEligibility => {
            // Guarantees and borrowing decide which running jobs are within guarantee.
            push("victims", victims(false))?;
            bodies.extend(p.victims.iter().map(|v| &v.when));
            parts.push(tree(n.policy));
            parts.push(classes(n.policy));
        }
        Decision::VictimSet => {
            push("victims", victims(true))?;
            push("victim_order", keys(&p.victim_order))?;
            push("filter", set(&p.filters))?;
            push("score", sum(&p.scores))?;
            push("gang", gang())?;
            parts.push(tree(n.policy));
            parts.push(classes(n.policy));
        }
    }
    // The declarations the rules read.
    let reads = |pred: &dyn Fn(&Node) -> bool| bodies.iter().any(|b| b.node.any(pred));
    if reads(&|x| matches!(x.kind, Kind::Field { record: Record::Queue, .. } | Kind::Attr { .. })) {
        parts.push(tree(n.policy));
    }
    if reads(&|x| x.reads(Record::Job, "priority") || x.reads(Record::Job, "priority_class")) {
        parts.push(classes(n.policy));
    }
    if reads(&|x| x.reads(Record::Job, "user_usage") || x.reads(Record::Job, "fair_tree")) {
        parts.push(tree(n.policy));
    }
    parts.sort();
    parts.dedup();
    Some(parts.join("\n"))
}

/// A queue's quota windows as written, without where: kind, amounts and window, in order.
pub fn windows(q: &hir::Queue) -> String {
    let each: Vec<String> =
        q.windows.iter().map(|w| format!("{} {:?} {}", w.kind.keyword(), w.amounts, w.window)).collect();
    each.join("; ")
}

/// The quota tree, its attributes and the settings that drive accounting, by name.
pub fn tree(p: &hir::Policy) -> String {
    let mut out = String::from("tree:");
    for (i, q) in p.queues.iter().enumerate() {
        let parent = q.parent.and_then(|x| p.queues.get(x)).map(|x| x.name.as_str());
        let attrs: Vec<String> = p
            .attrs
            .iter()
            .enumerate()
            .map(|(a, attr)| format!("{}={:?}", attr.name, p.attr_values.get(i).and_then(|v| v.get(a))))
            .collect();
        out.push_str(&format!(
            " [{} <{parent:?}> {:?} windows {} unset {:?} fsp {} w {:?} hl {:?} q {:?} {}]",
            q.name,
            q.quotas,
            windows(q),
            q.unset_guarantee,
            q.fairshare_parent,
            q.weight,
            q.usage_half_life,
            q.queueing,
            attrs.join(",")
        ));
    }
    out.push_str(&format!(" settings {:?}", p.settings));
    out
}

pub fn classes(p: &hir::Policy) -> String {
    let mut c = p.priority_classes.clone();
    c.sort_by(|a, b| a.0.cmp(&b.0));
    format!("classes: {c:?}")
}
