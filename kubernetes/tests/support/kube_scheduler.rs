//! An emulation of kube-scheduler's schedule-one loop (pkg/scheduler/schedule_one.go)
//! with the gpol extender configured as docs/kubernetes.md configures it: filter,
//! prioritize and bind verbs, `nodeCacheCapable: true`, managed resource `nvidia.com/gpu`.
//!
//! - An informer (the API server's changes, in process) keeps the scheduler's cache:
//!   the nodes' allocatable GPUs and the pods bound to them. Pending pods enter the
//!   scheduling queue; a pod seen bound leaves it, and its assumption is confirmed.
//! - One scheduling loop takes one pod at a time: NodeResourcesFit on GPU counts
//!   (assumed pods included), then the extender's filter with the names of the nodes
//!   that fit, then — with more than one node left — its prioritize; the highest score ×
//!   weight wins (ties: the first name). The pod is assumed there (the cache counts it
//!   at once) and its binding cycle runs on a task of its own, so the next pods are
//!   scheduled while its bind is in flight: that is how binds overlap.
//! - The binding cycle waits a random short time (the Permit and PreBind plugins' time)
//!   and asks the extender to bind. An error forgets the assumption and puts the pod
//!   back with backoff; the place freed may fit others, so the unschedulable pods move
//!   too (kube-scheduler's `AssignedPodDelete` event).
//! - A pod no node takes waits among the unschedulable until a pod is deleted or a bind
//!   fails, or `unschedulable_timeout` passes (podMaxInUnschedulablePodsDuration).
//!
//! Every extender answer is decoded with the crate's upstream-compatible types
//! ([`gpol_kubernetes::extender`]) and checked as kube-scheduler reads it; an answer
//! that does not decode or check is recorded.

#![allow(dead_code)]

use crate::apiserver::{ApiServer, Change, EventType, Kind, gpus_of, node_of};
use crate::rng::Rng;
use axum::body::Bytes;
use gpol_kubernetes::extender::{
    ExtenderBindingResult, ExtenderFilterResult, HostPriority, MAX_EXTENDER_PRIORITY, MIN_EXTENDER_PRIORITY, decode,
};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

/// kube-scheduler's `MaxNodeScore` over `MaxExtenderPriority`: an extender's score is
/// scaled by it, then by the extender's weight.
const EXTENDER_SCALE: i64 = 100 / MAX_EXTENDER_PRIORITY;
/// How often the queue looks for pods whose backoff is over, when nothing wakes it.
const TICK: Duration = Duration::from_millis(2);

#[derive(Clone, Debug)]
pub struct Config {
    pub extender: SocketAddr,
    /// The extender's `weight`.
    pub weight: i64,
    /// The binding cycle's wait before bind, milliseconds (lowest, highest).
    pub bind_delay: (u64, u64),
    /// podInitialBackoffSeconds and podMaxBackoffSeconds, scaled down with the test.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// podMaxInUnschedulablePodsDuration, scaled down.
    pub unschedulable_timeout: Duration,
    /// The extender's `httpTimeout`.
    pub http_timeout: Duration,
    pub seed: u64,
}

impl Config {
    pub fn new(extender: SocketAddr) -> Config {
        Config {
            extender,
            weight: 5,
            bind_delay: (0, 10),
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(80),
            unschedulable_timeout: Duration::from_millis(500),
            http_timeout: Duration::from_secs(5),
            seed: 1,
        }
    }

    fn backoff(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(16);
        self.initial_backoff.saturating_mul(1 << doublings).min(self.max_backoff)
    }
}

/// What the scheduler did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Scheduling cycles (a pod tried once).
    pub cycles: u64,
    pub filters: u64,
    pub prioritizes: u64,
    /// Cycles that found no node, by NodeResourcesFit or by the extender's filter.
    pub unschedulable: u64,
    /// Cycles that failed on an extender error (HTTP, or `Error` in a filter answer).
    pub errors: Vec<String>,
    /// Binds sent, and those answered without an error.
    pub binds: u64,
    pub bound: u64,
    /// Bind errors: each forgot an assumption and requeued its pod (a retry).
    pub bind_errors: Vec<String>,
    /// The most binds sent and not yet answered at once, in all and to one node.
    pub max_binds_in_flight: usize,
    pub max_binds_in_flight_to_a_node: usize,
    /// Answers that do not decode, or that kube-scheduler would reject.
    pub bad_answers: Vec<String>,
}

