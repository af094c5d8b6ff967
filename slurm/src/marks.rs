//! What the scheduling loop writes on a job in Slurm — its `AdminComment`, and the
//! `Comment` of a job it cancels — and reads back on the next pass to know its own
//! decisions. `job_submit.lua --hold-for-loop` writes the first of them at submission, so
//! both the script ([`crate::submit`]) and the loop ([`crate::plan`]) take them from here.

/// What the loop writes in a job's `AdminComment` when it holds it.
pub const HELD: &str = "gpol: held: ";
/// What the loop writes in the `AdminComment` of a job it pins to nodes, until Slurm starts
/// it: the job is then the loop's decision in flight, and the next pass counts it as
/// started there rather than placing it afresh.
pub const PLACED: &str = "gpol: placed";
/// The hold `job_submit.lua --hold-for-loop` puts on every job, and the loop on every job
/// it evicts (with why, in parentheses): kept until gpol places it.
pub const WAITING: &str = "gpol: held: waiting for the scheduling loop";
/// What the loop writes, before the rule's message, in the `Comment` (and `AdminComment`)
/// of a job it cancels.
pub const CANCELLED: &str = "gpol: cancelled: ";
