//! Runs a policy's `test` blocks: builds the cluster and jobs a test describes, plays
//! its steps, and checks its expectations. A scheduling cycle runs before an expectation
//! is checked whenever anything changed since the last cycle (a node, a job, time).

use crate::explain;
use crate::fit::Ask;
use crate::frag;
use crate::jobs::{JobId, State};
use crate::model::SpecError;
use crate::scheduler::account::{self, Account};
use crate::scheduler::{ClockLimit, Event, Scheduler, StartOnError, SubmitError};
use gpol_compiler::diag::Diagnostic;
use gpol_compiler::engine::{CompiledPolicy, EngineKind};
use gpol_compiler::hir::{self, Expect, Step, TestName};
use gpol_compiler::interp::{self, Roots, Val};
use gpol_compiler::ir::VTy;
use gpol_compiler::schema::{Record, ShapeTable};
use gpol_compiler::source::Span;
use std::collections::HashMap;
use std::sync::Arc;

/// One expectation that did not hold.
#[derive(Clone, Debug)]
pub struct Failure {
    pub span: Span,
    pub expected: String,
    pub actual: String,
    /// The explain trace of the job concerned, if any.
    pub explain: String,
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub name: String,
    pub span: Span,
    pub expectations: usize,
    pub failures: Vec<Failure>,
    /// A scenario that could not be set up (a job that does not fit where `run` puts it).
    pub error: Option<SetupError>,
}

/// Why a test's scenario could not be set up: the step that failed, and its error.
#[derive(Clone, Debug, PartialEq)]
pub enum SetupError {
    Node(SpecError),
    Submit(SubmitError),
    Run(StartOnError),
    Advance(ClockLimit),
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::Node(e) => e.fmt(f),
            SetupError::Submit(e) => e.fmt(f),
            SetupError::Run(e) => e.fmt(f),
            SetupError::Advance(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SetupError {}

/// Why a test could not be shown to play alike in both engines.
#[derive(Clone, Debug)]
pub enum EnginesError {
    /// The policy does not compile for one of them.
    Compile(Box<Diagnostic>),
    /// They decided differently: every event of each.
    Disagree { jit: Vec<Event>, interp: Vec<Event> },
}

impl std::fmt::Display for EnginesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnginesError::Compile(d) => f.write_str(&d.message),
            EnginesError::Disagree { jit, interp } => {
                write!(f, "the JIT and the interpreter disagree:\n  jit:    {jit:?}\n  interp: {interp:?}")
            }
        }
    }
}

impl std::error::Error for EnginesError {}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.error.is_none()
    }
}

/// Runs every test of a compiled policy.
pub fn run_all(policy: &CompiledPolicy) -> Vec<Outcome> {
    policy.policy.tests.iter().map(|t| run(policy, t)).collect()
}

/// When `run_with` lets the caller look at the scheduler.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Moment<'a> {
    /// A cycle is about to run; what the test's own steps did since the last one
    /// (submissions, jobs run and completed, jobs requeued by failed nodes).
    BeforeCycle(&'a [Event]),
    /// A cycle has run: each turn as it was decided (recorded while the test is small
    /// enough: pending jobs times nodes at most [`TRACED_WORK`]), and what it decided.
    AfterCycle { turns: &'a [Account], decided: &'a [Event] },
}

/// A test played to its end.
pub struct Played {
    pub outcome: Outcome,
    /// The scheduler as the test left it.
    pub scheduler: Scheduler,
    /// What happened, in order: the test's steps (submissions, jobs run and completed,
    /// jobs failed nodes requeued) and every cycle's decisions.
    pub events: Vec<Event>,
}

/// Runs one test, showing the scheduler to `observe` around every cycle.
pub fn run_with(policy: &CompiledPolicy, test: &hir::Test, observe: impl FnMut(Moment, &Scheduler)) -> Played {
    run_from(Scheduler::new(policy.clone()), test, observe)
}

