//! The analyses of a checked policy, made on its IR. The policy is lowered here, once,
//! within the size budget of its inlined code (E0041); every rule's worst-case cost is
//! held to its budget (E0042); and a proof is sought that its evictions cannot cycle
//! (W0009 where there is none). [`crate::load`] runs them after the checker and hands
//! the IR on to the engines.
//!
//! Public for this crate's tests of hostile input and of the shipped policies, which run
//! the checker and the analyses on their own thread, not on the pipeline's big stack;
//! other crates load policies.

use crate::cost::{self, RuleCost};
use crate::diag::{Code, Diagnostic};
use crate::eviction_proof::{self, Argument};
use crate::hir;
use crate::ir::Program;
use crate::limits::MAX_RULE_COST;
use std::sync::Arc;

/// What the analyses found in a policy that passed them.
#[derive(Clone, Debug)]
pub struct Analysed {
    /// The policy lowered: what both engines run.
    pub program: Arc<Program>,
    /// Every rule body's worst-case cost, each within the budget.
    pub costs: Vec<RuleCost>,
    /// Why the policy's evictions cannot cycle; `None` when it has no eviction rule, or
    /// when nothing shows it (then `warnings` gives W0009).
    pub evictions: Option<Argument>,
}

/// Lowers a policy that checked clean and analyses its IR. `Err` holds the errors that
/// stop it: code too large once its calls are inlined (E0041), or rules over the cost
/// budget (E0042).
pub fn analyse(policy: &hir::Policy) -> Result<Analysed, Vec<Diagnostic>> {
    let program = crate::lower::lower(policy).map_err(|too_large| vec![too_large.diagnostic(policy)])?;
    let costs = cost::rule_costs(&program);
    let too_costly: Vec<Diagnostic> =
        costs.iter().filter(|c| c.over_budget()).map(|c| over_cost_budget(policy, &program, c)).collect();
    if !too_costly.is_empty() {
        return Err(too_costly);
    }
    let evictions = if policy.victims.is_empty() { None } else { eviction_proof::prove(policy, &program) };
    Ok(Analysed { program: Arc::new(program), costs, evictions })
}

/// The warnings of a policy that passed the analyses: W0009 when it evicts and nothing
/// shows that its evictions cannot cycle.
pub(crate) fn warnings(policy: &hir::Policy, analysed: &Analysed) -> Vec<Diagnostic> {
    if policy.victims.is_empty() || analysed.evictions.is_some() {
        Vec::new()
    } else {
        vec![eviction_proof::not_proved(policy)]
    }
}

/// E0042 at a rule that may take more operations per evaluation than the budget.
fn over_cost_budget(policy: &hir::Policy, program: &Program, cost: &RuleCost) -> Diagnostic {
    let span = program.rule_span(policy, cost.rule).unwrap_or_default();
    let loops: Vec<String> = cost.loops.iter().map(|l| format!("{} ({})", l.over, l.max_len)).collect();
    let label = match loops.len() {
        0 => "this expression is too large".to_string(),
        1 => format!("a loop over {}", loops[0]),
        n => format!("{n} nested loops: over {}", loops.join(" × ")),
    };
    Diagnostic::new(
        Code::CostBudget,
        span,
        format!(
            "`{}` may take {} operations per evaluation, more than the budget of {MAX_RULE_COST}",
            cost.name,
            cost::display(cost.ops)
        ),
    )
    .label(label)
    .help("rules run for every job and node in every cycle: nest fewer loops, or loop over a shorter list")
}
