//! The cluster: nodes, their cards (whole, shared by time-slicing or MPS, or partitioned
//! into MIG instances), and topology domains whose free capacity is kept up to date on
//! every bind and release. Accounting is in exact integers: milli-GPU, bytes, milli-cores.

use crate::symbols::Symbols;
use gpol_compiler::limits::MAX_NODES;
use gpol_compiler::schema::{MAX_LEVELS, MigCounts, Sym};
use gpol_compiler::spec::{MILLI, NodeSpec, Sharing};
use std::collections::{BTreeSet, HashMap};

pub type NodeId = usize;
pub type DomainId = u32;

/// Memory of a MIG instance, bytes: the GB its name gives, read as GiB (NVIDIA's
/// `40gb` instance of an 80 GB card has about 40 GiB).
pub(crate) fn mig_memory_bytes(profile: u8) -> u64 {
    gpol_compiler::mig::memory_gb(profile) << 30
}

/// One MIG instance of a card.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub profile: u8,
    /// Its share of the card in milli-GPU: its compute slices of the card's.
    pub milli: u32,
    pub used: bool,
}

/// One GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Card {
    /// Unallocated share, 0–1000.
    pub free_milli: u32,
    /// Jobs using the card (time-slicing and MPS allow several).
    pub clients: u32,
    /// Whole cards per replica of the job holding the card (0 when free or shared).
    pub holder_cards: u32,
    pub mem: u64,
    pub free_mem: u64,
    /// The card's MIG instances (empty unless the node is partitioned).
    pub instances: Vec<Instance>,
}

impl Card {
    /// Free for a whole-card request: nothing allocated and not partitioned.
    pub(crate) fn whole_free(&self) -> bool {
        self.instances.is_empty() && self.clients == 0 && self.free_milli == MILLI
    }

    pub(crate) fn free_mig(&self) -> MigCounts {
        let mut counts = MigCounts::default();
        for i in self.instances.iter().filter(|i| !i.used) {
            if let Some(c) = counts.0.get_mut(usize::from(i.profile)) {
                *c += 1.0;
            }
        }
        counts
    }
}

/// A node and its live state.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub name_sym: Sym,
    pub model: Sym,
    pub sharing: Sharing,
    /// Clients per card under time-slicing or MPS (1 otherwise).
    pub max_clients: u32,
    pub cards: Vec<Card>,
    pub cpu_milli: u64,
    pub free_cpu_milli: u64,
    pub mem: u64,
    pub free_mem: u64,
    /// Label values by key symbol.
    pub labels: HashMap<Sym, Sym>,
    /// The node's domain at each topology level.
    pub domains: [DomainId; MAX_LEVELS],
    /// False after a failure or drain: no new placements.
    pub up: bool,
    /// What is free on the cards, summed up (kept by the cluster at every change).
    pub free: CardsFree,
    /// How many times the cluster has seen the node change: whoever keeps
    /// something worked out from it knows when to work it out again.
    pub changes: u64,
}

/// A node's free card capacity in a few numbers, so most nodes that cannot take a
/// request are turned away without walking their cards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CardsFree {
    /// Wholly free cards.
    pub cards: u32,
    /// The largest share free on one card that still takes another client.
    pub largest_milli: u32,
    /// Unallocated milli-GPU (see [`Node::free_milli`]).
    pub milli: u64,
    /// Bit `p` set when a free MIG instance of profile `p` exists.
    pub mig: u64,
}

impl Node {
    pub(crate) fn free_cards(&self) -> u32 {
        self.free.cards
    }

    pub(crate) fn refresh_free(&mut self) {
        self.free = self.counted_free();
    }

    /// [`Node::free`] counted from the cards.
    pub fn counted_free(&self) -> CardsFree {
        let mut mig = 0u64;
        for i in self.cards.iter().flat_map(|c| &c.instances).filter(|i| !i.used) {
            mig |= 1u64.checked_shl(u32::from(i.profile)).unwrap_or(0);
        }
        CardsFree {
            cards: self.cards.iter().filter(|c| c.whole_free()).count() as u32,
            largest_milli: self.count_largest_free_milli(),
            milli: self.count_free_milli(),
            mig,
        }
    }

