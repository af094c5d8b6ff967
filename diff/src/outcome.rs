//! What a policy does with a case, as a test's expectations observe it: each job's state
//! (where it runs, why it waits, which rule rejected it) and every eviction (victim,
//! claimant, rule). Two outcomes are compared with rules matched across versions, so a
//! renamed rule is not a different reason.

use crate::renames::Renames;
use gpol_runtime::Event;
use gpol_runtime::State;
use gpol_runtime::scenario::Played;
use std::collections::BTreeSet;

/// One job's state after the cycle.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobOutcome {
    /// Running on these nodes (one per replica, sorted).
    Running {
        nodes: Vec<String>,
    },
    /// Waiting, for this reason (a rule, `quota`, `capacity`, `order`, `gang`,
    /// `unschedulable`); `filter`: the reason is the filter that turned away most nodes.
    Pending {
        reason: Option<String>,
        filter: bool,
    },
    /// Turned away for good by this admit rule.
    Rejected {
        rule: String,
    },
    Finished,
}

/// An eviction: the victim, its claimant, the rule that allowed it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Eviction {
    pub victim: String,
    pub claimant: String,
    pub rule: String,
}

/// A policy's outcome of one case.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    /// By job name, in submission order.
    pub jobs: Vec<(String, JobOutcome)>,
    pub evictions: Vec<Eviction>,
    /// Each node's cards: free milli-GPU and clients.
    pub cards: Vec<(String, Vec<(u32, u32)>)>,
}

impl Outcome {
    /// Runs the cycle the case ends with and reads what it decided.
    pub fn after_cycle(mut played: Played) -> Outcome {
        let decided = played.scheduler.cycle();
        played.events.extend(decided);
        Outcome::read(&played)
    }

