//! A linear scan before pest runs: catches what a recursive-descent parser reports
//! badly or not at all — unterminated strings and comments, and nesting deep enough to
//! exhaust the stack.

use crate::diag::{Code, Diagnostic};
use crate::source::{FileId, Span};

use crate::limits::MAX_NESTING;

const ITEM_KEYWORDS: &[&str] = &["const", "fn", "priority_class", "settings", "test", "queue"];

pub(crate) fn prescan(file: FileId, text: &str) -> Result<(), Diagnostic> {
    let bytes = text.as_bytes();
    // One frame per open bracket: (position, the `if`s opened inside it so far).
    let mut frames: Vec<(usize, usize)> = vec![(0, 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match bytes.get(i) {
                        None | Some(b'\n') => {
                            return Err(Diagnostic::new(
                                Code::Unterminated,
                                Span::new(file, start, i),
                                "unterminated string",
                            )
                            .label("this string has no closing `\"` on its line")
                            .help("strings cannot span lines; close it with `\"` (use `\\n` for a newline)"));
                        }
                        Some(b'\\') => i += 2,
                        Some(b'"') => break,
                        Some(_) => i += 1,
                    }
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let start = i;
                match text[i + 2..].find("*/") {
                    Some(end) => i += end + 4,
                    None => {
                        return Err(Diagnostic::new(
                            Code::Unterminated,
                            Span::new(file, start, start + 2),
                            "unterminated block comment",
                        )
                        .label("this comment is never closed")
                        .help("close it with `*/`"));
                    }
                }
                continue;
            }
            b'(' | b'[' | b'{' => {
                frames.push((i, 0));
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(file, i));
                }
            }
            b')' | b']' | b'}' => {
                if frames.len() > 1
                    && let Some((_, ifs)) = frames.pop()
                {
                    depth -= 1 + ifs;
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let word = &text[start..i];
                if frames.len() == 1 && ITEM_KEYWORDS.contains(&word) {
                    // A new top-level item: `if`s of earlier constants are closed.
                    if let Some(top) = frames.last_mut() {
                        depth -= top.1;
                        top.1 = 0;
                    }
                }
                if word == "if" {
                    if let Some(top) = frames.last_mut() {
                        top.1 += 1;
                    }
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(too_deep(file, start));
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

fn too_deep(file: FileId, at: usize) -> Diagnostic {
    Diagnostic::new(Code::TooDeep, Span::new(file, at, at + 1), "nesting too deep")
        .label(format!("more than {MAX_NESTING} levels of brackets, braces and `if`s at this point"))
        .help("split the expression with `let` bindings or a helper `fn`")
}