    /// Free GPU capacity in milli: unallocated shares of unpartitioned cards plus the
    /// charge of free MIG instances.
    pub(crate) fn free_milli(&self) -> u64 {
        self.free.milli
    }

    fn count_free_milli(&self) -> u64 {
        self.cards
            .iter()
            .map(|c| {
                if c.instances.is_empty() {
                    u64::from(c.free_milli)
                } else {
                    c.instances.iter().filter(|i| !i.used).map(|i| u64::from(i.milli)).sum()
                }
            })
            .sum()
    }

    /// The largest share free on any one card that still takes another client.
    pub(crate) fn largest_free_milli(&self) -> u32 {
        self.free.largest_milli
    }

    fn count_largest_free_milli(&self) -> u32 {
        self.cards
            .iter()
            .filter(|c| c.instances.is_empty() && c.clients < self.max_clients)
            .map(|c| c.free_milli)
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn free_mig(&self) -> MigCounts {
        let mut total = MigCounts::default();
        for i in self.cards.iter().flat_map(|c| &c.instances).filter(|i| !i.used) {
            if let Some(c) = total.0.get_mut(usize::from(i.profile)) {
                *c += 1.0;
            }
        }
        total
    }
}

/// A topology domain and its aggregate free capacity.
#[derive(Clone, Debug)]
pub struct Domain {
    pub name: Sym,
    pub level: u8,
    pub nodes: Vec<NodeId>,
    pub cards: u32,
    pub free_cards: u32,
    pub free_milli: u64,
    /// How many of the domain's (up) nodes have each number of wholly free cards.
    pub free_histogram: Vec<u32>,
}

impl Domain {
    pub(crate) fn max_free_cards(&self) -> u32 {
        self.free_histogram.iter().rposition(|&n| n > 0).unwrap_or(0) as u32
    }
}

/// The nodes and domains of a cluster.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub domains: Vec<Domain>,
    /// Domain ids by (level, name).
    domain_ids: HashMap<(u8, Sym), DomainId>,
    /// Node ids by name.
    by_name: HashMap<String, NodeId>,
    pub levels: Vec<String>,
    /// Capacity of the nodes in service, and what of it is free; kept up to date with
    /// the domains.
    pub capacity: Capacity,
    pub free: Capacity,
    /// Each node's headroom, by node id (kept by the cluster at every change).
    pub headroom: Vec<Headroom>,
    /// The nodes in service by how many whole cards they have free, so a request for
    /// `k` cards need not look at nodes with fewer (kept by [`Cluster::refresh`]).
    by_free_cards: Vec<BTreeSet<NodeId>>,
}

/// What a node has free, in a few numbers kept side by side for every node, so a pass
/// over the whole cluster stays in cache and turns away most nodes that cannot take a
/// request before their cards are walked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headroom {
    pub up: bool,
    pub cpu_milli: u64,
    pub mem: u64,
    pub cards: CardsFree,
    /// Memory of each card (every card of a node has the same).
    pub card_mem: u64,
}

impl Headroom {
    pub fn of(node: &Node) -> Headroom {
        Headroom {
            up: node.up,
            cpu_milli: node.free_cpu_milli,
            mem: node.free_mem,
            cards: node.free,
            card_mem: node.cards.first().map_or(0, |c| c.mem),
        }
    }
}

/// An amount of each resource, in exact units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capacity {
    pub nodes: u64,
    pub gpu_milli: u64,
    pub cpu_milli: u64,
    pub mem: u64,
}

/// A node description the model cannot accept.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    pub node: String,
    pub field: &'static str,
    pub message: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node `{}`, field `{}`: {}", self.node, self.field, self.message)
    }
}

impl Cluster {
    pub(crate) fn new(levels: Vec<String>) -> Cluster {
        Cluster { levels, ..Cluster::default() }
    }

