//! Preemption and reclaim (decision D6): one victim search for a job (the claimant) that
//! cannot start as things are.
//!
//! Candidates are running jobs tagged by where they run: in the claimant's own leaf queue
//! (*preempt*), or in a queue that is borrowing what the claimant needs (*reclaim*, and
//! *preempt*). A candidate must pass the `when` of a rule of its kind. Whatever the rules
//! say, taking from another queue requires that the claimant's side stays within its
//! guarantee once the claimant is admitted, and never takes a queue below its guarantee
//! in what it borrows; so two queues can never take from each other back and forth.
//!
//! Victims are whole jobs, taken cheapest first until the claimant would start, then a
//! reverse pass gives back those not needed. Evictions are tried for real on the model
//! (`lift` and `restore` are exact inverses), so the placement that justifies them is the
//! one the claimant gets. For a single-node claimant each node is searched on its own,
//! in order of a lower bound on its cost, stopping once no node can beat the best found.

use crate::fit;
use crate::jobs::{JobId, QueueId, Request};
use crate::model::NodeId;
use crate::quota::{self, Res};
use crate::records;
use crate::scheduler::Scheduler;
use gpol_compiler::ir::RuleId;
use gpol_compiler::schema::Record;
use gpol_compiler::syntax::VictimKind;
use std::cmp::Ordering;
use std::rc::Rc;

/// A job to evict, the rule that allows it and what it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Victim {
    pub job: JobId,
    pub rule: RuleId,
    pub cost: f64,
}

/// What a victim search decided about one running job.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Its side of the tree (this queue) holds no more than its guarantee of what the
    /// claimant needs.
    WithinGuarantee { queue: QueueId },
    /// The claimant's side (this queue) would exceed its guarantee with the claimant.
    ClaimantOver { queue: QueueId },
    /// Evicting it would take `queue` below its guarantee of `res`.
    BelowGuarantee { queue: QueueId, res: Res },
    /// No rule of a kind that applies allows it (`reclaim`: reclaim rules applied too).
    NoRule { reclaim: bool },
    /// A candidate allowed by `rule` at `cost`; `reclaim`: it runs in a queue that
    /// borrows what the claimant needs.
    Candidate { rule: RuleId, reclaim: bool, cost: f64 },
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

/// An eligible victim and the guarantees its eviction must respect: for each queue on
/// its side that borrows a resource, that queue's guarantee of it.
struct Candidate {
    job: JobId,
    /// The allowing rule's index in the program's victim rules.
    rule: usize,
    cost: f64,
    priority: f64,
    started_ms: i64,
    guard: Guard,
}

/// For each queue on a victim's side that borrows a resource, that queue's guarantee of it.
type Guard = Rc<[(QueueId, Res, i64)]>;

/// Where the jobs of one queue stand in a victim search: the same for all of them, so it
/// is worked out once per queue rather than once per running job.
#[derive(Clone)]
enum Standing {
    /// Evictable by rules of these kinds, keeping each queue of `guard` at its guarantee.
    Open { preempt: bool, reclaim: bool, guard: Guard },
    /// The victim's side (this queue) holds no more than its guarantee of what is needed.
    WithinGuarantee(QueueId),
    /// The claimant's side (this queue) would exceed its guarantee with the claimant.
    ClaimantOver(QueueId),
}

/// The eligible victims, and what each frees on each of its nodes.
#[derive(Default)]
struct Candidates {
    list: Vec<Candidate>,
    frees: Vec<Frees>,
}

/// The order victims are taken in: cheapest first, then lowest priority, then the most
/// recently started, then the first submitted.
fn greedy(a: &Candidate, b: &Candidate) -> Ordering {
    a.cost
        .total_cmp(&b.cost)
        .then(a.priority.total_cmp(&b.priority))
        .then(b.started_ms.cmp(&a.started_ms))
        .then(a.job.cmp(&b.job))
}

/// Every candidate's index, in greedy order.
fn greedy_order(candidates: &[Candidate]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_unstable_by(|&a, &b| greedy(&candidates[a], &candidates[b]));
    order
}

