//! Jobs coming in: where a submitted job goes (its queue, priority and user, by the rules
//! every consumer shares), jobs found already running, and jobs taken back.

use super::Scheduler;
use crate::fit;
use crate::jobs::{Job, JobId, State};
use crate::model::NodeId;
use crate::quota::QueueId;
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

/// A job that cannot be started where it was found running, and why (nothing of the
/// attempt stays).
#[derive(Clone, Debug, PartialEq)]
pub enum StartOnError {
    /// One of its replicas does not fit on a node it is to run on.
    DoesNotFit { job: String, node: String },
    /// No node has this id.
    NoNode(NodeId),
    /// The job is not of one replica, or these cards (and MIG instances) are not free
    /// for it.
    CardsNotFree { job: String, node: String, cards: Vec<(usize, Option<usize>)> },
}

impl std::fmt::Display for StartOnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartOnError::DoesNotFit { job, node } => write!(f, "job `{job}` does not fit on node `{node}`"),
            StartOnError::NoNode(node) => write!(f, "no node {node}"),
            StartOnError::CardsNotFree { job, node, cards } => {
                write!(f, "job `{job}` cannot take cards {cards:?} of node `{node}`")
            }
        }
    }
}

impl std::error::Error for StartOnError {}

impl Scheduler {
    /// Where a job goes and what it counts as, by the rules every consumer shares: its
    /// queue by name (a policy without queues takes every job into its one queue; a job
    /// naming no queue goes to the only leaf), its priority as given or its class's, and
    /// its user as given or named after its queue.
    pub fn resolve(&self, spec: &JobSpec) -> Result<Resolved, SubmitError> {
        let queues = &self.world.quotas().queues;
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
    pub(crate) fn submit_waited(&mut self, spec: JobSpec, waited_ms: u64) -> Result<JobId, SubmitError> {
        let since = self.now().saturating_sub(i64::try_from(waited_ms).unwrap_or(i64::MAX));
        if let Some(over) = spec.over_limit() {
            return Err(SubmitError::TooLarge { job: spec.name.clone(), over });
        }
        let to = self.resolve(&spec)?;
        let id = self.world.add_job(spec, to, since, &self.facts.job_label_keys);
        self.touch();
        self.enqueue(id);
        Ok(id)
    }

    /// Places a job directly, as already running (a scenario's `run`): one replica per
    /// listed node, cards by built-in best fit, quota charged without checks.
    pub fn start_on(&mut self, job: JobId, nodes: &[NodeId], history: History) -> Result<(), StartOnError> {
        for &n in nodes {
            let node = &self.world.cluster().nodes[n];
            if fit::choose(node, &self.world.jobs()[job], None).is_none() {
                let job = self.world.jobs()[job].ask.name.clone();
                return Err(StartOnError::DoesNotFit { job, node: node.name.clone() });
            }
            self.bind_replica(job, n, false);
        }
        self.start_bound(job, history);
        Ok(())
    }

    /// Marks a job whose replicas are bound as running, charged, with its history.
    fn start_bound(&mut self, job: JobId, history: History) {
        self.charge(job);
        self.note_start(job);
        let start = self.now() - i64::try_from(history.ran_ms).unwrap_or(i64::MAX);
        self.set_state(job, State::Running);
        self.world.note_found_running(job, start, history);
    }

    /// Places a one-replica job directly on `node` on the given cards (and MIG instances),
    /// as an adapter found it running: the cards must be free for it, else an error and
    /// nothing changes.
    pub(crate) fn start_on_cards(
        &mut self,
        job: JobId,
        node: NodeId,
        cards: &[(usize, Option<usize>)],
        history: History,
    ) -> Result<(), StartOnError> {
        let Some(n) = self.world.cluster().nodes.get(node) else { return Err(StartOnError::NoNode(node)) };
        if self.world.jobs()[job].ask.replicas != 1 || !fit::valid_choice(n, &self.world.jobs()[job], cards) {
            return Err(StartOnError::CardsNotFree {
                job: self.world.jobs()[job].ask.name.clone(),
                node: n.name.clone(),
                cards: cards.to_vec(),
            });
        }
        self.world.bind(job, node, cards);
        self.start_bound(job, history);
        Ok(())
    }

    /// Drops the record of a job that has ended (finished, rejected or withdrawn) and
    /// returns it; its id then names nothing. A driver that has read what it needs of an
    /// ended job calls this, so that a long run holds only the jobs in flight. A waiting or
    /// running job is kept, and `None` returned.
    pub fn forget(&mut self, job: JobId) -> Option<Job> {
        self.world.forget(job)
    }

    /// Takes back a job that has not started; a running or ended job stays as it is.
    pub fn withdraw(&mut self, job: JobId) {
        if self.world.jobs()[job].is_pending() {
            self.set_state(job, State::Withdrawn);
        }
    }
}
