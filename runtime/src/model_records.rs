//! The records rules read, built from the model: exact integers become `f64` in base
//! units (milli-GPU → cards, milliseconds → seconds, milli-cores → cores).

use crate::jobs::{Job, State, since};
use crate::quota::QueueId;

use crate::model::{Card, Domain, Node};
use crate::quota::{Amounts, Quotas, Res};
use gpol_compiler::schema::{CardRec, DomainRec, JobRec, List, NodeRec, Opt, QueueRec, Resources, Sym};
use gpol_compiler::spec::MILLI;
use gpol_compiler::spec::Request;

pub(crate) fn gpus(milli: u64) -> f64 {
    milli as f64 / f64::from(MILLI)
}

pub(crate) fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

pub(crate) fn card_rec(c: &Card, index: usize, node: &Node) -> CardRec {
    CardRec {
        index: index as f64,
        model: node.model,
        mem: c.mem as f64,
        free_mem: c.free_mem as f64,
        free: if c.instances.is_empty() { gpus(u64::from(c.free_milli)) } else { 0.0 },
        clients: f64::from(c.clients),
        holder_cards: f64::from(c.holder_cards),
        max_clients: f64::from(node.max_clients),
        free_mig: c.free_mig(),
    }
}

pub(crate) fn node_cards(node: &Node) -> Vec<CardRec> {
    node.cards.iter().enumerate().map(|(i, c)| card_rec(c, i, node)).collect()
}

/// A node's scalar fields (its card and label lists are kept by the `NodeTable`).
pub(crate) fn node_rec(n: &Node) -> NodeRec<'static> {
    let up = |x: f64| if n.up { x } else { 0.0 };
    NodeRec {
        name: n.name_sym,
        gpu_model: n.model,
        cards: n.cards.len() as f64,
        free_cards: up(f64::from(n.free_cards())),
        free_gpu: up(gpus(n.free_milli())),
        largest_free_fraction: up(gpus(u64::from(n.largest_free_milli()))),
        free_mig: if n.up { n.free_mig() } else { Default::default() },
        gpu_mem: n.cards.first().map_or(0.0, |c| c.mem as f64),
        sharing: n.sharing.as_enum(),
        max_clients: f64::from(n.max_clients),
        cpu: n.cpu_milli as f64 / 1000.0,
        cpu_free: up(n.free_cpu_milli as f64 / 1000.0),
        mem: n.mem as f64,
        mem_free: up(n.free_mem as f64),
        domains: n.domains,
        ..NodeRec::default()
    }
}

/// A node's label values in the policy's slot order.
pub(crate) fn label_slots(labels: &std::collections::HashMap<Sym, Sym>, keys: &[Sym]) -> Vec<Sym> {
    keys.iter().map(|k| labels.get(k).copied().unwrap_or(Sym(0))).collect()
}

pub(crate) fn domain_rec(d: &Domain) -> DomainRec {
    DomainRec {
        name: d.name,
        nodes: d.nodes.len() as f64,
        cards: f64::from(d.cards),
        free_cards: f64::from(d.free_cards),
        free_gpu: gpus(d.free_milli),
        max_free_cards: f64::from(d.max_free_cards()),
    }
}

/// A job's record; its lists borrow the job.
pub(crate) fn job_rec<'a>(j: &'a Job, labels: &'a [Sym], now_ms: u64) -> JobRec<'a> {
    let (whole, fraction, mig) = match j.ask.request {
        Request::Whole(k) => (f64::from(k), 0.0, None),
        Request::Fraction(m) => (0.0, gpus(u64::from(m)), None),
        Request::Mig(p) => (0.0, 0.0, Some(p)),
        Request::None => (0.0, 0.0, None),
    };
    let running = j.life.state == State::Running;
    let waiting_until = if running { j.life.started_ms } else { i64::try_from(now_ms).unwrap_or(i64::MAX) };
    JobRec {
        id: j.ask.id,
        name: j.ask.id,
        user: j.ask.user,
        queue: j.ask.queue as u32,
        priority: j.ask.priority,
        priority_class: j.ask.priority_class,
        whole_cards: whole,
        gpu_fraction: fraction,
        mig_profile: Opt { value: mig.unwrap_or(0), present: mig.is_some() },
        replicas: f64::from(j.ask.replicas),
        min_replicas: f64::from(j.ask.min_replicas),
        total_gpus: gpus(j.total_milli()),
        gpu_mem: j.ask.gpu_mem as f64,
        allowed_models: List::new(&j.ask.models),
        cpu: j.ask.cpu_milli as f64 / 1000.0,
        mem: j.ask.mem as f64,
        bursty: j.ask.flags.bursty,
        latency_critical: j.ask.flags.latency_critical,
        preemptible: j.ask.flags.preemptible,
        submitted: j.life.submitted_ms as f64 / 1000.0,
        waiting: seconds(u64::try_from(waiting_until.saturating_sub(j.life.waiting_since_ms)).unwrap_or(0)),
        runtime: if running { seconds(since(now_ms, j.life.started_ms)) } else { 0.0 },
        since_checkpoint: if running { seconds(since(now_ms, j.last_checkpoint_ms(now_ms))) } else { 0.0 },
        expected_duration: Opt { value: j.ask.duration_ms.map_or(0.0, seconds), present: j.ask.duration_ms.is_some() },
        utilization: j.ask.utilization,
        evictions: f64::from(j.life.evictions),
        // Filled in by the scheduler, which knows the user's usage.
        user_usage: 0.0,
        fair_tree: 0.0,
        labels: List::new(labels),
    }
}

