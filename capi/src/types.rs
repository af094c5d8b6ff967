//! Every type C sees: the statuses, the enumerations, the input records (`GpolNode`,
//! `GpolJob`) and the output records (`GpolAdmit`, `GpolNodeResult`, `GpolDiagnostic`).
//!
//! Input records hold only raw pointers, integers and `double`s, so any bit pattern a C
//! caller leaves in them is a valid Rust value: flags are `uint8_t` (0 is false, any other
//! value true) and enumerations are `uint32_t` holding one of the values of the C enum
//! named in their documentation, checked when read. Output records may hold `bool`s and C
//! enums: only libgpol writes them.

use std::ffi::c_char;

/// What a call did. Every function that can fail returns one; `GPOL_STATUS_OK` is 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolStatus {
    /// It succeeded.
    Ok = 0,
    /// A required pointer (an argument or a field of a record) was NULL, or not aligned
    /// for its type.
    NullPointer = 1,
    /// A string (an argument or a field) was not UTF-8.
    InvalidUtf8 = 2,
    /// An argument or field held a value outside its domain: an unknown enumeration value
    /// or MIG profile, a fraction of 0 milli-GPU, a clock that would go back.
    InvalidArgument = 3,
    /// An argument or field was over its documented limit (docs/capi.md, "Limits"), a
    /// cluster's text over `GPOL_MAX_CLUSTER_BYTES`, or the memory a count asked for
    /// could not be had (libgpol never aborts for it).
    TooLarge = 4,
    /// The policy did not check or compile: its diagnostics say why.
    CompileError = 5,
    /// The scheduler refused a node or a job: a duplicate node name, a MIG layout that
    /// does not fit a card, a queue or priority class the policy does not have, a job
    /// started where it does not fit.
    Refused = 6,
    /// A bug in libgpol: it panicked, and the panic was caught at the boundary. A cluster
    /// a call panicked in refuses every later call with this status (free it).
    Panic = 7,
}

/// Which engine runs a compiled policy (`gpol_policy_compile`'s `engine`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolEngine {
    /// Native code compiled with Cranelift: the fast one, the default.
    Jit = 0,
    /// The reference interpreter.
    Interp = 1,
}

/// How a node's cards are shared (`GpolNode.sharing`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolSharing {
    /// Whole cards, one job each.
    Exclusive = 0,
    /// Cards partitioned into MIG instances (`GpolNode.mig`).
    Mig = 1,
    /// Time-sliced cards shared by up to `max_clients` jobs.
    Timeslice = 2,
    /// MPS cards shared by up to `max_clients` jobs.
    Mps = 3,
}

/// What one replica of a job asks for of GPUs (`GpolJob.request`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolRequestKind {
    /// No GPU (CPU-only work); `amount` must be 0.
    None = 0,
    /// `amount` wholly free cards on one node (1 to 64).
    Whole = 1,
    /// A share of one card: `amount` milli-GPU (1 to 999).
    Fraction = 2,
    /// One free MIG instance of profile `mig_profile`; `amount` must be 0.
    Mig = 3,
}

/// A kind of rule, for looking up rule names (`gpol_policy_rule_name`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolRuleKind {
    /// `admit` rules, in declaration order: `GpolAdmit.admit_rule` indexes them.
    Admit = 0,
    /// `filter` rules, in declaration order: `GpolNodeResult.filter` and `rejected_by`
    /// index them.
    Filter = 1,
    /// `score` rules, in declaration order.
    Score = 2,
    /// `card_score` rules, in declaration order.
    CardScore = 3,
}

/// How serious a diagnostic is.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolSeverity {
    /// The policy cannot be compiled.
    Error = 0,
    /// The policy compiles, but probably does not do what was meant.
    Warning = 1,
}