/// A pod counted on a node.
struct Placed {
    node: String,
    gpus: u64,
    /// Assumed by this scheduler and not yet seen bound.
    assumed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    Active,
    /// Waiting out its backoff, until then.
    Backoff(Instant),
    /// No node took it, since then.
    Unschedulable(Instant),
    /// Out of the queue: being scheduled, or bound.
    Scheduling,
}

/// A pending pod.
struct Queued {
    pod: Value,
    attempts: u32,
    last_try: Instant,
    at: Where,
}

struct State {
    /// Allocatable GPUs by node.
    nodes: BTreeMap<String, u64>,
    /// Pods counted on nodes, by UID.
    cache: HashMap<String, Placed>,
    /// Pending pods, by UID.
    queue: HashMap<String, Queued>,
    /// The active queue, in order (entries no longer active are skipped).
    active: VecDeque<String>,
    rng: Rng,
}

struct Shared {
    config: Config,
    state: Mutex<State>,
    stats: Mutex<Stats>,
    wake: Notify,
    http: Client<HttpConnector, Full<Bytes>>,
    /// Binds sent and not yet answered, by node.
    binds_in_flight: Mutex<HashMap<String, usize>>,
}

/// The running scheduler; stopped when dropped.
pub struct KubeScheduler {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for KubeScheduler {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl KubeScheduler {
    pub fn start(api: &ApiServer, config: Config) -> KubeScheduler {
        let rng = Rng::new(config.seed);
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(State {
                nodes: BTreeMap::new(),
                cache: HashMap::new(),
                queue: HashMap::new(),
                active: VecDeque::new(),
                rng,
            }),
            stats: Mutex::new(Stats::default()),
            wake: Notify::new(),
            http: Client::builder(TokioExecutor::new()).build_http(),
            binds_in_flight: Mutex::new(HashMap::new()),
        });
        let informer = tokio::spawn(inform(Arc::clone(&shared), api.subscribe()));
        let scheduler = tokio::spawn(run(Arc::clone(&shared)));
        KubeScheduler { shared, tasks: vec![informer, scheduler] }
    }

    pub fn stats(&self) -> Stats {
        self.shared.stats().clone()
    }

    /// Pods pending, in the queue or being scheduled.
    pub fn pending(&self) -> usize {
        self.shared.state().queue.len()
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stats(&self) -> MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an answer kube-scheduler would reject, and gives its words back.
    fn bad(&self, what: String) -> String {
        self.stats().bad_answers.push(what.clone());
        what
    }
}

fn uid_of(pod: &Value) -> String {
    pod.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string()
}

async fn inform(shared: Arc<Shared>, mut changes: mpsc::UnboundedReceiver<Change>) {
    while let Some(change) = changes.recv().await {
        shared.state().apply(&change);
        shared.wake.notify_one();
    }
}

impl State {
    fn apply(&mut self, change: &Change) {
        let object = &change.object;
        match (change.kind, change.event) {
            (Kind::Node, EventType::Deleted) => {
                self.nodes.remove(object["metadata"]["name"].as_str().unwrap_or_default());
            }
            (Kind::Node, _) => {
                let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let gpus = object.pointer("/status/allocatable/nvidia.com~1gpu").and_then(Value::as_str);
                self.nodes.insert(name, gpus.and_then(|g| g.parse().ok()).unwrap_or(0));
                self.move_unschedulable();
            }
            (Kind::Pod, EventType::Deleted) => {
                let uid = uid_of(object);
                self.queue.remove(&uid);
                if self.cache.remove(&uid).is_some() {
                    self.move_unschedulable();
                }
            }
            (Kind::Pod, _) => self.update_pod(object),
        }
    }