/// What evicting one candidate frees on one node.
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
}

impl Scheduler {
    /// Searches for victims whose eviction lets `claimant` start now. Evictions are tried
    /// on the model and undone: nothing changes in the end.
    pub fn victim_search(&mut self, claimant: JobId) -> Option<Eviction> {
        self.search(claimant, None)
    }

    /// [`Scheduler::victim_search`], with what it decided about every running job.
    pub fn victim_search_explained(&mut self, claimant: JobId) -> VictimSearch {
        let mut considered = Vec::new();
        let eviction = self.search(claimant, Some(&mut considered));
        VictimSearch { considered, eviction }
    }

    fn search(&mut self, claimant: JobId, record: Option<&mut Vec<(JobId, Verdict)>>) -> Option<Eviction> {
        if self.policy.program.victims.is_empty() {
            return None;
        }
        let Candidates { list: candidates, frees } = self.candidates(claimant, record);
        let found = if candidates.is_empty() || !self.quota_could_admit(claimant, &candidates) {
            None
        } else if self.jobs[claimant].replicas == 1 {
            self.search_nodes(claimant, &candidates, frees)
        } else {
            self.search_all(claimant, &candidates)
        };
        found.map(|f| Eviction {
            victims: f
                .victims
                .iter()
                .map(|&i| {
                    let c = &candidates[i];
                    Victim { job: c.job, rule: RuleId::Victim(u16::try_from(c.rule).unwrap_or(u16::MAX)), cost: c.cost }
                })
                .collect(),
            replicas: f.replicas,
            cost: f.cost,
        })
    }