/// Why a job may not start anywhere now (`GpolAdmit.reason`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolReason {
    /// Nothing: the job is admitted.
    None = 0,
    /// An admit rule refused it: `GpolAdmit.admit_rule` says which.
    AdmitRule = 1,
    /// Its queue (or an ancestor, or its user) has no quota left for it.
    Quota = 2,
    /// It can never run as the cluster and its queue are: no node could hold a replica
    /// even empty, too few could hold its minimum of replicas, or it asks for more than
    /// a queue's limit.
    Unschedulable = 3,
    /// Nodes passed the filters but none has room (not returned by `gpol_cluster_admit`;
    /// reserved for decisions).
    Capacity = 4,
    /// A gang's topology cannot be met (reserved for decisions).
    Gang = 5,
    /// A strict queue's head job waits ahead of it (reserved for decisions).
    Order = 6,
    /// A filter turned it away (reserved for decisions).
    Filter = 7,
}

/// One node's answer for a job (`GpolNodeResult.verdict`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpolVerdict {
    /// The job fits there now; `tiers` and `score` rate the node, `rank` places it.
    Fits = 0,
    /// A filter turned the node away: `GpolNodeResult.filter` is the first in
    /// declaration order that does.
    Filtered = 1,
    /// The node passes the filters but has too little free capacity now.
    Full = 2,
    /// The node could not hold the job even if it were empty.
    TooSmall = 3,
    /// The node is out of service (`GpolNode.cordoned`).
    Down = 4,
    /// The job may not run on the node's GPU model (`GpolJob.models`).
    Model = 5,
    /// The node is held for another job's reservation.
    Reserved = 6,
    /// The quota for the node's GPU model would be exceeded.
    Quota = 7,
}

/// A label: a key and its value, both NUL-terminated UTF-8, neither NULL.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GpolLabel {
    pub key: *const c_char,
    pub value: *const c_char,
}

/// A node's topology domain at one level: `level` names one of the policy's topology
/// levels (`gpol_policy_level_name`), `name` the domain (e.g. `"rack-12"`). A level the
/// policy does not declare is ignored, as every adapter does; at a level the node does
/// not name, the node is a domain of its own.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GpolDomain {
    pub level: *const c_char,
    pub name: *const c_char,
}

/// A node as it joins the cluster: the C form of gpol's `NodeSpec`. Start from
/// `gpol_node_defaults()` and set what differs. Strings are NUL-terminated UTF-8 of at
/// most `GPOL_MAX_STRING_BYTES` bytes; arrays are a pointer and a count (the pointer may
/// be NULL when the count is 0). libgpol copies what it needs during the call and keeps
/// no pointer into the record.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GpolNode {
    /// The node's name, unique in the cluster. Required.
    pub name: *const c_char,
    /// The GPU model of its cards, e.g. `"h100"`; NULL: `"gpu"`.
    pub model: *const c_char,
    /// How many GPUs (cards) it has, 0 to 64.
    pub cards: u32,
    /// Memory of each card, bytes (at most 64 TiB).
    pub card_mem: u64,
    /// How the cards are shared: a `GpolSharing`.
    pub sharing: u32,
    /// The MIG instances of the cards, by profile name (`"1g.10gb"`, `"3g.40gb"`, …):
    /// required for `GPOL_SHARING_MIG` nodes and only for them. With `n_mig_per_card` 0,
    /// one layout for every card (at most `GPOL_MAX_MIG_INSTANCES`); else card 0's
    /// instances, then card 1's, and so on.
    pub mig: *const *const c_char,
    pub n_mig: usize,
    /// Per-card layouts: how many of `mig` belong to each card, one count per card
    /// (`n_mig_per_card` equal to `cards`; each 1 to `GPOL_MAX_MIG_INSTANCES`). NULL with 0
    /// when every card has the same layout.
    pub mig_per_card: *const u32,
    pub n_mig_per_card: usize,
    /// Jobs that may share one card under time-slicing or MPS (1 to 1024; 1 otherwise).
    pub max_clients: u32,
    /// CPU, in milli-cores (at most 100,000 cores).
    pub cpu_milli: u64,
    /// Host memory, bytes (at most 64 TiB).
    pub mem: u64,
    /// Its topology domains, by level name. At most `GPOL_MAX_LIST` entries.
    pub topology: *const GpolDomain,
    pub n_topology: usize,
    /// Its labels (`node.labels["key"]`). At most `GPOL_MAX_LIST`.
    pub labels: *const GpolLabel,
    pub n_labels: usize,
    /// Non-zero: the node is out of service (cordoned or draining); its running jobs
    /// stay, nothing new goes there.
    pub cordoned: u8,
}

