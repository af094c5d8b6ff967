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
//!
//! Failures are `Status` objects, as the real server writes them (kube-client decodes
//! them into `kube::Error::Api`). Every successful Binding is audited: on its node the
//! cards (annotation `gpol.dev/cards`) of the pods bound there and not deleted must be
//! disjoint and match their requests, and per queue (label `gpol.dev/queue`) the GPUs of
//! the bound pods must stay within the limits the test gives. Anything else the extender
//! asks is answered 404 and recorded.
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
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
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
        .fallback(unexpected)
        .method_not_allowed_fallback(unexpected)
        .with_state(state)
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
