//! The compiled-policy interface every consumer uses (runtime, simulator, adapters):
//! one trait, implemented by the reference interpreter and by the JIT, so a flag
//! switches engines. Score handling (decision D4) lives here, once, for both.

use crate::hir;
use crate::interp::{self, Ctx, Roots, Val};
use crate::ir::{Program, Rule, RuleId};
use crate::lower;
use crate::schema::{CardRec, JobRec, NodeRec};
use crate::source::Span;
use crate::syntax::RuleKind;
use std::sync::Arc;

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

/// Engine selection, for `--engine jit|interp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EngineKind {
    #[default]
    Jit,
    Interp,
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

/// A policy ready to evaluate: the checked form (for explain and tests), the IR, and an
/// engine. Cheap to share: `Clone` copies two `Arc`s.
#[derive(Clone)]
pub struct CompiledPolicy {
    pub policy: Arc<hir::Policy>,
    pub program: Arc<Program>,
    engine: Arc<dyn Engine>,
    kind: EngineKind,
}

impl CompiledPolicy {
    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }

    /// Which engine runs it.
    pub fn engine_kind(&self) -> EngineKind {
        self.kind
    }
}

impl std::fmt::Debug for CompiledPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompiledPolicy({}, {:?})", self.policy.name, self.kind)
    }
}

/// Compiles a checked policy for the chosen engine.
pub fn compile(policy: hir::Policy, kind: EngineKind) -> Result<CompiledPolicy, crate::diag::Diagnostic> {
    let program = Arc::new(lower::lower(&policy).map_err(|e| e.diagnostic(&policy))?);
    let engine: Arc<dyn Engine> = match kind {
        EngineKind::Interp => Arc::new(InterpEngine { program: Arc::clone(&program) }),
        EngineKind::Jit => match crate::jit::compile(Arc::clone(&program)) {
            Ok(jit) => Arc::new(jit),
            Err(e) => return Err(backend_failure(&policy, &program, &e)),
        },
    };
    Ok(CompiledPolicy { policy: Arc::new(policy), program, engine, kind })
}

/// The diagnostic for a policy the backend could not compile: it names the rule (found
/// by compiling rules one at a time) and points at it.
pub fn backend_failure(policy: &hir::Policy, program: &Program, error: &str) -> crate::diag::Diagnostic {
    let culprit = crate::jit::culprit(program);
    let span = culprit.and_then(|id| rule_span(policy, program, id)).unwrap_or_default();
    let message = match culprit {
        Some(id) => format!("code generation failed for {}", program.rule_label(id)),
        None => "code generation failed".to_string(),
    };
    crate::diag::Diagnostic::new(crate::diag::Code::Backend, span, message)
        .label(crate::diag::snippet(error))
        .help("this is a bug in gpolc; please report it with the policy. `--engine interp` runs the policy without native code")
}

/// Where a rule of the program is written in the policy.
pub fn rule_span(policy: &hir::Policy, program: &Program, id: RuleId) -> Option<Span> {
    let i = |k: u16| usize::from(k);
    let named = |kind: RuleKind| {
        let name = program.rule_name(id);
        policy.rules.iter().find(|r| r.kind == kind && r.name == name).map(|r| r.span)
    };
    match id {
        RuleId::Admit(_) => named(RuleKind::Admit),
        RuleId::Filter(_) => named(RuleKind::Filter),
        RuleId::Score(_) => named(RuleKind::Score),
        RuleId::CardScore(_) => named(RuleKind::CardScore),
        RuleId::QueueOrder(k) => policy.queue_order.get(i(k)).map(|o| o.expr.span),
        RuleId::JobOrder(k) => policy.job_order.get(i(k)).map(|o| o.expr.span),
        RuleId::VictimOrder(k) => policy.victim_order.get(i(k)).map(|o| o.expr.span),
        RuleId::Gang(k) => policy.gang.get(i(k)).map(|g| g.span),
        RuleId::Victim(k) => policy.victims.get(i(k)).map(|v| v.span),
    }
}

impl std::str::FromStr for EngineKind {
    type Err = String;

