//! The decision log: every decision an adapter makes, as one JSON line — when, by which
//! policy (the SHA-256 of its file), on which inputs (the SHA-256 of what it was given),
//! for which job, and the [`Account`] of what the decision saw, rule names and reasons
//! included. `gpolc serve` and `gpolc slurm run` write it; `gpolc explain --log` reads it
//! back and renders an account as `gpolc explain` does, as OPA's decision logs let
//! operators answer "why" after the fact.
//!
//! Lines are appended whole (one write each, under a lock, to a file opened `O_APPEND`),
//! so a log rotated by `copytruncate` or written by two processes stays a list of whole
//! records. Reading streams the file: any number of records, each line at most
//! [`MAX_LINE_BYTES`].

use crate::scheduler::account::Account;
use gpol_compiler::files::{self, FileError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The longest line read back (an account of a job on 10,000 nodes is about 2 MB).
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// One decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// When it was made: RFC 3339, UTC.
    pub at: String,
    /// What made it: `gpolc serve`, `gpolc slurm run`.
    pub source: String,
    /// The version of gpol that made it.
    pub version: String,
    /// The policy file's SHA-256 (`sha256:…`, as `sha256sum` prints it).
    pub policy: String,
    /// The SHA-256 of what the decision was given: the request's body (the extender), or
    /// Slurm's nodes and jobs as the pass read them.
    pub inputs: String,
    pub verb: Verb,
    /// The job as the adapter names it: a pod's `namespace/name`, a Slurm job's id.
    pub job: String,
    /// What the decision saw, and how it came out.
    pub account: Account,
}

/// Which decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// The extender's filter: the nodes the pod may go to.
    Filter,
    /// The extender's prioritize: how those nodes rank.
    Prioritize,
    /// The extender's preempt: the victims the policy stands behind.
    Preempt,
    /// The extender's bind: the place reserved, or refused.
    Bind,
    /// One turn of a scheduling cycle (the Slurm loop's pass).
    Cycle,
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verb::Filter => "filter",
            Verb::Prioritize => "prioritize",
            Verb::Preempt => "preempt",
            Verb::Bind => "bind",
            Verb::Cycle => "cycle",
        })
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for b in hash {
        text.push_str(&format!("{b:02x}"));
    }
    text
}

/// The time now, as records give it.
pub(crate) fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Record {
    /// A record of a decision made now, by this version of gpol.
    pub fn now(source: &str, policy: &str, inputs: &str, verb: Verb, job: &str, account: Account) -> Record {
        Record {
            at: now(),
            source: source.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            policy: policy.to_string(),
            inputs: inputs.to_string(),
            verb,
            job: job.to_string(),
            account,
        }
    }

    /// Whether it is a decision about `job`: by the adapter's name for it, or the name the
    /// policy's rules saw.
    pub fn is_about(&self, job: &str) -> bool {
        self.job == job || self.account.job == job
    }
}

/// Why the log could not be written or read. Each names the file (and the line).
#[derive(Debug)]
pub enum LogError {
    File(FileError),
    Write { path: PathBuf, error: std::io::Error },
    Read { path: PathBuf, line: u64, error: std::io::Error },
    TooLong { path: PathBuf, line: u64 },
    Malformed { path: PathBuf, line: u64, error: serde_json::Error },
}

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogError::File(e) => e.fmt(f),
            LogError::Write { path, error } => write!(f, "{}: cannot write the decision: {error}", path.display()),
            LogError::Read { path, line, error } => write!(f, "{}:{line}: {error}", path.display()),
            LogError::TooLong { path, line } => {
                write!(f, "{}:{line}: longer than {MAX_LINE_BYTES} bytes: not a decision record", path.display())
            }
            LogError::Malformed { path, line, error } => {
                // serde_json counts lines within the record: its column is the one to give.
                write!(f, "{}:{line}: not a decision record: {error}", path.display())
            }
        }
    }
}

impl std::error::Error for LogError {}

/// A decision log open for appending, shared by the threads that decide.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    file: Mutex<File>,
}

