//! Binds in flight at once never double-allocate. kube-scheduler binds asynchronously:
//! while one pod's bind waits on the API server, the next pods are filtered, scored
//! and bound, so the extender's `bind` must reserve a pod's cards and quota under its
//! lock before it writes them (`Cluster::reserve`) and give them back if the Binding
//! fails. Here a served extender watches and binds through a loopback API server
//! emulation that audits every Binding (cards disjoint per node, queues within their
//! limits), driven by an emulation of kube-scheduler's schedule-one loop; the pods run
//! a short while and are deleted, so cards and quota are taken and freed all along.

#[path = "support/apiserver.rs"]
mod apiserver;
#[path = "support/kube_scheduler.rs"]
mod kube_scheduler;
#[path = "support/rng.rs"]
mod rng;
#[path = "support/workload.rs"]
mod workload;

use apiserver::{ApiServer, Audit, EventType, Kind, cards_of, node_of};
use axum::body::Bytes;
use axum::http::StatusCode;
use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::extender::{ExtenderBindingResult, ExtenderFilterResult, HostPriority, decode};
use gpol_kubernetes::served::Extender;
use gpol_kubernetes::server::{self, Options};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube_scheduler::{KubeScheduler, Stats};
use rng::Rng;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workload::{LIMITS, NS, POLICY, kube_client, pod, wait_for};

const SEED: u64 = 20_240_611;

