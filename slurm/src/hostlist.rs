//! Slurm's hostlists: `gpu-[0-3,7],cpu-1` read into host names ([`expand`]) and names
//! written as one ([`compress`]), as Slurm's commands and `exc_nodes` take them. One list
//! names at most [`MAX_HOSTS`]; a document of many lists expands them under one
//! [`Budget`], so that many small lists cannot add up to more names than memory holds.

use gpol_compiler::limits::MAX_HOSTLIST_NAMES_PER_DOCUMENT;

/// Nodes one hostlist may name at most (docs/limits.md: nodes in one cluster).
pub const MAX_HOSTS: usize = gpol_compiler::limits::MAX_NODES as usize;

/// Digits of one number of a range at most: every number of 18 digits fits in 64 bits.
pub const MAX_DIGITS: usize = 18;

/// What is wrong with a hostlist: each names the item (one host or bracket, as written,
/// its control characters escaped) and what in it is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostlistError {
    /// A `[` never closed, or a `]` never opened.
    Unbalanced { item: String },
    /// A `[` inside brackets.
    Nested { item: String },
    /// Text after the closing `]` (`n[1-2]x`), which gpol does not read.
    AfterBracket { item: String },
    /// An empty host (`a,,b`) or range (`n[]`, `n[1,]`).
    Empty { item: String },
    /// A range whose bounds are not numbers (`n[a-c]`).
    NotANumber { item: String, part: String },
    /// A number of more than [`MAX_DIGITS`] digits.
    TooManyDigits { item: String, part: String },
    /// A range that runs backwards (`n[3-1]`).
    Reversed { item: String, part: String },
    /// More than [`MAX_HOSTS`] names in one list.
    TooMany { item: String },
    /// Past what the document may expand to ([`Budget`]).
    OverBudget { item: String, most: usize },
}

impl std::fmt::Display for HostlistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = crate::command::printable;
        match self {
            HostlistError::Unbalanced { item } => write!(f, "`{}`: unbalanced brackets", p(item)),
            HostlistError::Nested { item } => write!(f, "`{}`: a `[` inside brackets", p(item)),
            HostlistError::AfterBracket { item } => {
                write!(f, "`{}`: text after `]` (gpol reads PREFIX[RANGES] only)", p(item))
            }
            HostlistError::Empty { item } => write!(f, "`{}`: an empty host or range", p(item)),
            HostlistError::NotANumber { item, part } => {
                write!(f, "`{}`: `{}` is not a number or a range of numbers", p(item), p(part))
            }
            HostlistError::TooManyDigits { item, part } => {
                write!(f, "`{}`: `{}` has more than {MAX_DIGITS} digits", p(item), p(part))
            }
            HostlistError::Reversed { item, part } => {
                write!(f, "`{}`: the range `{}` runs backwards", p(item), p(part))
            }
            HostlistError::TooMany { item } => write!(f, "`{}`: more than {MAX_HOSTS} hosts in one list", p(item)),
            HostlistError::OverBudget { item, most } => {
                write!(f, "`{}`: the document's hostlists name more than {most} hosts in all (docs/limits.md)", p(item))
            }
        }
    }
}

impl std::error::Error for HostlistError {}

/// Names a document's hostlists may still expand to: each expansion takes its names from
/// it, and one that would take more is refused before a name is made.
#[derive(Clone, Debug)]
pub struct Budget {
    left: usize,
    most: usize,
}

impl Budget {
    /// A budget of `most` names.
    pub fn new(most: usize) -> Budget {
        Budget { left: most, most }
    }

    /// The budget of one document: [`MAX_HOSTLIST_NAMES_PER_DOCUMENT`].
    pub fn per_document() -> Budget {
        Budget::new(MAX_HOSTLIST_NAMES_PER_DOCUMENT)
    }

    /// Takes `n` names, or says the document would pass its budget.
    fn take(&mut self, n: usize, item: &str) -> Result<(), HostlistError> {
        self.left =
            self.left.checked_sub(n).ok_or_else(|| HostlistError::OverBudget { item: item.into(), most: self.most })?;
        Ok(())
    }
}

/// The hosts a Slurm hostlist names: `gpu-[0-3,7],cpu-1` → gpu-0 … gpu-3, gpu-7, cpu-1
/// (ranges keep their zero padding: `n[01-03]`), at most [`MAX_HOSTS`].
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    expand_within(list, &mut Budget::new(MAX_HOSTS))
}

/// [`expand`], the names taken from a document's `budget`.
pub fn expand_within(list: &str, budget: &mut Budget) -> Result<Vec<String>, HostlistError> {
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        let end = item_end(rest)?;
        let item = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or(&rest[end..]);
        // (A comma at the very end ends the list; one anywhere else leaves an empty item.)
        if item.is_empty() {
            return Err(HostlistError::Empty { item: list.trim().into() });
        }
        let names = item_names(item)?;
        if out.len() + names.count() > MAX_HOSTS {
            return Err(HostlistError::TooMany { item: item.into() });
        }
        budget.take(names.count(), item)?;
        names.push_into(&mut out);
    }
    Ok(out)
}

