//! The quota tree as Kueue's resource groups. gpol's tree is Kueue's hierarchical
//! cohorts (docs/semantics.md, "Quotas"): a leaf queue is a ClusterQueue whose nominal
//! quota is its guarantee; a parent is a Cohort whose own quota is its guarantee beyond
//! its children's; `borrow_limit` (and `limit` above the guarantee) is the borrowing
//! limit, `lend_limit` the lending limit. Every object of the tree gets the same groups,
//! so each amount can be lent and borrowed flavor by flavor.

use super::objects::{FlavorQuotas, ResourceGroup, ResourceQuota};
use super::{Finding, names};
use gpol_compiler::hir::{Policy, Queue, QueueId, Resource};
use gpol_compiler::ir::QuotaKind;
use std::collections::{BTreeMap, BTreeSet};

pub const GPU: &str = "nvidia.com/gpu";
pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
/// The flavor of CPU and memory: no node labels.
pub const DEFAULT_FLAVOR: &str = "default-flavor";
/// The flavor of GPUs of any model (a flavor belongs to one group only): no node labels.
pub const ANY_GPU_FLAVOR: &str = "any-gpu";

/// Flavors a Kueue resource group holds (the CRD's `maxItems`).
pub const MAX_FLAVORS: usize = 64;

/// What the cluster holds, for a root whose unset guarantee is the cluster's capacity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capacity {
    pub amounts: BTreeMap<Resource, f64>,
    /// Per gpol model, the product names its nodes carry (`nvidia.com/gpu.product`, as
    /// GPU feature discovery writes them) and their cards: what a flavor must select.
    pub products: BTreeMap<String, BTreeMap<String, u32>>,
}

impl Capacity {
    /// The capacity of these nodes: cards (in all and per model), cores and bytes.
    pub fn of(nodes: &[gpol_compiler::spec::NodeSpec]) -> Capacity {
        let mut amounts = BTreeMap::new();
        let mut products: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        for n in nodes {
            let product = n.labels.iter().find(|(k, _)| k == crate::nodes::MODEL_LABEL);
            if let Some((_, product)) = product.filter(|_| n.cards > 0) {
                *products.entry(n.model.clone()).or_default().entry(product.clone()).or_default() += n.cards;
            }
            let cards = f64::from(n.cards);
            *amounts.entry(Resource::Gpu(None)).or_insert(0.0) += cards;
            *amounts.entry(Resource::Gpu(Some(n.model.clone()))).or_insert(0.0) += cards;
            *amounts.entry(Resource::Cpu).or_insert(0.0) += n.cpu_milli as f64 / 1000.0;
            *amounts.entry(Resource::Mem).or_insert(0.0) += n.mem as f64;
        }
        // A model's flavor selects one product: the others' cards are no capacity of it.
        for (model, cards) in &products {
            let selected = selected(cards);
            let unreached: u32 = cards.iter().filter(|(p, _)| Some(*p) != selected).map(|(_, n)| n).sum();
            if let Some(total) = amounts.get_mut(&Resource::Gpu(Some(model.clone()))) {
                *total -= f64::from(unreached);
            }
        }
        Capacity { amounts, products }
    }

    /// The product name a flavor of `model` selects: its nodes' only one, or the one with
    /// the most cards (ties: the first by name), and the others.
    pub fn product(&self, model: &str) -> Option<(&str, Vec<(&str, u32)>)> {
        let products = self.products.get(model)?;
        let best = selected(products)?;
        let others = products.iter().filter(|(p, _)| *p != best).map(|(p, &n)| (p.as_str(), n)).collect();
        Some((best.as_str(), others))
    }
}

/// The product a model's flavor selects among its nodes' products: the one with the
/// most cards (ties: the first by name).
fn selected(cards: &BTreeMap<String, u32>) -> Option<&String> {
    cards.iter().max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0))).map(|(p, _)| p)
}

/// A flavor of a group: its name and the gpol resource of each covered resource.
type Flavor = (String, Vec<Resource>);

