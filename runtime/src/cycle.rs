//! The scheduling cycle (decisions D3, D4, D9): queues are served in `queue_order`, level
//! by level down the tree; inside a leaf, jobs in `job_order`; each job is admitted,
//! checked against its quota, filtered and scored over every node, and bound to the best
//! node. Orders are re-evaluated after every admission. Gangs, preemption and reclaim
//! come with the second part of the core; a multi-replica job waits with reason `gang`.

use crate::fit;
use crate::jobs::{Job, JobId, QueueId, Reason, Request, Shape, Slot, State};
use crate::model::{Cluster, NodeId, NodeSpec, SpecError};
use crate::quota::{self, Amounts, Quotas, Res};
use crate::records;
use crate::symbols::Symbols;
use gpol_compiler::engine::{CompiledPolicy, MAX_TIERS, NodeResult};
use gpol_compiler::hir::Queueing;
use gpol_compiler::interp::Ctx;
use gpol_compiler::ir::OrderKey;
use gpol_compiler::schema::{ClusterRec, DomainRec, JobRec, List, NodeTable, QueueRec, Sym};
use gpol_compiler::syntax::Direction;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};

/// What a job asks for, before it is a `Job`.
#[derive(Clone, Debug)]
pub struct JobSpec {
    pub name: String,
    pub queue: QueueId,
    pub user: String,
    pub priority_class: Option<String>,
    pub priority: f64,
    pub request: Request,
    pub replicas: u32,
    pub min_replicas: u32,
    pub gpu_mem: u64,
    pub cpu_milli: u64,
    pub mem: u64,
    pub models: Vec<String>,
    pub bursty: bool,
    pub latency_critical: bool,
    pub preemptible: bool,
    pub duration_ms: Option<u64>,
    pub utilization: f64,
    pub labels: Vec<(String, String)>,
}

/// Something that happened, in order: what tests and `explain` read.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Submitted {
        job: JobId,
        at_ms: u64,
    },
    Placed {
        job: JobId,
        nodes: Vec<NodeId>,
        at_ms: u64,
    },
    Rejected {
        job: JobId,
        rule: String,
        at_ms: u64,
    },
    Finished {
        job: JobId,
        at_ms: u64,
    },
    /// A running job lost its node and went back to waiting.
    Requeued {
        job: JobId,
        node: NodeId,
        at_ms: u64,
    },
}

/// The runtime: a cluster, its quota tree and its jobs, scheduled by a compiled policy.
pub struct Scheduler {
    pub policy: CompiledPolicy,
    pub syms: Symbols,
    pub cluster: Cluster,
    pub quotas: Quotas,
    pub jobs: Vec<Job>,
    pub now_ms: u64,
    pub log: Vec<Event>,
    /// Placement attempts so far (each one a filter+score pass over the nodes).
    pub attempts: u64,
    /// The runtime symbol of each of the policy's string literals.
    literals: Vec<Sym>,
    job_label_keys: Vec<Sym>,
    node_label_keys: Vec<Sym>,
    /// Each job's label values in slot order.
    job_labels: Vec<Vec<Sym>>,
    table: NodeTable,
    domains: Vec<DomainRec>,
    /// Jobs whose last placement failed: not retried until capacity frees.
    backoff: HashSet<JobId>,
    /// Each job's shape, as an index into `shapes`.
    job_shapes: Vec<usize>,
    shapes: HashMap<Shape, usize>,
    /// Shapes no node in service can take now: their jobs wait until capacity frees.
    full: HashSet<usize>,
    /// The pending jobs of each queue, so a cycle never scans finished ones.
    waiting: Vec<BTreeSet<JobId>>,
}

/// The cluster and queue records rules read, as of one moment.
pub struct View {
    pub cluster: ClusterRec<'static>,
    pub queues: Vec<QueueRec>,
}

/// How one placement attempt ended.
enum Attempt {
    Placed,
    Waiting(Reason),
    Rejected(String),
}