    /// A pod added or changed: bound, it is counted (an assumption confirmed) and leaves
    /// the queue; pending, it joins the queue unless this scheduler has assumed it.
    fn update_pod(&mut self, pod: &Value) {
        let uid = uid_of(pod);
        if let Some(node) = node_of(pod) {
            self.queue.remove(&uid);
            self.cache.insert(uid, Placed { node: node.to_string(), gpus: gpus_of(pod), assumed: false });
        } else if let Some(q) = self.queue.get_mut(&uid) {
            q.pod = pod.clone();
        } else if !self.cache.contains_key(&uid) {
            let q = Queued { pod: pod.clone(), attempts: 0, last_try: Instant::now(), at: Where::Active };
            self.queue.insert(uid.clone(), q);
            self.active.push_back(uid);
        }
    }

    /// A place was freed: the unschedulable pods are tried again once their backoff is over.
    fn move_unschedulable(&mut self) {
        for q in self.queue.values_mut() {
            if let Where::Unschedulable(since) = q.at {
                q.at = Where::Backoff(since);
            }
        }
    }

    /// The next pod to schedule, after moving in those whose wait is over.
    fn next(&mut self, config: &Config) -> Option<(String, Value)> {
        let now = Instant::now();
        let mut due: Vec<(Instant, String)> = self
            .queue
            .iter()
            .filter_map(|(uid, q)| match q.at {
                Where::Backoff(since) if since + config.backoff(q.attempts) <= now => Some((since, uid.clone())),
                Where::Unschedulable(since) if now.duration_since(since) >= config.unschedulable_timeout => {
                    Some((since, uid.clone()))
                }
                _ => None,
            })
            .collect();
        due.sort();
        for (_, uid) in due {
            if let Some(q) = self.queue.get_mut(&uid) {
                q.at = Where::Active;
                self.active.push_back(uid);
            }
        }
        while let Some(uid) = self.active.pop_front() {
            if let Some(q) = self.queue.get_mut(&uid)
                && q.at == Where::Active
            {
                q.at = Where::Scheduling;
                q.attempts += 1;
                q.last_try = now;
                return Some((uid, q.pod.clone()));
            }
        }
        None
    }

    /// NodeResourcesFit on GPU counts: the nodes with room for `gpus` besides the pods
    /// bound or assumed there.
    fn fitting(&self, gpus: u64) -> Vec<String> {
        let mut used: HashMap<&str, u64> = HashMap::new();
        for p in self.cache.values() {
            *used.entry(p.node.as_str()).or_default() += p.gpus;
        }
        let free = |node: &str, allocatable: u64| allocatable.saturating_sub(used.get(node).copied().unwrap_or(0));
        self.nodes.iter().filter(|(n, a)| free(n, **a) >= gpus).map(|(n, _)| n.clone()).collect()
    }

    /// Puts the pod back in the queue: to wait out its backoff, or among the unschedulable.
    fn requeue(&mut self, uid: &str, unschedulable: bool) {
        if let Some(q) = self.queue.get_mut(uid)
            && q.at == Where::Scheduling
        {
            q.at = if unschedulable { Where::Unschedulable(q.last_try) } else { Where::Backoff(q.last_try) };
        }
    }

    /// Counts the pod on the node before it is bound; false if it left the queue meanwhile
    /// (seen bound or deleted).
    fn assume(&mut self, uid: &str, node: &str, gpus: u64) -> bool {
        if !self.queue.get(uid).is_some_and(|q| q.at == Where::Scheduling) {
            return false;
        }
        self.cache.insert(uid.to_string(), Placed { node: node.to_string(), gpus, assumed: true });
        true
    }