/// [`run_with`] on a scheduler that has no nodes or jobs yet — a clone of a fresh one,
/// for callers that run many tests of one policy and would rather not set one up each time.
pub fn run_from(mut s: Scheduler, test: &hir::Test, mut observe: impl FnMut(Moment, &Scheduler)) -> Played {
    s.track_users();
    s.set_task_shapes(test_shapes(test));
    let mut jobs: HashMap<String, JobId> = HashMap::new();
    let mut outcome =
        Outcome { name: test.name.clone(), span: test.span, expectations: 0, failures: Vec::new(), error: None };
    let mut dirty = true;
    let mut decisions = Decisions::default();
    let mut events = Vec::new();
    // Where the events the last cycle's observer saw end.
    let mut shown = 0;
    let mut cycle = |s: &mut Scheduler, decisions: &mut Decisions, events: &mut Vec<Event>| {
        observe(Moment::BeforeCycle(&events[shown..]), s);
        let (decided, turns) = decisions.cycle(s);
        observe(Moment::AfterCycle { turns: &turns, decided: &decided }, s);
        events.extend(decided);
        shown = events.len();
    };
    for step in &test.steps {
        match step {
            Step::Node(n) => {
                if let Err(e) = s.add_node(n) {
                    outcome.error = Some(SetupError::Node(e));
                    break;
                }
                dirty = true;
            }
            Step::Submit(j) => {
                let id = match s.submit(j.clone()) {
                    Ok(id) => id,
                    Err(e) => {
                        outcome.error = Some(SetupError::Submit(e));
                        break;
                    }
                };
                jobs.insert(j.name.clone(), id);
                events.push(Event::Submitted { job: id, at_ms: s.world.now_ms() });
                dirty = true;
            }
            Step::Run(j, nodes, history) => {
                let id = match s.submit(j.clone()) {
                    Ok(id) => id,
                    Err(e) => {
                        outcome.error = Some(SetupError::Submit(e));
                        break;
                    }
                };
                jobs.insert(j.name.clone(), id);
                events.push(Event::Submitted { job: id, at_ms: s.world.now_ms() });
                let ids: Vec<usize> = nodes.iter().filter_map(|n| s.world.cluster().node(n)).collect();
                if let Err(e) = s.start_on(id, &ids, *history) {
                    outcome.error = Some(SetupError::Run(e));
                    break;
                }
                events.push(Event::Placed { job: id, nodes: ids, at_ms: s.world.now_ms() });
                dirty = true;
            }
            Step::Advance(secs) => {
                if dirty {
                    // Whatever was waiting gets its chance before time moves on.
                    cycle(&mut s, &mut decisions, &mut events);
                }
                if let Err(e) = s.advance((secs * 1000.0).round() as u64) {
                    outcome.error = Some(SetupError::Advance(e));
                    break;
                }
                dirty = true;
            }
            Step::Complete(name) => {
                if let Some(&id) = jobs.get(name)
                    && s.complete(id)
                {
                    events.push(Event::Finished { job: id, at_ms: s.world.now_ms() });
                }
                dirty = true;
            }
            Step::Fail(name) => {
                if let Some(n) = s.world.cluster().node(name) {
                    events.extend(s.fail_node(n));
                }
                dirty = true;
            }
            Step::Usage { queue, user, amount } => {
                s.set_usage(*queue, user.as_deref(), *amount);
                dirty = true;
            }
            Step::Expect(e, span) => {
                if dirty {
                    cycle(&mut s, &mut decisions, &mut events);
                    dirty = false;
                }
                outcome.expectations += 1;
                if let Some(f) = check(&s, &jobs, &decisions, &events, e, *span) {
                    outcome.failures.push(f);
                }
            }
        }
    }
    Played { outcome, scheduler: s, events }
}

pub fn run(policy: &CompiledPolicy, test: &hir::Test) -> Outcome {
    run_with(policy, test, |_, _| {}).outcome
}

/// Runs a test in both engines and reports where their schedules differ.
pub fn engines_agree(policy: &CompiledPolicy, test: &hir::Test) -> Result<(), EnginesError> {
    // The other engine from the same IR: nothing is lowered again.
    let compile = |k| {
        gpol_compiler::engine::compile_lowered(Arc::clone(&policy.policy), Arc::clone(&policy.program), k)
            .map_err(|d| EnginesError::Compile(Box::new(d)))
    };
    let (jit, interp) = (compile(EngineKind::Jit)?, compile(EngineKind::Interp)?);
    let (a, b) = (run_with(&jit, test, |_, _| {}).events, run_with(&interp, test, |_, _| {}).events);
    if a != b {
        return Err(EnginesError::Disagree { jit: a, interp: b });
    }
    Ok(())
}

