//! A loopback Kubernetes API server: the requests `kube::Client` makes for the extender
//! (`gpol_kubernetes::api`), answered as kube-apiserver answers them.
//!
//! - `GET /api/v1/{nodes,pods}`: a list (`limit` and `continue` paginate one consistent
//!   snapshot), or with `watch=true` a stream of newline-delimited watch events after
//!   `resourceVersion`: the history after it, then live changes, with no gap between
//!   (the watch is registered under the same lock that replays the history). Objects
//!   carry `metadata.resourceVersion` from one global counter, as etcd's revision is.
//! - `GET`, `PATCH` (`application/merge-patch+json`; a `metadata.resourceVersion` in the
//!   patch that is not the pod's is a 409 Conflict) and `DELETE` of one pod.
//! - `POST …/pods/{name}/binding`: sets `spec.nodeName`; 404 for a missing pod, 409 for
//!   one already bound or another UID. A random delay before it is answered widens races.
//! - Leases (`/apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]`), as
//!   kube-lease-manager uses them: `GET`; `POST` (409 AlreadyExists); `PATCH` by
//!   server-side apply (`application/apply-patch+yaml`, `fieldManager` required, `force`)
//!   or by strategic merge or merge patch, with field ownership kept per manager and
//!   operation as the API server keeps it (`metadata.managedFields`): an apply that would
//!   change a field another manager owns is a 409 Conflict naming the fields, unless
//!   forced; a patch takes the fields it changes; `null` removes a field and its owners.
//!   Every change of holder is recorded with its time.
//!
//! Failures are `Status` objects, as the real server writes them (kube-client decodes
//! them into `kube::Error::Api`). Every successful Binding is audited: on its node the
//! cards (annotation `gpol.dev/cards`) of the pods bound there and not deleted must be
//! disjoint and match their requests, and per queue (label `gpol.dev/queue`) the GPUs of
//! the bound pods must stay within the limits the test gives. Every request is logged
//! with its time, its client (`User-Agent`) and its answer's status. Anything else the
//! extender asks is answered 404 and recorded.
//!
//! The test side creates nodes and pods, deletes pods, injects failures and delays, and
//! subscribes to the changes in process (the emulated kube-scheduler's and kubelet's
//! informers).

#![allow(dead_code)]

use crate::rng::Rng;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State as Shared};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub const GPU: &str = "nvidia.com/gpu";
pub const CARDS: &str = "gpol.dev/cards";
pub const QUEUE: &str = "gpol.dev/queue";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Node,
    Pod,
}

