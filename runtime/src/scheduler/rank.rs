//! A waiting job's rank in `job_order` and the id of its class: what the waiting jobs,
//! the order of turns and the retries all name, kept apart from each so none of them
//! needs another for it.

use crate::jobs::JobId;

pub(super) type ClassId = usize;

/// A job's place in `job_order`: its keys as order-preserving integers (descending keys
/// negated, NaN last), then its submission time, then its id — the last element.
pub(super) type Rank = Box<[u64]>;

/// The job a rank belongs to.
pub(super) fn job_of(rank: &Rank) -> JobId {
    rank.last().map_or(0, |&id| usize::try_from(id).unwrap_or(usize::MAX))
}

/// `x` as an integer in the order of `f64::total_cmp`, NaN after everything else.
pub(super) fn ordered(x: f64) -> u64 {
    if x.is_nan() {
        return u64::MAX;
    }
    let bits = x.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}
