//! Turns pest's errors (lists of grammar rule names) into sentences a person would write.

use super::Rule;
use crate::diag::{Code, Diagnostic, snippet};
use crate::fuzzy;
use crate::source::{FileId, Span};
use pest::error::{Error, ErrorVariant, InputLocation};

/// Words that begin a top-level declaration.
pub(super) const ITEM_KEYWORDS: &[&str] = &[
    "use",
    "const",
    "fn",
    "queue",
    "priority_class",
    "topology",
    "settings",
    "admit",
    "filter",
    "score",
    "card_score",
    "queue_order",
    "job_order",
    "gang",
    "preempt",
    "reclaim",
    "test",
];
const QUEUE_KEYWORDS: &[&str] = &[
    "queue",
    "guarantee",
    "limit",
    "borrow_limit",
    "lend_limit",
    "user_limit",
    "weight",
    "usage_half_life",
    "attr",
    "queueing",
];
const TEST_KEYWORDS: &[&str] = &["node", "submit", "run", "advance", "complete", "fail", "expect"];

pub(crate) fn internal(file: FileId) -> Diagnostic {
    Diagnostic::new(Code::Syntax, Span::new(file, 0, 0), "internal parser error")
        .help("this is a bug in gpolc; please report it with the file that caused it")
}

/// What the parser wanted, in words; `None` for rules that add nothing to a message.
fn phrase(rule: Rule) -> Option<&'static str> {
    use Rule::*;
    Some(match rule {
        expr | op_not | op_neg | number | quantity | boolean | mig_profile | list | paren | if_expr | comprehension
        | comp_kind => "an expression",
        ident => "a name",
        param => "a parameter (`name: type`)",
        path => "a module path",
        use_decl | const_decl | fn_decl | queue_decl | priority_class | topology_decl | settings | admit_rule
        | filter_rule | score_rule | card_score_rule | queue_order | job_order | gang | preempt_rule | reclaim_rule
        | test_block => "a declaration (`queue`, `filter`, `score`, `test`, …)",
        policy_header | module_header => "`policy NAME`",
        op_implies | op_or | op_and | op_not_in | op_in | op_eq | op_ne | op_le | op_ge | op_lt | op_gt
        | op_default | op_add | op_sub | op_mul | op_div | field_access | index | call_args | kw_and | kw_or
        | kw_implies => "an operator",
        ty | unit_ty | list_ty => "a type",
        string | reason => "a string",
        block => "`{`",
        int => "a whole number",
        window | window_hours | window_days => "a window (`from 22:00 to 07:00`, `on sat, sun`)",
        clock_time => "a time of day (`07:00`)",
        quota_stmt | quota_kind | weight_stmt | half_life_stmt | attr_stmt | queueing_stmt => {
            "a queue setting (`guarantee`, `limit`, `weight`, `queue`, …)"
        }
        node_stmt | submit_stmt | run_stmt | advance_stmt | complete_stmt | fail_stmt | expect_stmt => {
            "a test step (`node`, `submit`, `run`, `advance`, `complete`, `fail`, `expect`)"
        }
        props => "`{` and properties",
        label_prop | plain_prop => "a property",
        order_key => "an order key",
        order_dir => "`asc` or `desc`",
        gang_clause | gang_kind => "`require` or `prefer`",
        when_clause => "`when`",
        cost_clause => "`cost`",
        tier_opt | weight_opt => "`tier` or `weight`",
        let_stmt | kw_let => "`let`",
        kw_in => "an operator",
        scalar => "a number or a constant",
        kw_then => "`then`",
        kw_else => "`else`",
        EOI => "end of file",
        _ => return None,
    })
}