impl Kind {
    fn list_kind(self) -> &'static str {
        match self {
            Kind::Node => "NodeList",
            Kind::Pod => "PodList",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change as a watch reports it: the object after it (a deleted object as it was,
/// with the deletion's resourceVersion).
#[derive(Clone, Debug)]
pub struct Change {
    pub kind: Kind,
    pub event: EventType,
    pub object: Value,
    rv: u64,
}

/// What the audit found, and what the server saw.
#[derive(Clone, Debug, Default)]
pub struct Audit {
    /// Every broken rule: a card given twice on a node, cards not matching the request,
    /// a queue above its limit.
    pub violations: Vec<String>,
    /// Successful Bindings per pod (`namespace/name`).
    pub bindings: HashMap<String, u32>,
    /// Bindings refused because the pod was bound already.
    pub rebinds: Vec<String>,
    /// Requests this emulation does not serve (the extender should make none).
    pub unexpected: Vec<String>,
    /// The most Binding requests being answered at once.
    pub max_bindings_in_flight: usize,
    /// Every request answered, in the order answered.
    pub requests: Vec<Logged>,
    /// Every change of a lease's holder, in order.
    pub holders: Vec<HolderChange>,
}

/// One request: when it arrived, from whom, what it asked and how it was answered.
#[derive(Clone, Debug)]
pub struct Logged {
    pub at: Instant,
    pub agent: String,
    pub method: String,
    pub path: String,
    pub code: u16,
}

/// A lease's holder changed (`None`: released).
#[derive(Clone, Debug)]
pub struct HolderChange {
    pub at: Instant,
    /// `namespace/name`.
    pub lease: String,
    pub holder: Option<String>,
}

struct State {
    /// The global resourceVersion counter (etcd's revision).
    rv: u64,
    /// Numbers UIDs and continue tokens.
    serial: u64,
    nodes: BTreeMap<String, Value>,
    /// By `namespace/name`.
    pods: BTreeMap<String, Value>,
    /// Every change, for watches to replay from any resourceVersion (nothing is compacted).
    history: Vec<Change>,
    watches: Vec<(Kind, mpsc::UnboundedSender<Bytes>)>,
    subscribers: Vec<mpsc::UnboundedSender<Change>>,
    /// The rest of paginated lists, by continue token: (resourceVersion, items).
    pages: HashMap<String, (u64, Vec<Value>)>,
    /// The next Binding of these pods is answered with this code, and not done.
    faults: HashMap<String, StatusCode>,
    /// Merge patches of these pods wait this long before they are applied.
    patch_delays: HashMap<String, Duration>,
    /// Milliseconds a Binding waits before it is done, drawn in this range.
    binding_delay: (u64, u64),
    rng: Rng,
    /// GPU limits per queue label.
    limits: HashMap<String, u64>,
    bindings_in_flight: usize,
    /// By `namespace/name`.
    leases: BTreeMap<String, StoredLease>,
    /// Writes to leases by these field managers fail (500), as for a client the API
    /// server cannot be reached from.
    lease_faults: HashSet<String>,
    audit: Audit,
}

type Server = Arc<Mutex<State>>;

fn lock(server: &Server) -> MutexGuard<'_, State> {
    // A panicking handler leaves the maps consistent (each change is one insert): carry on.
    server.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running server; stopped when dropped.
pub struct ApiServer {
    state: Server,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ApiServer {
    /// Serves on a loopback port; `limits` are the GPU limits per queue the audit checks.
    pub async fn start(limits: &[(&str, u64)], seed: u64) -> ApiServer {
        let state = Arc::new(Mutex::new(State {
            rv: 1,
            serial: 0,
            nodes: BTreeMap::new(),
            pods: BTreeMap::new(),
            history: Vec::new(),
            watches: Vec::new(),
            subscribers: Vec::new(),
            pages: HashMap::new(),
            faults: HashMap::new(),
            patch_delays: HashMap::new(),
            binding_delay: (0, 0),
            rng: Rng::new(seed),
            limits: limits.iter().map(|(q, l)| (q.to_string(), *l)).collect(),
            bindings_in_flight: 0,
            leases: BTreeMap::new(),
            lease_faults: HashSet::new(),
            audit: Audit::default(),
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let addr = listener.local_addr().expect("the listener's address");
        let app = router(Arc::clone(&state));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the API server serves");
        });
        ApiServer { state, addr, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn add_node(&self, name: &str, gpus: u32) {
        let mut s = lock(&self.state);
        s.serial += 1;
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": format!("node-uid-{}", s.serial),
                "labels": {"kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: gpus.to_string()},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: gpus.to_string()},
                "conditions": [{"type": "Ready", "status": "True"}]}});
        let node = s.emit(Kind::Node, EventType::Added, node);
        s.nodes.insert(name.to_string(), node);
    }

    /// Creates a pod as the API server does: a UID, a creation time, phase Pending.
    pub fn create_pod(&self, mut pod: Value) -> Value {
        let key = key_of(&pod);
        let mut s = lock(&self.state);
        assert!(!s.pods.contains_key(&key), "pod {key} exists already");
        s.serial += 1;
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        pod["metadata"]["uid"] = json!(format!("pod-uid-{}", s.serial));
        pod["metadata"]["creationTimestamp"] = json!(now());
        pod["status"] = json!({"phase": "Pending"});
        let pod = s.emit(Kind::Pod, EventType::Added, pod);
        s.pods.insert(key, pod.clone());
        pod
    }

    /// The kubelet started the pod.
    pub fn set_running(&self, namespace: &str, name: &str) {
        let mut s = lock(&self.state);
        let Some(mut pod) = s.pods.get(&format!("{namespace}/{name}")).cloned() else { return };
        pod["status"]["phase"] = json!("Running");
        pod["status"]["startTime"] = json!(now());
        let pod = s.emit(Kind::Pod, EventType::Modified, pod);
        s.pods.insert(key_of(&pod), pod);
    }

    /// Deletes the pod at once (grace period 0); false if there was none.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        lock(&self.state).delete_pod(&format!("{namespace}/{name}")).is_some()
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.state).pods.get(&format!("{namespace}/{name}")).cloned()
    }

    pub fn pod_count(&self) -> usize {
        lock(&self.state).pods.len()
    }

    /// Every change so far, then every change from now on, in order.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut s = lock(&self.state);
        for c in &s.history {
            let _ = tx.send(c.clone());
        }
        s.subscribers.push(tx);
        rx
    }

    /// The pod's next Binding is answered `code` (500, 409, …) and not done.
    pub fn fail_next_binding(&self, namespace: &str, name: &str, code: StatusCode) {
        lock(&self.state).faults.insert(format!("{namespace}/{name}"), code);
    }

    /// The pod's merge patches wait `delay` before they are applied.
    pub fn delay_patches(&self, namespace: &str, name: &str, delay: Duration) {
        lock(&self.state).patch_delays.insert(format!("{namespace}/{name}"), delay);
    }

    /// Bindings wait between `lo` and `hi` milliseconds before they are done.
    pub fn set_binding_delay(&self, lo: u64, hi: u64) {
        lock(&self.state).binding_delay = (lo, hi);
    }

    pub fn audit(&self) -> Audit {
        lock(&self.state).audit.clone()
    }

    /// The lease as a client reads it.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<Value> {
        lock(&self.state).leases.get(&format!("{namespace}/{name}")).map(StoredLease::object)
    }

    /// Writes to leases by `field_manager` fail from now on (`fail`), or no longer.
    pub fn fail_lease_writes(&self, field_manager: &str, fail: bool) {
        let mut s = lock(&self.state);
        if fail {
            s.lease_faults.insert(field_manager.to_string());
        } else {
            s.lease_faults.remove(field_manager);
        }
    }
}

fn now() -> String {
    let t = jiff::Timestamp::now();
    // Whole seconds, as the API server writes times.
    jiff::Timestamp::from_second(t.as_second()).expect("a time within range").to_string()
}

/// `namespace/name`.
pub fn key_of(pod: &Value) -> String {
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default().to_string();
    format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"))
}

/// The GPUs a pod asks for: `nvidia.com/gpu` limits (else requests) summed over its containers.
pub fn gpus_of(pod: &Value) -> u64 {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array).into_iter().flatten();
    containers
        .map(|c| {
            let r = &c["resources"];
            let amount = r["limits"].get(GPU).or_else(|| r["requests"].get(GPU));
            amount.and_then(|v| v.as_str().and_then(|t| t.parse().ok()).or(v.as_u64())).unwrap_or(0)
        })
        .sum()
}

