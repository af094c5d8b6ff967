//! The C ABI of gpol: `libgpol.so` and `include/gpol.h`. A C program compiles a policy
//! from text (its diagnostics returned as data), makes a cluster of nodes, and asks, for
//! a job, whether it may start (`gpol_cluster_admit`) and each node's result
//! (`gpol_cluster_filter_score`: the policy's fused filters and scores, the exact fit and
//! the node's verdict) — the same answers the Rust API gives, through the same
//! `Scheduler` every adapter uses. It also exports what a `gpolc build` object imports,
//! and `include/gpol_records.h` gives C the records such an object reads.
//!
//! Modules: [`types`] (everything C sees), [`ffi`] (the exported functions), [`convert`]
//! (C's records read into gpol's), [`policy`] and [`cluster`] (the work, on gpol's own
//! types), [`error`] and [`guard`] (failures as values, panics caught), [`records_header`]
//! (`gpol_records.h`). `unsafe` is confined to `ffi` and `convert`. docs/capi.md is the
//! guide for C programmers.

pub mod cluster;
pub mod convert;
pub mod error;
pub mod ffi;
pub mod guard;
pub mod policy;
pub mod records_header;
pub mod types;

pub use cluster::GpolCluster;
pub use error::GpolError;
pub use ffi::*;
pub use policy::{GpolDiagnostics, GpolPolicy};
pub use types::*;
