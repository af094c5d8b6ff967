//! Workload traces in gpol's native format, CSV or JSON Lines (docs/simulator.md):
//! one job per row, the same column names in both.

use crate::input::{self, InputError};
use gpol_compiler::fuzzy;
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLOCK_MS, MAX_REPLICAS};
use gpol_compiler::schema::MIG_PROFILES;
use gpol_compiler::spec::{JobSpec, Request};
use gpol_runtime::fit::Ask;
use std::fmt::Write as _;

/// One job of a trace: the job, when it arrives, and where it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    /// Where the job was read (1-based line; 0 when it was generated).
    pub line: usize,
    pub arrival_ms: u64,
    pub job: JobSpec,
}

impl TraceJob {
    /// A job of this name with the defaults of [`JobSpec`], arriving at `arrival_ms`.
    pub fn new(name: impl Into<String>, arrival_ms: u64) -> TraceJob {
        TraceJob { line: 0, arrival_ms, job: JobSpec::named(name) }
    }

    /// What one replica asks for.
    pub fn ask(&self) -> Ask {
        Ask::of_spec(&self.job)
    }

    /// GPUs the whole job asks for, in milli-GPU.
    pub fn milli(&self) -> u64 {
        self.job.total_milli()
    }
}

/// The columns of the native format, in the order the writer uses.
pub const COLUMNS: &[&str] = &[
    "name",
    "arrival",
    "duration",
    "queue",
    "user",
    "priority_class",
    "priority",
    "gpus",
    "gpu_fraction",
    "mig",
    "gpu_mem",
    "replicas",
    "min_replicas",
    "cpu",
    "mem",
    "models",
    "flags",
    "checkpoint",
    "utilization",
    "labels",
];

/// A column or cell of the wrong name or shape; the text is the input's, unescaped (an
/// [`InputError`] escapes it where it is shown).
#[derive(Clone, Debug, PartialEq)]
pub enum CellError {
    UnknownColumn { name: String, suggestion: Option<String> },
    NotSingle,
    NotList,
    NotStrings,
    NotPairs,
    BadPair(String),
}

impl std::fmt::Display for CellError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellError::UnknownColumn { name, suggestion } => {
                write!(f, "unknown column `{name}`")?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean `{s}`?"),
                    None => Ok(()),
                }
            }
            CellError::NotSingle => f.write_str("expected a single value"),
            CellError::NotList => f.write_str("expected a list"),
            CellError::NotStrings => f.write_str("expected a list of strings"),
            CellError::NotPairs => f.write_str("expected key=value pairs"),
            CellError::BadPair(kv) => write!(f, "expected key=value pairs separated by `;`, found `{kv}`"),
        }
    }
}

impl std::error::Error for CellError {}

/// One cell, as read: text from CSV; text, lists and maps from JSON.
enum Cell {
    Text(String),
    List(Vec<String>),
    Map(Vec<(String, String)>),
}

impl Cell {
    fn text(&self) -> Result<&str, CellError> {
        match self {
            Cell::Text(t) => Ok(t),
            _ => Err(CellError::NotSingle),
        }
    }

    /// `a|b|c` in CSV, or a JSON array.
    fn list(&self) -> Result<Vec<String>, CellError> {
        match self {
            Cell::Text(t) => Ok(t.split('|').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()),
            Cell::List(l) => Ok(l.clone()),
            Cell::Map(_) => Err(CellError::NotList),
        }
    }

    /// `k=v;k=v` in CSV, or a JSON object.
    fn map(&self) -> Result<Vec<(String, String)>, CellError> {
        match self {
            Cell::Text(t) => t
                .split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
                    _ => Err(CellError::BadPair(kv.to_string())),
                })
                .collect(),
            Cell::Map(m) => Ok(m.clone()),
            Cell::List(_) => Err(CellError::NotPairs),
        }
    }
}

