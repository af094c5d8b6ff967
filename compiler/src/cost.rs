//! The worst-case cost of one evaluation of each rule, from its IR: every operation
//! counts one, a built-in call a few, an `if` its dearer branch, and a loop its body
//! times the most elements its list can hold — a literal's length, or the documented
//! input limit of a list field (docs/limits.md). Every rule terminates, so the bound is
//! finite; a rule over [`MAX_RULE_COST`] is refused (E0042).

use crate::ir::{Kind, Node, Program, RuleId};
use crate::limits::MAX_RULE_COST;
use crate::schema::FieldTy;

/// What one rule body may cost.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleCost {
    pub rule: RuleId,
    /// The body's name as reports give it (`filter fits`, `spread when`).
    pub name: String,
    /// Operations in the worst case, saturating at `u64::MAX`.
    pub ops: u64,
    /// The loops on the dearest path, outermost first.
    pub loops: Vec<LoopBound>,
}

/// One loop and the most times its body runs.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopBound {
    /// What it iterates over: `node.cards_list`, `a list of 3`.
    pub over: String,
    pub max_len: u64,
}

impl RuleCost {
    pub fn over_budget(&self) -> bool {
        self.ops > MAX_RULE_COST
    }
}

/// The cost of every rule body of `program`, in declaration order of kinds.
pub(crate) fn rule_costs(program: &Program) -> Vec<RuleCost> {
    program
        .bodies()
        .into_iter()
        .map(|(rule, name, body)| {
            let (ops, loops) = worst_case(&body.node);
            RuleCost { rule, name, ops, loops }
        })
        .collect()
}

/// `ops` for people: `4.3e10` rather than twenty digits, `u64::MAX` as "unbounded".
pub fn display(ops: u64) -> String {
    if ops == u64::MAX {
        "more than 1.8e19".to_string()
    } else if ops < 10_000_000 {
        ops.to_string()
    } else {
        format!("{:.1e}", ops as f64)
    }
}

/// Built-in calls (`sqrt`, `log`, `hash01`…) count as this many operations.
const CALL_OPS: u64 = 4;

/// The worst-case operations of `n`, and the loops on its dearest path.
pub(crate) fn worst_case(n: &Node) -> (u64, Vec<LoopBound>) {
    let dearest = |nodes: Vec<&Node>| -> (u64, Vec<LoopBound>) {
        let mut total = 0u64;
        let mut loops = Vec::new();
        let mut top = 0;
        for c in nodes {
            let (ops, l) = worst_case(c);
            total = total.saturating_add(ops);
            if ops > top {
                (top, loops) = (ops, l);
            }
        }
        (total, loops)
    };
    let (ops, loops) = match &n.kind {
        Kind::If(cond, t, f) => {
            let (c, cl) = worst_case(cond);
            let ((tops, tl), (fops, fl)) = (worst_case(t), worst_case(f));
            let (branch, bl) = if tops >= fops { (tops, tl) } else { (fops, fl) };
            (c.saturating_add(branch), if c > branch { cl } else { bl })
        }
        Kind::Loop { list, body, .. } => {
            let (list_ops, _) = worst_case(list);
            let (body_ops, inner) = worst_case(body);
            let bound = LoopBound { over: describe(list), max_len: max_len(list) };
            let ops = list_ops.saturating_add(bound.max_len.saturating_mul(body_ops.saturating_add(1)));
            (ops, std::iter::once(bound).chain(inner).collect())
        }
        Kind::Call(_, args) => {
            let (ops, loops) = dearest(args.iter().collect());
            (ops.saturating_add(CALL_OPS), loops)
        }
        _ => dearest(n.children()),
    };
    (ops.saturating_add(1), loops)
}

/// The most elements the list `n` evaluates to.
fn max_len(n: &Node) -> u64 {
    match &n.kind {
        Kind::ListLit(items) => items.len() as u64,
        Kind::If(_, t, f) => max_len(t).max(max_len(f)),
        Kind::Field { record, field, .. } => field_len(*record, *field).unwrap_or_else(any_list_len),
        _ => any_list_len(),
    }
}

fn field_len(record: crate::schema::Record, field: u16) -> Option<u64> {
    record.fields().get(usize::from(field)).and_then(|f| f.ty.max_len()).map(u64::from)
}

/// A list the IR does not say the origin of (a `let`-bound one) holds at most as many
/// elements as the longest list field.
fn any_list_len() -> u64 {
    use crate::schema::Record;
    let lists = [FieldTy::List(Record::Card), FieldTy::List(Record::Shape), FieldTy::StrList];
    lists.iter().filter_map(|t| t.max_len()).max().map_or(0, u64::from)
}

fn describe(list: &Node) -> String {
    match &list.kind {
        Kind::ListLit(items) => format!("a list of {}", items.len()),
        Kind::Field { record, field, .. } => match record.fields().get(usize::from(*field)) {
            Some(f) => format!("{}.{}", record.name(), f.name),
            None => "a list".to_string(),
        },
        _ => "a list".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load;

    fn costs(src: &str) -> Vec<RuleCost> {
        let checked = load::Checked::from_text("cost.gpol", src).into_policy().expect("checks");
        rule_costs(&checked.analysed.program)
    }

    #[test]
    fn a_plain_comparison_costs_a_few_operations() {
        let c = costs("policy p\nfilter f { job.total_gpus <= node.free_gpu }\n");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "filter f");
        // The comparison, its two field reads and their two roots.
        assert_eq!(c[0].ops, 5);
        assert!(c[0].loops.is_empty());
    }

    #[test]
    fn a_loop_counts_its_body_at_the_list_limit() {
        let c = costs("policy p\nscore s { count(c in node.cards_list: c.free == 1 gpu) }\n");
        assert_eq!(c[0].loops, vec![LoopBound { over: "node.cards_list".into(), max_len: 64 }]);
        let one = costs("policy p\nscore s { count(c in node.cards_list: true) }\n")[0].ops;
        // Each element adds the body and one step; `c.free == 1 gpu` is three more.
        assert_eq!(c[0].ops, one + 64 * 3);
    }

    #[test]
    fn nested_loops_multiply_and_name_each_level() {
        let nested = "policy p\nscore s { count(a in node.cards_list: any(b in node.cards_list: any(c in job.allowed_models: true))) }\n";
        let c = &costs(nested)[0];
        let over: Vec<&str> = c.loops.iter().map(|l| l.over.as_str()).collect();
        assert_eq!(over, ["node.cards_list", "node.cards_list", "job.allowed_models"]);
        assert!(c.ops >= 64 * 64 * 64, "{}", c.ops);
        assert!(!c.over_budget());
    }

    #[test]
    fn six_nested_loops_are_refused_by_check() {
        let mut body = "true".to_string();
        for v in ["a", "b", "c", "d", "e", "f"] {
            body = format!("any({v} in node.cards_list: {body})");
        }
        let checked = load::Checked::from_text("cost.gpol", &format!("policy p\nfilter f {{ {body} }}\n"));
        let codes: Vec<_> = checked.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, [crate::diag::Code::CostBudget]);
        assert!(checked.diagnostics[0].primary.message.contains("6 nested loops"), "{:?}", checked.diagnostics[0]);
    }
}