/// Where the first item of `rest` ends: at its first comma outside brackets.
fn item_end(rest: &str) -> Result<usize, HostlistError> {
    let mut open = false;
    for (i, c) in rest.char_indices() {
        match c {
            '[' if open => return Err(HostlistError::Nested { item: up_to_comma(rest).into() }),
            '[' => open = true,
            ']' if !open => return Err(HostlistError::Unbalanced { item: up_to_comma(rest).into() }),
            ']' => open = false,
            ',' if !open => return Ok(i),
            _ => {}
        }
    }
    if open {
        return Err(HostlistError::Unbalanced { item: rest.into() });
    }
    Ok(rest.len())
}

/// The text up to the first comma, to name an item that cannot be delimited.
fn up_to_comma(rest: &str) -> &str {
    rest.split(',').next().unwrap_or(rest)
}

/// The names one item makes: a host, or a prefix and its ranges (checked, not yet made).
enum Names<'a> {
    Host(&'a str),
    Ranges { prefix: &'a str, ranges: Vec<(u64, u64, usize)>, count: usize },
}

impl Names<'_> {
    fn count(&self) -> usize {
        match self {
            Names::Host(_) => 1,
            Names::Ranges { count, .. } => *count,
        }
    }

    fn push_into(self, out: &mut Vec<String>) {
        match self {
            Names::Host(h) => out.push(h.to_string()),
            Names::Ranges { prefix, ranges, .. } => {
                for (a, b, width) in ranges {
                    out.extend((a..=b).map(|n| format!("{prefix}{n:0width$}")));
                }
            }
        }
    }
}

/// One item read: a plain host, or `PREFIX[RANGES]`, each range `A` or `A-B`.
fn item_names(item: &str) -> Result<Names<'_>, HostlistError> {
    let Some(open) = item.find('[') else { return Ok(Names::Host(item)) };
    let Some(body) = item[open + 1..].strip_suffix(']') else {
        return Err(HostlistError::AfterBracket { item: item.into() });
    };
    let mut ranges = Vec::new();
    let mut count: usize = 0;
    for part in body.split(',') {
        let (a, b, width) = range(item, part)?;
        // Checked before any name is made: a count past one list's limit is refused.
        let n = usize::try_from(b - a).ok().and_then(|d| d.checked_add(1)).filter(|&n| n <= MAX_HOSTS);
        count = n
            .and_then(|n| count.checked_add(n))
            .filter(|&c| c <= MAX_HOSTS)
            .ok_or_else(|| HostlistError::TooMany { item: item.into() })?;
        ranges.push((a, b, width));
    }
    Ok(Names::Ranges { prefix: &item[..open], ranges, count })
}

/// One range of a bracket: its bounds and the width its numbers are padded to.
fn range(item: &str, part: &str) -> Result<(u64, u64, usize), HostlistError> {
    if part.is_empty() {
        return Err(HostlistError::Empty { item: item.into() });
    }
    let (lo, hi) = part.split_once('-').unwrap_or((part, part));
    let number = |s: &str| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(HostlistError::NotANumber { item: item.into(), part: part.into() });
        }
        if s.len() > MAX_DIGITS {
            return Err(HostlistError::TooManyDigits { item: item.into(), part: part.into() });
        }
        s.parse::<u64>().map_err(|_| HostlistError::NotANumber { item: item.into(), part: part.into() })
    };
    let (a, b) = (number(lo)?, number(hi)?);
    if b < a {
        return Err(HostlistError::Reversed { item: item.into(), part: part.into() });
    }
    Ok((a, b, lo.len()))
}