/// The node a pod is bound to, if it is.
pub fn node_of(pod: &Value) -> Option<&str> {
    pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty())
}

/// The cards annotation `gpol.dev/cards` gives the pod.
pub fn cards_of(pod: &Value) -> Result<Vec<u32>, String> {
    let Some(text) = pod.pointer("/metadata/annotations").and_then(|a| a.get(CARDS)).and_then(Value::as_str) else {
        return Err(format!("no `{CARDS}` annotation"));
    };
    text.split(',').map(|c| c.trim().parse::<u32>().map_err(|_| format!("`{text}` is not a list of cards"))).collect()
}

fn queue_of(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/labels").and_then(|l| l.get(QUEUE)).and_then(Value::as_str)
}

impl State {
    /// Records a change: the object gets the next resourceVersion, and every watch and
    /// subscriber of its kind is told (under the lock, so all see one order).
    fn emit(&mut self, kind: Kind, event: EventType, mut object: Value) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let change = Change { kind, event, object: object.clone(), rv: self.rv };
        let line = watch_line(event, &object);
        self.watches.retain(|(k, tx)| *k != kind || tx.send(line.clone()).is_ok());
        self.subscribers.retain(|tx| tx.send(change.clone()).is_ok());
        self.history.push(change);
        object
    }

    fn delete_pod(&mut self, key: &str) -> Option<Value> {
        let pod = self.pods.remove(key)?;
        Some(self.emit(Kind::Pod, EventType::Deleted, pod))
    }

    fn objects(&self, kind: Kind) -> Vec<Value> {
        match kind {
            Kind::Node => self.nodes.values().cloned().collect(),
            Kind::Pod => self.pods.values().cloned().collect(),
        }
    }

    /// Checks a Binding about to be done against what is bound and not deleted.
    fn audit_binding(&mut self, key: &str, pod: &Value, node: &str) {
        let mut found = Vec::new();
        let want = gpus_of(pod);
        let cards = match cards_of(pod) {
            Ok(cards) => cards,
            Err(e) => {
                found.push(format!("{key} bound to {node}: {e}"));
                Vec::new()
            }
        };
        let distinct: BTreeSet<u32> = cards.iter().copied().collect();
        if found.is_empty() && (distinct.len() != cards.len() || cards.len() as u64 != want) {
            found.push(format!("{key} bound to {node} with cards {cards:?} for {want} GPUs"));
        }
        // The API server does not check the node; the audit does.
        match self.nodes.get(node).map(gpus_of_node) {
            None => found.push(format!("{key} bound to {node}, which is no node")),
            Some(n) => {
                if let Some(c) = cards.iter().find(|&&c| u64::from(c) >= n) {
                    found.push(format!("{key} bound to {node} with card {c}, beyond its {n} cards"));
                }
            }
        }
        for (other, p) in self.pods.iter().filter(|(k, p)| k.as_str() != key && node_of(p) == Some(node)) {
            let theirs: BTreeSet<u32> = cards_of(p).unwrap_or_default().into_iter().collect();
            let both: Vec<u32> = distinct.intersection(&theirs).copied().collect();
            if !both.is_empty() {
                found.push(format!("{key} bound to {node} with cards {both:?} that {other} holds"));
            }
        }
        if let Some((queue, limit)) = queue_of(pod).and_then(|q| Some((q, *self.limits.get(q)?))) {
            let held: u64 = self
                .pods
                .iter()
                .filter(|(k, p)| k.as_str() != key && node_of(p).is_some() && queue_of(p) == Some(queue))
                .map(|(_, p)| gpus_of(p))
                .sum();
            if held + want > limit {
                found
                    .push(format!("{key} bound: queue {queue} holds {} GPUs, above its limit of {limit}", held + want));
            }
        }
        self.audit.violations.extend(found);
    }
}

