//! The exhaustive small domain: one case holding every combination of a few values per
//! property — for nodes and for jobs, each property a rule reads taking its deciding
//! values (or a small palette), every other its default — so that every (job, node)
//! filter verdict, every pair of nodes for every job, every admission and every pair of
//! jobs of a queue over that domain is compared. When none differs, those decisions are
//! *equivalent up to bound*, the bound being the domain stated in the report.

use crate::vocab::Vocab;
use crate::world::{Pending, Running, World};
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};

/// Nodes and jobs a grid holds at most: beyond, there is no exhaustive grid.
pub const MAX_NODES: usize = 64;
pub const MAX_JOBS: usize = 384;
/// Values per property at most.
const PER_AXIS: usize = 4;

/// A grid case, and the domain it covers in words.
pub struct Grid {
    pub world: World,
    pub domain: String,
}

/// Up to `PER_AXIS` whole values of a field in `lo..=hi` (deciding values first), then `extra`.
fn whole(vocab: &Vocab, fields: &[&str], extra: &[u32], lo: u32, hi: u32) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let deciding = fields.iter().flat_map(|f| vocab.values(f).iter().copied());
    for v in deciding.chain(extra.iter().map(|&x| f64::from(x))) {
        if v.fract() == 0.0 && v >= f64::from(lo) && v <= f64::from(hi) && !out.contains(&(v as u32)) {
            out.push(v as u32);
        }
    }
    out.truncate(PER_AXIS);
    out
}

fn reads(vocab: &Vocab, field: &str) -> bool {
    vocab.read.contains(field)
}