    /// Reads every job's state and every eviction so far.
    pub fn read(played: &Played) -> Outcome {
        let s = &played.scheduler;
        let program = &s.policy().program;
        let mut jobs = Vec::new();
        for (id, job) in s.jobs().with_ids() {
            let state = match s.state(id) {
                State::Running => {
                    let mut nodes: Vec<String> =
                        job.holding.slots.iter().map(|sl| s.cluster().nodes[sl.node].name.clone()).collect();
                    nodes.sort();
                    JobOutcome::Running { nodes }
                }
                State::Pending(r) => {
                    JobOutcome::Pending { reason: r.map(|r| r.name(program)), filter: r.is_some_and(|r| r.is_filter()) }
                }
                State::Rejected(r) => JobOutcome::Rejected { rule: program.rule_name(r) },
                _ => JobOutcome::Finished,
            };
            jobs.push((job.ask.name.clone(), state));
        }
        let mut evictions: Vec<Eviction> = played
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Evicted { job, by, rule, .. } | Event::Shrunk { job, by, rule, .. } => Some(Eviction {
                    victim: s.job(*job).ask.name.clone(),
                    claimant: s.job(*by).ask.name.clone(),
                    rule: program.rule_name(*rule),
                }),
                _ => None,
            })
            .collect();
        evictions.sort();
        evictions.dedup();
        let cards = (s.cluster().nodes.iter())
            .map(|n| (n.name.clone(), n.cards.iter().map(|c| (c.free_milli, c.clients)).collect()))
            .collect();
        Outcome { jobs, evictions, cards }
    }

    /// What differs between two outcomes with the same rule names: job names, and
    /// `evict VICTIM` for an eviction one has and the other not; `cards NODE` when the
    /// same jobs hold different cards of a node.
    pub fn differing(&self, other: &Outcome) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (job, o) in &self.jobs {
            if other.jobs.iter().find(|(j, _)| j == job).map(|(_, x)| x) != Some(o) {
                out.insert(job.clone());
            }
        }
        for (job, _) in &other.jobs {
            if !self.jobs.iter().any(|(j, _)| j == job) {
                out.insert(job.clone());
            }
        }
        for e in self.evictions.iter().filter(|e| !other.evictions.contains(e)) {
            out.insert(format!("evict {}", e.victim));
        }
        for e in other.evictions.iter().filter(|e| !self.evictions.contains(e)) {
            out.insert(format!("evict {}", e.victim));
        }
        for (node, cards) in &self.cards {
            if other.cards.iter().find(|(n, _)| n == node).map(|(_, c)| c) != Some(cards) {
                out.insert(format!("cards {node}"));
            }
        }
        out
    }

    /// The outcome with every filter named as a reason blurred to "a filter": when both
    /// versions have the same filters, which of two that turn away as many nodes is
    /// named depends on their declaration order alone.
    pub fn blur_filters(&self) -> Outcome {
        let mut o = self.clone();
        for (_, j) in &mut o.jobs {
            if let JobOutcome::Pending { reason, filter: true } = j {
                *reason = Some("a filter".into());
            }
        }
        o
    }

    /// This (old) outcome with its rule names as the new version calls those rules.
    pub fn renamed(&self, renames: &Renames) -> Outcome {
        let name = |r: &str| renames.old_to_new(r).unwrap_or(r).to_string();
        let jobs = self
            .jobs
            .iter()
            .map(|(j, o)| {
                let o = match o {
                    JobOutcome::Pending { reason: Some(r), filter } => {
                        JobOutcome::Pending { reason: Some(name(r)), filter: *filter }
                    }
                    JobOutcome::Rejected { rule } => JobOutcome::Rejected { rule: name(rule) },
                    other => other.clone(),
                };
                (j.clone(), o)
            })
            .collect();
        let mut evictions: Vec<Eviction> =
            self.evictions.iter().map(|e| Eviction { rule: name(&e.rule), ..e.clone() }).collect();
        evictions.sort();
        Outcome { jobs, evictions, cards: self.cards.clone() }
    }

    /// The `expect` lines that pin down where this outcome and `other` differ, leaving
    /// out the jobs, evictions and nodes in `noise` (they differ with tie-breaking alone).
    pub fn expectations_against(&self, other: &Outcome, noise: &BTreeSet<String>) -> Vec<String> {
        let mut lines = Vec::new();
        for (job, o) in &self.jobs {
            let theirs = other.jobs.iter().find(|(j, _)| j == job).map(|(_, o)| o);
            if theirs != Some(o) && !noise.contains(job) {
                lines.extend(expectation(job, o));
            }
        }
        for e in &self.evictions {
            if !other.evictions.contains(e) && !noise.contains(&format!("evict {}", e.victim)) {
                lines.push(format!("expect {} evicted by {} under {}", e.victim, e.claimant, e.rule));
            }
        }
        if lines.is_empty() {
            // The same jobs on the same nodes: the cards they took differ.
            for ((node, mine), (_, theirs)) in self.cards.iter().zip(&other.cards) {
                if noise.contains(&format!("cards {node}")) {
                    continue;
                }
                for (k, (&(free, clients), theirs)) in mine.iter().zip(theirs).enumerate() {
                    if (free, clients) != *theirs {
                        lines.push(format!(
                            "expect count(c in {node}.cards_list: c.index == {k} and c.free == {} gpu and c.clients == {clients}) == 1",
                            crate::world::number(f64::from(free) / 1000.0)
                        ));
                    }
                }
            }
        }
        lines
    }
}

/// The `expect` line that holds for a job in this state (none for a finished job).
fn expectation(job: &str, o: &JobOutcome) -> Option<String> {
    Some(match o {
        JobOutcome::Running { nodes } => format!("expect {job} on {}", nodes.join(", ")),
        JobOutcome::Pending { reason: Some(r), .. } => format!("expect {job} pending because {r}"),
        JobOutcome::Pending { reason: None, .. } => format!("expect {job} pending"),
        JobOutcome::Rejected { rule } => format!("expect {job} rejected because {rule}"),
        JobOutcome::Finished => return None,
    })
}