fn gpus_of_node(node: &Value) -> u64 {
    node.pointer("/status/allocatable")
        .and_then(|a| a.get(GPU))
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

fn watch_line(event: EventType, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": event.as_str(), "object": object})).expect("JSON");
    line.push(b'\n');
    Bytes::from(line)
}

fn json_response(code: StatusCode, body: &Value) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// A `Status` object, as the API server answers failures (and Bindings).
fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let outcome = if code.is_success() { "Success" } else { "Failure" };
    let mut body =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": outcome, "code": code.as_u16()});
    if !code.is_success() {
        body["message"] = json!(message);
        body["reason"] = json!(reason);
    }
    json_response(code, &body)
}

fn not_found(name: &str) -> Response {
    status(StatusCode::NOT_FOUND, "NotFound", format!("pods \"{name}\" not found"))
}

fn conflict(message: String) -> Response {
    status(StatusCode::CONFLICT, "Conflict", message)
}

type Params = Query<HashMap<String, String>>;
type PodPath = Path<(String, String)>;

fn router(state: Server) -> Router {
    Router::new()
        .route(
            "/api/v1/nodes",
            get(|Shared(s): Shared<Server>, Query(q): Params| async move { list_or_watch(&s, Kind::Node, &q) }),
        )
        .route(
            "/api/v1/pods",
            get(|Shared(s): Shared<Server>, Query(q): Params| async move { list_or_watch(&s, Kind::Pod, &q) }),
        )
        .route("/api/v1/namespaces/{ns}/pods/{name}", get(get_pod).patch(patch_pod).delete(delete_pod))
        .route("/api/v1/namespaces/{ns}/pods/{name}/binding", post(bind))
        .route("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", post(create_lease))
        .route("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}", get(get_lease).patch(patch_lease))
        .fallback(unexpected)
        .method_not_allowed_fallback(unexpected)
        .layer(axum::middleware::from_fn_with_state(Arc::clone(&state), log_request))
        .with_state(state)
}

/// Logs a request once answered (a watch: once its stream begins).
async fn log_request(
    Shared(s): Shared<Server>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let at = Instant::now();
    let agent = request.headers().get(header::USER_AGENT).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let (method, path) = (request.method().to_string(), request.uri().path().to_string());
    let response = next.run(request).await;
    let code = response.status().as_u16();
    lock(&s).audit.requests.push(Logged { at, agent: agent.unwrap_or_default(), method, path, code });
    response
}

async fn unexpected(Shared(s): Shared<Server>, request: axum::extract::Request) -> Response {
    let what = format!("{} {}", request.method(), request.uri());
    lock(&s).audit.unexpected.push(what.clone());
    status(StatusCode::NOT_FOUND, "NotFound", format!("the emulated API server does not serve {what}"))
}

fn list_or_watch(s: &Server, kind: Kind, q: &HashMap<String, String>) -> Response {
    if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
        watch(s, kind, q)
    } else {
        list(&mut lock(s), kind, q)
    }
}

/// A list, paginated by `limit`: the pages after the first come from the first's
/// snapshot, as the API server serves continue tokens from one revision.
fn list(s: &mut State, kind: Kind, q: &HashMap<String, String>) -> Response {
    let (rv, mut items) = match q.get("continue") {
        Some(token) => match s.pages.remove(token) {
            Some(page) => page,
            None => return status(StatusCode::GONE, "Expired", "the continue token has expired".into()),
        },
        None => (s.rv, s.objects(kind)),
    };
    // List items carry no kind or apiVersion: the list has them.
    for item in &mut items {
        if let Value::Object(o) = item {
            o.remove("kind");
            o.remove("apiVersion");
        }
    }
    let limit = q.get("limit").and_then(|l| l.parse::<usize>().ok()).filter(|&l| l > 0 && l < items.len());
    let rest = limit.map(|l| items.split_off(l)).unwrap_or_default();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if !rest.is_empty() {
        s.serial += 1;
        let token = format!("{rv}.{}", s.serial);
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(rest.len());
        s.pages.insert(token, (rv, rest));
    }
    json_response(
        StatusCode::OK,
        &json!({"kind": kind.list_kind(), "apiVersion": "v1", "metadata": metadata, "items": items}),
    )
}

/// A watch: the changes after `resourceVersion` replayed, then live ones, until
/// `timeoutSeconds`. Registered under the lock the replay is read under: no change is
/// missed or given twice.
fn watch(s: &Server, kind: Kind, q: &HashMap<String, String>) -> Response {
    let timeout = q.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).unwrap_or(1800);
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    {
        let mut state = lock(s);
        match q.get("resourceVersion").map(String::as_str) {
            // "Start at most recent": the objects as they are, as ADDED events.
            None | Some("") => {
                for o in state.objects(kind) {
                    let _ = tx.send(watch_line(EventType::Added, &o));
                }
            }
            // "Any": from now.
            Some("0") => {}
            Some(v) => {
                let Ok(since) = v.parse::<u64>() else {
                    return status(
                        StatusCode::BAD_REQUEST,
                        "BadRequest",
                        format!("resourceVersion `{v}` is not valid"),
                    );
                };
                for c in state.history.iter().filter(|c| c.kind == kind && c.rv > since) {
                    let _ = tx.send(watch_line(c.event, &c.object));
                }
            }
        }
        state.watches.push((kind, tx));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let events = futures::stream::unfold(rx, move |mut rx| async move {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(line)) => Some((Ok::<Bytes, std::convert::Infallible>(line), rx)),
            // The watch's time is up (the client watches again from its last version).
            _ => None,
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(events))
        .expect("a streamed response")
}