/// A test's workload is its jobs: their popular shapes are `cluster.task_shapes`.
fn test_shapes(test: &hir::Test) -> ShapeTable {
    let asks = test.steps.iter().filter_map(|step| match step {
        Step::Submit(j) | Step::Run(j, _, _) => Some(Ask::of_spec(j)),
        _ => None,
    });
    frag::shape_records(&frag::task_shapes(asks, frag::DEFAULT_SHAPES))
}

/// The explain trace of each job the last cycles started, as it was when they were
/// decided: a failure shows why the job went where it went, not where it would go now.
#[derive(Default)]
struct Decisions {
    traces: HashMap<JobId, String>,
}

/// Turns are recorded as they are decided while a test's pending jobs times its nodes
/// stay under this; beyond it a failure shows the trace as of the failed expectation.
pub const TRACED_WORK: usize = 100_000;

impl Decisions {
    /// Runs a cycle, keeping the trace of every job it starts; what it decided, and the
    /// account of each turn (when recorded).
    fn cycle(&mut self, s: &mut Scheduler) -> (Vec<Event>, Vec<Account>) {
        let pending = s.pending();
        if pending.saturating_mul(s.world.cluster().nodes.len()) > TRACED_WORK {
            return (s.cycle(), Vec::new());
        }
        let (decided, turns) = s.cycle_recorded();
        let names: HashMap<&str, JobId> = jobs_by_name(s);
        for a in &turns {
            if let (account::Outcome::Placed { .. }, Some(&j)) = (&a.outcome, names.get(a.job.as_str())) {
                self.traces.insert(j, explain::render(a));
            }
        }
        (decided, turns)
    }

    /// The trace to show for `job`: how it was decided if a cycle started it and it still
    /// runs there, else its next decision.
    fn trace(&self, s: &Scheduler, job: JobId) -> String {
        match self.traces.get(&job) {
            Some(t) if s.world.jobs()[job].life.state == State::Running => {
                format!("decided as follows when it started:\n{t}")
            }
            _ => explain::explain(s, job),
        }
    }
}

