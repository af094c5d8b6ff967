//! A cluster as C holds it: a runtime [`Scheduler`] over the nodes given, the jobs
//! started on them, and the clock. A job is asked about ([`Scheduler::ask`]): asking
//! changes nothing.

use crate::error::{Failure, reserve};
use crate::types::{GpolAdmit, GpolNodeResult, GpolReason, GpolVerdict};
use gpol_compiler::engine::CompiledPolicy;
use gpol_compiler::ir::RuleId;
use gpol_compiler::spec::{History, JobSpec, NodeSpec};
use gpol_runtime::NodeId;
use gpol_runtime::NodeVerdict;
use gpol_runtime::{Asked, Found, Scheduler, StartError, WallClock};
use gpol_runtime::{JobId, Reason};
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// A node as the cluster takes it: its description, and whether it is out of service.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInput {
    pub spec: NodeSpec,
    pub cordoned: bool,
}

/// A cluster (opaque to C). Calls on one cluster take turns behind its lock, so it may
/// be used from any thread; a call that panicked leaves the lock poisoned, and every
/// later call fails with `GPOL_STATUS_PANIC`.
pub struct GpolCluster {
    inner: Mutex<Inner>,
}

pub struct Inner {
    s: Scheduler,
    nodes: HashMap<String, NodeId>,
    /// Jobs started through `start`, not yet completed.
    running: HashSet<JobId>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cluster of {} nodes, {} jobs started", self.node_count(), self.running.len())
    }
}

impl std::fmt::Debug for GpolCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inner.try_lock() {
            Ok(inner) => write!(f, "GpolCluster({inner:?})"),
            Err(_) => f.write_str("GpolCluster(in use or poisoned)"),
        }
    }
}

// C may hand a cluster to any thread.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<GpolCluster>();
    send_sync::<crate::policy::GpolPolicy>();
};

impl GpolCluster {
    /// A cluster running `policy` on these nodes, in this order (node `i` is result `i`
    /// of [`Inner::filter_score`]).
    pub fn new(policy: &CompiledPolicy, nodes: Vec<NodeInput>) -> Result<GpolCluster, Failure> {
        let mut s = Scheduler::new(policy.clone());
        let mut ids = HashMap::new();
        ids.try_reserve(nodes.len())
            .map_err(|e| Failure::too_large(format!("{} items: {e}", nodes.len())).at("nodes"))?;
        for (i, n) in nodes.into_iter().enumerate() {
            let id = s.add_node(&n.spec).map_err(|e| {
                let what = format!("node `{}`: {}: {}", e.node, e.field, e.message);
                Failure::refused(what).at(format!("[{i}]")).at("nodes")
            })?;
            if n.cordoned {
                s.drain_node(id);
            }
            ids.insert(n.spec.name, id);
        }
        Ok(GpolCluster { inner: Mutex::new(Inner { s, nodes: ids, running: HashSet::new() }) })
    }

    /// The cluster, for one call; an error if an earlier call panicked inside it.
    pub fn lock(&self) -> Result<MutexGuard<'_, Inner>, Failure> {
        self.inner.lock().map_err(|_| {
            Failure::new(
                crate::types::GpolStatus::Panic,
                "an earlier call panicked inside this cluster; it can only be freed",
            )
        })
    }
}

impl Inner {
    pub fn node_count(&self) -> usize {
        self.s.cluster().nodes.len()
    }

    pub fn now_ms(&self) -> u64 {
        self.s.now_ms()
    }

    /// The scheduler behind the cluster, to read.
    pub fn scheduler(&self) -> &Scheduler {
        &self.s
    }

