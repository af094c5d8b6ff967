//! C's records read into gpol's own (`GpolNode` → `NodeSpec`, `GpolJob` → `JobSpec`):
//! every pointer checked for NULL and alignment, every count and string length checked
//! against its limit before anything is read or allocated, every string checked for
//! UTF-8, every enumeration value checked. Everything is copied: nothing returned
//! borrows C's memory beyond the call. A cluster's text is measured in place before any
//! of it is copied ([`cluster_text`]), and every allocation sized by a count the caller
//! gave asks for its room first ([`reserve`]): too much is a status, never an abort.
//!
//! What cannot be checked is the caller's promise, stated once for every function here:
//! a non-NULL pointer points to memory valid for reads of the count it comes with (or,
//! for a string, up to its NUL or `GPOL_MAX_STRING_BYTES + 1` bytes, whichever is first),
//! initialised, and not written by anyone while the call runs.

// The one module besides `ffi` that reads through C's pointers.
#![allow(unsafe_code)]

use crate::cluster::NodeInput;
use crate::error::{Failure, reserve};
use crate::types::{
    GPOL_MAX_LIST, GPOL_MAX_MIG_INSTANCES, GPOL_MAX_STRING_BYTES, GpolDomain, GpolJob, GpolLabel, GpolNode,
    GpolRequestKind, GpolSharing, GpolStatus,
};
use gpol_compiler::limits::{CLUSTER_BYTES_PER_STRING, MAX_ALLOWED_MODELS, MAX_CARDS_PER_NODE, MAX_CLUSTER_TEXT_BYTES};
use gpol_compiler::schema::{EnumKind, MIG_PROFILES};
use gpol_compiler::spec::domains_at;
use gpol_compiler::spec::{History, JobSpec, NodeSpec, Request, Sharing};
use std::ffi::c_char;

/// How many bytes the string at `p` has before its NUL, or `None` for NULL: read up to
/// the NUL and never past `GPOL_MAX_STRING_BYTES + 1` bytes, nothing copied.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string, or to at least
/// `GPOL_MAX_STRING_BYTES + 1` readable bytes (see the module's documentation).
pub unsafe fn length(p: *const c_char) -> Result<Option<usize>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    let mut len = 0;
    // SAFETY: by the caller's promise, every byte up to and including the NUL is
    // readable; the loop stops at the NUL, or after `GPOL_MAX_STRING_BYTES + 1` bytes,
    // which the promise also covers. `c_char` has alignment 1, and nothing writes the
    // string during the call, so the reads do not race.
    while unsafe { *p.add(len) } != 0 {
        len += 1;
        if len > GPOL_MAX_STRING_BYTES {
            return Err(Failure::too_large(format!("longer than {GPOL_MAX_STRING_BYTES} bytes")));
        }
    }
    Ok(Some(len))
}

/// A string, or `None` for NULL.
///
/// # Safety
/// As for [`length`].
pub unsafe fn string(p: *const c_char) -> Result<Option<String>, Failure> {
    // SAFETY: the caller's promise is `length`'s.
    let Some(len) = (unsafe { length(p) })? else { return Ok(None) };
    // SAFETY: `length` just read the `len` bytes before the NUL one by one, so they are
    // readable and initialised; the slice lives only until they are copied below, within
    // the call, and nothing writes them meanwhile.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Failure::new(GpolStatus::InvalidUtf8, format!("not UTF-8 (at byte {})", e.valid_up_to())))?;
    let mut owned = String::new();
    owned.try_reserve_exact(len).map_err(|e| Failure::too_large(format!("{len} bytes: {e}")))?;
    owned.push_str(text);
    Ok(Some(owned))
}

/// A string that may not be NULL.
///
/// # Safety
/// As for [`string`].
pub unsafe fn required(p: *const c_char) -> Result<String, Failure> {
    // SAFETY: the caller's promise is `string`'s.
    unsafe { string(p) }?.ok_or_else(Failure::null)
}

