//! The search half of the no-cycle analysis: for a policy whose victim rules no argument
//! proves safe (`gpol_compiler::eviction_proof`), small scenarios are run on the reference
//! interpreter, smallest first, until one shows the running jobs coming back to an
//! earlier state through evictions, with no job arriving or ending in between. It is
//! then printed as a `test` block that passes on the policy (re-checked by running it),
//! so a reviewer can paste it and watch the ping-pong.
//!
//! Scenarios, two families. Every small one: one node of 1 or 2 cards; two or three jobs
//! submitted at once, each in one of the policy's first two leaf queues, asking for one
//! card or all of them, of priority 0 or 10, preemptible; the clock then advanced in
//! steps of 1 s, 1 min, 10 min or 1 h, twelve times. Then, where those queues have GPU
//! guarantees (which tiny nodes never exceed, so reclaims never happen), a fixed
//! pseudo-random sample sized to them: one or two nodes holding both guarantees and a
//! little more, three to six jobs of sizes drawn from the guarantees, halves of them and
//! single cards. That is what `gpolc check` reports as searched when it finds nothing.

use crate::Scheduler;
use crate::jobs::State;
use gpol_compiler::diag::{Code, Diagnostic};
use gpol_compiler::engine::{CompiledPolicy, EngineKind, compile_lowered};
use gpol_compiler::hir;
use gpol_compiler::ir::Program;
use gpol_compiler::load::Checked;
use gpol_compiler::spec::{JobSpec, NodeSpec, Request};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

/// Steps of the clock tried, in seconds.
const STEPS_S: [u64; 4] = [1, 60, 600, 3600];
/// Scenarios sized to the guarantees, and the seed that draws them.
const SIZED: usize = 3000;
const SEED: u64 = 14;
/// Cards the sized scenarios may hold: a scenario twice the guarantees is not drawn past this.
const MAX_SIZED_CARDS: u32 = 64;
/// Clock steps per scenario.
const STEPS: usize = 12;
const PRIORITIES: [f64; 2] = [0.0, 10.0];

