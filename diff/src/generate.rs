//! Random cases as proptest strategies over a vocabulary: every property of nodes and
//! jobs is either a plain value from a small palette or, half the time where a rule
//! compares it, one of its deciding values (a cut, or a point between two). Strategies
//! draw the raw material (nodes, jobs, who runs where, usage, batches) and one function
//! assembles it into a [`World`], so proptest's shrinking — fewer nodes and jobs, simpler
//! values — applies to every case; [`Cases`] replays a chunk's draws from its seed, so a
//! kept case can be shrunk after the search.

use crate::vocab::Vocab;
use crate::world::{Pending, Running, World};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_CLIENTS_PER_CARD};
use gpol_compiler::schema::{EnumKind, MIG_PROFILES};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use proptest::bool::weighted as chance;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::{BoxedStrategy, Union, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const GIB: f64 = (1u64 << 30) as f64;

/// The draws of one chunk of the search, from its seed.
pub struct Cases {
    strategy: BoxedStrategy<World>,
    runner: TestRunner,
}

impl Cases {
    pub fn new(vocab: &Vocab, seed: u64) -> Cases {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        Cases { strategy: world(vocab), runner: TestRunner::new_with_rng(Config::default(), rng) }
    }

    /// The next case, as a tree proptest can shrink (`None` if the strategy gave up).
    pub fn next_tree(&mut self) -> Option<Box<dyn ValueTree<Value = World>>> {
        self.strategy.new_tree(&mut self.runner).ok()
    }

    /// The next case.
    pub fn next_world(&mut self) -> Option<World> {
        self.next_tree().map(|t| t.current())
    }
}

/// Shrinks `tree` while `keeps` holds of its value, with proptest's simplify/complicate
/// search, in at most `plays` evaluations; the simplest value that kept it.
pub fn shrink(tree: &mut dyn ValueTree<Value = World>, keeps: &mut dyn FnMut(&World) -> bool, plays: usize) -> World {
    let mut best = tree.current();
    let mut left = plays;
    if !tree.simplify() {
        return best;
    }
    while left > 0 {
        left -= 1;
        let candidate = tree.current();
        if keeps(&candidate) {
            best = candidate;
            if !tree.simplify() {
                break;
            }
        } else if !tree.complicate() {
            break;
        }
    }
    best
}

/// A case: a third of them sized to the quota tree when it has GPU quotas, one in eight
/// wide (many nodes and jobs: many (job, node) decisions for one set-up), the rest small.
pub fn world(vocab: &Vocab) -> BoxedStrategy<World> {
    let small = sized(vocab, 1..=4, 1..=4, false);
    let wide = sized(vocab, 8..=16, 12..=24, true);
    let sized_to_quota = vocab.quota_points.values().any(|p| p.iter().any(|&x| x > 1));
    if sized_to_quota {
        Union::new_weighted(vec![(57, small), (8, wide), (35, quota(vocab))]).boxed()
    } else {
        Union::new_weighted(vec![(7, small), (1, wide)]).boxed()
    }
}

/// What draws a value: half the time (when a rule compares one of `fields`) one of
/// their deciding values, else one from `palette`.
fn pick(vocab: &Vocab, fields: &[&str], palette: &[f64]) -> BoxedStrategy<f64> {
    let deciding: Vec<f64> = fields.iter().flat_map(|f| vocab.values(f).iter().copied()).collect();
    select(halves(palette.to_vec(), deciding)).boxed()
}

/// One list drawing from `plain` and `deciding` (when it has any) equally often, `plain`
/// first (shrinking goes there). One `select`: proptest's unions cost far more to draw.
fn halves<T: Clone>(plain: Vec<T>, deciding: Vec<T>) -> Vec<T> {
    if deciding.is_empty() {
        return plain;
    }
    let mut out = Vec::with_capacity(2 * plain.len() * deciding.len());
    for _ in 0..deciding.len() {
        out.extend(plain.iter().cloned());
    }
    for _ in 0..plain.len() {
        out.extend(deciding.iter().cloned());
    }
    out
}

/// `Some` of a draw with probability `p`; shrinks to `None`. (Not `option::weighted`,
/// a union, which costs far more to draw.)
fn maybe<T: std::fmt::Debug + Clone + 'static>(
    p: f64,
    s: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<Option<T>> {
    (chance(p), s).prop_map(|(on, v)| on.then_some(v)).boxed()
}

/// A whole count in `lo..=hi` (deciding values outside it, or not whole, are not drawn).
fn count(vocab: &Vocab, fields: &[&str], palette: &[f64], lo: u32, hi: u32) -> BoxedStrategy<u32> {
    let fits = |v: &f64| v.fract() == 0.0 && *v >= f64::from(lo) && *v <= f64::from(hi);
    let deciding: Vec<u32> =
        fields.iter().flat_map(|f| vocab.values(f).iter().copied()).filter(fits).map(|v| v as u32).collect();
    let plain: Vec<u32> = palette.iter().map(|&v| (v as u32).clamp(lo, hi)).collect();
    select(halves(plain, deciding)).boxed()
}

fn bytes(vocab: &Vocab, fields: &[&str], palette: &[f64]) -> BoxedStrategy<u64> {
    pick(vocab, fields, palette).prop_map(|v| v.clamp(0.0, 1e14).round() as u64).boxed()
}

/// One of `items`, or nothing when there are none.
fn one_of<T: Clone + std::fmt::Debug + 'static>(items: &[T]) -> BoxedStrategy<Option<T>> {
    match items.is_empty() {
        true => Just(None).boxed(),
        false => select(items.to_vec()).prop_map(Some).boxed(),
    }
}