    /// The running jobs that may be evicted for `claimant`, cheapest first; `record`, if
    /// given, receives the verdict on every running job.
    fn candidates(&self, claimant: JobId, mut record: Option<&mut Vec<(JobId, Verdict)>>) -> Candidates {
        let c = &self.jobs[claimant];
        let program = &self.policy.program;
        let engine = self.policy.engine();
        let quotas = &self.quotas;
        let demand = quota::replicas_demand(c, c.min_replicas, None);
        // What the claimant needs that the quota tree governs.
        let needed: Vec<Res> =
            demand.iter().filter(|&(r, a)| *a > 0 && quotas.is_constrained(*r)).map(|(r, _)| *r).collect();
        let has_kind = |k: VictimKind| program.victims.iter().any(|r| r.kind == k);
        let (has_preempt, has_reclaim) = (has_kind(VictimKind::Preempt), has_kind(VictimKind::Reclaim));
        // Where each leaf's jobs stand (jobs run only in leaves). When no leaf's jobs
        // could be victims at all, nothing more is needed — unless the search is being
        // recorded job by job.
        let standings: Vec<Option<Standing>> = (0..quotas.queues.len())
            .map(|q| quotas.queues[q].children.is_empty().then(|| self.standing(claimant, q, &needed, &demand)))
            .collect();
        let evictable = |s: &Standing| matches!(s, Standing::Open { preempt, reclaim, .. } if *preempt && has_preempt || *reclaim && has_reclaim);
        if record.is_none() && !standings.iter().flatten().any(evictable) {
            return Candidates::default();
        }
        let full_demand = quota::demand(c, None);
        let reads_share_after = program.victims.iter().any(|r| {
            r.when.node.reads(Record::Queue, "share_after")
                || r.cost.as_ref().is_some_and(|b| b.node.reads(Record::Queue, "share_after"))
        });
        // A reclaim rule has no cost of its own: it takes the first preempt rule's.
        let cost_rule = program.victims.iter().position(|r| r.kind == VictimKind::Preempt && r.cost.is_some());
        let claimant_rec = self.job_rec(claimant);
        // Sized for every running job up front: growing them would copy and fault pages.
        let mut out: Vec<Candidate> = Vec::with_capacity(self.running.len());
        let mut frees: Vec<Frees> = Vec::with_capacity(self.running.len());
        let totals = self.totals();
        let mut view = self.view(Some(claimant));
        for v in self.running() {
            let vj = &self.jobs[v];
            let mut note = |verdict: Verdict| {
                if let Some(r) = record.as_deref_mut() {
                    r.push((v, verdict));
                }
            };
            let standing = match &standings[vj.queue] {
                Some(s) => s.clone(),
                None => self.standing(claimant, vj.queue, &needed, &demand),
            };
            let (preempt, reclaim, guard) = match standing {
                Standing::Open { preempt, reclaim, guard } => (preempt, reclaim, guard),
                Standing::WithinGuarantee(queue) => {
                    note(Verdict::WithinGuarantee { queue });
                    continue;
                }
                Standing::ClaimantOver(queue) => {
                    note(Verdict::ClaimantOver { queue });
                    continue;
                }
            };
            if let Some(&(queue, res, _)) = guard.iter().find(|g| !self.guard_holds(v, std::slice::from_ref(g))) {
                note(Verdict::BelowGuarantee { queue, res });
                continue;
            }
            if !(preempt && has_preempt || reclaim && has_reclaim) {
                note(Verdict::NoRule { reclaim });
                continue;
            }
            // `share_after` of the victim's queues counts it evicted.
            let saved: Vec<(QueueId, f64)> = if reads_share_after {
                let changes = [(c.queue, &full_demand, 1), (vj.queue, &vj.charged, -1)];
                quotas
                    .path(vj.queue)
                    .map(|q| {
                        let old = view.queues[q].share_after;
                        view.queues[q].share_after = records::share_after(quotas, &totals, q, &changes);
                        (q, old)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let ctx = self.ctx(&view);
            let vrec = self.job_rec(v);
            let mut allowed: Option<(usize, f64)> = None;
            for (i, rule) in program.victims.iter().enumerate() {
                let applies = match rule.kind {
                    VictimKind::Preempt => preempt,
                    VictimKind::Reclaim => reclaim,
                };
                if !applies {
                    continue;
                }
                let (ok, own_cost) = engine.victim(&ctx, i, &claimant_rec, &vrec);
                if ok {
                    let cost = match rule.kind {
                        VictimKind::Preempt => own_cost,
                        VictimKind::Reclaim => {
                            cost_rule.map_or(0.0, |k| engine.victim(&ctx, k, &claimant_rec, &vrec).1)
                        }
                    };
                    // A NaN cost is the highest.
                    let cost = if cost.is_nan() { f64::INFINITY } else { cost };
                    allowed = Some((i, cost));
                    break;
                }
            }
            for (q, old) in saved {
                view.queues[q].share_after = old;
            }
            match allowed {
                Some((rule, cost)) => {
                    let id = RuleId::Victim(u16::try_from(rule).unwrap_or(u16::MAX));
                    note(Verdict::Candidate { rule: id, reclaim, cost });
                    let vj = &self.jobs[v];
                    // Share of cards a replica frees (a MIG instance counts as none: the
                    // bound does not count MIG capacity).
                    let gpu = match vj.request {
                        Request::Whole(_) | Request::Fraction(_) => vj.request.milli(),
                        Request::Mig(_) | Request::None => 0,
                    };
                    for s in &vj.slots {
                        let f = Frees { node: s.node, candidate: out.len(), cpu: vj.cpu_milli, mem: vj.mem, gpu };
                        match frees.last_mut() {
                            Some(last) if last.node == f.node && last.candidate == f.candidate => {
                                last.cpu += f.cpu;
                                last.mem += f.mem;
                                last.gpu += f.gpu;
                            }
                            _ => frees.push(f),
                        }
                    }
                    out.push(Candidate { job: v, rule, cost, priority: vj.priority, started_ms: vj.started_ms, guard });
                }
                None => note(Verdict::NoRule { reclaim }),
            }
        }
        Candidates { list: out, frees }
    }

    /// Where the jobs of queue `vq` stand as victims for `claimant`, which needs `needed`
    /// (the resources the tree governs) of `demand`.
    fn standing(&self, claimant: JobId, vq: QueueId, needed: &[Res], demand: &quota::Amounts) -> Standing {
        let quotas = &self.quotas;
        let cq = self.jobs[claimant].queue;
        if vq == cq || needed.is_empty() {
            return Standing::Open { preempt: true, reclaim: false, guard: Rc::from([]) };
        }
        let top = quotas.common_ancestor(cq, vq);
        let victim_side = quotas.path_below(vq, top);
        let Some(&side) = victim_side.last() else {
            return Standing::WithinGuarantee(vq);
        };
        let q = &quotas.queues[side];
        if !needed.iter().any(|&r| q.get(&q.alloc, r) > q.get(&q.guarantee, r)) {
            return Standing::WithinGuarantee(side);
        }
        let over = quotas.path_below(cq, top).into_iter().find(|&p| {
            let q = &quotas.queues[p];
            needed.iter().any(|&r| q.get(&q.alloc, r) + demand.get(&r).copied().unwrap_or(0) > q.get(&q.guarantee, r))
        });
        if let Some(p) = over {
            return Standing::ClaimantOver(p);
        }
        let guard: Vec<(QueueId, Res, i64)> = victim_side
            .iter()
            .flat_map(|&p| {
                let q = &quotas.queues[p];
                q.alloc
                    .iter()
                    .filter(|&(r, a)| quotas.is_constrained(*r) && *a > q.get(&q.guarantee, *r))
                    .map(move |(r, _)| (p, *r, q.get(&q.guarantee, *r)))
            })
            .collect();
        Standing::Open { preempt: true, reclaim: true, guard: guard.into() }
    }

    /// Whether the quota would admit the claimant were every candidate gone (guards
    /// aside): if not, no set of them lets it start anywhere, and nothing need be tried.
    /// Quota only ever admits more as usage falls, so this is a necessary condition.
    fn quota_could_admit(&mut self, claimant: JobId, candidates: &[Candidate]) -> bool {
        if self.quota_replicas(claimant).is_ok() {
            return true;
        }
        let (jobs, quotas) = (&self.jobs, &mut self.quotas);
        for c in candidates {
            let j = &jobs[c.job];
            quotas.charge(j.queue, j.user, &j.charged, -1);
        }
        let admits = self.quota_replicas(claimant).is_ok();
        let (jobs, quotas) = (&self.jobs, &mut self.quotas);
        for c in candidates.iter().rev() {
            let j = &jobs[c.job];
            quotas.charge(j.queue, j.user, &j.charged, 1);
        }
        admits
    }

    /// Whether evicting `v` now keeps every queue in `guard` at or above its guarantee.
    fn guard_holds(&self, v: JobId, guard: &[(QueueId, Res, i64)]) -> bool {
        let charged = &self.jobs[v].charged;
        guard.iter().all(|&(q, r, g)| {
            let queue = &self.quotas.queues[q];
            queue.get(&queue.alloc, r) - charged.get(&r).copied().unwrap_or(0) >= g
        })
    }

    /// Evicts candidate `i` on trial if its guard allows; records it in `lifted`.
    fn try_lift(&mut self, candidates: &[Candidate], i: usize, lifted: &mut Vec<usize>) -> bool {
        let c = &candidates[i];
        if lifted.contains(&i) || !self.guard_holds(c.job, &c.guard) {
            return false;
        }
        self.lift(c.job);
        lifted.push(i);
        true
    }

    /// The reverse pass: gives back, most expensive first, every victim the claimant can
    /// start without; then undoes the trial. Returns the set that is needed.
    fn reverse_pass(
        &mut self,
        candidates: &[Candidate],
        mut lifted: Vec<usize>,
        mut replicas: Vec<NodeId>,
        place: &dyn Fn(&Scheduler) -> Option<Vec<NodeId>>,
    ) -> Found {
        let mut needed = Vec::new();
        while let Some(i) = lifted.pop() {
            self.restore(candidates[i].job);
            match place(self) {
                Some(r) => replicas = r,
                None => {
                    self.lift(candidates[i].job);
                    needed.push(i);
                }
            }
        }
        for &i in &needed {
            self.restore(candidates[i].job);
        }
        needed.reverse();
        let cost = needed.iter().map(|&i| candidates[i].cost).sum();
        Found { cost, victims: needed, replicas }
    }

    fn undo(&mut self, candidates: &[Candidate], lifted: &[usize]) {
        for &i in lifted.iter().rev() {
            self.restore(candidates[i].job);
        }
    }

    /// A single-node claimant: each node searched on its own, cheapest lower bound first.
    fn search_nodes(&mut self, claimant: JobId, candidates: &[Candidate], mut frees: Vec<Frees>) -> Option<Found> {
        // Each node's candidates in greedy order.
        frees.sort_unstable_by_key(|f| f.node);
        for run in frees.chunk_by_mut(|a, b| a.node == b.node) {
            run.sort_unstable_by(|a, b| greedy(&candidates[a.candidate], &candidates[b.candidate]));
        }
        let mut by_node: Vec<(NodeId, &[Frees])> = Vec::new();
        for run in frees.chunk_by(|a, b| a.node == b.node) {
            by_node.push((run[0].node, run));
        }
        // A node the claimant could use at all.
        let usable = |s: &Scheduler, n: NodeId| {
            let (node, j) = (&s.cluster.nodes[n], &s.jobs[claimant]);
            node.up
                && (j.models.is_empty() || j.models.contains(&node.model))
                && !s.reserved_for_other(n, claimant)
                && fit::could_ever_fit(node, j)
        };
        let mut global = Global::default();
        // Where the claimant fits untouched, only the quota can need victims, and the
        // same ones on every such node; if all of them would not do, only nodes with
        // victims of their own are worth a look.
        let fits_untouched_works = self.quota_replicas(claimant).is_ok() || {
            let mut lifted = Vec::new();
            let works = self.lift_for_quota(claimant, candidates, &mut global, &mut lifted);
            self.undo(candidates, &lifted);
            global.quota_fails_untouched = !works;
            works
        };
        // Every node once, with its victims if it has any (both lists are in node order).
        let mut runs = by_node.iter().peekable();
        let mut order: Vec<(f64, NodeId)> = (0..self.cluster.nodes.len())
            .filter_map(|n| {
                let local = runs.next_if(|(m, _)| *m == n).map_or(&[][..], |(_, run)| *run);
                if local.is_empty() && !fits_untouched_works {
                    return None;
                }
                Some((self.lower_bound(claimant, n, local, candidates)?, n))
            })
            .collect();
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        // Lower bounds are only bounds when no cost is negative.
        let prune = candidates.iter().all(|c| c.cost >= 0.0);
        let mut best: Option<(Found, NodeId)> = None;
        for (bound, n) in order {
            if prune && best.as_ref().is_some_and(|(b, _)| bound > b.cost) {
                break;
            }
            if !usable(self, n) {
                continue;
            }
            let local: Vec<usize> = by_node
                .binary_search_by_key(&n, |(node, _)| *node)
                .map_or_else(|_| Vec::new(), |k| by_node[k].1.iter().map(|f| f.candidate).collect());
            if let Some(found) = self.search_node(claimant, n, &local, candidates, &mut global) {
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
    fn lower_bound(&self, claimant: JobId, n: NodeId, local: &[Frees], candidates: &[Candidate]) -> Option<f64> {
        let j = &self.jobs[claimant];
        // The node's record has its free amounts at hand (exact in f64).
        let rec = &self.node_records()[n];
        let need_gpu = match j.request {
            Request::Mig(_) | Request::None => 0,
            r => r.milli(),
        } as f64;
        let (mut cpu, mut mem, mut gpu) = (rec.cpu_free * 1000.0, rec.mem_free, rec.free_gpu * 1000.0);
        let enough = |cpu: f64, mem: f64, gpu: f64| cpu >= j.cpu_milli as f64 && mem >= j.mem as f64 && gpu >= need_gpu;
        let mut cost = 0.0;
        if enough(cpu, mem, gpu) {
            return Some(cost);
        }
        for f in local {
            cpu += f.cpu as f64;
            mem += f.mem as f64;
            gpu += f.gpu as f64;
            cost += candidates[f.candidate].cost;
            if enough(cpu, mem, gpu) {
                return Some(cost);
            }
        }
        None
    }

    /// Victims that let the claimant start on node `n`: the node's own victims until it
    /// fits there, then victims anywhere until the quota admits it, then more of the
    /// node's own until the filters pass; then the reverse pass.
    fn search_node(
        &mut self,
        claimant: JobId,
        n: NodeId,
        local: &[usize],
        candidates: &[Candidate],
        global: &mut Global,
    ) -> Option<Found> {
        let place = |s: &Scheduler| s.place(claimant, Some(&[n])).ok();
        let mut lifted: Vec<usize> = Vec::new();
        let mut next_local = local.iter().copied();
        let fits_here = |s: &Scheduler| fit::fits(&s.cluster.nodes[n], &s.jobs[claimant]);
        while !fits_here(self) {
            let Some(i) = next_local.next() else {
                self.undo(candidates, &lifted);
                return None;
            };
            self.try_lift(candidates, i, &mut lifted);
        }
        if self.quota_replicas(claimant).is_err() {
            // From the untouched state, this pass is the same on every node; once it has
            // failed to satisfy the quota, it tried every candidate, so no node where the
            // claimant fits untouched can do better.
            if lifted.is_empty() && global.quota_fails_untouched {
                return None;
            }
            self.lift_for_quota(claimant, candidates, global, &mut lifted);
        }
        let replicas = loop {
            if self.quota_replicas(claimant).is_ok()
                && let Some(r) = place(self)
            {
                break r;
            }
            match next_local.next() {
                Some(i) => {
                    self.try_lift(candidates, i, &mut lifted);
                }
                None => {
                    self.undo(candidates, &lifted);
                    return None;
                }
            }
        };
        Some(self.reverse_pass(candidates, lifted, replicas, &place))
    }

    /// Lifts candidates in greedy order (as their guards allow) until the quota admits
    /// the claimant; whether it does.
    fn lift_for_quota(
        &mut self,
        claimant: JobId,
        candidates: &[Candidate],
        global: &mut Global,
        lifted: &mut Vec<usize>,
    ) -> bool {
        for &i in global.order.get_or_insert_with(|| greedy_order(candidates)).iter() {
            if self.try_lift(candidates, i, lifted) && self.quota_replicas(claimant).is_ok() {
                return true;
            }
        }
        self.quota_replicas(claimant).is_ok()
    }

    /// A gang claimant: victims anywhere, cheapest first, until the gang can be placed.
    fn search_all(&mut self, claimant: JobId, candidates: &[Candidate]) -> Option<Found> {
        let place = |s: &Scheduler| s.place(claimant, None).ok();
        let mut lifted: Vec<usize> = Vec::new();
        for i in greedy_order(candidates) {
            if !self.try_lift(candidates, i, &mut lifted)
                || self.quota_replicas(claimant).is_err()
                || !self.room_for(claimant)
            {
                continue;
            }
            if let Some(replicas) = place(self) {
                return Some(self.reverse_pass(candidates, lifted, replicas, &place));
            }
        }
        self.undo(candidates, &lifted);
        None
    }

    /// Whether the nodes have room for the claimant's minimum replicas (before filters
    /// and topology): a cheap test before a full placement.
    fn room_for(&self, claimant: JobId) -> bool {
        let j = &self.jobs[claimant];
        let room: u64 = self
            .cluster
            .nodes
            .iter()
            .filter(|n| j.models.is_empty() || j.models.contains(&n.model))
            .map(|n| u64::from(fit::capacity(n, j)))
            .sum();
        room >= u64::from(j.min_replicas)
    }
}
