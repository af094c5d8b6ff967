//! E0041: compile-time work past its step budget. Two stages do bounded work for the
//! user, the checker folding constants and lowering inlining calls; both report it with
//! this one diagnostic, so neither depends on the other for it.

use crate::diag::{Code, Diagnostic, snippet};
use crate::source::Span;

/// E0041: compile-time work over its budget at `span`, through the calls `chain`
/// (outermost first; long chains keep their ends).
pub(crate) fn over_budget(span: Span, doing: &str, chain: &[&str], limit: u64) -> Diagnostic {
    let label = match chain.len() {
        0 => "too much work when the policy is compiled".to_string(),
        n => {
            let names: Vec<String> = chain.iter().map(|c| snippet(c)).collect();
            let shown = if n <= 8 {
                names.join(" → ")
            } else {
                format!("{} → … → {}", names[..3].join(" → "), names[n - 3..].join(" → "))
            };
            format!("in the calls {shown} ({n} deep)")
        }
    };
    Diagnostic::new(Code::OverBudget, span, format!("{doing} takes more than {limit} steps")).label(label).help(
        "each call is evaluated, or inlined, where it is made, so a function that calls another twice doubles the work at every \
         level: bind a repeated call to a `let` and use the name twice",
    )
}
