//! The exported functions: the C API. Each checks its pointers, reads C's records
//! through [`crate::convert`], does its work on gpol's own types inside
//! [`guarded`] (so no panic crosses the boundary), and writes its results only once the
//! work is done. Every function that can fail returns a `GpolStatus` and, when its
//! `err` argument is not NULL, stores a `GpolError` there (NULL on success).
//!
//! Ownership: every object libgpol returns through an out-pointer (`GpolPolicy`,
//! `GpolDiagnostics`, `GpolCluster`, `GpolError`) is the caller's, freed with its
//! `gpol_*_free`, which accepts NULL. Strings and records read from an object (a rule's
//! name, a diagnostic) belong to it and live as long as it does.

// The module that C calls: exported symbols (`no_mangle`) and C's pointers.
#![allow(unsafe_code)]

use crate::cluster::{GpolCluster, NodeInput};
use crate::convert;
use crate::error::{Failure, GpolError, reserve};
use crate::guard::{guarded, quiet};
use crate::policy::{self, GpolDiagnostics, GpolPolicy};
use crate::types::{
    GPOL_MAX_NODES, GPOL_MAX_POLICY_BYTES, GpolAdmit, GpolDiagnostic, GpolEngine, GpolHistory, GpolJob, GpolNode,
    GpolNodeResult, GpolStatus,
};
use gpol_compiler::engine::EngineKind;
use std::ffi::{CStr, c_char};
use std::ptr;

// ---------------------------------------------------------------- plumbing

/// An out-pointer checked once: non-NULL and aligned, so writing through it later cannot
/// fail.
struct Out<T>(*mut T);

impl<T> Out<T> {
    /// # Safety
    /// `p` is NULL or valid for writes of a `T` for the rest of the call, and nothing
    /// else reads or writes it meanwhile.
    unsafe fn new(p: *mut T) -> Result<Out<T>, Failure> {
        if p.is_null() {
            Err(Failure::null())
        } else if !p.is_aligned() {
            Err(Failure::new(GpolStatus::NullPointer, "is not aligned for its type"))
        } else {
            Ok(Out(p))
        }
    }

    /// `None` for NULL (an out-pointer the caller may leave out).
    ///
    /// # Safety
    /// As for [`Out::new`].
    unsafe fn optional(p: *mut T) -> Result<Option<Out<T>>, Failure> {
        // SAFETY: the caller's promise is `new`'s.
        if p.is_null() { Ok(None) } else { unsafe { Out::new(p) }.map(Some) }
    }

    fn put(&self, value: T) {
        // SAFETY: `new` checked the pointer non-NULL and aligned, and its caller promised
        // it valid for writes of a `T`, unaliased, for the rest of the call; `write` does
        // not read or drop what was there (C's memory may be uninitialised).
        unsafe { self.0.write(value) }
    }
}

impl<T> Out<*mut T> {
    /// Clears an object out-pointer, so that it is NULL if the call fails.
    fn clear(&self) {
        self.put(ptr::null_mut());
    }
}

/// Stores `NULL` in an error out-pointer as a call starts.
///
/// # Safety
/// `err` is NULL or valid for writes of a pointer.
unsafe fn clear_error(err: *mut *mut GpolError) -> Option<Out<*mut GpolError>> {
    // SAFETY: the caller's promise is `Out::optional`'s. A misaligned `err` cannot be
    // reported anywhere: it is treated as NULL.
    let out = unsafe { Out::optional(err) }.ok().flatten()?;
    out.clear();
    Some(out)
}

/// Runs the body of an exported function that can fail: no panic escapes, and a failure
/// becomes its status and, if asked for, a `GpolError`.
///
/// # Safety
/// `err` is NULL or valid for writes of a pointer.
unsafe fn run(err: *mut *mut GpolError, body: impl FnOnce() -> Result<(), Failure>) -> GpolStatus {
    // SAFETY: the caller's promise.
    let err = unsafe { clear_error(err) };
    match guarded(body) {
        Ok(()) => GpolStatus::Ok,
        Err(failure) => {
            if let Some(err) = err {
                err.put(Box::into_raw(Box::new(GpolError::from_failure(&failure))));
            }
            failure.status
        }
    }
}