/// A label's value: absent (two times in five), a literal of either policy, or another.
fn label(vocab: &Vocab) -> BoxedStrategy<Option<String>> {
    let mut values = vocab.strings.clone();
    values.push("x".into());
    maybe(0.6, select(values)).boxed()
}

/// A node's properties, before it is named.
#[derive(Clone, Debug)]
struct NodeDraw {
    cards: u32,
    model: Option<String>,
    card_mem: Option<u64>,
    cpu: Option<u32>,
    mem: Option<u64>,
    /// Sharing kind, clients per card, MIG layout.
    sharing: Option<(Sharing, u32, usize)>,
    domains: Vec<Option<&'static str>>,
    labels: Vec<Option<String>>,
}

fn node(vocab: &Vocab) -> BoxedStrategy<NodeDraw> {
    let kinds: Vec<Sharing> = match (vocab.sharing, vocab.mig) {
        (_, true) => vec![Sharing::Timeslice, Sharing::Mps, Sharing::Mig],
        (true, false) => vec![Sharing::Timeslice, Sharing::Mps],
        _ => Vec::new(),
    };
    let sharing = match kinds.is_empty() {
        true => Just(None).boxed(),
        false => {
            let clients = count(vocab, &["node.max_clients", "card.max_clients"], &[2.0, 4.0], 2, MAX_CLIENTS_PER_CARD);
            maybe(0.4, (select(kinds), clients, 0..LAYOUTS)).boxed()
        }
    };
    (
        count(vocab, &["node.cards", "domain.cards"], &[1.0, 2.0, 4.0, 8.0], 1, MAX_CARDS_PER_NODE),
        one_of(&vocab.models),
        maybe(0.3, bytes(vocab, &["node.gpu_mem", "card.mem"], &[40.0 * GIB, 80.0 * GIB])),
        maybe(0.2, count(vocab, &["node.cpu", "node.cpu_free"], &[16.0, 64.0], 1, 4096)),
        maybe(0.2, bytes(vocab, &["node.mem", "node.mem_free"], &[256.0 * GIB, 512.0 * GIB])),
        sharing,
        vec(maybe(0.85, select(vec!["d1", "d1", "d2"])), vocab.levels.len()),
        vec(label(vocab), vocab.node_label_keys.len()),
    )
        .prop_map(|(cards, model, card_mem, cpu, mem, sharing, domains, labels)| NodeDraw {
            cards,
            model,
            card_mem,
            cpu,
            mem,
            sharing,
            domains,
            labels,
        })
        .boxed()
}