/// What the search found.
#[derive(Clone, Debug, PartialEq)]
pub enum Found {
    /// A scenario whose evictions bring the running jobs back: a `test` block.
    Cycle(String),
    /// No cycle in this many scenarios, `sized` of them sized to the guarantees.
    Nothing { scenarios: usize, sized: usize },
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
    let found = match &checked.analysed {
        Some(a) => search_lowered(Arc::new(policy), Arc::clone(&a.program)),
        None => search(&policy),
    };
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
        Found::Nothing { scenarios, sized } => {
            let sized = match sized {
                0 => String::new(),
                n => format!("; {n} of them sized to the guarantees: 1–2 nodes, 3–6 jobs"),
            };
            let searched = format!(
                "no cycle either in {scenarios} scenarios (one node of 1–2 cards, 2–3 jobs, clock steps of 1 s to 1 h{sized})"
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
    match gpol_compiler::lower::lower(policy) {
        Ok(program) => search_lowered(Arc::new(policy.clone()), Arc::new(program)),
        Err(_) => Found::Nothing { scenarios: 0, sized: 0 },
    }
}

/// [`search`] on a policy already lowered (`program`), as the pipeline carries it.
pub(crate) fn search_lowered(policy: Arc<hir::Policy>, program: Arc<Program>) -> Found {
    let Ok(compiled) = compile_lowered(Arc::clone(&policy), program, EngineKind::Interp) else {
        return Found::Nothing { scenarios: 0, sized: 0 };
    };
    let policy = policy.as_ref();
    let leaves: Vec<&hir::Queue> = policy.queues.iter().filter(|q| q.children.is_empty()).take(2).collect();
    let names: Vec<String> = leaves.iter().map(|q| q.name.clone()).collect();
    let mut tried = 0;
    let found = |scenario: Scenario| scenario.confirmed(&compiled).then(|| Found::Cycle(scenario.text()));
    for fillers in [false, true] {
        for cards in [1, 2] {
            for n in [2, 3] {
                for jobs in job_sets(&names, cards, n) {
                    for step_s in STEPS_S {
                        tried += 1;
                        let shape = Shape { nodes: vec![cards], jobs: jobs.clone(), step_s, steps: STEPS, fillers };
                        if let Some(cycle) = run(&compiled, &shape).and_then(found) {
                            return cycle;
                        }
                    }
                }
            }
        }
    }
    let sized = sized_shapes(&leaves);
    let drawn = sized.len();
    for shape in sized {
        tried += 1;
        if run(&compiled, &shape).is_some()
            && let Some(cycle) = run(&compiled, &shrink(&compiled, shape)).and_then(found)
        {
            return cycle;
        }
    }
    Found::Nothing { scenarios: tried, sized: drawn }
}

/// Scenarios sized to the GPU guarantees of the leaves (none if they guarantee none):
/// room for both guarantees and a little more, on one node or two, and jobs whose sizes
/// straddle them. Drawn from a fixed seed, so a verdict is the same every time.
fn sized_shapes(leaves: &[&hir::Queue]) -> Vec<Shape> {
    use rand::{RngExt, SeedableRng};
    let guarantee = |q: &hir::Queue| {
        let cards =
            q.quota(gpol_compiler::ir::QuotaKind::Guarantee).and_then(|g| g.get(&hir::Resource::Gpu(None))).copied();
        cards.unwrap_or(0.0).clamp(0.0, f64::from(MAX_SIZED_CARDS)) as u32
    };
    let guarantees: Vec<u32> = leaves.iter().map(|q| guarantee(q)).collect();
    let room: u32 = guarantees.iter().sum::<u32>() + 2;
    if guarantees.iter().all(|&g| g == 0) || room > MAX_SIZED_CARDS {
        return Vec::new();
    }
    let names: Vec<String> = leaves.iter().map(|q| q.name.clone()).collect();
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(SEED);
    (0..SIZED)
        .map(|_| {
            let nodes = if rng.random_bool(0.5) { vec![room] } else { vec![room.div_ceil(2), room / 2] };
            let largest = nodes.iter().copied().max().unwrap_or(1);
            let mut sizes: Vec<u32> =
                guarantees.iter().flat_map(|&g| [g, g / 2, g + 1]).chain([1, 2, largest]).collect();
            sizes.retain(|&c| (1..=largest).contains(&c));
            sizes.sort_unstable();
            sizes.dedup();
            let jobs = (0..rng.random_range(3..=6))
                .map(|_| Job {
                    queue: names[rng.random_range(0..names.len())].clone(),
                    cards: sizes[rng.random_range(0..sizes.len())],
                    priority: PRIORITIES[rng.random_range(0..PRIORITIES.len())],
                })
                .collect();
            let step_s = STEPS_S[rng.random_range(0..STEPS_S.len())];
            Shape { nodes, jobs, step_s, steps: 2 * STEPS, fillers: rng.random_bool(0.5) }
        })
        .collect()
}

/// A smaller shape that still cycles: without each job in turn, without the fillers, on
/// one node, as long as the cycle stays.
fn shrink(policy: &CompiledPolicy, mut shape: Shape) -> Shape {
    let cycles = |s: &Shape| run(policy, s).is_some();
    let mut i = 0;
    while i < shape.jobs.len() {
        let mut fewer = shape.clone();
        fewer.jobs.remove(i);
        if cycles(&fewer) {
            shape = fewer;
        } else {
            i += 1;
        }
    }
    for simpler in
        [Shape { fillers: false, ..shape.clone() }, Shape { nodes: vec![shape.nodes.iter().sum()], ..shape.clone() }]
    {
        if cycles(&simpler) {
            shape = simpler;
        }
    }
    shape
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

/// What a scenario sets up: nodes (cards each), jobs submitted at once, the clock step
/// and how many steps are taken, and whether every step starts a filler job (it asks for
/// nothing) and ends the last one — a victim search is retried when another job starts,
/// so rules that allow anything swap jobs at every unrelated start.
#[derive(Clone, Debug)]
struct Shape {
    nodes: Vec<u32>,
    jobs: Vec<Job>,
    step_s: u64,
    steps: usize,
    fillers: bool,
}

/// A scenario that showed a cycle: its shape cut at the step the cycle closed, and the
/// evictions (victim, claimant) it saw.
struct Scenario {
    shape: Shape,
    evictions: Vec<(String, String)>,
}

/// Every eviction in `events`, as (victim, claimant) names, repeats of one pair dropped.
fn evicted(s: &Scheduler, events: &[crate::Event]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for e in events {
        if let crate::Event::Evicted { job, by, .. } = e {
            let pair = (s.job(*job).ask.name.clone(), s.job(*by).ask.name.clone());
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
    }
    pairs
}

/// Runs one scenario; it, if the running jobs come back to an earlier state through
/// evictions.
fn run(policy: &CompiledPolicy, shape: &Shape) -> Option<Scenario> {
    let mut s = Scheduler::new(policy.clone());
    for (i, &cards) in shape.nodes.iter().enumerate() {
        s.add_node(&NodeSpec { name: format!("n{}", i + 1), cards, ..NodeSpec::default() }).ok()?;
    }
    let mut ids = Vec::new();
    for (i, j) in shape.jobs.iter().enumerate() {
        ids.push(s.submit(Scenario::spec(j, i)).ok()?);
    }
    let running = |s: &Scheduler| -> Vec<usize> {
        ids.iter().copied().filter(|&j| s.job(j).life.state == State::Running).collect()
    };
    // Every event so far: evictions are counted over the whole run.
    let mut events = Vec::new();
    let evictions =
        |events: &[crate::Event]| events.iter().filter(|e| matches!(e, crate::Event::Evicted { .. })).count();
    // Each state seen (after a cycle), with how many evictions had happened by then.
    let mut seen: Vec<(Vec<usize>, usize)> = Vec::new();
    let filler_queue = shape.jobs.first().map(|j| j.queue.clone());
    let mut filler = None;
    for step in 0..=shape.steps {
        if step > 0 {
            s.advance(shape.step_s * 1000).ok()?;
            if shape.fillers {
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
        let before = (running(&s), evictions(&events));
        events.extend(s.cycle());
        let after = (running(&s), evictions(&events));
        seen.push(before);
        if seen.iter().any(|(r, e)| *r == after.0 && *e < after.1) {
            let shape = Shape { steps: step, ..shape.clone() };
            return Some(Scenario { shape, evictions: evicted(&s, &events) });
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
        let shape = &self.shape;
        let mut steps: Vec<hir::Step> = (shape.nodes.iter().enumerate())
            .map(|(i, &cards)| hir::Step::Node(NodeSpec { name: format!("n{}", i + 1), cards, ..NodeSpec::default() }))
            .collect();
        steps.extend(shape.jobs.iter().enumerate().map(|(i, j)| hir::Step::Submit(Scenario::spec(j, i))));
        for step in 1..=shape.steps {
            steps.push(hir::Step::Advance(shape.step_s as f64));
            if shape.fillers {
                if step > 1 {
                    steps.push(hir::Step::Complete(format!("f{}", step - 1)));
                }
                let queue = shape.jobs.first().map(|j| j.queue.clone());
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
        let shape = &self.shape;
        let mut t = String::from("test \"evictions cycle\" {\n");
        if shape.fillers {
            t.push_str("  // The f jobs ask for nothing: each start lets the waiting jobs evict again.\n");
        }
        for (i, cards) in shape.nodes.iter().enumerate() {
            let _ = writeln!(t, "  node n{} {{ cards {cards} }}", i + 1);
        }
        for (i, j) in shape.jobs.iter().enumerate() {
            let _ = writeln!(
                t,
                "  submit j{} {{ queue {}; cards {}; priority {}; preemptible }}",
                i + 1,
                j.queue,
                j.cards,
                j.priority
            );
        }
        let advance = match shape.step_s {
            s if s % 3600 == 0 => format!("{}h", s / 3600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        };
        for step in 1..=shape.steps {
            let _ = writeln!(t, "  advance {advance}");
            if shape.fillers {
                if step > 1 {
                    let _ = writeln!(t, "  complete f{}", step - 1);
                }
                let queue = shape.jobs.first().map(|j| j.queue.as_str()).unwrap_or_default();
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
