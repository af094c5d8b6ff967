//! What a diagnostic shows of a file, with control characters escaped. Most diagnostics
//! are rendered against the whole file, made once per file ([`DisplayFile`]), so
//! rendering thousands of them is linear. One with a label on a long line is rendered
//! against an excerpt instead: the lines its labels touch, each long line cut to a window
//! around its labels, so a diagnostic on a 40 KB line prints a few hundred characters.

use crate::source::{SourceFile, SourceMap, Span};
use crate::terminal::{needs_escape, picture};
use std::ops::Range;

/// Lines longer than this (in bytes) are shown as a window around their labels.
pub(crate) const LONG_LINE: usize = 160;

/// Bytes of context kept on each side of the labels in a long line.
const CONTEXT: usize = 48;

/// Labelled lines at most this far apart are shown in one piece, with the lines between.
const GAP: usize = 4;

/// Lines of one file shown together, as ariadne reads them: the lines before the first
/// are empty, so that ariadne numbers the lines as the file does.
pub(crate) struct Piece {
    pub name: String,
    pub text: String,
    /// Long lines of the piece that were cut: (1-based line, 1-based column shown first).
    pub cut: Vec<(usize, usize)>,
}

/// A diagnostic's pieces, and each label's span as a range in its piece.
pub(crate) struct Excerpt {
    pub pieces: Vec<Piece>,
    /// For each span given, its piece and its byte range in that piece.
    pub ranges: Vec<(usize, Range<usize>)>,
}

/// One shown line: where it comes from and how its bytes map to the shown text.
struct Shown {
    /// The line's bytes in the file that are shown (without the line break).
    window: Range<usize>,
    /// Whether text was cut before and after the window.
    cut_before: bool,
    cut_after: bool,
}

/// The excerpt that shows `spans` (each already on character boundaries).
pub(crate) fn excerpt(sources: &SourceMap, spans: &[Span]) -> Excerpt {
    // Group spans by file and by nearness of their lines.
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].file, spans[i].start));
    let mut groups: Vec<(Span, usize, usize, Vec<usize>)> = Vec::new(); // file, first, last line, spans
    for i in order {
        let s = spans[i];
        let f = sources.get(s.file);
        let (a, b) = (line_of(f, s.start as usize), line_of(f, s.end as usize));
        match groups.last_mut() {
            Some((g, _, last, members)) if g.file == s.file && a <= *last + GAP => {
                *last = (*last).max(b);
                members.push(i);
            }
            _ => groups.push((s, a, b, vec![i])),
        }
    }
    let mut pieces = Vec::new();
    let mut ranges = vec![(0, 0..0); spans.len()];
    for (g, first, last, members) in groups {
        let f = sources.get(g.file);
        let index = pieces.len();
        let mut text = "\n".repeat(first);
        let mut cut = Vec::new();
        // Lines where a label starts or ends; the inside of a long multi-line label is
        // not shown, so it is left empty.
        let mut ends: Vec<usize> =
            members.iter().flat_map(|&i| [spans[i].start, spans[i].end]).map(|o| line_of(f, o as usize)).collect();
        ends.sort_unstable();
        for line in first..=last {
            let k = ends.partition_point(|&l| l < line);
            let near = |l: Option<&usize>| l.is_some_and(|&l| l.abs_diff(line) <= GAP);
            if !near(ends.get(k)) && !near(k.checked_sub(1).and_then(|k| ends.get(k))) {
                text.push('\n');
                continue;
            }
            let (start, end) = line_bounds(f, line);
            // The byte ranges labels cover on this line.
            let on_line: Vec<Range<usize>> = members
                .iter()
                .map(|&i| spans[i])
                .filter(|s| (s.start as usize) <= end && (s.end as usize) >= start)
                .map(|s| (s.start as usize).max(start)..(s.end as usize).min(end))
                .collect();
            let shown = window(f, start, end, &on_line);
            if shown.cut_before {
                let column = f.text[start..shown.window.start].chars().count() + 1;
                cut.push((line + 1, column));
            }
            let line_offset = text.len();
            if shown.cut_before {
                text.push('…');
            }
            let mut map = Vec::new(); // (file byte, piece byte) at each char start
            for (at, c) in f.text[shown.window.clone()].char_indices() {
                map.push((shown.window.start + at, text.len()));
                if needs_escape(c) {
                    text.push(picture(c));
                } else {
                    text.push(c);
                }
            }
            map.push((shown.window.end, text.len()));
            if shown.cut_after {
                text.push('…');
            }
            text.push('\n');
            let to_piece = |pos: usize| -> usize {
                if pos <= shown.window.start {
                    return map.first().map_or(line_offset, |m| m.1);
                }
                let k = map.partition_point(|m| m.0 <= pos);
                map.get(k.saturating_sub(1)).map_or(line_offset, |m| m.1)
            };
            for &i in &members {
                let s = spans[i];
                let (s0, s1) = (s.start as usize, s.end as usize);
                if (start..=end).contains(&s0) {
                    ranges[i].0 = index;
                    ranges[i].1.start = to_piece(s0.clamp(shown.window.start, shown.window.end));
                }
                if (start..=end).contains(&s1) {
                    ranges[i].1.end = to_piece(s1.clamp(shown.window.start, shown.window.end));
                }
            }
        }
        for &i in &members {
            let r = &mut ranges[i].1;
            r.end = r.end.max(r.start);
        }
        pieces.push(Piece { name: f.name.clone(), text, cut });
    }
    Excerpt { pieces, ranges }
}