async fn get_pod(Shared(s): Shared<Server>, Path((ns, name)): PodPath) -> Response {
    match lock(&s).pods.get(&format!("{ns}/{name}")) {
        Some(pod) => json_response(StatusCode::OK, pod),
        None => not_found(&name),
    }
}

async fn delete_pod(Shared(s): Shared<Server>, Path((ns, name)): PodPath) -> Response {
    match lock(&s).delete_pod(&format!("{ns}/{name}")) {
        Some(pod) => json_response(StatusCode::OK, &pod),
        None => not_found(&name),
    }
}

/// A JSON merge patch (RFC 7386): objects merge, `null` removes, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(t) = target else { return };
    for (k, v) in patch {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

async fn patch_pod(Shared(s): Shared<Server>, Path((ns, name)): PodPath, headers: HeaderMap, body: Bytes) -> Response {
    let key = format!("{ns}/{name}");
    let kind = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if kind != "application/merge-patch+json" {
        let m = format!("the emulation serves merge patches only, not `{kind}`");
        return status(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", m);
    }
    let delay = lock(&s).patch_delays.get(&key).copied();
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let Ok(patch) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "the patch is not JSON".into());
    };
    let mut state = lock(&s);
    let Some(pod) = state.pods.get(&key) else { return not_found(&name) };
    // The resourceVersion of the patched object is the update's precondition.
    let current = pod.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
    if let Some(asked) = patch.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|v| !v.is_empty())
        && asked != current
    {
        return conflict(format!(
            "Operation cannot be fulfilled on pods \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again"
        ));
    }
    let mut patched = pod.clone();
    merge(&mut patched, &patch);
    // Identity is not the patch's to change.
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        patched["metadata"][field] = pod["metadata"][field].clone();
    }
    let patched = state.emit(Kind::Pod, EventType::Modified, patched);
    state.pods.insert(key, patched.clone());
    json_response(StatusCode::OK, &patched)
}

/// Counts a Binding being answered, whether it finishes or its client goes away.
struct InFlight(Server);

impl InFlight {
    fn enter(s: &Server) -> (InFlight, Duration) {
        let mut state = lock(s);
        state.bindings_in_flight += 1;
        state.audit.max_bindings_in_flight = state.audit.max_bindings_in_flight.max(state.bindings_in_flight);
        let (lo, hi) = state.binding_delay;
        let delay = state.rng.millis(lo, hi);
        (InFlight(Arc::clone(s)), delay)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.0).bindings_in_flight -= 1;
    }
}

async fn bind(Shared(s): Shared<Server>, Path((ns, name)): PodPath, body: Bytes) -> Response {
    let key = format!("{ns}/{name}");
    let Ok(binding) = serde_json::from_slice::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "the Binding is not JSON".into());
    };
    let Some(target) = binding.pointer("/target/name").and_then(Value::as_str).map(str::to_string) else {
        return status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", "target.name: Required value".into());
    };
    if binding.pointer("/metadata/name").and_then(Value::as_str) != Some(name.as_str()) {
        let m = "name in URL does not match name in Binding object".to_string();
        return status(StatusCode::BAD_REQUEST, "BadRequest", m);
    }
    let (_in_flight, delay) = InFlight::enter(&s);
    tokio::time::sleep(delay).await;
    let mut state = lock(&s);
    if let Some(code) = state.faults.remove(&key) {
        let reason = if code == StatusCode::CONFLICT { "Conflict" } else { "InternalError" };
        return status(code, reason, format!("injected failure binding pod {key}"));
    }
    let Some(pod) = state.pods.get(&key).cloned() else { return not_found(&name) };
    let uid = pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
    if let Some(asked) = binding.pointer("/metadata/uid").and_then(Value::as_str).filter(|u| !u.is_empty())
        && asked != uid
    {
        return conflict(format!("Precondition failed: UID in precondition: {asked}, UID in object meta: {uid}"));
    }
    if let Some(on) = node_of(&pod) {
        state.audit.rebinds.push(format!("{key} to {target}, bound to {on} already"));
        return conflict(format!(
            "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{on}\""
        ));
    }
    state.audit_binding(&key, &pod, &target);
    let mut bound = pod;
    bound["spec"]["nodeName"] = json!(target);
    bound["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}]);
    let bound = state.emit(Kind::Pod, EventType::Modified, bound);
    state.pods.insert(key.clone(), bound);
    *state.audit.bindings.entry(key).or_default() += 1;
    status(StatusCode::CREATED, "", String::new())
}

// Leases, as kube-lease-manager uses them.

const LEASE_API: &str = "coordination.k8s.io/v1";
const LEASES: &str = "leases.coordination.k8s.io";

/// A field: its path from the object's root (`["spec", "holderIdentity"]`).
type Field = Vec<String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Apply,
    Update,
}