/// Names as one hostlist: names that end in a number and share their prefix and the
/// number's width (zero padding) become one bracket of runs (`n[01-03,07]`); others stay
/// as they are. Every name once, grouped by prefix in order of first appearance.
pub fn compress(names: &[String]) -> String {
    // (prefix, width) → numbers; names without a number as themselves.
    let mut groups: Vec<((&str, usize), Vec<u64>)> = Vec::new();
    let mut items: Vec<Result<usize, &str>> = Vec::new();
    let mut plain: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut index: std::collections::HashMap<(&str, usize), usize> = std::collections::HashMap::new();
    for name in names {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, number) = name.split_at(name.len() - digits);
        // A number past u64, or a leading zero Slurm would not write back, stays a name.
        match number.parse::<u64>() {
            Ok(n) if digits > 0 && format!("{n:0digits$}") == number => {
                let key = (prefix, digits);
                match index.get(&key) {
                    Some(&g) => groups[g].1.push(n),
                    None => {
                        index.insert(key, groups.len());
                        items.push(Ok(groups.len()));
                        groups.push((key, vec![n]));
                    }
                }
            }
            _ if !plain.insert(name.as_str()) => {}
            _ => items.push(Err(name)),
        }
    }
    let mut out: Vec<String> = Vec::new();
    for item in items {
        match item {
            Err(name) => out.push(name.to_string()),
            Ok(g) => {
                let ((prefix, width), numbers) = &mut groups[g];
                numbers.sort_unstable();
                numbers.dedup();
                let mut runs: Vec<String> = Vec::new();
                let mut at = 0;
                while at < numbers.len() {
                    let start = at;
                    while at + 1 < numbers.len() && numbers[at + 1] == numbers[at] + 1 {
                        at += 1;
                    }
                    let (a, b, w) = (numbers[start], numbers[at], *width);
                    runs.push(if a == b { format!("{a:0w$}") } else { format!("{a:0w$}-{b:0w$}") });
                    at += 1;
                }
                out.push(if numbers.len() == 1 {
                    format!("{prefix}{}", runs[0])
                } else {
                    format!("{prefix}[{}]", runs.join(","))
                });
            }
        }
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hostlists_expand() {
        assert_eq!(expand("gpu-[0-2,7],cpu-1").expect("a list"), ["gpu-0", "gpu-1", "gpu-2", "gpu-7", "cpu-1"]);
        assert_eq!(expand("n[08-10]").expect("a list"), ["n08", "n09", "n10"]);
        assert_eq!(expand("").expect("empty"), Vec::<String>::new());
        assert_eq!(expand("a,").expect("a comma at the end"), ["a"]);
    }

    #[test]
    fn hostlist_errors_say_what_is_wrong_with_the_text() {
        let cases = [
            ("n[1-3", "`n[1-3`: unbalanced brackets"),
            ("n1-3],m1", "`n1-3]`: unbalanced brackets"),
            ("n[1-[2]]", "`n[1-[2]]`: a `[` inside brackets"),
            ("n[1-2]x", "`n[1-2]x`: text after `]`"),
            ("a,,b", "`a,,b`: an empty host or range"),
            ("n[]", "`n[]`: an empty host or range"),
            ("n[1,]", "`n[1,]`: an empty host or range"),
            ("n[x]", "`n[x]`: `x` is not a number or a range of numbers"),
            ("n[1-]", "`n[1-]`: `1-` is not a number or a range of numbers"),
            ("n[-1]", "`n[-1]`: `-1` is not a number or a range of numbers"),
            ("n[1-2-3]", "`n[1-2-3]`: `1-2-3` is not a number or a range of numbers"),
            ("n[3-1]", "`n[3-1]`: the range `3-1` runs backwards"),
            ("n[0-1234567890123456789]", "`n[0-1234567890123456789]`: `0-1234567890123456789` has more than 18 digits"),
            ("n[0-99999999]", "`n[0-99999999]`: more than 100000 hosts in one list"),
            ("n[0-59999],m[0-59999]", "`m[0-59999]`: more than 100000 hosts in one list"),
            ("n[0-99999,0-1]", "`n[0-99999,0-1]`: more than 100000 hosts in one list"),
            // The offending text is shown, its control characters escaped.
            ("n\u{1b}[2J", "`n\\u{1b}[2J`: unbalanced brackets"),
        ];
        for (list, want) in cases {
            let e = expand(list).expect_err(list).to_string();
            assert!(e.starts_with(want), "{list:?}: {e}");
        }
    }

    #[test]
    fn a_documents_lists_share_one_budget() {
        let mut budget = Budget::new(250);
        assert_eq!(expand_within("n[0-99]", &mut budget).expect("100 of 250").len(), 100);
        assert_eq!(expand_within("n[0-99],m1", &mut budget).expect("201 of 250").len(), 101);
        let e = expand_within("n[0-49]", &mut budget).expect_err("past 250");
        assert_eq!(e, HostlistError::OverBudget { item: "n[0-49]".into(), most: 250 });
        assert!(e.to_string().contains("name more than 250 hosts in all"), "{e}");
        // What is left stays usable.
        assert_eq!(expand_within("a,b", &mut budget).expect("203 of 250").len(), 2);
    }

    #[test]
    fn names_compress_into_runs() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            compress(&names(&["gpu-0", "gpu-1", "gpu-2", "gpu-7", "cpu-1", "login"])),
            "gpu-[0-2,7],cpu-1,login"
        );
        assert_eq!(compress(&names(&["n08", "n09", "n10", "n7"])), "n[08-10],n7");
        assert_eq!(compress(&names(&["a3", "a1", "a2"])), "a[1-3]");
        assert_eq!(compress(&[]), "");
    }

    proptest! {
        #[test]
        fn a_compressed_list_expands_to_the_same_names(
            names in proptest::collection::vec("(gpu-|n|h100-rack1-)?[0-9]{1,3}|login[a-c]?", 0..40)
        ) {
            let mut want = names.clone();
            want.sort();
            want.dedup();
            let mut got = expand(&compress(&names)).expect("a hostlist");
            got.sort();
            prop_assert_eq!(got, want);
        }
    }
}