/// The layout every object of the tree shares: groups of (Kueue resource, flavor) columns.
pub struct Layout {
    /// Per group: covered resources, and its flavors.
    groups: Vec<(Vec<&'static str>, Vec<Flavor>)>,
    /// GPU models with a flavor of their own, in the order first quoted.
    pub models: Vec<String>,
}

impl Layout {
    /// The groups for the resources the tree quotes (user limits aside: Kueue has none).
    pub fn of(policy: &Policy, findings: &mut Vec<Finding>) -> Layout {
        let mut quoted: Vec<Resource> = Vec::new();
        for q in &policy.queues {
            for (kind, quota) in &q.quotas {
                if kind.0 != QuotaKind::UserLimit {
                    for r in quota.keys() {
                        if !quoted.contains(r) {
                            quoted.push(r.clone());
                        }
                    }
                }
            }
        }
        let mut groups = Vec::new();
        let host: Vec<(&'static str, Resource)> =
            [(CPU, Resource::Cpu), (MEMORY, Resource::Mem)].into_iter().filter(|(_, r)| quoted.contains(r)).collect();
        if !host.is_empty() {
            let covered = host.iter().map(|(n, _)| *n).collect();
            groups.push((covered, vec![(DEFAULT_FLAVOR.to_string(), host.into_iter().map(|(_, r)| r).collect())]));
        }
        let models: Vec<String> = quoted
            .iter()
            .filter_map(|r| match r {
                Resource::Gpu(Some(m)) => Some(m.clone()),
                _ => None,
            })
            .collect();
        let any_model = quoted.contains(&Resource::Gpu(None));
        let mut flavors: Vec<Flavor> = Vec::new();
        for m in &models {
            match names::flavor_name(m) {
                Ok(name) if flavors.iter().any(|(n, _)| *n == name) => {
                    let m = format!("two GPU models give flavor `{name}`");
                    findings.push(Finding::error(None, "the quota tree".into(), m));
                }
                Ok(name) => flavors.push((name, vec![Resource::Gpu(Some(m.clone()))])),
                Err(_) => {} // reported with the model's other checks
            }
        }
        if any_model {
            // Tried after the model flavors: GPUs of any model, the other models' included.
            flavors.push((ANY_GPU_FLAVOR.to_string(), vec![Resource::Gpu(None)]));
        }
        if !flavors.is_empty() {
            groups.push((vec![GPU], flavors));
        }
        if !models.is_empty() && any_model {
            for q in policy.queues.iter().filter(|q| quotes(q, &Resource::Gpu(None))) {
                findings.push(Finding::unenforced(
                    q.span,
                    format!("queue `{}`: its GPU amounts of any model beside model quotas", q.name),
                    "Kueue's quotas are per flavor: the any-model amounts are flavor `any-gpu`, tried after the model flavors, so a queue may hold its model amounts and its any-model amount together, where gpol's any-model amount caps all its GPUs",
                    super::Enforcer::Serve,
                ));
            }
        } else if !models.is_empty() {
            let listed: Vec<String> = models.iter().map(|m| format!("gpu({m})")).collect();
            findings.push(Finding {
                span: None,
                construct: "GPUs of models without a quota".into(),
                message: format!(
                    "Kueue places GPU work only on its flavors, here {}: other models' GPUs, which gpol does not limit, are out of Kueue's reach (quote `gpu` to add flavor `any-gpu`)",
                    listed.join(", ")
                ),
                enforcer: Some(super::Enforcer::Stricter),
            });
        }
        Layout { groups, models }
    }

    /// The flavors the layout names: (name, GPU model it selects).
    pub fn flavors(&self) -> Vec<(String, Option<String>)> {
        let mut out: Vec<(String, Option<String>)> = Vec::new();
        for (_, flavors) in &self.groups {
            for (name, columns) in flavors {
                let model = columns.iter().find_map(|r| match r {
                    Resource::Gpu(Some(m)) => Some(m.clone()),
                    _ => None,
                });
                if !out.iter().any(|(n, _)| n == name) {
                    out.push((name.clone(), model));
                }
            }
        }
        out
    }
}

/// The amounts of one queue, resource by resource.
pub struct Amounts {
    pub nominal: f64,
    pub borrowing: Option<f64>,
    pub lending: Option<f64>,
}

/// Works out each queue's Kueue amounts from the tree.
pub struct Tree<'p> {
    policy: &'p Policy,
    capacity: Option<&'p Capacity>,
    /// The minute of the local week whose quota windows are in force; `None`: none open.
    minute: Option<u16>,
}

impl<'p> Tree<'p> {
    pub fn new(policy: &'p Policy, capacity: Option<&'p Capacity>, minute: Option<u16>) -> Tree<'p> {
        Tree { policy, capacity, minute }
    }

