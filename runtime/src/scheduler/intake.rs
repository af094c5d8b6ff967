//! Jobs coming in: where a submitted job goes (its queue, priority and user, by the rules
//! every consumer shares), jobs found already running, and jobs taken back.

use super::Scheduler;
use crate::jobs::{Flags, Holding, Job, JobAsk, JobId, Life, QueueId, State};
use crate::model::NodeId;
use crate::{fit, records};
use gpol_compiler::schema::Sym;
use gpol_compiler::spec::{History, JobSpec, OverLimit};

/// Where a submitted job goes: its leaf queue and its priority.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resolved {
    pub queue: QueueId,
    pub priority: f64,
}

/// A job the scheduler cannot take, and why.
#[derive(Clone, Debug, PartialEq)]
pub enum SubmitError {
    /// It names a queue the policy does not have.
    UnknownQueue { job: String, queue: String, suggestion: Option<String> },
    /// It names a queue that has children: jobs go to leaf queues.
    NotALeaf { job: String, queue: String },
    /// It names no queue, and the policy has several leaves.
    NoQueue { job: String },
    /// It names a priority class the policy does not have.
    UnknownPriorityClass { job: String, class: String, known: Vec<String> },
    /// A field is over its documented limit.
    TooLarge { job: String, over: OverLimit },
}

impl SubmitError {
    /// The job field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            SubmitError::UnknownQueue { .. } | SubmitError::NotALeaf { .. } | SubmitError::NoQueue { .. } => "queue",
            SubmitError::UnknownPriorityClass { .. } => "priority_class",
            SubmitError::TooLarge { over, .. } => over.field,
        }
    }
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubmitError::UnknownQueue { job, queue, suggestion } => {
                write!(f, "job `{job}`: the policy has no queue `{queue}`")?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean `{s}`?"),
                    None => Ok(()),
                }
            }
            SubmitError::NotALeaf { job, queue } => {
                write!(f, "job `{job}`: `{queue}` is not a leaf queue; jobs go to leaf queues")
            }
            SubmitError::NoQueue { job } => {
                write!(f, "job `{job}`: no queue given, and the policy has several leaf queues")
            }
            SubmitError::TooLarge { job, over } => write!(f, "job `{job}`: {over}"),
            SubmitError::UnknownPriorityClass { job, class, known } => {
                write!(f, "job `{job}`: the policy has no priority class `{class}`")?;
                if known.is_empty() { Ok(()) } else { write!(f, "; it has {}", known.join(", ")) }
            }
        }
    }
}

impl std::error::Error for SubmitError {}

impl Scheduler {
    /// Where a job goes and what it counts as, by the rules every consumer shares: its
    /// queue by name (a policy without queues takes every job into its one queue; a job
    /// naming no queue goes to the only leaf), its priority as given or its class's, and
    /// its user as given or named after its queue.
    pub fn resolve(&self, spec: &JobSpec) -> Result<Resolved, SubmitError> {
        let queues = &self.world.quotas.queues;
        let leaves = || queues.iter().enumerate().filter(|(_, q)| q.is_leaf());
        let job = || spec.name.clone();
        let queue = match &spec.queue {
            _ if self.facts.policy.policy.has_implicit_queue() => 0,
            Some(name) => match queues.iter().position(|q| &q.place.name == name) {
                Some(q) if queues[q].is_leaf() => q,
                Some(_) => return Err(SubmitError::NotALeaf { job: job(), queue: name.clone() }),
                None => {
                    let suggestion = gpol_compiler::fuzzy::suggest(name, leaves().map(|(_, q)| q.place.name.as_str()));
                    return Err(SubmitError::UnknownQueue {
                        job: job(),
                        queue: name.clone(),
                        suggestion: suggestion.map(str::to_string),
                    });
                }
            },
            None => match leaves().map(|(i, _)| i).collect::<Vec<_>>().as_slice() {
                [only] => *only,
                _ => return Err(SubmitError::NoQueue { job: job() }),
            },
        };
        let classes = &self.facts.policy.policy.priority_classes;
        let class = match &spec.priority_class {
            None => None,
            Some(c) => match classes.iter().find(|(n, _)| n == c) {
                Some((_, v)) => Some(*v),
                None => {
                    let known = classes.iter().map(|(n, _)| n.clone()).collect();
                    return Err(SubmitError::UnknownPriorityClass { job: job(), class: c.clone(), known });
                }
            },
        };
        Ok(Resolved { queue, priority: spec.priority.or(class).unwrap_or(0.0) })
    }

    /// Adds a waiting job (see [`Scheduler::resolve`] for where it goes).
    pub fn submit(&mut self, spec: JobSpec) -> Result<JobId, SubmitError> {
        self.submit_waited(spec, 0)
    }

