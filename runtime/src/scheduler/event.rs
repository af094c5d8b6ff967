//! What the scheduler did, in order: tests, `explain`, the simulator and adapters read it.

use crate::jobs::JobId;
use crate::model::NodeId;
use gpol_compiler::ir::RuleId;

/// Something that happened. Rules are named by identity; `explain` renders names.
/// [`crate::Scheduler::cycle`] returns what it decided, [`crate::Scheduler::fail_node`]
/// the jobs it requeued; `Submitted` and `Finished` are what drivers that keep a history
/// (the simulator, `gpolc test`) record of their own calls.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Submitted {
        job: JobId,
        at_ms: u64,
    },
    /// The job started; one node per replica.
    Placed {
        job: JobId,
        nodes: Vec<NodeId>,
        at_ms: u64,
    },
    /// A running elastic gang took one more replica, on this node.
    Grown {
        job: JobId,
        node: NodeId,
        at_ms: u64,
    },
    /// The job was turned away for good by this admit rule.
    Rejected {
        job: JobId,
        rule: RuleId,
        at_ms: u64,
    },
    Finished {
        job: JobId,
        at_ms: u64,
    },
    /// A running job lost its node and went back to waiting, keeping `kept_ms` of the
    /// work it did since it started (up to its last checkpoint) and losing `lost_gpu_s`.
    Requeued {
        job: JobId,
        node: NodeId,
        kept_ms: u64,
        lost_gpu_s: f64,
        at_ms: u64,
    },
    /// A running job was evicted for `by` under `rule`, losing `lost_gpu_s` GPU-seconds
    /// of work (its GPUs times the time since its last checkpoint), and waits again.
    Evicted {
        job: JobId,
        by: JobId,
        rule: RuleId,
        kept_ms: u64,
        lost_gpu_s: f64,
        at_ms: u64,
    },
    /// A running elastic gang gave up its replica on `node` for `by` under `rule`, losing
    /// `lost_gpu_s` GPU-seconds of that replica's work; it runs on with the rest.
    Shrunk {
        job: JobId,
        by: JobId,
        rule: RuleId,
        node: NodeId,
        lost_gpu_s: f64,
        at_ms: u64,
    },
    /// A job that waited past `reserve_after` holds these nodes until it starts.
    Reserved {
        job: JobId,
        nodes: Vec<NodeId>,
        at_ms: u64,
    },
}

/// How many jobs `events` started (placements; growth of a running gang is not a start).
pub fn starts(events: &[Event]) -> usize {
    events.iter().filter(|e| matches!(e, Event::Placed { .. })).count()
}