/// Reads a native trace held in memory, CSV or JSON Lines by the file's extension
/// (`.jsonl`/`.ndjson` are JSON Lines; anything else is CSV). Jobs come back ordered by
/// arrival, ties by row.
pub fn parse(text: &str, file: &str) -> Result<Vec<TraceJob>, InputError> {
    let mut jobs = Rows::new(text.as_bytes(), file)?.collect::<Result<Vec<_>, _>>()?;
    if jobs.is_empty() {
        return Err(InputError::new(file, None, None, "the trace has no jobs"));
    }
    unique_names(&jobs, file)?;
    jobs.sort_by_key(|j| j.arrival_ms);
    Ok(jobs)
}

/// Two rows naming the same job would be two jobs that reports could not tell apart.
pub(crate) fn unique_names(jobs: &[TraceJob], file: &str) -> Result<(), InputError> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::with_capacity(jobs.len());
    for j in jobs {
        if let Some(first) = seen.insert(j.job.name.as_str(), j.line) {
            return Err(named_twice(file, &j.job.name, j.line, first));
        }
    }
    Ok(())
}

/// The error for a job name on `line` first used on line `first`.
pub fn named_twice(file: &str, name: &str, line: usize, first: usize) -> InputError {
    InputError::new(file, Some(line), Some("name"), format!("job `{name}` is named twice (first on line {first})"))
}

/// The jobs of a native trace, one row at a time in the file's order, so a trace of any
/// length is read in the memory of one row. An error ends the rows.
pub struct Rows<R> {
    lines: input::LineReader<R>,
    file: String,
    format: Format,
    line: Vec<u8>,
    /// Whether `line` holds a line not yet taken (the first, after a JSON Lines start).
    held: bool,
    /// Rows read so far (unnamed jobs are named after their row).
    read: usize,
    done: bool,
}

enum Format {
    Jsonl,
    Csv { headers: Vec<String>, record: Box<Record> },
}

impl<R: std::io::BufRead> Rows<R> {
    /// Starts reading `reader`, named `file` in errors; a CSV header is read and checked.
    pub fn new(reader: R, file: &str) -> Result<Rows<R>, InputError> {
        let jsonl = file.ends_with(".jsonl") || file.ends_with(".ndjson");
        let mut rows = Rows {
            lines: input::LineReader::new(reader),
            file: file.to_string(),
            format: Format::Jsonl,
            line: Vec::new(),
            held: true,
            read: 0,
            done: false,
        };
        if !rows.skip_blank()? {
            return Err(InputError::new(file, None, None, "the file is empty: a trace has a header and a row per job"));
        }
        if !jsonl {
            let mut record = Box::<Record>::default();
            let hline = rows.lines.line();
            let headers = record.read(&mut rows.lines, &mut rows.line, file)?;
            for (i, h) in headers.iter().enumerate() {
                check_column(h).map_err(|m| InputError::new(file, Some(hline), Some(h), m.to_string()))?;
                if headers[..i].contains(h) {
                    let m = format!("the column `{h}` appears twice");
                    return Err(InputError::new(file, Some(hline), Some(h), m));
                }
            }
            if !headers.iter().any(|h| h == "arrival") {
                return Err(InputError::new(file, Some(hline), Some("arrival"), "the header has no `arrival` column"));
            }
            rows.format = Format::Csv { headers, record };
            rows.held = false;
        }
        Ok(rows)
    }

    /// Reads lines up to the next that is neither blank nor a `#` comment, which is left
    /// in `self.line`; false at the end of the input.
    fn skip_blank(&mut self) -> Result<bool, InputError> {
        loop {
            match self.lines.next_line(&mut self.line) {
                Ok(None) => return Ok(false),
                Ok(Some(n)) => {
                    if n == 1 && self.line.starts_with("\u{feff}".as_bytes()) {
                        self.line.drain(..3);
                    }
                    let t = self.line.trim_ascii();
                    if !t.is_empty() && t.first() != Some(&b'#') {
                        return Ok(true);
                    }
                }
                Err(e) => return Err(line_error(&self.file, self.lines.line() + 1, e)),
            }
        }
    }