/// The grid of two policies' vocabulary, if it is small enough to be exhaustive.
pub fn grid(vocab: &Vocab, prefix: &str) -> Option<Grid> {
    let mut axes: Vec<String> = Vec::new();
    // Nodes.
    let cards = whole(vocab, &["node.cards"], &[8, 2], 1, 64);
    let models: Vec<String> = match reads(vocab, "node.gpu_model") || reads(vocab, "card.model") {
        true => vocab.models.iter().take(PER_AXIS).cloned().collect(),
        false => vec!["gpu".into()],
    };
    let mut sharing = vec![Sharing::Exclusive];
    if vocab.sharing {
        sharing.push(Sharing::Timeslice);
    }
    let used_fraction = [0u32, 1, 2]; // none, one card, half the node
    let node_labels: Vec<Vec<Option<String>>> = vocab.node_label_keys.iter().map(|_| label_values(vocab)).collect();
    axes.push(format!("node cards {cards:?}"));
    axes.push("used cards {0, 1, half}".into());
    axes.push(format!("model {models:?}"));
    axes.push(format!("sharing {:?}", sharing.iter().map(|s| s.name()).collect::<Vec<_>>()));
    for key in &vocab.node_label_keys {
        axes.push(format!("node label {key:?} {:?}", label_values(vocab)));
    }
    let mut nodes: Vec<NodeSpec> = Vec::new();
    let mut running: Vec<Running> = Vec::new();
    let fits = |axes: &[Vec<Option<String>>], other: usize, max: usize| {
        axes.iter().try_fold(other, |acc, a| acc.checked_mul(a.len())).is_some_and(|n| n <= max)
    };
    if !fits(&node_labels, cards.len() * models.len() * sharing.len(), MAX_NODES * 3) {
        return None;
    }
    let label_sets = product(&node_labels);
    for &c in &cards {
        for used in used_fraction {
            for m in &models {
                for &sh in &sharing {
                    for labels in &label_sets {
                        let i = nodes.len();
                        let mut n = NodeSpec::named(format!("{prefix}n{}", i + 1));
                        (n.cards, n.model, n.sharing) = (c, m.clone(), sh);
                        if sh == Sharing::Timeslice {
                            n.max_clients = 2;
                        }
                        n.labels = vocab
                            .node_label_keys
                            .iter()
                            .cloned()
                            .zip(labels.iter().cloned())
                            .filter_map(|(k, v)| Some((k, v?)))
                            .collect();
                        for l in 0..vocab.levels.len() {
                            n.domains.push((l as u8, format!("d{}", i % 2 + 1)));
                        }
                        let take = match used {
                            0 => 0,
                            1 => 1,
                            _ => c / 2,
                        };
                        if take > 0 && take < c && sh == Sharing::Exclusive {
                            let mut r = JobSpec::named(format!("{prefix}r{}", running.len() + 1));
                            (r.queue, r.request) = (vocab.leaves.first().cloned(), Request::Whole(take));
                            running.push(Running { job: r, nodes: vec![i], history: History::default(), ends: false });
                        } else if take > 0 {
                            continue;
                        }
                        nodes.push(n);
                        if nodes.len() > MAX_NODES {
                            return None;
                        }
                    }
                }
            }
        }
    }
    // Jobs.
    let job_cards = whole(vocab, &["job.whole_cards", "job.total_gpus"], &[1, 4], 1, 64);
    let priorities: Vec<Option<f64>> = match reads(vocab, "job.priority") {
        true => std::iter::once(None)
            .chain(vocab.values("job.priority").iter().take(PER_AXIS - 1).map(|&p| Some(p)))
            .collect(),
        false => vec![None],
    };
    let queues: Vec<Option<String>> = match vocab.leaves.is_empty() {
        true => vec![None],
        false => vocab.leaves.iter().take(PER_AXIS).cloned().map(Some).collect(),
    };
    let flags: Vec<&str> = ["bursty", "latency_critical", "preemptible"]
        .into_iter()
        .filter(|f| reads(vocab, &format!("job.{f}")))
        .collect();
    let job_labels: Vec<Vec<Option<String>>> = vocab.job_label_keys.iter().map(|_| label_values(vocab)).collect();
    axes.push(format!("job cards {job_cards:?}"));
    axes.push(format!(
        "priority {:?}",
        priorities.iter().map(|p| p.map_or("class or 0".into(), |x| x.to_string())).collect::<Vec<_>>()
    ));
    axes.push(format!("queue {:?}", queues.iter().flatten().collect::<Vec<_>>()));
    for f in &flags {
        axes.push(format!("{f} {{false, true}}"));
    }
    for key in &vocab.job_label_keys {
        axes.push(format!("job label {key:?} {:?}", label_values(vocab)));
    }
    let flag_axes: Vec<Vec<Option<String>>> = flags.iter().map(|_| vec![None, None]).collect();
    let jobs_before_labels = job_cards.len() * priorities.len() * queues.len();
    if !fits(&[flag_axes, job_labels.clone()].concat(), jobs_before_labels, MAX_JOBS) {
        return None;
    }
    let flag_sets: Vec<Vec<bool>> = product(&flags.iter().map(|_| vec![Some(false), Some(true)]).collect::<Vec<_>>())
        .into_iter()
        .map(|v| v.into_iter().map(|x| x.unwrap_or(false)).collect())
        .collect();
    let mut pending = Vec::new();
    for &c in &job_cards {
        for p in &priorities {
            for q in &queues {
                for fl in &flag_sets {
                    for labels in product(&job_labels) {
                        let mut j = JobSpec::named(format!("{prefix}j{}", pending.len() + 1));
                        (j.request, j.priority, j.queue) = (Request::Whole(c), *p, q.clone());
                        for (f, &on) in flags.iter().zip(fl) {
                            match *f {
                                "bursty" => j.bursty = on,
                                "latency_critical" => j.latency_critical = on,
                                _ => j.preemptible = on,
                            }
                        }
                        j.labels = vocab
                            .job_label_keys
                            .iter()
                            .cloned()
                            .zip(labels)
                            .filter_map(|(k, v)| Some((k, v?)))
                            .collect();
                        pending.push(Pending { job: j, batch: 0 });
                        if pending.len() > MAX_JOBS {
                            return None;
                        }
                    }
                }
            }
        }
    }
    let domain = format!("{} jobs × {} nodes: every combination of {}", pending.len(), nodes.len(), axes.join(", "));
    Some(Grid { world: World { nodes, running, usage: Vec::new(), pending, waits: [0, 0], start: 0 }, domain })
}

/// A label's values on the grid: absent, and up to three literals of either policy.
fn label_values(vocab: &Vocab) -> Vec<Option<String>> {
    std::iter::once(None).chain(vocab.strings.iter().take(PER_AXIS - 1).cloned().map(Some)).collect()
}

/// Every combination of one value per axis.
fn product<T: Clone>(axes: &[Vec<T>]) -> Vec<Vec<T>> {
    axes.iter().fold(vec![Vec::new()], |acc, axis| {
        acc.into_iter()
            .flat_map(|prefix| axis.iter().map(move |v| [prefix.clone(), vec![v.clone()]].concat()))
            .collect()
    })
}