/// An API server, and an extender watching it and binding through it, served on loopback.
struct Setup {
    api: Arc<ApiServer>,
    ext: Arc<Extender>,
    /// The extender's address.
    addr: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _policy: tempfile::TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn node_name(i: usize) -> String {
    format!("node-{i}")
}

/// `nodes` nodes of `gpus` cards, and the extender ready (nodes and pods listed).
async fn setup(nodes: usize, gpus: u32, options: Options) -> Setup {
    let api = Arc::new(ApiServer::start(&LIMITS, SEED).await);
    for i in 0..nodes {
        api.add_node(&node_name(i), gpus);
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("binds.gpol");
    std::fs::write(&path, POLICY).expect("the policy written");
    let ext = Arc::new(Extender::load(path, EngineKind::Jit).expect("the policy loads"));
    let client = kube_client(&api.url(), None);
    ext.connect(client.clone());
    let watch = tokio::spawn(gpol_kubernetes::api::watch(client, Arc::clone(&ext)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("the extender's address");
    let served = Arc::clone(&ext);
    let serve = tokio::spawn(async move {
        server::serve(served, listener, options, std::future::pending()).await.expect("the extender serves");
    });
    wait_for("the extender to list nodes and pods", Duration::from_secs(20), || ext.is_ready()).await;
    // What it holds is in its metrics from the watch alone, before any request.
    let gauge = format!("gpol_extender_nodes {nodes}");
    assert!(ext.metrics.render().lines().any(|l| l == gauge), "no `{gauge}` in\n{}", ext.metrics.render());
    Setup { api, ext, addr, tasks: vec![watch, serve], _policy: dir }
}

fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().expect("the API server gives pods a UID").to_string()
}

/// Sends kube-scheduler's bind for the pod, as kube-scheduler does: the answer's
/// `Error`, or why there was no answer.
async fn bind(addr: SocketAddr, name: &str, uid: &str, node: &str) -> Result<String, String> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let args = json!({"PodName": name, "PodNamespace": NS, "PodUID": uid, "Node": node});
    let request = hyper::Request::post(format!("http://{addr}/gpol/bind"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(args.to_string())))
        .expect("a request");
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    let code = response.status();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    if code != StatusCode::OK {
        return Err(format!("HTTP {code}: {}", String::from_utf8_lossy(&body)));
    }
    let answer: ExtenderBindingResult = decode(&body).map_err(|e| format!("the answer does not decode: {e}"))?;
    Ok(answer.error)
}

/// The cards a bound pod holds, from the API server.
fn cards(api: &ApiServer, name: &str) -> BTreeSet<u32> {
    let pod = api.pod(NS, name).expect("the pod exists");
    cards_of(&pod).expect("the pod has cards").into_iter().collect()
}

/// The kubelets: a pod seen bound starts, runs a random short time and is deleted
/// through the API (grace period 0, as a finished pod's owner deletes it).
async fn kubelets(api: Arc<ApiServer>, run_ms: (u64, u64), seed: u64) {
    let pods: Api<Pod> = Api::namespaced(kube_client(&api.url(), None), NS);
    let mut changes = api.subscribe();
    let mut rng = Rng::new(seed);
    let mut started = HashSet::new();
    while let Some(change) = changes.recv().await {
        if change.kind != Kind::Pod || change.event == EventType::Deleted || node_of(&change.object).is_none() {
            continue;
        }
        let name = change.object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if !started.insert(name.clone()) {
            continue;
        }
        let (api, pods) = (Arc::clone(&api), pods.clone());
        let runs = rng.millis(run_ms.0, run_ms.1);
        tokio::spawn(async move {
            api.set_running(NS, &name);
            tokio::time::sleep(runs).await;
            pods.delete(&name, &DeleteParams::default().grace_period(0)).await.expect("the pod is deleted");
        });
    }
}

/// Submits `count` pods of 1, 2 or 4 GPUs in queues a and b, a few at a time.
async fn submit(api: Arc<ApiServer>, count: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for i in 0..count {
        let gpus = *rng.pick(&[1, 2, 4]);
        let queue = *rng.pick(&["a", "b"]);
        api.create_pod(pod(&format!("p{i:04}"), queue, gpus));
        if i % 10 == 9 {
            tokio::time::sleep(rng.millis(5, 25)).await;
        }
    }
}

/// Schedules `count` pods through the emulated kube-scheduler and the extender, each
/// run by the kubelets and deleted, until none is left; what the scheduler did and what
/// the audit found.
async fn run_workload(s: &Setup, count: usize) -> (Stats, Audit) {
    // Bindings take up to 5 ms at the API server, and each binding cycle waits up to
    // 10 ms before its bind: several binds are in flight while the next pods are
    // filtered and scored.
    s.api.set_binding_delay(0, 5);
    let config = kube_scheduler::Config { seed: SEED, ..kube_scheduler::Config::new(s.addr) };
    let scheduler = KubeScheduler::start(&s.api, config);
    let kubelets = tokio::spawn(kubelets(Arc::clone(&s.api), (10, 60), SEED + 1));
    submit(Arc::clone(&s.api), count, SEED + 2).await;
    let api = Arc::clone(&s.api);
    let finished = tokio::time::timeout(Duration::from_secs(90), async move {
        while api.pod_count() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    kubelets.abort();
    let (stats, audit) = (scheduler.stats(), s.api.audit());
    assert!(
        finished.is_ok(),
        "{} pods were never bound and run; {} pending at the scheduler\n{stats:#?}\nviolations: {:#?}",
        s.api.pod_count(),
        scheduler.pending(),
        audit.violations
    );
    (stats, audit)
}

/// A bind the policy refused when reserving (cards or quota taken meanwhile).
fn refused(error: &&String) -> bool {
    error.contains("may not start on")
}

fn summary(count: usize, took: Duration, stats: &Stats, audit: &Audit) -> String {
    let cards = stats.bind_errors.iter().filter(|e| refused(e) && e.contains("free capacity")).count();
    let quota = stats.bind_errors.iter().filter(|e| refused(e) && e.contains("limit")).count();
    format!(
        "{count} pods in {:.1} s: {} scheduling cycles ({} unschedulable), {} filters, {} prioritizes; \
         {} binds, {} bound, {} retried after a bind error ({cards} for cards, {quota} for quota); \
         at most {} binds in flight at once, {} to one node ({} Bindings at the API server)",
        took.as_secs_f64(),
        stats.cycles,
        stats.unschedulable,
        stats.filters,
        stats.prioritizes,
        stats.binds,
        stats.bound,
        stats.bind_errors.len(),
        stats.max_binds_in_flight,
        stats.max_binds_in_flight_to_a_node,
        audit.max_bindings_in_flight,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_binds_never_double_allocate() {
    const PODS: usize = 1000;
    let s = setup(8, 8, Options::default()).await;
    let started = Instant::now();
    let (stats, audit) = run_workload(&s, PODS).await;
    println!("{}", summary(PODS, started.elapsed(), &stats, &audit));

    assert_eq!(audit.violations, Vec::<String>::new(), "the audit found cards or quota given twice");
    assert_eq!(audit.bindings.len(), PODS, "every pod is bound");
    let twice: Vec<_> = audit.bindings.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty() && audit.rebinds.is_empty(), "bound more than once: {twice:?} {:?}", audit.rebinds);
    assert_eq!(stats.bound, PODS as u64, "each pod's bind answered without an error once");
    assert_eq!(audit.unexpected, Vec::<String>::new(), "requests the API server does not serve");
    assert_eq!(stats.bad_answers, Vec::<String>::new(), "answers kube-scheduler would reject");
    assert_eq!(stats.errors, Vec::<String>::new(), "failed scheduling cycles");
    let other: Vec<_> = stats.bind_errors.iter().filter(|e| !refused(e)).collect();
    assert!(other.is_empty(), "binds failed for another reason than the policy refusing them: {other:#?}");
    // The race exercised: binds overlapped, on one node too.
    assert!(stats.max_binds_in_flight >= 4, "binds never overlapped enough: at most {}", stats.max_binds_in_flight);
    assert!(stats.max_binds_in_flight_to_a_node >= 2, "binds to one node never overlapped");
    // Nothing stays reserved once every pod is gone.
    wait_for("the extender to see every pod deleted", Duration::from_secs(10), || {
        let c = s.ext.cluster();
        c.pod_count() == 0 && c.assumed_count() == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_binds_at_once_for_two_places() {
    let s = setup(1, 8, Options::default()).await;
    // Every Binding waits 50 ms: the three binds are in flight together.
    s.api.set_binding_delay(50, 50);
    let names = ["x", "y", "z"];
    let uids: Vec<String> = names.iter().map(|n| uid(&s.api.create_pod(pod(n, "a", 4)))).collect();
    let binds = names.iter().zip(&uids).map(|(n, u)| bind(s.addr, n, u, "node-0"));
    let answers = futures::future::join_all(binds).await;

    let errors: Vec<String> = answers.into_iter().map(|a| a.expect("an answer")).collect();
    let bound: Vec<&str> = names.iter().zip(&errors).filter(|(_, e)| e.is_empty()).map(|(n, _)| *n).collect();
    assert_eq!(bound.len(), 2, "two of three 4-GPU pods fit on 8 cards: {errors:?}");
    let refused = errors.iter().find(|e| !e.is_empty()).expect("one refused");
    assert!(refused.contains("may not start on `node-0` now: not enough free capacity"), "{refused}");
    let (first, second) = (cards(&s.api, bound[0]), cards(&s.api, bound[1]));
    assert_eq!((first.len(), second.len()), (4, 4));
    assert!(first.is_disjoint(&second), "{first:?} and {second:?}");
    let loser = names.iter().find(|n| !bound.contains(n)).expect("the refused pod");
    let unbound = s.api.pod(NS, loser).expect("the pod");
    assert!(node_of(&unbound).is_none() && cards_of(&unbound).is_err(), "refused before any write: {unbound}");
    assert_eq!(s.ext.cluster().pod_count(), 2);
    assert_eq!(s.api.audit().violations, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_binding_gives_the_cards_back() {
    for code in [StatusCode::INTERNAL_SERVER_ERROR, StatusCode::CONFLICT] {
        let s = setup(1, 8, Options::default()).await;
        let x = uid(&s.api.create_pod(pod("x", "a", 8)));
        let y = uid(&s.api.create_pod(pod("y", "b", 8)));
        s.api.fail_next_binding(NS, "x", code);
        let e = bind(s.addr, "x", &x, "node-0").await.expect("an answer");
        assert!(e.contains("cannot bind it to node-0"), "{code}: {e}");
        assert!(node_of(&s.api.pod(NS, "x").expect("the pod")).is_none(), "{code}: x is not bound");
        {
            let c = s.ext.cluster();
            assert_eq!((c.pod_count(), c.assumed_count()), (0, 0), "{code}: x's reservation is given back");
        }
        // The node's eight cards are free again: y takes them all.
        assert_eq!(bind(s.addr, "y", &y, "node-0").await.expect("an answer"), "", "{code}");
        assert_eq!(cards(&s.api, "y"), (0..8).collect(), "{code}");
        assert_eq!(s.api.audit().violations, Vec::<String>::new(), "{code}");
    }
}

/// The checks can fail: the audit records cards given twice on a node and a queue above
/// its limit (the API server itself refuses neither), and a second Binding is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_catches_cards_and_quota_given_twice() {
    let api = ApiServer::start(&LIMITS, SEED).await;
    for i in 0..3 {
        api.add_node(&node_name(i), 8);
    }
    let pods: Api<Pod> = Api::namespaced(kube_client(&api.url(), None), NS);
    // Queue a's limit is 24: the last pod takes it to 25, on card 3 of node-0 again.
    let plan = [
        ("p", 4, "0,1,2,3", 0),
        ("q", 8, "0,1,2,3,4,5,6,7", 1),
        ("r", 8, "0,1,2,3,4,5,6,7", 2),
        ("s", 5, "3,4,5,6,7", 0),
    ];
    for (name, gpus, cards, node) in plan {
        let mut p = pod(name, "a", gpus);
        p["metadata"]["annotations"] = json!({"gpol.dev/cards": cards});
        api.create_pod(p);
        binding(&pods, name, &node_name(node)).await.expect("the API server binds it");
    }
    let again = binding(&pods, "p", "node-1").await.expect_err("bound already");
    assert!(matches!(&again, kube::Error::Api(s) if s.code == 409), "{again}");
    let audit = api.audit();
    assert_eq!(audit.rebinds.len(), 1, "{:?}", audit.rebinds);
    assert_eq!(
        audit.violations,
        vec![
            "ml/s bound to node-0 with cards [3] that ml/p holds".to_string(),
            "ml/s bound: queue a holds 25 GPUs, above its limit of 24".to_string()
        ]
    );
}

async fn binding(pods: &Api<Pod>, name: &str, node: &str) -> Result<Value, kube::Error> {
    let binding = Binding {
        metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
        target: ObjectReference { kind: Some("Node".into()), name: Some(node.into()), ..ObjectReference::default() },
    };
    pods.create_subresource("binding", name, &PostParams::default(), &binding).await
}

/// kube-scheduler's checks of the answers can fail too.
#[test]
fn answers_kube_scheduler_would_reject_are_caught() {
    let sent = vec!["n0".to_string(), "n1".to_string()];
    let filter = |text: &str| decode::<ExtenderFilterResult>(text.as_bytes()).expect("decodes");
    let good = filter(r#"{"NodeNames": ["n0"], "FailedNodes": {"n1": "full"}, "Error": ""}"#);
    assert_eq!(kube_scheduler::check_filter(&sent, &good), Ok(vec!["n0".to_string()]));
    for bad in [
        r#"{"NodeNames": ["n0", "n2"], "FailedNodes": {"n1": "full"}}"#,
        r#"{"NodeNames": ["n0"]}"#,
        r#"{"NodeNames": ["n0"], "FailedNodes": {"n0": "full", "n1": "full"}}"#,
        r#"{"Nodes": {"items": []}, "FailedNodes": {"n0": "full", "n1": "full"}}"#,
    ] {
        assert!(kube_scheduler::check_filter(&sent, &filter(bad)).is_err(), "{bad}");
    }
    let scores = |text: &str| decode::<Vec<HostPriority>>(text.as_bytes()).expect("decodes");
    let good = scores(r#"[{"Host": "n0", "Score": 10}, {"host": "n1", "score": 0}]"#);
    assert!(kube_scheduler::check_scores(&sent, &good).is_ok());
    for bad in [r#"[{"Host": "n0", "Score": 10}]"#, r#"[{"Host": "n0", "Score": 11}, {"Host": "n1", "Score": 0}]"#] {
        assert!(kube_scheduler::check_scores(&sent, &scores(bad)).is_err(), "{bad}");
    }
}

/// A bind cut short — the extender's request time limit (`--timeout`, 5 s by default)
/// answers 408 while the API server is slow — must end with the pod bound, or with
/// nothing held for it: kube-scheduler forgets its assumption and binds the pod again.
/// (A bind dropped with its request kept the reservation, and every later bind of the
/// pod was refused as "being bound already".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_cut_short_leaves_nothing_held() {
    let s = setup(1, 8, Options { timeout: Duration::from_millis(200), ..Options::default() }).await;
    let x = uid(&s.api.create_pod(pod("x", "a", 8)));
    // The cards' write takes longer than the extender's time limit.
    s.api.delay_patches(NS, "x", Duration::from_millis(500));
    let e = bind(s.addr, "x", &x, "node-0").await.expect_err("the time limit answers 408");
    assert!(e.contains("408"), "{e}");
    // Whatever was under way has finished by now.
    tokio::time::sleep(Duration::from_millis(700)).await;
    if node_of(&s.api.pod(NS, "x").expect("the pod")).is_some() {
        // Bound after all: counted once, nothing left reserved once the watch reports it.
        wait_for("the extender to count x bound", Duration::from_secs(5), || {
            let c = s.ext.cluster();
            (c.pod_count(), c.assumed_count()) == (1, 0)
        })
        .await;
        return;
    }
    let held = {
        let c = s.ext.cluster();
        (c.pod_count(), c.assumed_count())
    };
    s.api.delay_patches(NS, "x", Duration::ZERO);
    let retry = bind(s.addr, "x", &x, "node-0").await.expect("an answer");
    assert_eq!(
        (held, retry.as_str()),
        ((0, 0), ""),
        "x is not bound: the extender should hold nothing for it (pods, reservations), and its next bind should succeed"
    );
}