    /// Answers `question` about a job, changing nothing.
    fn ask<R>(&mut self, job: JobSpec, question: impl FnOnce(&mut Asked<'_>) -> R) -> Result<R, Failure> {
        self.s.ask(job, 0, question).map_err(|e| Failure::refused(e.to_string()).at("job"))
    }

    /// Whether the job may start at all now.
    pub fn admit(&mut self, job: JobSpec) -> Result<GpolAdmit, Failure> {
        let gate = self.ask(job, |asked| asked.gate())?;
        Ok(match gate {
            Ok(()) => GpolAdmit { admitted: true, admit_rule: -1, reason: GpolReason::None, for_good: false },
            Err(closed) => {
                let (reason, admit_rule) = match closed.reason {
                    Reason::Rule(RuleId::Admit(i)) => (GpolReason::AdmitRule, i32::from(i)),
                    Reason::Rule(_) => (GpolReason::Filter, -1),
                    Reason::Quota(_) => (GpolReason::Quota, -1),
                    Reason::Unschedulable(_) => (GpolReason::Unschedulable, -1),
                    Reason::Capacity => (GpolReason::Capacity, -1),
                    Reason::Gang => (GpolReason::Gang, -1),
                    Reason::Order => (GpolReason::Order, -1),
                };
                GpolAdmit { admitted: false, admit_rule, reason, for_good: closed.for_good }
            }
        })
    }

    /// Each node's result for one replica of the job, in the order the nodes were given.
    pub fn filter_score(&mut self, job: JobSpec) -> Result<Vec<GpolNodeResult>, Failure> {
        // The result arrays are as long as the cluster: their room is asked for, so a
        // short memory fails the call instead of aborting the caller.
        let n = self.node_count();
        let (mut all, mut out, mut fits): (Vec<NodeId>, Vec<GpolNodeResult>, Vec<usize>) =
            (Vec::new(), Vec::new(), Vec::new());
        reserve(&mut all, n)?;
        reserve(&mut out, n)?;
        reserve(&mut fits, n)?;
        all.extend(0..n);
        let verdicts = self.ask(job, |asked| asked.node_verdicts_with_results(&all))?;
        out.extend(verdicts.iter().map(|(v, r)| node_result(*v, r)));
        // The fitting nodes in the policy's order; equals keep the order they were given.
        fits.extend((0..verdicts.len()).filter(|&i| matches!(verdicts[i].0, NodeVerdict::Fits(_))));
        fits.sort_by(|&a, &b| self.s.rank_nodes(&verdicts[a].1, &verdicts[b].1).then(a.cmp(&b)));
        for (rank, &i) in fits.iter().enumerate() {
            out[i].rank = i32::try_from(rank).unwrap_or(i32::MAX);
        }
        Ok(out)
    }

    /// Starts a job as already running, one replica on each named node; its id.
    pub fn start(&mut self, job: JobSpec, nodes: &[String], history: History) -> Result<JobId, Failure> {
        let replicas = job.replicas;
        if nodes.is_empty() || nodes.len() > replicas as usize {
            let what = format!("{} node names for a job of {replicas} replica(s): give 1 to {replicas}", nodes.len());
            return Err(Failure::invalid(what).at("node_names"));
        }
        let mut ids: Vec<NodeId> = Vec::new();
        reserve(&mut ids, nodes.len()).map_err(|e| e.at("node_names"))?;
        for (i, name) in nodes.iter().enumerate() {
            match self.nodes.get(name) {
                Some(&id) => ids.push(id),
                None => {
                    let what = format!("the cluster has no node `{}`", gpol_compiler::diag::snippet(name));
                    return Err(Failure::invalid(what).at(format!("[{i}]")).at("node_names"));
                }
            }
        }
        let id = self.s.start_found(job, 0, Found::Nodes(&ids), history).map_err(|e| match e {
            StartError::Submit(e) => Failure::refused(e.to_string()).at("job"),
            StartError::DoesNotFit(why) => Failure::refused(why.to_string()),
        })?;
        self.running.insert(id);
        Ok(id)
    }

    /// A job started with [`Inner::start`] ends: what it held is free.
    pub fn complete(&mut self, id: u64) -> Result<(), Failure> {
        let known = usize::try_from(id).ok().filter(|i| self.running.contains(i));
        let Some(id) = known else {
            return Err(Failure::invalid(format!("no running job has id {id}")).at("job_id"));
        };
        self.running.remove(&id);
        self.s.end_found(id);
        Ok(())
    }

    /// Ties clock 0 to real time, `unix_ms` after the Unix epoch. (The caller gives each
    /// started job's `ran_ms`: [`WallClock::elapsed_ms`] is how the other adapters read it.)
    pub fn set_clock_origin(&mut self, unix_ms: i64) -> Result<(), Failure> {
        if !gpol_compiler::clock::is_real_time(unix_ms) {
            return Err(Failure::invalid(format!("{unix_ms} ms is not a time of years 1 to 9999")).at("unix_ms"));
        }
        self.s.start_wall_clock(WallClock::at_unix_ms(unix_ms));
        Ok(())
    }

    /// Moves the clock (milliseconds since the cluster was made) to `ms`; it never goes
    /// back, nor past 100 years.
    pub fn set_clock(&mut self, ms: u64) -> Result<(), Failure> {
        let now = self.s.now_ms();
        if ms < now {
            return Err(Failure::invalid(format!("{ms} is before the clock's {now}: it never goes back")).at("ms"));
        }
        self.s.advance(ms - now).map_err(|e| Failure::too_large(e.to_string()).at("ms"))
    }
}

fn node_result(v: NodeVerdict, r: &gpol_compiler::engine::NodeResult) -> GpolNodeResult {
    let (verdict, filter) = match v {
        NodeVerdict::Fits(_) => (GpolVerdict::Fits, -1),
        NodeVerdict::Filtered(RuleId::Filter(i)) => (GpolVerdict::Filtered, i32::from(i)),
        NodeVerdict::Filtered(_) => (GpolVerdict::Filtered, -1),
        NodeVerdict::Full => (GpolVerdict::Full, -1),
        NodeVerdict::TooSmall => (GpolVerdict::TooSmall, -1),
        NodeVerdict::Down => (GpolVerdict::Down, -1),
        NodeVerdict::Model => (GpolVerdict::Model, -1),
        NodeVerdict::Reserved => (GpolVerdict::Reserved, -1),
        NodeVerdict::Quota(_) => (GpolVerdict::Quota, -1),
    };
    GpolNodeResult {
        verdict,
        filter,
        rank: -1,
        feasible: r.feasible,
        rejected_by: r.rejected_by,
        tiers: r.tiers,
        score: r.score,
        faults: r.faults,
    }
}
