//! Preemption, reclaim and borrowing (decision D6): one victim search for a job (the
//! claimant) that cannot start as things are.
//!
//! Running jobs are candidates by where they run: in the claimant's own leaf queue, or
//! anywhere when the quota tree governs nothing the claimant needs (`preempt` rules); in
//! another queue whose side of the tree borrows what the claimant needs (`reclaim` rules
//! when the claimant's side ends within its guarantee, `borrow` rules when it ends
//! borrowing). `protect` rules veto, whatever allows. A job of another queue is taken
//! only while every queue of its side still borrows something the claimant needs (checked
//! at each pick, as victims leave), and only if it holds some of it.
//!
//! Victims are whole jobs, taken in order (cheapest first) until the claimant would start,
//! then a reverse pass gives back those not needed. Evictions are tried for real on the
//! model (`lift` and `restore` are exact inverses), so the placement that justifies them
//! is the one the claimant gets. A search first looks for a set after which the claimant's
//! side is within its guarantee (reclaim); failing that, if the policy has `borrow` rules,
//! for one after which it borrows. For a single-node claimant each node is searched on its
//! own, in order of a lower bound on its cost, stopping once no node can beat the best.

use crate::fit;
use crate::jobs;
use crate::jobs::JobId;
use crate::model::NodeId;
use crate::model_records;
use crate::quota::QueueId;
use crate::quota::{Amounts, Res};
use crate::scheduler::Scheduler;
use crate::scheduler::View;
use crate::scheduler::facts::{PolicyFacts, Reads};
use crate::scheduler::order::compare_keys;
use gpol_compiler::ir::{OrderKey, RuleId, VictimKind};
use gpol_compiler::schema::QueueRec;
use gpol_compiler::spec::Request;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// A job to evict, the rule that allows it and what it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Victim {
    pub job: JobId,
    pub rule: RuleId,
    pub cost: f64,
    /// `Some(k)`: only the job's replica in slot `k` goes (an elastic gang above its
    /// minimum keeps running with the rest).
    pub replica: Option<usize>,
}

/// Where a running job stands relative to a claimant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// In the claimant's own leaf queue.
    Own,
    /// Anywhere: the quota tree governs nothing the claimant needs.
    Anywhere,
    /// In another queue whose side borrows what the claimant needs.
    Other,
}

/// What a victim search decided about one running job.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Its side of the tree (this queue) borrows nothing the claimant needs, or it holds
    /// none of what its side borrows.
    WithinGuarantee { queue: QueueId },
    /// A `protect` rule keeps it.
    Protected { rule: RuleId },
    /// It started in this cycle: no job is evicted in the cycle that started it.
    JustStarted,
    /// No rule of a kind that applies where it runs allows it.
    NoRule { place: Place },
    /// A candidate: the rules that allow it (the preempt rule, or the reclaim and borrow
    /// rules) and its cost.
    Candidate { place: Place, rules: Vec<RuleId>, cost: f64 },
}

/// An account of one victim search: every running job considered, and the outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct VictimSearch {
    pub considered: Vec<(JobId, Verdict)>,
    pub eviction: Option<Eviction>,
}

/// The outcome of a victim search: who goes, and where the claimant then starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Eviction {
    pub victims: Vec<Victim>,
    /// One node per replica of the claimant.
    pub replicas: Vec<NodeId>,
    pub cost: f64,
}

/// For a job of another queue: its side below the common ancestor with the claimant
/// (each must still borrow something needed when it is picked) and the claimant's side
/// (within its guarantee at the end, for a reclaim).
struct Sides {
    victim: Vec<QueueId>,
    claimant: Vec<QueueId>,
}

/// An eligible victim and the rules that allow it.
#[derive(Clone)]
struct Candidate {
    job: JobId,
    /// `Some(k)`: only the replica in slot `k` (one of an elastic gang's replicas above
    /// its minimum).
    part: Option<usize>,
    cost: f64,
    priority: f64,
    started_ms: i64,
    /// The preempt rule that allows it (own queue, or anywhere).
    preempt: Option<usize>,
    /// The reclaim rule and every borrow rule that allow it (another queue).
    reclaim: Option<usize>,
    borrow: Rc<[usize]>,
    sides: Option<Rc<Sides>>,
    /// Its `victim_order` keys when the search began.
    keys: Rc<[f64]>,
}

/// Where the jobs of one queue stand in a victim search: the same for all of them, so it
/// is worked out once per queue rather than once per running job.
#[derive(Clone)]
enum Standing {
    Own,
    Anywhere,
    Other(Rc<Sides>),
    /// The victim's side (this queue) borrows nothing the claimant needs.
    WithinGuarantee(QueueId),
}

/// The eligible victims, and what each frees on each of its nodes; and what could give
/// the claimant others (when the policy lets that be said).
#[derive(Default)]
struct Candidates {
    list: Vec<Candidate>,
    frees: Vec<Frees>,
    watch: Option<Watch>,
}

/// What could give a claimant candidates after a search found none, or none that all
/// gone would let the quota admit it: a job starting under
/// one of `starts` (a new job that preempt rules may allow); under one of `borrowers`
/// (the tops of other queues' sides) while that queue borrows (a new job, or its side now
/// borrowing, that reclaim and borrow rules may allow); or the allocation of one of the
/// leaves `changes` changing (rules that read the jobs' queues see it, and whether the
/// claimant's leaf can end within its guarantee follows it). Nothing else can, when the
/// victim rules read only the two jobs, fixed fields of theirs and their leaves'
/// allocation ([`VictimReads`]'s `watchable`): jobs finishing elsewhere only take
/// candidates away — but when there were candidates and the quota would not admit the
/// claimant even with all of them gone (`releases`), any job ending may free what was
/// missing. When only `reclaim` rules could allow a victim and the claimant's leaf
/// would end above its guarantee, nothing but that leaf falling far enough can give
/// candidates (`within`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Watch {
    pub(crate) starts: Vec<QueueId>,
    pub(crate) borrowers: Vec<QueueId>,
    pub(crate) changes: Vec<QueueId>,
    pub(crate) releases: bool,
    /// A leaf and what the claimant needs of each resource: fires once the leaf, with
    /// that admitted, would hold no more than its guarantee of every one.
    pub(crate) within: Option<(QueueId, Vec<(Res, i64)>)>,
}

