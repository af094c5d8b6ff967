//! The exhaustive small-cluster domain, for the decisions a scheduling cycle takes (quota,
//! queue order, gangs, victims): every cluster of one to three nodes holding up to four
//! jobs, some already running and at least one waiting, each node and job of a palette
//! built from both policies' deciding values. Two tiers: one node with a rich job palette
//! (≤ 1 running, ≤ 2 waiting), then up to three nodes and four jobs over a palette cut to
//! the bound (the domain says which). Clusters are multisets of node kinds and running
//! jobs multisets of (kind, node); the second tier's waiting jobs are multisets too (the
//! order of submission is the first tier's and the job-order grid's concern).

use crate::report::Decision;
use crate::vocab::Vocab;
use crate::world::{Pending, Running, World};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request};
use gpol_compiler::window;
use std::ops::ControlFlow;

/// Times of the week the domain plays every case at, at most.
const MAX_STARTS: usize = 32;

/// A job of the palette.
#[derive(Clone, Debug, PartialEq)]
struct JobKind {
    queue: Option<String>,
    /// Whole cards per replica.
    cards: u32,
    replicas: u32,
    priority: Option<f64>,
    evictable: bool,
}

/// A node of the palette: its cards and its domain at every topology level.
#[derive(Clone, Copy, Debug, PartialEq)]
struct NodeKind {
    cards: u32,
    domain: u8,
}

/// One case of a tier, by palette index.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    tier: u8,
    nodes: [u8; 3],
    n: u8,
    /// (job kind, node) of each running job.
    running: [(u8, u8); 3],
    r: u8,
    waiting: [u8; 4],
    w: u8,
    /// Index of the time of week it starts at.
    start: u8,
}

/// One tier: palettes and sizes.
#[derive(Clone, Debug)]
struct Tier {
    nodes: Vec<NodeKind>,
    jobs: Vec<JobKind>,
    max_nodes: usize,
    max_running: usize,
    max_waiting: usize,
    max_jobs: usize,
    /// Whether waiting jobs are taken in every order (else as a multiset, in palette order).
    ordered: bool,
}

/// The domain: its cases and, in words, what it covers.
pub struct Domain {
    tiers: Vec<Tier>,
    /// The times of week every case is played at (seconds after Monday 00:00 local).
    starts: Vec<u64>,
    pub cases: Vec<Case>,
    pub text: String,
}

impl Domain {
    /// The case as a world, its jobs and nodes named with `prefix`.
    pub fn world(&self, c: &Case, levels: usize, prefix: &str) -> World {
        let tier = &self.tiers[usize::from(c.tier)];
        let nodes = c.nodes[..usize::from(c.n)]
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                let kind = tier.nodes[usize::from(k)];
                let mut n = NodeSpec::named(format!("{prefix}n{}", i + 1));
                n.cards = kind.cards;
                n.domains = (0..levels).map(|l| (l as u8, format!("d{}", kind.domain + 1))).collect();
                n
            })
            .collect();
        let job = |name: String, k: u8| {
            let kind = &tier.jobs[usize::from(k)];
            let mut j = JobSpec::named(name);
            (j.queue, j.request, j.priority, j.preemptible) =
                (kind.queue.clone(), Request::Whole(kind.cards), kind.priority, kind.evictable);
            j.replicas = kind.replicas;
            j
        };
        let running = c.running[..usize::from(c.r)]
            .iter()
            .enumerate()
            .map(|(i, &(k, node))| Running {
                job: job(format!("{prefix}r{}", i + 1), k),
                nodes: vec![usize::from(node)],
                history: History::default(),
                ends: false,
            })
            .collect();
        let pending = c.waiting[..usize::from(c.w)]
            .iter()
            .enumerate()
            .map(|(i, &k)| Pending { job: job(format!("{prefix}j{}", i + 1), k), batch: 0 })
            .collect();
        let start = self.starts.get(usize::from(c.start)).copied().unwrap_or(0);
        World { nodes, running, usage: Vec::new(), pending, waits: [0, 0], start }
    }
}