fn check(
    s: &Scheduler,
    jobs: &HashMap<String, JobId>,
    decisions: &Decisions,
    events: &[Event],
    e: &Expect,
    span: Span,
) -> Option<Failure> {
    let job = |name: &str| jobs.get(name).copied();
    let fail = |expected: String, job: Option<JobId>| {
        let actual = job.map_or("no such job".to_string(), |j| explain::state_text(s, j));
        let explain = job.map(|j| decisions.trace(s, j)).unwrap_or_default();
        Some(Failure { span, expected, actual, explain })
    };
    match e {
        Expect::On(name, nodes) => {
            let j = job(name)?;
            let mut on: Vec<&str> = s.world.jobs()[j]
                .holding
                .slots
                .iter()
                .map(|sl| s.world.cluster().nodes[sl.node].name.as_str())
                .collect();
            let mut want: Vec<&str> = nodes.iter().map(String::as_str).collect();
            on.sort_unstable();
            want.sort_unstable();
            if s.world.jobs()[j].life.state == State::Running && on == want {
                None
            } else {
                fail(format!("{name} on {}", nodes.join(", ")), Some(j))
            }
        }
        Expect::Pending(name, because) | Expect::Rejected(name, because) => {
            let j = job(name)?;
            let pending = matches!(e, Expect::Pending(..));
            let (state_ok, reason) = match &s.state(j) {
                State::Pending(r) if pending => (true, r.as_ref().map(|r| r.name(&s.facts.policy.program))),
                State::Rejected(r) if !pending => (true, Some(s.facts.policy.program.rule_name(*r))),
                _ => (false, None),
            };
            let reason_ok = because.as_ref().is_none_or(|b| reason.as_deref() == Some(b.as_str()));
            if state_ok && reason_ok {
                None
            } else {
                let word = if pending { "pending" } else { "rejected" };
                let because_text = because.as_ref().map(|b| format!(" because {b}")).unwrap_or_default();
                fail(format!("{name} {word}{because_text}"), Some(j))
            }
        }
        Expect::Running(name) => {
            let j = job(name)?;
            if s.world.jobs()[j].life.state == State::Running { None } else { fail(format!("{name} running"), Some(j)) }
        }
        Expect::Evicted(name, by, under) => {
            let j = job(name)?;
            let by_id = by.as_ref().map(|b| jobs.get(b).copied());
            let program = &s.facts.policy.program;
            let evicted = events.iter().any(|ev| match ev {
                Event::Evicted { job, by: claimant, rule, .. } | Event::Shrunk { job, by: claimant, rule, .. } => {
                    *job == j
                        && by_id.is_none_or(|b| b == Some(*claimant))
                        && under.as_ref().is_none_or(|r| program.rule_name(*rule) == *r)
                }
                Event::Requeued { job, .. } => *job == j && by_id.is_none() && under.is_none(),
                _ => false,
            });
            if evicted {
                None
            } else {
                let by_text = by.as_ref().map(|b| format!(" by {b}")).unwrap_or_default();
                let under_text = under.as_ref().map(|r| format!(" under {r}")).unwrap_or_default();
                fail(format!("{name} evicted{by_text}{under_text}"), Some(j))
            }
        }
        Expect::Holds(expr, names) => {
            let inputs: Vec<(gpol_compiler::hir::LocalId, VTy)> = names
                .iter()
                .map(|n| match n {
                    TestName::Queue(l, _) => (*l, VTy::Ref(Record::Queue)),
                    TestName::Job(l, _) => (*l, VTy::Ref(Record::Job)),
                    TestName::Node(l, _) => (*l, VTy::Ref(Record::Node)),
                })
                .collect();
            let view = s.view(None);
            let ctx = s.ctx(&view);
            let job_recs: HashMap<&str, gpol_compiler::schema::JobRec<'_>> =
                jobs.iter().map(|(name, &j)| (name.as_str(), s.job_rec_in_full(j))).collect();
            let nodes = s.node_records();
            let vals: Vec<Val<'_>> = names
                .iter()
                .map(|n| match n {
                    TestName::Queue(_, q) => Val::Queue(*q as u32),
                    TestName::Job(_, name) => job_recs.get(name.as_str()).map_or(Val::F(f64::NAN), Val::Job),
                    TestName::Node(_, name) => {
                        s.world.cluster().node(name).and_then(|i| nodes.get(i)).map_or(Val::F(f64::NAN), Val::Node)
                    }
                })
                .collect();
            let eval = |e: &hir::Expr| {
                gpol_compiler::lower::lower_expectation(&s.facts.policy.policy, e, &inputs)
                    .map(|body| interp::eval_with_inputs(&body, &ctx, &Roots::default(), &vals))
            };
            let failure = |actual: String| Failure {
                span,
                expected: "the condition to hold".into(),
                actual,
                explain: String::new(),
            };
            match eval(expr) {
                Err(too_large) => Some(failure(too_large.diagnostic(&s.facts.policy.policy).message)),
                Ok(v) if v.b() => None,
                // A failed comparison says what each side came to.
                Ok(_) => Some(failure(match &expr.kind {
                    hir::ExprKind::Binary(op, a, b) if op.is_comparison() => match (eval(a), eval(b)) {
                        (Ok(l), Ok(r)) => format!(
                            "the left side is {}, the right side {}",
                            value_text(&l, &a.ty, s.symbols()),
                            value_text(&r, &b.ty, s.symbols())
                        ),
                        _ => "it does not".into(),
                    },
                    _ => "it does not".into(),
                })),
            }
        }
    }
}

/// A scalar test value as a reader would write it: `0.7 gpu`, `true`, `"a100"`.
fn value_text(v: &Val<'_>, ty: &gpol_compiler::types::Ty, symbols: &crate::symbols::Symbols) -> String {
    use gpol_compiler::types::Ty;
    match (v, ty) {
        (Val::F(x), Ty::Num(d)) if d.is_none() => format!("{x}"),
        (Val::F(x), Ty::Num(d)) => format!("{x} {d}"),
        (Val::B(b), _) => b.to_string(),
        (Val::S(sym), _) => format!("{:?}", symbols.name(*sym)),
        (Val::U(u), Ty::Enum(e)) => e.variants().get(usize::from(*u)).map_or_else(|| u.to_string(), |n| n.to_string()),
        (Val::OptF(o), Ty::Optional(inner)) => match o.get() {
            Some(x) => value_text(&Val::F(x), inner, symbols),
            None => "none".into(),
        },
        _ => format!("{ty}"),
    }
}

/// The jobs by name (a test's job names are its own, one per job).
fn jobs_by_name(s: &Scheduler) -> HashMap<&str, JobId> {
    s.world.jobs().with_ids().map(|(id, j)| (j.ask.name.as_str(), id)).collect()
}
