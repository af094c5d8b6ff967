//! A case: nodes, jobs already running on them, past usage, and jobs submitted in up to
//! three batches with time passing in between — the steps of a `test` block, so that a
//! case is what a counterexample prints. Both policies play the same case; what each
//! decides is read from the scheduler the test runner leaves behind.

use gpol_compiler::fmt::string_literal as quoted;
use gpol_compiler::hir::{self, Step};
use gpol_compiler::spec::{History, JobSpec, NodeSpec};
use gpol_runtime::Scheduler;
use gpol_runtime::scenario;
use std::fmt::Write;

/// A job already running when the case starts, one node (by index) per replica.
#[derive(Clone, Debug, PartialEq)]
pub struct Running {
    pub job: JobSpec,
    pub nodes: Vec<usize>,
    pub history: History,
    /// It completes just before the last batch is submitted (after the waits), so the
    /// jobs that waited meet the last batch's for the room it leaves.
    pub ends: bool,
}

/// A job submitted in batch `batch` (0, 1 or 2).
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub job: JobSpec,
    pub batch: u8,
}

/// A case both policies play.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct World {
    /// Nodes; their domains are indexed by the levels both policies declare.
    pub nodes: Vec<NodeSpec>,
    pub running: Vec<Running>,
    /// Past usage per queue, billed GPU-seconds.
    pub usage: Vec<(String, f64)>,
    pub pending: Vec<Pending>,
    /// Seconds that pass before batch 1 and before batch 2.
    pub waits: [u64; 2],
    /// Seconds after Monday 00:00 local (a test's clock 0) at which the case starts:
    /// where quota windows or rules that read the time of week decide differently.
    pub start: u64,
}

