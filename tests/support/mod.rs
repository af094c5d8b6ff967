//! What several of the CLI's test files share.

// Each test file is its own crate and uses part of these.
#[allow(dead_code)]
pub mod slurm;
