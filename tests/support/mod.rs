//! What several of the CLI's test files share.

pub mod slurm;
