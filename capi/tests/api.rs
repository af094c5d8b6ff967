//! The C API called from Rust, in this process, as C would call it: known answers for
//! diagnostics, and every kind of bad input answered with a status and a message naming
//! the argument or field — NULL pointers, misaligned pointers, invalid UTF-8, values out
//! of their domain, inputs over their limits (refused before anything is read or
//! allocated), refusals by the scheduler — and NULL accepted by every free and getter.

// Calls the exported functions through raw pointers, as C does.
#![allow(unsafe_code)]

use gpol::*;
use std::ffi::{CStr, CString, c_char};
use std::ptr::{self, NonNull};

const POLICY: &str = r#"policy api

queue org {
  queue a { limit 4 gpu }
  queue b { }
}

admit small "at most 8 cards a job" { job.whole_cards <= 8 gpu }
admit not_in_b_on_sundays "b sleeps" { job.queue.name != "b" or job.cpu < 1000 cpu }

filter h100_only_for_a "H100s are a's" { node.gpu_model != "h100" or job.queue.name == "a" }
filter labelled "pool" { node.labels["pool"] != "closed" }

score prefer_free tier 1 { node.free_gpu / node.cards }
score spread weight 2 { node.cpu_free / node.cpu }
"#;

fn text(s: &CStr) -> &str {
    s.to_str().expect("UTF-8")
}

/// # Safety
/// `p` is NULL or a string libgpol returned, alive.
unsafe fn read(p: *const c_char) -> Option<String> {
    // SAFETY: the caller's promise.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().expect("UTF-8").to_string())
}

/// An error's status and message, and frees it.
fn take_error(err: *mut GpolError) -> (GpolStatus, String) {
    // SAFETY: `err` is NULL or an error libgpol made, freed once here.
    unsafe {
        let r = (gpol_error_status(err), read(gpol_error_message(err)).unwrap_or_default());
        gpol_error_free(err);
        r
    }
}

#[derive(Debug)]
struct Policy(*mut GpolPolicy);

impl Drop for Policy {
    fn drop(&mut self) {
        // SAFETY: made by `gpol_policy_compile`, freed once.
        unsafe { gpol_policy_free(self.0) }
    }
}

fn compile(source: &str, engine: GpolEngine) -> Policy {
    let mut p = ptr::null_mut();
    let mut err = ptr::null_mut();
    // SAFETY: the text is valid for its length; the out-pointers are valid.
    let st = unsafe {
        gpol_policy_compile(
            source.as_ptr().cast(),
            source.len(),
            c"api.gpol".as_ptr(),
            engine as u32,
            &mut p,
            ptr::null_mut(),
            &mut err,
        )
    };
    assert_eq!(st, GpolStatus::Ok, "{:?}", take_error(err));
    Policy(p)
}

#[derive(Debug)]
struct Cluster(*mut GpolCluster);

impl Drop for Cluster {
    fn drop(&mut self) {
        // SAFETY: made by `gpol_cluster_new`, freed once.
        unsafe { gpol_cluster_free(self.0) }
    }
}

fn cluster(policy: &Policy, nodes: &[GpolNode]) -> Result<Cluster, (GpolStatus, String)> {
    let mut c = ptr::null_mut();
    let mut err = ptr::null_mut();
    // SAFETY: the nodes and their strings live across the call; out-pointers are valid.
    let st = unsafe { gpol_cluster_new(policy.0, nodes.as_ptr(), nodes.len(), &mut c, &mut err) };
    if st == GpolStatus::Ok {
        assert!(err.is_null());
        Ok(Cluster(c))
    } else {
        assert!(c.is_null(), "no cluster on failure");
        Err(take_error(err))
    }
}

fn node(name: &CStr, model: &CStr, cards: u32) -> GpolNode {
    GpolNode { name: name.as_ptr(), model: model.as_ptr(), cards, ..gpol_node_defaults() }
}

fn job(name: &CStr, queue: &CStr, cards: u32) -> GpolJob {
    GpolJob {
        name: name.as_ptr(),
        queue: queue.as_ptr(),
        request: GpolRequestKind::Whole as u32,
        amount: cards,
        ..gpol_job_defaults()
    }
}

fn admit(c: &Cluster, j: &GpolJob) -> Result<GpolAdmit, (GpolStatus, String)> {
    let mut out = GpolAdmit { admitted: false, admit_rule: 0, reason: GpolReason::None, for_good: false };
    let mut err = ptr::null_mut();
    // SAFETY: the job's strings live across the call; out-pointers are valid.
    let st = unsafe { gpol_cluster_admit(c.0, j, &mut out, &mut err) };
    if st == GpolStatus::Ok { Ok(out) } else { Err(take_error(err)) }
}

fn filter_score(c: &Cluster, j: &GpolJob) -> Result<Vec<GpolNodeResult>, (GpolStatus, String)> {
    // SAFETY: a live cluster.
    let n = unsafe { gpol_cluster_node_count(c.0) };
    let mut out = Vec::with_capacity(n);
    let mut err = ptr::null_mut();
    // SAFETY: `out` has room for `n` results, written by the call; the job lives.
    let st = unsafe { gpol_cluster_filter_score(c.0, j, out.as_mut_ptr(), n, &mut err) };
    if st != GpolStatus::Ok {
        return Err(take_error(err));
    }
    // SAFETY: the call wrote all `n` results.
    unsafe { out.set_len(n) };
    Ok(out)
}

