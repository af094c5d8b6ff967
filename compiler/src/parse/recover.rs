//! Where a file's top-level declarations start, found lexically, for recovering from a
//! syntax error: each declaration is then parsed on its own, so one run reports every
//! broken declaration instead of the first.

use super::errors::ITEM_KEYWORDS as DECLARATION_KEYWORDS;
use std::ops::Range;

/// The file cut into pieces, each a top-level declaration with the comments after it; the
/// first holds the header. A declaration starts on a line whose first word is a
/// declaration keyword, outside brackets — or at the start of the line whatever the
/// brackets, since a broken declaration may leave one open and formatted files start
/// every declaration there.
pub(crate) fn declarations(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    let mut depth = 0usize;
    let mut line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        if line_start {
            line_start = false;
            let word_at = i + bytes[i..].iter().take_while(|b| matches!(b, b' ' | b'\t')).count();
            let len = bytes[word_at..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
            let word = &text[word_at..word_at + len];
            if DECLARATION_KEYWORDS.contains(&word) && (depth == 0 || word_at == i) {
                depth = 0;
                if i > 0 {
                    starts.push(i);
                }
            }
        }
        match bytes[i] {
            b'\n' => line_start = true,
            b'"' => {
                // To the closing quote or the end of the line (unterminated).
                i += 1;
                while i < bytes.len() && !matches!(bytes[i], b'"' | b'\n') {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if bytes.get(i) == Some(&b'\n') {
                    continue;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = text[i + 2..].find("*/").map_or(bytes.len(), |end| i + end + 4);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(text.len()));
    starts.iter().zip(ends).map(|(&a, b)| a..b.min(text.len()).max(a)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        declarations(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn each_declaration_is_a_piece() {
        let text = "policy p\n\nqueue a {\n  queue b {}\n}\nfilter f { x }\n// note\nscore s { 1 }\n";
        assert_eq!(
            pieces(text),
            ["policy p\n\n", "queue a {\n  queue b {}\n}\n", "filter f { x }\n// note\n", "score s { 1 }\n"]
        );
    }

    #[test]
    fn an_unclosed_brace_does_not_swallow_the_rest() {
        let text = "policy p\nfilter f { (x\nscore s { 1 }\n";
        assert_eq!(pieces(text), ["policy p\n", "filter f { (x\n", "score s { 1 }\n"]);
    }

    #[test]
    fn keywords_in_strings_comments_and_blocks_do_not_split() {
        let text = "policy p\ntest \"t\" {\n  node n { cards 1 }\n  /*\nscore */ submit j { queue a }\n}\n";
        assert_eq!(
            pieces(text),
            ["policy p\n", "test \"t\" {\n  node n { cards 1 }\n  /*\nscore */ submit j { queue a }\n}\n"]
        );
    }
}