/// A handle C passes in, as a shared borrow for the call.
///
/// # Safety
/// `p` is NULL or a live handle of this type made by libgpol, not freed during the call.
unsafe fn handle<'a, T>(p: *const T, name: &str) -> Result<&'a T, Failure> {
    if p.is_null() {
        return Err(Failure::null().at(name));
    }
    if !p.is_aligned() {
        return Err(Failure::new(GpolStatus::NullPointer, "is not aligned for its type").at(name));
    }
    // SAFETY: a live handle made by `Box::into_raw` of a `T`; every use of one takes a
    // shared borrow (mutation goes through the cluster's mutex), so no `&mut` aliases it,
    // and it is not freed while the call runs.
    Ok(unsafe { &*p })
}

/// A NULL-tolerant read of a handle for getters: `None` for NULL or misaligned.
///
/// # Safety
/// As for [`handle`].
unsafe fn peek<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: the caller's promise is `handle`'s.
    unsafe { handle(p, "") }.ok()
}

/// # Safety
/// `p` is NULL or points to a `GpolJob` whose pointers are as `convert` says.
unsafe fn job_arg(p: *const GpolJob) -> Result<gpol_compiler::spec::JobSpec, Failure> {
    // SAFETY: the caller's promise is `slice`'s for one record.
    let job = unsafe { convert::slice(p, 1, 1) }.map_err(|e| e.at("job"))?;
    // SAFETY: the record's pointers are as `convert` requires, by the caller's promise.
    unsafe { convert::job(&job[0]) }.map_err(|e| e.at("job"))
}

fn engine_kind(engine: u32) -> Result<EngineKind, Failure> {
    match engine {
        e if e == GpolEngine::Jit as u32 => Ok(EngineKind::Jit),
        e if e == GpolEngine::Interp as u32 => Ok(EngineKind::Interp),
        e => Err(Failure::invalid(format!("{e} is not a GpolEngine")).at("engine")),
    }
}

/// Frees a handle made by `Box::into_raw`, if not NULL; a panic while dropping is
/// swallowed (free has no way to report it).
///
/// # Safety
/// `p` is NULL or a live handle of this type made by libgpol, used by no other call.
unsafe fn free<T>(p: *mut T) {
    if p.is_null() {
        return;
    }
    // SAFETY: a live handle made by `Box::into_raw(Box<T>)`, given back exactly once by
    // the caller's promise, and used by no other call, so no borrow of it is alive.
    let owned = unsafe { Box::from_raw(p) };
    quiet((), move || drop(owned));
}

fn version_c_str() -> &'static CStr {
    const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version holds a NUL"),
    };
    VERSION
}

fn or_null(s: Option<&CStr>) -> *const c_char {
    s.map_or(ptr::null(), CStr::as_ptr)
}

// ---------------------------------------------------------------- the library

/// The library's version, e.g. `"0.1.0"` (static; never freed).
#[unsafe(no_mangle)]
pub extern "C" fn gpol_version() -> *const c_char {
    version_c_str().as_ptr()
}

/// The hash of the record layout this library was built with. A `gpolc build` object
/// exports its own as `gpol_layout_hash` (see gpol_records.h): the two must be equal
/// before the object's entry points are called.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_schema_layout_hash() -> u64 {
    quiet(0, gpol_compiler::schema::layout_hash)
}

/// The C name of a `GpolStatus` value, e.g. `"GPOL_STATUS_TOO_LARGE"` (static), or
/// `"GPOL_STATUS_UNKNOWN"` for a value that is none.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_status_name(status: u32) -> *const c_char {
    const NAMES: [&CStr; 8] = [
        c"GPOL_STATUS_OK",
        c"GPOL_STATUS_NULL_POINTER",
        c"GPOL_STATUS_INVALID_UTF8",
        c"GPOL_STATUS_INVALID_ARGUMENT",
        c"GPOL_STATUS_TOO_LARGE",
        c"GPOL_STATUS_COMPILE_ERROR",
        c"GPOL_STATUS_REFUSED",
        c"GPOL_STATUS_PANIC",
    ];
    let name = usize::try_from(status).ok().and_then(|s| NAMES.get(s)).copied();
    name.unwrap_or(c"GPOL_STATUS_UNKNOWN").as_ptr()
}

// ---------------------------------------------------------------- errors

/// The status of an error (`GPOL_STATUS_OK` for NULL).
///
/// # Safety
/// `err` is NULL or a live `GpolError`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_error_status(err: *const GpolError) -> GpolStatus {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(GpolStatus::Panic, || unsafe { peek(err) }.map_or(GpolStatus::Ok, |e| e.status))
}

