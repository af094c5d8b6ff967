//! Source files and byte spans into them.

use std::fmt;

/// Index of a file in a [`SourceMap`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FileId(pub u32);

/// A byte range in one source file.
///
/// Spans are location metadata, not syntax: two spans always compare equal, so syntax
/// trees parsed from differently formatted text compare equal when their structure is.
/// Compare `start`/`end` explicitly where positions matter.
#[derive(Clone, Copy, Default)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub(crate) fn new(file: FileId, start: usize, end: usize) -> Span {
        Span { file, start: clamp_u32(start), end: clamp_u32(end.max(start)) }
    }

    /// The smallest span covering both.
    pub(crate) fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

impl Eq for Span {}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// A loaded source file. `text` is the decoded text with a leading byte-order mark removed.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let mut text: String = text.into();
        if text.starts_with('\u{FEFF}') {
            // Replace rather than remove so byte offsets reported later stay true to the file.
            text.replace_range(0..3, "   ");
        }
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        SourceFile { name: name.into(), text, line_starts }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset).saturating_sub(1);
        let start = self.line_starts[line];
        let col = self.text.get(start..self.floor_char(offset)).map_or(0, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The byte offset where 0-based `line` starts (the end of the text past the last).
    pub(crate) fn line_start(&self, line: usize) -> usize {
        self.line_starts.get(line).copied().unwrap_or(self.text.len())
    }

    /// The largest char boundary at or before `offset`.
    pub(crate) fn floor_char(&self, offset: usize) -> usize {
        let mut o = offset.min(self.text.len());
        while !self.text.is_char_boundary(o) {
            o -= 1;
        }
        o
    }

    /// The smallest char boundary at or after `offset`.
    pub(crate) fn ceil_char(&self, offset: usize) -> usize {
        let mut o = offset.min(self.text.len());
        while !self.text.is_char_boundary(o) {
            o += 1;
        }
        o
    }

    pub(crate) fn slice(&self, span: Span) -> &str {
        let s = self.floor_char(span.start as usize);
        let e = self.ceil_char(span.end as usize);
        &self.text[s..e.max(s)]
    }
}

/// All files of one compilation: the user's and the standard library's.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    pub fn add(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        FileId(clamp_u32(self.files.len() - 1))
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (FileId(clamp_u32(i)), f))
    }
}

/// Decodes raw file bytes. Invalid UTF-8 yields the byte offset of the first bad byte.
pub fn decode(bytes: Vec<u8>) -> Result<String, usize> {
    String::from_utf8(bytes).map_err(|e| e.utf8_error().valid_up_to())
}
