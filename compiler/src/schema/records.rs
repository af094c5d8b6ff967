//! The records rules read, defined once. Each `records!` entry produces the `#[repr(C)]`
//! struct the runtime fills and the JIT reads by offset, the schema table the checker
//! types field accesses from (with `offset_of!` offsets), and a safe accessor the
//! interpreter reads through — so the three cannot drift apart.
//!
//! Values are in base units as `f64` (cards, cores, bytes, seconds); strings are
//! interned [`Sym`]s; enums are `u8`; references to queues and domains are indices into
//! the evaluation context's tables; lists are [`List`]s.

// This module is the data boundary shared with JIT-compiled code: `List` holds a raw
// pointer so its layout is fixed, and turning it back into a slice needs `unsafe`.
#![allow(unsafe_code)]

use super::{EnumKind, Field, FieldTy, Record, Storage};
use crate::units::Dim;
use std::marker::PhantomData;
use std::mem::offset_of;

/// An interned string. `Sym(0)` is reserved for "no value" (a missing label).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

/// A value that may be absent, with an explicit presence flag (decision D8).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Opt<T> {
    pub value: T,
    pub present: bool,
}

impl<T: Copy> Opt<T> {
    pub fn some(value: T) -> Opt<T> {
        Opt { value, present: true }
    }

    pub fn get(&self) -> Option<T> {
        self.present.then_some(self.value)
    }
}

/// A borrowed list with a fixed layout (pointer, length) that JIT code can read.
#[repr(C)]
pub struct List<'a, T> {
    ptr: *const T,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