pub(crate) fn humanize(file: FileId, text: &str, err: Error<Rule>) -> Diagnostic {
    let pos = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let mut pos = floor(text, pos.min(text.len()));
    let mut expected: Vec<String> = Vec::new();
    // pest reports rules where a rule failed; a literal (`on`, `=`) may have failed
    // further on. The furthest point is where the text really went wrong.
    if let Some(attempts) = err.parse_attempts()
        && attempts.max_position > pos
        && attempts.max_position <= text.len()
    {
        let words: Vec<String> = attempts
            .expected_tokens()
            .iter()
            .map(|t| t.to_string())
            .filter(|t| !t.trim().is_empty() && !t.starts_with("//") && !t.starts_with("/*") && t != "\u{feff}")
            .collect();
        if !words.is_empty() {
            pos = floor(text, attempts.max_position);
            for w in words {
                let w = format!("`{w}`");
                if !expected.contains(&w) {
                    expected.push(w);
                }
            }
            expected.truncate(5);
            let found = token_at(text, pos);
            let prev = token_before_any(text, pos);
            let end = pos + found.as_ref().map_or(0, String::len);
            let message = match prev {
                Some(p) => format!("expected {} after `{}`", join(&expected), snippet(&p)),
                None => format!("expected {}", join(&expected)),
            };
            let label = found.map_or("found the end of the file".to_string(), |f| format!("found `{}`", snippet(&f)));
            let help = format!("write {} here", expected[0]);
            return Diagnostic::new(Code::Syntax, Span::new(file, pos, end), message).label(label).help(help);
        }
    }
    let mut add = |s: String| {
        if !expected.contains(&s) {
            expected.push(s);
        }
    };
    match &err.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            for r in positives {
                if let Some(p) = phrase(*r) {
                    add(p.to_string());
                }
            }
        }
        ErrorVariant::CustomError { message } => {
            return Diagnostic::new(Code::TooDeep, Span::new(file, pos, pos + 1), "the parser gave up")
                .label(snippet(message))
                .help("simplify the nesting around this point");
        }
    }
    if let Some(attempts) = err.parse_attempts() {
        // Rules name what was wanted; tokens add the punctuation (keywords and white
        // space are covered by the rules).
        for tok in attempts.expected_tokens() {
            let t = tok.to_string();
            if PUNCTUATION.contains(&t.as_str()) {
                add(format!("`{t}`"));
            }
        }
    }
    // An operator is always possible after an operand; say so only when nothing else is.
    let has_expr = expected.iter().any(|e| e == "an expression");
    if expected.len() > 1 {
        expected.retain(|e| e != "an operator" && (!has_expr || !is_operator_token(e)));
    }
    if has_expr {
        expected.retain(|e| e != "`{`");
        // A name, string or number is an expression too.
        expected.retain(|e| !matches!(e.as_str(), "a name" | "a string" | "a number" | "a whole number"));
    }
    if expected.iter().any(|e| e.starts_with("a declaration")) {
        expected.retain(|e| e.starts_with("a declaration") || e == "end of file");
    }
    expected.truncate(5);

    let found = token_at(text, pos);
    if matches!(found.as_deref(), Some("policy" | "module")) && expected.iter().any(|e| e.starts_with("a declaration"))
    {
        let end = pos + found.as_ref().map_or(0, String::len);
        return Diagnostic::new(Code::MissingHeader, Span::new(file, pos, end), "the header must come first")
            .label("a header after declarations")
            .help("move this line to the top of the file");
    }
    let prev = token_before(text, pos);
    let want = join(&expected);
    let message = match &prev {
        Some(p) => format!("expected {want} after `{}`", snippet(p)),
        None => format!("expected {want}"),
    };
    let found_text = match &found {
        Some(f) => format!("found `{}`", snippet(f)),
        None => "found the end of the file".to_string(),
    };
    let end = pos + found.as_ref().map_or(0, |f| f.len());
    let mut d = Diagnostic::new(Code::Syntax, Span::new(file, pos, end), message).label(found_text);
    if let Some(f) = &found {
        let candidates: &[&str] = if expected.iter().any(|e| e.starts_with("a declaration")) {
            ITEM_KEYWORDS
        } else if expected.iter().any(|e| e.starts_with("a queue setting")) {
            QUEUE_KEYWORDS
        } else if expected.iter().any(|e| e.starts_with("a test step")) {
            TEST_KEYWORDS
        } else {
            &[]
        };
        if let Some(s) = fuzzy::suggest(f, candidates.iter().copied()) {
            d = d.help(format!("did you mean `{s}`?"));
        }
    }
    if d.help.is_none() {
        d = d.help(if has_expr {
            "an operand is missing: write a value, a name or a parenthesised expression".to_string()
        } else if expected.iter().any(|e| e == "a number or a constant") {
            "write a number such as `2`, or the name of a constant".to_string()
        } else {
            "docs/language.md shows the syntax of every declaration".to_string()
        });
    }
    if found.is_none()
        && let Some((at, open)) = unclosed(text)
    {
        d = d
            .with_secondary(Span::new(file, at, at + 1), format!("this `{open}` is never closed"))
            .help(format!("close it with `{}`", closer(open)));
    }
    d
}