/// What went wrong, naming the argument or field at fault (`"nodes[2].mig[0]: no MIG
/// profile ..."`); owned by the error. NULL for NULL.
///
/// # Safety
/// `err` is NULL or a live `GpolError`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_error_message(err: *const GpolError) -> *const c_char {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(ptr::null(), || or_null(unsafe { peek(err) }.map(GpolError::message)))
}

/// Frees an error; NULL is ignored.
///
/// # Safety
/// `err` is NULL or a live `GpolError`, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_error_free(err: *mut GpolError) {
    // SAFETY: the caller's promise is `free`'s.
    unsafe { free(err) }
}

// ---------------------------------------------------------------- policies

/// Checks and compiles a policy from its text: `len` bytes at `text` (UTF-8, not
/// necessarily NUL-terminated; at most `GPOL_MAX_POLICY_BYTES`). `file_name` is what
/// diagnostics call the file (NULL: `"policy.gpol"`); `engine` is a `GpolEngine`.
///
/// On success `*out` is the policy. Whether or not it compiles, `*diags` (when `diags`
/// is not NULL) holds every diagnostic, errors and warnings; a policy that does not
/// check or compile is `GPOL_STATUS_COMPILE_ERROR`, with `*out` NULL. Text that is not
/// UTF-8 is a diagnostic too (E0031), as for a file. The policy may use the standard
/// library's modules (`use std.pack`), which are built in; it cannot import files.
///
/// # Safety
/// `text` is valid for reads of `len` bytes (or NULL with `len` 0); `file_name` is NULL
/// or a string; `out`, `diags` and `err` are NULL or valid for writes of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_compile(
    text: *const c_char,
    len: usize,
    file_name: *const c_char,
    engine: u32,
    out: *mut *mut GpolPolicy,
    diags: *mut *mut GpolDiagnostics,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `out` and `diags`.
        let out = unsafe { Out::new(out) }.map_err(|e| e.at("out"))?;
        out.clear();
        // SAFETY: as above.
        let diags = unsafe { Out::optional(diags) }.map_err(|e| e.at("diags"))?;
        if let Some(d) = &diags {
            d.clear();
        }
        // SAFETY: the caller's promise for `text`.
        let bytes = unsafe { convert::bytes(text, len, GPOL_MAX_POLICY_BYTES) }.map_err(|e| e.at("text"))?;
        // SAFETY: the caller's promise for `file_name`.
        let name = unsafe { convert::string(file_name) }.map_err(|e| e.at("file_name"))?;
        let kind = engine_kind(engine)?;
        let (policy, diagnostics) = policy::compile(name.as_deref().unwrap_or("policy.gpol"), bytes, kind);
        if let Some(d) = diags {
            d.put(Box::into_raw(Box::new(diagnostics)));
        }
        out.put(Box::into_raw(Box::new(policy?)));
        Ok(())
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// Frees a policy; NULL is ignored. Clusters made from it keep working.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`, used by no other call now or later.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_free(policy: *mut GpolPolicy) {
    // SAFETY: the caller's promise is `free`'s.
    unsafe { free(policy) }
}

/// The policy's name (`policy NAME`); owned by the policy. NULL for NULL.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_name(policy: *const GpolPolicy) -> *const c_char {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(ptr::null(), || or_null(unsafe { peek(policy) }.map(GpolPolicy::name)))
}

/// How many rules of a kind (a `GpolRuleKind`) the policy has; 0 for NULL or an unknown
/// kind.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_rule_count(policy: *const GpolPolicy, kind: u32) -> usize {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(0, || unsafe { peek(policy) }.map_or(0, |p| p.rule_count(kind)))
}

/// The name of rule `index` of a kind (a `GpolRuleKind`), in declaration order: what
/// `GpolAdmit.admit_rule` and `GpolNodeResult.filter` index. Owned by the policy; NULL
/// for NULL, an unknown kind or an index out of range.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_rule_name(policy: *const GpolPolicy, kind: u32, index: usize) -> *const c_char {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(ptr::null(), || or_null(unsafe { peek(policy) }.and_then(|p| p.rule_name(kind, index))))
}

/// The reason an admit or filter rule gives (`filter NAME "REASON" { … }`), or NULL
/// when it gives none (and for NULL, an unknown kind or an index out of range).
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_rule_reason(policy: *const GpolPolicy, kind: u32, index: usize) -> *const c_char {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(ptr::null(), || or_null(unsafe { peek(policy) }.and_then(|p| p.rule_reason(kind, index))))
}