impl<'a, T> List<'a, T> {
    pub fn new(items: &'a [T]) -> List<'a, T> {
        List { ptr: items.as_ptr(), len: items.len(), _borrow: PhantomData }
    }

    pub fn as_slice(&self) -> &'a [T] {
        // SAFETY: a `List` is only built by `new` from a slice that lives for 'a (the
        // fields are private), so the pointer and length describe that same slice.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Node records that own their card and label lists, for caches that live across many
/// evaluations (the runtime keeps one and updates a node's record when the node changes).
///
/// Each record's lists point into heap allocations the table owns through raw pointers
/// (made by `Box::into_raw`, freed in `Drop`), never through a `Box` or a `Vec`: moving a
/// `Box` asserts that it is the only pointer to its allocation, which would invalidate
/// the records' pointers, whereas a raw pointer asserts nothing when it moves. Shared
/// borrows of the lists are handed out only through `&self` (the records), mutable ones
/// only through `&mut self`, so the borrow checker keeps the two from overlapping.
#[derive(Default)]
pub struct NodeTable {
    lists: Vec<OwnedLists>,
    records: Vec<NodeRec<'static>>,
}

/// One node's card and label lists, owned (see [`NodeTable`]).
struct OwnedLists {
    cards: *mut [CardRec],
    labels: *mut [Sym],
}

impl OwnedLists {
    fn new(cards: Vec<CardRec>, labels: Vec<Sym>) -> OwnedLists {
        OwnedLists { cards: Box::into_raw(cards.into_boxed_slice()), labels: Box::into_raw(labels.into_boxed_slice()) }
    }

    /// A record's view of the lists.
    fn lists(&self) -> (List<'static, CardRec>, List<'static, Sym>) {
        // The pointers come from `Box::into_raw`, so they are non-null and aligned even
        // for empty slices; the lengths are the slices' own.
        let cards = List { ptr: self.cards as *const CardRec, len: self.cards.len(), _borrow: PhantomData };
        let labels = List { ptr: self.labels as *const Sym, len: self.labels.len(), _borrow: PhantomData };
        (cards, labels)
    }
}

impl Drop for OwnedLists {
    fn drop(&mut self) {
        // SAFETY: both pointers came from `Box::into_raw` in `new` or `replace_labels` and
        // are freed only here or there (after being replaced), exactly once. The table
        // drops a node's lists only together with its record, and records are lent out
        // only through `&self`, so no borrow of the lists outlives this.
        unsafe {
            drop(Box::from_raw(self.cards));
            drop(Box::from_raw(self.labels));
        }
    }
}

// SAFETY: `OwnedLists` owns its two slices as a `Box<[T]>` would (nothing else frees or
// writes them), so sending or sharing it is as safe as for `Box<[CardRec]>` and
// `Box<[Sym]>`, both plain data.
unsafe impl Send for OwnedLists {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for OwnedLists {}

impl NodeTable {
    /// Appends a node: `record`'s own lists are ignored; `cards` and `labels` are owned.
    pub fn push(&mut self, record: NodeRec<'_>, cards: Vec<CardRec>, labels: Vec<Sym>) {
        let owned = OwnedLists::new(cards, labels);
        let (cards_list, labels) = owned.lists();
        // The owner first: no record ever points at lists the table does not own.
        self.lists.push(owned);
        self.records.push(NodeRec { cards_list, labels, ..strip(record) });
    }

    /// Replaces node `i`'s scalar fields (its lists stay as they are).
    pub fn set(&mut self, i: usize, record: NodeRec<'_>) {
        if let Some(slot) = self.records.get_mut(i) {
            *slot = NodeRec { cards_list: slot.cards_list, labels: slot.labels, ..strip(record) };
        }
    }

    /// Node `i`'s cards, to update in place.
    pub fn cards_mut(&mut self, i: usize) -> &mut [CardRec] {
        match self.lists.get_mut(i) {
            // SAFETY: the allocation is live (owned by this table until `Drop`), and
            // `&mut self` guarantees that no record — and so no shared borrow of these
            // cards made from one — is alive while the returned borrow is: records are
            // only lent through `&self`. The records' own raw pointers are not borrows.
            Some(owned) => unsafe { &mut *owned.cards },
            None => &mut [],
        }
    }

    /// Replaces node `i`'s label values (a node's labels can change while it runs).
    pub fn replace_labels(&mut self, i: usize, labels: Vec<Sym>) {
        let (Some(owned), Some(record)) = (self.lists.get_mut(i), self.records.get_mut(i)) else { return };
        let old = std::mem::replace(&mut owned.labels, Box::into_raw(labels.into_boxed_slice()));
        record.labels = owned.lists().1;
        // SAFETY: `old` came from `Box::into_raw` and is no longer reachable: the record
        // now points at the new labels, and `&mut self` means no borrow of the old ones
        // is alive.
        drop(unsafe { Box::from_raw(old) });
    }

    pub fn records(&self) -> &[NodeRec<'_>] {
        &self.records
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// A copy owns copies of the lists: the records' pointers are re-made over them.
impl Clone for NodeTable {
    fn clone(&self) -> Self {
        let mut table = NodeTable::default();
        for r in &self.records {
            table.push(*r, r.cards_list.as_slice().to_vec(), r.labels.as_slice().to_vec());
        }
        table
    }
}

/// The workload's task shapes with their model allow-lists, owned: the records rules read
/// as `cluster.task_shapes`, kept by whoever evaluates rules for as long as the workload
/// stays the same. Built once and never changed, so, as in [`NodeTable`], the records
/// point into one allocation the table owns through a raw pointer and are lent out only
/// through `&self`.
pub struct ShapeTable {
    models: *mut [Sym],
    records: Vec<ShapeRec<'static>>,
}

impl ShapeTable {
    /// The shapes in order, each with its allow-list (`record`'s own list is ignored).
    pub fn new(shapes: impl IntoIterator<Item = (ShapeRec<'static>, Vec<Sym>)>) -> ShapeTable {
        let (mut records, mut models, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        for (record, allowed) in shapes {
            spans.push((models.len(), allowed.len()));
            models.extend(allowed);
            records.push(record);
        }
        let models: *mut [Sym] = Box::into_raw(models.into_boxed_slice());
        let base = models as *const Sym;
        for (record, (start, len)) in records.iter_mut().zip(spans) {
            // `wrapping_add` stays within (or one past) the allocation: `start + len` is at
            // most its length. The pointer is non-null and aligned, as `into_raw` made it.
            record.allowed_models = List { ptr: base.wrapping_add(start), len, _borrow: PhantomData };
        }
        ShapeTable { models, records }
    }

    pub fn records(&self) -> &[ShapeRec<'_>] {
        &self.records
    }
}

impl Default for ShapeTable {
    fn default() -> Self {
        ShapeTable::new([])
    }
}

impl Clone for ShapeTable {
    fn clone(&self) -> Self {
        ShapeTable::new(self.records.iter().map(|r| (*r, r.allowed_models.as_slice().to_vec())))
    }
}

impl std::fmt::Debug for ShapeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.records).finish()
    }
}

impl Drop for ShapeTable {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::into_raw` in `new` and is freed only here,
        // once; records, and so every list into it, are lent only through `&self`, so no
        // borrow outlives the table.
        unsafe { drop(Box::from_raw(self.models)) }
    }
}

// SAFETY: the table owns its model list as a `Box<[Sym]>` would (nothing else frees or
// writes it), and `Sym` is plain data.
unsafe impl Send for ShapeTable {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for ShapeTable {}

/// A record with empty lists: its own lists borrow something else.
fn strip(r: NodeRec<'_>) -> NodeRec<'static> {
    NodeRec { cards_list: List::default(), labels: List::default(), ..r }
}

/// Where a `List`'s pointer and length are, for code that reads it by offset.
pub const LIST_PTR: usize = offset_of!(List<'static, u8>, ptr);
pub const LIST_LEN: usize = offset_of!(List<'static, u8>, len);

impl<T> Clone for List<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for List<'_, T> {}

impl<T> Default for List<'_, T> {
    fn default() -> Self {
        List::new(&[])
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for List<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

// SAFETY: a `List` is a shared borrow of a slice: sending or sharing it across threads is
// as safe as doing so with `&[T]`, which requires `T: Sync`.
unsafe impl<T: Sync> Send for List<'_, T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for List<'_, T> {}

pub use crate::limits::MAX_LEVELS;

/// Free MIG instances per profile, indexed by the `mig_profile` enum value.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MigCounts(pub [f64; crate::mig::PROFILE_COUNT]);

impl Default for MigCounts {
    fn default() -> MigCounts {
        MigCounts([0.0; crate::mig::PROFILE_COUNT])
    }
}

impl MigCounts {
    /// The count of a profile (0 for an index past the last profile).
    pub fn get(&self, profile: usize) -> f64 {
        self.0.get(profile).copied().unwrap_or(0.0)
    }
}

/// A field's value, as the interpreter reads it.
#[derive(Clone, Copy, Debug)]
pub enum FieldValue<'r, 'a> {
    Num(f64),
    Bool(bool),
    Sym(Sym),
    Enum(u8),
    Queue(u32),
    OptNum(Opt<f64>),
    OptEnum(Opt<u8>),
    OptQueue(Opt<u32>),
    Resources(&'r Resources),
    Cards(&'a [CardRec]),
    Shapes(&'a [ShapeRec<'a>]),
    Syms(&'a [Sym]),
    Labels(&'a [Sym]),
    Mig(&'r MigCounts),
}

/// How JIT code loads a field: the value at `offset`, in this representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repr {
    F64,
    Bool,
    Sym,
    U8,
    U32,
    /// `Opt<T>`: the value at `offset`, the presence flag at `offset + present`.
    Opt {
        value: &'static Repr,
        present: usize,
    },
    Resources,
    List,
    Mig,
}

macro_rules! kind {
    (ty num) => { f64 };
    (ty boolean) => { bool };
    (ty string) => { Sym };
    (ty enumeration) => { u8 };
    (ty queue) => { u32 };
    (ty opt_num) => { Opt<f64> };
    (ty opt_enum) => { Opt<u8> };
    (ty opt_queue) => { Opt<u32> };
    (ty resources) => { Resources };
    (ty cards) => { List<'a, CardRec> };
    (ty shapes) => { List<'a, ShapeRec<'a>> };
    (ty strings) => { List<'a, Sym> };
    (ty labels) => { List<'a, Sym> };
    (ty mig) => { MigCounts };

    (field num $d:ident) => { FieldTy::Num(Dim::$d) };
    (field opt_num $d:ident) => { FieldTy::Num(Dim::$d) };
    (field boolean) => { FieldTy::Bool };
    (field string) => { FieldTy::Str };
    (field enumeration $e:ident) => { FieldTy::Enum(EnumKind::$e) };
    (field opt_enum $e:ident) => { FieldTy::Enum(EnumKind::$e) };
    (field queue) => { FieldTy::Record(Record::Queue) };
    (field opt_queue) => { FieldTy::Record(Record::Queue) };
    (field resources) => { FieldTy::Record(Record::Resources) };
    (field cards) => { FieldTy::List(Record::Card) };
    (field shapes) => { FieldTy::List(Record::Shape) };
    (field strings) => { FieldTy::StrList };
    (field labels) => { FieldTy::Labels };
    (field mig) => { FieldTy::MigCounts };

    (optional opt_num) => { true };
    (optional opt_enum) => { true };
    (optional opt_queue) => { true };
    (optional $k:ident) => { false };

    (repr num) => { Repr::F64 };
    (repr boolean) => { Repr::Bool };
    (repr string) => { Repr::Sym };
    (repr enumeration) => { Repr::U8 };
    (repr queue) => { Repr::U32 };
    (repr opt_num) => { Repr::Opt { value: &Repr::F64, present: offset_of!(Opt<f64>, present) } };
    (repr opt_enum) => { Repr::Opt { value: &Repr::U8, present: offset_of!(Opt<u8>, present) } };
    (repr opt_queue) => { Repr::Opt { value: &Repr::U32, present: offset_of!(Opt<u32>, present) } };
    (repr resources) => { Repr::Resources };
    (repr cards) => { Repr::List };
    (repr shapes) => { Repr::List };
    (repr strings) => { Repr::List };
    (repr labels) => { Repr::List };
    (repr mig) => { Repr::Mig };

    (value num $v:expr) => { FieldValue::Num(*$v) };
    (value boolean $v:expr) => { FieldValue::Bool(*$v) };
    (value string $v:expr) => { FieldValue::Sym(*$v) };
    (value enumeration $v:expr) => { FieldValue::Enum(*$v) };
    (value queue $v:expr) => { FieldValue::Queue(*$v) };
    (value opt_num $v:expr) => { FieldValue::OptNum(*$v) };
    (value opt_enum $v:expr) => { FieldValue::OptEnum(*$v) };
    (value opt_queue $v:expr) => { FieldValue::OptQueue(*$v) };
    (value resources $v:expr) => { FieldValue::Resources($v) };
    (value cards $v:expr) => { FieldValue::Cards($v.as_slice()) };
    (value shapes $v:expr) => { FieldValue::Shapes($v.as_slice()) };
    (value strings $v:expr) => { FieldValue::Syms($v.as_slice()) };
    (value labels $v:expr) => { FieldValue::Labels($v.as_slice()) };
    (value mig $v:expr) => { FieldValue::Mig($v) };
}

macro_rules! records {
    ($(
        $(#[$meta:meta])*
        $table:ident: $Struct:ident $(<$lt:lifetime>)? {
            $( $field:ident: $kind:ident $(($arg:ident))?, $storage:ident, $doc:literal; )*
            $( @$raw:ident: $rty:ty, $rdoc:literal; )*
        }
    )*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $Struct $(<$lt>)? {
                $( #[doc = $doc] pub $field: kind!(ty $kind), )*
                $( #[doc = $rdoc] pub $raw: $rty, )*
            }

            static $table: &[Field] = &[
                $( Field {
                    name: stringify!($field),
                    ty: kind!(field $kind $($arg)?),
                    optional: kind!(optional $kind),
                    storage: Storage::$storage,
                    doc: $doc,
                    offset: offset_of!($Struct, $field),
                    repr: kind!(repr $kind),
                }, )*
            ];

            impl<'a> $Struct $(<$lt>)? {
                /// The value of the field with this index in the schema table.
                pub fn field<'r>(&'r self, index: u16) -> Option<FieldValue<'r, 'a>> {
                    let names: &[&str] = &[$(stringify!($field)),*];
                    Some(match *names.get(usize::from(index))? {
                        $( stringify!($field) => kind!(value $kind &self.$field), )*
                        _ => return None,
                    })
                }
            }
        )*
    };
}

records! {
    /// A job waiting to be placed, or a running one in preemption rules.
    JOB: JobRec<'a> {
        id: string, Static, "Unique job id.";
        name: string, Static, "The job's name.";
        user: string, Static, "The submitting user.";
        queue: queue, Static, "The leaf queue the job was submitted to.";
        priority: num(NONE), Static, "Numeric priority (from its priority class unless set).";
        priority_class: string, Static, "Name of the job's priority class.";
        whole_cards: num(GPU), Static, "Whole cards per replica (0 for fractional or MIG jobs).";
        gpu_fraction: num(GPU), Static, "Fraction of one card per replica (0 unless fractional).";
        mig_profile: opt_enum(MigProfile), Static, "The MIG profile requested per replica, if any.";
        replicas: num(NONE), Static, "Replicas of a gang (1 for a single-node job).";
        min_replicas: num(NONE), Static, "Fewest replicas the job can start with (elastic gangs).";
        total_gpus: num(GPU), Derived, "GPUs over all replicas (a MIG profile counts its compute slices of its GPU's, 3/7 for 3g.40gb).";
        gpu_mem: num(BYTES), Static, "GPU memory needed per replica on its card(s).";
        allowed_models: strings, Static, "GPU models the job may run on (empty: any).";
        cpu: num(CPU), Static, "CPU cores per replica.";
        mem: num(BYTES), Static, "Host memory per replica.";
        bursty: boolean, Static, "The job's GPU use comes in bursts (a poor fit for hard MIG slices).";
        latency_critical: boolean, Static, "Serving work that must not be time-sliced.";
        preemptible: boolean, Static, "Whether the job may be evicted at all.";
        submitted: num(TIME), Static, "Submission time (seconds on the cluster clock).";
        waiting: num(TIME), Cycle, "Time since submission, or since requeue after an eviction.";
        runtime: num(TIME), Cycle, "Time since the job started (0 while pending).";
        since_checkpoint: num(TIME), Cycle, "Work that an eviction now would lose.";
        expected_duration: opt_num(TIME), Static, "The user's runtime estimate, if given.";
        utilization: num(NONE), Static, "Fraction of its allocation the job really uses (default 1.0).";
        evictions: num(NONE), Cycle, "How many times the job has been evicted.";
        user_usage: num(GPU_TIME), Cycle, "The decayed usage of the job's user in its leaf queue (billed as `settings` says; GPU-seconds by default).";
        fair_tree: num(NONE), Cycle, "Slurm Fair Tree's FairShare factor of the job's user: its rank ÷ the number of users, in (0, 1].";
        labels: labels, Static, "The job's labels: `job.labels[\"team\"]`.";
    }

    /// A node being considered for a job.
    NODE: NodeRec<'a> {
        name: string, Static, "The node's name.";
        labels: labels, Static, "The node's labels: `node.labels[\"nvidia.com/gpu.product\"]`.";
        gpu_model: string, Static, "GPU model, e.g. \"h100\".";
        cards: num(GPU), Static, "GPUs on the node.";
        free_cards: num(GPU), Cycle, "Wholly free cards.";
        free_gpu: num(GPU), Cycle, "Free GPU capacity including partly used cards.";
        largest_free_fraction: num(GPU), Cycle, "The largest free fraction on any single card.";
        free_mig: mig, Cycle, "Free MIG instances per profile: `node.free_mig[1g.10gb]`.";
        gpu_mem: num(BYTES), Static, "Memory per card.";
        sharing: enumeration(Sharing), Static, "How the node's cards are shared.";
        max_clients: num(NONE), Static, "Clients per card under time-slicing or MPS (1 otherwise).";
        cpu: num(CPU), Static, "CPU cores.";
        cpu_free: num(CPU), Cycle, "Unallocated CPU cores.";
        mem: num(BYTES), Static, "Host memory.";
        mem_free: num(BYTES), Cycle, "Unallocated host memory.";
        cards_list: cards, Cycle, "The node's cards, for comprehensions.";
        // Not a schema field: rules reach domains as `node.LEVEL`.
        @domains: [u32; MAX_LEVELS], "The node's domain at each topology level (an index into the context's domains).";
    }

    /// One GPU of a node.
    CARD: CardRec {
        index: num(NONE), Static, "Position of the card in its node, from 0.";
        model: string, Static, "GPU model.";
        mem: num(BYTES), Static, "Card memory.";
        free_mem: num(BYTES), Cycle, "Unallocated card memory.";
        free: num(GPU), Cycle, "Unallocated share of the card (1 gpu when idle).";
        clients: num(NONE), Cycle, "Jobs sharing the card.";
        holder_cards: num(GPU), Cycle, "Whole cards per replica of the job holding this card (0 when free, shared or partitioned).";
        max_clients: num(NONE), Static, "Most jobs that may share the card.";
        free_mig: mig, Cycle, "Free MIG instances per profile on this card.";
    }

    /// A queue of the quota tree with its live accounting.
    QUEUE: QueueRec {
        name: string, Static, "The queue's name.";
        parent: opt_queue, Static, "The parent queue (absent at the root).";
        depth: num(NONE), Static, "Depth in the tree; the root is 0.";
        guarantee: resources, Cycle, "Guaranteed (nominal) quota, as in force now (quota windows change it).";
        limit: resources, Cycle, "Maximum allocation (infinite when unset), as in force now.";
        borrow_limit: resources, Cycle, "Most it may borrow above its guarantee, as in force now.";
        lend_limit: resources, Cycle, "Most of its unused guarantee others may borrow, as in force now.";
        weight: num(NONE), Static, "Fair-share weight (default 1).";
        allocated: resources, Cycle, "Resources its running jobs hold.";
        borrowed: resources, Cycle, "max(0, allocated − guarantee) per resource.";
        usage: num(GPU_TIME), Cycle, "Decayed GPU-time used.";
        dominant_share: num(NONE), Cycle, "max over resources of allocated / cluster total.";
        fair_share: num(NONE), Cycle, "KAI's fair share of the cluster's GPUs: guarantee up to demand, plus what is left split by weight up to demand.";
        share_after: num(NONE), Cycle, "Dominant share if the job in scope were admitted or the victim evicted.";
        allocated_after: resources, Cycle, "`allocated` if the job in scope were admitted or the victim evicted.";
        borrowed_after: resources, Cycle, "`borrowed` if the job in scope were admitted or the victim evicted.";
        lendable: resources, Cycle, "What the queue's cohort can lend: its parent's pool (a root's own), Kueue's lendable capacity.";
        head_waiting: num(TIME), Cycle, "In `queue_order`: how long the queue's next job has waited (0 without one).";
        head_gpus: num(GPU), Cycle, "In `queue_order`: the GPUs the queue's next job asks for, every replica (0 without one).";
        head_priority: num(NONE), Cycle, "In `queue_order`: the priority of the queue's next job (0 without one).";
        head_fits_guarantee: boolean, Cycle, "In `queue_order`: whether the queue's next job fits within its guarantee of what the tree governs.";
        pending: num(NONE), Cycle, "Jobs waiting in the queue (and its descendants).";
        running: num(NONE), Cycle, "Jobs running in the queue (and its descendants).";
    }

    /// A topology domain (a rack, an NVLink domain, …) with aggregate free capacity.
    DOMAIN: DomainRec {
        name: string, Static, "The domain's name, e.g. \"rack-12\".";
        nodes: num(NONE), Static, "Nodes in the domain.";
        cards: num(GPU), Static, "GPUs in the domain.";
        free_cards: num(GPU), Cycle, "Wholly free cards in the domain.";
        free_gpu: num(GPU), Cycle, "Free GPU capacity including partly used cards.";
        max_free_cards: num(GPU), Cycle, "The most wholly free cards on any one node of the domain.";
    }

    /// The whole cluster, and the clock.
    CLUSTER: ClusterRec<'a> {
        time: num(TIME), Cycle, "The clock: seconds since the start of the run.";
        time_of_day: num(TIME), Cycle, "Time since midnight on the cluster clock, in the policy's `timezone` (UTC by default): `cluster.time_of_day >= 22h`.";
        weekday: num(NONE), Cycle, "The day of the week on the cluster clock: 1 is Monday, 7 is Sunday (ISO 8601).";
        nodes: num(NONE), Static, "Nodes in the cluster.";
        total: resources, Static, "Capacity of the whole cluster.";
        free: resources, Cycle, "Unallocated capacity.";
        task_shapes: shapes, Cycle, "Popular request shapes of the workload.";
    }

    /// A popular request shape of the current workload.
    SHAPE: ShapeRec<'a> {
        whole_cards: num(GPU), Static, "Whole cards per replica.";
        gpu_fraction: num(GPU), Static, "Fraction of one card per replica.";
        mig_profile: opt_enum(MigProfile), Static, "MIG profile, if any.";
        cpu: num(CPU), Static, "CPU cores per replica.";
        mem: num(BYTES), Static, "Host memory per replica.";
        weight: num(NONE), Static, "Share of the workload with this shape; weights sum to 1.";
        allowed_models: strings, Static, "GPU models the shape's jobs may run on (empty: any).";
    }

    /// An amount of each resource: a quota, an allocation.
    RESOURCES: Resources {
        gpu: num(GPU), Static, "GPUs (any model).";
        cpu: num(CPU), Static, "CPU cores.";
        mem: num(BYTES), Static, "Memory.";
    }
}

/// The schema table of a record kind.
pub(crate) fn table(r: Record) -> &'static [Field] {
    match r {
        Record::Job => JOB,
        Record::Node => NODE,
        Record::Card => CARD,
        Record::Queue => QUEUE,
        Record::Domain => DOMAIN,
        Record::Cluster => CLUSTER,
        Record::Shape => SHAPE,
        Record::Resources => RESOURCES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_table<T>(r: Record, read: impl Fn(u16) -> Option<String>) {
        let fields = table(r);
        for (i, f) in fields.iter().enumerate() {
            assert!(f.offset < std::mem::size_of::<T>(), "{}.{} offset out of the struct", r.name(), f.name);
            let i = u16::try_from(i).unwrap_or(u16::MAX);
            assert!(read(i).is_some(), "{}.{} has no accessor at its index", r.name(), f.name);
        }
        assert!(
            read(u16::try_from(fields.len()).unwrap_or(u16::MAX)).is_none(),
            "{} has an accessor past its table",
            r.name()
        );
    }

    #[test]
    fn tables_and_accessors_agree() {
        let job = JobRec { priority: 7.0, ..JobRec::default() };
        check_table::<JobRec>(Record::Job, |i| job.field(i).map(|v| format!("{v:?}")));
        assert!(matches!(job.field(4), Some(FieldValue::Num(p)) if p == 7.0), "field 4 is priority");
        let node = NodeRec::default();
        check_table::<NodeRec>(Record::Node, |i| node.field(i).map(|v| format!("{v:?}")));
        let card = CardRec::default();
        check_table::<CardRec>(Record::Card, |i| card.field(i).map(|v| format!("{v:?}")));
        let queue = QueueRec::default();
        check_table::<QueueRec>(Record::Queue, |i| queue.field(i).map(|v| format!("{v:?}")));
        let domain = DomainRec::default();
        check_table::<DomainRec>(Record::Domain, |i| domain.field(i).map(|v| format!("{v:?}")));
        let cluster = ClusterRec::default();
        check_table::<ClusterRec>(Record::Cluster, |i| cluster.field(i).map(|v| format!("{v:?}")));
        let shape = ShapeRec::default();
        check_table::<ShapeRec>(Record::Shape, |i| shape.field(i).map(|v| format!("{v:?}")));
        let res = Resources::default();
        check_table::<Resources>(Record::Resources, |i| res.field(i).map(|v| format!("{v:?}")));
    }

    #[test]
    fn shape_tables_own_their_allow_lists() {
        let shape = |weight: f64| ShapeRec { weight, ..ShapeRec::default() };
        let table =
            ShapeTable::new([(shape(0.5), vec![Sym(3), Sym(4)]), (shape(0.25), vec![]), (shape(0.25), vec![Sym(9)])]);
        let copy = table.clone();
        drop(table);
        let r = copy.records();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].allowed_models.as_slice(), &[Sym(3), Sym(4)]);
        assert!(r[1].allowed_models.is_empty());
        assert_eq!(r[2].allowed_models.as_slice(), &[Sym(9)]);
        assert_eq!(r[2].weight, 0.25);
        assert!(ShapeTable::default().records().is_empty());
    }

    #[test]
    fn lists_round_trip() {
        let cards = [CardRec { index: 0.0, ..CardRec::default() }, CardRec { index: 1.0, ..CardRec::default() }];
        let node = NodeRec { cards_list: List::new(&cards), ..NodeRec::default() };
        assert_eq!(node.cards_list.len(), 2);
        assert_eq!(node.cards_list.as_slice()[1].index, 1.0);
        let empty: List<'_, Sym> = List::default();
        assert!(empty.is_empty() && empty.as_slice().is_empty());
    }

    #[test]
    fn node_tables_keep_lists_valid_across_updates() {
        let mut t = NodeTable::default();
        for i in 0..100 {
            let cards = vec![CardRec { index: f64::from(i), free: 1.0, ..CardRec::default() }; 2];
            t.push(NodeRec { cards: 2.0, ..NodeRec::default() }, cards, vec![Sym(i)]);
        }
        t.cards_mut(42)[1].free = 0.25;
        t.set(42, NodeRec { free_cards: 1.0, ..NodeRec::default() });
        let r = &t.records()[42];
        assert_eq!(r.free_cards, 1.0);
        assert_eq!(r.cards, 0.0, "set replaces every scalar field");
        assert_eq!(r.cards_list.as_slice()[1].free, 0.25);
        assert_eq!(r.cards_list.as_slice()[0].index, 42.0);
        assert_eq!(r.labels.as_slice(), &[Sym(42)]);
        assert_eq!(t.records()[0].cards_list.as_slice()[0].index, 0.0, "early lists survive growth");
    }

    #[test]
    fn node_tables_read_back_every_update_through_every_list() {
        let mut t = NodeTable::default();
        for i in 0..40 {
            let cards = vec![CardRec { index: f64::from(i), ..CardRec::default() }; 3];
            t.push(NodeRec::default(), cards, vec![Sym(i), Sym(i + 100)]);
        }
        // Interleave updates of cards, labels and scalars with reads through the records,
        // growing the table in between so the records themselves move.
        for round in 0..3u32 {
            for i in 0..40 {
                t.cards_mut(i)[2].free = f64::from(round);
                let n = u32::try_from(i).expect("small");
                t.replace_labels(i, (0..=round).map(|k| Sym(n * 10 + k)).collect());
                t.set(i, NodeRec { free_cards: f64::from(round), ..NodeRec::default() });
            }
            t.push(NodeRec::default(), Vec::new(), Vec::new());
            for (i, r) in t.records().iter().enumerate().take(40) {
                let n = u32::try_from(i).expect("small");
                assert_eq!(r.free_cards, f64::from(round));
                assert_eq!(r.cards_list.as_slice()[2].free, f64::from(round));
                assert_eq!(r.cards_list.as_slice()[0].index, f64::from(n));
                let want: Vec<Sym> = (0..=round).map(|k| Sym(n * 10 + k)).collect();
                assert_eq!(r.labels.as_slice(), want.as_slice());
            }
        }
        // A copy owns its own lists: changing one table leaves the other as it was.
        let copy = t.clone();
        t.cards_mut(0)[0].free = 7.0;
        t.replace_labels(0, vec![Sym(9)]);
        assert_eq!(copy.records()[0].cards_list.as_slice()[0].free, 0.0);
        assert_eq!(copy.records()[0].labels.as_slice().len(), 3);
        assert_eq!(t.records()[0].cards_list.as_slice()[0].free, 7.0);
        assert_eq!(t.records()[0].labels.as_slice(), &[Sym(9)]);
        assert!(t.records()[40].cards_list.is_empty() && t.records()[40].labels.is_empty());
    }

    #[test]
    fn offsets_are_the_struct_offsets() {
        let f = |r: Record, name: &str| r.field(name).map(|(_, f)| f.offset);
        assert_eq!(f(Record::Job, "priority"), Some(offset_of!(JobRec, priority)));
        assert_eq!(f(Record::Node, "free_cards"), Some(offset_of!(NodeRec, free_cards)));
        assert_eq!(f(Record::Queue, "allocated"), Some(offset_of!(QueueRec, allocated)));
        assert_eq!(f(Record::Resources, "mem"), Some(offset_of!(Resources, mem)));
    }
}
