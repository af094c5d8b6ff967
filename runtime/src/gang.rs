//! Gang placement (decision D5): every replica of a job in one cycle, or none.
//!
//! The nodes that pass the filters, each with its score and how many replicas it can
//! hold, are grouped into *scopes*: one per combination of domains at the `require`d
//! levels (the whole cluster without one). In each scope that can hold the job, the
//! candidates are: the scope filled level by level (fewest sub-domains first), and for
//! every `prefer`red level, each of its domains that can hold the job alone, filled the
//! same way below it. A candidate's value is the mean score of its replicas plus, per
//! preferred level, `weight × fewest domains needed ÷ domains used`. Grouping and sorting
//! cost O(N log N) per level.

use crate::model::{Cluster, DomainId, NodeId};
use gpol_compiler::engine::{MAX_TIERS, NodeResult};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// A node the job may use: it passed the filters and holds `capacity` replicas now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Host {
    pub node: NodeId,
    pub result: NodeResult,
    pub capacity: u32,
}

/// A gang clause that applies to the job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Clause {
    pub require: bool,
    pub level: u8,
    pub weight: f64,
}

/// Where each replica goes, and what that is worth.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Placement {
    /// One node per replica, in node order.
    pub replicas: Vec<NodeId>,
    /// The mean of the replicas' tier sums.
    pub tiers: [f64; MAX_TIERS],
    /// The mean of the replicas' weighted scores plus the `prefer` terms.
    pub value: f64,
}

/// Why no placement was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shortfall {
    /// The nodes together cannot hold `min` replicas.
    Capacity,
    /// They can, but not within any one domain of a `require`d level.
    Topology,
}

/// Node ranking (D4): the first `tiers` tiers lexicographically (tier 1 first), then the
/// weighted sum. `Less` means `a` is better.
pub fn rank(a: &NodeResult, b: &NodeResult, tiers: usize) -> Ordering {
    for (x, y) in a.tiers[..tiers].iter().zip(&b.tiers[..tiers]) {
        match y.total_cmp(x) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    b.score.total_cmp(&a.score)
}

/// Every placement of between `min` and `want` replicas on `hosts`, best first: the most
/// replicas, then the best mean tiers, then the highest value, then the lowest node ids.
pub(crate) fn place(
    cluster: &Cluster,
    hosts: &[Host],
    want: u32,
    min: u32,
    clauses: &[Clause],
    tiers: usize,
) -> Result<Vec<Placement>, Shortfall> {
    let total: u64 = hosts.iter().map(|h| u64::from(h.capacity)).sum();
    if total < u64::from(min.max(1)) {
        return Err(Shortfall::Capacity);
    }
    let domain = |h: usize, level: u8| {
        cluster.nodes[hosts[h].node].domains.get(usize::from(level)).copied().unwrap_or(DomainId::MAX)
    };
    // Hosts best first; ties in node order.
    let mut ranked: Vec<usize> = (0..hosts.len()).filter(|&h| hosts[h].capacity > 0).collect();
    ranked.sort_by(|&a, &b| rank(&hosts[a].result, &hosts[b].result, tiers).then(hosts[a].node.cmp(&hosts[b].node)));

    let mut required: Vec<u8> = clauses.iter().filter(|c| c.require).map(|c| c.level).collect();
    required.sort_unstable();
    required.dedup();
    let mut preferred: BTreeMap<u8, f64> = BTreeMap::new();
    for c in clauses.iter().filter(|c| !c.require) {
        *preferred.entry(c.level).or_insert(0.0) += c.weight;
    }
    let fewest = Fewest::new(hosts, &ranked, preferred.keys().copied(), domain);
    let search = Search { hosts, domain: &domain };

    // Scopes: hosts grouped by their domains at every required level, in rank order.
    let mut scopes: BTreeMap<Vec<DomainId>, Vec<usize>> = BTreeMap::new();
    for &h in &ranked {
        scopes.entry(required.iter().map(|&l| domain(h, l)).collect()).or_default().push(h);
    }
    let levels_desc: Vec<u8> = preferred.keys().rev().copied().collect();
    let mut found: Vec<Placement> = Vec::new();
    for scope in scopes.values() {
        let capacity = search.capacity(scope);
        if capacity < u64::from(min.max(1)) {
            continue;
        }
        let n = u32::try_from(capacity.min(u64::from(want))).unwrap_or(want);
        let mut fills = vec![search.fill(scope, &levels_desc, n)];
        for (i, &level) in levels_desc.iter().enumerate() {
            for group in search.groups(scope, level) {
                if search.capacity(&group) >= u64::from(n) {
                    fills.push(search.fill(&group, &levels_desc[i + 1..], n));
                }
            }
        }
        for fill in fills {
            found.push(search.evaluate(&fill, &preferred, &fewest, tiers));
        }
    }
    if found.is_empty() {
        return Err(Shortfall::Topology);
    }
    found.sort_by(|a, b| better_placement(a, b, tiers));
    found.dedup_by(|a, b| a.replicas == b.replicas);
    Ok(found)
}

fn better_placement(a: &Placement, b: &Placement, tiers: usize) -> Ordering {
    b.replicas
        .len()
        .cmp(&a.replicas.len())
        .then_with(|| {
            for (x, y) in a.tiers[..tiers].iter().zip(&b.tiers[..tiers]) {
                match y.total_cmp(x) {
                    Ordering::Equal => {}
                    o => return o,
                }
            }
            Ordering::Equal
        })
        .then_with(|| b.value.total_cmp(&a.value))
        .then_with(|| a.replicas.cmp(&b.replicas))
}

struct Search<'a, D: Fn(usize, u8) -> DomainId> {
    hosts: &'a [Host],
    domain: &'a D,
}