/// MIG layouts a node takes (each card the same).
const LAYOUTS: usize = 4;

fn mig_layout(i: usize) -> Vec<u8> {
    let p = |name: &str| EnumKind::MigProfile.variant(name).unwrap_or(0);
    match i {
        0 => vec![p("3g.40gb"), p("3g.40gb")],
        1 => vec![p("1g.10gb"); 7],
        2 => vec![p("7g.80gb")],
        _ => vec![p("2g.20gb"), p("2g.20gb"), p("2g.20gb"), p("1g.10gb")],
    }
}

impl NodeDraw {
    fn spec(&self, name: String, vocab: &Vocab) -> NodeSpec {
        let mut n = NodeSpec::named(name);
        n.cards = self.cards;
        if let Some(m) = &self.model {
            n.model = m.clone();
        }
        n.card_mem = self.card_mem.unwrap_or(n.card_mem);
        n.cpu_milli = self.cpu.map_or(n.cpu_milli, |c| u64::from(c) * 1000);
        n.mem = self.mem.unwrap_or(n.mem);
        if let Some((sharing, clients, layout)) = self.sharing {
            n.sharing = sharing;
            match sharing {
                Sharing::Mig => n.mig = vec![mig_layout(layout)],
                _ => n.max_clients = clients,
            }
        }
        n.domains =
            self.domains.iter().enumerate().filter_map(|(l, d)| Some((l as u8, d.as_ref()?.to_string()))).collect();
        n.labels =
            vocab.node_label_keys.iter().zip(&self.labels).filter_map(|(k, v)| Some((k.clone(), v.clone()?))).collect();
        n
    }
}

/// A job's properties, before it is named.
#[derive(Clone, Debug)]
struct JobDraw {
    queue: Option<String>,
    class: Option<String>,
    priority: Option<f64>,
    request: Request,
    /// Replicas, and the fewest it may start with (as an index into them).
    gang: Option<(u32, Option<Index>)>,
    gpu_mem: Option<u64>,
    cpu: Option<u32>,
    mem: Option<u64>,
    model: Option<String>,
    /// Bursty, latency-critical, preemptible.
    flags: (bool, bool, bool),
    duration: Option<f64>,
    utilization: Option<f64>,
    labels: Vec<Option<String>>,
    user: Option<String>,
}

fn request(vocab: &Vocab) -> BoxedStrategy<Request> {
    let whole = count(
        vocab,
        &["job.whole_cards", "job.total_gpus", "node.free_cards", "domain.max_free_cards"],
        &[1.0, 2.0, 4.0, 8.0],
        1,
        MAX_CARDS_PER_NODE,
    );
    let fraction = pick(vocab, &["job.gpu_fraction", "card.free", "node.largest_free_fraction"], &[0.25, 0.5]);
    // Of a hundred requests: 7 for nothing, 20 for a share when either policy shares
    // cards, 15 for a MIG instance when either uses MIG (35 without sharing), whole cards
    // the rest. Whole cards first: shrinking goes there.
    let (shares, migs) = match (vocab.sharing, vocab.mig) {
        (true, true) => (20, 15),
        (true, false) => (20, 0),
        (false, true) => (0, 35),
        _ => (0, 0),
    };
    let mut kinds = vec![0u8; 93 - shares - migs];
    kinds.extend([1u8; 7]);
    kinds.extend(std::iter::repeat_n(2u8, shares));
    kinds.extend(std::iter::repeat_n(3u8, migs));
    (select(kinds), whole, fraction, 0..MIG_PROFILES.len() as u8)
        .prop_map(|(kind, whole, fraction, mig)| match kind {
            0 => Request::Whole(whole),
            1 => Request::None,
            2 => Request::Fraction(((fraction * 1000.0).round() as u32).clamp(1, 999)),
            _ => Request::Mig(mig),
        })
        .boxed()
}