// Tokens worth naming; `(`, `[` and `.` would only list ways to continue an expression.
const PUNCTUATION: &[&str] = &["}", ")", "]", "{", ",", ";", "=", ":", "->", ".."];

fn closer(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

/// The innermost bracket left open at the end of the text (strings and comments skipped).
fn unclosed(text: &str) -> Option<(usize, char)> {
    let mut stack = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' | '\n' => break,
                        _ => {}
                    }
                }
            }
            '/' if chars.peek().is_some_and(|(_, n)| *n == '/') => {
                while chars.next_if(|(_, c)| *c != '\n').is_some() {}
            }
            '/' if chars.peek().is_some_and(|(_, n)| *n == '*') => {
                let mut prev = ' ';
                for (_, c) in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '(' | '[' | '{' => stack.push((i, c)),
            ')' | ']' | '}' => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.pop()
}

fn is_operator_token(s: &str) -> bool {
    matches!(
        s,
        "`==`" | "`!=`" | "`<`" | "`<=`" | "`>`" | "`>=`" | "`??`" | "`+`" | "`-`" | "`*`" | "`/`" | "`.`" | "`[`"
    )
}

fn join(items: &[String]) -> String {
    match items {
        [] => "something else".to_string(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

fn floor(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

const OPERATOR_CHARS: &str = "=<>!?+-*/.";

/// The token starting at `pos`, or `None` at the end of the file.
fn token_at(text: &str, pos: usize) -> Option<String> {
    let rest = &text[pos..];
    let first = rest.chars().next()?;
    let len = if is_word(first) {
        rest.find(|c: char| !is_word(c)).unwrap_or(rest.len())
    } else if OPERATOR_CHARS.contains(first) {
        rest.find(|c: char| !OPERATOR_CHARS.contains(c)).unwrap_or(rest.len())
    } else {
        first.len_utf8()
    };
    Some(rest[..len].to_string())
}

/// The token that ends just before `pos` (skipping white space).
fn token_before(text: &str, pos: usize) -> Option<String> {
    let before = text[..pos].trim_end();
    let last = before.chars().next_back()?;
    let start = if is_word(last) {
        before.rfind(|c: char| !is_word(c)).map_or(0, |i| i + 1)
    } else if OPERATOR_CHARS.contains(last) {
        before.rfind(|c: char| !OPERATOR_CHARS.contains(c)).map_or(0, |i| i + 1)
    } else {
        before.len() - last.len_utf8()
    };
    let tok = &before[start..];
    // Only keywords and punctuation make a useful "after"; a name or number does not.
    let is_keyword =
        ["and", "or", "not", "implies", "if", "then", "else", "in", "when", "cost", "weight", "tier", "advance"]
            .contains(&tok);
    (is_keyword || !tok.chars().any(is_word)).then(|| tok.to_string())
}

/// The token that ends just before `pos`, whatever it is.
fn token_before_any(text: &str, pos: usize) -> Option<String> {
    let before = text[..pos].trim_end();
    let last = before.chars().next_back()?;
    let start = if is_word(last) {
        before.rfind(|c: char| !is_word(c)).map_or(0, |i| i + 1)
    } else {
        before.len() - last.len_utf8()
    };
    Some(before[start..].to_string())
}