/// Which sets a search looks for: ones after which the claimant's side is within its
/// guarantee (victims of other queues by `reclaim` rules), or ones after which it
/// borrows (by this `borrow` rule: each is an attempt of its own, in declaration order,
/// as Kueue tries its fair-sharing strategies in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    Reclaim,
    Borrow(usize),
}

impl Candidate {
    /// The rule that lets this attempt take it, if any.
    fn rule(&self, attempt: Attempt) -> Option<usize> {
        self.preempt.or(match attempt {
            Attempt::Reclaim => self.reclaim,
            Attempt::Borrow(k) => self.borrow.contains(&k).then_some(k),
        })
    }
}

/// The rules' verdict on evicting a candidate: the protect rule that vetoes it, the rules
/// that allow it, its cost and its `victim_order` keys.
#[derive(Clone)]
struct Judged {
    protect: Option<usize>,
    preempt: Option<usize>,
    reclaim: Option<usize>,
    borrow: Vec<usize>,
    cost: f64,
    keys: Vec<f64>,
}

impl Judged {
    /// The rules that allow it, the preempt rule first.
    fn rules(&self) -> Vec<usize> {
        self.preempt.into_iter().chain(self.reclaim).chain(self.borrow.iter().copied()).collect()
    }
}

/// The order victims are taken in: by the policy's `victim_order` keys, then cheapest
/// first, then lowest priority, then the most recently started, then the most recently
/// submitted (as Kueue takes the most recently admitted first).
fn greedy(order: &[OrderKey], a: &Candidate, b: &Candidate) -> Ordering {
    compare_keys(order, &a.keys, &b.keys)
        .then(a.cost.total_cmp(&b.cost))
        .then(a.priority.total_cmp(&b.priority))
        .then(b.started_ms.cmp(&a.started_ms))
        .then(b.job.cmp(&a.job))
}

/// Every candidate's index, in greedy order.
fn greedy_order(order: &[OrderKey], candidates: &[Candidate]) -> Vec<usize> {
    let mut list: Vec<usize> = (0..candidates.len()).collect();
    list.sort_unstable_by(|&a, &b| greedy(order, &candidates[a], &candidates[b]));
    list
}

/// Hands out a pool of candidates in victim order: the order it was sorted in, or, for
/// a `victim_order` that reads what evictions change, the best of the rest on the model
/// as it stands at each call (so shares are re-computed after every pick).
struct Picker {
    pool: Vec<usize>,
    next: usize,
}

impl Picker {
    fn new(pool: Vec<usize>) -> Picker {
        Picker { pool, next: 0 }
    }
}

/// What evicting one candidate frees on one node.
#[derive(Clone)]
struct Frees {
    node: NodeId,
    candidate: usize,
    cpu: u64,
    mem: u64,
    gpu: u64,
}

/// What a single-node claimant's search of one node learns for the others: the greedy
/// order of every candidate, and whether taking them in that order from the untouched
/// state fails to satisfy the quota.
#[derive(Default)]
struct Global {
    order: Option<Vec<usize>>,
    quota_fails_untouched: bool,
}

/// The best set found so far: cost, victims (indexes into the candidates), placement.
struct Found {
    cost: f64,
    victims: Vec<usize>,
    replicas: Vec<NodeId>,
    /// Whether the claimant's side ends within its guarantee for every victim of
    /// another queue (then reclaim rules allowed them).
    claimant_within: bool,
}

/// One victim search for one claimant: the scheduler it tries evictions on (each undone
/// before it ends), what the claimant needs, and the attempt under way with the
/// candidates that attempt may take.
struct VictimFinder<'s> {
    s: &'s mut Scheduler,
    /// The policy's facts, held apart from `s` (which trial evictions change).
    facts: Arc<PolicyFacts>,
    claimant: JobId,
    /// The resources the tree governs that the claimant needs (at its minimum count).
    needed: Vec<Res>,
    attempt: Attempt,
    candidates: Vec<Candidate>,
}

impl Scheduler {
    /// Searches for victims whose eviction lets `claimant` start now. Evictions are tried
    /// on the model and undone: nothing changes in the end.
    pub fn victim_search(&mut self, claimant: JobId) -> Option<Eviction> {
        VictimFinder::new(self, claimant).run(None).ok()
    }

    /// A cycle's victim search: the eviction, or what to watch for before searching
    /// again; what it decided about every running job is kept in `record` when given.
    pub(crate) fn victim_search_noted(
        &mut self,
        claimant: JobId,
        record: Option<&mut Vec<(JobId, Verdict)>>,
    ) -> Result<Eviction, Option<Watch>> {
        VictimFinder::new(self, claimant).run(record)
    }

    /// [`Scheduler::victim_search`], with what it decided about every running job.
    pub fn victim_search_explained(&mut self, claimant: JobId) -> VictimSearch {
        let mut considered = Vec::new();
        let eviction = VictimFinder::new(self, claimant).run(Some(&mut considered)).ok();
        VictimSearch { considered, eviction }
    }
}

impl<'s> VictimFinder<'s> {
    fn new(s: &'s mut Scheduler, claimant: JobId) -> VictimFinder<'s> {
        let c = &s.world.jobs()[claimant];
        let needed = jobs::replicas_demand(c, c.ask.min_replicas, None)
            .iter()
            .filter(|&(r, a)| *a > 0 && s.world.quotas().is_constrained(*r))
            .map(|(r, _)| *r)
            .collect();
        let facts = Arc::clone(&s.facts);
        VictimFinder { s, facts, claimant, needed, attempt: Attempt::Reclaim, candidates: Vec::new() }
    }
}

impl VictimFinder<'_> {
    /// The policy's `victim_order`.
    fn order(&self) -> &[OrderKey] {
        &self.facts.policy.program.victim_order
    }

    /// Whether `victim_order`'s keys read queue or cluster state that evictions change
    /// (then they are re-evaluated at every pick).
    fn dynamic(&self) -> bool {
        self.facts.victim_reads.order
    }

