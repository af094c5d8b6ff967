//! The search half of the no-cycle analysis: for a policy whose victim rules no argument
//! proves safe (`gpol_compiler::cycles`), small scenarios are run on the reference
//! interpreter, smallest first, until one shows the running jobs coming back to an
//! earlier state through evictions, with no job arriving or ending in between. It is
//! then printed as a `test` block that passes on the policy (re-checked by running it),
//! so a reviewer can paste it and watch the ping-pong.
//!
//! Scenarios: one node of 1 or 2 cards; two or three jobs submitted at once, each in one
//! of the policy's first two leaf queues, asking for one card or all of them, of priority
//! 0 or 10, preemptible; the clock then advanced in steps of 1 s, 1 min, 10 min or 1 h,
//! twelve times. That is what `gpolc check` reports as searched when it finds nothing.

use crate::Scheduler;
use crate::jobs::State;
use gpol_compiler::diag::{Code, Diagnostic};
use gpol_compiler::engine::{CompiledPolicy, EngineKind, compile};
use gpol_compiler::hir;
use gpol_compiler::load::Checked;
use gpol_compiler::spec::{JobSpec, NodeSpec, Request};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Steps of the clock tried, in seconds.
const STEPS_S: [u64; 4] = [1, 60, 600, 3600];
/// Clock steps per scenario.
const STEPS: usize = 12;
const PRIORITIES: [f64; 2] = [0.0, 10.0];

/// What the search found.
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    /// A scenario whose evictions bring the running jobs back: a `test` block.
    Cycle(String),
    /// No cycle in this many scenarios.
    Nothing { scenarios: usize },
}

/// One job of a scenario.
#[derive(Clone, Debug)]
struct Job {
    queue: String,
    cards: u32,
    priority: f64,
}

/// Runs the search on a checked policy that carries W0009, replacing the warning with
/// E0045 and the scenario when a cycle turns up, or saying what was searched.
pub fn check(checked: &mut Checked) {
    let Some(at) = checked.diagnostics.iter().position(|d| d.code == Code::EvictionsNotProved) else { return };
    let Some(policy) = checked.policy.clone() else { return };
    let found = search(&policy);
    let d = &mut checked.diagnostics[at];
    match found {
        Found::Cycle(test) => {
            let mut cycle = Diagnostic::new(Code::EvictionsCycle, d.primary.span, "these evictions cycle")
                .label("jobs evict each other back and forth")
                .help(format!(
                    "this test passes on the policy: jobs evict each other until the running jobs are back where they were, with no job that holds anything arriving or ending in between\n\n{test}"
                ));
            cycle.secondary = std::mem::take(&mut d.secondary);
            *d = cycle;
        }
        Found::Nothing { scenarios } => {
            let searched = format!(
                "no cycle either in {scenarios} scenarios (one node of 1–2 cards, 2–3 jobs, clock steps of 1 s to 1 h)"
            );
            d.help = Some(match d.help.take() {
                Some(h) => format!("{h}; {searched}"),
                None => searched,
            });
        }
    }
}

/// Looks for a scenario in which evictions bring the running jobs back to an earlier
/// state, smallest first.
pub fn search(policy: &hir::Policy) -> Found {
    let Ok(compiled) = compile(policy.clone(), EngineKind::Interp) else { return Found::Nothing { scenarios: 0 } };
    let leaves: Vec<String> =
        policy.queues.iter().filter(|q| q.children.is_empty()).take(2).map(|q| q.name.clone()).collect();
    let mut tried = 0;
    for fillers in [false, true] {
        for cards in [1, 2] {
            for n in [2, 3] {
                for jobs in job_sets(&leaves, cards, n) {
                    for step_s in STEPS_S {
                        tried += 1;
                        if let Some(scenario) = run(&compiled, cards, &jobs, step_s, fillers)
                            && scenario.confirmed(&compiled)
                        {
                            return Found::Cycle(scenario.text());
                        }
                    }
                }
            }
        }
    }
    Found::Nothing { scenarios: tried }
}

/// Every set of `n` jobs (as sequences: submission order matters) over the leaves,
/// card counts and priorities.
fn job_sets(leaves: &[String], cards: u32, n: usize) -> Vec<Vec<Job>> {
    let mut one = Vec::new();
    for queue in leaves {
        for c in BTreeSet::from([1, cards]) {
            for priority in PRIORITIES {
                one.push(Job { queue: queue.clone(), cards: c, priority });
            }
        }
    }
    let mut sets: Vec<Vec<Job>> = vec![Vec::new()];
    for _ in 0..n {
        sets = sets.into_iter().flat_map(|s| one.iter().map(move |j| [s.clone(), vec![j.clone()]].concat())).collect();
    }
    sets
}

/// A scenario that showed a cycle, and the evictions (victim, claimant) it saw.
struct Scenario {
    cards: u32,
    jobs: Vec<Job>,
    step_s: u64,
    steps: usize,
    /// Whether every step starts a filler job (it asks for nothing) and ends the last
    /// one: a victim search is retried when another job starts, so rules that allow
    /// anything swap jobs at every unrelated start.
    fillers: bool,
    evictions: Vec<(String, String)>,
}

