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
use std::collections::BTreeSet;

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
    /// Worlds whose difference moved when ties broke the other way.
    ties: usize,
    /// Fresh schedulers of OLD and NEW to play on.
    fresh: (gpol_runtime::Scheduler, gpol_runtime::Scheduler),
    /// Whether a difference in the cards jobs hold is enough (for card choice); else a
    /// job or an eviction must differ.
    cards_enough: bool,
    /// Whether filters named as reasons are blurred (both versions have the same filters).
    pub blur_filters: bool,
    /// The jobs the decision concerns: one of them (or its eviction) must be among what
    /// differs, so that the schedule shows this decision and not another.
    focus: Vec<String>,
}

/// Why no counterexample was shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Miss {
    /// Every difference found depended on how ties were broken.
    Tie,
    /// None could be shown in a schedule the interpreter confirms.
    NotShown,
}

impl<'a> Shrinker<'a> {
    pub fn new(old: &'a Side, new: &'a Side, levels: &'a [String], renames: &'a Renames) -> Shrinker<'a> {
        let fresh = (gpol_runtime::Scheduler::new(old.jit.clone()), gpol_runtime::Scheduler::new(new.jit.clone()));
        Shrinker {
            old,
            new,
            levels,
            renames,
            plays: 0,
            ties: 0,
            fresh,
            cards_enough: false,
            focus: Vec::new(),
            blur_filters: false,
        }
    }

    /// Both outcomes of a world (OLD's as played, NEW's) and the noise, if they differ
    /// beyond the noise: the noise baseline. Each version plays the world again with its
    /// nodes and each batch's jobs in reverse order; what moves then under both (jobs,
    /// evictions, cards) depends on how ties are broken, and a difference confined to it
    /// is not a change.
    fn differs(&mut self, w: &World) -> Option<(Outcome, Outcome, BTreeSet<String>)> {
        self.plays += 1;
        let old = Outcome::after_cycle(w.play(&self.fresh.0, self.levels).ok()?);
        let new = Outcome::after_cycle(w.play(&self.fresh.1, self.levels).ok()?);
        let blur = |o: &Outcome| if self.blur_filters { o.blur_filters() } else { o.clone() };
        let renamed = old.renamed(self.renames);
        let differing = blur(&renamed).differing(&blur(&new));
        if differing.is_empty() {
            return None;
        }
        let shuffled = reversed(w);
        let again = |fresh: &gpol_runtime::Scheduler| shuffled.play(fresh, self.levels).ok().map(Outcome::after_cycle);
        let (old_again, new_again) = (again(&self.fresh.0)?, again(&self.fresh.1)?);
        // Noise is what moves under both versions: a change from a preference to a tie (or
        // back) moves under one only, and is a change. Reasons that differ only in which
        // of the same filters a tie names are noise too.
        let mut noise: BTreeSet<String> =
            old.differing(&old_again).intersection(&new.differing(&new_again)).cloned().collect();
        noise.extend(renamed.differing(&new).difference(&differing).cloned());
        if differing.is_subset(&noise) {
            self.ties += 1;
            return None;
        }
        if !self.cards_enough && differing.iter().all(|d| noise.contains(d) || d.starts_with("cards ")) {
            return None;
        }
        let concerns = |d: &String| self.focus.iter().any(|j| d == j || d.strip_prefix("evict ") == Some(j.as_str()));
        if !self.focus.is_empty() && !differing.iter().any(|d| !noise.contains(d) && concerns(d)) {
            return None;
        }
        Some((old, new, noise))
    }

    /// A confirmed counterexample for a finding on `world`, named `name`; else whether
    /// the only differences seen came from broken ties.
    pub fn witness(&mut self, world: &World, finding: &Finding, name: &str) -> Result<Witness, Miss> {
        self.plays = 0;
        self.ties = 0;
        self.cards_enough = finding.decision == crate::report::Decision::CardChoice;
        self.focus = finding.jobs.clone();
        let miss = |s: &Shrinker<'_>| if s.ties > 0 { Miss::Tie } else { Miss::NotShown };
        let Some(mut w) = focus_candidates(world, finding).into_iter().find(|c| self.differs(c).is_some()) else {
            return Err(miss(self));
        };
        w = self.shrink(w);
        let w = renumber(&w);
        // The jobs have new names now; the shrunk world showed the decision under the old.
        self.focus.clear();
        let Some((old, new, noise)) = self.differs(&w) else { return Err(Miss::NotShown) };
        let old_in_new_names = old.renamed(self.renames);
        let new_expectations = new.expectations_against(&old_in_new_names, &noise);
        let inverse = self.renames.inverse();
        let old_expectations = old.expectations_against(&new.renamed(&inverse), &noise);
        if new_expectations.is_empty() || old_expectations.is_empty() {
            return Err(Miss::NotShown);
        }
        let note = vec![format!("old: {}", old_expectations.join("; "))];
        let test = w.text(name, self.levels, &note, &new_expectations);
        let old_test = w.text(name, self.levels, &[], &old_expectations);
        // On the other version a test fails, or does not check when it names a rule only
        // its own version has (`because calm`): `gpolc test` reports either as a failure.
        let confirmed = passes(self.new, &test, name) == Some(true)
            && passes(self.old, &test, name) != Some(true)
            && passes(self.old, &old_test, name) == Some(true)
            && passes(self.new, &old_test, name) != Some(true);
        match confirmed {
            true => Ok(Witness { world: w, test, old_expectations, new_expectations }),
            false => Err(Miss::NotShown),
        }
    }

    /// Removes and simplifies while the outcomes still differ: passes over every
    /// one-step simplification, keeping each that still shows the difference, until a
    /// pass keeps none.
    fn shrink(&mut self, mut w: World) -> World {
        let mut at = 0;
        let mut kept_in_pass = false;
        loop {
            let candidates = smaller(&w);
            if at >= candidates.len() {
                if !kept_in_pass {
                    return w;
                }
                (at, kept_in_pass) = (0, false);
                continue;
            }
            if self.plays >= MAX_PLAYS {
                return w;
            }
            if self.differs(&candidates[at]).is_some() {
                w = candidates[at].clone();
                kept_in_pass = true;
            } else {
                at += 1;
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

/// The world with its nodes, and the jobs of each batch, in reverse order.
fn reversed(w: &World) -> World {
    let names: Vec<String> = w.nodes.iter().rev().map(|n| n.name.clone()).collect();
    let mut x = keep_nodes(w, &names);
    x.pending.reverse();
    x.pending.sort_by_key(|p| p.batch);
    x
}

/// Cases around the finding, smallest first, then the whole case.
fn focus_candidates(world: &World, f: &Finding) -> Vec<World> {
    let mut out = Vec::new();
    if let (crate::report::Decision::VictimEligibility, [claimant, victim]) = (f.decision, f.jobs.as_slice()) {
        out.extend(one_on_one(world, claimant, victim));
    }
    if let (crate::report::Decision::JobOrder | crate::report::Decision::QueueOrder, [first, second]) =
        (f.decision, f.jobs.as_slice())
    {
        out.extend(head_to_head(world, first, second));
    }
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

/// For a claimant and a running job one version may evict and the other not: the two
/// alone on one node the victim fills, the claimant asking for just that room (or the
/// victim holding just what the claimant asks), so the eviction is needed and enough.
fn one_on_one(world: &World, claimant: &str, victim: &str) -> Vec<World> {
    let Some(c) = world.pending.iter().find(|p| p.job.name == claimant) else { return Vec::new() };
    let Some(v) = world.running.iter().find(|r| r.job.name == victim) else { return Vec::new() };
    let Some(&at) = v.nodes.first() else { return Vec::new() };
    let Some(node) = world.nodes.get(at) else { return Vec::new() };
    let (Request::Whole(held), Request::Whole(asked)) = (v.job.request, c.job.request) else { return Vec::new() };
    let mut out = Vec::new();
    for (cards, claimant_cards, victim_cards) in [(held, held, held), (asked, asked, asked)] {
        let mut n = node.clone();
        n.cards = cards;
        let mut v = v.clone();
        v.nodes = vec![0];
        v.ends = false;
        v.job.request = Request::Whole(victim_cards);
        (v.job.replicas, v.job.min_replicas) = (1, None);
        let mut c = c.clone();
        c.job.request = Request::Whole(claimant_cards);
        (c.job.replicas, c.job.min_replicas, c.batch) = (1, None, 0);
        out.push(World {
            nodes: vec![n],
            running: vec![v],
            usage: world.usage.clone(),
            pending: vec![c],
            waits: [0, 0],
            start: world.start,
        });
    }
    out
}

/// For two jobs of a queue the versions order differently: the two alone on one node
/// that holds either but not both, kept busy until the last batch so that a job that
/// waits does wait.
fn head_to_head(world: &World, first: &str, second: &str) -> Vec<World> {
    let find = |name: &str| world.pending.iter().find(|p| p.job.name == name).cloned();
    let (Some(mut a), Some(mut b)) = (find(first), find(second)) else { return Vec::new() };
    let cards = |p: &Pending| match p.job.request {
        Request::Whole(k) => Some(k),
        _ => None,
    };
    let (Some(ka), Some(kb)) = (cards(&a), cards(&b)) else { return Vec::new() };
    // Nothing but the order may keep either from the room: no host memory or CPU asked,
    // no model required.
    for p in [&mut a, &mut b] {
        (p.job.replicas, p.job.min_replicas, p.job.models) = (1, None, Vec::new());
        (p.job.mem, p.job.cpu_milli, p.job.gpu_mem) = (0, 0, 0);
    }
    let mut out = race(world, &a, &b, ka.max(kb));
    out.extend(contended(world, &a, &b, ka.max(kb)));
    // And the two asking for one card each (a large request may be over its quota).
    if ka > 1 || kb > 1 {
        for p in [&mut a, &mut b] {
            p.job.request = Request::Whole(1);
        }
        out.extend(race(world, &a, &b, 1));
    }
    out
}

/// Two waiting jobs racing for a node of `room` cards, busy until the later one arrives.
fn race(world: &World, a: &Pending, b: &Pending, room: u32) -> Vec<World> {
    let node = NodeSpec { cards: room, ..world.nodes.first().cloned().unwrap_or_else(|| NodeSpec::named("n1")) };
    let mut w = World {
        nodes: vec![node],
        running: Vec::new(),
        usage: world.usage.clone(),
        pending: vec![a.clone(), b.clone()],
        waits: world.waits,
        start: world.start,
    };
    if a.batch != b.batch {
        let mut blocker = JobSpec::named(format!(
            "{}r1",
            a.job.name.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches('j')
        ));
        (blocker.queue, blocker.request) = (a.job.queue.clone(), Request::Whole(room));
        w.running.push(crate::world::Running { job: blocker, nodes: vec![0], history: History::default(), ends: true });
    }
    vec![w]
}

/// The two racing for one node of `room` cards beside the world's running jobs, on their
/// nodes cut to what they hold: the queues' allocations (which may decide whose turn it
/// is) kept, and no other room. Only for whole-card jobs on whole-card nodes.
fn contended(world: &World, a: &Pending, b: &Pending, room: u32) -> Option<World> {
    let mut used = vec![0u32; world.nodes.len()];
    for r in &world.running {
        let Request::Whole(k) = r.job.request else { return None };
        for &i in &r.nodes {
            *used.get_mut(i)? += k;
        }
    }
    if world.running.is_empty() || world.nodes.iter().any(|n| n.sharing != gpol_compiler::spec::Sharing::Exclusive) {
        return None;
    }
    let kept: Vec<usize> = (0..world.nodes.len()).filter(|&i| used[i] > 0).collect();
    let mut nodes: Vec<NodeSpec> =
        kept.iter().map(|&i| NodeSpec { cards: used[i], ..world.nodes[i].clone() }).collect();
    // The room: a node no job runs on, else one more like the first (named after it).
    let mut free = match world.nodes.iter().find(|n| !nodes.iter().any(|k| k.name == n.name)) {
        Some(n) => n.clone(),
        None => {
            let first = world.nodes.first()?;
            let prefix = first.name.trim_end_matches(|c: char| c.is_ascii_digit());
            NodeSpec { name: format!("{prefix}{}", world.nodes.len() + 1), ..first.clone() }
        }
    };
    free.cards = room;
    nodes.push(free);
    let running = world
        .running
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.nodes = r.nodes.iter().filter_map(|i| kept.iter().position(|k| k == i)).collect();
            r.ends = false;
            r
        })
        .collect();
    let (mut a, mut b) = (a.clone(), b.clone());
    (a.batch, b.batch) = (0, 0);
    Some(World { nodes, running, usage: world.usage.clone(), pending: vec![a, b], waits: [0, 0], start: world.start })
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
        if w.running[i].ends {
            let mut x = w.clone();
            x.running[i].ends = false;
            out.push(x);
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

/// `x` with each edit made on its own, where it changes anything.
fn each_edit<T: Clone + PartialEq>(x: &T, edits: &[&dyn Fn(&mut T)]) -> Vec<T> {
    edits
        .iter()
        .filter_map(|edit| {
            let mut y = x.clone();
            edit(&mut y);
            (y != *x).then_some(y)
        })
        .collect()
}

/// The job with one property back to its default.
fn simpler_jobs(j: &JobSpec) -> Vec<JobSpec> {
    let d = JobSpec::default();
    each_edit(
        j,
        &[
            &|x| x.priority_class = None,
            &|x| x.priority = None,
            &|x| x.user = None,
            &|x| x.labels.clear(),
            &|x| x.models.clear(),
            &|x| x.bursty = false,
            &|x| x.latency_critical = false,
            &|x| x.preemptible = false,
            &|x| x.duration_ms = None,
            &|x| x.checkpoint_every_ms = None,
            &|x| x.utilization = d.utilization,
            &|x| x.gpu_mem = 0,
            &|x| x.cpu_milli = 0,
            &|x| x.mem = 0,
            &|x| x.min_replicas = None,
            &|x| {
                x.replicas = 1;
                x.min_replicas = None;
            },
            &|x| {
                if let Request::Whole(k) = x.request
                    && k > 1
                {
                    x.request = Request::Whole(k / 2);
                }
            },
        ],
    )
}

/// The node with one property back to its default.
fn simpler_nodes(n: &NodeSpec) -> Vec<NodeSpec> {
    let d = NodeSpec::default();
    each_edit(
        n,
        &[
            &|x| x.labels.clear(),
            &|x| x.domains.clear(),
            &|x| x.model = d.model.clone(),
            &|x| x.card_mem = d.card_mem,
            &|x| x.cpu_milli = d.cpu_milli,
            &|x| x.mem = d.mem,
        ],
    )
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