    /// The bind failed: the assumption is forgotten (unless the pod was seen bound after
    /// all) and the pod goes back with backoff.
    fn forget(&mut self, uid: &str) {
        if self.cache.get(uid).is_some_and(|p| p.assumed) {
            self.cache.remove(uid);
        }
        self.requeue(uid, false);
        self.move_unschedulable();
    }
}

async fn run(shared: Arc<Shared>) {
    loop {
        let next = shared.state().next(&shared.config);
        match next {
            Some((uid, pod)) => schedule_one(&shared, uid, pod).await,
            None => {
                let _ = tokio::time::timeout(TICK, shared.wake.notified()).await;
            }
        }
    }
}

/// One scheduling cycle; the binding cycle is left running on its own task.
async fn schedule_one(shared: &Arc<Shared>, uid: String, pod: Value) {
    shared.stats().cycles += 1;
    let gpus = gpus_of(&pod);
    let fit = shared.state().fitting(gpus);
    // The extender is asked only about pods asking for its managed resource.
    let passed = if fit.is_empty() || gpus == 0 {
        fit
    } else {
        match shared.filter(&pod, &fit).await {
            Ok(passed) => passed,
            Err(e) => {
                shared.stats().errors.push(e);
                shared.state().requeue(&uid, false);
                return;
            }
        }
    };
    let host = match passed.as_slice() {
        [] => {
            shared.stats().unschedulable += 1;
            shared.state().requeue(&uid, true);
            return;
        }
        // One node left: kube-scheduler takes it without scoring.
        [only] => only.clone(),
        _ => shared.select_host(&pod, passed).await,
    };
    if shared.state().assume(&uid, &host, gpus) {
        tokio::spawn(binding_cycle(Arc::clone(shared), uid, pod, host));
    }
}

/// Every pod here asks for GPUs, so the extender binds them all (kube-scheduler's
/// DefaultBinder binds the others; it is not emulated).
async fn binding_cycle(shared: Arc<Shared>, uid: String, pod: Value, host: String) {
    let (lo, hi) = shared.config.bind_delay;
    let delay = shared.state().rng.millis(lo, hi);
    tokio::time::sleep(delay).await;
    match shared.bind(&uid, &pod, &host).await {
        Ok(()) => {
            shared.stats().bound += 1;
            // Out of the queue for good; the informer confirms the assumption.
            shared.state().queue.remove(&uid);
        }
        Err(e) => {
            shared.stats().bind_errors.push(e);
            shared.state().forget(&uid);
        }
    }
    shared.wake.notify_one();
}

impl Shared {
    /// POSTs a verb to the extender; the body of a 200, else what went wrong.
    async fn post(&self, verb: &str, body: &Value) -> Result<Bytes, String> {
        let request = hyper::Request::post(format!("http://{}/gpol/{verb}", self.config.extender))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(body).expect("JSON"))))
            .expect("a request");
        let exchange = async {
            let response = self.http.request(request).await.map_err(|e| format!("{verb}: {e}"))?;
            let code = response.status();
            let bytes = response.into_body().collect().await.map_err(|e| format!("{verb}: {e}"))?.to_bytes();
            if code != hyper::StatusCode::OK {
                return Err(format!("{verb}: HTTP {code}: {}", String::from_utf8_lossy(&bytes)));
            }
            Ok(bytes)
        };
        tokio::time::timeout(self.config.http_timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("{verb}: no answer within the httpTimeout")))
    }

    async fn filter(&self, pod: &Value, nodes: &[String]) -> Result<Vec<String>, String> {
        self.stats().filters += 1;
        let bytes = self.post("filter", &json!({"Pod": pod, "NodeNames": nodes})).await?;
        let result: ExtenderFilterResult = decode(&bytes).map_err(|e| self.bad(format!("filter: {e}")))?;
        if !result.error.is_empty() {
            return Err(format!("filter: {}", result.error));
        }
        check_filter(nodes, &result).map_err(|e| self.bad(format!("filter: {e}")))
    }

    /// The extender's scores by node. kube-scheduler ignores a failed prioritize (the
    /// nodes score 0); it is recorded here all the same.
    async fn prioritize(&self, pod: &Value, nodes: &[String]) -> HashMap<String, i64> {
        self.stats().prioritizes += 1;
        let answer = match self.post("prioritize", &json!({"Pod": pod, "NodeNames": nodes})).await {
            Ok(bytes) => decode::<Vec<HostPriority>>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|scores| check_scores(nodes, &scores)),
            Err(e) => Err(e),
        };
        answer.unwrap_or_else(|e| {
            self.bad(format!("prioritize: {e}"));
            HashMap::new()
        })
    }

    /// The node with the highest score × weight; ties go to the first name.
    async fn select_host(&self, pod: &Value, nodes: Vec<String>) -> String {
        let scores = self.prioritize(pod, &nodes).await;
        let total = |n: &String| scores.get(n).copied().unwrap_or(0) * self.config.weight * EXTENDER_SCALE;
        nodes.into_iter().max_by(|a, b| total(a).cmp(&total(b)).then_with(|| b.cmp(a))).expect("nodes to choose from")
    }

    /// Counts a bind sent to `node` (`by` 1) or answered (`by` -1).
    fn in_flight(&self, node: &str, by: isize) {
        let (all, here) = {
            let mut in_flight = self.binds_in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            let here = in_flight.entry(node.to_string()).or_default();
            *here = here.saturating_add_signed(by);
            let here = *here;
            (in_flight.values().sum::<usize>(), here)
        };
        let mut stats = self.stats();
        stats.max_binds_in_flight = stats.max_binds_in_flight.max(all);
        stats.max_binds_in_flight_to_a_node = stats.max_binds_in_flight_to_a_node.max(here);
    }

    async fn bind(&self, uid: &str, pod: &Value, node: &str) -> Result<(), String> {
        self.stats().binds += 1;
        self.in_flight(node, 1);
        let args = json!({"PodName": pod["metadata"]["name"], "PodNamespace": pod["metadata"]["namespace"],
            "PodUID": uid, "Node": node});
        let answer = self.post("bind", &args).await;
        self.in_flight(node, -1);
        let result: ExtenderBindingResult = decode(&answer?).map_err(|e| self.bad(format!("bind: {e}")))?;
        if result.error.is_empty() { Ok(()) } else { Err(result.error) }
    }
}

