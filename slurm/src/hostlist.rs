//! Slurm's hostlists: `gpu-[0-3,7],cpu-1` read into host names ([`expand`]) and names
//! written as one ([`compress`]), as Slurm's commands and `exc_nodes` take them.

/// Nodes one hostlist may name at most (docs/limits.md: nodes in one cluster).
pub const MAX_HOSTS: usize = gpol_compiler::limits::MAX_NODES as usize;

/// The hosts a Slurm hostlist names: `gpu-[0-3,7],cpu-1` → gpu-0 … gpu-3, gpu-7, cpu-1
/// (ranges keep their zero padding: `n[01-03]`), at most [`MAX_HOSTS`].
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // One item: up to the first comma outside brackets.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    _ => {}
                }
                c == ',' && depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let item = &rest[..end];
        rest = rest[end..].trim_start_matches(',');
        match (item.find('['), item.ends_with(']')) {
            (Some(open), true) => {
                let (prefix, body) = (&item[..open], &item[open + 1..item.len() - 1]);
                for part in body.split(',') {
                    let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                    let width = lo.len();
                    let (a, b) = (
                        lo.parse::<u64>().map_err(|_| format!("`{item}`"))?,
                        hi.parse::<u64>().map_err(|_| format!("`{item}`"))?,
                    );
                    if b < a || b - a >= MAX_HOSTS as u64 || out.len() + (b - a) as usize >= MAX_HOSTS {
                        return Err(format!("`{item}` names more than {MAX_HOSTS} hosts or runs backwards"));
                    }
                    out.extend((a..=b).map(|n| format!("{prefix}{n:0width$}")));
                }
            }
            (None, false) if !item.is_empty() => out.push(item.to_string()),
            _ => return Err(format!("`{item}` is not a host or a range")),
        }
        if out.len() > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
    }
    Ok(out)
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
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n[0-99999999]").is_err());
        assert!(expand("n[x]").is_err());
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