fn job(vocab: &Vocab) -> BoxedStrategy<JobDraw> {
    let gang = maybe(
        if vocab.gangs { 0.25 } else { 0.08 },
        (count(vocab, &["job.replicas"], &[2.0, 3.0, 4.0], 2, 16), maybe(0.3, any::<Index>())),
    );
    let users = vec!["alice".to_string(), "bob".to_string()];
    (
        (
            one_of(&vocab.leaves),
            maybe(0.3, select(vocab.classes.clone().max_one())),
            maybe(0.5, pick(vocab, &["job.priority"], &[0.0, 10.0, 100.0, 1000.0])),
        ),
        request(vocab),
        gang,
        (
            maybe(0.2, bytes(vocab, &["job.gpu_mem", "card.free_mem"], &[40.0 * GIB])),
            maybe(0.2, count(vocab, &["job.cpu"], &[8.0, 32.0], 1, 4096)),
            maybe(0.2, bytes(vocab, &["job.mem"], &[64.0 * GIB])),
            maybe(0.15, select(vocab.models.clone().max_one())),
        ),
        (chance(0.2), chance(0.2), chance(0.6)),
        (
            maybe(0.3, pick(vocab, &["job.expected_duration"], &[3600.0, 86_400.0])),
            maybe(0.15, pick(vocab, &["job.utilization"], &[0.5])),
        ),
        vec(label(vocab), vocab.job_label_keys.len()),
        maybe(0.2, select(users)),
    )
        .prop_map(
            |(
                (queue, class, priority),
                request,
                gang,
                (gpu_mem, cpu, mem, model),
                flags,
                (duration, utilization),
                labels,
                user,
            )| {
                JobDraw {
                    queue,
                    class: class.flatten(),
                    priority,
                    request,
                    gang,
                    gpu_mem,
                    cpu,
                    mem,
                    model: model.flatten(),
                    flags,
                    duration,
                    utilization,
                    labels,
                    user,
                }
            },
        )
        .boxed()
}

/// `select` needs at least one item: an empty list becomes one `None`.
trait MaxOne<T> {
    fn max_one(self) -> Vec<Option<T>>;
}

impl<T> MaxOne<T> for Vec<T> {
    fn max_one(self) -> Vec<Option<T>> {
        if self.is_empty() { vec![None] } else { self.into_iter().map(Some).collect() }
    }
}

impl JobDraw {
    fn spec(&self, name: String, vocab: &Vocab) -> JobSpec {
        let mut j = JobSpec::named(name);
        j.queue = self.queue.clone();
        j.priority_class = self.class.clone();
        j.priority = self.priority;
        j.request = self.request;
        if let Some((replicas, min)) = self.gang {
            j.replicas = replicas;
            j.min_replicas = min.map(|i| 1 + i.index(replicas as usize) as u32);
        }
        j.gpu_mem = self.gpu_mem.unwrap_or(j.gpu_mem);
        j.cpu_milli = self.cpu.map_or(j.cpu_milli, |c| u64::from(c) * 1000);
        j.mem = self.mem.unwrap_or(j.mem);
        j.models = self.model.iter().cloned().collect();
        (j.bursty, j.latency_critical, j.preemptible) = self.flags;
        j.duration_ms = self.duration.map(|d| (d.clamp(1.0, 1e8) * 1000.0) as u64);
        j.utilization = self.utilization.map_or(j.utilization, |u| u.clamp(0.0, 1.0));
        j.labels =
            vocab.job_label_keys.iter().zip(&self.labels).filter_map(|(k, v)| Some((k.clone(), v.clone()?))).collect();
        j.user = self.user.clone();
        j
    }
}

fn history(vocab: &Vocab) -> BoxedStrategy<History> {
    (
        pick(vocab, &["job.runtime"], &[0.0, 600.0, 3600.0, 36_000.0]),
        pick(vocab, &["job.since_checkpoint"], &[0.0, 600.0, 3600.0]),
        count(vocab, &["job.evictions"], &[0.0, 1.0], 0, 100),
    )
        .prop_map(|(ran, since, evictions)| {
            let ran = ran.clamp(0.0, 1e8);
            let since = since.clamp(0.0, ran);
            History { ran_ms: (ran * 1000.0) as u64, since_checkpoint_ms: (since * 1000.0) as u64, evictions }
        })
        .boxed()
}

