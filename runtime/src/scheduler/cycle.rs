//! The scheduling cycle: every job that can start now starts, in order; each turn is an
//! attempt to place the job, then to evict for it, then to reserve for it.

use super::rank::ClassId;
use super::{Backoff, Event, Scheduler, View};
use crate::jobs::{JobId, Reason, State};
use crate::model::NodeId;
use crate::quota::QueueId;
use crate::scheduler::account::{self, Account, SearchSeen, Turned};
use crate::scheduler::preempt::Eviction;
use gpol_compiler::hir::Queueing;
use gpol_compiler::ir::RuleId;
use std::collections::HashSet;

/// How one placement attempt ended.
enum Attempt {
    Placed,
    Waiting(Reason),
    Rejected(RuleId),
}

/// What a cycle has done so far: the classes that had a turn, the strict leaves stopped
/// behind a waiting head, and each leaf's candidate while nothing changes.
#[derive(Default)]
struct Turns {
    classes: HashSet<ClassId>,
    blocked: HashSet<QueueId>,
    /// Per leaf, its classes that may take a turn, worked out once per change of state
    /// (a failed class drops out), and its candidate among them.
    classes_by_leaf: Vec<Option<Vec<ClassId>>>,
    candidates: Vec<Option<Option<JobId>>>,
    /// The state version and count of full shapes those were found at.
    found_at: (u64, usize),
}

impl Scheduler {
    /// [`Scheduler::cycle`], with an account of every turn as it was decided: what the
    /// job saw when its turn began (the order of queues, the quota, every node) and how
    /// the turn ended (its victim search included). Slower: for explanations and
    /// decision logs.
    pub fn cycle_recorded(&mut self) -> (Vec<Event>, Vec<Account>) {
        self.recording = Some(Vec::new());
        let decided = self.cycle();
        (decided, self.recording.take().unwrap_or_default())
    }

    /// The jobs the last cycle gave a turn, in order: a recorded cycle's accounts are
    /// theirs, one each.
    pub fn turns(&self) -> &[JobId] {
        &self.turns
    }

    /// Runs one scheduling cycle: places every job that can be placed now, in order.
    /// Returns what it decided, in order: starts, rejections, evictions, reservations,
    /// growth.
    pub fn cycle(&mut self) -> Vec<Event> {
        self.world.advance_usage();
        self.forget_irrelevant_starts();
        self.started_this_cycle.clear();
        self.turns.clear();
        self.in_cycle = true;
        self.epochs.begin_cycle();
        let mut turns = Turns::default();
        while let Some(job) = self.next_job(&mut turns) {
            // The state the answer is computed in (a failed turn may still change it: a
            // reservation).
            let (leaf, class, version) =
                (self.world.jobs()[job].ask.queue, self.waiting.class_of(job), self.epochs.version());
            turns.classes.extend(class);
            if let Some(c) = turns.candidates.get_mut(leaf) {
                *c = None;
            }
            if let (Some(Some(list)), Some(c)) = (turns.classes_by_leaf.get_mut(leaf), class) {
                list.retain(|&x| x != c);
            }
            self.turns.push(job);
            match self.attempt(job) {
                Attempt::Placed => {}
                Attempt::Rejected(rule) => {
                    self.set_state(job, State::Rejected(rule));
                    self.decided.push(Event::Rejected { job, rule, at_ms: self.world.now_ms() });
                }
                Attempt::Waiting(reason) => {
                    if self.world.quotas().queues[leaf].place.queueing == Queueing::Strict {
                        turns.blocked.insert(leaf);
                        self.blocked_by[leaf] = Some(job);
                    }
                    let backoff = (!matches!(reason, Reason::Rule(_)) || reason.is_filter()).then(|| Backoff {
                        at_ms: self.world.now_ms(),
                        starts: self.epochs.cycle_starts(),
                        quota: self.quota_cap(job, &reason),
                    });
                    if matches!(reason, Reason::Capacity) || reason.is_filter() {
                        self.note_if_full(job);
                    }
                    if let Some(c) = class {
                        let class = self.waiting.class_mut(c);
                        class.reason = Some(reason);
                        class.failed_at = Some(version);
                        class.backoff = backoff;
                    }
                    self.waiting.park(job);
                }
            }
        }
        self.waiting.unpark();
        // Classes that had no turn because no node can take their shape wait for capacity.
        let full: Vec<ClassId> =
            self.waiting.all().filter(|c| !turns.classes.contains(c) && self.skipped_as_full(*c)).collect();
        for c in full {
            self.waiting.class_mut(c).reason = Some(Reason::Capacity);
        }
        self.grow();
        self.in_cycle = false;
        // The jobs this cycle started may be victims once it ends: a class that failed
        // after one of them started is not held by the state it failed in (its backoff
        // says whether they could be its victims).
        if !self.started_this_cycle.is_empty() && !self.facts.policy.program.victims.is_empty() {
            self.touch();
        }
        self.started_this_cycle.clear();
        std::mem::take(&mut self.decided)
    }