    fn run(&mut self, record: Option<&mut Vec<(JobId, Verdict)>>) -> Result<Eviction, Option<Watch>> {
        let facts = Arc::clone(&self.facts);
        let program = &facts.policy.program;
        if !program.victims.iter().any(|r| r.kind != VictimKind::Protect) {
            return Err(None);
        }
        let attempts: Vec<Attempt> = std::iter::once(Attempt::Reclaim)
            .chain(
                program
                    .victims
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.kind == VictimKind::Borrow)
                    .map(|(k, _)| Attempt::Borrow(k)),
            )
            .collect();
        // Jobs of other queues are looked at only if some attempt could take them.
        let others = attempts.len() > 1 || self.leaf_could_end_within(None);
        let all = self.all_candidates(others, record);
        // A reclaim leaves the claimant's leaf within its guarantee: if even every one of
        // its own queue's candidates gone would not do that, no job of another queue can
        // be reclaimed for it (and none is tried: that is most searches of a borrower).
        let reclaim_reachable = self.leaf_could_end_within(Some(&all.list));
        // Whether some attempt had candidates that, all gone, would let the quota admit it.
        let mut searched = false;
        for attempt in attempts {
            let others = attempt != Attempt::Reclaim || reclaim_reachable;
            let (candidates, frees) = all.for_attempt(attempt, others);
            self.attempt = attempt;
            self.candidates = candidates;
            if self.candidates.is_empty() || !self.quota_could_admit() {
                continue;
            }
            searched = true;
            let found = if self.s.world.jobs()[self.claimant].ask.replicas == 1 {
                self.search_nodes(frees)
            } else {
                self.search_all()
            };
            if let Some(f) = found {
                let victims = f
                    .victims
                    .iter()
                    .map(|&i| {
                        let c = &self.candidates[i];
                        let rule = match attempt {
                            Attempt::Borrow(k) if !f.claimant_within && c.preempt.is_none() => Some(k),
                            Attempt::Borrow(_) if c.preempt.is_none() => c.reclaim,
                            _ => c.rule(attempt),
                        }
                        .unwrap_or(usize::MAX);
                        Victim {
                            job: c.job,
                            rule: RuleId::Victim(u16::try_from(rule).unwrap_or(u16::MAX)),
                            cost: c.cost,
                            replica: c.part,
                        }
                    })
                    .collect();
                return Ok(Eviction { victims, replicas: f.replicas, cost: f.cost });
            }
        }
        if searched {
            return Err(None);
        }
        // No candidates, or none that could free enough for the quota: only new candidates
        // (the watch) or the quota cap giving (which the class's backoff follows) can
        // change that. Candidates that no attempt could take were of other queues, left out
        // because the claimant's leaf cannot end within its guarantee: a change there can
        // alter that too.
        let cq = self.s.world.jobs()[self.claimant].ask.queue;
        Err(all.watch.map(|mut w| {
            if !all.list.is_empty() {
                w.changes.push(cq);
                // With candidates the quota could not admit it: freed quota may now do.
                w.releases = true;
            }
            w
        }))
    }

    /// The running jobs some rule allows evicting for the claimant (of other queues, only
    /// if `others`); `record`, if given, receives the verdict on every running job (then
    /// those of other queues are judged whatever `others` says).
    fn all_candidates(&self, others: bool, mut record: Option<&mut Vec<(JobId, Verdict)>>) -> Candidates {
        let s = &*self.s;
        let claimant = self.claimant;
        let program = &self.facts.policy.program;
        let quotas = &s.world.quotas();
        let has_kind = |k: VictimKind| program.victims.iter().any(|r| r.kind == k);
        let has_preempt = has_kind(VictimKind::Preempt);
        let has_cross = has_kind(VictimKind::Reclaim) || has_kind(VictimKind::Borrow);
        // Where each leaf's jobs stand (jobs run only in leaves). When no leaf's jobs
        // could be victims at all, nothing more is needed — unless the search is being
        // recorded job by job.
        let standings: Vec<Option<Standing>> = (0..quotas.queues.len())
            .map(|q| quotas.queues[q].place.children.is_empty().then(|| self.standing(q)))
            .collect();
        let evictable = |st: &Standing| match st {
            Standing::Own | Standing::Anywhere => has_preempt,
            Standing::Other(_) => has_cross && others,
            Standing::WithinGuarantee(_) => false,
        };
        let watch = self.facts.victim_reads.watchable.then(|| self.watch(&standings, has_preempt, has_cross, others));
        if record.is_none() && !standings.iter().flatten().any(evictable) {
            return Candidates { watch, ..Candidates::default() };
        }
        let reads_after = self.facts.victim_reads.after;
        // Reclaim and borrow rules have no cost of their own: they take the first preempt
        // rule's.
        let cost_rule = program.victims.iter().position(|r| r.kind == VictimKind::Preempt && r.cost.is_some());
        let claimant_rec = s.job_rec(claimant);
        // Sized for every running job up front: growing them would copy and fault pages.
        let mut out: Vec<Candidate> = Vec::with_capacity(s.world.running().len());
        let mut frees: Vec<Frees> = Vec::with_capacity(s.world.running().len());
        let mut view = s.view(Some(claimant));
        let mut after = AfterCount::new(s, claimant);
        let recording = record.is_some();
        for v in s.running() {
            let vj = &s.world.jobs()[v];
            let mut note = |verdict: Verdict| {
                if let Some(r) = record.as_deref_mut() {
                    r.push((v, verdict));
                }
            };
            if s.started_this_cycle.contains(&v) {
                note(Verdict::JustStarted);
                continue;
            }
            let standing = match &standings[vj.ask.queue] {
                Some(st) => st.clone(),
                None => self.standing(vj.ask.queue),
            };
            let (place, sides) = match standing {
                Standing::Own => (Place::Own, None),
                Standing::Anywhere => (Place::Anywhere, None),
                Standing::Other(_) if !others && !recording => continue,
                Standing::Other(sides) => (Place::Other, Some(sides)),
                Standing::WithinGuarantee(queue) => {
                    note(Verdict::WithinGuarantee { queue });
                    continue;
                }
            };
            // A job of another queue is taken only if it holds something needed that its
            // side borrows.
            if let Some(sd) = &sides
                && !self.frees_borrowed(v, sd)
            {
                note(Verdict::WithinGuarantee { queue: vj.ask.queue });
                continue;
            }
            // The `_after` fields of the victim's queues count it evicted.
            let whole = self.judge(&mut view, &mut after, &claimant_rec, v, &vj.holding.charged, place, cost_rule);
            // An elastic gang above its minimum may give up replicas instead: each a
            // candidate of its own, judged with only it gone, at its share of the job's
            // cost — allowed or not whatever the whole job is.
            let surplus = vj.holding.slots.len().saturating_sub(vj.ask.min_replicas.max(1) as usize);
            let parts: Vec<(usize, Judged)> = (vj.holding.slots.len() - surplus..vj.holding.slots.len())
                .rev()
                .filter_map(|k| {
                    let mut part = match reads_after {
                        true => {
                            let held = slot_demand(s, v, k);
                            self.judge(&mut view, &mut after, &claimant_rec, v, &held, place, cost_rule)
                        }
                        false => whole.clone(),
                    };
                    part.cost /= vj.holding.slots.len() as f64;
                    (part.protect.is_none() && !part.rules().is_empty()).then_some((k, part))
                })
                .collect();
            let id = |i: usize| RuleId::Victim(u16::try_from(i).unwrap_or(u16::MAX));
            let rules = whole.rules();
            let whole_allowed = whole.protect.is_none() && !rules.is_empty();
            match whole.protect {
                Some(rule) => note(Verdict::Protected { rule: id(rule) }),
                None if rules.is_empty() => note(Verdict::NoRule { place }),
                None => {
                    note(Verdict::Candidate { place, rules: rules.iter().copied().map(id).collect(), cost: whole.cost })
                }
            }
            if !whole_allowed && parts.is_empty() {
                continue;
            }
            // Share of cards a replica frees (a MIG instance counts as none: the bound does
            // not count MIG capacity).
            let gpu = match vj.ask.request {
                Request::Whole(_) | Request::Fraction(_) => vj.ask.request.milli(),
                Request::Mig(_) | Request::None => 0,
            };
            let candidate = |part: Option<usize>, j: Judged| Candidate {
                job: v,
                part,
                cost: j.cost,
                priority: vj.ask.priority,
                started_ms: vj.life.started_ms,
                preempt: j.preempt,
                reclaim: j.reclaim,
                borrow: j.borrow.into(),
                sides: sides.clone(),
                keys: j.keys.into(),
            };
            if whole_allowed {
                for slot in &vj.holding.slots {
                    let f =
                        Frees { node: slot.node, candidate: out.len(), cpu: vj.ask.cpu_milli, mem: vj.ask.mem, gpu };
                    match frees.last_mut() {
                        Some(last) if last.node == f.node && last.candidate == f.candidate => {
                            last.cpu += f.cpu;
                            last.mem += f.mem;
                            last.gpu += f.gpu;
                        }
                        _ => frees.push(f),
                    }
                }
                out.push(candidate(None, whole));
            }
            for (k, part) in parts {
                let node = vj.holding.slots[k].node;
                frees.push(Frees { node, candidate: out.len(), cpu: vj.ask.cpu_milli, mem: vj.ask.mem, gpu });
                out.push(candidate(Some(k), part));
            }
        }
        Candidates { list: out, frees, watch }
    }

    /// The rules' verdict on evicting `held` of running job `v` (where it stands by
    /// `place`) for the claimant, with the `_after` fields counting that much gone.
    #[allow(clippy::too_many_arguments)]
    fn judge(
        &self,
        view: &mut View,
        after: &mut AfterCount,
        claimant_rec: &gpol_compiler::schema::JobRec<'_>,
        v: JobId,
        held: &Amounts,
        place: Place,
        cost_rule: Option<usize>,
    ) -> Judged {
        let s = &*self.s;
        let program = &self.facts.policy.program;
        let engine = self.facts.policy.engine();
        let saved = if self.facts.victim_reads.after { after.count(s, view, v, held) } else { Vec::new() };
        let ctx = s.ctx(view);
        let vrec = s.job_rec(v);
        let holds = |i: usize| engine.victim(&ctx, i, claimant_rec, &vrec);
        let mut keys = vec![0.0; program.victim_order.len()];
        if !keys.is_empty() {
            engine.victim_keys(&ctx, claimant_rec, &vrec, &mut keys);
        }
        let every = |kind: VictimKind| -> Vec<usize> {
            (program.victims.iter().enumerate())
                .filter(|(i, r)| r.kind == kind && holds(*i).0)
                .map(|(i, _)| i)
                .collect()
        };
        let first = |kind: VictimKind| {
            (program.victims.iter().enumerate())
                .filter(|(_, r)| r.kind == kind)
                .find(|&(i, _)| holds(i).0)
                .map(|(i, _)| i)
        };
        let protect = first(VictimKind::Protect);
        let (preempt, reclaim, borrow) = match (protect, place) {
            (Some(_), _) => (None, None, Vec::new()),
            (None, Place::Own | Place::Anywhere) => (first(VictimKind::Preempt), None, Vec::new()),
            (None, Place::Other) => (None, first(VictimKind::Reclaim), every(VictimKind::Borrow)),
        };
        let cost = match preempt {
            Some(i) => holds(i).1,
            None if reclaim.is_some() || !borrow.is_empty() => cost_rule.map_or(0.0, |k| holds(k).1),
            None => 0.0,
        };
        for (q, old) in saved {
            view.queues[q] = old;
        }
        // A NaN cost is the highest.
        let cost = if cost.is_nan() { f64::INFINITY } else { cost };
        Judged { protect, preempt, reclaim, borrow, cost, keys }
    }

    /// What could give the claimant candidates where none of the leaves' jobs, as they
    /// `standings` say, is one (see [`Watch`]); `others` says whether jobs of other
    /// queues were looked at.
    fn watch(&self, standings: &[Option<Standing>], has_preempt: bool, has_cross: bool, others: bool) -> Watch {
        let quotas = &self.s.world.quotas();
        let c = &self.s.world.jobs()[self.claimant];
        let cq = c.ask.queue;
        if !others && !has_preempt {
            // Only reclaims, and the claimant's leaf cannot end within its guarantee: no
            // job anywhere is a candidate until that leaf holds less.
            let demand = jobs::replicas_demand(c, c.ask.min_replicas, None);
            let needs = self.needed.iter().map(|&r| (r, demand.get(&r).copied().unwrap_or(0))).collect();
            return Watch { within: Some((cq, needs)), ..Watch::default() };
        }
        let leaves = self.facts.victim_reads.leaves;
        let mut w = Watch::default();
        for (vq, standing) in standings.iter().enumerate() {
            match standing {
                None => {}
                Some(Standing::Own | Standing::Anywhere) if has_preempt => {
                    w.starts.push(vq);
                    if leaves {
                        w.changes.extend([cq, vq]);
                    }
                }
                Some(Standing::Own | Standing::Anywhere) => {}
                Some(Standing::Other(sides)) if has_cross => {
                    w.borrowers.extend(sides.victim.last());
                    if leaves {
                        w.changes.extend([cq, vq]);
                    } else if !others {
                        w.changes.push(cq);
                    }
                }
                Some(Standing::WithinGuarantee(_)) if has_cross => {
                    let top = quotas.common_ancestor(cq, vq);
                    w.borrowers.extend(quotas.path_below(vq, top).last());
                }
                Some(Standing::Other(_) | Standing::WithinGuarantee(_)) => {}
            }
        }
        w
    }

    /// Whether the rule that lets this attempt take candidate `i` still allows it on the
    /// model as it stands (earlier victims gone): rules that read queue or cluster state
    /// are asked again at every pick, as Kueue's fair sharing compares shares afresh.
    fn still_allowed(&self, i: usize, lifted: &[usize]) -> bool {
        let (s, claimant, candidates) = (&*self.s, self.claimant, &self.candidates);
        let program = &self.facts.policy.program;
        let dynamic_rules = &self.facts.victim_reads.rules;
        let c = &candidates[i];
        let Some(rule) = c.rule(self.attempt) else { return false };
        // The two jobs' queues are all a `Leaves` rule reads: unless an earlier pick was in
        // one of them, it reads what it read when it allowed the candidate.
        let leaves = [s.world.jobs()[claimant].ask.queue, s.world.jobs()[c.job].ask.queue];
        let touched = || lifted.iter().any(|&k| leaves.contains(&s.world.jobs()[candidates[k].job].ask.queue));
        let asks = |r: usize| match dynamic_rules[r] {
            Reads::Jobs => false,
            Reads::Leaves => touched(),
            Reads::Anything => true,
        };
        let protects = || program.victims.iter().enumerate().any(|(p, r)| r.kind == VictimKind::Protect && asks(p));
        if !asks(rule) && !protects() {
            return true;
        }
        let mut view = s.view(Some(claimant));
        // What it still holds on the model: its job without the replicas already taken.
        let mut held = c.holds(s);
        if c.part.is_none() {
            for p in lifted.iter().filter_map(|&k| (candidates[k].job == c.job).then_some(candidates[k].part)).flatten()
            {
                for (r, a) in slot_demand(s, c.job, p) {
                    *held.entry(r).or_insert(0) -= a;
                }
            }
        }
        AfterCount::new(s, claimant).count(s, &mut view, c.job, &held);
        let ctx = s.ctx(&view);
        let engine = self.facts.policy.engine();
        let ok = engine.victim(&ctx, rule, &s.job_rec(claimant), &s.job_rec(c.job)).0;
        // A protect rule that reads the state may veto now.
        ok && !program.victims.iter().enumerate().any(|(p, r)| {
            r.kind == VictimKind::Protect
                && dynamic_rules[p] != Reads::Jobs
                && engine.victim(&ctx, p, &s.job_rec(claimant), &s.job_rec(c.job)).0
        })
    }

    /// Where the jobs of queue `vq` stand as victims for the claimant.
    fn standing(&self, vq: QueueId) -> Standing {
        let quotas = &self.s.world.quotas();
        let cq = self.s.world.jobs()[self.claimant].ask.queue;
        if vq == cq {
            return Standing::Own;
        }
        if self.needed.is_empty() {
            return Standing::Anywhere;
        }
        let top = quotas.common_ancestor(cq, vq);
        let victim = quotas.path_below(vq, top);
        if let Some(&q) = victim.iter().find(|&&q| !self.borrows(q)) {
            return Standing::WithinGuarantee(q);
        }
        if victim.is_empty() {
            return Standing::WithinGuarantee(vq);
        }
        Standing::Other(Rc::new(Sides { victim, claimant: quotas.path_below(cq, top) }))
    }

    /// Whether job `v` of another queue holds some needed resource that every queue of its
    /// side borrows now: taking it then lowers that borrowing (which is also why reclaim
    /// cannot cycle).
    fn frees_borrowed(&self, v: JobId, sides: &Sides) -> bool {
        let quotas = &self.s.world.quotas();
        let charged = &self.s.world.jobs()[v].holding.charged;
        self.needed.iter().any(|&r| {
            charged.get(&r).is_some_and(|&a| a > 0)
                && sides.victim.iter().all(|&q| {
                    let queue = &quotas.queues[q];
                    queue.get(&queue.load.alloc, r) > queue.get(&queue.quota.guarantee, r)
                })
        })
    }

    /// Whether queue `q` holds more than its guarantee of something the claimant needs.
    fn borrows(&self, q: QueueId) -> bool {
        let queue = &self.s.world.quotas().queues[q];
        self.needed.iter().any(|&r| queue.get(&queue.load.alloc, r) > queue.get(&queue.quota.guarantee, r))
    }

    /// Whether the claimant's leaf could end within its guarantee of everything needed,
    /// with its minimum replicas admitted and every own-queue candidate gone (or, before
    /// the candidates are known, every own-queue job a preempt rule might take).
    fn leaf_could_end_within(&self, candidates: Option<&[Candidate]>) -> bool {
        let jobs = &self.s.world.jobs();
        let c = &jobs[self.claimant];
        let demand = jobs::replicas_demand(c, c.ask.min_replicas, None);
        let leaf = &self.s.world.quotas().queues[c.ask.queue];
        let has_preempt = self.facts.policy.program.victims.iter().any(|r| r.kind == VictimKind::Preempt);
        self.needed.iter().all(|&r| {
            // A leaf holds only its own jobs: all of them gone leaves nothing.
            let own: i64 = match candidates {
                None if has_preempt => leaf.get(&leaf.load.alloc, r),
                None => 0,
                Some(list) => list
                    .iter()
                    .filter(|k| k.preempt.is_some() && jobs[k.job].ask.queue == c.ask.queue)
                    .map(|k| jobs[k.job].holding.charged.get(&r).copied().unwrap_or(0))
                    .sum(),
            };
            leaf.get(&leaf.load.alloc, r) - own + demand.get(&r).copied().unwrap_or(0)
                <= leaf.get(&leaf.quota.guarantee, r)
        })
    }

    /// Whether the claimant's side of `sides`, with `replicas` of the claimant admitted,
    /// holds no more than its guarantee of anything needed.
    fn claimant_within(&self, sides: &Sides, replicas: usize) -> bool {
        let demand = jobs::replicas_demand(&self.s.world.jobs()[self.claimant], replicas as u32, None);
        sides.claimant.iter().all(|&q| {
            let queue = &self.s.world.quotas().queues[q];
            self.needed.iter().all(|&r| {
                queue.get(&queue.load.alloc, r) + demand.get(&r).copied().unwrap_or(0)
                    <= queue.get(&queue.quota.guarantee, r)
            })
        })
    }

    /// Whether the claimant may start with `lifted` gone, as far as where it ends in the
    /// tree goes: a reclaim leaves its side within its guarantee of what it needs; a
    /// victim of another queue taken while it borrows needs a `borrow` rule, one taken
    /// while it does not a `reclaim` rule.
    fn ends_well(&self, lifted: &[usize], replicas: usize) -> bool {
        lifted.iter().all(|&i| {
            let c = &self.candidates[i];
            let Some(sides) = &c.sides else { return true };
            match self.attempt {
                Attempt::Reclaim => self.claimant_within(sides, replicas),
                Attempt::Borrow(_) => c.reclaim.is_some() || !self.claimant_within(sides, replicas),
            }
        })
    }

    /// Where the claimant starts with `lifted` gone (on one of `among`, if given), if the
    /// quota admits it, it fits, and it ends where the attempt allows.
    fn starts(&self, lifted: &[usize], among: Option<&[NodeId]>) -> Option<Vec<NodeId>> {
        self.s.quota_replicas(self.claimant).ok()?;
        let replicas = self.s.place(self.claimant, among).ok()?;
        self.ends_well(lifted, replicas.len()).then_some(replicas)
    }

    /// Whether the quota would admit the claimant were every candidate gone: if not, no
    /// set of them lets it start anywhere, and nothing need be tried. Quota only ever
    /// admits more as usage falls, so this is a necessary condition.
    fn quota_could_admit(&mut self) -> bool {
        let s = &mut *self.s;
        if s.quota_replicas(self.claimant).is_ok() {
            return true;
        }
        // Each job once (its replicas are candidates beside it).
        let mut jobs: Vec<JobId> = self.candidates.iter().map(|c| c.job).collect();
        jobs.sort_unstable();
        jobs.dedup();
        for &job in &jobs {
            s.world.charge_held(job, -1);
        }
        let admits = s.quota_replicas(self.claimant).is_ok();
        for &job in jobs.iter().rev() {
            s.world.charge_held(job, 1);
        }
        admits
    }

    /// Evicts candidate `i` on trial if it may still be taken: a job of another queue
    /// only while every queue of its side borrows something needed. Records it in
    /// `lifted`.
    fn try_lift(&mut self, i: usize, lifted: &mut Vec<usize>) -> bool {
        let c = &self.candidates[i];
        if lifted.contains(&i) {
            return false;
        }
        if let Some(sides) = &c.sides
            && !self.frees_borrowed(c.job, sides)
        {
            return false;
        }
        if !lifted.is_empty() && !self.still_allowed(i, lifted) {
            return false;
        }
        let candidates = &self.candidates;
        let same_job = |k: &usize| candidates[*k].job == c.job;
        match c.part {
            // Its whole job is gone already.
            Some(_) if lifted.iter().any(|k| same_job(k) && candidates[*k].part.is_none()) => return false,
            Some(_) => {}
            // The whole job goes: the replicas of it taken so far come back first.
            None => {
                let parts: Vec<usize> = lifted.iter().copied().filter(same_job).collect();
                for &k in parts.iter().rev() {
                    candidates[k].trial(self.s, false);
                }
                lifted.retain(|k| !parts.contains(k));
            }
        }
        c.trial(self.s, true);
        lifted.push(i);
        true
    }

    /// The reverse pass: gives back, last taken first, every victim the claimant can
    /// start without; then undoes the trial. Returns the set that is needed.
    fn reverse_pass(&mut self, mut lifted: Vec<usize>, mut replicas: Vec<NodeId>, among: Option<&[NodeId]>) -> Found {
        let mut needed: Vec<usize> = Vec::new();
        while let Some(i) = lifted.pop() {
            self.candidates[i].trial(self.s, false);
            let still: Vec<usize> = lifted.iter().chain(&needed).copied().collect();
            match self.starts(&still, among) {
                Some(r) => replicas = r,
                None => {
                    self.candidates[i].trial(self.s, true);
                    needed.push(i);
                }
            }
        }
        let claimant_within = needed
            .iter()
            .filter_map(|&i| self.candidates[i].sides.as_deref())
            .all(|sides| self.claimant_within(sides, replicas.len()));
        for &i in needed.iter().rev() {
            self.candidates[i].trial(self.s, false);
        }
        needed.reverse();
        let cost = needed.iter().map(|&i| self.candidates[i].cost).sum();
        Found { cost, victims: needed, replicas, claimant_within }
    }

    /// Gives back every candidate in `lifted`, last taken first.
    fn undo(&mut self, lifted: &[usize]) {
        for &i in lifted.iter().rev() {
            self.candidates[i].trial(self.s, false);
        }
    }

    /// A single-node claimant: each node searched on its own, cheapest lower bound first.
    fn search_nodes(&mut self, mut frees: Vec<Frees>) -> Option<Found> {
        let claimant = self.claimant;
        // Each node's candidates in greedy order.
        frees.sort_unstable_by_key(|f| f.node);
        for run in frees.chunk_by_mut(|a, b| a.node == b.node) {
            run.sort_unstable_by(|a, b| {
                greedy(self.order(), &self.candidates[a.candidate], &self.candidates[b.candidate])
            });
        }
        let mut by_node: Vec<(NodeId, &[Frees])> = Vec::new();
        for run in frees.chunk_by(|a, b| a.node == b.node) {
            by_node.push((run[0].node, run));
        }
        // A node the claimant could use at all.
        let usable = |s: &Scheduler, n: NodeId| {
            let (node, j) = (&s.world.cluster().nodes[n], &s.world.jobs()[claimant]);
            node.up
                && (j.ask.models.is_empty() || j.ask.models.contains(&node.model))
                && !s.reserved_for_other(n, claimant)
                && fit::could_ever_fit(node, j)
        };
        let mut global = Global::default();
        // Where the claimant fits untouched, only the quota can need victims, and the
        // same ones on every such node; if all of them would not do, only nodes with
        // victims of their own are worth a look.
        let fits_untouched_works = self.s.quota_replicas(claimant).is_ok() || {
            let mut lifted = Vec::new();
            let works = self.lift_for_quota(&mut global, &mut lifted);
            self.undo(&lifted);
            global.quota_fails_untouched = !works;
            works
        };
        // Every node once, with its victims if it has any (both lists are in node order).
        let mut runs = by_node.iter().peekable();
        let mut order: Vec<(f64, NodeId)> = (0..self.s.world.cluster().nodes.len())
            .filter_map(|n| {
                let local = runs.next_if(|(m, _)| *m == n).map_or(&[][..], |(_, run)| *run);
                if local.is_empty() && !fits_untouched_works {
                    return None;
                }
                Some((self.lower_bound(n, local)?, n))
            })
            .collect();
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Lower bounds are only bounds when no cost is negative.
        let prune = self.candidates.iter().all(|c| c.cost >= 0.0);
        let mut best: Option<(Found, NodeId)> = None;
        for (bound, n) in order {
            if prune && best.as_ref().is_some_and(|(b, _)| bound > b.cost) {
                break;
            }
            if !usable(self.s, n) {
                continue;
            }
            let local: Vec<usize> = by_node
                .binary_search_by_key(&n, |(node, _)| *node)
                .map_or_else(|_| Vec::new(), |k| by_node[k].1.iter().map(|f| f.candidate).collect());
            if let Some(found) = self.search_node(n, &local, &mut global) {
                let better = best.as_ref().is_none_or(|(b, bn)| {
                    found.cost.total_cmp(&b.cost).then(found.victims.len().cmp(&b.victims.len())).then(n.cmp(bn))
                        == Ordering::Less
                });
                if better {
                    best = Some((found, n));
                }
            }
        }
        best.map(|(f, _)| f)
    }

    /// The cost of the cheapest victims on node `n` (`local`, what each frees there)
    /// without which the claimant could not fit by free amounts alone; `None` if even all
    /// of them would not do.
    fn lower_bound(&self, n: NodeId, local: &[Frees]) -> Option<f64> {
        let j = &self.s.world.jobs()[self.claimant];
        // The node's record has its free amounts at hand (exact in f64).
        let rec = &self.s.node_records()[n];
        let need_gpu = match j.ask.request {
            Request::Mig(_) | Request::None => 0,
            r => r.milli(),
        } as f64;
        let (mut cpu, mut mem, mut gpu) = (rec.cpu_free * 1000.0, rec.mem_free, rec.free_gpu * 1000.0);
        let enough =
            |cpu: f64, mem: f64, gpu: f64| cpu >= j.ask.cpu_milli as f64 && mem >= j.ask.mem as f64 && gpu >= need_gpu;
        let mut cost = 0.0;
        if enough(cpu, mem, gpu) {
            return Some(cost);
        }
        for f in local {
            cpu += f.cpu as f64;
            mem += f.mem as f64;
            gpu += f.gpu as f64;
            cost += self.candidates[f.candidate].cost;
            if enough(cpu, mem, gpu) {
                return Some(cost);
            }
        }
        None
    }

    /// Victims that let the claimant start on node `n`: the node's own victims until it
    /// fits there, then victims anywhere until the quota admits it, then more of the
    /// node's own until it starts; then the reverse pass.
    fn search_node(&mut self, n: NodeId, local: &[usize], global: &mut Global) -> Option<Found> {
        let claimant = self.claimant;
        let mut lifted: Vec<usize> = Vec::new();
        let mut next_local = Picker::new(local.to_vec());
        let fits_here = |s: &Scheduler| fit::fits(&s.world.cluster().nodes[n], &s.world.jobs()[claimant]);
        while !fits_here(self.s) {
            let Some(i) = self.pick(&mut next_local) else {
                self.undo(&lifted);
                return None;
            };
            self.try_lift(i, &mut lifted);
        }
        if self.s.quota_replicas(claimant).is_err() {
            // From the untouched state, this pass is the same on every node; once it has
            // failed to satisfy the quota, it tried every candidate, so no node where the
            // claimant fits untouched can do better.
            if lifted.is_empty() && global.quota_fails_untouched {
                return None;
            }
            self.lift_for_quota(global, &mut lifted);
        }
        let replicas = loop {
            if let Some(r) = self.starts(&lifted, Some(&[n])) {
                break r;
            }
            match self.pick(&mut next_local) {
                Some(i) => {
                    self.try_lift(i, &mut lifted);
                }
                None => {
                    self.undo(&lifted);
                    return None;
                }
            }
        };
        Some(self.reverse_pass(lifted, replicas, Some(&[n])))
    }

    /// Lifts candidates in greedy order (as they may still be taken) until the quota
    /// admits the claimant; whether it does.
    fn lift_for_quota(&mut self, global: &mut Global, lifted: &mut Vec<usize>) -> bool {
        let order = global.order.get_or_insert_with(|| greedy_order(self.order(), &self.candidates));
        if self.dynamic() {
            let mut picker = Picker::new(order.clone());
            while let Some(i) = self.pick(&mut picker) {
                if self.try_lift(i, lifted) && self.s.quota_replicas(self.claimant).is_ok() {
                    return true;
                }
            }
        } else {
            for &i in order.iter() {
                if self.try_lift(i, lifted) && self.s.quota_replicas(self.claimant).is_ok() {
                    return true;
                }
            }
        }
        self.s.quota_replicas(self.claimant).is_ok()
    }

    /// The next candidate of `picker`'s pool in victim order (see [`Picker`]).
    fn pick(&self, picker: &mut Picker) -> Option<usize> {
        let rest = picker.pool.get(picker.next..)?;
        if self.dynamic() && rest.len() > 1 {
            let s = &*self.s;
            let claimant_rec = s.job_rec(self.claimant);
            let mut view = s.view(Some(self.claimant));
            let engine = self.facts.policy.engine();
            let reads_after = self.facts.victim_reads.after;
            let mut after = AfterCount::new(s, self.claimant);
            let keyed: Vec<(usize, Candidate)> = rest
                .iter()
                .enumerate()
                .map(|(at, &i)| {
                    let c = &self.candidates[i];
                    let held = c.holds(s);
                    let saved = if reads_after { after.count(s, &mut view, c.job, &held) } else { Vec::new() };
                    let mut keys = vec![0.0; self.order().len()];
                    engine.victim_keys(&s.ctx(&view), &claimant_rec, &s.job_rec(c.job), &mut keys);
                    for (q, old) in saved {
                        view.queues[q] = old;
                    }
                    (at, Candidate { keys: keys.into(), ..c.clone() })
                })
                .collect();
            if let Some((at, _)) = keyed.iter().min_by(|(_, a), (_, b)| greedy(self.order(), a, b)) {
                picker.pool.swap(picker.next, picker.next + at);
            }
        }
        let i = picker.pool.get(picker.next).copied();
        picker.next += 1;
        i
    }

    /// A gang claimant: victims anywhere, cheapest first, until the gang can start.
    fn search_all(&mut self) -> Option<Found> {
        let claimant = self.claimant;
        let mut lifted: Vec<usize> = Vec::new();
        let mut picker = Picker::new(greedy_order(self.order(), &self.candidates));
        while let Some(i) = self.pick(&mut picker) {
            if !self.try_lift(i, &mut lifted) || self.s.quota_replicas(claimant).is_err() || !self.room_for() {
                continue;
            }
            if let Some(replicas) = self.starts(&lifted, None) {
                return Some(self.reverse_pass(lifted, replicas, None));
            }
        }
        self.undo(&lifted);
        None
    }

    /// Whether the nodes have room for the claimant's minimum replicas (before filters
    /// and topology): a cheap test before a full placement.
    fn room_for(&self) -> bool {
        let j = &self.s.world.jobs()[self.claimant];
        let room: u64 = self
            .s
            .world
            .cluster()
            .nodes
            .iter()
            .filter(|n| j.ask.models.is_empty() || j.ask.models.contains(&n.model))
            .map(|n| u64::from(fit::capacity(n, j)))
            .sum();
        room >= u64::from(j.ask.min_replicas)
    }
}

