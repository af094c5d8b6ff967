//! Slurm's GRES lists, read one way for nodes and jobs. An item is `NAME`, `NAME:COUNT`,
//! `NAME:TYPE` (one of it) or `NAME:TYPE:COUNT`, after an optional `gres:` (22.05) or
//! `gres/` (later releases); a count is read as Slurm 22.05 reads one (`_is_valid_number`
//! in src/common/gres.c: `strtoull`, then a suffix of `suffix_mult`'s, any case).
//!
//! What a list means differs, and so there are two readings of it: a job's request
//! ([`requested`]: the same type asked twice is its last count, an item of count 0 is no
//! GRES, measured on 22.05) and a node's configured GRES ([`configured`]: socket bindings
//! `(S:0-1)` dropped, the same type bound to two sockets summed).

use std::fmt;

/// What is wrong with a GRES list: each names the item (after `gres:`) and what in it is
/// wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GresError {
    /// `gpu:` — nothing after the colon.
    NoCountOrType { item: String },
    /// `gpu::1`, `gpu:h100:` — a type or a count left empty.
    EmptyPart { item: String },
    /// A negative count, which Slurm reads as 2^64 less it and so refuses.
    Negative { item: String },
    /// The last part of `NAME:TYPE:COUNT` is no count.
    NotACount { item: String, count: String },
    /// A count past 64 bits where one must be exact (a node's).
    TooLargeACount { item: String, count: String },
    /// GRES `name` of two types (or a type and none): both asked for, which gpol's
    /// one-model jobs cannot be.
    SeveralTypes { name: String, kinds: Vec<String> },
}

impl fmt::Display for GresError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GresError::NoCountOrType { item } => write!(f, "`{item}`: no count or type after `:`"),
            GresError::EmptyPart { item } => write!(f, "`{item}`: an empty type or count"),
            GresError::Negative { item } => write!(f, "`{item}`: a negative count"),
            GresError::NotACount { item, count } => write!(f, "`{item}`: `{count}` is not a count"),
            GresError::TooLargeACount { item, count } => write!(f, "`{item}`: `{count}` is too large a count"),
            GresError::SeveralTypes { name, kinds } => {
                write!(f, "{name} of more than one type ({}): gpol reads one", kinds.join(", "))
            }
        }
    }
}

impl std::error::Error for GresError {}

/// One GRES item as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item<'a> {
    /// The item without its `gres:` prefix, for messages.
    pub text: &'a str,
    pub name: &'a str,
    pub kind: Option<&'a str>,
    /// The count (1 when none is written), past 64 bits the largest.
    pub count: u64,
    /// Whether `count` is what was written (not cut to 64 bits).
    pub exact: bool,
    /// The count as written (empty when none is).
    pub count_text: &'a str,
}

/// The multiple of a count's suffix, as Slurm's `suffix_mult` takes them (any case).
fn suffix_multiple(suffix: &str) -> Option<u64> {
    let power = |base: u64, n: u32| base.pow(n);
    Some(match suffix.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" | "kib" => power(1024, 1),
        "kb" => power(1000, 1),
        "m" | "mib" => power(1024, 2),
        "mb" => power(1000, 2),
        "g" | "gib" => power(1024, 3),
        "gb" => power(1000, 3),
        "t" | "tib" => power(1024, 4),
        "tb" => power(1000, 4),
        "p" | "pib" => power(1024, 5),
        "pb" => power(1000, 5),
        _ => return None,
    })
}

/// How a count's text reads.
enum Counted {
    /// No count: the text is a type.
    Type,
    /// A negative count.
    Negative,
    /// A count, and whether it fits in 64 bits (past them, the largest).
    Count(u64, bool),
}

/// A count as Slurm 22.05 reads one.
fn count(text: &str) -> Counted {
    let unsigned = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, unsigned) = match unsigned.as_bytes().first() {
        Some(b'-') => (true, &unsigned[1..]),
        Some(b'+') => (false, &unsigned[1..]),
        _ => (false, unsigned),
    };
    let digits = unsigned.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        // Nothing converted: the whole text is the suffix (`k` is a count of 0).
        return if suffix_multiple(text).is_some() { Counted::Count(0, true) } else { Counted::Type };
    }
    let Some(multiple) = suffix_multiple(&unsigned[digits..]) else { return Counted::Type };
    if negative {
        return Counted::Negative;
    }
    let n = unsigned[..digits].parse::<u64>().ok().and_then(|n| n.checked_mul(multiple));
    Counted::Count(n.unwrap_or(u64::MAX), n.is_some())
}

/// One item of a list.
pub fn item(text: &str) -> Result<Item<'_>, GresError> {
    let spec = text.strip_prefix("gres:").or_else(|| text.strip_prefix("gres/")).unwrap_or(text);
    let item = || spec.to_string();
    let one = |name, kind| Item { text: spec, name, kind, count: 1, exact: true, count_text: "" };
    let counted =
        |name, kind, count, exact, written| Item { text: spec, name, kind, count, exact, count_text: written };
    let Some((name, rest)) = spec.split_once(':') else { return Ok(one(spec, None)) };
    match rest.split_once(':') {
        None if rest.is_empty() => Err(GresError::NoCountOrType { item: item() }),
        None => match count(rest) {
            Counted::Type => Ok(one(name, Some(rest))),
            Counted::Negative => Err(GresError::Negative { item: item() }),
            Counted::Count(n, exact) => Ok(counted(name, None, n, exact, rest)),
        },
        Some((kind, written)) if kind.is_empty() || written.is_empty() => Err(GresError::EmptyPart { item: item() }),
        Some((kind, written)) => match count(written) {
            Counted::Type => Err(GresError::NotACount { item: item(), count: written.to_string() }),
            Counted::Negative => Err(GresError::Negative { item: item() }),
            Counted::Count(n, exact) => Ok(counted(name, Some(kind), n, exact, written)),
        },
    }
}

