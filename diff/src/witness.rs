//! From a decision that differed to a counterexample a reviewer can run: the case is cut
//! down to the jobs and nodes the decision concerns (when the schedules still differ
//! without the rest), shrunk greedily — whole jobs, nodes and usage first, then each
//! property back to its default — while the two schedules stay different, renamed
//! `n1`, `r1`, `j1`…, and written as a `test` block. The block is then appended to each
//! version's source and run by the reference interpreter: NEW's expectations must pass
//! on NEW and fail on OLD, and OLD's the other way round, or nothing is shown.

use crate::outcome::Outcome;
use crate::probe::Finding;
use crate::renames::Renames;
use crate::side::Side;
use crate::world::{Pending, World};
use gpol_compiler::engine::EngineKind;
use gpol_compiler::load::Checked;
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request};
use gpol_runtime::scenario;

/// Plays a shrinking step may take.
const MAX_PLAYS: usize = 600;

/// A confirmed counterexample.
#[derive(Clone, Debug)]
pub struct Witness {
    pub world: World,
    pub test: String,
    pub old_expectations: Vec<String>,
    pub new_expectations: Vec<String>,
}

pub struct Shrinker<'a> {
    pub old: &'a Side,
    pub new: &'a Side,
    pub levels: &'a [String],
    pub renames: &'a Renames,
    plays: usize,
}

impl<'a> Shrinker<'a> {
    pub fn new(old: &'a Side, new: &'a Side, levels: &'a [String], renames: &'a Renames) -> Shrinker<'a> {
        Shrinker { old, new, levels, renames, plays: 0 }
    }

    /// Both outcomes of a world (OLD's as played, NEW's), if they differ.
    fn differs(&mut self, w: &World) -> Option<(Outcome, Outcome)> {
        self.plays += 1;
        let old = Outcome::after_cycle(w.play(&self.old.jit, self.levels).ok()?);
        let new = Outcome::after_cycle(w.play(&self.new.jit, self.levels).ok()?);
        (old.renamed(self.renames) != new).then_some((old, new))
    }

    /// A confirmed counterexample for a finding on `world`, named `name`.
    pub fn witness(&mut self, world: &World, finding: &Finding, name: &str) -> Option<Witness> {
        self.plays = 0;
        let mut w = focus_candidates(world, finding).into_iter().find(|c| self.differs(c).is_some())?;
        w = self.shrink(w);
        let w = renumber(&w);
        let (old, new) = self.differs(&w)?;
        let old_in_new_names = old.renamed(self.renames);
        let new_expectations = new.expectations_against(&old_in_new_names);
        let inverse = self.renames.inverse();
        let old_expectations = old.expectations_against(&new.renamed(&inverse));
        if new_expectations.is_empty() || old_expectations.is_empty() {
            return None;
        }
        let note = vec![format!("old: {}", old_expectations.join("; "))];
        let test = w.text(name, self.levels, &note, &new_expectations);
        let old_test = w.text(name, self.levels, &[], &old_expectations);
        let confirmed = passes(self.new, &test, name) == Some(true)
            && passes(self.old, &test, name) == Some(false)
            && passes(self.old, &old_test, name) == Some(true)
            && passes(self.new, &old_test, name) == Some(false);
        confirmed.then_some(Witness { world: w, test, old_expectations, new_expectations })
    }

    /// Removes and simplifies while the outcomes still differ.
    fn shrink(&mut self, mut w: World) -> World {
        loop {
            let mut progressed = false;
            for candidate in smaller(&w) {
                if self.plays >= MAX_PLAYS {
                    return w;
                }
                if self.differs(&candidate).is_some() {
                    w = candidate;
                    progressed = true;
                    break;
                }
            }
            if !progressed {
                return w;
            }
        }
    }
}

/// Whether test `name`, appended to the side's source, checks and passes on the reference
/// interpreter (`None`: it does not check, or cannot be set up).
fn passes(side: &Side, test: &str, name: &str) -> Option<bool> {
    let source = format!("{}\n\n{test}\n", side.text.trim_end());
    let policy = Checked::from_text(&side.label, &source).compile(EngineKind::Interp).ok()?;
    let t = policy.policy.tests.iter().find(|t| t.name == name)?;
    let outcome = scenario::run(&policy, t);
    if outcome.error.is_some() || outcome.expectations == 0 {
        return None;
    }
    Some(outcome.failures.is_empty())
}

/// Cases around the finding, smallest first, then the whole case.
fn focus_candidates(world: &World, f: &Finding) -> Vec<World> {
    let mut out = Vec::new();
    let jobs_only = keep_jobs(world, &f.jobs);
    if !f.nodes.is_empty() {
        out.push(keep_nodes(&jobs_only, &f.nodes));
        // The same nodes, the other way round: a tie broken by node order shows both ways.
        let mut reversed = f.nodes.clone();
        reversed.reverse();
        out.push(keep_nodes(&jobs_only, &reversed));
    }
    out.push(jobs_only);
    out.push(world.clone());
    out
}

/// The world with only these pending jobs (when any of them is pending).
fn keep_jobs(world: &World, jobs: &[String]) -> World {
    let mut w = world.clone();
    if w.pending.iter().any(|p| jobs.contains(&p.job.name)) {
        w.pending.retain(|p| jobs.contains(&p.job.name));
    }
    w
}

