//! The quota tree (decision D7): guarantees, limits, borrowing and lending, per resource
//! and per GPU model, with exact integer accounting, per-user limits, dominant and fair
//! shares, and usage decayed exactly at events.
//!
//! Borrowing follows Kueue's hierarchical cohorts. For queue `q` and resource `r`:
//! - `subtree(q)`: a leaf's guarantee; a parent's own guarantee beyond its children's,
//!   plus what each child puts into the shared pool (`subtree(c) - reserved(c)`);
//! - `reserved(q)`: the part of `subtree(q)` its lend limit keeps from others,
//!   `max(0, subtree(q) - lend_limit(q))` (0 without a lend limit);
//! - `usage(q)`: a leaf's allocation; a parent's `Σ max(0, usage(c) - reserved(c))`;
//! - `available(q)`: at the root `subtree - usage`; below it, what is left of the
//!   reserved part plus what the parent can give, capped by the borrow limit.
//!
//! Amounts may depend on the time of week (quota windows, `lend_limit 24 gpu from 22:00
//! to 07:00`): each queue keeps its written amounts and its windows', and the amounts in
//! force are worked out again whenever the local time enters another phase of the week
//! ([`Quotas::set_minute_of_week`]).
//!
//! A resource no queue guarantees is not limited by the tree (only by `limit`s). A root
//! that does not set its guarantee of a resource the tree governs holds the cluster's
//! capacity of it (the nodes in service), so what no queue is promised is a pool every
//! queue may borrow from rather than a cap at the sum of the promises.

use crate::symbols::Symbols;
use gpol_compiler::hir::{self, Billing, Queueing, Resource};
use gpol_compiler::ir::QuotaKind;
use gpol_compiler::schema::Sym;
use gpol_compiler::window::Window;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A resource quotas are kept in: GPU (milli, any model), CPU (milli-cores), memory
/// (bytes), and GPU of one model (milli).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Res {
    Gpu,
    Cpu,
    Mem,
    Model(Sym),
}

impl Res {
    /// An amount of the resource in its unit (cards, cores, GiB), as messages show it.
    pub(crate) fn show(self, v: i64) -> String {
        match self {
            _ if v == i64::MAX => "∞".into(),
            Res::Mem => format!("{:.1}GiB", v as f64 / (1u64 << 30) as f64),
            _ => format!("{}", v as f64 / 1000.0),
        }
    }

    pub(crate) fn name(self, syms: &Symbols) -> String {
        match self {
            Res::Gpu => "gpu".into(),
            Res::Cpu => "cpu".into(),
            Res::Mem => "memory".into(),
            Res::Model(m) => format!("gpu({})", syms.name(m)),
        }
    }
}

pub type QueueId = usize;

pub type Amounts = BTreeMap<Res, i64>;

/// Decayed usage as of a time.
#[derive(Clone, Copy, Debug, Default)]
struct Decayed {
    value: f64,
    at_ms: u64,
}

/// Usage `u` after holding `billed` units for `dt_s` seconds: with half-life `h`,
/// `u·2^(−dt/h) + billed·h/ln 2·(1 − 2^(−dt/h))`; without, `u + billed·dt`. Exact for a
/// constant holding, so it does not depend on how often it is applied.
fn decayed(u: f64, billed: f64, dt_s: f64, half_life_s: Option<f64>) -> f64 {
    match half_life_s {
        Some(h) => {
            let decay = (-dt_s / h * std::f64::consts::LN_2).exp();
            u * decay + billed * h / std::f64::consts::LN_2 * (1.0 - decay)
        }
        None => u + billed * dt_s,
    }
}

/// Why the quota tree turns a job away: the cap, and the numbers that cross it (in the
/// resource's exact units: milli-GPU, milli-cores, bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Queue `queue` on the path holds `allocated` of `res` and would exceed its `limit`
    /// with the `needs` more the job asks for.
    Limit { queue: QueueId, res: Res, limit: i64, allocated: i64, needs: i64 },
    /// The user holds `used` of `res` in `queue` and would exceed its per-user `limit`.
    UserLimit { queue: QueueId, res: Res, limit: i64, used: i64, needs: i64 },
    /// The leaf's cohort has only `available` of `res` for it.
    Cohort { queue: QueueId, res: Res, available: i64, needs: i64 },
}