/// The fields one manager owns through one operation. The API server keys owners by
/// manager and operation both: a manager's apply conflicts even with the fields its own
/// patches took.
#[derive(Clone, Debug)]
struct Owner {
    manager: String,
    operation: Operation,
    fields: BTreeSet<Field>,
    time: String,
}

impl Owner {
    fn is(&self, manager: &str, operation: Operation) -> bool {
        self.manager == manager && self.operation == operation
    }

    /// A `metadata.managedFields` entry.
    fn entry(&self) -> Value {
        let mut fields = json!({});
        for field in &self.fields {
            let mut at = &mut fields;
            for key in field {
                let Value::Object(map) = at else { break };
                at = map.entry(format!("f:{key}")).or_insert_with(|| json!({}));
            }
        }
        let operation = if self.operation == Operation::Apply { "Apply" } else { "Update" };
        json!({"manager": self.manager, "operation": operation, "apiVersion": LEASE_API, "time": self.time,
            "fieldsType": "FieldsV1", "fieldsV1": fields})
    }
}

struct StoredLease {
    object: Value,
    owners: Vec<Owner>,
}

impl StoredLease {
    /// The lease as served, with its owners.
    fn object(&self) -> Value {
        let mut object = self.object.clone();
        object["metadata"]["managedFields"] = Value::Array(self.owners.iter().map(Owner::entry).collect());
        object
    }
}

/// Fields that identify an object or that the server keeps: no one owns them.
fn is_identity(field: &[String]) -> bool {
    const META: [&str; 7] =
        ["name", "namespace", "uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"];
    match field {
        [top] => top == "apiVersion" || top == "kind",
        [meta, key] => meta == "metadata" && META.contains(&key.as_str()),
        _ => false,
    }
}

/// The fields an object sets, with their values: its leaves but for its identity
/// (`null` sets nothing).
fn leaves(object: &Value) -> BTreeMap<Field, Value> {
    fn walk(v: &Value, path: &mut Field, out: &mut BTreeMap<Field, Value>) {
        match v {
            Value::Object(map) => {
                for (key, child) in map {
                    path.push(key.clone());
                    if !is_identity(path) {
                        walk(child, path, out);
                    }
                    path.pop();
                }
            }
            Value::Null => {}
            leaf => {
                out.insert(path.clone(), leaf.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(object, &mut Vec::new(), &mut out);
    out
}

fn remove_field(object: &mut Value, field: &[String]) {
    let Some((last, parents)) = field.split_last() else { return };
    let mut at = object;
    for key in parents {
        match at.get_mut(key) {
            Some(child) => at = child,
            None => return,
        }
    }
    if let Value::Object(map) = at {
        map.remove(last);
    }
}

/// Fields another owner holds that a change would give a new value, by owner.
type Conflicts = Vec<(String, Field)>;

/// Ownership after the change of `live` into `new` by `manager` through `operation`,
/// as the API server's structured merge keeps it: the fields that change and are
/// owned by others are conflicts — refused unless `force` (updates always force), else
/// taken from them — and removed fields leave every owner. Returns the changed and the
/// removed fields.
fn change_owners(
    owners: &mut [Owner],
    (live, new): (&Value, &Value),
    (manager, operation): (&str, Operation),
    force: bool,
) -> Result<(BTreeSet<Field>, BTreeSet<Field>), Conflicts> {
    let (before, after) = (leaves(live), leaves(new));
    let changed: BTreeSet<Field> =
        after.iter().filter(|(f, v)| before.get(*f) != Some(v)).map(|(f, _)| f.clone()).collect();
    let removed: BTreeSet<Field> = before.keys().filter(|f| !after.contains_key(*f)).cloned().collect();
    let conflicts: Conflicts = owners
        .iter()
        .filter(|o| !o.is(manager, operation))
        .flat_map(|o| o.fields.intersection(&changed).map(|f| (o.manager.clone(), f.clone())))
        .collect();
    if !force && !conflicts.is_empty() {
        return Err(conflicts);
    }
    for o in owners.iter_mut().filter(|o| !o.is(manager, operation)) {
        o.fields.retain(|f| !changed.contains(f) && !removed.contains(f));
    }
    Ok((changed, removed))
}

/// The 409 an apply gets for fields other managers own.
fn apply_conflict(conflicts: &Conflicts) -> Response {
    let dotted = |f: &Field| format!(".{}", f.join("."));
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, f)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\" using {LEASE_API}"),
                "field": dotted(f)})
        })
        .collect();
    let listed: Vec<String> =
        conflicts.iter().map(|(m, f)| format!("conflict with \"{m}\" using {LEASE_API}: {}", dotted(f))).collect();
    let n = conflicts.len();
    let message = format!("Apply failed with {n} conflict{}: {}", if n == 1 { "" } else { "s" }, listed.join("; "));
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 409,
        "reason": "Conflict", "message": message, "details": {"causes": causes}});
    json_response(StatusCode::CONFLICT, &body)
}