/// Every eviction so far, as (victim, claimant) names, repeats of one pair dropped.
fn evicted(s: &Scheduler) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for e in s.log() {
        if let crate::Event::Evicted { job, by, .. } = e {
            let pair = (s.job(*job).name.clone(), s.job(*by).name.clone());
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    pairs
}

/// Runs one scenario; it, if the running jobs come back to an earlier state through
/// evictions.
fn run(policy: &CompiledPolicy, cards: u32, jobs: &[Job], step_s: u64, fillers: bool) -> Option<Scenario> {
    let mut s = Scheduler::new(policy.clone());
    s.add_node(&NodeSpec { name: "n1".into(), cards, ..NodeSpec::default() }).ok()?;
    let mut ids = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        ids.push(s.submit(Scenario::spec(j, i)).ok()?);
    }
    let running =
        |s: &Scheduler| -> Vec<usize> { ids.iter().copied().filter(|&j| s.job(j).state == State::Running).collect() };
    let evictions = |s: &Scheduler| s.log().iter().filter(|e| matches!(e, crate::Event::Evicted { .. })).count();
    // Each state seen (after a cycle), with how many evictions had happened by then.
    let mut seen: Vec<(Vec<usize>, usize)> = Vec::new();
    let filler_queue = jobs.first().map(|j| j.queue.clone());
    let mut filler = None;
    for step in 0..=STEPS {
        if step > 0 {
            s.advance(step_s * 1000).ok()?;
            if fillers {
                if let Some(f) = filler.take() {
                    s.complete(f);
                }
                let spec = JobSpec {
                    name: format!("f{step}"),
                    queue: filler_queue.clone(),
                    request: Request::None,
                    ..JobSpec::default()
                };
                filler = Some(s.submit(spec).ok()?);
            }
        }
        let before = (running(&s), evictions(&s));
        s.cycle();
        let after = (running(&s), evictions(&s));
        seen.push(before);
        if seen.iter().any(|(r, e)| *r == after.0 && *e < after.1) {
            return Some(Scenario { cards, jobs: jobs.to_vec(), step_s, steps: step, fillers, evictions: evicted(&s) });
        }
        seen.push(after);
    }
    None
}

impl Scenario {
    /// The `i`-th job of a scenario (`j1`, `j2`, …).
    fn spec(j: &Job, i: usize) -> JobSpec {
        JobSpec {
            name: format!("j{}", i + 1),
            queue: Some(j.queue.clone()),
            priority: Some(j.priority),
            request: Request::Whole(j.cards),
            preemptible: true,
            ..JobSpec::default()
        }
    }

    /// The scenario as the steps of a test: what `gpolc test` would run.
    fn steps(&self) -> Vec<hir::Step> {
        let mut steps = vec![hir::Step::Node(NodeSpec { name: "n1".into(), cards: self.cards, ..NodeSpec::default() })];
        steps.extend(self.jobs.iter().enumerate().map(|(i, j)| hir::Step::Submit(Scenario::spec(j, i))));
        for step in 1..=self.steps {
            steps.push(hir::Step::Advance(self.step_s as f64));
            if self.fillers {
                if step > 1 {
                    steps.push(hir::Step::Complete(format!("f{}", step - 1)));
                }
                let queue = self.jobs.first().map(|j| j.queue.clone());
                steps.push(hir::Step::Submit(JobSpec { name: format!("f{step}"), queue, ..JobSpec::default() }));
            }
        }
        steps.extend(self.evictions.iter().map(|(v, c)| {
            hir::Step::Expect(hir::Expect::Evicted(v.clone(), Some(c.clone()), None), Default::default())
        }));
        steps
    }

    /// The same as a `test` block a reviewer can paste.
    fn text(&self) -> String {
        let mut t = String::from("test \"evictions cycle\" {\n");
        if self.fillers {
            t.push_str("  // The f jobs ask for nothing: each start lets the waiting jobs evict again.\n");
        }
        let _ = writeln!(t, "  node n1 {{ cards {} }}", self.cards);
        for (i, j) in self.jobs.iter().enumerate() {
            let _ = writeln!(
                t,
                "  submit j{} {{ queue {}; cards {}; priority {}; preemptible }}",
                i + 1,
                j.queue,
                j.cards,
                j.priority
            );
        }
        let advance = match self.step_s {
            s if s % 3600 == 0 => format!("{}h", s / 3600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        };
        for step in 1..=self.steps {
            let _ = writeln!(t, "  advance {advance}");
            if self.fillers {
                if step > 1 {
                    let _ = writeln!(t, "  complete f{}", step - 1);
                }
                let queue = self.jobs.first().map(|j| j.queue.as_str()).unwrap_or_default();
                let _ = writeln!(t, "  submit f{step} {{ queue {queue} }}");
            }
        }
        for (victim, claimant) in &self.evictions {
            let _ = writeln!(t, "  expect {victim} evicted by {claimant}");
        }
        t.push('}');
        t
    }

    /// Whether the scenario, run as a test by the same runner as `gpolc test`, passes:
    /// what is printed is what happens.
    fn confirmed(&self, policy: &CompiledPolicy) -> bool {
        let test = hir::Test { name: "evictions cycle".into(), steps: self.steps(), span: Default::default() };
        let outcome = crate::scenario::run(policy, &test);
        outcome.error.is_none() && outcome.failures.is_empty() && outcome.expectations > 0
    }
}