/// One queue of the tree, in four parts that change apart: where it sits and how the
/// policy declares it (fixed once the tree is built), its quota (changed by windows and
/// operators), what its subtree holds and asks for now (changed at every start and stop),
/// and its decayed usage (changed as the clock moves).
#[derive(Clone, Debug)]
pub struct Queue {
    pub place: Position,
    pub quota: Terms,
    pub load: Load,
    pub usage: Usage,
}

/// Where a queue sits in the tree and what the policy declares of it beyond amounts.
#[derive(Clone, Debug)]
pub struct Position {
    pub name: String,
    pub name_sym: Sym,
    pub parent: Option<QueueId>,
    pub children: Vec<QueueId>,
    pub depth: u32,
    pub weight: f64,
    pub queueing: Queueing,
    /// `fairshare parent`: transparent to Slurm's Fair Tree.
    pub fairshare_parent: bool,
}

/// A queue's quota: the amounts in force, the written amounts and windows they come from,
/// and what the cohort arithmetic derives from them. Invariant: the amounts in force are
/// the written ones with the open windows' laid over them, and `subtree` and `reserved`
/// follow from the whole tree's (`Quotas::derive` keeps both).
#[derive(Clone, Debug)]
pub struct Terms {
    pub guarantee: Amounts,
    pub limit: Amounts,
    pub borrow_limit: Amounts,
    pub lend_limit: Amounts,
    pub user_limit: Amounts,
    /// The amounts written without a window, per kind (in `QuotaKind::ALL`'s order); the
    /// five above are these with the open windows' laid over them.
    written: [Amounts; 5],
    /// Windowed amounts, in the order written (the last open one wins).
    windows: Vec<(Window, QuotaKind, Amounts)>,
    /// The resources whose guarantee was not written (a parent's is its children's sum).
    unset_guarantee: BTreeSet<Res>,
    /// The resources whose guarantee in force is derived (not written, nor set by an
    /// open window): a parent's children's sum, a root's the cluster's capacity.
    derived: BTreeSet<Res>,
    subtree: Amounts,
    reserved: Amounts,
}

/// What a queue's subtree holds and asks for now. Invariant: a parent's is the sum of its
/// children's (every change goes along the whole path, `Quotas::for_path`).
#[derive(Clone, Debug, Default)]
pub struct Load {
    /// What the queue's subtree holds now.
    pub alloc: Amounts,
    /// What each user holds in the queue's subtree.
    pub users: HashMap<Sym, Amounts>,
    pub pending: u32,
    pub running: u32,
    /// GPU (milli) the subtree's waiting jobs ask for (all their replicas).
    pub pending_gpu: i64,
    /// What the running jobs ask for in all (milli-GPU): all their replicas, however many
    /// run, so that evictions, starts and an elastic gang's growth or lost replicas leave
    /// a queue's demand (running + waiting) where it was.
    pub running_gpu: i64,
}

/// A queue's decayed usage (GPU-seconds unless `settings` bill otherwise), and in a leaf
/// its users'. Invariant: `value` is exact as of `at_ms` for what the queue held since.
#[derive(Clone, Debug)]
pub struct Usage {
    pub value: f64,
    at_ms: u64,
    pub half_life_s: Option<f64>,
    /// In a leaf, each user's decayed usage, brought up to date when the user's holding
    /// changes or is read (users never leave: their usage is history).
    users: HashMap<Sym, Decayed>,
}

impl Queue {
    pub fn is_leaf(&self) -> bool {
        self.place.children.is_empty()
    }

    pub fn get(&self, amounts: &Amounts, r: Res) -> i64 {
        amounts.get(&r).copied().unwrap_or(0)
    }
}

/// The quota tree and its live accounting.
#[derive(Clone, Debug)]
pub struct Quotas {
    pub queues: Vec<Queue>,
    /// Resources some queue guarantees: only these are limited by the tree.
    constrained: BTreeSet<Res>,
    /// Whether some queue limits a GPU model (else a job's quota check does not depend
    /// on the node's model).
    by_model: bool,
    /// Capacity of the nodes in service per governed resource: an unset root guarantee.
    capacity: Amounts,
    /// What holding resources adds to usage.
    billing: Billing,
    /// The time usage was last brought up to date (`advance_usage`).
    clock_ms: u64,
    /// Bumped by every change, so views of the queues can be cached until the next.
    version: u64,
    /// Changes whenever what `derive` works out changes (quotas set, capacity).
    shape_version: u64,
    /// Where the week's phases start (minutes of the local week; empty: no windows).
    edges: Vec<u16>,
    /// The minute of the week whose amounts are in force (`None`: no window open).
    minute: Option<u16>,
}