/// A filter answer as kube-scheduler reads one to a request by names: the nodes that
/// pass are among those sent, and every node sent is answered once.
pub fn check_filter(sent: &[String], result: &ExtenderFilterResult) -> Result<Vec<String>, String> {
    let Some(passed) = &result.node_names else {
        return Err("no `NodeNames` in the answer to a request by names".into());
    };
    let mut answered: HashMap<&str, u32> = sent.iter().map(|n| (n.as_str(), 0)).collect();
    let failed = result.failed_nodes.iter().flatten().map(|(n, _)| n);
    let unresolvable = result.failed_and_unresolvable_nodes.iter().flatten().map(|(n, _)| n);
    for n in passed.iter().chain(failed).chain(unresolvable) {
        *answered.get_mut(n.as_str()).ok_or_else(|| format!("node `{n}` was not asked about"))? += 1;
    }
    match answered.iter().find(|(_, times)| **times != 1) {
        Some((n, times)) => Err(format!("node `{n}` answered {times} times")),
        None => Ok(passed.clone()),
    }
}

/// A prioritize answer: a score in range for every node sent, once.
pub fn check_scores(sent: &[String], scores: &[HostPriority]) -> Result<HashMap<String, i64>, String> {
    let mut by_host = HashMap::new();
    for h in scores {
        if !sent.contains(&h.host) {
            return Err(format!("node `{}` was not asked about", h.host));
        }
        if !(MIN_EXTENDER_PRIORITY..=MAX_EXTENDER_PRIORITY).contains(&h.score) {
            return Err(format!("node `{}` scored {}", h.host, h.score));
        }
        if by_host.insert(h.host.clone(), h.score).is_some() {
            return Err(format!("node `{}` scored twice", h.host));
        }
    }
    if by_host.len() != sent.len() {
        return Err(format!("{} of {} nodes scored", by_host.len(), sent.len()));
    }
    Ok(by_host)
}
