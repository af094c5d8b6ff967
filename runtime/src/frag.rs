//! Fragmentation: free GPU capacity that a task shape cannot use (the measure of
//! "Beware of Fragmentation", ATC '23), and the workload's popular task shapes.
//!
//! For a node and a shape: if one replica of the shape cannot land on the node at all
//! (host CPU or memory short, not enough usable cards), all of the node's free GPU
//! capacity is fragmented for it; otherwise the free capacity of the cards it cannot use
//! is (cards partly taken, for whole-card shapes; cards with less free than the share,
//! for fractional ones; cards without a free instance of the profile, for MIG). A shape
//! that asks for no GPU can use none of it.

use crate::fit::{self, Ask};
use crate::jobs::Request;
use crate::model::{Card, MILLI, Node, mig_milli};
use gpol_compiler::schema::{Opt, ShapeRec};
use std::collections::BTreeMap;

/// How many shapes make `cluster.task_shapes` unless a run says otherwise.
pub const DEFAULT_SHAPES: usize = 16;

/// A request shape of the workload and its share of the jobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskShape {
    pub ask: Ask,
    pub weight: f64,
}

/// The `max` most common per-replica shapes of the jobs' requests, weights renormalised
/// to sum to 1; ties go to the smaller shape, so the result does not depend on job order.
pub fn task_shapes(asks: impl IntoIterator<Item = Ask>, max: usize) -> Vec<TaskShape> {
    task_shapes_counted(asks.into_iter().map(|a| (a, 1)), max)
}

/// [`task_shapes`] of asks already counted: each ask with how many jobs make it.
pub fn task_shapes_counted(asks: impl IntoIterator<Item = (Ask, u64)>, max: usize) -> Vec<TaskShape> {
    // Keyed so that iteration runs from the smallest shape up.
    type Key = (u64, u8, u32, u64, u64, u64);
    let mut counts: BTreeMap<Key, (Ask, u64)> = BTreeMap::new();
    for (ask, n) in asks {
        let (kind, arg) = match ask.request {
            Request::None => (0, 0),
            Request::Fraction(m) => (1, m),
            Request::Mig(p) => (2, u32::from(p)),
            Request::Whole(k) => (3, k),
        };
        counts.entry((ask.request.milli(), kind, arg, ask.gpu_mem, ask.cpu_milli, ask.mem)).or_insert((ask, 0)).1 += n;
    }
    let mut shapes: Vec<(Ask, u64)> = counts.into_values().collect();
    // Stable: equal counts keep the key order (smaller shapes first).
    shapes.sort_by_key(|s| std::cmp::Reverse(s.1));
    shapes.truncate(max);
    let total: u64 = shapes.iter().map(|(_, n)| n).sum();
    shapes.into_iter().map(|(ask, n)| TaskShape { ask, weight: n as f64 / total.max(1) as f64 }).collect()
}

/// The records rules read as `cluster.task_shapes`.
pub fn shape_records(shapes: &[TaskShape]) -> Vec<ShapeRec> {
    shapes
        .iter()
        .map(|s| {
            let (whole, fraction, mig) = match s.ask.request {
                Request::Whole(k) => (f64::from(k), 0.0, None),
                Request::Fraction(m) => (0.0, f64::from(m) / f64::from(MILLI), None),
                Request::Mig(p) => (0.0, 0.0, Some(p)),
                Request::None => (0.0, 0.0, None),
            };
            ShapeRec {
                whole_cards: whole,
                gpu_fraction: fraction,
                mig_profile: mig.map_or(Opt::default(), Opt::some),
                cpu: s.ask.cpu_milli as f64 / 1000.0,
                mem: s.ask.mem as f64,
                weight: s.weight,
            }
        })
        .collect()
}

/// Free GPU capacity of a card, milli (free MIG instances count at their charge).
fn card_free(card: &Card) -> u64 {
    if card.instances.is_empty() {
        u64::from(card.free_milli)
    } else {
        card.instances.iter().filter(|i| !i.used).map(|i| u64::from(mig_milli(i.profile))).sum()
    }
}

/// The node's free GPU capacity (milli) that one replica of `ask` could not use.
/// Allocation-free: it runs for every node and shape at every measurement.
pub fn fragmented(node: &Node, ask: &Ask) -> u64 {
    let total = node.free_milli();
    if !node.up || total == 0 {
        return 0;
    }
    let (mut usable, mut usable_free) = (0u32, 0u64);
    for c in fit::usable_cards(node, ask) {
        usable += 1;
        usable_free += card_free(&node.cards[c]);
    }
    let enough = match ask.request {
        Request::None => false,
        Request::Whole(k) => usable >= k,
        _ => usable > 0,
    };
    if enough { total - usable_free } else { total }
}

/// Expected fragmentation of the nodes for the workload (milli): each shape's
/// fragmented capacity, weighted by the shape's share.
pub fn expected(nodes: &[Node], shapes: &[TaskShape]) -> f64 {
    nodes.iter().map(|n| shapes.iter().map(|s| s.weight * fragmented(n, &s.ask) as f64).sum::<f64>()).sum()
}

/// Free capacity (milli) no shape of `asks` can use: on each node, the least any of
/// them leaves fragmented. With no asks, nothing is waiting to use anything: 0.
pub fn unusable(nodes: &[Node], asks: &[Ask]) -> u64 {
    if asks.is_empty() {
        return 0;
    }
    nodes.iter().map(|n| least(n, asks)).sum()
}

/// What no shape of `asks` can use on one node.
fn least(node: &Node, asks: &[Ask]) -> u64 {
    asks.iter().map(|a| fragmented(node, a)).min().unwrap_or(0)
}