/// The billed amount of holding `a`: GPUs, cores and GiB weighted by `billing`.
fn billed(billing: &Billing, a: &Amounts) -> f64 {
    let get = |r: Res| a.get(&r).copied().unwrap_or(0) as f64;
    billing.of(get(Res::Gpu) / 1000.0, get(Res::Cpu) / 1000.0, get(Res::Mem) / (1u64 << 30) as f64)
}

fn convert(q: &hir::Quota, syms: &mut Symbols) -> Amounts {
    q.iter()
        .map(|(r, v)| match r {
            Resource::Gpu(None) => (Res::Gpu, (v * 1000.0).round() as i64),
            Resource::Gpu(Some(m)) => (Res::Model(syms.intern(m)), (v * 1000.0).round() as i64),
            Resource::Cpu => (Res::Cpu, (v * 1000.0).round() as i64),
            Resource::Mem => (Res::Mem, v.round() as i64),
        })
        .collect()
}

impl Quotas {
    pub fn new(policy: &hir::Policy, syms: &mut Symbols) -> Quotas {
        let default_queueing = policy.settings.queueing;
        let mut queues: Vec<Queue> = policy
            .queues
            .iter()
            .map(|q| {
                let mut written: [Amounts; 5] =
                    QuotaKind::ALL.map(|k| q.quota(k).map(|a| convert(a, syms)).unwrap_or_default());
                let mut depth = 0;
                let mut p = q.parent;
                while let Some(pp) = p {
                    depth += 1;
                    p = policy.queues[pp].parent;
                }
                let name_sym = syms.intern(&q.name);
                let unset_guarantee: BTreeSet<Res> = q
                    .unset_guarantee
                    .iter()
                    .filter_map(|r| {
                        let one = hir::Quota::from([(r.clone(), 0.0)]);
                        convert(&one, syms).into_keys().next()
                    })
                    .collect();
                // The checker filled in the children's sums: derived again in every phase.
                written[0].retain(|r, _| !unset_guarantee.contains(r));
                let windows = q.windows.iter().map(|w| (w.window, w.kind, convert(&w.amounts, syms))).collect();
                Queue {
                    place: Position {
                        name: q.name.clone(),
                        name_sym,
                        parent: q.parent,
                        children: q.children.clone(),
                        depth,
                        weight: q.weight,
                        queueing: q.queueing.unwrap_or(default_queueing),
                        fairshare_parent: q.fairshare_parent,
                    },
                    quota: Terms {
                        guarantee: Amounts::new(),
                        limit: Amounts::new(),
                        borrow_limit: Amounts::new(),
                        lend_limit: Amounts::new(),
                        user_limit: Amounts::new(),
                        written,
                        windows,
                        unset_guarantee,
                        derived: BTreeSet::new(),
                        subtree: Amounts::new(),
                        reserved: Amounts::new(),
                    },
                    load: Load::default(),
                    usage: Usage { value: 0.0, at_ms: 0, half_life_s: q.usage_half_life, users: HashMap::new() },
                }
            })
            .collect();
        // Queueing is set on leaves; a parent's setting applies to its leaves that set none.
        for i in 0..queues.len() {
            if policy.queues[i].queueing.is_none() {
                let mut p = queues[i].place.parent;
                while let Some(pp) = p {
                    if let Some(q) = policy.queues[pp].queueing {
                        queues[i].place.queueing = q;
                        break;
                    }
                    p = queues[pp].place.parent;
                }
            }
        }
        let mut t = Quotas {
            queues,
            constrained: BTreeSet::new(),
            by_model: false,
            capacity: Amounts::new(),
            billing: policy.settings.billing,
            clock_ms: 0,
            version: 0,
            shape_version: 0,
            edges: policy.quota_edges(),
            minute: None,
        };
        t.derive();
        t
    }