/// How many topology levels the policy has (its own, or the defaults: `nvlink_domain`,
/// `rack`, `block`, `zone`); 0 for NULL.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_level_count(policy: *const GpolPolicy) -> usize {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(0, || unsafe { peek(policy) }.map_or(0, |p| p.levels().len()))
}

/// The name of topology level `index`, smallest first (what `GpolDomain.level` names);
/// owned by the policy. NULL for NULL or an index out of range.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_policy_level_name(policy: *const GpolPolicy, index: usize) -> *const c_char {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(ptr::null(), || or_null(unsafe { peek(policy) }.and_then(|p| p.levels().get(index)).map(|l| l.as_c_str())))
}

// ---------------------------------------------------------------- diagnostics

/// How many diagnostics there are (0 for NULL).
///
/// # Safety
/// `diags` is NULL or a live `GpolDiagnostics`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_diagnostics_count(diags: *const GpolDiagnostics) -> usize {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(0, || unsafe { peek(diags) }.map_or(0, GpolDiagnostics::len))
}

/// How many of them are errors (0 for NULL).
///
/// # Safety
/// `diags` is NULL or a live `GpolDiagnostics`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_diagnostics_error_count(diags: *const GpolDiagnostics) -> usize {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(0, || unsafe { peek(diags) }.map_or(0, GpolDiagnostics::errors))
}

/// Diagnostic `index`, owned by `diags`; NULL for NULL or an index out of range.
///
/// # Safety
/// `diags` is NULL or a live `GpolDiagnostics`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_diagnostic(diags: *const GpolDiagnostics, index: usize) -> *const GpolDiagnostic {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(ptr::null(), || unsafe { peek(diags) }.and_then(|d| d.get(index)).map_or(ptr::null(), ptr::from_ref))
}

/// Frees diagnostics; NULL is ignored.
///
/// # Safety
/// `diags` is NULL or a live `GpolDiagnostics`, used by no other call now or later.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_diagnostics_free(diags: *mut GpolDiagnostics) {
    // SAFETY: the caller's promise is `free`'s.
    unsafe { free(diags) }
}

// ---------------------------------------------------------------- nodes and jobs

/// A node with gpol's defaults: model `"gpu"`, no cards (80 GiB each when set),
/// exclusive, `max_clients` 1, 64 cores, 512 GiB; `name` NULL, to be set.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_node_defaults() -> GpolNode {
    GpolNode::defaults()
}

/// A job with gpol's defaults: no GPU, no CPU, no memory, one replica, not preemptible,
/// fully utilised, in the policy's only leaf queue; `name` NULL, to be set.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_job_defaults() -> GpolJob {
    GpolJob::defaults()
}

// ---------------------------------------------------------------- clusters

