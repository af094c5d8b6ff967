//! Fragmentation: free GPU capacity that a task shape cannot use (the measure of
//! "Beware of Fragmentation", ATC '23), and the workload's popular task shapes.
//!
//! For a node and a shape: if one replica of the shape cannot land on the node at all
//! (host CPU or memory short, not enough usable cards), all of the node's free GPU
//! capacity is fragmented for it; otherwise the free capacity of the cards it cannot use
//! is (cards partly taken, for whole-card shapes; cards with less free than the share,
//! for fractional ones; cards without a free instance of the profile, for MIG). A shape
//! that asks for no GPU can use none of it, nor can a shape whose GPU models the node's
//! is not one of.
//!
//! The popular shapes are built as the ATC '23 simulator builds its task types: jobs keyed
//! by what one replica asks of GPUs and CPU and by the GPU models it allows (host memory
//! is no part of a shape), counted over the whole trace with CPU-only jobs, taken most
//! popular first until they cover a share of the jobs (95 % by default), weights
//! renormalised.

use crate::fit::{self, Ask};
use crate::model::{Card, Node};
use gpol_compiler::schema::{Opt, ShapeRec, ShapeTable, Sym};
use gpol_compiler::spec::MILLI;
use gpol_compiler::spec::Request;
use std::collections::BTreeMap;

/// How many shapes a test's jobs make `cluster.task_shapes` (its own workload).
pub(crate) const DEFAULT_SHAPES: usize = 16;

/// The share of a trace's jobs its popular shapes cover unless a run says otherwise
/// (the ATC '23 study's 95 %).
pub const DEFAULT_COVERAGE: f64 = 0.95;

/// A request shape of the workload and its share of the jobs.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskShape {
    pub ask: Ask,
    /// The GPU models it may run on; empty: any.
    pub models: Vec<Sym>,
    pub weight: f64,
}

/// What makes two jobs of a trace the same task type: one replica's GPU request, GPU
/// memory and CPU, and the GPU models allowed (sorted). Host memory is no part of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeKey {
    pub ask: Ask,
    pub models: Vec<String>,
}

impl ShapeKey {
    pub fn of_spec(job: &gpol_compiler::spec::JobSpec) -> ShapeKey {
        let mut models = job.models.clone();
        models.sort();
        models.dedup();
        ShapeKey { ask: Ask { mem: 0, ..Ask::of_spec(job) }, models }
    }
}

/// The order shapes are listed in when equally popular: smallest first.
type Order = (u64, u8, u32, u64, u64, u64);

fn order(ask: &Ask) -> Order {
    let (kind, arg) = match ask.request {
        Request::None => (0, 0),
        Request::Fraction(m) => (1, m),
        Request::Mig(p) => (2, u32::from(p)),
        Request::Whole(k) => (3, k),
    };
    (ask.request.milli(), kind, arg, ask.gpu_mem, ask.cpu_milli, ask.mem)
}

/// A trace's popular shapes: counted shapes taken most popular first (ties: the smaller
/// shape) until they cover `coverage` of the jobs, at most `max`, weights renormalised.
/// `intern` names the models as the cluster's nodes do.
pub fn popular_shapes(
    counted: impl IntoIterator<Item = (ShapeKey, u64)>,
    coverage: f64,
    max: usize,
    mut intern: impl FnMut(&str) -> Sym,
) -> Vec<TaskShape> {
    let mut shapes: Vec<(ShapeKey, u64)> = counted.into_iter().filter(|(_, n)| *n > 0).collect();
    shapes.sort_by(|a, b| {
        b.1.cmp(&a.1).then_with(|| (order(&a.0.ask), &a.0.models).cmp(&(order(&b.0.ask), &b.0.models)))
    });
    let total: u64 = shapes.iter().map(|(_, n)| n).sum();
    let goal = coverage.clamp(0.0, 1.0) * total as f64;
    let mut covered = 0u64;
    let mut kept = 0;
    while kept < shapes.len() && kept < max && (kept == 0 || (covered as f64) < goal) {
        covered += shapes[kept].1;
        kept += 1;
    }
    shapes.truncate(kept);
    shapes
        .into_iter()
        .map(|(key, n)| TaskShape {
            ask: key.ask,
            models: key.models.iter().map(|m| intern(m)).collect(),
            weight: n as f64 / covered.max(1) as f64,
        })
        .collect()
}