/// [`unusable`] measured again and again as the cluster changes: a node is measured
/// anew only when it has changed since (its `changes` count) or the asks have (in any
/// order). Between two events few nodes change, and a measurement over every node and
/// every waiting shape would otherwise dominate a long simulation.
#[derive(Clone, Debug, Default)]
pub struct UnusableCache {
    asks: Vec<Ask>,
    /// Per node, the `changes` count it was measured at and what it left unusable.
    nodes: Vec<(u64, u64)>,
}

impl UnusableCache {
    pub fn measure(&mut self, nodes: &[Node], asks: &[Ask]) -> u64 {
        if asks.is_empty() {
            return 0;
        }
        if asks.len() != self.asks.len() || !asks.iter().all(|a| self.asks.contains(a)) {
            self.asks = asks.to_vec();
            self.nodes.clear();
        }
        // Nodes only join (they leave service, not the list): a new one is measured.
        self.nodes.resize(nodes.len(), (u64::MAX, 0));
        nodes
            .iter()
            .zip(&mut self.nodes)
            .map(|(n, seen)| {
                if seen.0 != n.changes {
                    *seen = (n.changes, least(n, &self.asks));
                }
                seen.1
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cluster, NodeSpec, Sharing};
    use crate::symbols::Symbols;

    fn node(cards: u32, cpu: u64) -> Node {
        let mut c = Cluster::new(vec![]);
        let spec = NodeSpec {
            name: "n".into(),
            model: "G2".into(),
            cards,
            card_mem: 0,
            sharing: Sharing::Timeslice,
            mig: vec![],
            max_clients: 8,
            cpu_milli: cpu,
            mem: 0,
            domains: vec![],
            labels: vec![],
        };
        let mut syms = Symbols::default();
        let id = c.add_node(&spec, &mut syms).expect("node");
        c.nodes[id].clone()
    }

    fn ask(request: Request, cpu_milli: u64) -> Ask {
        Ask { request, gpu_mem: 0, cpu_milli, mem: 0 }
    }

    #[test]
    fn fragmentation_follows_the_paper_cases() {
        let mut n = node(4, 8000);
        // Card 0 has 0.3 free, card 1 0.6 free, cards 2 and 3 are whole.
        n.cards[0].free_milli = 300;
        n.cards[0].clients = 1;
        n.cards[1].free_milli = 600;
        n.cards[1].clients = 1;
        n.refresh_free();
        let whole = |k| ask(Request::Whole(k), 0);
        // Whole cards: the partly used cards are fragments.
        assert_eq!(fragmented(&n, &whole(1)), 900);
        assert_eq!(fragmented(&n, &whole(2)), 900);
        // More whole cards than the node has free: everything is fragmented.
        assert_eq!(fragmented(&n, &whole(3)), 2900);
        // A half-card share cannot use card 0's 0.3.
        assert_eq!(fragmented(&n, &ask(Request::Fraction(500), 0)), 300);
        // No GPU asked: none of it is usable. Host too small: all of it.
        assert_eq!(fragmented(&n, &ask(Request::None, 0)), 2900);
        assert_eq!(fragmented(&n, &ask(Request::Fraction(100), 9000)), 2900);
        let shapes = [TaskShape { ask: whole(1), weight: 0.5 }, TaskShape { ask: whole(3), weight: 0.5 }];
        assert_eq!(expected(std::slice::from_ref(&n), &shapes), 1900.0);
        assert_eq!(unusable(std::slice::from_ref(&n), &[whole(1), ask(Request::Fraction(200), 0)]), 0);
        assert_eq!(unusable(std::slice::from_ref(&n), &[whole(1)]), 900);
    }

    #[test]
    fn the_cache_measures_what_a_full_pass_does_as_nodes_and_asks_change() {
        let mut nodes = vec![node(4, 8000), node(2, 8000)];
        let (one, half) = (ask(Request::Whole(1), 0), ask(Request::Fraction(500), 0));
        let mut cache = UnusableCache::default();
        let measured = |cache: &mut UnusableCache, nodes: &[Node], asks: &[Ask]| {
            let got = cache.measure(nodes, asks);
            assert_eq!(got, unusable(nodes, asks), "asks {asks:?}");
            got
        };
        assert_eq!(measured(&mut cache, &nodes, &[one]), 0);
        // A change the node's count records is seen.
        nodes[0].cards[0].free_milli = 300;
        nodes[0].cards[0].clients = 1;
        nodes[0].refresh_free();
        nodes[0].changes += 1;
        assert_eq!(measured(&mut cache, &nodes, &[one]), 300);
        // The same asks in another order are the same asks; new ones are measured anew.
        assert_eq!(measured(&mut cache, &nodes, &[half, one]), 300);
        assert_eq!(measured(&mut cache, &nodes, &[one, half]), 300);
        assert_eq!(measured(&mut cache, &nodes, &[ask(Request::Whole(4), 0)]), 5300);
        // A node that joins is measured.
        let mut joining = node(1, 8000);
        joining.cards[0].free_milli = 400;
        joining.cards[0].clients = 1;
        joining.refresh_free();
        nodes.push(joining);
        assert_eq!(measured(&mut cache, &nodes, &[one]), 300 + 400);
    }

    #[test]
    fn popular_shapes_are_counted_and_normalised() {
        let mut asks = vec![ask(Request::Whole(1), 0); 6];
        asks[4].request = Request::Fraction(500);
        asks[5].request = Request::Whole(8);
        let shapes = task_shapes(asks, 2);
        assert_eq!(shapes.len(), 2);
        assert_eq!(shapes[0].ask.request, Request::Whole(1));
        assert!((shapes[0].weight - 0.8).abs() < 1e-12);
        // The tie between the 0.5 and the 8-card shape goes to the smaller.
        assert_eq!(shapes[1].ask.request, Request::Fraction(500));
    }
}