/// The count of GRES `name` a job's TRES list asks for, and its type, as Slurm reads the
/// list: every item checked; an item of count 0 is no GRES; the same type asked twice is
/// its last count (`gpu:4,gpu:2` is 2 GPUs: measured on Slurm 22.05, which allocates 2);
/// two types (or a type and none) are both asked for, which gpol's one-model jobs cannot
/// be. A count past 64 bits is the largest (more than any node has).
pub fn requested<'a>(tres: &'a str, name: &str) -> Result<(u64, Option<&'a str>), GresError> {
    let mut found: Vec<(Option<&str>, u64)> = Vec::new();
    for text in tres.split(',').filter(|i| !i.is_empty()) {
        let g = item(text)?;
        if g.name != name || g.count == 0 {
            continue;
        }
        match found.iter_mut().find(|(k, _)| *k == g.kind) {
            Some((_, n)) => *n = g.count,
            None => found.push((g.kind, g.count)),
        }
    }
    match found[..] {
        [] => Ok((0, None)),
        [(kind, n)] => Ok((n, kind)),
        _ => Err(GresError::SeveralTypes {
            name: name.to_string(),
            kinds: found.iter().map(|(k, _)| k.unwrap_or("untyped").to_string()).collect(),
        }),
    }
}

/// The GRES of a node that gpol models, as its configuration lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Configured {
    /// Cards per GPU type (`""` when untyped), in the order listed.
    pub gpus: Vec<(String, u64)>,
    pub shards: u64,
    pub mps: u64,
}

/// A node's configured GRES (`sinfo`'s `gres`: `gpu:a100:8(S:0-1),shard:a100:32`): each
/// item's socket binding dropped, counts of one type summed (a type bound to two sockets
/// is listed twice), GRES other than `gpu`, `shard` and `mps` passed over. Slurm writes
/// exact counts here: one past 64 bits is refused.
pub fn configured(text: &str) -> Result<Configured, GresError> {
    let mut gres = Configured::default();
    for entry in split_outside_parens(text) {
        let entry = entry.split('(').next().unwrap_or("").trim();
        if entry.is_empty() || entry == "N/A" {
            continue;
        }
        let g = item(entry)?;
        if !g.exact {
            return Err(GresError::TooLargeACount { item: g.text.to_string(), count: g.count_text.to_string() });
        }
        match g.name {
            "gpu" => match gres.gpus.iter_mut().find(|(t, _)| t == g.kind.unwrap_or("")) {
                Some((_, total)) => *total = total.saturating_add(g.count),
                None => gres.gpus.push((g.kind.unwrap_or("").to_string(), g.count)),
            },
            "shard" => gres.shards = gres.shards.saturating_add(g.count),
            "mps" => gres.mps = gres.mps.saturating_add(g.count),
            _ => {}
        }
    }
    Ok(gres)
}

/// Splits on commas that are not inside parentheses (`gpu:4(S:0,2),shard:8`).
fn split_outside_parens(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_name_a_type_or_a_count() {
        let g = item("gres:gpu:h100:8").expect("an item");
        assert_eq!((g.name, g.kind, g.count, g.text), ("gpu", Some("h100"), 8, "gpu:h100:8"));
        assert_eq!(item("gres/gpu:4").map(|g| (g.kind, g.count)), Ok((None, 4)));
        assert_eq!(item("gpu:a100").map(|g| (g.kind, g.count)), Ok((Some("a100"), 1)));
        assert_eq!(item("gpu").map(|g| (g.kind, g.count)), Ok((None, 1)));
        // A suffix multiplies; a type may start with a digit; `k` alone is a count of 0.
        assert_eq!(item("gpu:1K").map(|g| g.count), Ok(1024));
        assert_eq!(item("gpu:1g.5gb").map(|g| g.kind), Ok(Some("1g.5gb")));
        assert_eq!(item("gpu:k").map(|g| (g.kind, g.count)), Ok((None, 0)));
        let past = item("gpu:99999P").expect("read");
        assert_eq!((past.count, past.exact), (u64::MAX, false));
    }

    #[test]
    fn a_nodes_gres_are_summed_over_its_sockets() {
        let g = configured("gpu:a100:4(S:0),gpu:a100:4(S:1),shard:a100:32,nic:2").expect("read");
        assert_eq!((g.gpus, g.shards, g.mps), (vec![("a100".to_string(), 8)], 32, 0));
        assert_eq!(configured("gpu:4(S:0,2),mps:200").map(|g| (g.gpus, g.mps)), Ok((vec![(String::new(), 4)], 200)));
        assert_eq!(configured("(null)"), Ok(Configured::default()));
        assert_eq!(configured("N/A"), Ok(Configured::default()));
        assert_eq!(
            configured("gpu:99999P").expect_err("past 64 bits").to_string(),
            "`gpu:99999P`: `99999P` is too large a count"
        );
    }
}
