//! Diagnostics are plain data until they are rendered at the edge (see [`render`]).

mod codes;
mod excerpt;
pub mod render;

pub use codes::Code;

use crate::source::{FileId, SourceFile, SourceMap, Span};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One problem found in a source file.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub message: String,
    pub primary: Label,
    pub secondary: Vec<Label>,
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic whose severity follows its code (`E…` errors, `W…` warnings).
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        let severity = if code.is_warning() { Severity::Warning } else { Severity::Error };
        Diagnostic {
            code,
            severity,
            message: message.into(),
            primary: Label { span, message: String::new() },
            secondary: Vec::new(),
            help: None,
        }
    }

    /// The text under the primary span.
    pub fn label(mut self, message: impl Into<String>) -> Diagnostic {
        self.primary.message = message.into();
        self
    }

    pub(crate) fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label { span, message: message.into() });
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Puts diagnostics in the order they are reported: by file, then position, then code.
/// The sort is stable, so diagnostics alike keep the order they were found in.
pub(crate) fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| (d.primary.span.file, d.primary.span.start, d.code));
}

/// Shortens user-controlled text (a 1 MB identifier, say) before it goes into a message.
pub fn snippet(text: &str) -> String {
    const MAX: usize = 48;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        let head: String = text.chars().take(MAX - 1).collect();
        format!("{head}…")
    }
}

/// docs/diagnostics.md: the output formats and every code with its explanation.
pub fn markdown() -> String {
    let mut out = String::from(include_str!("preamble.md"));
    for c in Code::ALL {
        out.push_str(&format!("\n## {}: {}\n\n```text\n{}\n```\n", c.as_str(), c.title(), c.explanation()));
    }
    out
}

// Here rather than in `source`, so that sources know nothing of diagnostics.
impl SourceMap {
    /// Adds a file read from disk. A file that is not UTF-8 is added as its valid
    /// prefix (so the report can show where the bad byte is) with an E0031 diagnostic.
    pub fn add_bytes(&mut self, name: impl Into<String>, bytes: Vec<u8>) -> (FileId, Option<Diagnostic>) {
        match String::from_utf8(bytes) {
            Ok(text) => (self.add(SourceFile::new(name, text)), None),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(at);
                let prefix = String::from_utf8(bytes).unwrap_or_default();
                let id = self.add(SourceFile::new(name, prefix));
                let d =
                    Diagnostic::new(Code::InvalidUtf8, Span::new(id, at, at), format!("invalid UTF-8 at byte {at}"))
                        .label("the file is not UTF-8 text from here on")
                        .help("save the file as UTF-8");
                (id, Some(d))
            }
        }
    }
}
