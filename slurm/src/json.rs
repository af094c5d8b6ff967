//! Slurm's JSON, read tolerantly. Each data parser writes a field its own way: 22.05's
//! openapi/v0.0.38 a plain number or string, later ones (v0.0.40 to v0.0.45) numbers as
//! `{"set", "infinite", "number"}` structs and states and flags as lists. The readers of
//! nodes ([`crate::sinfo`]), jobs ([`crate::squeue`]) and histories ([`crate::sacct`]) take
//! each field they read as a [`Flex`] and read it through these, so all of them tolerate
//! the same shapes; a field that is missing takes its default.

use serde::Deserialize;
use serde_json::Value;

/// A field as any data parser writes it: a number, a string, a list (of state flags), or
/// a `{"set", "infinite", "number"}` struct; anything else is skipped.
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Flex {
    Number(serde_json::Number),
    Text(String),
    List(Vec<Value>),
    NoVal {
        #[serde(default)]
        set: Option<bool>,
        #[serde(default)]
        infinite: Option<bool>,
        #[serde(default)]
        number: Option<serde_json::Number>,
    },
    Other(serde::de::IgnoredAny),
}

impl Flex {
    /// A field of a document already read as a tree (a node of `sinfo --json`).
    pub(crate) fn of(value: &Value) -> Option<Flex> {
        Flex::deserialize(value).ok()
    }
}

/// A whole number, or a `{"set": true, "number": n}` struct; `None` when unset or infinite.
pub(crate) fn number(v: &Option<Flex>) -> Option<u64> {
    match v.as_ref()? {
        Flex::Number(n) => n.as_u64(),
        Flex::NoVal { set, infinite, number } => {
            if set.unwrap_or(true) && !infinite.unwrap_or(false) {
                number.as_ref().and_then(|n| n.as_u64())
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether a field holds a negative number (which [`number`] reads as unset): a count
/// Slurm never writes, refused rather than read as none.
pub(crate) fn negative(v: &Option<Flex>) -> bool {
    let n = match v {
        Some(Flex::Number(n)) => Some(n),
        Some(Flex::NoVal { number, .. }) => number.as_ref(),
        _ => None,
    };
    n.and_then(serde_json::Number::as_f64).is_some_and(|x| x < 0.0)
}

/// A string, or a list of flags joined with commas (later data parsers write some states
/// as lists); empty for anything else.
pub(crate) fn text(v: &Option<Flex>) -> String {
    match v {
        Some(Flex::Text(s)) => s.clone(),
        Some(Flex::List(items)) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flex(v: Value) -> Option<Flex> {
        Flex::of(&v)
    }

    #[test]
    fn every_data_parsers_numbers_read_alike() {
        assert_eq!(number(&flex(json!(7))), Some(7));
        assert_eq!(number(&flex(json!({"set": true, "infinite": false, "number": 7}))), Some(7));
        assert_eq!(number(&flex(json!({"number": 7}))), Some(7));
        assert_eq!(number(&flex(json!({"set": false, "number": 7}))), None);
        assert_eq!(number(&flex(json!({"set": true, "infinite": true, "number": 0}))), None);
        assert_eq!(number(&flex(json!(-1))), None);
        assert_eq!(number(&flex(json!("7"))), None);
        assert!(negative(&flex(json!(-1))) && negative(&flex(json!({"set": true, "number": -2}))));
        assert!(!negative(&flex(json!(0))) && !negative(&None));
    }

    #[test]
    fn strings_and_flag_lists_read_as_text() {
        assert_eq!(text(&flex(json!("PENDING"))), "PENDING");
        assert_eq!(text(&flex(json!(["PENDING", "REQUEUED"]))), "PENDING,REQUEUED");
        assert_eq!(text(&flex(json!(true))), "");
        assert_eq!(text(&None), "");
    }
}