/// `n` records at `p`, at most `max` of them; `p` may be NULL when `n` is 0.
///
/// # Safety
/// `p` is NULL, or valid for reads of `n` initialised values of `T`, which nothing
/// writes while the returned slice is used; the caller uses it only within the call.
/// `T` must be valid for every bit pattern (the input records are: raw pointers,
/// integers and `double`s only).
pub unsafe fn slice<'a, T>(p: *const T, n: usize, max: usize) -> Result<&'a [T], Failure> {
    if n > max {
        return Err(Failure::too_large(format!("{n} items, at most {max}")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::null());
    }
    if !p.is_aligned() {
        return Err(Failure::new(GpolStatus::NullPointer, "is not aligned for its type"));
    }
    // SAFETY: `p` is non-NULL and aligned (checked above) and, by the caller's promise,
    // valid for reads of `n` initialised `T`s that nobody writes while the slice lives
    // (a shared borrow, so no `&mut` aliases it); `n <= max`, and every `max` used here is
    // small enough that `n * size_of::<T>()` is far below `isize::MAX`.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The policy text: `n` bytes at `p` (not necessarily NUL-terminated), at most `max`.
///
/// # Safety
/// As for [`slice()`].
pub unsafe fn bytes(p: *const c_char, n: usize, max: usize) -> Result<Vec<u8>, Failure> {
    // SAFETY: the caller's promise is `slice`'s; `u8` is valid for every bit pattern.
    let text = unsafe { slice(p.cast::<u8>(), n, max) }?;
    let mut out = Vec::new();
    reserve(&mut out, text.len())?;
    out.extend_from_slice(text);
    Ok(out)
}

/// `n` strings (none NULL) at `p`.
///
/// # Safety
/// As for [`slice()`], and each string as for [`string`].
pub unsafe fn strings(p: *const *const c_char, n: usize, max: usize) -> Result<Vec<String>, Failure> {
    // SAFETY: the caller's promise is `slice`'s; raw pointers are valid for every bit pattern.
    let ptrs = unsafe { slice(p, n, max) }?;
    let mut out = Vec::new();
    reserve(&mut out, ptrs.len())?;
    for (i, &s) in ptrs.iter().enumerate() {
        // SAFETY: each pointer is a string by the caller's promise.
        out.push(unsafe { required(s) }.map_err(|e| e.at(format!("[{i}]")))?);
    }
    Ok(out)
}

/// # Safety
/// As for [`slice()`], and each label's strings as for [`string`].
unsafe fn labels(p: *const GpolLabel, n: usize) -> Result<Vec<(String, String)>, Failure> {
    // SAFETY: the caller's promise is `slice`'s.
    let labels = unsafe { slice(p, n, GPOL_MAX_LIST) }?;
    let mut out = Vec::new();
    reserve(&mut out, labels.len())?;
    for (i, l) in labels.iter().enumerate() {
        let at = |e: Failure, field: &str| e.at(field).at(format!("[{i}]"));
        // SAFETY: the caller's promise covers the labels' strings.
        let key = unsafe { required(l.key) }.map_err(|e| at(e, "key"))?;
        // SAFETY: as above.
        let value = unsafe { required(l.value) }.map_err(|e| at(e, "value"))?;
        out.push((key, value));
    }
    Ok(out)
}

/// # Safety
/// As for [`slice()`], and each entry's strings as for [`string`].
unsafe fn topology(p: *const GpolDomain, n: usize) -> Result<Vec<(String, String)>, Failure> {
    // SAFETY: the caller's promise is `slice`'s.
    let domains = unsafe { slice(p, n, GPOL_MAX_LIST) }?;
    let mut out = Vec::new();
    reserve(&mut out, domains.len())?;
    for (i, d) in domains.iter().enumerate() {
        let at = |e: Failure, field: &str| e.at(field).at(format!("[{i}]"));
        // SAFETY: the caller's promise covers the entries' strings.
        let level = unsafe { required(d.level) }.map_err(|e| at(e, "level"))?;
        // SAFETY: as above.
        let name = unsafe { required(d.name) }.map_err(|e| at(e, "name"))?;
        out.push((level, name));
    }
    Ok(out)
}

fn flag(v: u8) -> bool {
    v != 0
}

/// A MIG profile's index by name.
fn mig_profile(name: &str) -> Result<u8, Failure> {
    EnumKind::MigProfile.variant(name).ok_or_else(|| {
        let known = MIG_PROFILES.join(", ");
        Failure::invalid(format!("no MIG profile `{}`; gpol knows {known}", gpol_compiler::diag::snippet(name)))
    })
}

/// The node's MIG layouts: `profiles` as every card's layout, or cut into one layout per
/// card by `counts`.
fn mig_layouts(profiles: Vec<u8>, counts: &[u32], cards: u32) -> Result<Vec<Vec<u8>>, Failure> {
    if counts.is_empty() {
        return Ok(if profiles.is_empty() { Vec::new() } else { vec![profiles] });
    }
    if counts.len() != cards as usize {
        let m = format!("{} counts for {cards} cards: give one per card", counts.len());
        return Err(Failure::invalid(m).at("mig_per_card"));
    }
    if let Some(i) = counts.iter().position(|&k| k == 0 || k as usize > GPOL_MAX_MIG_INSTANCES) {
        let m = format!("{} instances: a card has 1 to {GPOL_MAX_MIG_INSTANCES}", counts[i]);
        return Err(Failure::invalid(m).at(format!("[{i}]")).at("mig_per_card"));
    }
    let total: usize = counts.iter().map(|&k| k as usize).sum();
    if total != profiles.len() {
        let m = format!("the counts add up to {total} instances, but `mig` has {}", profiles.len());
        return Err(Failure::invalid(m).at("mig_per_card"));
    }
    let mut rest = profiles.as_slice();
    Ok(counts
        .iter()
        .map(|&k| {
            let (card, after) = rest.split_at(k as usize);
            rest = after;
            card.to_vec()
        })
        .collect())
}

/// The node's per-card MIG instance counts (empty: one layout for every card).
///
/// # Safety
/// Every pointer in `n` is as the module's documentation says.
unsafe fn mig_counts(n: &GpolNode) -> Result<&[u32], Failure> {
    // SAFETY: the record's pointer, covered by the caller's promise.
    unsafe { slice(n.mig_per_card, n.n_mig_per_card, MAX_CARDS_PER_NODE as usize) }.map_err(|e| e.at("mig_per_card"))
}

/// The most MIG profile names a node may give: one card's, or every card's.
fn most_mig(counts: &[u32]) -> usize {
    match counts.is_empty() {
        true => GPOL_MAX_MIG_INSTANCES,
        false => GPOL_MAX_MIG_INSTANCES * MAX_CARDS_PER_NODE as usize,
    }
}

/// What a string of `len` bytes counts against the cluster's text budget.
fn text_cost(len: Option<usize>) -> u64 {
    len.map_or(0, |l| l as u64 + CLUSTER_BYTES_PER_STRING)
}

/// What one node record's strings count against the cluster's text budget
/// (`GPOL_MAX_CLUSTER_BYTES`): measured in place, nothing copied. Errors are those
/// [`node`] gives for the same fields: a NULL, misaligned or oversized array, a string
/// longer than its limit.
///
/// # Safety
/// Every pointer in `n` is as the module's documentation says.
pub unsafe fn node_text(n: &GpolNode) -> Result<u64, Failure> {
    // SAFETY (for each read below): the pointers are the record's, covered by the
    // caller's promise; `length` and `slice` read them as `node` does, and copy nothing.
    let mut total = text_cost(unsafe { length(n.name) }.map_err(|e| e.at("name"))?);
    // SAFETY: as above.
    total += text_cost(unsafe { length(n.model) }.map_err(|e| e.at("model"))?);
    // SAFETY: as above.
    let counts = unsafe { mig_counts(n) }?;
    // SAFETY: as above.
    let mig = unsafe { slice(n.mig, n.n_mig, most_mig(counts)) }.map_err(|e| e.at("mig"))?;
    for (i, &p) in mig.iter().enumerate() {
        // SAFETY: as above.
        total += text_cost(unsafe { length(p) }.map_err(|e| e.at(format!("[{i}]")).at("mig"))?);
    }
    // SAFETY: as above.
    let labels = unsafe { slice(n.labels, n.n_labels, GPOL_MAX_LIST) }.map_err(|e| e.at("labels"))?;
    for (i, l) in labels.iter().enumerate() {
        let at = |e: Failure, field: &str| e.at(field).at(format!("[{i}]")).at("labels");
        // SAFETY: as above.
        total += text_cost(unsafe { length(l.key) }.map_err(|e| at(e, "key"))?);
        // SAFETY: as above.
        total += text_cost(unsafe { length(l.value) }.map_err(|e| at(e, "value"))?);
    }
    // SAFETY: as above.
    let domains = unsafe { slice(n.topology, n.n_topology, GPOL_MAX_LIST) }.map_err(|e| e.at("topology"))?;
    for (i, d) in domains.iter().enumerate() {
        let at = |e: Failure, field: &str| e.at(field).at(format!("[{i}]")).at("topology");
        // SAFETY: as above.
        total += text_cost(unsafe { length(d.level) }.map_err(|e| at(e, "level"))?);
        // SAFETY: as above.
        total += text_cost(unsafe { length(d.name) }.map_err(|e| at(e, "name"))?);
    }
    Ok(total)
}

/// Checks the text of a cluster's nodes against its budget before any of it is copied:
/// every per-item limit may hold while the whole would not fit in memory, and the copy
/// is what would run out. The failure names the node that passes the budget.
///
/// # Safety
/// Every record's pointers are as the module's documentation says.
pub unsafe fn cluster_text(nodes: &[GpolNode]) -> Result<u64, Failure> {
    let mut total = 0u64;
    for (i, n) in nodes.iter().enumerate() {
        let at = |e: Failure| e.at(format!("[{i}]")).at("nodes");
        // SAFETY: the caller's promise, record by record.
        total += unsafe { node_text(n) }.map_err(at)?;
        if total > MAX_CLUSTER_TEXT_BYTES {
            let what = format!(
                "the cluster's text (names, models, labels, topology, MIG profiles: each string's bytes and \
                 {CLUSTER_BYTES_PER_STRING} more) passes {MAX_CLUSTER_TEXT_BYTES} bytes (GPOL_MAX_CLUSTER_BYTES) \
                 with this node"
            );
            return Err(at(Failure::too_large(what)));
        }
    }
    Ok(total)
}

/// A node, its domains named by the policy's topology `levels`.
///
/// # Safety
/// Every pointer in `n` is as the module's documentation says.
pub unsafe fn node(n: &GpolNode, levels: &[String]) -> Result<NodeInput, Failure> {
    // SAFETY (for each read below): the pointers are the record's, covered by the
    // caller's promise.
    let name = unsafe { required(n.name) }.map_err(|e| e.at("name"))?;
    // SAFETY: as above.
    let model = unsafe { string(n.model) }.map_err(|e| e.at("model"))?.unwrap_or_else(|| "gpu".into());
    let sharing = match n.sharing {
        s if s == GpolSharing::Exclusive as u32 => Sharing::Exclusive,
        s if s == GpolSharing::Mig as u32 => Sharing::Mig,
        s if s == GpolSharing::Timeslice as u32 => Sharing::Timeslice,
        s if s == GpolSharing::Mps as u32 => Sharing::Mps,
        s => return Err(Failure::invalid(format!("{s} is not a GpolSharing")).at("sharing")),
    };
    // SAFETY: as above.
    let counts = unsafe { mig_counts(n) }?;
    // SAFETY: as above.
    let mig_names = unsafe { strings(n.mig, n.n_mig, most_mig(counts)) }.map_err(|e| e.at("mig"))?;
    let profiles = mig_names
        .iter()
        .enumerate()
        .map(|(i, m)| mig_profile(m).map_err(|e| e.at(format!("[{i}]")).at("mig")))
        .collect::<Result<Vec<u8>, Failure>>()?;
    let mig = mig_layouts(profiles, counts, n.cards)?;
    // SAFETY: as above.
    let topology = unsafe { topology(n.topology, n.n_topology) }.map_err(|e| e.at("topology"))?;
    // SAFETY: as above.
    let labels = unsafe { labels(n.labels, n.n_labels) }.map_err(|e| e.at("labels"))?;
    let spec = NodeSpec {
        name,
        model,
        cards: n.cards,
        card_mem: n.card_mem,
        sharing,
        mig,
        max_clients: n.max_clients,
        cpu_milli: n.cpu_milli,
        mem: n.mem,
        domains: domains_at(&topology, levels),
        labels,
    };
    if let Some(over) = spec.over_limit() {
        let field = match over.field {
            "gpu_mem" => "card_mem",
            "cpu" => "cpu_milli",
            other => other,
        };
        return Err(Failure::too_large(format!("too large, at most {}", over.max)).at(field));
    }
    Ok(NodeInput { spec, cordoned: flag(n.cordoned) })
}

/// A job.
///
/// # Safety
/// Every pointer in `j` is as the module's documentation says.
pub unsafe fn job(j: &GpolJob) -> Result<JobSpec, Failure> {
    // SAFETY (for each read below): the pointers are the record's, covered by the
    // caller's promise.
    let name = unsafe { required(j.name) }.map_err(|e| e.at("name"))?;
    // SAFETY: as above.
    let queue = unsafe { string(j.queue) }.map_err(|e| e.at("queue"))?;
    // SAFETY: as above.
    let user = unsafe { string(j.user) }.map_err(|e| e.at("user"))?;
    // SAFETY: as above.
    let priority_class = unsafe { string(j.priority_class) }.map_err(|e| e.at("priority_class"))?;
    // SAFETY: as above.
    let mig = unsafe { string(j.mig_profile) }.map_err(|e| e.at("mig_profile"))?;
    let priority = match flag(j.has_priority) {
        true if !j.priority.is_finite() => {
            return Err(Failure::invalid(format!("{} is not a finite number", j.priority)).at("priority"));
        }
        true => Some(j.priority),
        false => None,
    };
    let amount_zero = |kind: &str| match j.amount {
        0 => Ok(()),
        a => Err(Failure::invalid(format!("{a}, but a {kind} request has no amount: give 0")).at("amount")),
    };
    let no_profile =
        |kind: &str| match &mig {
            None => Ok(()),
            Some(_) => Err(Failure::invalid(format!("set, but the request is {kind}, not GPOL_REQUEST_KIND_MIG"))
                .at("mig_profile")),
        };
    let max_cards = gpol_compiler::limits::MAX_CARDS_PER_NODE;
    let request = match j.request {
        r if r == GpolRequestKind::None as u32 => {
            amount_zero("CPU-only")?;
            no_profile("GPOL_REQUEST_KIND_NONE")?;
            Request::None
        }
        r if r == GpolRequestKind::Whole as u32 => {
            no_profile("GPOL_REQUEST_KIND_WHOLE")?;
            match j.amount {
                0 => return Err(Failure::invalid("0 cards: a whole-card request asks for 1 or more").at("amount")),
                a if a > max_cards => {
                    return Err(Failure::too_large(format!("too large, at most {max_cards}")).at("amount"));
                }
                a => Request::Whole(a),
            }
        }
        r if r == GpolRequestKind::Fraction as u32 => {
            no_profile("GPOL_REQUEST_KIND_FRACTION")?;
            match j.amount {
                a @ 1..=999 => Request::Fraction(a),
                a => {
                    let what =
                        format!("{a} milli-GPU: a fraction is 1 to 999 (a whole card is GPOL_REQUEST_KIND_WHOLE)");
                    return Err(Failure::invalid(what).at("amount"));
                }
            }
        }
        r if r == GpolRequestKind::Mig as u32 => {
            amount_zero("MIG")?;
            let Some(profile) = &mig else {
                return Err(Failure::null().at("mig_profile"));
            };
            Request::Mig(mig_profile(profile).map_err(|e| e.at("mig_profile"))?)
        }
        r => return Err(Failure::invalid(format!("{r} is not a GpolRequestKind")).at("request")),
    };
    if j.replicas == 0 {
        return Err(Failure::invalid("0: a job has at least 1 replica").at("replicas"));
    }
    let min_replicas = match flag(j.has_min_replicas) {
        true if j.min_replicas == 0 || j.min_replicas > j.replicas => {
            let what = format!("{}: give 1 to replicas ({})", j.min_replicas, j.replicas);
            return Err(Failure::invalid(what).at("min_replicas"));
        }
        true => Some(j.min_replicas),
        false => None,
    };
    if !(j.utilization.is_finite() && (0.0..=1.0).contains(&j.utilization)) {
        return Err(Failure::invalid(format!("{}: a share is 0 to 1", j.utilization)).at("utilization"));
    }
    // SAFETY: as above.
    let models = unsafe { strings(j.models, j.n_models, MAX_ALLOWED_MODELS as usize) }.map_err(|e| e.at("models"))?;
    // SAFETY: as above.
    let labels = unsafe { labels(j.labels, j.n_labels) }.map_err(|e| e.at("labels"))?;
    let spec = JobSpec {
        name,
        queue,
        user,
        priority_class,
        priority,
        request,
        replicas: j.replicas,
        min_replicas,
        gpu_mem: j.gpu_mem,
        cpu_milli: j.cpu_milli,
        mem: j.mem,
        models,
        bursty: flag(j.bursty),
        latency_critical: flag(j.latency_critical),
        preemptible: flag(j.preemptible),
        duration_ms: flag(j.has_duration_ms).then_some(j.duration_ms),
        checkpoint_every_ms: flag(j.has_checkpoint_every_ms).then_some(j.checkpoint_every_ms),
        utilization: j.utilization,
        labels,
    };
    if let Some(over) = spec.over_limit() {
        let field = match over.field {
            "cards" => "amount",
            "cpu" => "cpu_milli",
            "models" => "n_models",
            "duration" => "duration_ms",
            "checkpoint" => "checkpoint_every_ms",
            other => other,
        };
        return Err(Failure::too_large(format!("too large, at most {}", over.max)).at(field));
    }
    Ok(spec)
}

/// A running job's history; NULL: none.
///
/// # Safety
/// `p` is NULL or points to a readable, aligned `GpolHistory`.
pub unsafe fn history(p: *const crate::types::GpolHistory) -> Result<History, Failure> {
    // SAFETY: the caller's promise is `slice`'s for one record.
    let h = match unsafe { slice(p, usize::from(!p.is_null()), 1) }?.first() {
        Some(h) => *h,
        None => return Ok(History::default()),
    };
    if h.since_checkpoint_ms > h.ran_ms {
        let what = format!("{} is more than ran_ms ({})", h.since_checkpoint_ms, h.ran_ms);
        return Err(Failure::invalid(what).at("since_checkpoint_ms"));
    }
    let max = gpol_compiler::limits::MAX_CLOCK_MS;
    if h.ran_ms > max {
        return Err(Failure::too_large(format!("too large, at most {max} ms")).at("ran_ms"));
    }
    Ok(History { ran_ms: h.ran_ms, since_checkpoint_ms: h.since_checkpoint_ms, evictions: h.evictions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_counts_each_string_with_its_overhead() {
        let labels = [GpolLabel { key: c"zone".as_ptr(), value: c"a".as_ptr() }];
        let n = GpolNode { name: c"n0".as_ptr(), labels: labels.as_ptr(), n_labels: 1, ..GpolNode::defaults() };
        let per = CLUSTER_BYTES_PER_STRING;
        // SAFETY: the record's strings live across the call.
        assert_eq!(unsafe { node_text(&n) }, Ok((2 + per) + (4 + per) + (1 + per)), "a NULL model counts nothing");
        // SAFETY: as above.
        assert_eq!(unsafe { cluster_text(&[n, n]) }, Ok(2 * (7 + 3 * per)));
    }
}