    pub fn node(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// Adds a node, validating its description.
    pub(crate) fn add_node(&mut self, spec: &NodeSpec, syms: &mut Symbols) -> Result<NodeId, SpecError> {
        let err = |field, message: String| SpecError { node: spec.name.clone(), field, message };
        if self.node(&spec.name).is_some() {
            return Err(err("name", "a node with this name already exists".into()));
        }
        if self.nodes.len() >= MAX_NODES as usize {
            return Err(err("name", format!("too many nodes, at most {MAX_NODES}")));
        }
        if let Some(over) = spec.over_limit() {
            return Err(err(over.field, format!("too large, at most {}", over.max)));
        }
        let mig_gpu = spec.mig_gpu().map_err(|m| err("mig", m))?;
        if spec.max_clients == 0 {
            return Err(err("max_clients", "must be at least 1".into()));
        }
        let max_clients = match spec.sharing {
            Sharing::Timeslice | Sharing::Mps => spec.max_clients,
            _ => 1,
        };
        let cards = (0..spec.cards as usize)
            .map(|i| Card {
                free_milli: MILLI,
                clients: 0,
                holder_cards: 0,
                mem: spec.card_mem,
                free_mem: spec.card_mem,
                instances: match mig_gpu {
                    Some(gpu) => spec
                        .mig_layout(i)
                        .iter()
                        .map(|&profile| Instance { profile, milli: gpu.milli(profile), used: false })
                        .collect(),
                    None => Vec::new(),
                },
            })
            .collect();
        let id = self.nodes.len();
        self.by_name.insert(spec.name.clone(), id);
        let name_sym = syms.intern(&spec.name);
        let mut domains = [u32::MAX; MAX_LEVELS];
        for (level, slot) in domains.iter_mut().enumerate().take(self.levels.len()) {
            let named = spec.domains.iter().find(|(l, _)| usize::from(*l) == level).map(|(_, n)| n.clone());
            let name = syms.intern(&named.unwrap_or_else(|| format!("{}/{}", self.levels[level], spec.name)));
            *slot = self.domain(level as u8, name);
        }
        let labels = spec.labels.iter().map(|(k, v)| (syms.intern(k), syms.intern(v))).collect();
        self.nodes.push(Node {
            name: spec.name.clone(),
            name_sym,
            model: syms.intern(&spec.model),
            sharing: spec.sharing,
            max_clients,
            cards,
            cpu_milli: spec.cpu_milli,
            free_cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            free_mem: spec.mem,
            labels,
            domains,
            up: true,
            free: CardsFree::default(),
            changes: 0,
        });
        self.headroom.push(Headroom::default());
        self.refresh(id);
        for d in domains.iter().filter(|d| **d != u32::MAX) {
            let dom = &mut self.domains[*d as usize];
            dom.nodes.push(id);
            dom.cards += spec.cards;
        }
        self.add_to_domains(id, 1);
        Ok(id)
    }

    fn domain(&mut self, level: u8, name: Sym) -> DomainId {
        if let Some(&d) = self.domain_ids.get(&(level, name)) {
            return d;
        }
        let d = self.domains.len() as DomainId;
        self.domains.push(Domain {
            name,
            level,
            nodes: Vec::new(),
            cards: 0,
            free_cards: 0,
            free_milli: 0,
            free_histogram: Vec::new(),
        });
        self.domain_ids.insert((level, name), d);
        d
    }

    /// Adds (`sign` 1) or removes (`sign` -1) a node's free capacity from its domains.
    /// Called around every change to the node, so aggregates stay exact.
    pub(crate) fn add_to_domains(&mut self, node: NodeId, sign: i64) {
        let n = &self.nodes[node];
        if !n.up {
            return;
        }
        let add = |x: &mut u64, v: u64| *x = (*x as i64 + sign * v as i64) as u64;
        add(&mut self.capacity.nodes, 1);
        add(&mut self.capacity.gpu_milli, n.cards.len() as u64 * u64::from(MILLI));
        add(&mut self.capacity.cpu_milli, n.cpu_milli);
        add(&mut self.capacity.mem, n.mem);
        add(&mut self.free.gpu_milli, n.free_milli());
        add(&mut self.free.cpu_milli, n.free_cpu_milli);
        add(&mut self.free.mem, n.free_mem);
        let (free, milli) = (n.free_cards(), n.free_milli());
        for d in n.domains.iter().filter(|d| **d != u32::MAX) {
            let dom = &mut self.domains[*d as usize];
            dom.free_cards = (i64::from(dom.free_cards) + sign * i64::from(free)) as u32;
            dom.free_milli = (dom.free_milli as i64 + sign * milli as i64) as u64;
            let bucket = free as usize;
            if dom.free_histogram.len() <= bucket {
                dom.free_histogram.resize(bucket + 1, 0);
            }
            dom.free_histogram[bucket] = (i64::from(dom.free_histogram[bucket]) + sign) as u32;
        }
    }

    /// Takes a node out of service (failure or drain).
    pub(crate) fn set_up(&mut self, node: NodeId, up: bool) {
        if self.nodes[node].up == up {
            return;
        }
        if !up {
            self.add_to_domains(node, -1);
            self.nodes[node].up = false;
        } else {
            self.nodes[node].up = true;
            self.add_to_domains(node, 1);
        }
        self.refresh(node);
    }

    /// Brings a node's summaries up to date after a change to it.
    pub(crate) fn refresh(&mut self, node: NodeId) {
        let n = &mut self.nodes[node];
        n.changes += 1;
        n.refresh_free();
        let (old, new) = (self.headroom[node], Headroom::of(n));
        self.headroom[node] = new;
        if (old.up, old.cards.cards) != (new.up, new.cards.cards) {
            if old.up
                && let Some(bucket) = self.by_free_cards.get_mut(old.cards.cards as usize)
            {
                bucket.remove(&node);
            }
            if new.up {
                let k = new.cards.cards as usize;
                if self.by_free_cards.len() <= k {
                    self.by_free_cards.resize_with(k + 1, BTreeSet::new);
                }
                self.by_free_cards[k].insert(node);
            }
        }
    }

    /// The nodes in service with at least `k` whole cards free, in id order — or `None`
    /// when they are so many that a pass over every node's headroom is as quick.
    pub(crate) fn with_free_cards(&self, k: u32) -> Option<Vec<NodeId>> {
        let buckets = self.by_free_cards.get(k as usize..).unwrap_or_default();
        let count: usize = buckets.iter().map(BTreeSet::len).sum();
        if count.saturating_mul(4) > self.nodes.len() {
            return None;
        }
        let mut ids: Vec<NodeId> = buckets.iter().flatten().copied().collect();
        ids.sort_unstable();
        Some(ids)
    }

    /// Recomputes every domain's aggregates from its nodes (for checking the incremental
    /// updates).
    pub fn recomputed_domains(&self) -> Vec<(u32, u64, Vec<u32>)> {
        self.domains
            .iter()
            .map(|d| {
                let mut hist = Vec::new();
                let (mut free, mut milli) = (0, 0);
                for &n in &d.nodes {
                    let node = &self.nodes[n];
                    if !node.up {
                        continue;
                    }
                    let counted = node.counted_free();
                    free += counted.cards;
                    milli += counted.milli;
                    let b = counted.cards as usize;
                    if hist.len() <= b {
                        hist.resize(b + 1, 0);
                    }
                    hist[b] += 1;
                }
                (free, milli, hist)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::schema::EnumKind;
    use gpol_compiler::spec::mig_milli;

    fn p(name: &str) -> u8 {
        EnumKind::MigProfile.variant(name).unwrap_or(u8::MAX)
    }

    #[test]
    fn cards_get_their_own_layouts_charged_by_their_gpus_slices() {
        let mut c = Cluster::new(vec![]);
        let mut syms = Symbols::default();
        let a30 = NodeSpec {
            name: "a30".into(),
            model: "a30".into(),
            cards: 2,
            card_mem: 24 << 30,
            sharing: Sharing::Mig,
            mig: vec![vec![p("4g.24gb")], vec![p("2g.12gb"), p("1g.6gb"), p("1g.6gb")]],
            ..NodeSpec::default()
        };
        let n = c.add_node(&a30, &mut syms).expect("a valid A30 node");
        let layouts: Vec<Vec<(u8, u32)>> =
            c.nodes[n].cards.iter().map(|c| c.instances.iter().map(|i| (i.profile, i.milli)).collect()).collect();
        assert_eq!(
            layouts,
            vec![vec![(p("4g.24gb"), 1000)], vec![(p("2g.12gb"), 500), (p("1g.6gb"), 250), (p("1g.6gb"), 250)]]
        );
        assert_eq!(c.nodes[n].free_milli(), 2000);
        assert_eq!(c.nodes[n].free_mig().get(usize::from(p("1g.6gb"))), 2.0);
        let three = NodeSpec { name: "three".into(), cards: 3, ..a30.clone() };
        let e = c.add_node(&three, &mut syms).expect_err("two layouts for three cards");
        assert_eq!(
            (e.field, e.message.as_str()),
            ("mig", "2 layouts for 3 cards: give one for every card or one per card")
        );
        let h100 = NodeSpec { name: "h".into(), model: "h100".into(), card_mem: 80 << 30, ..a30 };
        let e = c.add_node(&h100, &mut syms).expect_err("A30 profiles on an H100");
        assert!(e.message.starts_with("h100 (80 GB) has no MIG profile 1g.6gb"), "{}", e.message);
    }

    #[test]
    fn nodes_by_free_cards_follow_every_change() {
        let mut c = Cluster::new(vec![]);
        let mut syms = Symbols::default();
        for (i, cards) in [8, 4, 8, 2, 8, 8, 8, 8, 8].iter().enumerate() {
            let spec = NodeSpec { name: format!("n{i}"), cards: *cards, ..NodeSpec::default() };
            c.add_node(&spec, &mut syms).expect("node");
        }
        // What a pass over every node's headroom would keep.
        let naive = |c: &Cluster, k: u32| -> Vec<NodeId> {
            (0..c.nodes.len()).filter(|&i| c.headroom[i].up && c.headroom[i].cards.cards >= k).collect()
        };
        let agrees = |c: &Cluster, k: u32| {
            if let Some(ids) = c.with_free_cards(k) {
                assert_eq!(ids, naive(c, k), "k = {k}");
            }
        };
        assert_eq!(c.with_free_cards(5), None, "7 of 9 nodes: a pass is as quick");
        assert_eq!(c.with_free_cards(9), Some(vec![]));
        // Cards taken on most nodes, a node out of service, a card given back.
        for n in [0, 2, 4, 5, 6, 7] {
            c.nodes[n].cards[0].free_milli = 0;
            c.nodes[n].cards[0].clients = 1;
            c.refresh(n);
        }
        c.set_up(8, false);
        for k in 0..10 {
            agrees(&c, k);
        }
        assert_eq!(c.with_free_cards(8), Some(vec![]));
        c.nodes[0].cards[0].free_milli = 1000;
        c.nodes[0].cards[0].clients = 0;
        c.refresh(0);
        assert_eq!(c.with_free_cards(8), Some(vec![0]));
        c.set_up(8, true);
        assert_eq!(c.with_free_cards(8), Some(vec![0, 8]));
        for k in 0..10 {
            agrees(&c, k);
        }
    }

    #[test]
    fn mig_charges_by_compute_slices() {
        assert_eq!(mig_milli(p("1g.10gb")), 143);
        assert_eq!(mig_milli(p("3g.40gb")), 429);
        assert_eq!(mig_milli(p("7g.80gb")), 1000);
        assert_eq!(mig_milli(p("2g.12gb")), 500, "an A30 profile: two slices of four");
        assert_eq!(mig_memory_bytes(p("3g.40gb")), 40 << 30);
    }
}
