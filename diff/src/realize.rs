//! From a point where the decision regions of two versions differ (field values) to a
//! case that has them: a job and a node with those properties, the node's free cards
//! made by a job already running on it. Derived fields are inverted where one request
//! gives them (`job.total_gpus = 8.5`: 17 replicas of half a card). Values no job or node
//! can have are left out; the case is then played like any other.

use crate::regions::V;
use crate::vocab::Vocab;
use crate::world::{Pending, Running, World};
use gpol_compiler::limits::{MAX_CARDS_PER_NODE, MAX_REPLICAS};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use std::collections::BTreeMap;

/// A case with the point's values.
pub fn world(point: &BTreeMap<String, V>, vocab: &Vocab, prefix: &str) -> World {
    let num = |k: &str| match point.get(k) {
        Some(V::Num(x)) if x.is_finite() => Some(*x),
        _ => None,
    };
    let flag = |k: &str| matches!(point.get(k), Some(V::Bool(true)));
    let text = |k: &str| match point.get(k) {
        Some(V::Str(s)) if !s.is_empty() && !s.starts_with('\u{1}') => Some(s.clone()),
        _ => None,
    };
    let whole = |x: f64| (x.fract() == 0.0 && (0.0..=1e9).contains(&x)).then_some(x as u64);
    let mut job = JobSpec::named(format!("{prefix}j1"));
    job.queue = text("job.queue")
        .or_else(|| text("job.queue.name"))
        .filter(|q| vocab.leaves.contains(q))
        .or_else(|| vocab.leaves.first().cloned());
    job.priority = num("job.priority");
    job.request = request(num("job.whole_cards"), num("job.gpu_fraction"), num("job.total_gpus"), &mut job.replicas);
    if let Some(r) = num("job.replicas").and_then(whole).filter(|r| (1..=u64::from(MAX_REPLICAS)).contains(r)) {
        job.replicas = r as u32;
    }
    if let Some(m) = num("job.min_replicas").and_then(whole).filter(|m| *m >= 1 && *m <= u64::from(job.replicas)) {
        job.min_replicas = Some(m as u32);
    }
    if let Some(V::Enum(p)) = point.get("job.mig_profile") {
        job.request = Request::Mig(*p);
    }
    job.gpu_mem = num("job.gpu_mem").and_then(whole).unwrap_or(0);
    job.mem = num("job.mem").and_then(whole).unwrap_or(0);
    job.cpu_milli = num("job.cpu").filter(|c| *c >= 0.0 && *c <= 4096.0).map_or(0, |c| (c * 1000.0).round() as u64);
    (job.bursty, job.latency_critical, job.preemptible) =
        (flag("job.bursty"), flag("job.latency_critical"), flag("job.preemptible"));
    job.duration_ms = num("job.expected_duration").filter(|d| *d > 0.0 && *d < 1e9).map(|d| (d * 1000.0) as u64);
    if let Some(u) = num("job.utilization").filter(|u| (0.0..=1.0).contains(u)) {
        job.utilization = u;
    }
    job.user = text("job.user");
    for key in &vocab.job_label_keys {
        if let Some(v) = text(&format!("job.labels[{key:?}]")) {
            job.labels.push((key.clone(), v));
        }
    }

    let mut node = NodeSpec::named(format!("{prefix}n1"));
    node.cards =
        num("node.cards").and_then(whole).filter(|c| *c <= u64::from(MAX_CARDS_PER_NODE)).map_or(8, |c| c as u32);
    if let Some(m) = text("node.gpu_model") {
        node.model = m;
    }
    if let Some(b) = num("node.gpu_mem").and_then(whole) {
        node.card_mem = b;
    }
    if let Some(c) = num("node.cpu").filter(|c| *c >= 1.0 && *c <= 4096.0) {
        node.cpu_milli = (c * 1000.0).round() as u64;
    }
    if let Some(b) = num("node.mem").and_then(whole) {
        node.mem = b;
    }
    if let Some(V::Enum(s)) = point.get("node.sharing") {
        node.sharing = Sharing::from_enum(*s);
        match node.sharing {
            Sharing::Mig => node.mig = vec![vec![3, 3]],
            Sharing::Timeslice | Sharing::Mps => node.max_clients = 4,
            Sharing::Exclusive => {}
        }
    }
    if let Some(c) = num("node.max_clients").and_then(whole).filter(|c| (1..=64).contains(c)) {
        node.max_clients = c as u32;
    }
    for key in &vocab.node_label_keys {
        if let Some(v) = text(&format!("node.labels[{key:?}]")) {
            node.labels.push((key.clone(), v));
        }
    }
    let mut running = Vec::new();
    let free = num("node.free_cards").and_then(whole).map(|f| f as u32);
    if let Some(free) = free.filter(|f| *f < node.cards && node.sharing == Sharing::Exclusive) {
        let mut filler = JobSpec::named(format!("{prefix}r1"));
        (filler.queue, filler.request) = (job.queue.clone(), Request::Whole(node.cards - free));
        running.push(Running { job: filler, nodes: vec![0], history: History::default(), ends: false });
    }
    World {
        nodes: vec![node],
        running,
        usage: Vec::new(),
        pending: vec![Pending { job, batch: 0 }],
        waits: [0, 0],
        start: 0,
    }
}

/// The request that gives these per-replica and total GPUs (setting `replicas` when the
/// total needs several).
fn request(whole: Option<f64>, fraction: Option<f64>, total: Option<f64>, replicas: &mut u32) -> Request {
    if let Some(k) = whole.filter(|k| k.fract() == 0.0 && *k >= 1.0 && *k <= f64::from(MAX_CARDS_PER_NODE)) {
        return Request::Whole(k as u32);
    }
    if let Some(f) = fraction.filter(|f| *f > 0.0 && *f < 1.0) {
        return Request::Fraction(((f * 1000.0).round() as u32).clamp(1, 999));
    }
    let Some(t) = total.filter(|t| *t > 0.0 && *t <= 1e6) else { return Request::Whole(1) };
    let milli = (t * 1000.0).round() as u64;
    if (t * 1000.0 - milli as f64).abs() > 1e-6 {
        return Request::Whole(1);
    }
    // Fewest replicas first, whole cards before fractions.
    for r in 1..=u64::from(MAX_REPLICAS).min(64) {
        if !milli.is_multiple_of(r) {
            continue;
        }
        let per = milli / r;
        if per.is_multiple_of(1000) && per / 1000 <= u64::from(MAX_CARDS_PER_NODE) && per > 0 {
            *replicas = r as u32;
            return Request::Whole((per / 1000) as u32);
        }
        if per < 1000 && per > 0 {
            *replicas = r as u32;
            return Request::Fraction(per as u32);
        }
    }
    Request::Whole(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_become_requests() {
        let mut r = 1;
        assert_eq!(request(None, None, Some(8.5), &mut r), Request::Fraction(850));
        assert_eq!(r, 10);
        let mut r = 1;
        assert_eq!(request(None, None, Some(4.0), &mut r), Request::Whole(4));
        assert_eq!(r, 1);
        let mut r = 1;
        assert_eq!(request(None, None, Some(128.0), &mut r), Request::Whole(64));
        assert_eq!(r, 2);
    }
}