    /// Puts in force the amounts of `minute` of the local week (0 is Monday 00:00), if
    /// that is another phase of the week than the amounts in force; whether it was.
    pub(crate) fn set_minute_of_week(&mut self, minute: u16) -> bool {
        if self.edges.is_empty() {
            return false;
        }
        let phase = |m: Option<u16>| m.map(|m| self.edges.partition_point(|&e| e <= m).checked_sub(1));
        // Before the week's first edge is the last edge's phase, from last week.
        let norm = |p: Option<Option<usize>>| p.map(|i| i.unwrap_or(self.edges.len() - 1));
        if norm(phase(self.minute)) == norm(phase(Some(minute))) {
            return false;
        }
        self.minute = Some(minute);
        self.version += 1;
        self.derive();
        true
    }

    /// Minutes of the local week where some window opens or closes (empty: none).
    pub(crate) fn window_edges(&self) -> &[u16] {
        &self.edges
    }

    /// Recomputes what the cohort arithmetic derives from the written amounts.
    fn derive(&mut self) {
        self.shape_version += 1;
        let minute = self.minute;
        for q in &mut self.queues {
            let t = &mut q.quota;
            let mut amounts = t.written.clone();
            for (window, kind, set) in &t.windows {
                if minute.is_some_and(|m| window.contains(m)) {
                    let i = QuotaKind::ALL.iter().position(|k| k == kind).unwrap_or(0);
                    amounts[i].extend(set.iter().map(|(r, v)| (*r, *v)));
                }
            }
            let [g, l, b, ll, u] = amounts;
            (t.guarantee, t.limit, t.borrow_limit, t.lend_limit, t.user_limit) = (g, l, b, ll, u);
            t.derived.clear();
        }
        // An unwritten guarantee of a resource the children are guaranteed is their sum.
        for i in (0..self.queues.len()).rev() {
            let t = &self.queues[i].quota;
            let unset: Vec<Res> = t.unset_guarantee.iter().filter(|r| !t.guarantee.contains_key(r)).copied().collect();
            for r in unset {
                let given: Vec<i64> = self.queues[i]
                    .place
                    .children
                    .iter()
                    .filter_map(|&c| self.queues[c].quota.guarantee.get(&r).copied())
                    .collect();
                if !given.is_empty() {
                    let t = &mut self.queues[i].quota;
                    t.guarantee.insert(r, given.iter().sum());
                    t.derived.insert(r);
                }
            }
        }
        self.constrained = self.queues.iter().flat_map(|q| q.quota.guarantee.keys().copied()).collect();
        self.by_model = self.queues.iter().any(|q| {
            let t = &q.quota;
            [&t.guarantee, &t.limit, &t.user_limit].iter().any(|a| a.keys().any(|r| matches!(r, Res::Model(_))))
        });
        // Children before parents: the tree's order puts every parent before its children.
        for i in (0..self.queues.len()).rev() {
            let resources: Vec<Res> = self.constrained.iter().copied().collect();
            for r in resources {
                let q = &self.queues[i];
                let t = &q.quota;
                let children_guarantee: i64 =
                    q.place.children.iter().map(|&c| self.queues[c].get(&self.queues[c].quota.guarantee, r)).sum();
                // A root's unset guarantee is the cluster's capacity (or its children's
                // promises, if they are more: capacity may be down).
                let written = t.guarantee.contains_key(&r) && !t.derived.contains(&r);
                let guarantee = if q.place.parent.is_none() && !written {
                    q.get(&t.guarantee, r).max(self.capacity.get(&r).copied().unwrap_or(0))
                } else {
                    q.get(&t.guarantee, r)
                };
                let own = (guarantee - children_guarantee).max(0);
                let pooled: i64 = q
                    .place
                    .children
                    .iter()
                    .map(|&c| {
                        let ct = &self.queues[c].quota;
                        self.queues[c].get(&ct.subtree, r) - self.queues[c].get(&ct.reserved, r)
                    })
                    .sum();
                let subtree = if q.is_leaf() { guarantee } else { own + pooled };
                let reserved = match t.lend_limit.get(&r) {
                    Some(l) => (subtree - l).max(0),
                    None => 0,
                };
                let t = &mut self.queues[i].quota;
                t.subtree.insert(r, subtree);
                t.reserved.insert(r, reserved);
            }
        }
    }