    fn from_str(s: &str) -> Result<EngineKind, String> {
        match s {
            "jit" => Ok(EngineKind::Jit),
            "interp" => Ok(EngineKind::Interp),
            other => Err(format!("unknown engine `{other}`: use `jit` or `interp`")),
        }
    }
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
pub fn canonical(x: f64) -> f64 {
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

/// The reference engine.
pub struct InterpEngine {
    pub program: Arc<Program>,
}

impl InterpEngine {
    fn num(v: Val<'_>) -> f64 {
        match v {
            Val::F(x) => x,
            Val::B(b) => f64::from(u8::from(b)),
            _ => f64::NAN,
        }
    }
}

impl Engine for InterpEngine {
    fn admit(&self, ctx: &Ctx<'_>, job: &JobRec<'_>) -> Option<usize> {
        let roots = Roots { job: Some(job), ..Roots::default() };
        self.program.admit.iter().position(|r| !interp::eval(&r.body, ctx, &roots).b())
    }

    fn filter_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, nodes: &[NodeRec<'_>], out: &mut [NodeResult]) {
        let p = &*self.program;
        for (node, res) in nodes.iter().zip(out.iter_mut()) {
            *res = NodeResult { feasible: true, rejected_by: NONE, ..NodeResult::default() };
            let roots = Roots { job: Some(job), node: Some(node), ..Roots::default() };
            for &i in &p.filter_order {
                if !interp::eval(&p.filters[i].body, ctx, &roots).b() {
                    res.feasible = false;
                    res.rejected_by = u16::try_from(i).unwrap_or(NONE);
                    break;
                }
            }
            if !res.feasible {
                continue;
            }
            for r in &p.scores {
                add_score(r, interp::eval(&r.body, ctx, &roots).f(), res);
            }
        }
    }

    fn card_score(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, node: &NodeRec<'_>, card: &CardRec) -> (f64, u32) {
        let roots = Roots { job: Some(job), node: Some(node), card: Some(card), ..Roots::default() };
        let mut total = 0.0;
        let mut faults = 0;
        for r in &self.program.card_scores {
            let (s, f) = clamp_score(interp::eval(&r.body, ctx, &roots).f());
            total += r.weight * s;
            faults += f;
        }
        (total, faults)
    }

    fn queue_keys(&self, ctx: &Ctx<'_>, queue: u32, out: &mut [f64]) {
        let roots = Roots { queue: Some(queue), ..Roots::default() };
        for (k, slot) in self.program.queue_order.iter().zip(out.iter_mut()) {
            *slot = canonical(Self::num(interp::eval(&k.body, ctx, &roots)));
        }
    }

    fn job_keys(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, out: &mut [f64]) {
        let roots = Roots { job: Some(job), ..Roots::default() };
        for (k, slot) in self.program.job_order.iter().zip(out.iter_mut()) {
            *slot = canonical(Self::num(interp::eval(&k.body, ctx, &roots)));
        }
    }

    fn gang_applies(&self, ctx: &Ctx<'_>, job: &JobRec<'_>, clause: usize) -> bool {
        let roots = Roots { job: Some(job), ..Roots::default() };
        match self.program.gang.get(clause).map(|g| &g.when) {
            Some(Some(w)) => interp::eval(w, ctx, &roots).b(),
            Some(None) => true,
            None => false,
        }
    }

    fn victim(&self, ctx: &Ctx<'_>, rule: usize, claimant: &JobRec<'_>, victim: &JobRec<'_>) -> (bool, f64) {
        let Some(r) = self.program.victims.get(rule) else { return (false, 0.0) };
        let roots = Roots { claimant: Some(claimant), victim: Some(victim), ..Roots::default() };
        let ok = interp::eval(&r.when, ctx, &roots).b();
        let cost = r.cost.as_ref().map_or(0.0, |c| canonical(interp::eval(c, ctx, &roots).f()));
        (ok, cost)
    }

    fn victim_keys(&self, ctx: &Ctx<'_>, claimant: &JobRec<'_>, victim: &JobRec<'_>, out: &mut [f64]) {
        let roots = Roots { claimant: Some(claimant), victim: Some(victim), ..Roots::default() };
        for (k, slot) in self.program.victim_order.iter().zip(out.iter_mut()) {
            *slot = canonical(Self::num(interp::eval(&k.body, ctx, &roots)));
        }
    }
}
