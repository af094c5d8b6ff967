//! Random cases drawn from a vocabulary: every property of nodes and jobs is either a
//! plain value from a small palette or, half the time where a rule compares it, one of
//! its deciding values (a cut, or a point between two). Seeded, so a diff is repeatable.

use crate::vocab::Vocab;
use crate::world::{Pending, Running, World};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD};
use gpol_compiler::schema::{EnumKind, MIG_PROFILES};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

const GIB: u64 = 1 << 30;

/// Draws cases.
pub struct Generator<'v> {
    vocab: &'v Vocab,
    rng: Pcg64Mcg,
    /// Names jobs and nodes take: a prefix no queue uses.
    prefix: String,
}

impl<'v> Generator<'v> {
    pub fn new(vocab: &'v Vocab, seed: u64) -> Generator<'v> {
        Generator { vocab, rng: Pcg64Mcg::seed_from_u64(seed), prefix: name_prefix(vocab) }
    }

    /// One case: a third of them sized to the quota tree when it has GPU quotas, one in
    /// eight wide (many nodes and jobs: many (job, node) decisions for one set-up), the
    /// rest small.
    pub fn world(&mut self) -> World {
        let sized = self.vocab.quota_points.values().any(|p| p.iter().any(|&x| x > 1));
        if sized && self.rng.random_bool(0.35) {
            return self.quota_world();
        }
        if self.rng.random_bool(0.125) {
            return self.wide_world();
        }
        self.small_world()
    }

    /// A wide case: 8 to 16 nodes and 12 to 24 jobs submitted at once.
    fn wide_world(&mut self) -> World {
        let (nodes, jobs) = (self.rng.random_range(8..=16), self.rng.random_range(12..=24));
        let mut w = self.sized_world(nodes, jobs);
        for p in &mut w.pending {
            p.batch = 0;
        }
        w
    }

    /// A case sized to the quota tree: each leaf queue running at one of its deciding
    /// allocations (or nothing), on nodes of 8 cards with a little room to spare, and
    /// jobs asking for what would take a queue across a cut.
    fn quota_world(&mut self) -> World {
        let mut w = World::default();
        let leaves = self.vocab.leaves.clone();
        let mut targets: Vec<(String, u32)> = Vec::new();
        for leaf in &leaves {
            let points = self.vocab.quota_points.get(leaf).cloned().unwrap_or_default();
            let t = if self.rng.random_bool(0.25) { 0 } else { self.one_of(&points).unwrap_or(0) };
            targets.push((leaf.clone(), t));
        }
        let used: u32 = targets.iter().map(|(_, t)| t).sum();
        let extra = [0, 1, 2, 4, 8][self.rng.random_range(0..5)];
        let nodes = (used + extra).div_ceil(8).clamp(1, 64) as usize;
        let models = self.vocab.models.clone();
        for i in 0..nodes {
            let mut n = NodeSpec::named(format!("{}n{}", self.prefix, i + 1));
            n.cards = 8;
            n.model = self.one_of(&models).unwrap_or_else(|| "gpu".into());
            w.nodes.push(n);
        }
        let mut free: Vec<u32> = vec![8; nodes];
        for (leaf, t) in &targets {
            let mut left = *t;
            for (i, f) in free.iter_mut().enumerate() {
                if left == 0 {
                    break;
                }
                let take = left.min(*f);
                if take == 0 {
                    continue;
                }
                *f -= take;
                left -= take;
                let mut job = self.job(format!("{}r{}", self.prefix, w.running.len() + 1));
                job.queue = Some(leaf.clone());
                job.request = Request::Whole(take);
                (job.replicas, job.min_replicas, job.models, job.gpu_mem) = (1, None, Vec::new(), 0);
                (job.cpu_milli, job.mem) = (0, 0);
                let history = self.history();
                w.running.push(Running { job, nodes: vec![i], history, ends: false });
            }
        }
        for i in 0..self.rng.random_range(1..=3) {
            let mut job = self.job(format!("{}j{}", self.prefix, i + 1));
            let leaf = self.one_of(&targets);
            if let Some((leaf, t)) = leaf {
                let points = self.vocab.quota_points.get(&leaf).cloned().unwrap_or_default();
                let crossing: Vec<u32> = points.iter().filter(|&&p| p > t && p - t <= 8).map(|p| p - t).collect();
                if let (Some(k), true) = (self.one_of(&crossing), self.rng.random_bool(0.6)) {
                    job.request = Request::Whole(k);
                    job.replicas = 1;
                    job.min_replicas = None;
                }
                job.queue = Some(leaf);
            }
            w.pending.push(Pending { job, batch: 0 });
        }
        w
    }

    /// A small case: one to four nodes of any kind, some of them partly busy.
    fn small_world(&mut self) -> World {
        let nodes = [1, 2, 2, 3, 3, 4][self.rng.random_range(0..6)];
        let jobs = [1, 1, 2, 2, 3, 4][self.rng.random_range(0..6)];
        self.sized_world(nodes, jobs)
    }

    /// A case of `nodes` nodes of any kind, some of them partly busy, and `jobs` jobs.
    fn sized_world(&mut self, nodes: usize, jobs: usize) -> World {
        let mut w = World::default();
        for i in 0..nodes {
            let node = self.node(i);
            w.nodes.push(node);
        }
        let mut used: Vec<u32> = vec![0; w.nodes.len()];
        for (i, node) in w.nodes.clone().iter().enumerate() {
            if node.cards == 0 || !self.rng.random_bool(0.6) {
                continue;
            }
            // Shared cards and MIG instances are held by several jobs: up to all of them.
            let holders = match node.sharing {
                Sharing::Exclusive => 1,
                Sharing::Mig => self.rng.random_range(1..=node.mig.len().max(1) * node.cards as usize),
                _ => self.rng.random_range(1..=(node.max_clients * node.cards) as usize),
            };
            for k in 0..holders.min(16) {
                let name = format!("{}r{}", self.prefix, w.running.len() + 1);
                if let Some((job, cards)) = self.running_job(name, node, k) {
                    used[i] += cards;
                    let history = self.history();
                    w.running.push(Running { job, nodes: vec![i], history, ends: false });
                }
            }
        }
        for leaf in self.vocab.leaves.clone() {
            if self.rng.random_bool(0.25) {
                let amount = self.pick(&["queue.usage", "job.user_usage"], &[3600.0, 360_000.0]).max(0.0);
                w.usage.push((leaf, amount.round()));
            }
        }
        // Jobs submitted at different times: waits from the deciding values (or a palette
        // when no rule compares `job.waiting`), so that order by submission is seen too.
        let mut waits = self.vocab.values("job.waiting").to_vec();
        if waits.is_empty() {
            waits = vec![60.0, 3600.0];
        }
        let batches = if self.rng.random_bool(0.5) { 1 } else { 3 };
        for b in 0..2 {
            w.waits[b] = match batches {
                1 => 0,
                _ => self.one_of(&waits).unwrap_or(60.0).clamp(0.0, 1e7) as u64,
            };
        }
        if batches > 1 {
            // Room that frees up once the early jobs have waited.
            for r in &mut w.running {
                r.ends = self.rng.random_bool(0.4);
            }
        }
        for i in 0..jobs {
            let job = self.job(format!("{}j{}", self.prefix, i + 1));
            let batch = self.rng.random_range(0..batches) as u8;
            w.pending.push(Pending { job, batch });
        }
        w
    }

    fn node(&mut self, i: usize) -> NodeSpec {
        let mut n = NodeSpec::named(format!("{}n{}", self.prefix, i + 1));
        n.cards = self.count(&["node.cards", "domain.cards"], &[1.0, 2.0, 4.0, 8.0], 1, MAX_CARDS_PER_NODE);
        if let Some(m) = self.one_of(&self.vocab.models.clone()) {
            n.model = m;
        }
        if self.rng.random_bool(0.3) {
            n.card_mem = self.bytes(&["node.gpu_mem", "card.mem"], &[40.0 * GIB as f64, 80.0 * GIB as f64]);
        }
        if self.rng.random_bool(0.2) {
            n.cpu_milli = self.count(&["node.cpu", "node.cpu_free"], &[16.0, 64.0], 1, 4096) as u64 * 1000;
        }
        if self.rng.random_bool(0.2) {
            n.mem = self.bytes(&["node.mem", "node.mem_free"], &[256.0 * GIB as f64, 512.0 * GIB as f64]);
        }
        let sharing = self.vocab.sharing || self.vocab.mig;
        if sharing && self.rng.random_bool(0.4) {
            let kinds: &[Sharing] = if self.vocab.mig {
                &[Sharing::Timeslice, Sharing::Mps, Sharing::Mig]
            } else {
                &[Sharing::Timeslice, Sharing::Mps]
            };
            n.sharing = kinds[self.rng.random_range(0..kinds.len())];
            match n.sharing {
                Sharing::Mig => n.mig = self.mig_layout(),
                _ => {
                    n.max_clients =
                        self.count(&["node.max_clients", "card.max_clients"], &[2.0, 4.0], 2, MAX_CLIENTS_PER_CARD)
                }
            }
        }
        for l in 0..self.vocab.levels.len() {
            if self.rng.random_bool(0.85) {
                let d = ["d1", "d1", "d2"][self.rng.random_range(0..3)];
                n.domains.push((l as u8, d.to_string()));
            }
        }
        for key in self.vocab.node_label_keys.clone() {
            if let Some(v) = self.label_value() {
                n.labels.push((key, v));
            }
        }
        n
    }

    fn mig_layout(&mut self) -> Vec<u8> {
        let p = |name: &str| EnumKind::MigProfile.variant(name).unwrap_or(0);
        let layouts: Vec<Vec<u8>> = vec![
            vec![p("3g.40gb"), p("3g.40gb")],
            vec![p("1g.10gb"); 7],
            vec![p("7g.80gb")],
            vec![p("2g.20gb"), p("2g.20gb"), p("2g.20gb"), p("1g.10gb")],
        ];
        layouts[self.rng.random_range(0..layouts.len())].clone()
    }

    /// A job running on `node`, and the whole cards it holds.
    /// A job running on `node`, the `k`-th to hold part of it, and the whole cards it holds.
    fn running_job(&mut self, name: String, node: &NodeSpec, k: usize) -> Option<(JobSpec, u32)> {
        let mut job = self.job(name);
        job.replicas = 1;
        job.min_replicas = None;
        job.models.clear();
        job.gpu_mem = 0;
        job.cpu_milli = job.cpu_milli.min(node.cpu_milli);
        job.mem = job.mem.min(node.mem);
        let cards = match node.sharing {
            Sharing::Exclusive => {
                let free = self.count(&["node.free_cards"], &[0.0, 1.0], 0, node.cards);
                let take = node.cards.saturating_sub(free).max(1);
                job.request = Request::Whole(take);
                take
            }
            // The k-th instance of the layout (each card has the layout), or a share of a
            // card small enough for every client the card takes.
            Sharing::Mig => {
                let profile = *node.mig.get(k % node.mig.len().max(1))?;
                job.request = Request::Mig(profile);
                0
            }
            _ => {
                let share = (1000 / node.max_clients.max(1)).clamp(1, 500);
                job.request = Request::Fraction([share, share.min(250)][self.rng.random_range(0..2)]);
                0
            }
        };
        Some((job, cards))
    }

    fn history(&mut self) -> History {
        let ran = self.pick(&["job.runtime"], &[0.0, 600.0, 3600.0, 36_000.0]).clamp(0.0, 1e8);
        let since = self.pick(&["job.since_checkpoint"], &[0.0, 600.0, 3600.0]).clamp(0.0, ran);
        let evictions = self.count(&["job.evictions"], &[0.0, 1.0], 0, 100);
        History { ran_ms: (ran * 1000.0) as u64, since_checkpoint_ms: (since * 1000.0) as u64, evictions }
    }

    fn job(&mut self, name: String) -> JobSpec {
        let mut j = JobSpec::named(name);
        j.queue = self.one_of(&self.vocab.leaves.clone());
        if self.rng.random_bool(0.3) {
            j.priority_class = self.one_of(&self.vocab.classes.clone());
        }
        if self.rng.random_bool(0.5) {
            j.priority = Some(self.pick(&["job.priority"], &[0.0, 10.0, 100.0, 1000.0]));
        }
        let roll: f64 = self.rng.random();
        j.request = if self.vocab.sharing && roll < 0.2 {
            let f = self.pick(&["job.gpu_fraction", "card.free", "node.largest_free_fraction"], &[0.25, 0.5]);
            Request::Fraction(((f * 1000.0).round() as u32).clamp(1, 999))
        } else if self.vocab.mig && roll < 0.35 {
            Request::Mig(self.rng.random_range(0..MIG_PROFILES.len()) as u8)
        } else if roll > 0.93 {
            Request::None
        } else {
            let k = self.count(
                &["job.whole_cards", "job.total_gpus", "node.free_cards", "domain.max_free_cards"],
                &[1.0, 2.0, 4.0, 8.0],
                1,
                MAX_CARDS_PER_NODE,
            );
            Request::Whole(k)
        };
        if self.rng.random_bool(if self.vocab.gangs { 0.25 } else { 0.08 }) {
            j.replicas = self.count(&["job.replicas"], &[2.0, 3.0, 4.0], 2, 16);
            if self.rng.random_bool(0.3) {
                j.min_replicas = Some(self.rng.random_range(1..=j.replicas));
            }
        }
        if self.rng.random_bool(0.2) {
            j.gpu_mem = self.bytes(&["job.gpu_mem", "card.free_mem"], &[40.0 * GIB as f64]);
        }
        if self.rng.random_bool(0.2) {
            j.cpu_milli = self.count(&["job.cpu"], &[8.0, 32.0], 1, 4096) as u64 * 1000;
        }
        if self.rng.random_bool(0.2) {
            j.mem = self.bytes(&["job.mem"], &[64.0 * GIB as f64]);
        }
        if self.rng.random_bool(0.15) {
            j.models = self.one_of(&self.vocab.models.clone()).into_iter().collect();
        }
        j.bursty = self.rng.random_bool(0.2);
        j.latency_critical = self.rng.random_bool(0.2);
        j.preemptible = self.rng.random_bool(0.6);
        if self.rng.random_bool(0.3) {
            let d = self.pick(&["job.expected_duration"], &[3600.0, 86_400.0]).clamp(1.0, 1e8);
            j.duration_ms = Some((d * 1000.0) as u64);
        }
        if self.rng.random_bool(0.15) {
            j.utilization = self.pick(&["job.utilization"], &[0.5]).clamp(0.0, 1.0);
        }
        for key in self.vocab.job_label_keys.clone() {
            if let Some(v) = self.label_value() {
                j.labels.push((key, v));
            }
        }
        if self.rng.random_bool(0.2) {
            j.user = self.one_of(&["alice".to_string(), "bob".to_string()]);
        }
        j
    }

    fn label_value(&mut self) -> Option<String> {
        if self.rng.random_bool(0.4) {
            return None;
        }
        let mut values = self.vocab.strings.clone();
        values.push("x".into());
        self.one_of(&values)
    }

    fn one_of<T: Clone>(&mut self, items: &[T]) -> Option<T> {
        (!items.is_empty()).then(|| items[self.rng.random_range(0..items.len())].clone())
    }

    /// A value for a property that sets `fields`: half the time one of their deciding
    /// values (when any rule compares them), else one from `palette`.
    fn pick(&mut self, fields: &[&str], palette: &[f64]) -> f64 {
        let deciding: Vec<f64> = fields.iter().flat_map(|f| self.vocab.values(f).iter().copied()).collect();
        if !deciding.is_empty() && self.rng.random_bool(0.5) {
            return deciding[self.rng.random_range(0..deciding.len())];
        }
        palette[self.rng.random_range(0..palette.len())]
    }

    /// A whole count in `lo..=hi` (deciding values outside it, or not whole, fall back to
    /// the palette).
    fn count(&mut self, fields: &[&str], palette: &[f64], lo: u32, hi: u32) -> u32 {
        let v = self.pick(fields, palette);
        if v.fract() == 0.0 && v >= f64::from(lo) && v <= f64::from(hi) {
            v as u32
        } else {
            (palette[self.rng.random_range(0..palette.len())] as u32).clamp(lo, hi)
        }
    }

    fn bytes(&mut self, fields: &[&str], palette: &[f64]) -> u64 {
        self.pick(fields, palette).clamp(0.0, 1e14).round() as u64
    }
}

/// A prefix for generated names that no queue (nor `cluster`) starts with.
pub fn name_prefix(vocab: &Vocab) -> String {
    let mut prefix = String::new();
    while vocab.reserved.iter().any(|q| {
        ["n", "r", "j"]
            .iter()
            .any(|k| q.strip_prefix(&format!("{prefix}{k}")).is_some_and(|rest| rest.parse::<u32>().is_ok()))
    }) {
        prefix.push('x');
    }
    prefix
}