    fn next_row(&mut self) -> Result<Option<TraceJob>, InputError> {
        if !std::mem::take(&mut self.held) && !self.skip_blank()? {
            return Ok(None);
        }
        let (file, line) = (self.file.as_str(), self.lines.line());
        let index = self.read;
        self.read += 1;
        match &mut self.format {
            Format::Jsonl => {
                let row = std::str::from_utf8(&self.line)
                    .map_err(|_| InputError::new(file, Some(line), None, "the row is not valid UTF-8"))?;
                json_row(row.trim(), index, file, line).map(Some)
            }
            Format::Csv { headers, record } => {
                let fields = record.read(&mut self.lines, &mut self.line, file)?;
                if fields.len() != headers.len() {
                    let m = format!("expected {} fields like the header, found {}", headers.len(), fields.len());
                    return Err(InputError::new(file, Some(line), None, m));
                }
                let cells: Vec<(&str, Cell)> = headers
                    .iter()
                    .zip(fields)
                    .filter(|(_, v)| !v.is_empty())
                    .map(|(h, v)| (h.as_str(), Cell::Text(v)))
                    .collect();
                job(&cells, index, file, line).map(Some)
            }
        }
    }
}

impl<R: std::io::BufRead> Iterator for Rows<R> {
    type Item = Result<TraceJob, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let row = self.next_row().transpose();
        self.done = !matches!(row, Some(Ok(_)));
        row
    }
}

fn line_error(file: &str, line: usize, e: input::LineError) -> InputError {
    match e {
        input::LineError::Io(e) => InputError::new(file, None, None, format!("cannot read: {e}")),
        input::LineError::TooLong => InputError::new(
            file,
            Some(line),
            None,
            format!("the line is longer than {} bytes: not a trace", input::MAX_LINE_BYTES),
        ),
    }
}

/// CSV records, split by `csv_core` (quotes, doubled quotes, line breaks inside quotes)
/// from the lines the reader hands it, so that line numbers stay the reader's.
struct Record {
    core: csv_core::Reader,
    out: Vec<u8>,
    ends: Vec<usize>,
}

impl Default for Record {
    fn default() -> Record {
        // `csv_core::Reader::default()` is not a comma-separated reader: `new()` is.
        Record { core: csv_core::Reader::new(), out: vec![0; 1024], ends: vec![0; 64] }
    }
}

impl Record {
    /// Splits the record that starts with the line in `line` (reading more lines while a
    /// quoted field is open) into its fields, trimmed.
    fn read<R: std::io::BufRead>(
        &mut self,
        lines: &mut input::LineReader<R>,
        line: &mut Vec<u8>,
        file: &str,
    ) -> Result<Vec<String>, InputError> {
        let start = lines.line();
        let err = |m: String| InputError::new(file, Some(start), None, m);
        let (mut nout, mut nends) = (0, 0);
        line.push(b'\n');
        let mut input: &[u8] = line;
        let mut at_end = false;
        loop {
            let (result, nin, o, e) = self.core.read_record(input, &mut self.out[nout..], &mut self.ends[nends..]);
            input = &input[nin..];
            (nout, nends) = (nout + o, nends + e);
            match result {
                csv_core::ReadRecordResult::InputEmpty if at_end => {}
                csv_core::ReadRecordResult::InputEmpty => {
                    let mut more = Vec::new();
                    match lines.next_line(&mut more) {
                        Ok(Some(_)) => {
                            more.push(b'\n');
                            *line = more;
                            input = line;
                        }
                        Ok(None) => at_end = true,
                        Err(e) => return Err(line_error(file, lines.line() + 1, e)),
                    }
                    if nout > input::MAX_LINE_BYTES {
                        return Err(err(format!("the row is longer than {} bytes", input::MAX_LINE_BYTES)));
                    }
                }
                csv_core::ReadRecordResult::OutputFull => self.out.resize(self.out.len() * 2, 0),
                csv_core::ReadRecordResult::OutputEndsFull => self.ends.resize(self.ends.len() * 2, 0),
                // Every line ends in a line break, so only an open quote reads to the end.
                csv_core::ReadRecordResult::Record | csv_core::ReadRecordResult::End if at_end => {
                    return Err(err("a quoted field is not closed".into()));
                }
                csv_core::ReadRecordResult::Record | csv_core::ReadRecordResult::End => break,
            }
        }
        let mut fields = Vec::with_capacity(nends);
        let mut from = 0;
        for &to in &self.ends[..nends] {
            let text =
                std::str::from_utf8(&self.out[from..to]).map_err(|_| err("the row is not valid UTF-8".into()))?;
            fields.push(text.trim().to_string());
            from = to;
        }
        Ok(fields)
    }
}