/// The `max` most common per-replica shapes of a test's jobs (any model), weights
/// renormalised to sum to 1; ties go to the smaller shape, so the result does not depend
/// on job order.
pub(crate) fn task_shapes(asks: impl IntoIterator<Item = Ask>, max: usize) -> Vec<TaskShape> {
    let mut counts: BTreeMap<Order, (Ask, u64)> = BTreeMap::new();
    for ask in asks {
        counts.entry(order(&ask)).or_insert((ask, 0)).1 += 1;
    }
    let counted = counts.into_values().map(|(ask, n)| (ShapeKey { ask, models: Vec::new() }, n));
    popular_shapes(counted, 1.0, max, |_| Sym(0))
}

/// The records rules read as `cluster.task_shapes`.
pub fn shape_records(shapes: &[TaskShape]) -> ShapeTable {
    ShapeTable::new(shapes.iter().map(|s| {
        let (whole, fraction, mig) = match s.ask.request {
            Request::Whole(k) => (f64::from(k), 0.0, None),
            Request::Fraction(m) => (0.0, f64::from(m) / f64::from(MILLI), None),
            Request::Mig(p) => (0.0, 0.0, Some(p)),
            Request::None => (0.0, 0.0, None),
        };
        let record = ShapeRec {
            whole_cards: whole,
            gpu_fraction: fraction,
            mig_profile: mig.map_or(Opt::default(), Opt::some),
            cpu: s.ask.cpu_milli as f64 / 1000.0,
            mem: s.ask.mem as f64,
            weight: s.weight,
            ..ShapeRec::default()
        };
        (record, s.models.clone())
    }))
}

/// Free GPU capacity of a card, milli (free MIG instances count at their charge), at
/// most one GPU. A profile's charge rounds up (seven 1g instances of a 7-slice GPU charge
/// 143 each, 1001 in all), but fragmentation is a share of the cards' capacity, one GPU
/// a card: counted uncapped, a free MIG card would be 100.1 % fragmented.
fn card_free(card: &Card) -> u64 {
    let free = if card.instances.is_empty() {
        u64::from(card.free_milli)
    } else {
        card.instances.iter().filter(|i| !i.used).map(|i| u64::from(i.milli)).sum()
    };
    free.min(u64::from(MILLI))
}

/// The node's free GPU capacity as fragmentation counts it: [`card_free`] summed.
fn node_free(node: &Node) -> u64 {
    node.cards.iter().map(card_free).sum()
}

