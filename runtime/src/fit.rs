//! Exact fit (decision D2): whether a replica fits on a node, which card(s) it takes,
//! and binding and releasing it. Free shares on different cards never add up.

use crate::jobs::{Job, Slot};

use crate::model::{Card, CardsFree, Cluster, Headroom, Instance, Node, NodeId, mig_memory_bytes};
use gpol_compiler::spec::MILLI;
use gpol_compiler::spec::Request;

/// How many times `need` fits in `amount`: unlimited when nothing is needed.
fn per(amount: u64, need: u64) -> u64 {
    amount.checked_div(need).unwrap_or(u64::MAX)
}

/// Whether the node's CPU and host memory take one replica.
fn host_fits(node: &Node, job: &Ask) -> bool {
    node.up && node.free_cpu_milli >= job.cpu_milli && node.free_mem >= job.mem
}

/// Whether a card can take a whole-card replica.
fn takes_whole(card: &Card, job: &Ask) -> bool {
    card.whole_free() && card.mem >= job.gpu_mem
}

/// Whether a card can take a replica's share `milli` of it.
fn takes_fraction(node: &Node, card: &Card, milli: u32, job: &Ask) -> bool {
    card.instances.is_empty()
        && card.clients < node.max_clients
        && card.free_milli >= milli
        && card.free_mem >= job.gpu_mem
}

/// Whether a MIG instance can take a replica asking for `profile`.
fn takes_instance(inst: &Instance, profile: u8, job: &Ask) -> bool {
    !inst.used && inst.profile == profile && mig_memory_bytes(profile) >= job.gpu_mem
}

/// What exact fit reads of one replica's request: jobs, and the workload's task shapes
/// the fragmentation measure asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ask {
    pub request: Request,
    pub gpu_mem: u64,
    pub cpu_milli: u64,
    pub mem: u64,
}

impl Ask {
    pub fn of(job: &Job) -> Ask {
        Ask { request: job.ask.request, gpu_mem: job.ask.gpu_mem, cpu_milli: job.ask.cpu_milli, mem: job.ask.mem }
    }

    /// What one replica of a job as submitted asks for.
    pub fn of_spec(job: &gpol_compiler::spec::JobSpec) -> Ask {
        Ask { request: job.request, gpu_mem: job.gpu_mem, cpu_milli: job.cpu_milli, mem: job.mem }
    }
}

/// The cards (and MIG instances) one replica could use on this node. For a whole-card
/// request these are the wholly free cards with enough memory (it needs `k` of them).
pub fn candidates(node: &Node, job: &Job) -> Vec<(usize, Option<usize>)> {
    let job = &Ask::of(job);
    if !host_fits(node, job) {
        return Vec::new();
    }
    let cards = node.cards.iter().enumerate();
    match job.request {
        Request::None => vec![],
        Request::Whole(_) => cards.filter(|(_, c)| takes_whole(c, job)).map(|(i, _)| (i, None)).collect(),
        Request::Fraction(m) => {
            cards.filter(|(_, c)| takes_fraction(node, c, m, job)).map(|(i, _)| (i, None)).collect()
        }
        Request::Mig(p) => cards
            .flat_map(|(ci, c)| {
                c.instances
                    .iter()
                    .enumerate()
                    .filter(move |(_, i)| takes_instance(i, p, job))
                    .map(move |(ii, _)| (ci, Some(ii)))
            })
            .collect(),
    }
}

/// The cards (each once) that could take one replica of `ask`, or of a whole-card ask
/// one of its cards; nothing when the host cannot. Allocation-free.
pub(crate) fn usable_cards<'n>(node: &'n Node, ask: &'n Ask) -> impl Iterator<Item = usize> + 'n {
    let host = host_fits(node, ask);
    node.cards.iter().enumerate().filter_map(move |(i, c)| {
        let takes = host
            && match ask.request {
                Request::None => false,
                Request::Whole(_) => takes_whole(c, ask),
                Request::Fraction(m) => takes_fraction(node, c, m, ask),
                Request::Mig(p) => c.instances.iter().any(|inst| takes_instance(inst, p, ask)),
            };
        takes.then_some(i)
    })
}