/// Whether any of `spans` touches a line longer than [`LONG_LINE`]: such a diagnostic
/// is rendered against an [`excerpt`].
pub(crate) fn touches_long_line(sources: &SourceMap, spans: &[Span]) -> bool {
    spans.iter().any(|s| {
        let f = sources.get(s.file);
        [s.start, s.end].iter().any(|&o| {
            let (start, end) = line_bounds(f, line_of(f, o as usize));
            end - start > LONG_LINE
        })
    })
}

/// A whole file as diagnostics show it: control characters replaced by pictures of them
/// (a line break's `\r` kept), with the shifts that map file offsets to shown ones.
pub(crate) struct DisplayFile {
    pub text: String,
    /// (file offset of a replaced character, bytes added by replacements up to and
    /// including it).
    shifts: Vec<(usize, isize)>,
}

impl DisplayFile {
    pub(crate) fn new(f: &SourceFile) -> DisplayFile {
        let text = &f.text;
        let escaped = |(i, c): &(usize, char)| needs_escape(*c) && !(*c == '\r' && text[i + 1..].starts_with('\n'));
        if !text.char_indices().any(|ic| escaped(&ic)) {
            return DisplayFile { text: text.clone(), shifts: Vec::new() };
        }
        let (mut out, mut shifts, mut added) = (String::with_capacity(text.len()), Vec::new(), 0);
        for (i, c) in text.char_indices() {
            if escaped(&(i, c)) {
                let p = picture(c);
                added += p.len_utf8() as isize - c.len_utf8() as isize;
                shifts.push((i, added));
                out.push(p);
            } else {
                out.push(c);
            }
        }
        DisplayFile { text: out, shifts }
    }

    /// Where file offset `at` (a character boundary) is in the shown text.
    pub(crate) fn offset(&self, at: usize) -> usize {
        let k = self.shifts.partition_point(|&(i, _)| i < at);
        at.saturating_add_signed(k.checked_sub(1).map_or(0, |k| self.shifts[k].1))
    }
}

/// The 0-based line holding byte `offset`.
fn line_of(f: &SourceFile, offset: usize) -> usize {
    f.line_col(offset).0 - 1
}