// ---------------------------------------------------------------- diagnostics

#[test]
fn compile_errors_come_back_as_diagnostics_with_code_line_and_column() {
    let source = "policy bad\n\nfilter f { node.gpu_mem > 40 }\nscore s { nonsense }\n";
    let (mut p, mut d, mut err) = (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid text and out-pointers.
    let st = unsafe {
        gpol_policy_compile(source.as_ptr().cast(), source.len(), c"bad.gpol".as_ptr(), 0, &mut p, &mut d, &mut err)
    };
    assert_eq!(st, GpolStatus::CompileError);
    assert!(p.is_null());
    let (status, message) = take_error(err);
    assert_eq!(status, GpolStatus::CompileError);
    assert!(message.contains("does not compile"), "{message}");
    // SAFETY: `d` is live until freed at the end; its records and strings with it.
    unsafe {
        assert_eq!(gpol_diagnostics_count(d), 2);
        assert_eq!(gpol_diagnostics_error_count(d), 2);
        let first = &*gpol_diagnostic(d, 0);
        assert_eq!(read(first.code).as_deref(), Some("E0009"));
        assert_eq!(first.severity, GpolSeverity::Error);
        assert_eq!(read(first.file).as_deref(), Some("bad.gpol"));
        assert_eq!((first.line, first.column), (3, 12));
        assert_eq!(first.end_line, 3);
        assert!(first.end_column > first.column);
        let rendered = read(first.rendered).expect("rendered");
        assert!(rendered.contains("E0009") && rendered.contains("bad.gpol:3:12"), "{rendered}");
        assert!(!read(first.message).expect("a message").is_empty());
        let second = &*gpol_diagnostic(d, 1);
        assert_eq!(read(second.code).as_deref(), Some("E0004"));
        assert_eq!((second.line, second.column), (4, 11));
        assert!(gpol_diagnostic(d, 2).is_null());
        gpol_diagnostics_free(d);
    }
}

#[test]
fn warnings_come_back_with_a_policy_that_compiles() {
    // An eviction rule nothing proves cannot cycle: W0009.
    let source = "policy w\n\npreempt any { when true }\n";
    let (mut p, mut d) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid text and out-pointers; `err` may be NULL.
    let st = unsafe {
        gpol_policy_compile(source.as_ptr().cast(), source.len(), ptr::null(), 1, &mut p, &mut d, ptr::null_mut())
    };
    assert_eq!(st, GpolStatus::Ok);
    // SAFETY: both live until freed here.
    unsafe {
        assert_eq!(gpol_diagnostics_error_count(d), 0);
        assert!(gpol_diagnostics_count(d) >= 1);
        let w = &*gpol_diagnostic(d, 0);
        assert_eq!(w.severity, GpolSeverity::Warning);
        assert_eq!(read(w.code).as_deref(), Some("W0009"));
        assert_eq!(read(w.file).as_deref(), Some("policy.gpol"), "NULL names the file policy.gpol");
        gpol_diagnostics_free(d);
        gpol_policy_free(p);
    }
}

#[test]
fn policy_text_that_is_not_utf8_is_a_diagnostic() {
    let source = b"policy p\n# caf\xe9\n";
    let (mut p, mut d) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid bytes and out-pointers.
    let st = unsafe {
        gpol_policy_compile(source.as_ptr().cast(), source.len(), ptr::null(), 0, &mut p, &mut d, ptr::null_mut())
    };
    assert_eq!(st, GpolStatus::CompileError);
    // SAFETY: `d` is live until freed here.
    unsafe {
        let first = &*gpol_diagnostic(d, 0);
        assert_eq!(read(first.code).as_deref(), Some("E0031"));
        assert_eq!((first.line, first.column), (2, 6));
        gpol_diagnostics_free(d);
    }
}

#[test]
fn rule_and_level_names_by_kind_and_index() {
    let p = compile(POLICY, GpolEngine::Jit);
    // SAFETY: a live policy; the strings it returns live with it.
    unsafe {
        assert_eq!(read(gpol_policy_name(p.0)).as_deref(), Some("api"));
        assert_eq!(gpol_policy_rule_count(p.0, GpolRuleKind::Admit as u32), 2);
        assert_eq!(gpol_policy_rule_count(p.0, GpolRuleKind::Filter as u32), 2);
        assert_eq!(gpol_policy_rule_count(p.0, GpolRuleKind::Score as u32), 2);
        assert_eq!(gpol_policy_rule_count(p.0, GpolRuleKind::CardScore as u32), 0);
        assert_eq!(gpol_policy_rule_count(p.0, 17), 0);
        assert_eq!(read(gpol_policy_rule_name(p.0, GpolRuleKind::Filter as u32, 1)).as_deref(), Some("labelled"));
        assert_eq!(read(gpol_policy_rule_reason(p.0, GpolRuleKind::Filter as u32, 1)).as_deref(), Some("pool"));
        assert_eq!(read(gpol_policy_rule_name(p.0, GpolRuleKind::Score as u32, 0)).as_deref(), Some("prefer_free"));
        assert!(gpol_policy_rule_reason(p.0, GpolRuleKind::Score as u32, 0).is_null());
        assert!(gpol_policy_rule_name(p.0, GpolRuleKind::Admit as u32, 2).is_null());
        assert!(gpol_policy_rule_name(p.0, 9, 0).is_null());
        assert_eq!(gpol_policy_level_count(p.0), 4);
        assert_eq!(read(gpol_policy_level_name(p.0, 1)).as_deref(), Some("rack"));
        assert!(gpol_policy_level_name(p.0, 4).is_null());
    }
}

// ---------------------------------------------------------------- the happy path

#[test]
fn admit_filter_score_start_complete_and_the_clock() {
    for engine in [GpolEngine::Jit, GpolEngine::Interp] {
        let p = compile(POLICY, engine);
        let closed = [GpolLabel { key: c"pool".as_ptr(), value: c"closed".as_ptr() }];
        let mut n2 = node(c"n2", c"a100", 8);
        n2.labels = closed.as_ptr();
        n2.n_labels = 1;
        let mut n3 = node(c"n3", c"a100", 8);
        n3.cordoned = 1;
        let nodes = [node(c"n0", c"h100", 8), node(c"n1", c"a100", 4), n2, n3, node(c"n4", c"a100", 2)];
        let c = cluster(&p, &nodes).expect("a cluster");

        // An admit rule that reads only the job refuses for good; quota refuses for now.
        let big = job(c"big", c"a", 9);
        let a = admit(&c, &big).expect("asked");
        assert!(!a.admitted);
        assert_eq!((a.admit_rule, a.reason, a.for_good), (0, GpolReason::AdmitRule, true));
        let over_quota = job(c"over", c"a", 6);
        let a = admit(&c, &over_quota).expect("asked");
        assert_eq!((a.admitted, a.admit_rule, a.reason), (false, -1, GpolReason::Unschedulable));
        let fine = job(c"fine", c"b", 2);
        let a = admit(&c, &fine).expect("asked");
        assert_eq!((a.admitted, a.admit_rule, a.reason, a.for_good), (true, -1, GpolReason::None, false));

        // Every node answered, in order.
        let r = filter_score(&c, &fine).expect("results");
        let verdicts: Vec<GpolVerdict> = r.iter().map(|x| x.verdict).collect();
        use GpolVerdict::*;
        assert_eq!(verdicts, [Filtered, Fits, Filtered, Down, Fits]);
        assert_eq!(r[0].filter, 0, "h100_only_for_a");
        assert_eq!(r[2].filter, 1, "labelled");
        assert!(!r[0].feasible && r[0].rejected_by != GPOL_NO_RULE);
        assert!(r[1].feasible && r[1].rejected_by == GPOL_NO_RULE);
        assert_eq!(r[1].tiers[0], 1.0);
        assert_eq!((r[1].rank, r[4].rank, r[0].rank), (0, 1, -1), "equal tiers and scores: the earlier node first");

        // A job started on n1 takes two of its cards: n4 (all free) now ranks first.
        let mut id = u64::MAX;
        let on = [c"n1".as_ptr()];
        let history = GpolHistory { ran_ms: 60_000, since_checkpoint_ms: 0, evictions: 0 };
        let mut err = ptr::null_mut();
        // SAFETY: a live cluster; the job, names and history live across the call.
        let st = unsafe { gpol_cluster_start(c.0, &fine, on.as_ptr(), 1, &history, &mut id, &mut err) };
        assert_eq!(st, GpolStatus::Ok, "{:?}", take_error(err));
        let r = filter_score(&c, &fine).expect("results");
        assert_eq!((r[1].rank, r[4].rank), (1, 0));
        assert_eq!(r[1].tiers[0], 0.5);
        // Three more cards do not fit on n1 now.
        let three = job(c"three", c"b", 3);
        assert_eq!(filter_score(&c, &three).expect("results")[1].verdict, Full);
        assert_eq!(filter_score(&c, &three).expect("results")[4].verdict, TooSmall);

        // The clock moves forward only.
        // SAFETY: a live cluster; `err` is valid.
        unsafe {
            assert_eq!(gpol_cluster_set_clock(c.0, 5_000, ptr::null_mut()), GpolStatus::Ok);
            assert_eq!(gpol_cluster_clock(c.0), 5_000);
            assert_eq!(gpol_cluster_set_clock(c.0, 4_000, &mut err), GpolStatus::InvalidArgument);
            assert!(take_error(err).1.starts_with("ms: 4000 is before"));
            assert_eq!(gpol_cluster_set_clock(c.0, u64::MAX, &mut err), GpolStatus::TooLarge);
            take_error(err);
        }

        // Completing frees the cards; an id completes once.
        // SAFETY: a live cluster.
        unsafe {
            assert_eq!(gpol_cluster_complete(c.0, id, ptr::null_mut()), GpolStatus::Ok);
            assert_eq!(gpol_cluster_complete(c.0, id, &mut err), GpolStatus::InvalidArgument);
        }
        assert_eq!(take_error(err).1, format!("job_id: no running job has id {id}"));
        assert_eq!(filter_score(&c, &fine).expect("results")[1].rank, 0);

        // The policy may go before its clusters.
        drop(p);
        assert!(admit(&c, &fine).expect("asked").admitted);
    }
}

#[test]
fn starting_where_a_job_does_not_fit_is_refused_and_changes_nothing() {
    let p = compile(POLICY, GpolEngine::Interp);
    let c = cluster(&p, &[node(c"n0", c"a100", 2)]).expect("a cluster");
    let big = job(c"big", c"b", 4);
    let on = [c"n0".as_ptr()];
    let mut err = ptr::null_mut();
    // SAFETY: a live cluster and live inputs.
    let st = unsafe { gpol_cluster_start(c.0, &big, on.as_ptr(), 1, ptr::null(), ptr::null_mut(), &mut err) };
    assert_eq!(st, GpolStatus::Refused);
    assert_eq!(take_error(err).1, "job `big` does not fit on node `n0`");
    let unknown = [c"n9".as_ptr()];
    // SAFETY: as above.
    let st = unsafe { gpol_cluster_start(c.0, &big, unknown.as_ptr(), 1, ptr::null(), ptr::null_mut(), &mut err) };
    assert_eq!(st, GpolStatus::InvalidArgument);
    assert_eq!(take_error(err).1, "node_names[0]: the cluster has no node `n9`");
    let two = job(c"two", c"b", 2);
    assert_eq!(filter_score(&c, &two).expect("results")[0].verdict, GpolVerdict::Fits);
}

// ---------------------------------------------------------------- bad input

#[test]
fn null_pointers_are_a_status_naming_the_argument() {
    let p = compile(POLICY, GpolEngine::Interp);
    let mut err = ptr::null_mut();
    let mut out = ptr::null_mut();
    // SAFETY: every pointer is NULL or valid; libgpol must not read through the NULLs.
    unsafe {
        let st = gpol_policy_compile(ptr::null(), 5, ptr::null(), 0, &mut out, ptr::null_mut(), &mut err);
        assert_eq!(st, GpolStatus::NullPointer);
        assert_eq!(take_error(err), (GpolStatus::NullPointer, "text: is NULL".into()));
        let st = gpol_policy_compile(c"x".as_ptr(), 1, ptr::null(), 0, ptr::null_mut(), ptr::null_mut(), &mut err);
        assert_eq!(take_error(err), (GpolStatus::NullPointer, "out: is NULL".into()));
        assert_eq!(st, GpolStatus::NullPointer);
        let mut c = ptr::null_mut();
        let st = gpol_cluster_new(ptr::null(), ptr::null(), 0, &mut c, &mut err);
        assert_eq!(take_error(err), (GpolStatus::NullPointer, "policy: is NULL".into()));
        assert_eq!(st, GpolStatus::NullPointer);
        let st = gpol_cluster_new(p.0, ptr::null(), 3, &mut c, &mut err);
        assert_eq!(take_error(err), (GpolStatus::NullPointer, "nodes: is NULL".into()));
        assert_eq!(st, GpolStatus::NullPointer);
        // Without `err`, the status alone.
        assert_eq!(gpol_cluster_new(p.0, ptr::null(), 3, &mut c, ptr::null_mut()), GpolStatus::NullPointer);
    }
    let nameless = GpolNode { name: ptr::null(), ..gpol_node_defaults() };
    assert_eq!(
        cluster(&p, &[node(c"n0", c"a100", 1), nameless]).err(),
        Some((GpolStatus::NullPointer, "nodes[1].name: is NULL".into()))
    );
    let labels = [GpolLabel { key: c"k".as_ptr(), value: ptr::null() }];
    let mut labelled = node(c"n0", c"a100", 1);
    labelled.labels = labels.as_ptr();
    labelled.n_labels = 1;
    assert_eq!(
        cluster(&p, &[labelled]).err(),
        Some((GpolStatus::NullPointer, "nodes[0].labels[0].value: is NULL".into()))
    );

    let c = cluster(&p, &[node(c"n0", c"a100", 1)]).expect("a cluster");
    let mut a = GpolAdmit { admitted: false, admit_rule: 0, reason: GpolReason::None, for_good: false };
    // SAFETY: as above.
    unsafe {
        assert_eq!(gpol_cluster_admit(c.0, ptr::null(), &mut a, &mut err), GpolStatus::NullPointer);
        assert_eq!(take_error(err).1, "job: is NULL");
        let j = job(c"j", c"a", 1);
        assert_eq!(gpol_cluster_admit(ptr::null(), &j, &mut a, &mut err), GpolStatus::NullPointer);
        assert_eq!(take_error(err).1, "cluster: is NULL");
        assert_eq!(gpol_cluster_admit(c.0, &j, ptr::null_mut(), &mut err), GpolStatus::NullPointer);
        assert_eq!(take_error(err).1, "out: is NULL");
        assert_eq!(gpol_cluster_filter_score(c.0, &j, ptr::null_mut(), 1, &mut err), GpolStatus::NullPointer);
        assert_eq!(take_error(err).1, "out: is NULL");
        let nameless = GpolJob { name: ptr::null(), ..j };
        assert_eq!(gpol_cluster_admit(c.0, &nameless, &mut a, &mut err), GpolStatus::NullPointer);
        assert_eq!(take_error(err).1, "job.name: is NULL");
        let mig = GpolJob { request: GpolRequestKind::Mig as u32, amount: 0, ..j };
        assert_eq!(gpol_cluster_admit(c.0, &mig, &mut a, &mut err), GpolStatus::NullPointer);
        assert_eq!(take_error(err).1, "job.mig_profile: is NULL");
    }
}

#[test]
fn misaligned_pointers_are_refused() {
    let p = compile(POLICY, GpolEngine::Interp);
    let nodes = [node(c"n0", c"a100", 1), node(c"n1", c"a100", 1)];
    let misaligned = nodes.as_ptr().cast::<u8>().wrapping_add(1).cast::<GpolNode>();
    let (mut c, mut err) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: libgpol checks alignment before reading through `misaligned`.
    let st = unsafe { gpol_cluster_new(p.0, misaligned, 1, &mut c, &mut err) };
    assert_eq!(st, GpolStatus::NullPointer);
    assert_eq!(take_error(err).1, "nodes: is not aligned for its type");
}

#[test]
fn strings_that_are_not_utf8_are_a_status_naming_the_field() {
    let p = compile(POLICY, GpolEngine::Interp);
    let bad = CString::new(vec![b'o', b'k', 0xff]).expect("no NUL");
    let labels = [GpolLabel { key: c"k".as_ptr(), value: bad.as_ptr() }];
    let mut n = node(c"n0", c"a100", 1);
    n.labels = labels.as_ptr();
    n.n_labels = 1;
    assert_eq!(
        cluster(&p, &[node(c"n9", c"a100", 1), n]).err(),
        Some((GpolStatus::InvalidUtf8, "nodes[1].labels[0].value: not UTF-8 (at byte 2)".into()))
    );
    let (mut out, mut err) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers.
    let st =
        unsafe { gpol_policy_compile(c"policy p".as_ptr(), 8, bad.as_ptr(), 0, &mut out, ptr::null_mut(), &mut err) };
    assert_eq!(st, GpolStatus::InvalidUtf8);
    assert_eq!(take_error(err).1, "file_name: not UTF-8 (at byte 2)");
    let c = cluster(&p, &[node(c"n0", c"a100", 1)]).expect("a cluster");
    let j = GpolJob { user: bad.as_ptr(), ..job(c"j", c"a", 1) };
    assert_eq!(admit(&c, &j).err(), Some((GpolStatus::InvalidUtf8, "job.user: not UTF-8 (at byte 2)".into())));
}

#[test]
fn values_out_of_their_domain_are_invalid_arguments() {
    let p = compile(POLICY, GpolEngine::Interp);
    let (mut out, mut err) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: valid pointers.
    let st =
        unsafe { gpol_policy_compile(c"policy p".as_ptr(), 8, ptr::null(), 7, &mut out, ptr::null_mut(), &mut err) };
    assert_eq!(st, GpolStatus::InvalidArgument);
    assert_eq!(take_error(err).1, "engine: 7 is not a GpolEngine");

    let shared = GpolNode { sharing: 9, ..node(c"n0", c"a100", 1) };
    assert_eq!(
        cluster(&p, &[shared]).err(),
        Some((GpolStatus::InvalidArgument, "nodes[0].sharing: 9 is not a GpolSharing".into()))
    );
    let profiles = [c"1g.10gb".as_ptr(), c"9g.99gb".as_ptr()];
    let mut mig = GpolNode { sharing: GpolSharing::Mig as u32, ..node(c"m0", c"a100", 1) };
    mig.mig = profiles.as_ptr();
    mig.n_mig = 2;
    let (status, message) = cluster(&p, &[mig]).expect_err("refused");
    assert_eq!(status, GpolStatus::InvalidArgument);
    assert!(message.starts_with("nodes[0].mig[1]: no MIG profile `9g.99gb`; gpol knows 1g.10gb"), "{message}");

    let c = cluster(&p, &[node(c"n0", c"a100", 1)]).expect("a cluster");
    let base = job(c"j", c"a", 1);
    let cases: [(GpolJob, &str); 8] = [
        (GpolJob { request: 4, ..base }, "job.request: 4 is not a GpolRequestKind"),
        (
            GpolJob { request: GpolRequestKind::Fraction as u32, amount: 0, ..base },
            "job.amount: 0 milli-GPU: a fraction is 1 to 999 (a whole card is GPOL_REQUEST_KIND_WHOLE)",
        ),
        (
            GpolJob { request: GpolRequestKind::Fraction as u32, amount: 1000, ..base },
            "job.amount: 1000 milli-GPU: a fraction is 1 to 999 (a whole card is GPOL_REQUEST_KIND_WHOLE)",
        ),
        (GpolJob { amount: 0, ..base }, "job.amount: 0 cards: a whole-card request asks for 1 or more"),
        (GpolJob { replicas: 0, ..base }, "job.replicas: 0: a job has at least 1 replica"),
        (GpolJob { has_priority: 1, priority: f64::NAN, ..base }, "job.priority: NaN is not a finite number"),
        (GpolJob { utilization: 1.5, ..base }, "job.utilization: 1.5: a share is 0 to 1"),
        (GpolJob { has_min_replicas: 1, min_replicas: 2, ..base }, "job.min_replicas: 2: give 1 to replicas (1)"),
    ];
    for (j, want) in cases {
        assert_eq!(admit(&c, &j).err(), Some((GpolStatus::InvalidArgument, want.to_string())));
        assert_eq!(filter_score(&c, &j).err(), Some((GpolStatus::InvalidArgument, want.to_string())));
    }
    let mut results = [GpolNodeResult {
        verdict: GpolVerdict::Fits,
        filter: 0,
        rank: 0,
        feasible: false,
        rejected_by: 0,
        tiers: [0.0; 4],
        score: 0.0,
        faults: 0,
    }; 2];
    // SAFETY: `results` has room for 2.
    let st = unsafe { gpol_cluster_filter_score(c.0, &base, results.as_mut_ptr(), 2, &mut err) };
    assert_eq!(st, GpolStatus::InvalidArgument);
    assert_eq!(take_error(err).1, "n_out: 2, but the cluster has 1 nodes");
}

#[test]
fn inputs_over_their_limits_are_refused_before_they_are_read() {
    let p = compile(POLICY, GpolEngine::Interp);
    let (mut out, mut err) = (ptr::null_mut(), ptr::null_mut());
    // A pointer that must never be read: only its count is looked at.
    let dangling = NonNull::<GpolNode>::dangling().as_ptr();
    // SAFETY: libgpol refuses the count before reading through `dangling`.
    let st = unsafe { gpol_cluster_new(p.0, dangling, GPOL_MAX_NODES + 1, &mut out, &mut err) };
    assert_eq!(st, GpolStatus::TooLarge);
    assert_eq!(take_error(err).1, "nodes: 100001 items, at most 100000");
    let mut policy = ptr::null_mut();
    let text = NonNull::<c_char>::dangling().as_ptr();
    // SAFETY: as above, for the text's length.
    let st = unsafe {
        gpol_policy_compile(text, GPOL_MAX_POLICY_BYTES + 1, ptr::null(), 0, &mut policy, ptr::null_mut(), &mut err)
    };
    assert_eq!(st, GpolStatus::TooLarge);
    assert_eq!(take_error(err).1, "text: 16777217 items, at most 16777216");

    // A string is read up to the limit and no further.
    let long = CString::new(vec![b'x'; GPOL_MAX_STRING_BYTES + 1]).expect("no NUL");
    let n = GpolNode { name: long.as_ptr(), ..gpol_node_defaults() };
    assert_eq!(cluster(&p, &[n]).err(), Some((GpolStatus::TooLarge, "nodes[0].name: longer than 4096 bytes".into())));
    let longest = CString::new(vec![b'x'; GPOL_MAX_STRING_BYTES]).expect("no NUL");
    let n = GpolNode { name: longest.as_ptr(), ..gpol_node_defaults() };
    assert!(cluster(&p, &[n]).is_ok(), "a string of exactly the limit is read");

    let big = GpolNode { cards: 65, ..node(c"n0", c"a100", 1) };
    assert_eq!(cluster(&p, &[big]).err(), Some((GpolStatus::TooLarge, "nodes[0].cards: too large, at most 64".into())));
    let big = GpolNode { cpu_milli: 100_000_001, ..node(c"n0", c"a100", 1) };
    assert_eq!(
        cluster(&p, &[big]).err(),
        Some((GpolStatus::TooLarge, "nodes[0].cpu_milli: too large, at most 100000 cpu".into()))
    );
    let c = cluster(&p, &[node(c"n0", c"a100", 1)]).expect("a cluster");
    let j = GpolJob { amount: 65, ..job(c"j", c"a", 1) };
    assert_eq!(admit(&c, &j).err(), Some((GpolStatus::TooLarge, "job.amount: too large, at most 64".into())));
    let j = GpolJob { models: NonNull::dangling().as_ptr(), n_models: 65, ..job(c"j", c"a", 1) };
    assert_eq!(admit(&c, &j).err(), Some((GpolStatus::TooLarge, "job.models: 65 items, at most 64".into())));
    let j = GpolJob { labels: NonNull::dangling().as_ptr(), n_labels: GPOL_MAX_LIST + 1, ..job(c"j", c"a", 1) };
    assert_eq!(admit(&c, &j).err(), Some((GpolStatus::TooLarge, "job.labels: 1025 items, at most 1024".into())));
}

/// The most memory the process has held (Linux's `VmHWM`, bytes), where the system says.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn a_cluster_over_its_text_budget_is_refused_before_its_text_is_copied() {
    let p = compile(POLICY, GpolEngine::Interp);
    // 1,200 nodes of 1,024 labels of 4 KiB values: each count within its limit, 10 GB
    // together. One value and one label array serve every node, so the test holds a few
    // megabytes however much libgpol is offered.
    let value = CString::new(vec![b'v'; GPOL_MAX_STRING_BYTES]).expect("no NUL");
    let keys: Vec<CString> = (0..GPOL_MAX_LIST).map(|i| CString::new(format!("k{i:04}")).expect("no NUL")).collect();
    let labels: Vec<GpolLabel> = keys.iter().map(|k| GpolLabel { key: k.as_ptr(), value: value.as_ptr() }).collect();
    let names: Vec<CString> = (0..1200).map(|i| CString::new(format!("n{i:04}")).expect("no NUL")).collect();
    let nodes: Vec<GpolNode> = names
        .iter()
        .map(|n| GpolNode { labels: labels.as_ptr(), n_labels: labels.len(), ..node(n, c"a100", 8) })
        .collect();
    // Each node: its name and model, and 1,024 keys of 5 bytes and values of 4,096, every
    // string counted with GPOL_CLUSTER_BYTES_PER_STRING more.
    let per = GPOL_CLUSTER_BYTES_PER_STRING;
    let node_bytes = (5 + per) + (4 + per) + GPOL_MAX_LIST as u64 * ((5 + per) + (GPOL_MAX_STRING_BYTES as u64 + per));
    let first_over = GPOL_MAX_CLUSTER_BYTES / node_bytes;
    assert!(first_over < 1200, "the test offers more than the budget");
    let before = peak_memory();
    let started = std::time::Instant::now();
    let (status, message) = cluster(&p, &nodes).expect_err("refused");
    assert_eq!(status, GpolStatus::TooLarge, "{message}");
    assert_eq!(
        message,
        format!(
            "nodes[{first_over}]: the cluster's text (names, models, labels, topology, MIG profiles: each string's \
             bytes and {per} more) passes {GPOL_MAX_CLUSTER_BYTES} bytes (GPOL_MAX_CLUSTER_BYTES) with this node"
        )
    );
    // Refused before anything was copied: the process holds no more than it did (the
    // budget itself is 1 GiB), and measuring took no copying time.
    if let (Some(before), Some(after)) = (before, peak_memory()) {
        assert!(after.saturating_sub(before) < 128 << 20, "the peak grew from {before} to {after} bytes");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    // The same nodes, fewer of them, are a cluster: the budget, not the labels, refused.
    let c = cluster(&p, &nodes[..2]).expect("two such nodes are within the budget");
    // SAFETY: a live cluster.
    assert_eq!(unsafe { gpol_cluster_node_count(c.0) }, 2);
}

#[test]
fn a_cluster_over_its_budget_still_names_an_earlier_node_fault_it_reached_first() {
    // The budget is checked node by node as the text is measured: a string over its own
    // limit before the budget runs out is that string's error, naming its field.
    let p = compile(POLICY, GpolEngine::Interp);
    let long = CString::new(vec![b'x'; GPOL_MAX_STRING_BYTES + 1]).expect("no NUL");
    let labels = [GpolLabel { key: c"k".as_ptr(), value: long.as_ptr() }];
    let bad = GpolNode { labels: labels.as_ptr(), n_labels: 1, ..node(c"n1", c"a100", 1) };
    assert_eq!(
        cluster(&p, &[node(c"n0", c"a100", 1), bad]).err(),
        Some((GpolStatus::TooLarge, "nodes[1].labels[0].value: longer than 4096 bytes".into()))
    );
    let profiles = [c"1g.10gb".as_ptr(); 8];
    let mig = GpolNode { sharing: GpolSharing::Mig as u32, mig: profiles.as_ptr(), n_mig: 8, ..node(c"m", c"a100", 1) };
    assert_eq!(cluster(&p, &[mig]).err(), Some((GpolStatus::TooLarge, "nodes[0].mig: 8 items, at most 7".into())));
}

#[test]
fn the_scheduler_refuses_what_it_cannot_take() {
    let p = compile(POLICY, GpolEngine::Interp);
    let (status, message) = cluster(&p, &[node(c"n0", c"a100", 1), node(c"n0", c"h100", 1)]).expect_err("refused");
    assert_eq!(status, GpolStatus::Refused);
    assert_eq!(message, "nodes[1]: node `n0`: name: a node with this name already exists");
    let c = cluster(&p, &[node(c"n0", c"a100", 1)]).expect("a cluster");
    let j = job(c"j", c"nowhere", 1);
    let (status, message) = admit(&c, &j).expect_err("refused");
    assert_eq!(status, GpolStatus::Refused);
    assert!(message.starts_with("job: job `j`: the policy has no queue `nowhere`"), "{message}");
    let j = job(c"j", c"org", 1);
    assert_eq!(
        admit(&c, &j).expect_err("refused").1,
        "job: job `j`: `org` is not a leaf queue; jobs go to leaf queues"
    );
}

#[test]
fn cards_may_each_have_their_own_mig_layout() {
    let p = compile("policy mig\n", GpolEngine::Jit);
    let (halves, sevenths) = ([c"3g.40gb".as_ptr(); 2], [c"1g.10gb".as_ptr(); 7]);
    let both: Vec<_> = halves.iter().chain(&sevenths).copied().collect();
    let counts = [2u32, 7];
    let mut mixed = GpolNode { sharing: GpolSharing::Mig as u32, ..node(c"mixed", c"a100", 2) };
    (mixed.mig, mixed.n_mig, mixed.mig_per_card, mixed.n_mig_per_card) = (both.as_ptr(), 9, counts.as_ptr(), 2);
    let mut uniform = GpolNode { sharing: GpolSharing::Mig as u32, ..node(c"uniform", c"a100", 2) };
    (uniform.mig, uniform.n_mig) = (halves.as_ptr(), 2);
    let c = cluster(&p, &[mixed, uniform]).expect("a cluster");
    let small = GpolJob {
        request: GpolRequestKind::Mig as u32,
        amount: 0,
        mig_profile: c"1g.10gb".as_ptr(),
        ..job(c"small", c"a", 0)
    };
    let r = filter_score(&c, &small).expect("results");
    // Only the card cut in sevenths has a 1g.10gb instance.
    assert_eq!(r[0].verdict, GpolVerdict::Fits);
    assert_ne!(r[1].verdict, GpolVerdict::Fits);
    // Counts that do not match the cards or the instances are refused, naming the field.
    let one = [9u32];
    let wrong = GpolNode { mig_per_card: one.as_ptr(), n_mig_per_card: 1, ..mixed };
    assert_eq!(
        cluster(&p, &[wrong]).err(),
        Some((GpolStatus::InvalidArgument, "nodes[0].mig_per_card: 1 counts for 2 cards: give one per card".into()))
    );
    let short = [2u32, 6];
    let wrong = GpolNode { mig_per_card: short.as_ptr(), ..mixed };
    assert_eq!(
        cluster(&p, &[wrong]).err(),
        Some((
            GpolStatus::InvalidArgument,
            "nodes[0].mig_per_card: the counts add up to 8 instances, but `mig` has 9".into()
        ))
    );
}

#[test]
fn the_clock_origin_puts_the_time_of_day_in_the_policys_zone() {
    let night = "policy night\nsettings { timezone \"Europe/Berlin\" }\n\
                 admit night \"only at night\" { cluster.time_of_day >= 22h or cluster.time_of_day < 7h }\n";
    let p = compile(night, GpolEngine::Jit);
    let c = cluster(&p, &[node(c"n0", c"a100", 1)]).expect("a cluster");
    let j = job(c"j", c"a", 1);
    // Clock 0 is Monday 00:00 in Berlin by default: night.
    assert!(admit(&c, &j).expect("asked").admitted);
    // 2026-11-23T22:00Z is 23:00 in Berlin; twelve hours earlier it is 11:00.
    let late = 1_795_471_200_000i64;
    let mut err = ptr::null_mut();
    // SAFETY: a live cluster; `err` is valid.
    unsafe {
        assert_eq!(gpol_cluster_set_clock_origin(c.0, late - 12 * 3_600_000, ptr::null_mut()), GpolStatus::Ok);
    }
    assert!(!admit(&c, &j).expect("asked").admitted, "11:00 in Berlin");
    // SAFETY: as above.
    unsafe {
        assert_eq!(gpol_cluster_set_clock_origin(c.0, late, ptr::null_mut()), GpolStatus::Ok);
        assert_eq!(gpol_cluster_set_clock_origin(c.0, i64::MAX, &mut err), GpolStatus::InvalidArgument);
    }
    assert!(take_error(err).1.starts_with("unix_ms: "));
    assert!(admit(&c, &j).expect("asked").admitted, "23:00 in Berlin");
}

#[test]
fn frees_and_getters_accept_null() {
    // SAFETY: NULL is accepted by every function called here.
    unsafe {
        for _ in 0..2 {
            gpol_policy_free(ptr::null_mut());
            gpol_diagnostics_free(ptr::null_mut());
            gpol_cluster_free(ptr::null_mut());
            gpol_error_free(ptr::null_mut());
        }
        assert!(gpol_policy_name(ptr::null()).is_null());
        assert_eq!(gpol_policy_rule_count(ptr::null(), 0), 0);
        assert!(gpol_policy_rule_name(ptr::null(), 0, 0).is_null());
        assert!(gpol_policy_rule_reason(ptr::null(), 0, 0).is_null());
        assert_eq!(gpol_policy_level_count(ptr::null()), 0);
        assert!(gpol_policy_level_name(ptr::null(), 0).is_null());
        assert_eq!(gpol_diagnostics_count(ptr::null()), 0);
        assert_eq!(gpol_diagnostics_error_count(ptr::null()), 0);
        assert!(gpol_diagnostic(ptr::null(), 0).is_null());
        assert_eq!(gpol_cluster_node_count(ptr::null()), 0);
        assert_eq!(gpol_cluster_clock(ptr::null()), 0);
        assert_eq!(gpol_error_status(ptr::null()), GpolStatus::Ok);
        assert!(gpol_error_message(ptr::null()).is_null());
    }
}

#[test]
fn the_library_describes_itself() {
    // SAFETY: static strings.
    unsafe {
        assert_eq!(text(CStr::from_ptr(gpol_version())), env!("CARGO_PKG_VERSION"));
        assert_eq!(text(CStr::from_ptr(gpol_status_name(4))), "GPOL_STATUS_TOO_LARGE");
        assert_eq!(text(CStr::from_ptr(gpol_status_name(99))), "GPOL_STATUS_UNKNOWN");
    }
    for s in [GpolStatus::Ok, GpolStatus::Panic, GpolStatus::Refused] {
        // SAFETY: a static string.
        assert_eq!(text(unsafe { CStr::from_ptr(gpol_status_name(s as u32)) }), s.name());
    }
    assert_eq!(gpol_schema_layout_hash(), gpol_compiler::schema::layout_hash());
    assert_eq!(gpol_pow(2.0, 10.0), 1024.0);
    assert_eq!(gpol_exp2(3.0), 8.0);
    assert_eq!(gpol_log(1.0), 0.0);
    let n = gpol_node_defaults();
    assert!(n.name.is_null() && n.model.is_null());
    assert_eq!((n.max_clients, n.cpu_milli, n.card_mem), (1, 64_000, 80 << 30));
    let j = gpol_job_defaults();
    assert_eq!((j.replicas, j.utilization, j.request), (1, 1.0, GpolRequestKind::None as u32));
}