    /// Changes one amount of a queue's quota (`None` unsets it), as an operator editing
    /// quotas at run time would. Running jobs are not affected.
    pub(crate) fn set(&mut self, q: QueueId, kind: QuotaKind, r: Res, value: Option<i64>) {
        self.version += 1;
        let Some(node) = self.queues.get_mut(q) else { return };
        let i = QuotaKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        let amounts = &mut node.quota.written[i];
        match value {
            Some(v) => amounts.insert(r, v),
            None => amounts.remove(&r),
        };
        self.derive();
    }

    /// Sets the cluster's capacity (of the nodes in service), which a root's unset
    /// guarantee stands for.
    pub(crate) fn set_capacity(&mut self, capacity: Amounts) {
        if capacity != self.capacity {
            self.capacity = capacity;
            self.version += 1;
            self.derive();
        }
    }

    /// What queue `q`'s cohort can lend of `r`: its parent's pool (a root's own), the
    /// members' guarantees up to their lend limits plus the parent's own guarantee beyond
    /// its children's — Kueue's lendable capacity. 0 for a resource the tree does not govern.
    pub(crate) fn lendable(&self, q: QueueId, r: Res) -> i64 {
        let pool = self.queues[q].place.parent.unwrap_or(q);
        self.queues[pool].get(&self.queues[pool].quota.subtree, r)
    }