/// The bytes of 0-based `line`, without its line break (`\n` or `\r\n`).
fn line_bounds(f: &SourceFile, line: usize) -> (usize, usize) {
    let start = f.line_start(line);
    let rest = &f.text[start..];
    let mut end = start + rest.find('\n').unwrap_or(rest.len());
    if f.text[..end].ends_with('\r') {
        end -= 1;
    }
    (start, end)
}

/// What of the line `start..end` is shown: all of it when it is short, else a window of
/// about [`LONG_LINE`] bytes around the labels on it.
fn window(f: &SourceFile, start: usize, end: usize, labels: &[Range<usize>]) -> Shown {
    if end - start <= LONG_LINE {
        return Shown { window: start..end, cut_before: false, cut_after: false };
    }
    let from = labels.iter().map(|r| r.start).min().unwrap_or(start);
    let to = labels.iter().map(|r| r.end).max().unwrap_or(start).min(from + LONG_LINE);
    let a = f.floor_char(from.saturating_sub(CONTEXT).max(start));
    let b = f.ceil_char((to + CONTEXT).min(end));
    Shown { window: a..b, cut_before: a > start, cut_after: b < end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{FileId, SourceFile};

    fn one(text: &str) -> SourceMap {
        let mut m = SourceMap::new();
        m.add(SourceFile::new("f.gpol", text));
        m
    }

    fn at(text: &str, needle: &str) -> Span {
        let i = text.find(needle).expect("the needle is in the text");
        Span::new(FileId(0), i, i + needle.len())
    }

    #[test]
    fn short_lines_are_shown_whole_and_spans_keep_their_text() {
        let text = "policy p\nfilter f { x > 1 }\nscore s { y }\n";
        let e = excerpt(&one(text), &[at(text, "x > 1"), at(text, "y }")]);
        assert_eq!(e.pieces.len(), 1);
        let p = &e.pieces[0];
        assert_eq!(p.text, "\nfilter f { x > 1 }\nscore s { y }\n");
        assert_eq!(&p.text[e.ranges[0].1.clone()], "x > 1");
        assert_eq!(&p.text[e.ranges[1].1.clone()], "y }");
    }

    #[test]
    fn distant_lines_are_separate_pieces() {
        let text = format!("a\n{}b\n", "\n".repeat(100));
        let e = excerpt(&one(&text), &[at(&text, "a"), at(&text, "b")]);
        assert_eq!(e.pieces.len(), 2);
        assert_eq!(e.pieces[0].text, "a\n");
        assert_eq!(e.pieces[1].text, format!("{}b\n", "\n".repeat(101)));
        assert_eq!(e.ranges[1], (1, 101..102));
    }

    #[test]
    fn a_long_line_is_cut_around_the_label() {
        let text = format!("{}TARGET{}\n", "x".repeat(10_000), "y".repeat(10_000));
        let e = excerpt(&one(&text), &[at(&text, "TARGET")]);
        let p = &e.pieces[0];
        assert!(p.text.len() < 200, "{}", p.text.len());
        assert!(p.text.starts_with('…') && p.text.ends_with("…\n"));
        assert!(touches_long_line(&one(&text), &[at(&text, "TARGET")]));
        assert_eq!(&p.text[e.ranges[0].1.clone()], "TARGET");
        assert_eq!(p.cut, vec![(1, 10_001 - CONTEXT)]);
    }

    #[test]
    fn control_characters_are_escaped_and_spans_follow() {
        let text = "a\u{1b}[2Jb \u{202e}c\r\n";
        let e = excerpt(&one(text), &[at(text, "c")]);
        let p = &e.pieces[0];
        assert_eq!(p.text, "a␛[2Jb \u{fffd}c\n");
        assert_eq!(&p.text[e.ranges[0].1.clone()], "c");
        let shown = DisplayFile::new(&SourceFile::new("f.gpol", text));
        assert_eq!(shown.text, "a␛[2Jb \u{fffd}c\r\n");
        let c = text.find('c').expect("c");
        assert_eq!(&shown.text[shown.offset(c)..shown.offset(c) + 1], "c");
        assert_eq!(shown.offset(1), 1);
    }
}