    /// [`Scheduler::submit`] for a job that was submitted `waited_ms` before now, as an
    /// adapter finds it (a pod created a while ago): `job.submitted` and `job.waiting`
    /// count from then (before the clock's start, `submitted` is negative).
    pub fn submit_waited(&mut self, spec: JobSpec, waited_ms: u64) -> Result<JobId, SubmitError> {
        let since = self.now().saturating_sub(i64::try_from(waited_ms).unwrap_or(i64::MAX));
        if let Some(over) = spec.over_limit() {
            return Err(SubmitError::TooLarge { job: spec.name.clone(), over });
        }
        let Resolved { queue, priority } = self.resolve(&spec)?;
        let id = self.world.jobs.len();
        // Names, users and label values can be new with every job: they are forgotten with
        // the job. Label keys, models and classes come from small sets, kept for good.
        let labels =
            spec.labels.iter().map(|(k, v)| (self.world.syms.intern(k), self.world.syms.intern_counted(v))).collect();
        let user = match &spec.user {
            Some(u) => self.world.syms.intern_counted(u),
            None => self.world.quotas.queues[queue].place.name_sym,
        };
        // When rules read users' usage, the quota tree keeps each user's for good (it is
        // history), and holds the name too.
        if self.world.users_tracked && self.world.quotas.join_user(queue, user) && spec.user.is_some() {
            self.world.syms.intern_counted(self.world.syms.name(user).to_string().as_str());
        }
        let ask = JobAsk {
            id: self.world.syms.intern_counted(&spec.name),
            user,
            queue,
            priority,
            priority_class: spec.priority_class.as_deref().map_or(Sym(0), |c| self.world.syms.intern(c)),
            request: spec.request,
            replicas: spec.replicas.max(1),
            min_replicas: spec.min_replicas(),
            gpu_mem: spec.gpu_mem,
            cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            models: spec.models.iter().map(|m| self.world.syms.intern(m)).collect(),
            flags: Flags {
                bursty: spec.bursty,
                latency_critical: spec.latency_critical,
                preemptible: spec.preemptible,
            },
            duration_ms: spec.duration_ms,
            utilization: spec.utilization,
            labels,
            name: spec.name,
        };
        let life = Life {
            state: State::Pending(None),
            submitted_ms: since,
            waiting_since_ms: since,
            started_ms: 0,
            evictions: 0,
            checkpoint_ms: 0,
            checkpoint_every_ms: spec.checkpoint_every_ms,
        };
        let job = Job { ask, life, holding: Holding::default() };
        let labels = records::label_slots(&job.ask.labels, &self.facts.job_label_keys);
        let next = self.world.shapes.len();
        let shape = *self.world.shapes.entry(job.shape()).or_insert(next);
        self.world.quotas.count(job.ask.queue, 1, 0, crate::quota::requested_gpu(&job));
        self.world.jobs.push(job, labels, shape);
        self.touch();
        self.enqueue(id);
        Ok(id)
    }

    /// Places a job directly, as already running (a scenario's `run`): one replica per
    /// listed node, cards by built-in best fit, quota charged without checks.
    pub fn start_on(&mut self, job: JobId, nodes: &[NodeId], history: History) -> Result<(), String> {
        for &n in nodes {
            let node = &self.world.cluster.nodes[n];
            if fit::choose(node, &self.world.jobs[job], None).is_none() {
                return Err(format!("job `{}` does not fit on node `{}`", self.world.jobs[job].ask.name, node.name));
            }
            self.bind_replica(job, n, false);
        }
        self.start_bound(job, history);
        Ok(())
    }

    /// Marks a job whose replicas are bound as running, charged, with its history.
    fn start_bound(&mut self, job: JobId, history: History) {
        let History { ran_ms, since_checkpoint_ms, evictions } = history;
        self.charge(job);
        self.note_start(job);
        let start = self.now() - i64::try_from(ran_ms).unwrap_or(i64::MAX);
        self.set_state(job, State::Running);
        let now = self.now();
        let j = &mut self.world.jobs[job];
        j.life.started_ms = start;
        j.life.waiting_since_ms = j.life.waiting_since_ms.min(start);
        j.life.submitted_ms = j.life.submitted_ms.min(start);
        j.life.checkpoint_ms = now - i64::try_from(since_checkpoint_ms.min(ran_ms)).unwrap_or(i64::MAX);
        j.life.evictions = evictions;
    }

    /// Places a one-replica job directly on `node` on the given cards (and MIG instances),
    /// as an adapter found it running: the cards must be free for it, else an error and
    /// nothing changes.
    pub fn start_on_cards(
        &mut self,
        job: JobId,
        node: NodeId,
        cards: &[(usize, Option<usize>)],
        history: History,
    ) -> Result<(), String> {
        let Some(n) = self.world.cluster.nodes.get(node) else { return Err(format!("no node {node}")) };
        if self.world.jobs[job].ask.replicas != 1 || !fit::valid_choice(n, &self.world.jobs[job], cards) {
            return Err(format!(
                "job `{}` cannot take cards {cards:?} of node `{}`",
                self.world.jobs[job].ask.name, n.name
            ));
        }
        let slot = fit::bind(&mut self.world.cluster, node, &self.world.jobs[job], cards);
        self.world.jobs[job].holding.slots.push(slot);
        self.refresh_node(node);
        self.start_bound(job, history);
        Ok(())
    }

    /// Drops the record of a job that has ended (finished, rejected or withdrawn) and
    /// returns it; its id then names nothing. A driver that has read what it needs of an
    /// ended job calls this, so that a long run holds only the jobs in flight. A waiting or
    /// running job is kept, and `None` returned.
    pub fn forget(&mut self, job: JobId) -> Option<Job> {
        let ended =
            self.world.jobs.get(job).is_some_and(|j| !matches!(j.life.state, State::Pending(_) | State::Running));
        let j = if ended { self.world.jobs.remove(job)? } else { return None };
        self.world.syms.release(j.ask.id);
        self.world.syms.release(j.ask.user);
        for &v in j.ask.labels.values() {
            self.world.syms.release(v);
        }
        Some(j)
    }

    /// Takes back a job that has not started; a running or ended job stays as it is.
    pub fn withdraw(&mut self, job: JobId) {
        if self.world.jobs[job].is_pending() {
            self.world.quotas.count(
                self.world.jobs[job].ask.queue,
                -1,
                0,
                crate::quota::requested_gpu(&self.world.jobs[job]),
            );
            self.set_state(job, State::Withdrawn);
        }
    }
}