/// The domain of two policies' vocabulary, of at most `bound` cases: the second tier's
/// palette is cut (one axis at a time) until it fits, keeping what the decisions still
/// `open` (neither proved nor yet compared) read.
pub fn domain(vocab: &Vocab, bound: u64, open: &dyn Fn(Decision) -> bool) -> Domain {
    // Every case at each time of week where the policies may decide differently (quota
    // windows, rules reading the time of day): the palette shares the bound among them.
    let mut starts: Vec<u64> = std::iter::once(0).chain(vocab.week_points.iter().copied()).collect();
    starts.sort_unstable();
    starts.dedup();
    starts.truncate(MAX_STARTS);
    let bound = bound / starts.len() as u64;
    let queues: Vec<Option<String>> = match vocab.leaves.is_empty() {
        true => vec![None],
        false => vocab.leaves.iter().take(2).cloned().map(Some).collect(),
    };
    let high = vocab.values("job.priority").iter().copied().fold(100.0_f64, f64::max);
    let big = vocab.values("node.cards").iter().find(|&&c| c.fract() == 0.0 && (3.0..=16.0).contains(&c)).copied();
    let mut sizes: Vec<u32> = vec![2];
    sizes.extend(big.map(|c| c as u32));
    // Tier 1: one node of each size, its jobs of one card or the whole node.
    let mut first = Vec::new();
    for &cards in &sizes {
        let nodes = vec![NodeKind { cards, domain: 0 }];
        let jobs = kinds(&queues, &[(1, 1), (cards, 1)], &[None, Some(high)], &[false, true]);
        first.push(Tier { nodes, jobs, max_nodes: 1, max_running: 1, max_waiting: 2, max_jobs: 3, ordered: true });
    }
    // Tier 2, once per node size: up to three nodes (in two domains when there are
    // levels, so that gangs may span them) and four jobs; gangs of two whole nodes when
    // either policy places gangs. Sizes: two cards, and as large as a deciding
    // per-replica request (`multi-node jobs ask for 8 cards per replica`: the largest
    // power of two of its deciding values).
    let domains: Vec<u8> = if vocab.levels.is_empty() { vec![0] } else { vec![0, 1] };
    let base = (vocab.values("job.whole_cards").iter())
        .filter(|&&c| c.fract() == 0.0 && (2.0..=16.0).contains(&c) && (c as u32).is_power_of_two())
        .fold(2.0_f64, |a, &c| a.max(c)) as u32;
    let second_sizes: Vec<u32> = if base == 2 { vec![2] } else { vec![2, base] };
    // Priority is a value of its own only where a rule reads it (classes set it too).
    let reads_priority = !vocab.classes.is_empty() || vocab.read.iter().any(|f| f.ends_with(".priority"));
    // The first tier whole, or not at all.
    let mut spent: u64 = first.iter().map(|t| count(t, u64::MAX)).sum();
    if spent > bound {
        (first, spent) = (Vec::new(), 0);
    }
    let mut words = Vec::new();
    if !first.is_empty() {
        words.push(format!(
        "one node of {sizes:?} cards, at most one job running (no history, no past usage) and one or two waiting, each of queue {:?}, one card or the whole node, priority none or {high}, evictable or not",
        queues.iter().flatten().collect::<Vec<_>>()
        ));
    }
    let mut tiers = first;
    for (k, &size) in second_sizes.iter().enumerate() {
        let mut shapes = vec![(1, 1), (size, 1)];
        if vocab.gangs || !vocab.levels.is_empty() {
            shapes.push((size, 2));
        }
        let mut axes = Axes {
            size,
            domains: domains.clone(),
            queues: queues.clone(),
            shapes,
            priorities: if reads_priority { vec![None, Some(high)] } else { vec![None] },
            evictable: if vocab.victims { vec![false, true] } else { vec![true] },
            queues_matter: open(Decision::Quota) || open(Decision::QueueOrder),
        };
        // An even share of what the first tier left.
        let room = bound.saturating_sub(spent) / (second_sizes.len() - k) as u64;
        let mut cuts = Vec::new();
        let tier = loop {
            let t = axes.tier();
            if count(&t, room) <= room {
                break Some(t);
            }
            match axes.cut() {
                Some(what) => cuts.push(what),
                None => break None,
            }
        };
        if let Some(t) = tier {
            let n = count(&t, u64::MAX);
            spent += n;
            tiers.push(t);
            words.push(axes.describe(n, &cuts));
        }
    }
    if words.is_empty() {
        words.push("none (the bound is smaller than the first tier)".into());
    }
    let mut cases = Vec::new();
    for start in 0..starts.len() {
        for (i, t) in tiers.iter().enumerate() {
            let _ = each(t, &mut |mut c| {
                (c.tier, c.start) = (i as u8, start as u8);
                cases.push(c);
                ControlFlow::<()>::Continue(())
            });
        }
    }
    let mut text = format!("{} cases: {}", cases.len(), words.join("; and "));
    if starts.len() > 1 {
        let at: Vec<String> = starts.iter().map(|&s| window::weekday_time((s / 60) as u16)).collect();
        text.push_str(&format!("; each at {} times of the week: {}", starts.len(), at.join(", ")));
    }
    Domain { tiers, starts, cases, text }
}