/// A job running on a node: its properties, history, the node's free cards (exclusive
/// nodes), the share it takes of a shared card (the larger or the smaller), and whether
/// it ends before the last batch.
#[derive(Clone, Debug)]
struct RunDraw {
    job: JobDraw,
    history: History,
    free: u32,
    smaller_share: bool,
    ends: bool,
}

fn run(vocab: &Vocab) -> BoxedStrategy<RunDraw> {
    (
        job(vocab),
        history(vocab),
        count(vocab, &["node.free_cards"], &[0.0, 1.0], 0, MAX_CARDS_PER_NODE),
        any::<bool>(),
        chance(0.4),
    )
        .prop_map(|(job, history, free, smaller_share, ends)| RunDraw { job, history, free, smaller_share, ends })
        .boxed()
}

/// A node's occupants, when it is busy (three times in five): how many hold part of it
/// (an index into what it can take), and their draws (taken in turn when there are more).
type Busy = Option<(Index, Vec<RunDraw>)>;

/// Cases of `nodes` nodes of any kind, some partly busy, and `jobs` jobs submitted in
/// one batch (`one_batch`) or in up to three with time between them.
fn sized(
    vocab: &Vocab,
    nodes: std::ops::RangeInclusive<usize>,
    jobs: std::ops::RangeInclusive<usize>,
    one_batch: bool,
) -> BoxedStrategy<World> {
    let v = vocab.clone();
    let prefix = name_prefix(vocab);
    // Waits from the deciding values (or a palette when no rule compares `job.waiting`),
    // so that order by submission is seen too.
    let mut waits = vocab.values("job.waiting").to_vec();
    if waits.is_empty() {
        waits = vec![60.0, 3600.0];
    }
    let usage =
        vec(maybe(0.25, pick(vocab, &["queue.usage", "job.user_usage"], &[3600.0, 360_000.0])), vocab.leaves.len());
    let busy = maybe(0.6, (any::<Index>(), vec(run(vocab), 1..=3)));
    (
        vec((node(vocab), busy), nodes),
        usage,
        if one_batch { Just(false).boxed() } else { any::<bool>().boxed() },
        proptest::array::uniform2(select(waits)),
        vec((job(vocab), 0..3u8), jobs),
        starts(vocab),
    )
        .prop_map(move |(nodes, usage, batches, waits, jobs, start)| {
            let mut w = assemble(&v, &prefix, nodes, usage, batches, waits, jobs);
            w.start = start;
            w
        })
        .boxed()
}

fn assemble(
    vocab: &Vocab,
    prefix: &str,
    nodes: Vec<(NodeDraw, Busy)>,
    usage: Vec<Option<f64>>,
    batches: bool,
    waits: [f64; 2],
    jobs: Vec<(JobDraw, u8)>,
) -> World {
    let mut w = World::default();
    for (i, (n, _)) in nodes.iter().enumerate() {
        w.nodes.push(n.spec(format!("{prefix}n{}", i + 1), vocab));
    }
    for (i, (_, busy)) in nodes.iter().enumerate() {
        let node = w.nodes[i].clone();
        let Some((holders, draws)) = busy else { continue };
        if node.cards == 0 || draws.is_empty() {
            continue;
        }
        // Shared cards and MIG instances are held by several jobs: up to all of them.
        let most = match node.sharing {
            Sharing::Exclusive => 1,
            Sharing::Mig => (0..node.cards as usize).map(|c| node.mig_layout(c).len()).sum::<usize>().max(1),
            _ => (node.max_clients * node.cards) as usize,
        };
        for k in 0..(1 + holders.index(most)).min(16) {
            let d = &draws[k % draws.len()];
            let name = format!("{prefix}r{}", w.running.len() + 1);
            if let Some(job) = running_job(d, name, &node, k, vocab) {
                w.running.push(Running { job, nodes: vec![i], history: d.history, ends: batches && d.ends });
            }
        }
    }
    w.usage = vocab.leaves.iter().zip(usage).filter_map(|(q, u)| Some((q.clone(), u?.max(0.0).round()))).collect();
    if batches {
        w.waits = waits.map(|x| x.clamp(0.0, 1e7) as u64);
    }
    for (i, (d, batch)) in jobs.iter().enumerate() {
        let job = d.spec(format!("{prefix}j{}", i + 1), vocab);
        w.pending.push(Pending { job, batch: if batches { *batch } else { 0 } });
    }
    w
}