/// Makes a cluster running `policy` on `n_nodes` nodes (at most `GPOL_MAX_NODES`), node
/// `i` being result `i` of `gpol_cluster_filter_score`. The clock starts at 0. The
/// cluster keeps its own reference to the compiled policy. A node the scheduler
/// refuses (a duplicate name, a MIG layout that does not fit a card) fails the whole
/// call, naming it. The nodes' text (names, models, labels, topology, MIG profiles) is
/// measured before any of it is copied: over `GPOL_MAX_CLUSTER_BYTES` is
/// `GPOL_STATUS_TOO_LARGE`, naming the node that passes it, and so is memory libgpol
/// cannot get for the nodes.
///
/// # Safety
/// `policy` is NULL or a live `GpolPolicy`; `nodes` is valid for reads of `n_nodes`
/// records (or NULL with `n_nodes` 0) whose pointers are as `GpolNode` says; `out` and
/// `err` are NULL or valid for writes of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_new(
    policy: *const GpolPolicy,
    nodes: *const GpolNode,
    n_nodes: usize,
    out: *mut *mut GpolCluster,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `out`.
        let out = unsafe { Out::new(out) }.map_err(|e| e.at("out"))?;
        out.clear();
        // SAFETY: the caller's promise for `policy`.
        let policy = unsafe { handle(policy, "policy") }?;
        // SAFETY: the caller's promise for `nodes`.
        let records = unsafe { convert::slice(nodes, n_nodes, GPOL_MAX_NODES) }.map_err(|e| e.at("nodes"))?;
        // Every per-node limit may hold while the whole would not fit in memory: the
        // text is measured before any of it is copied.
        // SAFETY: each record's pointers are as `GpolNode` says, by the caller's promise.
        unsafe { convert::cluster_text(records) }?;
        let levels = &policy.compiled.program.levels;
        let mut inputs: Vec<NodeInput> = Vec::new();
        reserve(&mut inputs, records.len()).map_err(|e| e.at("nodes"))?;
        for (i, n) in records.iter().enumerate() {
            // SAFETY: each record's pointers are as `GpolNode` says, by the caller's promise.
            inputs.push(unsafe { convert::node(n, levels) }.map_err(|e| e.at(format!("[{i}]")).at("nodes"))?);
        }
        let cluster = GpolCluster::new(&policy.compiled, inputs)?;
        out.put(Box::into_raw(Box::new(cluster)));
        Ok(())
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// Frees a cluster; NULL is ignored.
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`, used by no other call now or later.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_free(cluster: *mut GpolCluster) {
    // SAFETY: the caller's promise is `free`'s.
    unsafe { free(cluster) }
}

/// How many nodes the cluster has (0 for NULL, or a cluster a call panicked in).
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_node_count(cluster: *const GpolCluster) -> usize {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(0, || unsafe { peek(cluster) }.and_then(|c| c.lock().ok()).map_or(0, |c| c.node_count()))
}

/// The cluster's clock, milliseconds since it was made (0 for NULL).
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_clock(cluster: *const GpolCluster) -> u64 {
    // SAFETY: the caller's promise is `peek`'s.
    quiet(0, || unsafe { peek(cluster) }.and_then(|c| c.lock().ok()).map_or(0, |c| c.now_ms()))
}

/// Moves the clock to `ms` milliseconds since the cluster was made: rules read it
/// (`cluster.time`, how long running jobs have run). It never goes back
/// (`GPOL_STATUS_INVALID_ARGUMENT`) nor past 100 years (`GPOL_STATUS_TOO_LARGE`).
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`; `err` is NULL or valid for writes of a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_set_clock(
    cluster: *mut GpolCluster,
    ms: u64,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `cluster`.
        let c = unsafe { handle(cluster.cast_const(), "cluster") }?;
        c.lock()?.set_clock(ms)
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// Ties the cluster's clock 0 to real time: `unix_ms` milliseconds after the Unix epoch
/// (by default clock 0 is Monday 1 January 2024, 00:00 in the policy's `timezone`).
/// `cluster.time_of_day`, `cluster.weekday` and quota windows read the local time of
/// the clock in the policy's time zone. A time outside the years 1 to 9999 is
/// `GPOL_STATUS_INVALID_ARGUMENT`.
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`; `err` is NULL or valid for writes of a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_set_clock_origin(
    cluster: *mut GpolCluster,
    unix_ms: i64,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `cluster`.
        let c = unsafe { handle(cluster.cast_const(), "cluster") }?;
        c.lock()?.set_clock_origin(unix_ms)
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// Starts a job as already running (one found running when the program starts, or
/// placed by it): one replica on each of the `n_node_names` named nodes (1 to the job's
/// replicas), cards chosen by best fit; quota is charged without checks. `history` may be
/// NULL (a job that has just started). Its id, for `gpol_cluster_complete`, goes to
/// `*job_id` when `job_id` is not NULL. A job that does not fit where it is started is
/// `GPOL_STATUS_REFUSED`, and nothing changes.
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`; `job` is NULL or a `GpolJob` whose
/// pointers are as it says; `node_names` is valid for reads of `n_node_names` strings
/// (or NULL with 0); `history` is NULL or a `GpolHistory`; `job_id` and `err` are NULL
/// or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_start(
    cluster: *mut GpolCluster,
    job: *const GpolJob,
    node_names: *const *const c_char,
    n_node_names: usize,
    history: *const GpolHistory,
    job_id: *mut u64,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `job_id`.
        let id_out = unsafe { Out::optional(job_id) }.map_err(|e| e.at("job_id"))?;
        // SAFETY: the caller's promise for `cluster`.
        let c = unsafe { handle(cluster.cast_const(), "cluster") }?;
        // SAFETY: the caller's promise for `job`.
        let spec = unsafe { job_arg(job) }?;
        let max = gpol_compiler::limits::MAX_REPLICAS as usize;
        // SAFETY: the caller's promise for `node_names`.
        let names = unsafe { convert::strings(node_names, n_node_names, max) }.map_err(|e| e.at("node_names"))?;
        // SAFETY: the caller's promise for `history`.
        let history = unsafe { convert::history(history) }.map_err(|e| e.at("history"))?;
        let id = c.lock()?.start(spec, &names, history)?;
        if let Some(out) = id_out {
            out.put(id as u64);
        }
        Ok(())
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// A job started with `gpol_cluster_start` ends: what it held is free, and its id names
/// nothing from now on (`GPOL_STATUS_INVALID_ARGUMENT` if it names no running job).
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`; `err` is NULL or valid for writes of a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_complete(
    cluster: *mut GpolCluster,
    job_id: u64,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `cluster`.
        let c = unsafe { handle(cluster.cast_const(), "cluster") }?;
        c.lock()?.complete(job_id)
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// Whether `job` may start at all now: the policy's admit rules (the first that refuses,
/// in declaration order), whether any node could ever hold it, and its queue's quota.
/// The job is not kept: asking changes nothing.
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`; `job` is NULL or a `GpolJob` whose
/// pointers are as it says; `out` is valid for writes of a `GpolAdmit`; `err` is NULL or
/// valid for writes of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_admit(
    cluster: *const GpolCluster,
    job: *const GpolJob,
    out: *mut GpolAdmit,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `out`.
        let out = unsafe { Out::new(out) }.map_err(|e| e.at("out"))?;
        // SAFETY: the caller's promise for `cluster`.
        let c = unsafe { handle(cluster, "cluster") }?;
        // SAFETY: the caller's promise for `job`.
        let spec = unsafe { job_arg(job) }?;
        out.put(c.lock()?.admit(spec)?);
        Ok(())
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

/// Every node's result for one replica of `job`: the policy's filters and scores (the
/// engine's fused call) and the exact fit, quota and service state, one result per node
/// in the order the nodes were given to `gpol_cluster_new`. `n_out` must be the
/// cluster's node count. The job is not kept: asking changes nothing. Admission is
/// `gpol_cluster_admit`'s (a job it refuses may still have nodes that fit).
///
/// # Safety
/// `cluster` is NULL or a live `GpolCluster`; `job` is NULL or a `GpolJob` whose
/// pointers are as it says; `out` is valid for writes of `n_out` records (or NULL with
/// 0); `err` is NULL or valid for writes of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpol_cluster_filter_score(
    cluster: *const GpolCluster,
    job: *const GpolJob,
    out: *mut GpolNodeResult,
    n_out: usize,
    err: *mut *mut GpolError,
) -> GpolStatus {
    let body = || {
        // SAFETY: the caller's promise for `cluster`.
        let c = unsafe { handle(cluster, "cluster") }?;
        let mut inner = c.lock()?;
        let n = inner.node_count();
        if n_out != n {
            return Err(Failure::invalid(format!("{n_out}, but the cluster has {n} nodes")).at("n_out"));
        }
        if n > 0 {
            // SAFETY: the caller's promise for `out`: valid for writes of `n_out` records.
            unsafe { Out::new(out) }.map_err(|e| e.at("out"))?;
        }
        // SAFETY: the caller's promise for `job`.
        let spec = unsafe { job_arg(job) }?;
        let results = inner.filter_score(spec)?;
        for (i, r) in results.into_iter().enumerate().take(n_out) {
            // SAFETY: `out` is non-NULL and aligned (checked above when `n > 0`, and
            // `results` is empty otherwise), valid for writes of `n_out` records by the
            // caller's promise, and `i < n_out`; raw writes, since C's memory may hold
            // anything, not valid `GpolNodeResult`s.
            unsafe { out.add(i).write(r) };
        }
        Ok(())
    };
    // SAFETY: the caller's promise for `err`.
    unsafe { run(err, body) }
}

// ---------------------------------------------------------------- for `gpolc build` objects

/// `exp2` as policies compute it (libm, the same in every engine): imported by
/// `gpolc build` objects.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_exp2(x: f64) -> f64 {
    gpol_compiler::ops::exp2(x)
}

/// The natural logarithm as policies compute it: imported by `gpolc build` objects.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_log(x: f64) -> f64 {
    gpol_compiler::ops::log(x)
}

/// `pow` as policies compute it: imported by `gpolc build` objects.
#[unsafe(no_mangle)]
pub extern "C" fn gpol_pow(x: f64, y: f64) -> f64 {
    gpol_compiler::ops::pow(x, y)
}
