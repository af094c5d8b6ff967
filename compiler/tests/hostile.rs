//! Malformed and hostile input never panics, overflows the stack or hangs: it gets a
//! diagnostic (or a clean result). Each case also runs the formatter.

use gpol_compiler::analyse::analyse;
use gpol_compiler::check::check;
use gpol_compiler::diag::Code;
use gpol_compiler::source::{SourceFile, SourceMap, decode};

fn check_text(text: &str) -> Vec<Code> {
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("hostile.gpol", text));
    let mut checked = check(&mut sources, id);
    // Lowering and the analyses of what checks must hold out too.
    if let Some(policy) = &checked.policy
        && let Err(errors) = analyse(policy)
    {
        checked.diagnostics.extend(errors);
    }
    // Rendering must not panic either (ariadne is strict about spans).
    for d in &checked.diagnostics {
        let _ = gpol_compiler::diag::render::human(&sources, d, false);
        let _ = gpol_compiler::diag::render::json(&sources, d);
    }
    let _ = gpol_compiler::fmt::format_source(id, &sources.get(id).text);
    checked.diagnostics.iter().map(|d| d.code).collect()
}

#[test]
fn empty_file_needs_a_header() {
    assert_eq!(check_text(""), vec![Code::MissingHeader]);
}

#[test]
fn binary_garbage_is_a_syntax_error() {
    let garbage: String = (0..4096u32).map(|i| char::from_u32((i * 7919) % 0x2FF + 1).unwrap_or('x')).collect();
    let codes = check_text(&garbage);
    assert!(!codes.is_empty());
}

#[test]
fn invalid_utf8_reports_the_offset() {
    assert_eq!(decode(b"policy p\n\xff\xfe".to_vec()), Err(9));
}

#[test]
fn byte_order_mark_and_crlf_are_accepted() {
    let text = "\u{FEFF}policy p\r\nfilter f { job.whole_cards > 0 gpu }\r\n";
    assert_eq!(check_text(text), Vec::<Code>::new());
}

#[test]
fn deep_parentheses_are_refused_not_overflowed() {
    let n = 200_000;
    let text = format!("policy p\nconst x = {}1{}\n", "(".repeat(n), ")".repeat(n));
    assert_eq!(check_text(&text), vec![Code::TooDeep]);
}

#[test]
fn deep_if_chains_are_refused() {
    let mut e = String::from("0");
    for _ in 0..10_000 {
        e = format!("if true then 1 else {e}");
    }
    let text = format!("policy p\nconst x = {e}\n");
    assert_eq!(check_text(&text), vec![Code::TooDeep]);
}

#[test]
fn long_operator_chains_are_refused() {
    let text = format!("policy p\nconst x = {}1\n", "1 + ".repeat(5_000));
    assert_eq!(check_text(&text), vec![Code::TooDeep]);
    let text = format!("policy p\nconst x = {}true\n", "not ".repeat(5_000));
    assert_eq!(check_text(&text), vec![Code::TooDeep]);
}

#[test]
fn nesting_within_the_limit_is_fine() {
    let text = format!("policy p\nconst _x = {}1{}\n", "(".repeat(50), ")".repeat(50));
    assert_eq!(check_text(&text), Vec::<Code>::new());
}

#[test]
fn megabyte_identifier_is_reported_briefly() {
    let name = "a".repeat(1 << 20);
    let text = format!("policy p\nfilter f {{ {name} }}\n");
    let mut sources = SourceMap::new();
    let id = sources.add(SourceFile::new("big.gpol", text));
    let checked = check(&mut sources, id);
    assert_eq!(checked.diagnostics.len(), 1);
    assert_eq!(checked.diagnostics[0].code, Code::UnknownName);
    assert!(checked.diagnostics[0].message.len() < 200, "the message quotes a shortened name");
}

#[test]
fn five_thousand_digit_literal_is_too_large() {
    let text = format!("policy p\nconst x = {}\n", "9".repeat(5000));
    assert_eq!(check_text(&text), vec![Code::BadLiteral]);
}

#[test]
fn unterminated_string_and_comment() {
    assert_eq!(check_text("policy p\nconst x = \"abc\n"), vec![Code::Unterminated]);
    assert_eq!(check_text("policy p\n/* never closed\nconst x = 1\n"), vec![Code::Unterminated]);
}

#[test]
fn multibyte_characters_near_errors_do_not_break_rendering() {
    let codes = check_text("policy p\nfilter f { job.größe > 0 }\n");
    assert!(!codes.is_empty());
    let codes = check_text("policy p\nfilter f { \"é\" é }\n");
    assert!(!codes.is_empty());
}

#[test]
fn every_truncation_of_a_policy_is_handled() {
    let text = include_str!("../../policies/fair_share.gpol");
    for cut in (0..text.len()).filter(|i| text.is_char_boundary(*i)).step_by(7) {
        let _ = check_text(&text[..cut]);
    }
}

/// Parse errors are written in words: no grammar rule name ever reaches a message.
#[test]
fn parse_errors_never_show_rule_names() {
    let rule_like = |w: &str| {
        matches!(w, "EOI" | "expr" | "ident" | "primary" | "postfix" | "infix" | "prefix" | "props" | "ty")
            || w.starts_with("kw_")
            || w.starts_with("op_")
            || ["_stmt", "_decl", "_rule", "_opt", "_clause", "_header", "_kind"].iter().any(|s| w.ends_with(s))
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.map(|e| e.path()).unwrap_or_default()).unwrap_or_default();
        for cut in (0..text.len()).filter(|i| text.is_char_boundary(*i)).step_by(37) {
            let Err(d) = gpol_compiler::parse::parse(Default::default(), &text[..cut]) else { continue };
            seen += 1;
            let words = format!("{} {} {}", d.message, d.primary.message, d.help.unwrap_or_default());
            for w in words.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                // Backticked names quote the user's own text; the rest must be prose.
                assert!(!rule_like(w) || words.contains(&format!("`{w}`")), "rule name `{w}` in: {words}");
            }
        }
    }
    assert!(seen > 100, "only {seen} parse errors exercised");
}
