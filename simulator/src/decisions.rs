//! The scheduler's decisions as data: one record per placement, eviction, requeue, finish
//! or rejection, with job, node and rule names, as `gpolc sim --decisions` writes them
//! (JSON Lines) and as the Slurm adapter's tests compare them with what Slurm did.

use gpol_runtime::{Event, Scheduler};
use serde::{Deserialize, Serialize};

/// One decision of the scheduler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// When, seconds of simulated time.
    pub at_s: f64,
    /// What: `placed`, `grown`, `evicted`, `shrunk`, `requeued`, `finished`, `rejected`,
    /// `reserved`.
    pub kind: String,
    pub job: String,
    /// The nodes it concerns: one per replica placed, or the node lost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The job an eviction made room for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The rule that decided an eviction or a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl Decision {
    /// The decision an event of the scheduler's log records (`None` for a submission).
    pub fn of(s: &Scheduler, event: &Event) -> Option<Decision> {
        let name = |j: &usize| s.jobs()[*j].ask.name.clone();
        let node = |n: &usize| s.cluster().nodes[*n].name.clone();
        let rule = |r| Some(s.policy().program.rule_name(r));
        let d = |at_ms: &u64, kind: &str, job: &usize| Decision {
            at_s: *at_ms as f64 / 1000.0,
            kind: kind.to_string(),
            job: name(job),
            nodes: Vec::new(),
            by: None,
            rule: None,
        };
        Some(match event {
            Event::Submitted { .. } => return None,
            Event::Placed { job, nodes, at_ms } => {
                Decision { nodes: nodes.iter().map(node).collect(), ..d(at_ms, "placed", job) }
            }
            Event::Grown { job, node: n, at_ms } => Decision { nodes: vec![node(n)], ..d(at_ms, "grown", job) },
            Event::Reserved { job, nodes, at_ms } => {
                Decision { nodes: nodes.iter().map(node).collect(), ..d(at_ms, "reserved", job) }
            }
            Event::Rejected { job, rule: r, at_ms } => Decision { rule: rule(*r), ..d(at_ms, "rejected", job) },
            Event::Finished { job, at_ms } => d(at_ms, "finished", job),
            Event::Requeued { job, node: n, at_ms, .. } => {
                Decision { nodes: vec![node(n)], ..d(at_ms, "requeued", job) }
            }
            Event::Evicted { job, by, rule: r, at_ms, .. } => {
                Decision { by: Some(name(by)), rule: rule(*r), ..d(at_ms, "evicted", job) }
            }
            Event::Shrunk { job, by, rule: r, node: n, at_ms, .. } => {
                Decision { nodes: vec![node(n)], by: Some(name(by)), rule: rule(*r), ..d(at_ms, "shrunk", job) }
            }
        })
    }
}