/// One moment of a world's timeline after its set-up.
enum Moment<'w> {
    Advance(u64),
    Complete(&'w Running),
    Submit(&'w Pending),
}

/// A world could not be set up for a policy (a job that does not fit where it runs).
#[derive(Clone, Debug)]
pub struct Invalid(pub String);

impl World {
    /// The steps a `test` block of `policy` would hold; `levels` are the level names the
    /// nodes' domains are indexed by.
    pub fn steps(&self, policy: &hir::Policy, levels: &[String]) -> Result<Vec<Step>, Invalid> {
        let mut steps = Vec::new();
        if self.start > 0 {
            steps.push(Step::Advance(self.start as f64));
        }
        for n in &self.nodes {
            let mut node = n.clone();
            node.domains = n
                .domains
                .iter()
                .filter_map(|(l, d)| {
                    let name = levels.get(usize::from(*l))?;
                    let at = policy.levels.iter().position(|x| x == name)?;
                    Some((u8::try_from(at).ok()?, d.clone()))
                })
                .collect();
            steps.push(Step::Node(node));
        }
        for r in &self.running {
            let nodes = r.nodes.iter().filter_map(|&i| self.nodes.get(i).map(|n| n.name.clone())).collect();
            steps.push(Step::Run(self.resolved(&r.job, policy), nodes, r.history));
        }
        for (queue, amount) in &self.usage {
            let queue = policy.queue(queue).ok_or_else(|| Invalid(format!("no queue {queue}")))?;
            steps.push(Step::Usage { queue, user: None, amount: *amount });
        }
        for m in self.timeline() {
            steps.push(match m {
                Moment::Advance(s) => Step::Advance(s as f64),
                Moment::Complete(r) => Step::Complete(r.job.name.clone()),
                Moment::Submit(p) => Step::Submit(self.resolved(&p.job, policy)),
            });
        }
        Ok(steps)
    }

    /// The seconds that pass from batch `*at` to batch `to` (one advance), moving `*at`.
    fn wait_until(&self, at: &mut u8, to: u8) -> u64 {
        let mut wait = 0;
        while *at < to {
            wait += self.waits.get(usize::from(*at)).copied().unwrap_or(0);
            *at += 1;
        }
        wait
    }

    /// After the set-up: the batches submitted in order, time passing between them, and
    /// the running jobs that end doing so just before the last batch.
    fn timeline(&self) -> Vec<Moment<'_>> {
        let last = self.last_batch();
        let mut out = Vec::new();
        let (mut batch, mut ended) = (0, false);
        for p in self.ordered() {
            let wait = self.wait_until(&mut batch, p.batch);
            if wait > 0 {
                out.push(Moment::Advance(wait));
            }
            if p.batch == last && !ended {
                ended = true;
                out.extend(self.running.iter().filter(|r| r.ends).map(Moment::Complete));
            }
            out.push(Moment::Submit(p));
        }
        out
    }

    /// The batch submitted last.
    pub fn last_batch(&self) -> u8 {
        self.pending.iter().map(|p| p.batch).max().unwrap_or(0)
    }

    /// The pending jobs in the order they are submitted.
    pub fn ordered(&self) -> Vec<&Pending> {
        let mut p: Vec<&Pending> = self.pending.iter().collect();
        p.sort_by_key(|p| p.batch);
        p
    }

    /// A job as `policy` takes it: no queue named where the policy has only its implicit one.
    fn resolved(&self, job: &JobSpec, policy: &hir::Policy) -> JobSpec {
        let mut j = job.clone();
        if policy.has_implicit_queue() {
            j.queue = None;
        }
        j
    }

    /// Plays the world up to the last submission on `fresh`, a scheduler of one version
    /// with nothing in it yet (cloned); it is left just before the cycle that decides the
    /// last batch.
    pub fn play(&self, fresh: &Scheduler, levels: &[String]) -> Result<scenario::Played, Invalid> {
        let steps = self.steps(&fresh.policy().policy, levels)?;
        let test = hir::Test { name: "case".into(), steps, span: Default::default() };
        let played = scenario::run_from(fresh.clone(), &test, |_, _| {});
        match &played.outcome.error {
            Some(e) => Err(Invalid(e.to_string())),
            None => Ok(played),
        }
    }

    /// The world as a `test` block named `name`, with `expect` lines `expectations`
    /// (already indented text) and comment lines `notes`.
    pub fn text(&self, name: &str, levels: &[String], notes: &[String], expectations: &[String]) -> String {
        let mut t = format!("test {} {{\n", quoted(name));
        for note in notes {
            let _ = writeln!(t, "  // {note}");
        }
        if self.start > 0 {
            let (days, rest) = (self.start / 86_400, self.start % 86_400);
            let at = match (days, rest) {
                (0, r) => seconds(r),
                (d, 0) => format!("{d}d"),
                (d, r) => format!("{d}d + {}", seconds(r)),
            };
            let _ = writeln!(t, "  advance {at}");
        }
        for n in &self.nodes {
            let _ = writeln!(t, "  node {} {{ {} }}", n.name, node_props(n, levels));
        }
        for r in &self.running {
            let nodes: Vec<&str> = r.nodes.iter().filter_map(|&i| self.nodes.get(i)).map(|n| n.name.as_str()).collect();
            let mut props = vec![r.job.test_props()];
            props.extend(history_props(&r.history));
            props.retain(|p| !p.is_empty());
            let _ = writeln!(t, "  run {} on {} {{ {} }}", r.job.name, nodes.join(", "), props.join("; "));
        }
        for (queue, amount) in &self.usage {
            let _ = writeln!(t, "  usage {} {} gpu * 1s", quoted(queue), number(*amount));
        }
        for m in self.timeline() {
            let _ = match m {
                Moment::Advance(s) => writeln!(t, "  advance {}", seconds(s)),
                Moment::Complete(r) => writeln!(t, "  complete {}", r.job.name),
                Moment::Submit(p) => writeln!(t, "  submit {} {{ {} }}", p.job.name, p.job.test_props()),
            };
        }
        for e in expectations {
            let _ = writeln!(t, "  {e}");
        }
        t.push('}');
        t
    }

    /// How many (job, node) pairs a decision over the world's nodes looks at.
    pub fn pairs(&self) -> u64 {
        (self.pending.len() * self.nodes.len()) as u64
    }
}

/// A node's properties that differ from the defaults, as a test block writes them.
fn node_props(n: &NodeSpec, levels: &[String]) -> String {
    let default = NodeSpec::default().test_props(levels);
    let default: Vec<&str> = default.split("; ").collect();
    let props = n.test_props(levels);
    let kept: Vec<&str> = props.split("; ").filter(|p| !default.contains(p)).collect();
    if kept.is_empty() { "cards 0".into() } else { kept.join("; ") }
}

fn history_props(h: &History) -> Vec<String> {
    let mut p = Vec::new();
    if h.ran_ms > 0 {
        p.push(format!("runtime {}", millis(h.ran_ms)));
    }
    if h.since_checkpoint_ms > 0 {
        p.push(format!("since_checkpoint {}", millis(h.since_checkpoint_ms)));
    }
    if h.evictions > 0 {
        p.push(format!("evictions {}", h.evictions));
    }
    p
}

/// A duration as a test writes it: whole seconds, else milliseconds.
fn millis(ms: u64) -> String {
    if ms.is_multiple_of(1000) { seconds(ms / 1000) } else { format!("{ms}ms") }
}

fn seconds(s: u64) -> String {
    match s {
        s if s > 0 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        s if s > 0 && s.is_multiple_of(60) => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A number as gpol writes it (no exponent).
pub fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") }
}