/// The second tier's axes, cut one value at a time to fit a bound.
struct Axes {
    /// Cards of every node.
    size: u32,
    domains: Vec<u8>,
    queues: Vec<Option<String>>,
    /// (cards per replica, replicas).
    shapes: Vec<(u32, u32)>,
    priorities: Vec<Option<f64>>,
    evictable: Vec<bool>,
    /// Whether the quota or the queues' order is open: else the second queue goes first.
    queues_matter: bool,
}

impl Axes {
    fn tier(&self) -> Tier {
        Tier {
            nodes: self.domains.iter().map(|&domain| NodeKind { cards: self.size, domain }).collect(),
            jobs: kinds(&self.queues, &self.shapes, &self.priorities, &self.evictable),
            max_nodes: 3,
            max_running: 3,
            max_waiting: 4,
            max_jobs: 4,
            ordered: false,
        }
    }

    /// Drops the value that matters least (the second queue first when neither the quota
    /// nor the queues' order is open), in words; `None` when nothing is left to drop.
    fn cut(&mut self) -> Option<String> {
        if !self.queues_matter && self.queues.len() > 1 {
            self.queues.truncate(1);
            return Some("one queue".into());
        }
        if self.priorities.len() > 1 {
            self.priorities.truncate(1);
            return Some("no priority".into());
        }
        if self.evictable.len() > 1 {
            self.evictable.remove(0);
            return Some("every job evictable".into());
        }
        if self.queues.len() > 1 {
            self.queues.truncate(1);
            return Some("one queue".into());
        }
        if self.shapes.len() > 2 {
            let (cards, _) = self.shapes.remove(1);
            return Some(format!("no job of {cards} cards"));
        }
        None
    }
}

impl Axes {
    /// The tier in words: `n` cases, and what was cut to fit the bound.
    fn describe(&self, n: u64, cuts: &[String]) -> String {
        let shapes = (self.shapes.iter())
            .map(|&(c, r)| match (r, c) {
                (1, 1) => "1 card".to_string(),
                (1, _) => format!("{c} cards"),
                _ => format!("a gang of {r} × {c} cards"),
            })
            .collect::<Vec<_>>();
        let priorities = self.priorities.iter().map(|p| p.map_or("none".into(), |x| x.to_string())).collect::<Vec<_>>();
        let mut text = format!(
            "every cluster of one to three nodes of {} cards{} with up to four jobs (up to three running, of one replica, no history and no past usage; at least one waiting, submitted in palette order), each of queue {:?}, {}, priority {}, {} ({n} cases",
            self.size,
            if self.domains.len() > 1 { " in two racks" } else { "" },
            self.queues.iter().flatten().collect::<Vec<_>>(),
            shapes.join(" or "),
            priorities.join(" or "),
            match self.evictable.as_slice() {
                [_, _] => "evictable or not",
                [false] => "not evictable",
                _ => "evictable",
            },
        );
        if !cuts.is_empty() {
            text.push_str(&format!("; cut to the bound: {}", cuts.join(", ")));
        }
        text.push(')');
        text
    }
}

/// Every combination of the axes, as job kinds.
fn kinds(
    queues: &[Option<String>],
    shapes: &[(u32, u32)],
    priorities: &[Option<f64>],
    evictable: &[bool],
) -> Vec<JobKind> {
    let mut out = Vec::new();
    for queue in queues {
        for &(cards, replicas) in shapes {
            for &priority in priorities {
                for &evictable in evictable {
                    out.push(JobKind { queue: queue.clone(), cards, replicas, priority, evictable });
                }
            }
        }
    }
    out
}

