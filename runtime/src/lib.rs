//! The gpol runtime: the cluster model, quota accounting and the scheduling cycle, driven
//! by a compiled policy (JIT or interpreter). Every consumer — `gpolc test`, the
//! simulator, the adapters — goes through [`Scheduler`]: jobs and nodes come in as the
//! compiler's `spec::JobSpec`s and `spec::NodeSpec`s, decisions come out as [`Event`]s
//! and records that [`explain`] renders. docs/architecture.md shows how the modules fit
//! together.
//!
//! The root names what the runtime offers: the scheduler and what it answers with (jobs,
//! the cluster, the quota tree, verdicts and errors). The public modules are families of
//! their own: a decision's [`account`] and its words ([`explain`]), [`decision_log`]s,
//! [`scenario`]s (a policy's tests), the victim search's vocabulary ([`preempt`]), what
//! fits where ([`fit`]), fragmentation ([`frag`]) and the eviction-cycle search
//! ([`eviction_search`]).

#![warn(unreachable_pub)]

mod ask;
pub mod decision_log;
pub mod eviction_search;
pub mod explain;
mod fair_share;
mod fair_tree;
pub mod fit;
pub mod frag;
mod gang;
mod job_store;
mod jobs;
mod model;
mod model_records;
mod quota;
mod reserve;
pub mod scenario;
mod scheduler;
mod symbols;
mod wall;

pub use ask::{Asked, Found, StartError};
pub use fair_share::water_fill;
pub use gang::rank;
pub use job_store::JobStore;
pub use jobs::{Flags, Holding, Job, JobAsk, JobId, Life, Reason, Shape, Slot, State, Unschedulable};
pub use model::{Capacity, Card, Cluster, Domain, DomainId, Headroom, Instance, Node, NodeId, SpecError};
pub use quota::{Amounts, Block, Load, Position, Queue, QueueId, Quotas, Res, Terms, Usage};
pub use scheduler::place::Decision;
pub use scheduler::verdict::{Closed, NodeVerdict};
pub use scheduler::{ClockLimit, Event, Resolved, Scheduler, StartOnError, SubmitError, View, compare_keys, starts};
pub use scheduler::{account, preempt};
pub use symbols::Symbols;
pub use wall::{WallClock, unix_ms_of_secs};
