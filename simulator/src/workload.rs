//! A workload to replay: its jobs in arrival order, held in memory or streamed from a
//! file, and what one pass over them found — the simulator needs it before the first
//! arrival (the span, the common request shapes, the priority classes, the queues jobs
//! name). A native trace already in arrival order is streamed: each run reads it again,
//! one row at a time, so a trace of millions of rows costs the memory of the jobs in
//! flight. Any other trace (an openb pod list, rows out of order) is held and sorted.

use crate::input::InputError;
use crate::trace::{self, Rows, TraceJob};
use gpol_compiler::files::{self, Stamp};
use gpol_runtime::frag::ShapeKey;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// A trace to replay, and what a pass over it found.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The name reports and errors give it (the path as the user gave it).
    pub name: String,
    source: Source,
    summary: Summary,
    /// An openb pod list: a snapshot of a cluster's pods, without usable run times.
    openb: bool,
    /// What reading it could not keep (an importer's warnings), for the user and the report.
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug)]
enum Source {
    /// Ordered by arrival, ties by row.
    Held(Vec<TraceJob>),
    /// A native trace whose rows are in arrival order, as it was when it was checked.
    File { path: PathBuf, max_bytes: u64, stamp: Stamp },
}

/// What a pass over a workload found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub jobs: u64,
    pub first_arrival_ms: u64,
    pub last_arrival_ms: u64,
    /// How many jobs make each task shape (per replica, the ATC '23 simulator's key).
    pub shapes: HashMap<ShapeKey, u64>,
    /// The priority classes jobs name, sorted.
    pub classes: Vec<String>,
    /// The first job (in arrival order) of each queue and priority class named together:
    /// where a job goes depends on nothing else, so resolving these resolves every job.
    pub routes: Vec<TraceJob>,
}

impl Summary {
    fn add(&mut self, j: &TraceJob, routes: &mut HashSet<(Option<String>, Option<String>)>) {
        if self.jobs == 0 {
            self.first_arrival_ms = j.arrival_ms;
        }
        self.jobs += 1;
        self.last_arrival_ms = self.last_arrival_ms.max(j.arrival_ms);
        *self.shapes.entry(ShapeKey::of_spec(&j.job)).or_default() += 1;
        if routes.insert((j.job.queue.clone(), j.job.priority_class.clone())) {
            self.routes.push(j.clone());
        }
    }
}

impl Workload {
    /// Marks the workload as read from an openb pod list.
    pub fn from_openb(mut self) -> Workload {
        self.openb = true;
        self
    }

    /// Whether it was read from an openb pod list, whose pods carry no usable run times:
    /// replayed in time, nearly nothing would run. Fill mode is what such a list is for.
    pub fn is_openb(&self) -> bool {
        self.openb
    }

    /// A workload of jobs in memory, ordered here by arrival (ties keep their order).
    pub fn from_jobs(name: impl Into<String>, mut jobs: Vec<TraceJob>) -> Workload {
        jobs.sort_by_key(|j| j.arrival_ms);
        let mut summary = Summary::default();
        let mut routes = HashSet::new();
        let mut classes = BTreeSet::new();
        for j in &jobs {
            summary.add(j, &mut routes);
            if let Some(c) = &j.job.priority_class {
                classes.insert(c.clone());
            }
        }
        summary.classes = classes.into_iter().collect();
        Workload { name: name.into(), source: Source::Held(jobs), summary, openb: false, warnings: Vec::new() }
    }

    /// Reads the native trace at `path` (at most `max_bytes`) once, checking every row;
    /// if its rows are in arrival order it is streamed from then on, otherwise held.
    /// `progress` is told now and then the share of the file read.
    pub fn open(path: &Path, name: &str, max_bytes: u64, progress: &dyn Fn(f64)) -> Result<Workload, InputError> {
        let (file, stamp) =
            files::open(path, max_bytes).map_err(|e| InputError::new(name, None, None, e.to_string()))?;
        let total = file.metadata().map_or(0, |m| m.len());
        let reporting = Reporting { inner: file, read: 0, total, next: 0, progress };
        let rows = Rows::new(BufReader::with_capacity(1 << 16, reporting), name)?;
        let mut summary = Summary::default();
        let mut routes = HashSet::new();
        let mut classes = BTreeSet::new();
        let mut names = Vec::new();
        let mut ordered = true;
        for row in rows {
            let j = checked(row?, name)?;
            ordered &= summary.jobs == 0 || j.arrival_ms >= summary.last_arrival_ms;
            summary.add(&j, &mut routes);
            if let Some(c) = &j.job.priority_class {
                classes.insert(c.clone());
            }
            names.push(name_hash(&j.job.name));
        }
        if summary.jobs == 0 {
            return Err(InputError::new(name, None, None, "the trace has no jobs"));
        }
        summary.classes = classes.into_iter().collect();
        if !ordered {
            let (rows, _) = open_rows(path, name, max_bytes, Some(stamp))?;
            let jobs = rows.collect::<Result<Vec<_>, _>>()?;
            trace::unique_names(&jobs, name)?;
            return Ok(Workload::from_jobs(name, jobs));
        }
        unique_names(path, name, max_bytes, stamp, names)?;
        let source = Source::File { path: path.to_path_buf(), max_bytes, stamp };
        Ok(Workload { name: name.to_string(), source, summary, openb: false, warnings: Vec::new() })
    }