/// A job running on `node`, the `k`-th to hold part of it.
fn running_job(d: &RunDraw, name: String, node: &NodeSpec, k: usize, vocab: &Vocab) -> Option<JobSpec> {
    let mut job = d.job.spec(name, vocab);
    (job.replicas, job.min_replicas, job.gpu_mem) = (1, None, 0);
    job.models.clear();
    job.cpu_milli = job.cpu_milli.min(node.cpu_milli);
    job.mem = job.mem.min(node.mem);
    job.request = match node.sharing {
        Sharing::Exclusive => Request::Whole(node.cards.saturating_sub(d.free).max(1)),
        // The k-th instance of the layout (each card has the layout), or a share of a
        // card small enough for every client the card takes.
        Sharing::Mig => Request::Mig(*node.mig_layout(0).get(k % node.mig_layout(0).len().max(1))?),
        _ => {
            let share = (1000 / node.max_clients.max(1)).clamp(1, 500);
            Request::Fraction(if d.smaller_share { share.min(250) } else { share })
        }
    };
    Some(job)
}

/// The time of week a case starts at: Monday 00:00, or where quota windows or rules
/// reading the time of day may decide differently. Nothing is drawn where the time of
/// week decides nothing, so those policies' cases stay what they were.
fn starts(vocab: &Vocab) -> BoxedStrategy<u64> {
    match vocab.week_points.is_empty() {
        true => Just(0).boxed(),
        false => select(std::iter::once(0).chain(vocab.week_points.iter().copied()).collect::<Vec<_>>()).boxed(),
    }
}

