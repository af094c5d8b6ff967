//! Comments are not part of the syntax tree; the formatter re-attaches them by position.

use crate::source::{FileId, Span};

#[derive(Clone, Debug, PartialEq)]
pub struct Comment {
    /// The comment's text including `//` or `/* */`, without the trailing newline.
    pub text: String,
    pub span: Span,
    /// Whether code precedes the comment on its line (a trailing comment).
    pub trailing: bool,
    /// Whether a blank line separates this comment from what comes before it.
    pub blank_before: bool,
    /// Whether a blank line separates this comment from what comes after it.
    pub blank_after: bool,
}

/// All comments of a file in order. Strings are skipped, so `"//"` is not a comment.
pub fn comments(file: FileId, text: &str) -> Vec<Comment> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut code_on_line = false;
    let mut newlines_since_code = 2usize;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                code_on_line = true;
                newlines_since_code = 0;
            }
            b'/' if matches!(bytes.get(i + 1), Some(b'/') | Some(b'*')) => {
                let start = i;
                let end = if bytes[i + 1] == b'/' {
                    text[i..].find('\n').map_or(text.len(), |n| i + n)
                } else {
                    text[i + 2..].find("*/").map_or(text.len(), |n| i + 2 + n + 2)
                };
                let t = text[start..end].trim_end_matches('\r').to_string();
                out.push(Comment {
                    text: t,
                    span: Span::new(file, start, end),
                    trailing: code_on_line,
                    blank_before: newlines_since_code >= 2,
                    blank_after: blank_line_follows(&text[end..]),
                });
                newlines_since_code = 0;
                i = end;
            }
            b'\n' => {
                code_on_line = false;
                newlines_since_code += 1;
                i += 1;
            }
            c => {
                if !c.is_ascii_whitespace() {
                    code_on_line = true;
                    newlines_since_code = 0;
                }
                i += 1;
            }
        }
    }
    out
}

/// Whether the text starts with white space holding two or more line breaks.
fn blank_line_follows(rest: &str) -> bool {
    let ws = rest.len() - rest.trim_start().len();
    rest[..ws].matches('\n').count() >= 2
}
