//! Slurm's state as the scheduling loop reads it each pass — its nodes (`sinfo --json`), its
//! jobs (`squeue --json`) and how it counts memory (`scontrol show config`) — each from
//! where it is: a file saved from that output, Slurm's command run now (bounded:
//! [`crate::command`]), or slurmrestd ([`crate::rest`], which serves nodes and jobs). One
//! reader per document, whatever its source: [`crate::sinfo`], [`crate::squeue`],
//! [`crate::config`].

use crate::command::{self, CommandError};
use crate::config::{self, Memory};
use crate::rest::{Rest, RestError};
use crate::sinfo::{self, BadNodes, SlurmNode};
use crate::squeue::{self, BadJobs, SlurmJob};
use gpol_compiler::files::FileError;
use gpol_compiler::limits::{MAX_CLUSTER_BYTES, MAX_INPUT_BYTES};
use std::fmt;
use std::path::{Path, PathBuf};

/// The command whose output the node reader takes.
pub const SINFO: [&str; 2] = ["sinfo", "--json"];
/// The command whose output the job reader takes.
pub const SQUEUE: [&str; 2] = ["squeue", "--json"];
/// The command whose output says how Slurm counts memory.
pub const SHOW_CONFIG: [&str; 3] = ["scontrol", "show", "config"];

/// The most `scontrol show config` may print (it prints a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Where a document is read from.
#[derive(Clone, Debug)]
pub enum Source {
    /// A file holding what the command prints (or what slurmrestd answers).
    File(PathBuf),
    /// The command, run now.
    Command,
    /// slurmrestd, asked now.
    Rest(Rest),
}

impl Source {
    /// A saved file when there is one, else slurmrestd when it is given, else the command.
    pub fn of(file: Option<&Path>, rest: Option<&Rest>) -> Source {
        match (file, rest) {
            (Some(path), _) => Source::File(path.to_path_buf()),
            (None, Some(r)) => Source::Rest(r.clone()),
            (None, None) => Source::Command,
        }
    }
}

/// A document as read, and where it came from (for messages: a path, a command in
/// backquotes, or `slurmrestd VERSION`).
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched {
    pub text: String,
    pub from: String,
}

/// Why a document could not be had.
#[derive(Debug)]
pub enum FetchError {
    File(FileError),
    NotUtf8 { path: PathBuf },
    Command(CommandError),
    Rest(RestError),
}

/// Why a part of Slurm's state could not be read: the document could not be had, or
/// what it holds is not that document (naming where it came from).
#[derive(Debug)]
pub enum StateError {
    Fetch(FetchError),
    Nodes {
        from: String,
        error: BadNodes,
    },
    Jobs {
        from: String,
        error: BadJobs,
    },
    /// No `SelectTypeParameters` line.
    NotConfig {
        from: String,
    },
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::File(e) => write!(f, "{e}"),
            FetchError::NotUtf8 { path } => write!(f, "{}: not UTF-8 text", path.display()),
            FetchError::Command(e) => write!(f, "{e}"),
            FetchError::Rest(e) => write!(f, "{e}"),
        }
    }
}

/// Where, then what; text from Slurm (node names, serde's quotes of the document) escaped
/// so it prints as one line that cannot act on a terminal.
impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Fetch(e) => write!(f, "{e}"),
            StateError::Nodes { from, error } => {
                let line = error.line().map_or(String::new(), |l| format!(":{l}"));
                let field = error.field().map_or(String::new(), |f| format!(": field `{f}`"));
                write!(f, "{}", command::printable(&format!("{from}{line}{field}: {error}")))
            }
            StateError::Jobs { from, error } => write!(f, "{from}: {error}"),
            StateError::NotConfig { from } => {
                write!(f, "{from}: no `SelectTypeParameters` line: not `scontrol show config`'s output")
            }
        }
    }
}

impl std::error::Error for FetchError {}
impl std::error::Error for StateError {}

impl From<FetchError> for StateError {
    fn from(e: FetchError) -> StateError {
        StateError::Fetch(e)
    }
}