impl Writer {
    /// Opens (or creates) the log at `path`, which must not be one of `inputs` (the
    /// policy file). See [`files::append`] for what is refused.
    pub fn open(path: &Path, inputs: &[&Path]) -> Result<Writer, LogError> {
        let file = files::append(path, inputs).map_err(LogError::File)?;
        Ok(Writer { path: path.to_path_buf(), file: Mutex::new(file) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record, a whole line in one write.
    pub fn write(&self, record: &Record) -> Result<(), LogError> {
        let mut line = serde_json::to_vec(record)
            .map_err(|e| LogError::Write { path: self.path.clone(), error: std::io::Error::other(e) })?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(&line).map_err(|error| LogError::Write { path: self.path.clone(), error })
    }
}

/// Reads the log at `path` record by record, in the order written, giving each to `each`
/// with its line number. Blank lines are skipped; the first malformed line stops the
/// reading with an error naming it.
pub fn read(path: &Path, mut each: impl FnMut(u64, Record)) -> Result<(), LogError> {
    let (file, _) = files::open(path, u64::MAX).map_err(LogError::File)?;
    read_from(path, BufReader::new(file), &mut each)
}

fn read_from(path: &Path, mut reader: impl BufRead, each: &mut impl FnMut(u64, Record)) -> Result<(), LogError> {
    let mut line = Vec::new();
    for number in 1u64.. {
        line.clear();
        let read = reader.by_ref().take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut line);
        let n = read.map_err(|error| LogError::Read { path: path.to_path_buf(), line: number, error })?;
        if n == 0 {
            break;
        }
        if line.len() as u64 > MAX_LINE_BYTES {
            return Err(LogError::TooLong { path: path.to_path_buf(), line: number });
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let record = serde_json::from_slice(&line).map_err(|error| LogError::Malformed {
            path: path.to_path_buf(),
            line: number,
            error,
        })?;
        each(number, record);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::account::{Chosen, NodeSaw, NodeSeen, Outcome, ScoreSeen, SearchSeen, VictimSaw};
    use crate::scheduler::preempt::Place;

    fn account() -> Account {
        Account {
            job: "train".into(),
            queue: "research".into(),
            state: "pending (capacity)".into(),
            request: "8 whole cards, 0 cpu, 0 GiB".into(),
            order: None,
            admits: Vec::new(),
            quota: Vec::new(),
            quota_block: None,
            nodes: vec![
                NodeSeen { name: "n1".into(), verdict: NodeSaw::OutOfService },
                NodeSeen {
                    name: "n2".into(),
                    verdict: NodeSaw::Passes {
                        total: 3.5,
                        tiers: Some([1.0, f64::INFINITY, 0.0, -0.5]),
                        scores: vec![ScoreSeen {
                            rule: "pack".into(),
                            value: 1.0,
                            fault: Some(f64::NEG_INFINITY),
                            tier: None,
                            weight: 2.0,
                        }],
                        fits: false,
                    },
                },
            ],
            gang: None,
            outcome: Outcome::Waits { reason: "capacity".into(), detail: Some("no node has 8 free cards".into()) },
            victims: Some(SearchSeen {
                considered: vec![(
                    "old".into(),
                    VictimSaw::Candidate { place: Place::Other, rules: vec!["victim reclaim".into()], cost: 2.0 },
                )],
                chosen: Some(Chosen {
                    victims: vec![("old".into(), "victim reclaim".into(), f64::INFINITY)],
                    cost: f64::INFINITY,
                    nodes: vec!["n2".into()],
                }),
            }),
            holds: Vec::new(),
        }
    }

    #[test]
    fn a_record_reads_back_as_written_infinities_included() {
        let r = Record::now("gpolc serve", &digest(b"policy"), &digest(b"{}"), Verb::Filter, "ns/train", account());
        let line = serde_json::to_string(&r).expect("serialized");
        assert!(line.contains(r#""fault":"-inf""#), "{line}");
        assert!(line.contains(r#""verdict":{"kind":"out_of_service"}"#), "{line}");
        let back: Record = serde_json::from_str(&line).expect("read back");
        assert_eq!(back, r);
    }

    #[test]
    fn digest_is_sha256_as_sha256sum_prints_it() {
        assert_eq!(digest(b"abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn written_records_are_read_in_order_and_a_bad_line_is_named() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("decisions.jsonl");
        let w = Writer::open(&path, &[]).expect("opened");
        for job in ["a", "b"] {
            w.write(&Record::now("test", "p", "i", Verb::Cycle, job, account())).expect("written");
        }
        let mut jobs = Vec::new();
        read(&path, |line, r| jobs.push((line, r.job))).expect("read");
        assert_eq!(jobs, [(1, "a".to_string()), (2, "b".to_string())]);

        let mut text = std::fs::read(&path).expect("bytes");
        text.extend_from_slice(b"\n{\"at\": 3}\n");
        std::fs::write(&path, text).expect("written");
        let e = read(&path, |_, _| {}).expect_err("a bad line");
        let message = e.to_string();
        assert!(message.starts_with(&format!("{}:4: not a decision record: ", path.display())), "{message}");
    }

    /// Decisions made at once on several threads (the extender's verbs and its binds in
    /// the background), and by a second writer on the same file (a restarted or second
    /// process): every line is a whole record, none lost.
    #[test]
    fn overlapping_writers_leave_whole_records() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("decisions.jsonl");
        let first = Writer::open(&path, &[]).expect("opened");
        let second = Writer::open(&path, &[]).expect("opened again");
        let mut big = account();
        big.nodes = (0..2_000).map(|i| NodeSeen { name: format!("n{i}"), verdict: NodeSaw::OutOfService }).collect();
        std::thread::scope(|scope| {
            for (t, w) in [&first, &second, &first, &second].into_iter().enumerate() {
                let big = &big;
                scope.spawn(move || {
                    for i in 0..50 {
                        let r = Record::now("test", "p", "i", Verb::Bind, &format!("{t}/{i}"), big.clone());
                        w.write(&r).expect("written");
                    }
                });
            }
        });
        let mut jobs = std::collections::BTreeSet::new();
        read(&path, |_, r| {
            assert_eq!(r.account.nodes.len(), 2_000);
            jobs.insert(r.job);
        })
        .expect("every line a record");
        assert_eq!(jobs.len(), 200);
    }

    #[test]
    fn a_line_past_the_limit_is_refused_without_reading_it_whole() {
        let long = std::io::repeat(b'x').take(MAX_LINE_BYTES + 10);
        let e = read_from(Path::new("big.jsonl"), BufReader::new(long), &mut |_, _| {}).expect_err("too long");
        assert_eq!(e.to_string(), format!("big.jsonl:1: longer than {MAX_LINE_BYTES} bytes: not a decision record"));
    }
}