fn lease_not_found(name: &str) -> Response {
    status(StatusCode::NOT_FOUND, "NotFound", format!("{LEASES} \"{name}\" not found"))
}

fn bad_request(message: impl Into<String>) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message.into())
}

/// The holder a lease names.
fn holder_of(lease: &Value) -> Option<String> {
    lease.pointer("/spec/holderIdentity").and_then(Value::as_str).map(str::to_string)
}

/// The manager a request without `fieldManager` is recorded under: its user agent's
/// first word, as the API server names it.
fn default_manager(headers: &HeaderMap) -> String {
    let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    Some(agent.split('/').next().unwrap_or_default()).filter(|a| !a.is_empty()).unwrap_or("unknown").to_string()
}

/// What validation refuses in a Lease: a spec that is not a LeaseSpec (times that are no
/// MicroTime, a duration that is no integer…) or a duration not above zero.
fn invalid_lease(lease: &Value) -> Option<Response> {
    let spec = lease.get("spec").cloned().unwrap_or(Value::Null);
    let invalid = |m: String| Some(status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", m));
    if let Err(e) = serde_json::from_value::<Option<k8s_openapi::api::coordination::v1::LeaseSpec>>(spec.clone()) {
        return invalid(format!("Lease.coordination.k8s.io is invalid: spec: {e}"));
    }
    match spec.get("leaseDurationSeconds").and_then(Value::as_i64) {
        Some(d) if d <= 0 => invalid(format!("spec.leaseDurationSeconds: Invalid value: {d}: must be greater than 0")),
        _ => None,
    }
}

impl State {
    /// Stores a lease changed (or created): a new resourceVersion, and its holder's
    /// change recorded.
    fn store_lease(&mut self, key: String, mut object: Value, mut owners: Vec<Owner>, before: Option<&Value>) -> Value {
        owners.retain(|o| !o.fields.is_empty());
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let holder = holder_of(&object);
        if before.and_then(holder_of) != holder {
            self.audit.holders.push(HolderChange { at: Instant::now(), lease: key.clone(), holder });
        }
        let stored = StoredLease { object, owners };
        let served = stored.object();
        self.leases.insert(key, stored);
        served
    }
}

async fn get_lease(Shared(s): Shared<Server>, Path((ns, name)): PodPath) -> Response {
    match lock(&s).leases.get(&format!("{ns}/{name}")) {
        Some(lease) => json_response(StatusCode::OK, &lease.object()),
        None => lease_not_found(&name),
    }
}

async fn create_lease(
    Shared(s): Shared<Server>,
    Path(ns): Path<String>,
    Query(q): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(&body) else {
        return bad_request("the Lease is not a JSON object");
    };
    let mut lease = Value::Object(fields);
    let Some(name) = lease.pointer("/metadata/name").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
        let m = "metadata.name: Required value: name or generateName is required".to_string();
        return status(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", m);
    };
    let name = name.to_string();
    if lease.pointer("/metadata/namespace").and_then(Value::as_str).is_some_and(|n| n != ns) {
        return bad_request("the namespace of the provided object does not match the namespace sent on the request");
    }
    if let Some(invalid) = invalid_lease(&lease) {
        return invalid;
    }
    let key = format!("{ns}/{name}");
    let manager = q.get("fieldManager").cloned().unwrap_or_else(|| default_manager(&headers));
    let mut state = lock(&s);
    if state.leases.contains_key(&key) {
        return status(StatusCode::CONFLICT, "AlreadyExists", format!("{LEASES} \"{name}\" already exists"));
    }
    state.serial += 1;
    lease["apiVersion"] = json!(LEASE_API);
    lease["kind"] = json!("Lease");
    lease["metadata"]["namespace"] = json!(ns);
    lease["metadata"]["uid"] = json!(format!("lease-uid-{}", state.serial));
    lease["metadata"]["creationTimestamp"] = json!(now());
    if lease.get("spec").is_none_or(Value::is_null) {
        lease["spec"] = json!({});
    }
    let fields = leases_owned(&lease);
    let owners = vec![Owner { manager, operation: Operation::Update, fields, time: now() }];
    let created = state.store_lease(key, lease, owners, None);
    json_response(StatusCode::CREATED, &created)
}

/// The fields an object's creator owns: all it sets.
fn leases_owned(lease: &Value) -> BTreeSet<Field> {
    leaves(lease).into_keys().collect()
}

/// A patch as the API server reads its body (server-side apply's YAML, of which JSON is
/// a part, or JSON for the others), or why it cannot be read.
fn read_patch(operation: Operation, body: &[u8]) -> Result<Value, String> {
    let parsed = match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) if operation == Operation::Apply => {
            let text = String::from_utf8_lossy(body);
            serde_saphyr::from_str::<Value>(&text).map_err(|y| format!("{e}; as YAML: {y}"))
        }
        Err(e) => Err(e.to_string()),
    };
    match parsed {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("the patch is not an object".into()),
        Err(e) => Err(format!("the patch cannot be read: {e}")),
    }
}

