//! Two replicas of the extender, one leader (`--leader-elect`): only the holder of the
//! Lease binds and is ready, and a failover never binds twice.
//!
//! Each replica is an `Extender` with its own watch, its own server on loopback, its own
//! lease manager and its own tokio runtime, so that a crash is a crash: shutting the
//! runtime down ends its server, its watch, its lease renewals and its binds in flight
//! at once, and leaves its lease to run out. Both talk to one loopback API server
//! emulation (`support/apiserver.rs`: Leases with server-side apply's field ownership,
//! every request logged with its client, every Binding audited), and the emulation of
//! kube-scheduler (`support/kube_scheduler.rs`) reaches them through an emulated
//! Service. Leases are short here (2 s, renewed 1 s before the end) and so is the
//! request time limit (1 s), which is how long a new leader waits before its first bind.

#[path = "support/apiserver.rs"]
mod apiserver;
#[path = "support/kube_scheduler.rs"]
mod kube_scheduler;
#[path = "support/rng.rs"]
mod rng;
#[path = "support/workload.rs"]
mod workload;

use apiserver::{ApiServer, Audit, EventType, Kind, node_of};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use gpol_compiler::engine::EngineKind;
use gpol_kubernetes::extender::{ExtenderBindingResult, decode};
use gpol_kubernetes::leader::{self, Election, Leadership};
use gpol_kubernetes::served::Extender;
use gpol_kubernetes::server::{self, Options};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube_lease_manager::LeaseManagerBuilder;
use kube_scheduler::{KubeScheduler, Stats};
use rng::Rng;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use workload::{LIMITS, NS, POLICY, kube_client, pod, wait_for};

const SEED: u64 = 20_251_129;
const LEASE: &str = "gpol-extender";
const LEASE_NS: &str = "kube-system";
/// Seconds: the lease's duration, and how long before its end the leader renews it.
const DURATION: u64 = 2;
const GRACE: u64 = 1;
/// The request time limit, so the wait of a new leader before its first bind.
const SETTLE: Duration = Duration::from_secs(1);

fn options() -> Options {
    Options { timeout: SETTLE, ..Options::default() }
}

fn settings() -> leader::Settings {
    leader::Settings { lease: LEASE.into(), namespace: LEASE_NS.into(), duration: DURATION, grace: GRACE }
}

/// One replica of `gpolc serve --leader-elect`, named in the Lease (and to the API
/// server) by its name.
struct Replica {
    name: &'static str,
    ext: Arc<Extender>,
    addr: SocketAddr,
    /// Everything the replica runs runs here: shutting it down is a crash.
    runtime: Option<tokio::runtime::Runtime>,
    _policy: tempfile::TempDir,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.crash();
    }
}

impl Replica {
    /// Starts a replica: it watches, serves, and competes for the lease.
    async fn start(api: &ApiServer, name: &'static str) -> Replica {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("replicas.gpol");
        std::fs::write(&path, POLICY).expect("the policy written");
        let leadership = Arc::new(Leadership::new(name, SETTLE));
        let loaded = Extender::load(path, EngineKind::Jit).expect("the policy loads");
        let ext = Arc::new(loaded.with_leadership(Arc::clone(&leadership)));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the replica's address");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("replica-{name}"))
            .enable_all()
            .build()
            .expect("the replica's runtime");
        let (url, served) = (api.url(), Arc::clone(&ext));
        // The client is made inside the replica's runtime: its connections are the
        // replica's, and end with it.
        let started = runtime.spawn(async move {
            let client = kube_client(&url, Some(name));
            served.connect(client.clone());
            tokio::spawn(gpol_kubernetes::api::watch(client.clone(), Arc::clone(&served)));
            let listener = tokio::net::TcpListener::from_std(listener).expect("the listener");
            tokio::spawn(async move {
                server::serve(served, listener, options(), std::future::pending()).await.expect("the replica serves");
            });
            let election = Election::start(client, &settings(), leadership).await.expect("the replica competes");
            // Kept while the runtime runs; a crash drops it with the rest, not released.
            tokio::spawn(async move {
                let _election = election;
                std::future::pending::<()>().await
            });
        });
        started.await.expect("the replica starts");
        Replica { name, ext, addr, runtime: Some(runtime), _policy: dir }
    }