    /// The next job to try: the best queue at each level of the tree, then the best job
    /// of that leaf (D3). `None` when no queue has a job that can take a turn.
    fn next_job(&mut self, turns: &mut Turns) -> Option<JobId> {
        let nq = self.world.quotas().queues.len();
        // Candidates stand until a turn in their leaf, or until anything changes.
        let at = (self.epochs.version(), self.full.len());
        if turns.found_at != at || turns.candidates.len() != nq {
            turns.candidates = vec![None; nq];
            turns.classes_by_leaf = vec![None; nq];
            turns.found_at = at;
        }
        let mut candidate: Vec<Option<JobId>> = vec![None; nq];
        for (q, slot) in candidate.iter_mut().enumerate() {
            if turns.blocked.contains(&q) || self.waiting.in_leaf(q).next().is_none() {
                continue;
            }
            *slot = match turns.candidates[q] {
                Some(c) => c,
                None => {
                    let classes = match turns.classes_by_leaf[q].take() {
                        Some(list) => list,
                        None => self.leaf_classes(q),
                    };
                    let c = self.leaf_candidate(q, &classes);
                    turns.classes_by_leaf[q] = Some(classes);
                    turns.candidates[q] = Some(c);
                    c
                }
            };
        }
        let mut view = self.view(None);
        // A queue is live if some leaf below it has a candidate.
        let mut live = vec![false; nq];
        for q in (0..nq).rev() {
            live[q] = candidate[q].is_some() || self.world.quotas().queues[q].place.children.iter().any(|&c| live[c]);
        }
        // The best of some queues by `queue_order` (without one, the weighted dominant
        // share: the queue holding the least of the cluster for its weight goes first).
        let rank = |view: &View, qs: &[QueueId]| {
            qs.iter()
                .map(|&q| (q, self.queue_order_keys(view, q)))
                .min_by(|a, b| self.queue_order_cmp((a.0, &a.1), (b.0, &b.1)))
                .map(|(q, _)| q)
        };
        let live_children = |q: QueueId| -> Vec<QueueId> {
            self.world.quotas().queues[q].place.children.iter().copied().filter(|&c| live[c]).collect()
        };
        if self.facts.queue_order_reads_head {
            // Each queue's next job, bottom up (children follow their parents): a leaf's
            // candidate, or its best child's; its `head_*` fields are that job's.
            let mut head: Vec<Option<JobId>> = vec![None; nq];
            for q in (0..nq).rev() {
                head[q] = if self.world.quotas().queues[q].place.children.is_empty() {
                    candidate[q]
                } else {
                    rank(&view, &live_children(q)).and_then(|c| head[c])
                };
                if let Some(j) = head[q] {
                    self.fill_head(&mut view.queues[q], q, j);
                }
            }
        }
        let roots: Vec<QueueId> =
            (0..nq).filter(|&q| self.world.quotas().queues[q].place.parent.is_none() && live[q]).collect();
        let mut q = rank(&view, &roots)?;
        loop {
            let children = live_children(q);
            if children.is_empty() {
                return candidate[q];
            }
            q = rank(&view, &children)?;
        }
    }

    /// Fills queue `q`'s `head_*` fields from its next job.
    fn fill_head(&self, rec: &mut gpol_compiler::schema::QueueRec, q: QueueId, job: JobId) {
        let j = &self.world.jobs()[job];
        let jr = self.job_rec(job);
        rec.head_waiting = jr.waiting;
        rec.head_gpus = jr.total_gpus;
        rec.head_priority = j.ask.priority;
        let demand = crate::jobs::demand(j, None);
        let queue = &self.world.quotas().queues[q];
        rec.head_fits_guarantee = demand
            .iter()
            .filter(|(r, _)| self.world.quotas().is_constrained(**r))
            .all(|(r, &a)| queue.get(&queue.load.alloc, *r) + a <= queue.get(&queue.quota.guarantee, *r));
    }