/// A job: the C form of gpol's `JobSpec`. Start from `gpol_job_defaults()` and set what
/// differs. Strings and arrays as in `GpolNode`. Optional numbers are a flag and a value
/// (`has_priority` and `priority`): the value is read only when the flag is non-zero.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GpolJob {
    /// The job's name (`job.name`, `job.id`). Required; may be empty.
    pub name: *const c_char,
    /// Its leaf queue; NULL: the policy's only leaf queue.
    pub queue: *const c_char,
    /// Who submitted it; NULL: the user named after its queue.
    pub user: *const c_char,
    /// Its priority class; NULL: none.
    pub priority_class: *const c_char,
    /// Non-zero: `priority` is the job's priority (finite); zero: its class's, or 0.
    pub has_priority: u8,
    pub priority: f64,
    /// What each replica asks for of GPUs: a `GpolRequestKind`, with `amount` (cards or
    /// milli-GPU) or `mig_profile` as it says.
    pub request: u32,
    pub amount: u32,
    /// The MIG profile of a `GPOL_REQUEST_KIND_MIG` request, e.g. `"1g.10gb"`; NULL otherwise.
    pub mig_profile: *const c_char,
    /// Replicas of a gang (1 for a single-node job), 1 to 100,000.
    pub replicas: u32,
    /// Non-zero: an elastic gang that starts with `min_replicas` (1 to `replicas`).
    pub has_min_replicas: u8,
    pub min_replicas: u32,
    /// GPU memory per replica, bytes.
    pub gpu_mem: u64,
    /// CPU per replica, milli-cores.
    pub cpu_milli: u64,
    /// Host memory per replica, bytes.
    pub mem: u64,
    /// GPU models it may run on; none: any. At most 64.
    pub models: *const *const c_char,
    pub n_models: usize,
    /// Non-zero: its GPU use comes in bursts.
    pub bursty: u8,
    /// Non-zero: serving work that must not be time-sliced.
    pub latency_critical: u8,
    /// Non-zero: it may be evicted.
    pub preemptible: u8,
    /// Non-zero: `duration_ms` is its run time when uninterrupted.
    pub has_duration_ms: u8,
    pub duration_ms: u64,
    /// Non-zero: `checkpoint_every_ms` is how often it saves its work.
    pub has_checkpoint_every_ms: u8,
    pub checkpoint_every_ms: u64,
    /// The share of its allocation it really uses, 0 to 1.
    pub utilization: f64,
    /// Its labels (`job.labels["key"]`). At most `GPOL_MAX_LIST`.
    pub labels: *const GpolLabel,
    pub n_labels: usize,
}

/// What a running job has behind it (`gpol_cluster_start`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GpolHistory {
    /// How long it has run, milliseconds.
    pub ran_ms: u64,
    /// How long since it last saved its work (at most `ran_ms`).
    pub since_checkpoint_ms: u64,
    /// Evictions it has already suffered.
    pub evictions: u32,
}

/// Whether a job may start at all now (`gpol_cluster_admit`): the policy's admit rules,
/// whether it could ever fit, and its queue's quota.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpolAdmit {
    /// The job may start (if some node fits it).
    pub admitted: bool,
    /// The admit rule that refused it (an index for `GPOL_RULE_KIND_ADMIT`), or -1.
    pub admit_rule: i32,
    /// Why it may not start; `GPOL_REASON_NONE` when admitted.
    pub reason: GpolReason,
    /// Nothing the cluster does changes the answer: an admit rule that reads only the
    /// job refused it, or it can never fit. Evicting other work cannot help.
    pub for_good: bool,
}