impl Candidate {
    /// What it holds: its job's charge, or its one replica's.
    fn holds(&self, s: &Scheduler) -> Amounts {
        match self.part {
            None => s.world.jobs()[self.job].holding.charged.clone(),
            Some(k) => slot_demand(s, self.job, k),
        }
    }

    /// Takes it off the model on trial (`take`: the whole job, or its one replica), or
    /// gives it back; `lift` and `restore` are exact inverses.
    fn trial(&self, s: &mut Scheduler, take: bool) {
        match (self.part, take) {
            (None, true) => s.world.lift(self.job),
            (None, false) => s.world.restore(self.job),
            (Some(k), _) => {
                let demand = slot_demand(s, self.job, k);
                if take { s.world.lift_slot(self.job, k, &demand) } else { s.world.restore_slot(self.job, k, &demand) }
            }
        }
    }
}

/// What the replica in slot `k` of a running job is charged.
fn slot_demand(s: &Scheduler, job: JobId, k: usize) -> Amounts {
    let model = s.world.cluster().nodes[s.world.jobs()[job].holding.slots[k].node].model;
    jobs::placement_demand(&s.world.jobs()[job], &[model])
}

impl Candidates {
    /// The candidates an attempt may take (those of other queues only if `others`), and
    /// what each frees, re-indexed.
    fn for_attempt(&self, attempt: Attempt, others: bool) -> (Vec<Candidate>, Vec<Frees>) {
        let mut index = vec![usize::MAX; self.list.len()];
        let mut list = Vec::with_capacity(self.list.len());
        for (i, c) in self.list.iter().enumerate() {
            if c.rule(attempt).is_some() && (others || c.sides.is_none()) {
                index[i] = list.len();
                list.push(c.clone());
            }
        }
        let frees = self
            .frees
            .iter()
            .filter(|f| index[f.candidate] != usize::MAX)
            .map(|f| Frees { candidate: index[f.candidate], ..f.clone() })
            .collect();
        (list, frees)
    }
}

