//! KAI's fair share: what each queue of the tree deserves of the cluster's GPUs given what
//! the queues ask for now, and the weighted water-filling it is made of.
//!
//! Level by level from the root (which has the whole cluster): each child first gets its
//! guarantee, up to what it requests (what its subtree's running and waiting jobs ask
//! for: all their replicas, so that no eviction, start, growth or lost replica moves it); what is left of the parent's amount is then split by weight among the
//! children that request more, none getting more than it requests, and what a child
//! cannot take goes round again to the others. A child of weight 0 gets nothing beyond its
//! guarantee; what nobody requests stays unassigned.

use crate::quota::{Quotas, Res};

/// Splits `capacity` among parties by `weights`, none getting more than its `demand`:
/// those whose weighted part covers their demand get it, and the rest is split again among
/// the others. Parties of demand 0 get nothing; if every open party weighs 0, they split
/// equally.
pub fn water_fill(capacity: f64, demand: &[f64], weights: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; demand.len()];
    let mut open: Vec<usize> = (0..demand.len()).filter(|&i| demand[i] > 0.0).collect();
    let mut left = capacity;
    while !open.is_empty() && left > 1e-9 {
        let total_w: f64 = open.iter().map(|&i| weights[i].max(0.0)).sum();
        let w = |i: usize| if total_w > 0.0 { weights[i].max(0.0) / total_w } else { 1.0 / open.len() as f64 };
        // Parties whose demand their share covers are satisfied; the others split the rest.
        let satisfied: Vec<usize> = open.iter().copied().filter(|&i| demand[i] - out[i] <= left * w(i)).collect();
        if satisfied.is_empty() {
            for &i in &open {
                out[i] += left * w(i);
            }
            break;
        }
        for &i in &satisfied {
            left -= demand[i] - out[i];
            out[i] = demand[i];
        }
        open.retain(|i| !satisfied.contains(i));
    }
    out
}

/// Each queue's fair share, as a share of `total_milli` GPU (see the module).
pub(crate) fn fair_shares(quotas: &Quotas, total_milli: i64) -> Vec<f64> {
    let queues = &quotas.queues;
    let gpu = |q: usize| (queues[q].get(&queues[q].quota.guarantee, Res::Gpu) as f64).max(0.0);
    let requested = |q: usize| (queues[q].load.running_gpu + queues[q].load.pending_gpu).max(0) as f64;
    let mut fair = vec![0.0; queues.len()];
    // Parents come before their children in the tree's order.
    for p in 0..queues.len() {
        if queues[p].place.parent.is_none() {
            fair[p] = total_milli.max(0) as f64;
        }
        let children = &queues[p].place.children;
        if children.is_empty() {
            continue;
        }
        let deserved: Vec<f64> = children.iter().map(|&c| gpu(c).min(requested(c))).collect();
        let left = (fair[p] - deserved.iter().sum::<f64>()).max(0.0);
        let more: Vec<f64> = children
            .iter()
            .zip(&deserved)
            .map(|(&c, d)| if queues[c].place.weight > 0.0 { requested(c) - d } else { 0.0 })
            .collect();
        let weights: Vec<f64> = children.iter().map(|&c| queues[c].place.weight).collect();
        let over = water_fill(left, &more, &weights);
        for (k, &c) in children.iter().enumerate() {
            fair[c] = deserved[k] + over[k];
        }
    }
    let total = total_milli.max(1) as f64;
    fair.iter().map(|f| f / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::Symbols;
    use gpol_compiler::load::Checked;
    use gpol_compiler::schema::Sym;

    #[test]
    fn water_filling_caps_by_demand_and_shares_the_rest_by_weight() {
        assert_eq!(water_fill(10.0, &[2.0, 20.0, 20.0], &[1.0, 1.0, 3.0]), vec![2.0, 2.0, 6.0]);
        assert_eq!(water_fill(10.0, &[0.0, 4.0], &[1.0, 1.0]), vec![0.0, 4.0]);
        assert_eq!(water_fill(10.0, &[8.0, 8.0], &[0.0, 0.0]), vec![5.0, 5.0]);
    }

    /// Root 0, department 1 (guarantee 40: a 30, b 10), c 4 (guarantee 20); 100 GPUs.
    fn tree() -> Quotas {
        let text = "policy kai\nqueue root {\n  queue dept {\n    guarantee 40 gpu\n    queue a { guarantee 30 gpu\n weight 1 }\n    \
                    queue b { guarantee 10 gpu\n weight 3 }\n  }\n  queue c { guarantee 20 gpu\n weight 1 }\n}\n";
        let policy = Checked::from_text("kai.gpol", text).into_policy().expect("the tree checks").policy;
        Quotas::new(&policy, &mut Symbols::default())
    }

    /// Queue `q` runs a job of `running` GPUs and has one waiting for `waiting` more.
    fn ask(t: &mut Quotas, q: usize, running: i64, waiting: i64) {
        t.charge(q, Sym(1), &crate::quota::Amounts::from([(Res::Gpu, running * 1000)]), 1);
        t.count(q, 0, 1, running * 1000);
        t.count(q, 1, 0, waiting * 1000);
    }

    fn gpus(t: &Quotas) -> Vec<f64> {
        fair_shares(t, 100_000).iter().map(|f| (f * 100.0 * 1e6).round() / 1e6).collect()
    }

    #[test]
    fn nobody_asking_means_no_fair_share() {
        assert_eq!(gpus(&tree()), vec![100.0, 0.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn a_queue_asking_within_its_guarantee_gets_what_it_asks() {
        let mut t = tree();
        ask(&mut t, 2, 5, 5);
        // a asks 10 of its 30; dept, having asked 10 of its 40, has 10.
        assert_eq!(gpus(&t), vec![100.0, 10.0, 10.0, 0.0, 0.0]);
    }

    #[test]
    fn the_capacity_others_leave_goes_to_those_who_ask_by_weight() {
        let mut t = tree();
        ask(&mut t, 2, 30, 70); // a asks 100
        ask(&mut t, 3, 0, 100); // b asks 100
        ask(&mut t, 4, 5, 0); // c asks 5 of its 20
        // Root: dept deserves 40, c 5; the 55 left go to dept (c asks no more): 95.
        // Dept: a 30, b 10; 55 left split 1:3 — a 13.75, b 41.25.
        assert_eq!(gpus(&t), vec![100.0, 95.0, 43.75, 51.25, 5.0]);
    }

    #[test]
    fn no_one_gets_more_than_it_asks_and_the_rest_goes_round_again() {
        let mut t = tree();
        ask(&mut t, 2, 0, 100); // a asks 100
        ask(&mut t, 3, 0, 12); // b asks 12: 10 deserved, 2 more
        ask(&mut t, 4, 0, 100); // c asks 100
        // Root: dept 40, c 20; 40 left split 1:1 (dept asks 72 more, c 80): 20 each.
        // Dept has 60: a 30, b 10; 20 left by 1:3 would give b 15 of the 2 it wants, so b
        // gets 2 and a the other 18.
        assert_eq!(gpus(&t), vec![100.0, 60.0, 48.0, 12.0, 40.0]);
    }
}