/// Cases sized to the quota tree: each leaf queue running at one of its deciding
/// allocations (or nothing), on nodes of 8 cards with a little room to spare, and jobs
/// asking for what would take a queue across a cut.
fn quota(vocab: &Vocab) -> BoxedStrategy<World> {
    let v = vocab.clone();
    let prefix = name_prefix(vocab);
    let targets: Vec<BoxedStrategy<u32>> = vocab
        .leaves
        .iter()
        .map(|leaf| {
            let points = vocab.quota_points.get(leaf).cloned().unwrap_or_default();
            match points.is_empty() {
                true => Just(0).boxed(),
                false => maybe(0.75, select(points)).prop_map(|t| t.unwrap_or(0)).boxed(),
            }
        })
        .collect();
    let waiting = vec((job(vocab), any::<Index>(), any::<Index>(), chance(0.6)), 1..=3);
    (
        targets,
        select(vec![0u32, 1, 2, 4, 8]),
        vec(one_of(&vocab.models), 1..=4),
        vec((job(vocab), history(vocab)), 1..=4),
        waiting,
        starts(vocab),
    )
        .prop_map(move |(targets, extra, models, runs, waiting, start)| {
            let mut w = World { start, ..World::default() };
            let used: u32 = targets.iter().sum();
            let nodes = (used + extra).div_ceil(8).clamp(1, 64) as usize;
            for i in 0..nodes {
                let mut n = NodeSpec::named(format!("{prefix}n{}", i + 1));
                n.cards = 8;
                n.model = models[i % models.len()].clone().unwrap_or_else(|| "gpu".into());
                w.nodes.push(n);
            }
            let mut free: Vec<u32> = vec![8; nodes];
            for (leaf, t) in v.leaves.iter().zip(&targets) {
                let mut left = *t;
                for (i, f) in free.iter_mut().enumerate() {
                    let take = left.min(*f);
                    if take == 0 {
                        continue;
                    }
                    (*f, left) = (*f - take, left - take);
                    let (d, history) = &runs[w.running.len() % runs.len()];
                    let mut job = d.spec(format!("{prefix}r{}", w.running.len() + 1), &v);
                    job.queue = Some(leaf.clone());
                    job.request = Request::Whole(take);
                    (job.replicas, job.min_replicas, job.models, job.gpu_mem) = (1, None, Vec::new(), 0);
                    (job.cpu_milli, job.mem) = (0, 0);
                    w.running.push(Running { job, nodes: vec![i], history: *history, ends: false });
                }
            }
            for (i, (d, leaf, crossing, cross)) in waiting.iter().enumerate() {
                let mut job = d.spec(format!("{prefix}j{}", i + 1), &v);
                if !v.leaves.is_empty() {
                    let at = leaf.index(v.leaves.len());
                    let (leaf, t) = (&v.leaves[at], targets[at]);
                    let points = v.quota_points.get(leaf).cloned().unwrap_or_default();
                    let over: Vec<u32> = points.iter().filter(|&&p| p > t && p - t <= 8).map(|p| p - t).collect();
                    if *cross && !over.is_empty() {
                        job.request = Request::Whole(over[crossing.index(over.len())]);
                        (job.replicas, job.min_replicas) = (1, None);
                    }
                    job.queue = Some(leaf.clone());
                }
                w.pending.push(Pending { job, batch: 0 });
            }
            w
        })
        .boxed()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocab {
        Vocab {
            leaves: vec!["a".into(), "b".into()],
            models: vec!["h100".into()],
            levels: vec!["rack".into()],
            gangs: true,
            sharing: true,
            quota_points: [("a".to_string(), vec![0, 4, 8]), ("b".to_string(), vec![2])].into(),
            ..Vocab::default()
        }
    }

    #[test]
    fn a_seed_draws_the_same_cases() {
        let v = vocab();
        let draw = |seed| {
            let mut c = Cases::new(&v, seed);
            (0..40).map(|_| c.next_world().expect("a case")).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn cases_are_valid_and_varied() {
        let v = vocab();
        let mut c = Cases::new(&v, 1);
        let worlds: Vec<World> = (0..300).map(|_| c.next_world().expect("a case")).collect();
        for w in &worlds {
            assert!(!w.nodes.is_empty() && !w.pending.is_empty());
            assert!(w.running.iter().all(|r| r.nodes.iter().all(|&i| i < w.nodes.len())));
            assert!(w.pending.iter().all(|p| p.job.queue.as_deref().is_none_or(|q| v.leaves.iter().any(|l| l == q))));
        }
        assert!(worlds.iter().any(|w| w.nodes.len() >= 8), "wide cases");
        assert!(worlds.iter().any(|w| w.pending.iter().any(|p| p.job.replicas > 1)), "gangs");
        assert!(
            worlds.iter().any(|w| w.pending.iter().any(|p| matches!(p.job.request, Request::Fraction(_)))),
            "shares"
        );
        assert!(worlds.iter().any(|w| w.pending.iter().any(|p| p.batch > 0)), "batches");
    }

    #[test]
    fn shrinking_keeps_what_is_asked_and_drops_the_rest() {
        let v = vocab();
        let mut c = Cases::new(&v, 3);
        // The first case with a gang waiting among other jobs, shrunk while a gang waits.
        let mut tree = loop {
            let t = c.next_tree().expect("a case");
            let w = t.current();
            if w.pending.len() > 1 && w.pending.iter().any(|p| p.job.replicas > 1) {
                break t;
            }
        };
        let small = shrink(tree.as_mut(), &mut |w| w.pending.iter().any(|p| p.job.replicas > 1), 2000);
        assert!(small.pending.iter().any(|p| p.job.replicas > 1));
        assert_eq!(small.pending.len(), 1, "{small:?}");
        assert!(small.nodes.len() <= 1, "{small:?}");
    }
}
