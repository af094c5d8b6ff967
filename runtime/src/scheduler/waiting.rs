//! The waiting jobs, in classes of jobs the policy cannot tell apart: the same leaf queue,
//! user, request, replica counts and value of every job field an admission, placement,
//! gang or victim rule reads. Such jobs get the same answer in the same state, so once
//! one of them fails, the others are not tried until something that could change the
//! answer happens (`retry`): a waiting job costs nothing until then, however long the
//! backlog. Within a class, jobs keep their `job_order` rank.

use super::facts::Ranking;
use super::rank::{ClassId, Rank, job_of, ordered};
use super::retry::NoVictims;
use super::{Backoff, Scheduler};
use crate::jobs;
use crate::jobs::{JobId, Reason};
use crate::quota::QueueId;
use gpol_compiler::interp::Ctx;
use gpol_compiler::ir::Direction;
use gpol_compiler::schema::{FieldValue, Record, Sym};
use std::collections::{BTreeSet, HashMap};

/// Waiting jobs that rules cannot tell apart, and what their latest attempt found.
#[derive(Clone, Debug, Default)]
pub(super) struct Class {
    key: Vec<u64>,
    pub(super) queue: QueueId,
    pub(super) user: Sym,
    /// Their shape, as an index into the scheduler's shapes.
    pub(super) shape: usize,
    /// Whether they need something the quota tree governs (then only starts in some
    /// queues can give them victims).
    pub(super) governed: bool,
    /// The members, best first — but for those parked after a failed turn this cycle.
    pub(super) members: BTreeSet<Rank>,
    /// Members parked this cycle.
    parked: usize,
    /// Why the latest attempt of one of them failed (`None`: not tried yet).
    pub(super) reason: Option<Reason>,
    /// What must happen before they are tried again.
    pub(super) backoff: Option<Backoff>,
    /// When their latest victim search found no candidate at all: what could give them
    /// one. Until it happens no search is made for them.
    pub(super) no_victims: Option<NoVictims>,
    /// The state version the latest attempt failed in: while it stands, every member
    /// would fail alike.
    pub(super) failed_at: Option<u64>,
    /// The state version and clock the members were last ranked at (for job orders that
    /// change with time or state).
    pub(super) ranked_at: (u64, u64),
}

/// What a new class is made of: its key and what its members share.
pub(super) struct NewClass {
    pub(super) key: Vec<u64>,
    pub(super) queue: QueueId,
    pub(super) user: Sym,
    pub(super) shape: usize,
    pub(super) governed: bool,
}

/// Every waiting job, by class; classes by leaf queue.
#[derive(Clone, Debug, Default)]
pub(super) struct Waiting {
    classes: Vec<Class>,
    /// Class slots emptied, to reuse.
    free: Vec<ClassId>,
    index: HashMap<Vec<u64>, ClassId>,
    /// Each job's class and rank while it waits.
    class_of: HashMap<JobId, (ClassId, Rank)>,
    /// Per leaf queue, its classes that have members.
    by_leaf: Vec<BTreeSet<ClassId>>,
    /// Jobs that failed their turn this cycle, out of their classes' `members` until it
    /// ends, so a class's next candidate is its first member.
    parked: Vec<JobId>,
}

impl Waiting {
    pub(super) fn new(queues: usize) -> Waiting {
        Waiting { by_leaf: vec![BTreeSet::new(); queues], ..Waiting::default() }
    }

    /// How many jobs wait.
    pub(super) fn len(&self) -> usize {
        self.class_of.len()
    }

    pub(super) fn class(&self, c: ClassId) -> &Class {
        &self.classes[c]
    }

    pub(super) fn class_mut(&mut self, c: ClassId) -> &mut Class {
        &mut self.classes[c]
    }

    /// The class of a waiting job.
    pub(super) fn class_of(&self, job: JobId) -> Option<ClassId> {
        self.class_of.get(&job).map(|(c, _)| *c)
    }

