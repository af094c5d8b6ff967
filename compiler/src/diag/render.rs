//! Renders diagnostics for people (ariadne), for machines (JSON) and for GitHub
//! workflow annotations.

use super::excerpt::{self, DisplayFile};
use super::{Code, Diagnostic, Severity};
use crate::source::{FileId, SourceMap, Span};
use crate::terminal::escape;
use ariadne::{Cache, Config, IndexType, Label, Report, ReportKind, Source};
use std::collections::HashMap;
use std::ops::Range;

/// Renders one diagnostic the way a person reads it, with the source underlined. To
/// render many, use one [`Human`]: it prepares each file once.
pub fn human(sources: &SourceMap, d: &Diagnostic, color: bool) -> String {
    Human::new(sources, color).render(d)
}

/// Renders diagnostics for people, each file prepared once for all of them, so that
/// rendering is linear in their number; text from files and messages is escaped for
/// terminals, and long lines are cut around the labels (see `diag/excerpt.rs`).
pub struct Human<'s> {
    sources: &'s SourceMap,
    color: bool,
    files: HashMap<FileId, (DisplayFile, Source<String>)>,
}

impl<'s> Human<'s> {
    pub fn new(sources: &'s SourceMap, color: bool) -> Human<'s> {
        Human { sources, color, files: HashMap::new() }
    }

    pub fn render(&mut self, d: &Diagnostic) -> String {
        // ariadne starts a new source group whenever a label's order goes back up the
        // file, so labels are ordered by position; the primary stands out by colour.
        let mut labels: Vec<(Span, &str, bool)> = vec![(d.primary.span, d.primary.message.as_str(), true)];
        labels.extend(d.secondary.iter().map(|l| (l.span, l.message.as_str(), false)));
        labels.sort_by_key(|(s, _, primary)| (s.file, s.start, !primary));
        let spans: Vec<Span> = labels.iter().map(|(s, ..)| clamp(self.sources, *s)).collect();
        let mut notes = Vec::new();
        let names: Vec<String>;
        let sources: Vec<&Source<String>>;
        let ranges: Vec<(usize, Range<usize>)>;
        let pieces: Vec<Source<String>>;
        if excerpt::touches_long_line(self.sources, &spans) {
            let shown = excerpt::excerpt(self.sources, &spans);
            let primary = labels.iter().find(|(.., p)| *p).map_or(spans[0], |(s, ..)| *s);
            let (line, column) = self.sources.get(primary.file).line_col(primary.start as usize);
            for piece in &shown.pieces {
                for (cut_line, from) in &piece.cut {
                    notes.push(format!(
                        "line {cut_line} is long: shown from column {from}; this diagnostic is at {line}:{column}"
                    ));
                }
            }
            names = shown.pieces.iter().map(|p| p.name.clone()).collect();
            pieces = shown.pieces.into_iter().map(|p| Source::from(p.text)).collect();
            sources = pieces.iter().collect();
            ranges = shown.ranges;
        } else {
            let mut files: Vec<FileId> = spans.iter().map(|s| s.file).collect();
            files.dedup();
            for &f in &files {
                self.files.entry(f).or_insert_with(|| {
                    let shown = DisplayFile::new(self.sources.get(f));
                    let source = Source::from(shown.text.clone());
                    (shown, source)
                });
            }
            names = files.iter().map(|&f| self.sources.get(f).name.clone()).collect();
            sources = files.iter().filter_map(|f| self.files.get(f).map(|(_, s)| s)).collect();
            ranges = spans
                .iter()
                .map(|s| {
                    let i = files.iter().position(|&f| f == s.file).unwrap_or(0);
                    let shown = self.files.get(&s.file).map(|(d, _)| d);
                    let at = |o: u32| shown.map_or(o as usize, |d| d.offset(o as usize));
                    (i, at(s.start)..at(s.end))
                })
                .collect();
        }
        let kind = match d.severity {
            Severity::Error => ReportKind::Error,
            Severity::Warning => ReportKind::Warning,
        };
        let primary = labels.iter().position(|(.., p)| *p).unwrap_or(0);
        let mut report = Report::build(kind, ranges[primary].clone())
            .with_config(Config::default().with_color(self.color).with_index_type(IndexType::Byte).with_compact(false))
            .with_code(d.code)
            .with_message(escape(&d.message));
        for (i, (_, message, is_primary)) in labels.iter().enumerate() {
            let mut label = Label::new(ranges[i].clone()).with_order(i32::try_from(i).unwrap_or(i32::MAX));
            if !message.is_empty() {
                label = label.with_message(escape(message));
            }
            if self.color {
                label = label.with_color(match (is_primary, d.severity) {
                    (false, _) => ariadne::Color::Blue,
                    (true, Severity::Error) => ariadne::Color::Red,
                    (true, Severity::Warning) => ariadne::Color::Yellow,
                });
            }
            report = report.with_label(label);
        }
        if let Some(help) = &d.help {
            report = report.with_help(escape(help));
        }
        for note in notes {
            report = report.with_note(note);
        }
        let mut out = Vec::new();
        // Writing into a Vec cannot fail; an error here would mean a bug in ariadne.
        if report.finish().write(Pieces { names, sources }, &mut out).is_err() {
            return format!("{}[{}]: {}\n", severity_word(d.severity), d.code, escape(&d.message));
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Caps how many diagnostics of each code are shown to people; the rest are counted, to
/// be summarised in one line each.
pub struct PerCode {
    max: usize,
    counts: HashMap<Code, usize>,
}

impl PerCode {
    /// At most `max` of each code (0: no cap).
    pub fn new(max: usize) -> PerCode {
        PerCode { max, counts: HashMap::new() }
    }

    /// Whether a diagnostic of `code` is shown.
    pub fn admit(&mut self, code: Code) -> bool {
        let n = self.counts.entry(code).or_insert(0);
        *n += 1;
        self.max == 0 || *n <= self.max
    }

    /// The codes with diagnostics not shown, and how many, by code.
    pub(crate) fn hidden(&self) -> Vec<(Code, usize)> {
        let mut out: Vec<(Code, usize)> = self
            .counts
            .iter()
            .filter(|&(_, &n)| self.max > 0 && n > self.max)
            .map(|(&c, &n)| (c, n - self.max))
            .collect();
        out.sort();
        out
    }

    /// One line per code summarised, for people.
    pub fn summary(&self) -> String {
        self.hidden()
            .iter()
            .map(|(c, n)| format!("… and {n} more {c} ({}) not shown; `--max-diagnostics 0` shows all\n", c.title()))
            .collect()
    }
}

/// The sources one diagnostic is rendered against, by index, each named by its file.
struct Pieces<'a> {
    names: Vec<String>,
    sources: Vec<&'a Source<String>>,
}

impl Cache<usize> for Pieces<'_> {
    type Storage = String;

    fn fetch(&mut self, id: &usize) -> Result<&Source<String>, impl std::fmt::Debug> {
        self.sources.get(*id).copied().ok_or("no such source")
    }

    fn display<'a>(&self, id: &'a usize) -> Option<impl std::fmt::Display + 'a> {
        self.names.get(*id).map(|n| escape(n).into_owned())
    }
}

