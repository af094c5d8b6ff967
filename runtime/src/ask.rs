//! Asking about a job without changing anything, and taking in jobs found running: what
//! adapters that are asked (kube-scheduler's extender, the C ABI) and adapters that
//! replay another scheduler's state (Slurm, Kubernetes) need. The job asked about is in
//! the scheduler only while the question is answered; every trace of it goes with it.

use crate::jobs::JobId;
use crate::model::NodeId;
use crate::scheduler::account::Account;
use crate::scheduler::preempt::VictimSearch;
use crate::scheduler::verdict::{Closed, NodeVerdict};
use crate::scheduler::{Scheduler, StartOnError, SubmitError};
use gpol_compiler::engine::NodeResult;
use gpol_compiler::spec::{History, JobSpec};

/// A job being asked about: what it would meet now, were it submitted.
pub struct Asked<'a> {
    s: &'a mut Scheduler,
    job: JobId,
}

/// Where a job found running runs.
#[derive(Clone, Copy, Debug)]
pub enum Found<'a> {
    /// One replica on each node, on the cards built-in best fit chooses.
    Nodes(&'a [NodeId]),
    /// One replica on the node, on these cards (and MIG instances).
    Cards(NodeId, &'a [(usize, Option<usize>)]),
}

/// Why a job found running could not be taken in.
#[derive(Clone, Debug, PartialEq)]
pub enum StartError {
    Submit(SubmitError),
    /// It does not fit where it was found.
    DoesNotFit(StartOnError),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Submit(e) => e.fmt(f),
            StartError::DoesNotFit(why) => why.fmt(f),
        }
    }
}

impl std::error::Error for StartError {}

impl Scheduler {
    /// Answers `question` about a job as if it had been submitted `waited_ms` ago, and
    /// leaves the scheduler as it found it: the job is gone afterwards, and no cycle
    /// runs. An error if the job could not be submitted.
    pub fn ask<R>(
        &mut self,
        spec: JobSpec,
        waited_ms: u64,
        question: impl FnOnce(&mut Asked<'_>) -> R,
    ) -> Result<R, SubmitError> {
        let job = self.submit_waited(spec, waited_ms)?;
        let answer = question(&mut Asked { s: self, job });
        self.take_back(job);
        Ok(answer)
    }

    /// Takes in a job another scheduler started (a bound pod, a running Slurm job), as
    /// running since `history.ran_ms` before now, where it was found. On an error
    /// nothing of it stays.
    pub fn start_found(
        &mut self,
        spec: JobSpec,
        waited_ms: u64,
        on: Found<'_>,
        history: History,
    ) -> Result<JobId, StartError> {
        let job = self.submit_waited(spec, waited_ms).map_err(StartError::Submit)?;
        let started = match on {
            Found::Nodes(nodes) => self.start_on(job, nodes, history),
            Found::Cards(node, cards) => self.start_on_cards(job, node, cards, history),
        };
        match started {
            Ok(()) => Ok(job),
            Err(why) => {
                self.take_back(job);
                Err(StartError::DoesNotFit(why))
            }
        }
    }

    /// A running job taken in by [`Scheduler::start_found`] ended: what it held is free,
    /// and its record is dropped.
    pub fn end_found(&mut self, job: JobId) {
        self.complete(job);
        self.forget(job);
    }

    /// Undoes a submission that never ran.
    fn take_back(&mut self, job: JobId) {
        self.withdraw(job);
        self.forget(job);
    }
}

impl Asked<'_> {
    /// The job's id while it is asked about (it names nothing afterwards).
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The scheduler, to read (names, the cluster, words from [`crate::explain`]).
    pub fn scheduler(&self) -> &Scheduler {
        self.s
    }

    /// Whether it may start at all now: its admit rules and its queue's quota.
    pub fn gate(&self) -> Result<(), Closed> {
        self.s.gate(self.job)
    }

    /// Each node's verdict for one replica, in the order of `among`.
    pub fn node_verdicts(&self, among: &[NodeId]) -> Vec<NodeVerdict> {
        self.s.node_verdicts(self.job, among)
    }

    /// [`Asked::node_verdicts`] with the engine's result on each node.
    pub fn node_verdicts_with_results(&self, among: &[NodeId]) -> Vec<(NodeVerdict, NodeResult)> {
        self.s.node_verdicts_with_results(self.job, among)
    }

    /// The cards (and MIG instances) one replica would take on `node`; `None` when it
    /// does not fit.
    pub fn cards_for(&self, node: NodeId) -> Option<Vec<(usize, Option<usize>)>> {
        self.s.cards_for(self.job, node)
    }

    /// What its decision sees now — admit rules, quota arithmetic, the verdict and scores
    /// on each node of `among` — and where it would go; with `search`, the victim search a
    /// cycle would make if it waits. What a decision log records.
    pub fn account(&mut self, among: &[NodeId], search: bool) -> Account {
        crate::scheduler::account::asked(self.s, self.job, among, search)
    }

    /// The victim search a cycle would make for it now, with the verdict on every
    /// running job (tried on the model and undone).
    pub fn victim_search(&mut self) -> VictimSearch {
        self.s.victim_search_explained(self.job)
    }
}