/// One row of JSON Lines.
fn json_row(row: &str, index: usize, file: &str, line: usize) -> Result<TraceJob, InputError> {
    let err = |field: Option<&str>, m: String| InputError::new(file, Some(line), field, m);
    let fields = match serde_json::from_str::<Row>(row) {
        Ok(Row::Object(fields)) => fields,
        Ok(Row::Other) => return Err(err(None, "expected one JSON object per line".into())),
        Err(e) => return Err(err(None, format!("not JSON: {e}"))),
    };
    for (i, (k, _)) in fields.iter().enumerate() {
        if fields[..i].iter().any(|(seen, _)| seen == k) {
            return Err(err(Some(k), format!("the key `{k}` appears twice in the object")));
        }
    }
    let mut cells = Vec::new();
    for (k, v) in &fields {
        check_column(k).map_err(|m| err(Some(k), m.to_string()))?;
        let cell = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => Cell::Text(s.clone()),
            serde_json::Value::Number(n) => Cell::Text(n.to_string()),
            serde_json::Value::Bool(b) => Cell::Text(b.to_string()),
            serde_json::Value::Array(items) => Cell::List(
                items
                    .iter()
                    .map(|x| x.as_str().map(str::to_string).ok_or(CellError::NotStrings))
                    .collect::<Result<_, _>>()
                    .map_err(|m| err(Some(k), m.to_string()))?,
            ),
            // Any value reads as text: a string as itself, anything else as its JSON.
            serde_json::Value::Object(m) => Cell::Map(
                m.iter()
                    .map(|(k2, v2)| match v2 {
                        serde_json::Value::String(s) => (k2.clone(), s.clone()),
                        other => (k2.clone(), other.to_string()),
                    })
                    .collect(),
            ),
        };
        cells.push((k.as_str(), cell));
    }
    job(&cells, index, file, line)
}

/// One line of JSON Lines: an object's entries in order, duplicates kept (a JSON map
/// would keep only the last), or anything else.
enum Row {
    Object(Vec<(String, serde_json::Value)>),
    Other,
}