/// Counts a victim evicted (and the claimant admitted) in the `_after` fields of a view's
/// queues. What the claimant takes and the cluster's totals are worked out once, and the
/// records once per queue and amount: many candidates share them, and with `_after`
/// fields read this runs for every candidate of every search.
struct AfterCount {
    claimant_queue: QueueId,
    demand: Amounts,
    totals: Amounts,
    /// The victim's queues' records with it evicted, by its leaf and what it holds, as of
    /// the view they were computed over (one model state: the memo lives no longer).
    memo: HashMap<(QueueId, [i64; 3]), QueueRecs>,
}

/// Queue records by queue.
type QueueRecs = Rc<[(QueueId, QueueRec)]>;

impl AfterCount {
    /// A counter for `claimant`'s search.
    fn new(s: &Scheduler, claimant: JobId) -> AfterCount {
        AfterCount {
            claimant_queue: s.world.jobs()[claimant].ask.queue,
            demand: jobs::demand(&s.world.jobs()[claimant], None),
            totals: s.totals(),
            memo: HashMap::new(),
        }
    }

    /// Counts `held` of `victim` evicted in `view`; returns the records it replaced.
    fn count(&mut self, s: &Scheduler, view: &mut View, victim: JobId, held: &Amounts) -> Vec<(QueueId, QueueRec)> {
        let vj = &s.world.jobs()[victim];
        let amounts = [Res::Gpu, Res::Cpu, Res::Mem].map(|r| held.get(&r).copied().unwrap_or(0));
        let recs = self
            .memo
            .entry((vj.ask.queue, amounts))
            .or_insert_with(|| {
                let changes = [(self.claimant_queue, &self.demand, 1), (vj.ask.queue, held, -1)];
                s.world
                    .quotas()
                    .path(vj.ask.queue)
                    .map(|q| {
                        let mut rec = view.queues[q];
                        model_records::apply_after(s.world.quotas(), &self.totals, q, &changes, &mut rec);
                        (q, rec)
                    })
                    .collect()
            })
            .clone();
        recs.iter().map(|&(q, rec)| (q, std::mem::replace(&mut view.queues[q], rec))).collect()
    }
}
