//! What the scheduler works out on demand and keeps until what it depends on changes:
//! each entry is stored with the key (quota version, capacity, clock) it was computed
//! for, or cleared by the change that stales it. Invariant: a cache only ever answers
//! what computing afresh would, so dropping any of them changes no decision. They sit
//! in `RefCell`s because views and reads that fill them take the scheduler by `&`.

use crate::quota::QueueId;
use crate::quota::Res;
use gpol_compiler::schema::{QueueRec, Sym};
use std::cell::RefCell;
use std::collections::HashMap;

/// The room of cohort caps, by leaf and resource.
/// Hashed with Fx: looked up by every waiting class after every change.
type CohortRoom = rustc_hash::FxHashMap<(QueueId, Res), i64>;

/// Fair Tree's factors by leaf and user, and the quota version and time they are of.
type FairTreeCache = ((u64, u64), HashMap<(QueueId, Sym), f64>);

/// What cached queue records were worked out for: the quota tree's version, its shape's
/// version and the capacity.
#[derive(Clone, Copy, PartialEq)]
pub(super) struct QueueRecsKey {
    pub(super) version: u64,
    pub(super) shape: u64,
    pub(super) capacity: crate::model::Capacity,
}

#[derive(Clone)]
pub(super) struct Caches {
    /// The queue records of the last view: most views between two changes are of the
    /// same state.
    queue_recs: RefCell<Option<(QueueRecsKey, Vec<QueueRec>)>>,
    /// How many replicas of each shape the nodes in service could hold if they were
    /// empty: it changes only when a node joins, leaves or returns to service.
    room_when_empty: RefCell<HashMap<usize, u64>>,
    fair_tree: RefCell<Option<FairTreeCache>>,
    /// Per queue, whether it borrows something the tree governs, and the quota version
    /// that is of.
    borrowing: RefCell<Option<(u64, Vec<bool>)>>,
    /// The room each cohort cap has, and the quota version that is of.
    cohort_room: RefCell<(u64, CohortRoom)>,
}

impl Default for Caches {
    fn default() -> Caches {
        Caches {
            queue_recs: RefCell::new(None),
            room_when_empty: RefCell::new(HashMap::new()),
            fair_tree: RefCell::new(None),
            borrowing: RefCell::new(None),
            cohort_room: RefCell::new((u64::MAX, CohortRoom::default())),
        }
    }
}

// The look-ups are small and asked per waiting class after every change: inlined, as
// they were when they sat in the scheduler's own methods.
impl Caches {
    /// The queue records for `key`: the cached ones, brought up to date by `refresh` when
    /// only allocation, usage and counts moved since (same tree shape and capacity), or
    /// made anew by `build`.
    #[inline]
    pub(super) fn queue_recs(
        &self,
        key: QueueRecsKey,
        refresh: impl FnOnce(&mut Vec<QueueRec>),
        build: impl FnOnce() -> Vec<QueueRec>,
    ) -> Vec<QueueRec> {
        let mut cache = self.queue_recs.borrow_mut();
        match cache.as_mut() {
            Some((k, recs)) if *k == key => recs.clone(),
            Some((k, recs)) if (k.shape, k.capacity) == (key.shape, key.capacity) => {
                refresh(recs);
                *k = key;
                recs.clone()
            }
            _ => {
                let recs = build();
                *cache = Some((key, recs.clone()));
                recs
            }
        }
    }

    /// The queue records of the last view, whatever state they are of.
    #[inline]
    pub(super) fn last_queue_recs(&self) -> Option<Vec<QueueRec>> {
        self.queue_recs.borrow().as_ref().map(|(_, recs)| recs.clone())
    }

    /// The room shape `shape` has when the nodes are empty, worked out by `compute` if
    /// not known.
    #[inline]
    pub(super) fn room_when_empty(&self, shape: usize, compute: impl FnOnce() -> u64) -> u64 {
        if let Some(&room) = self.room_when_empty.borrow().get(&shape) {
            return room;
        }
        let room = compute();
        self.room_when_empty.borrow_mut().insert(shape, room);
        room
    }

    /// The nodes in service changed: forgets every shape's room when empty.
    pub(super) fn forget_room_when_empty(&mut self) {
        self.room_when_empty.get_mut().clear();
    }

    /// Fair Tree's factor of `user` in leaf `queue`, from the factors of `key` (quota
    /// version and time), worked out by `compute` if not known; 0 for an unknown user.
    #[inline]
    pub(super) fn fair_tree_factor(
        &self,
        key: (u64, u64),
        compute: impl FnOnce() -> HashMap<(QueueId, Sym), f64>,
        queue: QueueId,
        user: Sym,
    ) -> f64 {
        let mut cache = self.fair_tree.borrow_mut();
        if cache.as_ref().is_none_or(|(k, _)| *k != key) {
            *cache = Some((key, compute()));
        }
        cache.as_ref().and_then(|(_, f)| f.get(&(queue, user)).copied()).unwrap_or(0.0)
    }

    /// Whether queue `q` borrows, per the list `compute` works out for quota version
    /// `version` (once per version).
    #[inline]
    pub(super) fn borrows(&self, version: u64, q: QueueId, compute: impl FnOnce() -> Vec<bool>) -> bool {
        let mut cache = self.borrowing.borrow_mut();
        if cache.as_ref().is_none_or(|(v, _)| *v != version) {
            *cache = Some((version, compute()));
        }
        cache.as_ref().is_some_and(|(_, b)| b.get(q).copied().unwrap_or(false))
    }

    /// The room of the cohort cap on `res` over leaf `queue` at quota version `version`,
    /// worked out by `compute` once per version.
    #[inline]
    pub(super) fn cohort_room(&self, version: u64, queue: QueueId, res: Res, compute: impl FnOnce() -> i64) -> i64 {
        let mut cache = self.cohort_room.borrow_mut();
        if cache.0 != version {
            cache.0 = version;
            cache.1.clear();
        }
        *cache.1.entry((queue, res)).or_insert_with(compute)
    }
}