/// The cases of a tier, counted up to `stop` (more than `stop` when there are more).
fn count(t: &Tier, stop: u64) -> u64 {
    let mut n = 0u64;
    let _ = each(t, &mut |_| {
        n += 1;
        if n > stop { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    n
}

/// Visits every case of a tier: clusters as multisets of node kinds, running jobs as
/// multisets of (one-replica kind, node) that fit their nodes, waiting jobs as sequences
/// or multisets.
fn each(t: &Tier, f: &mut impl FnMut(Case) -> ControlFlow<()>) -> ControlFlow<()> {
    let singles: Vec<u8> = (0..t.jobs.len()).filter(|&k| t.jobs[k].replicas == 1).map(|k| k as u8).collect();
    for n in 1..=t.max_nodes {
        for nodes in multisets(t.nodes.len(), n) {
            let places: Vec<(u8, u8)> = (0..n as u8).flat_map(|node| singles.iter().map(move |&k| (k, node))).collect();
            for r in 0..=t.max_running.min(t.max_jobs - 1) {
                for running in multisets(places.len(), r) {
                    let mut used = [0u32; 3];
                    for &p in &running {
                        let (k, node) = places[usize::from(p)];
                        used[usize::from(node)] += t.jobs[usize::from(k)].cards;
                    }
                    if (0..n).any(|i| used[i] > t.nodes[usize::from(nodes[i])].cards) {
                        continue;
                    }
                    for w in 1..=t.max_waiting.min(t.max_jobs - r) {
                        let waits = match t.ordered {
                            true => sequences(t.jobs.len(), w),
                            false => multisets(t.jobs.len(), w),
                        };
                        for waiting in waits {
                            let mut c = Case {
                                tier: 0,
                                nodes: [0; 3],
                                n: n as u8,
                                running: [(0, 0); 3],
                                r: r as u8,
                                waiting: [0; 4],
                                w: w as u8,
                                start: 0,
                            };
                            c.nodes[..n].copy_from_slice(&nodes);
                            for (slot, &p) in c.running.iter_mut().zip(&running) {
                                *slot = places[usize::from(p)];
                            }
                            c.waiting[..w].copy_from_slice(&waiting);
                            f(c)?;
                        }
                    }
                }
            }
        }
    }
    ControlFlow::Continue(())
}

/// Every non-decreasing sequence of `len` indices below `k`.
fn multisets(k: usize, len: usize) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for _ in 0..len {
        out = out
            .into_iter()
            .flat_map(|s: Vec<u8>| {
                let from = s.last().copied().unwrap_or(0);
                (from..k as u8).map(move |x| [s.clone(), vec![x]].concat())
            })
            .collect();
    }
    out
}

/// Every sequence of `len` indices below `k`.
fn sequences(k: usize, len: usize) -> Vec<Vec<u8>> {
    (0..len).fold(vec![Vec::new()], |acc, _| {
        acc.into_iter().flat_map(|s: Vec<u8>| (0..k as u8).map(move |x| [s.clone(), vec![x]].concat())).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multisets_and_sequences_count_as_combinatorics_says() {
        assert_eq!(multisets(4, 3).len(), 20); // C(4 + 3 − 1, 3)
        assert_eq!(multisets(5, 0).len(), 1);
        assert_eq!(sequences(3, 4).len(), 81);
        assert!(multisets(4, 3).iter().all(|s| s.windows(2).all(|w| w[0] <= w[1])));
    }

    #[test]
    fn the_domain_fits_its_bound_and_says_what_it_cut() {
        let vocab = Vocab {
            leaves: vec!["a".into(), "b".into()],
            levels: vec!["rack".into()],
            victims: true,
            gangs: true,
            ..Vocab::default()
        };
        // Two node sizes in the second tier (a rule compares a job's cards with 8): the
        // bound holds for all of it.
        let two = Vocab { values: [("job.whole_cards".to_string(), vec![7.0, 8.0, 9.0])].into(), ..vocab.clone() };
        for bound in [10_000, 60_000, 150_000] {
            let d = domain(&two, bound, &|_| true);
            assert!(d.cases.len() as u64 <= bound, "{bound}: {}", d.text);
            assert!(d.text.contains("nodes of 8 cards"), "{}", d.text);
        }
        let wide = domain(&vocab, 10_000_000, &|_| true);
        let narrow = domain(&vocab, 20_000, &|_| true);
        assert!(narrow.cases.len() as u64 <= 20_000, "{}", narrow.text);
        assert!(narrow.text.contains("cut to the bound"), "{}", narrow.text);
        assert!(wide.cases.len() > narrow.cases.len());
        assert!(!wide.text.contains("cut to the bound"), "{}", wide.text);
        // Three nodes in two racks, a gang waiting, three jobs running.
        let worlds: Vec<World> = wide.cases.iter().map(|c| wide.world(c, 1, "")).collect();
        assert!(worlds.iter().any(|w| w.nodes.len() == 3
            && w.running.len() == 3
            && w.pending.iter().any(|p| p.job.replicas == 2)
            && w.nodes.iter().any(|n| n.domains == [(0, "d2".to_string())])));
        // No running job exceeds its node.
        for w in &worlds {
            for (i, n) in w.nodes.iter().enumerate() {
                let used: u32 = w
                    .running
                    .iter()
                    .filter(|r| r.nodes == [i])
                    .map(|r| match r.job.request {
                        Request::Whole(c) => c,
                        _ => 0,
                    })
                    .sum();
                assert!(used <= n.cards);
            }
        }
    }
}
