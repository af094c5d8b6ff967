//! Deterministic synthetic records for benchmarks and `gpolc bench`: a cluster of N
//! nodes with a spread of GPU models, sharing modes, free capacity and topology, and a
//! job to place on it. Not a workload model — the simulator has that.

use crate::eval::Ctx;
use crate::ir::Program;
use crate::ops::hash01;
use crate::schema::{
    CardRec, ClusterRec, DomainRec, EnumKind, JobRec, List, MigCounts, NodeRec, QueueRec, Resources, ShapeRec, Sym,
};
use std::sync::LazyLock;

/// The workload's popular shapes (`cluster.task_shapes`), in the proportions GPU traces
/// show: mostly single cards and shares of one, some multi-card jobs. Policies that
/// weigh fragmentation (FGD) loop over these.
static TASK_SHAPES: LazyLock<Vec<ShapeRec>> = LazyLock::new(|| {
    let gib = 1024.0 * 1024.0 * 1024.0;
    let shape = |whole_cards: f64, gpu_fraction: f64, cpu: f64, weight: f64| ShapeRec {
        whole_cards,
        gpu_fraction,
        cpu,
        mem: cpu * 8.0 * gib,
        weight,
        ..ShapeRec::default()
    };
    vec![
        shape(1.0, 0.0, 8.0, 0.40),
        shape(0.0, 0.5, 4.0, 0.20),
        shape(0.0, 0.25, 2.0, 0.10),
        shape(2.0, 0.0, 16.0, 0.12),
        shape(4.0, 0.0, 32.0, 0.08),
        shape(8.0, 0.0, 64.0, 0.06),
        shape(0.0, 0.0, 4.0, 0.04),
    ]
});

/// Cards per synthetic node.
pub(crate) const CARDS: usize = 8;

/// A synthetic cluster: node records (whose card lists borrow `cards`), queues,
/// domains, and the symbol tables a runtime would provide.
pub struct Cluster {
    cards: Vec<CardRec>,
    nodes: Vec<NodeRec<'static>>,
    pub queues: Vec<QueueRec>,
    pub domains: Vec<DomainRec>,
    pub literals: Vec<Sym>,
    pub hashes: Vec<u64>,
    pub record: ClusterRec<'static>,
}

impl Cluster {
    /// `n` nodes, reproducible for a given `seed`.
    pub fn generate(n: usize, program: &Program, seed: u64) -> Cluster {
        let r = |i: usize, k: u64| hash01(seed ^ k, i as u64);
        let sharing = |name| EnumKind::Sharing.variant(name).unwrap_or(0);
        let mut cards = Vec::with_capacity(n * CARDS);
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let mode = match (r(i, 1) * 10.0) as u32 {
                0 => sharing("mig"),
                1 => sharing("timeslice"),
                2 => sharing("mps"),
                _ => sharing("exclusive"),
            };
            let mut free_cards = 0.0;
            let mut free_gpu = 0.0;
            let mut largest: f64 = 0.0;
            for c in 0..CARDS {
                let free = if r(i * CARDS + c, 2) < 0.5 { 1.0 } else { (r(i * CARDS + c, 3) * 4.0).floor() / 4.0 };
                if free == 1.0 {
                    free_cards += 1.0;
                }
                free_gpu += free;
                largest = largest.max(free);
                cards.push(CardRec {
                    index: c as f64,
                    mem: 80.0 * 1024.0 * 1024.0 * 1024.0,
                    free_mem: free * 80.0 * 1024.0 * 1024.0 * 1024.0,
                    free,
                    clients: ((1.0 - free) * 4.0).round(),
                    max_clients: 4.0,
                    ..CardRec::default()
                });
            }
            let mut domains = [0u32; crate::schema::MAX_LEVELS];
            domains[0] = (i / 2) as u32;
            domains[1] = (i / 16) as u32;
            domains[2] = (i / 128) as u32;
            nodes.push(NodeRec {
                cards: CARDS as f64,
                free_cards,
                free_gpu,
                largest_free_fraction: largest,
                free_mig: {
                    let mut m = MigCounts::default();
                    m.0[0] = (r(i, 4) * 7.0).floor();
                    m.0[3] = 1.0;
                    m
                },
                gpu_mem: 80.0 * 1024.0 * 1024.0 * 1024.0,
                sharing: mode,
                max_clients: 4.0,
                cpu: 128.0,
                cpu_free: (r(i, 5) * 128.0).floor(),
                mem: 2048.0 * 1024.0 * 1024.0 * 1024.0,
                mem_free: r(i, 6) * 2048.0 * 1024.0 * 1024.0 * 1024.0,
                domains,
                ..NodeRec::default()
            });
        }
        let domains = (0..n.div_ceil(2).max(1))
            .map(|d| DomainRec {
                nodes: 2.0,
                cards: 16.0,
                free_cards: (r(d, 7) * 16.0).floor(),
                free_gpu: 8.0,
                max_free_cards: 8.0,
                ..DomainRec::default()
            })
            .collect();
        let queues = (0..program.attrs.len().max(1))
            .map(|q| QueueRec { weight: 1.0, dominant_share: r(q, 8), ..QueueRec::default() })
            .collect();
        let total = Resources { gpu: (n * CARDS) as f64, cpu: 128.0 * n as f64, mem: 2048.0 * n as f64 };
        Cluster {
            cards,
            nodes,
            queues,
            domains,
            literals: (1..=program.literals.len() as u32).map(Sym).collect(),
            hashes: (0..=program.literals.len() as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect(),
            record: ClusterRec {
                time: 3600.0,
                time_of_day: 3600.0,
                weekday: 1.0,
                nodes: n as f64,
                total,
                free: total,
                task_shapes: List::new(TASK_SHAPES.as_slice()),
            },
        }
    }

    /// The node records, each with its cards.
    pub fn nodes(&self) -> Vec<NodeRec<'_>> {
        self.nodes
            .iter()
            .zip(self.cards.chunks(CARDS))
            .map(|(n, cards)| NodeRec { cards_list: List::new(cards), ..*n })
            .collect()
    }

    pub fn ctx<'a>(&'a self, program: &'a Program) -> Ctx<'a> {
        Ctx {
            cluster: &self.record,
            queues: &self.queues,
            domains: &self.domains,
            literals: &self.literals,
            sym_hashes: &self.hashes,
            attrs: &program.attrs,
        }
    }

    /// A typical job: two whole cards, 40 GiB of GPU memory, waiting half an hour.
    pub fn job() -> JobRec<'static> {
        JobRec {
            priority: 100.0,
            whole_cards: 2.0,
            replicas: 1.0,
            min_replicas: 1.0,
            total_gpus: 2.0,
            gpu_mem: 40.0 * 1024.0 * 1024.0 * 1024.0,
            cpu: 8.0,
            mem: 64.0 * 1024.0 * 1024.0 * 1024.0,
            preemptible: true,
            waiting: 1800.0,
            utilization: 1.0,
            ..JobRec::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `gpolc bench` measures what FGD-style policies do: loop over the workload's shapes.
    #[test]
    fn the_cluster_has_task_shapes_whose_weights_sum_to_one() {
        let cluster = Cluster::generate(4, &Program::default(), 7);
        let shapes = cluster.record.task_shapes.as_slice();
        assert!(shapes.len() >= 5);
        let total: f64 = shapes.iter().map(|s| s.weight).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
    }
}