    /// The classes of a leaf queue, each with at least one member.
    pub(super) fn in_leaf(&self, leaf: QueueId) -> impl Iterator<Item = ClassId> + '_ {
        self.by_leaf.get(leaf).into_iter().flatten().copied()
    }

    /// Every class that has members.
    pub(super) fn all(&self) -> impl Iterator<Item = ClassId> + '_ {
        self.by_leaf.iter().flatten().copied()
    }

    /// Adds a waiting job with its rank to the class `class` describes, made if new.
    pub(super) fn join(&mut self, job: JobId, rank: Rank, class: NewClass) -> ClassId {
        let c = match self.index.get(&class.key) {
            Some(&c) => c,
            None => {
                let NewClass { key, queue, user, shape, governed } = class;
                let new = Class { key: key.clone(), queue, user, shape, governed, ..Class::default() };
                let c = match self.free.pop() {
                    Some(c) => {
                        self.classes[c] = new;
                        c
                    }
                    None => {
                        self.classes.push(new);
                        self.classes.len() - 1
                    }
                };
                self.index.insert(key, c);
                if let Some(leaf) = self.by_leaf.get_mut(queue) {
                    leaf.insert(c);
                }
                c
            }
        };
        self.classes[c].members.insert(rank.clone());
        self.class_of.insert(job, (c, rank));
        c
    }

    /// Takes a job out (it started, ended or left); a class left empty is forgotten.
    pub(super) fn leave(&mut self, job: JobId) {
        let Some((c, rank)) = self.class_of.remove(&job) else { return };
        let class = &mut self.classes[c];
        if !class.members.remove(&rank) {
            class.parked -= 1;
            self.parked.retain(|&j| j != job);
        }
        if class.members.is_empty() && class.parked == 0 {
            let class = std::mem::take(class);
            self.index.remove(&class.key);
            if let Some(leaf) = self.by_leaf.get_mut(class.queue) {
                leaf.remove(&c);
            }
            self.free.push(c);
        }
    }

    /// Sets aside a job that failed its turn, until `unpark`.
    pub(super) fn park(&mut self, job: JobId) {
        let Some((c, rank)) = self.class_of.get(&job) else { return };
        let class = &mut self.classes[*c];
        if class.members.remove(rank) {
            class.parked += 1;
            self.parked.push(job);
        }
    }

    /// Puts the parked jobs back in their classes (at the end of a cycle).
    pub(super) fn unpark(&mut self) {
        for job in std::mem::take(&mut self.parked) {
            if let Some((c, rank)) = self.class_of.get(&job) {
                let class = &mut self.classes[*c];
                class.parked -= 1;
                class.members.insert(rank.clone());
                // Its rank may be older than its class's: rank them all again when asked.
                class.ranked_at = (u64::MAX, u64::MAX);
            }
        }
    }

    /// Ranks a class's members afresh.
    pub(super) fn rerank(&mut self, c: ClassId, ranks: Vec<Rank>, at: (u64, u64)) {
        for rank in &ranks {
            if let Some(entry) = self.class_of.get_mut(&job_of(rank)) {
                entry.1 = rank.clone();
            }
        }
        let class = &mut self.classes[c];
        class.members = ranks.into_iter().collect();
        class.ranked_at = at;
    }
}

impl Scheduler {
    /// Puts a job that has just become pending into its class, ranked.
    pub(super) fn enqueue(&mut self, job: JobId) {
        let view = self.view(None);
        let ctx = self.ctx(&view);
        let rank = self.rank(&ctx, job);
        let class = self.class_for(job);
        drop(view);
        self.waiting.join(job, rank, class);
    }

