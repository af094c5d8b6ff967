//! The state the scheduler schedules: the cluster, the quota tree and its accounting, the
//! jobs, the clock, reservations, and the records rules read of the nodes and domains.
//! Invariants: `running` and `short_gangs` hold exactly the running jobs and the running
//! elastic gangs below their count; `reservations` and `reserved` are each other's
//! inverse; `table` and `domains` mirror the cluster's nodes and domains. The changes in
//! `state` keep them so.

use crate::job_store::JobStore;
use crate::jobs::{JobId, Shape, State};
use crate::model::{Cluster, NodeId};
use crate::quota::Quotas;
use crate::symbols::Symbols;
use gpol_compiler::clock::Clock;
use gpol_compiler::schema::{DomainRec, NodeTable, ShapeTable};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone)]
pub(crate) struct World {
    pub(crate) syms: Symbols,
    pub(crate) cluster: Cluster,
    pub(crate) quotas: Quotas,
    pub(crate) jobs: JobStore,
    pub(crate) now_ms: u64,
    /// Where `now_ms` falls in real time, in the policy's time zone.
    pub(crate) clock: Clock,
    /// The records rules read of the nodes (and their cards) and of the domains.
    pub(crate) table: NodeTable,
    pub(crate) domains: Vec<DomainRec>,
    /// The workload's popular request shapes (`cluster.task_shapes`), set by whoever
    /// knows the workload (the simulator, from its trace).
    pub(crate) task_shapes: ShapeTable,
    /// Every request shape seen, numbered in order of first sight.
    pub(crate) shapes: HashMap<Shape, usize>,
    /// The running jobs, so nothing scans finished ones.
    pub(crate) running: BTreeSet<JobId>,
    /// The running elastic gangs with fewer replicas than they ask for (they may grow),
    /// so growth does not scan every running job at every cycle.
    pub(crate) short_gangs: BTreeSet<JobId>,
    /// Nodes held for a job that waited past `reserve_after`, by job and by node.
    pub(crate) reservations: BTreeMap<JobId, Vec<NodeId>>,
    pub(crate) reserved: HashMap<NodeId, JobId>,
    /// Whether users' usage is kept (rules read it, or a test's expectations may).
    pub(crate) users_tracked: bool,
}

impl World {
    /// An empty cluster and no jobs, under the quota tree `quotas`.
    pub(super) fn new(syms: Symbols, quotas: Quotas, cluster: Cluster, clock: Clock, users_tracked: bool) -> World {
        World {
            syms,
            cluster,
            quotas,
            jobs: JobStore::default(),
            now_ms: 0,
            clock,
            table: NodeTable::default(),
            domains: Vec::new(),
            task_shapes: ShapeTable::default(),
            shapes: HashMap::new(),
            running: BTreeSet::new(),
            short_gangs: BTreeSet::new(),
            reservations: BTreeMap::new(),
            reserved: HashMap::new(),
            users_tracked,
        }
    }

    /// Sets a job's state (a waiting job's without its reason: that is its class's),
    /// keeping `running` and `short_gangs`; whether it was waiting before.
    #[inline]
    pub(crate) fn set_job_state(&mut self, job: JobId, state: State) -> bool {
        let j = &mut self.jobs[job];
        let (was_pending, was_running) = (j.is_pending(), j.life.state == State::Running);
        let (now_pending, now_running) = (matches!(state, State::Pending(_)), state == State::Running);
        if was_running != now_running {
            if now_running {
                self.running.insert(job);
            } else {
                self.running.remove(&job);
            }
        }
        // Running elastic gangs below their count, which may grow.
        if now_running && j.ask.min_replicas < j.ask.replicas && j.holding.slots.len() < j.ask.replicas as usize {
            self.short_gangs.insert(job);
        } else {
            self.short_gangs.remove(&job);
        }
        j.life.state = if now_pending { State::Pending(None) } else { state };
        was_pending
    }

    /// Holds `nodes` for `job`.
    pub(crate) fn reserve(&mut self, job: JobId, nodes: Vec<NodeId>) {
        for &n in &nodes {
            self.reserved.insert(n, job);
        }
        self.reservations.insert(job, nodes);
    }

    /// Releases the nodes `job` holds in reserve; whether it held any.
    pub(crate) fn unreserve(&mut self, job: JobId) -> bool {
        let Some(nodes) = self.reservations.remove(&job) else { return false };
        for n in nodes {
            self.reserved.remove(&n);
        }
        true
    }

    /// The clock as a signed time, to compare with jobs' times.
    #[inline]
    pub(crate) fn now(&self) -> i64 {
        i64::try_from(self.now_ms).unwrap_or(i64::MAX)
    }
}