/// How many replicas of the job the node could hold if it were empty.
pub fn capacity_when_empty(node: &Node, job: &Job) -> u32 {
    let host = per(node.cpu_milli, job.ask.cpu_milli).min(per(node.mem, job.ask.mem));
    let unpartitioned = || node.cards.iter().filter(|c| c.instances.is_empty() && c.mem >= job.ask.gpu_mem);
    let gpu = match job.ask.request {
        Request::None => u64::MAX,
        Request::Whole(k) => unpartitioned().count() as u64 / u64::from(k.max(1)),
        Request::Fraction(m) => unpartitioned()
            .map(|c| {
                per(u64::from(MILLI), u64::from(m)).min(u64::from(node.max_clients)).min(per(c.mem, job.ask.gpu_mem))
            })
            .sum(),
        Request::Mig(p) => node
            .cards
            .iter()
            .map(|c| {
                c.instances.iter().filter(|i| i.profile == p && mig_memory_bytes(p) >= job.ask.gpu_mem).count() as u64
            })
            .sum(),
    };
    u32::try_from(host.min(gpu)).unwrap_or(u32::MAX)
}

/// Whether one replica would fit on the node if the node were empty.
pub(crate) fn could_ever_fit(node: &Node, job: &Job) -> bool {
    let card_ok = |c: &crate::model::Card| c.mem >= job.ask.gpu_mem;
    node.cpu_milli >= job.ask.cpu_milli
        && node.mem >= job.ask.mem
        && match job.ask.request {
            Request::None => true,
            Request::Whole(k) => {
                node.cards.iter().filter(|c| c.instances.is_empty() && card_ok(c)).count() >= k as usize
            }
            Request::Fraction(_) => node.cards.iter().any(|c| c.instances.is_empty() && card_ok(c)),
            Request::Mig(p) => node
                .cards
                .iter()
                .any(|c| c.instances.iter().any(|i| i.profile == p) && mig_memory_bytes(p) >= job.ask.gpu_mem),
        }
}

/// Whether the node's summary of its free cards leaves room for one replica: a quick
/// necessary condition (card memory is not in the summary), so most nodes that cannot
/// take a request are turned away before their cards are walked.
fn summary_allows(free: &CardsFree, request: Request) -> bool {
    match request {
        Request::None => true,
        Request::Whole(k) => free.cards >= k,
        Request::Fraction(m) => free.largest_milli >= m,
        Request::Mig(p) => free.mig & 1u64.checked_shl(u32::from(p)).unwrap_or(0) != 0,
    }
}

/// Whether a node with this headroom might take one replica: true for every node that
/// [`fits`], and exactly those unless [`headroom_decides`] says the cards must be walked.
pub fn may_fit(room: &Headroom, job: &Ask) -> bool {
    room.up
        && room.cpu_milli >= job.cpu_milli
        && room.mem >= job.mem
        && summary_allows(&room.cards, job.request)
        && match job.request {
            Request::Whole(_) => room.card_mem >= job.gpu_mem,
            Request::Mig(p) => mig_memory_bytes(p) >= job.gpu_mem,
            Request::Fraction(_) | Request::None => true,
        }
}

/// Whether [`may_fit`] is exact for this request: all but a fraction that also asks for
/// card memory (the card with the largest free share need not have the memory free).
pub fn headroom_decides(job: &Ask) -> bool {
    !matches!(job.request, Request::Fraction(_)) || job.gpu_mem == 0
}

/// Whether one replica fits on the node. Allocation-free: it runs for every feasible
/// node of every decision.
pub fn fits(node: &Node, job: &Job) -> bool {
    let job = &Ask::of(job);
    if !host_fits(node, job) {
        return false;
    }
    if !summary_allows(&node.free, job.request) {
        return false;
    }
    match job.request {
        Request::None => true,
        Request::Whole(k) => node.cards.iter().filter(|c| takes_whole(c, job)).take(k as usize).count() == k as usize,
        Request::Fraction(m) => node.cards.iter().any(|c| takes_fraction(node, c, m, job)),
        Request::Mig(p) => node.cards.iter().any(|c| c.instances.iter().any(|i| takes_instance(i, p, job))),
    }
}

/// How many replicas of the job the node can hold at once (0 when it is out of service).
pub(crate) fn capacity(node: &Node, job: &Job) -> u32 {
    let job = &Ask::of(job);
    if !node.up {
        return 0;
    }
    let host = per(node.free_cpu_milli, job.cpu_milli).min(per(node.free_mem, job.mem));
    if host == 0 || !summary_allows(&node.free, job.request) {
        return 0;
    }
    let gpu = match job.request {
        Request::None => u64::MAX,
        Request::Whole(k) => node.cards.iter().filter(|c| takes_whole(c, job)).count() as u64 / u64::from(k.max(1)),
        Request::Fraction(m) => node
            .cards
            .iter()
            .filter(|c| c.instances.is_empty() && c.clients < node.max_clients)
            .map(|c| {
                per(u64::from(c.free_milli), u64::from(m))
                    .min(u64::from(node.max_clients - c.clients))
                    .min(per(c.free_mem, job.gpu_mem))
            })
            .sum(),
        Request::Mig(p) => {
            node.cards.iter().map(|c| c.instances.iter().filter(|i| takes_instance(i, p, job)).count() as u64).sum()
        }
    };
    u32::try_from(host.min(gpu)).unwrap_or(u32::MAX)
}