    /// What a pass over the jobs found.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// How many jobs it has.
    pub fn len(&self) -> u64 {
        self.summary.jobs
    }

    pub fn is_empty(&self) -> bool {
        self.summary.jobs == 0
    }

    /// The jobs, in arrival order (ties by row). A streamed file is opened again; if it
    /// changed since it was checked, that is an error, here or at the row that shows it.
    pub fn jobs(&self) -> Result<Box<dyn Iterator<Item = Result<TraceJob, InputError>> + Send + '_>, InputError> {
        match &self.source {
            Source::Held(jobs) => Ok(Box::new(jobs.iter().cloned().map(Ok))),
            Source::File { path, max_bytes, stamp } => {
                let (rows, _) = open_rows(path, &self.name, *max_bytes, Some(*stamp))?;
                let name = self.name.as_str();
                Ok(Box::new(rows.map(move |row| row.and_then(|j| checked(j, name)))))
            }
        }
    }

    /// Every job in memory, in arrival order (fill mode samples jobs at random).
    pub fn held(&self) -> Result<std::borrow::Cow<'_, [TraceJob]>, InputError> {
        match &self.source {
            Source::Held(jobs) => Ok(std::borrow::Cow::Borrowed(jobs)),
            Source::File { .. } => Ok(std::borrow::Cow::Owned(self.jobs()?.collect::<Result<Vec<_>, _>>()?)),
        }
    }
}

type FileRows = Rows<BufReader<std::fs::File>>;

/// A reader that tells `progress` the share of the file read, every mebibyte.
struct Reporting<'p, R> {
    inner: R,
    read: u64,
    total: u64,
    next: u64,
    progress: &'p dyn Fn(f64),
}

impl<R: std::io::Read> std::io::Read for Reporting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read >= self.next {
            (self.progress)(self.read as f64 / self.total.max(1) as f64);
            self.next = self.read + (1 << 20);
        }
        Ok(n)
    }
}

/// Opens the rows of `path`; with `expect`, only if the file is as it was then.
fn open_rows(path: &Path, name: &str, max: u64, expect: Option<Stamp>) -> Result<(FileRows, Stamp), InputError> {
    let (file, stamp) = files::open(path, max).map_err(|e| InputError::new(name, None, None, e.to_string()))?;
    if expect.is_some_and(|s| s != stamp) {
        return Err(InputError::new(name, None, None, "the trace changed while it was being read"));
    }
    Ok((Rows::new(BufReader::with_capacity(1 << 16, file), name)?, stamp))
}

/// A row within the limits of the one job model, whatever the format.
pub(crate) fn checked(j: TraceJob, file: &str) -> Result<TraceJob, InputError> {
    match j.job.over_limit() {
        Some(over) => {
            let m = format!("job `{}`: too large, at most {}", j.job.name, over.max);
            Err(InputError::new(file, Some(j.line).filter(|&l| l > 0), Some(over.field), m))
        }
        None => Ok(j),
    }
}

fn name_hash(name: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish()
}

/// Checks that no two rows name the same job, in eight bytes a row: the names' hashes
/// are sorted to find the few that repeat, and only rows with those hashes are read again
/// and compared by name (two different names may share a hash).
fn unique_names(path: &Path, name: &str, max: u64, stamp: Stamp, mut hashes: Vec<u64>) -> Result<(), InputError> {
    hashes.sort_unstable();
    let repeated: HashSet<u64> = hashes.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    drop(hashes);
    if repeated.is_empty() {
        return Ok(());
    }
    let (rows, _) = open_rows(path, name, max, Some(stamp))?;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for row in rows {
        let j = row?;
        if repeated.contains(&name_hash(&j.job.name)) {
            if let Some(&first) = seen.get(&j.job.name) {
                return Err(trace::named_twice(name, &j.job.name, j.line, first));
            }
            seen.insert(j.job.name, j.line);
        }
    }
    Ok(())
}