/// Slurm's nodes, with whether each is in service.
pub fn nodes(from: &Source) -> Result<Vec<SlurmNode>, StateError> {
    let doc = fetch(from, &SINFO, MAX_CLUSTER_BYTES, Rest::nodes)?;
    sinfo::read(&doc.text).map_err(|error| StateError::Nodes { from: doc.from, error })
}

/// Slurm's jobs: running, waiting, and on their way in or out.
pub fn jobs(from: &Source) -> Result<Vec<SlurmJob>, StateError> {
    let doc = fetch(from, &SQUEUE, MAX_INPUT_BYTES, Rest::jobs)?;
    squeue::read(&doc.text).map_err(|error| StateError::Jobs { from: doc.from, error })
}

/// How Slurm counts memory, from a saved `scontrol show config` or the command run now
/// (slurmrestd 22.05 serves no configuration).
pub fn memory(file: Option<&Path>) -> Result<Memory, StateError> {
    let doc = output(file, &SHOW_CONFIG, MAX_CONFIG_BYTES)?;
    config::memory(&doc.text).ok_or(StateError::NotConfig { from: doc.from })
}

/// A document from `from`: the file, slurmrestd (`ask`) or the command `argv`; at most
/// `limit` bytes.
fn fetch(
    from: &Source,
    argv: &[&str],
    limit: u64,
    ask: fn(&Rest, u64) -> Result<String, RestError>,
) -> Result<Fetched, FetchError> {
    match from {
        Source::File(path) => output(Some(path), argv, limit),
        Source::Command => output(None, argv, limit),
        Source::Rest(r) => {
            let text = ask(r, limit).map_err(FetchError::Rest)?;
            Ok(Fetched { text, from: format!("slurmrestd {}", r.version) })
        }
    }
}

/// The output of a Slurm command `argv`, run now, or a file standing for it; at most
/// `limit` bytes.
pub fn output(file: Option<&Path>, argv: &[&str], limit: u64) -> Result<Fetched, FetchError> {
    if let Some(path) = file {
        let bytes = gpol_compiler::files::read(path, limit).map_err(FetchError::File)?;
        let text = String::from_utf8(bytes).map_err(|_| FetchError::NotUtf8 { path: path.to_path_buf() })?;
        return Ok(Fetched { text, from: path.display().to_string() });
    }
    let words: Vec<String> = argv.iter().map(|w| w.to_string()).collect();
    let text = command::run(&words, command::TIMEOUT, limit).map_err(FetchError::Command)?;
    Ok(Fetched { text, from: format!("`{}`", argv.join(" ")) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_stands_for_the_command_and_errors_name_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let sinfo = dir.path().join("sinfo.json");
        std::fs::write(&sinfo, r#"{"nodes": [{"name": "n1", "cpus": 8, "real_memory": 1024, "state": "down"}]}"#)
            .expect("written");
        let read = nodes(&Source::of(Some(&sinfo), None)).expect("nodes");
        assert_eq!((read[0].spec.name.as_str(), read[0].service), ("n1", sinfo::Service::Down));
        std::fs::write(&sinfo, r#"{"nodes": [{"name": "n1", "cpus": "eight", "real_memory": 1024}]}"#)
            .expect("written");
        let e = nodes(&Source::File(sinfo.clone())).expect_err("bad cpus").to_string();
        assert_eq!(
            e,
            format!("{}: field `cpus`: node `n1`: expected a whole number, found \"eight\"", sinfo.display())
        );
        let squeue = dir.path().join("squeue.json");
        std::fs::write(&squeue, r#"{"jobs": [{"name": "x"}]}"#).expect("written");
        let e = jobs(&Source::File(squeue.clone())).expect_err("no id").to_string();
        assert_eq!(e, format!("{}: job 1: no `job_id`", squeue.display()));
        let config = dir.path().join("config.txt");
        std::fs::write(&config, "SelectTypeParameters = CR_CORE\n").expect("written");
        assert_eq!(memory(Some(&config)).expect("read"), Memory::NotCounted);
        std::fs::write(&config, "nothing\n").expect("written");
        let e = memory(Some(&config)).expect_err("not the config").to_string();
        assert!(e.ends_with("no `SelectTypeParameters` line: not `scontrol show config`'s output"), "{e}");
    }
}
