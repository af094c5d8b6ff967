//! Text from inputs nobody here wrote (job names, policy lines) is shown on terminals:
//! control characters in it could move the cursor, set the title or hide text. They are
//! shown escaped instead, as `\u{1b}`.

use std::borrow::Cow;

/// `text` with every control character except newline and tab, and every bidirectional
/// formatting character, written as a `\u{…}` escape.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One visible character standing for a character that [`needs_escape`], for source
/// lines shown under a diagnostic, where one character must stay one column: the
/// Unicode control pictures (`␛` for ESC), `�` for the rest.
pub(crate) fn picture(c: char) -> char {
    match u32::from(c) {
        n @ 0..=0x1f => char::from_u32(0x2400 + n).unwrap_or('\u{fffd}'),
        0x7f => '\u{2421}',
        _ => '\u{fffd}',
    }
}

/// Whether `c` is shown escaped on terminals.
pub fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// The Unicode bidirectional formatting characters that can reorder how source text is
/// displayed ("Trojan Source", CVE-2021-42574).
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi_but_not_plain_text() {
        assert!(matches!(escape("job-1 é"), Cow::Borrowed("job-1 é")));
        assert_eq!(escape("a\u{1b}]0;pwned\u{7}b"), "a\\u{1b}]0;pwned\\u{7}b");
        assert_eq!(escape("x\u{202e}y\r"), "x\\u{202e}y\\u{d}");
        assert_eq!(escape("line\n\tnext"), "line\n\tnext");
    }

    #[test]
    fn pictures_keep_one_column() {
        assert_eq!(picture('\u{1b}'), '␛');
        assert_eq!(picture('\u{7}'), '␇');
        assert_eq!(picture('\u{7f}'), '␡');
        assert_eq!(picture('\u{202e}'), '\u{fffd}');
    }
}
