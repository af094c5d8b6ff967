//! The gpol runtime: the cluster model, quota accounting and the scheduling cycle, driven
//! by a compiled policy (JIT or interpreter). Every consumer — `gpolc test`, the
//! simulator, the adapters — goes through [`Scheduler`]: jobs and nodes come in as
//! [`JobSpec`]s and [`NodeSpec`]s, decisions come out as [`Event`]s and records that
//! [`explain`] renders. docs/architecture.md shows how the modules fit together.

pub mod account;
pub mod ask;
pub mod cycles;
pub mod decision_log;
pub mod explain;
pub mod fair_share;
pub mod fair_tree;
pub mod fit;
pub mod frag;
pub mod gang;
pub mod job_store;
pub mod jobs;
pub mod model;
pub mod place;
pub mod preempt;
pub mod quota;
pub mod records;
pub mod reserve;
pub mod scenario;
pub mod scheduler;
pub mod symbols;
pub mod verdict;
pub mod wall;

pub use ask::{Asked, Found, StartError};
pub use scheduler::{ClockLimit, Event, Resolved, Scheduler, SubmitError};
pub use wall::WallClock;