impl Scheduler {
    pub fn new(policy: CompiledPolicy) -> Scheduler {
        let mut syms = Symbols::default();
        let literals = policy.program.literals.iter().map(|l| syms.intern(l)).collect();
        let job_label_keys = policy.program.job_labels.iter().map(|k| syms.intern(k)).collect();
        let node_label_keys = policy.program.node_labels.iter().map(|k| syms.intern(k)).collect();
        let quotas = Quotas::new(&policy.policy, &mut syms);
        let cluster = Cluster::new(policy.policy.levels.clone());
        let waiting = vec![BTreeSet::new(); quotas.queues.len()];
        Scheduler {
            policy,
            syms,
            cluster,
            quotas,
            jobs: Vec::new(),
            now_ms: 0,
            log: Vec::new(),
            attempts: 0,
            literals,
            job_label_keys,
            node_label_keys,
            job_labels: Vec::new(),
            table: NodeTable::default(),
            domains: Vec::new(),
            backoff: HashSet::new(),
            job_shapes: Vec::new(),
            shapes: HashMap::new(),
            full: HashSet::new(),
            waiting,
        }
    }

    /// Capacity freed up (or the quota changed): every waiting job may fit now.
    fn capacity_changed(&mut self) {
        self.backoff.clear();
        self.full.clear();
    }

    /// Changes a job's state, keeping the index of waiting jobs.
    fn set_state(&mut self, job: JobId, state: State) {
        let j = &mut self.jobs[job];
        let now_pending = matches!(state, State::Pending(_));
        if j.is_pending() != now_pending
            && let Some(set) = self.waiting.get_mut(j.queue)
        {
            if now_pending {
                set.insert(job);
            } else {
                set.remove(&job);
            }
        }
        j.state = state;
    }

    // ------------------------------------------------------------ changes

    pub fn add_node(&mut self, spec: &NodeSpec) -> Result<NodeId, SpecError> {
        let id = self.cluster.add_node(spec, &mut self.syms)?;
        let node = &self.cluster.nodes[id];
        let labels = records::label_slots(&node.labels, &self.node_label_keys);
        self.table.push(records::node_rec(node), records::node_cards(node), labels);
        // New domains get their records from the refresh, like the node's other domains.
        self.domains.resize(self.cluster.domains.len(), DomainRec::default());
        self.refresh_node(id);
        self.capacity_changed();
        Ok(id)
    }

    /// Brings node `id`'s record and its domains' records up to date.
    fn refresh_node(&mut self, id: NodeId) {
        let node = &self.cluster.nodes[id];
        self.table.set(id, records::node_rec(node));
        for (slot, c) in self.table.cards_mut(id).iter_mut().zip(records::node_cards(node)) {
            *slot = c;
        }
        for d in node.domains.iter().filter(|d| **d != u32::MAX) {
            if let Some(rec) = self.domains.get_mut(*d as usize) {
                *rec = records::domain_rec(&self.cluster.domains[*d as usize]);
            }
        }
    }

    pub fn submit(&mut self, spec: JobSpec) -> JobId {
        let id = self.jobs.len();
        let labels = spec.labels.iter().map(|(k, v)| (self.syms.intern(k), self.syms.intern(v))).collect();
        let job = Job {
            id: self.syms.intern(&spec.name),
            name: spec.name,
            user: self.syms.intern(&spec.user),
            queue: spec.queue,
            priority: spec.priority,
            priority_class: spec.priority_class.as_deref().map_or(Sym(0), |c| self.syms.intern(c)),
            request: spec.request,
            replicas: spec.replicas.max(1),
            min_replicas: spec.min_replicas.clamp(1, spec.replicas.max(1)),
            gpu_mem: spec.gpu_mem,
            cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            models: spec.models.iter().map(|m| self.syms.intern(m)).collect(),
            bursty: spec.bursty,
            latency_critical: spec.latency_critical,
            preemptible: spec.preemptible,
            submitted_ms: self.now_ms,
            waiting_since_ms: self.now_ms,
            duration_ms: spec.duration_ms,
            utilization: spec.utilization,
            labels,
            state: State::Pending(None),
            evictions: 0,
            started_ms: 0,
            checkpoint_ms: 0,
            slots: Vec::new(),
        };
        self.job_labels.push(records::label_slots(&job.labels, &self.job_label_keys));
        let next = self.shapes.len();
        self.job_shapes.push(*self.shapes.entry(job.shape()).or_insert(next));
        self.quotas.count(job.queue, 1, 0);
        if let Some(set) = self.waiting.get_mut(job.queue) {
            set.insert(id);
        }
        self.jobs.push(job);
        self.log.push(Event::Submitted { job: id, at_ms: self.now_ms });
        id
    }

