//! A diff's result as data: a verdict per decision kind, with its strength, the
//! counterexamples behind a difference, renames, and how much was searched. Rendering
//! (human, JSON, GitHub annotations) is in `render`.

use crate::renames::Rename;
use serde::Serialize;

/// The decisions a policy makes, each compared on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Whether a job is admitted, and which admit rules turn it away.
    Admission,
    /// Whether the quota tree lets a job start.
    Quota,
    /// Which nodes pass the filters for a job.
    Feasibility,
    /// The order of the nodes a job may go to.
    Ranking,
    /// The card a shared or MIG request lands on.
    CardChoice,
    /// Where a gang's replicas go.
    Gang,
    /// The order queues take turns in.
    QueueOrder,
    /// The order of jobs within a queue.
    JobOrder,
    /// Which running jobs a claimant may evict.
    VictimEligibility,
    /// The jobs a claimant does evict.
    VictimSet,
}

impl Decision {
    pub const ALL: [Decision; 10] = [
        Decision::Admission,
        Decision::Quota,
        Decision::Feasibility,
        Decision::Ranking,
        Decision::CardChoice,
        Decision::Gang,
        Decision::QueueOrder,
        Decision::JobOrder,
        Decision::VictimEligibility,
        Decision::VictimSet,
    ];

    /// How reports name it.
    pub fn title(self) -> &'static str {
        match self {
            Decision::Admission => "admission",
            Decision::Quota => "quota admission",
            Decision::Feasibility => "feasibility per node",
            Decision::Ranking => "node ranking",
            Decision::CardChoice => "card choice",
            Decision::Gang => "gang placement",
            Decision::QueueOrder => "queue order",
            Decision::JobOrder => "job order",
            Decision::VictimEligibility => "victim eligibility",
            Decision::VictimSet => "victim set",
        }
    }

    /// What "more" means for it, if it has a direction.
    pub fn more(self) -> Option<&'static str> {
        match self {
            Decision::Admission | Decision::Quota => Some("admits"),
            Decision::Feasibility => Some("allows nodes"),
            Decision::VictimEligibility => Some("allows evictions"),
            _ => None,
        }
    }
}

/// Which way a difference goes: NEW admits or allows more, less, or some of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    More,
    Less,
    Incomparable,
    /// An order or a choice: no more or less.
    Changed,
}

impl Direction {
    /// The direction of several differences together.
    pub fn join(self, other: Direction) -> Direction {
        match (self, other) {
            (a, b) if a == b => a,
            (Direction::Changed, x) | (x, Direction::Changed) => x,
            _ => Direction::Incomparable,
        }
    }
}

/// A verdict on one decision kind, strongest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Equivalent on every input: both versions decide it with the same rules and the
    /// same declarations (up to names, order and spelling).
    Proved { reason: String },
    /// Equivalent on every case of a stated finite domain, all of which were tried.
    UpToBound { domain: String, cases: u64 },
    /// No difference in this many decisions of the kind.
    Sampled { samples: u64 },
    /// Different, with a direction and counterexamples.
    Different { direction: Direction },
    /// The decision differed (`unconfirmed` times), but no schedule that shows it was
    /// found within the budget; or (`0`) it was neither proved nor reached by any case.
    Inconclusive { unconfirmed: u64 },
}

impl Verdict {
    pub fn is_different(&self) -> bool {
        matches!(self, Verdict::Different { .. })
    }
}

/// A rule of one version, where it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    /// As reports introduce it: `filter no_mig`, `job_order key 1`.
    pub label: String,
    pub file: String,
    pub line: usize,
    pub column: usize,
}

/// One difference, shown as a test a reviewer can run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Counterexample {
    pub decision: Decision,
    pub direction: Direction,
    /// The rules of each version that decided it.
    pub old_rules: Vec<RuleRef>,
    pub new_rules: Vec<RuleRef>,
    /// A `test` block that passes on NEW and fails on OLD (its steps, then NEW's
    /// expectations; OLD's are in `old_expectations`).
    pub test: String,
    pub old_expectations: Vec<String>,
    pub new_expectations: Vec<String>,
}

/// The verdict on one decision kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DecisionReport {
    pub decision: Decision,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Decisions of this kind compared.
    pub samples: u64,
    /// Of those, how many differed (shown or not).
    pub differed: u64,
    /// Differences whose every schedule moved with how ties were broken under both
    /// versions (the noise baseline): never reported as changes.
    pub ties: u64,
    pub counterexamples: Vec<Counterexample>,
}

/// The whole result of a diff.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub old: String,
    pub new: String,
    pub seed: u64,
    /// Cases (clusters with jobs) played on both versions.
    pub cases: u64,
    /// (job, node) decisions evaluated on both.
    pub pairs: u64,
    pub decisions: Vec<DecisionReport>,
    pub renames: Vec<Rename>,
    /// What limited the comparison (no queue in common, cases that could not be played).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Trace replays, when a trace was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replay: Vec<crate::replay::Replay>,
}

/// Exit codes of `gpolc diff`.
pub const SAME: u8 = 0;
pub const CHANGED: u8 = 1;
pub const INCONCLUSIVE: u8 = 3;

impl Report {
    /// 1 if any decision differs (or a replayed trace diverged), else 3 if any is
    /// inconclusive, else 0.
    pub fn exit_code(&self) -> u8 {
        let diverged = self.replay.iter().any(|r| r.first_divergence.is_some());
        if diverged || self.decisions.iter().any(|d| d.verdict.is_different()) {
            CHANGED
        } else if self.decisions.iter().any(|d| matches!(d.verdict, Verdict::Inconclusive { .. })) {
            INCONCLUSIVE
        } else {
            SAME
        }
    }
}
