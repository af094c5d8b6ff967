//! A cluster's `topology.conf` read as each node's topology domains, for `gpolc sim` on
//! a Slurm node list (whose JSON carries no topology) and for policies whose levels
//! follow Slurm's network.
//!
//! - `topology/tree`: `SwitchName=s0 Nodes=dev[0-5]`, `SwitchName=s3 Switches=s[0-2]`.
//!   A node's leaf switch is its domain at level `switch`, that switch's parent at
//!   `switch2`, and so on up (at most [`MAX_LEVELS`]).
//! - `topology/block`: `BlockName=b1 Nodes=node[1-32]`, `BlockSizes=32,128`. A node's
//!   block is its domain at level `block`; each larger size in `BlockSizes` groups that
//!   many nodes' worth of consecutive blocks (in file order) at level `block<size>`
//!   (`block128`), domains named by their first block (`b1+`).
//!
//! Keys are case-insensitive, `#` starts a comment, `LinkSpeed` is read and ignored as
//! Slurm ignores it. Errors name the line and the key. The file's hostlists together name
//! at most `MAX_HOSTLIST_NAMES_PER_DOCUMENT` hosts (docs/limits.md).

use crate::hostlist::{self, Budget};
use gpol_compiler::limits::MAX_LEVELS;
use std::collections::{BTreeMap, HashMap};

/// Lines of `topology.conf` read at most.
pub const MAX_LINES: usize = 100_000;

/// A topology read: each node's domains by level, smallest level first.
#[derive(Debug, Default, PartialEq)]
pub struct Topology {
    pub nodes: BTreeMap<String, Vec<(String, String)>>,
    /// The level names, smallest first.
    pub levels: Vec<String>,
}

/// What is wrong, and where.
#[derive(Debug, PartialEq)]
pub struct ConfError {
    /// 1-based; 0 for the file as a whole.
    pub line: usize,
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for ConfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.message),
            n => write!(f, "line {n}: `{}`: {}", self.key, self.message),
        }
    }
}

fn error(line: usize, key: &str, message: impl Into<String>) -> ConfError {
    ConfError { line, key: key.into(), message: message.into() }
}

/// One `Key=Value …` line, keys lower-cased.
struct Line<'a> {
    number: usize,
    pairs: Vec<(String, &'a str)>,
}

impl Line<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The hosts a key names, taken from the file's budget of names.
    fn hosts(&self, key: &str, field: &str, budget: &mut Budget) -> Result<Vec<String>, ConfError> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(list) => hostlist::expand_within(list, budget).map_err(|m| error(self.number, field, m.to_string())),
        }
    }
}

/// Reads `topology.conf` text (tree or block).
pub fn read(text: &str) -> Result<Topology, ConfError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if i >= MAX_LINES {
            return Err(error(0, "", format!("more than {MAX_LINES} lines")));
        }
        let content = raw.split('#').next().unwrap_or_default().trim();
        if content.is_empty() {
            continue;
        }
        let mut pairs = Vec::new();
        for word in content.split_whitespace() {
            let (k, v) = word.split_once('=').ok_or_else(|| error(i + 1, word, "expected Key=Value"))?;
            let key = k.to_ascii_lowercase();
            if !matches!(key.as_str(), "switchname" | "switches" | "nodes" | "linkspeed" | "blockname" | "blocksizes") {
                return Err(error(
                    i + 1,
                    k,
                    "not a topology.conf key (SwitchName, Switches, Nodes, LinkSpeed, BlockName, BlockSizes)",
                ));
            }
            pairs.push((key, v));
        }
        lines.push(Line { number: i + 1, pairs });
    }
    let tree = lines.iter().any(|l| l.get("switchname").is_some());
    let block = lines.iter().any(|l| l.get("blockname").is_some() || l.get("blocksizes").is_some());
    match (tree, block) {
        (true, true) => {
            Err(error(0, "", "both switches (topology/tree) and blocks (topology/block): one plugin reads a file"))
        }
        (true, false) => read_tree(&lines),
        (false, true) => read_blocks(&lines),
        (false, false) => Ok(Topology::default()),
    }
}

