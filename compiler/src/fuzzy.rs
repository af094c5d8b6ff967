//! "Did you mean" suggestions: every one goes through here.

/// The candidate closest to `word` by edit distance, if it is close enough to be a
/// plausible misspelling.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let n = word.chars().count();
    // One edit for short words, up to a third of the length for longer ones.
    let max = (n / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != word && c.chars().count().abs_diff(n) <= max)
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, _)| *d <= max)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// A help line for a name not found: "did you mean `…`?" with the closest one, if any,
/// or what `otherwise` says.
pub(crate) fn help(suggestion: Option<&str>, otherwise: impl FnOnce() -> String) -> String {
    match suggestion {
        Some(s) => format!("did you mean `{s}`?"),
        None => otherwise(),
    }
}

#[cfg(test)]
mod tests {
    use super::{help, suggest};

    #[test]
    fn help_offers_the_suggestion_or_says_what_else() {
        assert_eq!(help(Some("node"), || unreachable!()), "did you mean `node`?");
        assert_eq!(help(None, || "the levels are rack".into()), "the levels are rack");
    }

    #[test]
    fn suggests_close_names_only() {
        let names = ["whole_cards", "gpu_fraction", "free_cards"];
        assert_eq!(suggest("whole_crads", names), Some("whole_cards"));
        assert_eq!(suggest("free_card", names), Some("free_cards"));
        assert_eq!(suggest("zzz", names), None);
        assert_eq!(suggest("node", ["nodes", "job"]), Some("nodes"));
    }

    #[test]
    fn long_words_are_cheap() {
        let long = "a".repeat(1_000_000);
        assert_eq!(suggest(&long, ["job", "node"]), None);
    }
}
