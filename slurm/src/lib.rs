//! gpol policies in Slurm. [`submit`] compiles a policy's submit-time rules into
//! `job_submit.lua` ([`lua`] writes its expressions), over the job model of [`jobs`]. The
//! scheduling loop reads Slurm's state through [`state`] (nodes by [`sinfo`], jobs by
//! [`squeue`]) and makes one pass with [`plan`] under a [`loaded::LoadedPolicy`].
//! docs/slurm.md says what each artefact does and what Slurm cannot enforce.

pub mod accounts;
pub mod associations;
pub mod command;
pub mod config;
pub mod errors;
pub mod gres;
pub mod hostlist;
pub mod jobs;
mod json;
pub mod loaded;
pub mod lua;
pub mod marks;
pub mod nodes;
pub mod plan;
pub mod rest;
pub mod sacct;
pub mod sinfo;
pub mod squeue;
pub mod state;
pub mod submit;
pub mod topology;