/// The card(s) one replica takes: ranked by `score` (the policy's `card_score` rules,
/// highest first) when given, else by built-in best fit (the card left with the least
/// free share); ties go to the lower card index. `None` if it does not fit.
pub fn choose(node: &Node, job: &Job, score: Option<&dyn Fn(usize) -> f64>) -> Option<Vec<(usize, Option<usize>)>> {
    if !fits(node, job) {
        return None;
    }
    let mut cands = candidates(node, job);
    let need = match job.ask.request {
        Request::Whole(k) => k as usize,
        Request::None => 0,
        _ => 1,
    };
    match score {
        Some(f) => {
            let mut scored: Vec<(f64, (usize, Option<usize>))> = cands.into_iter().map(|c| (f(c.0), c)).collect();
            // Highest score first; NaN never wins (scores are already clamped).
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            cands = scored.into_iter().map(|(_, c)| c).collect();
        }
        None => {
            let left = |(ci, ii): &(usize, Option<usize>)| -> u64 {
                let c = &node.cards[*ci];
                match ii {
                    Some(_) => c.instances.iter().filter(|i| !i.used).count() as u64,
                    None => u64::from(c.free_milli),
                }
            };
            cands.sort_by_key(|c| (left(c), *c));
        }
    }
    cands.truncate(need);
    Some(cands)
}

/// Whether `chosen` is a valid choice of cards for one replica on the node: as many as it
/// needs, distinct, each one it could use now.
pub(crate) fn valid_choice(node: &Node, job: &Job, chosen: &[(usize, Option<usize>)]) -> bool {
    let need = match job.ask.request {
        Request::Whole(k) => k as usize,
        Request::None => 0,
        _ => 1,
    };
    let cands = candidates(node, job);
    let mut seen = chosen.to_vec();
    seen.sort_unstable();
    seen.dedup();
    fits(node, job) && chosen.len() == need && seen.len() == need && chosen.iter().all(|c| cands.contains(c))
}

/// The slot one replica takes on the chosen cards.
pub(crate) fn slot(node: NodeId, job: &Job, chosen: &[(usize, Option<usize>)]) -> Slot {
    let mut slot = Slot { node, cards: Vec::new(), instance: None };
    for &(ci, ii) in chosen {
        match (job.ask.request, ii) {
            (_, Some(ii)) => slot.instance = Some((ci, ii)),
            (Request::Whole(_), None) => slot.cards.push((ci, MILLI)),
            (Request::Fraction(m), None) => slot.cards.push((ci, m)),
            _ => {}
        }
    }
    slot
}

/// Binds one replica to the chosen cards, updating the node and its domains.
pub fn bind(cluster: &mut Cluster, node: NodeId, job: &Job, chosen: &[(usize, Option<usize>)]) -> Slot {
    let slot = slot(node, job, chosen);
    apply(cluster, job, &slot, true);
    slot
}

/// Takes (`take`) or gives back what a slot holds: exact inverses, so giving a slot back
/// and binding it again restores the node bit for bit.
pub(crate) fn apply(cluster: &mut Cluster, job: &Job, slot: &Slot, take: bool) {
    cluster.add_to_domains(slot.node, -1);
    let n = &mut cluster.nodes[slot.node];
    let whole = match job.ask.request {
        Request::Whole(k) => Some(k),
        _ => None,
    };
    if take {
        n.free_cpu_milli -= job.ask.cpu_milli;
        n.free_mem -= job.ask.mem;
    } else {
        n.free_cpu_milli += job.ask.cpu_milli;
        n.free_mem += job.ask.mem;
    }
    for &(ci, milli) in &slot.cards {
        let card = &mut n.cards[ci];
        if take {
            card.free_milli -= milli;
            card.clients += 1;
            card.holder_cards = whole.unwrap_or(0);
            card.free_mem = if whole.is_some() { 0 } else { card.free_mem - job.ask.gpu_mem };
        } else {
            card.free_milli += milli;
            card.clients -= 1;
            card.holder_cards = 0;
            card.free_mem = if whole.is_some() { card.mem } else { card.free_mem + job.ask.gpu_mem };
        }
    }
    if let Some((ci, ii)) = slot.instance {
        n.cards[ci].instances[ii].used = take;
    }
    cluster.refresh(slot.node);
    cluster.add_to_domains(slot.node, 1);
}