    /// The resources the tree governs (some queue guarantees them).
    pub(crate) fn governed(&self) -> impl Iterator<Item = Res> + '_ {
        self.constrained.iter().copied()
    }

    /// Whether the GPU model a job lands on can change its quota check.
    pub(crate) fn limits_models(&self) -> bool {
        self.by_model
    }

    /// The queue and its ancestors, leaf first.
    pub fn path(&self, leaf: QueueId) -> impl Iterator<Item = QueueId> + '_ {
        std::iter::successors(Some(leaf), |&q| self.queues[q].place.parent)
    }

    /// The queues from `leaf` up to, not including, `stop` (all of them if `stop` is not
    /// an ancestor).
    pub(crate) fn path_below(&self, leaf: QueueId, stop: Option<QueueId>) -> Vec<QueueId> {
        self.path(leaf).take_while(|&q| Some(q) != stop).collect()
    }

    /// The lowest queue that is an ancestor of both (or either itself).
    pub(crate) fn common_ancestor(&self, a: QueueId, b: QueueId) -> Option<QueueId> {
        let above_a: Vec<QueueId> = self.path(a).collect();
        self.path(b).find(|q| above_a.contains(q))
    }

    /// Whether the tree limits resource `r` (some queue guarantees it).
    pub fn is_constrained(&self, r: Res) -> bool {
        self.constrained.contains(&r)
    }

    /// Kueue's usage of `q` as its parent's pool sees it.
    fn usage(&self, q: QueueId, r: Res) -> i64 {
        let node = &self.queues[q];
        if node.is_leaf() {
            node.get(&node.load.alloc, r)
        } else {
            node.place
                .children
                .iter()
                .map(|&c| (self.usage(c, r) - self.queues[c].get(&self.queues[c].quota.reserved, r)).max(0))
                .sum()
        }
    }

    /// How much more of `r` queue `q` can take from the tree.
    pub(crate) fn available(&self, q: QueueId, r: Res) -> i64 {
        if !self.constrained.contains(&r) {
            return i64::MAX;
        }
        let node = &self.queues[q];
        let usage = self.usage(q, r);
        let Some(parent) = node.place.parent else {
            return node.get(&node.quota.subtree, r) - usage;
        };
        let reserved = node.get(&node.quota.reserved, r);
        let local = (reserved - usage).max(0);
        let mut from_parent = self.available(parent, r);
        if let Some(&limit) = node.quota.borrow_limit.get(&r) {
            let stored = node.get(&node.quota.subtree, r) - reserved;
            let used_in_parent = (usage - reserved).max(0);
            from_parent = from_parent.min(stored - used_in_parent + limit);
        }
        local.saturating_add(from_parent.max(0))
    }

    /// Whether `demand` can be admitted into leaf `q` for `user`; the error names the
    /// queue, the resource and the cap that would be crossed.
    pub(crate) fn admissible(&self, q: QueueId, user: Sym, demand: &Amounts) -> Result<(), Block> {
        for (&r, &amount) in demand.iter().filter(|(_, a)| **a > 0) {
            for p in self.path(q) {
                let node = &self.queues[p];
                let allocated = node.get(&node.load.alloc, r);
                if let Some(&limit) = node.quota.limit.get(&r)
                    && allocated + amount > limit
                {
                    return Err(Block::Limit { queue: p, res: r, limit, allocated, needs: amount });
                }
                if let Some(&limit) = node.quota.user_limit.get(&r) {
                    let used = node.load.users.get(&user).map_or(0, |u| u.get(&r).copied().unwrap_or(0));
                    if used + amount > limit {
                        return Err(Block::UserLimit { queue: p, res: r, limit, used, needs: amount });
                    }
                }
            }
            let available = self.available(q, r);
            if amount > available {
                return Err(Block::Cohort { queue: q, res: r, available, needs: amount });
            }
        }
        Ok(())
    }

    /// The room left under the cap behind `block` (for `user`): a demand it turned away
    /// can only pass once this grows.
    pub(crate) fn room(&self, block: Block, user: Sym) -> i64 {
        match block {
            Block::Limit { queue, res, .. } => {
                let node = &self.queues[queue];
                node.quota.limit.get(&res).map_or(i64::MAX, |limit| limit - node.get(&node.load.alloc, res))
            }
            Block::UserLimit { queue, res, .. } => {
                let node = &self.queues[queue];
                let used = node.load.users.get(&user).map_or(0, |u| u.get(&res).copied().unwrap_or(0));
                node.quota.user_limit.get(&res).map_or(i64::MAX, |limit| limit - used)
            }
            Block::Cohort { queue, res, .. } => self.available(queue, res),
        }
    }

    /// Charges (`sign` 1) or refunds (`sign` -1) an admitted job along its queue's path.
    pub fn charge(&mut self, q: QueueId, user: Sym, demand: &Amounts, sign: i64) {
        let clock = self.clock_ms;
        if let Some(queue) = self.queues.get(q)
            && queue.usage.users.contains_key(&user)
        {
            let value = self.user_usage(q, user, clock);
            self.queues[q].usage.users.insert(user, Decayed { value, at_ms: clock });
        }
        self.for_path(q, |node| {
            let load = &mut node.load;
            let by_user = load.users.entry(user).or_default();
            for (&r, &a) in demand {
                *load.alloc.entry(r).or_insert(0) += sign * a;
                *by_user.entry(r).or_insert(0) += sign * a;
            }
        });
    }

    /// Counts jobs that begin (1) or stop (-1) waiting or running in leaf `q`; each asks
    /// for `gpu_milli` in all (what waiting and running jobs ask for is counted too).
    pub(crate) fn count(&mut self, q: QueueId, pending: i32, running: i32, gpu_milli: i64) {
        self.for_path(q, |node| {
            let load = &mut node.load;
            load.pending = load.pending.saturating_add_signed(pending);
            load.pending_gpu = load.pending_gpu.saturating_add(i64::from(pending).saturating_mul(gpu_milli));
            load.running = load.running.saturating_add_signed(running);
            load.running_gpu = load.running_gpu.saturating_add(i64::from(running).saturating_mul(gpu_milli));
        });
    }

    /// Applies `f` to the queue and each of its ancestors.
    fn for_path(&mut self, q: QueueId, mut f: impl FnMut(&mut Queue)) {
        self.version += 1;
        let mut at = Some(q);
        while let Some(i) = at {
            let node = &mut self.queues[i];
            f(node);
            at = node.place.parent;
        }
    }

    /// Brings decayed usage up to `now`: exact for the constant allocation since the last
    /// update, so it does not depend on how often this is called.
    /// Changes with every change to the tree's amounts, counts or usage.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    /// Changes whenever a written quota or the capacity changes: what a queue's
    /// guarantee, limits and lendable amounts are.
    pub fn shape_version(&self) -> u64 {
        self.shape_version
    }

    pub fn advance_usage(&mut self, now_ms: u64) {
        self.version += 1;
        self.clock_ms = self.clock_ms.max(now_ms);
        for q in &mut self.queues {
            let u = &mut q.usage;
            let dt = now_ms.saturating_sub(u.at_ms) as f64 / 1000.0;
            if dt <= 0.0 {
                continue;
            }
            u.value = decayed(u.value, billed(&self.billing, &q.load.alloc), dt, u.half_life_s);
            u.at_ms = now_ms;
        }
    }

    /// Records that `user` has jobs in leaf `q`, so Fair Tree counts it; whether it is new
    /// there.
    pub(crate) fn join_user(&mut self, q: QueueId, user: Sym) -> bool {
        let clock = self.clock_ms;
        let Some(queue) = self.queues.get_mut(q) else { return false };
        let new = !queue.usage.users.contains_key(&user);
        if new {
            self.version += 1;
            queue.usage.users.insert(user, Decayed { value: 0.0, at_ms: clock });
        }
        new
    }

    /// Sets queue `q`'s usage as of the last `advance_usage`.
    pub(crate) fn set_usage(&mut self, q: QueueId, value: f64) {
        self.version += 1;
        if let Some(queue) = self.queues.get_mut(q) {
            queue.usage.value = value;
        }
    }

    /// Sets `user`'s usage in leaf `q` as of the last `advance_usage` (it must have joined).
    pub(crate) fn set_user_usage(&mut self, q: QueueId, user: Sym, value: f64) {
        self.version += 1;
        let at_ms = self.clock_ms;
        if let Some(u) = self.queues.get_mut(q).and_then(|queue| queue.usage.users.get_mut(&user)) {
            *u = Decayed { value, at_ms };
        }
    }

    /// The decayed usage of `user` in leaf `q` at `now_ms` (0 for a user it never had).
    pub(crate) fn user_usage(&self, q: QueueId, user: Sym, now_ms: u64) -> f64 {
        let queue = &self.queues[q];
        let Some(u) = queue.usage.users.get(&user) else { return 0.0 };
        let held = queue.load.users.get(&user).map_or(0.0, |a| billed(&self.billing, a));
        decayed(u.value, held, now_ms.saturating_sub(u.at_ms) as f64 / 1000.0, queue.usage.half_life_s)
    }

    /// The users of leaf `q` with their usage at `now_ms`, in a fixed order (by symbol).
    pub(crate) fn users_of(&self, q: QueueId, now_ms: u64) -> Vec<(Sym, f64)> {
        let mut users: Vec<(Sym, f64)> =
            self.queues[q].usage.users.keys().map(|&u| (u, self.user_usage(q, u, now_ms))).collect();
        users.sort_unstable_by_key(|(u, _)| *u);
        users
    }

    /// Each queue's entitlement to the cluster's GPUs whatever anyone asks for: its
    /// guarantee, plus the surplus of its parent's entitlement split among the children
    /// by weight. (`queue.fair_share` is KAI's, which follows demand: `fair_share`.)
    pub fn entitlements(&self, total_milli: i64) -> Vec<f64> {
        let mut fair = vec![0.0; self.queues.len()];
        let total = total_milli.max(1) as f64;
        for i in 0..self.queues.len() {
            let q = &self.queues[i];
            if q.place.parent.is_none() {
                fair[i] = total;
            }
            if q.is_leaf() {
                continue;
            }
            let children = &q.place.children;
            let guarantees: f64 =
                children.iter().map(|&c| self.queues[c].get(&self.queues[c].quota.guarantee, Res::Gpu) as f64).sum();
            let weights: f64 = children.iter().map(|&c| self.queues[c].place.weight).sum();
            let surplus = (fair[i] - guarantees).max(0.0);
            for &c in children {
                let child = &self.queues[c];
                let by_weight = if weights > 0.0 { surplus * child.place.weight / weights } else { 0.0 };
                fair[c] = child.get(&child.quota.guarantee, Res::Gpu) as f64 + by_weight;
            }
        }
        fair.iter().map(|f| f / total).collect()
    }

    /// The queue's largest share of any cluster resource, with `extra` added.
    pub fn dominant_share(&self, q: QueueId, totals: &Amounts, extra: Option<&Amounts>) -> f64 {
        let node = &self.queues[q];
        [Res::Gpu, Res::Cpu, Res::Mem]
            .iter()
            .map(|r| {
                let a = node.get(&node.load.alloc, *r) + extra.map_or(0, |e| e.get(r).copied().unwrap_or(0));
                let t = totals.get(r).copied().unwrap_or(0);
                if t > 0 { a as f64 / t as f64 } else { 0.0 }
            })
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpol_compiler::load::Checked;

    fn tree(queues: &str) -> (Quotas, Symbols) {
        let text = format!("policy q\n{queues}\n");
        let policy = Checked::from_text("q.gpol", &text).into_policy().expect("the tree checks").policy;
        let mut syms = Symbols::default();
        (Quotas::new(&policy, &mut syms), syms)
    }

    fn cpu(cores: i64) -> Amounts {
        Amounts::from([(Res::Cpu, cores * 1000)])
    }

    /// The most CPU queue `q` can hold with the others' allocations as given.
    fn capacity(t: &mut Quotas, q: QueueId) -> i64 {
        t.available(q, Res::Cpu) / 1000 + t.queues[q].get(&t.queues[q].load.alloc, Res::Cpu) / 1000
    }

    const A: QueueId = 1;
    const B: QueueId = 2;

    #[test]
    fn a_cohort_lends_unused_guarantee() {
        let (mut t, _) = tree("queue cohort {\n queue a { guarantee 9 cpu }\n queue b { guarantee 12 cpu }\n}");
        assert_eq!(capacity(&mut t, A), 21, "A alone can use 21");
        t.charge(B, Sym(1), &cpu(12), 1);
        assert_eq!(capacity(&mut t, A), 9, "with B using its guarantee, A has its own 9");
    }

    #[test]
    fn a_borrow_limit_caps_borrowing() {
        let (mut t, _) =
            tree("queue cohort {\n queue a { guarantee 9 cpu; borrow_limit 1 cpu }\n queue b { guarantee 12 cpu }\n}");
        assert_eq!(capacity(&mut t, A), 10, "A caps at 10");
        assert_eq!(capacity(&mut t, B), 21);
    }

    #[test]
    fn a_lend_limit_keeps_guarantee_back() {
        let (mut t, _) =
            tree("queue cohort {\n queue a { guarantee 9 cpu }\n queue b { guarantee 12 cpu; lend_limit 1 cpu }\n}");
        assert_eq!(capacity(&mut t, A), 10, "A can borrow only 1 from B");
        assert_eq!(capacity(&mut t, B), 21, "B can still use 21");
        t.charge(A, Sym(1), &cpu(10), 1);
        assert_eq!(capacity(&mut t, B), 11, "B keeps its 11 even when A borrowed");
    }

    #[test]
    fn limits_and_user_limits_block_with_their_numbers() {
        let (mut t, _) = tree(
            "queue cohort {\n queue a { guarantee 8 cpu; limit 10 cpu; user_limit 6 cpu }\n queue b { guarantee 8 cpu }\n}",
        );
        assert!(t.admissible(A, Sym(1), &cpu(6)).is_ok());
        t.charge(A, Sym(1), &cpu(6), 1);
        assert_eq!(
            t.admissible(A, Sym(1), &cpu(1)),
            Err(Block::UserLimit { queue: A, res: Res::Cpu, limit: 6000, used: 6000, needs: 1000 })
        );
        assert!(t.admissible(A, Sym(2), &cpu(4)).is_ok());
        assert_eq!(
            t.admissible(A, Sym(2), &cpu(5)),
            Err(Block::Limit { queue: A, res: Res::Cpu, limit: 10_000, allocated: 6000, needs: 5000 })
        );
    }

    #[test]
    fn unguaranteed_resources_are_not_limited_by_the_tree() {
        let (t, _) = tree("queue cohort {\n queue a { weight 1 }\n queue b { weight 2 }\n}");
        assert!(t.admissible(A, Sym(1), &cpu(1_000_000)).is_ok());
    }

    #[test]
    fn decayed_usage_does_not_depend_on_update_frequency() {
        let (mut t1, _) = tree("queue a { usage_half_life 1h }");
        let (mut t2, _) = tree("queue a { usage_half_life 1h }");
        let gpus = Amounts::from([(Res::Gpu, 4000)]);
        t1.charge(0, Sym(1), &gpus, 1);
        t2.charge(0, Sym(1), &gpus, 1);
        t1.advance_usage(7_200_000);
        for step in 1..=720 {
            t2.advance_usage(step * 10_000);
        }
        let (a, b) = (t1.queues[0].usage.value, t2.queues[0].usage.value);
        assert!((a - b).abs() < 1e-6 * a, "{a} vs {b}");
        // 4 GPUs for two half-lives: 4 · h/ln2 · (1 − 1/4).
        let expected = 4.0 * 3600.0 / std::f64::consts::LN_2 * 0.75;
        assert!((a - expected).abs() < 1e-6 * expected, "{a} vs {expected}");
    }
}