    /// The class a waiting job belongs to: what rules and the runtime read of it.
    fn class_for(&self, job: JobId) -> NewClass {
        let j = &self.world.jobs()[job];
        let shape = self.world.jobs().shape(job);
        let mut key = vec![
            j.ask.queue as u64,
            u64::from(j.ask.user.0),
            shape as u64,
            u64::from(j.ask.replicas),
            u64::from(j.ask.min_replicas),
        ];
        // Whether a job reserves when its turn fails depends on how long it has waited,
        // and the nodes it holds are its alone: with reservations, each job is its own class.
        if self.facts.policy.policy.settings.reserve_after.is_some() {
            key.push(job as u64);
        }
        let rec = self.job_rec(job);
        let waiting = Record::Job.field("waiting").map(|(i, _)| i);
        for &f in &self.facts.distinguishing {
            if Some(f) == waiting {
                // What it has waited grows with the clock; when it began does not.
                key.push(j.life.waiting_since_ms as u64);
                continue;
            }
            match rec.field(f) {
                Some(value) => encode(value, job, &mut key),
                None => key.push(job as u64),
            }
        }
        let governed = jobs::demand(j, None).iter().any(|(&r, &a)| a > 0 && self.world.quotas().is_constrained(r));
        NewClass { key, queue: j.ask.queue, user: j.ask.user, shape, governed }
    }

    /// A waiting job's rank by `job_order` now.
    pub(super) fn rank(&self, ctx: &Ctx<'_>, job: JobId) -> Rank {
        let keys = &self.facts.policy.program.job_order;
        let mut values = vec![0.0; keys.len()];
        self.facts.policy.engine().job_keys(ctx, &self.job_rec(job), &mut values);
        let submitted = self.world.jobs()[job].life.submitted_ms as u64 ^ 1 << 63;
        keys.iter()
            .zip(values)
            .map(|(k, x)| ordered(if k.dir == Direction::Desc { -x } else { x }))
            .chain([submitted, job as u64])
            .collect()
    }

    /// Ranks again the members of these classes whose ranks may have changed since.
    pub(super) fn rerank_stale(&mut self, classes: &[ClassId]) {
        let now = (self.epochs.version(), self.world.now_ms());
        let stale = |c: &Class| match self.facts.ranking {
            Ranking::Fixed => false,
            Ranking::Clock => c.ranked_at.1 != now.1,
            Ranking::State => c.ranked_at != now,
        };
        let stale: Vec<ClassId> = classes.iter().copied().filter(|&c| stale(self.waiting.class(c))).collect();
        if stale.is_empty() {
            return;
        }
        let view = self.view(None);
        let ctx = self.ctx(&view);
        let ranked: Vec<(ClassId, Vec<Rank>)> = stale
            .iter()
            .map(|&c| (c, self.waiting.class(c).members.iter().map(|r| self.rank(&ctx, job_of(r))).collect()))
            .collect();
        drop(view);
        for (c, ranks) in ranked {
            self.waiting.rerank(c, ranks, now);
        }
    }
}

/// Appends a field's value to a class key; a value no job has (lists of cards or shapes)
/// keys the job by its id.
fn encode(value: FieldValue<'_, '_>, job: JobId, key: &mut Vec<u64>) {
    match value {
        FieldValue::Num(x) => key.push(x.to_bits()),
        FieldValue::Bool(b) => key.push(u64::from(b)),
        FieldValue::Sym(s) => key.push(u64::from(s.0)),
        FieldValue::Enum(e) => key.push(u64::from(e)),
        FieldValue::Queue(q) => key.push(u64::from(q)),
        FieldValue::OptNum(o) => key.extend([u64::from(o.present), o.value.to_bits()]),
        FieldValue::OptEnum(o) => key.extend([u64::from(o.present), u64::from(o.value)]),
        FieldValue::OptQueue(o) => key.extend([u64::from(o.present), u64::from(o.value)]),
        FieldValue::Resources(r) => key.extend([r.gpu.to_bits(), r.cpu.to_bits(), r.mem.to_bits()]),
        FieldValue::Syms(list) | FieldValue::Labels(list) => {
            key.push(list.len() as u64);
            key.extend(list.iter().map(|s| u64::from(s.0)));
        }
        FieldValue::Cards(_) | FieldValue::Shapes(_) | FieldValue::Mig(_) => key.push(job as u64),
    }
}