    /// Places a job on the given nodes directly, as already running (a scenario's `run`):
    /// one replica per node, cards by built-in best fit, quota charged without checks.
    pub fn start_on(
        &mut self,
        job: JobId,
        nodes: &[NodeId],
        ran_ms: u64,
        since_checkpoint_ms: u64,
    ) -> Result<(), String> {
        for &n in nodes {
            let node = &self.cluster.nodes[n];
            let Some(chosen) = fit::choose(node, &self.jobs[job], None) else {
                return Err(format!("job `{}` does not fit on node `{}`", self.jobs[job].name, node.name));
            };
            let slot = fit::bind(&mut self.cluster, n, &self.jobs[job], &chosen);
            self.jobs[job].slots.push(slot);
            self.refresh_node(n);
        }
        let model = nodes.first().map(|&n| self.cluster.nodes[n].model);
        let j = &self.jobs[job];
        let demand = quota::demand(j, model);
        self.quotas.charge(j.queue, j.user, &demand, 1);
        self.quotas.count(j.queue, -1, 1);
        let start = self.now_ms.saturating_sub(ran_ms);
        self.set_state(job, State::Running);
        let j = &mut self.jobs[job];
        j.started_ms = start;
        j.waiting_since_ms = j.waiting_since_ms.min(start);
        j.submitted_ms = j.submitted_ms.min(start);
        j.checkpoint_ms = self.now_ms.saturating_sub(since_checkpoint_ms.min(ran_ms));
        self.log.push(Event::Placed { job, nodes: nodes.to_vec(), at_ms: self.now_ms });
        Ok(())
    }

    fn release(&mut self, job: JobId) {
        let slots = std::mem::take(&mut self.jobs[job].slots);
        for s in &slots {
            fit::release(&mut self.cluster, &self.jobs[job], s);
            self.refresh_node(s.node);
        }
        let model = slots.first().map(|s| self.cluster.nodes[s.node].model);
        let j = &self.jobs[job];
        let demand = quota::demand(j, model);
        self.quotas.charge(j.queue, j.user, &demand, -1);
        self.capacity_changed();
    }

    /// A running job finishes and frees what it held.
    pub fn complete(&mut self, job: JobId) {
        if self.jobs[job].state != State::Running {
            return;
        }
        self.quotas.advance_usage(self.now_ms);
        self.release(job);
        self.quotas.count(self.jobs[job].queue, 0, -1);
        self.set_state(job, State::Finished);
        self.log.push(Event::Finished { job, at_ms: self.now_ms });
    }

    /// A node fails: its jobs lose their work since the last checkpoint and wait again.
    pub fn fail_node(&mut self, node: NodeId) {
        self.quotas.advance_usage(self.now_ms);
        let victims: Vec<JobId> = (0..self.jobs.len())
            .filter(|&j| self.jobs[j].state == State::Running && self.jobs[j].slots.iter().any(|s| s.node == node))
            .collect();
        for j in victims {
            self.release(j);
            self.quotas.count(self.jobs[j].queue, 1, -1);
            self.set_state(j, State::Pending(None));
            let job = &mut self.jobs[j];
            job.evictions += 1;
            job.waiting_since_ms = self.now_ms;
            self.log.push(Event::Requeued { job: j, node, at_ms: self.now_ms });
        }
        self.cluster.set_up(node, false);
        self.refresh_node(node);
    }

    /// Changes a queue's quota; waiting jobs are tried again.
    pub fn set_quota(&mut self, q: QueueId, kind: gpol_compiler::syntax::QuotaKind, r: Res, value: Option<i64>) {
        self.quotas.set(q, kind, r, value);
        self.capacity_changed();
    }

