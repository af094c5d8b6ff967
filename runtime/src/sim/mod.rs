//! The simulator (`gpolc sim`): replays a workload trace on a cluster under a compiled
//! policy and reports what happened — allocation and utilization over time, queueing
//! delay, fairness, preemptions, fragmentation (docs/simulator.md).
//!
//! Inputs come from [`spec`] (clusters), [`trace`] (gpol's trace format), [`openb`]
//! (the Alibaba GPU trace) and [`generate`] (synthetic workloads); [`core`] runs the
//! discrete-event replay and fills in a [`report::Report`].

pub mod core;
pub mod frag;
pub mod input;
pub mod openb;
pub mod report;
pub mod series;
pub mod spec;
pub mod trace;

pub use core::{Config, Control, Mode, SimError, Workload, run};