fn read_tree(lines: &[Line<'_>]) -> Result<Topology, ConfError> {
    let mut parent: HashMap<String, String> = HashMap::new();
    let mut leaf_of: BTreeMap<String, String> = BTreeMap::new();
    let mut switches: HashMap<String, usize> = HashMap::new();
    let mut budget = Budget::per_document();
    for l in lines {
        let Some(name) = l.get("switchname") else {
            return Err(error(l.number, "SwitchName", "a topology/tree line starts with SwitchName="));
        };
        if switches.insert(name.to_string(), l.number).is_some() {
            return Err(error(l.number, "SwitchName", format!("switch `{name}` is defined twice")));
        }
        for node in l.hosts("nodes", "Nodes", &mut budget)? {
            if let Some(other) = leaf_of.insert(node.clone(), name.to_string()) {
                return Err(error(l.number, "Nodes", format!("node `{node}` is already under switch `{other}`")));
            }
        }
        for child in l.hosts("switches", "Switches", &mut budget)? {
            if let Some(other) = parent.insert(child.clone(), name.to_string()) {
                return Err(error(l.number, "Switches", format!("switch `{child}` is already under switch `{other}`")));
            }
        }
    }
    if let Some((child, p)) = parent.iter().find(|(c, _)| !switches.contains_key(*c)) {
        let line = switches.get(p).copied().unwrap_or(0);
        return Err(error(line, "Switches", format!("switch `{child}` is not defined")));
    }
    let mut topology = Topology::default();
    for (node, leaf) in leaf_of {
        let mut path = vec![leaf.clone()];
        while let Some(up) = path.last().and_then(|s| parent.get(s)) {
            if path.contains(up) {
                return Err(error(
                    switches.get(up).copied().unwrap_or(0),
                    "Switches",
                    format!("switch `{up}` is its own ancestor"),
                ));
            }
            if path.len() >= MAX_LEVELS {
                let m = format!("switches nest deeper than {MAX_LEVELS} levels, gpol's most");
                return Err(error(switches.get(&leaf).copied().unwrap_or(0), "Switches", m));
            }
            path.push(up.clone());
        }
        let domains: Vec<(String, String)> =
            path.into_iter().enumerate().map(|(i, s)| (level_name("switch", i), s)).collect();
        if domains.len() > topology.levels.len() {
            topology.levels = (0..domains.len()).map(|i| level_name("switch", i)).collect();
        }
        topology.nodes.insert(node, domains);
    }
    Ok(topology)
}

/// `switch`, `switch2`, `switch3`…
fn level_name(base: &str, depth: usize) -> String {
    if depth == 0 { base.to_string() } else { format!("{base}{}", depth + 1) }
}

fn read_blocks(lines: &[Line<'_>]) -> Result<Topology, ConfError> {
    let mut blocks: Vec<(String, Vec<String>, usize)> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    let mut block_of: HashMap<String, String> = HashMap::new();
    let mut budget = Budget::per_document();
    for l in lines {
        if let Some(list) = l.get("blocksizes") {
            sizes = list
                .split(',')
                .map(|s| s.trim().parse::<usize>().ok().filter(|&n| n > 0))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| error(l.number, "BlockSizes", format!("`{list}` is not a list of node counts")))?;
            if sizes.windows(2).any(|w| w[1] < w[0] || w[1] % w[0] != 0 || !(w[1] / w[0]).is_power_of_two()) {
                return Err(error(
                    l.number,
                    "BlockSizes",
                    "each size must be a power-of-two multiple of the one before",
                ));
            }
            if sizes.len() > MAX_LEVELS {
                return Err(error(l.number, "BlockSizes", format!("more than {MAX_LEVELS} sizes, gpol's most levels")));
            }
            continue;
        }
        let Some(name) = l.get("blockname") else {
            return Err(error(l.number, "BlockName", "a topology/block line starts with BlockName= or BlockSizes="));
        };
        if blocks.iter().any(|(b, _, _)| b == name) {
            return Err(error(l.number, "BlockName", format!("block `{name}` is defined twice")));
        }
        let nodes = l.hosts("nodes", "Nodes", &mut budget)?;
        for node in &nodes {
            if let Some(other) = block_of.insert(node.clone(), name.to_string()) {
                return Err(error(l.number, "Nodes", format!("node `{node}` is already in block `{other}`")));
            }
        }
        blocks.push((name.to_string(), nodes, l.number));
    }
    // Without BlockSizes, Slurm's base size is the smallest block's.
    let base =
        sizes.first().copied().unwrap_or_else(|| blocks.iter().map(|(_, n, _)| n.len()).min().unwrap_or(1)).max(1);
    if let Some((name, _, line)) = blocks.iter().find(|(_, n, _)| n.len() < base) {
        return Err(error(*line, "Nodes", format!("block `{name}` has fewer nodes than the base block size {base}")));
    }
    let mut topology = Topology { levels: vec!["block".into()], ..Topology::default() };
    topology.levels.extend(sizes.iter().skip(1).map(|s| format!("block{s}")));
    for (i, (name, nodes, _)) in blocks.iter().enumerate() {
        let mut domains = vec![("block".to_string(), name.clone())];
        for size in sizes.iter().skip(1) {
            let per_group = size / base;
            let first = blocks.get(i - i % per_group).map_or(name.as_str(), |(b, _, _)| b.as_str());
            domains.push((format!("block{size}"), format!("{first}+")));
        }
        for node in nodes {
            topology.nodes.insert(node.clone(), domains.clone());
        }
    }
    Ok(topology)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domains(t: &Topology, node: &str) -> Vec<(String, String)> {
        t.nodes.get(node).cloned().unwrap_or_default()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn a_tree_gives_each_node_its_switches_up_to_the_top() {
        // The man page's example, with a comment and a link speed.
        let t = read(
            "# topology/tree\nSwitchName=s0 Nodes=dev[0-5]\nSwitchName=s1 Nodes=dev[6-11] LinkSpeed=400\n\
             SwitchName=s2 Nodes=dev[12-17]\nswitchname=s3 switches=s[0-2]\n",
        )
        .expect("the man page's tree");
        assert_eq!(t.levels, ["switch", "switch2"]);
        assert_eq!(t.nodes.len(), 18);
        assert_eq!(domains(&t, "dev7"), pairs(&[("switch", "s1"), ("switch2", "s3")]));
    }

    #[test]
    fn blocks_and_their_larger_sizes_become_levels() {
        let t = read(
            "BlockName=block1 Nodes=node[1-32]\nBlockName=block2 Nodes=node[33-64]\n\
             BlockName=block3 Nodes=node[65-96]\nBlockName=block4 Nodes=node[97-128]\nBlockSizes=32,64\n",
        )
        .expect("blocks");
        assert_eq!(t.levels, ["block", "block64"]);
        assert_eq!(domains(&t, "node40"), pairs(&[("block", "block2"), ("block64", "block1+")]));
        assert_eq!(domains(&t, "node70"), pairs(&[("block", "block3"), ("block64", "block3+")]));
    }

    #[test]
    fn mistakes_name_the_line_and_key() {
        let cases = [
            (
                "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n",
                "line 2: `Nodes`: node `n1` is already under switch `a`",
            ),
            ("SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", "line 2: `SwitchName`: switch `a` is defined twice"),
            ("SwitchName=a Switches=b\n", "line 1: `Switches`: switch `b` is not defined"),
            ("SwitchName=a Nodes=n1 Colour=red\n", "line 1: `Colour`: not a topology.conf key"),
            ("SwitchName=a Switches=b Nodes=n1\nSwitchName=b Switches=a\n", "is its own ancestor"),
            ("BlockName=b Nodes=n[1-4]\nBlockSizes=4,12\n", "line 2: `BlockSizes`: each size must be a power-of-two"),
            (
                "BlockName=b Nodes=n[1-2]\nBlockSizes=4\n",
                "line 1: `Nodes`: block `b` has fewer nodes than the base block size 4",
            ),
            ("SwitchName=a Nodes=n1\nBlockName=b Nodes=n2\n", "both switches"),
            ("SwitchName=a Nodes=n[1-\n", "line 1: `Nodes`:"),
        ];
        for (text, message) in cases {
            let e = read(text).expect_err(text).to_string();
            assert!(e.starts_with(message) || e.contains(message), "{text:?}: {e}");
        }
        assert_eq!(read("# nothing\n\n"), Ok(Topology::default()));
    }
}