fn resources(a: &Amounts, unset: f64) -> Resources {
    let get = |r: Res, scale: f64| a.get(&r).map_or(unset, |v| *v as f64 / scale);
    Resources { gpu: get(Res::Gpu, 1000.0), cpu: get(Res::Cpu, 1000.0), mem: get(Res::Mem, 1.0) }
}

/// What changes when `changes` (jobs admitted, +1, or evicted, -1) are counted: a
/// queue's `allocated`, `borrowed` and dominant share. Only the queues above a changed
/// leaf differ from their plain record.
pub(crate) fn apply_after(
    quotas: &Quotas,
    totals: &Amounts,
    q: QueueId,
    changes: &[(QueueId, &Amounts, i64)],
    rec: &mut QueueRec,
) {
    // Without building a map of the changes: this runs for every candidate of every
    // victim search whose rules read the `_after` fields.
    let node = &quotas.queues[q];
    let applies: Vec<bool> = changes.iter().map(|(leaf, _, _)| quotas.path(*leaf).any(|p| p == q)).collect();
    let after = |r: Res| {
        let mut a = node.get(&node.load.alloc, r);
        for ((_, amounts, sign), _) in changes.iter().zip(&applies).filter(|(_, on)| **on) {
            a += sign * amounts.get(&r).copied().unwrap_or(0);
        }
        a
    };
    let [gpu, cpu, mem] = [Res::Gpu, Res::Cpu, Res::Mem].map(after);
    let share = |a: i64, r: Res| {
        let t = totals.get(&r).copied().unwrap_or(0);
        if t > 0 { a as f64 / t as f64 } else { 0.0 }
    };
    rec.share_after = share(gpu, Res::Gpu).max(share(cpu, Res::Cpu)).max(share(mem, Res::Mem));
    // Built directly, not through maps: this is per candidate.
    let over = |a: i64, r: Res| (a - node.get(&node.quota.guarantee, r)).max(0);
    rec.allocated_after = Resources { gpu: gpu as f64 / 1000.0, cpu: cpu as f64 / 1000.0, mem: mem as f64 };
    rec.borrowed_after = Resources {
        gpu: over(gpu, Res::Gpu) as f64 / 1000.0,
        cpu: over(cpu, Res::Cpu) as f64 / 1000.0,
        mem: over(mem, Res::Mem) as f64,
    };
}

/// Every queue's record as of now (`_after` fields equal to the plain ones); `fair` is
/// each queue's `fair_share`, empty when no rule reads it.
pub(crate) fn queue_recs(quotas: &Quotas, totals: &Amounts, fair: &[f64]) -> Vec<QueueRec> {
    let mut recs: Vec<QueueRec> = (0..quotas.queues.len()).map(|i| queue_shape(quotas, i)).collect();
    refresh_queue_recs(quotas, totals, fair, &mut recs);
    recs
}

/// A queue's record with only what its written quotas and the tree decide filled in:
/// those change with [`Quotas::shape_version`], the rest with every start and end.
fn queue_shape(quotas: &Quotas, i: QueueId) -> QueueRec {
    let q = &quotas.queues[i];
    let lendable = |r: Res, scale: f64| quotas.lendable(i, r) as f64 / scale;
    QueueRec {
        name: q.place.name_sym,
        parent: Opt { value: q.place.parent.unwrap_or(0) as u32, present: q.place.parent.is_some() },
        depth: f64::from(q.place.depth),
        guarantee: resources(&q.quota.guarantee, 0.0),
        limit: resources(&q.quota.limit, f64::INFINITY),
        borrow_limit: resources(&q.quota.borrow_limit, f64::INFINITY),
        lend_limit: resources(&q.quota.lend_limit, f64::INFINITY),
        weight: q.place.weight,
        lendable: Resources {
            gpu: lendable(Res::Gpu, 1000.0),
            cpu: lendable(Res::Cpu, 1000.0),
            mem: lendable(Res::Mem, 1.0),
        },
        // Allocation, usage, shares and counts: `refresh_queue_recs`; the `head_*` fields
        // while queues are ranked (`Scheduler::next_job`).
        ..QueueRec::default()
    }
}

/// Brings the records' allocation, usage, shares and counts up to date (records of the
/// same quota shape: [`Quotas::shape_version`]); `fair` as in [`queue_recs`].
pub(crate) fn refresh_queue_recs(quotas: &Quotas, totals: &Amounts, fair: &[f64], recs: &mut [QueueRec]) {
    // Straight from the amounts, without building maps: this runs after every start.
    let res = [Res::Gpu, Res::Cpu, Res::Mem];
    let total = res.map(|r| totals.get(&r).copied().unwrap_or(0));
    for (i, (q, rec)) in quotas.queues.iter().zip(recs.iter_mut()).enumerate() {
        let alloc = res.map(|r| q.get(&q.load.alloc, r));
        let over = res.map(|r| q.get(&q.load.alloc, r) - q.get(&q.quota.guarantee, r)).map(|b| b.max(0));
        let amounts =
            |a: [i64; 3]| Resources { gpu: a[0] as f64 / 1000.0, cpu: a[1] as f64 / 1000.0, mem: a[2] as f64 };
        let dominant =
            alloc.iter().zip(total).map(|(&a, t)| if t > 0 { a as f64 / t as f64 } else { 0.0 }).fold(0.0, f64::max);
        rec.allocated = amounts(alloc);
        rec.borrowed = amounts(over);
        rec.usage = q.usage.value;
        rec.dominant_share = dominant;
        rec.fair_share = fair.get(i).copied().unwrap_or(0.0);
        rec.share_after = dominant;
        rec.allocated_after = rec.allocated;
        rec.borrowed_after = rec.borrowed;
        rec.pending = f64::from(q.load.pending);
        rec.running = f64::from(q.load.running);
    }
}