/// One node's result for a job (`gpol_cluster_filter_score`): the verdict, and the
/// policy engine's own result on the node (the fused filter and score call), whatever
/// the verdict.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpolNodeResult {
    /// The node's answer.
    pub verdict: GpolVerdict,
    /// For `GPOL_VERDICT_FILTERED`: the first filter in declaration order that rejects
    /// the node (an index for `GPOL_RULE_KIND_FILTER`); -1 otherwise.
    pub filter: i32,
    /// For `GPOL_VERDICT_FITS`: the node's place in the policy's ranking of the nodes
    /// that fit, 0 the best (ties go to the node created first): where one replica of
    /// the job would go is the node ranked 0. -1 for nodes that do not fit.
    pub rank: i32,
    /// The engine: the node passed every filter.
    pub feasible: bool,
    /// The engine: the filter that rejected the node, the first that failed in the
    /// order the engine runs them (cheapest first); `GPOL_NO_RULE` if feasible.
    pub rejected_by: u16,
    /// The engine: the sum of clamped scores per tier (tier 1 first).
    pub tiers: [f64; 4],
    /// The engine: the weighted sum of the untiered clamped scores.
    pub score: f64,
    /// The engine: scores that were NaN or outside [0, 1] (clamped; NaN counts as 0).
    pub faults: u32,
}

/// One diagnostic of a policy: where, what and how serious. Every string is
/// NUL-terminated UTF-8 owned by its `GpolDiagnostics` (NUL characters of the policy's
/// text are shown as U+FFFD).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GpolDiagnostic {
    /// Its stable code, e.g. `"E0009"` (`gpolc check --explain CODE` explains it).
    pub code: *const c_char,
    pub severity: GpolSeverity,
    /// The file it points into: the name given to `gpol_policy_compile`, or a library
    /// module the policy uses.
    pub file: *const c_char,
    /// Where it starts: 1-based line and column (in characters).
    pub line: u32,
    pub column: u32,
    /// Where it ends (the column just past it).
    pub end_line: u32,
    pub end_column: u32,
    /// One line saying what is wrong.
    pub message: *const c_char,
    /// How to fix it, or NULL.
    pub help: *const c_char,
    /// The whole report as `gpolc check` prints it without colour: the message, the
    /// source underlined, the help.
    pub rendered: *const c_char,
}

/// The longest string libgpol reads, in bytes (without the NUL): a longer one is
/// `GPOL_STATUS_TOO_LARGE`, found without reading past this many bytes.
pub const GPOL_MAX_STRING_BYTES: usize = 4096;

/// The most labels, topology entries or node names of a gang one record or call may
/// give (a gang's node names are also bounded by its replicas).
pub const GPOL_MAX_LIST: usize = 1024;

/// The most MIG instances one card may be partitioned into.
pub const GPOL_MAX_MIG_INSTANCES: usize = 7;

/// The most nodes one cluster may have (docs/limits.md).
pub const GPOL_MAX_NODES: usize = 100_000;

/// The longest policy text, in bytes (docs/limits.md).
pub const GPOL_MAX_POLICY_BYTES: usize = 16_777_216;

/// The most text one cluster holds, in bytes: its nodes' names, models, labels,
/// topology entries and MIG profile names, each string counted with
/// `GPOL_CLUSTER_BYTES_PER_STRING` more (docs/limits.md). `gpol_cluster_new` measures
/// it before copying anything: a cluster over it is `GPOL_STATUS_TOO_LARGE`, naming the
/// node that passes it.
pub const GPOL_MAX_CLUSTER_BYTES: u64 = 1_073_741_824;

/// What each string of a cluster counts beyond its bytes (`GPOL_MAX_CLUSTER_BYTES`).
pub const GPOL_CLUSTER_BYTES_PER_STRING: u64 = 64;