/// The node's free GPU capacity (milli) that one replica of `ask` could not use: at
/// most one GPU a card. Allocation-free: it runs for every node and shape at every
/// measurement.
pub(crate) fn fragmented(node: &Node, ask: &Ask) -> u64 {
    if !node.up || node.free_milli() == 0 {
        return 0;
    }
    let total = node_free(node);
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

/// [`fragmented`] for a shape that may allow only some GPU models: on a node of another
/// model it can use nothing.
pub(crate) fn fragmented_shape(node: &Node, shape: &TaskShape) -> u64 {
    if !shape.models.is_empty() && !shape.models.contains(&node.model) {
        return if node.up { node_free(node) } else { 0 };
    }
    fragmented(node, &shape.ask)
}

/// Expected fragmentation of the nodes for the workload (milli): each shape's
/// fragmented capacity, weighted by the shape's share.
pub fn expected(nodes: &[Node], shapes: &[TaskShape]) -> f64 {
    nodes.iter().map(|n| shapes.iter().map(|s| s.weight * fragmented_shape(n, s) as f64).sum::<f64>()).sum()
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
    use crate::model::Cluster;
    use crate::symbols::Symbols;
    use gpol_compiler::spec::{NodeSpec, Sharing};
    use proptest::prelude::*;

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
        let shape = |a, weight| TaskShape { ask: a, models: vec![], weight };
        let shapes = [shape(whole(1), 0.5), shape(whole(3), 0.5)];
        assert_eq!(expected(std::slice::from_ref(&n), &shapes), 1900.0);
        // A shape for another model can use none of it.
        let elsewhere = TaskShape { models: vec![Sym(n.model.0 + 1)], ..shape(whole(1), 1.0) };
        assert_eq!(expected(std::slice::from_ref(&n), &[elsewhere]), 2900.0);
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

    /// MIG layouts of an H100 80 GB, every card the same.
    const LAYOUTS: [&[&str]; 4] = [&["1g.10gb"; 7], &["3g.40gb"; 2], &["7g.80gb"], &["2g.20gb"; 3]];

    /// A node of any sharing mode and size, some of its capacity taken (`taken`: per
    /// card, whether and how much), in or out of service.
    fn any_node() -> impl Strategy<Value = Node> {
        let sharing = prop_oneof![Just(Sharing::Exclusive), Just(Sharing::Timeslice), Just(Sharing::Mig)];
        let taken = proptest::collection::vec((any::<bool>(), 1u32..=1000, any::<u8>()), 8);
        (0u32..=8, sharing, 0..LAYOUTS.len(), taken, any::<bool>(), 0u64..=64_000).prop_map(
            |(cards, sharing, layout, taken, up, cpu)| {
                let mig = match sharing {
                    Sharing::Mig => {
                        vec![LAYOUTS[layout].iter().map(|p| gpol_compiler::mig::profile(p).unwrap_or(0)).collect()]
                    }
                    _ => vec![],
                };
                let spec = NodeSpec {
                    name: "n".into(),
                    model: "h100".into(),
                    cards,
                    card_mem: 80 << 30,
                    sharing,
                    mig,
                    max_clients: 4,
                    cpu_milli: cpu,
                    mem: 1 << 40,
                    domains: vec![],
                    labels: vec![],
                };
                let mut c = Cluster::new(vec![]);
                let id = c.add_node(&spec, &mut Symbols::default()).expect("a valid node");
                let mut n = c.nodes[id].clone();
                for (card, (take, milli, bits)) in n.cards.iter_mut().zip(taken) {
                    if !take {
                        continue;
                    }
                    if card.instances.is_empty() {
                        card.free_milli = MILLI - milli.min(MILLI);
                        card.clients = 1;
                    } else {
                        for (k, inst) in card.instances.iter_mut().enumerate() {
                            inst.used = bits & (1 << k) != 0;
                        }
                    }
                }
                n.refresh_free();
                n.up = up;
                n
            },
        )
    }

    fn any_ask() -> impl Strategy<Value = Ask> {
        let profiles: Vec<u8> = ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]
            .iter()
            .map(|p| gpol_compiler::mig::profile(p).unwrap_or(0))
            .collect();
        let request = prop_oneof![
            Just(Request::None),
            (1u32..=8).prop_map(Request::Whole),
            (1u32..1000).prop_map(Request::Fraction),
            proptest::sample::select(profiles).prop_map(Request::Mig),
        ];
        (request, 0u64..=16_000).prop_map(|(request, cpu_milli)| ask(request, cpu_milli))
    }

    /// The GPU capacity of the nodes in service, milli: one GPU a card.
    fn capacity(nodes: &[Node]) -> u64 {
        nodes.iter().filter(|n| n.up).map(|n| n.cards.len() as u64 * u64::from(MILLI)).sum()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Fragmentation is a share of capacity: never more than 100 %, whatever the
        /// nodes (MIG instances whose charges round up included), the shares taken, the
        /// shapes and their weights.
        #[test]
        fn fragmentation_never_exceeds_the_capacity(
            nodes in proptest::collection::vec(any_node(), 1..6),
            asks in proptest::collection::vec((any_ask(), 1u32..10), 1..5),
        ) {
            let cap = capacity(&nodes);
            for n in &nodes {
                let own = capacity(std::slice::from_ref(n));
                for (a, _) in &asks {
                    prop_assert!(fragmented(n, a) <= own, "{} of {own} on {:?} for {a:?}", fragmented(n, a), n.cards);
                }
            }
            let total: u32 = asks.iter().map(|(_, w)| w).sum();
            let shapes: Vec<TaskShape> = asks
                .iter()
                .map(|(a, w)| TaskShape { ask: *a, models: vec![], weight: f64::from(*w) / f64::from(total) })
                .collect();
            let share = if cap == 0 { 0.0 } else { expected(&nodes, &shapes) / cap as f64 };
            prop_assert!(share <= 1.0 + 1e-12, "expected fragmentation {share} of capacity");
            let plain: Vec<Ask> = asks.iter().map(|(a, _)| *a).collect();
            prop_assert!(unusable(&nodes, &plain) <= cap);
            let elsewhere = TaskShape { models: vec![Sym(u32::MAX)], ..shapes[0].clone() };
            prop_assert!(expected(&nodes, &[elsewhere]) <= cap as f64);
        }
    }

    #[test]
    fn seven_small_instances_are_one_gpu_of_fragments_not_more() {
        // Seven 1g.10gb instances of an H100 charge 143 milli each, 1001 in all; for a
        // whole-card shape the card is one GPU of fragments, not 1.001.
        let spec = NodeSpec {
            name: "m".into(),
            model: "h100".into(),
            cards: 2,
            card_mem: 80 << 30,
            sharing: Sharing::Mig,
            mig: vec![vec![gpol_compiler::mig::profile("1g.10gb").unwrap_or(0); 7]],
            max_clients: 1,
            cpu_milli: 8000,
            mem: 1 << 40,
            domains: vec![],
            labels: vec![],
        };
        let mut c = Cluster::new(vec![]);
        let id = c.add_node(&spec, &mut Symbols::default()).expect("a valid node");
        let n = &c.nodes[id];
        assert_eq!(n.free_milli(), 2002, "the charges round up");
        assert_eq!(fragmented(n, &ask(Request::Whole(1), 0)), 2000);
        assert_eq!(fragmented(n, &ask(Request::None, 0)), 2000);
        let one = gpol_compiler::mig::profile("1g.10gb").unwrap_or(0);
        assert_eq!(fragmented(n, &ask(Request::Mig(one), 0)), 0, "every instance is usable");
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

    #[test]
    fn a_traces_shapes_cover_a_share_of_its_jobs() {
        let key = |request, models: &[&str]| ShapeKey {
            ask: ask(request, 0),
            models: models.iter().map(|m| m.to_string()).collect(),
        };
        // 50 one-card jobs, 30 on V100 only, 15 CPU-only, 5 eight-card.
        let counted = vec![
            (key(Request::Whole(1), &[]), 50),
            (key(Request::Whole(1), &["V100"]), 30),
            (key(Request::None, &[]), 15),
            (key(Request::Whole(8), &[]), 5),
        ];
        let mut names = Vec::new();
        let mut intern = |m: &str| {
            names.push(m.to_string());
            Sym(7)
        };
        // 95 % takes the CPU-only shape too (50 + 30 + 15 = 95), not the last 5 %.
        let shapes = popular_shapes(counted.clone(), 0.95, 64, &mut intern);
        assert_eq!(shapes.len(), 3);
        assert_eq!((shapes[1].models.as_slice(), shapes[2].ask.request), (&[Sym(7)][..], Request::None));
        assert!((shapes[0].weight - 50.0 / 95.0).abs() < 1e-12, "renormalised over what is kept");
        assert_eq!(names, ["V100"]);
        // 96 % needs the fourth; a cap stops sooner; the most popular is always kept.
        assert_eq!(popular_shapes(counted.clone(), 0.96, 64, |_| Sym(0)).len(), 4);
        assert_eq!(popular_shapes(counted.clone(), 0.96, 2, |_| Sym(0)).len(), 2);
        assert_eq!(popular_shapes(counted, 0.0, 64, |_| Sym(0)).len(), 1);
    }
}