    pub fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
        self.quotas.advance_usage(self.now_ms);
    }

    // ------------------------------------------------------------ evaluation context

    /// Capacity of the nodes in service, per resource.
    pub fn totals(&self) -> Amounts {
        let c = self.cluster.capacity;
        Amounts::from([(Res::Gpu, c.gpu_milli as i64), (Res::Cpu, c.cpu_milli as i64), (Res::Mem, c.mem as i64)])
    }

    pub fn cluster_rec(&self) -> ClusterRec<'static> {
        let res = |c: crate::model::Capacity| gpol_compiler::schema::Resources {
            gpu: records::gpus(c.gpu_milli),
            cpu: c.cpu_milli as f64 / 1000.0,
            mem: c.mem as f64,
        };
        ClusterRec {
            time: records::seconds(self.now_ms),
            nodes: self.cluster.capacity.nodes as f64,
            total: res(self.cluster.capacity),
            free: res(self.cluster.free),
            task_shapes: List::default(),
        }
    }

    /// What rules see of the cluster and the queues now; `job` is the job in scope, for
    /// its queues' `share_after`.
    pub fn view(&self, job: Option<JobId>) -> View {
        let totals = self.totals();
        let fair = self.quotas.fair_shares(totals.get(&Res::Gpu).copied().unwrap_or(0));
        let demand = job.map(|j| (self.jobs[j].queue, quota::demand(&self.jobs[j], None)));
        let queues = records::queue_recs(&self.quotas, &totals, &fair, demand.as_ref().map(|(q, d)| (*q, d)));
        View { cluster: self.cluster_rec(), queues }
    }

    /// The evaluation context for rules, over a `view`.
    pub fn ctx<'a>(&'a self, view: &'a View) -> Ctx<'a> {
        Ctx {
            cluster: &view.cluster,
            queues: &view.queues,
            domains: &self.domains,
            literals: &self.literals,
            sym_hashes: self.syms.hashes(),
            attrs: &self.policy.program.attrs,
        }
    }

    pub fn node_records(&self) -> &[gpol_compiler::schema::NodeRec<'_>] {
        self.table.records()
    }

    pub fn job_rec(&self, job: JobId) -> JobRec<'_> {
        records::job_rec(&self.jobs[job], &self.job_labels[job], self.now_ms)
    }

    // ------------------------------------------------------------ the cycle

    /// Runs one scheduling cycle: places every job that can be placed now, in order.
    /// Returns how many were placed.
    pub fn cycle(&mut self) -> usize {
        self.quotas.advance_usage(self.now_ms);
        let mut tried: HashSet<JobId> = HashSet::new();
        let mut blocked: HashSet<QueueId> = HashSet::new();
        let mut placed = 0;
        while let Some(job) = self.next_job(&tried, &blocked) {
            tried.insert(job);
            match self.attempt(job) {
                Attempt::Placed => placed += 1,
                Attempt::Rejected(rule) => {
                    self.quotas.count(self.jobs[job].queue, -1, 0);
                    self.set_state(job, State::Rejected(rule.clone()));
                    self.log.push(Event::Rejected { job, rule, at_ms: self.now_ms });
                }
                Attempt::Waiting(reason) => {
                    let leaf = self.jobs[job].queue;
                    if self.quotas.queues[leaf].queueing == Queueing::Strict {
                        blocked.insert(leaf);
                    }
                    if !matches!(reason, Reason::Rule(_)) || self.is_filter(&reason) {
                        self.backoff.insert(job);
                    }
                    if matches!(reason, Reason::Capacity) || self.is_filter(&reason) {
                        self.note_if_full(job);
                    }
                    self.set_state(job, State::Pending(Some(reason)));
                }
            }
        }
        // Jobs that did not get a turn: behind a strict queue's waiting head, or of a
        // shape no node can take.
        for (q, waiting) in self.waiting.iter().enumerate() {
            for &j in waiting.iter().filter(|j| !tried.contains(j)) {
                if blocked.contains(&q) {
                    self.jobs[j].state = State::Pending(Some(Reason::Order));
                } else if self.skipped_as_full(j) {
                    self.jobs[j].state = State::Pending(Some(Reason::Capacity));
                }
            }
        }
        placed
    }

    /// Whether a job is not tried because no node can take its shape. A job is always
    /// tried once, so it learns its own reason; one found unschedulable keeps that reason.
    fn skipped_as_full(&self, j: JobId) -> bool {
        self.full.contains(&self.job_shapes[j])
            && matches!(&self.jobs[j].state, State::Pending(Some(r)) if !matches!(r, Reason::Unschedulable(_)))
    }

    /// Marks the job's shape full if no node in service could take one replica now.
    fn note_if_full(&mut self, job: JobId) {
        let j = &self.jobs[job];
        let takes = |n: &crate::model::Node| (j.models.is_empty() || j.models.contains(&n.model)) && fit::fits(n, j);
        if !self.cluster.nodes.iter().any(takes) {
            self.full.insert(self.job_shapes[job]);
        }
    }

    fn is_filter(&self, reason: &Reason) -> bool {
        matches!(reason, Reason::Rule(r) if self.policy.program.filters.iter().any(|f| &f.name == r))
    }

    /// Whether a job can take a turn this cycle.
    fn eligible(&self, j: JobId, tried: &HashSet<JobId>) -> bool {
        self.jobs[j].is_pending() && !tried.contains(&j) && !self.backoff.contains(&j) && !self.skipped_as_full(j)
    }

    /// The next job to try: the best queue at each level of the tree, then the best job
    /// of that leaf (D3). `None` when no queue has a job that can take a turn.
    fn next_job(&self, tried: &HashSet<JobId>, blocked: &HashSet<QueueId>) -> Option<JobId> {
        let nq = self.quotas.queues.len();
        let view = self.view(None);
        let ctx = self.ctx(&view);
        let engine = self.policy.engine();
        let mut candidate: Vec<Option<JobId>> = vec![None; nq];
        // Each leaf's candidate: its best eligible job (a strict leaf offers only its head).
        for (q, jobs) in self.waiting.iter().enumerate() {
            if jobs.is_empty() || blocked.contains(&q) {
                continue;
            }
            let strict = self.quotas.queues[q].queueing == Queueing::Strict;
            let pool: Vec<JobId> = jobs.iter().copied().filter(|&j| strict || self.eligible(j, tried)).collect();
            let best = self.best_by(
                &pool,
                &self.policy.program.job_order,
                |j, out| {
                    let rec = self.job_rec(j);
                    engine.job_keys(&ctx, &rec, out);
                },
                |a, b| (self.jobs[a].submitted_ms, a).cmp(&(self.jobs[b].submitted_ms, b)),
            );
            candidate[q] = best.filter(|&j| self.eligible(j, tried));
        }
        // A queue is live if some leaf below it has a candidate.
        let mut live = vec![false; nq];
        for q in (0..nq).rev() {
            live[q] = candidate[q].is_some() || self.quotas.queues[q].children.iter().any(|&c| live[c]);
        }
        let roots: Vec<QueueId> = (0..nq).filter(|&q| self.quotas.queues[q].parent.is_none() && live[q]).collect();
        let rank = |qs: &[QueueId]| {
            self.best_by(
                qs,
                &self.policy.program.queue_order,
                |q, out| engine.queue_keys(&ctx, q as u32, out),
                |a, b| a.cmp(&b),
            )
        };
        let mut q = rank(&roots)?;
        loop {
            let children: Vec<QueueId> = self.quotas.queues[q].children.iter().copied().filter(|&c| live[c]).collect();
            if children.is_empty() {
                return candidate[q];
            }
            q = rank(&children)?;
        }
    }

    /// The best of `items` by order keys (lexicographic, each ascending or descending;
    /// NaN last), ties broken by `tie`.
    fn best_by(
        &self,
        items: &[usize],
        keys: &[OrderKey],
        eval: impl Fn(usize, &mut [f64]),
        tie: impl Fn(usize, usize) -> Ordering,
    ) -> Option<usize> {
        let mut scored: Vec<(usize, Vec<f64>)> = items
            .iter()
            .map(|&i| {
                let mut k = vec![0.0; keys.len()];
                eval(i, &mut k);
                (i, k)
            })
            .collect();
        scored.sort_by(|(a, ka), (b, kb)| {
            for ((x, y), key) in ka.iter().zip(kb).zip(keys) {
                let o = match (x.is_nan(), y.is_nan()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    _ => match key.dir {
                        Direction::Asc => x.total_cmp(y),
                        Direction::Desc => y.total_cmp(x),
                    },
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            tie(*a, *b)
        });
        scored.first().map(|(i, _)| *i)
    }

    /// Tries to place one job: admit, quota, filter and score, bind.
    fn attempt(&mut self, job: JobId) -> Attempt {
        self.attempts += 1;
        let decision = self.decide(job);
        match decision {
            Decision::Place { node, cards, model } => {
                let slot: Slot = fit::bind(&mut self.cluster, node, &self.jobs[job], &cards);
                let j = &mut self.jobs[job];
                j.slots = vec![slot];
                j.started_ms = self.now_ms;
                j.checkpoint_ms = self.now_ms;
                let j = &self.jobs[job];
                let demand = quota::demand(j, Some(model));
                self.quotas.charge(j.queue, j.user, &demand, 1);
                self.quotas.count(j.queue, -1, 1);
                self.refresh_node(node);
                self.set_state(job, State::Running);
                self.log.push(Event::Placed { job, nodes: vec![node], at_ms: self.now_ms });
                Attempt::Placed
            }
            Decision::Wait(r) => Attempt::Waiting(r),
            Decision::Reject(r) => Attempt::Rejected(r),
        }
    }

    /// The placement decision for a job, without changing anything.
    pub fn decide(&self, job: JobId) -> Decision {
        let j = &self.jobs[job];
        let demand = quota::demand(j, None);
        let view = self.view(Some(job));
        let ctx = self.ctx(&view);
        let engine = self.policy.engine();
        let rec = self.job_rec(job);
        let program = &self.policy.program;
        if let Some(i) = engine.admit(&ctx, &rec) {
            let rule = &program.admit[i];
            return if rule.is_static {
                Decision::Reject(rule.name.clone())
            } else {
                Decision::Wait(Reason::Rule(rule.name.clone()))
            };
        }
        // A job that can never fit waits as unschedulable, whatever else blocks it; that
        // is only worth working out when it does not start.
        let wait = |reason: Reason| Decision::Wait(self.never_fits(job).map_or(reason, Reason::Unschedulable));
        if let Err(why) = self.quotas.admissible(j.queue, j.user, &demand, &self.syms) {
            return wait(Reason::Quota(why));
        }
        if j.replicas > 1 {
            return wait(Reason::Rule("gang".into()));
        }
        let nodes = self.table.records();
        let tiers =
            program.scores.iter().filter_map(|s| s.tier).max().map_or(0, |t| usize::from(t).clamp(1, MAX_TIERS));
        // The quota check per GPU model, worked out once per model seen.
        let mut by_model: Vec<(Sym, Result<(), String>)> = Vec::new();
        let mut best: Option<(NodeId, NodeResult)> = None;
        let mut passed_filters = false;
        let mut quota_block: Option<String> = None;
        let mut rejections = vec![0usize; program.filters.len()];
        // Nodes are evaluated a chunk at a time into a buffer that stays in cache.
        let mut buffer = [NodeResult::default(); CHUNK];
        for (c, chunk) in nodes.chunks(CHUNK).enumerate() {
            let results = &mut buffer[..chunk.len()];
            engine.filter_score(&ctx, &rec, chunk, results);
            for (k, r) in results.iter().enumerate() {
                if !r.feasible {
                    if let Some(n) = rejections.get_mut(usize::from(r.rejected_by)) {
                        *n += 1;
                    }
                    continue;
                }
                // A node that would not win need not be looked at (and once there is a
                // best node, some node has passed the filters).
                if best.as_ref().is_some_and(|(_, b)| !better(r, b, tiers)) {
                    continue;
                }
                let i = c * CHUNK + k;
                let node = &self.cluster.nodes[i];
                if !node.up {
                    continue;
                }
                passed_filters = true;
                if (!j.models.is_empty() && !j.models.contains(&node.model)) || !fit::fits(node, j) {
                    continue;
                }
                if self.quotas.limits_models() {
                    let verdict = match by_model.iter().find(|(m, _)| *m == node.model) {
                        Some((_, v)) => v,
                        None => {
                            let demand = quota::demand(j, Some(node.model));
                            by_model.push((node.model, self.quotas.admissible(j.queue, j.user, &demand, &self.syms)));
                            &by_model[by_model.len() - 1].1
                        }
                    };
                    if let Err(why) = verdict {
                        quota_block.get_or_insert_with(|| why.clone());
                        continue;
                    }
                }
                best = Some((i, *r));
            }
        }
        let Some((node, _)) = best else {
            if !passed_filters {
                return wait(Reason::Rule(self.most_rejecting(&rejections)));
            }
            return wait(match quota_block {
                Some(why) => Reason::Quota(why),
                None => Reason::Capacity,
            });
        };
        let n = &self.cluster.nodes[node];
        let node_rec = &nodes[node];
        let card_recs = node_rec.cards_list.as_slice();
        let score = |card: usize| card_recs.get(card).map_or(0.0, |c| engine.card_score(&ctx, &rec, node_rec, c).0);
        let scorer: Option<&dyn Fn(usize) -> f64> = if program.card_scores.is_empty() { None } else { Some(&score) };
        match fit::choose(n, j, scorer) {
            Some(cards) => Decision::Place { node, cards, model: n.model },
            None => Decision::Wait(Reason::Capacity),
        }
    }

    /// Why a job can never run as the cluster and its queue are, if it cannot.
    fn never_fits(&self, job: JobId) -> Option<String> {
        let j = &self.jobs[job];
        let nodes = self.cluster.nodes.iter().filter(|n| n.up && (j.models.is_empty() || j.models.contains(&n.model)));
        if !nodes.clone().any(|n| fit::could_ever_fit(n, j)) {
            return Some(format!(
                "no node could hold one replica ({}) even if it were empty",
                crate::explain::request_text(self, job)
            ));
        }
        let demand = quota::demand(j, None);
        let mut q = Some(j.queue);
        while let Some(qi) = q {
            let node = &self.quotas.queues[qi];
            for (r, limit) in &node.limit {
                if demand.get(r).copied().unwrap_or(0) > *limit {
                    return Some(format!("it needs more than queue `{}`'s limit", node.name));
                }
            }
            q = node.parent;
        }
        None
    }

    /// The filter that turned away the most nodes (ties: the one declared first), given
    /// how many each turned away.
    fn most_rejecting(&self, rejections: &[usize]) -> String {
        let best = (0..rejections.len()).max_by(|&a, &b| rejections[a].cmp(&rejections[b]).then(b.cmp(&a)));
        match best {
            Some(i) if rejections[i] > 0 => self.policy.program.filters[i].name.clone(),
            _ => "capacity".into(),
        }
    }
}

/// How many nodes one call of the compiled policy evaluates: the results stay in cache.
const CHUNK: usize = 256;

/// The outcome of deciding where a job goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Place { node: NodeId, cards: Vec<(usize, Option<usize>)>, model: Sym },
    Wait(Reason),
    Reject(String),
}

/// Node ranking (D4): the first `tiers` tiers lexicographically (tier 1 first), then the
/// weighted sum; an equal node earlier in node order wins (the caller keeps the first).
fn better(a: &NodeResult, b: &NodeResult, tiers: usize) -> bool {
    for (x, y) in a.tiers[..tiers].iter().zip(&b.tiers[..tiers]) {
        match x.total_cmp(y) {
            Ordering::Greater => return true,
            Ordering::Less => return false,
            Ordering::Equal => {}
        }
    }
    a.score.total_cmp(&b.score) == Ordering::Greater
}