    fn leads(&self) -> bool {
        self.ext.leadership().is_some_and(Leadership::is_leader)
    }

    /// Ends every task of the replica at once, as a crash would.
    fn crash(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// An HTTP exchange with a replica: the status and the body.
async fn exchange(addr: SocketAddr, path: &str, body: Option<&Value>) -> (StatusCode, String) {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let builder = hyper::Request::builder().uri(format!("http://{addr}{path}"));
    let request = match body {
        Some(b) => builder.method("POST").header("content-type", "application/json").body(Full::from(b.to_string())),
        None => builder.method("GET").body(Full::default()),
    };
    let response = client.request(request.expect("a request")).await.expect("an answer");
    let code = response.status();
    let bytes = response.into_body().collect().await.expect("the body").to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

/// kube-scheduler's bind of a pod, sent to one replica: the answer's `Error`.
async fn bind(addr: SocketAddr, name: &str, uid: &str, node: &str) -> String {
    let args = json!({"PodName": name, "PodNamespace": NS, "PodUID": uid, "Node": node});
    let (code, body) = exchange(addr, "/gpol/bind", Some(&args)).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    decode::<ExtenderBindingResult>(body.as_bytes()).expect("a bind answer").error
}

/// A bind the Service sent to a replica, and what came back.
#[derive(Clone, Debug)]
struct BindSeen {
    replica: &'static str,
    sent: Instant,
    /// The answer's `Error` (empty: bound), or why there was no answer.
    answer: Result<String, String>,
}

/// The replicas' Service, emulated: it sends each request to the next replica in turn,
/// ready or not. A real Service sends only to ready endpoints, but its endpoints lag a
/// failover by seconds; here every other bind reaches a replica that does not lead,
/// which must refuse it (kube-scheduler then retries the pod). A crashed replica's
/// endpoint is removed by the test, as the endpoints controller removes a dead pod's.
struct Service {
    addr: SocketAddr,
    endpoints: Arc<Endpoints>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Service {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Endpoints {
    replicas: Mutex<Vec<(&'static str, SocketAddr)>>,
    turn: AtomicUsize,
    http: Client<HttpConnector, Full<Bytes>>,
    binds: Mutex<Vec<BindSeen>>,
    /// Binds sent and not answered, by replica.
    in_flight: Mutex<HashMap<&'static str, usize>>,
}

impl Service {
    async fn start(replicas: &[&Replica]) -> Service {
        let endpoints = Arc::new(Endpoints {
            replicas: Mutex::new(replicas.iter().map(|r| (r.name, r.addr)).collect()),
            turn: AtomicUsize::new(0),
            http: Client::builder(TokioExecutor::new()).build_http(),
            binds: Mutex::default(),
            in_flight: Mutex::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let addr = listener.local_addr().expect("the Service's address");
        let app = axum::Router::new().fallback(forward).with_state(Arc::clone(&endpoints));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the Service serves");
        });
        Service { addr, endpoints, task }
    }

    fn remove(&self, replica: &str) {
        self.endpoints.replicas.lock().unwrap_or_else(PoisonError::into_inner).retain(|(n, _)| *n != replica);
    }

    fn binds(&self) -> Vec<BindSeen> {
        self.endpoints.binds.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn in_flight(&self, replica: &str) -> usize {
        self.endpoints.in_flight.lock().unwrap_or_else(PoisonError::into_inner).get(replica).copied().unwrap_or(0)
    }
}

impl Endpoints {
    fn next(&self) -> Option<(&'static str, SocketAddr)> {
        let replicas = self.replicas.lock().unwrap_or_else(PoisonError::into_inner);
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        replicas.get(turn % replicas.len().max(1)).copied()
    }

    fn count(&self, replica: &'static str, by: isize) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let n = in_flight.entry(replica).or_default();
        *n = n.saturating_add_signed(by);
    }

    /// Sends a request to a replica: the status and body, or why there was no answer.
    async fn send(&self, addr: SocketAddr, path: &str, body: Bytes) -> Result<(StatusCode, Bytes), String> {
        let request = hyper::Request::post(format!("http://{addr}{path}"))
            .header("content-type", "application/json")
            .body(Full::new(body))
            .expect("a request");
        let response = self.http.request(request).await.map_err(|e| e.to_string())?;
        let code = response.status();
        let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok((code, bytes))
    }
}

async fn forward(State(endpoints): State<Arc<Endpoints>>, request: axum::extract::Request) -> Response {
    let path = request.uri().path().to_string();
    let Ok(body) = axum::body::to_bytes(request.into_body(), usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
    };
    let Some((replica, addr)) = endpoints.next() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no endpoints").into_response();
    };
    let is_bind = path.ends_with("/bind");
    let sent = Instant::now();
    if is_bind {
        endpoints.count(replica, 1);
    }
    let answer = endpoints.send(addr, &path, body).await;
    if is_bind {
        endpoints.count(replica, -1);
        let seen = match &answer {
            Ok((StatusCode::OK, bytes)) => {
                decode::<ExtenderBindingResult>(bytes).map(|r| r.error).map_err(|e| e.to_string())
            }
            Ok((code, _)) => Err(format!("HTTP {code}")),
            Err(e) => Err(e.clone()),
        };
        endpoints.binds.lock().unwrap_or_else(PoisonError::into_inner).push(BindSeen { replica, sent, answer: seen });
    }
    match answer {
        Ok((code, bytes)) => (code, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, format!("{replica}: {e}")).into_response(),
    }
}

/// The kubelets: a pod seen bound starts, runs a random short time and is deleted.
async fn kubelets(api: Arc<ApiServer>, seed: u64) {
    let pods: Api<Pod> = Api::namespaced(kube_client(&api.url(), Some("kubelet")), NS);
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
        let (api, pods, runs) = (Arc::clone(&api), pods.clone(), rng.millis(10, 60));
        tokio::spawn(async move {
            api.set_running(NS, &name);
            tokio::time::sleep(runs).await;
            pods.delete(&name, &DeleteParams::default().grace_period(0)).await.expect("the pod is deleted");
        });
    }
}

/// Submits pods `range` (numbered) of 1, 2 or 4 GPUs in queues a and b, a few at a time.
async fn submit(api: Arc<ApiServer>, range: std::ops::Range<usize>, seed: u64) {
    let mut rng = Rng::new(seed);
    for i in range {
        let gpus = *rng.pick(&[1, 2, 4]);
        let queue = *rng.pick(&["a", "b"]);
        api.create_pod(pod(&format!("p{i:04}"), queue, gpus));
        if i % 10 == 9 {
            tokio::time::sleep(rng.millis(5, 25)).await;
        }
    }
}

/// Every write to a pod (the cards, a Binding) that a replica sent after another had
/// taken the lease: for each, the replica, what it wrote and the lease's last holder.
fn writes_after_losing(audit: &Audit) -> Vec<String> {
    let lease = format!("{LEASE_NS}/{LEASE}");
    let holder_at = |at: Instant| {
        audit.holders.iter().filter(|h| h.lease == lease && h.at <= at).filter_map(|h| h.holder.clone()).next_back()
    };
    let writes = audit.requests.iter().filter(|r| {
        let pod_write = r.method == "PATCH" && r.path.starts_with("/api/v1/namespaces/") && r.code == 200;
        pod_write || (r.method == "POST" && r.path.ends_with("/binding") && r.code == 201)
    });
    writes
        .filter(|r| holder_at(r.at).as_deref() != Some(r.agent.as_str()))
        .map(|r| format!("{} {} {} while {:?} held the lease", r.agent, r.method, r.path, holder_at(r.at)))
        .collect()
}

/// When `replica` first took the lease, by the API server's record.
fn acquired(audit: &Audit, replica: &str) -> Option<Instant> {
    audit.holders.iter().find(|h| h.holder.as_deref() == Some(replica)).map(|h| h.at)
}

/// When `replica`'s first Binding after `since` arrived at the API server.
fn first_binding(audit: &Audit, replica: &str, since: Instant) -> Option<Instant> {
    let bindings =
        audit.requests.iter().filter(|r| r.agent == replica && r.path.ends_with("/binding") && r.code == 201);
    bindings.map(|r| r.at).filter(|&at| at >= since).min()
}

/// What every failover run must show: the audit clean, each pod bound once, the
/// scheduler's answers sound, and no replica writing after another took the lease.
fn check_run(pods: usize, stats: &Stats, audit: &Audit) {
    assert_eq!(audit.violations, Vec::<String>::new(), "the audit found cards or quota given twice");
    assert_eq!(audit.bindings.len(), pods, "every pod is bound");
    let twice: Vec<_> = audit.bindings.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "bound more than once: {twice:?}");
    assert_eq!(audit.unexpected, Vec::<String>::new(), "requests the API server does not serve");
    // A request in flight to a crashed replica gets the Service's 502: no answer, not a bad one.
    let bad: Vec<&String> = stats.bad_answers.iter().filter(|a| !a.contains("HTTP 502 Bad Gateway")).collect();
    assert!(bad.is_empty(), "answers kube-scheduler would reject: {bad:#?}");
    assert_eq!(writes_after_losing(audit), Vec::<String>::new(), "writes by a replica that had lost the lease");
}

/// Two replicas and the kube-scheduler emulation, pods flowing; `disrupt` is done to
/// the leader (`a`) once a third of the pods are bound and a bind is in flight to it.
/// Two thirds of the pods are submitted at first, the rest once `b` leads (so that it
/// has pods left to bind however fast the first went). Returns when every pod has been
/// bound, run and deleted.
struct Run {
    api: Arc<ApiServer>,
    a: Replica,
    b: Replica,
    service: Service,
    /// When the leader was disrupted.
    disrupted: Instant,
    /// Binds in flight to the leader then.
    in_flight: usize,
    /// How long after the disruption `b` led, and `a` stopped leading.
    b_led_after: Duration,
    a_stopped_after: Duration,
    stats: Stats,
    audit: Audit,
    took: Duration,
}

async fn failover_run(pods: usize, disrupt: impl FnOnce(&ApiServer, &mut Replica, &Service)) -> Run {
    let api = Arc::new(ApiServer::start(&LIMITS, SEED).await);
    for i in 0..8 {
        api.add_node(&format!("node-{i}"), 8);
    }
    // Bindings take 10–40 ms: several are in flight when the leader is disrupted.
    api.set_binding_delay(10, 40);
    let mut a = Replica::start(&api, "a").await;
    wait_for("a to lead", Duration::from_secs(10), || a.leads()).await;
    let b = Replica::start(&api, "b").await;
    wait_for("both replicas to list nodes and pods", Duration::from_secs(20), || a.ext.is_ready() && b.ext.is_ready())
        .await;
    let service = Service::start(&[&a, &b]).await;
    let started = Instant::now();
    let config = kube_scheduler::Config { seed: SEED, ..kube_scheduler::Config::new(service.addr) };
    let scheduler = KubeScheduler::start(&api, config);
    let kubelets = tokio::spawn(kubelets(Arc::clone(&api), SEED + 1));
    let first = pods * 2 / 3;
    let submitter = tokio::spawn(submit(Arc::clone(&api), 0..first, SEED + 2));
    wait_for("a third of the pods bound, with a bind in flight to a", Duration::from_secs(30), || {
        api.audit().bindings.len() >= pods / 3 && service.in_flight("a") > 0
    })
    .await;
    let (disrupted, in_flight) = (Instant::now(), service.in_flight("a"));
    disrupt(&api, &mut a, &service);
    let a_stopped_after = wait_for("a to stop leading", Duration::from_secs(10), || !a.leads()).await;
    wait_for("b to lead", Duration::from_secs(10), || b.leads()).await;
    let b_led_after = disrupted.elapsed();
    let rest = tokio::spawn(submit(Arc::clone(&api), first..pods, SEED + 3));
    let finished = tokio::time::timeout(Duration::from_secs(90), async {
        while !submitter.is_finished() || !rest.is_finished() || api.pod_count() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    kubelets.abort();
    let (stats, audit) = (scheduler.stats(), api.audit());
    assert!(
        finished.is_ok(),
        "{} pods were never bound and run; {} pending at the scheduler\n{stats:#?}\nviolations: {:#?}",
        api.pod_count(),
        scheduler.pending(),
        audit.violations
    );
    let took = started.elapsed();
    Run { api, a, b, service, disrupted, in_flight, b_led_after, a_stopped_after, stats, audit, took }
}

impl Run {
    /// What the run shows about the failover, and its numbers.
    fn check_failover(&self, pods: usize) -> String {
        let (audit, disrupted) = (&self.audit, self.disrupted);
        check_run(pods, &self.stats, audit);
        assert!(self.in_flight > 0, "no bind was in flight to the leader when it was disrupted");
        let binds = self.service.binds();
        // Before the failover the follower refused every bind it was sent, and bound none.
        let before: Vec<&BindSeen> = binds.iter().filter(|s| s.replica == "b" && s.sent < disrupted).collect();
        let refused = before.iter().filter(|s| s.answer.as_ref().is_ok_and(|e| e.contains("not the leader"))).count();
        assert!(refused > 0 && refused == before.len(), "b, following, refused {refused} of {} binds", before.len());
        // b took the lease within its duration, and the lease manager's pause, of its
        // last renewal; it bound once it had waited out the request time limit.
        let lease_taken = acquired(audit, "b").expect("b took the lease");
        let first = first_binding(audit, "b", lease_taken).expect("b bound pods after the failover");
        // How soon is measured and printed, not judged: a loaded machine delays it.
        let (taken_after, bound_after) = (lease_taken.duration_since(disrupted), first.duration_since(disrupted));
        assert!(
            first.duration_since(lease_taken) >= SETTLE,
            "b bound {:?} after taking the lease",
            first - lease_taken
        );
        let after = binds.iter().filter(|s| s.replica == "b" && s.sent >= disrupted);
        let bound_by_b = after.filter(|s| s.answer.as_ref().is_ok_and(String::is_empty)).count();
        format!(
            "{pods} pods in {:.1} s; {} binds in flight to a when disrupted; a stopped leading {} ms after, b led \
             {} ms after (lease taken {} ms after), b's first Binding {} ms after; b refused {refused} binds as \
             follower and bound {bound_by_b} after; scheduler: {} binds, {} bound, {} retried, {} cycle errors; \
             {} Bindings refused as already bound",
            self.took.as_secs_f64(),
            self.in_flight,
            self.a_stopped_after.as_millis(),
            self.b_led_after.as_millis(),
            taken_after.as_millis(),
            bound_after.as_millis(),
            self.stats.binds,
            self.stats.bound,
            self.stats.bind_errors.len(),
            self.stats.errors.len(),
            audit.rebinds.len(),
        )
    }
}

/// The leader crashes while binds are in flight to it: its lease runs out, the other
/// replica takes it, waits out the request time limit and binds the rest; no card or
/// quota is given twice and no pod bound twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_replaced_and_nothing_is_bound_twice() {
    const PODS: usize = 300;
    let run = failover_run(PODS, |_, a, service| {
        a.crash();
        service.remove("a");
    })
    .await;
    println!("crash: {}", run.check_failover(PODS));
    assert!(run.b.leads() && !run.a.leads());
}

/// The leader cannot renew its lease (its writes to leases fail) but keeps serving and
/// binding: it stops binding when its lease runs out, before the other replica takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_binding_before_it_is_replaced() {
    const PODS: usize = 200;
    let run = failover_run(PODS, |api, _, _| api.fail_lease_writes("kube-lease-manager-a", true)).await;
    println!("lease cut off: {}", run.check_failover(PODS));
    // a stopped when its last renewal ran out, by its own reckoning; that it sent no
    // write after b took the lease is `check_failover`'s, from the API server's log.
    println!("a stopped leading {:?} after it was cut off", run.a_stopped_after);
    let taken = acquired(&run.audit, "b").expect("b took the lease");
    let last_a = run.audit.requests.iter().filter(|r| r.agent == "a" && r.path.ends_with("/binding") && r.code == 201);
    let last_a = last_a.map(|r| r.at).max().expect("a bound pods");
    assert!(last_a < taken, "a's last Binding came {:?} after b took the lease", last_a - taken);
    // Alive, a answers as a follower: not ready, binds refused.
    let (code, body) = exchange(run.a.addr, "/readyz", None).await;
    assert_eq!((code, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "not the leader\n"));
    let after: Vec<BindSeen> = run.service.binds().into_iter().filter(|s| s.replica == "a" && s.sent > taken).collect();
    assert!(
        after.iter().all(|s| s.answer.as_ref().is_ok_and(|e| e.contains("not the leader"))),
        "a's answers after b took over: {after:#?}"
    );
    drop(run.api);
}

/// A follower is not ready, and refuses a bind before it reads, reserves or writes
/// anything; a new leader refuses binds until it has waited out the request time limit;
/// filter answers on both; the metrics show who leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_is_not_ready_and_refuses_binds_without_a_request() {
    let api = ApiServer::start(&LIMITS, SEED).await;
    api.add_node("node-0", 8);
    let uid = api.create_pod(pod("x", "a", 4))["metadata"]["uid"].as_str().expect("a UID").to_string();
    let pod_before = api.pod(NS, "x").expect("the pod");
    let a = Replica::start(&api, "a").await;
    wait_for("a to lead", Duration::from_secs(10), || a.leads()).await;
    let elected = Instant::now();
    // Just elected, a waits before its first bind.
    let early = bind(a.addr, "x", &uid, "node-0").await;
    assert!(elected.elapsed() < SETTLE, "the test was too slow to bind within the wait");
    assert!(early.contains("has just become the leader and binds in"), "{early}");
    let b = Replica::start(&api, "b").await;
    wait_for("both replicas to list nodes and pods", Duration::from_secs(20), || a.ext.is_ready() && b.ext.is_ready())
        .await;

    // b does not lead.
    let refused = bind(b.addr, "x", &uid, "node-0").await;
    assert_eq!(
        refused,
        "gpol extender: cannot bind pod ml/x: this replica (b) is not the leader: it does not hold the lease"
    );
    assert_eq!(exchange(a.addr, "/readyz", None).await, (StatusCode::OK, "ready\n".to_string()));
    assert_eq!(
        exchange(b.addr, "/readyz", None).await,
        (StatusCode::SERVICE_UNAVAILABLE, "not the leader\n".to_string())
    );

    // Nothing was read, reserved or written for either refusal.
    let touched: Vec<_> = api
        .audit()
        .requests
        .into_iter()
        .filter(|r| r.path.ends_with("/pods/x") || r.path.ends_with("/binding"))
        .collect();
    assert!(touched.is_empty(), "requests about x: {touched:?}");
    assert_eq!(api.pod(NS, "x"), Some(pod_before), "x unchanged");
    assert_eq!((a.ext.cluster().assumed_count(), b.ext.cluster().assumed_count()), (0, 0));

    // Filter answers on both (read-only).
    let filter = json!({"Pod": api.pod(NS, "x"), "NodeNames": ["node-0"]});
    for r in [&a, &b] {
        let (code, body) = exchange(r.addr, "/gpol/filter", Some(&filter)).await;
        assert_eq!(code, StatusCode::OK, "{}: {body}", r.name);
        assert!(body.contains(r#""NodeNames":["node-0"]"#), "{}: {body}", r.name);
    }
    let gauge = |text: &str| text.lines().find(|l| l.starts_with("gpol_extender_leader ")).map(str::to_string);
    assert_eq!(gauge(&exchange(a.addr, "/metrics", None).await.1).as_deref(), Some("gpol_extender_leader 1"));
    assert_eq!(gauge(&exchange(b.addr, "/metrics", None).await.1).as_deref(), Some("gpol_extender_leader 0"));

    // Once the wait is over, a binds.
    tokio::time::sleep(SETTLE.saturating_sub(elected.elapsed())).await;
    assert_eq!(bind(a.addr, "x", &uid, "node-0").await, "");
    assert_eq!(node_of(&api.pod(NS, "x").expect("the pod")), Some("node-0"));
    let by_b = api
        .audit()
        .requests
        .into_iter()
        .filter(|r| r.agent == "b" && !r.path.contains("/leases/") && r.method != "GET");
    assert_eq!(by_b.count(), 0, "b wrote to the API server");
}

/// The emulation's Leases, against kube-lease-manager itself: a manager takes the lease
/// and renews it; a second is kept out while the first renews; when the first stops
/// (its task ended without releasing, as in a crash) the second takes over once the
/// lease has run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_emulation_serves_kube_lease_manager() {
    let api = ApiServer::start(&[], SEED).await;
    let manager = |agent: &'static str| {
        LeaseManagerBuilder::new(kube_client(&api.url(), Some(agent)), LEASE)
            .with_namespace(LEASE_NS)
            .with_identity(agent)
            // As `gpolc serve` names it (the crate's default is after a random identity).
            .with_field_manager(format!("kube-lease-manager-{agent}"))
            .with_duration(DURATION)
            .with_grace(GRACE)
            .build()
    };
    let (mut first, first_task) = manager("a").await.expect("a lease manager").watch().await;
    // (The channel's value is not held across awaits: that would block the manager.)
    let took =
        tokio::time::timeout(Duration::from_secs(5), first.wait_for(|held| *held)).await.is_ok_and(|r| r.is_ok());
    assert!(took, "a never took the lease");
    let (second, second_task) = manager("b").await.expect("another lease manager").watch().await;
    // Two lease durations: a renews, b stays out.
    let mut renewals = HashSet::new();
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(2 * DURATION) {
        assert!(*first.borrow() && !*second.borrow(), "a holds the lease while it renews");
        let lease = api.lease(LEASE_NS, LEASE).expect("the lease");
        assert_eq!(lease["spec"]["holderIdentity"], "a");
        renewals.insert(lease["spec"]["renewTime"].as_str().expect("a renewal time").to_string());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(renewals.len() >= 3, "a renewed {} times in two durations", renewals.len() - 1);

    // a stops without releasing: b takes the lease once it has run out.
    let stopped = Instant::now();
    first_task.abort();
    assert!(first_task.await.is_err_and(|e| e.is_cancelled()));
    drop(first);
    let mut second = second;
    let took =
        tokio::time::timeout(Duration::from_secs(10), second.wait_for(|held| *held)).await.is_ok_and(|r| r.is_ok());
    assert!(took, "b never took the lease");
    let taken = stopped.elapsed();
    println!("kube-lease-manager: b took over {} ms after a stopped", taken.as_millis());

    let lease = api.lease(LEASE_NS, LEASE).expect("the lease");
    assert_eq!((&lease["spec"]["holderIdentity"], &lease["spec"]["leaseTransitions"]), (&json!("b"), &json!(2)));
    let holders: Vec<Option<String>> = api.audit().holders.into_iter().map(|h| h.holder).collect();
    // b released the lease that had run out before taking it.
    assert_eq!(holders, vec![Some("a".to_string()), None, Some("b".to_string())]);
    let owners = &lease["metadata"]["managedFields"];
    let applied = owners.as_array().expect("managed fields").iter().find(|o| o["operation"] == "Apply");
    let applied = applied.expect("an applier");
    assert_eq!(applied["manager"], "kube-lease-manager-b");
    assert_eq!(applied["fieldsV1"]["f:spec"]["f:holderIdentity"], json!({}));
    assert_eq!(api.audit().unexpected, Vec::<String>::new());
    drop(second);
    let _ = second_task.await;
}

/// Server-side apply's conflicts, as kube-apiserver reports them: an apply that would
/// change a field another manager owns is a 409 Conflict naming it, unless forced;
/// applying the value the field has shares it; a patch takes what it changes; `null`
/// removes a field and its owners; an applier dropping a field it alone owned removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_conflicts_as_the_api_server_reports_them() {
    let api = ApiServer::start(&[], SEED).await;
    let leases: Api<Lease> = Api::namespaced(kube_client(&api.url(), Some("test")), LEASE_NS);
    let lease = Lease { metadata: kube::api::ObjectMeta { name: Some("l".into()), ..Default::default() }, spec: None };
    leases.create(&PostParams::default(), &lease).await.expect("created");
    let again = leases.create(&PostParams::default(), &lease).await.expect_err("exists");
    assert!(matches!(&again, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"), "{again}");

    let apply = |manager: &str, spec: Value, force: bool| {
        let params = PatchParams { force, ..PatchParams::apply(manager) };
        let patch = Patch::Apply(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec}));
        let leases = leases.clone();
        async move { leases.patch("l", &params, &patch).await }
    };
    let conflict = |result: Result<Lease, kube::Error>| match result {
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "Conflict" => s.message,
        other => panic!("not a conflict: {other:?}"),
    };
    apply("m1", json!({"holderIdentity": "a", "leaseDurationSeconds": 2}), false).await.expect("applied");
    let refused = conflict(apply("m2", json!({"holderIdentity": "b"}), false).await);
    assert_eq!(
        refused,
        "Apply failed with 1 conflict: conflict with \"m1\" using coordination.k8s.io/v1: .spec.holderIdentity"
    );
    // The same values: shared; changed by either, a conflict with the other.
    apply("m2", json!({"holderIdentity": "a", "leaseDurationSeconds": 2}), false).await.expect("shared");
    let refused = conflict(apply("m1", json!({"holderIdentity": "c", "leaseDurationSeconds": 2}), false).await);
    assert!(refused.contains("conflict with \"m2\""), "{refused}");
    // Forced: m2 alone owns the holder; m1 keeps the duration it shares.
    let forced = apply("m2", json!({"holderIdentity": "b", "leaseDurationSeconds": 2}), true).await.expect("forced");
    assert_eq!(forced.spec.and_then(|s| s.holder_identity).as_deref(), Some("b"));
    let owners = |lease: &Value| -> Vec<(String, String, Vec<String>)> {
        let entries = lease["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
        entries
            .iter()
            .map(|e| {
                let fields =
                    e["fieldsV1"]["f:spec"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
                (
                    e["manager"].as_str().unwrap_or_default().into(),
                    e["operation"].as_str().unwrap_or_default().into(),
                    fields,
                )
            })
            .collect()
    };
    let held = |lease: &Value| owners(lease);
    let f = |names: &[&str]| names.iter().map(|n| format!("f:{n}")).collect::<Vec<_>>();
    assert_eq!(
        held(&api.lease(LEASE_NS, "l").expect("the lease")),
        vec![
            ("m1".into(), "Apply".into(), f(&["leaseDurationSeconds"])),
            ("m2".into(), "Apply".into(), f(&["holderIdentity", "leaseDurationSeconds"]))
        ]
    );
    // A strategic merge patch takes what it changes, whoever owned it, and `null`
    // removes a field and its owners.
    let smp = |manager: &str, spec: Value| {
        let params = PatchParams { field_manager: Some(manager.into()), ..PatchParams::default() };
        let leases = leases.clone();
        async move { leases.patch("l", &params, &Patch::Strategic(json!({"spec": spec}))).await }
    };
    smp("m3", json!({"leaseDurationSeconds": 5, "holderIdentity": null})).await.expect("patched");
    let lease = api.lease(LEASE_NS, "l").expect("the lease");
    assert_eq!(lease["spec"], json!({"leaseDurationSeconds": 5}));
    assert_eq!(held(&lease), vec![("m3".into(), "Update".into(), f(&["leaseDurationSeconds"]))]);
    // A manager's apply conflicts with its own patches (owners are a manager and an operation).
    let refused = conflict(apply("m3", json!({"leaseDurationSeconds": 7}), false).await);
    assert!(refused.contains("conflict with \"m3\""), "{refused}");
    // An applier dropping a field it alone owns removes it.
    apply("m4", json!({"holderIdentity": "d", "leaseTransitions": 1}), false).await.expect("applied");
    apply("m4", json!({"leaseTransitions": 1}), false).await.expect("applied");
    assert_eq!(
        api.lease(LEASE_NS, "l").expect("the lease")["spec"],
        json!({"leaseDurationSeconds": 5, "leaseTransitions": 1})
    );
    // A patch of no lease is a 404; an invalid duration a 422.
    let missing = leases.patch("none", &PatchParams::default(), &Patch::Strategic(json!({}))).await.expect_err("none");
    assert!(matches!(&missing, kube::Error::Api(s) if s.code == 404), "{missing}");
    let invalid = smp("m3", json!({"leaseDurationSeconds": 0})).await.expect_err("invalid");
    assert!(matches!(&invalid, kube::Error::Api(s) if s.code == 422), "{invalid}");
    assert_eq!(api.audit().unexpected, Vec::<String>::new());
}
