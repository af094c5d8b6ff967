//! gpol's compiled policies against general-purpose policy evaluators — `cel` and
//! `regorus` — on the same rule, one (job, node) at a time. The benchmark is in
//! `benches/baselines.rs` (`cargo bench -p gpol-comparison`); results are in
//! docs/performance.md. It lives in its own crate so the evaluators it compares against
//! are built only when it runs.