/// A span that starts and ends on character boundaries (ariadne panics otherwise) and
/// is never empty (so it underlines something).
fn clamp(sources: &SourceMap, span: Span) -> Span {
    let f = sources.get(span.file);
    let start = f.floor_char(span.start as usize);
    let mut end = f.ceil_char(span.end as usize).max(start);
    if end == start && end < f.text.len() {
        end = f.ceil_char(end + 1);
    }
    Span::new(span.file, start, end)
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// The stable JSON form documented in docs/diagnostics.md.
#[derive(serde::Serialize)]
pub struct JsonDiagnostic {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub code: String,
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<JsonLabel>,
    pub help: Option<String>,
}

#[derive(serde::Serialize)]
pub struct JsonLabel {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub message: String,
    pub primary: bool,
}

fn json_label(sources: &SourceMap, span: Span, message: &str, primary: bool) -> JsonLabel {
    let f = sources.get(span.file);
    let (line, column) = f.line_col(span.start as usize);
    let (end_line, end_column) = f.line_col(span.end as usize);
    JsonLabel { file: f.name.clone(), line, column, end_line, end_column, message: message.to_string(), primary }
}

pub fn json(sources: &SourceMap, d: &Diagnostic) -> JsonDiagnostic {
    let p = json_label(sources, d.primary.span, &d.primary.message, true);
    let mut labels = vec![json_label(sources, d.primary.span, &d.primary.message, true)];
    labels.extend(d.secondary.iter().map(|l| json_label(sources, l.span, &l.message, false)));
    JsonDiagnostic {
        file: p.file,
        line: p.line,
        column: p.column,
        end_line: p.end_line,
        end_column: p.end_column,
        code: d.code.to_string(),
        severity: d.severity,
        message: d.message.clone(),
        labels,
        help: d.help.clone(),
    }
}

/// One GitHub Actions workflow command (`::error file=…,line=…::message`).
pub fn github(sources: &SourceMap, d: &Diagnostic) -> String {
    let j = json(sources, d);
    let mut message = format!("{} {}", j.code, j.message);
    if let Some(h) = &j.help {
        message.push_str(&format!(" (help: {h})"));
    }
    format!(
        "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}",
        severity_word(d.severity),
        escape_property(&j.file),
        j.line,
        j.column,
        j.end_line,
        j.end_column,
        escape_property(&format!("{} {}", j.code, d.code.title())),
        escape_data(&message)
    )
}

// Escapes defined by the GitHub Actions toolkit for workflow commands.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}