impl<D: Fn(usize, u8) -> DomainId> Search<'_, D> {
    fn capacity(&self, set: &[usize]) -> u64 {
        set.iter().map(|&h| u64::from(self.hosts[h].capacity)).sum()
    }

    /// `set` split by domain at `level`, each part in the rank order of `set`.
    fn groups(&self, set: &[usize], level: u8) -> Vec<Vec<usize>> {
        let mut index: HashMap<DomainId, usize> = HashMap::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for &h in set {
            let g = *index.entry((self.domain)(h, level)).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(h);
        }
        groups
    }

    /// Chooses `n` replicas in `set` (rank order): at each level, the fewest domains that
    /// hold them (largest first, ties to the one with the better best node), then the
    /// best nodes inside those.
    fn fill(&self, set: &[usize], levels_desc: &[u8], n: u32) -> Vec<(usize, u32)> {
        let Some((&level, below)) = levels_desc.split_first() else {
            let mut left = n;
            let mut out = Vec::new();
            for &h in set {
                if left == 0 {
                    break;
                }
                let take = self.hosts[h].capacity.min(left);
                out.push((h, take));
                left -= take;
            }
            return out;
        };
        let mut groups = self.groups(set, level);
        // Groups keep first-appearance order, which is the rank of their best node.
        groups.sort_by_key(|g| std::cmp::Reverse(self.capacity(g)));
        let mut chosen: Vec<usize> = Vec::new();
        let mut held = 0u64;
        for g in groups {
            if held >= u64::from(n) {
                break;
            }
            held += self.capacity(&g);
            chosen.extend(g);
        }
        // Back to rank order: `set` was in rank order, so its positions are the ranks.
        let position: HashMap<usize, usize> = set.iter().enumerate().map(|(i, &h)| (h, i)).collect();
        chosen.sort_by_key(|h| position.get(h).copied().unwrap_or(usize::MAX));
        self.fill(&chosen, below, n)
    }

    fn evaluate(
        &self,
        fill: &[(usize, u32)],
        preferred: &BTreeMap<u8, f64>,
        fewest: &Fewest,
        tiers: usize,
    ) -> Placement {
        let count: u32 = fill.iter().map(|(_, c)| c).sum();
        let per = 1.0 / f64::from(count.max(1));
        let mut mean_tiers = [0.0; MAX_TIERS];
        let mut score = 0.0;
        for &(h, c) in fill {
            let r = &self.hosts[h].result;
            for (t, v) in mean_tiers.iter_mut().zip(&r.tiers).take(tiers) {
                *t += v * f64::from(c) * per;
            }
            score += r.score * f64::from(c) * per;
        }
        let mut value = score;
        for (&level, &weight) in preferred {
            let mut used: Vec<DomainId> = fill.iter().map(|&(h, _)| (self.domain)(h, level)).collect();
            used.sort_unstable();
            used.dedup();
            value += weight * f64::from(fewest.needed(level, count)) / used.len().max(1) as f64;
        }
        let mut replicas: Vec<NodeId> =
            fill.iter().flat_map(|&(h, c)| std::iter::repeat_n(self.hosts[h].node, c as usize)).collect();
        replicas.sort_unstable();
        Placement { replicas, tiers: mean_tiers, value }
    }
}

/// The fewest domains of a level that together hold `n` replicas, over every host.
struct Fewest {
    /// Per level, the domains' capacities summed largest first.
    prefix: BTreeMap<u8, Vec<u64>>,
}

impl Fewest {
    fn new(
        hosts: &[Host],
        ranked: &[usize],
        levels: impl Iterator<Item = u8>,
        domain: impl Fn(usize, u8) -> DomainId,
    ) -> Fewest {
        let mut prefix = BTreeMap::new();
        for level in levels {
            let mut by_domain: HashMap<DomainId, u64> = HashMap::new();
            for &h in ranked {
                *by_domain.entry(domain(h, level)).or_insert(0) += u64::from(hosts[h].capacity);
            }
            let mut caps: Vec<u64> = by_domain.into_values().collect();
            caps.sort_unstable_by(|a, b| b.cmp(a));
            let sums = caps
                .iter()
                .scan(0u64, |acc, c| {
                    *acc += c;
                    Some(*acc)
                })
                .collect();
            prefix.insert(level, sums);
        }
        Fewest { prefix }
    }

    fn needed(&self, level: u8, n: u32) -> u32 {
        let Some(sums) = self.prefix.get(&level) else { return 1 };
        let i = sums.partition_point(|&s| s < u64::from(n));
        u32::try_from(i + 1).unwrap_or(u32::MAX)
    }
}