    /// The queue's resource groups; empty when it holds nothing of its own and sets no
    /// limit (a Cohort then needs none).
    pub fn groups(&self, layout: &Layout, q: QueueId, findings: &mut Vec<Finding>) -> Vec<ResourceGroup> {
        let queue = &self.policy.queues[q];
        let mut any = false;
        let groups: Vec<ResourceGroup> = layout
            .groups
            .iter()
            .map(|(covered, flavors)| ResourceGroup {
                covered_resources: covered.iter().map(|c| c.to_string()).collect(),
                flavors: flavors
                    .iter()
                    .map(|(name, columns)| FlavorQuotas {
                        name: name.clone(),
                        resources: covered
                            .iter()
                            .zip(columns)
                            .map(|(kueue_name, r)| {
                                let a = self.amounts(q, r, findings);
                                any |= a.nominal > 0.0 || a.borrowing.is_some() || a.lending.is_some();
                                let mut written = |what: &str, x: f64| written(queue, r, what, x, findings);
                                ResourceQuota {
                                    name: kueue_name.to_string(),
                                    nominal_quota: written("nominal quota", a.nominal),
                                    borrowing_limit: a.borrowing.map(|x| written("borrowing limit", x)),
                                    lending_limit: a.lending.map(|x| written("lending limit", x)),
                                }
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        if queue.children.is_empty() || any { groups } else { Vec::new() }
    }

    /// The amount as written (the checker fills a parent's unset guarantee with its
    /// children's sum; that one is not written).
    /// A window open at the tree's minute replaces it (the later statement where two are).
    fn written(&self, q: QueueId, kind: QuotaKind, r: &Resource) -> Option<f64> {
        let queue = &self.policy.queues[q];
        let open =
            |w: &&gpol_compiler::hir::QuotaWindow| w.kind == kind && self.minute.is_some_and(|m| w.window.contains(m));
        if let Some(v) = queue.windows.iter().rev().filter(open).find_map(|w| w.amounts.get(r)) {
            return Some(*v);
        }
        if kind == QuotaKind::Guarantee && queue.unset_guarantee.contains(r) {
            return None;
        }
        queue.quota(kind).and_then(|m| m.get(r)).copied()
    }

    /// The queue's guarantee as gpol counts it: written, else its children's sum (at a
    /// root, at least the cluster's capacity when that is known).
    fn guarantee(&self, q: QueueId, r: &Resource) -> f64 {
        let queue = &self.policy.queues[q];
        if let Some(g) = self.written(q, QuotaKind::Guarantee, r) {
            return g;
        }
        let children: f64 = queue.children.iter().map(|&c| self.guarantee(c, r)).sum();
        match (queue.parent, self.capacity.and_then(|c| c.amounts.get(r))) {
            (None, Some(&cap)) => cap.max(children),
            _ => children,
        }
    }

    fn amounts(&self, q: QueueId, r: &Resource, findings: &mut Vec<Finding>) -> Amounts {
        let queue = &self.policy.queues[q];
        let guarantee = self.guarantee(q, r);
        let children: f64 = queue.children.iter().map(|&c| self.guarantee(c, r)).sum();
        let unset_root = queue.parent.is_none() && self.written(q, QuotaKind::Guarantee, r).is_none();
        if unset_root && self.capacity.is_none() {
            findings.push(Finding::unset_root_guarantee(queue, r));
        }
        // Never below zero: the checker refuses a guarantee below its children's.
        let nominal = (guarantee - children).max(0.0);
        let limit = self.written(q, QuotaKind::Limit, r);
        let (borrowing, lending) = if queue.parent.is_some() {
            let above = limit.map(|l| (l - guarantee).max(0.0));
            let borrowing = [self.written(q, QuotaKind::BorrowLimit, r), above].into_iter().flatten().reduce(f64::min);
            // A ClusterQueue cannot lend more than it holds; lending all is no limit.
            let lending =
                self.written(q, QuotaKind::LendLimit, r).filter(|&l| !queue.children.is_empty() || l < nominal);
            (borrowing, lending)
        } else {
            if limit.is_some_and(|l| l < guarantee || self.written(q, QuotaKind::Guarantee, r).is_none()) {
                findings.push(Finding::unenforced(
                    queue.span,
                    format!("queue `{}`: its {r} limit", queue.name),
                    "a root's limit has no Kueue equivalent (a root Cohort or lone ClusterQueue cannot borrow)",
                    super::Enforcer::Serve,
                ));
            }
            (None, None)
        };
        Amounts { nominal, borrowing, lending }
    }
}

/// An amount of a queue as Kueue's quantity; one Kueue cannot hold is an error (E0044)
/// naming the queue, the amount and why, and no objects are written.
fn written(queue: &Queue, r: &Resource, what: &str, x: f64, findings: &mut Vec<Finding>) -> String {
    quantity(r, x).unwrap_or_else(|m| {
        let construct = format!("queue `{}`: its {r} {what}", queue.name);
        findings.push(Finding::error(Some(queue.span), construct, m.to_string()));
        String::new()
    })
}

/// Whether the queue itself quotes the resource in any way Kueue states (a parent's
/// guarantee the checker filled in with its children's sum is not the parent's).
pub(crate) fn quotes(q: &Queue, r: &Resource) -> bool {
    let filled = |k: QuotaKind| k == QuotaKind::Guarantee && q.unset_guarantee.contains(r);
    q.quotas.iter().any(|(k, m)| k.0 != QuotaKind::UserLimit && !filled(k.0) && m.contains_key(r))
}

/// The count past the last Kueue holds: 2^63. Kueue reads a quota into a 64-bit
/// integer (`resources.ResourceValue`: CPU in milli-cores with `MilliValue`, every
/// other resource in units with `Value`), so a quantity must be below 2^63 of them.
const INT64_END: f64 = 9_223_372_036_854_775_808.0;

/// How far from a whole number a count may be, relative to it, and still be that
/// number: the amounts are sums and differences of `f64`s (0.1 + 0.2 is not 0.3). Relative,
/// so that a small amount is never taken for 0.
const WHOLE_TOLERANCE: f64 = 1e-9;

/// `x` as a whole number when it is one (within [`WHOLE_TOLERANCE`] of itself).
fn whole(x: f64) -> Option<f64> {
    let r = x.round();
    (x.is_finite() && (x - r).abs() <= WHOLE_TOLERANCE * x.abs()).then_some(r)
}

/// An amount Kubernetes or Kueue would read otherwise than gpol means it.
#[derive(Clone, Debug, PartialEq)]
pub enum BadAmount {
    /// Negative, infinite or not a number: no amount Kueue holds.
    NotAnAmount(f64),
    /// Not whole in the unit Kueue reads (`kueue` says which), which would round it up.
    NotWhole { scaled: f64, unit: &'static str, kueue: &'static str },
    /// At least 2^63 of the unit Kueue reads.
    TooMuch { n: f64, unit: &'static str, kueue: &'static str },
    /// Negative, infinite or not a number: no quantity Kubernetes holds.
    NotAQuantity(f64),
    /// At least 2^63 of the finest unit it is exact in (`suffix`).
    TooLarge { x: f64, suffix: &'static str },
    /// Finer than a billionth.
    TooFine(f64),
}

impl std::fmt::Display for BadAmount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            BadAmount::NotAnAmount(x) => write!(f, "{x} is not an amount Kueue can hold"),
            BadAmount::NotWhole { scaled, unit, kueue } => {
                write!(f, "{scaled} {unit} is no whole number: {kueue}, and would read it as {}", scaled.ceil())
            }
            // `{:.0}`: every digit of the number, where `{}` would print its shortest form.
            BadAmount::TooMuch { n, unit, kueue } => {
                write!(f, "{n:.0} {unit} is more than Kueue can hold: {kueue}, at most {}", i64::MAX)
            }
            BadAmount::NotAQuantity(x) => write!(f, "{x} is not a quantity Kubernetes can hold"),
            BadAmount::TooLarge { x, suffix } => {
                write!(f, "{x:.0} is more than a Kubernetes quantity holds: at most {}{suffix}", i64::MAX)
            }
            BadAmount::TooFine(x) => {
                write!(f, "{x} is finer than a billionth, Kubernetes' finest unit: it would round it up")
            }
        }
    }
}

impl std::error::Error for BadAmount {}

/// A quota amount as the Kubernetes quantity Kueue reads: cores in whole milli-cores,
/// cards and bytes in whole units, each below 2^63 of them (memory in binary units when
/// exact). Anything else Kueue would round up or overflow, so it is an error saying why,
/// never a value written that Kueue would read otherwise.
pub fn quantity(r: &Resource, x: f64) -> Result<String, BadAmount> {
    if !(x.is_finite() && x >= 0.0) {
        return Err(BadAmount::NotAnAmount(x));
    }
    let (unit, scaled, kueue) = match r {
        Resource::Cpu => ("milli-cores", x * 1000.0, "it reads `cpu` in whole milli-cores"),
        Resource::Mem => ("bytes", x, "it reads `memory` in whole bytes"),
        Resource::Gpu(_) => ("GPUs", x, "it reads `nvidia.com/gpu` in whole GPUs"),
    };
    let Some(n) = whole(scaled) else {
        return Err(BadAmount::NotWhole { scaled, unit, kueue });
    };
    if n >= INT64_END {
        return Err(BadAmount::TooMuch { n, unit, kueue });
    }
    // Below 2^63 and whole: exact as a `u64`.
    let n = n as u64;
    Ok(match r {
        Resource::Cpu if n.is_multiple_of(1000) => format!("{}", n / 1000),
        Resource::Cpu => format!("{n}m"),
        Resource::Mem => binary(n),
        Resource::Gpu(_) => format!("{n}"),
    })
}

/// Bytes in the largest binary unit that holds them exactly (`16Ti`), else plain.
fn binary(bytes: u64) -> String {
    let units = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
    units
        .iter()
        .find(|(_, shift)| bytes != 0 && bytes.is_multiple_of(1u64 << shift))
        .map(|(unit, shift)| format!("{}{unit}", bytes >> shift))
        .unwrap_or_else(|| bytes.to_string())
}

/// A non-negative number (a fair-sharing weight) as a quantity: whole, in thousandths
/// (`500m`) or in billionths (`1500n`, Kubernetes' finest unit) when exact there, the
/// written integer below 2^63 (Kubernetes' own `int64` form). Anything finer Kubernetes
/// would round up, anything larger it cannot hold as written: an error saying why.
pub fn number(x: f64) -> Result<String, BadAmount> {
    if !(x.is_finite() && x >= 0.0) {
        return Err(BadAmount::NotAQuantity(x));
    }
    for (scale, suffix) in [(1.0, ""), (1e3, "m"), (1e9, "n")] {
        if let Some(n) = whole(x * scale) {
            if n >= INT64_END {
                return Err(BadAmount::TooLarge { x, suffix });
            }
            return Ok(format!("{}{suffix}", n as u64));
        }
    }
    Err(BadAmount::TooFine(x))
}

/// The resources a tree quotes that Kueue should not count, for the Configuration note.
pub fn unquoted(layout: &Layout) -> BTreeSet<&'static str> {
    let covered: BTreeSet<&str> = layout.groups.iter().flat_map(|(c, _)| c.iter().copied()).collect();
    [CPU, MEMORY, GPU].into_iter().filter(|r| !covered.contains(r)).collect()
}
