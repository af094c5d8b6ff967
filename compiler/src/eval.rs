//! What evaluating a compiled policy means, for both engines and everyone who calls
//! them: the [`Engine`] trait, what an evaluation sees besides its records ([`Ctx`]),
//! the verdict on a node ([`NodeResult`]) and score handling (decision D4). It depends
//! only on the IR and the schema, so the engines, the runtime and the pipeline that
//! builds engines can all use it without depending on each other.

use crate::ir::{AttrValue, Rule};
use crate::schema::{CardRec, ClusterRec, DomainRec, JobRec, NodeRec, QueueRec, Sym};

/// Tiers a policy may declare (D4).
pub const MAX_TIERS: usize = 4;

/// "No filter rejected this node."
pub const NONE: u16 = u16::MAX;

/// The verdict on one node for one job. `#[repr(C)]`: the JIT writes it by offset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeResult {
    pub feasible: bool,
    /// Index in `Program::filters` of the filter that rejected the node (`NONE` if feasible).
    /// The fused call runs filters cheapest first and reports the first that failed in
    /// that order; `explain` re-runs them in declaration order.
    pub rejected_by: u16,
    /// Sum of clamped scores per tier (tier 1 first).
    pub tiers: [f64; MAX_TIERS],
    /// Weighted sum of the untiered clamped scores, in declaration order.
    pub score: f64,
    /// Scores that were NaN or outside [0, 1] (clamped; NaN counts as 0).
    pub faults: u32,
}

/// What every evaluation can see besides its roots: the cluster, the queue and domain
/// tables that queue and domain references index, and the runtime's symbols.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub cluster: &'a ClusterRec<'a>,
    pub queues: &'a [QueueRec],
    pub domains: &'a [DomainRec],
    /// The runtime symbol of each of the program's string literals.
    pub literals: &'a [Sym],
    /// A 64-bit hash of each symbol's text, indexed by symbol (for `hash01`).
    pub sym_hashes: &'a [u64],
    /// The policy's attribute values, `attrs[queue][attr]`.
    pub attrs: &'a [Vec<AttrValue>],
}

/// Evaluates a compiled policy. Implementations are immutable and shareable across
/// threads; all state lives in the arguments.
pub trait Engine: Send + Sync {
    /// The first admit rule (index in `Program::admit`) that rejects the job.
    fn admit(&self, ctx: &Ctx<'_>, job: &JobRec<'_>) -> Option<usize>;

    /// The fused hot path: every filter (cheapest first, stopping at the first that
    /// fails) and the scores of every node, for one job. `out.len()` must equal
    /// `nodes.len()`.
    fn filter_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, nodes: &[NodeRec<'_>], out: &mut [NodeResult]);

    /// The weighted sum of the `card_score` rules for one card (clamped per rule).
    fn card_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, node: &NodeRec<'_>, card: &CardRec) -> (f64, u32);

    /// The `queue_order` keys of a queue, in order (booleans as 0 or 1).
    fn queue_keys(&self, ctx: &Ctx<'_>, queue: u32, out: &mut [f64]);

    /// The `job_order` keys of a job.
    fn job_keys(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, out: &mut [f64]);

    /// Whether gang clause `clause` applies to the job (a clause without `when` does).
    fn gang_applies(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, clause: usize) -> bool;

    /// Whether victim rule `rule` allows evicting `victim` for `claimant`, and at what
    /// cost (0 when the rule has no cost).
    fn victim(&self, ctx: &Ctx<'_>, rule: usize, claimant: &JobRec<'_>, victim: &JobRec<'_>) -> (bool, f64);

    /// The `victim_order` keys of `victim` for `claimant` (booleans as 0 or 1).
    fn victim_keys(&self, ctx: &Ctx<'_>, claimant: &JobRec<'_>, victim: &JobRec<'_>, out: &mut [f64]);
}

/// Clamps a score to [0, 1] (D4): NaN becomes 0; either counts as a fault.
#[inline]
pub fn clamp_score(x: f64) -> (f64, u32) {
    if x.is_nan() || x < 0.0 {
        (0.0, 1)
    } else if x > 1.0 {
        (1.0, 1)
    } else {
        (x, 0)
    }
}

/// Order keys and costs are canonical: every NaN is the same NaN (D1).
#[inline]
pub(crate) fn canonical(x: f64) -> f64 {
    if x.is_nan() { f64::NAN } else { x }
}

/// Adds a rule's clamped score into the tiers or the weighted sum.
pub fn add_score(r: &Rule, raw: f64, out: &mut NodeResult) {
    let (s, fault) = clamp_score(raw);
    out.faults += fault;
    match r.tier {
        Some(t) => {
            if let Some(slot) = out.tiers.get_mut(usize::from(t).saturating_sub(1)) {
                *slot += s;
            }
        }
        None => out.score += r.weight * s,
    }
}