impl<'de> serde::Deserialize<'de> for Row {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Row, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Row;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Row, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                    entries.push(entry);
                }
                Ok(Row::Object(entries))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Row::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Row, E> {
                Ok(Row::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Row, E> {
                Ok(Row::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Row, E> {
                Ok(Row::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Row, E> {
                Ok(Row::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Row, E> {
                Ok(Row::Other)
            }
            fn visit_unit<E>(self) -> Result<Row, E> {
                Ok(Row::Other)
            }
        }
        d.deserialize_any(Visit)
    }
}

fn check_column(name: &str) -> Result<(), CellError> {
    if COLUMNS.contains(&name) {
        return Ok(());
    }
    let suggestion = fuzzy::suggest(name, COLUMNS.iter().copied()).map(|s| s.to_string());
    Err(CellError::UnknownColumn { name: name.to_string(), suggestion })
}

/// Builds the job of one row from its non-empty cells.
fn job(cells: &[(&str, Cell)], index: usize, file: &str, line: usize) -> Result<TraceJob, InputError> {
    let get = |name: &str| cells.iter().find(|(k, _)| *k == name).map(|(_, c)| c);
    let err = |field: &str, m: String| InputError::new(file, Some(line), Some(field), m);
    let text = |name: &str| -> Result<Option<&str>, InputError> {
        get(name).map(|c| c.text().map_err(|m| err(name, m.to_string()))).transpose()
    };
    let parsed =
        |name: &str, f: &dyn Fn(&str) -> Result<u64, input::QuantityError>| -> Result<Option<u64>, InputError> {
            text(name)?.map(|t| f(t).map_err(|m| err(name, m.to_string()))).transpose()
        };
    let number = |name: &str| -> Result<Option<f64>, InputError> {
        text(name)?
            .map(|t| match t.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(err(name, format!("expected a number, found `{t}`"))),
            })
            .transpose()
    };
    let count = |name: &str, max: u32| -> Result<Option<u32>, InputError> {
        text(name)?
            .map(|t| input::count(t, u64::from(max)).map(|n| n as u32).map_err(|m| err(name, m.to_string())))
            .transpose()
    };
    let arrival_ms = parsed("arrival", &input::millis)?.ok_or_else(|| err("arrival", "missing".into()))?;
    let mut j = TraceJob::new(text("name")?.map_or_else(|| format!("job-{}", index + 1), str::to_string), arrival_ms);
    j.line = line;
    j.job.duration_ms = parsed("duration", &input::millis)?;
    if j.job.duration_ms.is_some_and(|d| arrival_ms.saturating_add(d) > MAX_CLOCK_MS) {
        return Err(err(
            "duration",
            format!("too large: the job would end after the clock's limit, {}s", MAX_CLOCK_MS / 1000),
        ));
    }
    j.job.queue = text("queue")?.map(str::to_string);
    j.job.user = text("user")?.map(str::to_string);
    j.job.priority_class = text("priority_class")?.map(str::to_string);
    j.job.priority = number("priority")?;
    let gpus = count("gpus", MAX_CARDS_PER_NODE)?;
    let fraction = number("gpu_fraction")?;
    let mig = text("mig")?;
    j.job.request = match (gpus, fraction, mig) {
        (Some(k), None, None) if k > 0 => Request::Whole(k),
        (Some(0), None, None) | (None, None, None) => Request::None,
        (None, Some(f), None) => {
            if !(f > 0.0 && f < 1.0) {
                return Err(err("gpu_fraction", format!("expected a share of one GPU between 0 and 1, found {f}")));
            }
            Request::Fraction(((f * 1000.0).round() as u32).clamp(1, 999))
        }
        (None, None, Some(p)) => match MIG_PROFILES.iter().position(|x| *x == p) {
            Some(i) => Request::Mig(i as u8),
            None => {
                return Err(err(
                    "mig",
                    format!("`{p}` is not a MIG profile; expected one of {}", MIG_PROFILES.join(", ")),
                ));
            }
        },
        _ => return Err(err("gpus", "give at most one of gpus, gpu_fraction and mig".into())),
    };
    j.job.gpu_mem = parsed("gpu_mem", &input::bytes)?.unwrap_or(0);
    j.job.replicas = count("replicas", MAX_REPLICAS)?.unwrap_or(1);
    if j.job.replicas == 0 {
        return Err(err("replicas", "a job has at least one replica".into()));
    }
    j.job.min_replicas = count("min_replicas", MAX_REPLICAS)?;
    if j.job.min_replicas.is_some_and(|m| m == 0 || m > j.job.replicas) {
        return Err(err("min_replicas", format!("expected 1 to {} (the replicas)", j.job.replicas)));
    }
    j.job.cpu_milli = parsed("cpu", &input::milli_cpu)?.unwrap_or(0);
    j.job.mem = parsed("mem", &input::bytes)?.unwrap_or(0);
    if let Some(c) = get("models") {
        j.job.models = c.list().map_err(|m| err("models", m.to_string()))?;
    }
    if let Some(c) = get("flags") {
        for flag in c.list().map_err(|m| err("flags", m.to_string()))? {
            match flag.as_str() {
                "preemptible" => j.job.preemptible = true,
                "bursty" => j.job.bursty = true,
                "latency_critical" => j.job.latency_critical = true,
                other => {
                    return Err(err(
                        "flags",
                        format!("unknown flag `{other}`; expected preemptible, bursty or latency_critical"),
                    ));
                }
            }
        }
    }
    j.job.checkpoint_every_ms = parsed("checkpoint", &input::millis)?.filter(|&c| c > 0);
    if let Some(u) = number("utilization")? {
        if !(0.0..=1.0).contains(&u) {
            return Err(err("utilization", format!("expected a share between 0 and 1, found {u}")));
        }
        j.job.utilization = u;
    }
    if let Some(c) = get("labels") {
        j.job.labels = c.map().map_err(|m| err("labels", m.to_string()))?;
        for (i, (k, _)) in j.job.labels.iter().enumerate() {
            if j.job.labels[..i].iter().any(|(seen, _)| seen == k) {
                return Err(err("labels", format!("the label `{k}` is set twice")));
            }
        }
    }
    if let Some(over) = j.job.over_limit() {
        return Err(err(over.field, format!("too large, at most {}", over.max)));
    }
    Ok(j)
}

/// Writes jobs in the native CSV format (what `gpolc gen-trace` produces).
pub fn to_csv(jobs: &[TraceJob]) -> String {
    let mut out = String::with_capacity(jobs.len() * 64);
    out.push_str(&COLUMNS.join(","));
    out.push('\n');
    let secs = |ms: u64| {
        let s = ms as f64 / 1000.0;
        format!("{s}")
    };
    for j in jobs {
        let (gpus, fraction, mig) = match j.job.request {
            Request::Whole(k) => (k.to_string(), String::new(), String::new()),
            Request::Fraction(m) => (String::new(), format!("{}", f64::from(m) / 1000.0), String::new()),
            Request::Mig(p) => (String::new(), String::new(), MIG_PROFILES[usize::from(p)].to_string()),
            Request::None => (String::new(), String::new(), String::new()),
        };
        let mut flags = Vec::new();
        for (on, name) in
            [(j.job.preemptible, "preemptible"), (j.job.bursty, "bursty"), (j.job.latency_critical, "latency_critical")]
        {
            if on {
                flags.push(name);
            }
        }
        let labels: Vec<String> = j.job.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let cells = [
            j.job.name.clone(),
            secs(j.arrival_ms),
            j.job.duration_ms.map(secs).unwrap_or_default(),
            j.job.queue.clone().unwrap_or_default(),
            j.job.user.clone().unwrap_or_default(),
            j.job.priority_class.clone().unwrap_or_default(),
            j.job.priority.map(|p| p.to_string()).unwrap_or_default(),
            gpus,
            fraction,
            mig,
            if j.job.gpu_mem > 0 { j.job.gpu_mem.to_string() } else { String::new() },
            if j.job.replicas == 1 { String::new() } else { j.job.replicas.to_string() },
            match j.job.min_replicas {
                Some(m) if m != j.job.replicas => m.to_string(),
                _ => String::new(),
            },
            if j.job.cpu_milli > 0 { format!("{}", j.job.cpu_milli as f64 / 1000.0) } else { String::new() },
            if j.job.mem > 0 { j.job.mem.to_string() } else { String::new() },
            j.job.models.join("|"),
            flags.join("|"),
            j.job.checkpoint_every_ms.map(secs).unwrap_or_default(),
            if j.job.utilization == 1.0 { String::new() } else { j.job.utilization.to_string() },
            labels.join(";"),
        ];
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if c.contains([',', '"', '\n']) {
                let _ = write!(out, "\"{}\"", c.replace('"', "\"\""));
            } else {
                out.push_str(c);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unlined(j: &TraceJob) -> TraceJob {
        TraceJob { line: 0, ..j.clone() }
    }

    #[test]
    fn csv_and_jsonl_read_the_same_job() {
        let csv = "name,arrival,duration,queue,gpus,replicas,flags,checkpoint,labels,cpu,mem\n\
                   train,1h,2h,research,8,4,preemptible|bursty,30m,team=a;tier=gold,32,256GiB\n";
        let jsonl = r#"{"name":"train","arrival":"1h","duration":7200,"queue":"research","gpus":8,"replicas":4,"flags":["preemptible","bursty"],"checkpoint":"30m","labels":{"team":"a","tier":"gold"},"cpu":32,"mem":"256GiB"}"#;
        let a = parse(csv, "t.csv").expect("csv");
        let b = parse(jsonl, "t.jsonl").expect("jsonl");
        assert_eq!((a[0].line, b[0].line), (2, 1));
        assert_eq!(a.iter().map(unlined).collect::<Vec<_>>(), b.iter().map(unlined).collect::<Vec<_>>());
        let j = &a[0];
        assert_eq!(
            (j.arrival_ms, j.job.duration_ms, j.job.checkpoint_every_ms),
            (3_600_000, Some(7_200_000), Some(1_800_000))
        );
        assert_eq!((j.job.request, j.job.replicas, j.job.min_replicas()), (Request::Whole(8), 4, 4));
        assert!(j.job.preemptible && j.job.bursty && !j.job.latency_critical);
        assert_eq!(j.job.mem, 256 << 30);
        assert_eq!(j.job.labels, vec![("team".into(), "a".into()), ("tier".into(), "gold".into())]);
    }

    #[test]
    fn written_traces_read_back() {
        let mut a = TraceJob::new("a", 1500);
        a.job.request = Request::Fraction(250);
        a.job.duration_ms = Some(60_000);
        a.job.models = vec!["T4".into(), "A10".into()];
        a.job.utilization = 0.5;
        a.job.labels = vec![("k".into(), "v,w".into())];
        let mut b = TraceJob::new("b", 0);
        b.job.request = Request::Mig(2);
        b.job.replicas = 3;
        b.job.min_replicas = Some(2);
        b.job.checkpoint_every_ms = Some(600_000);
        let back = parse(&to_csv(&[a.clone(), b.clone()]), "t.csv").expect("round trip");
        assert_eq!(back.iter().map(unlined).collect::<Vec<_>>(), vec![b, a]);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = parse("arrival,gpus\n0,1\n5,lots\n", "t.csv").expect_err("bad input");
        assert_eq!(e.to_string(), "t.csv:3: field `gpus`: expected a whole number, found `lots`");
        let e = parse("arival,gpus\n0,1\n", "t.csv").expect_err("bad input");
        assert!(e.to_string().contains("unknown column `arival`; did you mean `arrival`?"), "{e}");
        let e = parse("arrival,gpus\n0,1,2\n", "t.csv").expect_err("bad input");
        assert_eq!(e.line, Some(2));
        let e = parse("arrival,gpus,gpu_fraction\n0,1,0.5\n", "t.csv").expect_err("bad input");
        assert!(e.message.contains("at most one"), "{e}");
        let e = parse("{\"arrival\": 1}\n[1]\n", "t.jsonl").expect_err("bad input");
        assert_eq!(e.line, Some(2));
        let e = parse("{\"arrival\": 1, \"gpu_fraction\": 1.5}\n", "t.jsonl").expect_err("bad input");
        assert_eq!(e.field.as_deref(), Some("gpu_fraction"));
        let e = parse("{\"gpus\": 1}\n", "t.jsonl").expect_err("bad input");
        assert_eq!(e.field.as_deref(), Some("arrival"));
        assert!(parse("arrival\n", "t.csv").expect_err("bad input").message.contains("no jobs"));
        let e = parse("arrival,flags\n0,fast\n", "t.csv").expect_err("bad input");
        assert!(e.message.contains("unknown flag `fast`"), "{e}");
    }

    #[test]
    fn line_numbers_hold_for_every_line_ending() {
        for (text, name) in [
            ("arrival,gpus\r\n0,1\r\n5,lots\r\n", "crlf"),
            ("arrival,gpus\r0,1\r5,lots\r", "cr"),
            ("arrival,gpus\n0,1\n5,lots\n", "lf"),
        ] {
            let e = parse(text, "t.csv").expect_err("bad input");
            assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("gpus")), "{name}: {e}");
        }
        let e = parse("{\"arrival\": 1}\r{\"arrival\": \"x\"}\r", "t.jsonl").expect_err("bad input");
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn quoted_line_breaks_stay_in_their_field_and_lines_still_count() {
        let jobs = parse("name,arrival\n\"a\r\nb\",0\n# note\n\nc,1\n", "t.csv").expect("valid");
        let read: Vec<(&str, usize)> = jobs.iter().map(|j| (j.job.name.as_str(), j.line)).collect();
        assert_eq!(read, [("a\nb", 2), ("c", 6)]);
        let e = parse("name,arrival\nb,0\n\"a,1\n", "t.csv").expect_err("open quote");
        assert_eq!(e.to_string(), "t.csv:3: a quoted field is not closed");
        let rows = Rows::new(std::io::BufReader::with_capacity(4, "arrival\n1\n2\n".as_bytes()), "t.csv");
        let arrivals: Vec<u64> = rows.expect("header").map(|r| r.expect("row").arrival_ms).collect();
        assert_eq!(arrivals, [1000, 2000], "rows stream in file order");
    }

    #[test]
    fn header_and_empty_file_errors_point_where_they_are() {
        let e = parse("arrival,bogus\n0,1\n", "t.csv").expect_err("bad header");
        assert_eq!(e.line, Some(1), "{e}");
        let e = parse("# a comment\narrival,bogus\n0,1\n", "t.csv").expect_err("bad header");
        assert_eq!(e.line, Some(2), "{e}");
        let e = parse("", "t.csv").expect_err("empty");
        assert_eq!((e.line, e.to_string().contains("empty")), (None, true), "{e}");
        let e = parse("gpus\n1\n", "t.csv").expect_err("no arrival");
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn duplicates_are_errors_naming_line_and_field() {
        let e = parse("name,arrival\na,0\nb,1\na,2\n", "t.csv").expect_err("name twice");
        assert_eq!(e.to_string(), "t.csv:4: field `name`: job `a` is named twice (first on line 2)");
        let e = parse("arrival,gpus,gpus\n0,1,2\n", "t.csv").expect_err("column twice");
        assert_eq!(e.to_string(), "t.csv:1: field `gpus`: the column `gpus` appears twice");
        let e = parse("arrival,labels\n0,zone=a;zone=b\n", "t.csv").expect_err("label twice");
        assert_eq!(e.to_string(), "t.csv:2: field `labels`: the label `zone` is set twice");
        let e = parse("{\"arrival\": 0, \"gpus\": 1, \"gpus\": 8}\n", "t.jsonl").expect_err("key twice");
        assert_eq!(e.to_string(), "t.jsonl:1: field `gpus`: the key `gpus` appears twice in the object");
    }

    #[test]
    fn counts_and_times_over_their_limits_are_refused() {
        let e = parse("arrival,gpus\n0,4294967295\n", "t.csv").expect_err("too many cards");
        assert_eq!(e.to_string(), "t.csv:2: field `gpus`: `4294967295` is too large, at most 64");
        let e = parse("arrival,gpus\n0,2.7\n", "t.csv").expect_err("a fraction of a card");
        assert_eq!(e.to_string(), "t.csv:2: field `gpus`: expected a whole number, found `2.7`");
        let e = parse("arrival,replicas,min_replicas\n0,4000000000,1\n", "t.csv").expect_err("replicas");
        assert!(e.to_string().contains("field `replicas`: `4000000000` is too large, at most 100000"), "{e}");
        let e = parse("arrival,cpu\n0,1e300\n", "t.csv").expect_err("cores");
        assert!(e.to_string().contains("field `cpu`: `1e300` is too large"), "{e}");
        let e = parse("arrival\n1e300w\n", "t.csv").expect_err("time");
        assert!(e.to_string().contains("field `arrival`: `1e300w` is too large"), "{e}");
        let e = parse("arrival,duration\n3000000000,3000000000\n", "t.csv").expect_err("ends too late");
        assert!(e.to_string().contains("field `duration`: too large"), "{e}");
    }
}