/// `GpolNodeResult.rejected_by` of a node no filter rejected.
pub const GPOL_NO_RULE: u16 = 65535;

/// How many score tiers a policy may declare: the length of `GpolNodeResult.tiers`.
pub const GPOL_MAX_TIERS: usize = 4;

// The C constants are written out for cbindgen, which cannot evaluate other crates'
// constants: these keep them equal to the definitions.
const _: () = {
    use gpol_compiler::limits;
    assert!(GPOL_MAX_NODES == limits::MAX_NODES as usize);
    assert!(GPOL_MAX_POLICY_BYTES as u64 == limits::MAX_POLICY_BYTES);
    assert!(GPOL_MAX_CLUSTER_BYTES == limits::MAX_CLUSTER_TEXT_BYTES);
    assert!(GPOL_CLUSTER_BYTES_PER_STRING == limits::CLUSTER_BYTES_PER_STRING);
    assert!(GPOL_NO_RULE == gpol_compiler::engine::NONE);
    assert!(GPOL_MAX_TIERS == gpol_compiler::engine::MAX_TIERS);
};

impl GpolNode {
    /// A node with gpol's defaults (`NodeSpec::default()`), its name NULL.
    pub fn defaults() -> GpolNode {
        let spec = gpol_compiler::spec::NodeSpec::default();
        GpolNode {
            name: std::ptr::null(),
            model: std::ptr::null(),
            cards: spec.cards,
            card_mem: spec.card_mem,
            sharing: GpolSharing::Exclusive as u32,
            mig: std::ptr::null(),
            n_mig: 0,
            mig_per_card: std::ptr::null(),
            n_mig_per_card: 0,
            max_clients: spec.max_clients,
            cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            topology: std::ptr::null(),
            n_topology: 0,
            labels: std::ptr::null(),
            n_labels: 0,
            cordoned: 0,
        }
    }
}

impl GpolJob {
    /// A job with gpol's defaults (`JobSpec::default()`), its name NULL.
    pub fn defaults() -> GpolJob {
        let spec = gpol_compiler::spec::JobSpec::default();
        GpolJob {
            name: std::ptr::null(),
            queue: std::ptr::null(),
            user: std::ptr::null(),
            priority_class: std::ptr::null(),
            has_priority: 0,
            priority: 0.0,
            request: GpolRequestKind::None as u32,
            amount: 0,
            mig_profile: std::ptr::null(),
            replicas: spec.replicas,
            has_min_replicas: 0,
            min_replicas: 0,
            gpu_mem: spec.gpu_mem,
            cpu_milli: spec.cpu_milli,
            mem: spec.mem,
            models: std::ptr::null(),
            n_models: 0,
            bursty: u8::from(spec.bursty),
            latency_critical: u8::from(spec.latency_critical),
            preemptible: u8::from(spec.preemptible),
            has_duration_ms: 0,
            duration_ms: 0,
            has_checkpoint_every_ms: 0,
            checkpoint_every_ms: 0,
            utilization: spec.utilization,
            labels: std::ptr::null(),
            n_labels: 0,
        }
    }
}

impl GpolStatus {
    /// The status's C name, e.g. `"GPOL_STATUS_OK"`.
    pub fn name(self) -> &'static str {
        match self {
            GpolStatus::Ok => "GPOL_STATUS_OK",
            GpolStatus::NullPointer => "GPOL_STATUS_NULL_POINTER",
            GpolStatus::InvalidUtf8 => "GPOL_STATUS_INVALID_UTF8",
            GpolStatus::InvalidArgument => "GPOL_STATUS_INVALID_ARGUMENT",
            GpolStatus::TooLarge => "GPOL_STATUS_TOO_LARGE",
            GpolStatus::CompileError => "GPOL_STATUS_COMPILE_ERROR",
            GpolStatus::Refused => "GPOL_STATUS_REFUSED",
            GpolStatus::Panic => "GPOL_STATUS_PANIC",
        }
    }
}