/// The world with only these nodes, in this order, and the jobs running on them.
fn keep_nodes(world: &World, nodes: &[String]) -> World {
    let order: Vec<usize> = nodes.iter().filter_map(|n| world.nodes.iter().position(|x| &x.name == n)).collect();
    let mut w = world.clone();
    w.nodes = order.iter().map(|&i| world.nodes[i].clone()).collect();
    w.running = world
        .running
        .iter()
        .filter(|r| r.nodes.iter().all(|i| order.contains(i)))
        .map(|r| {
            let mut r = r.clone();
            r.nodes = r.nodes.iter().filter_map(|i| order.iter().position(|x| x == i)).collect();
            r
        })
        .collect();
    w
}

/// Every one-step simplification of a world, the biggest first.
fn smaller(w: &World) -> Vec<World> {
    let mut out = Vec::new();
    for i in 0..w.pending.len() {
        if w.pending.len() > 1 {
            let mut x = w.clone();
            x.pending.remove(i);
            out.push(x);
        }
    }
    for i in 0..w.running.len() {
        let mut x = w.clone();
        x.running.remove(i);
        out.push(x);
    }
    for i in 0..w.nodes.len() {
        if w.nodes.len() > 1 {
            let names: Vec<String> =
                w.nodes.iter().enumerate().filter(|(k, _)| *k != i).map(|(_, n)| n.name.clone()).collect();
            out.push(keep_nodes(w, &names));
        }
    }
    for i in 0..w.usage.len() {
        let mut x = w.clone();
        x.usage.remove(i);
        out.push(x);
    }
    if w.pending.iter().any(|p| p.batch > 0) {
        let mut x = w.clone();
        for p in &mut x.pending {
            p.batch = 0;
        }
        out.push(x);
    }
    for i in 0..w.pending.len() {
        for job in simpler_jobs(&w.pending[i].job) {
            let mut x = w.clone();
            x.pending[i] = Pending { job, batch: w.pending[i].batch };
            out.push(x);
        }
    }
    for i in 0..w.running.len() {
        for job in simpler_jobs(&w.running[i].job) {
            if job.replicas == w.running[i].job.replicas && job.request == w.running[i].job.request {
                let mut x = w.clone();
                x.running[i].job = job;
                out.push(x);
            }
        }
        if w.running[i].history != History::default() {
            let mut x = w.clone();
            x.running[i].history = History::default();
            out.push(x);
        }
    }
    for i in 0..w.nodes.len() {
        for node in simpler_nodes(&w.nodes[i]) {
            let mut x = w.clone();
            x.nodes[i] = node;
            out.push(x);
        }
    }
    out
}

/// The job with one property back to its default.
fn simpler_jobs(j: &JobSpec) -> Vec<JobSpec> {
    let d = JobSpec::default();
    let mut out = Vec::new();
    let mut with = |f: &dyn Fn(&mut JobSpec)| {
        let mut x = j.clone();
        f(&mut x);
        if x != *j {
            out.push(x);
        }
    };
    with(&|x| x.priority_class = None);
    with(&|x| x.priority = None);
    with(&|x| x.user = None);
    with(&|x| x.labels.clear());
    with(&|x| x.models.clear());
    with(&|x| x.bursty = false);
    with(&|x| x.latency_critical = false);
    with(&|x| x.preemptible = false);
    with(&|x| x.duration_ms = None);
    with(&|x| x.checkpoint_every_ms = None);
    with(&|x| x.utilization = d.utilization);
    with(&|x| x.gpu_mem = 0);
    with(&|x| x.cpu_milli = 0);
    with(&|x| x.mem = 0);
    with(&|x| x.min_replicas = None);
    with(&|x| {
        x.replicas = 1;
        x.min_replicas = None;
    });
    with(&|x| {
        if let Request::Whole(k) = x.request
            && k > 1
        {
            x.request = Request::Whole(k / 2);
        }
    });
    out
}

/// The node with one property back to its default.
fn simpler_nodes(n: &NodeSpec) -> Vec<NodeSpec> {
    let d = NodeSpec::default();
    let mut out = Vec::new();
    let mut with = |f: &dyn Fn(&mut NodeSpec)| {
        let mut x = n.clone();
        f(&mut x);
        if x != *n {
            out.push(x);
        }
    };
    with(&|x| x.labels.clear());
    with(&|x| x.domains.clear());
    with(&|x| x.model = d.model.clone());
    with(&|x| x.card_mem = d.card_mem);
    with(&|x| x.cpu_milli = d.cpu_milli);
    with(&|x| x.mem = d.mem);
    out
}

/// The same world with its nodes and jobs named `n1`…, `r1`…, `j1`… in order (keeping
/// the prefix that avoids queue names).
fn renumber(w: &World) -> World {
    let prefix = |name: &str| name.trim_end_matches(|c: char| c.is_ascii_digit()).to_string();
    let base = |name: &str| {
        let p = prefix(name);
        p[..p.len().saturating_sub(1)].to_string()
    };
    let mut x = w.clone();
    for (i, n) in x.nodes.iter_mut().enumerate() {
        n.name = format!("{}n{}", base(&n.name), i + 1);
    }
    for (i, r) in x.running.iter_mut().enumerate() {
        r.job.name = format!("{}r{}", base(&r.job.name), i + 1);
    }
    let mut order: Vec<usize> = (0..x.pending.len()).collect();
    order.sort_by_key(|&i| x.pending[i].batch);
    for (k, &i) in order.iter().enumerate() {
        let name = format!("{}j{}", base(&x.pending[i].job.name), k + 1);
        x.pending[i].job.name = name;
    }
    x
}