    /// One job's turn, recorded if a recorded cycle runs.
    fn attempt(&mut self, job: JobId) -> Attempt {
        self.attempts += 1;
        if self.recording.is_none() {
            return self.turn(job, None);
        }
        let seen = account::seen(self, job);
        let mut search = None;
        let attempt = self.turn(job, Some(&mut search));
        let turned = match &attempt {
            Attempt::Placed => Turned::Placed,
            Attempt::Waiting(reason) => Turned::Waits(reason),
            Attempt::Rejected(rule) => Turned::Rejected(*rule),
        };
        let record = account::decided(self, job, seen, turned, search);
        if let Some(accounts) = &mut self.recording {
            accounts.push(record);
        }
        attempt
    }

    /// One job's turn: place it; failing that, evict for it (if the policy allows and it
    /// would then start), or reserve for it (if it has waited long enough). `search`, when
    /// given, is told of the victim search made.
    fn turn(&mut self, job: JobId, search: Option<&mut Option<SearchSeen>>) -> Attempt {
        let reason = match self.decide(job) {
            crate::scheduler::place::Decision::Place { replicas } => {
                self.start(job, &replicas);
                return Attempt::Placed;
            }
            crate::scheduler::place::Decision::Reject(rule) => return Attempt::Rejected(rule),
            crate::scheduler::place::Decision::Wait(reason) => reason,
        };
        if self.may_evict_for(&reason) && !self.still_no_victims(job) {
            self.searches += 1;
            let mut considered = search.is_some().then(Vec::new);
            let found = self.victim_search_noted(job, considered.as_mut());
            if let (Some(out), Some(considered)) = (search, considered) {
                let eviction = found.as_ref().ok().cloned();
                *out =
                    Some(account::search_seen(self, &crate::scheduler::preempt::VictimSearch { considered, eviction }));
            }
            match found {
                Ok(eviction) => {
                    self.evict(job, &eviction);
                    self.start(job, &eviction.replicas);
                    return Attempt::Placed;
                }
                Err(watch) => self.note_no_victims(job, watch),
            }
        }
        if matches!(reason, Reason::Capacity | Reason::Gang) {
            self.reserve_if_due(job);
        }
        Attempt::Waiting(reason)
    }

    /// Whether evicting running jobs could help a job that waits for `reason`: capacity,
    /// quota, topology, or a filter (filters can read free capacity).
    pub(super) fn may_evict_for(&self, reason: &Reason) -> bool {
        !self.facts.policy.program.victims.is_empty()
            && (matches!(reason, Reason::Capacity | Reason::Quota(_) | Reason::Gang) || reason.is_filter())
    }

    /// Starts a job with one replica on each listed node.
    pub(super) fn start(&mut self, job: JobId, replicas: &[NodeId]) {
        for &node in replicas {
            self.bind_replica(job, node, true);
        }
        self.charge(job);
        self.set_state(job, State::Running);
        if self.in_cycle {
            self.started_this_cycle.insert(job);
        }
        self.note_start(job);
        self.world.note_started(job);
        self.decided.push(Event::Placed { job, nodes: replicas.to_vec(), at_ms: self.world.now_ms() });
    }

    /// Carries out an eviction: the victims stop, lose their work since their last
    /// checkpoint, and wait again.
    pub(super) fn evict(&mut self, claimant: JobId, eviction: &Eviction) {
        self.world.advance_usage();
        // Replicas of elastic gangs first, the highest slots first so the others keep
        // their places.
        let mut replicas: Vec<(JobId, usize, RuleId)> =
            eviction.victims.iter().filter_map(|v| Some((v.job, v.replica?, v.rule))).collect();
        replicas.sort_unstable_by_key(|&(job, k, _)| (job, std::cmp::Reverse(k)));
        for (job, k, rule) in replicas {
            if let Some((node, lost_gpu_s)) = self.remove_replica(job, k) {
                self.decided.push(Event::Shrunk {
                    job,
                    by: claimant,
                    rule,
                    node,
                    lost_gpu_s,
                    at_ms: self.world.now_ms(),
                });
            }
        }
        for v in eviction.victims.iter().filter(|v| v.replica.is_none()) {
            let (kept_ms, lost_gpu_s) = self.stop_progress(v.job);
            self.requeue(v.job);
            self.decided.push(Event::Evicted {
                job: v.job,
                by: claimant,
                rule: v.rule,
                kept_ms,
                lost_gpu_s,
                at_ms: self.world.now_ms(),
            });
        }
    }
}
