//! The counters that drive retries: a failed class of waiting jobs notes the counts it
//! failed at, and is tried again once a count it waits on has moved (`retry`).
//! Invariant: every count only grows, and a per-queue count never exceeds the total it
//! was copied from; they are changed only through the `note_*` methods and `touch`.

use crate::quota::QueueId;

/// The state version and the counts of starts, allocation changes and releases.
#[derive(Clone, Debug)]
pub(super) struct Epochs {
    /// Counts every change to what rules or the runtime read (the cluster, the quotas,
    /// the jobs, the clock): a class that failed at this version would fail again.
    version: u64,
    /// Jobs started so far, and the count when the current cycle began (the jobs started
    /// since were not judged as victims).
    starts: u64,
    cycle_starts: u64,
    /// Per queue, the value of `starts` after the latest start in its subtree.
    started_under: Vec<u64>,
    /// Changes of allocation (starts, finishes, evictions) so far, and per leaf the count
    /// after its latest.
    alloc_changes: u64,
    changed_at: Vec<u64>,
    /// Jobs that have stopped holding what they held (ended or evicted) so far.
    releases: u64,
}

impl Epochs {
    pub(super) fn new(queues: usize) -> Epochs {
        Epochs {
            version: 0,
            starts: 0,
            cycle_starts: 0,
            started_under: vec![0; queues],
            alloc_changes: 0,
            changed_at: vec![0; queues],
            releases: 0,
        }
    }

    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// Notes a change to what rules or the runtime read.
    pub(super) fn touch(&mut self) {
        self.version += 1;
    }

    pub(super) fn starts(&self) -> u64 {
        self.starts
    }

    /// The count of starts when the cycle under way began.
    pub(super) fn cycle_starts(&self) -> u64 {
        self.cycle_starts
    }

    /// A cycle begins: the jobs it starts are not judged as victims in it.
    pub(super) fn begin_cycle(&mut self) {
        self.cycle_starts = self.starts;
    }

    /// Counts a start under every queue of `path` (the job's leaf and its ancestors).
    pub(super) fn note_start(&mut self, path: impl Iterator<Item = QueueId>) {
        self.starts += 1;
        for q in path {
            self.started_under[q] = self.starts;
        }
    }

    /// The count of starts after the latest start under queue `q`.
    pub(super) fn started_under(&self, q: QueueId) -> u64 {
        self.started_under[q]
    }

    /// How many queues the per-queue counts cover.
    pub(super) fn queues(&self) -> usize {
        self.started_under.len()
    }

    pub(super) fn alloc_changes(&self) -> u64 {
        self.alloc_changes
    }

    /// Counts a change of the allocation of leaf `leaf`.
    pub(super) fn note_alloc_change(&mut self, leaf: QueueId) {
        self.alloc_changes += 1;
        self.changed_at[leaf] = self.alloc_changes;
    }

    /// The count of allocation changes after the latest in leaf `q`.
    pub(super) fn changed_at(&self, q: QueueId) -> u64 {
        self.changed_at[q]
    }

    pub(super) fn releases(&self) -> u64 {
        self.releases
    }

    /// Counts a job (or replica) giving back what it held.
    pub(super) fn note_release(&mut self) {
        self.releases += 1;
    }
}
