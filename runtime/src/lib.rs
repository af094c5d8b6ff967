//! The gpol runtime: the cluster model, quota accounting and the scheduling cycle, driven
//! by a compiled policy (JIT or interpreter). Consumers — `gpolc test`, the simulator,
//! the adapters — all go through [`cycle::Scheduler`].

pub mod cycle;
pub mod explain;
pub mod fit;
pub mod gang;
pub mod jobs;
pub mod model;
pub mod place;
pub mod preempt;
pub mod quota;
pub mod records;
pub mod reserve;
pub mod scenario;
pub mod sim;
pub mod symbols;

pub use gpol_compiler::schema;
