//! Renders diagnostics for people (ariadne), for machines (JSON) and for GitHub
//! workflow annotations.

use super::{Diagnostic, Severity};
use crate::source::{SourceMap, Span};
use ariadne::{Config, IndexType, Label, Report, ReportKind};

/// Renders one diagnostic the way a person reads it, with the source underlined.
pub fn human(sources: &SourceMap, d: &Diagnostic, color: bool) -> String {
    let name_of = |s: Span| sources.get(s.file).name.clone();
    let range_of = |s: Span| clamp(sources, s);
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    let primary = (name_of(d.primary.span), range_of(d.primary.span));
    let mut report = Report::build(kind, primary.clone())
        .with_config(Config::default().with_color(color).with_index_type(IndexType::Byte).with_compact(false))
        .with_code(d.code)
        .with_message(&d.message);
    // ariadne starts a new source group whenever a label's order goes back up the file,
    // so labels are ordered by position; the primary stands out by colour and message.
    let mut labels: Vec<(Span, &str, bool)> = vec![(d.primary.span, d.primary.message.as_str(), true)];
    labels.extend(d.secondary.iter().map(|l| (l.span, l.message.as_str(), false)));
    labels.sort_by_key(|(s, _, primary)| (s.file, s.start, !primary));
    for (i, (span, message, is_primary)) in labels.into_iter().enumerate() {
        let mut label = Label::new((name_of(span), range_of(span))).with_order(i32::try_from(i).unwrap_or(i32::MAX));
        if !message.is_empty() {
            label = label.with_message(message);
        }
        if color {
            label = label.with_color(match (is_primary, d.severity) {
                (false, _) => ariadne::Color::Blue,
                (true, Severity::Error) => ariadne::Color::Red,
                (true, Severity::Warning) => ariadne::Color::Yellow,
            });
        }
        report = report.with_label(label);
    }
    let _ = primary;
    if let Some(help) = &d.help {
        report = report.with_help(help);
    }
    let cache = ariadne::sources(sources.iter().map(|(_, f)| (f.name.clone(), f.text.clone())));
    let mut out = Vec::new();
    // Writing into a Vec cannot fail; an error here would mean a bug in ariadne.
    if report.finish().write(cache, &mut out).is_err() {
        return format!("{}[{}]: {}\n", severity_word(d.severity), d.code, d.message);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A span as a byte range that starts and ends on character boundaries (ariadne panics
/// otherwise) and is never empty (so it underlines something).
fn clamp(sources: &SourceMap, span: Span) -> std::ops::Range<usize> {
    let f = sources.get(span.file);
    let start = f.floor_char(span.start as usize);
    let mut end = f.ceil_char(span.end as usize).max(start);
    if end == start && end < f.text.len() {
        end = f.ceil_char(end + 1);
    }
    start..end
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
fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}