async fn patch_lease(
    Shared(s): Shared<Server>,
    Path((ns, name)): PodPath,
    Query(q): Params,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let kind = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let operation = match kind {
        "application/apply-patch+yaml" => Operation::Apply,
        "application/strategic-merge-patch+json" | "application/merge-patch+json" => Operation::Update,
        other => {
            let m = format!("the emulation serves apply, strategic merge and merge patches of leases, not `{other}`");
            return status(StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", m);
        }
    };
    let force = q.get("force").is_some_and(|f| f == "true");
    if force && operation == Operation::Update {
        return bad_request("force: Invalid value: true: may not be specified for non-apply patch");
    }
    let manager = match (q.get("fieldManager").filter(|m| !m.is_empty()), operation) {
        (Some(m), _) => m.clone(),
        (None, Operation::Apply) => {
            return bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            );
        }
        (None, Operation::Update) => default_manager(&headers),
    };
    let patch = match read_patch(operation, &body) {
        Ok(p) => p,
        Err(e) => return bad_request(e),
    };
    let mut state = lock(&s);
    if state.lease_faults.contains(&manager) {
        let m = format!("injected failure writing lease {ns}/{name} for {manager}");
        return status(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", m);
    }
    let key = format!("{ns}/{name}");
    if let Some(refused) = refuse_lease_patch(state.leases.get(&key), &patch, operation, &name) {
        return refused;
    }
    let existing = state.leases.get(&key).map(|l| (l.object.clone(), l.owners.clone()));
    let exists = existing.is_some();
    let (live, mut owners) = match existing {
        Some(lease) => lease,
        // Server-side apply creates what does not exist.
        None => {
            state.serial += 1;
            let created = json!({"apiVersion": LEASE_API, "kind": "Lease",
                "metadata": {"name": name, "namespace": ns, "uid": format!("lease-uid-{}", state.serial),
                    "creationTimestamp": now()}, "spec": {}});
            (created, Vec::new())
        }
    };
    let mut new = live.clone();
    merge(&mut new, &patch);
    for field in ["name", "namespace", "uid", "creationTimestamp", "resourceVersion"] {
        new["metadata"][field] = live["metadata"][field].clone();
    }
    if let Some(invalid) = invalid_lease(&new) {
        return invalid;
    }
    // Updates never conflict: they take what they change.
    let forced = force || operation == Operation::Update;
    let (changed, removed) = match change_owners(&mut owners, (&live, &new), (&manager, operation), forced) {
        Ok(c) => c,
        Err(conflicts) => return apply_conflict(&conflicts),
    };
    let mine = owners.iter().position(|o| o.is(&manager, operation));
    let before: BTreeSet<Field> = mine.map(|i| owners[i].fields.clone()).unwrap_or_default();
    let after: BTreeSet<Field> = match operation {
        // The applier owns exactly what it applies; what it applied before and applies no
        // longer goes, unless someone else owns it too.
        Operation::Apply => {
            let applied: BTreeSet<Field> = leaves(&patch).into_keys().collect();
            for field in before.difference(&applied) {
                if !owners.iter().any(|o| !o.is(&manager, operation) && o.fields.contains(field)) {
                    remove_field(&mut new, field);
                }
            }
            applied
        }
        Operation::Update => before.difference(&removed).chain(&changed).cloned().collect(),
    };
    let owner = Owner { manager: manager.clone(), operation, fields: after, time: now() };
    match mine {
        Some(i) => owners[i] = owner,
        None => owners.push(owner),
    }
    let (code, before) = if exists { (StatusCode::OK, Some(&live)) } else { (StatusCode::CREATED, None) };
    let patched = state.store_lease(key, new, owners, before);
    json_response(code, &patched)
}

/// Why a patch of a lease is refused before it is tried: a patch of none, another name,
/// a stale resourceVersion, an apply that is no Lease.
fn refuse_lease_patch(
    stored: Option<&StoredLease>,
    patch: &Value,
    operation: Operation,
    name: &str,
) -> Option<Response> {
    if stored.is_none() && operation == Operation::Update {
        return Some(lease_not_found(name));
    }
    if let Some(other) = patch.pointer("/metadata/name").and_then(Value::as_str).filter(|n| *n != name) {
        return Some(bad_request(format!(
            "the name of the object ({other}) does not match the name on the URL ({name})"
        )));
    }
    if operation == Operation::Apply
        && (patch.get("apiVersion").and_then(Value::as_str) != Some(LEASE_API)
            || patch.get("kind").and_then(Value::as_str) != Some("Lease"))
    {
        return Some(bad_request(format!("an apply to a lease must give apiVersion {LEASE_API} and kind Lease")));
    }
    let current = stored.and_then(|l| l.object.pointer("/metadata/resourceVersion")).and_then(Value::as_str);
    match patch.pointer("/metadata/resourceVersion").and_then(Value::as_str).filter(|v| !v.is_empty()) {
        Some(asked) if Some(asked) != current => Some(conflict(format!(
            "Operation cannot be fulfilled on {LEASES} \"{name}\": the object has been modified; \
             please apply your changes to the latest version and try again"
        ))),
        _ => None,
    }
}
