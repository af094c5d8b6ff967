//! Slurm's Fair Tree (`PriorityFlags=FAIR_TREE`, Slurm's default) over the quota tree:
//! queues are accounts (their `weight` is their shares), a leaf's users are user
//! associations (one share each).
//!
//! Among siblings, an association's level fairshare is `LF = S / U`: `S` its shares over
//! the siblings' (itself included), `U` its usage over theirs (an account's usage is its
//! users'); `LF` is infinite when `U` is 0. Siblings are sorted by `LF`, highest first,
//! and the tree is walked depth first; users are ranked in the order the walk reaches
//! them, from `N` (the number of users) down, and a user's factor is `rank / N`. Ties:
//! sibling users with equal `LF` share a rank; tied sibling accounts have their children
//! merged and sorted together before descending; a user tied with a sibling account ranks
//! with that account's top user. A queue with `fairshare parent` is transparent: its
//! children sit in its parent.

use crate::quota::QueueId;
use crate::quota::Quotas;
use gpol_compiler::schema::Sym;
use std::collections::HashMap;

/// An association: an account (a queue) or a user of a leaf queue.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Assoc {
    Account(QueueId),
    User { queue: QueueId, user: Sym, usage: f64 },
}

/// Every user's Fair Tree factor, by leaf queue and user.
pub(crate) fn factors(quotas: &Quotas, now_ms: u64) -> HashMap<(QueueId, Sym), f64> {
    let tree = Tree::new(quotas, now_ms);
    let roots: Vec<Assoc> =
        (0..quotas.queues.len()).filter(|&q| quotas.queues[q].place.parent.is_none()).map(Assoc::Account).collect();
    let mut groups: Vec<Vec<(QueueId, Sym)>> = Vec::new();
    tree.walk(roots, &mut groups);
    let n = groups.iter().map(Vec::len).sum::<usize>();
    let mut out = HashMap::with_capacity(n);
    let mut reached = 0;
    for group in groups {
        let rank = (n - reached) as f64;
        reached += group.len();
        for key in group {
            out.insert(key, rank / n as f64);
        }
    }
    out
}

/// The tree with every user's usage at one time, and every account's.
struct Tree<'a> {
    quotas: &'a Quotas,
    users: Vec<Vec<(Sym, f64)>>,
    usage: Vec<f64>,
}

impl<'a> Tree<'a> {
    fn new(quotas: &'a Quotas, now_ms: u64) -> Tree<'a> {
        let n = quotas.queues.len();
        let users: Vec<Vec<(Sym, f64)>> = (0..n).map(|q| quotas.users_of(q, now_ms)).collect();
        // Children come after their parents: sum up from the last queue.
        let mut usage: Vec<f64> = users.iter().map(|u| u.iter().map(|(_, x)| x).sum()).collect();
        for q in (0..n).rev() {
            if let Some(p) = quotas.queues[q].place.parent {
                usage[p] += usage[q];
            }
        }
        Tree { quotas, users, usage }
    }

    /// An account's children: its child queues, then its users.
    fn children(&self, q: QueueId) -> Vec<Assoc> {
        let queue = &self.quotas.queues[q];
        let accounts = queue.place.children.iter().map(|&c| Assoc::Account(c));
        let users = self.users[q].iter().map(|&(user, usage)| Assoc::User { queue: q, user, usage });
        accounts.chain(users).collect()
    }

    /// Siblings with every `fairshare parent` account replaced by its children.
    fn expand(&self, siblings: Vec<Assoc>) -> Vec<Assoc> {
        let mut out = Vec::with_capacity(siblings.len());
        for a in siblings {
            match a {
                Assoc::Account(q) if self.quotas.queues[q].place.fairshare_parent => {
                    out.extend(self.expand(self.children(q)));
                }
                a => out.push(a),
            }
        }
        out
    }

    fn shares(&self, a: &Assoc) -> f64 {
        match a {
            Assoc::Account(q) => self.quotas.queues[*q].place.weight,
            Assoc::User { .. } => 1.0,
        }
    }

    fn usage(&self, a: &Assoc) -> f64 {
        match a {
            Assoc::Account(q) => self.usage[*q],
            Assoc::User { usage, .. } => *usage,
        }
    }

    /// Ranks the users below `siblings` into `groups` (tied users share a group).
    fn walk(&self, siblings: Vec<Assoc>, groups: &mut Vec<Vec<(QueueId, Sym)>>) {
        let siblings = self.expand(siblings);
        let shares: f64 = siblings.iter().map(|a| self.shares(a)).sum();
        let usage: f64 = siblings.iter().map(|a| self.usage(a)).sum();
        let level = |a: &Assoc| {
            let s = if shares > 0.0 { self.shares(a) / shares } else { 0.0 };
            let u = if usage > 0.0 { self.usage(a) / usage } else { 0.0 };
            if u > 0.0 { s / u } else { f64::INFINITY }
        };
        let mut ranked: Vec<(f64, Assoc)> = siblings.into_iter().map(|a| (level(&a), a)).collect();
        // Highest first; a stable sort keeps accounts before users, in tree order.
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        for tie in ranked.chunk_by(|a, b| a.0 == b.0) {
            let users: Vec<(QueueId, Sym)> = tie
                .iter()
                .filter_map(|(_, a)| match a {
                    Assoc::User { queue, user, .. } => Some((*queue, *user)),
                    Assoc::Account(_) => None,
                })
                .collect();
            let merged: Vec<Assoc> = tie
                .iter()
                .filter_map(|(_, a)| match a {
                    Assoc::Account(q) => Some(self.children(*q)),
                    Assoc::User { .. } => None,
                })
                .flatten()
                .collect();
            if merged.is_empty() {
                if !users.is_empty() {
                    groups.push(users);
                }
                continue;
            }
            let first = groups.len();
            self.walk(merged, groups);
            // A user tied with accounts ranks with their top user.
            match groups.get_mut(first) {
                Some(top) => top.extend(users),
                None if !users.is_empty() => groups.push(users),
                None => {}
            }
        }
    }
}
